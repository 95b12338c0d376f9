"""How a job (or a session turn) can end: the one list, which the supervisor reports and the host
reads (imported there as ``gym_sysmath.sandbox.ExecutionStatus``). A ``StrEnum``, so a status
crosses the wire as the plain string it always was."""

from __future__ import annotations

from enum import StrEnum


class ExecutionStatus(StrEnum):
    """``OK``: the job exited 0. Every other status is the job's own failure, never the harness's."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"


#: Not how a turn ended but what a session turn gets back when the supervisor has no live session of
#: that name (unknown, or its process was retired): the host raises ``session_lost`` and replays the
#: session. Distinct from a result's ``turn_ended_session`` flag: that turn itself ended its session.
NO_SESSION = "no_session"

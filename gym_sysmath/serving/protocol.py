"""What the server and its clients agree on, importable on both sides without ``openenv``.

The wire is OpenEnv's WebSocket protocol (``/ws``: ``{"type": "reset"|"step"|"close", "data": ...}``
in, ``{"type": "observation", "data": {"observation": {...}, "reward": r, "done": d}}`` or
``{"type": "error", ...}`` out), so any OpenEnv client can drive a served env; the fields of
``observation`` are ours: ``text`` (the env's observation), ``info``, ``terminated``, ``truncated``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from gym_sysmath.sandbox.pool import LEASE_WAIT_S
from gym_sysmath.verdicts import Verdict

__all__ = ["CLIENT_MESSAGE_TIMEOUT_S", "DEFAULT_PORT", "DRAINING_PREFIX", "EXPIRED_PREFIX", "MAX_MESSAGE_BYTES",
           "SERVER_CHOSEN_KWARGS", "TOKEN_ENV", "jsonable", "remote_scoring_error"]

DEFAULT_PORT = 8040
#: where ``gym-sysmath serve`` and the clients read the shared secret when none is passed
TOKEN_ENV = "GYM_SYSMATH_SERVE_TOKEN"
#: How long a client waits for one reply. A step may wait ``LEASE_WAIT_S`` for a container when
#: the server's pool is capped and full, then run its turn and the hidden tests: a client that
#: gave up sooner would call a slow step a dead server.
CLIENT_MESSAGE_TIMEOUT_S = LEASE_WAIT_S + 300.0
#: How the server's error for a call on a session it closed begins: the client turns such a step
#: into a scoring error (the harness let go of the episode) and opens a new session at the next reset.
EXPIRED_PREFIX = "session closed by the server: "
#: How the server's error for a reset on a draining server begins: the client raises
#: ``RemoteUnavailable`` (no new episode starts there; the live one has finished).
DRAINING_PREFIX = "the server is draining: "
#: The largest WebSocket message the server reads (an action is at most ``MAX_ACTION_CHARS``
#: characters; a client sends a longer one cut to ``MAX_ACTION_CHARS + 1``, refused the same way).
MAX_MESSAGE_BYTES = 1024 * 1024
#: ``gym.make`` arguments a client may not send: the server decides how its envs run.
SERVER_CHOSEN_KWARGS = frozenset({"sandbox", "pool_size", "render_mode"})


def jsonable(value: Any) -> Any:
    """``value`` as JSON can carry it: numbers stay numbers (a non-finite float becomes its
    ``repr`` string), tuples become lists, anything else its ``str``."""
    def default(item: Any) -> Any:
        if hasattr(item, "tolist"):  # a numpy scalar or array
            return item.tolist()
        return str(item)

    def finite(item: Any) -> Any:
        if isinstance(item, float) and not math.isfinite(item):
            return repr(item)
        if isinstance(item, dict):
            return {str(key): finite(inner) for key, inner in item.items()}
        if isinstance(item, (list, tuple)):
            return [finite(inner) for inner in item]
        return item

    return json.loads(json.dumps(finite(value), default=default))


def remote_scoring_error(message: str, *, task_id: str | None = None, family: str | None = None,
                         turn: int | None = None) -> tuple[str, float, bool, bool, dict[str, Any]]:
    """The step result for a step the serving path lost (a dropped connection, a dead server, a
    session the server closed): the env's own harness-failure shape (reward 0, truncated, a
    ``scoring_error``), so trainers drop the sample instead of counting it wrong."""
    info: dict[str, Any] = {"task_id": task_id, "family": family, "turn": turn, "verdict": Verdict.SCORING_ERROR.value,
                            "correct": False, "scoring_error": message[:500],
                            "detail": "the serving path failed; the sample should be dropped, not counted as wrong"}
    observation = "Episode stopped: the env server failed (not your fault); this step is not scored."
    return observation, 0.0, False, True, info

"""Typed verdicts: how a graded step ended, keeping the harness's failures apart."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gym_sysmath.sandbox.image.supervisor.statuses import ExecutionStatus


class Verdict(StrEnum):
    """The outcome of a graded action. Only ``CORRECT`` earns reward 1.0.

    ``SCORING_ERROR`` is reserved for the harness's own failures; everything the agent's
    code does (loops, crashes, floods, allocations) has its own verdict.
    """

    CORRECT = "correct"
    WRONG_ANSWER = "wrong_answer"
    FORMAT_ERROR = "format_error"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    SCORING_ERROR = "scoring_error"


#: The verdict of each way the agent's program can fail (every execution status but ``OK``).
FAILED_EXECUTION: Mapping[ExecutionStatus, Verdict] = {
    ExecutionStatus.COMPILE_ERROR: Verdict.COMPILE_ERROR,
    ExecutionStatus.RUNTIME_ERROR: Verdict.RUNTIME_ERROR,
    ExecutionStatus.TIMEOUT: Verdict.TIMEOUT,
    ExecutionStatus.MEMORY_LIMIT: Verdict.MEMORY_LIMIT,
    ExecutionStatus.OUTPUT_LIMIT: Verdict.OUTPUT_LIMIT,
}


@dataclass(frozen=True)
class Grade:
    """A family's judgement of a final action; ``info`` adds family-specific fields.

    ``bonus`` is added to the reward of a correct action only (CompGeom's optional
    performance term); it is 0 everywhere else, which keeps rewards exactly 0.0 or 1.0.
    """

    verdict: Verdict
    detail: str = ""
    info: Mapping[str, Any] = field(default_factory=dict)
    bonus: float = 0.0

    @property
    def correct(self) -> bool:
        return self.verdict is Verdict.CORRECT

"""LinearAlgebra-v0 problems: seeded generators and the math-aware grader.

Public surface for the env, the CLI and tests:

- ``TOPICS``, ``DIFFICULTIES`` (the standard levels), ``LEVELS`` (with ``starter`` first),
  ``STARTER_TOPICS``, ``LinalgProblem``, ``LinalgGrade``
- ``load_problems(path=None, *, difficulty=None, topics=None)``: the fixed 138 (split ``eval``:
  78 at the standard levels, 60 starter)
- ``generate_problem(rng, topic=None, difficulty=None, topics=None)``: split ``train``
- ``grade(problem, response_text)``, ``reference_response(problem)``
- ``verify(path=None)``: re-derives every shipped key with numpy and sympy (``138/138``)

Generation and verification import sympy, so they load on first use: grading needs neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .grader import LinalgGrade, grade, reference_response
from .problem import DIFFICULTIES, KIND_OF_TOPIC, LEVELS, STARTER_TOPICS, TOPICS, AnswerKind, LinalgProblem, levels_of
from .problemfile import PROBLEMS_PATH as PROBLEMS_PATH  # importable here, as before it had its own module
from .problemfile import load_problems

if TYPE_CHECKING:
    import numpy as np

    from .audit import AuditReport

__all__ = [
    "DIFFICULTIES",
    "KIND_OF_TOPIC",
    "LEVELS",
    "STARTER_TOPICS",
    "TOPICS",
    "AnswerKind",
    "LinalgGrade",
    "LinalgProblem",
    "generate_problem",
    "grade",
    "levels_of",
    "load_problems",
    "reference_response",
    "verify",
]

def generate_problem(
    rng: np.random.Generator,
    topic: str | None = None,
    difficulty: str | None = None,
    topics: Sequence[str] | None = None,
) -> LinalgProblem:
    """A fresh train-split problem; every random choice comes from ``rng``."""
    from .generators import generate_problem as _generate

    return _generate(rng, topic=topic, difficulty=difficulty, topics=topics)


def verify(path: str | Path | None = None) -> AuditReport:
    """Re-derive every key of the shipped set (or ``path``) with numpy and with sympy."""
    from .audit import verify as _verify

    return _verify(path)

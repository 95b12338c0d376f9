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

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from .grader import LinalgGrade, grade, reference_response
from .problem import DIFFICULTIES, KIND_OF_TOPIC, LEVELS, STARTER_TOPICS, TOPICS, AnswerKind, LinalgProblem, levels_of

if TYPE_CHECKING:
    import numpy as np

    from .audit import VerifyReport

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

PROBLEMS_PATH = Path(__file__).with_name("problems.json")


def load_problems(
    path: str | Path | None = None,
    *,
    difficulty: str | None = None,
    topics: Sequence[str] | None = None,
) -> tuple[LinalgProblem, ...]:
    """The fixed eval problems in stable order (every level), optionally filtered by difficulty and topics."""
    if difficulty is not None and difficulty not in LEVELS:
        raise ValueError(f"unknown difficulty {difficulty!r}; choose from {', '.join(LEVELS)}")
    unknown = sorted(set(topics or ()) - set(TOPICS))
    if unknown:
        raise ValueError(f"unknown topics {unknown}; choose from {', '.join(TOPICS)}")
    file = Path(path or PROBLEMS_PATH).resolve()
    stat = file.stat()
    return tuple(
        p
        for p in _read_problems(str(file), stat.st_mtime_ns, stat.st_size)
        if (difficulty is None or p.difficulty == difficulty) and (not topics or p.topic in topics)
    )


@lru_cache(maxsize=8)
def _read_problems(path: str, mtime_ns: int, size: int) -> tuple[LinalgProblem, ...]:
    """Parsed once per file version: envs call ``load_problems`` on every reset."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return tuple(LinalgProblem.from_dict(item) for item in data["problems"])


def generate_problem(
    rng: np.random.Generator,
    topic: str | None = None,
    difficulty: str | None = None,
    topics: Sequence[str] | None = None,
) -> LinalgProblem:
    """A fresh train-split problem; every random choice comes from ``rng``."""
    from .generators import generate_problem as _generate

    return _generate(rng, topic=topic, difficulty=difficulty, topics=topics)


def verify(path: str | Path | None = None) -> VerifyReport:
    """Re-derive every key of the shipped set (or ``path``) with numpy and with sympy."""
    from .audit import verify as _verify

    return _verify(path)

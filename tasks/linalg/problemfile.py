"""The shipped eval set, ``problems.json``: its shape (variants per slot) and how it is read.

Every module that needs the eval set (the generators, which keep train draws off its inputs; the
audit; the package facade) reads it here, and the build writes what this shape says."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from gym_sysmath.filters import known_name, known_names

from .problem import LEVELS, TOPICS, LinalgProblem

PROBLEMS_PATH = Path(__file__).with_name("problems.json")
#: Problems per topic at each standard difficulty.
VARIANTS = 2
#: More starter variants than standard ones: the starter level is where a small model's score is
#: measured before and after training, and its confidence interval narrows with the task count.
STARTER_VARIANTS = 6


def load_problems(
    path: str | Path | None = None,
    *,
    difficulty: str | None = None,
    topics: Sequence[str] | None = None,
) -> tuple[LinalgProblem, ...]:
    """The fixed eval problems in stable order (every level), optionally filtered by difficulty and topics."""
    if difficulty is not None:
        known_name("difficulty", difficulty, LEVELS)
    known_names("topics", topics or None, TOPICS, noun="topic")
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

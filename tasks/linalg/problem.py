"""The linear-algebra problem record and the vocabulary (topics, difficulties, answer kinds)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

TOPICS: tuple[str, ...] = (
    "determinant",
    "rank",
    "trace",
    "transpose",
    "dot_product",
    "matvec",
    "matmul",
    "inverse",
    "solve_system",
    "eigenvalue",
    "eigenvector",
    "norm_squared",
    "is_symmetric",
)
#: The standard levels: what an env made without ``difficulty`` serves and draws.
DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard")
#: The whole ladder, easiest first. ``starter`` (1x1 and 2x2 cases, one or two operations) is
#: where a small model first scores; it is served only when asked for (``difficulty="starter"``,
#: or the reset option), so an unfiltered env's eval set and train draws are the standard ones.
LEVELS: tuple[str, ...] = ("starter", *DIFFICULTIES)
#: The topics that have a starter level: the others would be answered by a constant at that size
#: (a 1x1 rank is 0 or 1, any nonzero 1-vector is an eigenvector, a 1x1 matrix is symmetric).
STARTER_TOPICS: tuple[str, ...] = tuple(t for t in TOPICS if t not in ("rank", "eigenvector", "is_symmetric"))


def levels_of(topic: str) -> tuple[str, ...]:
    """The levels ``topic`` has, easiest first."""
    return LEVELS if topic in STARTER_TOPICS else DIFFICULTIES

AnswerKind = Literal["scalar", "vector", "matrix", "boolean", "eigenvalues", "direction"]

#: How each topic's answer is compared: the grader dispatches on this, never on the topic name.
KIND_OF_TOPIC: Mapping[str, AnswerKind] = {
    "determinant": "scalar",
    "rank": "scalar",
    "trace": "scalar",
    "transpose": "matrix",
    "dot_product": "scalar",
    "matvec": "vector",
    "matmul": "matrix",
    "inverse": "matrix",
    "solve_system": "vector",
    "eigenvalue": "eigenvalues",
    "eigenvector": "direction",
    "norm_squared": "scalar",
    "is_symmetric": "boolean",
}


@dataclass(frozen=True)
class LinalgProblem:
    """One question with its key.

    ``answer`` is JSON-native so the record round-trips through ``problems.json`` unchanged:
    numbers are strings holding exact integers or fractions (``"-1/3"``), vectors are lists and
    matrices lists of rows, booleans are ``true``/``false``. ``inputs`` holds the integer matrices
    and vectors the key was computed from, so anyone can re-derive it. Treat both as read-only.
    """

    problem_id: str
    topic: str
    difficulty: str
    prompt: str
    answer: Any
    kind: AnswerKind
    rel_tol: float
    inputs: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LinalgProblem:
        return cls(
            problem_id=str(data["problem_id"]),
            topic=str(data["topic"]),
            difficulty=str(data["difficulty"]),
            prompt=str(data["prompt"]),
            answer=data["answer"],
            kind=data["kind"],
            rel_tol=float(data["rel_tol"]),
            inputs=dict(data["inputs"]),
        )

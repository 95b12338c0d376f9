"""One query of the corpus, in a module of its own: grading, the in-process runner and the
candidate generators all take cases, and the corpus builder (``cases.py``) uses all of them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Case:
    """One query: its input as decoded JSON, the exact reference's output as floats, the branch."""

    id: str
    primitive: str
    input: Mapping[str, Any]
    expected: Mapping[str, Any]
    branch: str

    def to_record(self) -> dict[str, Any]:
        return {"id": self.id, "branch": self.branch, "input": self.input, "expected": self.expected}

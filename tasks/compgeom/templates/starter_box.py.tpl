${header}
"""${summary}

Implement ``${function}`` below. Keep the types and the signature as they are: the test harness
does ``import candidate`` and calls ``candidate.${function}`` directly. Standard library only,
and do not write to stdout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


@dataclass(frozen=True)
class AlignedBox:
    """The closed box min[i] <= x[i] <= max[i]; min and max have the same length N >= 1."""

    min: list[float]
    max: list[float]


class Kind(Enum):
    INVALID = "invalid"
    NONE = "none"
    BOX = "box"


@dataclass
class Intersection:
    """overlap is the intersection box for Kind.BOX, and has empty min and max otherwise."""

    kind: Kind
    overlap: AlignedBox = field(default_factory=lambda: AlignedBox([], []))


def ${function}(box0: AlignedBox, box1: AlignedBox) -> Intersection:
    raise NotImplementedError("${function} is not implemented yet")

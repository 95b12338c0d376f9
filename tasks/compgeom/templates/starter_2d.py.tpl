${header}
"""${summary}

Implement ``${function}`` below. Keep the types and the signature as they are: the test harness
does ``import candidate`` and calls ``candidate.${function}`` directly. Standard library only,
and do not write to stdout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple


class Vec2(NamedTuple):
    x: float
    y: float

${types}

class Kind(Enum):
    INVALID = "invalid"
    NONE = "none"
    POINT = "point"
    SEGMENT = "segment"
    RAY = "ray"
    LINE = "line"


@dataclass
class Intersection:
    """points[i] is the i-th reported point; t0[i] and t1[i] are its parameters on the first and
    on the second input. The kind fixes how many entries the three lists hold."""

    kind: Kind
    t0: list[float] = field(default_factory=list)
    t1: list[float] = field(default_factory=list)
    points: list[Vec2] = field(default_factory=list)


def ${function}(${arg0}: ${type0}, ${arg1}: ${type1}) -> Intersection:
    raise NotImplementedError("${function} is not implemented yet")

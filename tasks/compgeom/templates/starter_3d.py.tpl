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


class Vec3(NamedTuple):
    x: float
    y: float
    z: float

${types}

class Kind(Enum):
    INVALID = "invalid"
    NONE = "none"
    POINT = "point"
    SEGMENT = "segment"


@dataclass
class Intersection:
    """points[i] is the i-th reported point and t[i] its parameter on the first input. The kind
    fixes how many entries the two lists hold."""

    kind: Kind
    t: list[float] = field(default_factory=list)
    points: list[Vec3] = field(default_factory=list)


def ${function}(${arg0}: ${type0}, ${arg1}: ${type1}) -> Intersection:
    raise NotImplementedError("${function} is not implemented yet")

${header}
"""${summary}

Implement ``${function}`` below. Keep the types and the signature as they are: the test harness
does ``import candidate`` and calls ``candidate.${function}`` directly. Standard library only,
and do not write to stdout.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple


class Vec2(NamedTuple):
    x: float
    y: float

${types}

class Kind(Enum):
    INVALID = "invalid"
    NONE = "none"
    INTERSECT = "intersect"


@dataclass
class Intersection:
    """A test query: only whether the inputs intersect."""

    kind: Kind


def ${function}(${arg0}: ${type0}, ${arg1}: ${type1}) -> Intersection:
    raise NotImplementedError("${function} is not implemented yet")

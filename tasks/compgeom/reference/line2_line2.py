"""Line / line intersection in 2D.

`line2_line2(line0, line1)`: both inputs are lines, `origin + t*direction` for every real `t`.
Let `d0`, `d1` be the directions, `q = line1.origin - line0.origin` and
`den = perp(d0, d1)`.

- `invalid`: `d0 == (0, 0)` or `d1 == (0, 0)`.
- `den != 0`: the lines cross in one `point`, at `t0 = perp(q, d1) / den` on `line0` and
  `t1 = perp(q, d0) / den` on `line1`; the point is `line0.origin + t0*d0`.
- `den == 0` and `perp(q, d0) != 0`: parallel and distinct, `none`.
- `den == 0` and `perp(q, d0) == 0`: the same line, `line`, with nothing else reported (the
  directions may point the same way or opposite ways).

Differences from Geometric Tools, on purpose: no output slot is left at a default or sentinel
value (the lists hold exactly the entries the kind promises), and a zero direction is
`invalid`. Geometric Tools decides "the same line" with `perp(q, d1) == 0`, against the second
direction, so a zero second input is always the same line, wherever it is: origin (0, 0),
direction (1, 0) and origin (5, 5), direction (0, 0) intersect infinitely often there. A zero
first input meets nothing unless its origin lies on the other line: origin (1, 1), direction
(0, 0) and origin (0, 0), direction (1, 0) give no intersection, origin (3, 0), direction
(0, 0) and origin (0, 0), direction (1, 0) the same line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..rational import Exact2D, intersect, line, vec


def reference(case_input: Mapping[str, Any]) -> Exact2D:
    a, b = case_input["line0"], case_input["line1"]
    return intersect(line(vec(a["origin"]), vec(a["direction"])), line(vec(b["origin"]), vec(b["direction"])))

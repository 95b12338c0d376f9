"""Line / segment intersection in 2D.

`line2_segment2(line, segment)`: the line is `origin + t*direction` for every real `t`; the
segment is `p0 + t*(p1 - p0)` for `0 <= t <= 1`. Let `d0 = line.direction`,
`d1 = segment.p1 - segment.p0`, `q = segment.p0 - line.origin` and `den = perp(d0, d1)`.

- `invalid`: `d0 == (0, 0)` or `segment.p0 == segment.p1`.
- `den != 0`: the supporting lines cross at `t0 = perp(q, d1) / den` on the line and
  `t1 = perp(q, d0) / den` on the segment. If `0 <= t1 <= 1` (both end points count) the
  result is a `point`, `line.origin + t0*d0`; otherwise `none`.
- `den == 0` and `perp(q, d0) != 0`: parallel and distinct, `none`.
- `den == 0` and `perp(q, d0) == 0`: the whole segment lies on the line: `segment`, whose two
  end points are `p0` (`t1 = 0`) and `p1` (`t1 = 1`), listed in increasing order of their line
  parameter `t0 = dot(p - line.origin, d0) / dot(d0, d0)`; so `t1` is `[0, 1]` when the
  segment points along `d0` and `[1, 0]` when it points against it.

Differences from Geometric Tools, on purpose:
- Collinear: Geometric Tools reports no end points at all, only "infinitely many" with line
  parameters `-max()` and `max()` and segment parameters 0 and 1: for the line through (0, 0)
  along (1, 0) and the segment from (1, 0) to (3, 0) it gives no points where this contract
  gives a `segment` from (1, 0) (`t0 = 1`) to (3, 0) (`t0 = 3`). Here the end points are
  reported, ordered along the line, so the segment's parameters are right for either
  orientation.
- A zero direction or a zero-length segment is `invalid`. Geometric Tools calls parallel
  inputs the same line when `perp(q, d1) == 0`, so a zero second input (the segment) always
  lies on the line, wherever it is: origin (0, 0), direction (1, 0) and p0 (5, 5), p1 (5, 5)
  intersect infinitely often there. A zero first input meets nothing unless its origin lies on
  the segment's line: origin (1, 1), direction (0, 0) and p0 (0, 0), p1 (1, 0) give no
  intersection, origin (3, 0), direction (0, 0) and p0 (0, 0), p1 (1, 0) infinitely many.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..rational import Exact2D, intersect, line, segment, vec


def reference(case_input: Mapping[str, Any]) -> Exact2D:
    a, b = case_input["line"], case_input["segment"]
    return intersect(line(vec(a["origin"]), vec(a["direction"])), segment(vec(b["p0"]), vec(b["p1"])))

"""Segment / segment intersection in 2D.

`segment2_segment2(segment0, segment1)`: each segment is `p0 + t*(p1 - p0)` for
`0 <= t <= 1`. Let `d0 = segment0.p1 - segment0.p0`, `d1 = segment1.p1 - segment1.p0`,
`q = segment1.p0 - segment0.p0` and `den = perp(d0, d1)`.

- `invalid`: `segment0.p0 == segment0.p1` or `segment1.p0 == segment1.p1`.
- `den != 0`: the supporting lines cross at `t0 = perp(q, d1) / den` and
  `t1 = perp(q, d0) / den`. If `0 <= t0 <= 1` and `0 <= t1 <= 1` (end points count) the result
  is a `point`, `segment0.p0 + t0*d0`; otherwise `none`.
- `den == 0` and `perp(q, d0) != 0`: parallel and distinct, `none`.
- `den == 0` and `perp(q, d0) == 0`: collinear. Map `segment1` onto `segment0`'s parameter:
  `u0 = dot(segment1.p0 - segment0.p0, d0) / dot(d0, d0)` and `u1` likewise for `segment1.p1`,
  and intersect `[min(u0, u1), max(u0, u1)]` with `[0, 1]`:
  - empty: `none`;
  - a single value (the segments touch end to end): a `point`;
  - otherwise a `segment` between the two ends of that interval, in increasing `t0`.
  The `segment1` parameter of an overlap end at `t0` is `(t0 - u0) / (u1 - u0)`, so it
  decreases along `segment0` when the segments point opposite ways.

Differences from Geometric Tools, on purpose:
- Geometric Tools' default query uses the centred form of both segments: the center
  `(p0 + p1)/2`, the unit vector from `p0` to `p1` and the half length, with parameters from
  minus to plus the half length. For the segments from (0, 0) to (4, 0) and from (2, -1) to
  (2, 3) it reports the parameters 0 and -1 where this contract has `t0 = 1/2`, `t1 = 1/4`. Its
  collinear second parameters are measured along the first segment, so their sign is wrong when
  the directions are opposite.
- Its `Exact()` query uses this contract's end-point form, but in the collinear case with
  opposite directions it sorts the second segment's parameters, so they are no longer paired
  with the points: for the segments from (0, 0) to (4, 0) and from (6, 0) to (2, 0) it reports
  the points (2, 0), (4, 0) with `t1 = [1/2, 1]` where this contract has `t1 = [1, 1/2]`.
- A zero-length segment is `invalid`. Geometric Tools calls parallel inputs the same line when
  `perp(q, d1) == 0`, so a zero second input is always on the first segment's line and meets
  it where it projects inside it, wherever it is: p0 (0, 0), p1 (4, 0) and p0 (1, 3), p1 (1, 3)
  give one point. A zero first input meets nothing unless it lies on the other segment's line:
  p0 (1, 1), p1 (1, 1) and p0 (0, 0), p1 (1, 0) give no intersection, p0 (3, 0), p1 (3, 0) and
  p0 (-1, 0), p1 (5, 0) one point.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..rational import Exact2D, intersect, segment, vec


def reference(case_input: Mapping[str, Any]) -> Exact2D:
    a, b = case_input["segment0"], case_input["segment1"]
    return intersect(segment(vec(a["p0"]), vec(a["p1"])), segment(vec(b["p0"]), vec(b["p1"])))

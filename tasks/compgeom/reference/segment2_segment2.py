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

Differences from Geometric Tools, on purpose: Geometric Tools gets the sign of the second
segment's parameters wrong in the collinear case when the directions are opposite; here they
are the true parameters. A zero-length segment is `invalid` (Geometric Tools treats it as
collinear even when the point is off the line).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..rational import Exact2D, intersect, segment, vec


def reference(case_input: Mapping[str, Any]) -> Exact2D:
    a, b = case_input["segment0"], case_input["segment1"]
    return intersect(segment(vec(a["p0"]), vec(a["p1"])), segment(vec(b["p0"]), vec(b["p1"])))

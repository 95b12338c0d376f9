"""Ray / segment intersection in 2D.

`ray2_segment2(ray, segment)`: the ray is `origin + t*direction` for `t >= 0`; the segment is
`p0 + t*(p1 - p0)` for `0 <= t <= 1`. Let `d0 = ray.direction`, `d1 = segment.p1 - segment.p0`,
`q = segment.p0 - ray.origin` and `den = perp(d0, d1)`.

- `invalid`: `d0 == (0, 0)` or `segment.p0 == segment.p1`.
- `den != 0`: the supporting lines cross at `t0 = perp(q, d1) / den` on the ray and
  `t1 = perp(q, d0) / den` on the segment. If `t0 >= 0` and `0 <= t1 <= 1` (origin and end
  points count) the result is a `point`, `ray.origin + t0*d0`; otherwise `none`.
- `den == 0` and `perp(q, d0) != 0`: parallel and distinct, `none`.
- `den == 0` and `perp(q, d0) == 0`: collinear. Map the segment onto the ray's parameter:
  `u0 = dot(p0 - ray.origin, d0) / dot(d0, d0)` and `u1` likewise for `p1`, and intersect
  `[min(u0, u1), max(u0, u1)]` with the ray's `[0, infinity)`:
  - empty: `none`;
  - the single value 0 (the segment ends exactly at the ray's origin): a `point`, the ray's
    origin, `t0 = 0`;
  - otherwise a `segment` from `t0 = max(min(u0, u1), 0)` to `t0 = max(u0, u1)`.
  The segment parameter of an overlap end at ray parameter `t0` is `(t0 - u0) / (u1 - u0)`, so
  it decreases along the ray when the segment points against the ray.

Differences from Geometric Tools, on purpose:
- Geometric Tools uses the segment's centred form: the center `(p0 + p1)/2`, the unit vector
  from `p0` to `p1` and the half length, with a segment parameter from minus to plus the half
  length. For the ray from (0, 0) along (1, 0) and the segment from (2, -1) to (2, 3) it reports
  the segment parameter -1 where this contract has `t1 = 1/4`.
- Its collinear branch takes `dot(d0, center - origin)` as the ray parameter of the segment's
  center, which is right only for a unit ray direction, and compares it with the half length:
  for the ray from (0, 0) along (1/4, 0) and the segment from (-3, 0) to (-1, 0), which lies
  behind the ray (`none` here), it reports an overlap from ray parameter 0 to 1/2.
- Its collinear segment parameters are the ray parameter minus that projection, measured along
  the ray: their sign is wrong when the segment points against the ray (for the ray from (0, 0)
  along (1, 0) and the segment from (3, 0) to (1, 0) it gives -1 and 1 where this contract has
  `t1 = [1, 0]`).
- With its exact rational type `BSRational`, `std::numeric_limits<T>::max()` is 0, so the
  ray's parameter interval `[0, max()]` is `[0, 0]` and a collinear ray collapses to its origin:
  the ray from (0, 0) along (1, 0) and the segment from (1, 0) to (3, 0) give no intersection,
  and the segment from (-1, 0) to (1, 0) only the origin, where this contract has a `segment`.
- A zero direction or a zero-length segment is `invalid`. Geometric Tools calls parallel
  inputs the same line when `perp(q, d1) == 0`, so a zero second input (the segment) is always
  on the ray's line and meets the ray where it projects onto it, wherever it is: origin (0, 0),
  direction (1, 0) and p0 (5, 5), p1 (5, 5) give one point. A zero first input meets nothing
  unless its origin lies on the segment's line: origin (1, 1), direction (0, 0) and p0 (0, 0),
  p1 (1, 0) give no intersection, origin (3, 0), direction (0, 0) and p0 (-1, 0), p1 (5, 0) do
  intersect.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..rational import Exact2D, intersect, ray, segment, vec


def reference(case_input: Mapping[str, Any]) -> Exact2D:
    a, b = case_input["ray"], case_input["segment"]
    return intersect(ray(vec(a["origin"]), vec(a["direction"])), segment(vec(b["p0"]), vec(b["p1"])))

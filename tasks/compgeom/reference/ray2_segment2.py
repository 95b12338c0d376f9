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

Differences from Geometric Tools, on purpose: Geometric Tools gets the sign of the segment's
parameters wrong in the collinear case when the two directions are opposite; here they are the
true parameters. A zero direction or a zero-length segment is `invalid`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..rational import Exact2D, intersect, ray, segment, vec


def reference(case_input: Mapping[str, Any]) -> Exact2D:
    a, b = case_input["ray"], case_input["segment"]
    return intersect(ray(vec(a["origin"]), vec(a["direction"])), segment(vec(b["p0"]), vec(b["p1"])))

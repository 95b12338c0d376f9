"""Line / ray intersection in 2D.

`line2_ray2(line, ray)`: the line is `origin + t*direction` for every real `t`; the ray is
`origin + t*direction` for `t >= 0`. Let `d0 = line.direction`, `d1 = ray.direction`,
`q = ray.origin - line.origin` and `den = perp(d0, d1)`.

- `invalid`: `d0 == (0, 0)` or `d1 == (0, 0)`.
- `den != 0`: the supporting lines cross at `t0 = perp(q, d1) / den` on the line and
  `t1 = perp(q, d0) / den` on the ray. If `t1 >= 0` (the ray's origin counts) the result is a
  `point`, `line.origin + t0*d0`; otherwise `none`.
- `den == 0` and `perp(q, d0) != 0`: parallel and distinct, `none`.
- `den == 0` and `perp(q, d0) == 0`: the whole ray lies on the line: `ray`, reported by its
  start, the ray's origin, with `t1 = 0` and `t0 = dot(q, d0) / dot(d0, d0)`, whichever way
  the ray points.

Differences from Geometric Tools, on purpose: the collinear case reports the ray's start with
its true parameters instead of leaving output slots at defaults or at `max()`, and a zero
direction is `invalid`. Geometric Tools calls parallel inputs the same line when
`perp(q, d1) == 0`, so a zero second input (the ray) always lies on the line, wherever it is:
origin (0, 0), direction (1, 0) and origin (5, 5), direction (0, 0) intersect infinitely often
there. A zero first input meets nothing unless its origin lies on the ray's line: origin
(1, 1), direction (0, 0) and origin (0, 0), direction (1, 0) give no intersection, origin
(3, 0), direction (0, 0) and origin (0, 0), direction (1, 0) the whole ray.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..rational import Exact2D, intersect, line, ray, vec


def reference(case_input: Mapping[str, Any]) -> Exact2D:
    a, b = case_input["line"], case_input["ray"]
    return intersect(line(vec(a["origin"]), vec(a["direction"])), ray(vec(b["origin"]), vec(b["direction"])))

"""Ray / ray intersection in 2D.

`ray2_ray2(ray0, ray1)`: each ray is `origin + t*direction` for `t >= 0`. Let `d0`, `d1` be the
directions, `q = ray1.origin - ray0.origin` and `den = perp(d0, d1)`.

- `invalid`: `d0 == (0, 0)` or `d1 == (0, 0)`.
- `den != 0`: the supporting lines cross at `t0 = perp(q, d1) / den` and
  `t1 = perp(q, d0) / den`. If `t0 >= 0` and `t1 >= 0` (origins count) the result is a `point`,
  `ray0.origin + t0*d0`; otherwise `none`.
- `den == 0` and `perp(q, d0) != 0`: parallel and distinct, `none`.
- `den == 0` and `perp(q, d0) == 0`: collinear. Write `s = dot(q, d0) / dot(d0, d0)` for the
  parameter of `ray1.origin` on `ray0` (divided by the squared length: `d0` need not be a
  unit vector).
  - Same direction (`dot(d0, d1) > 0`): a `ray`, reported by its start, the origin lying
    further along: `ray1.origin` (`t0 = s`, `t1 = 0`) when `s >= 0`, else `ray0.origin`
    (`t0 = 0`, `t1 = dot(-q, d1) / dot(d1, d1)`).
  - Opposite directions, `s > 0` (the rays face each other): a `segment` from `ray0.origin`
    (`t0 = 0`, `t1 = dot(-q, d1) / dot(d1, d1)`) to `ray1.origin` (`t0 = s`, `t1 = 0`).
  - Opposite directions, `s == 0` (same origin): a `point`, the common origin, `t0 = t1 = 0`.
  - Opposite directions, `s < 0` (they point away from each other): `none`.

Differences from Geometric Tools, on purpose: the collinear parameters are divided by the
squared direction length (Geometric Tools uses `dot(d0, q)` as a parameter, right only for unit
directions); opposite rays sharing an origin are always one `point` (its test and find queries
disagree on the count); a zero direction is `invalid`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..rational import Exact2D, intersect, ray, vec


def reference(case_input: Mapping[str, Any]) -> Exact2D:
    a, b = case_input["ray0"], case_input["ray1"]
    return intersect(ray(vec(a["origin"]), vec(a["direction"])), ray(vec(b["origin"]), vec(b["direction"])))

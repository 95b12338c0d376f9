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

Differences from Geometric Tools, on purpose:
- The collinear parameters are divided by the squared direction length: Geometric Tools uses
  `dot(d0, q)` as a parameter, right only for unit directions (for the rays from (0, 0) along
  (3, 3) and from (6, 6) along (1, 1) it reports `t0 = 36` where this contract has `t0 = 2`).
- For facing rays Geometric Tools lists the points `ray0.origin`, `ray1.origin` but the second
  ray's parameters as 0 then `dot(d0, q)`, so they are not paired with the points even for
  unit directions: for the rays from (0, 0) along (1, 0) and (3, 0) along (-1, 0) it reports
  `t1 = [0, 3]` where this contract has `t1 = [3, 0]`.
- Opposite rays sharing an origin are always one `point` (Geometric Tools' test and find
  queries disagree on the count).
- A zero direction is `invalid`. Geometric Tools calls parallel inputs the same line when
  `perp(q, d1) == 0`, so a zero second input is always on the first ray's line and is reported
  as intersecting, wherever it is: origin (0, 0), direction (1, 0) and origin (5, 5), direction
  (0, 0). A zero first input meets nothing unless its origin lies on the other ray's line:
  origin (1, 1), direction (0, 0) and origin (0, 0), direction (1, 0) give no intersection,
  origin (3, 0), direction (0, 0) and origin (0, 0), direction (1, 0) do intersect.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..rational import Exact2D, intersect, ray, vec


def reference(case_input: Mapping[str, Any]) -> Exact2D:
    a, b = case_input["ray0"], case_input["ray1"]
    return intersect(ray(vec(a["origin"]), vec(a["direction"])), ray(vec(b["origin"]), vec(b["direction"])))

"""Ray / aligned box intersection in 2D.

`ray2_aligned_box2(ray, aligned_box)`: the ray is `origin + t*direction` for `t >= 0`; the box
is the closed solid `min.x <= x <= max.x`, `min.y <= y <= max.y` between its corners
`aligned_box.min` and `aligned_box.max`, its boundary included. Let `d = ray.direction`.

- `invalid`: `d == (0, 0)`, `min.x > max.x` or `min.y > max.y` (checked first). A
  flat box (`min.x == max.x` or `min.y == max.y`, down to a single point) is valid.
- Clip the ray's interval `[0, infinity)` on each axis `i` (x and y):
  - `d[i] == 0` (the ray does not move along axis `i`): if `origin[i] < min[i]` or
    `origin[i] > max[i]` the result is `none`; otherwise the axis keeps every `t`.
  - `d[i] != 0`: keep the `t` between `(min[i] - origin[i]) / d[i]` and
    `(max[i] - origin[i]) / d[i]` (the smaller of the two is where the ray enters the slab).
  Let `lo` be the largest lower end and `hi` the smallest upper end of those intervals and
  `[0, infinity)`; `hi` is finite, since the ray moves along some axis.
- `lo > hi`: `none` (the box is beside the ray or behind its origin).
- `lo == hi`: a `point`, `t0 = [lo]`, the point `origin + lo*d`: the ray only touches the box,
  at a corner, or from its origin on the boundary pointing out.
- `lo < hi`: a `segment`, `t0 = [lo, hi]`, the points `origin + lo*d` and `origin + hi*d`: the
  part of the ray inside the box (it may run along an edge; `lo == 0` when the origin is in
  the box).
- `t1` is always empty: a box has no parameter.

Differences from Geometric Tools, on purpose:
- With its exact rational type `BSRational`, `std::numeric_limits<T>::max()` is 0, so both the
  supporting line's parameter interval `[-max(), max()]` and the ray's `[0, max()]` are
  `[0, 0]`: the ray collapses to its origin. The ray from (-1, 1/2) along (1, 0) and the box
  from (0, 0) to (1, 1) give no intersection there, where this contract has a `segment` with
  `t0 = [1, 2]`; from (1/2, 1/2) along (1, 0) one point, the origin, where this contract has
  `t0 = [0, 1/2]`. With `double` its `Clip()` compares `numer > denom*t` on the box's centred
  form, which rounds where this contract divides: the ray from (5, 13) along (-13, -4) touches
  the flat box from (-10, 6) to (-10, 9) at one point here (`t0 = [15/13]`), and there it
  finds none.
- A zero direction is `invalid`. Geometric Tools clips a zero direction as parallel to both
  axes, so an origin in the box intersects over the whole ray interval: origin (1/2, 1/2),
  direction (0, 0) and the box from (0, 0) to (1, 1) give two intersections, with parameters
  0 and `max()`, both at the origin.
- A box with `min > max` on an axis is `invalid`; Geometric Tools does not check and, clipping
  against a negative half width, finds no intersection: origin (0, 0), direction (1, 1) and
  the box from (1, 0) to (0, 2).
- No output slot is left at a default: Geometric Tools' result always holds two parameters
  and two points (for one intersection the second parameter repeats the first).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..clipping import clip
from ..rational import Exact2D, ray, vec


def reference(case_input: Mapping[str, Any]) -> Exact2D:
    a, box = case_input["ray"], case_input["aligned_box"]
    return clip(ray(vec(a["origin"]), vec(a["direction"])), vec(box["min"]), vec(box["max"]))

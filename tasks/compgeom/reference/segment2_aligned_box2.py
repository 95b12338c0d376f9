"""Segment / aligned box intersection in 2D.

`segment2_aligned_box2(segment, aligned_box)`: the segment is `p0 + t*(p1 - p0)` for
`0 <= t <= 1`; the box is the closed solid `min.x <= x <= max.x`, `min.y <= y <= max.y`
between its corners `aligned_box.min` and `aligned_box.max`, its boundary included. Let
`d = segment.p1 - segment.p0`.

- `invalid`: `segment.p0 == segment.p1`, `min.x > max.x` or `min.y > max.y` (checked
  first). A flat box (`min.x == max.x` or `min.y == max.y`, down to a single point) is valid.
- Clip the segment's interval `[0, 1]` on each axis `i` (x and y):
  - `d[i] == 0` (the segment does not move along axis `i`): if `p0[i] < min[i]` or
    `p0[i] > max[i]` the result is `none`; otherwise the axis keeps every `t`.
  - `d[i] != 0`: keep the `t` between `(min[i] - p0[i]) / d[i]` and
    `(max[i] - p0[i]) / d[i]` (the smaller of the two is where the segment enters the slab).
  Let `lo` be the largest lower end and `hi` the smallest upper end of those intervals and
  `[0, 1]`.
- `lo > hi`: `none`.
- `lo == hi`: a `point`, `t0 = [lo]`, the point `p0 + lo*d`: the segment only touches the box,
  at a corner, along no more than one point of an edge, or with one end point on the boundary
  while the rest lies outside.
- `lo < hi`: a `segment`, `t0 = [lo, hi]`, the points `p0 + lo*d` and `p0 + hi*d`: the part of
  the segment inside the box, in segment order (it may run along an edge).
- `t1` is always empty: a box has no parameter.

Differences from Geometric Tools, on purpose:
- Geometric Tools clips the segment's centred form: the center `(p0 + p1)/2`, the *unit*
  vector from `p0` to `p1` (a square root) and the half length, then converts a centred
  parameter `s` back with `(s/e + 1)/2`. With `double` the parameters, the points and so the
  touching decisions are rounded where this contract is exact. The segment from (-1, -1) to
  (4, 1) touches the box from (3, 1) to (4, 2) at its end point, the corner (4, 1): a `point`
  with `t0 = [1]` here, no intersection there. The segment from (-1, -1) to (2, 0) touches the
  box from (0, 0) to (2, 2) only at the corner (2, 0): there it gives two intersections, from
  about (2 - 2.2e-16, 0) to (2, 0).
- With its exact rational type `BSRational`, `std::numeric_limits<T>::max()` is 0, so the
  supporting line's parameter interval `[-max(), max()]` is `[0, 0]`: the query only asks
  whether the segment's center lies in the box. The segment from (-3, 1/2) to (1, 1/2) and the
  box from (0, 0) to (1, 1) give no intersection there, where this contract has a `segment`
  with `t0 = [3/4, 1]`; the segment from (-1, 1/2) to (1, 1/2) gives one point, the center
  (0, 1/2), where this contract has `t0 = [1/2, 1]`.
- A zero-length segment is `invalid`. Geometric Tools normalises its zero direction to (0, 0)
  with half length 0 and, when the point lies in the box, reports one intersection whose
  parameter is `(0/0 + 1)/2`, NaN with `double`: p0 (1/2, 1/2), p1 (1/2, 1/2) and the box
  from (0, 0) to (1, 1).
- A box with `min > max` on an axis is `invalid`; Geometric Tools does not check and, clipping
  against a negative half width, finds no intersection: p0 (0, 1), p1 (2, 1) and the box from
  (1, 0) to (0, 2).
- No output slot is left at a default: Geometric Tools' result always holds two parameters
  and two points (for one intersection the second parameter repeats the first).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..clipping import clip
from ..rational import Exact2D, segment, vec


def reference(case_input: Mapping[str, Any]) -> Exact2D:
    a, box = case_input["segment"], case_input["aligned_box"]
    return clip(segment(vec(a["p0"]), vec(a["p1"])), vec(box["min"]), vec(box["max"]))

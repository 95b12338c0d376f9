"""Ray / aligned box intersection in 3D.

`ray3_aligned_box3(ray, aligned_box)`: the ray is `origin + t*direction` for `t >= 0`; the box is the
closed solid `min.x <= x <= max.x`, `min.y <= y <= max.y`, `min.z <= z <= max.z`. Write `o`
for the origin, `d` for the direction, and `i` for an axis (x, y, z).

- `invalid`: `d == (0, 0, 0)`, or `min[i] > max[i]` on some axis (a flat box, `min[i] == max[i]`,
  is valid).
- Clip the ray's line against the three slabs, dividing first as written here (not in
  Liang-Barsky's `numer > denom*t` form, which rounds `denom*t` where this contract compares
  exact quotients, and so fails valid inputs): on an axis with `d[i] == 0` the line stays in
  the slab for every `t` if `min[i] <= o[i] <= max[i]` and never otherwise
  (then `none`); on any other axis it is in the slab for `t` between `(min[i] - o[i]) / d[i]`
  and `(max[i] - o[i]) / d[i]`. Let `[enter, leave]` be the intersection of those intervals
  (`enter` the largest lower end, `leave` the smallest upper end).
- `none` when `enter > leave` (the line misses the box) or `leave < 0` (the box lies behind
  the origin).
- Otherwise the ray meets the box for `t` in `[lo, leave]`, `lo = max(enter, 0)`: a `point` when
  `lo == leave` (the ray touches an edge or a corner, crosses a flat box, or starts on the box
  and leaves it at once), else a `segment` with `t = [lo, leave]`. Each point is
  `o + t*d`; the origin counts, so a ray starting inside or on the box has `lo = 0`.

Every test input is a small integer or a dyadic rational, chosen so that double precision
decides every comparison of the contract exactly: the differences `min[i] - o[i]` and
`max[i] - o[i]` are exact, and two of the quotients `(min[i] - o[i]) / d[i]`,
`(max[i] - o[i]) / d[i]` and `0` that differ also differ once each division is rounded.

Differences from Geometric Tools, on purpose:
- Geometric Tools (`FIQuery<Ray3, AlignedBox3>`: the box in centred form, the line clipped by
  Liang-Barsky's `Clip()`, which compares `numer > denom*t` and so rounds where this contract
  divides, then the overlap with `[0, +infinity)`) always fills two parameters and two
  points; for a single point of contact both slots hold it. Here the lists hold exactly one
  entry for a `point`.
- It starts the clipping from `[-max(), max()]` of the number type. With its exact rational
  type `BSRational`, `std::numeric_limits<T>::max()` is 0, so the line is clipped to `t = 0`
  before any face is tested: the ray from (-2, 1, 1) along (1, 0, 0) and the box from
  (0, 0, 0) to (2, 2, 2) give no intersection there, where this contract gives a `segment`
  with `t = [2, 4]`.
- A zero direction and a box with `min[i] > max[i]` are `invalid`. Geometric Tools does not
  check them: for the zero direction at (1, 1, 1) and the box from (0, 0, 0) to (2, 2, 2) its
  clipping keeps the whole line, and it reports two intersections, both at the origin, with
  parameters 0 and `max()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

Vec3 = tuple[Fraction, Fraction, Fraction]


@dataclass(frozen=True)
class Exact3D:
    """An exact 3D result; ``branch`` names the path taken, so case coverage can be checked."""

    kind: str
    t: tuple[Fraction, ...] = ()
    points: tuple[Vec3, ...] = ()
    branch: str = ""


def _vec3(values: Sequence[float]) -> Vec3:
    x, y, z = values
    return (Fraction(x), Fraction(y), Fraction(z))


def reference(case_input: Mapping[str, Any]) -> Exact3D:
    o, d = _vec3(case_input["ray"]["origin"]), _vec3(case_input["ray"]["direction"])
    lo_box, hi_box = _vec3(case_input["aligned_box"]["min"]), _vec3(case_input["aligned_box"]["max"])
    if d == (0, 0, 0) or any(a > b for a, b in zip(lo_box, hi_box, strict=True)):
        return Exact3D("invalid", branch="invalid")
    enter: Fraction | None = None
    leave: Fraction | None = None
    for i in range(3):
        if d[i] == 0:
            if not lo_box[i] <= o[i] <= hi_box[i]:
                return Exact3D("none", branch="parallel_outside")
            continue
        a, b = sorted(((lo_box[i] - o[i]) / d[i], (hi_box[i] - o[i]) / d[i]))
        enter = a if enter is None else max(enter, a)
        leave = b if leave is None else min(leave, b)
    assert enter is not None and leave is not None  # a non-zero direction moves along some axis
    if enter > leave:
        return Exact3D("none", branch="miss")
    if leave < 0:
        return Exact3D("none", branch="behind")
    lo = max(enter, Fraction(0))
    ts = (lo,) if lo == leave else (lo, leave)
    points = tuple(tuple(o[i] + t * d[i] for i in range(3)) for t in ts)
    if lo == leave:
        return Exact3D("point", ts, points, "touch" if lo > 0 else "touch_origin")  # type: ignore[arg-type]
    return Exact3D("segment", ts, points, "enter" if enter > 0 else "inside")  # type: ignore[arg-type]

"""Segment / triangle intersection in 3D.

`segment3_triangle3(segment, triangle)`: the segment is `p0 + t*(p1 - p0)` for `0 <= t <= 1`;
the triangle is the closed flat solid with vertices `v0`, `v1`, `v2` (its edges and vertices
count). Write `d = p1 - p0`, `e1 = v1 - v0`, `e2 = v2 - v0`, `n = cross(e1, e2)` (the
triangle's normal), `q = p0 - v0` and `den = dot(n, d)`, with
`cross(a, b) = (a.y*b.z - a.z*b.y, a.z*b.x - a.x*b.z, a.x*b.y - a.y*b.x)`.

- `invalid`: `p0 == p1`, or `n == (0, 0, 0)` (the triangle's vertices are collinear).
- `den != 0`: the segment's line crosses the triangle's plane once, at `t = -dot(n, q) / den`.
  With `s = 1` if `den > 0` and `s = -1` otherwise, let `num = -s*dot(n, q)` (so `t = num / |den|`),
  `b1 = s*dot(d, cross(q, e2))` and `b2 = s*dot(d, cross(e1, q))` (the crossing point's
  barycentric coordinates on `v1` and `v2`, times `|den|`). The result is a `point`,
  `p0 + t*d`, when `0 <= num <= |den|` (the crossing is on the segment; its ends count) and
  `b1 >= 0`, `b2 >= 0` and `b1 + b2 <= |den|` (it is in the triangle; edges and vertices
  count); otherwise `none`.
- `den == 0` and `dot(n, q) != 0`: the segment is parallel to the plane and off it: `none`.
- `den == 0` and `dot(n, q) == 0`: the segment lies in the triangle's plane. Clip it against
  the triangle's three edges, dividing first as written here (not in Liang-Barsky's
  `numer > denom*t` form, which rounds where this contract is exact): for the edge from `a` to `b` (the edges
  `v0 -> v1`, `v1 -> v2`, `v2 -> v0`) the points `p0 + t*d` on the triangle's side of it are
  those with `alpha + t*beta >= 0`, `alpha = dot(n, cross(b - a, p0 - a))`,
  `beta = dot(n, cross(b - a, d))`. So `beta == 0` and `alpha < 0` gives `none`; `beta > 0`
  raises the lower end of `[0, 1]` to `-alpha / beta`, `beta < 0` lowers its upper end to
  `-alpha / beta`. An empty interval `[lo, hi]` is `none`; a single value (`lo == hi`) is a
  `point`; otherwise a `segment` with `t = [lo, hi]`. Each point is `p0 + t*d`.

Every test input is a small integer or a dyadic rational, chosen so that every quantity above
except the quotients is exact in double precision, and two of the quotients `-alpha / beta`,
`0` and `1` that differ also differ once each division is rounded.

Differences from Geometric Tools, on purpose:
- Geometric Tools (`FIQuery<Segment3, Triangle3>`) calls a segment parallel to the plane
  "no intersection" even when it lies in the triangle: the segment from (1, 1, 0) to (2, 1, 0)
  and the triangle (0, 0, 0), (4, 0, 0), (0, 4, 0) give no intersection there, where this
  contract gives a `segment` with `t = [0, 1]`.
- It uses the segment's centred form: the center `(p0 + p1)/2`, the unit direction and the
  half length, with a parameter from minus to plus the half length. For the segment from
  (1, 1, -1) to (1, 1, 1) and that triangle it reports the parameter 0 where this contract has
  `t = 1/2`. It also reports the crossing point's barycentric coordinates, which this contract
  does not ask for.
- A zero-length segment and a degenerate triangle are `invalid`. Geometric Tools does not check
  them: both make `dot(n, d)` zero, so it calls them parallel and reports no intersection,
  even for the segment from (1, 1, 0) to (1, 1, 0), a point inside the triangle above.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from .ray3_aligned_box3 import Exact3D, Vec3, _vec3

ZERO = (Fraction(0), Fraction(0), Fraction(0))


def _sub(a: Vec3, b: Vec3) -> Vec3:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def _dot(a: Vec3, b: Vec3) -> Fraction:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(a: Vec3, b: Vec3) -> Vec3:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _at(o: Vec3, d: Vec3, t: Fraction) -> Vec3:
    return (o[0] + t * d[0], o[1] + t * d[1], o[2] + t * d[2])


def reference(case_input: Mapping[str, Any]) -> Exact3D:
    p0, p1 = (_vec3(case_input["segment"][f]) for f in ("p0", "p1"))
    v = [_vec3(case_input["triangle"][f]) for f in ("v0", "v1", "v2")]
    d, e1, e2 = _sub(p1, p0), _sub(v[1], v[0]), _sub(v[2], v[0])
    n = _cross(e1, e2)
    if d == ZERO or n == ZERO:
        return Exact3D("invalid", branch="invalid")
    q = _sub(p0, v[0])
    den = _dot(n, d)
    if den != 0:
        s = 1 if den > 0 else -1
        num = -s * _dot(n, q)
        b1, b2 = s * _dot(d, _cross(q, e2)), s * _dot(d, _cross(e1, q))
        if not 0 <= num <= s * den:
            return Exact3D("none", branch="plane_miss")
        if not (b1 >= 0 and b2 >= 0 and b1 + b2 <= s * den):
            return Exact3D("none", branch="outside")
        t = Fraction(num) / (s * den)
        touch = t in (0, 1) or b1 == 0 or b2 == 0 or b1 + b2 == s * den
        return Exact3D("point", (t,), (_at(p0, d, t),), "touch" if touch else "cross")
    if _dot(n, q) != 0:
        return Exact3D("none", branch="parallel")
    lo, hi = Fraction(0), Fraction(1)
    for k in range(3):
        a, e = v[k], _sub(v[(k + 1) % 3], v[k])
        alpha, beta = _dot(n, _cross(e, _sub(p0, a))), _dot(n, _cross(e, d))
        if beta == 0:
            if alpha < 0:
                return Exact3D("none", branch="coplanar_none")
        elif beta > 0:
            lo = max(lo, -alpha / beta)
        else:
            hi = min(hi, -alpha / beta)
    if lo > hi:
        return Exact3D("none", branch="coplanar_none")
    ts = (lo,) if lo == hi else (lo, hi)
    return Exact3D("point" if lo == hi else "segment", ts, tuple(_at(p0, d, t) for t in ts),
                   "coplanar_point" if lo == hi else "coplanar_segment")

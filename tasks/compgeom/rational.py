"""Exact 2D linear components and their intersection: the one algorithm all 2D references share.

A line, a ray and a segment are each a *component*: an origin, a direction and a closed
interval of the parameter t (line: all reals; ray: t >= 0; segment: 0 <= t <= 1 with direction
``p1 - p0``). Non-parallel components meet where both parameters lie in their intervals.
Collinear components meet in the first interval intersected with the image of the second under
the affine map between the two parametrisations, so every result kind (none, point, segment,
ray, line) falls out of one interval computation instead of one case analysis per primitive.
Everything is ``fractions.Fraction``: no rounding, so the expected outputs are exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

Vec = tuple[Fraction, Fraction]

KINDS_2D: tuple[str, ...] = ("invalid", "none", "point", "segment", "ray", "line")


def sub(a: Vec, b: Vec) -> Vec:
    return (a[0] - b[0], a[1] - b[1])


def dot(a: Vec, b: Vec) -> Fraction:
    return a[0] * b[0] + a[1] * b[1]


def perp(a: Vec, b: Vec) -> Fraction:
    """``DotPerp``: the z of the cross product; zero exactly when ``a`` and ``b`` are parallel."""
    return a[0] * b[1] - a[1] * b[0]


def at(origin: Vec, direction: Vec, t: Fraction) -> Vec:
    return (origin[0] + t * direction[0], origin[1] + t * direction[1])


@dataclass(frozen=True)
class Component:
    """``origin + t*direction`` for t in [lo, hi]; None stands for an infinite end."""

    origin: Vec
    direction: Vec
    lo: Fraction | None
    hi: Fraction | None

    @property
    def degenerate(self) -> bool:
        return self.direction == (0, 0)

    def contains(self, t: Fraction) -> bool:
        return (self.lo is None or t >= self.lo) and (self.hi is None or t <= self.hi)

    def at_end(self, t: Fraction) -> bool:
        return t in (self.lo, self.hi)


def line(origin: Vec, direction: Vec) -> Component:
    return Component(origin, direction, None, None)


def ray(origin: Vec, direction: Vec) -> Component:
    return Component(origin, direction, Fraction(0), None)


def segment(p0: Vec, p1: Vec) -> Component:
    return Component(p0, sub(p1, p0), Fraction(0), Fraction(1))


@dataclass(frozen=True)
class Exact2D:
    """An exact 2D result; ``branch`` names the path taken, so case coverage can be checked."""

    kind: str
    t0: tuple[Fraction, ...] = ()
    t1: tuple[Fraction, ...] = ()
    points: tuple[Vec, ...] = ()
    branch: str = ""


def _max(a: Fraction | None, b: Fraction | None) -> Fraction | None:
    """Max of two lower ends, None meaning minus infinity."""
    return b if a is None else a if b is None else max(a, b)


def _min(a: Fraction | None, b: Fraction | None) -> Fraction | None:
    """Min of two upper ends, None meaning plus infinity."""
    return b if a is None else a if b is None else min(a, b)


def intersect(c0: Component, c1: Component) -> Exact2D:
    """The contract's result for two components, in the order given."""
    if c0.degenerate or c1.degenerate:
        return Exact2D("invalid", branch="invalid")
    d0, d1 = c0.direction, c1.direction
    q = sub(c1.origin, c0.origin)
    den = perp(d0, d1)
    if den != 0:
        t0, t1 = perp(q, d1) / den, perp(q, d0) / den
        if not (c0.contains(t0) and c1.contains(t1)):
            return Exact2D("none", branch="cross_miss")
        touch = c0.at_end(t0) or c1.at_end(t1)
        return Exact2D("point", (t0,), (t1,), (at(c0.origin, d0, t0),), "cross_touch" if touch else "cross")
    if perp(q, d0) != 0:
        return Exact2D("none", branch="parallel")
    # Collinear: c1's parameter t1 sits at t0 = a + b*t1 on c0.
    dd0 = dot(d0, d0)
    a, b = dot(q, d0) / dd0, dot(d1, d0) / dd0
    ends = [None if t is None else a + b * t for t in (c1.lo, c1.hi)]
    img_lo, img_hi = (ends[0], ends[1]) if b > 0 else (ends[1], ends[0])
    lo, hi = _max(c0.lo, img_lo), _min(c0.hi, img_hi)
    sense = "same" if b > 0 else "opposite"
    ts: tuple[Fraction, ...]
    if lo is not None and hi is not None:
        if lo > hi:
            kind, ts = "none", ()
        elif lo == hi:
            kind, ts = "point", (lo,)
        else:
            kind, ts = "segment", (lo, hi)
    elif lo is not None:
        kind, ts = "ray", (lo,)
    elif hi is not None:
        kind, ts = "ray", (hi,)
    else:
        kind, ts = "line", ()
    return Exact2D(
        kind,
        tuple(ts),
        tuple((t - a) / b for t in ts),
        tuple(at(c0.origin, d0, t) for t in ts),
        f"collinear_{kind}_{sense}",
    )


def vec(values: Sequence[float]) -> Vec:
    """An exact point from a decoded JSON pair (floats convert exactly)."""
    x, y = values
    return (Fraction(x), Fraction(y))

"""Hidden inputs that make rounding visible, the inputs the contracts quote, and the input range.

A solution that is right in real arithmetic but computes its operands another way (a reciprocal
multiplied in, Liang-Barsky's ``numer > denom*t``, a point computed and then tested, a unit
direction, a centred form: ``rewrites.py``) agrees with the contract wherever the quantities
it rounds happen to be exact, as at crossing parameters 1/2 or 1/3 of small inputs. So
``generated`` draws touching, end-point and crossing configurations whose parameter has an
odd denominator (3/5, 15/13, 27/49, ...) while every input stays a small dyadic rational: the
direction is the odd denominator ``q`` times a small vector, so the contact point
``origin + k*(direction/q)`` is exact. A third of them are moved off the contact by ``2^-j``
(a near miss on either side). ``cases.py`` puts each under a random symmetry, keeps the ones
double precision decides exactly (``exactness.py``), and adds more draws, one at a time, while
some rewrite candidate passes every hidden case (the builder then proves that each one fails).

``QUOTED`` lists every input a contract quotes (its "Differences from Geometric Tools" notes)
with the words that quote it, and ``CATCHING`` the inputs that caught rewrites which had once
earned full reward (issue 24); both go into the hidden set unchanged.

``SIGNIFICANT_BITS``, ``MIN_EXPONENT`` and ``MAX_EXPONENT`` bound every test coordinate: the
contracts state the range and the builder asserts it (``out_of_range``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from .primitives import BY_NAME

Q = Fraction
Values = list[tuple[Fraction, ...]]

SIGNIFICANT_BITS = 48
"""A nonzero test coordinate is ``m * 2^e`` with an odd integer ``|m| < 2^48``."""
MIN_EXPONENT, MAX_EXPONENT = -80, 32
"""... and ``2^MIN_EXPONENT <= |x| < 2^MAX_EXPONENT``."""

RANGE_TEXT = (f"Every test coordinate is `0` or `m * 2^e` for an odd integer `m` with `|m| < 2^{SIGNIFICANT_BITS}` "
              f"(at most {SIGNIFICANT_BITS} significant bits) and `2^{MIN_EXPONENT} <= |x| < 2^{MAX_EXPONENT}`.")

ODD = (3, 5, 7, 9, 11, 13, 15, 21, 25, 27, 49, 51, 63, 97)
NEAR = (24, 32, 40)  # a near miss moves the contact by 2^-j


def out_of_range(x: float) -> bool:
    """The coordinate is outside the contracts' stated range."""
    if x == 0:
        return False
    value = Q(x)
    m = value.numerator
    while m % 2 == 0:
        m //= 2
    return abs(m) >= 2 ** SIGNIFICANT_BITS or not 2.0 ** MIN_EXPONENT <= abs(x) < 2.0 ** MAX_EXPONENT


def coordinates(case_input: Mapping[str, Any]) -> Iterator[float]:
    """Every number of a case's input."""
    for fields in case_input.values():
        for values in fields.values():
            yield from (float(x) for x in values)


def _v(*xs: Any) -> tuple[Fraction, ...]:
    return tuple(Q(x) for x in xs)


# ---------------------------------------------------------------- quoted and catching inputs

QUOTED: dict[str, tuple[tuple[str, Values], ...]] = {
    "segment2_aligned_box2": (
        ("The segment from (-1, -1) to (4, 1) touches the box from (3, 1) to (4, 2)",
         [_v(-1, -1), _v(4, 1), _v(3, 1), _v(4, 2)]),
        ("The segment from (-1, -1) to (2, 0) touches the box from (0, 0) to (2, 2)",
         [_v(-1, -1), _v(2, 0), _v(0, 0), _v(2, 2)]),
        ("The segment from (-3, 1/2) to (1, 1/2) and the box from (0, 0) to (1, 1)",
         [_v(-3, Q(1, 2)), _v(1, Q(1, 2)), _v(0, 0), _v(1, 1)]),
        ("the segment from (-1, 1/2) to (1, 1/2) gives one point",
         [_v(-1, Q(1, 2)), _v(1, Q(1, 2)), _v(0, 0), _v(1, 1)]),
        ("p0 (1/2, 1/2), p1 (1/2, 1/2) and the box from (0, 0) to (1, 1)",
         [_v(Q(1, 2), Q(1, 2)), _v(Q(1, 2), Q(1, 2)), _v(0, 0), _v(1, 1)]),
        ("p0 (0, 1), p1 (2, 1) and the box from (1, 0) to (0, 2)", [_v(0, 1), _v(2, 1), _v(1, 0), _v(0, 2)]),
    ),
    "ray2_aligned_box2": (
        ("the ray from (5, 13) along (-13, -4) touches the flat box from (-10, 6) to (-10, 9)",
         [_v(5, 13), _v(-13, -4), _v(-10, 6), _v(-10, 9)]),
        ("The ray from (-1, 1/2) along (1, 0) and the box from (0, 0) to (1, 1)",
         [_v(-1, Q(1, 2)), _v(1, 0), _v(0, 0), _v(1, 1)]),
        ("from (1/2, 1/2) along (1, 0) one point", [_v(Q(1, 2), Q(1, 2)), _v(1, 0), _v(0, 0), _v(1, 1)]),
        ("origin (1/2, 1/2), direction (0, 0) and the box from (0, 0) to (1, 1)",
         [_v(Q(1, 2), Q(1, 2)), _v(0, 0), _v(0, 0), _v(1, 1)]),
        ("origin (0, 0), direction (1, 1) and the box from (1, 0) to (0, 2)", [_v(0, 0), _v(1, 1), _v(1, 0), _v(0, 2)]),
    ),
    "line2_aligned_box2": (
        ("the line through (5, 13) along (-13, -4) touches the flat box from (-10, 6) to (-10, 9)",
         [_v(5, 13), _v(-13, -4), _v(-10, 6), _v(-10, 9)]),
        ("The line through (-1, 1/2) along (1, 0) and the box from (0, 0) to (1, 1)",
         [_v(-1, Q(1, 2)), _v(1, 0), _v(0, 0), _v(1, 1)]),
        ("through (1/2, 1/2) along (1, 0) one point", [_v(Q(1, 2), Q(1, 2)), _v(1, 0), _v(0, 0), _v(1, 1)]),
        ("origin (1/2, 1/2), direction (0, 0) and the box from (0, 0) to (1, 1)",
         [_v(Q(1, 2), Q(1, 2)), _v(0, 0), _v(0, 0), _v(1, 1)]),
        ("origin (0, 0), direction (1, 1) and the box from (1, 0) to (0, 2)", [_v(0, 0), _v(1, 1), _v(1, 0), _v(0, 2)]),
    ),
    "triangle2_triangle2": (
        ("triangle0 (0, 0), (2, 0), (0, 2) and triangle1 (2, 0), (4, 0), (3, 2)",
         [_v(0, 0), _v(2, 0), _v(0, 2), _v(2, 0), _v(4, 0), _v(3, 2)]),
        ("triangle0 (0, 0), (2, 0), (0, 2) and triangle1 (2, 0), (2, 2), (0, 2)",
         [_v(0, 0), _v(2, 0), _v(0, 2), _v(2, 0), _v(2, 2), _v(0, 2)]),
        ("two copies of the clockwise triangle (0, 0), (0, 1), (1, 0)",
         [_v(0, 0), _v(0, 1), _v(1, 0), _v(0, 0), _v(0, 1), _v(1, 0)]),
        ("triangle0 (0, 0), (1, 1), (2, 2) and triangle1 (0, 0), (1, 0), (0, 1)",
         [_v(0, 0), _v(1, 1), _v(2, 2), _v(0, 0), _v(1, 0), _v(0, 1)]),
    ),
    "ray3_aligned_box3": (
        ("the ray from (-2, 1, 1) along (1, 0, 0) and the box from (0, 0, 0) to (2, 2, 2)",
         [_v(-2, 1, 1), _v(1, 0, 0), _v(0, 0, 0), _v(2, 2, 2)]),
        ("the zero direction at (1, 1, 1) and the box from (0, 0, 0) to (2, 2, 2)",
         [_v(1, 1, 1), _v(0, 0, 0), _v(0, 0, 0), _v(2, 2, 2)]),
    ),
    "segment3_triangle3": (
        ("the segment from (1, 1, 0) to (2, 1, 0) and the triangle (0, 0, 0), (4, 0, 0), (0, 4, 0)",
         [_v(1, 1, 0), _v(2, 1, 0), _v(0, 0, 0), _v(4, 0, 0), _v(0, 4, 0)]),
        ("the segment from (1, 1, -1) to (1, 1, 1)",
         [_v(1, 1, -1), _v(1, 1, 1), _v(0, 0, 0), _v(4, 0, 0), _v(0, 4, 0)]),
        ("the segment from (1, 1, 0) to (1, 1, 0)", [_v(1, 1, 0), _v(1, 1, 0), _v(0, 0, 0), _v(4, 0, 0), _v(0, 4, 0)]),
    ),
}
"""Per primitive: (the words of its contract that quote the input, the input in field order)."""

_BIG = (47453132, 94906265, 94906263)
CATCHING: dict[str, tuple[tuple[str, Values], ...]] = {
    "segment2_aligned_box2": (
        ("reciprocal", [_v(1, -5), _v(-4, 10), _v(-8, 3), _v(-2, 4)]),
        ("centred", [_v(-1, -1), _v(2, 0), _v(0, 0), _v(2, 2)]),
    ),
    "ray2_aligned_box2": (
        ("reciprocal", [_v(1, -5), _v(-5, 15), _v(-8, 3), _v(-2, 4)]),
        ("liang-barsky", [_v(5, 13), _v(-13, -4), _v(-10, 6), _v(-10, 9)]),
        ("point-test", [_v(-3, -1), _v(49, 49), _v(24, 26), _v(25, 27)]),
    ),
    "line2_aligned_box2": (
        ("reciprocal", [_v(1, -5), _v(-5, 15), _v(-8, 3), _v(-2, 4)]),
        ("liang-barsky", [_v(5, 13), _v(-13, -4), _v(-10, 6), _v(-10, 9)]),
        ("point-test", [_v(-3, -1), _v(49, 49), _v(24, 26), _v(25, 27)]),
    ),
    "ray3_aligned_box3": (
        ("reciprocal", [_v(1, -5, 0), _v(-5, 15, 0), _v(-8, 3, -1), _v(-2, 4, 1)]),
        ("liang-barsky", [_v(5, 13, 0), _v(-13, -4, 0), _v(-10, 6, -1), _v(-10, 9, 1)]),
        ("point-test", [_v(-3, -1, 0), _v(49, 49, 0), _v(24, 26, -1), _v(25, 27, 1)]),
    ),
    "segment3_triangle3": (
        ("same-side", [_v(-1, 0, 0), _v(0, 1, -1), _v(-1, 1, -1), _v(0, -1, 0), _v(0, -1, 1)]),
        ("divided-barycentrics-above", [_v(_BIG[0], _BIG[0], 1), _v(_BIG[0], _BIG[0], -1), _v(0, 0, 0),
                                        _v(_BIG[1], 0, 0), _v(0, _BIG[2], 0)]),
        ("divided-barycentrics-below", [_v(_BIG[0], _BIG[0], -1), _v(_BIG[0], _BIG[0], 1), _v(0, 0, 0),
                                        _v(_BIG[1], 0, 0), _v(0, _BIG[2], 0)]),
    ),
}
"""Per primitive: inputs that caught a rewrite which once earned full reward (issue 24's table;
the ray and line ones are the segment's contact under the ray's or line's own fields)."""


def fixed(primitive: str) -> tuple[tuple[str, Values], ...]:
    """The quoted and catching inputs as (case id, values)."""
    out = [(f"quoted-{i}", values) for i, (_, values) in enumerate(QUOTED.get(primitive, ()))]
    out += [(f"catching-{name}", values) for name, values in CATCHING.get(primitive, ())]
    return tuple(out)


# ---------------------------------------------------------------- generated contacts

def _int(rng: np.random.Generator, lo: int, hi: int, nonzero: bool = False) -> int:
    while True:
        k = int(rng.integers(lo, hi + 1))
        if k or not nonzero:
            return k


def _vec(rng: np.random.Generator, n: int, bound: int, nonzero: bool = False) -> tuple[Fraction, ...]:
    return tuple(Q(_int(rng, -bound, bound, nonzero)) for _ in range(n))


def _add(a: Sequence[Fraction], b: Sequence[Fraction], k: Fraction | int = 1) -> tuple[Fraction, ...]:
    return tuple(x + k * y for x, y in zip(a, b, strict=True))


def _contact(rng: np.random.Generator, n: int, first: str) -> tuple[Fraction, tuple[Fraction, ...],
                                                                        tuple[Fraction, ...], tuple[Fraction, ...]]:
    """(t, origin, direction, the contact point origin + t*direction) with t = k/q, q odd: the
    direction is q times a small integer vector with no zero component. ``first``: the
    input's kind (a segment's t stays in [0, 1], a ray's in [0, +inf))."""
    q = ODD[int(rng.integers(len(ODD)))]
    k = {"segment": _int(rng, 0, q), "ray": _int(rng, 0, 2 * q), "line": _int(rng, -q, 2 * q)}[first]
    unit = _vec(rng, n, 7, nonzero=True)
    origin = _vec(rng, n, 8)
    return Q(k, q), origin, tuple(q * x for x in unit), _add(origin, unit, k)


def _kind(primitive: str, index: int) -> str:
    fields = BY_NAME[primitive].args[index][1].fields
    return "segment" if fields == ("p0", "p1") else ("ray" if "Ray" in BY_NAME[primitive].args[index][1].type_name
                                                       else "line")


def _linear_fields(kind: str, origin: tuple, direction: tuple) -> list[tuple]:
    return [origin, _add(origin, direction)] if kind == "segment" else [origin, direction]


def _near(rng: np.random.Generator, values: Values, index: int) -> Values:
    """A near miss: one coordinate of field ``index`` moved by +-2^-j."""
    moved = list(values)
    axis = int(rng.integers(len(values[index])))
    delta = Q(int(rng.choice((-1, 1))), 2 ** int(rng.choice(NEAR)))
    moved[index] = tuple(x + (delta if i == axis else 0) for i, x in enumerate(values[index]))
    return moved


def _clip(primitive: str, rng: np.random.Generator) -> Values:
    """A line, ray or segment whose line passes through a corner of the box (touching it there,
    entering through it, or the box flat or a single point) at t = k/q."""
    n = 3 if primitive == "ray3_aligned_box3" else 2
    first = "ray" if primitive == "ray3_aligned_box3" else _kind(primitive, 0)
    _, origin, direction, corner = _contact(rng, n, first)
    shape = int(rng.integers(4))
    lo, hi = [], []
    sides = [int(rng.integers(2)) for _ in range(n)]
    if shape == 0 and len(set(sides)) == 1:  # touch only: some axis forward, some backward
        sides[int(rng.integers(n))] ^= 1
    for i in range(n):
        width = Q(_int(rng, 1, 3)) if shape < 2 else (Q(0) if shape == 3 or i == 0 else Q(_int(rng, 1, 3)))
        forward = (direction[i] > 0) == bool(sides[i])
        lo.append(corner[i] if forward else corner[i] - width)
        hi.append(corner[i] + width if forward else corner[i])
    values = [*_linear_fields(first, origin, direction), tuple(lo), tuple(hi)]
    return _near(rng, values, int(rng.integers(2, 4))) if rng.random() < 1 / 3 else values


def _linear(primitive: str, rng: np.random.Generator) -> Values:
    """Two lines, rays or segments: one's end point or origin on the other at t = k/q, or
    parallel with an odd ratio of directions (collinear or not)."""
    kinds = (_kind(primitive, 0), _kind(primitive, 1))
    mode = int(rng.integers(3))
    if mode == 2:  # parallel: d1 = (odd / 2^j) * d0
        d0 = _vec(rng, 2, 3, nonzero=True)
        ratio = Q(ODD[int(rng.integers(len(ODD)))] * int(rng.choice((-1, 1))), 2 ** int(rng.integers(3)))
        o0 = _vec(rng, 2, 6)
        o1 = _add(o0, d0, Q(_int(rng, -6, 6), 2)) if rng.integers(2) else _vec(rng, 2, 6)
        values = [*_linear_fields(kinds[0], o0, d0), *_linear_fields(kinds[1], o1, tuple(ratio * x for x in d0))]
        return _near(rng, values, int(rng.integers(4))) if rng.random() < 1 / 3 else values
    own, other = (0, 1) if mode == 0 else (1, 0)
    _, origin, direction, point = _contact(rng, 2, kinds[own])
    d = _vec(rng, 2, 3, nonzero=True)
    if d[0] * direction[1] == d[1] * direction[0]:
        d = (d[0] + 1, d[1])
    # the contact is the other input's start, or a segment's p1
    start = _add(point, d, -1) if kinds[other] == "segment" and rng.integers(2) else point
    fields = {own: _linear_fields(kinds[own], origin, direction), other: _linear_fields(kinds[other], start, d)}
    values = [*fields[0], *fields[1]]
    return _near(rng, values, int(rng.integers(4))) if rng.random() < 1 / 3 else values


def _boxes(rng: np.random.Generator) -> Values:
    """Boxes touching (or a near miss apart) where one is wide: its center and half width round."""
    n = int(rng.integers(1, 4))
    box0_lo, box0_hi, box1_lo, box1_hi = [], [], [], []
    for _ in range(n):
        c = Q(_int(rng, -64, 64), 2 ** int(rng.integers(0, 8)))
        wide = Q(ODD[int(rng.integers(len(ODD)))] * 2 ** int(rng.integers(16, 24)) + int(rng.integers(1, 8)))
        narrow = Q(_int(rng, 1, 7), 2 ** int(rng.integers(0, 24)))
        gap = Q(int(rng.choice((-1, 0, 0, 1))), 2 ** int(rng.integers(16, 36)))
        box0_lo.append(c - wide)  # the symmetries (cases.py) swap the boxes and mirror axes
        box0_hi.append(c)
        box1_lo.append(c + gap)
        box1_hi.append(c + gap + narrow)
    return [tuple(box0_lo), tuple(box0_hi), tuple(box1_lo), tuple(box1_hi)]


def _triangles(rng: np.random.Generator) -> Values:
    """triangle1's vertex on triangle0's edge at k/q (or a near miss of it), triangle1 outside."""
    a = _vec(rng, 2, 6)
    q = ODD[int(rng.integers(len(ODD)))]
    unit = _vec(rng, 2, 3, nonzero=True)
    b = _add(a, unit, q)
    p = _add(a, unit, _int(rng, 0, q))
    normal = (-unit[1], unit[0])  # triangle0's third vertex on this side, triangle1 on the other
    c = _add(_add(a, unit, _int(rng, 0, q)), normal, _int(rng, 1, 4))
    u = _add(_add((Q(0), Q(0)), normal, -_int(rng, 1, 4)), unit, _int(rng, -3, 3))
    v = _add(_add((Q(0), Q(0)), normal, -_int(rng, 1, 4)), unit, _int(rng, -3, 3))
    if u[0] * v[1] == u[1] * v[0]:
        v = _add(v, unit)
    values = [a, b, c, p, _add(p, u), _add(p, v)]
    return _near(rng, values, 3) if rng.random() < 1 / 3 else values


def _segment3(rng: np.random.Generator) -> Values:
    """A segment crossing the triangle's edge v1 -> v2 (or its vertex) at t = k/q."""
    v0 = _vec(rng, 3, 4)
    m = int(rng.choice((1, 2, 3, 5)))
    e1, e2 = _vec(rng, 3, 3), _vec(rng, 3, 3)
    v1, v2 = _add(v0, e1, m), _add(v0, e2, m)
    point = _add(v1, _add(e2, e1, -1), _int(rng, 0, m))  # v1 + j*(v2 - v1)/m
    q = ODD[int(rng.integers(len(ODD)))]
    k = _int(rng, 0, q)
    w = _vec(rng, 3, 3, nonzero=True)
    p0 = _add(point, w, -k)
    values = [p0, _add(p0, w, q), v0, v1, v2]
    return _near(rng, values, 0) if rng.random() < 1 / 3 else values


def generated(primitive: str, rng: np.random.Generator) -> Values:
    """One drawn contact configuration of ``primitive`` in field order."""
    if BY_NAME[primitive].clips_box or primitive == "ray3_aligned_box3":
        return _clip(primitive, rng)
    if BY_NAME[primitive].is_box:
        return _boxes(rng)
    if primitive == "triangle2_triangle2":
        return _triangles(rng)
    if primitive == "segment3_triangle3":
        return _segment3(rng)
    return _linear(primitive, rng)

"""Is a case decided exactly in double precision? The products a natural solution forms.

The contracts promise that every test input makes the quantities in their formulas exact in
double precision, so a solution without tolerances decides every branch as the exact
reference does. ``inexact(primitive, input)`` names the first quantity that is not exact (its
double-precision value differs from the rational one), or returns None:

- every 2D case: the directions (a segment's ``p1 - p0``), ``q``, each product in
  ``perp(d0, d1)``, ``perp(q, d0)`` and ``perp(q, d1)``, and those sums;
- collinear cases also: ``dot(d0, d0)``, ``dot(q, d0)``, ``dot(d0, d1)``, ``dot(d1, d1)``,
  ``dot(q, d1)`` and, for a segment second input, ``dot(p1 - origin0, d0)``.

A line, ray or segment against a 2D box (``_clip_inexact``): the differences to the box's
corners, their products with the direction, and distinct slab parameters staying distinct once
rounded. Box inputs are only compared, never multiplied, so every box case is exact. The test and 3D
families (triangles, 3D rays and boxes) are checked on the good Python solution itself: it runs
on ``Tracked`` numbers, which check that every sum, difference and product it forms from the
inputs is exact (a quotient's rounding is allowed, and what is computed from one is not
checked). ``exact_case`` also runs the good Python solution on the case: exact products alone
do not make a rounded division land on the right side of an end point.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from .case import Case
from .inprocess import failure, good_module, record
from .primitives import BY_NAME

Pair = tuple[float, float]


def _fields(primitive: str, case_input: Mapping[str, Any]) -> list[tuple[Pair, Pair, bool]]:
    """Per input: (origin or p0, direction or p1, is_segment), as floats."""
    out = []
    for arg, shape in BY_NAME[primitive].args:
        f0, f1 = shape.fields
        out.append((_pair(case_input[arg][f0]), _pair(case_input[arg][f1]), shape.fields == ("p0", "p1")))
    return out


def _pair(values: Sequence[float]) -> Pair:
    """A decoded 2D point or vector, as floats."""
    x, y = values
    return (float(x), float(y))


class _Inexact(Exception):
    pass


def _diff(name: str, a: Pair, b: Pair) -> Pair:
    out = (a[0] - b[0], a[1] - b[1])
    for k in range(2):
        if Fraction(out[k]) != Fraction(a[k]) - Fraction(b[k]):
            raise _Inexact(name)
    return out


def _pair_product(name: str, a: Pair, b: Pair, sign: int) -> float:
    """a.x*b.y - a.y*b.x (sign -1, perp) or a.x*b.x + a.y*b.y (sign +1, dot), checked exact."""
    first, second = (a[0] * b[1], a[1] * b[0]) if sign < 0 else (a[0] * b[0], a[1] * b[1])
    exact_first = Fraction(a[0]) * Fraction(b[1] if sign < 0 else b[0])
    exact_second = Fraction(a[1]) * Fraction(b[0] if sign < 0 else b[1])
    total = first - second if sign < 0 else first + second
    if Fraction(first) != exact_first or Fraction(second) != exact_second:
        raise _Inexact(f"a product in {name}")
    if Fraction(total) != (exact_first - exact_second if sign < 0 else exact_first + exact_second):
        raise _Inexact(name)
    return total


class _InexactArithmetic(BaseException):
    """Raised through the solution under test: a BaseException, so its ``except Exception``
    (and the in-process harness's) cannot swallow it."""


def _exact_op(name: str, a: Any, b: Any, value: float, exact: Fraction) -> Tracked:
    if Fraction(value) != exact:
        raise _InexactArithmetic(f"{float(a)!r} {name} {float(b)!r}")
    return Tracked(value)


class Tracked(float):
    """A float from the inputs whose sums, differences and products with other such numbers (or
    constants) are checked exact; a quotient is a plain float, and so is what is computed from it."""

    def __add__(self, other: Any) -> Any:
        if type(other) not in (Tracked, int):
            return float(self) + other
        return _exact_op("+", self, other, float(self) + float(other), Fraction(self) + Fraction(other))

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        if type(other) not in (Tracked, int):
            return float(self) - other
        return _exact_op("-", self, other, float(self) - float(other), Fraction(self) - Fraction(other))

    def __rsub__(self, other: Any) -> Any:
        if type(other) not in (Tracked, int):
            return other - float(self)
        return _exact_op("-", other, self, float(other) - float(self), Fraction(other) - Fraction(self))

    def __mul__(self, other: Any) -> Any:
        if type(other) not in (Tracked, int):
            return float(self) * other
        return _exact_op("*", self, other, float(self) * float(other), Fraction(self) * Fraction(other))

    __rmul__ = __mul__

    def __neg__(self) -> Tracked:
        return Tracked(-float(self))

    def __pos__(self) -> Tracked:
        return self

    def __abs__(self) -> Tracked:
        return Tracked(abs(float(self)))


def _tracked_inexact(primitive: str, case_input: Mapping[str, Any]) -> str | None:
    case = Case("exactness", primitive, case_input, {}, "")
    try:
        record(good_module(primitive), case, Tracked)
    except _InexactArithmetic as error:
        return f"the good solution's {error}"
    return None


def _clip_inexact(primitive: str, case_input: Mapping[str, Any]) -> str | None:
    """A line, ray or segment against a 2D box: the direction, ``box.min - origin`` and
    ``box.max - origin`` exact, their products with the direction's components exact (a solution
    may cross-multiply), and every two distinct slab parameters (with 0 and 1) still distinct
    once the divisions are rounded (a solution may divide; rounding is monotone, so only a tie
    can flip a comparison)."""
    (origin, f0, is_segment), (box_min, box_max, _) = _fields(primitive, case_input)
    try:
        d = _diff("d", f0, origin) if is_segment else f0
        if d == (0.0, 0.0) or box_min[0] > box_max[0] or box_min[1] > box_max[1]:
            return None  # invalid: nothing is computed
        gaps = (_diff("box.min - origin", box_min, origin), _diff("box.max - origin", box_max, origin))
        for name, gap in zip(("box.min - origin", "box.max - origin"), gaps, strict=True):
            _pair_product(f"perp({name}, d)", gap, d, -1)
    except _Inexact as error:
        return str(error)
    exact = {Fraction(0), Fraction(1)} | {Fraction(gap[i]) / Fraction(d[i]) for gap in gaps for i in (0, 1) if d[i]}
    if len({float(t) for t in exact}) != len(exact):
        return "two slab parameters that differ round to one double"
    return None


def inexact(primitive: str, case_input: Mapping[str, Any]) -> str | None:
    """The first contract quantity of this input that double precision does not hold exactly."""
    if BY_NAME[primitive].clips_box:
        return _clip_inexact(primitive, case_input)
    if BY_NAME[primitive].family.name in ("test", "3d"):
        return _tracked_inexact(primitive, case_input)
    if BY_NAME[primitive].is_box:
        return None
    (o0, f0, seg0), (o1, f1, seg1) = _fields(primitive, case_input)
    try:
        d0 = _diff("d0", f0, o0) if seg0 else f0
        d1 = _diff("d1", f1, o1) if seg1 else f1
        if d0 == (0.0, 0.0) or d1 == (0.0, 0.0):
            return None  # invalid: nothing is computed
        q = _diff("q", o1, o0)
        den = _pair_product("perp(d0, d1)", d0, d1, -1)
        off = _pair_product("perp(q, d0)", q, d0, -1)
        _pair_product("perp(q, d1)", q, d1, -1)
        if den == 0 and off == 0:
            for name, a, b in (("dot(d0, d0)", d0, d0), ("dot(q, d0)", q, d0), ("dot(d0, d1)", d0, d1),
                               ("dot(d1, d1)", d1, d1), ("dot(q, d1)", q, d1)):
                _pair_product(name, a, b, 1)
            if seg1:
                _pair_product("dot(p1 - origin0, d0)", _diff("p1 - origin0", f1, o0), d0, 1)
    except _Inexact as error:
        return str(error)
    return None


def exact_case(case: Case) -> bool:
    """Every contract product is exact in double precision (``inexact``) and the good Python
    solution, which computes in double, reproduces the exact expectation."""
    return inexact(case.primitive, case.input) is None and failure(good_module(case.primitive), case) is None

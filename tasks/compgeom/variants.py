"""Margin-shrinking variants of a scenario: uniform power-of-two scaling and near misses.

Both keep every input dyadic, so the exact reference still decides them, and the builder keeps
only variants that double precision decides exactly too (``exactness.py``):

- ``scaled(values, k)``: every coordinate times ``2**k``. The contracts are scale-invariant, so
  the branch and the parameters are unchanged while every product shrinks or grows by
  ``4**k``: an absolute tolerance meets products far below (or above) its size.
- ``moves(primitive, values, delta)``: the scenario with one input moved by ``delta`` along an
  axis: shifted whole (a line's or ray's origin, both end points of a segment, a box along one
  axis), tilted (a direction, or one end point of a segment), or a box grown on one side.
  ``near_misses`` keeps the moves that change the scenario's branch: a touching input just
  missing or just crossing, an end point just outside or inside, parallel inputs just tilted
  into a crossing, collinear ones just shifted apart. A tolerance as small as ``delta``
  (relative to the inputs' size) decides those the way the unmoved scenario is decided.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction

from .primitives import BOX2, Primitive

Values = list[tuple[Fraction, ...]]

DELTA_EXPONENTS = (7, 12, 20, 30, 42)
"""Near misses move an input by 2**-k for these k: 2**-42 is about 2.3e-13, below the smallest
tolerance (1e-12 of the inputs' size) the builder asserts is caught."""

SCALE_EXPONENTS = (-20, -16, 16)
"""Every scenario is also posed scaled by 2**k for these k."""

_AXES_2D = ((1, 0), (-1, 0), (0, 1), (0, -1))


def scaled(values: Values, exponent: int) -> Values:
    factor = Fraction(2) ** exponent
    return [tuple(x * factor for x in v) for v in values]


def _plus(v: tuple[Fraction, ...], delta: Fraction, unit: Sequence[int | Fraction]) -> tuple[Fraction, ...]:
    return tuple(x + delta * u for x, u in zip(v, unit, strict=True))


def moves(primitive: Primitive, values: Values, delta: Fraction) -> Iterator[tuple[str, Values]]:
    """(move name, moved values) for every elementary move of size ``delta``, in a fixed order."""
    if primitive.family.name in ("test", "3d"):
        yield from _field_moves(primitive, values, delta)
        return
    if primitive.is_box:
        n = len(values[0])
        for box in (0, 1):
            for axis in range(n):
                axis_unit = [0] * n
                for sign in (1, -1):
                    axis_unit[axis] = sign
                    lo, hi = values[2 * box], values[2 * box + 1]
                    for how, new in (("shift", (_plus(lo, delta, axis_unit), _plus(hi, delta, axis_unit))),
                                     ("grow-max", (lo, _plus(hi, delta, axis_unit))),
                                     ("grow-min", (_plus(lo, delta, axis_unit), hi))):
                        out = list(values)
                        out[2 * box: 2 * box + 2] = new
                        yield f"box{box}-{how}-{axis}{'+' if sign > 0 else '-'}", out
        return
    first_segment = primitive.args[0][1].fields == ("p0", "p1")
    along = tuple(y - x for x, y in zip(values[0], values[1], strict=True)) if first_segment else values[1]
    for index, (_, shape) in enumerate(primitive.args):
        segment = shape.fields == ("p0", "p1")
        a, b = values[2 * index], values[2 * index + 1]
        if shape is BOX2:  # a 2D box: shifted whole or grown on one side, along an axis
            for unit in _AXES_2D:
                tag = f"{index}{'xy'[unit[1] != 0]}{'+' if sum(unit) > 0 else '-'}"
                for how, new in (("shift", (_plus(a, delta, unit), _plus(b, delta, unit))),
                                 ("grow-max", (a, _plus(b, delta, unit))), ("grow-min", (_plus(a, delta, unit), b))):
                    out = list(values)
                    out[2 * index: 2 * index + 2] = list(new)
                    yield f"box-{how}{tag}", out
            continue
        for sign in (1, -1):  # slid along the first input's direction: collinear inputs stay collinear
            slid = (_plus(a, sign * delta, along), _plus(b, sign * delta, along) if segment else b)
            out = list(values)
            out[2 * index: 2 * index + 2] = list(slid)
            yield f"slide{index}{'+' if sign > 0 else '-'}", out
        for unit in _AXES_2D:
            tag = f"{index}{'xy'[unit[1] != 0]}{'+' if sum(unit) > 0 else '-'}"
            options: list[tuple[str, tuple]] = [
                ("shift", (_plus(a, delta, unit), _plus(b, delta, unit) if segment else b)),
                ("tilt", (a, _plus(b, delta, unit))),
            ]
            if segment:
                options.append(("tilt-p0", (_plus(a, delta, unit), b)))
            for how, new in options:
                out = list(values)
                out[2 * index: 2 * index + 2] = list(new)
                yield f"{how}{tag}", out


def _field_moves(primitive: Primitive, values: Values, delta: Fraction) -> Iterator[tuple[str, Values]]:
    """Triangles, 3D rays and boxes: one field (a vertex, an origin, a direction, one box corner)
    or the whole input (every field but a direction) moved along an axis."""
    start = 0
    for index, (_, shape) in enumerate(primitive.args):
        own = range(start, start + len(shape.fields))
        start += len(shape.fields)
        whole = [k for k, field in zip(own, shape.fields, strict=True) if field != "direction"]
        groups = [(f"{field}{index}", [k]) for k, field in zip(own, shape.fields, strict=True)]
        groups += [(f"input{index}", whole)] if len(whole) > 1 else []
        for axis in range(shape.dim):
            for sign in (1, -1):
                unit = [0] * shape.dim
                unit[axis] = sign
                for name, chosen in groups:
                    out = list(values)
                    for k in chosen:
                        out[k] = _plus(values[k], delta, unit)
                    yield f"{name}-{'xyz'[axis]}{'+' if sign > 0 else '-'}", out


def near_misses(primitive: Primitive, values: Values, delta: Fraction,
                branch_of: Callable[[Values], str]) -> list[tuple[str, Values]]:
    """One move per branch it leads to, for the moves that change the scenario's branch."""
    base = branch_of(values)
    chosen: dict[str, tuple[str, Values]] = {}
    for name, moved in moves(primitive, values, delta):
        if any(Fraction(float(x)) != x for v in moved for x in v):
            continue  # a move double precision cannot hold (sliding along a direction with a tiny component)
        branch = branch_of(moved)
        if branch != base and branch not in chosen:
            chosen[branch] = (f"{name}-{branch}", moved)
    return list(chosen.values())

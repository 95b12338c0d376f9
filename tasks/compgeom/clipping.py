"""Exact clipping of a 2D linear component to a closed aligned box: the one algorithm the
segment, ray and line / aligned box references share.

The component ``origin + t*direction``, ``t`` in its own interval (``rational.Component``), meets
the box ``min <= x <= max`` where, on each axis, ``min[i] <= origin[i] + t*direction[i] <= max[i]``.
An axis the direction does not move along either holds for every ``t`` or for none; any other
axis holds on the interval between ``(min[i] - origin[i]) / direction[i]`` and
``(max[i] - origin[i]) / direction[i]``. Intersecting those intervals with the component's own
gives every result: empty (none), one value (point) or two ends (segment). Everything is
``fractions.Fraction``, so the expected outputs are exact.
"""

from __future__ import annotations

from fractions import Fraction

from .rational import Component, Exact2D, Vec, at


def clip(component: Component, box_min: Vec, box_max: Vec) -> Exact2D:
    """The contract's result for a component and a box; ``branch`` names the path taken (with an
    ``_axis`` suffix when the direction is parallel to an axis, so that test was decisive)."""
    if component.degenerate or box_min[0] > box_max[0] or box_min[1] > box_max[1]:
        return Exact2D("invalid", branch="invalid")
    lo: Fraction | None = component.lo
    hi: Fraction | None = component.hi
    axis_parallel = False
    for i in (0, 1):
        o, d = component.origin[i], component.direction[i]
        if d == 0:
            if o < box_min[i] or o > box_max[i]:
                return Exact2D("none", branch="parallel_outside")
            axis_parallel = True
            continue
        enter, leave = sorted(((box_min[i] - o) / d, (box_max[i] - o) / d))
        lo = enter if lo is None else max(lo, enter)
        hi = leave if hi is None else min(hi, leave)
    assert lo is not None and hi is not None  # a non-zero direction moves along some axis
    suffix = "_axis" if axis_parallel else ""
    if lo > hi:
        return Exact2D("none", branch="miss" + suffix)
    ts = (lo,) if lo == hi else (lo, hi)
    return Exact2D("point" if lo == hi else "segment", ts, (), tuple(at(component.origin, component.direction, t)
                                                                     for t in ts),
                   ("touch" if lo == hi else "overlap") + suffix)

"""Every "Differences from Geometric Tools" note of the CompGeom contracts, checked on its own input.

The functions below are small Python models of what Geometric Tools' 2D find-intersection
queries (`FIQuery`, GTE's Mathematics headers) do, written from reading them: the line/line
query every other query starts from (parallel when `DotPerp(d0, d1) == 0`, then the same line
when `DotPerp(q, d1) == 0`), the centred segment form (center, unit direction, half length),
the interval/interval query, and each primitive's use of them. No Geometric Tools code is in
the repository. Each test takes the concrete input a note names, checks that the contract
shows it, runs the model and the exact reference on it, and checks that they differ exactly
as the note says. `MAX` stands for `std::numeric_limits<T>::max()`: a huge number for `double`,
0 for the exact `BSRational` (the unspecialised `numeric_limits` returns `T()`).
"""

from __future__ import annotations

import math
from fractions import Fraction as Q
from typing import Any

import pytest

from gym_sysmath.tasks.compgeom.contract import contract_text
from gym_sysmath.tasks.compgeom.primitives import BY_NAME
from gym_sysmath.tasks.compgeom.reference import solve

V = tuple[Q, Q]
DOUBLE_MAX = Q(1.7976931348623157e308)
RATIONAL_MAX = Q(0)


def v(x: Any, y: Any) -> V:
    return (Q(x), Q(y))


def sub(a: V, b: V) -> V:
    return (a[0] - b[0], a[1] - b[1])


def add(a: V, b: V) -> V:
    return (a[0] + b[0], a[1] + b[1])


def mul(s: Q, a: V) -> V:
    return (s * a[0], s * a[1])


def dot(a: V, b: V) -> Q:
    return a[0] * b[0] + a[1] * b[1]


def dot_perp(a: V, b: V) -> Q:
    return a[0] * b[1] - a[1] * b[0]


def exact_sqrt(x: Q) -> Q:
    """The models only meet lengths that are rational (axis-aligned and 3-4-5 inputs)."""
    root = Q(math.isqrt(x.numerator), math.isqrt(x.denominator))
    assert root * root == x, f"the note's input should have a rational length, not sqrt({x})"
    return root


# --- models of the shared pieces ------------------------------------------------------------------


def gte_line_line(o0: V, d0: V, o1: V, d1: V) -> tuple:
    """("point", s0, s1) | ("none",) | ("same",): parallel on DotPerp(d0, d1) == 0, then the same
    line when DotPerp(q, d1) == 0 (q tested against the second direction)."""
    q = sub(o1, o0)
    den = dot_perp(d0, d1)
    if den != 0:
        return ("point", dot_perp(q, d1) / den, dot_perp(q, d0) / den)
    return ("same",) if dot_perp(q, d1) == 0 else ("none",)


def centred(p0: V, p1: V) -> tuple[V, V, Q]:
    """Segment's center, unit direction (zero for a zero-length segment) and half length."""
    d = sub(p1, p0)
    length = exact_sqrt(dot(d, d))
    return mul(Q(1, 2), add(p0, p1)), (mul(1 / length, d) if length else (Q(0), Q(0))), length / 2


def gte_intervals(i0: tuple[Q, Q], i1: tuple[Q, Q]) -> list[Q]:
    """The overlap of two closed intervals: [], [a] (touching or degenerate), or [lo, hi]."""
    if i0[1] < i1[0] or i0[0] > i1[1]:
        return []
    if i0[1] > i1[0]:
        if i0[0] < i1[1]:
            lo, hi = max(i0[0], i1[0]), min(i0[1], i1[1])
            return [lo, hi] if lo < hi else [lo]
        return [i0[0]]
    return [i0[1]]


# --- models of each query -------------------------------------------------------------------------


def gte_line2_line2(o0: V, d0: V, o1: V, d1: V) -> dict:
    ll = gte_line_line(o0, d0, o1, d1)
    if ll[0] == "point":
        return {"count": 1, "t0": [ll[1]], "t1": [ll[2]], "points": [add(o0, mul(ll[1], d0))]}
    return {"count": 0} if ll[0] == "none" else {"count": "infinite"}


def gte_line2_ray2(o: V, d: V, o1: V, d1: V) -> dict:
    ll = gte_line_line(o, d, o1, d1)
    if ll[0] == "point":
        return {"count": 1, "t0": [ll[1]], "t1": [ll[2]]} if ll[2] >= 0 else {"count": 0}
    return {"count": 0} if ll[0] == "none" else {"count": "infinite", "t1": [Q(0), DOUBLE_MAX]}


def gte_line2_segment2(o: V, d: V, p0: V, p1: V) -> dict:
    ll = gte_line_line(o, d, p0, sub(p1, p0))
    if ll[0] == "point":
        return {"count": 1, "t0": [ll[1]], "t1": [ll[2]]} if 0 <= ll[2] <= 1 else {"count": 0}
    if ll[0] == "none":
        return {"count": 0}
    return {"count": "infinite", "t0": [-DOUBLE_MAX, DOUBLE_MAX], "t1": [Q(0), Q(1)], "points": []}


def gte_ray2_ray2(o0: V, d0: V, o1: V, d1: V, maxT: Q = DOUBLE_MAX) -> dict:
    ll = gte_line_line(o0, d0, o1, d1)
    if ll[0] == "point":
        return {"count": 1, "t0": [ll[1]], "t1": [ll[2]]} if ll[1] >= 0 and ll[2] >= 0 else {"count": 0}
    if ll[0] == "none":
        return {"count": 0}
    t = dot(d0, sub(o1, o0))  # not divided by |d0|^2
    if dot(d0, d1) > 0:
        if t >= 0:
            return {"count": "infinite", "t0": [t, maxT], "t1": [Q(0), maxT], "points": [o1]}
        return {"count": "infinite", "t0": [Q(0), maxT], "t1": [-t, maxT], "points": [o0]}
    if t >= 0:
        return {"count": 2, "t0": [Q(0), t], "t1": [Q(0), t], "points": [o0, o1]}
    return {"count": 0}


def gte_ray2_segment2(o: V, d: V, p0: V, p1: V, maxT: Q = DOUBLE_MAX) -> dict:
    center, u, extent = centred(p0, p1)
    ll = gte_line_line(o, d, center, u)
    if ll[0] == "point":
        inside = ll[1] >= 0 and abs(ll[2]) <= extent
        return {"count": 1, "t0": [ll[1]], "t1": [ll[2]]} if inside else {"count": 0}
    if ll[0] == "none":
        return {"count": 0}
    t = dot(d, sub(center, o))  # the center's ray parameter only when |d| == 1
    overlap = gte_intervals((Q(0), maxT), (t - extent, t + extent))
    return {"count": len(overlap), "t0": overlap, "t1": [w - t for w in overlap],
            "points": [add(o, mul(w, d)) for w in overlap]}


def gte_segment2_segment2(p0: V, p1: V, q0: V, q1: V) -> dict:
    """The default (centred) query, `operator()`."""
    c0, u0, e0 = centred(p0, p1)
    c1, u1, e1 = centred(q0, q1)
    ll = gte_line_line(c0, u0, c1, u1)
    if ll[0] == "point":
        inside = abs(ll[1]) <= e0 and abs(ll[2]) <= e1
        return {"count": 1, "t0": [ll[1]], "t1": [ll[2]]} if inside else {"count": 0}
    if ll[0] == "none":
        return {"count": 0}
    t = dot(u0, sub(c1, c0))
    overlap = gte_intervals((-e0, e0), (t - e1, t + e1))
    return {"count": len(overlap), "t0": overlap, "t1": [w - t for w in overlap],
            "points": [add(c0, mul(w, u0)) for w in overlap]}


def gte_segment2_segment2_exact(p0: V, p1: V, q0: V, q1: V) -> dict:
    """`Exact()`: the end-point form, [0, 1] on each segment."""
    d0, d1 = sub(p1, p0), sub(q1, q0)
    ll = gte_line_line(p0, d0, q0, d1)
    if ll[0] == "point":
        inside = 0 <= ll[1] <= 1 and 0 <= ll[2] <= 1
        return {"count": 1, "t0": [ll[1]], "t1": [ll[2]]} if inside else {"count": 0}
    if ll[0] == "none":
        return {"count": 0}
    a, b = dot(d0, sub(q0, p0)) / dot(d0, d0), dot(d0, sub(q1, p0)) / dot(d0, d0)
    overlap = gte_intervals((Q(0), Q(1)), (min(a, b), max(a, b)))
    points = [add(p0, mul(w, d0)) for w in overlap]
    on_second = [dot(d1, sub(p, q0)) / dot(d1, d1) for p in points]
    if len(overlap) == 2 and b < a:
        on_second.reverse()  # sorted, no longer paired with the points
    return {"count": len(overlap), "t0": overlap, "t1": on_second, "points": points}


# --- the exact reference on the same input ----------------------------------------------------------


def ours(primitive: str, *fields: V):
    record = {arg: {f: list(fields[2 * i + k]) for k, f in enumerate(shape.fields)}
              for i, (arg, shape) in enumerate(BY_NAME[primitive].args)}
    return solve(primitive, record)


def shows(primitive: str, *snippets: str) -> None:
    text = " ".join(contract_text(primitive).split())
    for snippet in snippets:
        assert snippet in text, f"{primitive}'s contract should name {snippet!r}"


# --- ray2_segment2 ----------------------------------------------------------------------------------


def test_ray_segment_note_gte_parametrises_the_segment_in_centred_form():
    shows("ray2_segment2", "centred form", "(0, 0) along (1, 0) and the segment from (2, -1) to (2, 3)")
    gte = gte_ray2_segment2(v(0, 0), v(1, 0), v(2, -1), v(2, 3))
    here = ours("ray2_segment2", v(0, 0), v(1, 0), v(2, -1), v(2, 3))
    assert gte["t1"] == [-1] and here.t1 == (Q(1, 4),) and gte["t0"] == list(here.t0) == [2]


def test_ray_segment_note_gte_collinear_branch_assumes_a_unit_ray_direction():
    shows("ray2_segment2", "unit", "(0, 0) along (1/4, 0) and the segment from (-3, 0) to (-1, 0)")
    gte = gte_ray2_segment2(v(0, 0), v(Q(1, 4), 0), v(-3, 0), v(-1, 0))
    here = ours("ray2_segment2", v(0, 0), v(Q(1, 4), 0), v(-3, 0), v(-1, 0))
    assert here.kind == "none"
    assert gte["count"] == 2 and gte["t0"] == [0, Q(1, 2)]  # a segment, from a segment behind the ray


def test_ray_segment_note_gte_collinear_segment_parameters_are_measured_along_the_ray():
    shows("ray2_segment2", "(0, 0) along (1, 0) and the segment from (3, 0) to (1, 0)")
    gte = gte_ray2_segment2(v(0, 0), v(1, 0), v(3, 0), v(1, 0))
    here = ours("ray2_segment2", v(0, 0), v(1, 0), v(3, 0), v(1, 0))
    assert here.t0 == (1, 3) and here.t1 == (1, 0)
    assert gte["t0"] == [1, 3] and gte["t1"] == [-1, 1]  # increasing along the ray, centred


def test_ray_segment_note_with_rationals_the_collinear_ray_collapses_to_its_origin():
    shows("ray2_segment2", "BSRational", "max()", "(0, 0) along (1, 0) and the segment from (1, 0) to (3, 0)",
          "from (-1, 0) to (1, 0)")
    assert gte_ray2_segment2(v(0, 0), v(1, 0), v(1, 0), v(3, 0), RATIONAL_MAX)["count"] == 0
    assert ours("ray2_segment2", v(0, 0), v(1, 0), v(1, 0), v(3, 0)).kind == "segment"
    through = gte_ray2_segment2(v(0, 0), v(1, 0), v(-1, 0), v(1, 0), RATIONAL_MAX)
    assert through["count"] == 1 and through["points"] == [v(0, 0)]
    assert ours("ray2_segment2", v(0, 0), v(1, 0), v(-1, 0), v(1, 0)).t0 == (0, 1)
    assert gte_ray2_segment2(v(0, 0), v(1, 0), v(1, 0), v(3, 0))["count"] == 2  # with double: fine


# --- ray2_ray2 ------------------------------------------------------------------------------------


def test_ray_ray_note_facing_rays_second_parameters_are_not_paired_with_the_points():
    shows("ray2_ray2", "facing", "(0, 0) along (1, 0) and (3, 0) along (-1, 0)")
    gte = gte_ray2_ray2(v(0, 0), v(1, 0), v(3, 0), v(-1, 0))
    here = ours("ray2_ray2", v(0, 0), v(1, 0), v(3, 0), v(-1, 0))
    assert gte["points"] == [v(0, 0), v(3, 0)] and list(here.points) == [(0, 0), (3, 0)]
    assert gte["t1"] == [0, 3] and here.t1 == (3, 0)  # unit directions, still swapped


def test_ray_ray_note_collinear_parameter_is_not_divided_by_the_squared_length():
    shows("ray2_ray2", "dot(d0, q)")
    gte = gte_ray2_ray2(v(0, 0), v(3, 3), v(6, 6), v(1, 1))
    assert gte["t0"][0] == 36 and ours("ray2_ray2", v(0, 0), v(3, 3), v(6, 6), v(1, 1)).t0 == (2,)


# --- segment2_segment2 ------------------------------------------------------------------------------


def test_segment_segment_note_default_query_uses_the_centred_form():
    shows("segment2_segment2", "centred form", "from (0, 0) to (4, 0) and from (2, -1) to (2, 3)")
    gte = gte_segment2_segment2(v(0, 0), v(4, 0), v(2, -1), v(2, 3))
    here = ours("segment2_segment2", v(0, 0), v(4, 0), v(2, -1), v(2, 3))
    assert gte["t0"] == [0] and gte["t1"] == [-1] and (here.t0, here.t1) == ((Q(1, 2),), (Q(1, 4),))


def test_segment_segment_note_exact_sorts_the_second_segments_parameters():
    shows("segment2_segment2", "Exact()", "from (0, 0) to (4, 0) and from (6, 0) to (2, 0)")
    gte = gte_segment2_segment2_exact(v(0, 0), v(4, 0), v(6, 0), v(2, 0))
    here = ours("segment2_segment2", v(0, 0), v(4, 0), v(6, 0), v(2, 0))
    assert gte["points"] == [v(2, 0), v(4, 0)] and gte["t0"] == list(here.t0) == [Q(1, 2), 1]
    assert here.t1 == (1, Q(1, 2)) and gte["t1"] == [Q(1, 2), 1]
    default = gte_segment2_segment2(v(0, 0), v(4, 0), v(6, 0), v(2, 0))
    assert default["t1"] == [-2, 0]  # centred, measured along the first segment


# --- line2_segment2 ---------------------------------------------------------------------------------


def test_line_segment_note_gte_reports_no_collinear_end_points():
    shows("line2_segment2", "no end points", "(0, 0) along (1, 0) and the segment from (1, 0) to (3, 0)")
    gte = gte_line2_segment2(v(0, 0), v(1, 0), v(1, 0), v(3, 0))
    here = ours("line2_segment2", v(0, 0), v(1, 0), v(1, 0), v(3, 0))
    assert gte["count"] == "infinite" and gte["points"] == [] and gte["t0"] == [-DOUBLE_MAX, DOUBLE_MAX]
    assert here.kind == "segment" and here.t0 == (1, 3) and here.points == ((1, 0), (3, 0))


# --- degenerate inputs: which one Geometric Tools calls the same line -----------------------------------

LINE_LIKE = ((v(1, 1), v(0, 0), v(0, 0), v(1, 0)), (v(3, 0), v(0, 0), v(0, 0), v(1, 0)),
             (v(0, 0), v(1, 0), v(5, 5), v(0, 0)))
DEGENERATE = {
    # primitive: (first input zero, origin off the other line), (first zero, on it), (second zero, off)
    "line2_line2": LINE_LIKE,
    "line2_ray2": LINE_LIKE,
    "line2_segment2": ((v(1, 1), v(0, 0), v(0, 0), v(1, 0)), (v(3, 0), v(0, 0), v(0, 0), v(1, 0)),
                       (v(0, 0), v(1, 0), v(5, 5), v(5, 5))),
    "ray2_ray2": LINE_LIKE,
    "ray2_segment2": ((v(1, 1), v(0, 0), v(0, 0), v(1, 0)), (v(3, 0), v(0, 0), v(-1, 0), v(5, 0)),
                      (v(0, 0), v(1, 0), v(5, 5), v(5, 5))),
    "segment2_segment2": ((v(1, 1), v(1, 1), v(0, 0), v(1, 0)), (v(3, 0), v(3, 0), v(-1, 0), v(5, 0)),
                          (v(0, 0), v(4, 0), v(1, 3), v(1, 3))),
}
MODELS = {"line2_line2": gte_line2_line2, "line2_ray2": gte_line2_ray2, "line2_segment2": gte_line2_segment2,
          "ray2_ray2": gte_ray2_ray2, "ray2_segment2": gte_ray2_segment2, "segment2_segment2": gte_segment2_segment2}


def phrase(primitive: str, values: tuple[V, ...]) -> str:
    """How a note writes an input: 'origin (1, 1), direction (0, 0) and p0 (0, 0), p1 (1, 0)'."""
    def point(p: V) -> str:
        return "(" + ", ".join(str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"
                               for x in p) + ")"

    return " and ".join(f"{shape.fields[0]} {point(values[2 * i])}, {shape.fields[1]} {point(values[2 * i + 1])}"
                        for i, (_, shape) in enumerate(BY_NAME[primitive].args))


@pytest.mark.parametrize("primitive", sorted(DEGENERATE))
def test_degenerate_note_a_zero_second_input_is_the_same_line_a_zero_first_one_is_not(primitive):
    first_off, first_on, second_off = DEGENERATE[primitive]
    shows(primitive, "zero second", "zero first", *(phrase(primitive, x) for x in DEGENERATE[primitive]))
    model = MODELS[primitive]
    assert model(*first_off)["count"] == 0
    assert model(*first_on)["count"] != 0
    assert model(*second_off)["count"] != 0  # an off-line point or a zero direction, still "intersecting"
    assert all(ours(primitive, *values).kind == "invalid" for values in DEGENERATE[primitive])

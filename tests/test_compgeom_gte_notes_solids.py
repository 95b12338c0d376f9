"""The "Differences from Geometric Tools" notes of the triangle and 3D contracts, each on its input.

As in ``test_compgeom_gte_notes.py``: small Python models of Geometric Tools' queries, written
from reading its Mathematics headers (no Geometric Tools code is in the repository), run in
exact arithmetic next to the reference on the input each note names:

- ``TIQuery<Triangle2, Triangle2>``: a triangle is separated from another when, for some edge
  ``v[i0] -> v[i1]`` of one, ``WhichSide`` puts the other's vertices all on or beyond the
  line ``P + t*D``, ``P = v[i0]``, ``D = Perp(v[i1] - v[i0]) = (e.y, -e.x)``, with at least
  one strictly beyond (``Dot(D, v - P) > 0``), tested both ways round;
- ``FIQuery<Ray3, AlignedBox3>``: the box in centred form, Liang-Barsky ``Clip`` of the line
  from ``[-max(), max()]``, then the overlap with ``[0, +infinity)``; two parameters always;
- ``FIQuery<Segment3, Triangle3>``: the segment in centred form (unit direction, half length),
  "parallel" (no intersection) when ``Dot(D, N) == 0``, else the scaled barycentric test.

``MAX`` is ``std::numeric_limits<T>::max()``: huge for ``double``, 0 for ``BSRational``.
"""

from __future__ import annotations

import math
from fractions import Fraction as Q
from typing import Any

from gym_sysmath.tasks.compgeom.contract import contract_text
from gym_sysmath.tasks.compgeom.reference import solve

DOUBLE_MAX = Q(1.7976931348623157e308)
RATIONAL_MAX = Q(0)


def vec(*xs: Any) -> tuple[Q, ...]:
    return tuple(Q(x) for x in xs)


def sub(a: tuple, b: tuple) -> tuple:
    return tuple(x - y for x, y in zip(a, b, strict=True))


def dot(a: tuple, b: tuple) -> Q:
    return sum((x * y for x, y in zip(a, b, strict=True)), Q(0))


def cross(a: tuple, b: tuple) -> tuple:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def shows(primitive: str, *snippets: str) -> None:
    """The contract states the note with this input (line breaks aside)."""
    text = " ".join(contract_text(primitive).split())
    for snippet in snippets:
        assert snippet in text, f"{primitive}'s contract should show {snippet!r}"


# ---------------------------------------------------------------- models

def gte_triangle2_triangle2(t0: list[tuple], t1: list[tuple]) -> bool:
    def which_side(triangle: list[tuple], p: tuple, d: tuple) -> int:
        positive = negative = 0
        for vertex in triangle:
            t = dot(d, sub(vertex, p))
            if t > 0:
                positive += 1
            elif t < 0:
                negative += 1
            if positive and negative:
                return 0
        return 1 if positive > 0 else -1

    def separated(a: list[tuple], b: list[tuple]) -> bool:
        for i0, i1 in ((2, 0), (0, 1), (1, 2)):
            e = sub(a[i1], a[i0])
            if which_side(b, a[i0], (e[1], -e[0])) > 0:
                return True
        return False

    return not separated(t0, t1) and not separated(t1, t0)


def gte_ray3_aligned_box3(o: tuple, d: tuple, lo: tuple, hi: tuple, max_t: Q = DOUBLE_MAX) -> dict:
    center = tuple((a + b) / 2 for a, b in zip(lo, hi, strict=True))
    extent = tuple((b - a) / 2 for a, b in zip(lo, hi, strict=True))
    origin = sub(o, center)
    t = [-max_t, max_t]

    def clip(denom: Q, numer: Q) -> bool:
        if denom > 0:
            if numer > denom * t[1]:
                return False
            if numer > denom * t[0]:
                t[0] = numer / denom
            return True
        if denom < 0:
            if numer > denom * t[0]:
                return False
            if numer > denom * t[1]:
                t[1] = numer / denom
            return True
        return numer <= 0

    if not all(clip(sign * d[i], -sign * origin[i] - extent[i]) for i in range(3) for sign in (1, -1)):
        return {"count": 0}
    t0, t1 = (t[0], t[1]) if t[1] > t[0] else (t[0], t[0])
    if t1 < 0:  # the overlap of [t0, t1] with [0, +infinity)
        return {"count": 0}
    start = max(t0, Q(0))
    params = [start, t1] if start < t1 else [start, start]
    return {"count": 2 if start < t1 else 1, "parameter": params,
            "point": [tuple(oi + s * di for oi, di in zip(o, d, strict=True)) for s in params]}


def exact_length(v: tuple) -> Q:
    """The models only meet axis-aligned segments, whose length is rational."""
    squared = dot(v, v)
    root = Q(math.isqrt(squared.numerator), math.isqrt(squared.denominator))
    assert root * root == squared, "the note's segment should have a rational length"
    return root


def gte_segment3_triangle3(p0: tuple, p1: tuple, v0: tuple, v1: tuple, v2: tuple) -> dict:
    center = tuple((a + b) / 2 for a, b in zip(p0, p1, strict=True))
    length = exact_length(sub(p1, p0))
    direction = tuple(x / length for x in sub(p1, p0)) if length > 0 else (Q(0),) * 3  # Normalize
    extent = length / 2
    diff, e1, e2 = sub(center, v0), sub(v1, v0), sub(v2, v0)
    normal = cross(e1, e2)
    ddn = dot(direction, normal)
    if ddn == 0:
        return {"intersect": False}  # "parallel", even in the plane
    sign = 1 if ddn > 0 else -1
    ddn = abs(ddn)
    b1, b2 = sign * dot(direction, cross(diff, e2)), sign * dot(direction, cross(e1, diff))
    qdn = -sign * dot(diff, normal)
    if b1 >= 0 and b2 >= 0 and b1 + b2 <= ddn and -extent * ddn <= qdn <= extent * ddn:
        return {"intersect": True, "parameter": qdn / ddn}
    return {"intersect": False}


# ---------------------------------------------------------------- triangle2_triangle2

def triangles(*points: tuple) -> dict:
    return {"triangle0": {f"v{k}": list(points[k]) for k in range(3)},
            "triangle1": {f"v{k}": list(points[3 + k]) for k in range(3)}}


def test_triangle_note_gte_calls_touching_triangles_separated():
    shows("triangle2_triangle2", "triangle0 (0, 0), (2, 0), (0, 2) and triangle1 (2, 0), (4, 0), (3, 2)",
          "triangle0 (0, 0), (2, 0), (0, 2) and triangle1 (2, 0), (2, 2), (0, 2)")
    for points in ((vec(0, 0), vec(2, 0), vec(0, 2), vec(2, 0), vec(4, 0), vec(3, 2)),
                   (vec(0, 0), vec(2, 0), vec(0, 2), vec(2, 0), vec(2, 2), vec(0, 2))):
        assert gte_triangle2_triangle2(list(points[:3]), list(points[3:])) is False
        assert solve("triangle2_triangle2", triangles(*points)).kind == "intersect"


def test_triangle_note_gte_misreads_clockwise_triangles():
    shows("triangle2_triangle2", "two copies of the clockwise triangle (0, 0), (0, 1), (1, 0)")
    clockwise = [vec(0, 0), vec(0, 1), vec(1, 0)]
    assert gte_triangle2_triangle2(clockwise, clockwise) is False
    assert solve("triangle2_triangle2", triangles(*clockwise, *clockwise)).kind == "intersect"
    counterclockwise = clockwise[::-1]
    assert gte_triangle2_triangle2(counterclockwise, counterclockwise) is True  # the model reads CCW right


def test_triangle_note_gte_does_not_check_degenerate_triangles():
    shows("triangle2_triangle2", "triangle0 (0, 0), (1, 1), (2, 2) and triangle1 (0, 0), (1, 0), (0, 1)")
    points = (vec(0, 0), vec(1, 1), vec(2, 2), vec(0, 0), vec(1, 0), vec(0, 1))
    assert gte_triangle2_triangle2(list(points[:3]), list(points[3:])) is True
    assert solve("triangle2_triangle2", triangles(*points)).kind == "invalid"


def test_triangle_note_both_triangles_edges_are_needed():
    shows("triangle2_triangle2", "triangle0 (0, 0), (2, 0), (1, 2) and triangle1 (-2, 3), (4, 3), (1, 6)")
    t0, t1 = [vec(0, 0), vec(2, 0), vec(1, 2)], [vec(-2, 3), vec(4, 3), vec(1, 6)]
    assert solve("triangle2_triangle2", triangles(*t0, *t1)).kind == "none"
    one_way = not any(  # no edge of triangle0 has triangle1 strictly beyond it
        all((1 if dot_perp2(sub(t0[1], t0[0]), sub(t0[2], t0[0])) > 0 else -1)
            * dot_perp2(sub(t0[(k + 1) % 3], t0[k]), sub(p, t0[k])) < 0 for p in t1) for k in range(3))
    assert one_way


def dot_perp2(a: tuple, b: tuple) -> Q:
    return a[0] * b[1] - a[1] * b[0]


# ---------------------------------------------------------------- ray3_aligned_box3

def ray_box(o: tuple, d: tuple, lo: tuple, hi: tuple) -> dict:
    return {"ray": {"origin": list(o), "direction": list(d)}, "aligned_box": {"min": list(lo), "max": list(hi)}}


def test_ray_box_note_gte_fills_two_slots_for_one_point():
    o, d, lo, hi = vec(-1, 1, 1), vec(1, 1, 0), vec(0, 0, 0), vec(2, 2, 2)  # touches the edge at (0, 2, 1)
    gte = gte_ray3_aligned_box3(o, d, lo, hi)
    assert gte["count"] == 1 and gte["parameter"] == [1, 1] and gte["point"][0] == gte["point"][1]
    ours = solve("ray3_aligned_box3", ray_box(o, d, lo, hi))
    assert ours.kind == "point" and ours.t == (1,)


def test_ray_box_note_with_rationals_the_line_collapses_before_any_face():
    shows("ray3_aligned_box3", "the ray from (-2, 1, 1) along (1, 0, 0) and the box from (0, 0, 0) to (2, 2, 2)",
          "`t = [2, 4]`")
    args = (vec(-2, 1, 1), vec(1, 0, 0), vec(0, 0, 0), vec(2, 2, 2))
    assert gte_ray3_aligned_box3(*args, max_t=RATIONAL_MAX)["count"] == 0
    assert gte_ray3_aligned_box3(*args)["parameter"] == [2, 4]  # with double's max() it agrees
    ours = solve("ray3_aligned_box3", ray_box(*args))
    assert ours.kind == "segment" and ours.t == (2, 4)


def test_ray_box_note_gte_keeps_the_whole_line_for_a_zero_direction():
    shows("ray3_aligned_box3", "the zero direction at (1, 1, 1) and the box from (0, 0, 0) to (2, 2, 2)")
    args = (vec(1, 1, 1), vec(0, 0, 0), vec(0, 0, 0), vec(2, 2, 2))
    gte = gte_ray3_aligned_box3(*args)
    assert gte["count"] == 2 and gte["parameter"] == [0, DOUBLE_MAX] and gte["point"] == [args[0], args[0]]
    assert solve("ray3_aligned_box3", ray_box(*args)).kind == "invalid"


# ---------------------------------------------------------------- segment3_triangle3

TRIANGLE = (vec(0, 0, 0), vec(4, 0, 0), vec(0, 4, 0))


def segment_triangle(p0: tuple, p1: tuple) -> dict:
    return {"segment": {"p0": list(p0), "p1": list(p1)},
            "triangle": {f"v{k}": list(TRIANGLE[k]) for k in range(3)}}


def test_segment_triangle_note_gte_never_intersects_a_coplanar_segment():
    shows("segment3_triangle3", "the segment from (1, 1, 0) to (2, 1, 0) and the triangle (0, 0, 0), (4, 0, 0), "
          "(0, 4, 0)", "`t = [0, 1]`")
    p0, p1 = vec(1, 1, 0), vec(2, 1, 0)
    assert gte_segment3_triangle3(p0, p1, *TRIANGLE) == {"intersect": False}
    ours = solve("segment3_triangle3", segment_triangle(p0, p1))
    assert ours.kind == "segment" and ours.t == (0, 1)


def test_segment_triangle_note_gte_parametrises_the_segment_in_centred_form():
    shows("segment3_triangle3", "the segment from (1, 1, -1) to (1, 1, 1)", "`t = 1/2`")
    p0, p1 = vec(1, 1, -1), vec(1, 1, 1)
    assert gte_segment3_triangle3(p0, p1, *TRIANGLE) == {"intersect": True, "parameter": 0}
    ours = solve("segment3_triangle3", segment_triangle(p0, p1))
    assert ours.kind == "point" and ours.t == (Q(1, 2),)


def test_segment_triangle_note_gte_calls_a_zero_length_segment_parallel():
    shows("segment3_triangle3", "the segment from (1, 1, 0) to (1, 1, 0)")
    p = vec(1, 1, 0)
    assert gte_segment3_triangle3(p, p, *TRIANGLE) == {"intersect": False}
    assert solve("segment3_triangle3", segment_triangle(p, p)).kind == "invalid"

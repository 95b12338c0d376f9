"""The triangle and 3D primitives: references against hand-worked answers and invariances, the good
Python fixtures against the references, the results records, and the exactness tracker.

``triangle2_triangle2`` (a test query), ``ray3_aligned_box3`` and ``segment3_triangle3`` (the 3D
family: parameters on the first input and 3D points). Random inputs are on a quarter grid, so
every product is exact and the good fixture, computing in double, must agree exactly.
"""

from __future__ import annotations

from fractions import Fraction as Q
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gym_sysmath.tasks.compgeom.cases import _transform_vec, build_cases, exact_case, make_case
from gym_sysmath.tasks.compgeom.exactness import Tracked, inexact
from gym_sysmath.tasks.compgeom.grading import compare, stdin_for
from gym_sysmath.tasks.compgeom.inprocess import failure, load_source
from gym_sysmath.tasks.compgeom.layout import fixture_path
from gym_sysmath.tasks.compgeom.primitives import BY_NAME
from gym_sysmath.tasks.compgeom.reference import solve
from gym_sysmath.tasks.compgeom.variants import scaled

SOLIDS = ("triangle2_triangle2", "ray3_aligned_box3", "segment3_triangle3")
quarters = st.integers(-12, 12).map(lambda k: Q(k, 4))
small = st.integers(-2, 2).map(Q)


def record(primitive: str, values: list[tuple[Q, ...]]) -> dict[str, Any]:
    fields = iter(values)
    return {arg: {f: list(next(fields)) for f in shape.fields} for arg, shape in BY_NAME[primitive].args}


def ref(primitive: str, *values: Any):
    return solve(primitive, record(primitive, [tuple(Q(x) for x in v) for v in values]))


@st.composite
def configuration(draw: Any, primitive: str) -> list[tuple[Q, ...]]:
    """Field values: points on a quarter grid, small directions, boxes often flat or touching."""
    out = []
    for _, shape in BY_NAME[primitive].args:
        if shape.fields == ("min", "max"):
            lo = tuple(draw(st.integers(-2, 2).map(Q)) for _ in range(3))
            out += [lo, tuple(x + draw(st.integers(-1, 3).map(Q)) for x in lo)]
        else:
            out += [tuple(draw(small if f == "direction" else quarters) for _ in range(shape.dim))
                    for f in shape.fields]
    return out


@pytest.fixture(scope="module")
def good() -> dict[str, Any]:
    return {p: load_source(fixture_path(p, "good.py").read_text(encoding="utf-8"), p) for p in SOLIDS}


# --- each branch, by hand ------------------------------------------------------------------------


def test_triangles_touching_count_and_orientation_does_not_matter():
    assert ref("triangle2_triangle2", (0, 0), (2, 0), (0, 2), (2, 0), (4, 0), (3, 2)).branch == "touch"
    assert ref("triangle2_triangle2", (0, 0), (0, 2), (2, 0), (3, 2), (4, 0), (2, 0)).branch == "touch"
    assert ref("triangle2_triangle2", (0, 0), (4, 0), (0, 4), (2, "17/8"), (5, 3), (3, 5)).kind == "none"
    assert ref("triangle2_triangle2", (0, 0), (8, 0), (0, 8), (1, 1), (2, 1), (1, 2)).branch == "overlap"
    assert ref("triangle2_triangle2", (0, 0), (1, 1), (2, 2), (0, 0), (1, 0), (0, 1)).kind == "invalid"


def test_ray_box_clips_at_the_origin_and_reports_one_entry_for_a_touch():
    inside = ref("ray3_aligned_box3", (1, 1, 1), (1, 0, 0), (0, 0, 0), (2, 2, 2))
    assert (inside.kind, inside.t, inside.points) == ("segment", (0, 1), ((1, 1, 1), (2, 1, 1)))
    edge = ref("ray3_aligned_box3", (-1, 1, 1), (1, 1, 0), (0, 0, 0), (2, 2, 2))
    assert (edge.kind, edge.t, edge.points) == ("point", (1,), ((0, 2, 1),))
    assert ref("ray3_aligned_box3", (3, 1, 1), (1, 0, 0), (0, 0, 0), (2, 2, 2)).branch == "behind"
    assert ref("ray3_aligned_box3", (2, 1, 1), (1, 0, 0), (0, 0, 0), (2, 2, 2)).branch == "touch_origin"
    assert ref("ray3_aligned_box3", (1, 1, 1), (1, 0, 0), (0, 0, 0), (1, -1, 1)).kind == "invalid"


def test_segment_triangle_crossing_touching_and_coplanar_clipping():
    cross = ref("segment3_triangle3", (1, 1, -1), (1, 1, 3), (0, 0, 0), (4, 0, 0), (0, 4, 0))
    assert (cross.kind, cross.t, cross.points) == ("point", (Q(1, 4),), ((1, 1, 0),))
    assert ref("segment3_triangle3", (2, 0, -1), (2, 0, 1), (0, 0, 0), (4, 0, 0), (0, 4, 0)).branch == "touch"
    clipped = ref("segment3_triangle3", (-1, 1, 0), (5, 1, 0), (0, 0, 0), (4, 0, 0), (0, 4, 0))
    assert (clipped.kind, clipped.t) == ("segment", (Q(1, 6), Q(2, 3)))
    corner = ref("segment3_triangle3", (6, 0, 0), (4, 0, 0), (0, 0, 0), (4, 0, 0), (0, 4, 0))
    assert (corner.kind, corner.t, corner.points) == ("point", (1,), ((4, 0, 0),))
    assert ref("segment3_triangle3", (0, 0, 1), (3, 1, 1), (0, 0, 0), (4, 0, 0), (0, 4, 0)).branch == "parallel"


# --- invariances ------------------------------------------------------------------------------------


@pytest.mark.parametrize("primitive", SOLIDS)
@settings(max_examples=80, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_axis_symmetries_translation_and_reordering_keep_the_branch_and_parameters(primitive, data, seed):
    import numpy as np

    values = data.draw(configuration(primitive))
    moved = _transform_vec(BY_NAME[primitive], values, np.random.default_rng(seed))
    r, s = solve(primitive, record(primitive, values)), solve(primitive, record(primitive, moved))
    assert r.branch == s.branch
    if primitive == "ray3_aligned_box3":  # a direction rescaled by k divides t by k
        pairs = zip(sorted(map(abs, values[1])), sorted(map(abs, moved[1])), strict=True)
        scale = next((b / a for a, b in pairs if a != 0), Q(1))
        assert s.t == tuple(t / scale for t in r.t)
    if primitive == "segment3_triangle3":  # a reversed segment maps t to 1 - t
        assert s.t in (r.t, tuple(1 - t for t in reversed(r.t)))


@pytest.mark.parametrize("primitive", SOLIDS)
@settings(max_examples=60, deadline=None)
@given(data=st.data(), exponent=st.integers(-30, 30))
def test_power_of_two_scaling_keeps_branch_and_parameters_and_scales_points(primitive, data, exponent):
    values = data.draw(configuration(primitive))
    r = solve(primitive, record(primitive, values))
    s = solve(primitive, record(primitive, scaled(values, exponent)))
    assert (r.branch, r.kind) == (s.branch, s.kind)
    if primitive != "triangle2_triangle2":
        factor = Q(2) ** exponent
        assert s.t == r.t and s.points == tuple(tuple(x * factor for x in p) for p in r.points)


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_swapping_or_reversing_triangles_changes_nothing(data):
    values = data.draw(configuration("triangle2_triangle2"))
    r = solve("triangle2_triangle2", record("triangle2_triangle2", values))
    for other in (values[3:] + values[:3], values[2::-1] + values[3:]):
        assert solve("triangle2_triangle2", record("triangle2_triangle2", other)).branch == r.branch


@pytest.mark.parametrize("primitive", ["ray3_aligned_box3", "segment3_triangle3"])
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_reported_points_are_on_the_first_input_at_their_parameters_and_in_the_solid(primitive, data):
    values = data.draw(configuration(primitive))
    r = solve(primitive, record(primitive, values))
    o = values[0]
    d = values[1] if primitive == "ray3_aligned_box3" else tuple(b - a for a, b in zip(values[0], values[1],
                                                                                        strict=True))
    assert r.t == tuple(sorted(r.t)) and len(r.t) == len(r.points) == {"point": 1, "segment": 2}.get(r.kind, 0)
    for t, point in zip(r.t, r.points, strict=True):
        assert point == tuple(a + t * b for a, b in zip(o, d, strict=True)) and t >= 0
        if primitive == "ray3_aligned_box3":
            assert all(lo <= x <= hi for x, lo, hi in zip(point, values[2], values[3], strict=True))
        else:
            assert t <= 1
            v0, v1, v2 = values[2:]
            inside = ref("segment3_triangle3", point, tuple(x + y for x, y in zip(point, (0, 0, 1), strict=True)),
                         v0, v1, v2)  # a short probe through the point: on the triangle or in its plane
            assert inside.kind != "none" or inside.branch == "coplanar_none"


# --- the good fixture, records and exactness ---------------------------------------------------------


@pytest.mark.parametrize("primitive", SOLIDS)
@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_good_python_fixture_agrees_with_the_reference(primitive, data, good):
    case = make_case(BY_NAME[primitive], "drawn", data.draw(configuration(primitive)))
    assert inexact(primitive, case.input) is None
    assert failure(good[primitive], case) is None


@pytest.mark.parametrize("primitive", SOLIDS)
def test_a_records_lists_follow_the_family_and_a_stray_list_is_ill_formed(primitive):
    cases = build_cases(primitive)["public"][:3]
    assert stdin_for(cases).splitlines()[1].count(" ") + 1 == sum(
        shape.dim * len(shape.fields) for _, shape in BY_NAME[primitive].args)
    lines = []
    for index, case in enumerate(cases):
        lists = [[x for e in case.expected[name] for x in (e if width > 1 else [e])]
                 for name, width in BY_NAME[primitive].family.lists]
        lines.append(" ".join(["R", str(index), case.expected["kind"],
                               *(f"{len(v) // w} " + " ".join(map(repr, v)) if v else "0"
                                 for v, (_, w) in zip(lists, BY_NAME[primitive].family.lists, strict=True))]))
    good_stdout = "\n".join([*lines, f"END {len(cases)}"]) + "\n"
    assert compare(cases, good_stdout).ok
    forged = good_stdout.replace(f"R 0 {cases[0].expected['kind']}", f"R 0 {cases[0].expected['kind']} 1 0.5", 1)
    assert not compare(cases, forged).well_formed


def test_tracked_numbers_flag_a_rounded_product_and_let_quotients_round():
    wide = 1 + 2.0 ** -40
    triangles = {"triangle0": {"v0": [0.0, 0.0], "v1": [wide, 1.0], "v2": [1.0, wide]},
                 "triangle1": {"v0": [0.0, 0.0], "v1": [1.0, 0.0], "v2": [0.0, 1.0]}}
    assert "*" in inexact("triangle2_triangle2", triangles)
    ray = {"ray": {"origin": [2.0 ** -60, 0.0, 0.0], "direction": [3.0, 1.0, 1.0]},
           "aligned_box": {"min": [1.0, 0.0, 0.0], "max": [2.0, 2.0, 2.0]}}
    assert "-" in inexact("ray3_aligned_box3", ray)  # 1 - 2^-60 rounds
    ray["ray"]["origin"] = [0.0, 0.0, 0.0]
    assert inexact("ray3_aligned_box3", ray) is None  # 1/3 rounds, which the contract allows
    assert float(Tracked(0.5) * 3) == 1.5 and type(Tracked(1.0) / 3) is float


@pytest.mark.parametrize("primitive", SOLIDS)
def test_every_shipped_case_is_exact_and_every_branch_is_hidden(primitive):
    cases = build_cases(primitive)
    assert all(exact_case(c) for v in ("public", "hidden") for c in cases[v])
    assert {c.branch for c in cases["hidden"]} >= {c.branch for c in cases["public"]}


def test_verify_can_be_restricted_to_named_primitives_and_refuses_unknown_ones():
    from gym_sysmath.cli import build_parser

    args = build_parser().parse_args(["verify", "compgeom", "--primitive", "ray3_aligned_box3",
                                      "--primitive", "segment3_triangle3"])
    assert args.primitive == ["ray3_aligned_box3", "segment3_triangle3"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["verify", "compgeom", "--primitive", "ray3_aligned_box"])

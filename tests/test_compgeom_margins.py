"""CompGeom's hidden margins: tolerances fail, variants keep branches, everything stays exact in double."""

from __future__ import annotations

import math
from fractions import Fraction as Q
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gym_sysmath.tasks.compgeom import PRIMITIVES
from gym_sysmath.tasks.compgeom.cases import Case, _branch, _scenarios, exact_case, load_cases, make_case
from gym_sysmath.tasks.compgeom.exactness import inexact
from gym_sysmath.tasks.compgeom.fixtures import MUTATIONS, good_source
from gym_sysmath.tasks.compgeom.primitives import BY_NAME
from gym_sysmath.tasks.compgeom.reference import solve
from gym_sysmath.tasks.compgeom.tolerances import EPS, SIZES, TOLERANCES, uncaught
from gym_sysmath.tasks.compgeom.variants import DELTA_EXPONENTS, SCALE_EXPONENTS, near_misses, scaled

PRIMITIVES_2D = tuple(p for p in PRIMITIVES if BY_NAME[p].family.name == "2d" and not BY_NAME[p].clips_box)
TOLERANCE_KINDS = {"aligned_box_aligned_box": {"touch"}, "line2_line2": {"parallel", "collinear"},
                   **{p: {"parallel", "touch", "interval"} for p in
                      ("segment2_aligned_box2", "ray2_aligned_box2", "line2_aligned_box2", "ray3_aligned_box3")},
                   "triangle2_triangle2": {"degenerate", "touch"},
                   "segment3_triangle3": {"parallel", "coplanar", "interval", "touch"}}


def hidden(primitive: str) -> tuple[Case, ...]:
    return load_cases(primitive, "hidden")


def vectors(primitive: str, case: Case) -> tuple[tuple[Q, Q], tuple[Q, Q], tuple[Q, Q]]:
    """d0, d1 and q of a 2D case, exactly."""
    out = []
    for arg, shape in BY_NAME[primitive].args:
        a, b = (tuple(Q(x) for x in case.input[arg][f]) for f in shape.fields)
        out.append((a, (b[0] - a[0], b[1] - a[1]) if shape.fields == ("p0", "p1") else b))
    (o0, d0), (o1, d1) = out
    return d0, d1, (o1[0] - o0[0], o1[1] - o0[1])


def perp(a: tuple[Q, Q], b: tuple[Q, Q]) -> Q:
    return a[0] * b[1] - a[1] * b[0]


def dot(a: tuple[Q, Q], b: tuple[Q, Q]) -> Q:
    return a[0] * b[0] + a[1] * b[1]


# --- every tolerance fails -----------------------------------------------------------------------


@pytest.mark.parametrize("primitive", PRIMITIVES)
def test_every_tolerance_candidate_fails_a_hidden_case_at_every_size(primitive):
    assert uncaught(primitive, good_source(primitive, "python"), hidden(primitive)) == []


@pytest.mark.parametrize("primitive", PRIMITIVES)
def test_without_the_margin_variants_tolerances_would_pass(primitive):
    """The scaled and near-miss variants are what catches them: the corpus without them (the one
    before issue 14) lets a tolerance of 1e-12 through for every primitive."""
    plain = tuple(c for c in hidden(primitive) if "-near" not in c.id and "-scale" not in c.id)
    passing = uncaught(primitive, good_source(primitive, "python"), plain)
    assert any(item.endswith(f"at {SIZES[0]:g}") for item in passing)


@pytest.mark.parametrize("primitive", PRIMITIVES)
def test_every_primitive_has_a_tolerance_candidate_of_each_kind_as_a_bad_fixture(primitive):
    names = {m.name for m in TOLERANCES[primitive]}
    kinds = {name.split("_")[1] for name in names}
    assert kinds >= TOLERANCE_KINDS.get(primitive, {"parallel", "collinear", "interval"})
    assert names <= {m.name for m in MUTATIONS[primitive]}
    assert all(EPS in text for m in TOLERANCES[primitive] for text in
               (e[1] for edits in m.edits.values() for e in edits if "include" not in e[0]))


# --- the margins the corpus reaches ---------------------------------------------------------------


@pytest.mark.parametrize("primitive", PRIMITIVES_2D)
def test_nearly_parallel_and_nearly_collinear_inputs_come_within_1e_12_of_the_inputs_scale(primitive):
    sines, offsets, absolute = [], [], []
    for case in hidden(primitive):
        d0, d1, q = vectors(primitive, case)
        if case.branch == "invalid":
            continue
        den = perp(d0, d1)
        if den != 0 and case.expected["kind"] == "point":
            sines.append(math.sqrt(den * den / (dot(d0, d0) * dot(d1, d1))))
            absolute.append(abs(den))
        elif den == 0 and perp(q, d0) != 0 and q != (0, 0):
            offsets.append(math.sqrt(perp(q, d0) ** 2 / (dot(q, q) * dot(d0, d0))))
    assert 0 < min(sines) < 1e-12 and 0 < min(offsets) < 1e-12 and 0 < min(absolute) < 1e-12


@pytest.mark.parametrize("primitive", ["line2_ray2", "line2_segment2", "ray2_ray2", "ray2_segment2",
                                       "segment2_segment2"])
def test_some_crossing_parameter_misses_its_interval_by_less_than_1e_12(primitive):
    misses = []
    bounds = [(None if shape.type_name == "Line2" else Q(0), Q(1) if shape.fields == ("p0", "p1") else None)
              for _, shape in BY_NAME[primitive].args]
    for case in hidden(primitive):
        if case.branch != "cross_miss":
            continue
        d0, d1, q = vectors(primitive, case)
        den = perp(d0, d1)
        for t, (lo, hi) in zip((perp(q, d1) / den, perp(q, d0) / den), bounds, strict=True):
            misses += [lo - t] if lo is not None and t < lo else []
            misses += [t - hi] if hi is not None and t > hi else []
    assert 0 < min(misses) < 1e-12


def test_some_boxes_miss_touching_by_less_than_1e_12_of_their_coordinates():
    gaps = []
    for case in hidden("aligned_box_aligned_box"):
        if case.branch != "separated":
            continue
        a, b = case.input["box0"], case.input["box1"]
        for lo, hi in ((a["max"], b["min"]), (b["max"], a["min"])):
            gaps += [(y - x) / max(abs(x), abs(y)) for x, y in zip(lo, hi, strict=True) if y > x]
    assert 0 < min(gaps) < 1e-12


def test_hidden_ids_show_each_scale_and_each_near_miss_size():
    for primitive in PRIMITIVES:
        ids = [c.id for c in hidden(primitive)]
        for k in SCALE_EXPONENTS:
            assert any(f"-scale{k:+d}" in i for i in ids), (primitive, k)
        for k in DELTA_EXPONENTS:
            assert any(f"-near{k}-" in i for i in ids), (primitive, k)


# --- exactness ------------------------------------------------------------------------------------


@pytest.mark.parametrize("primitive", PRIMITIVES)
def test_every_shipped_case_is_exact_in_double(primitive):
    for case in load_cases(primitive, "public") + hidden(primitive):
        assert exact_case(case), case.id


def test_exactness_names_a_product_that_double_precision_rounds():
    wide = 1 + 2.0 ** -40  # (1 + 2^-40)^2 needs 81 bits
    case_input = {"segment0": {"p0": [0.0, 0.0], "p1": [wide, 1.0]},
                  "segment1": {"p0": [0.0, 1.0], "p1": [1.0, wide]}}
    assert inexact("segment2_segment2", case_input) == "perp(d0, d1)"  # 2^-40 + 2^-80 - 1
    case_input["segment1"] = {"p0": [0.0, 1.0], "p1": [wide, 1.0 + wide]}
    assert inexact("segment2_segment2", case_input) == "a product in perp(d0, d1)"  # wide * wide
    case = make_case(BY_NAME["segment2_segment2"], "wide", [(0, 0), (Q(wide), 1), (0, 1), (1, Q(wide))])
    assert not exact_case(case)
    assert inexact("segment2_segment2", {"segment0": {"p0": [0.0, 0.0], "p1": [4.0, 0.0]},
                                         "segment1": {"p0": [1.0, 2.0 ** -42], "p1": [3.0, 0.0]}}) is None


# --- the variants keep what they claim --------------------------------------------------------------

quarters = st.integers(-16, 16).map(lambda k: Q(k, 4))
points = st.tuples(quarters, quarters)


@st.composite
def configuration(draw: Any, primitive: str) -> list[tuple[Q, ...]]:
    """Field values of a 2D case: generic, parallel or collinear."""
    a0, b0 = draw(points), draw(points)
    mode = draw(st.sampled_from(["generic", "parallel", "collinear"]))
    d0 = (b0[0] - a0[0], b0[1] - a0[1])
    if mode == "generic":
        a1, b1 = draw(points), draw(points)
    else:
        u, k = draw(quarters), draw(st.sampled_from([Q(-2), Q(-1, 2), Q(1, 2), Q(1), Q(3, 2)]))
        a1 = (a0[0] + u * d0[0], a0[1] + u * d0[1]) if mode == "collinear" else draw(points)
        b1 = (a1[0] + k * d0[0], a1[1] + k * d0[1])
    out = []
    for (a, b), (_, shape) in zip(((a0, b0), (a1, b1)), BY_NAME[primitive].args, strict=True):
        out += [a, b] if shape.fields == ("p0", "p1") else [a, (b[0] - a[0], b[1] - a[1])]
    return out


def record(primitive: str, values: list[tuple[Q, ...]]) -> dict[str, Any]:
    return {arg: {f: list(values[2 * i + k]) for k, f in enumerate(shape.fields)}
            for i, (arg, shape) in enumerate(BY_NAME[primitive].args)}


@pytest.mark.parametrize("primitive", PRIMITIVES_2D)
@settings(max_examples=60, deadline=None)
@given(data=st.data(), exponent=st.integers(-30, 30))
def test_power_of_two_scaling_keeps_branch_and_parameters_and_scales_points(primitive, data, exponent):
    values = data.draw(configuration(primitive))
    r = solve(primitive, record(primitive, values))
    s = solve(primitive, record(primitive, scaled(values, exponent)))
    factor = Q(2) ** exponent
    assert (r.branch, r.kind, r.t0, r.t1) == (s.branch, s.kind, s.t0, s.t1)
    assert s.points == tuple((x * factor, y * factor) for x, y in r.points)


@pytest.mark.parametrize("primitive", PRIMITIVES)
@settings(max_examples=25, deadline=None)
@given(data=st.data(), k=st.sampled_from(DELTA_EXPONENTS))
def test_a_near_miss_moves_one_input_by_delta_and_changes_the_branch(primitive, data, k):
    prim = BY_NAME[primitive]
    name, values = data.draw(st.sampled_from(_scenarios(prim)))
    delta = Q(1, 2 ** k)
    base = _branch(prim, values)
    for move, moved in near_misses(prim, values, delta, lambda v: _branch(prim, v)):
        assert _branch(prim, moved) != base and move.endswith(_branch(prim, moved))
        owner = [index for index, (_, shape) in enumerate(prim.args) for _ in shape.fields]
        changed = [owner[i] for i, (a, b) in enumerate(zip(values, moved, strict=True)) if a != b]
        assert len(set(changed)) == 1, (name, move)
        steps = {abs(x - y) for a, b in zip(values, moved, strict=True) for x, y in zip(a, b, strict=True)} - {0}
        assert all(step % delta == 0 and step <= 4 * delta for step in steps), (name, move, steps)

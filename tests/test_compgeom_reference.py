"""CompGeom's exact references, contracts and case corpus: every branch, the symmetries, currency."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from fractions import Fraction as Q
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gym_sysmath.tasks.compgeom import PRIMITIVES, build, load_tasks
from gym_sysmath.tasks.compgeom.build import generated_files, main
from gym_sysmath.tasks.compgeom.cases import COMMAND, REACHABLE, load_cases, make_case
from gym_sysmath.tasks.compgeom.contract import contract_text
from gym_sysmath.tasks.compgeom.fixtures import MUTATIONS, bad_sources
from gym_sysmath.tasks.compgeom.grading import _check
from gym_sysmath.tasks.compgeom.languages import LANGUAGES
from gym_sysmath.tasks.compgeom.layout import case_path, contract_path, fixture_path
from gym_sysmath.tasks.compgeom.primitives import BY_NAME
from gym_sysmath.tasks.compgeom.rational import at, sub
from gym_sysmath.tasks.compgeom.reference import solve
from gym_sysmath.tasks.compgeom.rounding import out_of_range

PRIMITIVES_2D = tuple(p for p in PRIMITIVES if BY_NAME[p].family.name == "2d" and not BY_NAME[p].clips_box)
"""Two linear inputs (the box clipping primitives have their own tests, test_compgeom_box_clip.py, and
the triangle and 3D ones test_compgeom_solids.py)."""


def case_input(primitive: str, *values: Any) -> dict[str, Any]:
    """A case input from the four field values (pairs or coordinate lists) in argument order."""
    out: dict[str, Any] = {}
    for index, (arg, shape) in enumerate(BY_NAME[primitive].args):
        out[arg] = {field: [Q(x) for x in values[2 * index + k]] for k, field in enumerate(shape.fields)}
    return out


def ref(primitive: str, *values: Any):
    return solve(primitive, case_input(primitive, *values))


# --- each branch, by hand ------------------------------------------------------------------------


def test_line_line_cross_reports_both_parameters_and_the_point():
    r = ref("line2_line2", (0, 0), (2, 0), (3, -1), (0, 4))
    assert (r.kind, r.t0, r.t1, r.points) == ("point", (Q(3, 2),), (Q(1, 4),), ((3, 0),))


@pytest.mark.parametrize(("values", "kind"), [
    (((0, 0), (1, 2), (1, 0), (-2, -4)), "none"),      # parallel, opposite directions
    (((0, 0), (1, 1), (5, 5), (-3, -3)), "line"),      # coincident, opposite directions
    (((0, 0), (0, 0), (1, 0), (1, 1)), "invalid"),     # zero direction
    (((0, 0), (1, 0), (0, 0), (0, 0)), "invalid"),     # zero direction through the other's origin
])
def test_line_line_non_crossing_kinds(values, kind):
    r = ref("line2_line2", *values)
    assert r.kind == kind and r.t0 == r.t1 == r.points == ()


def test_line_ray_counts_the_ray_origin_and_reports_the_whole_collinear_ray():
    touch = ref("line2_ray2", (0, 0), (1, 0), (3, 0), (1, 1))
    assert (touch.kind, touch.t0, touch.t1, touch.branch) == ("point", (3,), (0,), "cross_touch")
    assert ref("line2_ray2", (0, 0), (1, 0), (3, Q(1, 8)), (0, 1)).kind == "none"
    ray = ref("line2_ray2", (0, 0), (4, 0), (2, 0), (-1, 0))
    assert (ray.kind, ray.t0, ray.t1, ray.points) == ("ray", (Q(1, 2),), (0,), ((2, 0),))


def test_line_segment_collinear_endpoints_follow_the_line():
    along = ref("line2_segment2", (0, 0), (2, 0), (1, 0), (3, 0))
    against = ref("line2_segment2", (0, 0), (2, 0), (3, 0), (1, 0))
    assert (along.kind, along.t0, along.t1) == ("segment", (Q(1, 2), Q(3, 2)), (0, 1))
    assert (against.kind, against.t0, against.t1) == ("segment", (Q(1, 2), Q(3, 2)), (1, 0))
    assert against.points == ((1, 0), (3, 0))


def test_line_segment_ends_count_and_degenerate_segment_is_invalid_even_on_the_line():
    assert ref("line2_segment2", (0, 0), (1, 0), (2, 4), (2, 0)).t1 == (1,)
    assert ref("line2_segment2", (0, 0), (1, 0), (2, 4), (2, Q(1, 8))).kind == "none"
    assert ref("line2_segment2", (0, 0), (1, 0), (2, 0), (2, 0)).kind == "invalid"


def test_ray_ray_collinear_cases_divide_by_the_squared_direction_length():
    ahead = ref("ray2_ray2", (0, 0), (3, 3), (6, 6), (1, 1))
    assert (ahead.kind, ahead.t0, ahead.t1, ahead.points) == ("ray", (2,), (0,), ((6, 6),))
    behind = ref("ray2_ray2", (0, 0), (2, 0), (-3, 0), (1, 0))
    assert (behind.kind, behind.t0, behind.t1) == ("ray", (0,), (3,))
    facing = ref("ray2_ray2", (0, 0), (Q(1, 2), 0), (4, 0), (-3, 0))
    assert (facing.kind, facing.t0, facing.t1) == ("segment", (0, 8), (Q(4, 3), 0))


def test_opposite_rays_sharing_an_origin_meet_in_one_point_and_facing_away_in_none():
    shared = ref("ray2_ray2", (1, 1), (1, 1), (1, 1), (-2, -2))
    assert (shared.kind, shared.t0, shared.t1, shared.points) == ("point", (0,), (0,), ((1, 1),))
    assert ref("ray2_ray2", (0, 0), (1, 0), (-1, 0), (-1, 0)).kind == "none"


def test_ray_ray_crossing_needs_both_parameters_non_negative():
    assert ref("ray2_ray2", (0, 0), (1, 0), (0, -2), (0, 1)).branch == "cross_touch"
    assert ref("ray2_ray2", (0, 0), (1, 0), (-2, -2), (0, 1)).kind == "none"
    assert ref("ray2_ray2", (0, 0), (1, 0), (2, 2), (0, 1)).kind == "none"


def test_ray_segment_collinear_overlap_clips_at_the_ray_origin_with_true_segment_parameters():
    straddle = ref("ray2_segment2", (0, 0), (2, 0), (2, 0), (-2, 0))
    assert (straddle.kind, straddle.t0, straddle.t1) == ("segment", (0, 1), (Q(1, 2), 0))
    touch = ref("ray2_segment2", (0, 0), (1, 0), (0, 0), (-2, 0))
    assert (touch.kind, touch.t0, touch.t1) == ("point", (0,), (0,))
    assert ref("ray2_segment2", (0, 0), (1, 0), (-3, 0), (-1, 0)).kind == "none"


def test_segment_segment_collinear_opposite_parameters_decrease_along_the_first():
    r = ref("segment2_segment2", (0, 0), (4, 0), (6, 0), (2, 0))
    assert (r.kind, r.t0, r.t1, r.points) == ("segment", (Q(1, 2), 1), (1, Q(1, 2)), ((2, 0), (4, 0)))
    end_to_end = ref("segment2_segment2", (0, 0), (2, 0), (5, 0), (2, 0))
    assert (end_to_end.kind, end_to_end.t0, end_to_end.t1) == ("point", (1,), (1,))
    assert ref("segment2_segment2", (0, 0), (1, 0), (2, 0), (3, 0)).branch == "collinear_none_same"


def test_boxes_are_closed_so_touching_gives_a_flat_overlap():
    r = ref("aligned_box_aligned_box", (0, 0, 0), (1, 1, 1), (1, 1, 0), (2, 2, 1))
    assert (r.kind, r.min, r.max, r.branch) == ("box", (1, 1, 0), (1, 1, 1), "touch")
    gap = ref("aligned_box_aligned_box", (0, 0), (1, 1), (Q(9, 8), 0), (2, 1))
    assert (gap.kind, gap.min, gap.max) == ("none", (), ())


def test_box_invalid_wins_over_separated_and_flat_boxes_are_valid():
    assert ref("aligned_box_aligned_box", (0, 0), (1, 1), (5, 5), (4, 6)).kind == "invalid"
    point = ref("aligned_box_aligned_box", (0, 0), (1, 1), (1, 1), (1, 1))
    assert (point.kind, point.min, point.max) == ("box", (1, 1), (1, 1))


# --- properties over random dyadic inputs -----------------------------------------------------

quarters = st.integers(-16, 16).map(lambda k: Q(k, 4))
points = st.tuples(quarters, quarters)
small = st.integers(-3, 3).map(Q)
directions = st.tuples(small, small)
factors = st.sampled_from([Q(-2), Q(-1), Q(-1, 2), Q(1, 2), Q(1), Q(3, 2), Q(2)])


@st.composite
def configurations(draw: Any, primitive: str) -> tuple[Any, ...]:
    """Field values of a 2D case: generic, parallel or collinear, built from two points per input."""
    a0, d0 = draw(points), draw(directions)
    b0 = (a0[0] + d0[0], a0[1] + d0[1])
    mode = draw(st.sampled_from(["generic", "parallel", "collinear"]))
    if mode == "generic":
        a1, b1 = draw(points), draw(points)
    elif mode == "parallel":
        a1, k = draw(points), draw(factors)
        b1 = (a1[0] + k * d0[0], a1[1] + k * d0[1])
    else:
        u, v = draw(quarters), draw(quarters)
        a1, b1 = (a0[0] + u * d0[0], a0[1] + u * d0[1]), (a0[0] + v * d0[0], a0[1] + v * d0[1])
    out = []
    for (a, b), (_, shape) in zip(((a0, b0), (a1, b1)), BY_NAME[primitive].args, strict=True):
        out += [a, b] if shape.fields == ("p0", "p1") else [a, sub(b, a)]
    return tuple(out)


def _component(primitive: str, index: int, values: tuple[Any, ...]):
    """(origin, direction, lo, hi) of input ``index``, None for an infinite end."""
    shape = BY_NAME[primitive].args[index][1]
    a, b = values[2 * index], values[2 * index + 1]
    if shape.fields == ("p0", "p1"):
        return a, sub(b, a), 0, 1
    return a, b, (None if shape.type_name == "Line2" else 0), None


@pytest.mark.parametrize("primitive", PRIMITIVES_2D)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_reported_points_lie_on_both_inputs_at_their_parameters(primitive, data):
    values = data.draw(configurations(primitive))
    r = ref(primitive, *values)
    counts = {"invalid": 0, "none": 0, "line": 0, "point": 1, "ray": 1, "segment": 2}
    assert len(r.t0) == len(r.t1) == len(r.points) == counts[r.kind]
    for index, ts in enumerate((r.t0, r.t1)):
        origin, direction, lo, hi = _component(primitive, index, values)
        for t, point in zip(ts, r.points, strict=True):
            assert at(origin, direction, t) == point
            assert (lo is None or t >= lo) and (hi is None or t <= hi)
    if r.kind == "segment":
        assert r.t0[0] < r.t0[1]


@pytest.mark.parametrize("primitive", ["line2_line2", "ray2_ray2", "segment2_segment2"])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_swapping_two_inputs_of_one_type_swaps_the_parameters(primitive, data):
    values = data.draw(configurations(primitive))
    r, s = ref(primitive, *values), ref(primitive, *values[2:], *values[:2])
    assert r.kind == s.kind
    order = sorted(range(len(s.t0)), key=lambda i: s.t1[i])  # s listed along its own first input
    assert r.t0 == tuple(s.t1[i] for i in order) and r.t1 == tuple(s.t0[i] for i in order)
    assert r.points == tuple(s.points[i] for i in order)


@pytest.mark.parametrize("primitive", PRIMITIVES_2D)
@settings(max_examples=100, deadline=None)
@given(data=st.data(), shift=points)
def test_translation_changes_neither_kind_nor_parameters(primitive, data, shift):
    values = data.draw(configurations(primitive))
    def move(p: tuple[Q, Q]) -> tuple[Q, Q]:
        return (p[0] + shift[0], p[1] + shift[1])

    moved = []
    for index, (_, shape) in enumerate(BY_NAME[primitive].args):
        a, b = values[2 * index], values[2 * index + 1]
        moved += [move(a), move(b)] if shape.fields == ("p0", "p1") else [move(a), b]
    r, s = ref(primitive, *values), ref(primitive, *moved)
    assert (r.kind, r.t0, r.t1) == (s.kind, s.t0, s.t1)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), k=factors)
def test_rescaling_the_second_line_direction_divides_its_parameter(data, k):
    values = data.draw(configurations("line2_line2"))
    r = ref("line2_line2", *values)
    s = ref("line2_line2", values[0], values[1], values[2], (k * values[3][0], k * values[3][1]))
    assert (r.kind, r.t0, r.points) == (s.kind, s.t0, s.points)
    assert s.t1 == tuple(t / k for t in r.t1)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_reversing_the_segment_maps_its_parameters_to_one_minus(data):
    values = data.draw(configurations("line2_segment2"))
    r = ref("line2_segment2", *values)
    s = ref("line2_segment2", values[0], values[1], values[3], values[2])
    assert (r.kind, r.t0, r.points) == (s.kind, s.t0, s.points)
    assert s.t1 == tuple(1 - t for t in r.t1)


boxes = st.integers(1, 4).flatmap(lambda n: st.tuples(*[st.lists(st.integers(-3, 3), min_size=n, max_size=n)] * 4))


@settings(max_examples=200, deadline=None)
@given(boxes)
def test_box_intersection_is_commutative_and_inside_both(box):
    a_min, a_max, b_min, b_max = box
    r = ref("aligned_box_aligned_box", a_min, a_max, b_min, b_max)
    s = ref("aligned_box_aligned_box", b_min, b_max, a_min, a_max)
    assert (r.kind, r.min, r.max) == (s.kind, s.min, s.max)
    if r.kind == "box":
        assert all(max(x, y) <= lo <= hi <= min(u, v) for x, y, lo, hi, u, v in
                   zip(a_min, b_min, r.min, r.max, a_max, b_max, strict=True))


# --- the known-good Python fixtures agree with the exact reference ------------------------------


@functools.cache
def good_module(primitive: str) -> ModuleType:
    """The fixture file as a module (registered, since dataclasses look their module up)."""
    name = f"compgeom_good_{primitive}"
    spec = importlib.util.spec_from_file_location(name, fixture_path(primitive, "good.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_python_candidate(module: ModuleType, primitive: str, values: tuple[Any, ...]) -> tuple[str, list]:
    """What the harness would print for the candidate, as (kind, lists) for ``_check``."""
    prim = BY_NAME[primitive]
    args = []
    for index, (_, shape) in enumerate(prim.args):
        f0, f1 = shape.fields
        make = (lambda v: [float(x) for x in v]) if prim.is_box else (lambda v: module.Vec2(float(v[0]), float(v[1])))
        args.append(getattr(module, shape.type_name)(**{f0: make(values[2 * index]), f1: make(values[2 * index + 1])}))
    result = getattr(module, primitive)(*args)
    if prim.is_box:
        return result.kind.value, [list(result.overlap.min), list(result.overlap.max)]
    return result.kind.value, [list(result.t0), list(result.t1), [c for p in result.points for c in p]]


@pytest.mark.parametrize("primitive", PRIMITIVES_2D)
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_good_python_fixture_agrees_with_the_reference(primitive, data):
    values = data.draw(configurations(primitive))
    case = make_case(BY_NAME[primitive], "h", values)
    assert _check(case, *run_python_candidate(good_module(primitive), primitive, values)) is None


@settings(max_examples=200, deadline=None)
@given(boxes)
def test_good_python_box_fixture_agrees_with_the_reference(box):
    values = tuple(tuple(Q(x) for x in v) for v in box)
    case = make_case(BY_NAME["aligned_box_aligned_box"], "h", values)
    module = good_module("aligned_box_aligned_box")
    assert _check(case, *run_python_candidate(module, "aligned_box_aligned_box", values)) is None


# --- the shipped corpus -------------------------------------------------------------------------


def test_generated_files_are_current():
    assert main(["--check"]) == 0


def test_check_fails_on_a_stale_or_a_stray_file(monkeypatch, capsys):
    real = build.generated_files()
    first = next(iter(real))
    monkeypatch.setattr(build, "generated_files", lambda: {**real, first: real[first] + "edited"})
    assert main(["--check"]) == 1
    monkeypatch.setattr(build, "generated_files", lambda: {p: t for p, t in real.items() if p != first})
    assert main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "stale:" in err and "stray:" in err


def test_a_bad_fixture_in_the_source_tree_is_stray(monkeypatch, tmp_path):
    """Bad fixtures are made on demand: a leftover file (an old checkout) is reported, not shipped."""
    leftover = tmp_path / PRIMITIVES[0] / "fixtures" / "bad_touching_separated.py"
    leftover.parent.mkdir(parents=True)
    leftover.write_text("old\n", encoding="utf-8")
    (tmp_path / PRIMITIVES[0] / "fixtures" / "good.py").write_text("kept\n", encoding="utf-8")
    monkeypatch.setattr(build, "ROOT", tmp_path)
    assert build._stray({}) == [leftover]


def test_fixtures_writes_the_bad_fixtures_that_verify_runs(tmp_path):
    assert main(["--fixtures", str(tmp_path)]) == 0
    written = {p.relative_to(tmp_path): p.read_text(encoding="utf-8") for p in tmp_path.rglob("*") if p.is_file()}
    made = {Path(p, "fixtures", name): text for p in PRIMITIVES for language in LANGUAGES
            for name, text in bad_sources(p, language).items()}
    assert written == made and len(made) == len(LANGUAGES) * sum(len(MUTATIONS[p]) for p in PRIMITIVES)
    assert all(COMMAND in text.split("\n", 1)[0] and "Bug: " in text.split("\n", 2)[1] for text in made.values())


@pytest.mark.parametrize("primitive", PRIMITIVES)
def test_every_expectation_is_the_reference_output_of_its_own_input(primitive):
    for visibility in ("public", "hidden"):
        for case in load_cases(primitive, visibility):
            values = [[Q(x) for x in case.input[arg][field]] for arg, shape in BY_NAME[primitive].args
                      for field in shape.fields]
            again = make_case(BY_NAME[primitive], case.id, values)
            assert (again.expected, again.branch) == (case.expected, case.branch), case.id


@pytest.mark.parametrize("primitive", PRIMITIVES)
def test_corpus_sizes_coverage_and_disjointness(primitive):
    public, hidden = load_cases(primitive, "public"), load_cases(primitive, "hidden")
    assert 10 <= len(public) <= 20 and 150 <= len(hidden) <= 600
    assert {c.branch for c in hidden} == REACHABLE[primitive]
    ids = [c.id for c in public + hidden]
    assert len(set(ids)) == len(ids)
    key = lambda c: json.dumps(c.input, sort_keys=True)  # noqa: E731
    assert not {key(c) for c in public} & {key(c) for c in hidden}
    kinds = {c.expected["kind"] for c in public}
    assert kinds >= {"invalid", "none"} and len(kinds) >= 3


@pytest.mark.parametrize("primitive", PRIMITIVES)
def test_inputs_are_dyadic_and_within_the_scaled_range(primitive):
    for case in load_cases(primitive, "public") + load_cases(primitive, "hidden"):
        for arg in case.input.values():
            for values in arg.values():
                for x in values:
                    assert isinstance(x, float) and not out_of_range(x)  # the range the contracts state
                    denominator = Q(x).denominator
                    assert denominator & (denominator - 1) == 0 and denominator <= 2 ** 80


def _float_perp(a: tuple[float, float], b: tuple[float, float]) -> float:
    return a[0] * b[1] - a[1] * b[0]


@pytest.mark.parametrize("primitive", PRIMITIVES_2D)
def test_every_hidden_perp_is_exact_in_double(primitive):
    """Independent of exactness.py: the three perps every solution forms, in floats, are the
    rational values, so `== 0` and the signs decide exactly as the reference does."""
    for case in load_cases(primitive, "hidden"):
        args = BY_NAME[primitive].args
        (o0, f0), (o1, f1) = ((tuple(case.input[arg][f] for f in shape.fields)) for arg, shape in args)
        segment0, segment1 = (shape.fields == ("p0", "p1") for _, shape in BY_NAME[primitive].args)
        d0 = (f0[0] - o0[0], f0[1] - o0[1]) if segment0 else tuple(f0)
        d1 = (f1[0] - o1[0], f1[1] - o1[1]) if segment1 else tuple(f1)
        q = (o1[0] - o0[0], o1[1] - o0[1])
        exact = {name: tuple(Q(x) - (Q(y) if minus else 0) for x, y in zip(f, o, strict=True))
                 for name, f, o, minus in (("d0", f0, o0, segment0), ("d1", f1, o1, segment1), ("q", o1, o0, True))}
        for (a, b), names in (((d0, d1), ("d0", "d1")), ((q, d0), ("q", "d0")), ((q, d1), ("q", "d1"))):
            ea, eb = exact[names[0]], exact[names[1]]
            assert Q(_float_perp(a, b)) == ea[0] * eb[1] - ea[1] * eb[0], (case.id, names)


def test_case_files_name_the_regenerating_command():
    for primitive in PRIMITIVES:
        for visibility in ("public", "hidden"):
            header = json.loads(case_path(primitive, visibility).read_text(encoding="utf-8"))
            assert header["generated_by"] == COMMAND == "python -m gym_sysmath.tasks.compgeom.build"
            assert (header["primitive"], header["visibility"]) == (primitive, visibility)


def test_every_generated_text_file_starts_with_the_command_or_carries_it():
    for path, text in generated_files().items():
        assert COMMAND in text.split("\n", 3)[0] + text[:300], path


@pytest.mark.parametrize("primitive", PRIMITIVES)
def test_contract_is_the_reference_docstring_plus_conventions_in_ascii(primitive):
    markdown = contract_path(primitive).read_text(encoding="utf-8")
    assert contract_text(primitive) in markdown and markdown.isascii()
    assert "Geometric Tools" in markdown and "invalid" in markdown


def test_task_prompts_carry_contract_and_starter_and_are_ascii():
    tasks = load_tasks()
    assert [t.task_id for t in tasks[:3]] == ["aligned_box_aligned_box/cpp", "aligned_box_aligned_box/rust",
                                              "aligned_box_aligned_box/python"]
    assert len(tasks) == 3 * len(PRIMITIVES) == len({t.task_id for t in tasks})
    for task in tasks:
        assert task.contract in task.prompt and task.starter in task.prompt
        assert task.prompt.isascii() and "Generated by" not in task.prompt

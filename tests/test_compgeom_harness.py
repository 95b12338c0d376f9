"""CompGeom harnesses and grading: what a run must print to pass, and what cannot pass.

The grading tests feed ``compare`` hand-made stdout; the end-to-end tests compile the generated
harnesses with every fixture through the local runner (host g++, rustc, python), once each.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace

import pytest

from gym_sysmath.tasks.compgeom import (
    LANGUAGES,
    PRIMITIVES,
    check_fixtures,
    compare,
    describe_failures,
    job_files,
    load_tasks,
    reference_solution,
    run_local,
    stdin_for,
)
from gym_sysmath.tasks.compgeom.cases import Case, load_cases
from gym_sysmath.tasks.compgeom.fixtures import MUTATIONS
from gym_sysmath.tasks.compgeom.primitives import BY_NAME

SEGMENTS = load_cases("segment2_segment2", "public")
BOXES = load_cases("aligned_box_aligned_box", "public")


def record(index: int, case: Case, **override: object) -> str:
    """The record a correct candidate prints for ``case`` (fields may be overridden)."""
    e = {**case.expected, **override}
    parts = ["R", str(index), str(e["kind"])]
    names = ("min", "max") if BY_NAME[case.primitive].is_box else ("t0", "t1", "points")
    for name in names:
        values = e[name]
        flat = [c for point in values for c in point] if name == "points" else values
        parts += [str(len(values)), *map(repr, flat)]
    return " ".join(parts)


def perfect(cases: tuple[Case, ...]) -> list[str]:
    return [record(i, c) for i, c in enumerate(cases)] + [f"END {len(cases)}"]


def text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


# --- stdin carries inputs only ------------------------------------------------------------------


def test_stdin_is_a_count_then_one_line_of_input_numbers_per_case():
    lines = stdin_for(SEGMENTS).splitlines()
    assert lines[0] == str(len(SEGMENTS)) and len(lines) == len(SEGMENTS) + 1
    first = SEGMENTS[0].input
    assert [float(x) for x in lines[1].split()] == [*first["segment0"]["p0"], *first["segment0"]["p1"],
                                                    *first["segment1"]["p0"], *first["segment1"]["p1"]]
    box_line = stdin_for(BOXES).splitlines()[1].split()
    assert int(box_line[0]) == len(BOXES[0].input["box0"]["min"]) and len(box_line) == 1 + 4 * int(box_line[0])


def test_stdin_does_not_depend_on_the_expectations():
    blanked = tuple(replace(c, expected={"kind": "none", "t0": [], "t1": [], "points": []}) for c in SEGMENTS)
    assert stdin_for(blanked) == stdin_for(SEGMENTS)


# --- compare: the passing shape, and every way to miss it ---------------------------------------


def test_exact_records_pass():
    for cases in (SEGMENTS, BOXES):
        report = compare(cases, text(perfect(cases)))
        assert report.ok and report.passed == report.total == len(cases)


def test_a_trailing_newline_is_optional_but_nothing_else_is():
    assert compare(SEGMENTS, "\n".join(perfect(SEGMENTS))).ok
    assert not compare(SEGMENTS, text(perfect(SEGMENTS)) + "\n").well_formed


def test_forged_records_with_guessed_values_fail_their_cases():
    lines = perfect(SEGMENTS)
    lines[:-1] = [f"R {i} none 0 0 0" for i in range(len(SEGMENTS))]
    report = compare(SEGMENTS, text(lines))
    assert report.well_formed and report.passed == sum(c.expected["kind"] == "none" for c in SEGMENTS)
    assert not report.ok


def test_early_exit_fails_the_whole_run():
    lines = perfect(SEGMENTS)
    report = compare(SEGMENTS, text(lines[:3]))
    assert (report.well_formed, report.passed) == (False, 0)
    assert not compare(SEGMENTS, "").well_formed


def test_a_missing_or_wrong_trailer_fails_the_whole_run():
    lines = perfect(SEGMENTS)
    assert not compare(SEGMENTS, text(lines[:-1])).well_formed
    assert not compare(SEGMENTS, text([*lines[:-1], f"END {len(SEGMENTS) + 1}"])).well_formed


def test_duplicated_records_fail_the_whole_run():
    lines = perfect(SEGMENTS)
    assert not compare(SEGMENTS, text([lines[0], *lines])).well_formed
    assert not compare(SEGMENTS, text([lines[0], lines[0], *lines[2:]])).well_formed


def test_reordered_records_fail_the_whole_run():
    lines = perfect(SEGMENTS)
    lines[0], lines[1] = lines[1], lines[0]
    assert not compare(SEGMENTS, text(lines)).well_formed


@pytest.mark.parametrize("where", [0, 5, -1])
def test_a_stray_debug_line_anywhere_fails_the_whole_run(where):
    lines = perfect(SEGMENTS)
    lines.insert(where if where >= 0 else len(lines), "debug: t0 = 0.5")
    report = compare(SEGMENTS, text(lines))
    assert not report.well_formed and report.passed == 0 and "debug" in report.failures[0][1]


def test_text_glued_onto_a_record_fails_the_whole_run():
    lines = perfect(SEGMENTS)
    lines[2] += " 1.0"
    assert not compare(SEGMENTS, text(lines)).well_formed
    lines = perfect(SEGMENTS)
    lines[2] = lines[2].replace(" ", "  ", 1)
    assert not compare(SEGMENTS, text(lines)).well_formed


def test_crlf_line_endings_fail_the_whole_run():
    assert not compare(SEGMENTS, "\r\n".join(perfect(SEGMENTS)) + "\r\n").well_formed


@pytest.mark.parametrize("token", ["1_0", "0x1p-2", "1.0f", "", "--1", "1e", "one"])
def test_tokens_python_float_would_accept_or_garbage_are_not_numbers(token):
    point = next(i for i, c in enumerate(SEGMENTS) if c.expected["kind"] == "point")
    lines = perfect(SEGMENTS)
    fields = lines[point].split(" ")
    fields[4] = token
    lines[point] = " ".join(fields)
    assert not compare(SEGMENTS, text(lines)).well_formed


@pytest.mark.parametrize("value", ["nan", "NaN", "-nan", "inf", "-inf"])
def test_non_finite_numbers_fail_their_case(value):
    point = next(i for i, c in enumerate(SEGMENTS) if c.expected["kind"] == "point")
    lines = perfect(SEGMENTS)
    fields = lines[point].split(" ")
    fields[4] = value
    lines[point] = " ".join(fields)
    report = compare(SEGMENTS, text(lines))
    assert report.well_formed and report.passed == len(SEGMENTS) - 1
    assert report.failures[0][0] == SEGMENTS[point].id


def test_wrong_list_lengths_fail_the_case_even_with_the_right_kind():
    point = next(i for i, c in enumerate(SEGMENTS) if c.expected["kind"] == "point")
    case = SEGMENTS[point]
    lines = perfect(SEGMENTS)
    lines[point] = record(point, case, t1=[*case.expected["t1"], 0.0])
    report = compare(SEGMENTS, text(lines))
    assert report.well_formed and report.failures == ((case.id, "t1: expected 1 entries, got 2"),)


def test_an_error_record_fails_only_its_case():
    lines = perfect(SEGMENTS)
    lines[1] = "E 1"
    report = compare(SEGMENTS, text(lines))
    assert report.well_formed and report.passed == len(SEGMENTS) - 1
    assert report.failures[0][0] == SEGMENTS[1].id and "raised" in report.failures[0][1]


def test_numbers_match_within_a_tight_relative_tolerance():
    point = next(i for i, c in enumerate(SEGMENTS) if c.expected["kind"] == "point" and c.expected["t0"][0])
    case = SEGMENTS[point]
    t0 = case.expected["t0"][0]
    for factor, ok in ((1 + 1e-12, True), (1 + 1e-7, False)):
        lines = perfect(SEGMENTS)
        lines[point] = record(point, case, t0=[t0 * factor])
        assert compare(SEGMENTS, text(lines)).ok is ok


def test_box_records_compare_min_and_max():
    box = next(i for i, c in enumerate(BOXES) if c.expected["kind"] == "box")
    lines = perfect(BOXES)
    lines[box] = record(box, BOXES[box], min=BOXES[box].expected["max"])
    report = compare(BOXES, text(lines))
    assert report.well_formed and report.failures[0][0] == BOXES[box].id


def test_failure_descriptions_show_public_inputs():
    lines = perfect(SEGMENTS)
    lines[0] = "E 0"
    shown = describe_failures(compare(SEGMENTS, text(lines)), SEGMENTS)
    assert SEGMENTS[0].id in shown and "segment0" in shown


# --- end to end through the host toolchains -----------------------------------------------------

LABELS = [f"{p}/{lang}/{fixture}" for p in PRIMITIVES for lang in LANGUAGES
          for fixture in ("good", *(m.name for m in MUTATIONS[p]), "starter")]


@pytest.fixture(scope="module")
def verify_report():
    return check_fixtures(run_local, max_workers=os.cpu_count() or 1)


def test_verify_runs_every_fixture_once(verify_report):
    assert [r.label for r in verify_report.results] == LABELS
    assert verify_report.count(good=True) == (3 * len(PRIMITIVES), 3 * len(PRIMITIVES))
    bad_ok, bad_total = verify_report.count(good=False)
    assert bad_ok == bad_total >= 42
    assert verify_report.ok, "\n".join(verify_report.lines())


@pytest.mark.parametrize("label", LABELS)
def test_fixture_verdict(verify_report, label):
    """good: passes every case; bad_*: compiles, well-formed, fails a hidden case; starter: 0 passed."""
    result = next(r for r in verify_report.results if r.label == label)
    assert result.ok, result.detail


def test_every_primitive_has_a_bad_fixture_in_each_language():
    assert all(len(MUTATIONS[p]) >= 1 and all(set(m.edits) == set(LANGUAGES) for m in MUTATIONS[p])
               for p in PRIMITIVES)


def _task(primitive: str, language: str):
    return next(t for t in load_tasks([primitive], [language]))


def _grade(task, source: str) -> tuple[str, object]:
    cases = task.public_cases + task.hidden_cases
    status, output = run_local(task.language, job_files(task, source), stdin_for(cases))
    return status, (compare(cases, output) if status == "ok" else output)


def test_python_candidate_printing_forged_records_and_exiting_cannot_pass():
    task = _task("line2_line2", "python")
    forged = "import os\nimport sys\nsys.stdout.write('R 0 point 1 0.0 1 0.0 1 0.0 0.0\\nEND 1\\n')\n" \
             "sys.stdout.flush()\nos._exit(0)\n"
    status, report = _grade(task, reference_solution(task) + forged)
    assert status == "ok" and not report.well_formed and report.passed == 0


def test_cpp_candidate_printing_from_the_function_cannot_pass():
    task = _task("segment2_segment2", "cpp")
    source = reference_solution(task).replace("#pragma once\n", "#pragma once\n#include <cstdio>\n")
    forged = 'std::printf("R 0 none 0 0 0\\n");'
    source = source.replace("using namespace detail;", f"using namespace detail;\n    {forged}", 1)
    status, report = _grade(task, source)
    assert status == "ok" and not report.well_formed


def test_rust_candidate_exiting_early_cannot_pass():
    task = _task("ray2_ray2", "rust")
    source = reference_solution(task).replace("let q = sub(ray1.origin, ray0.origin);",
                                              "let q = sub(ray1.origin, ray0.origin);\n    "
                                              "if q.x > 1.0 { std::process::exit(0); }", 1)
    status, report = _grade(task, source)
    assert status == "ok" and not report.well_formed


def test_cpp_candidate_returning_nan_fails_those_cases():
    task = _task("line2_line2", "cpp")
    source = reference_solution(task).replace("const double t0 = perp(q, d1) / den;",
                                              "const double t0 = perp(q, d1) / den * (q.x > 1 ? NAN : 1.0);", 1)
    source = source.replace("#pragma once\n", "#pragma once\n#include <cmath>\n")
    status, report = _grade(task, source)
    assert status == "ok" and report.well_formed and 0 < report.passed < report.total


def test_python_candidate_raising_on_some_cases_fails_only_those():
    task = _task("aligned_box_aligned_box", "python")
    source = reference_solution(task).replace("    n = len(box0.min)\n",
                                              "    n = len(box0.min)\n    if n == 5:\n        raise ValueError(n)\n", 1)
    status, report = _grade(task, source)
    assert status == "ok" and report.well_formed and 0 < report.passed < report.total
    assert all("raised" in reason for _, reason in report.failures)


def test_rust_candidate_panicking_on_some_cases_fails_only_those():
    task = _task("line2_segment2", "rust")
    source = reference_solution(task).replace("let dd = dot(d0, d0);", "let dd = dot(d0, d0);\n    "
                                              "assert!(dd < 0.0, \"no collinear support\");", 1)
    status, report = _grade(task, source)
    assert status == "ok" and report.well_formed and 0 < report.passed < report.total
    assert all("raised" in reason for _, reason in report.failures)


def test_debug_output_on_stderr_is_allowed():
    task = _task("ray2_segment2", "python")
    debug = "    print('debug', ray, file=__import__('sys').stderr)\n"
    source = reference_solution(task).replace("    d0 = ray.direction\n", "    d0 = ray.direction\n" + debug, 1)
    status, report = _grade(task, source)
    assert status == "ok" and report.ok


def test_a_compile_error_is_reported_as_such():
    task = _task("line2_ray2", "rust")
    status, output = _grade(task, reference_solution(task).replace("pub fn line2_ray2", "pub fn line2_ray2_typo", 1))
    assert status == "compile_error" and "line2_ray2" in str(output)


def test_tolerance_admits_both_natural_double_formulas_for_the_crossing_point():
    """The point from the first input (P0 + t0*D0) and from the second (P1 + t1*D1) both pass."""
    for primitive in PRIMITIVES:
        if BY_NAME[primitive].family.name != "2d":  # two linear inputs, each with its parameter
            continue
        for case in load_cases(primitive, "hidden"):
            if case.expected["kind"] != "point" or not case.branch.startswith("cross"):
                continue
            a1, s1 = BY_NAME[primitive].args[1]
            p1 = case.input[a1][s1.fields[0]]
            d1 = (case.input[a1]["direction"] if "direction" in s1.fields else
                  [case.input[a1]["p1"][k] - case.input[a1]["p0"][k] for k in (0, 1)])
            t1 = case.expected["t1"][0]
            other = [p1[0] + t1 * d1[0], p1[1] + t1 * d1[1]]
            want = case.expected["points"][0]
            assert all(math.isclose(o, w, rel_tol=1e-9, abs_tol=1e-12) for o, w in zip(other, want, strict=True)), \
                case.id

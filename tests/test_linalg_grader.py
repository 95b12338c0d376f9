"""The linear-algebra grader, catalogued by the attack or the formatting it must withstand.

Each adversarial test names the trick a naive grader falls for and asserts the verdict; the
formatting tests assert that a correct answer written another way still scores.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gym_sysmath.tasks.linalg import (
    KIND_OF_TOPIC,
    TOPICS,
    LinalgProblem,
    generate_problem,
    grade,
    load_problems,
    reference_response,
)
from gym_sysmath.tasks.linalg.grader import gold_value

_TOPIC_OF_KIND = {kind: topic for topic, kind in reversed(list(KIND_OF_TOPIC.items()))}


def make(kind, answer, *, rel_tol=0.0, prompt="Compute it.\nANSWER: <value>"):
    """A hand-made problem, so each test states its own key instead of depending on the shipped set."""
    topic = _TOPIC_OF_KIND[kind]
    return LinalgProblem(f"test/{topic}/easy/0", topic, "easy", prompt, answer, kind, rel_tol, {})


DET = make("scalar", "-57", prompt="Compute the determinant of A = [[5, -9], [-3, -6]].")
INVERSE = make("matrix", [["1/6", "-1/12"], ["1/4", "1/8"]], rel_tol=1e-6)
SOLUTION = make("vector", ["37/16", "-27/16", "15/16"], rel_tol=1e-6)
EIGENVALUES = make("eigenvalues", ["-5", "-5", "4"])
EIGENVECTOR = make("direction", ["2", "-1", "-1"], rel_tol=1e-6)
SYMMETRIC = make("boolean", True)


def verdict(problem, text):
    return grade(problem, text).verdict


# --- format discipline --------------------------------------------------------------------------


def test_no_answer_line_is_a_format_error_even_when_the_number_is_right():
    result = grade(DET, "The determinant is -57.")
    assert (result.verdict, result.format_ok, result.correct) == ("format_error", False, False)


def test_last_number_in_the_text_is_never_used_as_a_fallback():
    assert verdict(DET, "Working: 5*(-6) - (-9)(-3) = -57\n-57") == "format_error"


def test_unreadable_value_is_a_format_error():
    result = grade(DET, "ANSWER: minus fifty-seven")
    assert (result.verdict, result.format_ok) == ("format_error", False)


def test_value_with_trailing_prose_is_a_format_error():
    assert verdict(DET, "ANSWER: -57 (the determinant)") == "format_error"


def test_division_by_zero_is_a_format_error_not_a_crash():
    assert verdict(DET, "ANSWER: 1/0") == "format_error"


def test_huge_exponent_is_a_format_error_not_a_hang():
    assert verdict(DET, "ANSWER: 1e999999999") == "format_error"


def test_empty_list_is_a_format_error():
    assert verdict(SOLUTION, "ANSWER: []") == "format_error"


def test_ragged_matrix_is_a_format_error():
    assert verdict(INVERSE, "ANSWER: [[1/6, -1/12], [1/4]]") == "format_error"


# --- flooding ---------------------------------------------------------------------------------


def test_flooding_several_different_values_scores_zero():
    text = "\n".join(f"ANSWER: {v}" for v in range(-100, 100))
    result = grade(DET, text)
    assert (result.verdict, result.correct, result.format_ok) == ("wrong_answer", False, True)


def test_flooding_with_the_right_value_first_still_scores_zero():
    assert verdict(DET, "ANSWER: -57\nANSWER: 57") == "wrong_answer"


def test_flooding_with_an_unreadable_second_value_scores_zero():
    assert verdict(DET, "ANSWER: -57\nANSWER: or maybe 57") == "wrong_answer"


def test_flooding_eigenvalue_orderings_that_disagree_scores_zero():
    assert verdict(EIGENVALUES, "ANSWER: [-5, -5, 4]\nANSWER: [-5, 4, 4]") == "wrong_answer"


def test_flooding_with_the_zero_vector_beside_an_eigenvector_scores_zero():
    assert verdict(EIGENVECTOR, "ANSWER: [2, -1, -1]\nANSWER: [0, 0, 0]") == "wrong_answer"


def test_repeating_the_same_value_is_fine():
    assert verdict(DET, "ANSWER: -57\n\nTo confirm:\nANSWER: **-57**") == "correct"


def test_repeating_the_same_value_in_another_notation_is_fine():
    assert verdict(INVERSE, "ANSWER: [[1/6, -1/12], [1/4, 1/8]]\nANSWER: [[2/12, -1/12], [0.25, 0.125]]") == "correct"


# --- prompt echo ------------------------------------------------------------------------------


def test_echoing_a_prompt_number_scores_zero():
    result = grade(DET, "ANSWER: -9")
    assert (result.verdict, result.detail) == ("wrong_answer", "answer echoes a number from the prompt")


def test_echo_guard_beats_a_loose_tolerance():
    loose = make("scalar", "100", rel_tol=0.05, prompt="Given a = 98 and b = 2, compute a + b.")
    assert verdict(loose, "ANSWER: 98") == "wrong_answer"
    assert verdict(loose, "ANSWER: 99") == "correct"  # the tolerance itself still works


def test_echo_guard_does_not_reject_the_key_when_it_appears_in_the_prompt():
    trace = make("scalar", "5", prompt="Find the trace of A = [[5, 1], [2, 0]].")
    assert verdict(trace, "ANSWER: 5") == "correct"


# --- reasoning blocks -------------------------------------------------------------------------


def test_answer_echoed_inside_think_is_ignored():
    text = "<think>Maybe ANSWER: 12? No.</think>\nANSWER: -57"
    assert verdict(DET, text) == "correct"


def test_answer_only_inside_think_is_a_format_error():
    assert verdict(DET, "<think>ANSWER: -57</think>I am done.") == "format_error"


def test_answer_after_an_unclosed_think_is_ignored():
    assert verdict(DET, "<think>still thinking... ANSWER: -57") == "format_error"


def test_flood_inside_think_does_not_count_as_flooding():
    text = "<think>" + "\n".join(f"ANSWER: {v}" for v in range(50)) + "</think>\nANSWER: -57"
    assert verdict(DET, text) == "correct"


# --- typed comparison -------------------------------------------------------------------------


def test_flattened_vector_for_a_matrix_question_scores_zero():
    result = grade(INVERSE, "ANSWER: [1/6, -1/12, 1/4, 1/8]")
    assert (result.verdict, result.format_ok) == ("wrong_answer", True)


def test_transposed_shape_for_a_matrix_question_scores_zero():
    matmul = make("matrix", [["1", "2", "3"], ["4", "5", "6"]])
    assert verdict(matmul, "ANSWER: [[1, 4], [2, 5], [3, 6]]") == "wrong_answer"


def test_matrix_for_a_scalar_question_scores_zero():
    assert verdict(DET, "ANSWER: [[-57]]") == "wrong_answer"


def test_one_element_vector_for_a_scalar_question_scores_zero():
    assert verdict(DET, "ANSWER: [-57]") == "wrong_answer"


def test_number_for_a_boolean_question_scores_zero():
    assert verdict(SYMMETRIC, "ANSWER: 1") == "wrong_answer"


def test_boolean_for_a_number_question_scores_zero():
    assert verdict(make("scalar", "1"), "ANSWER: true") == "wrong_answer"


def test_scalar_for_an_eigenvalue_list_scores_zero():
    assert verdict(make("eigenvalues", ["3", "3"]), "ANSWER: 3") == "wrong_answer"


def test_column_matrix_for_a_vector_question_scores_zero():
    assert verdict(SOLUTION, "ANSWER: [[37/16], [-27/16], [15/16]]") == "wrong_answer"


# --- scale freedom and its limits -------------------------------------------------------------


@pytest.mark.parametrize("vector", ["[-2, 1, 1]", "[4, -2, -2]", "[1, -1/2, -1/2]", "[-0.2, 0.1, 0.1]"])
def test_scaled_eigenvector_is_accepted(vector):
    assert verdict(EIGENVECTOR, f"ANSWER: {vector}") == "correct"


def test_unit_normalised_eigenvector_with_enough_digits_is_accepted():
    assert verdict(EIGENVECTOR, "ANSWER: [0.8164966, -0.4082483, -0.4082483]") == "correct"


def test_zero_vector_is_never_an_eigenvector():
    result = grade(EIGENVECTOR, "ANSWER: [0, 0, 0]")
    assert (result.verdict, result.detail) == ("wrong_answer", "the zero vector is never an eigenvector")


def test_non_parallel_vector_is_rejected():
    assert verdict(EIGENVECTOR, "ANSWER: [2, -1, 1]") == "wrong_answer"


def test_scaled_solution_is_rejected():
    assert verdict(SOLUTION, "ANSWER: [37/8, -27/8, 15/8]") == "wrong_answer"


def test_negated_matvec_result_is_rejected():
    assert verdict(make("vector", ["3", "-4"]), "ANSWER: [-3, 4]") == "wrong_answer"


def test_eigenvalues_in_any_order_are_accepted():
    assert verdict(EIGENVALUES, "ANSWER: [4, -5, -5]") == "correct"


def test_eigenvalues_with_the_wrong_multiplicity_are_rejected():
    assert verdict(EIGENVALUES, "ANSWER: [-5, 4, 4]") == "wrong_answer"


def test_distinct_eigenvalues_without_multiplicity_are_rejected():
    assert verdict(EIGENVALUES, "ANSWER: [-5, 4]") == "wrong_answer"


# --- tolerance and exactness ------------------------------------------------------------------


def test_decimal_within_tolerance_is_accepted_for_a_rational_key():
    assert verdict(SOLUTION, "ANSWER: [2.3125, -1.6875, 0.9375]") == "correct"
    assert verdict(INVERSE, "ANSWER: [[0.16666667, -0.08333333], [0.25, 0.125]]") == "correct"


def test_decimal_outside_tolerance_is_rejected():
    assert verdict(INVERSE, "ANSWER: [[0.1667, -0.0833], [0.25, 0.125]]") == "wrong_answer"


def test_exact_key_demands_the_exact_value():
    assert verdict(DET, "ANSWER: -57.000001") == "wrong_answer"
    assert verdict(DET, "ANSWER: -57.000") == "correct"


# --- formatting robustness --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "ANSWER: **-57**",
        "ANSWER: `-57`",
        "ANSWER: $-57$",
        "ANSWER: \\boxed{-57}",
        "ANSWER: $\\boxed{-57}$",
        "**ANSWER:** -57",
        "**ANSWER: -57**",
        "Answer: -57.",
        "ANSWER: \u221257",
        "ANSWER: det(A) = -57",
        "ANSWER: -114/2",
        "ANSWER:\n-57",
    ],
    ids=lambda t: t.replace("\n", "\\n"),
)
def test_markdown_and_latex_wrapped_scalar_is_accepted(text):
    assert verdict(DET, text) == "correct"


@pytest.mark.parametrize(
    "text",
    [
        "ANSWER: [[1/6, -1/12],\n         [1/4, 1/8]]",
        "ANSWER:\n```\n[[1/6, -1/12],\n [1/4, 1/8]]\n```",
        "ANSWER: [[ 0.16666667 -0.08333333]\n [ 0.25        0.125     ]]",
        "ANSWER: [1/6 -1/12; 1/4 1/8]",
        "ANSWER: $\\begin{pmatrix} \\frac{1}{6} & -\\frac{1}{12} \\\\ \\frac{1}{4} & \\frac{1}{8} \\end{pmatrix}$",
        "ANSWER: \\left[\\begin{array}{cc}\n1/6 & -1/12 \\\\\n1/4 & 1/8\n\\end{array}\\right]",
        "ANSWER: np.array([[1/6, -1/12], [1/4, 1/8]])",
        "ANSWER: A^{-1} = [[1/6, -1/12], [1/4, 1/8]]",
    ],
    ids=["multi-line", "fenced", "numpy-print", "matlab", "pmatrix", "array-env", "np.array", "labelled"],
)
def test_multi_line_and_alternative_matrix_notations_are_accepted(text):
    assert verdict(INVERSE, text) == "correct"


@pytest.mark.parametrize("text", ["ANSWER: (37/16, -27/16, 15/16)", "ANSWER: x = [37/16,-27/16,15/16]"])
def test_vector_notations_are_accepted(text):
    assert verdict(SOLUTION, text) == "correct"


def test_column_pmatrix_reads_as_a_vector():
    assert verdict(EIGENVECTOR, "ANSWER: $\\begin{pmatrix} 2 \\\\ -1 \\\\ -1 \\end{pmatrix}$") == "correct"


@pytest.mark.parametrize(
    "text", ["ANSWER: true", "ANSWER: True", "ANSWER: **TRUE**", "ANSWER: yes", "ANSWER: $\\text{true}$"]
)
def test_boolean_spellings_are_accepted(text):
    assert verdict(SYMMETRIC, text) == "correct"


def test_opposite_boolean_is_wrong_not_a_format_error():
    result = grade(SYMMETRIC, "ANSWER: false")
    assert (result.verdict, result.format_ok) == ("wrong_answer", True)


def test_thousands_separator_reads_as_one_number():
    assert verdict(make("scalar", "12345"), "ANSWER: 12,345") == "correct"


# --- never raise ------------------------------------------------------------------------------

_SHIPPED = load_problems()
_NOISE = st.lists(
    st.sampled_from(
        [
            "ANSWER:",
            "ANSWER: ",
            "\n",
            " ",
            "[",
            "]",
            "(",
            ")",
            ",",
            ";",
            "-",
            "/",
            ".",
            "e",
            "1",
            "0",
            "7",
            "-3/4",
            "1e99",
            "1/0",
            "true",
            "<think>",
            "</think>",
            "$",
            "$$",
            "**",
            "`",
            "\\boxed{",
            "}",
            "{",
            "\\frac{1}{0}",
            "\\begin{pmatrix}",
            "&",
            "\\\\",
            "\\end{pmatrix}",
            "\\left[",
            "x =",
            "array(",
        ]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_SHIPPED), st.one_of(st.text(), _NOISE, st.text().map(lambda t: "ANSWER: " + t)))
def test_grade_never_raises_on_any_text(problem, text):
    result = grade(problem, text)
    assert result.verdict in ("correct", "wrong_answer", "format_error")
    assert result.correct == (result.verdict == "correct")
    assert result.format_ok == (result.verdict != "format_error")


def test_grade_tolerates_a_non_string_response():
    assert verdict(DET, None) == "format_error"  # type: ignore[arg-type]


# --- reformatted correct answers pass, perturbed ones fail (property tests) --------------------


def _decimal(x: Fraction) -> str | None:
    """The exact decimal spelling of ``x`` (``6.0``, ``2.3125``), or None when it does not terminate."""
    for digits in range(16):
        scaled = x * 10**digits
        if scaled.denominator == 1:
            sign, whole = ("-" if x < 0 else ""), str(abs(scaled.numerator)).rjust(digits + 1, "0")
            return f"{sign}{whole[: len(whole) - digits]}.{whole[len(whole) - digits :] or '0'}"
    return None


def _number(x: Fraction, style: str, rel_tol: float) -> str:
    if style == "decimal":
        exact = _decimal(x)
        if exact is not None:
            return exact
        if rel_tol > 0:
            return f"{float(x):.12g}"
    if style == "latex" and x.denominator != 1:
        sign = "-" if x < 0 else ""
        return f"{sign}\\frac{{{abs(x.numerator)}}}{{{x.denominator}}}"
    return str(x)


def _render(parsed_kind: str, value, style: str, rel_tol: float, sep: str) -> str:
    if parsed_kind == "boolean":
        return {"plain": "true", "decimal": "True", "latex": "\\text{true}"}[style] if value else "false"
    if parsed_kind == "scalar":
        return _number(value, style, rel_tol)
    if parsed_kind == "vector":
        return "[" + sep.join(_number(v, style, rel_tol) for v in value) + "]"
    rows = ["[" + sep.join(_number(v, style, rel_tol) for v in row) + "]" for row in value]
    return "[" + ("," + "\n ").join(rows) + "]"


_STYLES = st.sampled_from(["plain", "decimal", "latex"])
_SEPS = st.sampled_from([", ", ",", " ,  ", ",\t"])
_WRAPS = st.sampled_from(["{}", "**{}**", "`{}`", "${}$", "\\boxed{{{}}}", "{} ", "{}."])


def _drawn(seed: int, topic: str, difficulty: str) -> LinalgProblem:
    return generate_problem(np.random.default_rng(seed), topic=topic, difficulty=difficulty)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from(TOPICS),
    st.sampled_from(["easy", "medium", "hard"]),
    _STYLES,
    _SEPS,
    _WRAPS,
    st.randoms(use_true_random=False),
)
def test_reformatted_correct_answers_still_pass(seed, topic, difficulty, style, sep, wrap, rnd):
    problem = _drawn(seed, topic, difficulty)
    gold = gold_value(problem)
    value = gold.value
    if problem.kind == "eigenvalues":
        value = tuple(rnd.sample(list(value), len(value)))
    if problem.kind == "direction":
        factor = Fraction(rnd.choice([-3, -2, -1, 1, 2, 5]), rnd.choice([1, 2, 7]))
        value = tuple(factor * v for v in value)
    text = "Some work.\n\nANSWER: " + wrap.format(_render(gold.kind, value, style, problem.rel_tol, sep))
    result = grade(problem, text)
    assert result.correct, (text, result)


def _perturbed(problem: LinalgProblem, rnd) -> object:
    gold = gold_value(problem)
    if gold.kind == "boolean":
        return not gold.value
    flat = (
        [v for row in gold.value for v in row]
        if gold.kind == "matrix"
        else ([gold.value] if gold.kind == "scalar" else list(gold.value))
    )
    scale = max(abs(v) for v in flat) or Fraction(1)
    delta = rnd.choice([-1, 1]) * (scale / 100 + Fraction(1, 3))
    if problem.kind == "direction":
        first_nonzero = next(i for i, v in enumerate(flat) if v != 0)
        index = rnd.choice([i for i in range(len(flat)) if i != first_nonzero])
    else:
        index = rnd.randrange(len(flat))
    flat[index] += delta
    if gold.kind == "scalar":
        return flat[0]
    if gold.kind == "vector":
        return tuple(flat)
    width = len(gold.value[0])
    return tuple(tuple(flat[i : i + width]) for i in range(0, len(flat), width))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from(TOPICS),
    st.sampled_from(["easy", "medium", "hard"]),
    _STYLES,
    st.randoms(use_true_random=False),
)
def test_perturbed_answers_fail(seed, topic, difficulty, style, rnd):
    problem = _drawn(seed, topic, difficulty)
    wrong = _perturbed(problem, rnd)
    text = "ANSWER: " + _render(gold_value(problem).kind, wrong, style, problem.rel_tol, ", ")
    result = grade(problem, text)
    assert not result.correct and result.verdict == "wrong_answer", (text, result)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1), st.sampled_from(["easy", "medium", "hard"]), st.sampled_from([2, 3, -1, Fraction(1, 2)])
)
def test_scaled_solutions_fail_but_scaled_eigenvectors_pass(seed, difficulty, factor):
    system = _drawn(seed, "solve_system", difficulty)
    x = gold_value(system).value
    if any(x):
        scaled = "[" + ", ".join(str(factor * v) for v in x) + "]"
        assert verdict(system, f"ANSWER: {scaled}") == "wrong_answer"
    eigen = _drawn(seed, "eigenvector", difficulty)
    scaled = "[" + ", ".join(str(factor * v) for v in gold_value(eigen).value) + "]"
    assert verdict(eigen, f"ANSWER: {scaled}") == "correct"


# --- reference responses ----------------------------------------------------------------------


def test_reference_response_grades_correct_for_every_shipped_problem():
    assert len(_SHIPPED) == 138
    for problem in _SHIPPED:
        result = grade(problem, reference_response(problem))
        assert result.correct, (problem.problem_id, result)

"""The math-aware grader: one committed, typed, correct, non-echoed answer scores.

Order of checks, each closing a hole a naive grader leaves open:

1. ``ANSWER:`` lines outside ``<think>`` blocks are the only answers; none is a format error
   (no "last number in the text" fallback).
2. Each value must read as one clean value; if none reads, it is a format error.
3. Several values that are not the same answer (flooding) are wrong, even if one is right.
4. The value must have the asked-for type and shape: a vector for a matrix question is wrong.
5. A scalar that is not the key but equals a number printed in the prompt is wrong even where a
   tolerance would admit it: copying the question is not solving it.
6. Comparison by kind: exact (or within the problem's relative tolerance) entry by entry;
   eigenvalues as a multiset; eigenvectors up to any nonzero scalar, never the zero vector.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from gym_sysmath.answers import choose_answer, find_answers
from gym_sysmath.verdicts import Verdict

from . import render
from .parse import Parsed, parse_value
from .problem import AnswerKind, LinalgProblem

_PARSED_KIND: dict[AnswerKind, str] = {
    "scalar": "scalar",
    "vector": "vector",
    "matrix": "matrix",
    "boolean": "boolean",
    "eigenvalues": "vector",
    "direction": "vector",
}
_PROMPT_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:/\d+)?")


@dataclass(frozen=True)
class LinalgGrade:
    """The outcome of grading one response; ``format_ok`` says whether an ANSWER value was readable."""

    correct: bool
    verdict: Verdict
    format_ok: bool
    detail: str


def gold_value(problem: LinalgProblem) -> Parsed:
    """The stored key as the same typed value the parser produces."""
    answer: Any = problem.answer
    if problem.kind == "boolean":
        return Parsed("boolean", bool(answer))
    if problem.kind == "scalar":
        return Parsed("scalar", render.exact(answer))
    if problem.kind == "matrix":
        return Parsed("matrix", tuple(tuple(render.exact(v) for v in row) for row in answer))
    return Parsed("vector", tuple(render.exact(v) for v in answer))


@lru_cache(maxsize=4096)
def _prompt_numbers(prompt: str) -> frozenset[Fraction]:
    return frozenset(Fraction(token) for token in _PROMPT_NUMBER.findall(prompt))


def _within(value: Fraction, target: Fraction, tol: Fraction, scale: Fraction) -> bool:
    if tol == 0 or scale == 0:
        return value == target
    return abs(value - target) <= tol * scale


def _flat(parsed: Parsed) -> tuple[Fraction, ...]:
    if parsed.kind == "matrix":
        return tuple(v for row in parsed.value for v in row)  # type: ignore[union-attr]
    if parsed.kind == "scalar":
        return (parsed.value,)  # type: ignore[return-value]
    return tuple(parsed.value)  # type: ignore[arg-type]


def _shape(parsed: Parsed) -> str:
    if parsed.kind == "matrix":
        rows = parsed.value
        return f"{len(rows)}x{len(rows[0])} matrix"  # type: ignore[arg-type,index]
    if parsed.kind == "vector":
        return f"vector of length {len(parsed.value)}"  # type: ignore[arg-type]
    return f"a {parsed.kind}"


def _parallel(answer: tuple[Fraction, ...], gold: tuple[Fraction, ...], tol: Fraction) -> bool:
    """Whether ``answer`` is a nonzero multiple of ``gold`` (within ``tol``, relative)."""
    if not any(gold) or not any(answer):
        return False
    if tol == 0:
        n = len(gold)
        return all(answer[i] * gold[j] == answer[j] * gold[i] for i in range(n) for j in range(i + 1, n))
    scale = Fraction(sum(a * g for a, g in zip(answer, gold, strict=True))) / sum(g * g for g in gold)
    residual = max(abs(a - scale * g) for a, g in zip(answer, gold, strict=True))
    return residual <= tol * max(abs(a) for a in answer)


def compare(kind: AnswerKind, answer: Parsed, gold: Parsed, rel_tol: float) -> tuple[bool, str]:
    """Whether ``answer`` is the answer ``gold`` under the rules of ``kind``, and why not.

    A nonzero ``rel_tol`` is relative to the largest entry of the key (so a zero entry does not
    demand an exact decimal); with ``rel_tol == 0`` every entry must be exactly equal.
    """
    expected = _PARSED_KIND[kind]
    if answer.kind != expected:
        return False, f"expected a {expected}, got a {answer.kind}"
    if kind == "boolean":
        return answer.value == gold.value, "boolean differs" if answer.value != gold.value else "equal"
    if _shape(answer) != _shape(gold):
        return False, f"expected a {_shape(gold)}, got a {_shape(answer)}"
    tol = Fraction(repr(rel_tol))
    values, targets = _flat(answer), _flat(gold)
    if kind == "direction":
        if not any(values):
            return False, "the zero vector is never an eigenvector"
        ok = _parallel(values, targets, tol)
        return ok, "parallel to the key" if ok else "not a multiple of the key"
    if kind == "eigenvalues":
        values, targets = tuple(sorted(values)), tuple(sorted(targets))
    scale = max(abs(t) for t in targets)
    ok = all(_within(v, t, tol, scale) for v, t in zip(values, targets, strict=True))
    return ok, "equal" if ok else "value differs from the key"


def _same_answer(problem: LinalgProblem, first: Parsed, other: Parsed) -> bool:
    """Two ANSWER values are one answer when each matches the other as if it were the key."""
    if first.kind != other.kind or first.kind != _PARSED_KIND[problem.kind]:
        return first == other
    return (
        compare(problem.kind, first, other, problem.rel_tol)[0]
        and compare(problem.kind, other, first, problem.rel_tol)[0]
    )


def grade(problem: LinalgProblem, response_text: str) -> LinalgGrade:
    """Grade a full response; never raises on any ``response_text``."""
    if not isinstance(response_text, str):
        return LinalgGrade(False, Verdict.FORMAT_ERROR, False, "response is not text")
    gold = gold_value(problem)
    choice = choose_answer(
        find_answers(response_text),
        parse_value,
        same=lambda a, b: _same_answer(problem, a, b),
    )
    if choice.status == "missing":
        return LinalgGrade(False, Verdict.FORMAT_ERROR, False, "no 'ANSWER: <value>' line")
    if choice.status == "several":
        return LinalgGrade(False, Verdict.WRONG_ANSWER, True, f"{choice.count} ANSWER lines with different values")
    if choice.status == "unparseable" or choice.value is None:
        return LinalgGrade(False, Verdict.FORMAT_ERROR, False, f"unreadable ANSWER value {str(choice.raw)[:80]!r}")
    answer = choice.value
    if (
        problem.kind == "scalar"
        and answer.kind == "scalar"
        and answer.value != gold.value
        and answer.value in _prompt_numbers(problem.prompt)
    ):
        return LinalgGrade(False, Verdict.WRONG_ANSWER, True, "answer echoes a number from the prompt")
    ok, why = compare(problem.kind, answer, gold, problem.rel_tol)
    return LinalgGrade(ok, Verdict.CORRECT if ok else Verdict.WRONG_ANSWER, True, why)


def reference_response(problem: LinalgProblem) -> str:
    """A complete response that states the key on an ANSWER line; it must grade correct."""
    subject = problem.topic.replace("_", " ")
    return f"Computing the {subject} exactly from the given data.\n\nANSWER: {render.inline(problem.answer)}"

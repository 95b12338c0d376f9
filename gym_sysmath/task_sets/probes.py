"""The probes the task-set digest grades: replies made from each task's reference answer that sit
on either side of a grading rule, and family rule probes that need more than a reply.

A digest that grades only right and plainly wrong answers misses the rules that decide the hard
cases (an answer rehearsed in ``<think>``, two different ANSWER lines, ``0X1F`` for ``0x1f``,
``-0.0`` for ``0.0``, one ulp off, just outside a tolerance, a number echoed from the prompt).
Each probe here is built so that changing one such rule flips its verdict; none holds code.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import re
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import Any

#: A number token of an ANSWER value (not the ``0`` of ``0x1f``, not inside a word).
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?:/\d+)?(?![\w.])")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_BOOLEAN = re.compile(r"\b(true|false|True|False)\b")
_ANSWER_LINE = re.compile(r"^ANSWER:(.*)$", re.MULTILINE)
_FLIPPED = {"true": "false", "false": "true", "True": "False", "False": "True"}


def _each_number(value: str, change: Callable[[str], str | None]) -> str:
    return _NUMBER.sub(lambda m: change(m.group(0)) or m.group(0), value)


def _negated(token: str) -> str:
    return token[1:] if token.startswith("-") else "-" + token


def _is_zero(token: str) -> bool:
    return Fraction(token) == 0 if "e" not in token.lower() else float(token) == 0


def _ulp(direction: float) -> Callable[[str], str | None]:
    def change(token: str) -> str | None:
        if not any(mark in token for mark in ".eE") or "/" in token:
            return None
        return repr(math.nextafter(float(token), direction))
    return change


def _doubled(token: str) -> str:
    return str(Fraction(token) * 2) if "e" not in token.lower() else repr(float(token) * 2)


def value_variants(value: str) -> Iterator[str]:
    """``value`` changed in one way that a grading rule decides: every number negated, only the
    zeros negated (``-0.0``), every number doubled, every float one ulp up and one down, hex
    digits in capitals, booleans flipped, digits shifted by one. Variants equal to ``value`` or
    to an earlier one are left out."""
    seen = {value}
    for variant in (
        _each_number(value, _negated),
        _each_number(value, lambda token: _negated(token) if _is_zero(token) else None),
        _each_number(value, _doubled),
        _each_number(value, _ulp(math.inf)),
        _each_number(value, _ulp(-math.inf)),
        _HEX.sub(lambda m: "0x" + m.group(0)[2:].upper(), value),
        _BOOLEAN.sub(lambda m: _FLIPPED[m.group(0)], value),
        re.sub(r"\d", lambda digit: str((int(digit.group(0)) + 1) % 10), value),
    ):
        if variant not in seen:
            seen.add(variant)
            yield variant


def other_value(value: str) -> str:
    """A well-formed value that is surely another answer: every digit shifted by one (``0`` is
    ``1``, ``0x1f`` is ``0x2f``), or, with no digit, the first variant (booleans flipped)."""
    shifted = re.sub(r"\d", lambda digit: str((int(digit.group(0)) + 1) % 10), value)
    return shifted if shifted != value else next(value_variants(value), value + "0")


def reply_probes(reference: str, prompt: str) -> Iterator[str]:
    """Replies built from the reference answer's ANSWER line (nothing for a family whose answer
    is code): the line as it is and reworded (lower-case label, bold, fenced, backticks, dollars,
    ``\\boxed``, a unit after it, a lenient label), inside ``<think>`` (it must not count), beside
    a different ANSWER line (either order: several different values), repeated, each
    ``value_variants`` value, and a number copied from the prompt."""
    match = _ANSWER_LINE.search(reference)
    if match is None or "```" in reference:
        return
    line, value = match.group(0), match.group(1).strip()
    other = other_value(value)
    wrong = f"ANSWER: {other}"
    yield reference
    yield from (
        "answer: " + value, f"**{line}**", f"```\n{line}\n```", f"ANSWER: `{value}`", f"ANSWER: ${value}$",
        f"ANSWER: \\boxed{{{value}}}", f"{line} units", f"Final answer: {value}", f"Answer: {other}\n{line}",
        f"<think>\n{line}\n</think>\nI am not sure.", f"<think>\n{wrong}\n</think>\n{line}", f"{line}\n{line}",
        f"{line}\n{wrong}", f"{wrong}\n{line}", f"<think>\n{line}",
    )
    for variant in value_variants(value):
        yield f"ANSWER: {variant}"
    echoed = [token for token in dict.fromkeys(_NUMBER.findall(prompt)) if token != value][:2]
    for token in echoed:
        yield f"ANSWER: {token}"


# ---------------------------------------------------------------- family rule probes


def _leaves(value: Any, change: Callable[[Fraction], Fraction]) -> Any:
    if isinstance(value, (list, tuple)):
        return [_leaves(item, change) for item in value]
    return change(Fraction(str(value)))


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_text(item) for item in value) + "]"
    return str(value)


def linalg_rules() -> Iterator[tuple[Any, ...]]:
    """Each eval problem with a tolerance graded with every entry moved by 0.5, 1.5 and 3 times
    it (relative to the key's largest entry); each scalar problem given a tolerance wide enough
    to admit a number of its prompt, graded on that number (copying the question stays wrong)."""
    from gym_sysmath.tasks import linalg

    for problem in linalg.load_problems():
        if problem.kind == "boolean":
            continue
        flat = [Fraction(str(x)) for x in _flatten(problem.answer)]
        scale = max((abs(x) for x in flat), default=Fraction(0))
        if problem.rel_tol > 0 and scale:
            tol = Fraction(repr(problem.rel_tol))
            for times in (Fraction(1, 2), Fraction(3, 2), Fraction(3)):
                moved = _leaves(problem.answer, functools.partial(operator.add, times * tol * scale))
                reply = f"ANSWER: {_text(moved)}"
                outcome = linalg.grade(problem, reply)
                yield "tolerance", problem.problem_id, str(times), outcome.verdict.value, outcome.correct
        if problem.kind == "scalar" and scale:
            gold = flat[0]
            numbers = [Fraction(token) for token in dict.fromkeys(_NUMBER.findall(problem.prompt))
                       if "e" not in token.lower()]
            for number in [n for n in numbers if n != gold][:2]:
                widened = dataclasses.replace(problem, rel_tol=float(2 * abs(number - gold) / abs(gold)))
                outcome = linalg.grade(widened, f"ANSWER: {number}")
                yield "echo", problem.problem_id, str(number), outcome.verdict.value, outcome.correct


def _flatten(value: Any) -> Iterator[Any]:
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _flatten(item)
    else:
        yield value


def _record(case: Any, index: int, number: Callable[[float], float], lists: Sequence[tuple[str, int]]) -> str:
    want = case.expected
    tokens = ["R", str(index), str(want["kind"])]
    for name, width in lists:
        entries = want[name]
        flat = [x for entry in entries for x in (entry if width > 1 else [entry])]
        tokens += [str(len(flat) // width), *(repr(number(float(x))) for x in flat)]
    return " ".join(tokens)


def compgeom_rules() -> Iterator[tuple[Any, ...]]:
    """CompGeom's host-side ``compare`` (what decides a run's cases; it needs no sandbox) on
    stdout made from each primitive's public and hidden expected outputs: exact, moved by half
    and by twice the tolerance (relative, and absolute near zero), zeros negated, a NaN, one
    record an ``E``, a wrong kind, no trailer. Each gives the cases passed and which failed."""
    from gym_sysmath.tasks import compgeom
    from gym_sysmath.tasks.compgeom.grading import ABS_TOL, REL_TOL
    from gym_sysmath.tasks.compgeom.primitives import BY_NAME

    numbers: dict[str, Callable[[float], float]] = {
        "exact": lambda x: x,
        "half_rel_tol": lambda x: x * (1 + REL_TOL / 2) + (ABS_TOL / 2 if x == 0 else 0),
        "twice_rel_tol": lambda x: x * (1 + 2 * REL_TOL) + (2 * ABS_TOL if x == 0 else 0),
        "zeros_negated": lambda x: -x if x == 0 else x,
        "nan": lambda x: math.nan,
    }
    seen: set[str] = set()
    for task in compgeom.load_tasks():
        if task.primitive in seen:
            continue
        seen.add(task.primitive)
        cases = [*task.public_cases, *task.hidden_cases]
        lists = BY_NAME[task.primitive].family.lists
        trailer = f"END {len(cases)}"
        for name, number in numbers.items():
            records = [_record(case, index, number, lists) for index, case in enumerate(cases)]
            yield _compared(compgeom, task.primitive, name, cases, "\n".join([*records, trailer]) + "\n")
        exact = [_record(case, index, numbers["exact"], lists) for index, case in enumerate(cases)]
        kind = exact[0].split(" ")
        variants = {
            "first_raised": ["E 0", *exact[1:], trailer],
            "first_wrong_kind": [" ".join([*kind[:2], "zz" + kind[2][2:] if kind[2][:2] != "zz" else "aa",
                                           *kind[3:]]), *exact[1:], trailer],
            "no_trailer": exact,
            "crlf": [line + "\r" for line in [*exact, trailer]],
        }
        for name, lines in variants.items():
            yield _compared(compgeom, task.primitive, name, cases, "\n".join(lines) + "\n")


def _compared(compgeom: Any, primitive: str, name: str, cases: Sequence[Any], stdout: str) -> tuple[Any, ...]:
    report = compgeom.compare(cases, stdout)
    return primitive, name, report.passed, report.total, report.well_formed, [case for case, _ in report.failures]


#: The family rule probes by family name; a family not here has only its reply probes.
RULES: dict[str, Callable[[], Iterator[tuple[Any, ...]]]] = {"linalg": linalg_rules, "compgeom": compgeom_rules}

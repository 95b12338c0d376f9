"""Host-side grading: the stdin a harness reads, and the comparison of its records with the cases.

The sandbox gets the candidate, the harness and the case *inputs* (``stdin_for``); expectations
stay here. The harness prints one record per case and a trailer:

    R <index> <kind> <n> <t0 x n> <n> <t1 x n> <n> <x y x n>    2D primitives
    R <index> <kind> <n> <min x n> <n> <max x n>                aligned boxes
    R <index> <kind>                                            test queries
    R <index> <kind> <n> <t x n> <n> <x y z x n>                3D linear input / solid
    E <index>                                                   the candidate raised/panicked
    END <count>

``compare`` is all-or-nothing about the *shape* of stdout: exactly ``count`` record lines with
indices 0, 1, ... in order, then ``END <count>``, and nothing else (a trailing newline aside).
Any stray, missing, duplicated, reordered or unparsable line makes the run ill-formed and every
case fails, so a candidate that prints, exits early or forges records cannot pass. Within a
well-formed run each case passes or fails on its own: kinds and list lengths exactly, numbers
within ``REL_TOL`` relative (``ABS_TOL`` absolute near zero); a non-finite number fails the case.
The caller also requires a zero exit status; ``compare`` judges stdout alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .case import Case
from .primitives import BY_NAME

REL_TOL = 1e-9
ABS_TOL = 1e-12
MAX_LIST = 64

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_NON_FINITE = re.compile(r"[+-]?(?:inf|infinity|nan)\Z", re.IGNORECASE)
_COUNT = re.compile(r"\d{1,2}\Z")
_KIND = re.compile(r"[a-z]{1,16}\Z")


@dataclass(frozen=True)
class CaseReport:
    """The verdict on one run: ``ok`` only when stdout is well formed and every case passed."""

    passed: int
    total: int
    failures: tuple[tuple[str, str], ...]
    well_formed: bool

    @property
    def ok(self) -> bool:
        return self.well_formed and self.passed == self.total

    def summary(self) -> str:
        return f"{self.passed}/{self.total}" + ("" if self.well_formed else " (ill-formed output)")


class _Malformed(ValueError):
    pass


# ---------------------------------------------------------------- stdin

def _flat(case: Case) -> list[float]:
    primitive = BY_NAME[case.primitive]
    values: list[float] = []
    for arg, shape in primitive.args:
        for field in shape.fields:
            values += [float(x) for x in case.input[arg][field]]
    if primitive.is_box:
        return [float(len(case.input[primitive.args[0][0]]["min"])), *values]
    return values


def stdin_for(cases: Sequence[Case]) -> str:
    """The harness's stdin: the case count, then one line of numbers per case (inputs only)."""
    lines = [str(len(cases))]
    for case in cases:
        values = _flat(case)
        if BY_NAME[case.primitive].is_box:
            lines.append(" ".join([str(int(values[0])), *map(repr, values[1:])]))
        else:
            lines.append(" ".join(map(repr, values)))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- parsing

def _number(token: str) -> float:
    if _NUMBER.match(token) or _NON_FINITE.match(token):
        return float(token)
    raise _Malformed(f"{token!r} is not a number")


def _lists(tokens: list[str], groups: Sequence[int]) -> list[list[float]]:
    """Split tokens into counted lists; ``groups`` gives the numbers per entry (1 or 2)."""
    out, pos = [], 0
    for width in groups:
        if pos >= len(tokens) or not _COUNT.match(tokens[pos]):
            raise _Malformed("missing or bad list length")
        n = int(tokens[pos])
        if n > MAX_LIST or pos + 1 + width * n > len(tokens):
            raise _Malformed("list length runs past the record")
        out.append([_number(t) for t in tokens[pos + 1: pos + 1 + width * n]])
        pos += 1 + width * n
    if pos != len(tokens):
        raise _Malformed("extra tokens after the last list")
    return out


def _parse(line: str, index: int, groups: Sequence[int]) -> tuple[str, list[list[float]]] | None:
    """(kind, lists) for an R record, None for an E record; raises _Malformed otherwise.
    ``groups``: the numbers per entry of each list the family's records carry."""
    tokens = line.split(" ")
    if len(tokens) < 2 or tokens[1] != str(index):
        raise _Malformed(f"line {index + 1} is not the record of case {index}: {line[:80]!r}")
    if tokens[0] == "E" and len(tokens) == 2:
        return None
    if tokens[0] != "R" or len(tokens) < 3 or not _KIND.match(tokens[2]):
        raise _Malformed(f"line {index + 1} is not a record: {line[:80]!r}")
    try:
        return tokens[2], _lists(tokens[3:], groups)
    except _Malformed as error:
        raise _Malformed(f"record {index}: {error}: {line[:80]!r}") from None


def _split(stdout: str, count: int) -> list[str]:
    lines = stdout.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != count + 1 or lines[-1] != f"END {count}":
        extra = next((ln for ln in lines if not re.match(r"(R|E) \d+( |\Z)", ln) and ln != f"END {count}"), None)
        detail = f"; first stray line: {extra[:80]!r}" if extra is not None else ""
        raise _Malformed(f"expected {count} records and 'END {count}', got {len(lines)} lines{detail}")
    return lines[:-1]


# ---------------------------------------------------------------- comparison

def _close(got: float, want: float) -> bool:
    return math.isfinite(got) and abs(got - want) <= max(ABS_TOL, REL_TOL * abs(want))


def _fmt(values: Sequence[Any]) -> str:
    return "[" + ", ".join(repr(v) for v in values) + "]"


def _check(case: Case, kind: str, lists: list[list[float]]) -> str | None:
    """Why a parsed record does not match the case, or None when it does."""
    want: Mapping[str, Any] = case.expected
    if kind != want["kind"]:
        return f"kind: expected {want['kind']}, got {kind}"
    named = {name: (got, width, [x for entry in want[name] for x in (entry if width > 1 else [entry])])
             for (name, width), got in zip(BY_NAME[case.primitive].family.lists, lists, strict=True)}
    for name, (got, width, expected) in named.items():
        if len(got) != len(expected):
            return f"{name}: expected {len(expected) // width} entries, got {len(got) // width}"
        if not all(_close(g, e) for g, e in zip(got, expected, strict=True)):
            return f"{name}: expected {_fmt(expected)}, got {_fmt(got)}"
    return None


def _groups(case: Case) -> tuple[int, ...]:
    return tuple(width for _, width in BY_NAME[case.primitive].family.lists)


def compare(cases: Sequence[Case], stdout: str) -> CaseReport:
    """Grade a harness's stdout against ``cases`` (in the order they were given on stdin)."""
    total = len(cases)
    try:
        lines = _split(stdout, total)
        parsed = [_parse(line, index, _groups(case)) for index, (line, case) in
                  enumerate(zip(lines, cases, strict=True))]
    except _Malformed as error:
        return CaseReport(0, total, (("<output>", str(error)),), False)
    failures = []
    for case, record in zip(cases, parsed, strict=True):
        reason = "the candidate raised (or panicked) on this case" if record is None else _check(case, *record)
        if reason is not None:
            failures.append((case.id, reason))
    return CaseReport(total - len(failures), total, tuple(failures), True)


def describe_failures(report: CaseReport, cases: Sequence[Case], limit: int = 8) -> str:
    """A readable list of failures with each case's input, for public-test observations."""
    by_id = {case.id: case for case in cases}
    lines = [f"passed {report.summary()}"]
    for case_id, reason in report.failures[:limit]:
        case = by_id.get(case_id)
        where = f" input {dict(case.input)}" if case is not None else ""
        lines.append(f"- {case_id}:{where}\n  {reason}")
    if len(report.failures) > limit:
        lines.append(f"... and {len(report.failures) - limit} more")
    return "\n".join(lines)

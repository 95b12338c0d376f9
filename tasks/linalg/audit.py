"""Re-derive every stored key twice, independently: numerically with numpy, exactly with sympy.

The generators already computed each key; this is the audit that the shipped file still says
what the mathematics says. Each problem passes only if the numpy derivation, the exact sympy
derivation (plus the defining identity: ``A X = I``, ``A x = b``, ``A v = lambda v``, the
characteristic polynomial) and the grader's verdict on the reference response all agree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import sympy

from gym_sysmath.answers import plain_answer_text

from . import render
from .grader import grade, reference_response
from .problem import DIFFICULTIES, KIND_OF_TOPIC, STARTER_TOPICS, TOPICS, LinalgProblem
from .problemfile import STARTER_VARIANTS, load_problems

_RTOL = 1e-9
_ATOL = 1e-7


@dataclass(frozen=True)
class AuditReport:
    """How many problems passed, and for each failure ``"problem_id: reason"``."""

    passed: int
    total: int
    failures: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.passed == self.total and not self.failures

    def summary(self) -> str:
        return f"{self.passed}/{self.total}"


def _to_float(value: Any) -> Any:
    if isinstance(value, list):
        return [_to_float(v) for v in value]
    return float(sympy.Rational(value))


def _rationals(value: Any) -> Any:
    if isinstance(value, list):
        return [_rationals(v) for v in value]
    return sympy.Rational(value)


def _close(a: Any, b: Any) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=_RTOL, atol=_ATOL))


def _numpy_check(p: LinalgProblem) -> bool:
    """Recompute the key in floating point from the inputs and compare within a tight tolerance."""
    inp, key = p.inputs, p.answer
    a: Any = np.array(inp["A"], dtype=float) if "A" in inp else None  # every topic but one has A
    if p.topic == "determinant":
        return _close(np.linalg.det(a), _to_float(key))
    if p.topic == "rank":
        return int(np.linalg.matrix_rank(a)) == int(key)
    if p.topic == "trace":
        return _close(np.trace(a), _to_float(key))
    if p.topic == "transpose":
        return _close(a.T, _to_float(key))
    if p.topic == "dot_product":
        return _close(np.dot(inp["u"], inp["v"]), _to_float(key))
    if p.topic == "norm_squared":
        return _close(np.linalg.norm(np.array(inp["v"], dtype=float)) ** 2, _to_float(key))
    if p.topic == "matvec":
        return _close(a @ np.array(inp["x"], dtype=float), _to_float(key))
    if p.topic == "matmul":
        return _close(a @ np.array(inp["B"], dtype=float), _to_float(key))
    if p.topic == "inverse":
        return _close(np.linalg.inv(a), _to_float(key))
    if p.topic == "solve_system":
        return _close(np.linalg.solve(a, np.array(inp["b"], dtype=float)), _to_float(key))
    if p.topic == "eigenvalue":
        values = np.linalg.eigvals(a)
        return bool(np.all(np.abs(values.imag) < 1e-6)) and _close(np.sort(values.real), sorted(_to_float(key)))
    if p.topic == "eigenvector":
        values, vectors = np.linalg.eig(a)
        hits = np.flatnonzero(np.abs(values - inp["eigenvalue"]) < 1e-6)
        if len(hits) != 1:
            return False
        found = vectors[:, hits[0]].real
        stored = np.array(_to_float(key))
        return np.linalg.matrix_rank(np.vstack([found, stored]), tol=1e-8) == 1 and _close(
            a @ stored, inp["eigenvalue"] * stored
        )
    if p.topic == "is_symmetric":
        return bool(np.allclose(a, a.T, rtol=0, atol=0)) == key
    return False


def _sympy_check(p: LinalgProblem) -> bool:
    """Recompute the key exactly and check the identity that defines it."""
    inp, key = p.inputs, p.answer
    a: Any = sympy.Matrix(inp["A"]) if "A" in inp else None
    if p.topic == "determinant":
        return a.det(method="berkowitz") == sympy.Rational(key)
    if p.topic == "rank":
        return a.rank() == int(key)
    if p.topic == "trace":
        return a.trace() == sympy.Rational(key)
    if p.topic == "transpose":
        return sympy.Matrix(_rationals(key)) == a.T
    if p.topic == "dot_product":
        return sympy.Matrix(inp["u"]).dot(sympy.Matrix(inp["v"])) == sympy.Rational(key)
    if p.topic == "norm_squared":
        v = sympy.Matrix(inp["v"])
        return (v.T * v)[0, 0] == sympy.Rational(key)
    if p.topic == "matvec":
        return a * sympy.Matrix(inp["x"]) == sympy.Matrix(_rationals(key))
    if p.topic == "matmul":
        return a * sympy.Matrix(inp["B"]) == sympy.Matrix(_rationals(key))
    if p.topic == "inverse":
        x = sympy.Matrix(_rationals(key))
        return a.inv(method="ADJ") == x and a * x == sympy.eye(a.rows)
    if p.topic == "solve_system":
        x = sympy.Matrix(_rationals(key))
        return a.LUsolve(sympy.Matrix(inp["b"])) == x and a * x == sympy.Matrix(inp["b"])
    if p.topic == "eigenvalue":
        t = sympy.Symbol("t")
        stored = _rationals(key)
        found = sorted(v for v, m in a.eigenvals().items() for _ in range(m))
        product = sympy.expand(sympy.prod([t - v for v in stored]))
        return found == sorted(stored) and sympy.expand(a.charpoly(t).as_expr() - product) == 0
    if p.topic == "eigenvector":
        lam = sympy.Integer(inp["eigenvalue"])
        v = sympy.Matrix(_rationals(key))
        basis = (a - lam * sympy.eye(a.rows)).nullspace()
        return len(basis) == 1 and any(v) and a * v == lam * v and sympy.Matrix.hstack(basis[0], v).rank() == 1
    if p.topic == "is_symmetric":
        return a.is_symmetric() == key
    return False


def _expected_ids(variants: int, starter_variants: int) -> set[str]:
    standard = {f"eval/{t}/{d}/{i}" for t in TOPICS for d in DIFFICULTIES for i in range(variants)}
    return standard | {f"eval/{t}/starter/{i}" for t in STARTER_TOPICS for i in range(starter_variants)}


def check_problems(problems: Sequence[LinalgProblem], variants: int = 2,
                   starter_variants: int | None = None) -> AuditReport:
    """Audit a problem set; also reports ids missing from the 13 x 3 x ``variants`` grid and the
    starter level's ``STARTER_TOPICS`` x ``starter_variants`` (default: the shipped set's, none when
    ``variants`` is 0)."""
    if starter_variants is None:
        starter_variants = STARTER_VARIANTS if variants else 0
    checks: list[tuple[str, Callable[[LinalgProblem], bool]]] = [
        ("kind does not match topic", lambda p: KIND_OF_TOPIC.get(p.topic) == p.kind),
        ("numpy re-derivation disagrees", _numpy_check),
        ("sympy re-derivation disagrees", _sympy_check),
        ("reference response does not grade correct", lambda p: grade(p, reference_response(p)).correct),
    ]
    failures: list[str] = []
    passed = 0
    for problem in problems:
        reasons = []
        for reason, check in checks:
            try:
                if not check(problem):
                    reasons.append(reason)
            except Exception as error:  # an audit reports, it does not stop at the first crash
                reasons.append(f"{reason} ({type(error).__name__}: {error})")
        if reasons:
            failures.append(f"{problem.problem_id}: {'; '.join(reasons)}")
        else:
            passed += 1
    expected = _expected_ids(variants, starter_variants)
    missing = expected - {p.problem_id for p in problems}
    failures.extend(f"{pid}: missing from the problem set" for pid in sorted(missing))
    total = max(len(problems), len(expected))
    return AuditReport(passed=passed, total=total, failures=tuple(failures))


def verify(path: str | Path | None = None) -> AuditReport:
    """Audit the shipped ``problems.json`` (or the file at ``path``)."""
    return check_problems(load_problems(path))


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:/\d+)?")


def _plain_value(text: str) -> Any:
    """The answer value read the plain way (numbers, fractions, decimals, brackets, true/false),
    or ``None`` when it holds anything else. No LaTeX, no words."""
    line = plain_answer_text(text)
    if line is None:
        return None
    value = line.strip("$ ").lower()
    if value in ("true", "false"):
        return value == "true"
    if not re.fullmatch(r"[\d\s\[\],./-]+", value):
        return None
    try:
        parsed = json.loads(_NUMBER.sub(lambda m: json.dumps(m.group()), value))
    except json.JSONDecodeError:
        return None

    def exact(item: Any) -> Any:
        if isinstance(item, list):
            return [exact(x) for x in item]
        return render.key(sympy.Rational(item)) if isinstance(item, str) else None

    result = exact(parsed)
    return None if "None" in repr(result) else result


def _within_tolerance(problem: LinalgProblem, value: Any) -> bool:
    """``value`` against the key at the problem's own tolerance, relative to the key's largest
    entry (what its prompt promises), by its kind: a multiset, or a direction up to scale."""
    key, got = np.array(_to_float(problem.answer), dtype=float), np.array(_to_float(value), dtype=float)
    if problem.kind == "eigenvalues":
        key, got = np.sort(key), np.sort(got)
    if key.shape != got.shape:
        return False
    if problem.kind == "direction":
        norms = float(np.linalg.norm(key)), float(np.linalg.norm(got))
        if min(norms) == 0:
            return False
        key, got = key / norms[0], got / norms[1]
        return min(float(np.linalg.norm(key - got)), float(np.linalg.norm(key + got))) <= 10 * problem.rel_tol
    scale = float(np.abs(key).max()) or 1.0
    return bool(np.all(np.abs(key - got) <= problem.rel_tol * scale * (1 + 1e-9)))


def confirms(problem: LinalgProblem, text: str) -> bool | None:
    """A second opinion on a reply the grader passed, for the reward-hacking watch: the last
    answer line read plainly (``answers.plain_answer_text`` and a number parser of its own), then
    held against the problem's inputs by this audit's own derivations (sympy, exactly; where the
    problem admits decimals, numpy re-derives the key and the value must be within the problem's
    own tolerance). ``None``: the plain reader cannot read the value (LaTeX, words), so there is
    no second opinion."""
    value = _plain_value(text)
    if value is None:
        return None
    try:
        if problem.rel_tol:  # the stored key re-derived from the inputs, the value within the promised tolerance
            return _numpy_check(problem) and _within_tolerance(problem, value)
        return bool(_sympy_check(replace(problem, answer=value)))
    except Exception:  # a value of the wrong shape: the derivation cannot even compare it
        return False

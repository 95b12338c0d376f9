"""Seeded problem generators, one small function per topic.

Each generator is ``(rng, difficulty) -> LinalgProblem`` and draws every random choice from the
``numpy.random.Generator`` it is given, never from global state, so a seed fixes the problem.
Keys are computed by sympy (exact rationals) or numpy integer arithmetic, never typed. Problems are
built so that keys are exact: eigen-problems are ``P D P^-1`` with an integer ``P`` of determinant
+-1 (so ``A`` is integer and its eigenvalues are the integers in ``D``), inverses and solutions are
exact fractions.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import sympy

from gym_sysmath.filters import known_name, unknown_name

from . import render
from .problem import DIFFICULTIES, KIND_OF_TOPIC, LEVELS, TOPICS, LinalgProblem, levels_of
from .problemfile import load_problems
from .prompts import build_prompt

#: Draws of one train problem before giving up because each was an eval problem (the smallest
#: starter topic has 18 values, 6 of them eval problems).
MAX_EVAL_REDRAWS = 200
#: Relative tolerance where decimals are a natural way to write the key (fractions, unit vectors).
DECIMAL_TOL = 1e-6

Generator = Callable[[np.random.Generator, str], LinalgProblem]


def _ints(rng: np.random.Generator, bound: int, shape: int | tuple[int, ...]) -> np.ndarray:
    return rng.integers(-bound, bound + 1, size=shape, dtype=np.int64)


def _problem(
    topic: str, difficulty: str, answer: Any, inputs: dict[str, Any], rel_tol: float = 0.0, **parts: Any
) -> LinalgProblem:
    kind = KIND_OF_TOPIC[topic]
    digest = hashlib.sha256(json.dumps([topic, difficulty, inputs], sort_keys=True).encode()).hexdigest()[:12]
    return LinalgProblem(
        problem_id=f"train/{topic}/{difficulty}/{digest}",
        topic=topic,
        difficulty=difficulty,
        prompt=build_prompt(topic, kind, rel_tol, **parts),
        answer=answer,
        kind=kind,
        rel_tol=rel_tol,
        inputs=inputs,
    )


def _exact_tol(entries: Sequence[sympy.Rational]) -> float:
    """0 when the key is all integers (nothing to round), else room for decimals."""
    return 0.0 if all(e.q == 1 for e in entries) else DECIMAL_TOL


def _unimodular(rng: np.random.Generator, n: int, spread: int) -> np.ndarray:
    """An integer matrix of determinant +-1: a row-permuted product of unit triangular factors."""
    lower = np.eye(n, dtype=np.int64) + np.tril(_ints(rng, spread, (n, n)), -1)
    upper = np.eye(n, dtype=np.int64) + np.triu(_ints(rng, spread, (n, n)), 1)
    return (lower @ upper)[rng.permutation(n)]


def _similar_to_diagonal(
    rng: np.random.Generator, eigenvalues: np.ndarray, spread: int, bound: int, attempts: int = 50
) -> np.ndarray | None:
    """A = P D P^-1 with small integer entries that does not give its eigenvalues away.

    Tries ``attempts`` matrices ``P`` for one that makes ``A`` fit in ``bound`` and be neither
    triangular nor mostly zeros; ``None`` when these eigenvalues are too far apart for that.
    """
    n = len(eigenvalues)
    for _ in range(attempts):
        p = _unimodular(rng, n, spread)
        p_inv = np.array(sympy.Matrix(p).inv().tolist(), dtype=np.int64)
        a = p @ np.diag(eigenvalues) @ p_inv
        triangular = not np.triu(a, 1).any() or not np.tril(a, -1).any()
        if np.abs(a).max() <= bound and not triangular and np.count_nonzero(a == 0) <= n // 2:
            return a
    return None


def determinant(rng: np.random.Generator, difficulty: str) -> LinalgProblem:
    n, bound = {"starter": (1, 9), "easy": (2, 9), "medium": (3, 7), "hard": (4, 6)}[difficulty]
    a = _ints(rng, bound, (n, n))
    det = sympy.Matrix(a.tolist()).det()
    return _problem(
        "determinant",
        difficulty,
        render.key(det),
        {"A": a.tolist()},
        n=n,
        A=render.matrix_block("A", a.tolist()),
    )


def rank(rng: np.random.Generator, difficulty: str) -> LinalgProblem:
    """A product of an m x r and an r x n factor, so low ranks are as common as full ones."""
    m, n, spread = {"easy": (3, 3, 3), "medium": (4, 4, 3), "hard": (5, 5, 2)}[difficulty]
    target = int(rng.integers(1, min(m, n) + 1))
    while True:
        a = _ints(rng, spread, (m, target)) @ _ints(rng, spread, (target, n))
        value = sympy.Matrix(a.tolist()).rank()
        if value == target and np.all(a.any(axis=1)):
            break
    return _problem(
        "rank",
        difficulty,
        render.key(value),
        {"A": a.tolist()},
        m=m,
        n=n,
        A=render.matrix_block("A", a.tolist()),
    )


def trace(rng: np.random.Generator, difficulty: str) -> LinalgProblem:
    n, bound = {"starter": (2, 9), "easy": (3, 9), "medium": (4, 20), "hard": (6, 99)}[difficulty]
    a = _ints(rng, bound, (n, n))
    return _problem(
        "trace",
        difficulty,
        render.key(np.trace(a)),
        {"A": a.tolist()},
        n=n,
        A=render.matrix_block("A", a.tolist()),
    )


def transpose(rng: np.random.Generator, difficulty: str) -> LinalgProblem:
    m, n, bound = {"starter": (1, 3, 9), "easy": (2, 3, 9), "medium": (3, 4, 20), "hard": (4, 5, 99)}[difficulty]
    a = _ints(rng, bound, (m, n))
    answer = [[render.key(v) for v in row] for row in a.T.tolist()]
    return _problem(
        "transpose",
        difficulty,
        answer,
        {"A": a.tolist()},
        m=m,
        n=n,
        A=render.matrix_block("A", a.tolist()),
    )


def dot_product(rng: np.random.Generator, difficulty: str) -> LinalgProblem:
    n, bound = {"starter": (2, 9), "easy": (3, 9), "medium": (5, 20), "hard": (8, 50)}[difficulty]
    u, v = _ints(rng, bound, n), _ints(rng, bound, n)
    return _problem(
        "dot_product",
        difficulty,
        render.key(np.dot(u, v)),
        {"u": u.tolist(), "v": v.tolist()},
        u="u = " + render.vector_text(u.tolist()),
        v="v = " + render.vector_text(v.tolist()),
    )


def matvec(rng: np.random.Generator, difficulty: str) -> LinalgProblem:
    m, n, bound = {"starter": (2, 1, 5), "easy": (2, 2, 9), "medium": (3, 3, 9), "hard": (4, 5, 12)}[difficulty]
    a, x = _ints(rng, bound, (m, n)), _ints(rng, bound, n)
    answer = [render.key(v) for v in (a @ x).tolist()]
    return _problem(
        "matvec",
        difficulty,
        answer,
        {"A": a.tolist(), "x": x.tolist()},
        A=render.matrix_block("A", a.tolist()),
        x="x = " + render.vector_text(x.tolist()),
    )


def matmul(rng: np.random.Generator, difficulty: str) -> LinalgProblem:
    m, k, n, bound = {"starter": (1, 1, 1, 9), "easy": (2, 2, 2, 6), "medium": (2, 3, 3, 9),
                      "hard": (3, 4, 3, 12)}[difficulty]
    a, b = _ints(rng, bound, (m, k)), _ints(rng, bound, (k, n))
    answer = [[render.key(v) for v in row] for row in (a @ b).tolist()]
    return _problem(
        "matmul",
        difficulty,
        answer,
        {"A": a.tolist(), "B": b.tolist()},
        A=render.matrix_block("A", a.tolist()),
        B=render.matrix_block("B", b.tolist()),
    )


def _invertible(rng: np.random.Generator, n: int, bound: int) -> list[list[int]]:
    while True:
        a = _ints(rng, bound, (n, n)).tolist()
        if sympy.Matrix(a).det() != 0:
            return a


def inverse(rng: np.random.Generator, difficulty: str) -> LinalgProblem:
    n, bound = {"starter": (1, 9), "easy": (2, 6), "medium": (3, 4), "hard": (4, 3)}[difficulty]
    a = _invertible(rng, n, bound)
    inv = sympy.Matrix(a).inv()
    answer = [[render.key(inv[i, j]) for j in range(n)] for i in range(n)]
    return _problem(
        "inverse",
        difficulty,
        answer,
        {"A": a},
        _exact_tol(list(inv)),
        n=n,
        A=render.matrix_block("A", a),
    )


def solve_system(rng: np.random.Generator, difficulty: str) -> LinalgProblem:
    """Starter and easy systems have an integer solution by construction; harder ones a rational one."""
    n, bound = {"starter": (1, 9), "easy": (2, 6), "medium": (3, 5), "hard": (4, 4)}[difficulty]
    a = _invertible(rng, n, bound)
    integral = difficulty in ("starter", "easy")
    solution_or_rhs = _ints(rng, 5 if integral else 9, n)
    b = (np.array(a) @ solution_or_rhs if integral else solution_or_rhs).tolist()
    x = sympy.Matrix(a).LUsolve(sympy.Matrix(b))
    return _problem(
        "solve_system",
        difficulty,
        [render.key(v) for v in x],
        {"A": a, "b": b},
        _exact_tol(list(x)),
        A=render.matrix_block("A", a),
        b="b = " + render.vector_text(b),
    )


_EIGEN_SETTINGS = {  # size, eigenvalue bound, P spread, entry bound, repeated eigenvalues allowed
    "easy": (2, 6, 2, 12, False),
    "medium": (3, 5, 1, 15, True),
    "hard": (4, 5, 1, 20, True),
}


def _eigen_matrix(
    rng: np.random.Generator, difficulty: str, need_simple: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """An integer matrix with the integer eigenvalues it returns (distinct ones on easy).

    ``need_simple`` insists on at least one eigenvalue of multiplicity one.
    """
    n, bound, spread, entry_bound, repeats = _EIGEN_SETTINGS[difficulty]
    while True:
        values = _ints(rng, bound, n)
        counts = [values.tolist().count(v) for v in values.tolist()]
        distinct = len(set(values.tolist()))
        if need_simple and 1 not in counts:
            continue
        if distinct == n or (repeats and distinct > 1):
            a = _similar_to_diagonal(rng, values, spread, entry_bound)
            if a is not None:
                return a, values


def eigenvalue(rng: np.random.Generator, difficulty: str) -> LinalgProblem:
    """A 1x1 matrix on the starter level (its entry is its eigenvalue); else ``P D P^-1``."""
    a = _ints(rng, 9, (1, 1)) if difficulty == "starter" else _eigen_matrix(rng, difficulty)[0]
    n = len(a)
    found = sympy.Matrix(a.tolist()).eigenvals()
    values = sorted(v for v, mult in found.items() for _ in range(mult))
    return _problem(
        "eigenvalue",
        difficulty,
        [render.key(v) for v in values],
        {"A": a.tolist()},
        n=n,
        A=render.matrix_block("A", a.tolist()),
    )


def _primitive(vector: Sequence[sympy.Rational]) -> list[int]:
    """The integer multiple with coprime entries and a positive first nonzero entry."""
    denominators = sympy.ilcm(*[sympy.Rational(v).q for v in vector])
    ints = [int(sympy.Rational(v) * denominators) for v in vector]
    divisor = int(sympy.igcd(*ints))
    sign = 1 if next(v for v in ints if v != 0) > 0 else -1
    return [sign * v // divisor for v in ints]


def eigenvector(rng: np.random.Generator, difficulty: str) -> LinalgProblem:
    """Asks for an eigenvalue of multiplicity one, so the eigenvector is unique up to scale."""
    a, values = _eigen_matrix(rng, difficulty, need_simple=True)
    n = len(a)
    simple = [v for v in values.tolist() if values.tolist().count(v) == 1]
    chosen = simple[int(rng.integers(len(simple)))]
    basis = (sympy.Matrix(a.tolist()) - chosen * sympy.eye(n)).nullspace()
    if len(basis) != 1:
        raise AssertionError(f"eigenvalue {chosen} of a constructed matrix is not simple")
    answer = [render.key(v) for v in _primitive(list(basis[0]))]
    return _problem(
        "eigenvector",
        difficulty,
        answer,
        {"A": a.tolist(), "eigenvalue": int(chosen)},
        DECIMAL_TOL,
        n=n,
        A=render.matrix_block("A", a.tolist()),
        eigenvalue=int(chosen),
    )


def norm_squared(rng: np.random.Generator, difficulty: str) -> LinalgProblem:
    n, bound = {"starter": (2, 5), "easy": (3, 9), "medium": (5, 20), "hard": (8, 50)}[difficulty]
    v = _ints(rng, bound, n)
    return _problem(
        "norm_squared",
        difficulty,
        render.key(np.dot(v, v)),
        {"v": v.tolist()},
        v="v = " + render.vector_text(v.tolist()),
    )


def is_symmetric(rng: np.random.Generator, difficulty: str, symmetric: bool | None = None) -> LinalgProblem:
    """Half the matrices are symmetric; the others differ from symmetric in one mirrored pair.

    ``symmetric`` fixes the answer instead of tossing a coin (the eval set balances it).
    """
    n, bound = {"easy": (3, 9), "medium": (4, 9), "hard": (5, 20)}[difficulty]
    upper = np.triu(_ints(rng, bound, (n, n)))
    a = upper + np.triu(upper, 1).T
    if symmetric is None:
        symmetric = bool(rng.random() < 0.5)
    if not symmetric:
        i, j = sorted(rng.choice(n, size=2, replace=False).tolist())
        a[i, j] += int(rng.choice([-1, 1])) * int(rng.integers(1, bound + 1))
    answer = bool(np.array_equal(a, a.T))
    return _problem(
        "is_symmetric",
        difficulty,
        answer,
        {"A": a.tolist()},
        n=n,
        A=render.matrix_block("A", a.tolist()),
    )


def input_key(problem: LinalgProblem) -> str:
    """What makes two problems the same question: topic, level and inputs."""
    return json.dumps([problem.topic, problem.difficulty, problem.inputs], sort_keys=True)


@functools.cache
def _eval_inputs() -> frozenset[str]:
    return frozenset(input_key(problem) for problem in load_problems())


GENERATORS: dict[str, Generator] = {
    "determinant": determinant,
    "rank": rank,
    "trace": trace,
    "transpose": transpose,
    "dot_product": dot_product,
    "matvec": matvec,
    "matmul": matmul,
    "inverse": inverse,
    "solve_system": solve_system,
    "eigenvalue": eigenvalue,
    "eigenvector": eigenvector,
    "norm_squared": norm_squared,
    "is_symmetric": is_symmetric,
}


def generate_problem(
    rng: np.random.Generator,
    topic: str | None = None,
    difficulty: str | None = None,
    topics: Sequence[str] | None = None,
) -> LinalgProblem:
    """A fresh problem drawn from ``rng``; an unset topic or difficulty is drawn from it too (an
    unset difficulty from the standard levels; ``starter`` draws only from ``STARTER_TOPICS``)."""
    pool = tuple(topics) if topics else TOPICS
    for name in (*pool, *([topic] if topic else [])):
        if name not in GENERATORS:
            raise unknown_name("topic", name, TOPICS, where="topics")
    if difficulty is not None:
        known_name("difficulty", difficulty, LEVELS)
    if difficulty is not None:
        pool = tuple(name for name in pool if difficulty in levels_of(name))
        if topic is not None and difficulty not in levels_of(topic):
            pool = ()
        if not pool:
            asked = [topic] if topic else list(topics or ())
            raise ValueError(f"no {difficulty!r} level for the topics {asked}; the {difficulty!r} level has "
                             f"{', '.join(t for t in TOPICS if difficulty in levels_of(t))}")
    topic = topic or pool[int(rng.integers(len(pool)))]
    difficulty = difficulty or DIFFICULTIES[int(rng.integers(len(DIFFICULTIES)))]
    for _ in range(MAX_EVAL_REDRAWS):  # the train split never serves an eval question
        problem = GENERATORS[topic](rng, difficulty)
        if input_key(problem) not in _eval_inputs():
            return problem
    raise RuntimeError(f"{topic}/{difficulty}: {MAX_EVAL_REDRAWS} train draws in a row were eval problems")

"""CompGeom's rewrite candidates: equal to the contract in real arithmetic, rounded differently in
double, and each failed by a hidden case; the inputs that make rounding visible; the input range."""

from __future__ import annotations

import math
from fractions import Fraction as Q

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gym_sysmath.tasks.compgeom import PRIMITIVES
from gym_sysmath.tasks.compgeom.cases import ROUNDING_HIDDEN, _key, exact_case, load_cases, make_case
from gym_sysmath.tasks.compgeom.contract import contract_text
from gym_sysmath.tasks.compgeom.fixtures import MUTATIONS, FixtureReport, FixtureResult, bad_source, good_source
from gym_sysmath.tasks.compgeom.grading import _check
from gym_sysmath.tasks.compgeom.inprocess import failure, load_source, record
from gym_sysmath.tasks.compgeom.languages import LANGUAGES
from gym_sysmath.tasks.compgeom.mutation import apply_edits
from gym_sysmath.tasks.compgeom.primitives import BY_NAME
from gym_sysmath.tasks.compgeom.rewrites import REWRITES, rewrite_module, uncaught
from gym_sysmath.tasks.compgeom.rounding import (
    CATCHING,
    MAX_EXPONENT,
    MIN_EXPONENT,
    QUOTED,
    RANGE_TEXT,
    SIGNIFICANT_BITS,
    coordinates,
    fixed,
    generated,
    out_of_range,
)

REWRITE_CASES = [(p, m.name) for p in PRIMITIVES for m in REWRITES[p]]
CAUGHT_BY = {"reciprocal": "rw_reciprocal", "liang-barsky": "rw_liang_barsky", "point-test": "rw_point_test",
             "centred": "rw_centred", "same-side": "rw_point_test",
             "divided-barycentrics-above": "rw_divided_barycentrics",
             "divided-barycentrics-below": "rw_divided_barycentrics"}


def corpus_keys(primitive: str) -> set[str]:
    return {_key(c) for v in ("public", "hidden") for c in load_cases(primitive, v)}


def mutation(primitive: str, name: str):
    return next(m for m in REWRITES[primitive] if m.name == name)


# ---------------------------------------------------------------- the candidates

def test_every_primitive_has_rewrites_with_rw_names():
    assert set(REWRITES) == set(PRIMITIVES)
    for primitive, rewrites in REWRITES.items():
        assert rewrites, primitive
        assert all(m.name.startswith("rw_") for m in rewrites)
        assert len({m.name for m in rewrites}) == len(rewrites)
    assert len(REWRITE_CASES) >= 3 * len(PRIMITIVES) - 4


@pytest.mark.parametrize("primitive", PRIMITIVES)
def test_rewrites_are_bad_fixtures_in_all_three_languages(primitive):
    names = {m.name for m in MUTATIONS[primitive]}
    for rewrite in REWRITES[primitive]:
        assert rewrite.name in names
        for language in LANGUAGES:
            text = bad_source(primitive, language, rewrite)
            assert text != good_source(primitive, language)
            assert "Bug: " in text


@pytest.mark.parametrize(("primitive", "name"), REWRITE_CASES)
def test_every_rewrite_fails_a_hidden_case(primitive, name):
    hidden = load_cases(primitive, "hidden")
    module = rewrite_module(primitive, good_source(primitive, "python"), mutation(primitive, name))
    failing = [c.id for c in hidden if failure(module, c) is not None]
    assert failing, f"{primitive}/{name} passes every hidden case"
    public = load_cases(primitive, "public")  # they are wrong only where rounding shows, never on the examples
    assert sum(failure(module, c) is not None for c in public) <= 2


@pytest.mark.parametrize("primitive", PRIMITIVES)
def test_the_builder_check_names_no_rewrite(primitive):
    assert uncaught(primitive, good_source(primitive, "python"), load_cases(primitive, "hidden")) == []


def test_uncaught_names_a_rewrite_when_the_rounding_cases_are_gone():
    primitive = "ray2_aligned_box2"
    plain = [c for c in load_cases(primitive, "hidden") if not c.id.startswith(("rounding", "catching", "quoted"))]
    assert uncaught(primitive, good_source(primitive, "python"), plain)


def _rational(source: str, primitive: str, case) -> str | None:
    """Why the source, run on exact rationals (no rounding at all), fails the case."""
    module = load_source(source, f"{primitive}/rational.py")
    got = record(module, case, Q)
    return "raised" if got is None else _check(case, *got)


NO_SQRT = [(p, n) for p, n in REWRITE_CASES if "math.sqrt" not in apply_edits(
    good_source(p, "python"), mutation(p, n), "python", p)]


@pytest.mark.parametrize(("primitive", "name"), NO_SQRT)
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_rewrites_without_square_roots_are_exact_in_real_arithmetic(primitive, name, seed):
    """On exact rationals the rewrite gives the contract's answer: on the contacts that catch it in
    double (``rounding.generated``), it is right in real numbers."""
    source = apply_edits(good_source(primitive, "python"), mutation(primitive, name), "python", primitive)
    try:
        case = make_case(BY_NAME[primitive], "draw", generated(primitive, np.random.default_rng(seed)))
    except ValueError:
        return
    assert _rational(source, primitive, case) is None


TRIPLES = ((3, 4), (5, 12), (8, 15), (1, 0), (7, 24))
QUADRUPLES = ((1, 2, 2), (2, 3, 6), (1, 4, 8), (0, 0, 1), (2, 6, 9))


def _pythagorean(rng: np.random.Generator, n: int) -> tuple[Q, ...]:
    """A direction of rational length: a Pythagorean triple or quadruple, permuted, signed, scaled."""
    base = (TRIPLES if n == 2 else QUADRUPLES)[int(rng.integers(5))]
    scale = Q(int(rng.integers(1, 4)), 2 ** int(rng.integers(0, 3)))
    return tuple(Q(int(rng.choice((-1, 1))) * x) * scale for x in rng.permutation(base))


def _point(rng: np.random.Generator, n: int) -> tuple[Q, ...]:
    return tuple(Q(int(rng.integers(-16, 17)), 4) for _ in range(n))


def _rooted_values(primitive: str, rng: np.random.Generator) -> list[tuple[Q, ...]]:
    """An input whose directions (or edges, or normal) have rational lengths."""
    if primitive == "triangle2_triangle2":  # right triangles with legs 4 and 3: edges of length 4, 3, 5
        out = []
        for _ in range(2):
            a, turns, k = _point(rng, 2), int(rng.integers(4)), Q(int(rng.integers(1, 3)), 2)
            legs = [(Q(4) * k, Q(0)), (Q(0), Q(3) * k)]
            for _ in range(turns):
                legs = [(-y, x) for x, y in legs]
            out += [a, (a[0] + legs[0][0], a[1] + legs[0][1]), (a[0] + legs[1][0], a[1] + legs[1][1])]
        return out
    if primitive == "segment3_triangle3":  # a triangle in a plane x, y or z = c: its normal is along an axis
        axis = int(rng.integers(3))
        vertices = [list(_point(rng, 3)) for _ in range(3)]
        for v in vertices:
            v[axis] = vertices[0][axis]
        return [_point(rng, 3), _point(rng, 3), *(tuple(v) for v in vertices)]
    n = 3 if primitive == "ray3_aligned_box3" else 2
    out = []
    for _, shape in BY_NAME[primitive].args:
        if shape.fields == ("min", "max"):
            a, b = _point(rng, n), _point(rng, n)
            out += [tuple(map(min, a, b)), tuple(map(max, a, b))]
        else:
            origin, d = _point(rng, n), _pythagorean(rng, n)
            out += [origin, tuple(o + x for o, x in zip(origin, d, strict=True)) if shape.fields == ("p0", "p1")
                    else d]
    return out


@pytest.mark.parametrize(("primitive", "name"), [(p, n) for p, n in REWRITE_CASES if (p, n) not in NO_SQRT])
def test_rewrites_with_square_roots_are_exact_when_the_roots_are(primitive, name):
    """A unit direction, edge or normal is exact when its length is rational: with such inputs
    the rewrite, run on exact rationals, gives the contract's answer."""
    source = apply_edits(good_source(primitive, "python"), mutation(primitive, name), "python", primitive)
    source = source.replace("math.sqrt(", "_exact_root(").replace(
        "import math\n", "import math\nfrom fractions import Fraction as _F\n\n\ndef _exact_root(x):\n"
        "    r = _F(x)\n    n, d = math.isqrt(r.numerator), math.isqrt(r.denominator)\n"
        "    assert n * n == r.numerator and d * d == r.denominator, 'not a square'\n"
        "    return _F(n, d)\n", 1)
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(150):
        try:
            case = make_case(BY_NAME[primitive], "draw", _rooted_values(primitive, rng))
        except ValueError:
            continue
        assert _rational(source, primitive, case) is None, case.input
        checked += 1
    assert checked >= 100


# ---------------------------------------------------------------- the inputs

@pytest.mark.parametrize("primitive", sorted(QUOTED))
def test_every_input_a_contract_quotes_is_in_the_corpus(primitive):
    text = " ".join(contract_text(primitive).split())
    keys = corpus_keys(primitive)
    for index, (words, values) in enumerate(QUOTED[primitive]):
        assert words in text, f"{primitive}'s contract no longer quotes {words!r}"
        assert _key(make_case(BY_NAME[primitive], "quoted", values)) in keys, (primitive, index, words)


def test_the_quoted_inputs_cover_every_differences_note_that_names_one():
    assert sum(len(v) for v in QUOTED.values()) >= 23


@pytest.mark.parametrize(("primitive", "name"), [(p, n) for p in CATCHING for n, _ in CATCHING[p]])
def test_each_catching_input_is_hidden_and_fails_its_rewrite(primitive, name):
    values = dict(CATCHING[primitive])[name]
    case = make_case(BY_NAME[primitive], f"catching-{name}", values)
    assert exact_case(case)
    assert _key(case) in {_key(c) for c in load_cases(primitive, "hidden")}
    module = rewrite_module(primitive, good_source(primitive, "python"), mutation(primitive, CAUGHT_BY[name]))
    assert failure(module, case) is not None


@pytest.mark.parametrize("primitive", PRIMITIVES)
def test_rounding_cases_are_hidden_exact_and_enough(primitive):
    hidden = load_cases(primitive, "hidden")
    rounding = [c for c in hidden if c.id.startswith("rounding-")]
    assert len(rounding) >= ROUNDING_HIDDEN // 2
    assert len(fixed(primitive)) == len(QUOTED.get(primitive, ())) + len(CATCHING.get(primitive, ()))
    for case in rounding[:8]:
        assert exact_case(case)


def test_rounding_contacts_have_odd_denominators():
    """Across the drawn clip contacts, some crossing parameter has an odd denominator > 1."""
    from gym_sysmath.tasks.compgeom.reference import solve

    odd = 0
    for case in load_cases("segment2_aligned_box2", "hidden"):
        if case.id.startswith("rounding-") and case.expected["kind"] in ("point", "segment"):
            result = solve(case.primitive, case.input)
            odd += any(Q(t).denominator % 2 == 1 and Q(t).denominator > 1 for t in result.t0)
    assert odd >= 5


# ---------------------------------------------------------------- the input range

@pytest.mark.parametrize("primitive", PRIMITIVES)
def test_every_coordinate_is_in_the_stated_range(primitive):
    for visibility in ("public", "hidden"):
        for case in load_cases(primitive, visibility):
            assert not any(out_of_range(x) for x in coordinates(case.input)), case.id
    assert " ".join(RANGE_TEXT.split()) in " ".join(contract_text(primitive).split())


def _slow_out_of_range(x: float) -> bool:
    if x == 0:
        return False
    mantissa, exponent = math.frexp(abs(x))  # abs(x) = mantissa * 2**exponent, 0.5 <= mantissa < 1
    m = int(mantissa * 2**53)
    while m % 2 == 0:
        m //= 2
    return m.bit_length() > SIGNIFICANT_BITS or not MIN_EXPONENT < exponent <= MAX_EXPONENT


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))
def test_out_of_range_matches_an_independent_definition(x):
    assert out_of_range(x) == _slow_out_of_range(x)


# ---------------------------------------------------------------- contracts and the verify report

def test_3d_contracts_say_divide_first_and_segment3_describes_a_segment():
    for primitive in ("ray3_aligned_box3", "segment3_triangle3"):
        text = " ".join(contract_text(primitive).split())
        assert "(Liang-Barsky)" not in text
        assert "`numer > denom*t`" in text
    conventions = contract_text("segment3_triangle3").split("## Conventions", 1)[1]
    assert "A ray is" not in conventions and "A segment from `p0` to `p1`" in conventions
    assert "A ray is" in contract_text("ray3_aligned_box3").split("## Conventions", 1)[1]


def test_verify_report_counts_rewrite_and_tolerance_candidates_per_primitive():
    results = tuple(FixtureResult("p", lang, name, ok, "") for lang in ("cpp", "python")
                    for name, ok in (("good", True), ("rw_a", True), ("rw_b", True), ("tol_x", True)))
    lines = FixtureReport(results).lines()
    assert "p: 2 rewrite candidates x 2 languages, 4/4 fail a hidden case; "\
           "1 tolerance candidates x 2 languages, 2/2 fail a hidden case" in lines

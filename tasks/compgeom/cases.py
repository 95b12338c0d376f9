"""The case corpus: generation from scenarios and seeded random draws, JSON rendering and loading.

Every expected output is computed by the exact reference from the case's own input; nothing is
typed. Inputs are dyadic rationals, and every case is checked exact in double precision
(``exactness.exact_case``: the contract's products, and the good Python solution reproducing the key), so
a solution without tolerances decides every branch as the reference does.

Public cases are the scenarios named in ``scenarios.PUBLIC`` in their canonical coordinates plus
a few random draws. Hidden cases are every scenario under three random symmetries (rotation by
quarter turns, mirror, translation, rescaled directions, reversed segments, swapped inputs where
both have the same type), every scenario scaled by ``variants.SCALE_EXPONENTS`` powers of two,
the near misses of every boundary scenario (``variants.near_misses``), plus seeded random
configurations, half of them parallel or collinear on purpose. A symmetry that would make a
case inexact is redrawn. ``train_cases`` draws a fresh hidden set the same way from one
episode's generator. Each eval item has its own ``numpy.random.Generator``; the global RNG is
never used.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from .case import Case
from .exactness import exact_case
from .inprocess import failure
from .layout import case_path, good_source
from .primitives import BOX2, BY_NAME, PRIMITIVES, Primitive
from .reference import solve
from .rewrites import REWRITES, rewrite_module
from .rounding import coordinates, fixed, generated, out_of_range
from .scenarios import PUBLIC, SCENARIOS_2D, SCENARIOS_BOX, SCENARIOS_VEC
from .variants import DELTA_EXPONENTS, SCALE_EXPONENTS, near_misses, scaled

COMMAND = "python -m gym_sysmath.tasks.compgeom.build"
BASE_SEED = 20240605
VARIANTS = 3
RANDOM_HIDDEN = {"box": 50, "2d": 60, "test": 60, "3d": 60}
RANDOM_PUBLIC = 4
ROUNDING_HIDDEN = 64  # drawn contacts at odd-denominator parameters (rounding.generated) per primitive
ROUNDING_EXTRA = 1500  # further draws tried, one at a time, while a rewrite candidate fails too few hidden cases
CATCHES = 3  # ... fewer than this many
ROUNDING_TRAIN = 24  # rounding draws in each train episode's hidden set
RANDOM_MODES = ("generic",) * 4 + ("parallel",) + ("collinear",) * 3  # hidden draws: half on purpose special
VISIBILITIES = ("public", "hidden")

Q = Fraction
Vec = tuple[Fraction, Fraction]


# ---------------------------------------------------------------- exact values to JSON

def _num(x: Fraction) -> float:
    """An input number as a float, refusing any that double precision cannot hold exactly."""
    value = float(x)
    if Fraction(value) != x:
        raise ValueError(f"input {x} is not exact in double precision")
    return value


def _input_record(primitive: Primitive, values: Sequence[Sequence[Fraction]]) -> dict[str, Any]:
    """values: the field values in argument order (two or three per input)."""
    record: dict[str, Any] = {}
    fields = iter(values)
    for arg, shape in primitive.args:
        record[arg] = {field: [_num(x) for x in next(fields)] for field in shape.fields}
    return record


def _expected_record(primitive: Primitive, result: Any) -> dict[str, Any]:
    if primitive.is_box:
        return {"kind": result.kind, "min": [float(x) for x in result.min], "max": [float(x) for x in result.max]}
    if primitive.result is not None:  # the test and 3D families: lists as the family names them
        return {"kind": result.kind, **{name: [[float(x) for x in entry] if width > 1 else float(entry)
                                               for entry in getattr(result, name)]
                                        for name, width in primitive.family.lists}}
    return {
        "kind": result.kind,
        "t0": [float(t) for t in result.t0],
        "t1": [float(t) for t in result.t1],
        "points": [[float(x), float(y)] for x, y in result.points],
    }


def make_case(primitive: Primitive, case_id: str, values: Sequence[Sequence[Fraction]]) -> Case:
    """A case whose expectation is the exact reference's output on exactly these inputs."""
    case_input = _input_record(primitive, values)
    result = solve(primitive.name, case_input)
    return Case(case_id, primitive.name, case_input, _expected_record(primitive, result), result.branch)


# ---------------------------------------------------------------- 2D symmetries and draws

def _rotate(v: Vec, quarter_turns: int, mirror: bool) -> Vec:
    x, y = v
    for _ in range(quarter_turns % 4):
        x, y = -y, x
    return (x, -y) if mirror else (x, y)


def _pick(rng: np.random.Generator, options: Sequence[Any]) -> Any:
    return options[int(rng.integers(len(options)))]


def _quarter(rng: np.random.Generator, bound: int) -> Fraction:
    """A multiple of 1/4 in [-bound, bound]."""
    return Q(int(rng.integers(-4 * bound, 4 * bound + 1)), 4)


SCALES = (Q(1, 2), Q(3, 4), Q(1), Q(3, 2), Q(2), Q(3), Q(4))


def _transform_2d(primitive: Primitive, values: list[Vec], rng: np.random.Generator) -> list[Vec]:
    """The same configuration under a random symmetry that keeps every branch decision."""
    turns, mirror = int(rng.integers(4)), bool(rng.integers(2))
    shift = (_quarter(rng, 3), _quarter(rng, 3))
    out = list(values)
    for index, (_, shape) in enumerate(primitive.args):
        a, b = (_rotate(v, turns, mirror) for v in values[2 * index: 2 * index + 2])
        if shape is BOX2:  # the rotated corners, swapped back on a mirrored axis (min > max stays), shifted
            sense = _rotate((Q(1), Q(2)), turns, mirror)
            corners = [(a[j], b[j]) if sense[j] > 0 else (b[j], a[j]) for j in (0, 1)]
            a, b = ((corners[0][k] + shift[0], corners[1][k] + shift[1]) for k in (0, 1))
        elif shape.fields == ("p0", "p1"):
            a, b = (a[0] + shift[0], a[1] + shift[1]), (b[0] + shift[0], b[1] + shift[1])
            if rng.integers(2):
                a, b = b, a
        else:
            scale = _pick(rng, SCALES) * (-1 if shape.type_name == "Line2" and rng.integers(2) else 1)
            a, b = (a[0] + shift[0], a[1] + shift[1]), (b[0] * scale, b[1] * scale)
        out[2 * index: 2 * index + 2] = [a, b]
    if primitive.args[0][1] is primitive.args[1][1] and rng.integers(2):
        out = out[2:] + out[:2]
    return out


def _from_points(primitive: Primitive, points: list[Vec]) -> list[Vec]:
    """Fields from two points per input: (origin, point - origin) or (p0, p1)."""
    out = []
    for index, (_, shape) in enumerate(primitive.args):
        a, b = points[2 * index], points[2 * index + 1]
        out += [a, b] if shape.fields == ("p0", "p1") else [a, (b[0] - a[0], b[1] - a[1])]
    return out


def _random_clip(primitive: Primitive, rng: np.random.Generator, mode: str) -> list[Vec]:
    """A line, ray or segment and a box (flat now and then): generic, parallel to an axis
    (``parallel``) or aimed at one of the box's corners (``collinear``)."""
    def point() -> Vec:
        return (_quarter(rng, 4), _quarter(rng, 4))

    c0, c1 = point(), point()
    if rng.random() < 0.1:
        c1 = (c0[0], c1[1])
    box_min, box_max = (min(c0[0], c1[0]), min(c0[1], c1[1])), (max(c0[0], c1[0]), max(c0[1], c1[1]))
    a = point()
    if mode == "generic":
        b = point()
    elif mode == "parallel":
        step = Q(int(rng.integers(1, 4)) * _pick(rng, (-1, 1)))
        b = (a[0] + step, a[1]) if rng.integers(2) else (a[0], a[1] + step)
    else:
        corner = (_pick(rng, (box_min[0], box_max[0])), _pick(rng, (box_min[1], box_max[1])))
        b = corner if corner != a else (a[0] + 1, a[1])
    return [*_from_points(primitive, [a, b, a, b])[:2], box_min, box_max]


def _random_2d(primitive: Primitive, rng: np.random.Generator, mode: str) -> list[Vec]:
    """Generic, parallel or collinear configurations from two points per input."""
    if primitive.clips_box:
        return _random_clip(primitive, rng, mode)

    def point() -> Vec:
        return (_quarter(rng, 4), _quarter(rng, 4))

    a0 = point()
    b0 = (a0[0] + int(rng.integers(-3, 4)), a0[1] + int(rng.integers(-3, 4)))
    d0 = (b0[0] - a0[0], b0[1] - a0[1])
    if mode == "generic" or d0 == (0, 0):
        a1, b1 = point(), point()
    elif mode == "parallel":
        a1 = point()
        k = _pick(rng, (Q(-2), Q(-3, 2), Q(-1), Q(-1, 2), Q(1, 2), Q(1), Q(3, 2), Q(2)))
        b1 = (a1[0] + k * d0[0], a1[1] + k * d0[1])
    else:
        u, v = _quarter(rng, 3), _quarter(rng, 3)
        while v == u and primitive.args[1][1].fields == ("p0", "p1"):
            v = _quarter(rng, 3)
        if v == u:  # a ray or line needs a direction; keep it non-zero
            v = u + 1
        a1, b1 = (a0[0] + u * d0[0], a0[1] + u * d0[1]), (a0[0] + v * d0[0], a0[1] + v * d0[1])
    return _from_points(primitive, [a0, b0, a1, b1])


# ---------------------------------------------------------------- box symmetries and draws

def _transform_box(values: list[tuple[Fraction, ...]], rng: np.random.Generator) -> list[tuple[Fraction, ...]]:
    """Permute axes, mirror some, translate, and maybe swap the boxes: branches are unchanged."""
    n = len(values[0])
    order = [int(i) for i in rng.permutation(n)]
    flips = [bool(rng.integers(2)) for _ in range(n)]
    shift = [_quarter(rng, 3) for _ in range(n)]
    out: list[tuple[Fraction, ...]] = []
    for lo, hi in (values[0:2], values[2:4]):
        new_lo, new_hi = [], []
        for axis in order:
            a, b = (-hi[axis], -lo[axis]) if flips[axis] else (lo[axis], hi[axis])
            new_lo.append(a + shift[axis])
            new_hi.append(b + shift[axis])
        out += [tuple(new_lo), tuple(new_hi)]
    return out[2:] + out[:2] if rng.integers(2) else out


def _random_box(rng: np.random.Generator) -> list[tuple[Fraction, ...]]:
    n = int(rng.integers(1, 6))
    boxes = []
    for _ in range(2):
        lo, hi = [], []
        for _ in range(n):
            a, b = sorted((Q(int(rng.integers(-3, 4))), Q(int(rng.integers(-3, 4)))))
            lo.append(a)
            hi.append(b)
        if rng.random() < 0.05:
            axis = int(rng.integers(n))
            lo[axis], hi[axis] = hi[axis] + 1, lo[axis]
        boxes += [tuple(lo), tuple(hi)]
    return boxes


# ---------------------------------------------------------------- triangles, 3D rays and boxes

def _transform_vec(primitive: Primitive, values: list[tuple[Fraction, ...]], rng: np.random.Generator
                   ) -> list[tuple[Fraction, ...]]:
    """Permute and mirror the axes, translate the points, rescale directions, reorder a triangle's
    vertices, maybe swap inputs of the same shape: exact, and every branch is unchanged."""
    n = primitive.args[0][1].dim
    order = [int(i) for i in rng.permutation(n)]
    flips = [bool(rng.integers(2)) for _ in range(n)]
    shift = [_quarter(rng, 3) for _ in range(n)]

    def axes(v: tuple[Fraction, ...], point: bool) -> tuple[Fraction, ...]:
        return tuple((-v[i] if flips[i] else v[i]) + (shift[i] if point else 0) for i in order)

    out: list[tuple[Fraction, ...]] = []
    fields = iter(values)
    for _, shape in primitive.args:
        own = [next(fields) for _ in shape.fields]
        if shape.fields == ("min", "max"):  # a mirrored axis swaps the box's ends on it
            lo, hi = own
            own = [tuple(hi[i] if flips[i] else lo[i] for i in range(n)),
                   tuple(lo[i] if flips[i] else hi[i] for i in range(n))]
        moved = [axes(v, field != "direction") for v, field in zip(own, shape.fields, strict=True)]
        if "direction" in shape.fields:
            k, scale = shape.fields.index("direction"), _pick(rng, SCALES)
            moved[k] = tuple(x * scale for x in moved[k])
        if len(shape.fields) == 3:
            moved = [moved[int(i)] for i in rng.permutation(3)]
        elif shape.fields == ("p0", "p1") and rng.integers(2):  # a reversed segment: t becomes 1 - t
            moved.reverse()
        out += moved
    if primitive.args[0][1] is primitive.args[1][1] and rng.integers(2):
        half = len(primitive.args[0][1].fields)
        out = out[half:] + out[:half]
    return out


def _random_vec(primitive: Primitive, rng: np.random.Generator) -> list[tuple[Fraction, ...]]:
    """Random points on a quarter grid, small integer directions (often along an axis), boxes
    with sorted ends (sometimes flat or, rarely, inverted)."""
    out: list[tuple[Fraction, ...]] = []
    for _, shape in primitive.args:
        n = shape.dim
        if shape.fields == ("min", "max"):
            ends = [sorted((Q(int(rng.integers(-3, 4))), Q(int(rng.integers(-3, 4))))) for _ in range(n)]
            if rng.random() < 0.05:
                ends[int(rng.integers(n))].reverse()
            out += [tuple(e[0] for e in ends), tuple(e[1] for e in ends)]
            continue
        for field in shape.fields:
            if field == "direction":
                out.append(tuple(Q(int(rng.integers(-2, 3))) if rng.random() < 0.6 else Q(0) for _ in range(n)))
            else:
                out.append(tuple(_quarter(rng, 4) for _ in range(n)))
    return out


# ---------------------------------------------------------------- the corpus

_CROSS = ("invalid", "cross", "cross_touch", "cross_miss", "parallel")
_BOUNDED = tuple(f"collinear_{k}_{s}" for k in ("none", "point", "segment") for s in ("same", "opposite"))
_CLIP = ("invalid", "parallel_outside", *(f"{k}{s}" for k in ("miss", "touch", "overlap") for s in ("", "_axis")))
REACHABLE: dict[str, frozenset[str]] = {
    "aligned_box_aligned_box": frozenset({"invalid", "separated", "touch", "flat_input", "overlap"}),
    "line2_line2": frozenset({"invalid", "cross", "parallel", "collinear_line_same", "collinear_line_opposite"}),
    "line2_ray2": frozenset({*_CROSS, "collinear_ray_same", "collinear_ray_opposite"}),
    "line2_segment2": frozenset({*_CROSS, "collinear_segment_same", "collinear_segment_opposite"}),
    "ray2_ray2": frozenset({*_CROSS, "collinear_ray_same", "collinear_segment_opposite", "collinear_point_opposite",
                            "collinear_none_opposite"}),
    "ray2_segment2": frozenset({*_CROSS, *_BOUNDED}),
    "segment2_segment2": frozenset({*_CROSS, *_BOUNDED}),
    "segment2_aligned_box2": frozenset(_CLIP),
    "ray2_aligned_box2": frozenset(_CLIP),
    "line2_aligned_box2": frozenset(_CLIP) - {"miss_axis"},  # an axis-parallel line in the slab crosses the box
    "triangle2_triangle2": frozenset({"invalid", "separated", "touch", "overlap"}),
    "ray3_aligned_box3": frozenset({"invalid", "parallel_outside", "miss", "behind", "touch", "touch_origin", "enter",
                                    "inside"}),
    "segment3_triangle3": frozenset({"invalid", "cross", "touch", "outside", "plane_miss", "parallel", "coplanar_none",
                                     "coplanar_point", "coplanar_segment"}),
}
"""Every branch of each reference that some input reaches; the hidden set must cover all of them."""

def _exact(values: Sequence[Sequence[Any]]) -> list[tuple[Fraction, ...]]:
    return [tuple(Q(x) for x in v) for v in values]


def _scenarios(primitive: Primitive) -> tuple[tuple[str, list[tuple[Fraction, ...]]], ...]:
    table = SCENARIOS_BOX if primitive.is_box else (SCENARIOS_VEC if primitive.name in SCENARIOS_VEC
                                                     else SCENARIOS_2D)[primitive.name]
    return tuple((name, _exact(values)) for name, values in table)


def _rng(primitive: Primitive, *stream: int) -> np.random.Generator:
    return np.random.default_rng([BASE_SEED, PRIMITIVES.index(primitive.name), *stream])


# ---------------------------------------------------------------- exact in double, by construction

TRIES = 8  # symmetry draws tried for a variant before falling back to its untransformed form
NEAR_SCALE_EXPONENTS = (0, 0, -20, 16)  # a near miss is also scaled by 2**k, k drawn from these
TRAIN_SCALE_EXPONENTS = tuple(k for k in range(-24, 21) if k)  # never the public scale


def fixture_source(primitive_name: str) -> str:
    """The good Python fixture's text."""
    return good_source(primitive_name, "python")


def _transform(primitive: Primitive, values: list[Any], rng: np.random.Generator) -> list[Any]:
    if primitive.name in SCENARIOS_VEC:
        return _transform_vec(primitive, values, rng)
    return _transform_box(values, rng) if primitive.is_box else _transform_2d(primitive, values, rng)


def _exact_or_none(primitive: Primitive, case_id: str, values: list[Any]) -> Case | None:
    try:
        case = make_case(primitive, case_id, values)
    except ValueError:  # a coordinate double precision cannot hold
        return None
    if any(out_of_range(x) for x in coordinates(case.input)):  # outside the range the contracts state
        return None
    return case if exact_case(case) else None


def _variant(primitive: Primitive, case_id: str, values: list[Any], rng: np.random.Generator,
             exponent: int = 0) -> Case | None:
    """``values`` under a random symmetry (then scaled by ``2**exponent``), redrawn until double
    precision decides it exactly; else the untransformed values scaled, if those are exact."""
    for _ in range(TRIES):
        case = _exact_or_none(primitive, case_id, scaled(_transform(primitive, values, rng), exponent))
        if case is not None:
            return case
    return _exact_or_none(primitive, case_id, scaled(values, exponent))


def _branch(primitive: Primitive, values: list[Any]) -> str:
    return solve(primitive.name, _input_record(primitive, values)).branch


@cache
def _near_miss_table(primitive_name: str) -> tuple[tuple[str, list[tuple[Fraction, ...]]], ...]:
    """Every scenario's near misses at every ``DELTA_EXPONENTS`` size, before symmetries."""
    primitive = BY_NAME[primitive_name]
    out = []
    for name, values in _scenarios(primitive):
        for k in DELTA_EXPONENTS:
            for move, moved in near_misses(primitive, values, Q(1, 2**k), lambda v: _branch(primitive, v)):
                out.append((f"{name}-near{k}-{move}", moved))
    return tuple(out)


# ---------------------------------------------------------------- the corpus

def _draws(primitive: Primitive, visibility: str) -> Iterator[Case | None]:
    """The cases in file order, before de-duplication (None: a variant no symmetry made exact)."""
    scenarios = _scenarios(primitive)
    if visibility == "public":
        by_name = dict(scenarios)
        for name in PUBLIC[primitive.name]:
            yield make_case(primitive, name, by_name[name])
    else:
        for s_index, (name, values) in enumerate(scenarios):
            for variant in range(VARIANTS):
                yield _variant(primitive, f"{name}-{variant}", values, _rng(primitive, 1, s_index, variant))
        for s_index, (name, values) in enumerate(scenarios):
            for exponent in SCALE_EXPONENTS:
                yield _variant(primitive, f"{name}-scale{exponent:+d}", values,
                               _rng(primitive, 5, s_index, exponent + 64), exponent)
        for index, (case_id, values) in enumerate(_near_miss_table(primitive.name)):
            rng = _rng(primitive, 6, index)
            yield _variant(primitive, case_id, values, rng, _pick(rng, NEAR_SCALE_EXPONENTS))
        for case_id, values in fixed(primitive.name):
            yield _exact_or_none(primitive, case_id, values)
        for index in range(ROUNDING_HIDDEN):
            rng = _rng(primitive, 7, index)
            yield _variant(primitive, f"rounding-{index:03d}", generated(primitive.name, rng), rng)
    count = RANDOM_PUBLIC if visibility == "public" else RANDOM_HIDDEN[primitive.family.name]
    for index in range(count):
        rng = _rng(primitive, 2 if visibility == "public" else 3, index)
        prefix = "sample" if visibility == "public" else "random"
        if primitive.is_box:
            yield make_case(primitive, f"{prefix}-{index:03d}", _random_box(rng))
        elif primitive.name in SCENARIOS_VEC:
            yield make_case(primitive, f"{prefix}-{index:03d}", _random_vec(primitive, rng))
        else:
            mode = "generic" if visibility == "public" else _pick(rng, RANDOM_MODES)
            yield make_case(primitive, f"{prefix}-{mode}-{index:03d}", _random_2d(primitive, rng, mode))


def _key(case: Case) -> str:
    return json.dumps(case.input, sort_keys=True)


@cache
def build_cases(primitive_name: str) -> dict[str, tuple[Case, ...]]:
    """Public and hidden cases; a hidden draw that repeats any earlier input is dropped."""
    primitive = BY_NAME[primitive_name]
    seen: set[str] = set()
    out: dict[str, tuple[Case, ...]] = {}
    for visibility in VISIBILITIES:
        cases = []
        for case in _draws(primitive, visibility):
            if case is not None and _key(case) not in seen:
                seen.add(_key(case))
                cases.append(case)
        out[visibility] = tuple(cases)
    out["hidden"] += _catchers(primitive, seen, out["hidden"])
    return out


def _catchers(primitive: Primitive, seen: set[str], hidden: Sequence[Case]) -> tuple[Case, ...]:
    """Further rounding draws (``rounding.generated``), each kept only when it fails a rewrite
    candidate that fewer than ``CATCHES`` hidden cases fail so far, until every rewrite has that
    many or ``ROUNDING_EXTRA`` draws are spent (the builder then names any rewrite still passing)."""
    good = fixture_source(primitive.name)
    modules = {m.name: rewrite_module(primitive.name, good, m) for m in REWRITES[primitive.name]}
    caught = {name: sum(failure(module, case) is not None for case in hidden) for name, module in modules.items()}
    out: list[Case] = []
    for index in range(ROUNDING_EXTRA):
        wanted = [name for name, count in caught.items() if count < CATCHES]
        if not wanted:
            break
        rng = _rng(primitive, 8, index)
        case = _variant(primitive, f"rounding-extra-{index:03d}", generated(primitive.name, rng), rng)
        if case is None or _key(case) in seen:
            continue
        failing = [name for name in wanted if failure(modules[name], case) is not None]
        if failing:
            seen.add(_key(case))
            out.append(case)
            for name in failing:
                caught[name] += 1
    return tuple(out)


def train_cases(primitive_name: str, rng: np.random.Generator, public: Sequence[Case] = ()) -> tuple[Case, ...]:
    """A fresh hidden set for one training episode, every draw from ``rng``: each scenario under
    a random symmetry and once more at a random power-of-two scale, near misses of each at two
    random sizes 2**-7 .. 2**-42, ``ROUNDING_TRAIN`` odd-denominator contacts
    (``rounding.generated``), and random configurations. Every case is exact in double
    (as in the eval corpus), none repeats a public input, and every branch is reached."""
    primitive = BY_NAME[primitive_name]
    drawn: list[Case | None] = []
    scenarios = _scenarios(primitive)
    for name, values in scenarios:
        drawn.append(_variant(primitive, f"{name}-0", values, rng))
        exponent = _pick(rng, TRAIN_SCALE_EXPONENTS)
        drawn.append(_variant(primitive, f"{name}-scale{exponent:+d}", values, rng, exponent))
    for name, values in scenarios:
        for k in sorted({int(k) for k in rng.integers(DELTA_EXPONENTS[0], DELTA_EXPONENTS[-1] + 1, size=2)}):
            for move, moved in near_misses(primitive, values, Q(1, 2**k), lambda v: _branch(primitive, v)):
                drawn.append(_variant(primitive, f"{name}-near{k}-{move}", moved, rng,
                                      _pick(rng, NEAR_SCALE_EXPONENTS)))
    for index in range(ROUNDING_TRAIN):
        drawn.append(_variant(primitive, f"rounding-{index:03d}", generated(primitive_name, rng), rng))
    for index in range(RANDOM_HIDDEN[primitive.family.name]):
        if primitive.is_box:
            drawn.append(make_case(primitive, f"random-{index:03d}", _random_box(rng)))
        elif primitive.name in SCENARIOS_VEC:
            drawn.append(make_case(primitive, f"random-{index:03d}", _random_vec(primitive, rng)))
        else:
            mode = _pick(rng, RANDOM_MODES)
            drawn.append(make_case(primitive, f"random-{mode}-{index:03d}", _random_2d(primitive, rng, mode)))
    seen = {_key(case) for case in public}
    cases = []

    def keep(case: Case | None) -> None:
        if case is not None and _key(case) not in seen:
            seen.add(_key(case))
            cases.append(case)

    for case in drawn:
        keep(case)
    # A symmetry may reverse a segment (same <-> opposite) and a draw may repeat a public input:
    # redraw the scenarios of any branch not reached, then fall back to them only scaled.
    for name, values in scenarios:
        missing = REACHABLE[primitive_name] - {case.branch for case in cases}
        if _branch(primitive, values) not in missing:
            continue
        for attempt in range(TRIES):
            case = _variant(primitive, f"{name}-again{attempt}", values, rng)
            if case is not None and case.branch in missing:
                keep(case)
                break
        else:
            exponent = _pick(rng, TRAIN_SCALE_EXPONENTS)
            keep(_exact_or_none(primitive, f"{name}-scale{exponent:+d}", scaled(values, exponent)))
    missing = REACHABLE[primitive_name] - {case.branch for case in cases}
    if missing:
        raise RuntimeError(f"{primitive_name}: a train draw missed branches {sorted(missing)}")
    return tuple(cases)


def render_case_file(primitive: str, visibility: str, cases: Sequence[Case]) -> str:
    """The file text: a header naming the command, then one case per line so diffs stay readable."""
    header = {
        "generated_by": COMMAND,
        "note": "Do not edit: regenerate with the command above; --check proves it is current.",
        "primitive": primitive,
        "visibility": visibility,
        "count": len(cases),
    }
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in header.items()]
    items = ",\n".join(f"    {json.dumps(c.to_record())}" for c in cases)
    return "{\n" + "\n".join(lines) + '\n  "cases": [\n' + items + "\n  ]\n}\n"


def load_cases(primitive: str, visibility: str, path: Path | None = None) -> tuple[Case, ...]:
    """The shipped cases of one primitive and visibility."""
    data = json.loads((path or case_path(primitive, visibility)).read_text(encoding="utf-8"))
    if data.get("primitive") != primitive or data.get("visibility") != visibility:
        raise ValueError(f"{path}: header does not name {primitive}/{visibility}")
    return tuple(Case(c["id"], primitive, c["input"], c["expected"], c["branch"]) for c in data["cases"])

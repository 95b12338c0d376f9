"""Known-good and known-bad solutions, and ``check_fixtures``: good ones pass, bad ones fail, starters score 0.

``fixtures/good.{hpp,rs,py}`` are written by hand. Each bad fixture is made on demand (in memory,
never committed; ``build --fixtures DIR`` writes them out to read) from the good one of its
language by a one-bug edit from ``MUTATIONS`` (checked to apply exactly once), so it differs from
a passing solution by exactly the bug it is named after: a strict comparison at a
touching boundary, an epsilon parallel test, swapped parameters, one of the Geometric Tools
quirks the contract fixes (unnormalised collinear parameters, the opposite-direction sign), or
a tolerance of 1e-12 in one exact test (``bad_tol_*``, from ``tolerances.py``), or a rewrite that
is equal in real arithmetic but rounds differently in double (``bad_rw_*``, from ``rewrites.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from gym_sysmath.sandbox.image.supervisor.statuses import ExecutionStatus

from .case import Case
from .cases import COMMAND, load_cases
from .grading import compare, stdin_for
from .languages import BY_LANGUAGE, LANGUAGES
from .layout import good_source, harness_path, read, starter_path
from .mutation import Mutation, apply_edits
from .primitives import PRIMITIVES
from .rewrites import REWRITES
from .runner import Runner
from .tolerances import TOLERANCES

_PARALLEL = Mutation("epsilon_parallel", "treats |perp(d0, d1)| <= 1e-6 as parallel instead of == 0", {
    "cpp": (("if (den != 0) {", "if (den > 1e-6 || den < -1e-6) {"),),
    "rust": (("if den != 0.0 {", "if den.abs() > 1e-6 {"),),
    "python": (("if den != 0:", "if abs(den) > 1e-6:"),),
})


def _swapped(target: str) -> Mutation:
    """Reports t1 where t0 belongs and t0 where t1 belongs, for the crossing point."""
    return Mutation("swapped_params", "reports the crossing point's parameters in swapped order", {
        "cpp": ((f"{{Kind::Point, {{t0}}, {{t1}}, {{at({target}", f"{{Kind::Point, {{t1}}, {{t0}}, {{at({target}"),),
        "rust": ((f"vec![t0], vec![t1], vec![at({target}", f"vec![t1], vec![t0], vec![at({target}"),),
        "python": ((f"[t0], [t1], [_at({target}", f"[t1], [t0], [_at({target}"),),
    })


_OPPOSITE_SIGN = Mutation("opposite_sign", "Geometric Tools' quirk: the second input's collinear parameters "
                          "have the wrong sign for opposite directions", {
    "cpp": (("(t - u0) / (u1 - u0)", "(t - u0) / std::abs(u1 - u0)"), ("#include <algorithm>\n",
                                                                        "#include <algorithm>\n#include <cmath>\n")),
    "rust": (("(t - u0) / (u1 - u0)", "(t - u0) / (u1 - u0).abs()"),),
    "python": (("(t - u0) / (u1 - u0)", "(t - u0) / abs(u1 - u0)"),),
})

_CLIP_COMMON = (
    Mutation("touch_missed", "treats an input that only touches the box as missing it (lo >= hi instead of lo > hi)", {
        "cpp": (("if (lo > hi)", "if (lo >= hi)"),),
        "rust": (("if lo > hi {", "if lo >= hi {"),),
        "python": (("if lo > hi:", "if lo >= hi:"),),
    }),
    Mutation("open_slab", "treats an axis-parallel input on the box's edge as outside (an open slab)", {
        "cpp": (("if (o[i] < b0[i] || o[i] > b1[i])", "if (o[i] <= b0[i] || o[i] >= b1[i])"),),
        "rust": (("if o < b0 || o > b1 {", "if o <= b0 || o >= b1 {"),),
        "python": (("if o < b0 or o > b1:", "if o <= b0 or o >= b1:"),),
    }),
    Mutation("unsorted_slab", "takes (min - origin) / d as the entering parameter even when d < 0", {
        "cpp": (("lo = std::max(lo, std::min(a, b));", "lo = std::max(lo, a);"),
                ("hi = std::min(hi, std::max(a, b));", "hi = std::min(hi, b);")),
        "rust": (("lo = lo.max(a.min(b));", "lo = lo.max(a);"), ("hi = hi.min(a.max(b));", "hi = hi.min(b);")),
        "python": (("lo = max(lo, min(a, b))", "lo = max(lo, a)"), ("hi = min(hi, max(a, b))", "hi = min(hi, b)")),
    }),
)
_CLIP_BUGS: dict[str, tuple[Mutation, ...]] = {
    "segment2_aligned_box2": (*_CLIP_COMMON, Mutation("segment_as_line", "clips the segment's supporting line, "
                                                      "ignoring its end points", {
        "cpp": (("0.0, 1.0, aligned_box)", "-std::numeric_limits<double>::infinity(),\n"
                 "                std::numeric_limits<double>::infinity(), aligned_box)"),
                ("#include <vector>\n", "#include <limits>\n#include <vector>\n")),
        "rust": (("0.0, 1.0, aligned_box)", "f64::NEG_INFINITY, f64::INFINITY, aligned_box)"),),
        "python": (("0.0, 1.0, aligned_box)", '-float("inf"), float("inf"), aligned_box)'),),
    })),
    "ray2_aligned_box2": (*_CLIP_COMMON, Mutation("rational_max", "Geometric Tools' quirk with BSRational "
                                                  "(max() == 0): the ray collapses to its origin", {
        "cpp": (("0.0, std::numeric_limits<double>::infinity(), aligned_box)", "0.0, 0.0, aligned_box)"),),
        "rust": (("0.0, f64::INFINITY, aligned_box)", "0.0, 0.0, aligned_box)"),),
        "python": (('0.0, float("inf"), aligned_box)', "0.0, 0.0, aligned_box)"),),
    })),
    "line2_aligned_box2": (*_CLIP_COMMON, Mutation("rational_max", "Geometric Tools' quirk with BSRational "
                                                   "(max() == 0): the line collapses to its origin", {
        "cpp": (("-std::numeric_limits<double>::infinity(),\n                std::numeric_limits<double>::infinity(), "
                 "aligned_box)", "0.0, 0.0, aligned_box)"),),
        "rust": (("f64::NEG_INFINITY, f64::INFINITY, aligned_box)", "0.0, 0.0, aligned_box)"),),
        "python": (('-float("inf"), float("inf"), aligned_box)', "0.0, 0.0, aligned_box)"),),
    })),
}
"""The bugs of the line, ray and segment / aligned box fixtures."""

_SOLID_BUGS: dict[str, tuple[Mutation, ...]] = {
    "triangle2_triangle2": (
        Mutation("touching_separated", "treats triangles that only touch as separated (open triangles)", {
            "cpp": (("if (s * perp(e, sub(p, a)) < 0) ++beyond;", "if (s * perp(e, sub(p, a)) <= 0) ++beyond;"),),
            "rust": (("s * perp(e, sub(p, a)) < 0.0", "s * perp(e, sub(p, a)) <= 0.0"),),
            "python": (("s * _perp(e, _sub(p, a)) < 0 for", "s * _perp(e, _sub(p, a)) <= 0 for"),),
        }),
        Mutation("counterclockwise_only", "Geometric Tools' assumption: the vertices are taken as counterclockwise", {
            "cpp": (("const double s = area > 0 ? 1 : -1;", "const double s = 1 + 0 * area;"),),
            "rust": (("let s = if area > 0.0 { 1.0 } else { -1.0 };", "let s = 1.0 + 0.0 * area;"),),
            "python": (("s = 1 if area > 0 else -1", "s = 1 + 0 * area"),),
        }),
        Mutation("first_edges_only", "tests only the first triangle's edges as separating lines", {
            "cpp": (("if (separated(triangle0, area0, triangle1) || separated(triangle1, area1, triangle0))",
                     "if (separated(triangle0, area0, triangle1) || area1 == 0)"),),
            "rust": (("if separated(triangle0, area0, triangle1) || separated(triangle1, area1, triangle0) {",
                      "if separated(triangle0, area0, triangle1) || area1 == 0.0 {"),),
            "python": (("if _separated(triangle0, area0, triangle1) or _separated(triangle1, area1, triangle0):",
                        "if _separated(triangle0, area0, triangle1) or area1 == 0:"),),
        }),
    ),
    "ray3_aligned_box3": (
        Mutation("strict_touch", "treats a ray that only touches an edge or a corner as missing the box", {
            "cpp": (("if (enter > leave || leave < 0)", "if (enter >= leave || leave < 0)"),),
            "rust": (("if enter > leave || leave < 0.0 {", "if enter >= leave || leave < 0.0 {"),),
            "python": (("if enter > leave or leave < 0:", "if enter >= leave or leave < 0:"),),
        }),
        Mutation("line_not_ray", "clips the whole line: a ray starting inside reports a negative entry parameter", {
            "cpp": (("const double start = std::max(enter, 0.0);", "const double start = enter;"),),
            "rust": (("let start = enter.max(0.0);", "let start = enter;"),),
            "python": (("start = max(enter, 0.0)", "start = enter"),),
        }),
        Mutation("open_slab", "an axis-parallel ray on a face of the box misses it (strict slab test)", {
            "cpp": (("if (oi < li || oi > hi_i)", "if (oi <= li || oi >= hi_i)"),),
            "rust": (("if o[i] < lo[i] || o[i] > hi[i] {", "if o[i] <= lo[i] || o[i] >= hi[i] {"),),
            "python": (("if o[i] < lo or o[i] > hi:", "if o[i] <= lo or o[i] >= hi:"),),
        }),
    ),
    "segment3_triangle3": (
        Mutation("coplanar_none", "Geometric Tools' quirk: a segment in the triangle's plane never intersects", {
            "cpp": (("if (dot(n, q) != 0) return", "if (dot(n, q) != 0 || den == 0) return"),),
            "rust": (("if dot(n, q) != 0.0 {", "if dot(n, q) != 0.0 || den == 0.0 {"),),
            "python": (("if _dot(n, q) != 0:", "if _dot(n, q) != 0 or den == 0:"),),
        }),
        Mutation("strict_edges", "a crossing on an edge of the triangle misses it (strict barycentric test)", {
            "cpp": (("b1 >= 0 && b2 >= 0", "b1 > 0 && b2 > 0"),),
            "rust": (("b1 >= 0.0 && b2 >= 0.0", "b1 > 0.0 && b2 > 0.0"),),
            "python": (("b1 >= 0 and b2 >= 0", "b1 > 0 and b2 > 0"),),
        }),
        Mutation("ray_not_segment", "ignores the segment's end p1: a crossing beyond it still counts", {
            "cpp": (("num < 0 || num > s * den", "num < 0"),),
            "rust": (("num < 0.0 || num > s * den", "num < 0.0"),),
            "python": (("num < 0 or num > s * den", "num < 0"),),
        }),
    ),
}
"""The bugs of the triangle and 3D ray / box fixtures."""

_BUGS: dict[str, tuple[Mutation, ...]] = {
    "aligned_box_aligned_box": (
        Mutation("touching_separated", "treats touching boxes as separated (strict comparison)", {
            "cpp": (("box0.max[i] < box1.min[i] || box0.min[i] > box1.max[i]",
                     "box0.max[i] <= box1.min[i] || box0.min[i] >= box1.max[i]"),),
            "rust": (("box0.max[i] < box1.min[i] || box0.min[i] > box1.max[i]",
                      "box0.max[i] <= box1.min[i] || box0.min[i] >= box1.max[i]"),),
            "python": (("box0.max[i] < box1.min[i] or box0.min[i] > box1.max[i]",
                        "box0.max[i] <= box1.min[i] or box0.min[i] >= box1.max[i]"),),
        }),
        Mutation("union_box", "returns the bounding box of the union instead of the overlap", {
            "cpp": (("std::max(box0.min[i], box1.min[i])", "std::min(box0.min[i], box1.min[i])"),
                    ("std::min(box0.max[i], box1.max[i])", "std::max(box0.max[i], box1.max[i])")),
            "rust": (("box0.min[i].max(box1.min[i])", "box0.min[i].min(box1.min[i])"),
                     ("box0.max[i].min(box1.max[i])", "box0.max[i].max(box1.max[i])")),
            "python": (("[max(box0.min[i], box1.min[i])", "[min(box0.min[i], box1.min[i])"),
                       ("[min(box0.max[i], box1.max[i])", "[max(box0.max[i], box1.max[i])")),
        }),
        Mutation("first_box_only_invalid", "checks only the first box for min > max", {
            "cpp": (("box0.min[i] > box0.max[i] || box1.min[i] > box1.max[i]", "box0.min[i] > box0.max[i]"),),
            "rust": (("box0.min[i] > box0.max[i] || box1.min[i] > box1.max[i]", "box0.min[i] > box0.max[i]"),),
            "python": (("box0.min[i] > box0.max[i] or box1.min[i] > box1.max[i]", "box0.min[i] > box0.max[i]"),),
        }),
    ),
    "line2_line2": (_PARALLEL, _swapped("line0.origin")),
    "line2_ray2": (
        Mutation("strict_ray_origin", "excludes the ray's origin (t1 > 0 instead of t1 >= 0)", {
            "cpp": (("if (t1 >= 0)", "if (t1 > 0)"),),
            "rust": (("if t1 >= 0.0 {", "if t1 > 0.0 {"),),
            "python": (("if t1 >= 0:", "if t1 > 0:"),),
        }),
        Mutation("unnormalised_start", "Geometric Tools' quirk: the collinear start parameter is not divided "
                 "by |d0|^2", {
            "cpp": (("dot(q, d0) / dot(d0, d0);", "dot(q, d0);"),),
            "rust": (("dot(q, d0) / dot(d0, d0);", "dot(q, d0);"),),
            "python": (("_dot(q, d0) / _dot(d0, d0)", "_dot(q, d0)"),),
        }),
        _PARALLEL,
    ),
    "line2_segment2": (
        Mutation("strict_segment_end", "excludes the segment's end p1 (t1 < 1 instead of t1 <= 1)", {
            "cpp": (("if (0 <= t1 && t1 <= 1)", "if (0 <= t1 && t1 < 1)"),),
            "rust": (("if (0.0..=1.0).contains(&t1) {", "if (0.0..1.0).contains(&t1) {"),),
            "python": (("if 0 <= t1 <= 1:", "if 0 <= t1 < 1:"),),
        }),
        Mutation("unordered_collinear", "lists the collinear end points in segment order, not along the line", {
            "cpp": (("if (u0 < u1)", "if (u0 != u1)"),),
            "rust": (("if u0 < u1 {", "if u0 != u1 {"),),
            "python": (("if u0 < u1:", "if u0 != u1:"),),
        }),
    ),
    "ray2_ray2": (
        Mutation("strict_first_origin", "excludes the first ray's origin (t0 > 0 instead of t0 >= 0)", {
            "cpp": (("if (t0 >= 0 && t1 >= 0)", "if (t0 > 0 && t1 >= 0)"),),
            "rust": (("if t0 >= 0.0 && t1 >= 0.0 {", "if t0 > 0.0 && t1 >= 0.0 {"),),
            "python": (("if t0 >= 0 and t1 >= 0:", "if t0 > 0 and t1 >= 0:"),),
        }),
        Mutation("unnormalised_collinear", "Geometric Tools' quirk: the collinear parameter dot(q, d0) is not "
                 "divided by |d0|^2", {
            "cpp": (("const double s = dot(q, d0) / dot(d0, d0);", "const double s = dot(q, d0);"),),
            "rust": (("let s = dot(q, d0) / dot(d0, d0);", "let s = dot(q, d0);"),),
            "python": (("s = _dot(q, d0) / _dot(d0, d0)", "s = _dot(q, d0)"),),
        }),
        Mutation("shared_origin_none", "Geometric Tools' quirk: opposite rays sharing their origin meet nowhere", {
            "cpp": (("if (s == 0) return {Kind::Point, {0.0}, {0.0}, {ray0.origin}};",
                     "if (s == 0) return {Kind::None};"),),
            "rust": (("return result(Kind::Point, vec![0.0], vec![0.0], vec![ray0.origin]);",
                      "return empty(Kind::None);"),),
            "python": (("return Intersection(Kind.POINT, [0.0], [0.0], [ray0.origin])",
                        "return Intersection(Kind.NONE)"),),
        }),
    ),
    "ray2_segment2": (
        Mutation("strict_segment_start", "excludes the segment's start p0 (0 < t1 instead of 0 <= t1)", {
            "cpp": (("if (t0 >= 0 && 0 <= t1 && t1 <= 1)", "if (t0 >= 0 && 0 < t1 && t1 <= 1)"),),
            "rust": (("if t0 >= 0.0 && (0.0..=1.0).contains(&t1) {", "if t0 >= 0.0 && t1 > 0.0 && t1 <= 1.0 {"),),
            "python": (("if t0 >= 0 and 0 <= t1 <= 1:", "if t0 >= 0 and 0 < t1 <= 1:"),),
        }),
        _OPPOSITE_SIGN,
    ),
    "segment2_segment2": (
        Mutation("strict_first_start", "excludes the first segment's start (0 < t0 instead of 0 <= t0)", {
            "cpp": (("if (0 <= t0 && t0 <= 1 && 0 <= t1 && t1 <= 1)", "if (0 < t0 && t0 <= 1 && 0 <= t1 && t1 <= 1)"),),
            "rust": (("if (0.0..=1.0).contains(&t0) && (0.0..=1.0).contains(&t1) {",
                      "if t0 > 0.0 && t0 <= 1.0 && (0.0..=1.0).contains(&t1) {"),),
            "python": (("if 0 <= t0 <= 1 and 0 <= t1 <= 1:", "if 0 < t0 <= 1 and 0 <= t1 <= 1:"),),
        }),
        _OPPOSITE_SIGN,
        _swapped("segment0.p0"),
    ),
    **_CLIP_BUGS,
    **_SOLID_BUGS,
}


MUTATIONS: dict[str, tuple[Mutation, ...]] = {p: _BUGS[p] + TOLERANCES[p] + REWRITES[p] for p in PRIMITIVES}
"""Every bad fixture of each primitive: the bugs above, then the tolerance candidates (``tolerances.py``),
then the rewrite candidates (``rewrites.py``)."""


def bad_file_name(mutation: Mutation, language: str) -> str:
    return f"bad_{mutation.name}.{BY_LANGUAGE[language].ext}"


def bad_source(primitive: str, language: str, mutation: Mutation) -> str:
    """The good fixture with the mutation applied; every edit must match exactly once."""
    text = apply_edits(good_source(primitive, language), mutation, language, primitive)
    lang = BY_LANGUAGE[language]
    note = f"{lang.comment} Generated by {COMMAND} from good.{lang.ext}; do not edit."
    return f"{note}\n{lang.comment} Bug: {mutation.bug}.\n{text}"


def bad_sources(primitive: str, language: str) -> dict[str, str]:
    """file name -> source of every bad fixture of one primitive and language."""
    return {bad_file_name(m, language): bad_source(primitive, language, m) for m in MUTATIONS[primitive]}


def bad_fixture(primitive: str, language: str, name: str) -> str:
    """The source of the bad fixture named after its bug (``bad_<name>.<ext>`` when written out)."""
    by_name = {m.name: m for m in MUTATIONS[primitive]}
    if name not in by_name:
        raise KeyError(f"{primitive} has no bad fixture {name!r}; it has {', '.join(by_name)}")
    return bad_source(primitive, language, by_name[name])


# ---------------------------------------------------------------- check_fixtures

@dataclass(frozen=True)
class FixtureResult:
    primitive: str
    language: str
    fixture: str  # "good", "starter" or a bad fixture's mutation name
    ok: bool
    detail: str

    @property
    def label(self) -> str:
        return f"{self.primitive}/{self.language}/{self.fixture}"


@dataclass(frozen=True)
class FixtureReport:
    results: tuple[FixtureResult, ...]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def count(self, good: bool) -> tuple[int, int]:
        chosen = [r for r in self.results if (r.fixture == "good") == good and r.fixture != "starter"]
        return sum(r.ok for r in chosen), len(chosen)

    def lines(self) -> list[str]:
        out = [f"FAIL {r.label}: {r.detail}" for r in self.results if not r.ok]
        (good_ok, good_n), (bad_ok, bad_n) = self.count(True), self.count(False)
        starters = [r for r in self.results if r.fixture == "starter"]
        return [*out, *self.candidate_lines(), f"good fixtures pass: {good_ok}/{good_n}",
                f"bad fixtures fail: {bad_ok}/{bad_n}",
                f"starters compile and score 0: {sum(r.ok for r in starters)}/{len(starters)}"]

    def candidate_lines(self) -> list[str]:
        """Per primitive: its rewrite and tolerance candidates generated (all languages) and failing."""
        out = []
        for primitive in dict.fromkeys(r.primitive for r in self.results):
            counts = []
            for label, prefix in (("rewrite", "rw_"), ("tolerance", "tol_")):
                chosen = [r for r in self.results if r.primitive == primitive and r.fixture.startswith(prefix)]
                languages = len({r.language for r in chosen}) or 1
                counts.append(f"{len(chosen) // languages} {label} candidates x {languages} languages, "
                              f"{sum(r.ok for r in chosen)}/{len(chosen)} fail a hidden case")
            out.append(f"{primitive}: " + "; ".join(counts))
        return out


@dataclass(frozen=True)
class _Job:
    primitive: str
    language: str
    fixture: str
    source: str


def _jobs(primitives: Iterable[str], languages: Iterable[str]) -> list[_Job]:
    jobs = []
    for primitive in primitives:
        for language in languages:
            jobs.append(_Job(primitive, language, "good", good_source(primitive, language)))
            jobs += [_Job(primitive, language, m.name, bad_source(primitive, language, m))
                     for m in MUTATIONS[primitive]]
            jobs.append(_Job(primitive, language, "starter", read(starter_path(primitive, language))))
    return jobs


def _judge(job: _Job, status: ExecutionStatus, output: str, cases: Sequence[Case],
           hidden_ids: frozenset[str]) -> FixtureResult:
    def result(ok: bool, detail: str) -> FixtureResult:
        return FixtureResult(job.primitive, job.language, job.fixture, ok, detail)

    if status != ExecutionStatus.OK:
        return result(False, f"{status}: {output[-600:]}")
    report = compare(cases, output)
    if not report.well_formed:
        return result(False, f"ill-formed output: {report.failures[0][1]}")
    if job.fixture == "good":
        return result(report.ok, report.summary() + "".join(f"; {c}: {r}" for c, r in report.failures[:3]))
    if job.fixture == "starter":
        return result(report.passed == 0, f"starter passes {report.summary()}")
    hidden_failures = sum(case_id in hidden_ids for case_id, _ in report.failures)
    return result(hidden_failures > 0, f"passes {report.summary()}, fails {hidden_failures} hidden cases")


def check_fixtures(run: Runner, *, primitives: Sequence[str] = PRIMITIVES, languages: Sequence[str] = LANGUAGES,
           max_workers: int = 1) -> FixtureReport:
    """Run every fixture once on public + hidden inputs with ``run(language, files, stdin)``.

    Good fixtures must pass every case; each bad fixture must compile, print well-formed output
    and fail at least one hidden case; each starter must compile and pass none.
    """
    corpus = {p: load_cases(p, "public") + load_cases(p, "hidden") for p in primitives}
    hidden = {p: frozenset(c.id for c in load_cases(p, "hidden")) for p in primitives}
    stdin = {p: stdin_for(cases) for p, cases in corpus.items()}

    def one(job: _Job) -> FixtureResult:
        lang = BY_LANGUAGE[job.language]
        files = {lang.harness_file: read(harness_path(job.primitive, job.language)), lang.candidate_file: job.source}
        status, output = run(job.language, files, stdin[job.primitive])
        return _judge(job, status, output, corpus[job.primitive], hidden[job.primitive])

    jobs = _jobs(primitives, languages)
    with ThreadPoolExecutor(max_workers=max(1, max_workers)) as pool:
        return FixtureReport(tuple(pool.map(one, jobs)))


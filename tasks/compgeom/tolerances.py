"""Tolerance candidates: the good fixture with one exact test loosened by a tolerance.

The contracts have no tolerance anywhere, and the hidden cases are built so that a candidate
with one fails: per primitive and per kind of test (listed below), the builder runs each
candidate's Python form in this process at every size in ``SIZES`` and requires a failing
hidden case at each (``uncaught``). A tolerance only widens what it lets through as it grows,
so the smallest size, 1e-12 of the inputs' scale, is the hardest to catch; the bad fixtures
(``bad_tol_*`` in all three languages, run by ``check_fixtures``) use that size.

- ``parallel``: ``|perp(d0, d1)| <= eps`` (absolute) or ``<= eps*|d0|*|d1|`` (relative, the sine
  of the angle) counts as parallel;
- ``collinear``: ``|perp(q, d0)| <= eps`` or ``<= eps*|q|*|d0|`` counts as collinear;
- ``interval``: a crossing parameter within ``eps`` outside its interval counts as inside
  (parameters are scale-free, so one form), and ``interval_collinear`` does the same for the
  collinear overlap test (an end within ``eps`` of the other input's end counts as touching);
- ``touch``: boxes less than ``eps`` apart (absolute, or relative to the compared coordinates)
  count as touching.

A line, ray or segment against a 2D box has its own four: ``parallel`` (a direction component
within ``eps`` of 0 counts as parallel to that axis), ``touch`` (an axis-parallel input within
``eps`` outside the box's slab counts as inside it), ``interval`` (an entering parameter within
``eps`` after the leaving one still touches) and ``interval_point`` (a part inside shorter than
``eps`` counts as a point).
"""

from __future__ import annotations

from collections.abc import Sequence

from .case import Case
from .inprocess import first_failure, load_source
from .mutation import CMATH, Edit, Mutation, apply_edits
from .primitives import BY_NAME, PRIMITIVES

EPS = "1e-12"
SIZES: tuple[float, ...] = (1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 0.25, 1.0, 1e3)
"""The tolerance sizes the builder tries for every candidate (bad fixtures use the first)."""


#: Per language, the (old, new) replacements of one candidate (``Mutation.edits``).
_Edits = dict[str, tuple[Edit, ...]]

_PARALLEL: dict[str, _Edits] = {
    "abs": {
        "cpp": (("if (den != 0) {", f"if (std::abs(den) > {EPS}) {{"), CMATH),
        "rust": (("if den != 0.0 {", f"if den.abs() > {EPS} {{"),),
        "python": (("if den != 0:", f"if abs(den) > {EPS}:"),),
    },
    "rel": {
        "cpp": (("if (den != 0) {", f"if (std::abs(den) > {EPS} * std::sqrt(dot(d0, d0) * dot(d1, d1))) {{"), CMATH),
        "rust": (("if den != 0.0 {", f"if den.abs() > {EPS} * (dot(d0, d0) * dot(d1, d1)).sqrt() {{"),),
        "python": (("if den != 0:", f"if abs(den) > {EPS} * (_dot(d0, d0) * _dot(d1, d1)) ** 0.5:"),),
    },
}
_COLLINEAR: dict[str, _Edits] = {
    "abs": {
        "cpp": (("if (perp(q, d0) != 0) return", f"if (std::abs(perp(q, d0)) > {EPS}) return"), CMATH),
        "rust": (("if perp(q, d0) != 0.0 {", f"if perp(q, d0).abs() > {EPS} {{"),),
        "python": (("if _perp(q, d0) != 0:", f"if abs(_perp(q, d0)) > {EPS}:"),),
    },
    "rel": {
        "cpp": (("if (perp(q, d0) != 0) return",
                 f"if (std::abs(perp(q, d0)) > {EPS} * std::sqrt(dot(q, q) * dot(d0, d0))) return"), CMATH),
        "rust": (("if perp(q, d0) != 0.0 {", f"if perp(q, d0).abs() > {EPS} * (dot(q, q) * dot(d0, d0)).sqrt() {{"),),
        "python": (("if _perp(q, d0) != 0:", f"if abs(_perp(q, d0)) > {EPS} * (_dot(q, q) * _dot(d0, d0)) ** 0.5:"),),
    },
}
_LO, _HI = f"-{EPS}", f"1 + {EPS}"
_INTERVAL: dict[str, _Edits] = {
    "line2_ray2": {
        "cpp": (("if (t1 >= 0)", f"if (t1 >= {_LO})"),),
        "rust": (("if t1 >= 0.0 {", f"if t1 >= {_LO} {{"),),
        "python": (("if t1 >= 0:", f"if t1 >= {_LO}:"),),
    },
    "line2_segment2": {
        "cpp": (("if (0 <= t1 && t1 <= 1)", f"if ({_LO} <= t1 && t1 <= {_HI})"),),
        "rust": (("if (0.0..=1.0).contains(&t1) {", f"if ({_LO}..=1.0 + {EPS}).contains(&t1) {{"),),
        "python": (("if 0 <= t1 <= 1:", f"if {_LO} <= t1 <= {_HI}:"),),
    },
    "ray2_ray2": {
        "cpp": (("if (t0 >= 0 && t1 >= 0)", f"if (t0 >= {_LO} && t1 >= {_LO})"),),
        "rust": (("if t0 >= 0.0 && t1 >= 0.0 {", f"if t0 >= {_LO} && t1 >= {_LO} {{"),),
        "python": (("if t0 >= 0 and t1 >= 0:", f"if t0 >= {_LO} and t1 >= {_LO}:"),),
    },
    "ray2_segment2": {
        "cpp": (("if (t0 >= 0 && 0 <= t1 && t1 <= 1)", f"if (t0 >= {_LO} && {_LO} <= t1 && t1 <= {_HI})"),),
        "rust": (("if t0 >= 0.0 && (0.0..=1.0).contains(&t1) {",
                  f"if t0 >= {_LO} && ({_LO}..=1.0 + {EPS}).contains(&t1) {{"),),
        "python": (("if t0 >= 0 and 0 <= t1 <= 1:", f"if t0 >= {_LO} and {_LO} <= t1 <= {_HI}:"),),
    },
    "segment2_segment2": {
        "cpp": (("if (0 <= t0 && t0 <= 1 && 0 <= t1 && t1 <= 1)",
                 f"if ({_LO} <= t0 && t0 <= {_HI} && {_LO} <= t1 && t1 <= {_HI})"),),
        "rust": (("if (0.0..=1.0).contains(&t0) && (0.0..=1.0).contains(&t1) {",
                  f"if ({_LO}..=1.0 + {EPS}).contains(&t0) && ({_LO}..=1.0 + {EPS}).contains(&t1) {{"),),
        "python": (("if 0 <= t0 <= 1 and 0 <= t1 <= 1:", f"if {_LO} <= t0 <= {_HI} and {_LO} <= t1 <= {_HI}:"),),
    },
}
_INTERVAL_COLLINEAR: dict[str, _Edits] = {
    "ray2_ray2": {  # facing away by less than eps counts as sharing the origin
        "cpp": (("if (s == 0) return", f"if (s >= {_LO}) return"),),
        "rust": (("if s == 0.0 {", f"if s >= {_LO} {{"),),
        "python": (("if s == 0:", f"if s >= {_LO}:"),),
    },
    "ray2_segment2": {  # a segment ending less than eps behind the origin still overlaps
        "cpp": (("if (hi < 0) return", f"if (hi < {_LO}) return"),),
        "rust": (("if hi < 0.0 {", f"if hi < {_LO} {{"),),
        "python": (("if hi < 0:", f"if hi < {_LO}:"),),
    },
    "segment2_segment2": {  # a gap of less than eps still overlaps
        "cpp": (("if (lo > hi) return", f"if (lo > hi + {EPS}) return"),),
        "rust": (("if lo > hi {", f"if lo > hi + {EPS} {{"),),
        "python": (("if lo > hi:", f"if lo > hi + {EPS}:"),),
    },
}
_TOUCH: dict[str, _Edits] = {
    "abs": {
        "cpp": (("box0.max[i] < box1.min[i] || box0.min[i] > box1.max[i]",
                 f"box1.min[i] - box0.max[i] > {EPS} || box0.min[i] - box1.max[i] > {EPS}"),),
        "rust": (("box0.max[i] < box1.min[i] || box0.min[i] > box1.max[i]",
                  f"box1.min[i] - box0.max[i] > {EPS} || box0.min[i] - box1.max[i] > {EPS}"),),
        "python": (("box0.max[i] < box1.min[i] or box0.min[i] > box1.max[i]",
                    f"box1.min[i] - box0.max[i] > {EPS} or box0.min[i] - box1.max[i] > {EPS}"),),
    },
    "rel": {
        "cpp": (("box0.max[i] < box1.min[i] || box0.min[i] > box1.max[i]",
                 f"box1.min[i] - box0.max[i] > {EPS} * std::max(std::abs(box0.max[i]), std::abs(box1.min[i])) || "
                 f"box0.min[i] - box1.max[i] > {EPS} * std::max(std::abs(box0.min[i]), std::abs(box1.max[i]))"), CMATH),
        "rust": (("box0.max[i] < box1.min[i] || box0.min[i] > box1.max[i]",
                  f"box1.min[i] - box0.max[i] > {EPS} * box0.max[i].abs().max(box1.min[i].abs())\n"
                  f"            || box0.min[i] - box1.max[i] > {EPS} * box0.min[i].abs().max(box1.max[i].abs())"),),
        "python": (("box0.max[i] < box1.min[i] or box0.min[i] > box1.max[i]",
                    f"(box1.min[i] - box0.max[i] > {EPS} * max(abs(box0.max[i]), abs(box1.min[i]))\n"
                    f"                or box0.min[i] - box1.max[i] > {EPS}"
                    " * max(abs(box0.min[i]), abs(box1.max[i])))"),),
    },
}

_NORM = {"cpp": "std::sqrt(direction.x * direction.x + direction.y * direction.y)",
         "rust": "(direction.x * direction.x + direction.y * direction.y).sqrt()",
         "python": "(direction.x ** 2 + direction.y ** 2) ** 0.5"}
# A line, ray or segment against a 2D box (the good fixtures' slab loop): name -> (bug, edits).
_CLIP_TOLERANCES: dict[str, tuple[str, _Edits]] = {
    "tol_parallel_abs": ("a direction component of at most {eps} (absolute) counts as parallel to the axis", {
        "cpp": (("if (d[i] == 0) {", f"if (std::abs(d[i]) <= {EPS}) {{"), CMATH),
        "rust": (("if d == 0.0 {", f"if d.abs() <= {EPS} {{"),),
        "python": (("if d == 0:", f"if abs(d) <= {EPS}:"),),
    }),
    "tol_parallel_rel": ("a direction component of at most {eps} of the direction's length counts as parallel", {
        "cpp": (("if (d[i] == 0) {", f"if (std::abs(d[i]) <= {EPS} * {_NORM['cpp']}) {{"), CMATH),
        "rust": (("if d == 0.0 {", f"if d.abs() <= {EPS} * {_NORM['rust']} {{"),),
        "python": (("if d == 0:", f"if abs(d) <= {EPS} * {_NORM['python']}:"),),
    }),
    "tol_touch_abs": ("an axis-parallel input less than {eps} (absolute) outside the box's slab counts as touching", {
        "cpp": (("if (o[i] < b0[i] || o[i] > b1[i])", f"if (b0[i] - o[i] > {EPS} || o[i] - b1[i] > {EPS})"),),
        "rust": (("if o < b0 || o > b1 {", f"if b0 - o > {EPS} || o - b1 > {EPS} {{"),),
        "python": (("if o < b0 or o > b1:", f"if b0 - o > {EPS} or o - b1 > {EPS}:"),),
    }),
    "tol_touch_rel": ("an axis-parallel input less than {eps} of the coordinates outside the box's slab counts as "
                      "touching", {
        "cpp": (("if (o[i] < b0[i] || o[i] > b1[i])",
                 f"if (b0[i] - o[i] > {EPS} * std::max(std::abs(b0[i]), std::abs(o[i]))\n"
                 f"                || o[i] - b1[i] > {EPS} * std::max(std::abs(o[i]), std::abs(b1[i])))"), CMATH),
        "rust": (("if o < b0 || o > b1 {",
                  f"if b0 - o > {EPS} * b0.abs().max(o.abs()) || o - b1 > {EPS} * o.abs().max(b1.abs()) {{"),),
        "python": (("if o < b0 or o > b1:",
                    f"if b0 - o > {EPS} * max(abs(b0), abs(o)) or o - b1 > {EPS} * max(abs(o), abs(b1)):"),),
    }),
    "tol_interval": ("entering less than {eps} (in parameter) after leaving still touches the box", {
        "cpp": (("if (lo > hi)", f"if (lo > hi + {EPS})"), ("if (lo == hi)", f"if (hi - lo <= {EPS})")),
        "rust": (("if lo > hi {", f"if lo > hi + {EPS} {{"), ("if lo == hi {", f"if hi - lo <= {EPS} {{")),
        "python": (("if lo > hi:", f"if lo > hi + {EPS}:"), ("if lo == hi:", f"if hi - lo <= {EPS}:")),
    }),
    "tol_interval_point": ("a part inside the box shorter than {eps} (in parameter) counts as one point", {
        "cpp": (("if (lo == hi)", f"if (hi - lo <= {EPS})"),),
        "rust": (("if lo == hi {", f"if hi - lo <= {EPS} {{"),),
        "python": (("if lo == hi:", f"if hi - lo <= {EPS}:"),),
    }),
}

_SIDE_REL = {"cpp": "std::sqrt(dot(e, e) * dot(sub(p, a), sub(p, a)))",
             "rust": "(dot(e, e) * dot(sub(p, a), sub(p, a))).sqrt()"}
_AREA_REL = {"cpp": "std::sqrt(dot(sub(t.v1, t.v0), sub(t.v1, t.v0)) * dot(sub(t.v2, t.v0), sub(t.v2, t.v0)))",
             "rust": "(dot(sub(t.v1, t.v0), sub(t.v1, t.v0)) * dot(sub(t.v2, t.v0), sub(t.v2, t.v0))).sqrt()",
             "python": "(_dot(_sub(t.v1, t.v0), _sub(t.v1, t.v0)) * _dot(_sub(t.v2, t.v0), _sub(t.v2, t.v0))) ** 0.5"}
_AREA = {"cpp": "perp(sub(t.v1, t.v0), sub(t.v2, t.v0))", "rust": "perp(sub(t.v1, t.v0), sub(t.v2, t.v0))",
         "python": "_perp(_sub(t.v1, t.v0), _sub(t.v2, t.v0))"}


def _flat_area(form: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """The area function returns 0 for a triangle of area at most eps (absolute, or relative to
    the product of two edge lengths): it is then invalid."""
    def limit(lang: str) -> str:
        return EPS if form == "abs" else f"{EPS} * {_AREA_REL[lang]}"
    return {
        "cpp": ((f"inline double area(const Triangle2& t) {{ return {_AREA['cpp']}; }}",
                 f"inline double area(const Triangle2& t) {{\n    const double a = {_AREA['cpp']};\n"
                 f"    return std::abs(a) <= {limit('cpp')} ? 0 : a;\n}}"), CMATH),
        "rust": ((f"fn area(t: &Triangle2) -> f64 {{\n    {_AREA['rust']}\n}}",
                  f"fn area(t: &Triangle2) -> f64 {{\n    let a = {_AREA['rust']};\n"
                  f"    if a.abs() <= {limit('rust')} {{ 0.0 }} else {{ a }}\n}}"),),
        "python": ((f"def _area(t: Triangle2) -> float:\n    return {_AREA['python']}",
                    f"def _area(t: Triangle2) -> float:\n    a = {_AREA['python']}\n"
                    + (f"    size = {_AREA_REL['python']}\n    return 0.0 if abs(a) <= {EPS} * size else a"
                       if form == "rel" else f"    return 0.0 if abs(a) <= {EPS} else a")),),
    }


_LIMIT_PY = ("def _separated(",
             f'def _size(e: Vec2, d: Vec2) -> float:\n    """The scale of the tolerance {EPS}."""\n'
             "    return (_dot(e, e) * _dot(d, d)) ** 0.5\n\n\ndef _separated(")


def _beyond(form: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """A vertex counts as beyond an edge's line only when more than eps beyond it."""
    def limit(lang: str) -> str:
        return f"-{EPS}" if form == "abs" else f"-{EPS} * {_SIDE_REL[lang]}"
    python = f"-{EPS} * _size(e, _sub(p, a))" if form == "rel" else f"-{EPS}"
    return {
        "cpp": (("if (s * perp(e, sub(p, a)) < 0) ++beyond;",
                 f"if (s * perp(e, sub(p, a)) < {limit('cpp')}) ++beyond;"), CMATH),
        "rust": (("s * perp(e, sub(p, a)) < 0.0", f"s * perp(e, sub(p, a)) < {limit('rust')}"),),
        "python": (("s * _perp(e, _sub(p, a)) < 0 for", f"s * _perp(e, _sub(p, a)) < {python} for"),
                   *((_LIMIT_PY,) if form == "rel" else ())),
    }


_D_NORM = {"cpp": "std::sqrt(d.x * d.x + d.y * d.y + d.z * d.z)",
           "rust": "(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt()",
           "python": "(d.x * d.x + d.y * d.y + d.z * d.z) ** 0.5"}
_OWN_TOLERANCES: dict[str, tuple[tuple[str, str, _Edits], ...]] = {
    "triangle2_triangle2": (
        ("tol_degenerate_abs", f"a triangle of area at most {EPS} (absolute) counts as degenerate", _flat_area("abs")),
        ("tol_degenerate_rel", f"a triangle of area at most {EPS} of its edges' product counts as degenerate",
         _flat_area("rel")),
        ("tol_touch_abs", f"a vertex less than {EPS} (absolute) beyond an edge's line counts as touching it",
         _beyond("abs")),
        ("tol_touch_rel", f"a vertex less than {EPS} (relative to the lengths) beyond an edge's line touches it",
         _beyond("rel")),
    ),
    "ray3_aligned_box3": (
        ("tol_parallel_abs", f"a direction component of at most {EPS} (absolute) counts as parallel to the axis", {
            "cpp": (("if (di == 0) {", f"if (std::abs(di) <= {EPS}) {{"), CMATH),
            "rust": (("if d[i] == 0.0 {", f"if d[i].abs() <= {EPS} {{"),),
            "python": (("if d[i] == 0:", f"if abs(d[i]) <= {EPS}:"),),
        }),
        ("tol_parallel_rel", f"a direction component of at most {EPS} of the direction's length counts as parallel", {
            "cpp": (("if (di == 0) {", f"if (std::abs(di) <= {EPS} * {_D_NORM['cpp']}) {{"), CMATH),
            "rust": (("if d[i] == 0.0 {", f"if d[i].abs() <= {EPS} * {_D_NORM['rust']} {{"),),
            "python": (("if d[i] == 0:", f"if abs(d[i]) <= {EPS} * {_D_NORM['python']}:"),),
        }),
        ("tol_touch_abs", f"an axis-parallel ray less than {EPS} (absolute) outside the box's slab counts as inside", {
            "cpp": (("if (oi < li || oi > hi_i)", f"if (li - oi > {EPS} || oi - hi_i > {EPS})"),),
            "rust": (("if o[i] < lo[i] || o[i] > hi[i] {", f"if lo[i] - o[i] > {EPS} || o[i] - hi[i] > {EPS} {{"),),
            "python": (("if o[i] < lo or o[i] > hi:", f"if lo - o[i] > {EPS} or o[i] - hi > {EPS}:"),),
        }),
        ("tol_touch_rel", f"an axis-parallel ray less than {EPS} of the coordinates outside the box's slab counts as "
         "inside", {
            "cpp": (("if (oi < li || oi > hi_i)", f"if (li - oi > {EPS} * std::max(std::abs(li), std::abs(oi))\n"
                     f"                || oi - hi_i > {EPS} * std::max(std::abs(oi), std::abs(hi_i)))"), CMATH),
            "rust": (("if o[i] < lo[i] || o[i] > hi[i] {",
                      f"if lo[i] - o[i] > {EPS} * lo[i].abs().max(o[i].abs())\n"
                      f"                || o[i] - hi[i] > {EPS} * o[i].abs().max(hi[i].abs()) {{"),),
            "python": (("if o[i] < lo or o[i] > hi:",
                        f"if (lo - o[i] > {EPS} * max(abs(lo), abs(o[i]))\n"
                        f"                    or o[i] - hi > {EPS} * max(abs(o[i]), abs(hi))):"),),
        }),
        ("tol_interval", f"entering less than {EPS} (in parameter) after leaving, or leaving less than {EPS} "
         "before 0, meets the box", {
            "cpp": (("if (enter > leave || leave < 0)", f"if (enter > leave + {EPS} || leave < -{EPS})"),),
            "rust": (("if enter > leave || leave < 0.0 {", f"if enter > leave + {EPS} || leave < -{EPS} {{"),),
            "python": (("if enter > leave or leave < 0:", f"if enter > leave + {EPS} or leave < -{EPS}:"),),
        }),
        ("tol_interval_point", f"a part inside the box shorter than {EPS} (in parameter) counts as one point", {
            "cpp": (("start == leave ? Kind::Point", f"leave - start <= {EPS} ? Kind::Point"),
                    ("start == leave ? std::vector", f"leave - start <= {EPS} ? std::vector")),
            "rust": (("if start == leave { vec!", f"if leave - start <= {EPS} {{ vec!"),
                     ("if start == leave { Kind::Point", f"if leave - start <= {EPS} {{ Kind::Point")),
            "python": (("[start] if start == leave", f"[start] if leave - start <= {EPS}"),
                       ("Kind.POINT if start == leave", f"Kind.POINT if leave - start <= {EPS}")),
        }),
    ),
    "segment3_triangle3": (
        ("tol_parallel_abs", f"|dot(n, d)| <= {EPS} (absolute) counts as parallel to the plane", {
            "cpp": (("if (den != 0) {", f"if (std::abs(den) > {EPS}) {{"), CMATH),
            "rust": (("if den != 0.0 {", f"if den.abs() > {EPS} {{"),),
            "python": (("if den != 0:", f"if abs(den) > {EPS}:"),),
        }),
        ("tol_parallel_rel", f"|dot(n, d)| <= {EPS} * |n| * |d| counts as parallel to the plane", {
            "cpp": (("if (den != 0) {", f"if (std::abs(den) > {EPS} * std::sqrt(dot(n, n) * dot(d, d))) {{"), CMATH),
            "rust": (("if den != 0.0 {", f"if den.abs() > {EPS} * (dot(n, n) * dot(d, d)).sqrt() {{"),),
            "python": (("if den != 0:", f"if abs(den) > {EPS} * (_dot(n, n) * _dot(d, d)) ** 0.5:"),),
        }),
        ("tol_coplanar_abs", f"|dot(n, q)| <= {EPS} (absolute) counts as in the plane", {
            "cpp": (("if (dot(n, q) != 0) return", f"if (std::abs(dot(n, q)) > {EPS}) return"), CMATH),
            "rust": (("if dot(n, q) != 0.0 {", f"if dot(n, q).abs() > {EPS} {{"),),
            "python": (("if _dot(n, q) != 0:", f"if abs(_dot(n, q)) > {EPS}:"),),
        }),
        ("tol_coplanar_rel", f"|dot(n, q)| <= {EPS} * |n| * |q| counts as in the plane", {
            "cpp": (("if (dot(n, q) != 0) return",
                     f"if (std::abs(dot(n, q)) > {EPS} * std::sqrt(dot(n, n) * dot(q, q))) return"), CMATH),
            "rust": (("if dot(n, q) != 0.0 {", f"if dot(n, q).abs() > {EPS} * (dot(n, n) * dot(q, q)).sqrt() {{"),),
            "python": (("if _dot(n, q) != 0:",
                        f"if abs(_dot(n, q)) > {EPS} * (_dot(n, n) * _dot(q, q)) ** 0.5:"),),
        }),
        ("tol_interval", f"a plane crossing within {EPS} (in parameter) outside the segment counts as on it", {
            "cpp": (("if (num < 0 || num > s * den)", f"if (num < -{EPS} * s * den || num > (1 + {EPS}) * s * den)"),),
            "rust": (("if num < 0.0 || num > s * den {",
                      f"if num < -{EPS} * s * den || num > (1.0 + {EPS}) * s * den {{"),),
            "python": (("if num < 0 or num > s * den:", f"if num < -{EPS} * s * den or num > (1 + {EPS}) * s * den:"),),
        }),
        ("tol_touch", f"a crossing within {EPS} (in barycentric coordinates) outside the triangle counts as inside", {
            "cpp": (("if (b1 >= 0 && b2 >= 0 && b1 + b2 <= s * den) {",
                     f"if (b1 >= -{EPS} * s * den && b2 >= -{EPS} * s * den\n"
                     f"            && b1 + b2 <= (1 + {EPS}) * s * den) {{"),),
            "rust": (("if b1 >= 0.0 && b2 >= 0.0 && b1 + b2 <= s * den {",
                      f"if b1 >= -{EPS} * s * den && b2 >= -{EPS} * s * den\n"
                      f"            && b1 + b2 <= (1.0 + {EPS}) * s * den {{"),),
            "python": (("if b1 >= 0 and b2 >= 0 and b1 + b2 <= s * den:",
                        f"if (b1 >= -{EPS} * s * den and b2 >= -{EPS} * s * den\n"
                        f"                and b1 + b2 <= (1 + {EPS}) * s * den):"),),
        }),
        ("tol_touch_coplanar_abs", f"a coplanar segment less than {EPS} (absolute) beyond an edge's line touches it", {
            "cpp": (("if (alpha < 0) return", f"if (alpha < -{EPS}) return"),),
            "rust": (("if alpha < 0.0 {", f"if alpha < -{EPS} {{"),),
            "python": (("if alpha < 0:", f"if alpha < -{EPS}:"),),
        }),
        ("tol_touch_coplanar_rel", f"a coplanar segment less than {EPS} (relative) beyond an edge's line touches it", {
            "cpp": (("if (alpha < 0) return",
                     f"if (alpha < -{EPS} * std::sqrt(dot(n, n) * dot(e, e) * dot(sub(p0, a), sub(p0, a)))) return"),
                    CMATH),
            "rust": (("if alpha < 0.0 {",
                      f"if alpha < -{EPS} * (dot(n, n) * dot(e, e) * dot(sub(p0, a), sub(p0, a))).sqrt() {{"),),
            "python": (("if alpha < 0:",
                        f"if alpha < -{EPS} * (_dot(n, n) * _dot(e, e) * _dot(_sub(p0, a), _sub(p0, a))) ** 0.5:"),),
        }),
        ("tol_interval_coplanar", f"a coplanar clip interval less than {EPS} (in parameter) empty still touches", {
            "cpp": (("if (lo > hi) return", f"if (lo > hi + {EPS}) return"),),
            "rust": (("if lo > hi {", f"if lo > hi + {EPS} {{"),),
            "python": (("if lo > hi:", f"if lo > hi + {EPS}:"),),
        }),
    ),
}
"""The triangle and 3D ray / box candidates: (name, bug, edits), one per exact test of the good fixtures."""

_FORM = {"abs": "absolute", "rel": "relative to the inputs' size"}


def _tolerances(primitive: str) -> tuple[Mutation, ...]:
    if primitive in _OWN_TOLERANCES:
        return tuple(Mutation(name, bug, edits) for name, bug, edits in _OWN_TOLERANCES[primitive])
    if BY_NAME[primitive].clips_box:
        return tuple(Mutation(name, bug.format(eps=EPS), edits) for name, (bug, edits) in _CLIP_TOLERANCES.items())
    if BY_NAME[primitive].is_box:
        return tuple(Mutation(f"tol_touch_{form}", f"boxes less than {EPS} apart ({_FORM[form]}) count as touching",
                              _TOUCH[form]) for form in ("abs", "rel"))
    out = [Mutation(f"tol_parallel_{form}", f"|perp(d0, d1)| <= {EPS} ({_FORM[form]}) counts as parallel",
                    _PARALLEL[form]) for form in ("abs", "rel")]
    out += [Mutation(f"tol_collinear_{form}", f"|perp(q, d0)| <= {EPS} ({_FORM[form]}) counts as collinear",
                     _COLLINEAR[form]) for form in ("abs", "rel")]
    if primitive in _INTERVAL:
        out.append(Mutation("tol_interval", f"a crossing parameter within {EPS} outside its interval counts as inside",
                            _INTERVAL[primitive]))
    if primitive in _INTERVAL_COLLINEAR:
        out.append(Mutation("tol_interval_collinear", f"collinear inputs less than {EPS} (in parameter) apart "
                            "count as overlapping", _INTERVAL_COLLINEAR[primitive]))
    return tuple(out)


TOLERANCES: dict[str, tuple[Mutation, ...]] = {p: _tolerances(p) for p in PRIMITIVES}
"""Per primitive, its tolerance candidates (bad fixtures ``bad_<name>``, tolerance ``EPS``)."""


def with_size(source: str, size: float) -> str:
    """A tolerance candidate's source with its tolerance set to ``size``."""
    return source.replace(EPS, repr(size))


def uncaught(primitive: str, good_python: str, hidden: Sequence[Case]) -> list[str]:
    """'<candidate> at <size>' for every tolerance candidate and size that passes every hidden case."""
    out = []
    for mutation in TOLERANCES[primitive]:
        source = apply_edits(good_python, mutation, "python", primitive)
        for size in SIZES:
            module = load_source(with_size(source, size), f"{primitive}/bad_{mutation.name}.py@{size}")
            if first_failure(module, hidden) is None:
                out.append(f"{mutation.name} at {size:g}")
    return out

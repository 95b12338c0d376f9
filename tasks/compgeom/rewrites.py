"""Rewrite candidates: the good fixture rewritten so that it is equal in real arithmetic but rounds
differently in double precision.

A tolerance candidate (``tolerances.py``) loosens an exact test; a rewrite keeps every test
exact in form but computes its operands another way, as a solution written from a textbook or
from Geometric Tools would: a reciprocal multiplied in (``(corner - o) * (1/d)``), Liang-Barsky's
``numer > denom*t`` comparisons (Geometric Tools' ``Clip()``), the hit point computed first and
then tested against the box or the other input, a unit (normalised) direction or normal, the
centred form of a segment, barycentric coordinates divided before ``u + v <= 1``, a triangle
moved to its centroid. Each is generated from a few templates (``_clip_rewrites``,
``_linear_rewrites``, ...), one edit per language, applied to the good fixture exactly once.

The hidden cases are built so that every rewrite fails one of them (touching, end-point and
crossing inputs whose parameters have odd denominators, ``rounding.py``): the builder runs
each rewrite's Python form on the hidden cases in this process (``uncaught``), and ``check_fixtures``
compiles and runs all three languages' forms as the bad fixtures ``bad_rw_*``. All three
languages compute the same IEEE double operations in the same order (``sqrt`` is correctly
rounded in each), so a hidden case that catches the Python form catches the others.
"""

from __future__ import annotations

from collections.abc import Sequence

from .case import Case
from .inprocess import first_failure, load_source
from .mutation import CMATH, Edit, Mutation, apply_edits
from .primitives import BY_NAME, PRIMITIVES

_Edits = dict[str, tuple[Edit, ...]]

PYMATH: Edit = ("from __future__ import annotations\n\n", "from __future__ import annotations\n\nimport math\n")
_NONE_RS = "result(Kind::None, Vec::new(), Vec::new())"


# ---------------------------------------------------------------- a line, ray or segment against a 2D box

def _gte_clip(liang_barsky: Mutation, numerators: dict[str, tuple[str, str]]) -> Mutation:
    """Geometric Tools' own form of ``liang_barsky``: the numerators from the box's centred form
    (center ``c = (min + max)/2``, half width ``e = (max - min)/2``, ``Clip(+d, -(o - c) - e)`` and
    ``Clip(-d, (o - c) - e)``), as ``FIQuery<Line2, AlignedBox2>`` and ``<Ray3, AlignedBox3>`` do."""
    edits = {}
    for language, ((old_edit, new_edit),) in liang_barsky.edits.items():
        old, new = numerators[language]
        assert new_edit.count(old) == 1, (language, old)
        edits[language] = ((old_edit, new_edit.replace(old, new)),)
    return Mutation("rw_gte_clip", "Geometric Tools' Clip() on the box's centred form (center c, half width e): "
                    "compares numer > denom*t", edits)


def _centred_numerators(o: str, lo: str, hi: str, two: str = "2") -> tuple[str, str]:
    c, e = f"({lo} + {hi}) / {two}", f"({hi} - {lo}) / {two}"
    return f"-({o} - {c}) - {e}", f"({o} - {c}) - {e}"


def _clip_rewrites(primitive: str) -> list[Mutation]:
    """The slab loop of ``_clip`` (shared by the three primitives) computed four other ways."""
    out = [
        Mutation("rw_reciprocal", "multiplies by the reciprocal: (corner - o) * (1/d) instead of (corner - o) / d", {
            "cpp": (("const double a = (b0[i] - o[i]) / d[i];\n        const double b = (b1[i] - o[i]) / d[i];",
                     "const double r = 1 / d[i];\n        const double a = (b0[i] - o[i]) * r;\n"
                     "        const double b = (b1[i] - o[i]) * r;"),),
            "rust": (("let a = (b0 - o) / d;\n        let b = (b1 - o) / d;",
                      "let r = 1.0 / d;\n        let a = (b0 - o) * r;\n        let b = (b1 - o) * r;"),),
            "python": (("a = (b0 - o) / d\n        b = (b1 - o) / d",
                        "r = 1 / d\n        a = (b0 - o) * r\n        b = (b1 - o) * r"),),
        }),
        Mutation("rw_liang_barsky", "Liang-Barsky in Geometric Tools' Clip() form: compares numer > denom*t "
                 "instead of dividing first", {
            "cpp": (("        const double a = (b0[i] - o[i]) / d[i];\n        const double b = (b1[i] - o[i]) / "
                     "d[i];\n"
                     "        lo = std::max(lo, std::min(a, b));\n        hi = std::min(hi, std::max(a, b));\n",
                     "        const double dens[2] = {d[i], -d[i]}, nums[2] = {b0[i] - o[i], o[i] - b1[i]};\n"
                     "        for (int k = 0; k < 2; ++k) {\n"
                     "            const double den = dens[k], num = nums[k];\n"
                     "            if (den > 0) {\n"
                     "                if (num > den * hi) return {Kind::None};\n"
                     "                if (num > den * lo) lo = num / den;\n"
                     "            } else {\n"
                     "                if (num > den * lo) return {Kind::None};\n"
                     "                if (num > den * hi) hi = num / den;\n"
                     "            }\n"
                     "        }\n"),),
            "rust": (("        let a = (b0 - o) / d;\n        let b = (b1 - o) / d;\n"
                      "        lo = lo.max(a.min(b));\n        hi = hi.min(a.max(b));\n",
                      "        for (den, num) in [(d, b0 - o), (-d, o - b1)] {\n"
                      "            if den > 0.0 {\n"
                      f"                if num > den * hi "
                      f"{{\n                    return {_NONE_RS};\n                }}\n"
                      "                if num > den * lo {\n                    lo = num / den;\n                }\n"
                      "            } else {\n"
                      f"                if num > den * lo "
                      f"{{\n                    return {_NONE_RS};\n                }}\n"
                      "                if num > den * hi {\n                    hi = num / den;\n                }\n"
                      "            }\n"
                      "        }\n"),),
            "python": (("        a = (b0 - o) / d\n        b = (b1 - o) / d\n"
                        "        lo = max(lo, min(a, b))\n        hi = min(hi, max(a, b))\n",
                        "        for den, num in ((d, b0 - o), (-d, o - b1)):\n"
                        "            if den > 0:\n"
                        "                if num > den * hi:\n                    return Intersection(Kind.NONE)\n"
                        "                if num > den * lo:\n                    lo = num / den\n"
                        "            else:\n"
                        "                if num > den * lo:\n                    return Intersection(Kind.NONE)\n"
                        "                if num > den * hi:\n                    hi = num / den\n"),),
        }),
        Mutation("rw_point_test", "computes the entry point first, then tests it against the box's faces", {
            "cpp": (("    for (std::size_t i = 0; i < 2; ++i) {", "    const double t_end = hi;\n"
                     "    for (std::size_t i = 0; i < 2; ++i) {"),
                    ("    if (lo > hi) return {Kind::None};",
                     "    const Vec2 p = at(origin, direction, lo);\n"
                     "    if (lo > t_end || !(box.min.x <= p.x && p.x <= box.max.x && box.min.y <= p.y "
                     "&& p.y <= box.max.y)) return {Kind::None};")),
            "rust": (("    for (o, d, b0, b1) in", "    let t_end = hi;\n    for (o, d, b0, b1) in"),
                     ("    if lo > hi {\n", "    let p = at(origin, direction, lo);\n"
                      "    if lo > t_end || !(bmin.x <= p.x && p.x <= bmax.x && bmin.y <= p.y && p.y <= bmax.y) {\n")),
            "python": (("    for o, d, b0, b1 in (", "    t_end = hi\n    for o, d, b0, b1 in ("),
                       ("    if lo > hi:\n", "    p = _at(origin, direction, lo)\n"
                        "    if lo > t_end or not (box.min.x <= p.x <= box.max.x and box.min.y <= p.y <= "
                        "box.max.y):\n")),
        }),
        Mutation("rw_unit_direction", "clips the normalised direction (a square root), then divides the "
                 "parameters by the direction's length", {
            "cpp": (("    const double d[2] = {direction.x, direction.y};",
                     "    const double length = std::sqrt(direction.x * direction.x + direction.y * direction.y);\n"
                     "    const double d[2] = {direction.x / length, direction.y / length};\n"
                     "    lo *= length;\n    hi *= length;"),
                    ("    if (lo > hi) return {Kind::None};", "    lo /= length;\n    hi /= length;\n"
                     "    if (lo > hi) return {Kind::None};"), CMATH),
            "rust": (("    for (o, d, b0, b1) in [(origin.x, direction.x, bmin.x, bmax.x), "
                      "(origin.y, direction.y, bmin.y, bmax.y)] {",
                      "    let length = (direction.x * direction.x + direction.y * direction.y).sqrt();\n"
                      "    lo *= length;\n    hi *= length;\n"
                      "    for (o, d, b0, b1) in [(origin.x, direction.x / length, bmin.x, bmax.x), "
                      "(origin.y, direction.y / length, bmin.y, bmax.y)] {"),
                     ("    if lo > hi {\n", "    lo /= length;\n    hi /= length;\n    if lo > hi {\n")),
            "python": (("    for o, d, b0, b1 in ((origin.x, direction.x, box.min.x, box.max.x), "
                        "(origin.y, direction.y, box.min.y, box.max.y)):",
                        "    length = math.sqrt(direction.x * direction.x + direction.y * direction.y)\n"
                        "    lo, hi = lo * length, hi * length\n"
                        "    for o, d, b0, b1 in ((origin.x, direction.x / length, box.min.x, box.max.x),\n"
                        "                         (origin.y, direction.y / length, box.min.y, box.max.y)):"),
                       ("    if lo > hi:\n", "    lo, hi = lo / length, hi / length\n    if lo > hi:\n"), PYMATH),
        }),
    ]
    py, rs = _centred_numerators("o", "b0", "b1"), _centred_numerators("o", "b0", "b1", "2.0")
    cpp = _centred_numerators("o[i]", "b0[i]", "b1[i]")
    out.append(_gte_clip(out[1], {
        "python": ("(d, b0 - o), (-d, o - b1)", f"(d, {py[0]}), (-d, {py[1]})"),
        "rust": ("[(d, b0 - o), (-d, o - b1)]", f"[(d, {rs[0]}), (-d, {rs[1]})]"),
        "cpp": ("nums[2] = {b0[i] - o[i], o[i] - b1[i]}", f"nums[2] = {{{cpp[0]}, {cpp[1]}}}"),
    }))
    if primitive == "segment2_aligned_box2":
        out.append(Mutation("rw_centred", "Geometric Tools' centred form: clips center + s*unit for |s| <= half "
                            "length, then t = (s/e + 1)/2", {
            "cpp": (("    return clip(segment.p0, sub(segment.p1, segment.p0), 0.0, 1.0, aligned_box);",
                     "    const Vec2 d = sub(segment.p1, segment.p0);\n"
                     "    const double e = std::sqrt(d.x * d.x + d.y * d.y) / 2;\n"
                     "    if (e == 0) return clip(segment.p0, d, 0.0, 1.0, aligned_box);\n"
                     "    const Vec2 center{(segment.p0.x + segment.p1.x) / 2, (segment.p0.y + segment.p1.y) / 2};\n"
                     "    Intersection found = clip(center, Vec2{d.x / (2 * e), d.y / (2 * e)}, -e, e, aligned_box);\n"
                     "    for (double& s : found.t0) s = (s / e + 1) / 2;\n"
                     "    return found;"), CMATH),
            "rust": (("    clip(segment.p0, sub(segment.p1, segment.p0), 0.0, 1.0, aligned_box)\n",
                      "    let d = sub(segment.p1, segment.p0);\n"
                      "    let e = (d.x * d.x + d.y * d.y).sqrt() / 2.0;\n"
                      "    if e == 0.0 {\n        return clip(segment.p0, d, 0.0, 1.0, aligned_box);\n    }\n"
                      "    let center = Vec2 { x: (segment.p0.x + segment.p1.x) / 2.0, "
                      "y: (segment.p0.y + segment.p1.y) / 2.0 };\n"
                      "    let unit = Vec2 { x: d.x / (2.0 * e), y: d.y / (2.0 * e) };\n"
                      "    let mut found = clip(center, unit, -e, e, aligned_box);\n"
                      "    for s in found.t0.iter_mut() {\n        *s = (*s / e + 1.0) / 2.0;\n    }\n"
                      "    found\n"),),
            "python": (("    return _clip(segment.p0, _sub(segment.p1, segment.p0), 0.0, 1.0, aligned_box)",
                        "    d = _sub(segment.p1, segment.p0)\n"
                        "    e = math.sqrt(d.x * d.x + d.y * d.y) / 2\n"
                        "    if e == 0:\n        return _clip(segment.p0, d, 0.0, 1.0, aligned_box)\n"
                        "    center = Vec2((segment.p0.x + segment.p1.x) / 2, (segment.p0.y + segment.p1.y) / 2)\n"
                        "    found = _clip(center, Vec2(d.x / (2 * e), d.y / (2 * e)), -e, e, aligned_box)\n"
                        "    found.t0 = [(s / e + 1) / 2 for s in found.t0]\n"
                        "    return found"), PYMATH),
        }))
    return out


# ---------------------------------------------------------------- two lines, rays or segments

_ORIGINS = {  # (the first input's origin or p0, the second's)
    "line2_line2": ("line0.origin", "line1.origin"),
    "line2_ray2": ("line.origin", "ray.origin"),
    "line2_segment2": ("line.origin", "segment.p0"),
    "ray2_ray2": ("ray0.origin", "ray1.origin"),
    "ray2_segment2": ("ray.origin", "segment.p0"),
    "segment2_segment2": ("segment0.p0", "segment1.p0"),
}
_TESTS_T1 = ("line2_ray2", "line2_segment2", "ray2_ray2", "ray2_segment2", "segment2_segment2")
_TESTS_T0 = ("ray2_ray2", "ray2_segment2", "segment2_segment2")


def _projected(name: str, point: str, origin: str, d: str) -> dict[str, str]:
    """``name = dot(point - origin, d) / dot(d, d)`` in each language (point: a variable)."""
    expr = (f"(({point}.x - {origin}.x) * {d}.x + ({point}.y - {origin}.y) * {d}.y) "
            f"/ ({d}.x * {d}.x + {d}.y * {d}.y)")
    return {"cpp": f"const double {name} = {expr};", "rust": f"let {name} = {expr};", "python": f"{name} = {expr}"}


def _linear_rewrites(primitive: str) -> list[Mutation]:
    o0, o1 = _ORIGINS[primitive]
    t0 = {"cpp": "        const double t0 = perp(q, d1) / den;\n", "rust": "        let t0 = perp(q, d1) / den;\n",
          "python": "        t0 = _perp(q, d1) / den\n"}
    t1 = {"cpp": "        const double t1 = perp(q, d0) / den;\n", "rust": "        let t1 = perp(q, d0) / den;\n",
          "python": "        t1 = _perp(q, d0) / den\n"}
    point = {"cpp": "        const Vec2 p = at({o}, {d}, {t});\n", "rust": "        let p = at({o}, {d}, {t});\n",
             "python": "        p = _at({o}, {d}, {t})\n"}
    out = [Mutation("rw_unit_direction", "tests perp() of the normalised directions (square roots), scaled back "
                    "by the lengths, for parallel", {
        "cpp": (("    const double den = perp(d0, d1);",
                 "    const double n0 = std::sqrt(d0.x * d0.x + d0.y * d0.y), n1 = std::sqrt(d1.x * d1.x + d1.y "
                 "* d1.y);\n"
                 "    const double den = perp(Vec2{d0.x / n0, d0.y / n0}, Vec2{d1.x / n1, d1.y / n1}) * n0 * "
                 "n1;"), CMATH),
        "rust": (("    let den = perp(d0, d1);",
                  "    let (n0, n1) = ((d0.x * d0.x + d0.y * d0.y).sqrt(), (d1.x * d1.x + d1.y * d1.y).sqrt());\n"
                  "    let den = perp(Vec2 { x: d0.x / n0, y: d0.y / n0 }, Vec2 { x: d1.x / n1, y: d1.y / n1 }) "
                  "* n0 * n1;"),),
        "python": (("    den = _perp(d0, d1)\n",
                    "    n0, n1 = math.sqrt(d0.x * d0.x + d0.y * d0.y), math.sqrt(d1.x * d1.x + d1.y * d1.y)\n"
                    "    den = _perp(Vec2(d0.x / n0, d0.y / n0), Vec2(d1.x / n1, d1.y / n1)) * n0 * n1\n"), PYMATH),
    })]
    if primitive in _TESTS_T1:
        out.append(Mutation("rw_point_test", "computes the crossing point on the first input, then projects it "
                            "onto the second for t1", {
            lang: ((t1[lang], point[lang].format(o=o0, d="d0", t="t0") + "        "
                    + _projected("t1", "p", o1, "d1")[lang] + "\n"),) for lang in t1}))
    if primitive in _TESTS_T0:
        out.append(Mutation("rw_point_test_first", "computes the crossing point on the second input, then projects "
                            "it onto the first for t0", {
            lang: ((t0[lang] + t1[lang], t1[lang] + point[lang].format(o=o1, d="d1", t="t1") + "        "
                    + _projected("t0", "p", o0, "d0")[lang] + "\n"),) for lang in t0}))
    return out


# ---------------------------------------------------------------- boxes, triangles, 3D

_BOX_TEST = {"cpp": "box0.max[i] < box1.min[i] || box0.min[i] > box1.max[i]",
             "rust": "box0.max[i] < box1.min[i] || box0.min[i] > box1.max[i]",
             "python": "box0.max[i] < box1.min[i] or box0.min[i] > box1.max[i]"}
_CENTRED_BOX = {
    "cpp": "std::abs((box0.min[i] + box0.max[i]) / 2 - (box1.min[i] + box1.max[i]) / 2)\n"
           "            > (box0.max[i] - box0.min[i]) / 2 + (box1.max[i] - box1.min[i]) / 2",
    "rust": "((box0.min[i] + box0.max[i]) / 2.0 - (box1.min[i] + box1.max[i]) / 2.0).abs()\n"
            "            > (box0.max[i] - box0.min[i]) / 2.0 + (box1.max[i] - box1.min[i]) / 2.0",
    "python": "(abs((box0.min[i] + box0.max[i]) / 2 - (box1.min[i] + box1.max[i]) / 2)\n"
              "                > (box0.max[i] - box0.min[i]) / 2 + (box1.max[i] - box1.min[i]) / 2)",
}


def _box_rewrites() -> list[Mutation]:
    return [Mutation("rw_centred", "centred form: separated when |c0 - c1| > h0 + h1 (centers and half widths)", {
        lang: ((_BOX_TEST[lang], _CENTRED_BOX[lang]), *((CMATH,) if lang == "cpp" else ()))
        for lang in _BOX_TEST})]


def _triangle_rewrites() -> list[Mutation]:
    centroid = "(triangle0.v0.{a} + triangle0.v1.{a} + triangle0.v2.{a}) / 3"
    return [
        Mutation("rw_unit_edges", "tests the side of each vertex against the normalised edge (a square root)", {
            "cpp": (("        const Vec2 e = sub(vertices[(k + 1) % 3], a);\n",
                     "        const Vec2 full = sub(vertices[(k + 1) % 3], a);\n"
                     "        const double length = std::sqrt(dot(full, full));\n"
                     "        const Vec2 e{full.x / length, full.y / length};\n"), CMATH),
            "rust": (("        let e = sub(vertices[(k + 1) % 3], a);\n",
                      "        let full = sub(vertices[(k + 1) % 3], a);\n"
                      "        let length = dot(full, full).sqrt();\n"
                      "        let e = Vec2 { x: full.x / length, y: full.y / length };\n"),),
            "python": (("        e = _sub(vertices[(k + 1) % 3], a)\n",
                        "        e = _sub(vertices[(k + 1) % 3], a)\n        length = math.sqrt(_dot(e, e))\n"
                        "        e = Vec2(e.x / length, e.y / length)\n"), PYMATH),
        }),
        Mutation("rw_centroid", "moves both triangles to the first one's centroid (divided by 3) before the "
                 "edge tests", {
            "cpp": (("    if (separated(triangle0, area0, triangle1) ||",
                     "    const Vec2 c{" + centroid.format(a="x") + ", " + centroid.format(a="y") + "};\n"
                     "    const Triangle2 moved0{sub(triangle0.v0, c), sub(triangle0.v1, c), sub(triangle0.v2, c)};\n"
                     "    const Triangle2 moved1{sub(triangle1.v0, c), sub(triangle1.v1, c), sub(triangle1.v2, c)};\n"
                     "    if (separated(moved0, area0, moved1) || separated(moved1, area1, moved0)) return "
                     "{Kind::None};\n"
                     "    if (false &&"),),
            "rust": (("    if separated(triangle0, area0, triangle1) ||",
                      "    let c = Vec2 { x: " + centroid.format(a="x").replace("/ 3", "/ 3.0") + ", y: "
                      + centroid.format(a="y").replace("/ 3", "/ 3.0") + " };\n"
                      "    let moved = |t: &Triangle2| Triangle2 { v0: sub(t.v0, c), v1: sub(t.v1, c), v2: "
                      "sub(t.v2, c) };\n"
                      "    let (triangle0, triangle1) = (&moved(triangle0), &moved(triangle1));\n"
                      "    if separated(triangle0, area0, triangle1) ||"),),
            "python": (("    if _separated(triangle0, area0, triangle1) or",
                        "    c = Vec2(" + centroid.format(a="x") + ",\n             " + centroid.format(a="y") + ")\n"
                        "    triangle0, triangle1 = (Triangle2(_sub(t.v0, c), _sub(t.v1, c), _sub(t.v2, c))\n"
                        "                            for t in (triangle0, triangle1))\n"
                        "    if _separated(triangle0, area0, triangle1) or"),),
        }),
    ]


def _ray3_rewrites() -> list[Mutation]:
    return [
        Mutation("rw_reciprocal", "multiplies by the reciprocal: (corner - o) * (1/d) instead of (corner - o) / d", {
            "cpp": (("const double a = (li - oi) / di, b = (hi_i - oi) / di;",
                     "const double r = 1 / di;\n        const double a = (li - oi) * r, b = (hi_i - oi) * r;"),),
            "rust": (("let (a, b) = ((lo[i] - o[i]) / d[i], (hi[i] - o[i]) / d[i]);",
                      "let r = 1.0 / d[i];\n        let (a, b) = ((lo[i] - o[i]) * r, (hi[i] - o[i]) * r);"),),
            "python": (("a, b = (lo - o[i]) / d[i], (hi - o[i]) / d[i]",
                        "r = 1 / d[i]\n        a, b = (lo - o[i]) * r, (hi - o[i]) * r"),),
        }),
        Mutation("rw_liang_barsky", "Liang-Barsky in Geometric Tools' Clip() form: compares numer > denom*t "
                 "instead of dividing first", {
            "cpp": (("        const double a = (li - oi) / di, b = (hi_i - oi) / di;\n"
                     "        enter = std::max(enter, std::min(a, b));\n        leave = std::min(leave, "
                     "std::max(a, b));\n",
                     "        const double dens[2] = {di, -di}, nums[2] = {li - oi, oi - hi_i};\n"
                     "        for (int k = 0; k < 2; ++k) {\n"
                     "            const double den = dens[k], num = nums[k];\n"
                     "            if (den > 0) {\n"
                     "                if (num > den * leave) return {Kind::None};\n"
                     "                if (num > den * enter) enter = num / den;\n"
                     "            } else {\n"
                     "                if (num > den * enter) return {Kind::None};\n"
                     "                if (num > den * leave) leave = num / den;\n"
                     "            }\n"
                     "        }\n"),),
            "rust": (("        let (a, b) = ((lo[i] - o[i]) / d[i], (hi[i] - o[i]) / d[i]);\n"
                      "        enter = enter.max(a.min(b));\n        leave = leave.min(a.max(b));\n",
                      "        for (den, num) in [(d[i], lo[i] - o[i]), (-d[i], o[i] - hi[i])] {\n"
                      "            if den > 0.0 {\n"
                      "                if num > den * leave {\n                    return empty(Kind::None);\n"
                      "                }\n"
                      "                if num > den * enter {\n                    enter = num / den;\n          "
                      "      }\n"
                      "            } else {\n"
                      "                if num > den * enter {\n                    return empty(Kind::None);\n"
                      "                }\n"
                      "                if num > den * leave {\n                    leave = num / den;\n          "
                      "      }\n"
                      "            }\n"
                      "        }\n"),),
            "python": (("        a, b = (lo - o[i]) / d[i], (hi - o[i]) / d[i]\n"
                        "        enter, leave = max(enter, min(a, b)), min(leave, max(a, b))\n",
                        "        for den, num in ((d[i], lo - o[i]), (-d[i], o[i] - hi)):\n"
                        "            if den > 0:\n"
                        "                if num > den * leave:\n                    return Intersection(Kind.NONE)\n"
                        "                if num > den * enter:\n                    enter = num / den\n"
                        "            else:\n"
                        "                if num > den * enter:\n                    return Intersection(Kind.NONE)\n"
                        "                if num > den * leave:\n                    leave = num / den\n"),),
        }),
        Mutation("rw_point_test", "computes the entry point first, then tests it against the box's faces", {
            "cpp": (("    if (enter > leave || leave < 0) return {Kind::None};\n"
                     "    const double start = std::max(enter, 0.0);\n",
                     "    const double start = std::max(enter, 0.0);\n    const Vec3 p = along(o, d, start);\n"
                     "    if (leave < 0 || !(lo.x <= p.x && p.x <= hi.x && lo.y <= p.y && p.y <= hi.y && lo.z <= p.z "
                     "&& p.z <= hi.z)) return {Kind::None};\n"),),
            "rust": (("    if enter > leave || leave < 0.0 {\n        return empty(Kind::None);\n    }\n"
                      "    let start = enter.max(0.0);\n",
                      "    let start = enter.max(0.0);\n"
                      "    let p = coords(along(ray.origin, ray.direction, start));\n"
                      "    if leave < 0.0 || !(0..3).all(|k| lo[k] <= p[k] && p[k] <= hi[k]) {\n"
                      "        return empty(Kind::None);\n    }\n"),),
            "python": (("    if enter > leave or leave < 0:\n        return Intersection(Kind.NONE)\n"
                        "    start = max(enter, 0.0)\n",
                        "    start = max(enter, 0.0)\n    p = _at(o, d, start)\n"
                        "    if leave < 0 or not all(aligned_box.min[k] <= p[k] <= aligned_box.max[k] for k in "
                        "range(3)):\n"
                        "        return Intersection(Kind.NONE)\n"),),
        }),
        Mutation("rw_unit_direction", "clips the normalised direction (a square root), then divides the "
                 "parameters by the direction's length", {
            "cpp": (("    double enter = -std::numeric_limits",
                     "    const double length = std::sqrt(d.x * d.x + d.y * d.y + d.z * d.z);\n"
                     "    double enter = -std::numeric_limits"),
                    ("const double oi = at(o, i), di = at(d, i),", "const double oi = at(o, i), di = at(d, i) / "
                                                                   "length,"),
                    ("    if (enter > leave || leave < 0) return {Kind::None};",
                     "    enter /= length;\n    leave /= length;\n    if (enter > leave || leave < 0) return "
                     "{Kind::None};"),
                    CMATH),
            "rust": (("    let (mut enter, mut leave) = (f64::NEG_INFINITY, f64::INFINITY);\n",
                      "    let length = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();\n"
                      "    let u = [d[0] / length, d[1] / length, d[2] / length];\n"
                      "    let (mut enter, mut leave) = (f64::NEG_INFINITY, f64::INFINITY);\n"),
                     ("let (a, b) = ((lo[i] - o[i]) / d[i], (hi[i] - o[i]) / d[i]);",
                      "let (a, b) = ((lo[i] - o[i]) / u[i], (hi[i] - o[i]) / u[i]);"),
                     ("    if enter > leave || leave < 0.0 {\n",
                      "    enter /= length;\n    leave /= length;\n    if enter > leave || leave < 0.0 {\n")),
            "python": (('    enter, leave = float("-inf"), float("inf")\n',
                        "    length = math.sqrt(d.x * d.x + d.y * d.y + d.z * d.z)\n"
                        "    d = Vec3(d.x / length, d.y / length, d.z / length)\n"
                        '    enter, leave = float("-inf"), float("inf")\n'),
                       ("    if enter > leave or leave < 0:\n",
                        "    enter, leave, d = enter / length, leave / length, ray.direction\n"
                        "    if enter > leave or leave < 0:\n"), PYMATH),
        }),
    ]


def _ray3_with_gte() -> list[Mutation]:
    out = _ray3_rewrites()
    py, cpp = _centred_numerators("o[i]", "lo", "hi"), _centred_numerators("oi", "li", "hi_i")
    rs = _centred_numerators("o[i]", "lo[i]", "hi[i]", "2.0")
    out.append(_gte_clip(out[1], {
        "python": ("((d[i], lo - o[i]), (-d[i], o[i] - hi))", f"((d[i], {py[0]}),\n{' ' * 25}(-d[i], {py[1]}))"),
        "rust": ("[(d[i], lo[i] - o[i]), (-d[i], o[i] - hi[i])]", f"[(d[i], {rs[0]}), (-d[i], {rs[1]})]"),
        "cpp": ("nums[2] = {li - oi, oi - hi_i}", f"nums[2] = {{{cpp[0]}, {cpp[1]}}}"),
    }))
    return out


def _segment3_rewrites() -> list[Mutation]:
    side = "dot(n, cross(sub(vertices[(k + 1) % 3], vertices[k]), sub(p, vertices[k]))) >= 0"
    return [
        Mutation("rw_point_test", "computes the crossing point first, then tests it against the triangle's edges "
                 "(same-side tests)", {
            "cpp": (("        if (b1 >= 0 && b2 >= 0 && b1 + b2 <= s * den) {\n"
                     "            const double t = num / (s * den);\n"
                     "            return {Kind::Point, {t}, {at(p0, d, t)}};\n        }\n",
                     "        const double t = num / (s * den);\n        const Vec3 p = at(p0, d, t);\n"
                     "        const Vec3 vertices[3] = {triangle.v0, triangle.v1, triangle.v2};\n"
                     "        bool inside = true;\n"
                     f"        for (int k = 0; k < 3; ++k) inside = inside && {side};\n"
                     "        if (inside) return {Kind::Point, {t}, {p}};\n"),),
            "rust": (("        if b1 >= 0.0 && b2 >= 0.0 && b1 + b2 <= s * den {\n"
                      "            let t = num / (s * den);\n"
                      "            return Intersection { kind: Kind::Point, t: vec![t], points: vec![at(p0, d, t)] };\n"
                      "        }\n",
                      "        let t = num / (s * den);\n        let p = at(p0, d, t);\n"
                      "        let vertices = [triangle.v0, triangle.v1, triangle.v2];\n"
                      f"        if (0..3).all(|k| {side.replace('>= 0', '>= 0.0')}) {{\n"
                      "            return Intersection { kind: Kind::Point, t: vec![t], points: vec![p] };\n"
                      "        }\n"),),
            "python": (("        b1, b2 = s * _dot(d, _cross(q, e2)), s * _dot(d, _cross(e1, q))\n", ""),
                       ("        if b1 >= 0 and b2 >= 0 and b1 + b2 <= s * den:\n"
                        "            t = num / (s * den)\n"
                        "            return Intersection(Kind.POINT, [t], [_at(p0, d, t)])\n",
                        "        t = num / (s * den)\n        p = _at(p0, d, t)\n"
                        "        vertices = (triangle.v0, triangle.v1, triangle.v2)\n"
                        "        if all(_dot(n, _cross(_sub(vertices[(k + 1) % 3], vertices[k]), _sub(p, vertices[k])))"
                        " >= 0\n               for k in range(3)):\n"
                        "            return Intersection(Kind.POINT, [t], [p])\n"),),
        }),
        Mutation("rw_divided_barycentrics", "divides the barycentric coordinates by dot(n, d) before testing "
                 "u >= 0, v >= 0, u + v <= 1", {
            "cpp": (("        if (b1 >= 0 && b2 >= 0 && b1 + b2 <= s * den) {\n",
                     "        const double u = b1 / (s * den), v = b2 / (s * den);\n"
                     "        if (u >= 0 && v >= 0 && u + v <= 1) {\n"),),
            "rust": (("        if b1 >= 0.0 && b2 >= 0.0 && b1 + b2 <= s * den {\n",
                      "        let (u, v) = (b1 / (s * den), b2 / (s * den));\n"
                      "        if u >= 0.0 && v >= 0.0 && u + v <= 1.0 {\n"),),
            "python": (("        if b1 >= 0 and b2 >= 0 and b1 + b2 <= s * den:\n",
                        "        u, v = b1 / (s * den), b2 / (s * den)\n        if u >= 0 and v >= 0 and u + v "
                        "<= 1:\n"),),
        }),
        Mutation("rw_unit_normal", "normalises the normal (a square root) for the plane tests; the barycentric "
                 "test scales back by its length", {
            "cpp": (("    const Vec3 n = cross(e1, e2);\n    if (is_zero(d) || is_zero(n)) return {Kind::Invalid};\n",
                     "    const Vec3 m = cross(e1, e2);\n    if (is_zero(d) || is_zero(m)) return {Kind::Invalid};\n"
                     "    const double length = std::sqrt(dot(m, m));\n"
                     "    const Vec3 n{m.x / length, m.y / length, m.z / length};\n"),
                    ("b1 + b2 <= s * den) {", "b1 + b2 <= s * den * length) {"), CMATH),
            "rust": (("    let q = sub(p0, triangle.v0);\n",
                      "    let length = dot(n, n).sqrt();\n"
                      "    let n = Vec3 { x: n.x / length, y: n.y / length, z: n.z / length };\n"
                      "    let q = sub(p0, triangle.v0);\n"),
                     ("b1 + b2 <= s * den {", "b1 + b2 <= s * den * length {")),
            "python": (("    q = _sub(p0, triangle.v0)\n",
                        "    length = math.sqrt(_dot(n, n))\n    n = Vec3(n.x / length, n.y / length, n.z / length)\n"
                        "    q = _sub(p0, triangle.v0)\n"),
                       ("b1 + b2 <= s * den:", "b1 + b2 <= s * den * length:"), PYMATH),
        }),
    ]


def _rewrites(primitive: str) -> tuple[Mutation, ...]:
    if BY_NAME[primitive].clips_box:
        return tuple(_clip_rewrites(primitive))
    if BY_NAME[primitive].is_box:
        return tuple(_box_rewrites())
    if primitive in _ORIGINS:
        return tuple(_linear_rewrites(primitive))
    return tuple({"triangle2_triangle2": _triangle_rewrites, "ray3_aligned_box3": _ray3_with_gte,
                  "segment3_triangle3": _segment3_rewrites}[primitive]())


REWRITES: dict[str, tuple[Mutation, ...]] = {p: _rewrites(p) for p in PRIMITIVES}
"""Per primitive, its rewrite candidates (bad fixtures ``bad_<name>``, names ``rw_*``)."""


def rewrite_module(primitive: str, good_python: str, mutation: Mutation):
    """The rewrite's Python form, loaded in this process."""
    return load_source(apply_edits(good_python, mutation, "python", primitive), f"{primitive}/bad_{mutation.name}.py")


def uncaught(primitive: str, good_python: str, hidden: Sequence[Case]) -> list[str]:
    """The name of every rewrite candidate that passes every hidden case."""
    return [m.name for m in REWRITES[primitive]
            if first_failure(rewrite_module(primitive, good_python, m), hidden) is None]

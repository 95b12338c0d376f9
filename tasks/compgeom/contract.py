"""The contract text every task states: shared conventions plus the primitive's reference docstring.

The primitive-specific rules live in one place, the module docstring of its exact reference
(``reference/<primitive>.py``), so the prose the agent reads and the code that computes the
expected outputs sit side by side. ``CONTRACT.md`` is generated from them and checked.
"""

from __future__ import annotations

import importlib
import inspect
import textwrap

from .primitives import BY_NAME
from .rounding import RANGE_TEXT

COMMON_2D = """\
## Conventions shared by the 2D primitives

- Inputs and outputs are double precision (`double`, `f64`, `float`); a point or a vector is a
  `Vec2` with fields `x` and `y`.
- A line is `origin + t*direction` for every real `t`. A ray is `origin + t*direction` for
  `t >= 0`. A segment from `p0` to `p1` is `p0 + t*(p1 - p0)` for `0 <= t <= 1`. Directions
  need not be normalised: a parameter is always in its input's own parametrisation, whatever
  the length of the direction.
- `perp(a, b) = a.x*b.y - a.y*b.x` and `dot(a, b) = a.x*b.x + a.y*b.y`. Two inputs are parallel
  exactly when `perp(d0, d1) == 0`; parallel inputs are collinear exactly when also
  `perp(q, d0) == 0`, where `q` is the second input's origin (or `p0`) minus the first's.
  There is no tolerance anywhere: every test input is a small integer or a dyadic rational
  (`k/2^m`), so these products are exact in double precision, and every interval test
  (`t >= 0`, `0 <= t <= 1`) is decided exactly; an end point counts as inside.
- An input is degenerate when a line or ray direction is `(0, 0)` or a segment has
  `p0 == p1`. Then the result is `invalid`, whatever the other input is.

## The result

`kind` is one of `invalid`, `none`, `point`, `segment`, `ray`, `line` (the enumerator of
that name in your language). `points[i]` is the i-th reported point, and `t0[i]` and `t1[i]`
are its parameters on the first and on the second input. The three lists have the same
length, fixed by the kind:

| kind | entries | what they are |
| --- | --- | --- |
| `invalid`, `none`, `line` | 0 | nothing to report |
| `point` | 1 | the intersection point |
| `segment` | 2 | the overlap's two end points, in increasing order of `t0` |
| `ray` | 1 | the overlap's start (its only end point) |

Kinds and list lengths are compared exactly; numbers with a relative tolerance of `1e-9`
(absolute `1e-12` near zero). Do not print to standard output: the test harness owns it.
"""

COMMON_BOX = """\
## Conventions

- Coordinates are double precision (`double`, `f64`, `float`). An `AlignedBox` has two
  coordinate lists, `min` and `max`, of the same length `N >= 1` (the tests use N from 1 to 5;
  both boxes of a query always have the same N).
- A box is the closed solid `{x : min[i] <= x[i] <= max[i] for every i}`. A box with
  `min[i] == max[i]` on some axis is valid (flat, down to a single point).
- Every test input is a small integer or a dyadic rational, so comparisons are exact; there is
  no tolerance anywhere.

## The result

`kind` is one of `invalid`, `none`, `box` (the enumerator of that name in your language) and
`overlap` is an `AlignedBox`: the intersection for `box`, and empty `min` and `max` lists for
`invalid` and `none`. Kinds and list lengths are compared exactly; numbers with a relative
tolerance of `1e-9`. Do not print to standard output: the test harness owns it.
"""

COMMON_CLIP = """\
## Conventions shared by the 2D primitives

- Inputs and outputs are double precision (`double`, `f64`, `float`); a point or a vector is a
  `Vec2` with fields `x` and `y`, and an `AlignedBox2` has the corners `min` and `max`.
- A line is `origin + t*direction` for every real `t`. A ray is `origin + t*direction` for
  `t >= 0`. A segment from `p0` to `p1` is `p0 + t*(p1 - p0)` for `0 <= t <= 1`. Directions
  need not be normalised: a parameter is always in its input's own parametrisation, whatever
  the length of the direction.
- A direction is parallel to an axis exactly when its component along the other axis is `== 0`.
  There is no tolerance anywhere: every test input is a small integer or a dyadic rational
  (`k/2^m`), chosen so that double precision decides every comparison of the contract exactly:
  the differences `min[i] - origin[i]` and `max[i] - origin[i]` to the box's corners and
  `p1 - p0` are exact, and so are their products with the direction's components; and two of
  the values `(min[i] - origin[i]) / d[i]`, `(max[i] - origin[i]) / d[i]` (for either axis),
  `0` and `1` that differ also differ once each division is rounded. A corner, an edge or an end
  point that touches counts as inside.
- An input is degenerate when a line or ray direction is `(0, 0)`, a segment has `p0 == p1`, or
  the box has `min.x > max.x` or `min.y > max.y`. Then the result is `invalid`.

## The result

`kind` is one of `invalid`, `none`, `point`, `segment` (the enumerator of that name in your
language; `Kind` also has `ray` and `line`, which this primitive never returns). `points[i]` is
the i-th reported point and `t0[i]` its parameter on the first input (the line, ray or
segment); `t1` is always empty, since a box has no parameter. The lengths are fixed by the
kind:

| kind | entries of `t0` and `points` | what they are |
| --- | --- | --- |
| `invalid`, `none` | 0 | nothing to report |
| `point` | 1 | the one point where the input touches the box |
| `segment` | 2 | the ends of the part inside the box, in increasing order of `t0` |

Kinds and list lengths are compared exactly; numbers with a relative tolerance of `1e-9`
(absolute `1e-12` near zero). Do not print to standard output: the test harness owns it.
"""

COMMON_TEST = """\
## Conventions

- Inputs are double precision (`double`, `f64`, `float`); a point is a `Vec2` with fields `x`
  and `y`, and a `Triangle2` has the vertices `v0`, `v1`, `v2`.
- `perp(a, b) = a.x*b.y - a.y*b.x`. There is no tolerance anywhere: every test input is a small
  integer or a dyadic rational (`k/2^m`), so the products in the contract's formulas are exact
  in double precision and each sign is decided exactly.

## The result

`kind` is one of `invalid`, `none`, `intersect` (the enumerator of that name in your language);
a test query reports nothing else. Kinds are compared exactly. Do not print to standard
output: the test harness owns it.
"""

COMMON_3D = """\
## Conventions

- Inputs and outputs are double precision (`double`, `f64`, `float`); a point or a vector is a
  `Vec3` with fields `x`, `y` and `z`.
{first}
- There is no tolerance anywhere: every test input is a small integer or a dyadic rational
  (`k/2^m`), chosen so that double precision decides every comparison of the contract exactly.
  A face, an edge or a corner that the input touches counts as part of the solid.

## The result

`kind` is one of `invalid`, `none`, `point`, `segment` (the enumerator of that name in your
language). `points[i]` is the i-th reported point and `t[i]` its parameter on the first input.
The two lists have the same length, fixed by the kind:

| kind | entries | what they are |
| --- | --- | --- |
| `invalid`, `none` | 0 | nothing to report |
| `point` | 1 | the one point of contact |
| `segment` | 2 | the ends of the part inside the solid, in increasing order of `t` |

Kinds and list lengths are compared exactly; numbers with a relative tolerance of `1e-9`
(absolute `1e-12` near zero). Do not print to standard output: the test harness owns it.
"""
_COMMON_BY_FAMILY = {"test": COMMON_TEST, "3d": COMMON_3D}
_FIRST_3D = {
    "Ray3": "- A ray is `origin + t*direction` for `t >= 0`; the direction need not be normalised: `t` is in\n"
            "  the ray's own parametrisation, whatever the length of the direction.",
    "Segment3": "- A segment from `p0` to `p1` is `p0 + t*(p1 - p0)` for `0 <= t <= 1`: `t` is in this\n"
                "  parametrisation (not a centred form with a unit direction), whatever the segment's length.",
}
"""The 3D conventions' sentence on the first input, by its type."""


def _range_bullet() -> str:
    """The input range every contract states (``rounding.RANGE_TEXT``), as a wrapped bullet."""
    return textwrap.fill(RANGE_TEXT + " Every case is built inside this range; no solution needs to handle "
                         "inputs outside it. The hidden cases touch, cross and end at parameters such as 3/5, "
                         "15/13 or 27/49: compute the quantities as the contract writes them, since a form that "
                         "is equal in real numbers (a reciprocal `1/d`, a unit direction, a point computed and "
                         "then tested) rounds differently in double and fails some of them.", width=96,
                         initial_indent="- ", subsequent_indent="  ",
                         break_on_hyphens=False)


def reference_module(primitive: str):
    return importlib.import_module(f"gym_sysmath.tasks.compgeom.reference.{primitive}")


def contract_text(primitive: str) -> str:
    """The full contract in markdown: title, the reference's docstring, the shared conventions."""
    module = reference_module(primitive)
    doc = inspect.cleandoc(module.__doc__ or "")
    common = COMMON_BOX if primitive == "aligned_box_aligned_box" else COMMON_2D
    if BY_NAME[primitive].clips_box:
        common = COMMON_CLIP
    common = _COMMON_BY_FAMILY.get(BY_NAME[primitive].family.name, common)
    if "{first}" in common:
        common = common.replace("{first}", _FIRST_3D[BY_NAME[primitive].args[0][1].type_name])
    common = common.replace("\n\n## The result", f"\n{_range_bullet()}\n\n## The result", 1)
    return f"# Contract: `{primitive}`\n\n{doc}\n\n{common}"

"""Triangle / triangle test-intersection in 2D.

`triangle2_triangle2(triangle0, triangle1)`: each triangle is the closed solid with vertices
`v0`, `v1`, `v2`, given in either orientation (counterclockwise or clockwise). The query only
says whether the two solids share a point.

- `invalid`: a triangle is degenerate, `area(T) = perp(v1 - v0, v2 - v0) == 0` (its vertices are
  collinear, or two coincide), for either triangle, whatever the other one is.
- Otherwise write `s = 1` if `area(T) > 0` and `s = -1` if `area(T) < 0`, and for an edge from
  `a` to `b` of `T` (the edges `v0 -> v1`, `v1 -> v2`, `v2 -> v0`) and a point `p`,
  `side(a, b, p) = s * perp(b - a, p - a)`: positive strictly inside the edge's line, on `T`'s
  side, zero on the line, negative beyond it.
- `none`: some edge of either triangle has all three vertices of the *other* triangle strictly
  beyond it (`side < 0` for each of them). The edges of both triangles are needed: for
  triangle0 (0, 0), (2, 0), (1, 2) and triangle1 (-2, 3), (4, 3), (1, 6) only triangle1's edge
  from (-2, 3) to (4, 3) separates them.
- `intersect` otherwise: the solids are closed, so triangles that only touch (at a shared
  vertex, a vertex on an edge, or along part of an edge) intersect, and so do nested ones.

Every test input is a small integer or a dyadic rational, chosen so that `area` and every
`side` value are exact in double precision: decide each sign with an exact comparison with 0.

Differences from Geometric Tools, on purpose:
- Geometric Tools' test query (`TIQuery<Triangle2, Triangle2>`) calls the triangles separated
  when the other triangle's vertices are all on or beyond an edge's line with at least one
  strictly beyond, so triangles that only touch do *not* intersect there: triangle0 (0, 0),
  (2, 0), (0, 2) and triangle1 (2, 0), (4, 0), (3, 2), which share the vertex (2, 0), and
  triangle0 (0, 0), (2, 0), (0, 2) and triangle1 (2, 0), (2, 2), (0, 2), which share an edge,
  give no intersection where this contract gives `intersect`.
- It requires counterclockwise vertices and uses the edge normals as if they were. With
  clockwise input its edge tests look at the wrong side: two copies of the clockwise triangle
  (0, 0), (0, 1), (1, 0) give no intersection there, where this contract gives `intersect`
  for any orientation.
- It does not check for degenerate triangles; here a zero area is `invalid` (for triangle0
  (0, 0), (1, 1), (2, 2) and triangle1 (0, 0), (1, 0), (0, 1) Geometric Tools reports an
  intersection).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..rational import Vec, perp, sub, vec

VERTICES = ("v0", "v1", "v2")


@dataclass(frozen=True)
class ExactTest:
    """An exact test result; ``branch`` names the path taken, so case coverage can be checked:
    ``invalid``, ``separated``, ``touch`` (the solids share only boundary points) or ``overlap``."""

    kind: str
    branch: str = ""


def area(t: Sequence[Vec]) -> Fraction:
    """Twice the signed area of the triangle ``t`` (its three vertices)."""
    return perp(sub(t[1], t[0]), sub(t[2], t[0]))


def reference(case_input: Mapping[str, Any]) -> ExactTest:
    triangles = [tuple(vec(case_input[name][v]) for v in VERTICES) for name in ("triangle0", "triangle1")]
    if any(area(t) == 0 for t in triangles):
        return ExactTest("invalid", "invalid")
    touching = False
    for own, other in ((triangles[0], triangles[1]), (triangles[1], triangles[0])):
        s = 1 if area(own) > 0 else -1
        for k in range(3):
            a, b = own[k], own[(k + 1) % 3]
            sides = [s * perp(sub(b, a), sub(p, a)) for p in other]
            if max(sides) < 0:
                return ExactTest("none", "separated")
            touching = touching or max(sides) == 0  # the interiors lie on either side of this line
    return ExactTest("intersect", "touch" if touching else "overlap")

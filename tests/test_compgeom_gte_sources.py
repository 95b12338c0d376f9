"""Each "Differences from Geometric Tools" note of the six newer primitives, checked against the
Geometric Tools header it describes.

Read from ``davideberly/GeometricTools`` at commit 0cbd458d45d3b2766c17746dd018185e7321696e
(headers "Version: 6.0.2022.01.06"), ``GTE/Mathematics/``; no Geometric Tools code is in the
repository. What each header does, in the words the tests below look for in the contract:

- ``IntrLine2AlignedBox2.h`` (``FIQuery<T, Line2<T>, AlignedBox2<T>>``): the box in centred form
  (``GetCenteredForm``), the origin moved to its center, the line clipped from
  ``[-max(), max()]`` (``std::numeric_limits<T>::max()``) by ``Clip(denom, numer, t0, t1)``,
  which compares ``numer > denom * t`` before it divides; one intersection repeats its
  parameter in ``parameter[1]``; no check of a zero direction (``Clip`` with ``denom == 0``
  keeps the interval when ``numer <= 0``) or of ``min > max`` (a negative half width).
- ``IntrRay2AlignedBox2.h``: the line query, then the overlap of ``[t0, t1]`` with
  ``[0, max()]`` (``FIQuery<T, std::array<T, 2>, std::array<T, 2>>``).
- ``IntrSegment2AlignedBox2.h``: the segment in centred form (``GetCenteredForm``: center, unit
  direction, extent), the line query, the overlap with ``[-extent, +extent]``, then
  ``parameter = (s / extent + 1) * 0.5``.
- ``IntrRay3AlignedBox3.h``: "Liang-Barsky clipping" (its header comment) of the line
  (``IntrLine3AlignedBox3.h``) on the box's centred form, then the overlap with
  ``[0, +infinity)``; both ``point[0]`` and ``point[1]`` are always filled.
- ``IntrSegment3Triangle3.h`` (``FIQuery<Real, Segment3<Real>, Triangle3<Real>>``): the segment
  in centred form; ``Dot(D, N) == 0`` is "parallel", no intersection, whatever the segment;
  the scaled barycentric tests ``DdQxE2 >= 0``, ``DdE1xQ >= 0``, ``DdQxE2 + DdE1xQ <= DdN`` and
  ``|QdN| <= extent * DdN``; the parameter ``QdN / DdN`` is centred; it also reports
  ``triangleBary``.
- ``IntrTriangle2Triangle2.h`` (``TIQuery<T, Triangle2<T>, Triangle2<T>>``): separated when
  ``WhichSide`` puts the other triangle's vertices all at ``t >= 0`` with one ``t > 0`` for
  ``D = Perp(edge)``; "The input triangles' vertices must be counterclockwise ordered"; no
  area check.
"""

from __future__ import annotations

import pytest

from gym_sysmath.tasks.compgeom.contract import contract_text

GTE_COMMIT = "0cbd458d45d3b2766c17746dd018185e7321696e"
HEADERS = {
    "segment2_aligned_box2": "IntrSegment2AlignedBox2.h",
    "ray2_aligned_box2": "IntrRay2AlignedBox2.h",
    "line2_aligned_box2": "IntrLine2AlignedBox2.h",
    "ray3_aligned_box3": "IntrRay3AlignedBox3.h",
    "segment3_triangle3": "IntrSegment3Triangle3.h",
    "triangle2_triangle2": "IntrTriangle2Triangle2.h",
}
# per primitive: what the header does, as the contract's note must say it
NOTES = {
    "segment2_aligned_box2": ("centred form", "*unit* vector", "`(s/e + 1)/2`", "`BSRational`",
                              "`[-max(), max()]`", "Geometric Tools does not check", "always holds two parameters"),
    "ray2_aligned_box2": ("`BSRational`", "`[-max(), max()]`", "`[0, max()]`", "does not check",
                          "always holds two parameters", "parallel to both axes"),
    "line2_aligned_box2": ("`BSRational`", "`[-max(), max()]`", "does not check", "always holds two parameters",
                           "parallel to both axes"),
    "ray3_aligned_box3": ("`FIQuery<Ray3, AlignedBox3>`", "centred form", "`Clip()`", "`numer > denom*t`",
                          "`[0, +infinity)`", "always fills two parameters and two points", "`[-max(), max()]`",
                          "does not check"),
    "segment3_triangle3": ("`FIQuery<Segment3, Triangle3>`", "parallel to the plane", "centred form",
                           "unit direction", "barycentric coordinates", "does not check"),
    "triangle2_triangle2": ("`TIQuery<Triangle2, Triangle2>`", "strictly beyond", "counterclockwise",
                            "does not check for degenerate triangles"),
}


@pytest.mark.parametrize("primitive", sorted(NOTES))
def test_each_note_states_what_the_header_does(primitive):
    text = " ".join(contract_text(primitive).split())
    note = text.split("Differences from Geometric Tools", 1)[1]
    for words in NOTES[primitive]:
        assert words in note, f"{primitive} ({HEADERS[primitive]} at {GTE_COMMIT[:12]}): {words!r}"


def test_every_newer_primitive_names_its_header_here():
    assert set(HEADERS) == set(NOTES)
    assert all(h.startswith("Intr") and h.endswith(".h") for h in HEADERS.values())

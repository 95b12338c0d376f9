"""What each primitive takes and returns, in the one table the generator, harnesses and grading share.

A primitive has two inputs; each is a *shape* (line, ray, segment, triangle or box) with two or
three fields, each a 2D or 3D vector (or, for the N-d box, a coordinate list), and a result
*family* (``PrimitiveFamily``: the kinds and the number lists of its records). The case JSON, the stdin
line, the harness's argument construction and the function signature all follow this table, so
adding a primitive is adding a row (plus its reference and fixtures).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    """An input type: its name in the APIs and its fields (vectors, or coordinate lists for the N-d box)."""

    type_name: str
    fields: tuple[str, ...]
    doc: str
    dim: int = 2  # each field is a Vec2 or a Vec3 (the N-d AlignedBox's fields are coordinate lists)


LINE = Shape("Line2", ("origin", "direction"), "The line origin + t*direction, t real.")
RAY = Shape("Ray2", ("origin", "direction"), "The ray origin + t*direction, t >= 0.")
SEGMENT = Shape("Segment2", ("p0", "p1"), "The segment p0 + t*(p1 - p0), 0 <= t <= 1.")
BOX = Shape("AlignedBox", ("min", "max"), "The closed box min[i] <= x[i] <= max[i].")
BOX2 = Shape("AlignedBox2", ("min", "max"), "The closed box min.x <= x <= max.x, min.y <= y <= max.y.")
TRIANGLE2 = Shape("Triangle2", ("v0", "v1", "v2"), "The closed solid triangle v0, v1, v2, in either orientation.")
SEGMENT3 = Shape("Segment3", ("p0", "p1"), "The segment p0 + t*(p1 - p0), 0 <= t <= 1.", 3)
TRIANGLE3 = Shape("Triangle3", ("v0", "v1", "v2"), "The closed triangle with vertices v0, v1, v2.", 3)
RAY3 = Shape("Ray3", ("origin", "direction"), "The ray origin + t*direction, t >= 0.", 3)
BOX3 = Shape("AlignedBox3", ("min", "max"), "The closed box min.x <= x <= max.x, min.y <= y <= max.y, "
             "min.z <= z <= max.z.", 3)


@dataclass(frozen=True)
class PrimitiveFamily:
    """A result family: the kinds a result may have and the number lists its record carries, in
    record order, each with its numbers per entry (a parameter 1, a 2D point 2, a 3D point 3)."""

    name: str
    kinds: tuple[str, ...]
    lists: tuple[tuple[str, int], ...]


FAMILY_2D = PrimitiveFamily("2d", ("invalid", "none", "point", "segment", "ray", "line"),
                   (("t0", 1), ("t1", 1), ("points", 2)))
FAMILY_BOX = PrimitiveFamily("box", ("invalid", "none", "box"), (("min", 1), ("max", 1)))
FAMILY_TEST = PrimitiveFamily("test", ("invalid", "none", "intersect"), ())
"""A test query: whether the inputs intersect, nothing else."""
FAMILY_3D = PrimitiveFamily("3d", ("invalid", "none", "point", "segment"), (("t", 1), ("points", 3)))
"""A 3D linear input against a solid: the intersection's parameters on the linear input and its points."""


@dataclass(frozen=True)
class Primitive:
    """A query: its id (also the function name), its two named inputs and its result family."""

    name: str
    title: str
    args: tuple[tuple[str, Shape], tuple[str, Shape]]
    result: PrimitiveFamily | None = None  # None: the 2D or N-d box family, as the inputs say

    @property
    def is_box(self) -> bool:
        return self.args[0][1] is BOX

    @property
    def clips_box(self) -> bool:
        """A line, ray or segment against a 2D box: the component clipped to the box."""
        return self.args[1][1] is BOX2

    @property
    def family(self) -> PrimitiveFamily:
        return self.result or (FAMILY_BOX if self.is_box else FAMILY_2D)

    @property
    def kinds(self) -> tuple[str, ...]:
        return self.family.kinds


PRIMITIVE_TABLE: tuple[Primitive, ...] = (
    Primitive("aligned_box_aligned_box", "Aligned box / aligned box intersection in N dimensions",
              (("box0", BOX), ("box1", BOX))),
    Primitive("line2_line2", "Line / line intersection in 2D", (("line0", LINE), ("line1", LINE))),
    Primitive("line2_ray2", "Line / ray intersection in 2D", (("line", LINE), ("ray", RAY))),
    Primitive("line2_segment2", "Line / segment intersection in 2D", (("line", LINE), ("segment", SEGMENT))),
    Primitive("ray2_ray2", "Ray / ray intersection in 2D", (("ray0", RAY), ("ray1", RAY))),
    Primitive("ray2_segment2", "Ray / segment intersection in 2D", (("ray", RAY), ("segment", SEGMENT))),
    Primitive("segment2_segment2", "Segment / segment intersection in 2D",
              (("segment0", SEGMENT), ("segment1", SEGMENT))),
    Primitive("segment2_aligned_box2", "Segment / aligned box intersection in 2D",
              (("segment", SEGMENT), ("aligned_box", BOX2))),
    Primitive("ray2_aligned_box2", "Ray / aligned box intersection in 2D", (("ray", RAY), ("aligned_box", BOX2))),
    Primitive("line2_aligned_box2", "Line / aligned box intersection in 2D", (("line", LINE), ("aligned_box", BOX2))),
    Primitive("triangle2_triangle2", "Triangle / triangle test-intersection in 2D",
              (("triangle0", TRIANGLE2), ("triangle1", TRIANGLE2)), FAMILY_TEST),
    Primitive("ray3_aligned_box3", "Ray / aligned box intersection in 3D", (("ray", RAY3), ("aligned_box", BOX3)),
              FAMILY_3D),
    Primitive("segment3_triangle3", "Segment / triangle intersection in 3D",
              (("segment", SEGMENT3), ("triangle", TRIANGLE3)), FAMILY_3D),
)
BY_NAME: dict[str, Primitive] = {p.name: p for p in PRIMITIVE_TABLE}
PRIMITIVES: tuple[str, ...] = tuple(p.name for p in PRIMITIVE_TABLE)

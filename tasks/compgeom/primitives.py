"""What each primitive takes and returns, in the one table the generator, harnesses and grading share.

A primitive has two inputs; each is a *shape* (line, ray, segment or box) with two fields. The
case JSON, the stdin line, the harness's argument construction and the function signature all
follow this table, so adding a primitive is adding a row (plus its reference and fixtures).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    """An input type: its name in the APIs and its two fields (points or coordinate lists)."""

    type_name: str
    fields: tuple[str, str]
    doc: str


LINE = Shape("Line2", ("origin", "direction"), "The line origin + t*direction, t real.")
RAY = Shape("Ray2", ("origin", "direction"), "The ray origin + t*direction, t >= 0.")
SEGMENT = Shape("Segment2", ("p0", "p1"), "The segment p0 + t*(p1 - p0), 0 <= t <= 1.")
BOX = Shape("AlignedBox", ("min", "max"), "The closed box min[i] <= x[i] <= max[i].")
BOX2 = Shape("AlignedBox2", ("min", "max"), "The closed box min.x <= x <= max.x, min.y <= y <= max.y.")


@dataclass(frozen=True)
class Primitive:
    """A query: its id (also the function name), its two named inputs and its result family."""

    name: str
    title: str
    args: tuple[tuple[str, Shape], tuple[str, Shape]]

    @property
    def is_box(self) -> bool:
        return self.args[0][1] is BOX

    @property
    def clips_box(self) -> bool:
        """A line, ray or segment against a 2D box: the component clipped to the box."""
        return self.args[1][1] is BOX2

    @property
    def kinds(self) -> tuple[str, ...]:
        if self.is_box:
            return ("invalid", "none", "box")
        return ("invalid", "none", "point", "segment", "ray", "line")


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
)
BY_NAME: dict[str, Primitive] = {p.name: p for p in PRIMITIVE_TABLE}
PRIMITIVES: tuple[str, ...] = tuple(p.name for p in PRIMITIVE_TABLE)

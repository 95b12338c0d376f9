"""Aligned box / aligned box intersection in N dimensions.

`aligned_box_aligned_box(box0, box1)`: each box is the closed solid between its `min` and `max`
corners, both of length `N`.

- `invalid`: `box0.min[i] > box0.max[i]` or `box1.min[i] > box1.max[i]` on some axis `i`
  (checked first).
- `none`: the boxes are separated on some axis `i`: `box0.max[i] < box1.min[i]` or
  `box0.min[i] > box1.max[i]`.
- `box` otherwise: the solids are closed, so boxes touching along a face, an edge or at a single
  corner intersect. The `overlap` is `min[i] = max(box0.min[i], box1.min[i])` and
  `max[i] = min(box0.max[i], box1.max[i])`, which may be flat (`min[i] == max[i]`).

This matches Geometric Tools' aligned-box query; the only addition is the `invalid` kind for
boxes whose `min` exceeds `max`, which Geometric Tools does not check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

KINDS_BOX: tuple[str, ...] = ("invalid", "none", "box")


@dataclass(frozen=True)
class ExactBox:
    """An exact box result; ``branch`` names the path taken, so case coverage can be checked."""

    kind: str
    min: tuple[Fraction, ...] = ()
    max: tuple[Fraction, ...] = ()
    branch: str = ""


def reference(case_input: Mapping[str, Any]) -> ExactBox:
    a, b = case_input["box0"], case_input["box1"]
    amin, amax, bmin, bmax = ([Fraction(x) for x in v] for v in (a["min"], a["max"], b["min"], b["max"]))
    if not len(amin) == len(amax) == len(bmin) == len(bmax) >= 1:
        raise ValueError("boxes must share one dimension N >= 1")
    pairs = [*zip(amin, amax, strict=True), *zip(bmin, bmax, strict=True)]
    if any(lo > hi for lo, hi in pairs):
        return ExactBox("invalid", branch="invalid")
    if any(ahi < blo or alo > bhi for alo, ahi, blo, bhi in zip(amin, amax, bmin, bmax, strict=True)):
        return ExactBox("none", branch="separated")
    lo = tuple(map(max, amin, bmin))
    hi = tuple(map(min, amax, bmax))
    flat_overlap = any(x == y for x, y in zip(lo, hi, strict=True))
    flat_input = any(x == y for x, y in pairs)
    branch = ("flat_input" if flat_input else "touch") if flat_overlap else "overlap"
    return ExactBox("box", lo, hi, branch)

"""Text forms of numbers, vectors and matrices, shared by prompts, keys and reference answers.

One place decides how a value is written so that the prompt, the stored key and the reference
answer agree, and so that the parser is tested against exactly what we emit.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any


def exact(value: Any) -> Fraction:
    """An exact rational from an int, numpy integer, ``Fraction``, sympy ``Rational`` or its string."""
    if hasattr(value, "p") and hasattr(value, "q"):  # sympy Rational / Integer
        return Fraction(int(value.p), int(value.q))
    if isinstance(value, str):
        return Fraction(value)
    return Fraction(int(value)) if not isinstance(value, Fraction) else value


def key(value: Any) -> str:
    """The stored form of a number: ``"6"`` or ``"-1/3"``."""
    return str(exact(value))


def inline(answer: Any) -> str:
    """One-line form of a stored answer, as the ANSWER line should carry it."""
    if isinstance(answer, bool):
        return "true" if answer else "false"
    if isinstance(answer, (list, tuple)):
        return "[" + ", ".join(inline(item) for item in answer) + "]"
    return key(answer)


def vector_text(values: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def matrix_block(name: str, rows: Sequence[Sequence[int]]) -> str:
    """``name = [[...],`` with one aligned row per line, the way people write small matrices."""
    width = max(len(str(int(v))) for row in rows for v in row)
    cells = [", ".join(str(int(v)).rjust(width) for v in row) for row in rows]
    lead = f"{name} = ["
    pad = " " * len(lead)
    lines = [f"{lead}[{cells[0]}]"] + [f"{pad}[{c}]" for c in cells[1:]]
    return ",\n".join(lines) + "]"

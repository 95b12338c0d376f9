"""How much there is to work through in an instance's parameters: the default measure that
difficulty levels are cut from (``difficulty.py``), and a template's own measure may build on it.

It needs no template, so a template module can import it while ``difficulty`` calibrates against
all of them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def param_size(value: Any) -> float:
    """How much there is to work through in ``value``: bits and set bits of an int, digits of a
    float, characters of a string, and the sum over a list or a mapping plus its length."""
    if isinstance(value, bool):
        return 1.0
    if isinstance(value, int):
        return float(max(1, abs(value).bit_length()) + bin(value).count("1"))
    if isinstance(value, float):
        return float(len(repr(value).lstrip("-"))) if math.isfinite(value) else 3.0
    if isinstance(value, str):
        return float(len(value))
    if isinstance(value, Mapping):
        return float(len(value)) + sum(param_size(v) for v in value.values())
    if isinstance(value, Sequence):
        return float(len(value)) + sum(param_size(v) for v in value)
    raise TypeError(f"cannot size a parameter of type {type(value).__name__}")

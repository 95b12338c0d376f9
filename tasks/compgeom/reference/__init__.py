"""Exact references, one module per primitive; each module docstring is that primitive's contract.

``solve(primitive, case_input)`` takes a case input as decoded from JSON (numbers may be floats;
they are converted exactly with ``Fraction``) and returns the exact result.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


def solve(primitive: str, case_input: Mapping[str, Any]) -> Any:
    module = importlib.import_module(f"{__name__}.{primitive}")
    return module.reference(case_input)

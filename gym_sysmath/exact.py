"""Exact, typed comparison of answers and a JSON codec that keeps float bit patterns.

Graded answers are integers, booleans, hex strings and floats read back from their own bits, so
there is nothing for a tolerance to absorb. Python's own ``==`` is wrong for this in three ways:
``True == 1``, ``-0.0 == 0.0`` and ``nan != nan``. ``exact_equal`` fixes all three by comparing a
value's JSON type first and a float's 64-bit pattern second.

Plain JSON text keeps finite floats exactly (``repr`` round-trips) but not every NaN, so the task
file tags each float with its bits (``{"f64": "0x3ff0000000000000"}``) through ``dumps_exact`` and
``loads_exact``.
"""

from __future__ import annotations

import json
import math
import struct
from decimal import Decimal
from typing import Any

# The float tag is the sandbox's value codec's (a session's floats cross it in the same form): one definition
from gym_sysmath.sandbox.image.supervisor.values import FLOAT_BITS, FLOAT_TAG, encode_float, float_from_tag

__all__ = ["answer_matches", "dumps_exact", "exact_equal", "float_bits", "float_from_bits",
           "is_json_primitive_list", "json_kind", "loads_exact"]


def float_bits(value: float) -> int:
    """The IEEE-754 binary64 bit pattern of ``value`` as an unsigned integer."""
    return struct.unpack("<Q", struct.pack("<d", value))[0]


def float_from_bits(bits: int) -> float:
    """The binary64 float whose bit pattern is ``bits``: the inverse of ``float_bits``."""
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def json_kind(value: object) -> str | None:
    """The JSON type of ``value`` ("bool", "int", "float", "str", "null", "list", "object").

    ``bool`` is checked before ``int`` because it is a subclass of it; anything JSON cannot hold
    (tuples, bytes, numpy scalars that are not float subclasses) has no kind and never compares
    equal.
    """
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return None


def exact_equal(expected: object, actual: object) -> bool:
    """True when ``actual`` is ``expected`` in JSON type and in value, floats by bit pattern.

    ``True`` never equals ``1``, ``"0x2a"`` never equals ``42``, ``1`` never equals ``1.0``,
    ``-0.0`` never equals ``0.0``, and two NaNs are equal exactly when their bits are.
    """
    kind = json_kind(expected)
    if kind is None or kind != json_kind(actual):
        return False
    if kind == "float":
        return float_bits(expected) == float_bits(actual)  # type: ignore[arg-type]
    if kind == "list":
        assert isinstance(expected, list) and isinstance(actual, list)
        return len(expected) == len(actual) and all(
            exact_equal(e, a) for e, a in zip(expected, actual, strict=True)
        )
    if kind == "object":
        assert isinstance(expected, dict) and isinstance(actual, dict)
        return expected.keys() == actual.keys() and all(
            exact_equal(expected[k], actual[k]) for k in expected
        )
    return expected == actual


def _number_matches(expected: int | float, actual: int | float | Decimal) -> bool:
    """Whether the number ``actual`` (however it was spelled) is the key ``expected``.

    A float key is matched by the binary64 its value rounds to, compared by bit pattern: ``3``
    and ``3.0`` and ``3.000`` are the key ``3.0``; ``0`` is never ``-0.0``; a NaN matches a NaN
    key with the same bits. A finite value that overflows to infinity or underflows to zero from
    a nonzero value is not that float. An int key is matched by exact value: ``3.0`` is ``3``,
    ``3.5`` and ``9007199254740993.0`` (spelled, not rounded) are not their neighbours.
    """
    if isinstance(expected, float):
        if isinstance(actual, float):
            return float_bits(actual) == float_bits(expected)
        try:
            value = float(actual)
        except OverflowError:
            return False
        if math.isinf(value) or (value == 0 and actual != 0):
            return False
        return float_bits(value) == float_bits(expected)
    if isinstance(actual, float) and not math.isfinite(actual):
        return False
    if isinstance(actual, Decimal) and not actual.is_finite():
        return False
    return actual == expected


def answer_matches(expected: object, actual: object) -> bool:
    """True when the answer ``actual`` is the key ``expected``, numbers by value (not spelling).

    Types still part ways where JSON's do: a bool is never a number, a string never equals a
    number (``"0x2a"`` is not ``42``), and lists match element by element with equal lengths.
    Numbers may be ``int``, ``float`` or ``Decimal`` (how an ANSWER line's decimals are read, so
    their value is exact); see ``_number_matches`` for the rule. ``exact_equal`` stays the
    comparison of stored values, where ``1`` and ``1.0`` are different records.
    """
    numbers = (int, float, Decimal)
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if isinstance(expected, (int, float)) and isinstance(actual, numbers):
        try:
            return _number_matches(expected, actual)
        except (ArithmeticError, ValueError):  # a Decimal no float or int can be compared with
            return False
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(
            answer_matches(e, a) for e, a in zip(expected, actual, strict=True))
    if isinstance(expected, str):
        return isinstance(actual, str) and actual == expected
    return False


def is_json_primitive_list(value: object) -> bool:
    """True for a non-empty ``list`` whose elements are all bool, int, float or str.

    That is the shape of every answer key; ``null`` is excluded because no key holds it, and
    nested containers are excluded so an answer is always one flat row.
    """
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(json_kind(v) in ("bool", "int", "float", "str") for v in value)
    )


def _tag_floats(value: Any) -> Any:
    kind = json_kind(value)
    if kind == "float":
        return encode_float(value)
    if kind == "list":
        return [_tag_floats(v) for v in value]
    if kind == "object":
        if set(value) == {FLOAT_TAG}:
            raise ValueError(f"an object whose only key is {FLOAT_TAG!r} would read back as a float")
        if not all(isinstance(k, str) for k in value):
            raise TypeError("object keys must be strings")
        return {k: _tag_floats(v) for k, v in value.items()}
    if kind is None:
        raise TypeError(f"{type(value).__name__} is not a JSON value")
    return value


def _untag_float(obj: dict[str, Any]) -> Any:
    if set(obj) != {FLOAT_TAG}:
        return obj
    bits = obj[FLOAT_TAG]
    if not isinstance(bits, str) or not FLOAT_BITS.fullmatch(bits):
        raise ValueError(f"malformed float tag {obj!r}: want 0x and 16 lowercase hex digits")
    return float_from_tag(bits)


def dumps_exact(obj: object, *, indent: int | None = None, sort_keys: bool = False) -> str:
    """JSON text for ``obj`` with every float written as its bit pattern, so it reads back exactly."""
    return json.dumps(_tag_floats(obj), indent=indent, sort_keys=sort_keys, allow_nan=False,
                      ensure_ascii=True)


def loads_exact(text: str) -> Any:
    """Parse ``dumps_exact`` output, turning each ``{"f64": bits}`` tag back into that float."""
    return json.loads(text, object_hook=_untag_float)

"""The value codec: how a session variable crosses the sandbox, and the task files' float tag.

A value travels as JSON natives, with each float as its bit pattern (``{"f64": "0x<16 hex
digits>"}``, the form ``gym_sysmath.exact`` writes in task files) and anything else as
``{"unsupported": <type name>}``. The session child encodes (``encode_value``); the supervisor
re-checks what the session reported, since the session's own code could have rewritten the
encoder (``sanitize_value``); the host decodes (``decode_value``).
"""

from __future__ import annotations

import re
import struct
from typing import Any

FLOAT_TAG = "f64"
FLOAT_BITS = re.compile(r"0x[0-9a-f]{16}")
MAX_DEPTH = 32


def encode_float(value: float) -> dict[str, str]:
    """``value`` by its bit pattern: NaN payloads and the sign of zero survive."""
    return {FLOAT_TAG: "0x" + struct.pack(">d", value).hex()}


def float_from_tag(bits: str) -> float:
    """The float that a tag's ``0x<16 hex digits>`` (``FLOAT_BITS``) holds."""
    return struct.unpack(">d", bytes.fromhex(bits[2:]))[0]


def is_float_tag(wire: Any) -> bool:
    return type(wire) is dict and set(wire) == {FLOAT_TAG} and isinstance(wire[FLOAT_TAG], str) \
        and FLOAT_BITS.fullmatch(wire[FLOAT_TAG]) is not None


def encode_value(value: Any, depth: int = 0) -> Any:
    """Wire form of a session variable: JSON natives, floats by bit pattern, others tagged.

    numpy scalars count as the Python scalar they hold (``np.float64`` is a float, ``np.bool_``
    a bool); every other type keeps its name so the grader can say what it got.
    """
    if depth > MAX_DEPTH:
        return {"unsupported": "nesting too deep"}
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        value = value.item()
    if type(value) is int and value.bit_length() > 4096:
        return {"unsupported": "int too large"}
    if value is None or isinstance(value, (bool, str)) or type(value) is int:
        return value
    if type(value) is float:
        return encode_float(value)
    if type(value) is list:
        return [encode_value(item, depth + 1) for item in value]
    return {"unsupported": type(value).__name__}


def sanitize_value(value: Any, depth: int = 0) -> Any:
    """Re-check a session's reported value: only the wire forms ``encode_value`` makes pass."""
    if value is None or isinstance(value, (bool, str)) or type(value) is int:
        return value
    if type(value) is list:
        if depth >= MAX_DEPTH:
            return {"unsupported": "nesting too deep"}
        return [sanitize_value(item, depth + 1) for item in value]
    if type(value) is not dict:  # a bare JSON float, say: encode_value never writes one
        return {"unsupported": "malformed value"}
    if is_float_tag(value):
        return value
    if set(value) == {"unsupported"} and isinstance(value["unsupported"], str):
        return {"unsupported": value["unsupported"][:100]}
    return {"unsupported": "malformed value"}


class Unsupported:
    """A session value that has no JSON form (a tuple, a dict, a numpy array...)."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<unsupported {self.type_name}>"


def decode_value(wire: Any) -> Any:
    """The host's inverse of ``encode_value``: floats come back by bit pattern, anything else
    tagged comes back as ``Unsupported``."""
    if isinstance(wire, list):
        return [decode_value(item) for item in wire]
    if isinstance(wire, dict):
        if is_float_tag(wire):
            return float_from_tag(wire[FLOAT_TAG])
        return Unsupported(str(wire.get("unsupported", "malformed value"))[:100])
    return wire

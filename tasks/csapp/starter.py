"""The starter level: one C operation on one small value, where a small model first scores.

Each template asks for the result of a single integer or bit operation (a mask, a shift by one
hex digit, a complement, a hex literal read in decimal), keyed by its reference and by the
compiled C like every other template, with a trap (the operation changes the value) and wrong
readings (the usual slips: the shift the other way, ``-x`` for ``~x``, hex digits read as
decimal). They exist only at the ``starter`` level: a train draw asks for them by
``difficulty="starter"`` and an env made without ``difficulty`` never draws them, so the
standard train split is what it was. They have no eval tasks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .machine import hex_string, to_signed
from .template import Field, Params, Template, WrongReading, draw_int, fixed, require

if TYPE_CHECKING:
    import numpy as np

LEVEL = "starter"


def _digit_pair(rng: np.random.Generator, high: int) -> Params:
    """A value with a nonzero last hex digit and at least one digit above it."""
    while True:
        x = draw_int(rng, 0x10, high)
        if x & 0xF:
            return {"x": x}


MASK_LOW_NIBBLE = Template(
    name="starter_mask_low_nibble",
    category="bits",
    question=lambda p: f"uint8_t x = {hex_string(p['x'])};\nuint8_t y = x & 0xf;",
    fields=fixed(Field("the value of y", "hex")),
    reference=lambda p: [hex_string(p["x"] & 0xF)],
    wrong=(
        WrongReading("keeps x", lambda p: [hex_string(p["x"])]),
        WrongReading("keeps the high digit", lambda p: [hex_string(p["x"] >> 4)]),
        WrongReading("ors the mask in", lambda p: [hex_string(p["x"] | 0xF)]),
    ),
    trap=lambda p, key: require(key[0] != hex_string(p["x"]) and p["x"] & 0xF != 0,
                                "the mask must clear a nonzero high digit and keep a nonzero low one"),
    sample=lambda rng: _digit_pair(rng, 0xFF),
    level=LEVEL,
)

SHIFT_LEFT_DIGIT = Template(
    name="starter_shift_left_digit",
    category="bits",
    question=lambda p: f"uint16_t x = {hex_string(p['x'])};\nuint16_t y = x << 4;",
    fields=fixed(Field("the value of y", "hex")),
    reference=lambda p: [hex_string((p["x"] << 4) & 0xFFFF)],
    wrong=(
        WrongReading("shifts right", lambda p: [hex_string(p["x"] >> 4)]),
        WrongReading("multiplies by 4", lambda p: [hex_string((p["x"] * 4) & 0xFFFF)]),
    ),
    trap=lambda p, key: require(p["x"] <= 0xFFF and key[0] == hex_string(p["x"] * 16),
                                "x << 4 must append one hex digit without losing any"),
    sample=lambda rng: {"x": draw_int(rng, 0x1, 0xFFF)},
    level=LEVEL,
)

SHIFT_RIGHT_DIGIT = Template(
    name="starter_shift_right_digit",
    category="bits",
    question=lambda p: f"uint16_t x = {hex_string(p['x'])};\nuint16_t y = x >> 4;",
    fields=fixed(Field("the value of y", "hex")),
    reference=lambda p: [hex_string(p["x"] >> 4)],
    wrong=(
        WrongReading("shifts left", lambda p: [hex_string((p["x"] << 4) & 0xFFFF)]),
        WrongReading("divides by 4", lambda p: [hex_string(p["x"] >> 2)]),
    ),
    trap=lambda p, key: require(p["x"] >= 0x10 and p["x"] & 0xF != 0,
                                "x >> 4 must drop a nonzero last hex digit and keep the others"),
    sample=lambda rng: _digit_pair(rng, 0xFFFF),
    level=LEVEL,
)

COMPLEMENT = Template(
    name="starter_complement",
    category="integers",
    question=lambda p: f"int8_t x = {p['x']};\nint8_t y = ~x;",
    fields=fixed(Field("the value of y", "int")),
    reference=lambda p: [-p["x"] - 1],
    wrong=(
        WrongReading("negates (forgets the -1 of two's complement)", lambda p: [-p["x"]]),
        WrongReading("flips only the sign bit", lambda p: [to_signed((p["x"] & 0xFF) ^ 0x80, 8)]),
    ),
    trap=lambda p, key: require(key[0] == -p["x"] - 1 and p["x"] != 0, "~x must be -x - 1 in two's complement"),
    sample=lambda rng: {"x": draw_int(rng, 1, 100) * (1 if draw_int(rng, 0, 1) else -1)},
    level=LEVEL,
)


HEX_TO_DECIMAL = Template(
    name="starter_hex_to_decimal",
    category="integers",
    question=lambda p: f"uint8_t x = {hex_string(p['x'])};\nWhat is the value of x?",
    fields=fixed(Field("the value of x", "int")),
    reference=lambda p: [p["x"]],
    wrong=(
        WrongReading("reads the hex digits as decimal", lambda p: [int(f"{p['x']:x}")]),
        WrongReading("reads the digits in the wrong order", lambda p: [((p["x"] & 0xF) << 4) | (p["x"] >> 4)]),
    ),
    trap=lambda p, key: require(f"{p['x']:x}".isdigit() and p["x"] >> 4 != p["x"] & 0xF,
                                "a two-digit hex literal of decimal digits (so reading it as decimal tempts), "
                                "the digits different"),
    sample=lambda rng: {"x": 16 * draw_int(rng, 1, 9) + draw_int(rng, 0, 9)},
    level=LEVEL,
)

TEMPLATES: tuple[Template, ...] = (MASK_LOW_NIBBLE, SHIFT_LEFT_DIGIT, SHIFT_RIGHT_DIGIT, COMPLEMENT, HEX_TO_DECIMAL)

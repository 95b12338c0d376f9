"""Bit-manipulation templates: popcount of negatives, bit tricks, rotation, bytes, fields, ``~``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .machine import (
    popcount,
    rotate_left,
    shift_right_arithmetic,
    to_bytes_le,
    to_signed,
    to_unsigned,
)
from .template import Field, Params, Template, WrongReading, c_int, draw, draw_int, fixed, require

if TYPE_CHECKING:
    import numpy as np

# --- popcount of a negative number --------------------------------------------------------------


def _sample_popcount(rng: np.random.Generator) -> Params:
    width = draw(rng, (16, 32, 64))
    return {"x": draw_int(rng, -(1 << (width - 1)), -1), "width": width}


def _popcount(p: Params, python_bin: bool = False, ones_complement: bool = False) -> list:
    x, w = p["x"], p["width"]
    if python_bin:
        return [bin(x).count("1"), hex(x)]
    bits = to_unsigned(x - 1 if ones_complement else x, w)
    return [popcount(bits, w), hex(bits)]


POPCOUNT_NEGATIVE = Template(
    name="popcount_negative",
    category="bits",
    question=lambda p: (
        f"{c_int(p['width'])} x = {p['x']};\n"
        f"{c_int(p['width'], False)} u = ({c_int(p['width'], False)})x;\n"
        "/* n is the number of 1 bits in u */"
    ),
    fields=fixed(Field("n", "int"), Field("the bit pattern of u", "hex")),
    reference=_popcount,
    wrong=(
        WrongReading("Python's bin(x).count('1')", lambda p: _popcount(p, python_bin=True)),
        WrongReading("ones' complement encoding", lambda p: _popcount(p, ones_complement=True)),
    ),
    trap=lambda p, key: require(p["x"] < 0 and key[0] != bin(p["x"]).count("1"),
                                "x must be negative so its fixed-width pattern has the sign bits"),
    sample=_sample_popcount,
)

# --- the lowest set bit -------------------------------------------------------------------------


def _lowest(p: Params, highest: bool = False, swapped: bool = False) -> list:
    x = p["x"]
    if highest:
        top = 1 << (x.bit_length() - 1)
        return [hex(top), hex(x ^ top), x.bit_length() - 1]
    low = x & to_unsigned(-x, 32)
    rest = x & (x - 1)
    if swapped:
        low, rest = rest, low
    return [hex(low), hex(rest), (x & -x).bit_length() - 1]


LOWEST_SET_BIT = Template(
    name="lowest_set_bit",
    category="bits",
    question=lambda p: (
        f"uint32_t x = {hex(p['x'])};\n"
        "uint32_t low = x & -x;\n"
        "uint32_t rest = x & (x - 1);\n"
        "int tz = __builtin_ctz(x);"
    ),
    fields=fixed(Field("the value of low", "hex"), Field("the value of rest", "hex"),
                 Field("the value of tz", "int")),
    reference=_lowest,
    wrong=(
        WrongReading("isolates the highest set bit", lambda p: _lowest(p, highest=True)),
        WrongReading("swaps the two idioms", lambda p: _lowest(p, swapped=True)),
    ),
    trap=lambda p, key: require(popcount(p["x"], 32) >= 2, "x needs at least two set bits"),
    sample=lambda rng: {"x": draw_int(rng, 3, 2**32 - 1)},
)

# --- rotation versus shift ----------------------------------------------------------------------


def _sample_rotate(rng: np.random.Generator) -> Params:
    width = draw(rng, (32, 64))
    return {"x": draw_int(rng, 1, 2**width - 1), "k": draw_int(rng, 1, width - 1), "width": width}


def _rotate(p: Params, unbounded: bool = False, rightwards: bool = False) -> list:
    x, k, w = p["x"], p["k"], p["width"]
    if unbounded:
        return [hex((x << k) | (x >> (w - k))), hex(x << k)]
    rotated = rotate_left(x, w - k if rightwards else k, w)
    return [hex(rotated), hex(to_unsigned(x << k, w))]


ROTATE_LEFT = Template(
    name="rotate_left",
    category="bits",
    question=lambda p: (
        f"{c_int(p['width'], False)} x = {hex(p['x'])};\n"
        f"{c_int(p['width'], False)} r = (x << {p['k']}) | (x >> {p['width'] - p['k']});\n"
        f"{c_int(p['width'], False)} s = x << {p['k']};"
    ),
    fields=fixed(Field("the value of r", "hex"), Field("the value of s", "hex")),
    reference=_rotate,
    wrong=(
        WrongReading("shifts never drop bits (Python ints)", lambda p: _rotate(p, unbounded=True)),
        WrongReading("rotates right", lambda p: _rotate(p, rightwards=True)),
    ),
    trap=lambda p, key: require(p["x"] >> (p["width"] - p["k"]) != 0 and key[0] != key[1],
                                "x must have bits that the shift pushes out"),
    sample=_sample_rotate,
)

# --- byte order ---------------------------------------------------------------------------------


def _bytes(p: Params, big_endian: bool = False, read_big: bool = False) -> list:
    x, at = p["x"], p["offset"]
    memory = to_bytes_le(x, 4)[::-1] if big_endian else to_bytes_le(x, 4)
    lo, hi = memory[at], memory[at + 1]
    h = (lo << 8 | hi) if big_endian or read_big else (hi << 8 | lo)
    return [hex(b) for b in memory] + [hex(h)]


BYTE_ORDER = Template(
    name="byte_order",
    category="bits",
    question=lambda p: (
        f"uint32_t x = {hex(p['x'])};\n"
        "unsigned char *p = (unsigned char *)&x;\n"
        "uint16_t h;\n"
        f"memcpy(&h, p + {p['offset']}, sizeof h);"
    ),
    fields=fixed(*(Field(f"p[{i}]", "hex") for i in range(4)), Field("the value of h", "hex")),
    reference=_bytes,
    wrong=(
        WrongReading("big-endian memory", lambda p: _bytes(p, big_endian=True)),
        WrongReading("little-endian bytes but h read big-endian", lambda p: _bytes(p, read_big=True)),
    ),
    trap=lambda p, key: require(key[:4] != key[3::-1] and key[p["offset"]] != key[p["offset"] + 1],
                                "the bytes must differ so that byte order shows"),
    sample=lambda rng: {"x": draw_int(rng, 0, 2**32 - 1), "offset": draw_int(rng, 0, 2)},
)

# --- extracting a signed bit field -------------------------------------------------------------


def _sample_field(rng: np.random.Generator) -> Params:
    length = draw_int(rng, 3, 12)
    return {"w": draw_int(rng, 0, 2**32 - 1), "pos": draw_int(rng, 0, 32 - length), "len": length}


def _field(p: Params, unsigned_cast: bool = False, off_by_one: bool = False) -> list:
    w, n = p["w"], p["len"]
    pos = p["pos"] + 1 if off_by_one else p["pos"]
    f = (w >> pos) & ((1 << n) - 1)
    s = f if unsigned_cast else shift_right_arithmetic(to_signed(f << (32 - n), 32), 32 - n, 32)
    return [f, s]


BITFIELD_EXTRACT = Template(
    name="bitfield_extract",
    category="bits",
    question=lambda p: (
        f"uint32_t w = {hex(p['w'])};\n"
        f"uint32_t f = (w >> {p['pos']}) & ((1u << {p['len']}) - 1);\n"
        f"int32_t s = (int32_t)(f << {32 - p['len']}) >> {32 - p['len']};"
    ),
    fields=fixed(Field("the value of f", "int"), Field("the value of s", "int")),
    reference=_field,
    wrong=(
        WrongReading("the shifts do not sign-extend", lambda p: _field(p, unsigned_cast=True)),
        WrongReading("bits counted from 1", lambda p: _field(p, off_by_one=True)),
    ),
    trap=lambda p, key: require(key[1] < 0 < key[0], "the field's top bit must be set"),
    sample=_sample_field,
)

# --- ~ and - on unsigned char promote to int ------------------------------------------------------


def _complement(p: Params, no_promotion: bool = False, bool_not: bool = False) -> list:
    x = p["x"]
    a = to_unsigned(~x, 8) if no_promotion else ~x
    d = to_unsigned(-x, 8) if no_promotion else -x
    tested = x & p.get("mask", 0xFF)
    c = (tested == 0) if bool_not else int(tested == 0)
    return [a, to_unsigned(~x, 8), c, d]


def _sample_complement(rng: np.random.Generator) -> Params:
    """x and a mask that clears x as often as not, so that c = !(x & mask) is 1 as often as 0."""
    mask = draw(rng, (0x0F, 0xF0, 0x3C, 0xC3, 0x55, 0xAA, 0x07, 0xE0))
    cleared = bool(draw_int(rng, 0, 1))
    x = draw_int(rng, 1, 255)
    while x == 0 or (x & mask == 0) is not cleared:
        x = draw_int(rng, 1, 255) & (~mask & 0xFF if cleared else 0xFF)
    return {"x": x, "mask": mask}


def _not_operand(p: Params) -> str:
    return f"(x & {hex(p['mask'])})" if "mask" in p else "x"


COMPLEMENT_PROMOTION = Template(
    name="complement_promotion",
    category="bits",
    question=lambda p: (
        f"unsigned char x = {hex(p['x'])};\n"
        "int a = ~x;\n"
        "unsigned char b = ~x;\n"
        f"int c = !{_not_operand(p)};\n"
        "int d = -x;"
    ),
    fields=fixed(*(Field(f"the value of {v}", "int") for v in "abcd")),
    reference=_complement,
    wrong=(
        WrongReading("no integer promotion", lambda p: _complement(p, no_promotion=True)),
        WrongReading("!x is a boolean", lambda p: _complement(p, bool_not=True)),
    ),
    trap=lambda p, key: require(key[0] != key[1], "~x on the promoted int must differ from the stored byte"),
    sample=_sample_complement,
)

TEMPLATES: tuple[Template, ...] = (
    POPCOUNT_NEGATIVE,
    LOWEST_SET_BIT,
    ROTATE_LEFT,
    BYTE_ORDER,
    BITFIELD_EXTRACT,
    COMPLEMENT_PROMOTION,
)

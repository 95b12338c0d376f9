"""Integer templates: two's complement, wrap-around, signedness, promotion and C division."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .machine import (
    c_div,
    c_mod,
    hex_string,
    int_max,
    int_min,
    shift_right_arithmetic,
    shift_right_logical,
    to_signed,
    to_unsigned,
)
from .template import Field, Params, Template, WrongReading, c_int, draw, draw_int, fixed, require

if TYPE_CHECKING:
    import numpy as np

# --- samplers shared by several templates ------------------------------------------------------


def _negative_of_width(rng: np.random.Generator, name: str, widths: tuple[int, ...]) -> Params:
    width = draw(rng, widths)
    return {name: draw_int(rng, int_min(width), -1), "width": width}


def _ordered_pair(rng: np.random.Generator, first: str, second: str, low: int, high: int) -> Params:
    a = draw_int(rng, low, high - 1)
    return {first: a, second: draw_int(rng, a + 1, high)}


def _overflowing_pair(rng: np.random.Generator) -> Params:
    """a + b past the top of the type's range or, as often, past its bottom."""
    width = draw(rng, (16, 32, 64))
    if draw_int(rng, 0, 1):
        a = draw_int(rng, 1, int_max(width))
        return {"a": a, "b": draw_int(rng, int_max(width) - a + 1, int_max(width)), "width": width}
    a = draw_int(rng, int_min(width), -1)
    return {"a": a, "b": draw_int(rng, int_min(width), int_min(width) - a - 1), "width": width}


def _widening(rng: np.random.Generator) -> Params:
    src = draw(rng, (8, 16, 32))
    dst = draw(rng, tuple(w for w in (16, 32, 64) if w > src))
    return {"src": src, "dst": dst, "bits": draw_int(rng, 1 << (src - 1), (1 << src) - 1)}


# --- a negative value read as unsigned ---------------------------------------------------------


def _as_unsigned(p: Params, width_read: int | None = None) -> list:
    u = to_unsigned(p["value"], width_read or p["width"])
    return [u, hex_string(u)]


NEGATIVE_AS_UNSIGNED = Template(
    name="negative_as_unsigned",
    category="integers",
    question=lambda p: (
        f"{c_int(p['width'])} x = {p['value']};\n"
        f"{c_int(p['width'], False)} u = ({c_int(p['width'], False)})x;\n"
        "What does u hold?"
    ),
    fields=fixed(Field("the value of u", "int"), Field("the bit pattern of u", "hex")),
    reference=_as_unsigned,
    wrong=(
        WrongReading("keeps the signed value (Python's hex)", lambda p: [p["value"], hex(p["value"])]),
        WrongReading("sign-magnitude encoding", lambda p: [
            (1 << (p["width"] - 1)) | -p["value"], hex((1 << (p["width"] - 1)) | -p["value"])]),
        WrongReading("reads half the width", lambda p: _as_unsigned(p, p["width"] // 2)),
    ),
    trap=lambda p, key: require(
        p["value"] < 0 and key[0] == p["value"] + 2 ** p["width"] and key[0] != p["value"],
        "a negative value converted to unsigned must become value + 2**width",
    ),
    sample=lambda rng: _negative_of_width(rng, "value", (8, 16, 32, 64)),
)

# --- unsigned subtraction that goes below zero, with and without promotion to int ----------------

_UNSIGNED = {8: "unsigned char", 16: "unsigned short", 32: "unsigned int", 64: "unsigned long"}


def _unsigned_difference(p: Params, signed: bool = False, promotion_backwards: bool = False) -> list:
    """[d, (a - b) > 0, (long)(a - b)] for unsigned a < b of ``width`` bits (32 unless stated)."""
    a, b, width = p["a"], p["b"], p.get("width", 32)
    if signed:
        return [a - b, a - b > 0, a - b]
    promoted = (width < 32) != promotion_backwards  # operands narrower than int become int first
    value = a - b if promoted else to_unsigned(a - b, width)  # the value of the expression a - b
    return [to_unsigned(a - b, width), value > 0, to_signed(value, 64)]


def _difference_trap(p: Params, key: list) -> None:
    require(p["a"] < p["b"], "a - b must go below zero")
    require(key[1] is (p.get("width", 32) >= 32),
            "(a - b) > 0 must hold exactly when the operands are not promoted to int: an unsigned int "
            "or wider difference wraps to a large positive value, a narrower one is an int and negative")


def _sample_difference(rng: np.random.Generator) -> Params:
    width = draw(rng, (8, 16)) if draw_int(rng, 0, 1) else draw(rng, (32, 64))  # promoted or not, evenly
    return {**_ordered_pair(rng, "a", "b", 0, 255 if width == 8 else 2000), "width": width}


UNSIGNED_DIFFERENCE = Template(
    name="unsigned_difference",
    category="integers",
    question=lambda p: (
        f"{_UNSIGNED[p.get('width', 32)]} a = {p['a']}u, b = {p['b']}u;\n"
        f"{_UNSIGNED[p.get('width', 32)]} d = a - b;\n"
        "int gt = (a - b) > 0;\n"
        "long e = a - b;"
    ),
    fields=fixed(
        Field("the value of d", "int"),
        Field("whether (a - b) > 0, i.e. gt != 0", "bool"),
        Field("the value of e", "int"),
    ),
    reference=_unsigned_difference,
    wrong=(
        WrongReading("subtracts as signed", lambda p: _unsigned_difference(p, signed=True)),
        WrongReading("promotes to int exactly when the usual conversions do not",
                     lambda p: _unsigned_difference(p, promotion_backwards=True)),
    ),
    trap=_difference_trap,
    sample=_sample_difference,
)

# --- >> on signed versus unsigned ---------------------------------------------------------------


def _shifts(p: Params, signed_logical: bool = False, unsigned_arith: bool = False,
            divide: bool = False) -> list:
    x, k, w = p["x"], p["shift"], p["width"]
    if divide:
        s = c_div(x, 2**k)
    elif signed_logical:
        s = to_signed(shift_right_logical(x, k, w), w)
    else:
        s = shift_right_arithmetic(x, k, w)
    u = to_unsigned(shift_right_arithmetic(x, k, w), w) if unsigned_arith else shift_right_logical(x, k, w)
    return [s, u]


SHIFT_SIGNEDNESS = Template(
    name="shift_signedness",
    category="integers",
    question=lambda p: (
        f"{c_int(p['width'])} x = {p['x']};\n"
        f"{c_int(p['width'])} s = x >> {p['shift']};\n"
        f"{c_int(p['width'], False)} u = ({c_int(p['width'], False)})x >> {p['shift']};"
    ),
    fields=fixed(Field("the value of s", "int"), Field("the value of u", "int")),
    reference=_shifts,
    wrong=(
        WrongReading("both shifts logical", lambda p: _shifts(p, signed_logical=True)),
        WrongReading("both shifts arithmetic", lambda p: _shifts(p, unsigned_arith=True)),
        WrongReading("x >> k read as x / 2**k (truncating)", lambda p: _shifts(p, divide=True)),
    ),
    trap=lambda p, key: require(
        p["x"] < 0 and to_unsigned(key[0], p["width"]) != key[1],
        "a negative x must make the arithmetic and logical shifts differ",
    ),
    sample=lambda rng: {**_negative_of_width(rng, "x", (32, 64)), "shift": draw_int(rng, 1, 31)},
)

# --- negating the minimum, beside another value ---------------------------------------------------


def _negate(p: Params, wraps: bool = True, saturates: bool = False) -> list:
    """[-x, -x == x, -z, -z == z] in the signed type of ``width`` bits; one of x, z is its minimum."""
    w = p["width"]
    out = []
    for x in (p["x"], p["z"]):
        y = min(-x, int_max(w)) if saturates else to_signed(-x, w) if wraps else -x
        out += [y, y == x]
    return out


def _negate_literal(p: Params, name: str) -> str:
    value, w = p[name], p["width"]
    return f"{c_int(w)} {name} = " + (f"INT{w}_MIN;   /* {value} */" if value == int_min(w) else f"{value};")


def _negate_trap(p: Params, key: list) -> None:
    w, x, z = p["width"], p["x"], p["z"]
    require((x == int_min(w)) != (z == int_min(w)), "exactly one of x and z must be the minimum")
    at = 0 if x == int_min(w) else 2
    require(key[at] == int_min(w) and key[at + 1] is True, "negating the minimum must wrap back to the minimum")


def _sample_negate(rng: np.random.Generator) -> Params:
    w = draw(rng, (8, 16, 32, 64))
    other = draw(rng, (  # a neighbour of the minimum, whose negation fits, or any other value
        int_min(w) + draw_int(rng, 1, 3), draw_int(rng, int_min(w) + 1, -1), draw_int(rng, 1, int_max(w))))
    return {"width": w, "x": int_min(w), "z": other} if draw_int(rng, 0, 1) else {
        "width": w, "x": other, "z": int_min(w)}


NEGATE_MINIMUM = Template(
    name="negate_minimum",
    category="integers",
    question=lambda p: (
        f"{_negate_literal(p, 'x')}\n{_negate_literal(p, 'z')}\n"
        f"{c_int(p['width'])} y = -x;\n"
        f"{c_int(p['width'])} v = -z;"
    ),
    fields=fixed(
        Field("the value of y", "int"),
        Field("whether y == x", "bool"),
        Field("the value of v", "int"),
        Field("whether v == z", "bool"),
    ),
    reference=_negate,
    wrong=(
        WrongReading("negation never overflows", lambda p: _negate(p, wraps=False)),
        WrongReading("overflow saturates at the maximum", lambda p: _negate(p, saturates=True)),
    ),
    trap=_negate_trap,
    sample=_sample_negate,
)

# --- signed addition that overflows -------------------------------------------------------------


def _add(p: Params, wraps: bool = True, saturates: bool = False) -> list:
    a, b, w = p["a"], p["b"], p["width"]
    s = max(min(a + b, int_max(w)), int_min(w)) if saturates else to_signed(a + b, w) if wraps else a + b
    return [s, s < a]


SIGNED_ADD_OVERFLOW = Template(
    name="signed_add_overflow",
    category="integers",
    question=lambda p: (
        f"{c_int(p['width'])} a = {p['a']}, b = {p['b']};\n"
        f"{c_int(p['width'])} s = a + b;\n"
        "int smaller = s < a;"
    ),
    fields=fixed(Field("the value of s", "int"), Field("whether s < a, i.e. smaller != 0", "bool")),
    reference=_add,
    wrong=(
        WrongReading("unbounded addition", lambda p: _add(p, wraps=False)),
        WrongReading("saturating addition", lambda p: _add(p, saturates=True)),
    ),
    trap=lambda p, key: require(
        not int_min(p["width"]) <= p["a"] + p["b"] <= int_max(p["width"]) and key[1] is (p["b"] > 0),
        "a + b must overflow: past the top it wraps below a, past the bottom (b < 0) above a"),
    sample=_overflowing_pair,
)

# --- short * short: promotion to int, then narrowing --------------------------------------------


def _short_product(p: Params, narrow_first: bool = False, narrow_never: bool = False) -> list:
    prod = p["a"] * p["b"]
    q = to_signed(prod, 16)
    if narrow_first:
        return [q, q, True]
    if narrow_never:
        return [prod, prod, True]
    return [prod, q, (prod < 0) == (q < 0)]


SHORT_PRODUCT = Template(
    name="short_product",
    category="integers",
    question=lambda p: (
        f"int16_t a = {p['a']}, b = {p['b']};\n"
        "int p = a * b;\n"
        "int16_t q = (int16_t)(a * b);"
    ),
    fields=fixed(Field("the value of p", "int"), Field("the value of q", "int"),
                 Field("whether p and q have the same sign, i.e. (p < 0) == (q < 0)", "bool")),
    reference=_short_product,
    wrong=(
        WrongReading("multiplies in 16 bits", lambda p: _short_product(p, narrow_first=True)),
        WrongReading("the cast keeps the value", lambda p: _short_product(p, narrow_never=True)),
    ),
    trap=lambda p, key: require(
        int_min(32) <= key[0] <= int_max(32) and key[0] != key[1],
        "the int product must fit in 32 bits and lose its value in the 16-bit cast",
    ),
    sample=lambda rng: {"a": draw_int(rng, -32768, 32767), "b": draw_int(rng, -32768, 32767)},
)

# --- plain char is signed ------------------------------------------------------------------------


def _char(p: Params, char_unsigned: bool = False, bytes_compare: bool = False) -> list:
    byte, literal = p["byte"], _char_literal(p)
    c = byte if char_unsigned else to_signed(byte, 8)
    if bytes_compare:
        return [c, True, True]
    return [c, c == literal, byte == literal]


def _char_literal(p: Params) -> int:
    """The int both chars are compared with: the byte's unsigned value, or its signed one."""
    return p["literal"] if "literal" in p else p["byte"]


CHAR_SIGNEDNESS = Template(
    name="char_signedness",
    category="integers",
    question=lambda p: (
        f"char c = {hex(p['byte'])};\n"
        f"unsigned char d = {hex(p['byte'])};\n"
        f"int c_eq = (c == {_char_literal(p)});\n"
        f"int d_eq = (d == {_char_literal(p)});"
    ),
    fields=fixed(Field("the value of c", "int"), Field("whether c_eq != 0", "bool"),
                 Field("whether d_eq != 0", "bool")),
    reference=_char,
    wrong=(
        WrongReading("plain char is unsigned", lambda p: _char(p, char_unsigned=True)),
        WrongReading("the comparison is done on the byte", lambda p: _char(p, bytes_compare=True)),
    ),
    trap=lambda p, key: require(
        p["byte"] >= 0x80 and _char_literal(p) in (p["byte"], p["byte"] - 256) and key[1] is (_char_literal(p) < 0),
        "the byte must have its top bit set so that c goes negative: c equals the literal only when it is "
        "written negative, d only when it is written as the byte's unsigned value"),
    sample=lambda rng: (lambda byte: {"byte": byte, "literal": draw(rng, (byte, byte - 256))})(
        draw_int(rng, 0x80, 0xFF)),
)

# --- comparing int with unsigned ----------------------------------------------------------------


def _mixed(p: Params, as_signed: bool = False, converted_but_signed: bool = False) -> list:
    """[a < b, the negative operand converted to unsigned, (long)a < (long)b]: one of a and b is
    a negative int, the other an unsigned int."""
    a, b = p["a"], p["b"]
    negative = a if a < 0 else b
    converted = to_unsigned(negative, 32)
    if as_signed:
        return [a < b, negative, a < b]
    if converted_but_signed:
        return [a < b, converted, a < b]
    return [to_unsigned(a, 32) < to_unsigned(b, 32), converted, a < b]


def _mixed_question(p: Params) -> str:
    if p["a"] < 0:
        return (f"int a = {p['a']};\nunsigned int b = {p['b']}u;\nint lt = a < b;\n"
                "unsigned int ua = (unsigned int)a;\nint lt_long = (long)a < (long)b;")
    return (f"unsigned int a = {p['a']}u;\nint b = {p['b']};\nint lt = a < b;\n"
            "unsigned int ub = (unsigned int)b;\nint lt_long = (long)a < (long)b;")


def _sample_mixed(rng: np.random.Generator) -> Params:
    negative, other = draw_int(rng, -100000, -1), draw_int(rng, 0, 100000)
    return {"a": negative, "b": other} if draw_int(rng, 0, 1) else {"a": other, "b": negative}


MIXED_SIGN_COMPARE = Template(
    name="mixed_sign_compare",
    category="integers",
    question=_mixed_question,
    fields=lambda p: (Field("whether a < b, i.e. lt != 0", "bool"),
                      Field(f"the value of {'ua' if p['a'] < 0 else 'ub'}", "int"),
                      Field("whether (long)a < (long)b, i.e. lt_long != 0", "bool")),
    reference=_mixed,
    wrong=(
        WrongReading("compares as signed", lambda p: _mixed(p, as_signed=True)),
        WrongReading("converts the negative operand but compares signed",
                     lambda p: _mixed(p, converted_but_signed=True)),
    ),
    trap=lambda p, key: require((p["a"] < 0) != (p["b"] < 0) and key[0] is not (p["a"] < p["b"]),
                                "one operand must be negative, so that converting it to unsigned flips a < b"),
    sample=_sample_mixed,
)

# --- C division truncates ------------------------------------------------------------------------

SIGNED_DIVISION = Template(
    name="signed_division",
    category="integers",
    question=lambda p: f"int a = {p['a']}, b = {p['b']};\nint q = a / b;\nint r = a % b;",
    fields=fixed(Field("the value of q", "int"), Field("the value of r", "int")),
    reference=lambda p: [c_div(p["a"], p["b"]), c_mod(p["a"], p["b"])],
    wrong=(
        WrongReading("floors like Python", lambda p: [p["a"] // p["b"], p["a"] % p["b"]]),
        WrongReading("remainder of the magnitudes", lambda p: [
            c_div(p["a"], p["b"]), abs(p["a"]) % abs(p["b"])]),
    ),
    trap=lambda p, key: require(key[0] != p["a"] // p["b"],
                                "truncating and flooring division must differ (mixed signs, inexact)"),
    sample=lambda rng: {"a": -draw_int(rng, 1, 5000), "b": draw_int(rng, 2, 97)},
)

# --- widening: sign extension versus zero extension --------------------------------------------


def _widen(p: Params, sign_extend: bool | None = None) -> list:
    src, dst, bits = p["src"], p["dst"], p["bits"]
    s = to_signed(bits, src)
    t = s if sign_extend in (None, True) else bits
    z = bits if sign_extend in (None, False) else s
    return [hex_string(to_unsigned(t, dst)), hex_string(to_unsigned(z, dst)), t]


SIGN_EXTENSION = Template(
    name="sign_extension",
    category="integers",
    question=lambda p: (
        f"{c_int(p['src'])} s = ({c_int(p['src'])}){hex(p['bits'])};\n"
        f"{c_int(p['dst'])} t = s;\n"
        f"{c_int(p['dst'], False)} z = ({c_int(p['src'], False)})s;"
    ),
    fields=fixed(
        Field("the bit pattern of t, read as the unsigned type of its width", "hex"),
        Field("the bit pattern of z", "hex"),
        Field("the value of t", "int"),
    ),
    reference=_widen,
    wrong=(
        WrongReading("zero-extends both", lambda p: _widen(p, sign_extend=False)),
        WrongReading("sign-extends both", lambda p: _widen(p, sign_extend=True)),
    ),
    trap=lambda p, key: require(key[0] != key[1], "the source's top bit must be set so the two widenings differ"),
    sample=_widening,
)

# --- narrowing: the value is reduced modulo 2^16 -----------------------------------------------


def _narrow(p: Params, keeps: bool = False, saturates: bool = False) -> list:
    x = p["x"]
    if keeps:
        y = x
    elif saturates:
        y = max(min(x, int_max(16)), int_min(16))
    else:
        y = to_signed(x, 16)
    return [y, hex_string(to_unsigned(y, 16)), (y < 0) == (x < 0)]


NARROWING_CAST = Template(
    name="narrowing_cast",
    category="integers",
    question=lambda p: f"int32_t x = {p['x']};\nint16_t y = (int16_t)x;\nint same_sign = ((y < 0) == (x < 0));",
    fields=fixed(Field("the value of y", "int"), Field("the bit pattern of y, read as uint16_t", "hex"),
                 Field("whether same_sign != 0", "bool")),
    reference=_narrow,
    wrong=(
        WrongReading("the cast keeps the value", lambda p: _narrow(p, keeps=True)),
        WrongReading("the cast saturates", lambda p: _narrow(p, saturates=True)),
    ),
    trap=lambda p, key: require(not int_min(16) <= p["x"] <= int_max(16) and key[0] != p["x"],
                                "x must be out of the int16_t range"),
    sample=lambda rng: {"x": draw(rng, (-1, 1)) * draw_int(rng, 32768, 1_000_000)},
)

# --- the midpoint that overflows ----------------------------------------------------------------


def _midpoints(p: Params, overflows: bool = True, floors: bool = False) -> list:
    lo, hi = p["lo"], p["hi"]
    total = to_signed(lo + hi, 32) if overflows else lo + hi
    mid1 = total >> 1 if floors else c_div(total, 2)
    return [mid1, lo + c_div(hi - lo, 2)]


MIDPOINT_OVERFLOW = Template(
    name="midpoint_overflow",
    category="integers",
    question=lambda p: (
        f"int lo = {p['lo']}, hi = {p['hi']};\n"
        "int mid1 = (lo + hi) / 2;\n"
        "int mid2 = lo + (hi - lo) / 2;"
    ),
    fields=fixed(Field("the value of mid1", "int"), Field("the value of mid2", "int")),
    reference=_midpoints,
    wrong=(
        WrongReading("lo + hi does not overflow", lambda p: _midpoints(p, overflows=False)),
        WrongReading("halving rounds down like >> 1", lambda p: _midpoints(p, floors=True)),
    ),
    trap=lambda p, key: require(p["lo"] + p["hi"] > int_max(32) and key[0] != key[1],
                                "lo + hi must overflow int so the two midpoints differ"),
    sample=lambda rng: _ordered_pair(rng, "lo", "hi", int_max(32) // 2 + 1, int_max(32)),
)

TEMPLATES: tuple[Template, ...] = (
    NEGATIVE_AS_UNSIGNED,
    UNSIGNED_DIFFERENCE,
    SHIFT_SIGNEDNESS,
    NEGATE_MINIMUM,
    SIGNED_ADD_OVERFLOW,
    SHORT_PRODUCT,
    CHAR_SIGNEDNESS,
    MIXED_SIGN_COMPARE,
    SIGNED_DIVISION,
    SIGN_EXTENSION,
    NARROWING_CAST,
    MIDPOINT_OVERFLOW,
)

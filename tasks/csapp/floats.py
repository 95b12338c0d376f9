"""Float templates: float32 rounding, associativity, signed zero, NaN, overflow, subnormals.

Every float32 quantity goes through ``machine.f32`` (a struct round trip); computing in Python's
binary64 is exactly the wrong reading several distractors run.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import TYPE_CHECKING

from gym_sysmath.exact import float_bits

from .machine import (
    f32,
    f32_add,
    f32_bits,
    f32_div,
    f32_fields,
    f32_from_bits,
    f32_mul,
    hex_string,
)
from .template import Field, Params, Template, WrongReading, c_float, draw, draw_int, fixed, require

if TYPE_CHECKING:
    import numpy as np

FLT_MAX = f32_from_bits(0x7F7FFFFF)


def _sign(rng: np.random.Generator) -> float:
    return draw(rng, (-1.0, 1.0))


# --- float32 addition is not associative --------------------------------------------------------


def _groupings(p: Params, add=f32_add, associative: bool = False) -> list:
    a, b, c = (f32(p[k]) for k in ("a", "b", "c"))
    left = add(add(a, b), c)
    right = left if associative else add(a, add(b, c))
    return [left, right, left == a + b + c]  # Python's float is C's double: (double)a + b + c


def _sample_groupings(rng: np.random.Generator) -> Params:
    """A big value, its negation and a small one: the small one last (the left grouping cancels
    first and is exact) or, as often, first (the right grouping is)."""
    big = _sign(rng) * f32(float(draw_int(rng, 2**25, 2**31)))
    small = _sign(rng) * float(draw_int(rng, 1, 7))
    return {"a": big, "b": -big, "c": small} if draw_int(rng, 0, 1) else {"a": small, "b": big, "c": -big}


F32_ASSOCIATIVITY = Template(
    name="f32_associativity",
    category="floats",
    question=lambda p: (
        f"float a = {c_float(p['a'])}, b = {c_float(p['b'])}, c = {c_float(p['c'])};\n"
        "float left = (a + b) + c;\n"
        "float right = a + (b + c);\n"
        "int exact = (left == (double)a + b + c);"
    ),
    fields=fixed(Field("the value of left", "float"), Field("the value of right", "float"),
                 Field("whether exact != 0", "bool")),
    reference=_groupings,
    wrong=(
        WrongReading("adds in double", lambda p: _groupings(p, add=lambda x, y: x + y)),
        WrongReading("float addition is associative", lambda p: _groupings(p, associative=True)),
    ),
    trap=lambda p, key: require(float_bits(key[0]) != float_bits(key[1]),
                                "the two groupings must give different float32 sums"),
    sample=_sample_groupings,
)

# --- an int that float32 cannot hold --------------------------------------------------------------


def _int_to_float(p: Params, ties_away: bool = False, via_double: bool = False) -> list:
    n = p["n"]
    if via_double:
        return [n, 0, hex_string(float_bits(float(n)))]
    f = f32(float(n))
    if ties_away:
        mirror = 2 * n - f  # the float32 neighbour on the other side when n is a tie
        if f32(mirror) == mirror and abs(mirror) > abs(f):
            f = mirror
    back = int(f)
    return [back, back - n, hex_string(f32_bits(f))]


def _sample_tie(rng: np.random.Generator) -> Params:
    shift = draw_int(rng, 1, 7)
    mantissa = 2 * draw_int(rng, 2**22, 2**23 - 1)  # even, so the tie rounds toward zero
    return {"n": int(_sign(rng)) * (mantissa * 2**shift + 2 ** (shift - 1))}


INT_TO_FLOAT = Template(
    name="int_to_float",
    category="floats",
    question=lambda p: (
        f"int32_t n = {p['n']};\n"
        "float f = (float)n;\n"
        "int32_t back = (int32_t)f;\n"
        "int32_t err = back - n;"
    ),
    fields=fixed(Field("the value of back", "int"), Field("the value of err", "int"),
                 Field("the float32 bit pattern of f", "hex")),
    reference=_int_to_float,
    wrong=(
        WrongReading("f holds n exactly, as a double would", lambda p: _int_to_float(p, via_double=True)),
        WrongReading("ties round away from zero", lambda p: _int_to_float(p, ties_away=True)),
    ),
    trap=lambda p, key: require(f32(float(p["n"])) != p["n"] and key[1] != 0,
                                "n must not be representable in float32"),
    sample=_sample_tie,
)

# --- decoding a float32 bit pattern -------------------------------------------------------------


def _decode(p: Params, unbiased: bool = False, no_hidden_one: bool = False, bias: int = 127) -> list:
    fields = f32_fields(p["bits"])
    value = f32_from_bits(p["bits"])  # what memcpy really gives
    if no_hidden_one or bias != 127:
        significand = fields.fraction / 2**23 + (0 if no_hidden_one else 1)
        value = (-1.0) ** fields.sign * significand * 2.0 ** (fields.exponent - bias)
    exponent = fields.exponent - 127 if unbiased else fields.exponent
    return [fields.sign, exponent, hex_string(fields.fraction), value]


F32_DECODE = Template(
    name="f32_decode",
    category="floats",
    question=lambda p: (
        f"uint32_t bits = {hex(p['bits'])};\n"
        "float x;\n"
        "memcpy(&x, &bits, sizeof x);"
    ),
    fields=fixed(
        Field("the sign bit", "int"),
        Field("the biased exponent field (8 bits)", "int"),
        Field("the fraction field (the low 23 bits)", "hex"),
        Field("the value of x", "float"),
    ),
    reference=_decode,
    wrong=(
        WrongReading("reports the unbiased exponent", lambda p: _decode(p, unbiased=True)),
        WrongReading("forgets the implicit leading 1", lambda p: _decode(p, no_hidden_one=True)),
        WrongReading("uses a bias of 128", lambda p: _decode(p, bias=128)),
    ),
    trap=lambda p, key: require(0 < key[1] < 255 and key[2] != "0x0",
                                "a normal number with a non-zero fraction is needed"),
    sample=lambda rng: {"bits": (draw_int(rng, 0, 1) << 31) | (draw_int(rng, 110, 150) << 23)
                        | (draw_int(rng, 1, 255) << 15)},
)

# --- double to float rounds to nearest ----------------------------------------------------------


def _narrow(p: Params, keeps: bool = False, truncates: bool = False) -> list:
    d = p["d"]
    x = f32(d)
    bits = f32_bits(x)
    if keeps:
        return [hex_string(bits), d, False]
    if truncates and abs(x) > abs(d):
        bits -= 1  # one float32 step toward zero, whatever the sign
        x = f32_from_bits(bits)
    return [hex_string(bits), x, x > d]


DOUBLE_TO_FLOAT = Template(
    name="double_to_float",
    category="floats",
    question=lambda p: (
        f"double d = {p['d']!r};\n"
        "float x = (float)d;\n"
        "int up = ((double)x > d);"
    ),
    fields=fixed(Field("the float32 bit pattern of x", "hex"), Field("the value of x", "float"),
                 Field("whether up != 0", "bool")),
    reference=_narrow,
    wrong=(
        WrongReading("x keeps the double's value", lambda p: _narrow(p, keeps=True)),
        WrongReading("the conversion truncates toward zero", lambda p: _narrow(p, truncates=True)),
    ),
    trap=lambda p, key: require(key[1] != p["d"], "d must not be representable in float32"),
    sample=lambda rng: {"d": round(float(rng.uniform(-1000.0, 1000.0)), draw_int(rng, 1, 3))},
)

# --- underflow to a signed zero -----------------------------------------------------------------


def _underflow(p: Params, unsigned_zero: bool = False, in_double: bool = False) -> list:
    a, b = f32(p["a"]), f32(p["b"])
    product = a * b if in_double else f32_mul(a, b)
    if unsigned_zero:
        product = abs(product)
    quotient = 1.0 / product if in_double else f32_div(1.0, product)
    return [product, product == 0.0, quotient]


def _sample_underflow(rng: np.random.Generator) -> Params:
    """Factors of opposite signs whose float32 product underflows to -0.0 or, as often, stays a
    negative subnormal whose reciprocal is finite."""
    if draw_int(rng, 0, 1):
        k = draw_int(rng, 20, 37)
        m = draw_int(rng, max(20, 47 - k), 37)
        a, b = float(f"1e-{k}"), float(f"1e-{m}")
    else:
        while True:
            k = draw_int(rng, 15, 24)
            a, b = float(f"{draw_int(rng, 1, 9)}e-{k}"), float(f"{draw_int(rng, 1, 9)}e-{draw(rng, (38, 39)) - k}")
            product = f32_mul(f32(a), f32(b))
            if 0.0 < product < 2.0**-126 and math.isfinite(f32_div(1.0, product)):
                break
    return {"a": -a, "b": b} if draw_int(rng, 0, 1) else {"a": a, "b": -b}


def _underflow_trap(p: Params, key: list) -> None:
    require(float_bits(key[0]) >> 63 == 1 and abs(key[0]) < 2.0**-126, "the product must be a negative "
            "float32 zero or subnormal")
    require(key[1] is (key[2] == -math.inf),
            "the product must underflow to -0.0, equal to zero, with 1/p = -inf, or stay a negative "
            "subnormal, not zero, with a finite 1/p")


SIGNED_ZERO = Template(
    name="signed_zero",
    category="floats",
    question=lambda p: (
        f"float a = {c_float(p['a'])}, b = {c_float(p['b'])};\n"
        "float p = a * b;\n"
        "int zero = (p == 0.0f);\n"
        "float q = 1.0f / p;"
    ),
    fields=fixed(Field("the value of p", "float"), Field("whether zero != 0", "bool"),
                 Field("the value of q", "float")),
    reference=_underflow,
    wrong=(
        WrongReading("zero has no sign", lambda p: _underflow(p, unsigned_zero=True)),
        WrongReading("multiplies in double", lambda p: _underflow(p, in_double=True)),
    ),
    trap=_underflow_trap,
    sample=_sample_underflow,
    measure=lambda p: -math.log10(abs(p["a"])) - math.log10(abs(p["b"])),  # nearer the edge of float32
)

# --- NaN compares false with everything -------------------------------------------------------



def _inf_minus_inf() -> float:
    inf = f32_mul(f32(3e38), 10.0)
    return f32_add(inf, -inf)


_INF = math.inf

_NAN_FORMS = {
    "0/0": ("float z = 0.0f;\nfloat n = z / z;", lambda: f32_div(0.0, 0.0)),
    "inf-inf": ("float big = 3e+38f;\nfloat inf = big * 10.0f;\nfloat n = inf - inf;", _inf_minus_inf),
    "inf*0": ("float inf = 1.0f / 0.0f;\nfloat n = inf * 0.0f;", lambda: f32_mul(f32_div(1.0, 0.0), 0.0)),
    # forms that look as if they might make a NaN but make an infinity
    "inf+inf": ("float inf = 1.0f / 0.0f;\nfloat n = inf + inf;", lambda: f32_add(_INF, _INF)),
    "inf-big": ("float big = 3e+38f;\nfloat inf = big * 10.0f;\nfloat n = inf - big;",
                lambda: f32_add(f32_mul(f32(3e38), 10.0), -f32(3e38))),
    "-inf*inf": ("float inf = 1.0f / 0.0f;\nfloat n = -inf * inf;", lambda: f32_mul(-_INF, _INF)),
    "0-inf": ("float inf = 1.0f / 0.0f;\nfloat n = 0.0f - inf;", lambda: f32_add(0.0, -_INF)),
}
_NANS = ("0/0", "inf-inf", "inf*0")


def _sample_nan(rng: np.random.Generator) -> Params:
    """A NaN two times in five, else an infinity compared with a c of the sign that tells it from 0."""
    if draw_int(rng, 0, 4) < 2:
        return {"form": draw(rng, _NANS), "c": float(draw_int(rng, -5, 5))}
    form = draw(rng, tuple(f for f in _NAN_FORMS if f not in _NANS))
    positive = _NAN_FORMS[form][1]() > 0
    return {"form": form, "c": float(draw_int(rng, 1, 5) if positive else draw_int(rng, -5, 0))}


def _nan_compare(p: Params, reflexive: bool = False, zero: bool = False, ordered: bool = False) -> list:
    n = 0.0 if zero else _NAN_FORMS[p["form"]][1]()
    c = f32(p["c"])
    if reflexive:
        return [True, False, False, False]
    if ordered:
        return [False, True, False, True]
    return [n == n, n != n, n < c, n >= c]


NAN_COMPARE = Template(
    name="nan_compare",
    category="floats",
    question=lambda p: (
        f"{_NAN_FORMS[p['form']][0]}\n"
        "int eq = (n == n);\n"
        "int ne = (n != n);\n"
        f"int lt = (n < {c_float(p['c'])});\n"
        f"int ge = (n >= {c_float(p['c'])});"
    ),
    fields=fixed(*(Field(f"whether {v} != 0", "bool") for v in ("eq", "ne", "lt", "ge"))),
    reference=_nan_compare,
    wrong=(
        WrongReading("n equals itself", lambda p: _nan_compare(p, reflexive=True)),
        WrongReading("n is zero", lambda p: _nan_compare(p, zero=True)),
        WrongReading("exactly one of < and >= holds", lambda p: _nan_compare(p, ordered=True)),
    ),
    trap=lambda p, key: require(
        (p["form"] in _NANS) is math.isnan(_NAN_FORMS[p["form"]][1]()) is (key == [False, True, False, False]),
        "n must be a NaN, every ordered comparison false, or an infinity from a form that looks like one"),
    sample=_sample_nan,
)

# --- float32 overflows where double does not ---------------------------------------------------


def _sample_overflow(rng: np.random.Generator) -> Params:
    """x * m near FLT_MAX: over it as often as under it."""
    over = bool(draw_int(rng, 0, 1))
    while True:
        p = {"x": float(f"{draw_int(rng, 30, 340)}e36"), "m": float(draw_int(rng, 2, 8))}
        wide, y = f32(p["x"]) * p["m"], f32_mul(f32(p["x"]), p["m"])
        if wide > 2.0**127 and math.isinf(y) is over and (over or y != wide):  # below FLT_MAX: rounded
            return p


def _overflow(p: Params, double_range: bool = False, saturates: bool = False) -> list:
    x, m = f32(p["x"]), f32(p["m"])
    wide = x * m
    y = wide if double_range else FLT_MAX if saturates else f32_mul(x, m)
    return [y, math.isinf(y), wide]


F32_OVERFLOW = Template(
    name="f32_overflow",
    category="floats",
    question=lambda p: (
        f"float x = {c_float(p['x'])};\n"
        f"float y = x * {c_float(p['m'])};\n"
        f"double w = (double)x * {p['m']!r};\n"
        "int overflowed = (isinf(y) != 0);"
    ),
    fields=fixed(Field("the value of y", "float"), Field("whether overflowed != 0", "bool"),
                 Field("the value of w", "float")),
    reference=_overflow,
    wrong=(
        WrongReading("float has the range of double", lambda p: _overflow(p, double_range=True)),
        WrongReading("overflow saturates at FLT_MAX", lambda p: _overflow(p, saturates=True)),
    ),
    trap=lambda p, key: require(key[2] > 2.0**127 and math.isfinite(key[2]) and (key[0] == math.inf) is key[1],
                                "x * m must reach the top of float32's range: overflow it (y is inf, the "
                                "double w is not) or land just below FLT_MAX, rounded"),
    sample=_sample_overflow,
    measure=lambda p: p["x"] / 1e37 + p["m"],  # more digits to multiply out before the overflow
)

# --- accumulating a step that float32 cannot hold -----------------------------------------------


def _target(p: Params) -> float:
    """The exact decimal product count * step, as the double a C literal of it denotes."""
    return float(Decimal(repr(p["step"])) * p["count"])


def _accumulate(p: Params, in_double: bool = False, exact: bool = False) -> list:
    if exact:
        return [f32(_target(p)), False]
    acc = 0.0
    for _ in range(p["count"]):
        acc = acc + p["step"] if in_double else f32_add(acc, f32(p["step"]))
    return [acc, acc > f32(_target(p))]


F32_ACCUMULATION = Template(
    name="f32_accumulation",
    category="floats",
    question=lambda p: (
        "float acc = 0.0f;\n"
        f"for (int i = 0; i < {p['count']}; i++)\n"
        f"    acc += {c_float(p['step'])};\n"
        f"int over = (acc > {c_float(_target(p))});"
    ),
    fields=fixed(Field("the value of acc after the loop", "float"), Field("whether over != 0", "bool")),
    reference=_accumulate,
    wrong=(
        WrongReading("accumulates in double", lambda p: _accumulate(p, in_double=True)),
        WrongReading("every step is exact", lambda p: _accumulate(p, exact=True)),
    ),
    trap=lambda p, key: require(key[0] != f32(_target(p)), "the float32 sum must miss the rounded exact sum"),
    sample=lambda rng: {"step": round(float(rng.uniform(0.01, 1.0)), 2), "count": draw_int(rng, 5, 40)},
)

# --- four ways to turn a float into an int -------------------------------------------------------


def _round_half_away(x: float) -> int:
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def _to_int(p: Params, python_round: bool = False, cast_floors: bool = False) -> list:
    x = f32(p["x"])
    t = math.floor(x) if cast_floors else math.trunc(x)
    r = round(x) if python_round else _round_half_away(x)
    return [t, math.floor(x), r, round(x)]  # Python's round() is round-half-even, like rintf


FLOAT_TO_INT = Template(
    name="float_to_int",
    category="floats",
    question=lambda p: (
        f"float x = {c_float(p['x'])};\n"
        "int t = (int)x;\n"
        "int f = (int)floorf(x);\n"
        "int r = (int)roundf(x);\n"
        "int e = (int)rintf(x);   /* default rounding mode */"
    ),
    fields=fixed(*(Field(f"the value of {v}", "int") for v in "tfre")),
    reference=_to_int,
    wrong=(
        WrongReading("roundf rounds half to even like Python's round", lambda p: _to_int(p, python_round=True)),
        WrongReading("the (int) cast floors", lambda p: _to_int(p, cast_floors=True)),
    ),
    trap=lambda p, key: require(key[0] != key[1] and key[2] != key[3],
                                "x must be a negative half-way value so all four conversions matter"),
    sample=lambda rng: {"x": -(2 * draw_int(rng, 0, 100) + 0.5)},  # even k: rintf and roundf part
)

# --- subnormals have no implicit 1, and halving one rounds --------------------------------------


def _subnormal(p: Params, hidden_one: bool = False, truncates: bool = False) -> list:
    bits = p["bits"]
    x = (1 + bits / 2**23) * 2.0**-127 if hidden_one else f32_from_bits(bits)
    if truncates:
        return [x, f32_from_bits(bits >> 1), hex_string(bits >> 1)]
    y = f32_div(f32(x), 2.0)
    return [x, y, hex_string(f32_bits(y))]


SUBNORMAL_HALVING = Template(
    name="subnormal_halving",
    category="floats",
    question=lambda p: (
        f"uint32_t bits = {hex(p['bits'])};\n"
        "float x;\n"
        "memcpy(&x, &bits, sizeof x);\n"
        "float y = x / 2.0f;\n"
        "uint32_t ybits;\n"
        "memcpy(&ybits, &y, sizeof y);"
    ),
    fields=fixed(Field("the value of x", "float"), Field("the value of y", "float"),
                 Field("the value of ybits", "hex")),
    reference=_subnormal,
    wrong=(
        WrongReading("subnormals keep the implicit leading 1", lambda p: _subnormal(p, hidden_one=True)),
        WrongReading("halving a subnormal truncates", lambda p: _subnormal(p, truncates=True)),
    ),
    trap=lambda p, key: require(p["bits"] < 2**23 and p["bits"] % 2 == 1 and key[1] != key[0] / 2,
                                "x must be subnormal with an odd fraction so halving has to round"),
    sample=lambda rng: {"bits": 4 * draw_int(rng, 0, 1023) + 3},
)

TEMPLATES: tuple[Template, ...] = (
    F32_ASSOCIATIVITY,
    INT_TO_FLOAT,
    F32_DECODE,
    DOUBLE_TO_FLOAT,
    SIGNED_ZERO,
    NAN_COMPARE,
    F32_OVERFLOW,
    F32_ACCUMULATION,
    FLOAT_TO_INT,
    SUBNORMAL_HALVING,
)

"""The C behind every C-code question of the first five categories, made to print its answer.

For each such template this names, per answer field, the C expression whose value the field
asks for. ``run_check`` puts the question's own C (its prompt text, without the English) into
``main``, prints those expressions one per line, and expects exactly the key: ``verify csapp``
compiles it with the image's gcc (``-O1 -fwrapv``, PLATFORM's wrapping) and runs it in the
sandbox. The cache templates are answered by a model and checked by a second model instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gym_sysmath.exact import float_bits

from .template import Params, RunCheck, Template, c_int

#: Included and defined before every check's main.
PRELUDE = r"""#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void put_s(long long v) { printf("%lld\n", v); }
static void put_u(unsigned long long v) { printf("%llu\n", v); }
#define put_int(v) _Generic((v), unsigned long: put_u, unsigned long long: put_u, unsigned int: put_u, \
                              default: put_s)(v)
static void put_bool(int v) { puts(v ? "true" : "false"); }
static void put_hex(unsigned long long v) { printf("0x%llx\n", v); }
static void put_float(double v)
{
    unsigned long long b;
    memcpy(&b, &v, sizeof b);
    printf("f64:%016llx\n", b);
}
static unsigned long long f32_bits(float f) { uint32_t b; memcpy(&b, &f, sizeof b); return b; }
"""

_PUT = {"int": "put_int({})", "bool": "put_bool(({}) != 0)", "hex": "put_hex((unsigned long long)({}))",
        "float": "put_float((double)({}))"}


def printed(answer: Sequence[object]) -> str:
    """The text the check program prints for ``answer``: one element a line, floats by bits."""
    lines = []
    for value in answer:
        if isinstance(value, bool):
            lines.append("true" if value else "false")
        elif isinstance(value, float):
            lines.append(f"f64:{float_bits(value):016x}")
        else:
            lines.append(str(value))
    return "".join(line + "\n" for line in lines)


def c_statements(question: str) -> str:
    """The C of a question: its lines, without the English ones (a question ending in '?')."""
    return "\n".join(line for line in question.splitlines() if not line.rstrip().endswith("?"))


def _fields_as_written(p: Params, template: Template) -> list[str]:
    """Fields whose text is itself the C expression (``sizeof(struct A)``, ``v.b[0]``)."""
    return [f.what for f in template.fields(p)]


_W = Callable[[Params], list[str]]


def _fixed(*expressions: str) -> _W:
    return lambda _p: list(expressions)


#: Per template, the C expression of each answer field, in order.
EXPRESSIONS: dict[str, _W] = {
    # integers
    "negative_as_unsigned": _fixed("u", "u"),
    "unsigned_difference": _fixed("d", "gt", "e"),
    "shift_signedness": _fixed("s", "u"),
    "negate_minimum": _fixed("y", "y == x", "v", "v == z"),
    "signed_add_overflow": _fixed("s", "smaller"),
    "short_product": _fixed("p", "q", "(p < 0) == (q < 0)"),
    "char_signedness": _fixed("c", "c_eq", "d_eq"),
    "mixed_sign_compare": lambda p: ["lt", "ua" if p["a"] < 0 else "ub", "lt_long"],
    "signed_division": _fixed("q", "r"),
    "sign_extension": lambda p: [f"({c_int(p['dst'], False)})t", "z", "t"],
    "narrowing_cast": _fixed("y", "(uint16_t)y", "same_sign"),
    "midpoint_overflow": _fixed("mid1", "mid2"),
    # the starter level
    "starter_mask_low_nibble": _fixed("y"),
    "starter_shift_left_digit": _fixed("y"),
    "starter_shift_right_digit": _fixed("y"),
    "starter_complement": _fixed("y"),
    "starter_hex_to_decimal": _fixed("x"),
    # floats
    "f32_associativity": _fixed("left", "right", "exact"),
    "int_to_float": _fixed("back", "err", "f32_bits(f)"),
    "f32_decode": _fixed("bits >> 31", "(bits >> 23) & 0xff", "bits & 0x7fffff", "x"),
    "double_to_float": _fixed("f32_bits(x)", "x", "up"),
    "signed_zero": _fixed("p", "zero", "q"),
    "nan_compare": _fixed("eq", "ne", "lt", "ge"),
    "f32_overflow": _fixed("y", "overflowed", "w"),
    "f32_accumulation": _fixed("acc", "over"),
    "float_to_int": _fixed("t", "f", "r", "e"),
    "subnormal_halving": _fixed("x", "y", "ybits"),
    # bits
    "popcount_negative": _fixed("__builtin_popcountll(u)", "u"),
    "lowest_set_bit": _fixed("low", "rest", "tz"),
    "rotate_left": _fixed("r", "s"),
    "byte_order": _fixed("p[0]", "p[1]", "p[2]", "p[3]", "h"),
    "bitfield_extract": _fixed("f", "s"),
    "complement_promotion": _fixed("a", "b", "c", "d"),
    # memory: the fields are written as C, except an address, which is the stated base plus
    # the offset the compiler computes
    "array_address": lambda p: [f"{p['base']:#x}UL + (unsigned long)((char *)e - (char *)&a[0][0])",
                                "(char *)e - (char *)&a[0][0]", "e - &a[0][0]"],
}

#: Templates whose every field is written as the C expression it asks for.
AS_WRITTEN = ("struct_reorder", "struct_offsets", "nested_struct", "union_pun")


def expressions(template: Template, params: Params) -> list[str] | None:
    if template.name in AS_WRITTEN:
        return _fields_as_written(params, template)
    if template.name == "pointer_step":  # "the address q", then fields written as C
        return ["(uintptr_t)q", *_fields_as_written(params, template)[1:]]
    chosen = EXPRESSIONS.get(template.name)
    return None if chosen is None else chosen(params)


def check_source(template: Template, params: Params) -> str | None:
    """The check program for one instance, or None when its template is not C code."""
    exprs = expressions(template, params)
    if exprs is None:
        return None
    fields = template.fields(params)
    if len(exprs) != len(fields):
        raise ValueError(f"{template.name}: {len(exprs)} C expressions for {len(fields)} fields")
    body = "\n".join("    " + line for line in c_statements(template.question(params)).splitlines())
    puts = "\n".join("    " + _PUT[f.kind].format(e) + ";" for f, e in zip(fields, exprs, strict=True))
    return f"{PRELUDE}\nint main(void)\n{{\n{body}\n{puts}\n    return 0;\n}}\n"


def run_check(template: Template, params: Params, key: Sequence[object]) -> RunCheck | None:
    """A ``RunCheck`` that passes only when the question's C prints exactly ``key``."""
    source = check_source(template, params)
    return None if source is None else RunCheck(source, frozenset({printed(key)}), runs=1)

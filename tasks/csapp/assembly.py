"""Machine-level templates: a small C function, the x86-64 assembly gcc emits for it, and what it returns.

Each instance is a real program: ``f.c`` is compiled with the image's gcc at the stated ``-O``
level to ``f.s`` (the AT&T text the prompt shows, with bookkeeping directives trimmed), and
``f.s`` itself is assembled and linked with a driver that calls ``f`` and prints what it returns.
The key is that output (``compiled.json``, written at build time). A Python model of the same C,
written apart, is the independent second opinion ``verify csapp`` holds the output to; the wrong
readings are the misreadings of the assembly (a lea scale taken as a shift, ``cmovb`` read as a
signed test, ``sarl`` taken for the whole division, fall-through cases forgotten).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from . import toolchain_results
from .machine import c_div, c_mod, to_signed, to_unsigned
from .template import BuildError, Field, Params, Template, WrongReading, draw, draw_int, require
from .toolchain import Program

if TYPE_CHECKING:
    import numpy as np

Answer = list

#: Directives that say nothing about what the code computes (the alignment directives included,
#: as the prompt says). Section directives are never in this list: ``trim_assembly`` decides them.
_TRIMMED = (".cfi_", ".file", ".ident", ".globl", ".type", ".size", ".p2align", ".balign", ".align", ".LFB",
            ".LFE")

#: Directives that change the section the following lines are assembled into.
_SECTION_DIRECTIVE = re.compile(r"\.(?:text|data|bss|section|pushsection|popsection|previous)(?:\s|$)")

#: (current section, previous section, the .pushsection stack): the assembler's section state.
SectionState = tuple[str, str, tuple[tuple[str, str], ...]]

#: The assembler starts in .text.
_START: SectionState = (".text", ".text", ())


def _after(state: SectionState, directive: str) -> SectionState:
    """The section state after one section directive (GNU as: .section sets .previous's target)."""
    current, previous, stack = state
    word, *rest = directive.split(None, 1)
    name = rest[0].split(",")[0].strip() if rest else current
    if word in (".text", ".data", ".bss"):
        return (word, current, stack)
    if word == ".section":
        return (name, current, stack)
    if word == ".pushsection":
        return (name, current, (*stack, (current, previous)))
    if word == ".popsection":
        return (*stack[-1], stack[:-1]) if stack else state
    return (previous, current, stack)  # .previous


def trim_assembly(text: str) -> str:
    """``gcc -S`` output without debug-frame, symbol-type and alignment directives.

    Section directives stay wherever they change where the following shown lines go (a jump table
    in ``.section .rodata``, then ``.text`` where the code resumes): a run of them is left out only
    when it leaves the assembler's section state as it was at the last line shown (the first
    ``.text``, since the assembler starts there; ``.note.GNU-stack`` at the end, which no shown
    line follows)."""
    kept: list[str] = []
    pending: list[str] = []
    raw = shown = _START
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if _SECTION_DIRECTIVE.match(stripped):
            pending.append(line)
            raw = _after(raw, stripped)
            continue
        if stripped.startswith(_TRIMMED):
            continue
        if raw != shown:
            kept += pending
            shown = raw
        pending = []
        kept.append(line)
    return "\n".join(kept)


def _function(p: Params, signature: Callable[[Params], str], body: Callable[[Params], str]) -> str:
    return f"{signature(p)}\n{{\n{body(p)}\n}}\n"


def _driver(p: Params, signature: Callable[[Params], str], calls: Callable[[Params], Sequence[str]]) -> str:
    unsigned = signature(p).startswith("unsigned")
    fmt, cast = ("%llu", "unsigned long long") if unsigned else ("%lld", "long long")
    lines = [f'    printf("{fmt}\\n", ({cast})f({args}));' for args in calls(p)]
    head = f"#include <stdio.h>\n\n{signature(p)};\n\nint main(void)\n{{\n"
    return head + "\n".join(lines) + "\n    return 0;\n}\n"


def machine_template(*, name: str, opt: str, signature: Callable[[Params], str], body: Callable[[Params], str],
                     calls: Callable[[Params], Sequence[str]], model: Callable[[Params], Answer],
                     wrong: tuple[WrongReading, ...], trap: Callable[[Params, Answer], None],
                     draw_params: Callable[[np.random.Generator], Params], hide_body: bool = False,
                     note: str = "", measure: Callable[[Params], float] | None = None) -> Template:
    """A template whose key is what the compiled ``f`` returns for each call in ``calls``."""
    flags = (opt, "-fwrapv")

    def program(p: Params) -> Program:
        return Program({"f.c": _function(p, signature, body), "main.c": _driver(p, signature, calls)},
                       (("gcc", *flags, "-S", "-o", "f.s", "f.c"), ("gcc", "-O0", "-o", "prog", "main.c", "f.s")),
                       show="f.s")

    def reference(p: Params) -> Answer:
        ran = toolchain_results.outputs(program(p))
        if not ran.built or ran.exit_codes != (0,):
            raise BuildError(f"{name}: the program did not build and run cleanly")
        return [int(line) for line in ran.stdout.split()]

    def question(p: Params) -> str:
        asm = toolchain_results.outputs(program(p)).shown or ""
        shown = (f"{signature(p)};   /* the body is not shown */" if hide_body
                 else _function(p, signature, body).rstrip())
        calls_text = "\n".join(f"  f({args})" for args in calls(p))
        return (f"{shown}\n\n`gcc {' '.join(flags)} -S f.c` (gcc 12.2, x86-64) emits, with the debug-frame, "
                f"symbol and alignment directives left out:\n\n{trim_assembly(asm)}\n\n"
                f"{note}What does each of these calls return?\n{calls_text}")

    def fields(p: Params) -> list[Field]:
        return [Field(f"the value f({args}) returns", "int") for args in calls(p)]

    toolchain_results.register(name, program, draw_params)
    return Template(name=name, category="machine", question=question, fields=fields, reference=reference,
                    wrong=wrong, trap=trap, sample=toolchain_results.pool_sampler(name), independent=model,
                    measure=measure)


def _matches_model(model: Callable[[Params], Answer]) -> Callable[[Params, Answer], None]:
    return lambda p, key: require(key == model(p), "the compiled function must agree with the model of its C")


def _agrees_and(model: Callable[[Params], Answer], holds: Callable[[Params, Answer], bool],
                message: str) -> Callable[[Params, Answer], None]:
    """A trap: the compiled function agrees with ``model``, then ``holds`` (what the draw must set up)."""
    agrees = _matches_model(model)

    def trap(p: Params, key: Answer) -> None:
        agrees(p, key)
        require(holds(p, key), message)

    return trap


# --- lea: scaled index arithmetic that wraps at 32 bits ---------------------------------------


def _lea(p: Params, *, wrap: bool = True, scale_as_shift: bool = False) -> Answer:
    y_term = p["y"] << p["b"] if scale_as_shift else p["y"] * p["b"]
    value = p["x"] * p["a"] + y_term + p["c"]
    return [to_signed(value, 32) if wrap else value]


def _lea_trap(p: Params, key: Answer) -> None:
    _matches_model(_lea)(p, key)
    require(key != _lea(p, wrap=False), "x*a + y*b + c must leave the int range, so the 32-bit lea wraps")


LEA_WRAP = machine_template(
    name="lea_wrap", opt="-O1",
    signature=lambda p: "int f(int x, int y)",
    body=lambda p: f"    return x * {p['a']} + y * {p['b']} + {p['c']};",
    calls=lambda p: [f"{p['x']}, {p['y']}"],
    model=_lea,
    wrong=(WrongReading("ignores the 32-bit wrap of leal/addl", lambda p: _lea(p, wrap=False)),
           WrongReading("reads the lea scale as a shift count", lambda p: _lea(p, scale_as_shift=True))),
    trap=_lea_trap,
    draw_params=lambda rng: {"a": draw(rng, (3, 5, 9)), "b": draw(rng, (2, 4, 8)), "c": draw_int(rng, 1, 999),
                             "x": draw_int(rng, 200_000_000, 2_000_000_000) * draw(rng, (1, -1)),
                             "y": draw_int(rng, 100_000_000, 1_000_000_000) * draw(rng, (1, -1))},
)

# --- cmov after an unsigned comparison ----------------------------------------------------------


def _cmov(p: Params, *, signed: bool = False) -> Answer:
    x, y = p["x"], p["y"]
    less = x < y if signed else x < to_unsigned(y, 64)
    return [to_unsigned(x + p["k"] if less else y - p["k"], 64)]


CMOV_MIXED = machine_template(
    name="cmov_mixed", opt="-O1",
    signature=lambda p: "unsigned long f(unsigned long x, long y)",
    body=lambda p: f"    return x < y ? x + {p['k']} : y - {p['k']};",
    calls=lambda p: [f"{p['x']}UL, {p['y']}L"],
    model=_cmov,
    wrong=(WrongReading("reads the comparison as signed (cmovl, not cmovb)", lambda p: _cmov(p, signed=True)),),
    trap=_agrees_and(_cmov, lambda p, key: p["y"] < 0 <= p["x"], "y must be negative"),
    draw_params=lambda rng: {"x": draw_int(rng, 0, 10**6), "y": -draw_int(rng, 1, 10**6), "k": draw_int(rng, 1, 99)},
)

# --- setcc after the usual arithmetic conversions ------------------------------------------------

_PAIRS = {"short": ("unsigned short", "short"), "char": ("unsigned char", "signed char"), "int": ("unsigned", "int")}


def _setcc(p: Params, *, flipped: bool = False) -> Answer:
    promoted_to_int = p["width"] != "int"  # narrower types become int; int meets unsigned and converts
    signed = promoted_to_int != flipped
    bits = 32
    out = []
    for a, b in p["calls"]:
        out.append(int(a > b) if signed else int(to_unsigned(a, bits) > to_unsigned(b, bits)))
    return out


def _setcc_draw(rng: np.random.Generator) -> Params:
    """int (compared unsigned: mostly 0) as often as the promoted narrow types (signed: always 1),
    so that no constant answers the first call."""
    width = "int" if draw_int(rng, 0, 1) else draw(rng, ("short", "char"))
    top = {"short": 60000, "char": 250, "int": 4_000_000_000}[width]
    low = {"short": -32768, "char": -128, "int": -2**31}[width]
    calls = [[draw_int(rng, 0, top), draw_int(rng, low, -1)] for _ in range(2)]
    return {"width": width, "calls": calls}


SETCC_PROMOTE = machine_template(
    name="setcc_promote", opt="-O1",
    signature=lambda p: f"int f({_PAIRS[p['width']][0]} a, {_PAIRS[p['width']][1]} b)",
    body=lambda p: "    return a > b;",
    calls=lambda p: [f"{a}, {b}" for a, b in p["calls"]],
    model=_setcc,
    wrong=(WrongReading("the other signedness (setg for seta or back)", lambda p: _setcc(p, flipped=True)),),
    trap=_agrees_and(_setcc, lambda p, key: all(b < 0 <= a for a, b in p["calls"]), "every b must be negative"),
    draw_params=_setcc_draw,
)

# --- signed division by a power of two: the bias before the shift ---------------------------


def _div_pow2(p: Params, *, floor: bool = False) -> Answer:
    d = 1 << p["k"]
    return [x // d if floor else c_div(x, d) for x in p["xs"]]


DIV_POW2 = machine_template(
    name="div_pow2", opt="-O2",
    signature=lambda p: f"{p['type']} f({p['type']} x)",
    body=lambda p: f"    return x / {1 << p['k']};",
    calls=lambda p: [str(x) + ("L" if p["type"] == "long" else "") for x in p["xs"]],
    model=_div_pow2,
    wrong=(WrongReading("takes the arithmetic shift alone (floor division)", lambda p: _div_pow2(p, floor=True)),),
    trap=_agrees_and(_div_pow2, lambda p, key: key != _div_pow2(p, floor=True), "a negative x must not be a multiple"),
    draw_params=lambda rng: (lambda k: {"type": draw(rng, ("int", "long")), "k": k, "xs": [
        -(draw_int(rng, 1, 5000) * (1 << k) + draw_int(rng, 1, (1 << k) - 1)), draw_int(rng, 1, 10**6)]})(
        draw_int(rng, 1, 6)),
)

# --- remainder by a constant: multiply-high, and the sign of the dividend ----------------------


def _rem(p: Params, *, python: bool = False) -> Answer:
    return [x % p["d"] if python else c_mod(x, p["d"]) for x in p["xs"]]


REM_CONST = machine_template(
    name="rem_const", opt="-O2",
    signature=lambda p: "int f(int x)",
    body=lambda p: f"    return x % {p['d']};",
    calls=lambda p: [str(x) for x in p["xs"]],
    model=_rem,
    wrong=(WrongReading("a non-negative remainder (Python's %)", lambda p: _rem(p, python=True)),),
    trap=_agrees_and(_rem, lambda p, key: any(k < 0 for k in key), "a remainder must be negative"),
    draw_params=lambda rng: {"d": draw(rng, (3, 5, 6, 7, 10, 11, 12, 13)),
                             "xs": [-draw_int(rng, 1, 10**9), draw_int(rng, 1, 10**9)]},
)

# --- movzbl versus movsbq -------------------------------------------------------------------------


def _extend(p: Params, *, zero_both: bool = False, sign_both: bool = False) -> Answer:
    c = to_signed(p["c"], 8) if sign_both else p["c"]
    s = p["s"] if zero_both else to_signed(p["s"], 8)
    return [c * p["m"] + s]


EXTEND_BYTES = machine_template(
    name="extend_bytes", opt="-O1",
    signature=lambda p: "long f(unsigned char c, signed char s)",
    body=lambda p: f"    return c * {p['m']}L + s;",
    calls=lambda p: [f"(unsigned char){p['c']:#04x}, (signed char){p['s']:#04x}"],
    model=_extend,
    wrong=(WrongReading("zero-extends both bytes", lambda p: _extend(p, zero_both=True)),
           WrongReading("sign-extends both bytes", lambda p: _extend(p, sign_both=True))),
    trap=_agrees_and(_extend, lambda p, key: p["c"] >= 0x80 and p["s"] >= 0x80,
                     "both bytes must have their top bit set"),
    draw_params=lambda rng: {"c": draw_int(rng, 0x80, 0xFF), "s": draw_int(rng, 0x80, 0xFF), "m": draw_int(rng, 2, 40)},
    note="The caller passes the bytes shown in %dil and %sil. ",
)

# --- a loop whose body is hidden: read the guard and the update from the assembly ---------------


def _loop(p: Params, *, extra: int = 0) -> Answer:
    out = []
    for n in p["ns"]:
        r = p["r0"]
        while n > p["lo"]:
            r = to_signed(r * p["m"] + n, 64)
            n -= p["s"]
        for _ in range(extra):
            r = to_signed(r * p["m"] + n, 64)
            n -= p["s"]
        out.append(r)
    return out


def _loop_trap(p: Params, key: Answer) -> None:
    _matches_model(_loop)(p, key)
    require(all(n - p["lo"] > 2 * p["s"] for n in p["ns"]), "every call must run the loop at least twice")


HIDDEN_LOOP = machine_template(
    name="hidden_loop", opt="-O1",
    signature=lambda p: "long f(long n)",
    body=lambda p: (f"    long r = {p['r0']};\n    while (n > {p['lo']}) {{\n        r = r * {p['m']} + n;\n"
                    f"        n -= {p['s']};\n    }}\n    return r;"),
    calls=lambda p: [str(n) for n in p["ns"]],
    model=_loop,
    wrong=(WrongReading("one iteration too many (the guard read as >=, or a do-while)", lambda p: _loop(p, extra=1)),),
    trap=_loop_trap,
    draw_params=lambda rng: (lambda lo, s: {"r0": draw_int(rng, 1, 9), "lo": lo, "m": draw_int(rng, 2, 5), "s": s,
                                            "ns": [lo + draw_int(rng, 2 * s + 1, 6 * s) for _ in range(2)]})(
        draw_int(rng, -5, 20), draw_int(rng, 1, 4)),
    hide_body=True,
    measure=lambda p: sum(-(-(n - p["lo"]) // p["s"]) for n in p["ns"]),  # loop iterations to trace
)

# --- a switch with fall-through, compiled to a jump table --------------------------------------


def _switch(p: Params, *, breaks: bool = False) -> Answer:
    base, r0, k = p["base"], p["r0"], p["k"]
    out = []
    for x in p["xs"]:
        r = r0
        case = x - base
        if case == 0:
            r += k[0]
            if not breaks:
                r *= k[1]
        elif case == 1:
            r *= k[1]
        elif case == 2:
            r -= k[2]
            if not breaks:
                r ^= k[3]
        elif case == 4:
            r ^= k[3]
        elif case == 5:
            r += k[4]
        else:
            r = k[4]
        out.append(r)
    return out


def _switch_body(p: Params) -> str:
    b, k = p["base"], p["k"]
    return (f"    long r = {p['r0']};\n    switch (x) {{\n"
            f"    case {b}:\n        r += {k[0]};\n    case {b + 1}:\n        r *= {k[1]};\n        break;\n"
            f"    case {b + 2}:\n        r -= {k[2]};\n    case {b + 4}:\n        r ^= {k[3]};\n        break;\n"
            f"    case {b + 5}:\n        r += {k[4]};\n        break;\n"
            f"    default:\n        r = {k[4]};\n    }}\n    return r;")


SWITCH_FALLTHROUGH = machine_template(
    name="switch_fallthrough", opt="-O1",
    signature=lambda p: "long f(long x)",
    body=_switch_body,
    calls=lambda p: [f"{x}L" for x in p["xs"]],
    model=_switch,
    wrong=(WrongReading("every case breaks (the fall-through jumps missed)", lambda p: _switch(p, breaks=True)),),
    trap=_agrees_and(_switch, lambda p, key: p["xs"][0] - p["base"] in (0, 2), "the first call must fall through"),
    draw_params=lambda rng: (lambda b: {"base": b, "r0": draw_int(rng, 2, 50),
                                        "k": [draw_int(rng, 1, 90) for _ in range(5)],
                                        "xs": [b + draw(rng, (0, 2)), b + draw(rng, (1, 3, 4, 5)),
                                               b + draw(rng, (-1, 6))]})(
        draw_int(rng, 10, 400)),
)

# --- the seventh and eighth arguments live on the stack ---------------------------------------


def _stack_args(p: Params, *, swap_stack: bool = False, swap_cd: bool = False) -> Answer:
    a, _b, c, d, _e, _g, h, i = p["args"]
    if swap_stack:
        h, i = i, h
    if swap_cd:
        c, d = d, c
    return [p["k1"] * a - h + p["k2"] * i - c]


STACK_ARGS = machine_template(
    name="stack_args", opt="-O1",
    signature=lambda p: "long f(long a, long b, long c, long d, long e, long g, long h, long i)",
    body=lambda p: f"    return {p['k1']} * a - h + {p['k2']} * i - c;",
    calls=lambda p: [", ".join(str(v) for v in p["args"])],
    model=_stack_args,
    wrong=(WrongReading("8(%rsp) read as the eighth argument, 16(%rsp) as the seventh",
                        lambda p: _stack_args(p, swap_stack=True)),
           WrongReading("the third and fourth argument registers swapped (%rcx for %rdx)",
                        lambda p: _stack_args(p, swap_cd=True))),
    trap=_agrees_and(_stack_args, lambda p, key: len(set(p["args"])) == 8, "the arguments must be distinct"),
    draw_params=lambda rng: {"k1": draw_int(rng, 2, 9), "k2": draw_int(rng, 2, 9),
                             "args": [int(v) for v in rng.permutation(90)[:8] + 1]},
    hide_body=True,
)

# --- the high half of a signed 128-bit product ---------------------------------------------------


def _mulhi(p: Params, *, unsigned: bool = False, low: bool = False) -> Answer:
    a, b = p["a"], p["b"]
    if low:
        return [to_signed(a * b, 64)]
    if unsigned:
        return [to_signed((to_unsigned(a, 64) * to_unsigned(b, 64)) >> 64, 64)]
    return [(a * b) >> 64]


MUL_HIGH = machine_template(
    name="mul_high", opt="-O1",
    signature=lambda p: "long f(long a, long b)",
    body=lambda p: "    return (long)(((__int128)a * b) >> 64);",
    calls=lambda p: [f"{p['a']}L, {p['b']}L"],
    model=_mulhi,
    wrong=(WrongReading("the unsigned high half (mulq, not imulq)", lambda p: _mulhi(p, unsigned=True)),
           WrongReading("the low 64 bits of the product", lambda p: _mulhi(p, low=True))),
    trap=_agrees_and(_mulhi, lambda p, key: p["a"] < 0 < p["b"], "a must be negative"),
    draw_params=lambda rng: {"a": -draw_int(rng, 2**40, 2**62), "b": draw_int(rng, 2**30, 2**62)},
)

TEMPLATES: tuple[Template, ...] = (LEA_WRAP, CMOV_MIXED, SETCC_PROMOTE, DIV_POW2, REM_CONST, EXTEND_BYTES,
                                   HIDDEN_LOOP, SWITCH_FALLTHROUGH, STACK_ARGS, MUL_HIGH)

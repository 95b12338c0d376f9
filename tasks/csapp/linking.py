"""Linking templates: strong, weak and common symbols, ``static`` and ``extern``, archives.

Each instance is two or more C files and the exact commands that build them. At build time the
image's gcc, ld and ar run those commands and the program runs (``compiled.json``); the key is
whether the link succeeded and what the program printed. A Python model of the linker's rules
(symbol resolution, the archive scan, little-endian storage), written apart, is the independent
second opinion ``verify csapp`` holds the key to. The wrong readings are the rules people
remember: ``-fcommon`` as the default (it is not since gcc 10), a ``static`` that is shared,
a weak definition that wins because it is local, archives scanned as if order did not matter.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from . import toolchain_results
from .machine import hex_string, to_signed, to_unsigned
from .size import param_size
from .template import BuildError, Field, Params, Template, WrongReading, draw, draw_int, require
from .toolchain import Outputs, Program

if TYPE_CHECKING:
    import numpy as np

Answer = list
Files = dict[str, str]
Steps = tuple[tuple[str, ...], ...]


def _objects(*names: str, flags: Sequence[str] = ()) -> Steps:
    """One ``gcc -c`` per source file."""
    return tuple(("gcc", *flags, "-c", name) for name in names)


def _link(*inputs: str) -> tuple[str, ...]:
    return ("gcc", "-o", "prog", *inputs)


def linking_template(*, name: str, files: Callable[[Params], Files], steps: Callable[[Params], Steps],
                     fields: Sequence[Field], read: Callable[[Outputs], Answer], model: Callable[[Params], Answer],
                     wrong: tuple[WrongReading, ...], trap: Callable[[Params, Answer], None],
                     draw_params: Callable[[np.random.Generator], Params], ask: str, facts: str = "",
                     confirm: Steps = ()) -> Template:
    """A template keyed by building ``files`` with ``steps`` (gcc/ar, then the link) and running it.

    ``facts`` states what the key depends on beyond the files, the commands and the linker's rules
    the question is about (a compiler default, where gcc places the variables); ``confirm`` are
    build steps, not shown, run after the link to check those facts on the files the build wrote
    (they only read them): when one fails, the instance is refused, never keyed."""

    def program(p: Params) -> Program:
        return Program(files(p), steps(p) + confirm)

    def reference(p: Params) -> Answer:
        ran = toolchain_results.outputs(program(p))
        link = len(steps(p)) - 1
        if ran.failed_step is not None and ran.failed_step > link:
            raise BuildError(f"{name}: the build contradicts what the prompt states: {confirm!r}")
        if ran.failed_step is not None and ran.failed_step < link:
            raise BuildError(f"{name}: build step {ran.failed_step} failed before the link")
        return read(ran)

    def question(p: Params) -> str:
        shown = "\n\n".join(f"/* {n} */\n{text.rstrip()}" for n, text in files(p).items())
        commands = "\n".join("$ " + " ".join(step) for step in steps(p))
        asked = f"{facts} {ask}" if facts else ask
        return (f"{shown}\n\nBuilt with gcc 12.2 and GNU ld on x86-64 Linux, in this order:\n{commands}\n"
                f"$ ./prog\n\n{asked}")

    def trap_and_model(p: Params, key: Answer) -> None:
        require(key == model(p), "the toolchain's result must agree with the model of the linker")
        trap(p, key)

    toolchain_results.register(name, program, draw_params)
    return Template(name=name, category="linking", question=question, fields=lambda _p: fields,
                    reference=reference, wrong=wrong, trap=trap_and_model, sample=toolchain_results.pool_sampler(name),
                    independent=model, measure=_measure)


def _measure(p: Params) -> float:
    """The size of the parameters, a definition left tentative (None) counting as nothing."""
    return param_size({k: v for k, v in p.items() if v is not None})


def _printed_ints(ran: Outputs) -> Answer:
    if not ran.built or ran.exit_codes != (0,):
        raise BuildError("the program did not build and run cleanly")
    return [int(v) for v in ran.stdout.split()]


def _link_and_value(ran: Outputs) -> Answer:
    """[links?, the number printed or 0]; a failure anywhere but the link step is the builder's."""
    if not ran.built:
        return [False, 0]
    if ran.exit_codes != (0,):
        raise BuildError("the program linked but did not run cleanly")
    return [True, int(ran.stdout)]


_LINKS = Field("whether the link succeeds", "bool")
_VALUE = Field("the number ./prog prints (0 if the link fails)", "int")

# --- a common symbol resolved to a smaller strong definition: the write spills over -------------


def _overwrite(p: Params, *, separate: bool = False, truncates: bool = False) -> Answer:
    if separate:
        return [p["x"], p["y"]]
    if truncates:
        return [to_signed(p["v"], 16), p["y"]]
    v = to_unsigned(p["v"], 32)
    return [to_signed(v & 0xFFFF, 16), to_signed(v >> 16, 16)]


#: COMMON_OVERWRITE's key depends on where a.c's variables lie; the prompt states it, and the build
#: checks it (``_ADJACENT``).
LAYOUT_STATED = ("at its default -O0 gcc keeps a file's globals in source order, so a.o's .data holds x and "
                 "then y, each 2 bytes and 2-byte aligned, and the link keeps them together: in prog, y's "
                 "address is x's address plus 2.")

#: The check of COMMON_OVERWRITE's stated layout, on the linked program: y's address is x's plus 2.
_ADJACENT = ("x=$(nm prog | sed -n 's/^\\([0-9a-f]*\\) [dD] x$/\\1/p'); "
             "y=$(nm prog | sed -n 's/^\\([0-9a-f]*\\) [dD] y$/\\1/p'); "
             'test -n "$x" && test -n "$y" && test $((0x$y - 0x$x)) -eq 2')

COMMON_OVERWRITE = linking_template(
    name="common_overwrite",
    files=lambda p: {
        "a.c": (f"#include <stdio.h>\n\nvoid g(void);\nshort x = {p['x']};\nshort y = {p['y']};\n\n"
                'int main(void)\n{\n    g();\n    printf("%d %d\\n", x, y);\n    return 0;\n}\n'),
        "b.c": f"int x;\n\nvoid g(void)\n{{\n    x = {p['v']};\n}}\n",
    },
    steps=lambda p: (("gcc", "-c", "a.c"), ("gcc", "-fcommon", "-c", "b.c"), _link("a.o", "b.o")),
    fields=(Field("the value of x printed", "int"), Field("the value of y printed", "int")),
    read=_printed_ints, model=_overwrite,
    wrong=(WrongReading("b.c's x is a variable of its own", lambda p: _overwrite(p, separate=True)),
           WrongReading("the int store is cut to the short", lambda p: _overwrite(p, truncates=True))),
    trap=lambda p, key: require(key[1] != p["y"], "the 4-byte store must change y"),
    draw_params=lambda rng: {"x": draw_int(rng, 1, 999), "y": draw_int(rng, 1, 999),
                             "v": draw_int(rng, 70_000, 2_000_000_000) * draw(rng, (1, -1))},
    ask="What does ./prog print?",
    facts=f"Where the variables lie: {LAYOUT_STATED}",
    confirm=(("sh", "-c", _ADJACENT),),
)

# --- static: one name, two variables ---------------------------------------------------------------


def _static_var(p: Params, *, shared: bool = False) -> Answer:
    if shared:
        value = p["c"] + 2 * p["b"] + p["d"]
        return [value, value]
    return [p["c"] + p["d"], p["a"] + 2 * p["b"]]


STATIC_VARIABLE = linking_template(
    name="static_variable",
    files=lambda p: {
        "a.c": (f"static int count = {p['a']};\n\nvoid bump(void)\n{{\n    count += {p['b']};\n}}\n\n"
                "int local(void)\n{\n    return count;\n}\n"),
        "b.c": (f"#include <stdio.h>\n\nint count = {p['c']};\nvoid bump(void);\nint local(void);\n\n"
                f"int main(void)\n{{\n    bump();\n    bump();\n    count += {p['d']};\n"
                '    printf("%d %d\\n", count, local());\n    return 0;\n}\n'),
    },
    steps=lambda p: (*_objects("a.c", "b.c"), _link("a.o", "b.o")),
    fields=(Field("the first number printed (count in main)", "int"),
            Field("the second number printed (local())", "int")),
    read=_printed_ints, model=_static_var,
    wrong=(WrongReading("one count shared by both files", lambda p: _static_var(p, shared=True)),),
    trap=lambda p, key: require(key[0] != key[1], "the two counts must differ"),
    draw_params=lambda rng: {k: draw_int(rng, 1, 500) for k in "abcd"},
    ask="What does ./prog print?",
)

# --- tentative definitions: -fno-common is gcc's default since version 10 -------------------------


def _tentative(p: Params, *, common: bool | None = None) -> Answer:
    common = p["common"] if common is None else common
    inits = [p["init_a"], p["init_b"]]
    strong = sum(v is not None for v in inits)
    if strong == 2 or (strong == 1 and not common) or (strong == 0 and not common):
        return [False, 0]
    start = next((v for v in inits if v is not None), 0)
    return [True, start + p["k"]]


def _decl(value: int | None) -> str:
    return "int n;" if value is None else f"int n = {value};"


TENTATIVE_DEFINITIONS = linking_template(
    name="tentative_definitions",
    files=lambda p: {
        "a.c": (f"#include <stdio.h>\n\n{_decl(p['init_a'])}\nvoid set(void);\n\n"
                'int main(void)\n{\n    set();\n    printf("%d\\n", n);\n    return 0;\n}\n'),
        "b.c": f"{_decl(p['init_b'])}\n\nvoid set(void)\n{{\n    n += {p['k']};\n}}\n",
    },
    steps=lambda p: (*_objects("a.c", "b.c", flags=("-fcommon",) if p["common"] else ()), _link("a.o", "b.o")),
    fields=(_LINKS, _VALUE), read=_link_and_value, model=_tentative,
    wrong=(WrongReading("the other common-symbol rule (-fcommon and -fno-common swapped)",
                        lambda p: _tentative(p, common=not p["common"])),),
    trap=lambda p, key: require(p["init_a"] is None or p["init_b"] is None, "one definition must be tentative"),
    draw_params=lambda rng: {"common": draw(rng, (False, True)), "k": draw_int(rng, 1, 99),
                             **draw(rng, ({"init_a": None, "init_b": None},
                                          {"init_a": draw_int(rng, 1, 99), "init_b": None},
                                          {"init_a": None, "init_b": draw_int(rng, 1, 99)}))},
    ask="Does the link succeed, and if it does, what does ./prog print?",
    facts="gcc 12 compiles with -fno-common unless -fcommon is given.",
)

# --- a double read through an extern long ------------------------------------------------------------


def _f64_bits(value: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", value))[0]


def _mismatch(p: Params, *, converts: bool = False) -> Answer:
    if converts:
        return [hex_string(to_unsigned(int(p["d"]), 64))]
    return [hex_string(_f64_bits(p["d"]))]


EXTERN_MISMATCH = linking_template(
    name="extern_mismatch",
    files=lambda p: {
        "a.c": f"double v = {p['d']!r};\n",
        "b.c": ('#include <stdio.h>\n\nextern long v;\n\nint main(void)\n{\n'
                '    printf("0x%lx\\n", (unsigned long)v);\n    return 0;\n}\n'),
    },
    steps=lambda p: (*_objects("a.c", "b.c"), _link("a.o", "b.o")),
    fields=(Field("the number printed, as hex", "hex"),),
    read=lambda ran: [hex_string(int(_printed_text(ran), 16))], model=_mismatch,
    wrong=(WrongReading("the double converted to long", lambda p: _mismatch(p, converts=True)),),
    trap=lambda p, key: require(int(p["d"]) != 0, "the double must not truncate to 0"),
    draw_params=lambda rng: {"d": draw_int(rng, 1, 10**6) / draw(rng, (1, 2, 4, 8, 16))},
    ask="The linker resolves b.c's v to a.c's definition. What does ./prog print?",
)


def _printed_text(ran: Outputs) -> str:
    if not ran.built or ran.exit_codes != (0,):
        raise BuildError("the program did not build and run cleanly")
    return ran.stdout.strip()


# --- weak and strong functions --------------------------------------------------------------------


def _weak(p: Params, *, local: bool = False, last: bool = False) -> Answer:
    if local:
        return [p["ka"], p["ha"]]
    if last:
        return [p["kb"], p["hb"]]
    return [p["kb"], p["ha"]]


WEAK_FUNCTION = linking_template(
    name="weak_function",
    files=lambda p: {
        "a.c": (f"#include <stdio.h>\n\n__attribute__((weak)) int k(void) {{ return {p['ka']}; }}\n"
                f"int h(void) {{ return {p['ha']}; }}\n\n"
                'int main(void)\n{\n    printf("%d %d\\n", k(), h());\n    return 0;\n}\n'),
        "b.c": (f"int k(void) {{ return {p['kb']}; }}\n"
                f"__attribute__((weak)) int h(void) {{ return {p['hb']}; }}\n"),
    },
    steps=lambda p: (*_objects("a.c", "b.c"), _link(*p["order"])),
    fields=(Field("the value of k() printed", "int"), Field("the value of h() printed", "int")),
    read=_printed_ints, model=_weak,
    wrong=(WrongReading("the definition in main's own file", lambda p: _weak(p, local=True)),
           WrongReading("the definition in b.c", lambda p: _weak(p, last=True))),
    trap=lambda p, key: require(len({p["ka"], p["kb"], p["ha"], p["hb"]}) == 4, "the four values must differ"),
    draw_params=lambda rng: {**dict(zip(("ka", "kb", "ha", "hb"), (int(v) + 1 for v in rng.permutation(99)[:4]),
                                        strict=True)),
                             "order": draw(rng, (["a.o", "b.o"], ["b.o", "a.o"]))},
    ask="What does ./prog print?",
)

# --- a static function and a global one with the same name ------------------------------------------


def _static_fn(p: Params, *, one: bool = False) -> Answer:
    return [p["b"], p["b"] if one else p["a"]]


STATIC_FUNCTION = linking_template(
    name="static_function",
    files=lambda p: {
        "a.c": (f"static int h(void)\n{{\n    return {p['a']};\n}}\n\n"
                "int via_a(void)\n{\n    return h();\n}\n"),
        "b.c": (f"#include <stdio.h>\n\nint h(void)\n{{\n    return {p['b']};\n}}\n\nint via_a(void);\n\n"
                'int main(void)\n{\n    printf("%d %d\\n", h(), via_a());\n    return 0;\n}\n'),
    },
    steps=lambda p: (*_objects("a.c", "b.c", flags=("-O1",)), _link("a.o", "b.o")),
    fields=(Field("the value of h() printed", "int"), Field("the value of via_a() printed", "int")),
    read=_printed_ints, model=_static_fn,
    wrong=(WrongReading("one h for the whole program", lambda p: _static_fn(p, one=True)),),
    trap=lambda p, key: require(p["a"] != p["b"], "the two h must return different values"),
    draw_params=lambda rng: {"a": draw_int(rng, 1, 500), "b": draw_int(rng, 501, 999)},
    ask="What does ./prog print?",
)

# --- archives are scanned once, left to right ------------------------------------------------------


def _archive_scan(p: Params, *, unordered: bool = False) -> Answer:
    """ld's rule: an object is linked whole; an archive member is pulled only while it defines a
    symbol that is undefined at that point of the scan; nothing is revisited."""
    defines = {"main.o": {"main"} | ({"second"} if p["main_second"] is not None else set()),
               "libone.a": {"first"}, "libtwo.a": {"second"}}
    needs = {"main.o": {"first"}, "libone.a": {"second"}, "libtwo.a": set()}
    if unordered:
        if p["main_second"] is not None and "libtwo.a" in p["order"]:
            return [False, 0]  # read as: every definition is linked, so second is defined twice
        second = p["two"] if p["main_second"] is None else p["main_second"]
        return [True, p["one"] + second]
    defined: set[str] = set()
    undefined: set[str] = set()
    linked: list[str] = []
    for item in p["order"]:
        if item.endswith(".a") and not (defines[item] & undefined):
            continue
        linked.append(item)
        defined |= defines[item]
        undefined = (undefined | needs[item]) - defined
    if undefined:
        return [False, 0]
    second = p["main_second"] if p["main_second"] is not None else p["two"]
    return [True, p["one"] + second]


def _archive_files(p: Params) -> Files:
    extra = "" if p["main_second"] is None else f"int second(void)\n{{\n    return {p['main_second']};\n}}\n\n"
    return {
        "main.c": (f"#include <stdio.h>\n\nint first(void);\n\n{extra}"
                   'int main(void)\n{\n    printf("%d\\n", first());\n    return 0;\n}\n'),
        "one.c": f"int second(void);\n\nint first(void)\n{{\n    return {p['one']} + second();\n}}\n",
        "two.c": f"int second(void)\n{{\n    return {p['two']};\n}}\n",
    }


ARCHIVE_ORDER = linking_template(
    name="archive_order",
    files=_archive_files,
    steps=lambda p: (*_objects("main.c", "one.c", "two.c"),
                     ("ar", "rcs", "libone.a", "one.o"), ("ar", "rcs", "libtwo.a", "two.o"), _link(*p["order"])),
    fields=(_LINKS, _VALUE), read=_link_and_value, model=_archive_scan,
    wrong=(WrongReading("archive order does not matter and every member is linked",
                        lambda p: _archive_scan(p, unordered=True)),),
    trap=lambda p, key: require(key != _archive_scan(p, unordered=True), "the scan order must decide the outcome"),
    draw_params=lambda rng: {"one": draw_int(rng, 1, 99), "two": draw_int(rng, 100, 199),
                             "main_second": draw(rng, (None, None, draw_int(rng, 200, 299))),
                             "order": [str(s) for s in rng.permutation(["main.o", "libone.a", "libtwo.a"])]},
    ask="Does the link succeed, and if it does, what does ./prog print?",
)

# --- an array defined, a pointer declared --------------------------------------------------------------


def _array_pointer(p: Params, *, big_endian: bool = False, first_char: bool = False) -> Answer:
    data = p["s"].encode()[:8]
    if first_char:
        return [hex_string(data[0])]
    return [hex_string(int.from_bytes(data, "big" if big_endian else "little"))]


ARRAY_POINTER = linking_template(
    name="array_pointer",
    files=lambda p: {
        "a.c": f'char s[] = "{p["s"]}";\n',
        "b.c": ('#include <stdio.h>\n\nextern char *s;\n\nint main(void)\n{\n'
                '    printf("%p\\n", (void *)s);\n    return 0;\n}\n'),
    },
    steps=lambda p: (*_objects("a.c", "b.c"), _link("a.o", "b.o")),
    fields=(Field("the pointer value printed, as hex", "hex"),),
    read=lambda ran: [hex_string(int(_printed_text(ran), 16))], model=_array_pointer,
    wrong=(WrongReading("the eight bytes read big-endian", lambda p: _array_pointer(p, big_endian=True)),
           WrongReading("the first character", lambda p: _array_pointer(p, first_char=True))),
    trap=lambda p, key: require(len(p["s"]) >= 8 and p["s"].isalnum(), "s must hold at least 8 plain characters"),
    draw_params=lambda rng: {"s": "".join(draw(rng, "abcdefghijklmnopqrstuvwxyz0123456789")
                                          for _ in range(draw_int(rng, 8, 12)))},
    ask="What does ./prog print (it does not dereference s)?",
)

TEMPLATES: tuple[Template, ...] = (COMMON_OVERWRITE, STATIC_VARIABLE, TENTATIVE_DEFINITIONS, EXTERN_MISMATCH,
                                   WEAK_FUNCTION, STATIC_FUNCTION, ARCHIVE_ORDER, ARRAY_POINTER)

"""Memory-layout templates: struct padding, offsets, arrays, pointer steps, nesting, unions.

Every size and offset comes from ``machine.struct_layout`` / ``union_layout`` applied to the
member types, so a reordered or resized struct can never keep a stale constant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .machine import CType, Layout, ctype, f32, f32_bits, hex_string, struct_layout, to_bytes_le, union_layout
from .template import Field, Params, Template, WrongReading, c_float, draw, draw_int, fixed, require

if TYPE_CHECKING:
    import numpy as np

SCALAR_CHOICES = ("char", "short", "int", "long", "float", "double", "char*")


def declare(name: str, spec: str) -> str:
    """A C member declaration: ``int count``, ``char *p``, ``char name[5]``."""
    if spec.endswith("]"):
        elem, _, count = spec.partition("[")
        return f"{elem} {name}[{count}"
    if spec.endswith("*"):
        return f"{spec[:-1]} *{name}"
    return f"{spec} {name}"


def struct_source(tag: str, names: list[str], specs: list[str]) -> str:
    body = "".join(f"    {declare(n, s)};\n" for n, s in zip(names, specs, strict=True))
    return f"struct {tag} {{\n{body}}};"


def _i386(t: CType) -> CType:
    """The i386 System V alignment, where 8-byte scalars are only 4-aligned inside structs."""
    return CType(t.name, t.size, min(t.align, 4))


def _end(layout: Layout, types: list[CType]) -> int:
    """One past the last member's last byte: the size without tail padding."""
    return layout.offsets[-1] + types[-1].size


# --- reordering members changes the size --------------------------------------------------------


def _names(count: int) -> list[str]:
    return [chr(ord("a") + i) for i in range(count)]


def _reorder(p: Params, packed: bool = False, no_tail: bool = False) -> list:
    first = [ctype(s) for s in p["members"]]
    second = [first[i] for i in p["order"]]
    a, b = struct_layout(first, packed=packed), struct_layout(second, packed=packed)
    size_a, size_b = (_end(a, first), _end(b, second)) if no_tail else (a.size, b.size)
    return [size_a, size_b, a.offsets[-1], b.offsets[-1]]


def _reorder_question(p: Params) -> str:
    names = _names(len(p["members"]))
    specs = p["members"]
    order = p["order"]
    return (
        struct_source("A", names, specs) + "\n"
        + struct_source("B", [names[i] for i in order], [specs[i] for i in order])
    )


def _sample_reorder(rng: np.random.Generator) -> Params:
    members = [draw(rng, SCALAR_CHOICES) for _ in range(draw_int(rng, 3, 5))]
    order = sorted(range(len(members)), key=lambda i: -ctype(members[i]).align)
    return {"members": members, "order": order}


STRUCT_REORDER = Template(
    name="struct_reorder",
    category="memory",
    question=_reorder_question,
    fields=lambda p: (
        Field("sizeof(struct A)", "int"),
        Field("sizeof(struct B)", "int"),
        Field(f"offsetof(struct A, {_names(len(p['members']))[-1]})", "int"),
        Field(f"offsetof(struct B, {_names(len(p['members']))[p['order'][-1]]})", "int"),
    ),
    reference=_reorder,
    wrong=(
        WrongReading("no padding (packed)", lambda p: _reorder(p, packed=True)),
        WrongReading("no tail padding", lambda p: _reorder(p, no_tail=True)),
    ),
    trap=lambda p, key: require(
        key[0] != key[1] and sum(ctype(s).size for s in p["members"]) < key[0],
        "the first order must be padded and the second order smaller",
    ),
    sample=_sample_reorder,
)

# --- offsets of a mixed struct ---------------------------------------------------------------


def _asked(p: Params) -> list[int]:
    """The members whose offsets are asked, in the order asked (``ask``; all, in order, if absent)."""
    return p.get("ask", list(range(len(p["members"]))))


def _offsets(p: Params, packed: bool = False, i386: bool = False) -> list:
    types = [ctype(spec) for _, spec in p["members"]]
    if i386:
        types = [_i386(t) for t in types]
    layout = struct_layout(types, packed=packed)
    return [*(layout.offsets[i] for i in _asked(p)), layout.size]


def _sample_offsets(rng: np.random.Generator) -> Params:
    count = draw_int(rng, 4, 6)
    specs = [draw(rng, (*SCALAR_CHOICES, f"char[{draw_int(rng, 2, 7)}]", f"short[{draw_int(rng, 2, 3)}]"))
             for _ in range(count)]
    # asked in a shuffled order: the first member's offset, always 0, is not always the first field
    return {"tag": "rec", "members": [[f"m{i}", spec] for i, spec in enumerate(specs)],
            "ask": [int(i) for i in rng.permutation(count)]}


STRUCT_OFFSETS = Template(
    name="struct_offsets",
    category="memory",
    question=lambda p: struct_source(p["tag"], [n for n, _ in p["members"]], [s for _, s in p["members"]]),
    fields=lambda p: (
        *(Field(f"offsetof(struct {p['tag']}, {p['members'][i][0]})", "int") for i in _asked(p)),
        Field(f"sizeof(struct {p['tag']})", "int"),
    ),
    reference=_offsets,
    wrong=(
        WrongReading("no padding (packed)", lambda p: _offsets(p, packed=True)),
        WrongReading("8-byte members only 4-aligned, as on i386", lambda p: _offsets(p, i386=True)),
    ),
    trap=lambda p, key: require(key != _offsets(p, packed=True), "the struct must contain padding"),
    sample=_sample_offsets,
)

# --- addressing a 2-D array -----------------------------------------------------------------------


def _element(p: Params, column_major: bool = False, bytes_as_elements: bool = False,
             rows_stride: bool = False) -> list:
    size = 1 if bytes_as_elements else ctype(p["elem"]).size
    i, j = p["i"], p["j"]
    index = j * p["rows"] + i if column_major else i * p["rows"] + j if rows_stride else i * p["cols"] + j
    return [hex_string(p["base"] + index * size), index * size, index]


def _sample_element(rng: np.random.Generator) -> Params:
    rows, cols = draw_int(rng, 2, 16), draw_int(rng, 2, 16)
    return {"elem": draw(rng, ("short", "int", "long", "double")), "rows": rows, "cols": cols,
            "base": 0x600000 + 16 * draw_int(rng, 0, 4095),
            "i": draw_int(rng, 0, rows - 1), "j": draw_int(rng, 0, cols - 1)}


ARRAY_ADDRESS = Template(
    name="array_address",
    category="memory",
    question=lambda p: (
        f"{p['elem']} a[{p['rows']}][{p['cols']}];   /* &a[0][0] == (void *){hex(p['base'])} */\n"
        f"{p['elem']} *e = &a[{p['i']}][{p['j']}];"
    ),
    fields=fixed(Field("the address e", "hex"), Field("(char *)e - (char *)&a[0][0]", "int"),
                 Field("e - &a[0][0]", "int")),
    reference=_element,
    wrong=(
        WrongReading("column-major layout", lambda p: _element(p, column_major=True)),
        WrongReading("pointer arithmetic counts bytes", lambda p: _element(p, bytes_as_elements=True)),
        WrongReading("row stride taken from the row count", lambda p: _element(p, rows_stride=True)),
    ),
    trap=lambda p, key: require(0 <= p["i"] < p["rows"] and 0 <= p["j"] < p["cols"] and p["rows"] != p["cols"],
                                "the element must be inside a non-square array"),
    sample=_sample_element,
)

# --- stepping a pointer to a struct ---------------------------------------------------------------


def _step(p: Params, no_tail: bool = False, bytes_step: bool = False) -> list:
    types = [ctype(s) for s in p["members"]]
    layout = struct_layout(types)
    size = 1 if bytes_step else _end(layout, types) if no_tail else layout.size
    k = p["k"]
    return [hex_string(p["base"] + k * size), k * size, k, k * size + layout.offsets[-1]]


def _has_tail_padding(specs: list[str]) -> bool:
    types = [ctype(s) for s in specs]
    layout = struct_layout(types)
    return layout.size > _end(layout, types)


def _sample_step(rng: np.random.Generator) -> Params:
    return {"members": [draw(rng, SCALAR_CHOICES) for _ in range(draw_int(rng, 2, 4))],
            "base": 0x7FFC0000 + 16 * draw_int(rng, 0, 4095), "k": draw_int(rng, 2, 9)}


def _step_question(p: Params) -> str:
    names = [f"f{i}" for i in range(len(p["members"]))]
    return (
        struct_source("pt", names, p["members"]) + "\n"
        f"struct pt *p = (struct pt *){hex(p['base'])};\n"
        f"struct pt *q = p + {p['k']};"
    )


POINTER_STEP = Template(
    name="pointer_step",
    category="memory",
    question=_step_question,
    fields=lambda p: (
        Field("the address q", "hex"),
        Field("(char *)q - (char *)p", "int"),
        Field("q - p", "int"),
        Field(f"(char *)&q->f{len(p['members']) - 1} - (char *)p", "int"),
    ),
    reference=_step,
    wrong=(
        WrongReading("sizeof has no tail padding", lambda p: _step(p, no_tail=True)),
        WrongReading("p + k adds k bytes", lambda p: _step(p, bytes_step=True)),
    ),
    trap=lambda p, key: require(_has_tail_padding(p["members"]), "the struct must end in tail padding"),
    sample=_sample_step,
)

# --- a struct nested in a struct --------------------------------------------------------------


def _nested(p: Params, packed: bool = False, inner_align8: bool = False) -> list:
    inner_types = [ctype(s) for s in p["inner"]]
    inner = struct_layout(inner_types, packed=packed)
    inner_type = inner.as_type("struct in")
    if inner_align8:
        inner_type = CType("struct in", -(-inner.size // 8) * 8, 8)
    outer_types = [inner_type if s == "struct in" else ctype(s) for s in p["outer"]]
    outer = struct_layout(outer_types, packed=packed)
    at = p["outer"].index("struct in")
    return [outer.offsets[at], outer.offsets[at] + inner.offsets[-1], outer.offsets[-1], outer.size]


def _nested_question(p: Params) -> str:
    inner_names = [f"x{i}" for i in range(len(p["inner"]))]
    outer_names = [f"y{i}" for i in range(len(p["outer"]))]
    return struct_source("in", inner_names, p["inner"]) + "\n" + struct_source("out", outer_names, p["outer"])


def _nested_fields(p: Params) -> tuple[Field, ...]:
    at = p["outer"].index("struct in")
    last_outer = len(p["outer"]) - 1
    return (
        Field(f"offsetof(struct out, y{at})", "int"),
        Field(f"offsetof(struct out, y{at}.x{len(p['inner']) - 1})", "int"),
        Field(f"offsetof(struct out, y{last_outer})", "int"),
        Field("sizeof(struct out)", "int"),
    )


def _sample_nested(rng: np.random.Generator) -> Params:
    inner = [draw(rng, ("char", "short", "int")) for _ in range(draw_int(rng, 2, 3))]
    outer = [draw(rng, ("char", "short")), "struct in", draw(rng, ("int", "double", "char*", "long"))]
    return {"inner": inner, "outer": outer}


NESTED_STRUCT = Template(
    name="nested_struct",
    category="memory",
    question=_nested_question,
    fields=_nested_fields,
    reference=_nested,
    wrong=(
        WrongReading("no padding (packed)", lambda p: _nested(p, packed=True)),
        WrongReading("a nested struct is 8-aligned", lambda p: _nested(p, inner_align8=True)),
    ),
    trap=lambda p, key: require(
        p["outer"].count("struct in") == 1 and struct_layout([ctype(s) for s in p["inner"]]).align < 8,
        "one nested struct with an alignment below 8 is needed",
    ),
    sample=_sample_nested,
)

# --- a union: one storage, several readings ------------------------------------------------------

_UNION_MEMBERS = ("float", "int", "char[4]")


def _union(p: Params, big_endian: bool = False, as_struct: bool = False) -> list:
    bits = f32_bits(f32(p["value"]))
    memory = to_bytes_le(bits, 4)
    if big_endian:
        memory.reverse()
    types = [ctype(s) for s in (*_UNION_MEMBERS, f"char[{p['tag']}]")]
    size = struct_layout(types).size if as_struct else union_layout(types).size
    return [hex_string(bits), hex_string(memory[0]), hex_string(memory[3]), size]


UNION_PUN = Template(
    name="union_pun",
    category="memory",
    question=lambda p: (
        "union {\n    float f;\n    uint32_t u;\n    unsigned char b[4];\n"
        f"    char tag[{p['tag']}];\n}} v;\n"
        f"v.f = {c_float(p['value'])};"
    ),
    fields=fixed(Field("v.u", "hex"), Field("v.b[0]", "hex"), Field("v.b[3]", "hex"), Field("sizeof v", "int")),
    reference=_union,
    wrong=(
        WrongReading("big-endian bytes", lambda p: _union(p, big_endian=True)),
        WrongReading("members laid out one after another", lambda p: _union(p, as_struct=True)),
    ),
    trap=lambda p, key: require(key[1] != key[2], "the first and last bytes must differ"),
    sample=lambda rng: {"value": round(float(rng.uniform(-100.0, 100.0)), 1), "tag": draw_int(rng, 1, 12)},
)

TEMPLATES: tuple[Template, ...] = (
    STRUCT_REORDER,
    STRUCT_OFFSETS,
    ARRAY_ADDRESS,
    POINTER_STEP,
    NESTED_STRUCT,
    UNION_PUN,
)

"""Cache templates, all answered by running ``machine.simulate`` (sets, ways, blocks, LRU).

Each trap guards against a question that looks like it tests the cache but does not: a cache big
enough to hold everything makes traversal orders tie, and a trace without a hit or a conflict
miss lets "every access misses" pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from . import cache_independent
from .machine import Access, CacheGeometry, ctype, hex_string, misses, simulate
from .template import Field, Params, Template, WrongReading, draw, draw_int, fixed, require

if TYPE_CHECKING:
    import numpy as np


def geometry(p: Params) -> CacheGeometry:
    return CacheGeometry(sets=p["sets"], ways=p["ways"], block=p["block"])


def describe(g: CacheGeometry) -> str:
    """The cache as the prompts state it; replacement is LRU wherever there is a choice."""
    kind = "direct-mapped" if g.ways == 1 else f"{g.ways}-way set-associative LRU"
    return (f"The data cache is {kind}, with {g.sets} sets and {g.block}-byte blocks ({g.capacity} bytes "
            "in all), and starts empty. Block offset bits are the lowest address bits, the set index "
            "bits come next, and the tag is the rest. Only the memory accesses shown go through it.")


def _addresses(trace: list[int]) -> str:
    return ", ".join(hex(a) for a in trace)


def _reads(p: Params) -> str:
    """The reads of a trace question, after the warm-up reads (``p["warm"]``) if it has them."""
    if not p.get("warm"):
        return f"A program reads one byte at each of these addresses, in this order: {_addresses(p['trace'])}."
    return (f"A program first reads one byte at each of {_addresses(p['warm'])} (in this order; these reads "
            f"are not asked about), then one byte at each of these addresses, in this order: "
            f"{_addresses(p['trace'])}.")


def _asked(p: Params, outcomes: list) -> list:
    """The outcomes of the accesses asked about: those after the warm-up reads."""
    return outcomes[len(p.get("warm", [])):]


def _warm_coin(rng: np.random.Generator, sample: Callable[[], Params]) -> Params:
    """A trace draw whose first asked access hits as often as it misses: the warm-up reads make
    a hit possible there (from an empty cache the first access always misses)."""
    wanted = bool(draw_int(rng, 0, 1))
    for _ in range(60):
        p = sample()
        if _asked(p, simulate(geometry(p), p["warm"] + p["trace"]))[0].hit == wanted:
            break
    return p


# --- row-major versus column-major traversal ----------------------------------------------------


def _traversal_trace(p: Params, column_major: bool) -> list[int]:
    size = ctype(p["elem"]).size
    rows, cols = p["rows"], p["cols"]
    order = ((i, j) for j in range(cols) for i in range(rows)) if column_major else (
        (i, j) for i in range(rows) for j in range(cols))
    return [p["base"] + (i * cols + j) * size for i, j in order]


def _traversal(p: Params, huge: bool = False, all_miss: bool = False) -> list:
    if all_miss:
        return [p["rows"] * p["cols"]] * 2
    g = geometry(p)
    if huge:
        g = CacheGeometry(sets=g.sets * 1024, ways=g.ways, block=g.block)
    return [misses(simulate(g, _traversal_trace(p, column_major=c))) for c in (False, True)]


def _traversal_question(p: Params) -> str:
    e, r, c = p["elem"], p["rows"], p["cols"]
    return (
        f"{e} a[{r}][{c}];   /* &a[0][0] == (void *){hex(p['base'])} */\n"
        f"{e} sum = 0;\n"
        "/* loop R, row-major */\n"
        f"for (int i = 0; i < {r}; i++)\n    for (int j = 0; j < {c}; j++)\n        sum += a[i][j];\n"
        "/* loop C, column-major */\n"
        f"for (int j = 0; j < {c}; j++)\n    for (int i = 0; i < {r}; i++)\n        sum += a[i][j];\n"
        f"{describe(geometry(p))} Each loop is run on its own, from an empty cache; sum and the "
        "loop counters live in registers."
    )


def _traversal_trap(p: Params, key: list) -> None:
    array_bytes = p["rows"] * p["cols"] * ctype(p["elem"]).size
    require(geometry(p).capacity < array_bytes, "the cache must be smaller than the array")
    require(key[0] != key[1], "row-major and column-major must miss a different number of times")


def _sample_traversal(rng: np.random.Generator) -> Params:
    return {"elem": draw(rng, ("int", "double")), "rows": draw(rng, (4, 8, 16)), "cols": draw(rng, (4, 8, 16)),
            "base": 0x1000 * draw_int(rng, 1, 255), "sets": draw(rng, (2, 4, 8)), "ways": draw(rng, (1, 2)),
            "block": draw(rng, (8, 16, 32))}


TRAVERSAL_ORDER = Template(
    name="traversal_order",
    category="cache",
    question=_traversal_question,
    fields=fixed(Field("the number of cache misses of loop R", "int"),
                 Field("the number of cache misses of loop C", "int")),
    reference=_traversal,
    wrong=(
        WrongReading("the cache holds the whole array", lambda p: _traversal(p, huge=True)),
        WrongReading("every access misses", lambda p: _traversal(p, all_miss=True)),
    ),
    trap=_traversal_trap,
    sample=_sample_traversal,
    independent=cache_independent.traversal_order,
)

# --- hits and misses of a short trace -----------------------------------------------------------


def _outcomes(p: Params, all_miss: bool = False, fully_associative: bool = False,
              no_blocks: bool = False) -> list:
    g = geometry(p)
    if fully_associative:
        g = CacheGeometry(sets=1, ways=g.sets * g.ways, block=g.block)
    if no_blocks:
        g = CacheGeometry(sets=g.sets, ways=g.ways, block=1)
    warm = p.get("warm", [])
    hits = [False] * len(p["trace"]) if all_miss else [a.hit for a in _asked(p, simulate(g, warm + p["trace"]))]
    return [*hits, hits.count(False)]


def _outcome_trap(p: Params, key: list) -> None:
    kinds = [a.outcome for a in _asked(p, simulate(geometry(p), p.get("warm", []) + p["trace"]))]
    require("hit" in kinds, "the trace must contain a genuine hit")
    require("conflict" in kinds, "the trace must contain a genuine conflict miss")


def _sample_trace(rng: np.random.Generator) -> Params:
    g = CacheGeometry(sets=draw(rng, (2, 4, 8)), ways=1, block=draw(rng, (16, 32)))
    home = draw_int(rng, 0, g.sets - 1)
    # a few blocks that share one set (conflicts) and one elsewhere (a hit that survives)
    blocks = [home + g.sets * draw_int(rng, 1, 64) for _ in range(2)] + [draw_int(rng, 0, 512)]

    def reads(count: int) -> list[int]:
        return [blocks[draw_int(rng, 0, 2)] * g.block + draw_int(rng, 0, g.block - 1) for _ in range(count)]

    return _warm_coin(rng, lambda: {"sets": g.sets, "ways": g.ways, "block": g.block,
                                    "warm": reads(draw_int(rng, 1, 2)), "trace": reads(draw_int(rng, 6, 10))})


TRACE_OUTCOMES = Template(
    name="trace_outcomes",
    category="cache",
    question=lambda p: f"{_reads(p)}\n{describe(geometry(p))}",
    fields=lambda p: (
        *(Field(f"whether access {i} (address {hex(a)}) hits", "bool") for i, a in enumerate(p["trace"], 1)),
        Field("the total number of misses" + (" of these accesses (the warm-up reads not counted)"
                                              if p.get("warm") else ""), "int"),
    ),
    reference=_outcomes,
    wrong=(
        WrongReading("every access misses", lambda p: _outcomes(p, all_miss=True)),
        WrongReading("the cache is fully associative", lambda p: _outcomes(p, fully_associative=True)),
        WrongReading("blocks are one byte (no spatial locality)", lambda p: _outcomes(p, no_blocks=True)),
    ),
    trap=_outcome_trap,
    sample=_sample_trace,
    independent=cache_independent.trace_outcomes,
)

# --- splitting an address ----------------------------------------------------------------------


def _split(p: Params, lines_as_sets: bool = False, swapped: bool = False) -> list:
    g = geometry(p)
    if lines_as_sets:
        g = CacheGeometry(sets=g.sets * g.ways, ways=1, block=g.block)
    if swapped:
        g = CacheGeometry(sets=g.block, ways=g.ways, block=g.sets)
    tag, index, offset = g.split(p["address"])
    again: list[Access] = simulate(g, [p["address"], p["next"]])
    return [hex_string(tag), index, offset, hex_string(p["address"] - offset), again[1].hit]


def _sample_split(rng: np.random.Generator) -> Params:
    address = draw_int(rng, 0x10000, 0xFFFFFF)
    return {"sets": draw(rng, (16, 32, 64, 128)), "ways": draw(rng, (2, 4, 8)), "block": draw(rng, (16, 32, 64)),
            "address": address, "next": address + draw(rng, (-1, 1)) * draw_int(rng, 1, 48)}


ADDRESS_SPLIT = Template(
    name="address_split",
    category="cache",
    question=lambda p: (f"{describe(geometry(p))}\nA program reads the byte at {hex(p['address'])}, then "
                        f"the byte at {hex(p['next'])}."),
    fields=lambda p: (
        Field(f"the tag of {hex(p['address'])}", "hex"),
        Field(f"the set index of {hex(p['address'])}", "int"),
        Field(f"the block offset of {hex(p['address'])}", "int"),
        Field(f"the address of the first byte of the block holding {hex(p['address'])}", "hex"),
        Field(f"whether the read of {hex(p['next'])} hits", "bool"),
    ),
    reference=_split,
    wrong=(
        WrongReading("index bits counted from the number of lines, not sets",
                     lambda p: _split(p, lines_as_sets=True)),
        WrongReading("offset and index fields swapped", lambda p: _split(p, swapped=True)),
    ),
    trap=lambda p, key: require(p["ways"] > 1 and key[1] != _split(p, lines_as_sets=True)[1],
                                "the set index must differ from the lines-as-sets misreading"),
    sample=_sample_split,
    independent=cache_independent.address_split,
)

# --- more ways than streams, or fewer ------------------------------------------------------------

WAYS = (1, 2, 4)


def _streams_trace(p: Params) -> list[int]:
    size = ctype(p["elem"]).size
    starts = [p["base"] + k * p["stride"] for k in range(3)]
    return [start + i * size for i in range(p["n"]) for start in starts]


def _streams(p: Params, ways_fix_all: bool = False, fits: bool = False) -> list:
    trace = _streams_trace(p)
    counts = [
        misses(simulate(CacheGeometry(sets=p["capacity"] // (p["block"] * w), ways=w, block=p["block"]), trace))
        for w in WAYS
    ]
    compulsory = len({a // p["block"] for a in trace})
    if fits:
        return [compulsory] * len(WAYS)
    if ways_fix_all:
        return [counts[0]] + [compulsory] * (len(WAYS) - 1)
    return counts


def _streams_question(p: Params) -> str:
    e, n = p["elem"], p["n"]
    addrs = ", ".join(f"x{k} at {hex(p['base'] + k * p['stride'])}" for k in range(3))
    return (
        f"{e} x0[{n}], x1[{n}], x2[{n}];   /* {addrs} */\n"
        f"for (int i = 0; i < {n}; i++)\n    x2[i] = x0[i] + x1[i];\n"
        "Each iteration reads x0[i], then x1[i], then writes x2[i]; every read and write is one "
        "access, and a write miss allocates its block like a read miss. Run the loop on three "
        f"caches that each hold {p['capacity']} bytes in {p['block']}-byte blocks and start empty: "
        "direct-mapped, 2-way set-associative LRU, and 4-way set-associative LRU. The set index "
        "bits sit just above the block offset bits."
    )


def _sample_streams(rng: np.random.Generator) -> Params:
    capacity = draw(rng, (128, 256, 512))
    return {"elem": draw(rng, ("int", "double")), "n": draw_int(rng, 4, 16), "base": 0x4000 * draw_int(rng, 1, 64),
            "stride": capacity * draw_int(rng, 1, 3), "capacity": capacity, "block": draw(rng, (16, 32))}


STREAMS_ASSOCIATIVITY = Template(
    name="streams_associativity",
    category="cache",
    question=_streams_question,
    fields=fixed(*(Field(f"the number of misses on the {name} cache", "int")
                   for name in ("direct-mapped", "2-way", "4-way"))),
    reference=_streams,
    wrong=(
        WrongReading("any associativity removes the conflicts", lambda p: _streams(p, ways_fix_all=True)),
        WrongReading("the cache holds all three arrays", lambda p: _streams(p, fits=True)),
    ),
    trap=lambda p, key: require(key[0] > key[2] and key[1] > key[2],
                                "three streams must still conflict at 2 ways and stop at 4"),
    sample=_sample_streams,
    independent=cache_independent.streams_associativity,
)

# --- LRU is not FIFO ----------------------------------------------------------------------------


def _replacement(p: Params, policy: str = "lru", all_miss: bool = False) -> list:
    hits = ([False] * len(p["trace"]) if all_miss
            else [a.hit for a in _asked(p, simulate(geometry(p), p.get("warm", []) + p["trace"], policy=policy))])
    return [*hits, hits.count(True)]


def _sample_replacement(rng: np.random.Generator) -> Params:
    g = CacheGeometry(sets=draw(rng, (2, 4)), ways=2, block=draw(rng, (16, 32, 64)))
    home = draw_int(rng, 0, g.sets - 1)
    blocks = [home + g.sets * draw_int(rng, 0, 31) for _ in range(3)] + [draw_int(rng, 0, 127)]

    def reads(count: int) -> list[int]:
        return [blocks[draw_int(rng, 0, 3)] * g.block + draw_int(rng, 0, g.block - 1) for _ in range(count)]

    return _warm_coin(rng, lambda: {"sets": g.sets, "ways": g.ways, "block": g.block,
                                    "warm": reads(draw_int(rng, 1, 3)), "trace": reads(draw_int(rng, 7, 10))})


LRU_REPLACEMENT = Template(
    name="lru_replacement",
    category="cache",
    question=lambda p: f"{_reads(p)}\n{describe(geometry(p))} LRU evicts the line whose last use is oldest.",
    fields=lambda p: (
        *(Field(f"whether access {i} (address {hex(a)}) hits", "bool") for i, a in enumerate(p["trace"], 1)),
        Field("the total number of hits" + (" of these accesses (the warm-up reads not counted)"
                                            if p.get("warm") else ""), "int"),
    ),
    reference=_replacement,
    wrong=(
        WrongReading("FIFO replacement (evicts the oldest fill)", lambda p: _replacement(p, policy="fifo")),
        WrongReading("every access misses", lambda p: _replacement(p, all_miss=True)),
    ),
    trap=lambda p, key: require(key[-1] > 0 and key != _replacement(p, policy="fifo"),
                                "the trace must have hits and tell LRU from FIFO"),
    sample=_sample_replacement,
    independent=cache_independent.lru_replacement,
)

# --- what survives to a second pass ------------------------------------------------------------


def _passes(p: Params, keeps_all: bool = False, keeps_none: bool = False) -> list:
    size = ctype(p["elem"]).size
    one_pass = [p["base"] + i * size for i in range(0, p["n"], p["stride"])]
    outcomes = simulate(geometry(p), one_pass * 2)
    first, second = misses(outcomes[: len(one_pass)]), misses(outcomes[len(one_pass):])
    if keeps_all:
        second = 0
    if keeps_none:
        second = first
    return [first, second]


def _sample_passes(rng: np.random.Generator) -> Params:
    g = CacheGeometry(sets=draw(rng, (4, 8, 16, 32)), ways=1, block=draw(rng, (16, 32, 64)))
    elem = draw(rng, ("int", "double"))
    n = g.capacity * draw_int(rng, 11, 19) // 10 // ctype(elem).size
    return {"elem": elem, "n": n, "stride": draw_int(rng, 1, 3), "base": 0x10000 * draw_int(rng, 1, 16),
            "sets": g.sets, "ways": g.ways, "block": g.block}


TWO_PASSES = Template(
    name="two_passes",
    category="cache",
    question=lambda p: (
        f"{p['elem']} a[{p['n']}];   /* &a[0] == (void *){hex(p['base'])} */\n"
        f"{p['elem']} sum = 0;\n"
        "for (int pass = 0; pass < 2; pass++)\n"
        f"    for (int i = 0; i < {p['n']}; i += {p['stride']})\n"
        "        sum += a[i];\n"
        f"{describe(geometry(p))} sum and the loop counters live in registers."
    ),
    fields=fixed(Field("the number of misses in the first pass", "int"),
                 Field("the number of misses in the second pass", "int")),
    reference=_passes,
    wrong=(
        WrongReading("the second pass finds everything cached", lambda p: _passes(p, keeps_all=True)),
        WrongReading("nothing survives to the second pass", lambda p: _passes(p, keeps_none=True)),
    ),
    trap=lambda p, key: require(0 < key[1] < key[0], "the second pass must reuse some blocks but not all"),
    sample=_sample_passes,
    independent=cache_independent.two_passes,
)

TEMPLATES: tuple[Template, ...] = (
    TRAVERSAL_ORDER,
    TRACE_OUTCOMES,
    ADDRESS_SPLIT,
    STREAMS_ASSOCIATIVITY,
    LRU_REPLACEMENT,
    TWO_PASSES,
)

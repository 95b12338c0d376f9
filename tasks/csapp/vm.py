"""Virtual-memory templates: address translation through a TLB and a page table, TLB traces, and
page replacement; every key from a reference simulator, cross-checked by a second one.

The reference works on integers with shifts and masks and keeps LRU order as a list; the second
(``independent``) works on the address's bit string, sliced, and keeps LRU by timestamps. The
replacement policies are likewise written twice: a queue/list version and a version that
recomputes each eviction from the whole history.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .template import Field, Params, Template, WrongReading, draw, draw_int, fixed, require

if TYPE_CHECKING:
    import numpy as np


def _h(value: int) -> str:
    return hex(value)


def _bits(n: int) -> int:
    """log2 of a power of two."""
    if n <= 0 or n & (n - 1):
        raise ValueError(f"{n} is not a power of two")
    return n.bit_length() - 1


# --- simulator 1: integers, shifts and masks; LRU as an ordered list ------------------------------


def split_va(p: Params, va: int, *, sets: int | None = None) -> tuple[int, int, int, int]:
    """(VPN, VPO, TLB index, TLB tag) of ``va``: the index is the low bits of the VPN."""
    offset_bits = _bits(p["page"])
    vpn, vpo = va >> offset_bits, va & (p["page"] - 1)
    sets = p["tlb_sets"] if sets is None else sets
    return vpn, vpo, vpn & (sets - 1), vpn >> _bits(sets)


def translate(p: Params, *, fully_associative: bool = False, index_from_va: bool = False,
              tag_is_vpn: bool = False) -> list:
    """[VPN, VPO, TLBI, TLBT, TLB hit, PPN, PA] for ``p["va"]`` (the wrong readings as flags)."""
    vpn, vpo, index, tag = split_va(p, p["va"])
    if index_from_va:
        index = p["va"] & (p["tlb_sets"] - 1)
    if tag_is_vpn:
        tag = vpn
    hit_entry = [e for e in p["tlb"] if e[1] == tag and (fully_associative or e[0] == index)]
    page_table = {v: ppn for v, ppn in p["pt"]}
    ppn = hit_entry[0][2] if hit_entry else page_table[vpn]
    return [_h(vpn), _h(vpo), index, _h(tag), bool(hit_entry), _h(ppn), _h(ppn * p["page"] + vpo)]


def tlb_outcomes(p: Params, *, sets: int | None = None, ways: int | None = None,
                 offset_ignored: bool = False) -> list:
    """Hit or miss of each access of ``p["trace"]`` on an LRU TLB that starts empty and first sees
    the warm-up loads ``p["warm"]`` (not asked about), then the number of misses of the trace."""
    sets = p["tlb_sets"] if sets is None else sets
    ways = p["tlb_ways"] if ways is None else ways
    lines: list[list[int]] = [[] for _ in range(sets)]  # per set: tags, least recently used first
    hits = []
    for va in [*p.get("warm", []), *p["trace"]]:
        if offset_ignored:
            number = va
            index, tag = number & (sets - 1), number >> _bits(sets)
        else:
            _, _, index, tag = split_va(p, va, sets=sets)
        row = lines[index]
        hit = tag in row
        if hit:
            row.remove(tag)
        elif len(row) == ways:
            row.pop(0)
        row.append(tag)
        hits.append(hit)
    hits = hits[len(p.get("warm", [])):]
    return [*hits, hits.count(False)]


def faults(refs: Sequence[int], frames: int, policy: str) -> int:
    """Page faults of a reference string under FIFO, LRU or OPT with ``frames`` frames."""
    resident: list[int] = []  # FIFO: load order; LRU: use order (oldest first)
    count = 0
    for i, page in enumerate(refs):
        if page in resident:
            if policy == "lru":
                resident.remove(page)
                resident.append(page)
            continue
        count += 1
        if len(resident) == frames:
            if policy == "opt":
                future = list(refs[i + 1:])
                victim = max(resident, key=lambda q: (future.index(q) if q in future else len(future), -q))
                resident.remove(victim)
            else:
                resident.pop(0)
        resident.append(page)
    return count


# --- simulator 2: bit strings, timestamps, whole-history evictions --------------------------------


def split_va_by_bits(p: Params, va: int, sets: int | None = None) -> tuple[int, int, int, int]:
    text = format(va, f"0{p['vbits']}b")
    offset_bits = len(format(p["page"] - 1, "b")) if p["page"] > 1 else 0
    index_bits = len(format((p["tlb_sets"] if sets is None else sets) - 1, "b")) if (sets or p["tlb_sets"]) > 1 else 0
    vpn_text, vpo_text = text[: len(text) - offset_bits], text[len(text) - offset_bits:]
    tag_text, index_text = vpn_text[: len(vpn_text) - index_bits], vpn_text[len(vpn_text) - index_bits:]
    return int(vpn_text, 2), int(vpo_text or "0", 2), int(index_text or "0", 2), int(tag_text or "0", 2)


def translate_by_bits(p: Params) -> list:
    vpn, vpo, index, tag = split_va_by_bits(p, p["va"])
    tlb = {(s, t): ppn for s, t, ppn in p["tlb"]}
    hit = (index, tag) in tlb
    ppn = tlb[(index, tag)] if hit else dict(map(tuple, p["pt"]))[vpn]
    pa_text = format(ppn, "b") + format(vpo, f"0{len(format(p['page'] - 1, 'b'))}b")
    return [_h(vpn), _h(vpo), index, _h(tag), hit, _h(ppn), _h(int(pa_text, 2))]


def tlb_outcomes_by_time(p: Params) -> list:
    last_use: dict[tuple[int, int], int] = {}  # (set, tag) -> time of last use, for resident entries
    asked_from = len(p.get("warm", []))  # the warm-up loads come first and are not asked about
    hits = []
    for now, va in enumerate(p.get("warm", []) + p["trace"]):
        _, _, index, tag = split_va_by_bits(p, va)
        hit = (index, tag) in last_use
        if not hit:
            in_set = [k for k in last_use if k[0] == index]
            if len(in_set) == p["tlb_ways"]:
                del last_use[min(in_set, key=last_use.__getitem__)]
        last_use[(index, tag)] = now
        if now >= asked_from:
            hits.append(hit)
    return [*hits, len(hits) - sum(hits)]


def faults_from_history(refs: Sequence[int], frames: int, policy: str) -> int:
    """The same policies, each eviction decided from the whole history so far (no queue kept)."""
    resident: set[int] = set()
    count = 0
    for i, page in enumerate(refs):
        if page in resident:
            continue
        count += 1
        if len(resident) == frames:
            past = refs[:i]
            if policy == "fifo":  # the page whose latest load (its first use since it last faulted) is oldest
                loaded = {q: max(j for j in range(i) if refs[j] == q and _faulted(refs, frames, j)) for q in resident}
                victim = min(resident, key=loaded.__getitem__)
            elif policy == "lru":
                victim = min(resident, key=lambda q: max(j for j in range(i) if past[j] == q))
            else:
                def next_use(q: int, now: int = i) -> int:
                    return next((j for j in range(now + 1, len(refs)) if refs[j] == q), len(refs))
                victim = max(resident, key=lambda q: (next_use(q), -q))
            resident.discard(victim)
        resident.add(page)
    return count


def _faulted(refs: Sequence[int], frames: int, j: int) -> bool:
    """Whether reference ``j`` faults under FIFO (by replaying the prefix)."""
    return faults(refs[: j + 1], frames, "fifo") > faults(refs[:j], frames, "fifo")


# --- the state a question shows must be one a machine can be in -------------------------------------


def impossible_states(p: Params) -> list[str]:
    """What the TLB, page table and cache of an instance show that no machine can hold (empty: none).

    A TLB entry is a cached page-table entry, so the entry for VPN v maps to the PPN the page
    table gives v wherever the table lists v; a set holds at most its ways of valid entries, and
    never the same tag twice; every VPN, PPN and tag fits the address widths; a set of the
    direct-mapped data cache (``cache_ways``, 1 unless stated) holds at most one valid line.
    """
    problems: list[str] = []
    offset_bits = _bits(p["page"])
    vpn_limit, ppn_limit = 1 << (p["vbits"] - offset_bits), 1 << (p["pbits"] - offset_bits)
    page_table: dict[int, int] = {}
    for vpn, ppn in p.get("pt", []):
        if not (0 <= vpn < vpn_limit and 0 <= ppn < ppn_limit):
            problems.append(f"page-table entry VPN {_h(vpn)} -> PPN {_h(ppn)} does not fit the address widths")
        if page_table.setdefault(vpn, ppn) != ppn:
            problems.append(f"the page table maps VPN {_h(vpn)} to two PPNs")
    sets, index_bits = p["tlb_sets"], _bits(p["tlb_sets"])
    entries: Counter[tuple[int, int]] = Counter()
    for s, tag, ppn in p.get("tlb", []):
        vpn = (tag << index_bits) | s
        entries[(s, tag)] += 1
        if not (0 <= s < sets and tag >= 0 and vpn < vpn_limit and 0 <= ppn < ppn_limit):
            problems.append(f"TLB entry set {s} tag {_h(tag)} -> PPN {_h(ppn)} does not fit the TLB and widths")
        if vpn in page_table and page_table[vpn] != ppn:
            problems.append(f"TLB entry set {s} tag {_h(tag)} maps VPN {_h(vpn)} to PPN {_h(ppn)}, the page "
                            f"table to {_h(page_table[vpn])}")
    problems += [f"TLB set {s} holds tag {_h(t)} {n} times" for (s, t), n in sorted(entries.items()) if n > 1]
    per_set = Counter(s for s, _ in entries.elements())
    problems += [f"TLB set {s} holds {n} valid entries, more than its {p['tlb_ways']} ways"
                 for s, n in sorted(per_set.items()) if n > p["tlb_ways"]]
    if "lines" in p:
        ways = p.get("cache_ways", 1)
        tag_limit = 1 << max(0, p["pbits"] - _bits(p["block"]) - _bits(p["cache_sets"]))
        lines = Counter((s, t) for s, t in p["lines"])
        problems += [f"cache line set {s} tag {_h(t)} does not fit the cache and widths"
                     for s, t in lines if not (0 <= s < p["cache_sets"] and 0 <= t < tag_limit)]
        problems += [f"cache set {s} holds tag {_h(t)} {n} times" for (s, t), n in sorted(lines.items()) if n > 1]
        problems += [f"cache set {s} holds {n} valid lines, more than its {ways} way{'s' * (ways != 1)}"
                     for s, n in sorted(Counter(s for s, _ in p["lines"]).items()) if n > ways]
    return problems


def _possible(p: Params) -> None:
    problems = impossible_states(p)
    require(not problems, "the TLB, page table and cache must show a state a machine can be in: "
            + "; ".join(problems))


def _coin(rng: np.random.Generator, sample: Callable[[], Params], outcome: Callable[[Params], bool],
          tries: int = 60) -> Params:
    """A draw of ``sample`` whose ``outcome`` is a fair coin's: so that neither answer to a yes/no
    field is a safe guess (``guessability``). The last draw if the coin's side never came up."""
    wanted = bool(draw_int(rng, 0, 1))
    for _ in range(tries):
        p = sample()
        if outcome(p) == wanted:
            break
    return p


# --- templates ----------------------------------------------------------------------------------


def _describe(p: Params) -> str:
    sets, ways = p["tlb_sets"], p["tlb_ways"]
    kind = "direct-mapped (1-way)" if ways == 1 else f"{ways}-way set-associative"
    return (f"Virtual addresses are {p['vbits']} bits and physical addresses {p['pbits']} bits; pages are "
            f"{p['page']} bytes. The TLB has {sets} sets and is {kind}; its set index is "
            "the low bits of the VPN and its tag the rest of the VPN.")


def _translate_question(p: Params) -> str:
    tlb = "\n".join(f"  set {s}: tag {_h(t)} -> PPN {_h(ppn)} (valid)" for s, t, ppn in sorted(p["tlb"]))
    pt = "\n".join(f"  VPN {_h(v)} -> PPN {_h(ppn)} (valid)" for v, ppn in sorted(p["pt"]))
    return (f"{_describe(p)}\nThe valid TLB entries (every other entry is invalid):\n{tlb}\n"
            f"Page table entries (the VPNs not listed are not needed):\n{pt}\n"
            f"A program loads a byte from virtual address {_h(p['va'])}.")


def _translate_trap(p: Params, key: list) -> None:
    """Hit or miss, a decoy entry in another set carries the access's tag: on a miss it is what
    a tag-anywhere reading hits; on a hit it sits in an earlier set and maps another page, so a
    scan for the tag meets it first."""
    _possible(p)
    _, _, index, tag = split_va(p, p["va"])
    decoys = sorted(e for e in p["tlb"] if e[1] == tag and e[0] != index)
    require(bool(decoys), "a TLB entry in another set must carry the tag")
    if key[4]:
        require(decoys[0][0] < index and _h(decoys[0][2]) != key[5],
                "on a hit, a TLB entry in an earlier set must carry the tag and map another page")


def _sample_translate(rng: np.random.Generator) -> Params:
    page = draw(rng, (64, 256, 1024, 4096))
    sets, ways = draw(rng, (4, 8, 16)), draw(rng, (2, 4))
    vbits = draw(rng, (14, 16, 18, 20)) if page < 4096 else draw(rng, (20, 24))
    pbits = vbits - 2
    hit = bool(draw_int(rng, 0, 1))  # hits and misses equally often
    index_bits, ppn_max = _bits(sets), (1 << (pbits - _bits(page))) - 1
    vpn_max, tag_max = (1 << (vbits - _bits(page))) - 1, (1 << (vbits - _bits(page) - index_bits)) - 1
    va = draw_int(rng, 0, (1 << vbits) - 1)
    while split_va({"page": page, "tlb_sets": sets}, va)[2] == 0:  # a set before it holds the decoy
        va = draw_int(rng, 0, (1 << vbits) - 1)
    vpn, _, index, tag = split_va({"page": page, "tlb_sets": sets}, va)
    page_table = {vpn: draw_int(rng, 0, ppn_max)}
    for _ in range(3):  # other pages the table lists
        page_table.setdefault(draw_int(rng, 0, vpn_max), draw_int(rng, 0, ppn_max))
    # every valid TLB entry caches a page-table entry: the table's PPN where it lists the page
    decoy_set = draw_int(rng, 0, index - 1)
    decoy_ppn = page_table.get((tag << index_bits) | decoy_set, draw_int(rng, 0, ppn_max))
    tlb = {(decoy_set, tag): decoy_ppn}
    if hit:
        tlb[(index, tag)] = page_table[vpn]
    else:  # a second decoy: the access's tag is in exactly two entries either way, so no count tells
        other = draw(rng, [s for s in range(sets) if s not in (index, decoy_set)])
        tlb[(other, tag)] = page_table.get((tag << index_bits) | other, draw_int(rng, 0, ppn_max))
    for _ in range(draw_int(rng, 2, 5)):
        s, t = draw_int(rng, 0, sets - 1), draw_int(rng, 0, tag_max)
        if (s, t) in tlb or t == tag or sum(k[0] == s for k in tlb) == ways:
            continue
        tlb[(s, t)] = page_table.get((t << index_bits) | s, draw_int(rng, 0, ppn_max))
    return {"vbits": vbits, "pbits": pbits, "page": page, "tlb_sets": sets, "tlb_ways": ways,
            "tlb": sorted([s, t, ppn] for (s, t), ppn in tlb.items()),
            "pt": sorted([v, ppn] for v, ppn in page_table.items()), "va": va}


TRANSLATE = Template(
    name="address_translation",
    category="vm",
    question=_translate_question,
    fields=fixed(Field("the VPN", "hex"), Field("the VPO (page offset)", "hex"), Field("the TLB set index", "int"),
                 Field("the TLB tag", "hex"), Field("whether the TLB hits", "bool"),
                 Field("the PPN used", "hex"), Field("the physical address", "hex")),
    reference=translate,
    wrong=(WrongReading("a matching tag anywhere in the TLB hits", lambda p: translate(p, fully_associative=True)),
           WrongReading("the TLB index is the low bits of the virtual address",
                        lambda p: translate(p, index_from_va=True)),
           WrongReading("the TLB tag is the whole VPN", lambda p: translate(p, tag_is_vpn=True))),
    trap=_translate_trap,
    sample=_sample_translate,
    measure=lambda p: float(len(p["tlb"]) + len(p["pt"]) + p["vbits"] / 4),
    independent=translate_by_bits,
)


# --- on through a physically addressed cache -------------------------------------------------------


def cached(p: Params, *, virtual_index: bool = False, tlb_anywhere: bool = False, tag_is_block: bool = False) -> list:
    """[TLB hit, PPN, PA, CO, CI, CT, cache hit]: ``p["va"]`` translated, then looked up in a
    direct-mapped cache indexed and tagged by the physical address."""
    _, _, _, _, tlb_hit, ppn, pa = translate(p, fully_associative=tlb_anywhere)
    address = p["va"] if virtual_index else int(pa, 16)
    offset, rest = address % p["block"], address // p["block"]
    index, tag = rest % p["cache_sets"], rest if tag_is_block else rest // p["cache_sets"]
    hit = any(s == index and t == tag for s, t in p["lines"])
    return [tlb_hit, ppn, pa, offset, index, _h(tag), hit]


def cached_by_bits(p: Params) -> list:
    translated = translate_by_bits(p)
    text = format(int(translated[6], 16), f"0{p['pbits']}b")
    offset_bits, index_bits = len(format(p["block"] - 1, "b")), len(format(p["cache_sets"] - 1, "b"))
    tag_text = text[: len(text) - offset_bits - index_bits]
    index_text = text[len(text) - offset_bits - index_bits: len(text) - offset_bits]
    index, tag = int(index_text, 2), int(tag_text or "0", 2)
    return [translated[4], translated[5], translated[6], int(text[len(text) - offset_bits:], 2), index, _h(tag),
            [index, tag] in [list(line) for line in p["lines"]]]


def _sample_cached(rng: np.random.Generator) -> Params:
    p = _sample_translate(rng)
    while p["page"] > 256:  # the cache index must reach above the page offset, into the PPN
        p = _sample_translate(rng)
    sets = draw(rng, (32, 64, 128))
    p.update(block=draw(rng, (8, 16, 32)), cache_sets=sets)
    tag_max = (1 << max(0, p["pbits"] - _bits(p["block"]) - _bits(sets))) - 1
    block = int(translate(p)[6], 16) // p["block"]
    index, tag = block % sets, block // sets
    decoy = (index + draw_int(rng, 1, sets - 1)) % sets
    lines = {decoy: tag}  # the decoy: the same tag in another set
    if draw_int(rng, 0, 1):  # hits and misses equally often
        lines[index] = tag
    else:  # a second decoy: the tag is in exactly two lines either way, so no count tells
        lines[draw(rng, [s for s in range(sets) if s not in (index, decoy)])] = tag
        if tag_max and draw_int(rng, 0, 1):  # a miss on a set that holds another block
            lines[index] = (tag + draw_int(rng, 1, tag_max)) % (tag_max + 1)
    for _ in range(draw_int(rng, 1, 3)):  # one valid line per set: the cache is direct-mapped
        s, t = draw_int(rng, 0, sets - 1), draw_int(rng, 0, tag_max)
        if s != index and t != tag:
            lines.setdefault(s, t)
    p["lines"] = sorted([s, t] for s, t in lines.items())
    return p


def _cached_question(p: Params) -> str:
    lines = "\n".join(f"  set {s}: tag {_h(t)} (valid)" for s, t in sorted(p["lines"]))
    return (f"{_translate_question(p)}\nThe load then goes to a direct-mapped data cache of {p['cache_sets']} "
            f"sets with {p['block']}-byte blocks, indexed and tagged by the physical address (block offset "
            "in the lowest bits, then the set index, then the tag). Its valid lines (every other line is "
            f"invalid):\n{lines}")


def _cached_trap(p: Params, key: list) -> None:
    _translate_trap(p, translate(p))  # a state a machine can be in, with the TLB's decoy
    require(key[4] != cached(p, virtual_index=True)[4], "the physical set index must differ from the virtual one")


CACHED = Template(
    name="translate_then_cache",
    category="vm",
    question=_cached_question,
    fields=fixed(Field("whether the TLB hits", "bool"), Field("the PPN used", "hex"),
                 Field("the physical address", "hex"), Field("the cache block offset", "int"),
                 Field("the cache set index", "int"), Field("the cache tag", "hex"),
                 Field("whether the cache hits", "bool")),
    reference=cached,
    wrong=(WrongReading("the cache is indexed and tagged by the virtual address",
                        lambda p: cached(p, virtual_index=True)),
           WrongReading("a matching tag anywhere in the TLB hits", lambda p: cached(p, tlb_anywhere=True)),
           WrongReading("the cache tag is the whole block number (set index bits kept)",
                        lambda p: cached(p, tag_is_block=True))),
    trap=_cached_trap,
    sample=_sample_cached,
    independent=cached_by_bits,
)


def _trace_trap(p: Params, key: list) -> None:
    require(any(key[:-1]), "the trace must hit somewhere")
    fully = tlb_outcomes(p, sets=1, ways=p["tlb_sets"] * p["tlb_ways"])
    require(fully != key, "the set index must cause a conflict miss a fully associative TLB avoids")


def _sample_trace(rng: np.random.Generator) -> Params:
    page = draw(rng, (256, 1024, 4096))
    sets, ways = draw(rng, (2, 4)), draw(rng, (1, 2))
    vbits = 20 if page < 4096 else 24
    home = draw_int(rng, 0, sets - 1)
    vpns = [home + sets * draw_int(rng, 0, 30) for _ in range(ways + 1)] + [draw_int(rng, 0, 255)]

    def loads(count: int) -> list[int]:
        return [draw(rng, vpns) * page + draw_int(rng, 0, page - 1) for _ in range(count)]

    # a warm-up before the trace, so that its first access hits as often as it misses
    return _coin(rng, lambda: {"vbits": vbits, "pbits": vbits, "page": page, "tlb_sets": sets, "tlb_ways": ways,
                               "warm": loads(draw_int(rng, 1, 2)), "trace": loads(draw_int(rng, 6, 10))},
                 lambda p: tlb_outcomes(p)[0])


def _trace_question(p: Params) -> str:
    lru = "Replacement within a set is LRU, the TLB" if p["tlb_ways"] > 1 else "The TLB"
    trace = ", ".join(_h(a) for a in p["trace"])
    loads = (f"A program first loads one byte at each of {', '.join(_h(a) for a in p['warm'])} (in this order; "
             f"these loads are not asked about), then one byte at each of these virtual addresses, in this order: "
             f"{trace}." if p.get("warm") else
             f"A program loads one byte at each of these virtual addresses, in this order: {trace}.")
    return f"{_describe(p)} {lru} starts empty, and every page is mapped (no page faults).\n{loads}"


TLB_TRACE = Template(
    name="tlb_trace",
    category="vm",
    question=_trace_question,
    fields=lambda p: (*(Field(f"whether the TLB hits on access {i} ({_h(a)})", "bool")
                        for i, a in enumerate(p["trace"], 1)),
                      Field("the number of TLB misses" + (" on these accesses (the warm-up loads not counted)"
                                                          if p.get("warm") else ""), "int")),
    reference=tlb_outcomes,
    wrong=(WrongReading("the TLB is fully associative",
                        lambda p: tlb_outcomes(p, sets=1, ways=p["tlb_sets"] * p["tlb_ways"])),
           WrongReading("the TLB is indexed by the whole address (page offset included)",
                        lambda p: tlb_outcomes(p, offset_ignored=True))),
    trap=_trace_trap,
    sample=_sample_trace,
    measure=lambda p: float(len(p["trace"]) + len(p.get("warm", [])) + p["tlb_ways"]),
    independent=tlb_outcomes_by_time,
)


def _policies(p: Params, count=faults, same_as_fifo: bool = False, compulsory: bool = False) -> list:
    if compulsory:
        return [len(set(p["refs"]))] * 3
    fifo = count(p["refs"], p["frames"], "fifo")
    return [fifo, fifo if same_as_fifo else count(p["refs"], p["frames"], "lru"), count(p["refs"], p["frames"], "opt")]


def _sample_policies(rng: np.random.Generator) -> Params:
    pages = draw_int(rng, 4, 6)
    return {"refs": [draw_int(rng, 0, pages - 1) for _ in range(draw_int(rng, 10, 16))], "frames": draw_int(rng, 3, 4)}


POLICIES = Template(
    name="replacement_policies",
    category="vm",
    question=lambda p: (f"A process has {p['frames']} physical page frames, all empty at first, and references "
                        f"these virtual pages in order: {', '.join(map(str, p['refs']))}. A reference to a page "
                        "that is not resident is a page fault, which loads the page, evicting one if the frames "
                        "are full. OPT evicts the page whose next reference is furthest away (never referenced "
                        "again counts as furthest; among those, the lowest page number)."),
    fields=fixed(Field("the page faults under FIFO", "int"), Field("the page faults under LRU", "int"),
                 Field("the page faults under OPT", "int")),
    reference=_policies,
    wrong=(WrongReading("LRU evicts like FIFO", lambda p: _policies(p, same_as_fifo=True)),
           WrongReading("only the first reference to each page faults", lambda p: _policies(p, compulsory=True))),
    trap=lambda p, key: require(key[0] != key[1] and key[2] < min(key[:2]),
                                "FIFO and LRU must differ and OPT must beat both"),
    sample=_sample_policies,
    measure=lambda p: float(len(p["refs"]) + len(set(p["refs"]))),
    independent=lambda p: _policies(p, count=faults_from_history),
)

_BELADY = (1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5)  # the shape of Belady's anomaly for 3 and 4 frames


def _belady(p: Params, count=faults, lru: bool = False) -> list:
    policy = "lru" if lru else "fifo"
    return [count(p["refs"], p["frames"], policy), count(p["refs"], p["frames"] + 1, policy)]


def _sample_belady(rng: np.random.Generator) -> Params:
    """The anomaly's shape on five pages, with a few references before and after it (a sixth page
    among them), so that the fault counts vary."""
    names = [int(v) for v in rng.permutation(9)[:6]]
    before = [draw(rng, names) for _ in range(draw_int(rng, 0, 3))]
    after = [draw(rng, names) for _ in range(draw_int(rng, 0, 3))]
    return {"refs": before + [names[r - 1] for r in _BELADY] + after, "frames": 3}


BELADY = Template(
    name="fifo_more_frames",
    category="vm",
    question=lambda p: (f"A process references these virtual pages in order: {', '.join(map(str, p['refs']))}. "
                        "Pages are replaced FIFO (the page loaded earliest is evicted) and the frames start "
                        f"empty. Run it once with {p['frames']} frames and once with {p['frames'] + 1}."),
    fields=lambda p: (Field(f"the page faults with {p['frames']} frames", "int"),
                      Field(f"the page faults with {p['frames'] + 1} frames", "int")),
    reference=_belady,
    wrong=(WrongReading("FIFO behaves like LRU", lambda p: _belady(p, lru=True)),),
    trap=lambda p, key: require(key[1] > key[0], "one more frame must cause more faults (Belady's anomaly)"),
    sample=_sample_belady,
    measure=lambda p: float(len(p["refs"])),
    independent=lambda p: _belady(p, count=faults_from_history),
)

TEMPLATES: tuple[Template, ...] = (TRANSLATE, CACHED, TLB_TRACE, POLICIES, BELADY)

"""A second cache model, written apart from ``machine.simulate``, for ``verify csapp`` to hold the
cache keys to.

Where the first model divides addresses and keeps an ordered dict per set, this one cuts
addresses with masks and shifts and keeps, per set, a fixed array of ways holding (valid, tag,
time of last use): a hit refreshes the time (LRU), a miss fills an invalid way or the one with
the oldest time. Each template's key is recomputed from its parameters with its own address
arithmetic, so an error in the shared trace builders of ``cache.py`` shows up here too.
"""

from __future__ import annotations

from .template import Params

_SIZES = {"char": 1, "short": 2, "int": 4, "long": 8, "float": 4, "double": 8}


def _log2(n: int) -> int:
    if n <= 0 or n & (n - 1):
        raise ValueError(f"{n} is not a power of two")
    return n.bit_length() - 1


class WayArray:
    """``sets`` x ``ways`` lines of (valid, tag, last use), LRU by timestamp."""

    def __init__(self, sets: int, ways: int, block: int):
        self.offset_bits, self.index_bits, self.ways = _log2(block), _log2(sets), ways
        self.lines = [[[False, 0, -1] for _ in range(ways)] for _ in range(sets)]
        self.clock = 0

    def fields(self, address: int) -> tuple[int, int, int]:
        offset = address & ((1 << self.offset_bits) - 1)
        index = (address >> self.offset_bits) & ((1 << self.index_bits) - 1)
        return address >> (self.offset_bits + self.index_bits), index, offset

    def touch(self, address: int) -> bool:
        tag, index, _ = self.fields(address)
        self.clock += 1
        ways = self.lines[index]
        for line in ways:
            if line[0] and line[1] == tag:
                line[2] = self.clock
                return True
        victim = min(ways, key=lambda line: (line[0], line[2]))  # an invalid way first, else the oldest
        victim[:] = [True, tag, self.clock]
        return False


def _hits(sets: int, ways: int, block: int, trace: list[int]) -> list[bool]:
    cache = WayArray(sets, ways, block)
    return [cache.touch(a) for a in trace]


def _misses(sets: int, ways: int, block: int, trace: list[int]) -> int:
    return _hits(sets, ways, block, trace).count(False)


def traversal_order(p: Params) -> list:
    size, rows, cols = _SIZES[p["elem"]], p["rows"], p["cols"]
    row = [p["base"] + size * (cols * i + j) for i in range(rows) for j in range(cols)]
    col = [p["base"] + size * (cols * i + j) for j in range(cols) for i in range(rows)]
    return [_misses(p["sets"], p["ways"], p["block"], t) for t in (row, col)]


def _asked_hits(p: Params) -> list[bool]:
    """Hits of the trace's accesses, after its warm-up reads (``warm``, not asked about)."""
    warm = p.get("warm", [])
    return _hits(p["sets"], p["ways"], p["block"], warm + p["trace"])[len(warm):]


def trace_outcomes(p: Params) -> list:
    hits = _asked_hits(p)
    return [*hits, len(hits) - sum(hits)]


def address_split(p: Params) -> list:
    cache = WayArray(p["sets"], p["ways"], p["block"])
    tag, index, offset = cache.fields(p["address"])
    cache.touch(p["address"])
    return [hex(tag), index, offset, hex(p["address"] & ~(p["block"] - 1)), cache.touch(p["next"])]


def streams_associativity(p: Params) -> list:
    size = _SIZES[p["elem"]]
    trace = []
    for i in range(p["n"]):
        trace += [p["base"] + k * p["stride"] + i * size for k in range(3)]
    return [_misses(p["capacity"] // (p["block"] * ways), ways, p["block"], trace) for ways in (1, 2, 4)]


def lru_replacement(p: Params) -> list:
    hits = _asked_hits(p)
    return [*hits, sum(hits)]


def two_passes(p: Params) -> list:
    size = _SIZES[p["elem"]]
    one = [p["base"] + size * i for i in range(0, p["n"], p["stride"])]
    hits = _hits(p["sets"], p["ways"], p["block"], one + one)
    return [hits[:len(one)].count(False), hits[len(one):].count(False)]

"""The C machine the reference implementations run on: x86-64 Linux, gcc, IEEE-754.

Python ints are unbounded and its ``>>`` is always arithmetic, Python floats are binary64, and
Python has no structs or caches, so each of these is emulated here on purpose: every width is
masked, every float32 goes through a ``struct`` round trip, struct offsets come from an
alignment-and-padding algorithm and cache behaviour from a simulator. Nothing is a constant.
"""

from __future__ import annotations

import math
import re
import struct
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# --- fixed-width integers --------------------------------------------------------------------


def to_unsigned(value: int, width: int) -> int:
    """``value`` converted to a ``width``-bit unsigned integer (C: reduce modulo 2**width)."""
    return value & ((1 << width) - 1)


def to_signed(value: int, width: int) -> int:
    """``value`` converted to a ``width``-bit two's-complement integer (gcc: wraps)."""
    bits = to_unsigned(value, width)
    return bits - (1 << width) if bits >> (width - 1) else bits


def int_min(width: int) -> int:
    return -(1 << (width - 1))


def int_max(width: int) -> int:
    return (1 << (width - 1)) - 1


def shift_right_arithmetic(value: int, count: int, width: int) -> int:
    """``x >> count`` on a signed ``width``-bit int as gcc compiles it: copies of the sign bit enter."""
    return to_signed(value, width) >> count


def shift_right_logical(value: int, count: int, width: int) -> int:
    """``x >> count`` on an unsigned ``width``-bit int: zeros enter from the left."""
    return to_unsigned(value, width) >> count


def c_div(a: int, b: int) -> int:
    """C's ``/`` on integers, which truncates toward zero (Python's ``//`` floors)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def c_mod(a: int, b: int) -> int:
    """C's ``%``, whose sign follows the dividend so that ``(a/b)*b + a%b == a``."""
    return a - c_div(a, b) * b


def popcount(value: int, width: int) -> int:
    """Set bits in the ``width``-bit pattern of ``value``."""
    return bin(to_unsigned(value, width)).count("1")


def rotate_left(value: int, count: int, width: int) -> int:
    bits = to_unsigned(value, width)
    count %= width
    return to_unsigned((bits << count) | (bits >> (width - count)), width)


def hex_string(value: int) -> str:
    """The answer convention for bit patterns: lowercase, ``0x``, no leading zeros (``hex()``)."""
    if value < 0:
        raise ValueError("a bit pattern is non-negative; convert with to_unsigned first")
    return hex(value)


def to_bytes_le(value: int, size: int) -> list[int]:
    """The bytes of a ``size``-byte integer in address order on a little-endian machine."""
    return list(to_unsigned(value, 8 * size).to_bytes(size, "little"))


# --- floating point --------------------------------------------------------------------------


def f32(value: float) -> float:
    """Round a double to the nearest float32, as C's ``(float)`` does, overflowing to infinity.

    ``struct`` refuses finite values that round to infinity rather than returning it, so that
    case is handled here to match IEEE-754 round-to-nearest.
    """
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def f32_bits(value: float) -> int:
    """The float32 bit pattern of ``value`` after rounding it to float32."""
    return struct.unpack("<I", struct.pack("<f", f32(value)))[0]


def f32_from_bits(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def f32_div(a: float, b: float) -> float:
    """float32 ``a / b`` with IEEE division by zero (Python raises instead)."""
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return f32(a / b)


def f32_add(a: float, b: float) -> float:
    """float32 ``a + b``. The double sum of two float32s rounded once more to float32 is the
    correctly rounded float32 sum (binary64 has more than 2*24+2 bits), so no error creeps in."""
    return f32(a + b)


def f32_mul(a: float, b: float) -> float:
    return f32(a * b)


@dataclass(frozen=True)
class F32Fields:
    """The three fields of a float32 bit pattern."""

    sign: int
    exponent: int  # biased, 8 bits
    fraction: int  # 23 bits, without the implicit leading 1


def f32_fields(bits: int) -> F32Fields:
    return F32Fields(sign=bits >> 31, exponent=(bits >> 23) & 0xFF, fraction=bits & 0x7FFFFF)


# --- struct layout ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CType:
    """A C object type as the layout algorithm sees it: a size and an alignment in bytes."""

    name: str
    size: int
    align: int


SCALARS: dict[str, CType] = {
    t.name: t
    for t in (
        CType("char", 1, 1),
        CType("short", 2, 2),
        CType("int", 4, 4),
        CType("long", 8, 8),
        CType("float", 4, 4),
        CType("double", 8, 8),
        CType("char*", 8, 8),
        CType("int*", 8, 8),
    )
}

_ARRAY_RE = re.compile(r"(?P<elem>[a-z]+\*?)\[(?P<n>[1-9][0-9]*)\]")


def ctype(spec: str) -> CType:
    """The x86-64 System V type for ``spec``: a scalar name or an array such as ``"short[3]"``."""
    if spec in SCALARS:
        return SCALARS[spec]
    match = _ARRAY_RE.fullmatch(spec)
    if match and match["elem"] in SCALARS:
        elem = SCALARS[match["elem"]]
        return CType(spec, elem.size * int(match["n"]), elem.align)
    raise ValueError(f"unknown C type {spec!r}")


@dataclass(frozen=True)
class Layout:
    """Where each member starts, the total size including tail padding, and the alignment."""

    offsets: tuple[int, ...]
    size: int
    align: int

    def as_type(self, name: str) -> CType:
        """This aggregate as a member or array element of another aggregate."""
        return CType(name, self.size, self.align)


def _round_up(offset: int, align: int) -> int:
    return -(-offset // align) * align


def struct_layout(members: Iterable[CType], *, packed: bool = False) -> Layout:
    """Lay out a struct: each member at the next offset that is a multiple of its alignment,
    and the size rounded up to the largest alignment so that array elements stay aligned.
    ``packed`` models ``__attribute__((packed))`` (every alignment 1): the tempting wrong size."""
    offsets: list[int] = []
    offset = 0
    align = 1
    for member in members:
        member_align = 1 if packed else member.align
        offset = _round_up(offset, member_align)
        offsets.append(offset)
        offset += member.size
        align = max(align, member_align)
    return Layout(tuple(offsets), _round_up(offset, align), align)


def union_layout(members: Sequence[CType]) -> Layout:
    """Lay out a union: every member at offset 0, size the largest member rounded to alignment."""
    align = max(m.align for m in members)
    return Layout(tuple(0 for _ in members), _round_up(max(m.size for m in members), align), align)


# --- caches ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheGeometry:
    """A set-associative cache: ``sets`` sets of ``ways`` lines of ``block`` bytes each."""

    sets: int
    ways: int
    block: int

    def __post_init__(self) -> None:
        for name in ("sets", "block"):
            n = getattr(self, name)
            if n < 1 or n & (n - 1):
                raise ValueError(f"cache {name} must be a power of two, got {n}")
        if self.ways < 1:
            raise ValueError("a cache needs at least one way")

    @property
    def capacity(self) -> int:
        return self.sets * self.ways * self.block

    def split(self, address: int) -> tuple[int, int, int]:
        """(tag, set index, block offset): offset from the low bits, index from the next ones."""
        block_number = address // self.block
        return block_number // self.sets, block_number % self.sets, address % self.block


class Cache:
    """A cache's state: per set, the resident tags in replacement order (oldest first).

    ``policy="lru"`` moves a line to the back on every hit; ``"fifo"`` only on fill, which is the
    tempting misreading of LRU that some distractors run.
    """

    def __init__(self, geometry: CacheGeometry, policy: str = "lru") -> None:
        if policy not in ("lru", "fifo"):
            raise ValueError(f"unknown replacement policy {policy!r}")
        self.geometry = geometry
        self.policy = policy
        self._sets: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(geometry.sets)]

    def access(self, address: int) -> bool:
        """Touch ``address``; True on a hit. A miss fills the line, evicting if the set is full."""
        tag, index, _ = self.geometry.split(address)
        lines = self._sets[index]
        if tag in lines:
            if self.policy == "lru":
                lines.move_to_end(tag)
            return True
        if len(lines) == self.geometry.ways:
            lines.popitem(last=False)
        lines[tag] = None
        return False


@dataclass(frozen=True)
class Access:
    """One access of a trace: its address and outcome (hit, or the kind of miss, by the 3C model)."""

    address: int
    outcome: str  # "hit" | "compulsory" | "conflict" | "capacity"

    @property
    def hit(self) -> bool:
        return self.outcome == "hit"


def simulate(geometry: CacheGeometry, trace: Iterable[int], policy: str = "lru") -> list[Access]:
    """Run ``trace`` through a cold cache and classify every miss.

    A miss is compulsory on the first touch of its block; otherwise it is a conflict miss if a
    fully associative LRU cache of the same capacity would have hit, else a capacity miss.
    """
    cache = Cache(geometry, policy)
    ideal = Cache(CacheGeometry(sets=1, ways=geometry.sets * geometry.ways, block=geometry.block))
    seen: set[int] = set()
    result = []
    for address in trace:
        hit = cache.access(address)
        ideal_hit = ideal.access(address)
        block_number = address // geometry.block
        if hit:
            outcome = "hit"
        elif block_number not in seen:
            outcome = "compulsory"
        else:
            outcome = "conflict" if ideal_hit else "capacity"
        seen.add(block_number)
        result.append(Access(address, outcome))
    return result


def misses(accesses: Iterable[Access]) -> int:
    return sum(not a.hit for a in accesses)

"""The template registry and the fixed eval set: 40 template instances with chosen parameters.

Only parameters are written here. Every key is computed from them by ``instantiate``, which also
asserts each template's trap, so a parameter edit that empties a question fails the build.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from . import bits, cache, floats, integers, memory
from .template import Template

TEMPLATES: MappingProxyType[str, Template] = MappingProxyType(
    {t.name: t for module in (integers, floats, bits, memory, cache) for t in module.TEMPLATES}
)

EVAL_SET: tuple[tuple[str, str, dict[str, Any]], ...] = (
    # integers (12)
    ("int-unsigned-minus-one", "negative_as_unsigned", {"value": -1, "width": 32}),
    ("int-unsigned-difference", "unsigned_difference", {"a": 5, "b": 9}),
    ("int-shift-signed-vs-unsigned", "shift_signedness", {"x": -100, "shift": 3, "width": 32}),
    ("int-negate-int-min", "negate_minimum", {"width": 32}),
    ("int-add-overflow-wraps", "signed_add_overflow", {"a": 1_800_000_000, "b": 700_000_000, "width": 32}),
    ("int-short-product-promotion", "short_product", {"a": 300, "b": 250}),
    ("int-plain-char-is-signed", "char_signedness", {"byte": 0xC8}),
    ("int-mixed-sign-compare", "mixed_sign_compare", {"a": -3, "b": 7}),
    ("int-division-truncates", "signed_division", {"a": -47, "b": 6}),
    ("int-sign-extension", "sign_extension", {"src": 16, "dst": 64, "bits": 0x9C31}),
    ("int-narrowing-cast", "narrowing_cast", {"x": 250_000}),
    ("int-midpoint-overflow", "midpoint_overflow", {"lo": 1_500_000_001, "hi": 2_100_000_000}),
    # floats (10)
    ("float-sum-not-associative", "f32_associativity", {"a": 250_000_000.0, "b": -250_000_000.0, "c": 3.0}),
    ("float-2p24-plus-one", "int_to_float", {"n": 2**24 + 1}),
    ("float-decode-bits", "f32_decode", {"bits": 0xC2F50000}),
    ("float-double-to-float", "double_to_float", {"d": -2.2}),
    ("float-underflow-negative-zero", "signed_zero", {"a": -1e-30, "b": 1e-30}),
    ("float-nan-comparisons", "nan_compare", {"form": "inf-inf", "c": 2.0}),
    ("float-overflow-to-infinity", "f32_overflow", {"x": 3e38, "m": 4.0}),
    ("float-accumulated-step", "f32_accumulation", {"step": 0.3, "count": 9}),
    ("float-to-int-four-ways", "float_to_int", {"x": -2.5}),
    ("float-subnormal-halving", "subnormal_halving", {"bits": 0x3}),
    # bits (6)
    ("bits-popcount-negative", "popcount_negative", {"x": -1000, "width": 32}),
    ("bits-lowest-set-bit", "lowest_set_bit", {"x": 0x6D40}),
    ("bits-rotate-vs-shift", "rotate_left", {"x": 0x9A3C71E5, "k": 12, "width": 32}),
    ("bits-byte-order", "byte_order", {"x": 0x5E17C0A3, "offset": 1}),
    ("bits-signed-field", "bitfield_extract", {"w": 0x00B7E5A4, "pos": 9, "len": 7}),
    ("bits-complement-promotion", "complement_promotion", {"x": 0x5A}),
    # memory (6)
    ("mem-struct-reorder", "struct_reorder", {"members": ["char", "int", "char"], "order": [1, 0, 2]}),
    ("mem-struct-offsets", "struct_offsets", {"tag": "rec", "members": [
        ["id", "short"], ["flag", "char"], ["weight", "double"], ["name", "char[5]"], ["count", "int"]]}),
    ("mem-2d-array-address", "array_address",
     {"elem": "long", "rows": 6, "cols": 9, "base": 0x601040, "i": 4, "j": 7}),
    ("mem-struct-pointer-step", "pointer_step", {"members": ["double", "char"], "base": 0x7FFC1000, "k": 3}),
    ("mem-nested-struct", "nested_struct", {"inner": ["char", "short"], "outer": ["char", "struct in", "double"]}),
    ("mem-union-pun", "union_pun", {"value": -2.7, "tag": 5}),
    # cache (6)
    ("cache-row-vs-column-major", "traversal_order",
     {"elem": "int", "rows": 4, "cols": 8, "base": 0x1000, "sets": 4, "ways": 1, "block": 8}),
    ("cache-trace-hit-and-conflict", "trace_outcomes",
     {"sets": 4, "ways": 1, "block": 16, "trace": [0x100, 0x104, 0x140, 0x108, 0x200, 0x134, 0x148, 0x13C]}),
    ("cache-address-split", "address_split",
     {"sets": 64, "ways": 4, "block": 32, "address": 0x1F3A7C, "next": 0x1F3A5F}),
    ("cache-streams-associativity", "streams_associativity",
     {"elem": "int", "n": 8, "base": 0x4000, "stride": 128, "capacity": 128, "block": 16}),
    ("cache-lru-not-fifo", "lru_replacement",
     {"sets": 2, "ways": 2, "block": 32, "trace": [0x010, 0x05C, 0x004, 0x03C, 0x088, 0x044, 0x018, 0x024]}),
    ("cache-two-passes", "two_passes",
     {"elem": "double", "n": 96, "stride": 2, "base": 0x10000, "sets": 16, "ways": 1, "block": 32}),
)

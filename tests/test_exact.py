"""The typed exact comparator and the bit-exact JSON codec, attacked with generated values."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gym_sysmath.exact import (
    dumps_exact,
    exact_equal,
    float_bits,
    float_from_bits,
    is_json_primitive_list,
    loads_exact,
)

# every float, NaNs with any sign and payload included (hypothesis generates those)
any_float = st.floats(allow_nan=True, allow_infinity=True)
primitives = st.one_of(st.booleans(), st.integers(), any_float, st.text(max_size=8))
json_values = st.recursive(
    st.one_of(primitives, st.none()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=4).filter(lambda k: k != "f64"), inner, max_size=3),
    ),
    max_leaves=12,
)
nan_payloads = st.integers(min_value=1, max_value=(1 << 52) - 1)


@given(json_values)
def test_reflexive_on_every_json_value(value):
    assert exact_equal(value, value)


@given(json_values)
def test_dumps_loads_round_trip_is_bit_exact(value):
    assert exact_equal(loads_exact(dumps_exact(value)), value)


@given(st.booleans())
def test_bool_never_passes_for_int_nor_int_for_bool(b):
    assert not exact_equal(b, int(b))
    assert not exact_equal(int(b), b)
    assert not exact_equal([b], [int(b)])


@given(st.integers(min_value=0))
def test_hex_string_never_passes_for_its_int(n):
    assert not exact_equal(hex(n), n)
    assert not exact_equal(n, hex(n))


@given(st.integers(min_value=-(2**53), max_value=2**53))
def test_int_never_equals_float_of_same_value(n):
    assert not exact_equal(n, float(n))
    assert not exact_equal(float(n), n)


@given(any_float, any_float)
def test_floats_equal_exactly_when_bits_equal(a, b):
    assert exact_equal(a, b) == (float_bits(a) == float_bits(b))


def test_negative_zero_is_not_zero():
    assert not exact_equal(-0.0, 0.0)
    assert not exact_equal([0.0], [-0.0])
    assert exact_equal(-0.0, -0.0)


@given(nan_payloads, st.booleans())
def test_nan_matches_only_its_own_bits(payload, negative):
    bits = (negative << 63) | (0x7FF << 52) | payload
    nan = float_from_bits(bits)
    assert math.isnan(nan)
    assert exact_equal(nan, float_from_bits(bits))
    other = float_from_bits(bits ^ 1 if payload ^ 1 else bits ^ 2)
    assert not exact_equal(nan, other)
    assert exact_equal(loads_exact(dumps_exact([nan])), [nan])


@given(st.lists(primitives, min_size=1, max_size=6), st.data())
def test_lists_must_match_length_and_every_element_type(values, data):
    assert not exact_equal(values, values[:-1])
    assert not exact_equal(values, [*values, values[0]])
    i = data.draw(st.integers(min_value=0, max_value=len(values) - 1))
    swapped = list(values)
    v = values[i]
    swapped[i] = int(v) if isinstance(v, bool) else str(v) if not isinstance(v, str) else v + "x"
    assert not exact_equal(values, swapped)


def test_nested_types_must_match():
    assert exact_equal([[1, True], [0.5]], [[1, True], [0.5]])
    assert not exact_equal([[1, True]], [[1, 1]])
    assert not exact_equal([[1]], [1])
    assert not exact_equal([1, 2], (1, 2))  # a tuple is not a JSON list


def test_values_outside_json_never_compare_equal():
    assert not exact_equal((1,), (1,))
    assert not exact_equal(b"x", b"x")


def test_dumps_tags_floats_by_bits_and_refuses_what_it_cannot_read_back():
    assert json.loads(dumps_exact([1.0])) == [{"f64": "0x3ff0000000000000"}]
    with pytest.raises(ValueError):
        dumps_exact({"f64": "0x0000000000000000"})
    with pytest.raises(TypeError):
        dumps_exact([(1, 2)])


@pytest.mark.parametrize("tag", ['{"f64": "0x3FF0000000000000"}', '{"f64": "0x1"}', '{"f64": 1.0}'])
def test_loads_rejects_malformed_float_tags(tag):
    with pytest.raises(ValueError):
        loads_exact(tag)


@given(st.lists(primitives, min_size=1))
def test_primitive_lists_are_recognised(values):
    assert is_json_primitive_list(values)


@pytest.mark.parametrize("value", [[], [None], [[1]], [{"a": 1}], (1,), 1, "[1]", None])
def test_non_primitive_lists_are_rejected(value):
    assert not is_json_primitive_list(value)

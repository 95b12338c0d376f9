"""The counted run's count file is believed only when the whole of it is cachegrind's: a program
that cut cachegrind's write short right after a line it planted (a symbol's name may hold
newlines) must get no count, never the number it planted."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gym_sysmath.sandbox.image.supervisor.counting import parse_count

HEADER = (b"desc: I1 cache:         32768 B, 64 B, 8-way associative\n"
          b"desc: D1 cache:         49152 B, 64 B, 12-way associative\n"
          b"desc: LL cache:         536870912 B, 64 B, 2-way associative\n"
          b"cmd: python3 -s -P main.py\nevents: Ir\n")


def count_file(functions: list[tuple[str, list[tuple[int, int]]]], planted: bytes = b"") -> bytes:
    body = b"".join(b"fl=./x.c\nfn=" + name.encode() + b"\n" + b"".join(b"%d %d\n" % row for row in rows)
                    for name, rows in functions)
    total = sum(count for _, rows in functions for _, count in rows)
    return HEADER + planted + body + b"summary: %d\n" % total


FUNCTIONS = [("main", [(3, 120), (4, 7)]), ("__libc_start_main@@GLIBC_2.34", [(128, 2)]), ("???", [(0, 131)])]


def test_cachegrinds_own_file_gives_its_summary():
    assert parse_count(count_file(FUNCTIONS)) == 260


def test_a_summary_planted_in_a_symbol_name_and_the_write_cut_after_it_gives_no_count():
    planted = b"fn=\x01\nsummary: 4000000\n" + b"\n" * 300
    whole = count_file(FUNCTIONS, planted)
    cut = whole.index(b"summary: 4000000\n") + len(b"summary: 4000000\n")
    assert parse_count(whole[:cut]) is None
    assert parse_count(whole[:cut + 1]) is None
    assert parse_count(whole) is None  # blank lines are not cachegrind's


def test_a_row_planted_in_a_symbol_name_does_not_match_the_summary():
    assert parse_count(count_file(FUNCTIONS, b"fn=x\n1 5\n")) is None


@given(st.lists(st.tuples(st.text("abc_?@.", min_size=1, max_size=8),
                          st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**9)), min_size=1, max_size=4)),
                min_size=1, max_size=6),
       st.data())
def test_any_cut_short_file_gives_no_count(functions, data):
    whole = count_file(functions)
    assert parse_count(whole) == sum(count for _, rows in functions for _, count in rows)
    cut = data.draw(st.integers(0, len(whole) - 1))
    assert parse_count(whole[:cut]) is None


def test_a_file_without_the_ir_header_or_with_text_rows_gives_no_count():
    assert parse_count(count_file(FUNCTIONS).replace(b"events: Ir", b"events: Ir Dr")) is None
    assert parse_count(count_file(FUNCTIONS).replace(b"3 120", b"3 12O")) is None
    assert parse_count(b"summary: 1\n") is None

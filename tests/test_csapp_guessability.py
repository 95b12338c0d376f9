"""The train split is not a guessing game, and the virtual-memory questions show only states a
machine can be in.

The audit (``guessability``) draws train instances of every template the way the train split
does and holds each answer field to ``THRESHOLD``: no constant may answer it more than 80% of
the time. The impossible-state checks here are written apart from ``vm.impossible_states`` and
from the samplers: they recount entries and lines per set from the parameters themselves.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from gym_sysmath.exact import dumps_exact
from gym_sysmath.tasks.csapp import guessability, vm
from gym_sysmath.tasks.csapp.catalog import EVAL_SET, TEMPLATES
from gym_sysmath.tasks.csapp.template import TrapError, instantiate
from gym_sysmath.tasks.csapp.train import sample_from

DRAWS = 300

@pytest.fixture(scope="module")
def audited() -> tuple[dict[str, list[guessability.FieldGuess]], dict[str, str]]:
    errors: dict[str, str] = {}
    rows = guessability.audit(DRAWS, seed=0, jobs=2, errors=errors)
    by_template: dict[str, list[guessability.FieldGuess]] = {}
    for row in rows:
        by_template.setdefault(row.template, []).append(row)
    return by_template, errors


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_no_field_is_answered_by_a_constant(name, audited):
    by_template, errors = audited
    assert name not in errors, errors.get(name)
    rows = by_template[name]
    assert rows and all(r.draws <= DRAWS for r in rows) and rows[0].draws == DRAWS
    assert [r.position for r in rows] == list(range(1, len(rows) + 1))
    bad = [f"#{r.position} {r.field}: {dumps_exact(r.best)} in {r.share:.0%}" for r in rows if r.offends]
    assert not bad, bad


@pytest.mark.parametrize(("name", "position"), [
    ("address_translation", 5), ("translate_then_cache", 1), ("translate_then_cache", 7), ("tlb_trace", 1),
    ("trace_outcomes", 1), ("lru_replacement", 1),
])
def test_hits_and_misses_are_both_common(name, position, audited):
    row = audited[0][name][position - 1]
    assert row.best in (True, False) and 0.35 <= row.share <= 0.65, row


def test_the_audit_counts_by_position_and_renders_a_table():
    template = TEMPLATES["trace_outcomes"]  # 6 to 10 accesses, then the miss count
    rows = guessability.audit_template(template, draws=40, seed=3)
    assert [r.position for r in rows] == list(range(1, len(rows) + 1))
    assert rows[0].draws == 40 and rows[-1].draws < 40  # only the longest traces reach the last position
    assert rows[0].field == "whether access 1 (address ...) hits"
    assert guessability.audit_template(template, draws=40, seed=3) == rows  # the seed decides the draws
    forced = guessability.FieldGuess("t", 1, "a flag", True, 0.9, 10)
    text = guessability.lines([*rows, forced], {"u": "ValueError: bad"})
    assert text[0].split()[:3] == ["template", "pos", "share"]
    assert any("OFFENDER" in line and line.startswith("t ") for line in text)
    assert "ERROR u: its draws failed: ValueError: bad" in text
    assert text[-1].startswith("guessability: ") and "t#1" in text[-1]
    assert forced in guessability.offenders([*rows, forced]) and guessability.THRESHOLD == 0.8


# --- impossible states, recounted from the parameters ----------------------------------------------


def shown_state_problems(p: dict) -> list[str]:
    """What a TLB, page table or direct-mapped cache shown in ``p`` cannot hold, recounted here."""
    problems = []
    offset_bits = p["page"].bit_length() - 1
    table: dict[int, set[int]] = {}
    for vpn, ppn in p.get("pt", []):
        table.setdefault(vpn, set()).add(ppn)
        if ppn >> (p["pbits"] - offset_bits) or vpn >> (p["vbits"] - offset_bits):
            problems.append(f"page-table entry {vpn}->{ppn} too wide")
    problems += [f"VPN {v} has PPNs {sorted(s)}" for v, s in table.items() if len(s) > 1]
    ways_used = Counter(s for s, _, _ in p.get("tlb", []))
    problems += [f"TLB set {s}: {n} entries for {p['tlb_ways']} ways" for s, n in ways_used.items()
                 if n > p["tlb_ways"]]
    pairs = Counter((s, t) for s, t, _ in p.get("tlb", []))
    problems += [f"TLB set {s} tag {t} twice" for (s, t), n in pairs.items() if n > 1]
    for s, t, ppn in p.get("tlb", []):
        vpn = t * p["tlb_sets"] + s
        if s >= p["tlb_sets"] or vpn >> (p["vbits"] - offset_bits) or ppn >> (p["pbits"] - offset_bits):
            problems.append(f"TLB entry {s}/{t}->{ppn} out of range")
        if vpn in table and table[vpn] != {ppn}:
            problems.append(f"TLB entry {s}/{t} says VPN {vpn} -> {ppn}, the page table {sorted(table[vpn])}")
    if "lines" in p:
        per_set = Counter(s for s, _ in p["lines"])
        problems += [f"direct-mapped set {s} holds {n} lines" for s, n in per_set.items() if n > 1]
        tag_bits = p["pbits"] - (p["block"].bit_length() - 1) - (p["cache_sets"].bit_length() - 1)
        problems += [f"cache line {s}/{t} out of range" for s, t in p["lines"]
                     if s >= p["cache_sets"] or t >> max(tag_bits, 0)]
    return problems


@pytest.mark.parametrize("name", ["address_translation", "translate_then_cache"])
def test_vm_samplers_never_show_an_impossible_state(name):
    template = TEMPLATES[name]
    shown = 0
    for seed in range(200):  # 2,000 draws of the sampler itself, from many generators
        rng = np.random.default_rng([seed, 22])
        for _ in range(10):
            params = template.sample(rng)
            assert shown_state_problems(params) == [], params
            assert vm.impossible_states(params) == [], params
            shown += 1
    assert shown == 2000


@pytest.mark.parametrize("name", ["address_translation", "translate_then_cache"])
def test_train_tasks_show_a_possible_state_and_hit_both_ways(name):
    rng = np.random.default_rng(8)
    hits = Counter()
    for _ in range(200):
        task = sample_from(rng, TEMPLATES[name])
        assert shown_state_problems(task.params) == []
        hits[task.answer[4 if name == "address_translation" else 0]] += 1
    assert min(hits[True], hits[False]) >= 60, hits


def test_eval_tasks_show_possible_states():
    for task_id, _, params in EVAL_SET:
        if "tlb" in params or "lines" in params:
            assert shown_state_problems(params) == [] and vm.impossible_states(params) == [], task_id


def _translation_eval() -> dict:
    return next(p for tid, _, p in EVAL_SET if tid == "vm-translate-then-cache")


@pytest.mark.parametrize(("change", "problem"), [
    (lambda p: p["tlb"].extend([[9, 1, 3], [9, 2, 4], [9, 3, 5], [9, 4, 6]]), "more than its 4 ways"),
    (lambda p: p["tlb"].append([858 % 16, 858 // 16, 89]), "the page table to"),  # the table: 858 -> 88
    (lambda p: p["tlb"].append([1, 6, 140]), "times"),
    (lambda p: p["lines"].append([47, 3]), "more than its 1 way"),
    (lambda p: p["lines"].append([47, 1 << 20]), "does not fit"),
])
def test_the_trap_refuses_an_impossible_state(change, problem):
    params = _translation_eval()
    params = {**params, "tlb": [list(e) for e in params["tlb"]], "lines": [list(e) for e in params["lines"]]}
    instantiate(TEMPLATES["translate_then_cache"], params, "before")  # the eval state itself is possible
    change(params)
    assert shown_state_problems(params)
    assert any(problem in p for p in vm.impossible_states(params)), vm.impossible_states(params)
    with pytest.raises(TrapError, match="a state a machine can be in"):
        instantiate(TEMPLATES["translate_then_cache"], params, "changed")


# --- the TLB trace says what its TLB is ---------------------------------------------------------------


def test_a_one_way_tlb_is_called_direct_mapped_and_its_eval_id_says_what_it_is():
    ids = {tid for tid, _, _ in EVAL_SET}
    assert "vm-tlb-trace-two-sets" in ids and "vm-tlb-trace-two-way" not in ids
    template = TEMPLATES["tlb_trace"]
    for tid, name, params in EVAL_SET:
        if name == "tlb_trace":
            text = template.question(params)
            assert params["tlb_ways"] == 1 and "direct-mapped (1-way)" in text, tid
            assert "LRU" not in text and "1-way set-associative" not in text, tid
    two_way = {**next(p for tid, _, p in EVAL_SET if tid == "vm-tlb-trace"), "tlb_ways": 2}
    assert "2-way set-associative" in template.question(two_way) and "LRU" in template.question(two_way)


def test_a_warm_up_makes_the_first_asked_access_able_to_hit():
    p = {"vbits": 20, "pbits": 20, "page": 256, "tlb_sets": 2, "tlb_ways": 1, "warm": [0x1234],
         "trace": [0x1200, 0x5700, 0x1280]}
    assert vm.tlb_outcomes(p) == vm.tlb_outcomes_by_time(p) == [True, False, True, 1]
    assert "not asked about" in TEMPLATES["tlb_trace"].question(p)

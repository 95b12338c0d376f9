"""Model-keyed CS:APP answers against the real programs, both ways: every output a key calls
possible is printed by the real program made to follow a schedule for it, every output a run
prints is allowed, and fork programs are the textbook ones (no reaper of their own).

The sandbox tests here are the train split's oracle in CI: fresh draws of every processes and
concurrency template, not the eval list, and mutants of the models that allow too much."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gym_sysmath.tasks.csapp import concurrency, processes, runs
from gym_sysmath.tasks.csapp.catalog import EVAL_SET, TEMPLATES
from gym_sysmath.tasks.csapp.schedules import (
    GATE_RUN_MARK,
    PRODUCE_TIMEOUT_MS,
    STUCK_LINE,
    Forcing,
    actor_schedule,
    line_schedule,
    split_batches,
)
from gym_sysmath.tasks.csapp.template import RunCheck, instantiate
from gym_sysmath.tasks.csapp.toolchain import ProgramResult
from gym_sysmath.tasks.csapp.train import sample_from

FORCED = [t for t in TEMPLATES.values() if t.runs is not None]
#: Draws per template here; ``verify csapp`` (tests/test_csapp_tasks.py) puts 50 of every
#: template to the same check in CI.
TRAIN_DRAWS = 12


def _draws(template, count: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    out = {}
    for _ in range(count):
        task = sample_from(rng, template)
        out.setdefault(task.task_id, task)
    return list(out.values())


# --- the models: the textbook fork semantics and the stated signal rule ----------------------------


def test_a_child_ends_at_its_exit_while_its_own_child_runs_on():
    """The train seed 119 class: the parent's line after wait may come before the grandchild's,
    since a child that did not wait for its child still ends at exit(0)."""
    body = [["child", [["say", "C"], ["child", [["say", "G"]]]]], ["wait"], ["say", "P"]]
    every = processes.outputs(body, 0)
    assert ("C", "P", "G") in every and ("C", "G", "P") in every
    assert every == processes.unfolded_outputs(body, 0)


def test_the_program_shown_reaps_nothing_itself():
    source = processes.render_c([["fork"], ["say", "A"]], 0)
    assert "atexit" not in source and "while (wait" not in source
    assert "ended (an orphan is adopted" in processes.STATED


def test_a_pending_signal_comes_before_the_parents_next_statement():
    """Under SIGNAL_RULES the eval task proc-signals-merge-interleaved has 66 outputs (83 when a
    signal could stay pending across the parent's own say)."""
    _, _, params = next(e for e in EVAL_SET if e[0] == "proc-signals-merge-interleaved")
    assert processes._signals(params) == processes._signals(params, model=processes.signal_outputs_by_merging)
    assert processes._signals(params)[2] == 66
    # the child kills, then the parent says p: "p" can never come between a kill and its "sig"
    solo = {"kills": 1, "child_says": [], "parent_says": True}
    assert processes.signal_outputs(solo) == {("p", "sig", "done"), ("sig", "p", "done")}


def test_the_signal_rule_is_in_the_prompt():
    _, name, params = next(e for e in EVAL_SET if e[0] == "proc-signals-merge")
    assert processes.SIGNAL_RULES in TEMPLATES[name].question(params)


@settings(max_examples=60, deadline=None)
@given(kills=st.integers(1, 4), says=st.sets(st.integers(0, 3), max_size=2), parent_says=st.booleans())
def test_every_signal_output_has_a_witness_that_replays_to_it(kills, says, parent_says):
    params = {"kills": kills, "child_says": sorted(s for s in says if s < kills), "parent_says": parent_says}
    for output in processes.signal_outputs(params):
        events = processes.signal_witness(params, output)
        assert events.count((1, "S")) == kills + len(params["child_says"])
        assert events.count((0, "D")) == output.count("sig")


@pytest.mark.parametrize("template", [concurrency.LOST_UPDATE, concurrency.MUTEX_OUTPUTS,
                                      concurrency.SEMAPHORE_ORDER], ids=lambda t: t.name)
def test_every_thread_output_has_a_witness_of_the_threads_steps(template):
    rng = np.random.default_rng(3)
    for _ in range(10):
        params = template.sample(rng)
        threads = [concurrency.steps_of(t) for t in params["threads"]]
        for output in concurrency._allowed(params):
            order = concurrency.witness(threads, params["mem"], params.get("final"), output)
            assert sorted(order) == sorted(i for i, t in enumerate(threads) for _ in t)


def test_an_output_no_schedule_prints_has_no_witness():
    params = {"kills": 2, "child_says": [], "parent_says": False}
    with pytest.raises(ValueError, match="no schedule"):
        processes.signal_witness(params, ("done",))


# --- reading forced runs, without a sandbox -----------------------------------------------------------


def _check(allowed: set[str], produce: tuple[str, ...], refute: tuple[str, ...] = ()) -> RunCheck:
    forcing = Forcing("", tuple(line_schedule(o.split(), 1000) for o in produce),
                      tuple(line_schedule(o.split(), 100) for o in refute))
    return RunCheck("", frozenset(allowed), forced=forcing)


def _batch(*runs: tuple[str, int]) -> ProgramResult:
    """The forced program's result: one batch, each run's output then its separator."""
    return ProgramResult(built=True, outputs=("".join(f"{out}{GATE_RUN_MARK}{code}\n" for out, code in runs),),
                         exit_codes=(0,))


def test_a_batch_splits_into_its_runs_and_a_cut_batch_loses_only_its_tail():
    whole = _batch(("A\nB\n", 0), ("", 97), ("B\nA\n", 0)).outputs[0]
    assert split_batches([whole]) == [("A\nB\n", 0), ("", 97), ("B\nA\n", 0)]
    cut = whole[:whole.rindex(GATE_RUN_MARK)] + "<timed out>\n"
    assert split_batches([cut, whole]) == [("A\nB\n", 0), ("", 97), ("A\nB\n", 0), ("", 97), ("B\nA\n", 0)]


def test_an_allowed_output_the_gate_cannot_produce_fails_the_check():
    check = _check({"A\nB\n", "B\nA\n"}, ("A B", "B A"))
    plain = ProgramResult(built=True, outputs=("A\nB\n",) * 5, exit_codes=(0,) * 5)
    forced = _batch(("A\nB\n", 0), (f"{STUCK_LINE}\n", 97))
    problems = runs.run_problems(check, plain, forced)
    assert any("which the key calls possible" in p for p in problems)
    assert any("no run printed it" in p for p in problems)


def test_a_refuted_output_the_gate_produces_fails_the_check():
    check = _check({"A\nB\n"}, ("A B",), refute=("B A",))
    plain = ProgramResult(built=True, outputs=("A\nB\n",), exit_codes=(0,))
    forced = _batch(("A\nB\n", 0), ("B\nA\n", 0))
    assert any("calls impossible" in p for p in runs.run_problems(check, plain, forced))


def test_without_forcing_every_allowed_output_must_still_be_seen():
    check = RunCheck("", frozenset({"A\nB\n", "B\nA\n"}))
    plain = ProgramResult(built=True, outputs=("A\nB\n",) * 3, exit_codes=(0,) * 3)
    assert any("no run printed it" in p for p in runs.run_problems(check, plain))


def test_every_forced_template_forces_every_allowed_output():
    for task_id, name, params in EVAL_SET:
        template = TEMPLATES[name]
        check = template.runs(params) if template.runs else None
        if check is None or check.forced is None:
            continue
        assert {s.output for s in check.forced.produce} == check.allowed, task_id
        assert not {s.output for s in check.forced.refute} & check.allowed, task_id


# --- the real programs, in the sandbox ------------------------------------------------------------


@pytest.mark.parametrize("template", FORCED, ids=lambda t: t.name)
def test_train_draws_agree_with_the_real_program_both_ways(template, docker_available):
    """The train split's oracle: fresh draws of each processes and concurrency template, every
    allowed output forced and printed, every printed output allowed."""
    tasks = _draws(template, TRAIN_DRAWS, seed=sum(map(ord, template.name)))
    reports = runs.check_runs(tasks, plain_runs=runs.TRAIN_PLAIN_RUNS)
    assert [(r.task_id, r.problems) for r in reports if r.problems] == []
    if template.runs(tasks[0].params).forced is not None:
        assert all(r.forced >= 1 for r in reports)


def test_a_model_that_ignores_a_reaper_is_caught(docker_available, monkeypatch):
    """The mistake the issue found: the programs reaped their children at exit, so a child with
    a running grandchild could not end, and the models (process done at exit) allowed outputs
    the program never prints. Put the reaper back: forcing must catch it on the draws that have
    a grandchild, where plain runs alone pass."""
    reaper = ("static void reap(void) { while (wait(NULL) > 0) ; }\n"
              "__attribute__((constructor)) static void reap_at_exit(void) { atexit(reap); }\n")
    reaping = processes.C_PRELUDE.replace("#define fork fork_checked\n", f"#define fork fork_checked\n{reaper}")
    monkeypatch.setattr(processes, "C_PRELUDE", reaping)
    monkeypatch.setattr(processes, "PRODUCE_TIMEOUT_MS", 300)
    rng = np.random.default_rng(119)
    tasks = []
    while len(tasks) < 3:
        task = sample_from(rng, processes.ORDERINGS)
        params = task.params
        deep = [s for s in params["body"] if s[0] == "child" and any(t[0] == "child" for t in s[1])]
        if deep and any(s[0] == "wait" for s in params["body"]) and len(processes.outputs(params["body"], 0)) > 2:
            tasks.append(task)
    caught = [r for r in runs.check_runs(tasks) if r.problems]
    assert caught and all("which the key calls possible" in " ".join(r.problems) for r in caught)


def test_a_model_that_queues_signals_is_caught(docker_available):
    """A signal model that queues kills (each runs the handler once) finds its outputs by
    schedules the kernel's one pending bit rules out: three kills before any delivery, then
    three deliveries. Forced, the second delivery finds nothing pending."""
    params = {"kills": 3, "child_says": [], "parent_says": False}
    parent, child = processes._signal_events(params)

    def queued_witness(output, state=(0, 0, 0, False), printed=0):  # the queued model's moves, searched alike
        if state[0] == len(parent):
            return () if printed == len(output) else None
        for line, event, after in processes._signal_moves(parent, child, state, True):
            if line is not None and (printed == len(output) or output[printed] != line):
                continue
            rest = queued_witness(output, after, printed + (line is not None))
            if rest is not None:
                return (event, *rest)
        return None

    check = processes._signal_runs(params)
    wrong = tuple(actor_schedule(queued_witness(o), o, PRODUCE_TIMEOUT_MS)
                  for o in sorted(processes.signal_outputs(params, queued=True)))
    mutant = dataclasses.replace(check, forced=dataclasses.replace(check.forced, produce=wrong))
    plain, forced = runs.run_programs(runs.programs_of(mutant))
    problems = runs.run_problems(mutant, plain, forced)
    assert any("which the key calls possible" in p and "(status 97)" in p for p in problems)


def test_the_eval_programs_agree_both_ways(docker_available):
    tasks = [instantiate(TEMPLATES[name], params, task_id) for task_id, name, params in EVAL_SET
             if TEMPLATES[name].runs is not None]
    reports = runs.check_runs(tasks)
    assert [(r.task_id, r.problems) for r in reports if r.problems] == []
    assert sum(r.forced for r in reports) > 200 and sum(r.refuted for r in reports) > 0


def test_orderings_refute_the_orders_only_wait_rules_out():
    """The refuted schedules are not absurd shuffles: besides the impossible candidates, they are
    orders that keep every process's lines in program order and that only wait forbids."""
    for task_id, name, params in EVAL_SET:
        if name != "fork_wait_orderings":
            continue
        check = TEMPLATES[name].runs(params)
        loose = {processes._text(o) for o in processes.outputs(processes._strip_waits(params["body"]), 0)}
        candidates = {processes._text(tuple(c)) for c in params["candidates"]}
        refuted = {s.output for s in check.forced.refute}
        assert refuted <= (loose | candidates) - check.allowed, task_id
        assert len(refuted & loose - candidates) >= 3, task_id

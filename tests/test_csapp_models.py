"""Processes, virtual memory and concurrency: the models behind their keys, held to known facts,
to a second model on many draws, and (in the sandbox) to the real C programs."""

from __future__ import annotations

import numpy as np
import pytest

from gym_sysmath.exact import exact_equal
from gym_sysmath.tasks.csapp import STANDARD_LEVELS, concurrency, load_tasks, processes, sample_task, task_level, vm
from gym_sysmath.tasks.csapp.catalog import EVAL_SET, TEMPLATES
from gym_sysmath.tasks.csapp.runs import check_runs, run_problems
from gym_sysmath.tasks.csapp.template import VOID_RUN, RunCheck, TrapError, instantiate
from gym_sysmath.tasks.csapp.toolchain import ProgramResult

NEW = ("processes", "vm", "concurrency")
TASKS = [t for t in load_tasks() if t.category in NEW]
MODULES = (processes, vm, concurrency)


def test_eval_counts_of_the_new_categories():
    counts = {c: sum(t.category == c for t in TASKS) for c in NEW}
    assert counts == {"processes": 8, "vm": 8, "concurrency": 7}


def test_every_new_template_has_a_second_model_and_model_keyed_c_has_runs():
    for module in MODULES:
        for template in module.TEMPLATES:
            assert template.independent is not None, template.name
            assert (template.runs is not None) == (module is not vm), template.name


def test_second_models_agree_on_every_eval_task():
    for task in TASKS:
        assert exact_equal(TEMPLATES[task.template].independent(task.params), task.answer), task.task_id


@pytest.mark.parametrize("template", [t for m in MODULES for t in m.TEMPLATES], ids=lambda t: t.name)
def test_second_models_agree_on_train_draws(template):
    rng = np.random.default_rng(sum(map(ord, template.name)))
    checked = 0
    while checked < 12:
        try:
            task = instantiate(template, template.sample(rng), "draw")
        except TrapError:
            continue
        except Exception as err:
            if "wrong reading" not in str(err):
                raise
            continue
        assert exact_equal(template.independent(task.params), task.answer), task.params
        checked += 1


@pytest.mark.parametrize("level", STANDARD_LEVELS)  # the starter level is integers and bits only
def test_train_split_draws_each_new_category_at_each_level(level):
    rng = np.random.default_rng(17)
    for category in NEW:
        task = sample_task(rng, (category,), difficulty=level)
        assert task.category == category and task_level(task) == level


# --- the models against facts known independently ---------------------------------------------------


def test_two_bare_forks_print_four_lines_and_a_child_block_exits():
    body = [["fork"], ["fork"], ["say", "X"]]
    assert {len(o) for o in processes.outputs(body, 0)} == {4}
    assert processes.outputs([["child", [["say", "C"]]], ["say", "P"]], 0) == {("C", "P"), ("P", "C")}


def test_wait_orders_the_parent_after_its_child():
    body = [["child", [["say", "C"]]], ["wait"], ["say", "P"]]
    assert processes.outputs(body, 0) == processes.unfolded_outputs(body, 0) == {("C", "P")}


def test_pending_signals_merge():
    params = {"kills": 3, "child_says": [], "parent_says": False}
    counts = {o.count("sig") for o in processes.signal_outputs(params)}
    assert counts == {1, 2, 3}
    assert {o.count("sig") for o in processes.signal_outputs(params, queued=True)} == {3}
    assert all(o[-1] == "done" for o in processes.signal_outputs(params))


def test_two_threads_of_n_increments_can_end_at_two():
    params = {"threads": [[["inc", "count", 3]], [["inc", "count", 3]]], "mem": {"count": 0}, "final": "count"}
    assert concurrency._lost(params) == [2, 6, 5]
    params = {"threads": [[["inc", "count", 2]], [["inc", "count", 4]]], "mem": {"count": 10}, "final": "count"}
    assert concurrency._lost(params)[:2] == [12, 16]


def test_a_printed_shared_value_may_be_stale():
    # B reads x (1) before A stores 2 and prints it; B's line comes last but shows the old value
    params = {"threads": [[["add", "x", 1], ["show", "A", "x"]], [["show", "B", "x"]]], "mem": {"x": 1}, "final": None}
    assert ("A 2", "B 1") in concurrency._allowed(params)


def test_a_semaphore_at_zero_orders_post_before_wait():
    params = {"threads": [[["P", "s"], ["say", "after"]], [["say", "before"], ["V", "s"]]], "mem": {"s": 0}}
    assert concurrency._allowed(params) == {("before", "after")}


def test_belady_classic_string():
    refs = [1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5]
    assert (vm.faults(refs, 3, "fifo"), vm.faults(refs, 4, "fifo")) == (9, 10)
    assert (vm.faults_from_history(refs, 3, "fifo"), vm.faults_from_history(refs, 4, "fifo")) == (9, 10)
    assert vm.faults(refs, 4, "lru") <= vm.faults(refs, 3, "lru")


def test_translation_by_hand():
    # 4 KiB pages, 4-set TLB: va 0x12345 -> VPN 0x12, VPO 0x345, index 2, tag 0x4
    params = {"vbits": 20, "pbits": 20, "page": 4096, "tlb_sets": 4, "tlb_ways": 1, "tlb": [[2, 4, 0x7]],
              "pt": [], "va": 0x12345}
    assert vm.translate(params) == ["0x12", "0x345", 2, "0x4", True, "0x7", "0x7345"]
    assert vm.translate_by_bits(params) == vm.translate(params)


# --- traps ---------------------------------------------------------------------------------------------


def _eval_params(task_id: str) -> tuple[str, dict]:
    _, name, params = next(e for e in EVAL_SET if e[0] == task_id)
    return name, params


@pytest.mark.parametrize(("task_id", "change"), [
    ("proc-signals-merge", {"kills": 1, "child_says": []}),
    ("vm-fifo-more-frames", {"refs": [1, 2, 3, 1, 2, 3]}),
    ("vm-translate-decoy-tag", {"tlb": []}),
    ("conc-lost-updates", {"threads": [[["inc", "count", 1]], [["inc", "count", 1]]]}),
])
def test_a_parameter_change_that_empties_the_question_fails_the_build(task_id, change):
    name, params = _eval_params(task_id)
    with pytest.raises(TrapError):
        instantiate(TEMPLATES[name], {**params, **change}, task_id)


# --- the run check, without a sandbox ---------------------------------------------------------------


def test_an_output_the_model_rules_out_fails_the_run_check():
    check = RunCheck("int main(void){}", frozenset({"A\nB\n"}))
    result = ProgramResult(built=True, outputs=("A\nB\n", "B\nA\n"), exit_codes=(0, 0))
    assert any("rules out" in p for p in run_problems(check, result))


def test_void_runs_are_not_evidence_but_too_many_fail_the_check():
    check = RunCheck("int main(void){}", frozenset({"A\n"}), void="fork failed")
    assert check.observed("A\nfork failed\n") == VOID_RUN
    few = ProgramResult(built=True, outputs=("A\n",) * 19 + ("fork failed\n",), exit_codes=(0,) * 19 + (99,))
    assert run_problems(check, few) == []
    many = ProgramResult(built=True, outputs=("A\n", "fork failed\n") * 5, exit_codes=(0, 99) * 5)
    assert any("void" in p for p in run_problems(check, many))


def test_sorted_lines_compare_ignores_order_only():
    check = RunCheck("", frozenset({"A\nB\nB\n"}), compare="sorted lines")
    assert check.observed("B\nA\nB\n") in check.allowed
    assert check.observed("B\nA\n") not in check.allowed


# --- the real programs, in the sandbox -------------------------------------------------------------------


def test_every_output_of_the_real_programs_is_one_the_model_allows(docker_available):
    reports = check_runs(TASKS)
    assert len(reports) == sum(t.category != "vm" for t in TASKS)
    assert [(r.task_id, r.problems) for r in reports if r.problems] == []
    assert all(r.runs == 200 for r in reports)
    assert max(r.distinct for r in reports) > 10  # the runs do interleave: the check is not vacuous

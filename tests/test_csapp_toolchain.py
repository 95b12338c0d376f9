"""CsappExact keyed by the real toolchain: machine and linking tasks, compiled.json, the C checks.

The sandbox runs gcc here (Docker, as everywhere in this suite): the C of C-code questions must
print its key, machine and linking programs must rebuild to what compiled.json recorded, and
tampering with either is caught.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from gym_sysmath.exact import dumps_exact, exact_equal
from gym_sysmath.tasks.csapp import compiled, cprint, load_tasks, sample_task
from gym_sysmath.tasks.csapp.catalog import EVAL_SET, TEMPLATES
from gym_sysmath.tasks.csapp.taskfile import render_task_file
from gym_sysmath.tasks.csapp.template import BuildError, instantiate
from gym_sysmath.tasks.csapp.toolchain import Program, run_programs, single_file
from gym_sysmath.tasks.csapp.verify import program_of, verify

TASKS = load_tasks()
BY_ID = {t.task_id: t for t in TASKS}

#: The first 40 eval tasks as they shipped before machine and linking existed; their ids and
#: keys must never change (a digest of "id<TAB>key" lines, in this order).
ORIGINAL_IDS = (
    "int-unsigned-minus-one", "int-unsigned-difference", "int-shift-signed-vs-unsigned", "int-negate-int-min",
    "int-add-overflow-wraps", "int-short-product-promotion", "int-plain-char-is-signed", "int-mixed-sign-compare",
    "int-division-truncates", "int-sign-extension", "int-narrowing-cast", "int-midpoint-overflow",
    "float-sum-not-associative", "float-2p24-plus-one", "float-decode-bits", "float-double-to-float",
    "float-underflow-negative-zero", "float-nan-comparisons", "float-overflow-to-infinity", "float-accumulated-step",
    "float-to-int-four-ways", "float-subnormal-halving", "bits-popcount-negative", "bits-lowest-set-bit",
    "bits-rotate-vs-shift", "bits-byte-order", "bits-signed-field", "bits-complement-promotion",
    "mem-struct-reorder", "mem-struct-offsets", "mem-2d-array-address", "mem-struct-pointer-step",
    "mem-nested-struct", "mem-union-pun", "cache-row-vs-column-major", "cache-trace-hit-and-conflict",
    "cache-address-split", "cache-streams-associativity", "cache-lru-not-fifo", "cache-two-passes",
)
#: Issue 22 rebalanced the guessable fields of some of them: new keys (CHANGELOG), the same ids.
ORIGINAL_DIGEST = "d165c9c603934ca30e3c9127e3649d5a3f8dc4d839937a88997e7c911c093159"

TOOLCHAIN_CATEGORIES = ("machine", "linking")


def _toolchain_tasks():
    return [t for t in TASKS if t.category in TOOLCHAIN_CATEGORIES]


def test_the_original_forty_keep_their_ids_and_keys():
    text = "".join(f"{i}\t{dumps_exact(BY_ID[i].answer)}\n" for i in ORIGINAL_IDS)
    assert hashlib.sha256(text.encode()).hexdigest() == ORIGINAL_DIGEST
    assert [t.task_id for t in TASKS[:40]] == list(ORIGINAL_IDS)


def test_machine_and_linking_counts():
    counts = Counter(t.category for t in TASKS)
    assert counts["machine"] >= 10 and counts["linking"] >= 8
    assert {t.template for t in TASKS if t.category == "machine"} == {
        t.name for t in TEMPLATES.values() if t.category == "machine"}


def test_compiled_file_names_its_generator_and_holds_every_eval_program():
    header = json.loads(compiled.SOURCE_FILE.read_text())
    assert header["generated_by"] == "python -m gym_sysmath.tasks.csapp.compiled"
    for task in _toolchain_tasks():
        ran = compiled.outputs(compiled.FAMILIES[task.template].program(task.params))
        assert ran.outputs or not ran.built, task.task_id
    for name in compiled.FAMILIES:
        assert len(compiled.pool(name)) >= compiled.POOL_SIZE // 2, name


def test_machine_prompts_show_trimmed_assembly_and_the_command():
    for task in TASKS:
        if task.category == "machine":
            assert "-S f.c` (gcc 12.2, x86-64)" in task.instruction
            assert "\nf:\n" in task.instruction and "\tret" in task.instruction, task.task_id
            assert ".cfi_" not in task.instruction and ".ident" not in task.instruction


def test_each_toolchain_task_has_a_distractor_its_trap_ran():
    for task in _toolchain_tasks():
        assert task.distractors and all(not exact_equal(d, task.answer) for d in task.distractors)


def test_tentative_definitions_do_not_link_without_fcommon():
    # gcc 10 made -fno-common the default; the old rule (they merge) is the distractor
    assert BY_ID["link-tentative-no-common"].answer == [False, 0]
    assert [True, 7] in BY_ID["link-tentative-no-common"].distractors


def test_a_program_missing_from_compiled_json_is_a_build_error():
    _, name, params = next(e for e in EVAL_SET if e[0] == "asm-lea-wraps")
    with pytest.raises(BuildError, match=r"not in compiled\.json"):
        instantiate(TEMPLATES[name], {**params, "c": params["c"] + 1}, "asm-lea-wraps")


def test_train_draws_come_from_the_prebuilt_pool_deterministically():
    drawn = [sample_task(np.random.default_rng(seed), ("machine", "linking")) for seed in range(30)]
    again = [sample_task(np.random.default_rng(seed), ("machine", "linking")) for seed in range(30)]
    assert [t.task_id for t in drawn] == [t.task_id for t in again]
    for task in drawn:
        assert any(exact_equal(task.params, p) for p in compiled.pool(task.template)), task.task_id
        assert exact_equal(TEMPLATES[task.template].independent(task.params), task.answer)


def test_second_models_agree_with_the_keys_of_every_pool_instance():
    for name in compiled.FAMILIES:
        template = TEMPLATES[name]
        for params in compiled.pool(name):
            assert exact_equal(template.independent(params), template.reference(params)), (name, params)


def test_cache_second_model_agrees_on_fresh_draws():
    rng = np.random.default_rng(7)
    for template in TEMPLATES.values():
        if template.category == "cache":
            for _ in range(150):
                params = template.sample(rng)
                assert exact_equal(template.independent(params), template.reference(params)), (template.name, params)


# --- in the sandbox ------------------------------------------------------------------------------


def test_the_c_of_fresh_train_draws_prints_their_keys(docker_available):
    rng = np.random.default_rng(11)
    checks = []
    for template in TEMPLATES.values():
        if cprint.expressions(template, template.sample(rng)) is None:
            continue
        for _ in range(2):
            task = sample_task(rng, (template.category,))
            check = cprint.run_check(TEMPLATES[task.template], task.params, task.answer)
            if check is not None:
                checks.append((task, check))
    results = run_programs([single_file(c.source) for _, c in checks])
    for (task, check), result in zip(checks, results, strict=True):
        assert result.built, (task.task_id, result.build_log)
        assert result.outputs[0] in check.allowed, (task.task_id, task.params, result.outputs[0])


def test_every_c_task_has_a_program_for_verify_to_run():
    """verify runs the C of these (its counts are asserted in test_csapp_tasks' verify test):
    the 34 C-code questions of the first five categories, machine, linking, and RunChecks."""
    c_tasks = [t for t in TASKS if program_of(t) is not None]
    assert len(c_tasks) >= 34 + 18
    assert {t.category for t in TASKS if program_of(t) is None} <= {"cache", "vm", "processes", "concurrency"}
    assert all(TEMPLATES[t.template].independent is not None for t in TASKS if t.category == "cache")


def test_verify_catches_keys_the_toolchain_does_not_print(tmp_path, docker_available):
    """A forged key on a C-code task, a machine task and a linking task: the rebuilt C says so,
    and an untouched task beside them still passes."""
    forged = {"int-unsigned-minus-one": [4294967294, "0xfffffffe"], "asm-lea-wraps": [1],
              "link-static-variable": [0, 0]}
    chosen = [replace(BY_ID[i], answer=key) for i, key in forged.items()] + [BY_ID["asm-stack-arguments"]]
    fork = tmp_path / "fork.json"
    fork.write_text(render_task_file(chosen))
    report = verify(fork)
    failed = {f.task_id: " ".join(f.problems) for f in report.failures}
    assert set(failed) == set(forged)
    assert "printed" in failed["int-unsigned-minus-one"]
    assert "rebuilt program gives the key" in failed["asm-lea-wraps"]
    assert "rebuilt program gives the key" in failed["link-static-variable"]
    assert (report.c_programs, report.c_passed) == (4, 1)


def test_a_link_failure_is_reported_not_raised(docker_available):
    program = Program({"a.c": "int n = 1;\n", "b.c": "int n = 2;\nint main(void) { return n; }\n"},
                      (("gcc", "-c", "a.c"), ("gcc", "-c", "b.c"), ("gcc", "-o", "prog", "a.o", "b.o")))
    (result,) = run_programs([program])
    assert not result.built and result.failed_step == 2 and "multiple definition" in result.build_log

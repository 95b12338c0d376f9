"""The CsappExact task set: shipped file, executed keys, traps, distractors, train split, parsing."""

from __future__ import annotations

import json
import math
import random
import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gym_sysmath.exact import dumps_exact, exact_equal, float_bits, float_from_bits, loads_exact
from gym_sysmath.tasks.csapp import (
    CATEGORIES,
    CsappTask,
    TaskFileError,
    build,
    load_tasks,
    parse_answer_value,
    reference_code,
    sample_task,
)
from gym_sysmath.tasks.csapp.catalog import EVAL_SET, TEMPLATES
from gym_sysmath.tasks.csapp.machine import CacheGeometry, ctype, misses, simulate, struct_layout
from gym_sysmath.tasks.csapp.taskfile import GENERATED_BY, render_task_file
from gym_sysmath.tasks.csapp.template import BuildError, TrapError, instantiate
from gym_sysmath.tasks.csapp.verify import machine_anchors, verify

TASKS = load_tasks()
BY_ID = {t.task_id: t for t in TASKS}


def key_of(task_id: str) -> list:
    return BY_ID[task_id].answer


def build_with(task_id: str, **changes) -> CsappTask:
    """Instantiate an eval task's template with some parameters changed (a falsified case)."""
    _, name, params = next(entry for entry in EVAL_SET if entry[0] == task_id)
    return instantiate(TEMPLATES[name], {**params, **changes}, task_id)


# --- the shipped file ------------------------------------------------------------------------


def test_shipped_file_is_current():
    assert build.SOURCE_FILE.read_text(encoding="utf-8") == render_task_file(build.build_tasks())
    assert build.main(["--check"]) == 0


def test_check_fails_on_a_stale_file(tmp_path, capsys):
    stale = tmp_path / "tasks.json"
    stale.write_text(build.SOURCE_FILE.read_text().replace("4294967295", "4294967294"))
    assert build.main(["--check", "--output", str(stale)]) == 1


def test_header_names_the_command_that_regenerates_it():
    header = json.loads(build.SOURCE_FILE.read_text())
    assert header["generated_by"] == GENERATED_BY == "python -m gym_sysmath.tasks.csapp.build"


def test_the_tasks_with_the_category_counts():
    assert Counter(t.category for t in TASKS) == build.CATEGORY_COUNTS
    assert {"integers": 12, "floats": 10, "bits": 6, "memory": 6, "cache": 6}.items() <= build.CATEGORY_COUNTS.items()
    assert len(BY_ID) == len(TASKS) == sum(build.CATEGORY_COUNTS.values())
    assert set(CATEGORIES) == {t.category for t in TASKS}


def test_every_key_is_what_its_reference_computes():
    for task in TASKS:
        executed = TEMPLATES[task.template].reference(task.params)
        assert exact_equal(executed, task.answer), task.task_id


def test_distractors_are_executed_and_all_differ_from_the_key():
    for task in TASKS:
        template = TEMPLATES[task.template]
        assert task.distractors, task.task_id
        executed = [w.answer(task.params) for w in template.wrong]
        for d in task.distractors:
            assert not exact_equal(d, task.answer), task.task_id
            assert any(exact_equal(d, e) for e in executed), task.task_id


def test_reference_code_sets_result_to_the_key_for_all_forty():
    for task in TASKS:
        namespace: dict = {}
        exec(reference_code(task), namespace)
        assert exact_equal(namespace["result"], task.answer), task.task_id


def test_reference_code_keeps_nan_payloads_and_signed_zero():
    odd_nan = float_from_bits(0xFFF8000000000001)
    task = replace(TASKS[0], answer=[odd_nan, math.nan, -0.0, math.inf, 1])
    namespace: dict = {}
    exec(reference_code(task), namespace)
    assert exact_equal(namespace["result"], task.answer)
    assert float_bits(namespace["result"][0]) == 0xFFF8000000000001


def test_instructions_state_the_answer_layout():
    for task in TASKS:
        text = task.instruction
        assert text.isascii(), task.task_id
        assert f"JSON list of {len(task.answer)} element" in text, task.task_id
        if any(isinstance(v, str) for v in task.answer):
            assert "lowercase hex string" in text, task.task_id
        if any(isinstance(v, bool) for v in task.answer):
            assert "true or false" in text, task.task_id


def test_keys_hold_only_canonical_lowercase_hex():
    for task in TASKS:
        for v in task.answer:
            if isinstance(v, str):
                assert re.fullmatch(r"0x(0|[1-9a-f][0-9a-f]*)", v), (task.task_id, v)


#: Fresh train draws per template in CI's run of ``verify csapp`` (the command's default is 50,
#: about five minutes here; 25 keeps the oracle over every template in half of it).
CI_TRAIN_DRAWS = 25


def test_verify_passes_every_task_and_25_train_draws_of_every_template(capsys, docker_available):
    """The train split's oracle in CI: ``verify csapp`` as its command runs it (fresh train draws
    of every template: C in the sandbox, both ways for the model-keyed programs, second models),
    the guessability audit left to tests/test_csapp_guessability.py."""
    assert build.main(["--verify", "--guess-draws", "0", "--train-draws", str(CI_TRAIN_DRAWS)]) == 0
    out = capsys.readouterr().out.strip()
    assert out.endswith(f"{len(TASKS)}/{len(TASKS)}")
    # the C of every C-code task ran in the sandbox and printed its key; every second model agreed
    (c_line,) = re.findall(r"C compiled and run in the sandbox \(gcc\): (\d+)/(\d+) tasks", out)
    (model_line,) = re.findall(r"second, independent model: (\d+)/(\d+) tasks agree", out)
    assert c_line[0] == c_line[1] and int(c_line[1]) >= 52
    assert model_line[0] == model_line[1] and int(model_line[1]) >= 24
    (forced, refuted) = re.findall(r"schedules, both ways: (\d+) outputs .* (\d+) it calls impossible", out)[0]
    assert int(forced) > 3_000 and int(refuted) > 100
    (train,) = re.findall(r"train draws checked by the same oracles: (\d+)/(\d+) agree", out)
    assert train[0] == train[1] and int(train[1]) >= CI_TRAIN_DRAWS * 30


def test_verify_catches_a_tampered_key(tmp_path, docker_available):
    fork = tmp_path / "fork.json"
    fork.write_text(build.SOURCE_FILE.read_text().replace('[4294967295, "0xffffffff"]', '[4294967295, "0xfffffffe"]'))
    report = verify(fork)
    assert not report.ok
    assert report.summary() == f"{len(TASKS) - 1}/{len(TASKS)}"
    assert [f.task_id for f in report.failures] == ["int-unsigned-minus-one"]


# --- loading forks and malformed files -----------------------------------------------------------


def test_load_tasks_reads_a_forked_file(tmp_path):
    records = [t.to_record() for t in TASKS[:3]]
    records[0]["task_id"] = "my-fork-task"
    fork = tmp_path / "fork.json"
    fork.write_text(dumps_exact({"format": "csapp-tasks/1", "tasks": records}))
    loaded = load_tasks(fork)
    assert [t.task_id for t in loaded] == ["my-fork-task", TASKS[1].task_id, TASKS[2].task_id]
    assert exact_equal(loaded[1].answer, TASKS[1].answer)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("answer"), "missing fields"),
        (lambda r: r.update(category="graphics"), "category"),
        (lambda r: r.update(answer=[]), "'answer'"),
        (lambda r: r.update(answer=[None]), "'answer'"),
        (lambda r: r.update(answer=[[1]]), "'answer'"),
        (lambda r: r.update(distractors=[1]), "'distractors'"),
        (lambda r: r.update(params=[1]), "'params'"),
    ],
)
def test_malformed_task_records_are_named(tmp_path, mutate, message):
    records = [t.to_record() for t in TASKS[:2]]
    mutate(records[1])
    bad = tmp_path / "bad.json"
    bad.write_text(dumps_exact({"format": "csapp-tasks/1", "tasks": records}))
    with pytest.raises(TaskFileError, match=re.escape("task #1")) as err:
        load_tasks(bad)
    assert message in str(err.value)


@pytest.mark.parametrize(
    "text",
    ["not json", "[]", '{"format": "csapp-tasks/1", "tasks": []}', '{"format": "other", "tasks": [1]}',
     '{"format": "csapp-tasks/1", "tasks": [{"answer": {"f64": "0xZZ"}}]}'],
)
def test_malformed_files_raise_a_clear_error(tmp_path, text):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    with pytest.raises(TaskFileError, match=re.escape(str(bad))):
        load_tasks(bad)


def test_duplicate_task_ids_are_rejected(tmp_path):
    record = TASKS[0].to_record()
    bad = tmp_path / "dup.json"
    bad.write_text(dumps_exact({"format": "csapp-tasks/1", "tasks": [record, record]}))
    with pytest.raises(TaskFileError, match="duplicate"):
        load_tasks(bad)


# --- traps: present in the eval set, and the builder refuses a falsified case ----------------------


def test_minus_one_read_as_unsigned_32_bit():
    assert key_of("int-unsigned-minus-one") == [4294967295, "0xffffffff"]
    with pytest.raises(TrapError):
        build_with("int-unsigned-minus-one", value=1)


def test_five_minus_nine_unsigned_is_greater_than_zero():
    assert BY_ID["int-unsigned-difference"].params == {"a": 5, "b": 9}
    assert key_of("int-unsigned-difference")[1] is True
    with pytest.raises(TrapError):
        build_with("int-unsigned-difference", a=9, b=5)


def test_shift_right_signed_and_unsigned_differ():
    s, u = key_of("int-shift-signed-vs-unsigned")
    assert (s, u) == (-13, 536870899)
    with pytest.raises(TrapError):
        build_with("int-shift-signed-vs-unsigned", x=100)


def test_negating_int_min_wraps_to_itself():
    assert key_of("int-negate-int-min") == [-(2**31), True, 2**31 - 1, False]
    template = TEMPLATES["negate_minimum"]
    with pytest.raises(TrapError):
        template.trap({"width": 32, "x": -(2**31), "z": 5}, [2**31, False, -5, False])
    with pytest.raises(TrapError, match="exactly one"):
        build_with("int-negate-int-min", z=-(2**31))


def test_float32_addition_is_not_associative():
    left, right, exact = key_of("float-sum-not-associative")
    assert float_bits(left) != float_bits(right) and exact is True  # the left grouping cancels first
    with pytest.raises(TrapError):
        build_with("float-sum-not-associative", a=1.0, b=2.0, c=3.0)


def test_seed_fact_1e8_grouping():
    template = TEMPLATES["f32_associativity"]
    assert template.reference({"a": 1e8, "b": -1e8, "c": 1.0})[:2] == [1.0, 0.0]


def test_two_to_the_24_plus_one_rounds_to_two_to_the_24():
    assert BY_ID["float-2p24-plus-one"].params == {"n": 2**24 + 1}
    assert key_of("float-2p24-plus-one")[:2] == [2**24, -1]
    with pytest.raises(TrapError):
        build_with("float-2p24-plus-one", n=2**24)


def test_struct_padding_comes_from_the_layout_algorithm():
    assert key_of("mem-struct-reorder")[:2] == [12, 8]
    assert BY_ID["mem-struct-reorder"].params["members"] == ["char", "int", "char"]
    # the same algorithm, on layouts nobody typed in
    assert struct_layout([ctype("char"), ctype("double"), ctype("short")]).offsets == (0, 8, 16)
    assert struct_layout([ctype("char"), ctype("double"), ctype("short")]).size == 24
    assert struct_layout([ctype("short[3]"), ctype("char")]).size == 8
    assert struct_layout([ctype("char"), ctype("int")], packed=True).size == 5
    with pytest.raises(TrapError):
        build_with("mem-struct-reorder", members=["int", "int", "int"])


def test_row_and_column_major_differ_on_a_cache_smaller_than_the_array():
    rows, cols = key_of("cache-row-vs-column-major")
    assert rows != cols
    with pytest.raises(TrapError, match="smaller than the array"):
        build_with("cache-row-vs-column-major", sets=64)


def test_builder_raises_when_the_eval_cache_is_big_enough(monkeypatch):
    patched = tuple(
        (tid, name, {**params, "sets": 64} if tid == "cache-row-vs-column-major" else params)
        for tid, name, params in EVAL_SET
    )
    monkeypatch.setattr(build, "EVAL_SET", patched)
    with pytest.raises(TrapError):
        build.build_tasks()


def test_trace_has_a_genuine_hit_and_a_genuine_conflict_miss():
    task = BY_ID["cache-trace-hit-and-conflict"]
    outcomes = [a.outcome for a in simulate(CacheGeometry(4, 1, 16), task.params["trace"])]
    assert "hit" in outcomes and "conflict" in outcomes
    assert not exact_equal(task.answer, [False] * len(outcomes) + [len(outcomes)])
    with pytest.raises(TrapError, match="conflict"):
        build_with("cache-trace-hit-and-conflict", trace=[0x100, 0x104, 0x200])
    with pytest.raises(TrapError, match="hit"):
        build_with("cache-trace-hit-and-conflict", trace=[0x100, 0x140, 0x100])


def test_seed_fact_two_set_cache_column_major_misses_32_against_8():
    assert machine_anchors() == []
    g = CacheGeometry(sets=2, ways=1, block=16)
    assert misses(simulate(g, [(i * 8 + j) * 4 for j in range(8) for i in range(4)])) == 32


def test_lru_differs_from_fifo_on_the_eval_trace():
    task = BY_ID["cache-lru-not-fifo"]
    fifo = [a.hit for a in simulate(CacheGeometry(2, 2, 32), task.params["trace"], policy="fifo")]
    assert task.answer[:-1] != fifo


def test_a_distractor_equal_to_the_key_fails_the_build():
    # x = -96: x >> 3 equals the truncating x / 8, so that wrong reading gives the key
    with pytest.raises(BuildError, match="gives the key itself"):
        build_with("int-shift-signed-vs-unsigned", x=-96)


# --- the training split ----------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_same_rng_state_gives_the_same_task(seed):
    a = sample_task(np.random.default_rng(seed))
    b = sample_task(np.random.default_rng(seed))
    assert a.task_id == b.task_id and a.instruction == b.instruction
    assert exact_equal(a.answer, b.answer) and exact_equal(a.distractors, b.distractors)
    assert exact_equal(a.params, b.params)


def test_sampling_ignores_the_global_rngs():
    random.seed(1)
    np.random.seed(1)
    a = sample_task(np.random.default_rng(7))
    random.seed(2)
    np.random.seed(2)
    state = np.random.get_state()[1].copy()
    b = sample_task(np.random.default_rng(7))
    assert a.task_id == b.task_id
    assert (np.random.get_state()[1] == state).all()


def test_train_draws_cover_every_template_with_executed_keys():
    rng = np.random.default_rng(2024)
    seen = set()
    for draw in range(3000):  # about 9 a template are expected in 600; go on until every one came up
        if len(seen) == len(TEMPLATES):
            break
        task = sample_task(rng, difficulty="starter" if draw % 10 == 0 else None)  # starter: only when asked
        seen.add(task.template)
        assert re.fullmatch(rf"train/{task.template}/[0-9a-f]{{12}}", task.task_id)
        assert exact_equal(TEMPLATES[task.template].reference(task.params), task.answer)
        assert task.distractors and not any(exact_equal(d, task.answer) for d in task.distractors)
        assert exact_equal(loads_exact(dumps_exact(task.params)), task.params)
    assert seen == set(TEMPLATES)


def test_train_params_differ_from_the_eval_set():
    rng = np.random.default_rng(3)
    eval_params = [dumps_exact(p, sort_keys=True) for _, _, p in EVAL_SET]
    drawn = [dumps_exact(sample_task(rng).params, sort_keys=True) for _ in range(50)]
    assert len(set(drawn)) > 40
    assert not set(drawn) & set(eval_params)


def test_categories_filter_the_draw():
    rng = np.random.default_rng(11)
    assert {sample_task(rng, ("cache",)).category for _ in range(20)} == {"cache"}
    assert {sample_task(rng, ("bits", "floats")).category for _ in range(30)} <= {"bits", "floats"}
    with pytest.raises(ValueError):
        sample_task(rng, ("graphics",))
    with pytest.raises(TypeError):
        sample_task(rng, "cache")
    with pytest.raises(TypeError):
        sample_task(random.Random(0))


# --- parsing ANSWER: values ------------------------------------------------------------------


def test_parse_answer_value_accepts_json_lists_with_ieee_specials():
    value = parse_answer_value(' [4294967295, true, "0x2a", -0.0, NaN, Infinity, -Infinity, 1.5] ')
    assert value[:3] == [4294967295, True, "0x2a"]
    assert float_bits(value[3]) == float_bits(-0.0)
    assert math.isnan(value[4]) and value[5] == math.inf and value[6] == -math.inf
    assert exact_equal(parse_answer_value(json.dumps(key_of("float-underflow-negative-zero"))),
                       key_of("float-underflow-negative-zero"))


@pytest.mark.parametrize(
    "text",
    ["", "   ", "42", '"0x2a"', "[]", "[null]", "[[1]]", '[{"a": 1}]', "[1,", "[1] trailing", "{}",
     "[" * 100_000],
)
def test_parse_answer_value_rejects_what_is_not_a_primitive_list(text):
    with pytest.raises(ValueError):
        parse_answer_value(text)

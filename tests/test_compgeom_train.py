"""CompGeom-v0's train split: fresh hidden cases per episode from the env's RNG, exact, complete, private."""

from __future__ import annotations

import json
import random

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gym_sysmath.cli import main
from gym_sysmath.tasks import compgeom
from gym_sysmath.tasks.compgeom.cases import REACHABLE, exact_case, make_case, train_cases
from gym_sysmath.tasks.compgeom.primitives import BY_NAME


@pytest.fixture
def train():
    environment = gym.make("CompGeom-v0", split="train")
    yield environment
    environment.close()


def inputs(cases) -> list[str]:
    return [json.dumps(case.input, sort_keys=True) for case in cases]


def test_the_same_seed_draws_the_same_task_and_hidden_cases(train):
    other = gym.make("CompGeom-v0", split="train")
    try:
        _, info = train.reset(seed=7)
        _, again = other.reset(seed=7)
        assert info["task_id"] == again["task_id"] and info["split"] == "train"
        assert inputs(train.unwrapped._hidden) == inputs(other.unwrapped._hidden)
    finally:
        other.close()


def test_each_episode_draws_fresh_hidden_cases(train):
    drawn = []
    for seed in (0, None, None):  # seeded once, then the env's RNG runs on
        train.reset(seed=seed, options={"task_id": "ray2_segment2/rust"})
        drawn.append(set(inputs(train.unwrapped._hidden)))
    assert drawn[0] != drawn[1] != drawn[2]
    eval_inputs = set(inputs(compgeom.load_tasks(["ray2_segment2"], ["rust"])[0].hidden_cases))
    assert len(drawn[0] & eval_inputs) < len(drawn[0]) // 4  # the symmetries and sizes are redrawn


def test_resets_never_touch_the_global_rngs(train):
    np_state, py_state = np.random.get_state()[1].copy(), random.getstate()
    for seed in range(3):
        train.reset(seed=seed)
    assert (np.random.get_state()[1] == np_state).all() and random.getstate() == py_state


@pytest.mark.parametrize("primitive", compgeom.PRIMITIVES)
def test_a_train_draw_reaches_every_branch_and_is_exact_with_reference_keys(primitive):
    (task,) = compgeom.load_tasks([primitive], ["python"])
    cases = train_cases(primitive, np.random.default_rng(11), task.public_cases)
    assert {case.branch for case in cases} == REACHABLE[primitive]
    assert not set(inputs(cases)) & set(inputs(task.public_cases)) and len(set(inputs(cases))) == len(cases)
    assert any("-near" in c.id for c in cases) and any("-scale" in c.id for c in cases)
    prim = BY_NAME[primitive]
    for case in cases:
        assert exact_case(case), case.id
        values = [[x for x in case.input[arg][field]] for arg, shape in prim.args for field in shape.fields]
        assert make_case(prim, case.id, values).expected == case.expected


def test_public_cases_and_the_prompt_are_the_eval_ones_and_only_inputs_reach_the_sandbox(train):
    train.reset(seed=3, options={"task_id": "segment2_segment2/cpp"})
    env = train.unwrapped
    (task,) = compgeom.load_tasks(["segment2_segment2"], ["cpp"])
    assert env.current_task.public_cases == task.public_cases and env.task.prompt == compgeom.prompt_for(
        task, env.max_turns)
    stdin = env._stdin(env.current_task, "hidden")
    assert stdin == compgeom.stdin_for(env._hidden) and stdin.split("\n")[0] == str(len(env._hidden))
    assert set(compgeom.job_files(env.current_task, "x")) == {"main.cpp", "candidate.hpp"}
    assert "expected" not in stdin and "kind" not in stdin
    assert env._metrics(None, None)["hidden_total"] == len(env._hidden) and env.task.answer is None
    assert env.task_ids == ()


def test_train_stdin_is_rebuilt_each_episode(train):
    train.reset(options={"task_id": "line2_line2/python"})
    first = train.unwrapped._stdin(train.unwrapped.current_task, "hidden")
    train.reset(options={"task_id": "line2_line2/python"})
    assert train.unwrapped._stdin(train.unwrapped.current_task, "hidden") != first


def test_export_of_the_train_split_writes_one_record_per_seed(capsys):
    assert main(["export", "CompGeom-v0", "--split", "train", "-n", "3", "--seed", "5", "--out", "-"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["seed"] for r in records] == [5, 6, 7] and {r["split"] for r in records} == {"train"}
    assert all(r["task_id"] in {t.task_id for t in compgeom.load_tasks()} for r in records)


@pytest.mark.parametrize("primitive", compgeom.PRIMITIVES)
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_every_train_draw_reaches_every_branch(primitive, seed):
    """A symmetry can turn a segment around (same <-> opposite) or land on a public input; the
    draw redraws until every branch is there."""
    public = compgeom.load_tasks([primitive], ["cpp"])[0].public_cases
    assert {case.branch for case in train_cases(primitive, np.random.default_rng(seed), public)} == REACHABLE[primitive]

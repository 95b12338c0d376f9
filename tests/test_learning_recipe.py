"""The pieces of the SmolLM2 GRPO recipe (examples/smollm2_grpo.py) that decide what it learns
and what it reports: advantages, the reward-hacking watch, the intervals. The recipe itself runs
in the real-model tier (tests/real_model/test_learning_recipe.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gym_sysmath  # noqa: F401


def _recipe():
    path = Path(__file__).resolve().parents[1] / "examples" / "smollm2_grpo.py"
    spec = importlib.util.spec_from_file_location("smollm2_grpo_example", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


recipe = _recipe()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 1.0]), st.booleans()), min_size=1, max_size=16))
def test_advantages_are_group_relative_and_a_scoring_error_gets_none(group):
    rewards, valid = [r for r, _ in group], [ok for _, ok in group]
    advantages = recipe.group_advantages(rewards, valid)
    assert all(a == 0.0 for a, ok in zip(advantages, valid, strict=True) if not ok)
    scored = [a for a, ok in zip(advantages, valid, strict=True) if ok]
    assert abs(sum(scored)) < 1e-9  # they centre on the group's mean
    if len({r for r, ok in group if ok}) < 2:
        assert all(a == 0.0 for a in advantages)  # a flat group teaches nothing
    else:
        right = [a for (r, ok), a in zip(group, advantages, strict=True) if ok and r == 1.0]
        assert all(a > 0 for a in right)


def test_bootstrap_interval_is_deterministic_and_brackets_the_mean():
    per_task = [0.0] * 40 + [1.0] * 10 + [0.5] * 10
    low, high = recipe.bootstrap_interval(per_task, seed=3)
    assert (low, high) == recipe.bootstrap_interval(per_task, seed=3)
    assert low < np.mean(per_task) < high
    assert recipe.bootstrap_interval([0.0] * 20, seed=0) == (0.0, 0.0)


def test_wilson_interval_is_not_empty_at_zero_successes():
    low, high = recipe.wilson(0, 256)
    assert low == 0.0 and 0.0 < high < 0.02


@pytest.mark.parametrize("env_id", ["LinearAlgebra-v0", "CsappExact-v0"])
def test_the_watch_passes_what_the_reference_answers_and_logs_the_graders_verdict(env_id):
    """A right reply graded through the recipe's own path: reward 1.0 and the family's
    independent check agrees (``watch`` True), seed by seed on the train split."""
    env = gym.make(env_id, split="train", max_turns=1, sandbox="process")
    try:
        for seed in range(12):
            options = {"difficulty": "starter"} if env_id == "LinearAlgebra-v0" else {}
            env.reset(seed=seed, options=options)
            reply = env.unwrapped.reference_action()
            if env_id == "CsappExact-v0":  # the reference leaves `result` in code; the watch reads ANSWER lines
                import json
                reply = "ANSWER: " + json.dumps(env.unwrapped.current_task.answer)
            graded = recipe.grade(env, seed, options, reply)
            assert (graded.reward, graded.verdict, graded.scoring_error, graded.watch) == (1.0, "correct", False, True)
            wrong = recipe.grade(env, seed, options, "ANSWER: [12345678901]")
            assert wrong.reward == 0.0 and wrong.watch is None
    finally:
        env.close()


def test_baseline_table_shows_each_cell_with_its_interval_and_topics():
    cell = {"env_id": "LinearAlgebra-v0", "level": "starter", "samples": 256, "reward": 3 / 256,
            "ci95": list(recipe.wilson(3, 256)), "format_errors": 0.5, "topics": {"determinant": [3, 26]}}
    table = recipe.baseline_table([cell])
    assert "| LinearAlgebra-v0 | starter | 256 | 1.2% [0.4%, 3.4%] | 50% |" in table
    assert "determinant 3/26" in table

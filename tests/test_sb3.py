"""The Stable-Baselines3 adapter: SB3's env checker accepts it, positions do not leak the key,
scoring errors are surfaced rather than scored 0, and a short PPO run beats a random policy
on the same seeded tasks.

Answer steps never run code, so these tests use the process backend (which starts nothing
until code runs) and need no Docker daemon."""

from __future__ import annotations

import collections
import importlib.util
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3.common.env_checker import check_env

from gym_sysmath.exact import exact_equal
from gym_sysmath.integrations.sb3 import CandidateChoiceEnv, ScoringError, make_choice_env
from gym_sysmath.sandbox import SandboxError

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ppo_sb3.py"
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")


@pytest.fixture
def env():
    environment = make_choice_env(sandbox="process")
    yield environment
    environment.close()


def test_sb3_check_env_accepts_the_wrapper(env):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # SB3 warns about spaces it cannot learn from well
        check_env(env)


def test_candidates_are_the_key_and_the_executed_distractors(env):
    for seed in range(50):
        env.reset(seed=seed)
        record = env.unwrapped._current
        expected = [record.answer, *record.distractors]
        assert all(any(exact_equal(slot, value) for value in expected) for slot in env.slots)
        assert all(any(exact_equal(value, slot) for slot in env.slots) for value in expected)
        assert env.key_slots and all(exact_equal(env.slots[i], record.answer) for i in env.key_slots)


def test_same_seed_same_observation_and_slots(env):
    first, _ = env.reset(seed=5)
    slots = json.dumps(env.slots)
    again, _ = env.reset(seed=5)
    assert np.array_equal(first, again) and json.dumps(env.slots) == slots


def test_position_does_not_leak_the_key(env):
    """The key lands in every slot about equally often, so "always slot 0" scores like random."""
    where = collections.Counter()
    slot_zero = []
    for seed in range(600):
        env.reset(seed=seed)
        where.update(i for i in env.key_slots if i < 3)
        _, reward, *_ = env.step(0)
        slot_zero.append(reward)
    assert all(150 <= where[i] <= 250 for i in range(3)), where
    assert 0.25 <= np.mean(slot_zero) <= 0.42


def test_every_step_is_graded_by_the_env(env):
    env.reset(seed=3)
    wrong = next(i for i in range(env.n_choices) if i not in env.key_slots)
    _, reward, terminated, truncated, info = env.step(wrong)
    assert (reward, terminated, truncated, info["verdict"]) == (0.0, True, False, "wrong_answer")
    assert info["submitted"] == f"ANSWER: {json.dumps(env.slots[wrong])}"
    env.reset(seed=3)
    _, reward, terminated, _, info = env.step(env.key_slots[0])
    assert (reward, terminated, info["verdict"], info["scoring_error"]) == (1.0, True, "correct", None)


def _break_grading(environment: CandidateChoiceEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness fails under the env's grader: the env's own handler reports a scoring error."""

    def fail(_action):
        raise SandboxError("worker_died", "container killed (simulated)")

    monkeypatch.setattr(environment.unwrapped, "_grade_final", fail)


def test_scoring_error_is_surfaced_and_truncated_not_scored_wrong(env, monkeypatch):
    observation, _ = env.reset(seed=1)
    _break_grading(env, monkeypatch)
    final, reward, terminated, truncated, info = env.step(env.key_slots[0])
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert info["verdict"] == "scoring_error" and "worker_died" in info["scoring_error"]
    assert env.scoring_errors == 1
    # SB3 bootstraps a truncated step from the final observation: the pre-step one, so V(s) cancels.
    assert np.array_equal(final, observation)


def test_scoring_error_can_stop_the_run(monkeypatch):
    env = make_choice_env(sandbox="process", on_scoring_error="raise")
    try:
        env.reset(seed=1)
        _break_grading(env, monkeypatch)
        with pytest.raises(ScoringError, match="worker_died"):
            env.step(0)
    finally:
        env.close()


def test_other_families_are_refused():
    import gymnasium as gym

    inner = gym.make("LinearAlgebra-v0")
    try:
        with pytest.raises(ValueError, match="CsappExact-v0 only"):
            CandidateChoiceEnv(inner)
    finally:
        inner.close()


def test_short_ppo_run_beats_random_on_the_same_seeded_tasks():
    spec = importlib.util.spec_from_file_location("ppo_sb3_example", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example  # dataclasses resolve their annotations through it
    spec.loader.exec_module(example)
    args = example.Args(seed=0, total_timesteps=12_000, eval_episodes=400, sandbox="process")
    started = time.perf_counter()
    result = example.main(args)
    elapsed = time.perf_counter() - started
    # Random is about 1/candidates (~0.32); binomial sd over 400 episodes is ~0.024 each.
    assert result["scoring_errors"] == 0
    assert 0.24 <= result["random"] <= 0.40
    assert result["trained"] >= result["random"] + 0.15, result
    assert elapsed < 90, f"the PPO budget took {elapsed:.0f} s"

"""SkyRL-gym: every id is in ``skyrl_gym``'s registry, ``skyrl_gym.make`` builds the env from an
exported row the way SkyRL's generator does, a multi-turn trajectory runs the real Python tool
turns, and a harness failure is retried on a fresh reset, then raised, never rewarded 0.0."""

from __future__ import annotations

import json

import pytest

import gym_sysmath
from gym_sysmath.envs.csapp import CsappExactEnv
from gym_sysmath.integrations.episodes import ScoringError, TaskRef
from gym_sysmath.integrations.trl import build_dataset
from gym_sysmath.sandbox import SandboxError

skyrl_gym = pytest.importorskip("skyrl_gym", reason="the frameworks extra is not installed")
from gym_sysmath.integrations import skyrl as sysmath_skyrl  # noqa: E402

PROCESS = {"sandbox": "process"}
CONFIG = {"env_kwargs": PROCESS}
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")


def make(row: dict, config: dict = CONFIG):
    """As SkyRL's generator does: the row's env_class, its other fields as ``extras``."""
    extras = {key: value for key, value in row.items() if key not in ("prompt", "env_class")}
    env = skyrl_gym.make(row["env_class"], env_config=config, extras=extras)
    prompt, _ = env.init(row["prompt"])
    return env, prompt


@pytest.fixture(scope="module")
def csapp_rows() -> list[dict]:
    return sysmath_skyrl.skyrl_rows(build_dataset("CsappExact-v0", n=2, max_turns=None, env_kwargs=PROCESS))


def test_every_id_is_registered_with_skyrl_gym():
    for env_id in gym_sysmath.env_ids():
        assert sysmath_skyrl.env_class(env_id) in skyrl_gym.registry
    assert sysmath_skyrl.register_envs() == [sysmath_skyrl.env_class(e) for e in gym_sysmath.env_ids()]  # idempotent


def test_rows_carry_a_reference_and_the_env_default_turns(csapp_rows):
    row = csapp_rows[0]
    assert set(row) == {"data_source", "prompt", "env_class", "reward_spec", "extra_info"}
    ref = TaskRef.parse(row["reward_spec"]["ground_truth"])
    assert ref.max_turns is None and "answer" not in json.loads(row["reward_spec"]["ground_truth"])
    env, prompt = make(row)
    try:
        assert prompt == row["prompt"]
        assert env.max_turns == CsappExactEnv.default_max_turns > 1
    finally:
        env.close()


def test_multi_turn_trajectory_runs_a_tool_turn_then_grades(csapp_rows):
    row = csapp_rows[0]
    env, _ = make(row)
    try:
        out = env.step("Let me compute.\n```python\nprint(6 * 7)\n```")
        assert not out["done"] and out["reward"] == 0.0
        [message] = out["observations"]
        assert message["role"] == "user" and "42" in message["content"]
        out = env.step(env.episode.env.unwrapped.reference_action())
        assert out["done"] and out["reward"] == 1.0 and out["observations"] == []
        assert out["metadata"]["verdict"] == "correct" and env.turns == 2
        assert env.get_metrics() == {"correct": 1.0, "turns": 2.0}
    finally:
        env.close()


def test_wrong_answer_is_zero_and_the_cli_export_is_skyrl_parquet(tmp_path):
    import pandas as pd

    from gym_sysmath.cli import main

    out = tmp_path / "skyrl.parquet"
    assert main(["export", "LinearAlgebra-v0", "-n", "2", "--format", "skyrl", "--out", str(out)]) == 0
    frame = pd.read_parquet(out)
    assert list(frame.columns) == ["data_source", "prompt", "env_class", "reward_spec", "extra_info"]
    row = frame.iloc[0].to_dict()
    row["prompt"] = [dict(message) for message in row["prompt"]]
    env, _ = make(row, config={})
    try:
        out_step = env.step("ANSWER: definitely not this")
        assert out_step["done"] and out_step["reward"] == 0.0 and out_step["metadata"]["verdict"] != "correct"
    finally:
        env.close()


def test_harness_failure_is_retried_then_raised_never_rewarded(csapp_rows, monkeypatch):
    original = CsappExactEnv._grade_final
    calls = []

    def failing_harness(self, reply):
        calls.append(self.turn)
        if len(calls) <= failures:
            raise SandboxError("worker_died", "container killed (simulated)")
        return original(self, reply)

    monkeypatch.setattr(CsappExactEnv, "_grade_final", failing_harness)
    failures = 1
    env, _ = make(csapp_rows[1])
    try:
        assert env.step(env.episode.env.unwrapped.reference_action())["reward"] == 1.0  # replayed, graded
        failures, calls[:] = 99, []
        env.init(csapp_rows[1]["prompt"])
        with pytest.raises(ScoringError, match="worker_died"):
            env.step(env.episode.env.unwrapped.reference_action())
        assert len(calls) == 2
    finally:
        env.close()


@pytest.mark.docker
def test_tool_turns_run_in_the_docker_sandbox(docker_available, csapp_rows):
    env, _ = make(csapp_rows[0], config={})  # the default backend: a real container per trajectory
    try:
        out = env.step("```python\nx = 6 * 7\nprint(x)\n```")
        assert "42" in out["observations"][0]["content"]
        out = env.step("```python\nprint(x + 1)\n```")  # the session persists across turns
        assert "43" in out["observations"][0]["content"]
        assert env.step(env.episode.env.unwrapped.reference_action())["reward"] == 1.0
    finally:
        env.close()

"""Reading tasks needs no Docker: with ``DOCKER_HOST`` pointing nowhere, every registered id (aliases
included) lists its task ids, resets onto a task, gives its reference action and exports its
tasks, with answers, in both splits, and the env never took a sandbox. (An env takes its sandbox
on first use; these are the uses that must not count as one.)"""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from gym_sysmath.cli import main
from gym_sysmath.env import core_env
from gym_sysmath.families import all_ids, primary_ids

NOWHERE = "unix:///nonexistent/gym-sysmath-no-docker.sock"


@pytest.fixture(autouse=True)
def no_daemon(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", NOWHERE)


@pytest.mark.parametrize("split", ["eval", "train"])
@pytest.mark.parametrize("env_id", all_ids())
def test_task_ids_task_and_reference_action_need_no_daemon(env_id, split):
    env = gym.make(env_id, split=split)
    try:
        core = core_env(env)
        ids = core.task_ids
        assert bool(ids) == (split == "eval")  # the train split is drawn, not listed
        _, info = env.reset(seed=3, options={"task_id": ids[-1]} if ids else None)
        assert core.task is not None and info["task_id"] == core.task.task_id
        assert core.reference_action().strip()
        assert core._sandbox is None, f"{env_id} took a sandbox to list or read a task"
    finally:
        env.close()


@pytest.mark.parametrize("env_id", primary_ids())
def test_export_with_answers_needs_no_daemon(env_id, tmp_path, capsys):
    eval_out, train_out = tmp_path / "eval.jsonl", tmp_path / "train.jsonl"
    assert main(["export", env_id, "--with-answers", "--out", str(eval_out)]) == 0
    assert main(["export", env_id, "--split", "train", "-n", "2", "--with-answers", "--out", str(train_out)]) == 0
    capsys.readouterr()
    listed = gym.make(env_id)
    try:
        expected = len(core_env(listed).task_ids)
    finally:
        listed.close()
    rows = [json.loads(line) for line in eval_out.read_text().splitlines()]
    assert len(rows) == expected and len(train_out.read_text().splitlines()) == 2

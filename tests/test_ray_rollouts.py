"""The Ray path returns the same per-sample results as the local path, on a local Ray
instance (skipped when ray is not installed)."""

from __future__ import annotations

import json
import logging
from collections import deque
from pathlib import Path

import gymnasium as gym
import pytest

from gym_sysmath.agents import RandomAgent, ReferenceAgent, ResponsesAgent
from gym_sysmath.cli import main
from gym_sysmath.evaluation import SampleFailure, choose_tasks, evaluate, plan_samples

ray = pytest.importorskip("ray")

LINALG = "LinearAlgebra-v0"
CSAPP = "CsappExact-v0"


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    yield
    ray.shutdown()


def per_sample(results) -> list[tuple]:
    return sorted((r.env_id, r.task_id, r.rollout, r.seed, r.verdict, r.reward, r.actions) for r in results)


def outcome_summary(summary: dict) -> dict:
    """A summary without what depends on how it ran (wall time, the Ray workers)."""
    return {key: value for key, value in summary.items() if key not in ("time", "ray")}


def test_ray_path_returns_the_local_path_results(local_ray):
    for agent in (ReferenceAgent(), RandomAgent()):
        local = evaluate([LINALG], agent, n=4, rollouts=2, concurrency=2, progress=False)
        distributed = evaluate([LINALG], agent, n=4, rollouts=2, concurrency=2, ray=True, progress=False)
        assert not distributed.failures and len(distributed.results) == 8
        assert per_sample(distributed.results) == per_sample(local.results)
        assert outcome_summary(distributed.summary) == outcome_summary(local.summary)


def test_eval_cli_with_ray_writes_the_same_log_as_without(local_ray, tmp_path):
    def rows(path: Path) -> list[tuple]:
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        return sorted((r["task_id"], r["rollout"], r["verdict"], r["reward"]) for r in lines)

    args = ["eval", LINALG, "--agent", "random", "--agent", "reference", "-n", "3", "-r", "2", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    assert main([*args, "--ray", "--out", str(tmp_path / "ray")]) == 0
    for agent in ("random", "reference"):
        assert rows(tmp_path / "ray" / agent / "results.jsonl") == rows(tmp_path / "local" / agent / "results.jsonl")
    assert ray.is_initialized()  # the CLI leaves a Ray instance it did not start alone


@pytest.mark.docker
def test_ray_actors_run_sandboxed_code_on_their_own_pools(docker_available, local_ray, tmp_path):
    env = gym.make(CSAPP)
    lines = []
    try:
        for task_id in choose_tasks(CSAPP, env.unwrapped.task_ids, 4):
            env.reset(options={"task_id": task_id})
            code = f"```python\n{env.unwrapped.reference_code()}\n```"
            lines.append({"env_id": CSAPP, "task_id": task_id, "actions": [code, "Done: `result` holds it."]})
    finally:
        env.close()
    path = tmp_path / "code.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    agent = ResponsesAgent(path)
    local = evaluate([CSAPP], agent, concurrency=2, progress=False)
    distributed = evaluate([CSAPP], agent, concurrency=2, ray=True, progress=False)
    assert [r.verdict for r in distributed.results] == ["correct"] * 4
    assert per_sample(distributed.results) == per_sample(local.results)
    # The tool turns' observations match exactly: their timings are in info, not in the text.
    assert [r.observations for r in distributed.results] == [r.observations for r in local.results]


def test_ray_rollouts_helper_keeps_spec_order_and_reports_failures(local_ray):
    from gym_sysmath.integrations.ray_rollouts import ray_rollouts

    env = gym.make(LINALG)
    try:
        specs = plan_samples(LINALG, env.unwrapped.task_ids, ReferenceAgent(), n=3, rollouts=2)
    finally:
        env.close()
    bogus = plan_samples("NoSuchEnv-v0", ["x"], ReferenceAgent())
    outcomes = ray_rollouts([*specs, *bogus], ReferenceAgent(), workers=2)
    assert [o.key for o in outcomes[:-1]] == [s.key for s in specs]
    assert all(o.verdict == "correct" for o in outcomes[:-1])
    assert isinstance(outcomes[-1], SampleFailure) and "NoSuchEnv" in outcomes[-1].error


def test_openai_agent_on_ray_workers_gets_the_driver_key(local_ray, monkeypatch):
    from gym_sysmath.agents import OpenAIAgent
    from tests.test_eval_cli import FakeChat

    monkeypatch.setenv("RAY_TEST_KEY", "from-the-driver")  # set after ray.init: the workers never saw it
    chat = FakeChat(["ANSWER: 3"])
    try:
        agent = OpenAIAgent(model="m", base_url=chat.url, api_key_env="RAY_TEST_KEY")
        run = evaluate([LINALG], agent, n=2, ray=True, concurrency=2, progress=False)
    finally:
        chat.close()
    assert not run.failures and len(run.results) == 2
    assert {request["auth"] for request in chat.requests} == {"Bearer from-the-driver"}


@pytest.mark.docker
def test_actor_whose_sandbox_cannot_start_is_unhealthy_and_its_samples_run_elsewhere(docker_available, local_ray):
    """One actor's DOCKER_HOST points at nothing: the samples sent to it come back as
    ``SandboxDown``, it gets no more work, they run on the healthy actor, and the report says so."""
    from gym_sysmath.integrations.ray_rollouts import IN_FLIGHT_PER_WORKER, RolloutWorker, dispatch

    env = gym.make(CSAPP)
    try:
        specs = plan_samples(CSAPP, env.unwrapped.task_ids, ReferenceAgent(), n=6)
    finally:
        env.close()
    actor_class = ray.remote(RolloutWorker)
    bad = actor_class.options(num_cpus=0, runtime_env={"env_vars": {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}}
                              ).remote(ReferenceAgent(), {})
    good = actor_class.options(num_cpus=0).remote(ReferenceAgent(), {})
    outcomes = []
    try:
        unhealthy = dispatch(ray, [bad, good], deque(specs), outcomes.append)
        bad_where = ray.get(bad.where.remote())
    finally:
        ray.get([actor.close.remote() for actor in (bad, good)])
        for actor in (bad, good):
            ray.kill(actor)
    assert sorted(o.key for o in outcomes) == sorted(s.key for s in specs)  # every sample once
    assert [o.verdict for o in outcomes] == ["correct"] * len(specs)
    [entry] = unhealthy
    assert entry["worker"] == bad_where and "Docker daemon is not reachable" in entry["reason"]
    assert entry["samples_rerun"] == IN_FLIGHT_PER_WORKER  # what it held when it failed; nothing after


def test_eval_summary_reports_the_ray_workers(local_ray, tmp_path):
    run = evaluate([LINALG], ReferenceAgent(), n=2, concurrency=2, ray=True, progress=False, out=tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["ray"] == run.summary["ray"] == {"workers": 2, "unhealthy": [], "samples_rerun": 0}

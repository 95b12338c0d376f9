"""The per-node Ray service on a real three-node Ray cluster on this machine (a head, a CPU node
and a node that claims a GPU): node actors go to CPU nodes only, report health and capacity,
drain, and a node removed mid-run costs no episode and mis-scores none (skipped without ray)."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import pytest

import gym_sysmath  # noqa: F401 - registers the ids

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

from gym_sysmath.env import core_env  # noqa: E402
from gym_sysmath.serving.ray_service import SysmathRayService, eligible_nodes  # noqa: E402

pytestmark = pytest.mark.slow

STORE = 80 * 1024**2
#: answer tasks whose tool turns run in host processes: the sandbox is not under test here
KWARGS: dict[str, Any] = {"sandbox": "process", "max_turns": 3}
TOOL = "```python\nprint(6 * 7)\n```"
SLOW_TOOL = "```python\nimport time\ntime.sleep(1.0)\nprint(sum(range(10)))\n```"
RANDOM_TOOL = "```python\nimport time\nprint(time.time())\n```"


@pytest.fixture(scope="module")
def cluster():
    """Head (where this driver connects), a CPU node with a custom resource, and a 'GPU' node."""
    if ray.is_initialized():
        ray.shutdown()
    made = cluster_utils.Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": STORE, "include_dashboard": False})
    made.cpu_node = made.add_node(num_cpus=1, object_store_memory=STORE, resources={"sysmath_test": 1})
    made.gpu_node = made.add_node(num_cpus=1, num_gpus=1, object_store_memory=STORE)
    ray.init(address=made.address, logging_level=logging.WARNING)
    yield made
    ray.shutdown()
    made.shutdown()


@pytest.fixture(autouse=True)
def quiet_process_sandbox():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="sandbox='process'")
        yield


@pytest.fixture
def service(cluster):
    started = SysmathRayService.start()
    yield started
    started.stop()


def head_id(cluster) -> str:
    return cluster.head_node.node_id


def test_eligible_nodes_skip_dead_gpu_and_unlabelled_nodes():
    nodes = [{"NodeID": "cpu", "Alive": True, "Resources": {"CPU": 4.0}, "Labels": {"pool": "a"}},
             {"NodeID": "gpu", "Alive": True, "Resources": {"CPU": 8.0, "GPU": 1.0}, "Labels": {}},
             {"NodeID": "dead", "Alive": False, "Resources": {"CPU": 4.0}},
             {"NodeID": "nocpu", "Alive": True, "Resources": {"CPU": 0.0, "sysmath": 1.0}},
             {"NodeID": "tagged", "Alive": True, "Resources": {"CPU": 2.0, "sysmath": 1.0}}]
    assert eligible_nodes(nodes) == ["cpu", "tagged"]
    assert eligible_nodes(nodes, allow_gpu_nodes=True) == ["cpu", "gpu", "tagged"]
    assert eligible_nodes(nodes, resource="sysmath") == ["tagged"]
    assert eligible_nodes(nodes, labels={"pool": "a"}) == ["cpu"]


def test_node_actors_skip_the_gpu_node_unless_asked_and_report_health_and_capacity(cluster, service):
    cpu_nodes = {head_id(cluster), cluster.cpu_node.node_id}
    assert set(service.nodes()) == cpu_nodes
    health = service.health()
    assert {node for node, entry in health.items() if entry["alive"]} == cpu_nodes
    env = service.make_env("LinearAlgebra-v0", **KWARGS)
    env.reset(seed=1)
    observation, _ = env.reset(seed=2)  # a new episode: the first one is closed
    assert observation == local_run("LinearAlgebra-v0", 2, [])[0]
    capacity = service.capacity()
    assert set(capacity["nodes"]) == cpu_nodes and capacity["live_episodes"] == 1
    assert capacity["nodes"][env.node]["pools"] == []  # an answer task's reset leases no container
    env.close()

    with SysmathRayService.start(allow_gpu_nodes=True) as everywhere:
        assert set(everywhere.nodes()) == cpu_nodes | {cluster.gpu_node.node_id}
    with SysmathRayService.start(resource="sysmath_test") as tagged:
        assert tagged.nodes() == [cluster.cpu_node.node_id]
    assert set(service.health()) == cpu_nodes  # the shared CPU-node actors outlived those routers


def test_drained_node_takes_no_new_episodes_and_finishes_its_live_ones(cluster, service):
    first, second = (service.make_env("LinearAlgebra-v0", **KWARGS) for _ in range(2))
    first.reset(seed=0)
    second.reset(seed=1)
    assert {first.node, second.node} == set(service.nodes())  # spread by load
    drained = cluster.cpu_node.node_id
    on_drained = first if first.node == drained else second
    assert service.drain(drained) == 1
    newcomers = [service.make_env("CsappExact-v0", **KWARGS) for _ in range(3)]
    for seed, env in enumerate(newcomers):
        env.reset(seed=seed)
    assert {env.node for env in newcomers} == {head_id(cluster)}
    with SysmathRayService.start() as other_router:  # the node itself refuses: every router obeys the drain
        others = [other_router.make_env("LinearAlgebra-v0", **KWARGS) for _ in range(2)]
        for seed, env in enumerate(others):
            env.reset(seed=seed)
            assert env.node == head_id(cluster)
            env.close()
    assert service.health()[drained]["draining"] is True
    assert drained not in service.capacity()["accepting_nodes"]
    # the live episode on the drained node goes on there to its verdict
    assert on_drained.step(TOOL)[0].startswith("42")
    _, _, terminated, _, info = on_drained.step("ANSWER: 0")
    assert terminated and info["verdict"] not in (None, "scoring_error") and on_drained.node == drained
    for env in (first, second, *newcomers):
        env.close()
    assert service.drain(drained, timeout_s=10) == 0
    service.resume(drained)
    assert drained in service.capacity()["accepting_nodes"]


def local_run(env_id: str, seed: int, actions: list[str]) -> tuple[str, list[tuple]]:
    """The reset observation and every step's (obs, reward, terminated, truncated, verdict) of a local env."""
    env = gym.make(env_id, **KWARGS)
    try:
        observation, _ = env.reset(seed=seed)
        steps = []
        for action in actions:
            obs, reward, terminated, truncated, info = env.step(action)
            steps.append((obs, reward, terminated, truncated, info["verdict"]))
        return observation, steps
    finally:
        env.close()


def plans() -> list[tuple[str, int, list[str]]]:
    """Episodes of three turns (two tool turns, then the answer: right for even seeds, wrong for odd)."""
    out = []
    for env_id in ("LinearAlgebra-v0", "CsappExact-v0"):
        env = gym.make(env_id, **KWARGS)
        for seed in range(6):
            env.reset(seed=seed)
            answer = core_env(env).reference_action() if seed % 2 == 0 else "ANSWER: 0"
            out.append((env_id, seed, [TOOL, SLOW_TOOL, answer]))
        env.close()
    return out


def test_losing_a_node_mid_run_loses_no_episode_and_misscores_none(cluster, service):
    """12 three-turn episodes over both nodes; the CPU node is removed while their slow second
    turns are in flight. Its episodes are replayed on the head and end exactly as a local env
    ends the same seed and actions, and so does one reset without a seed. One whose tool turn
    printed the time cannot be replayed faithfully, and one on a router left with no node: each
    of those ends as a scoring error, never as a verdict."""
    lost = cluster.cpu_node.node_id
    work = plans()
    with ThreadPoolExecutor(len(work)) as threads:  # their slow turns sleep side by side
        runs = threads.map(lambda plan: local_run(*plan), work)
        expected = {(env_id, seed): run for (env_id, seed, _), run in zip(work, runs, strict=True)}
    assert expected[("LinearAlgebra-v0", 0)][0] == local_run("LinearAlgebra-v0", 0, [])[0]  # seeded: same task
    verdicts = {steps[-1][4] for _, steps in expected.values()}
    assert "correct" in verdicts and len(verdicts) > 1  # right and wrong answers both go through
    only_lost_node = SysmathRayService.start(resource="sysmath_test")
    stranded = only_lost_node.make_env("LinearAlgebra-v0", **KWARGS)
    stranded.reset(seed=2)
    stranded.step(TOOL)

    async def run() -> tuple[list, list, dict, float]:
        envs = [await service.make_async_env(env_id, **KWARGS) for env_id, _, _ in work]
        # two episodes whose first turn prints the time (a replay cannot match it), two reset without a seed
        extras = [(await service.make_async_env("LinearAlgebra-v0", **KWARGS), seed, first)
                  for seed, first in ((7, RANDOM_TOOL), (7, RANDOM_TOOL), (None, TOOL), (None, TOOL))]
        resets = await asyncio.gather(*(env.reset(seed=seed) for env, (_, seed, _) in zip(envs, work, strict=True)))
        for pair in (extras[:2], extras[2:]):  # in pairs: one of each pair per node
            await asyncio.gather(*(env.reset(seed=seed) for env, seed, _ in pair))
        firsts = await asyncio.gather(*(env.step(actions[0]) for env, (_, _, actions) in zip(envs, work, strict=True)),
                                      *(env.step(first) for env, _, first in extras))
        places = {id(env): (env.env.node, env.env.episode.episode_id) for env in [*envs, *(e for e, _, _ in extras)]}

        async def rest(env, actions):
            return [await env.step(action) for action in actions]

        began = time.perf_counter()
        tails = asyncio.gather(*(rest(env, actions[1:]) for env, (_, _, actions) in zip(envs, work, strict=True)),
                               *(rest(env, [SLOW_TOOL]) for env, _, _ in extras))
        await asyncio.sleep(0.4)  # the slow tool turns are running on both nodes
        await asyncio.to_thread(cluster.remove_node, cluster.cpu_node)
        finished = await tails
        elapsed = time.perf_counter() - began
        for env in [*envs, *(e for e, _, _ in extras)]:
            await env.close()
        runs = [(env, reset, [first, *tail]) for env, reset, first, tail in zip(envs, resets, firsts, finished,
                                                                               strict=False)]
        return runs, [(env, tail[-1]) for (env, _, _), tail in zip(extras, finished[len(envs):], strict=True)], \
            places, elapsed

    runs, extra_results, places, elapsed = asyncio.run(run())

    moved = {replay.episode_id: replay for replay in service.replays}
    on_lost = 0
    for (env, (observation, _), steps), (env_id, seed, _) in zip(runs, work, strict=True):
        want_reset, want_steps = expected[(env_id, seed)]
        assert observation == want_reset
        assert [(o, r, t, tr, info["verdict"]) for o, r, t, tr, info in steps] == want_steps
        assert all(info["scoring_error"] is None for *_, info in steps)
        node, episode_id = places[id(env)]
        if node == lost:
            on_lost += 1
            replay = moved[episode_id]
            assert (replay.outcome, replay.from_node, replay.to_node) == ("continued", lost, head_id(cluster))
            assert steps[1][4]["replayed_from_node"] == lost  # the turn in flight when the node went
        else:
            assert episode_id not in moved
    assert on_lost == len(work) // 2  # spread by load: half were on the lost node
    # 16 one-second turns, half of them run twice: one at a time per node it would take over 16 s
    assert elapsed < 8.0

    for (env, result), seed in zip(extra_results, (7, 7, None, None), strict=True):
        observation, reward, terminated, truncated, info = result
        if places[id(env)][0] != lost:
            assert info["scoring_error"] is None and not truncated
        elif seed is None:  # the router gave it a seed: replayed like the others
            assert info["scoring_error"] is None and info["replayed_from_node"] == lost
        else:
            assert (reward, terminated, truncated, info["verdict"]) == (0.0, False, True, "scoring_error")
            assert "diverged" in info["scoring_error"] and info["lost_node"] == lost
    assert sorted(replay.outcome for replay in service.replays) == ["continued"] * (on_lost + 1) + ["diverged"]

    observation, reward, terminated, truncated, info = stranded.step("ANSWER: 0")
    assert (reward, terminated, truncated, info["verdict"]) == (0.0, False, True, "scoring_error")
    assert "no live gym-sysmath node" in info["scoring_error"]
    assert [replay.outcome for replay in only_lost_node.replays] == ["no_node"]
    only_lost_node.stop()
    assert service.health()[lost]["alive"] is False and service.nodes() == [head_id(cluster)]
    print(f"\n{len(work) + 4} episodes, {on_lost + 2} replayed in {elapsed:.2f} s; replay times "
          f"{sorted(replay.seconds for replay in service.replays)}")


def test_ray_service_example_runs_on_the_cluster(cluster):
    """examples/ray_service.py, as docs/serving.md runs it, from its own driver process."""
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "ray_service.py"
    done = subprocess.run([sys.executable, str(example), "--address", cluster.address, "--episodes", "3",
                           "--sandbox", "process"], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    # the cluster's CPU node may already be gone (the node-loss test removes it): one or two nodes
    assert re.search(r"^3 episodes on [12] node\(s\): \{'wrong_answer': 3\}$", done.stdout, re.M), done.stdout

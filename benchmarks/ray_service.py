"""The per-node Ray service, side by side in one run on a two-node Ray cluster on this machine:

- answer-only episodes (reset, then one ``ANSWER`` step) in-process (``gym.make``) against
  through the router (``SysmathRayService.make_env``), one at a time: milliseconds per episode;
- the same from ``--episodes`` coroutines at once over ``make_async_env``: episodes per second;
- node loss: ``--episodes`` episodes with ``--turns`` tool turns each are spread over both nodes,
  the non-head node is removed, and the next step of each lost episode replays it on the head:
  the replay's seconds (reset and re-stepped turns, checked) and the whole call's.

The answer episodes use ``sandbox="process"`` (they run no code); the node-loss episodes' tool
turns run in ``--sandbox``.

    python benchmarks/ray_service.py [--episodes 32] [--turns 2] [--repeats 200] [--sandbox process|docker]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import time
import warnings
from typing import Any

import gymnasium as gym

import gym_sysmath  # noqa: F401
from gym_sysmath.env import core_env
from gym_sysmath.serving.ray_service import SysmathRayService

ENV_ID = "LinearAlgebra-v0"
TOOL = "```python\nprint(6 * 7)\n```"


def answers(count: int) -> list[tuple[int, str]]:
    env = gym.make(ENV_ID, sandbox="process")
    out = []
    for seed in range(count):
        env.reset(seed=seed)
        out.append((seed, core_env(env).reference_action()))
    env.close()
    return out


def per_episode_ms(env: Any, work: list[tuple[int, str]]) -> float:
    began = time.perf_counter()
    for seed, answer in work:
        env.reset(seed=seed)
        assert env.step(answer)[1] == 1.0
    return (time.perf_counter() - began) / len(work) * 1000


async def concurrent_rate(service: SysmathRayService, work: list[tuple[int, str]], width: int) -> float:
    envs = [await service.make_async_env(ENV_ID, sandbox="process") for _ in range(width)]

    async def lane(env: Any, items: list[tuple[int, str]]) -> None:
        for seed, answer in items:
            await env.reset(seed=seed)
            assert (await env.step(answer))[1] == 1.0

    began = time.perf_counter()
    await asyncio.gather(*(lane(env, work[index::width]) for index, env in enumerate(envs)))
    elapsed = time.perf_counter() - began
    for env in envs:
        await env.close()
    return len(work) / elapsed


def node_loss(cluster: Any, worker: Any, service: SysmathRayService, episodes: int, turns: int,
              sandbox: str) -> dict[str, Any]:
    kwargs = {"sandbox": sandbox, "max_turns": turns + 2}
    envs = [service.make_env(ENV_ID, **kwargs) for _ in range(episodes)]
    for seed, env in enumerate(envs):
        env.reset(seed=seed)
        for _ in range(turns):
            env.step(TOOL)
    lost = worker.node_id
    on_lost = [env for env in envs if env.node == lost]
    cluster.remove_node(worker)
    calls = []
    for env in on_lost:
        began = time.perf_counter()
        result = env.step(TOOL)
        calls.append(time.perf_counter() - began)
        assert result[4].get("replayed_from_node") == lost and result[4]["scoring_error"] is None
    for env in envs:
        env.close()
    seconds = sorted(replay.seconds for replay in service.replays)
    return {"sandbox": sandbox, "episodes": episodes, "tool_turns_before_loss": turns, "replayed": len(seconds),
            "replay_s_median": round(statistics.median(seconds), 4), "replay_s_max": round(max(seconds), 4),
            "call_s_median": round(statistics.median(calls), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--sandbox", choices=("process", "docker"), default="process",
                        help="where the node-loss episodes' tool turns run (the answer episodes never run code)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="sandbox='process'")

    import ray
    from ray.cluster_utils import Cluster

    store = 80 * 1024**2
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": store,
                                                           "include_dashboard": False})
    worker = cluster.add_node(num_cpus=1, object_store_memory=store)
    ray.init(address=cluster.address, logging_level=logging.WARNING)
    try:
        service = SysmathRayService.start()
        work = answers(min(args.repeats, 78))
        work = (work * (args.repeats // len(work) + 1))[:args.repeats]
        local = gym.make(ENV_ID, sandbox="process")
        routed = service.make_env(ENV_ID, sandbox="process")
        per_episode_ms(local, work[:10]), per_episode_ms(routed, work[:10])  # warm both
        figures: dict[str, Any] = {
            "answer_episode_ms_in_process": round(per_episode_ms(local, work), 3),
            "answer_episode_ms_via_router": round(per_episode_ms(routed, work), 3),
            f"answer_episodes_per_s_via_router_{args.episodes}_at_once":
                round(asyncio.run(concurrent_rate(service, work, args.episodes)), 1)}
        local.close()
        routed.close()
        figures["node_loss"] = node_loss(cluster, worker, service, args.episodes, args.turns, args.sandbox)
        service.stop()
        print(json.dumps(figures, indent=2))
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()

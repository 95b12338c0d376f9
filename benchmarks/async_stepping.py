"""Async stepping, side by side in one run: N episodes in flight from one event loop, each one tool
turn that sleeps ``--sleep`` seconds in its sandbox, stepped three ways:

- ``blocking``: ``env.step`` called from the coroutines (the loop is frozen during every step);
- ``to_thread``: ``asyncio.to_thread(env.step, ...)`` (asyncio's default executor: min(32, cpus + 4) threads);
- ``AsyncSysmathEnv``: ``await env.step(...)`` on gym-sysmath's process-wide step pool.

For each: the wall time of the batch, and the caller's worst loop stall (a coroutine that
sleeps 5 ms and records how late it wakes). Envs are made and reset before the clock starts.

    python benchmarks/async_stepping.py [--episodes 64] [--sleep 0.5] [--sandbox docker|process]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import gymnasium as gym

import gym_sysmath  # noqa: F401
from gym_sysmath.async_env import AsyncSysmathEnv, step_threads

TICK_S = 0.005


async def worst_stall(stop: asyncio.Event) -> float:
    """The longest the loop made a 5 ms sleep overrun, until ``stop``."""
    worst = 0.0
    while not stop.is_set():
        before = time.perf_counter()
        await asyncio.sleep(TICK_S)
        worst = max(worst, time.perf_counter() - before - TICK_S)
    return worst


async def batch(envs: list[Any], step: Callable[[Any, str], Awaitable[Any]], action: str) -> tuple[float, float]:
    stop = asyncio.Event()
    watcher = asyncio.create_task(worst_stall(stop))
    await asyncio.sleep(0)
    start = time.perf_counter()
    outcomes = await asyncio.gather(*(step(env, action) for env in envs))
    wall = time.perf_counter() - start
    stop.set()
    stall = await watcher
    assert all("slept" in outcome[0] for outcome in outcomes), outcomes[0][0]
    return wall, stall


async def blocking(env: gym.Env, action: str) -> Any:
    return env.step(action)


async def to_thread(env: gym.Env, action: str) -> Any:
    return await asyncio.to_thread(env.step, action)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--sleep", type=float, default=0.5)
    parser.add_argument("--sandbox", default="docker", choices=["docker", "process"])
    parser.add_argument("--env-id", default="LinearAlgebra-v0")
    args = parser.parse_args()
    action = f"```python\nimport time\ntime.sleep({args.sleep})\nprint('slept')\n```"
    envs = [gym.make(args.env_id, max_turns=8, sandbox=args.sandbox) for _ in range(args.episodes)]
    wrapped = [AsyncSysmathEnv(env) for env in envs]
    results = {}
    try:
        for name, step, targets in (("blocking", blocking, envs), ("to_thread", to_thread, envs),
                                    ("AsyncSysmathEnv", lambda env, a: env.step(a), wrapped)):
            for seed, env in enumerate(envs):
                env.reset(seed=seed)
            wall, stall = asyncio.run(batch(targets, step, action))
            results[name] = {"wall_s": round(wall, 3), "worst_loop_stall_s": round(stall, 3)}
            print(f"{name:>16}: {args.episodes} tool turns of {args.sleep} s in {wall:6.2f} s; "
                  f"worst loop stall {stall * 1000:7.1f} ms", flush=True)
    finally:
        for env in envs:
            env.close()
    print(json.dumps({"episodes": args.episodes, "sleep_s": args.sleep, "sandbox": args.sandbox,
                      "step_threads": step_threads(), "results": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The served path, side by side with in-process, in one run: a real ``gym-sysmath serve`` started
from the serve environment (``make serve-venv``) on a free loopback port.

1. **Answer-only overhead**: ``--steps`` reset+step pairs of LinearAlgebra-v0 (no sandbox work),
   in-process and through ``RemoteSysmathEnv``; the median per pair and the difference.
2. **First code step of new sessions**: with the server already up and ``--warm`` containers warm,
   ``--new`` sessions opened at once from one event loop (``AsyncRemoteSysmathEnv``); the clock
   stops when every one has run its first Python tool turn.
3. **Concurrent sessions**: ``--sessions`` sessions at once, each a reset, a tool turn and an
   answer; how many completed, how many ended in a scoring error or an exception (target: all
   complete, none lost), and the worst stall of the client's loop.
4. **Warm tool turns**: the same live sessions keep stepping ``print(1)`` for ``--seconds``:
   tool turns per second through the server, and the CPU each turn costs: the server process,
   this client, and the rest of the machine (the containers, dockerd, containerd's shims), so
   the figure says what bounds the rate on a machine of this many cores.

    python benchmarks/serving.py [--steps 300] [--new 128] [--sessions 256] [--warm 128] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

import gym_sysmath  # noqa: F401
from gym_sysmath.serving.client import AsyncRemoteSysmathEnv, RemoteSysmathEnv

ROOT = Path(__file__).resolve().parent.parent
CODE = "```python\nprint(1)\n```"


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy (all cores), from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def answer_overhead(url: str, steps: int) -> dict[str, float]:
    local = gym.make("LinearAlgebra-v0", sandbox="process")
    remote = RemoteSysmathEnv(url, "LinearAlgebra-v0")

    def timed(env: gym.Env) -> float:
        times = []
        for seed in range(steps):
            start = time.perf_counter()
            env.reset(seed=seed)
            env.step("ANSWER: 1")
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1000

    timed(local), timed(remote)  # warm both (imports, the session)
    local_ms, remote_ms = timed(local), timed(remote)
    local.close()
    remote.close()
    return {"in_process_ms": round(local_ms, 3), "served_ms": round(remote_ms, 3),
            "added_ms": round(remote_ms - local_ms, 3)}


async def worst_stall(stop: asyncio.Event) -> float:
    worst = 0.0
    while not stop.is_set():
        before = time.perf_counter()
        await asyncio.sleep(0.005)
        worst = max(worst, time.perf_counter() - before - 0.005)
    return worst


async def first_code_steps(url: str, count: int) -> dict[str, Any]:
    envs = [AsyncRemoteSysmathEnv(url, "CsappExact-v0", max_turns=1000) for _ in range(count)]

    async def one(index: int, env: AsyncRemoteSysmathEnv) -> str:
        await env.reset(seed=index)
        _, _, _, truncated, info = await env.step(CODE)
        return "lost" if truncated or info.get("scoring_error") else str(info.get("execution"))

    start = time.perf_counter()
    outcomes = await asyncio.gather(*(one(index, env) for index, env in enumerate(envs)), return_exceptions=True)
    seconds = time.perf_counter() - start
    await asyncio.gather(*(env.close() for env in envs))
    return {"sessions": count, "seconds": round(seconds, 2), "load": load(),
            "ok": sum(outcome == "ok" for outcome in outcomes),
            "failed": [repr(outcome)[:200] for outcome in outcomes if outcome != "ok"][:5]}


async def concurrent_sessions(url: str, count: int, seconds: float, server_pid: int) -> dict[str, Any]:
    stop = asyncio.Event()
    watcher = asyncio.create_task(worst_stall(stop))
    envs = [AsyncRemoteSysmathEnv(url, "CsappExact-v0", max_turns=10_000) for _ in range(count)]
    counts = {"completed": 0, "scoring_errors": 0, "exceptions": 0, "turns": 0}
    errors: list[str] = []

    async def episode(index: int, env: AsyncRemoteSysmathEnv) -> None:
        try:
            await env.reset(seed=index)
            _, _, _, truncated, info = await env.step(CODE)
            if truncated or info.get("scoring_error"):
                counts["scoring_errors"] += 1
                errors.append(str(info.get("scoring_error"))[:200])
                return
            counts["completed"] += 1
        except Exception as exc:
            counts["exceptions"] += 1
            errors.append(f"{type(exc).__name__}: {exc}"[:200])

    start = time.perf_counter()
    await asyncio.gather(*(episode(index, env) for index, env in enumerate(envs)))
    first_s = time.perf_counter() - start

    deadline = time.perf_counter() + seconds

    async def turns(env: AsyncRemoteSysmathEnv) -> None:
        while time.perf_counter() < deadline:
            _, _, _, truncated, info = await env.step(CODE)
            if truncated or info.get("scoring_error"):
                counts["scoring_errors"] += 1
                return
            counts["turns"] += 1

    turn_start = time.perf_counter()
    cpu_before = (process_cpu_s(server_pid), process_cpu_s(os.getpid()), machine_busy_s())
    await asyncio.gather(*(turns(env) for env in envs))
    turn_s = time.perf_counter() - turn_start
    server_cpu, client_cpu, busy = (after - before for after, before in zip(
        (process_cpu_s(server_pid), process_cpu_s(os.getpid()), machine_busy_s()), cpu_before, strict=True))
    per_turn = 1000 / max(1, counts["turns"])
    cpu_ms_per_turn = {"server": round(server_cpu * per_turn, 3), "client": round(client_cpu * per_turn, 3),
                       "rest_of_machine": round((busy - server_cpu - client_cpu) * per_turn, 3),
                       "cores_busy": round(busy / turn_s, 2), "cores": os.cpu_count()}
    await asyncio.gather(*(env.close() for env in envs))
    stop.set()
    return {"sessions": count, "all_first_steps_s": round(first_s, 2), "completed": counts["completed"],
            "scoring_errors": counts["scoring_errors"], "exceptions": counts["exceptions"],
            "warm_turns_per_s": round(counts["turns"] / turn_s, 1), "cpu_ms_per_turn": cpu_ms_per_turn,
            "client_worst_stall_ms": round(
                1000 * await watcher, 1), "load": load(), "errors": errors[:5]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--new", type=int, default=128)
    parser.add_argument("--sessions", type=int, default=256)
    parser.add_argument("--warm", type=int, default=128)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))  # tests.served starts the server as the tests do
    from tests.served import running_server

    figures: dict[str, Any] = {}
    with running_server("--warm", str(args.warm), "--max-sessions", str(max(args.sessions, args.new) + 8),
                        start_timeout_s=300) as server:
        deadline = time.monotonic() + 600
        while not server.health()["ready"] and time.monotonic() < deadline:  # primed, the reserve warm
            time.sleep(1)
        figures["warm_reserve"] = server.health()["pool"]
        figures["answer_only"] = answer_overhead(server.url, args.steps)
        print(json.dumps({"answer_only": figures["answer_only"]}), flush=True)
        figures["first_code_step"] = asyncio.run(first_code_steps(server.url, args.new))
        print(json.dumps({"first_code_step": figures["first_code_step"]}), flush=True)
        if args.sessions:
            figures["concurrent"] = asyncio.run(concurrent_sessions(server.url, args.sessions, args.seconds,
                                                                      server.process.pid))
            print(json.dumps({"concurrent": figures["concurrent"]}), flush=True)
        figures["server_after"] = server.health()
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()

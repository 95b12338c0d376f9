"""Scale: a `vector_entry_point` vector of n CsappExact envs with live sessions, one container each.

For each n (default 8, 32, 128, 256), in one run on one machine:

- cold: the clock starts before ``gym.make_vec`` with no container started (a fresh shared
  sandbox); it stops when every env has reset and run its first Python tool turn (a live
  session in the rollout's own container). Container starts per second are those started in
  that time over that time.
- warm reserve: a fresh shared sandbox, ``sandbox.prestart(n)`` before the clock; then the same
  ``make_vec``, reset and first tool turn of every env.
- warm turns: after the first step every env keeps stepping tool turns (``print(1)``) for
  ``--seconds``: tool turns per second over the vector.
- memory per live rollout, with all n sessions live: this process's RSS growth, the containers'
  own memory (cgroup v1 ``memory.usage_in_bytes`` of each, which counts its page cache and
  tmpfs; cgroup v2 ``memory.current``), and the PSS of their ``containerd-shim`` processes
  (outside the containers' cgroups), each over n; and the drop of the host's MemAvailable.
- scoring errors over every step (target 0), and the load average next to each figure.

    python benchmarks/scale.py [--sizes 8 32 128 256] [--seconds 10] [--json out.json]

Containers this run starts are removed when it ends (``gym-sysmath sandbox prune`` removes
any a crash left behind).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import gymnasium as gym

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.sandbox import ExecutionStatus, daemon
from gym_sysmath.sandbox.pool import acquire_shared, release_shared

ENV_ID = "CsappExact-v0"
ACTION = "```python\nprint(1)\n```"


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def rss_mib() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def mem_available_mib() -> float:
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return 0.0


def container_memory_mib(container_id: str) -> float | None:
    """The container's memory as its cgroup reports it (v1 usage_in_bytes, or v2 memory.current)."""
    for path in (f"/sys/fs/cgroup/memory/gym-sysmath/{container_id}/memory.usage_in_bytes",  # capped parent
                 f"/sys/fs/cgroup/gym-sysmath/{container_id}/memory.current",
                 f"/sys/fs/cgroup/memory/docker/{container_id}/memory.usage_in_bytes",
                 f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/memory.current",
                 f"/sys/fs/cgroup/docker/{container_id}/memory.current"):
        try:
            with open(path) as handle:
                return int(handle.read()) / 2**20
        except OSError:
            continue
    return None


def shim_pss_mib(container_ids: set[str]) -> float:
    """PSS of the containerd-shim processes serving ``container_ids`` (host side, per container)."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
            if not argv or b"containerd-shim" not in argv[0]:
                continue
            if "-id" not in [a.decode() for a in argv]:
                continue
            if argv[argv.index(b"-id") + 1].decode() not in container_ids:
                continue
            with open(f"/proc/{pid}/smaps_rollup") as handle:
                for line in handle:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) / 1024
        except (OSError, ValueError, IndexError):
            continue
    return total


def check(infos: dict, n: int, errors: list[str]) -> None:
    for index in range(n):
        error = infos["scoring_error"][index]
        if error:
            errors.append(str(error)[:300])
        elif infos["execution"][index] != ExecutionStatus.OK:
            errors.append(f"env {index}: tool turn {infos['execution'][index]}")


def to_first_step(n: int, errors: list[str]):
    envs = gym.make_vec(ENV_ID, num_envs=n, vectorization_mode="vector_entry_point", max_turns=10**6)
    envs.reset(seed=0)
    _, _, _, _, infos = envs.step([ACTION] * n)
    check(infos, n, errors)
    return envs


def warm_turns(envs, n: int, seconds: float, errors: list[str]) -> float:
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        _, _, terminated, truncated, infos = envs.step([ACTION] * n)
        check(infos, n, errors)
        assert not (terminated.any() or truncated.any()), infos
        steps += n
    return steps / (time.perf_counter() - started)


def memory(sandbox, n: int, rss_before: float, available_before: float) -> dict:
    ids = {worker.container.id for worker in list(sandbox._leased) if getattr(worker, "container", None)}
    cgroup = [container_memory_mib(cid) for cid in ids]
    known = [m for m in cgroup if m is not None]
    return {
        "leased_containers": len(ids),
        "process_rss_growth_mib_per_rollout": round((rss_mib() - rss_before) / n, 2),
        "container_cgroup_mib_per_rollout": round(sum(known) / len(known), 2) if known else None,
        "shim_pss_mib_per_rollout": round(shim_pss_mib(ids) / max(1, len(ids)), 2),
        "host_memavailable_drop_mib_per_rollout": round((available_before - mem_available_mib()) / n, 2),
    }


def measure(n: int, seconds: float, warm: bool) -> dict:
    errors: list[str] = []
    sandbox = acquire_shared("docker", None)  # the sandbox the envs will share (fresh: none before)
    try:
        assert sandbox.stats().workers_started == 0, "a shared sandbox was already running"
        rss_before, available_before = rss_mib(), mem_available_mib()
        result: dict = {"n": n, "reserve": "warm" if warm else "cold"}
        if warm:
            began = time.perf_counter()
            clean = sandbox.prestart(n, timeout_s=900)
            result["prestart_s"] = round(time.perf_counter() - began, 2)
            result["prestart_clean"] = clean
            result["prestart_starts_per_s"] = round(sandbox.stats().workers_started / (time.perf_counter() - began), 1)
            result["load_after_prestart"] = load()
        result["load_before"] = load()
        started_before = sandbox.stats().workers_started
        began = time.perf_counter()
        envs = to_first_step(n, errors)
        first = time.perf_counter() - began
        stats = sandbox.stats()
        result.update({
            "to_first_step_s": round(first, 2),
            "starts_in_that_time": stats.workers_started - started_before,
            "starts_per_s": round((stats.workers_started - started_before) / first, 1),
            "load_at_first_step": load(),
        })
        try:
            result["turns_per_s"] = round(warm_turns(envs, n, seconds, errors), 1)
            result["load_after_turns"] = load()
            result["memory"] = memory(sandbox, n, rss_before, available_before)
        finally:
            envs.close()
        stats = sandbox.stats()
        result["pool"] = {"leases": stats.leases, "purges": stats.purges, "workers_started": stats.workers_started,
                          "workers_lost": stats.workers_lost, "retries": stats.retries}
        result["scoring_errors"] = len(errors)
        result["error_samples"] = errors[:5]
        return result
    finally:
        release_shared(sandbox)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 32, 128, 256])
    parser.add_argument("--seconds", type=float, default=10.0, help="of warm tool turns per measurement")
    parser.add_argument("--modes", nargs="+", default=["cold", "warm"], choices=["cold", "warm"])
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    client = daemon.docker_client()
    results = []
    for n in args.sizes:
        for mode in args.modes:
            result = measure(n, args.seconds, warm=mode == "warm")
            print(json.dumps(result), flush=True)
            results.append(result)
            time.sleep(2)  # let the removals of this measurement's containers settle
    left = daemon.containers_of_this_process(client)
    print(f"\n{'n':>4} {'reserve':>7} {'first step':>11} {'starts/s':>9} {'turns/s':>8} {'MiB/rollout':>24}"
          f" {'errors':>6}  load at first step")
    for r in results:
        mem = r["memory"]
        per = (f"{mem['process_rss_growth_mib_per_rollout']:.1f}+{mem['container_cgroup_mib_per_rollout']:.1f}"
               f"+{mem['shim_pss_mib_per_rollout']:.1f}")
        print(f"{r['n']:>4} {r['reserve']:>7} {r['to_first_step_s']:>10.2f}s {r['starts_per_s']:>9.1f}"
              f" {r['turns_per_s']:>8.0f} {per:>24} {r['scoring_errors']:>6}  {r['load_at_first_step']}")
    print("MiB/rollout: this process's RSS growth + the container's cgroup memory + its containerd-shim's PSS")
    print(f"containers of this process left: {len(left)}")
    for r in results:
        if r["n"] == 128 and r["reserve"] == "warm":
            print(f"target 128 envs to first step <= 10 s with the reserve warm: {r['to_first_step_s']:.2f} s -> "
                  + ("met" if r["to_first_step_s"] <= 10 else "MISSED"))
            print(f"target >= 500 warm tool turns/s at 128: {r['turns_per_s']:.0f} -> "
                  + ("met" if r["turns_per_s"] >= 500 else "MISSED"))
        if r["n"] == 256:
            print(f"target 256 live rollouts without a scoring error ({r['reserve']}): {r['scoring_errors']} -> "
                  + ("met" if r["scoring_errors"] == 0 else "MISSED"))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()

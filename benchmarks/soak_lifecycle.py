"""Lifecycle soak: thousands of envs made and dropped without close() (every tenth closed),
forks of the process while an env is mid-episode (the child steps the inherited env, is
refused, resets and runs an episode of its own), and async-vector workers killed with SIGKILL
mid-step. Ends by comparing what the process holds with what it held before the first env:
sandbox containers (its own and its forked children's), threads, fds, child processes (target:
nothing beyond the baseline). The same churn, with tens of envs, is
``tests/test_lifecycle.py::test_churn_of_tens_of_envs_forks_and_kills_leaves_nothing``.

    python benchmarks/soak_lifecycle.py [--envs 2000] [--forks 20] [--kills 10] [--threads 2]

``--threads`` more threads drop envs at the same time as the main thread (which also forks
and kills), so finalizers run in whichever thread the collector interrupts. One env stays open
until the end so the shared pool persists and dropped envs' containers are purged and reused;
a last round without it lets the pool close with the last env.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root, for tests/

from gym_sysmath.sandbox import daemon
from tests.test_lifecycle import churn, footprint, settle, within


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=2000, help="envs made and dropped in all")
    parser.add_argument("--forks", type=int, default=20)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2, help="extra threads dropping envs")
    parser.add_argument("--env-id", default="CsappExact-v0")
    args = parser.parse_args()

    client = daemon.docker_client()
    gc.collect()
    baseline = footprint(client, set())
    print(f"baseline: {baseline}", flush=True)
    started = time.monotonic()
    share = args.envs // (args.threads + 1)
    pids: set[int] = set()
    errors: list[BaseException] = []

    def side(seed: int) -> None:
        try:
            churn(share, env_id=args.env_id, keep_pool=True)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=side, args=(i,), name=f"soak-{i}") for i in range(args.threads)]
    for thread in threads:
        thread.start()
    done = [0]

    def log(count: int) -> None:
        done[0] = count
        print(f"  main thread: {count} envs, {time.monotonic() - started:.0f} s; now {footprint(client, pids)}",
              flush=True)

    pids |= churn(args.envs - share * args.threads, forks=args.forks, kills=args.kills, env_id=args.env_id,
                  keep_pool=True, log=log)
    for thread in threads:
        thread.join()
    pids |= churn(10, env_id=args.env_id)  # the pool closes with each env, and the next starts one
    elapsed = time.monotonic() - started
    after = settle(client, pids, baseline)
    report = {
        "envs": args.envs + 10, "forks": args.forks, "kills": args.kills, "threads": args.threads + 1,
        "seconds": round(elapsed, 1), "baseline": str(baseline), "after": str(after),
        "errors": [repr(exc)[:300] for exc in errors],
    }
    print(json.dumps(report, indent=1))
    leaked = not within(after, baseline) or errors
    print("LEAK" if leaked else "nothing beyond the baseline")
    return 1 if leaked else 0


if __name__ == "__main__":
    sys.exit(main())

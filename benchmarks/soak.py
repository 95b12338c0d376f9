"""Soak: N envs x M episodes of mixed actions (correct, wrong, hostile) on one shared pool,
for a bounded time. Reports steps, verdicts, scoring errors (target 0 when no fault is
injected), the pool's lost workers and retries, containers and host processes left after
close (target 0), and this process's RSS over the run (target: flat).

    python benchmarks/soak.py [--envs 8] [--episodes 60] [--minutes 10] [--pool-size 2] [--seed 0]

Every env is a thread stepping its own env (CsappExact and LinearAlgebra with Python tool
turns, CompGeom in all three languages) against the same warm pool, which is smaller than
the number of envs, so jobs queue. Hostile actions come from the hostile catalogue's kinds
(`tests/hostile/`): loops, bombs, floods, allocations, disk filling, early exits.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root, for tests/

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.sandbox import Job, Limits, image
from gym_sysmath.tasks import compgeom
from gym_sysmath.tasks.compgeom.fixtures import bad_sources
from tests.hostile.payloads import LEFTOVER_PROBE, PRIMITIVE, inject, task_id

LIMITS = Limits(wall_s=3.0, cpu_s=2.0)
KINDS = ("correct", "wrong", "hostile")
KIND_WEIGHTS = (0.4, 0.3, 0.3)

#: One payload per attack and language; each runs before the candidate's work (see payloads.py).
HOSTILE = {
    "busy_loop": {"python": "while True:\n    pass", "cpp": "    volatile long n = 0;\n    for (;;) ++n;",
                  "rust": "    let mut n = 0u64;\n    loop { n = std::hint::black_box(n + 1); }"},
    "fork_bomb": {"python": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
                  "cpp": "    for (;;) fork();",
                  "rust": '    extern "C" { fn fork() -> i32; }\n    loop { unsafe { fork(); } }'},
    "memory_growth": {"python": "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))",
                      "cpp": "    std::vector<std::string> chunks;\n    for (;;) chunks.emplace_back(16 << 20, 'x');",
                      "rust": "    let mut chunks = Vec::new();\n    loop { chunks.push(vec![1u8; 16 << 20]); }"},
    "stdout_flood": {"python": "import sys\nwhile True:\n    sys.stdout.write('spam\\n' * 1000)",
                     "cpp": '    for (;;) std::fputs("spam spam spam\\n", stdout);',
                     "rust": '    loop { println!("spam spam spam"); }'},
    "fill_scratch": {"python": "try:\n    for i in range(100):\n        open(f'f{i}', 'wb').write(bytes(32 << 20))\n"
                               "except OSError:\n    pass",
                     "cpp": "    std::string block(32 << 20, '\\0');\n    for (int i = 0; i < 100; ++i)\n"
                            "        if (!(std::ofstream(\"f\" + std::to_string(i)) << block)) break;",
                     "rust": "    for i in 0..100 { if std::fs::write(format!(\"f{i}\"), vec![0u8; 32 << 20]).is_err()"
                             " { break; } }"},
    "daemon_and_exit": {"python": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    while True:\n"
                                  "        time.sleep(1)\nos._exit(0)",
                        "cpp": "    if (fork() == 0) { setsid(); for (;;) sleep(1); }\n    std::_Exit(0);",
                        "rust": '    extern "C" { fn fork() -> i32; fn setsid() -> i32; }\n'
                                "    unsafe { if fork() == 0 { setsid(); loop { std::thread::sleep("
                                "std::time::Duration::from_secs(1)); } } }\n    std::process::exit(0);"},
}

ENV_MIX = (
    ("CsappExact-v0", {"max_turns": 3}),
    ("CompGeomPython-v0", {"max_turns": 1, "primitives": [PRIMITIVE]}),
    ("CompGeomCpp-v0", {"max_turns": 1, "primitives": [PRIMITIVE]}),
    ("LinearAlgebra-v0", {"max_turns": 3}),
    ("CompGeomRust-v0", {"max_turns": 1, "primitives": [PRIMITIVE]}),
)


@dataclass
class Tally:
    steps: int = 0
    episodes: int = 0
    verdicts: collections.Counter = field(default_factory=collections.Counter)
    executions: collections.Counter = field(default_factory=collections.Counter)
    scoring_errors: list[str] = field(default_factory=list)
    correct_not_rewarded: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def step(self, env, action: str) -> tuple[float, bool, dict]:
        _, reward, terminated, truncated, info = env.step(action)
        with self.lock:
            self.steps += 1
            if info.get("execution"):
                self.executions[info["execution"]] += 1
            if info["scoring_error"]:
                self.scoring_errors.append(info["scoring_error"])
            if terminated or truncated:
                self.episodes += 1
                self.verdicts[info["verdict"]] += 1
        return reward, terminated or truncated, info


def episode(env, env_id: str, kind: str, attack: str, seed: int, tally: Tally) -> None:
    """One episode of ``kind``; a correct episode must earn 1.0."""
    unwrapped = env.unwrapped
    if env_id.startswith("CompGeom"):
        language = unwrapped.task_ids[0].split("/")[1]
        env.reset(options={"task_id": task_id(language)})
        if kind == "correct":
            source = compgeom.reference_solution(unwrapped.current_task)
        elif kind == "wrong":
            source = next(iter(bad_sources(PRIMITIVE, language).values()))
        else:
            source = inject(language, HOSTILE[attack][language])
        reward, _, info = tally.step(env, f"```{language}\n{source}\n```")
    else:
        env.reset(seed=seed)
        if kind == "hostile":
            _, done, _ = tally.step(env, f"```python\n{HOSTILE[attack]['python']}\n```")
            if done:
                return
        action = unwrapped.reference_action() if kind != "wrong" else "ANSWER: 0"
        reward, _, info = tally.step(env, action)
    if kind == "correct" and reward != 1.0 and not info["scoring_error"]:
        with tally.lock:
            tally.correct_not_rewarded.append(f"{env_id} {info['task_id']}: {info['verdict']}")


def rss_mib() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def leftover_job_processes(pool, workers: int) -> list[str]:
    """Processes of job uids still alive in the workers once every episode is over (target none):
    one probe per worker, run at once so that each lands on a different one."""
    probe = Job("python", {"main.py": LEFTOVER_PROBE})
    with ThreadPoolExecutor(workers) as threads:
        outputs = list(threads.map(lambda _: pool.run(probe).stdout.strip(), range(workers)))
    return [output for output in outputs if output != "[]"]


def child_processes() -> list[str]:
    """Host processes this process started and left running (the Docker backend starts none)."""
    mine = str(os.getpid())
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            if fields[1] == mine:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    found.append(f"{pid} {handle.read()[:80]!r}")
        except OSError:
            continue
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=60, help="per env")
    parser.add_argument("--minutes", type=float, default=10.0, help="stop starting episodes after this")
    parser.add_argument("--pool-size", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args()

    rss = {"start": rss_mib()}
    client = image.docker_client()
    envs = [gym.make(env_id, pool_size=args.pool_size, limits=LIMITS, **kwargs)
            for env_id, kwargs in (ENV_MIX[i % len(ENV_MIX)] for i in range(args.envs))]
    pool = envs[0].unwrapped.sandbox
    tally = Tally()
    deadline = time.monotonic() + args.minutes * 60
    started = time.monotonic()
    samples: list[tuple[float, float]] = []

    def run_env(index: int) -> None:
        env_id = ENV_MIX[index % len(ENV_MIX)][0]
        rng = np.random.default_rng([args.seed, index])
        for _ in range(args.episodes):
            if time.monotonic() > deadline:
                return
            kind = str(rng.choice(KINDS, p=KIND_WEIGHTS))
            attack = str(rng.choice(sorted(HOSTILE)))
            seed = int(rng.integers(1 << 30))
            try:
                episode(envs[index], env_id, kind, attack, seed, tally)
            except Exception as exc:  # a crash of the library itself: reported, never hidden
                with tally.lock:
                    tally.crashes.append(f"{env_id} {kind} {attack}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run_env, args=(i,), daemon=True) for i in range(args.envs)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        time.sleep(5)
        samples.append((round(time.monotonic() - started, 1), round(rss_mib(), 1)))
    elapsed = time.monotonic() - started
    rss["end_before_close"] = rss_mib()
    stats = pool.stats()
    left_in_workers = leftover_job_processes(pool, args.pool_size)
    for env in envs:
        env.close()
    time.sleep(1)
    leaked = [c.short_id for c in image.containers_of_this_process(client)]
    report = {
        "envs": args.envs, "pool_size": args.pool_size, "seconds": round(elapsed, 1),
        "steps": tally.steps, "episodes": tally.episodes, "steps_per_second": round(tally.steps / elapsed, 2),
        "verdicts": dict(tally.verdicts), "tool_turn_executions": dict(tally.executions),
        "scoring_errors": len(tally.scoring_errors), "scoring_error_samples": tally.scoring_errors[:5],
        "correct_actions_not_rewarded": tally.correct_not_rewarded[:10], "crashes": tally.crashes[:10],
        "pool": {"requests": stats.requests, "workers_started": stats.workers_started,
                 "workers_lost": stats.workers_lost, "retries": stats.retries},
        "job_processes_left_in_workers": left_in_workers,
        "leaked_containers": leaked, "leaked_child_processes": child_processes(),
        "rss_mib": {"start": round(rss["start"], 1), "end": round(rss["end_before_close"], 1),
                    "max": max((mib for _, mib in samples), default=rss["end_before_close"])},
        "rss_samples": samples[:: max(1, len(samples) // 20)],
    }
    print(json.dumps(report, indent=2))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=2)
    ok = not (tally.scoring_errors or tally.correct_not_rewarded or tally.crashes or leaked or left_in_workers
              or report["leaked_child_processes"])
    print("soak: " + ("PASS" if ok else "FAIL") + f" ({tally.steps} steps in {elapsed:.0f} s)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

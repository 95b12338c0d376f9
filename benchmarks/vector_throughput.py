"""Code steps per second with n envs: the batched env (one shared warm pool, concurrent jobs)
against Gymnasium's sync and async vectorization, for n = 1, 2, 4, 8, in one run.

Two workloads: a trivial Python tool turn (CsappExact session: `print(1)`, well under a
millisecond of sandbox work, so the host's own per-step cost dominates) and a CompGeom Python
test run (one isolated job per step that runs the public cases: the sandbox does the work).

    python benchmarks/vector_throughput.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.tasks import compgeom

MODES = ("vector_entry_point", "sync", "async")
(_TASK,) = compgeom.load_tasks(["segment2_segment2"], ["python"])
WORKLOADS = {
    "trivial tool turn (CsappExact-v0)": ("CsappExact-v0", {}, "```python\nprint(1)\n```"),
    "public test run (CompGeomPython-v0)": ("CompGeomPython-v0", {"primitives": ["segment2_segment2"]},
                                            f"```python\n{compgeom.reference_solution(_TASK)}```"),
}


def steps_per_second(workload: str, mode: str, num_envs: int, seconds: float) -> float:
    env_id, kwargs, action = WORKLOADS[workload]
    envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode, max_turns=10**9, **kwargs)
    try:
        envs.reset(seed=0)
        actions = [action] * num_envs
        envs.step(actions)  # start the workers and sessions
        steps, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            envs.step(actions)
            steps += num_envs
        return steps / (time.perf_counter() - started)
    finally:
        envs.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8])
    args = parser.parse_args()
    for workload in WORKLOADS:
        rates = {(mode, n): steps_per_second(workload, mode, n, args.seconds) for mode in MODES for n in args.sizes}
        print(f"\n{workload}\n{'n':>3} " + " ".join(f"{mode:>20}" for mode in MODES))
        for n in args.sizes:
            print(f"{n:>3} " + " ".join(f"{rates[mode, n]:>16.0f} /s " for mode in MODES))
        single = rates["vector_entry_point", 1]
        best = max(args.sizes, key=lambda n: rates["vector_entry_point", n])
        print(f"batched env: best {rates['vector_entry_point', best]:.0f} steps/s at n={best}, "
              f"{rates['vector_entry_point', best] / single:.2f}x its single-env rate ({single:.0f}/s); "
              "targets: >= 200 steps/s and >= 1.6x")


if __name__ == "__main__":
    main()

"""Code steps per second with n envs: the batched env (one shared warm pool, concurrent jobs)
against Gymnasium's sync and async vectorization, for n = 1, 2, 4, 8, in one run.

    python benchmarks/vector_throughput.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym

import gym_sysmath  # noqa: F401  (registers the ids)

ACTION = "```python\nprint(1)\n```"
MODES = ("vector_entry_point", "sync", "async")


def steps_per_second(mode: str, num_envs: int, seconds: float) -> float:
    envs = gym.make_vec("CsappExact-v0", num_envs=num_envs, vectorization_mode=mode, max_turns=10**9)
    try:
        envs.reset(seed=0)
        actions = [ACTION] * num_envs
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
    rates = {(mode, n): steps_per_second(mode, n, args.seconds) for mode in MODES for n in args.sizes}
    print(f"{'n':>3} " + " ".join(f"{mode:>20}" for mode in MODES))
    for n in args.sizes:
        print(f"{n:>3} " + " ".join(f"{rates[mode, n]:>16.0f} /s " for mode in MODES))
    single = rates["vector_entry_point", 1]
    best = max(args.sizes, key=lambda n: rates["vector_entry_point", n])
    print(f"\nbatched env: best {rates['vector_entry_point', best]:.0f} steps/s at n={best}, "
          f"{rates['vector_entry_point', best] / single:.2f}x the single-env rate ({single:.0f}/s); "
          "targets: >= 200 steps/s and >= 1.6x")


if __name__ == "__main__":
    main()

"""Step latency of a trivial Python code action, against the ways others run such a job.

One run, one machine: a session turn (`env.step` with a ```python block, in the rollout's own
leased container), a one-shot job in that container (`env.unwrapped.rollout.run`: fresh scratch
dir, fork, setuid, rlimits, purge of the job), a one-job rollout (`Sandbox.run`: a container
leased from the warm reserve, the job, the container handed back to be purged in the
background), the same job by `docker exec` into a warm container, by `docker run --rm`, the
bare fork floor inside a warm container, and an answer-only step (no sandbox). Prints p50/p99
and the ratios.

    python benchmarks/step_latency.py [--steps 300]
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.sandbox import Job, daemon

CODE = "print(1)"
ACTION = f"```python\n{CODE}\n```"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(fn, repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rollouts", type=int, default=60, help="one-job rollouts (Sandbox.run)")
    parser.add_argument("--docker-run", type=int, default=15)
    args = parser.parse_args()

    env = gym.make("CsappExact-v0", max_turns=args.steps + 10)
    env.reset(seed=0)
    env.step(ACTION)  # start the warm container and the session
    pool_step = timed(lambda: env.step(ACTION), args.steps)
    rollout = env.unwrapped.rollout  # the episode's own container (the session lives there)
    floor = [rollout.fork_floor(CODE) for _ in range(args.steps)]
    job = Job("python", {"main.py": CODE})
    one_shot = timed(lambda: rollout.run(job), args.steps)
    sandbox = env.unwrapped.sandbox
    sandbox.prestart(4)
    # one lease per job: each waits for a clean container if the background purges lag behind
    one_job_rollout = timed(lambda: sandbox.run(job), args.rollouts)
    stats = sandbox.stats()
    env.close()

    answer_env = gym.make("CsappExact-v0").unwrapped
    answer_samples = []
    for _ in range(2000):
        answer_env.reset(seed=0)
        action = answer_env.reference_action()
        started = time.perf_counter()
        answer_env.step(action)
        answer_samples.append(time.perf_counter() - started)
    answer_env.close()

    client = daemon.docker_client()
    tag = daemon.image_tag()
    warm = client.containers.run(tag, entrypoint=["sleep", "infinity"], detach=True, network_mode="none",
                                 labels={"gym_sysmath.sandbox": "1", "gym_sysmath.owner": daemon.owner_label()})
    try:
        exec_samples = timed(lambda: warm.exec_run(["python3", "-c", CODE]), max(20, args.steps // 10))
    finally:
        warm.remove(force=True)
    run_samples = timed(lambda: client.containers.run(tag, entrypoint=["python3", "-c", CODE], remove=True,
                                                      network_mode="none"), args.docker_run)

    rows = [
        ("env.step, session turn (own container)", pool_step),
        ("one-shot job in the rollout's container", one_shot),
        ("one-job rollout (lease + job + purge)", one_job_rollout),
        ("fork floor inside the container", floor),
        ("docker exec into a warm container", exec_samples),
        ("docker run --rm", run_samples),
        ("answer-only env.step (no sandbox)", answer_samples),
    ]
    print(f"{'path':<42} {'n':>5} {'p50 ms':>9} {'p99 ms':>9}")
    for name, samples in rows:
        p50, p99 = percentile(samples, 0.5) * 1e3, percentile(samples, 0.99) * 1e3
        print(f"{name:<42} {len(samples):>5} {p50:>9.3f} {p99:>9.3f}")
    p50 = {name: statistics.median(samples) for name, samples in rows}
    pool, fork = p50["env.step, session turn (own container)"], p50["fork floor inside the container"]
    print()
    print(f"tool turn p50: {pool * 1e3:.3f} ms (target <= 1 ms) -> {'met' if pool <= 0.001 else 'MISSED'}")
    print(f"session turn vs target (2 x fork floor + 3 ms = {(2 * fork + 0.003) * 1e3:.2f} ms): "
          f"{pool * 1e3:.2f} ms -> {'met' if pool <= 2 * fork + 0.003 else 'MISSED'}")
    shot = p50["one-shot job in the rollout's container"]
    print(f"one-shot job vs the same target: {shot * 1e3:.2f} ms -> {'met' if shot <= 2 * fork + 0.003 else 'MISSED'}")
    print(f"one-job rollouts: {stats.leases} leases, {stats.purges} purges, {stats.workers_started} containers "
          "started")
    print(f"docker exec / warm pool: {p50['docker exec into a warm container'] / pool:.1f}x (target >= 20x)")
    print(f"docker run / warm pool:  {p50['docker run --rm'] / pool:.1f}x (target >= 50x)")
    answer_us = p50["answer-only env.step (no sandbox)"] * 1e6
    print(f"answer-only step: {answer_us:.1f} us (target < 50 us)")


if __name__ == "__main__":
    main()

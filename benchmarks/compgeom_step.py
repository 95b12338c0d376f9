"""CompGeom step time against a bare compile-and-run of the same candidate, per language.

For each language, in one run on one machine:
- env step: `env.step` with the reference solution (max_turns=1: built, run on the hidden
  cases, graded), with a fresh comment each time, on a warm reserve (``prestart``: the
  rollout's container is started and clean before its episode);
- cached: within one rollout (max_turns=2), a public-test turn with the source, then the
  submission of that same candidate (a reply with no code block), timed: the rollout's own
  build cache hits. Build caches are never shared between rollouts, so a resubmission in a
  new episode builds again;
- bare: the same compiler command and run inside a warm container of the same image, timed
  inside the container (no docker exec overhead counted).

    python benchmarks/compgeom_step.py [--repeats 3] [--primitive segment2_segment2]
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import time

import gymnasium as gym

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.sandbox import daemon
from gym_sysmath.sandbox.image.toolchains import TOOLCHAINS
from gym_sysmath.tasks import compgeom
from gym_sysmath.verdicts import Verdict

PRIMITIVE = "segment2_segment2"
BARE = """
import base64, json, os, subprocess, sys, tempfile, time
spec = json.loads(base64.b64decode(sys.argv[1]))
folder = tempfile.mkdtemp()
for name, text in spec["files"].items():
    open(os.path.join(folder, name), "w").write(text)
started = time.perf_counter()
if spec["build"]:
    subprocess.run(spec["build"], cwd=folder, check=True, capture_output=True)
subprocess.run(spec["run"], cwd=folder, input=spec["stdin"].encode(), check=True, capture_output=True)
print(time.perf_counter() - started)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--primitive", default=PRIMITIVE, choices=compgeom.PRIMITIVES)
    args = parser.parse_args()
    client = daemon.docker_client()
    # the same one-CPU quota as a pool container, so both sides compile on the same budget
    warm = client.containers.run(daemon.image_tag(), entrypoint=["sleep", "infinity"], detach=True, nano_cpus=10**9,
                                 network_mode="none", labels={"gym_sysmath.sandbox": "1",
                                                              "gym_sysmath.owner": daemon.owner_label()})
    rows = []
    try:
        for language in compgeom.LANGUAGES:
            (task,) = compgeom.load_tasks([args.primitive], [language])
            solution = compgeom.reference_solution(task)
            env = gym.make("CompGeom-v0", languages=[language], max_turns=1)
            twice = gym.make("CompGeom-v0", languages=[language], max_turns=2)
            env.unwrapped.sandbox.prestart(4)
            steps, cached = [], []
            for rep in range(-1, args.repeats):  # rep -1: a warm-up, not counted
                source = f"{solution}\n{TOOLCHAINS[language].comment} benchmark run {time.time_ns()} {rep}\n"
                env.reset(options={"task_id": task.task_id})
                started = time.perf_counter()
                *_, info = env.step(f"```{language}\n{source}```")
                elapsed = time.perf_counter() - started
                assert info["verdict"] == Verdict.CORRECT, info
                source = f"{solution}\n{TOOLCHAINS[language].comment} benchmark run {time.time_ns()} {rep} twice\n"
                twice.reset(options={"task_id": task.task_id})
                *_, info = twice.step(f"```{language}\n{source}```")  # public tests: builds it
                assert info["public_passed"] == info["public_total"], info
                started = time.perf_counter()
                *_, info = twice.step("Submitting that.")  # the same candidate: the rollout's cache
                cached_s = time.perf_counter() - started
                assert info["verdict"] == Verdict.CORRECT, info
                if rep >= 0:
                    steps.append(elapsed)
                    cached.append(cached_s)
                env.unwrapped.sandbox.prestart(4)  # the next episode's container is clean again
            env.close()
            twice.close()
            toolchain = TOOLCHAINS[language]  # the sandbox's own commands
            spec = {"files": compgeom.job_files(task, solution), "stdin": compgeom.stdin_for(task.hidden_cases),
                    "build": list(toolchain.build), "run": list(toolchain.run)}
            payload = base64.b64encode(json.dumps(spec).encode()).decode()
            bare = [float(warm.exec_run(["python3", "-c", BARE, payload]).output) for _ in range(args.repeats)]
            rows.append((language, statistics.median(steps), statistics.median(cached), statistics.median(bare)))
    finally:
        warm.remove(force=True)
    print(f"{'language':<8} {'env step':>10} {'bare build+run':>15} {'ratio':>7} {'cached submit':>16}")
    for language, step, cached, bare in rows:
        print(f"{language:<8} {step * 1e3:>8.0f}ms {bare * 1e3:>13.0f}ms {step / bare:>6.2f}x {cached * 1e3:>14.1f}ms")
    print("\ntargets: env step within 1.3x of bare build+run; cached submission (same rollout) under 20 ms")


if __name__ == "__main__":
    main()

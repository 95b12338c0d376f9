"""CompGeom's performance score under load: the same submission, 10 times idle and 10 times
while two busy processes keep both cores busy, per language; and the step time with it on.

The submission is the reference solution of ``line2_line2`` made slower (it computes each
answer 10 more times), so its score is below the cap and any spread would show. Each step is a
fresh episode (``max_turns=1``: built, run on the hidden cases, graded, then one counted run;
the reference's and the starter's counts are taken once per task, in the first step).

    python benchmarks/perf_score.py [--runs 10] [--languages cpp rust python]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import gymnasium as gym

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.tasks import compgeom
from gym_sysmath.verdicts import Verdict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' slower submission
from tests.test_compgeom_performance import PRIMITIVE, slower


def _spin() -> None:
    while True:
        pass


def _steps(env, language: str, source: str, runs: int) -> tuple[list[float], list[float]]:
    scores, times = [], []
    for _ in range(runs):
        env.reset(options={"task_id": f"{PRIMITIVE}/{language}"})
        started = time.perf_counter()
        _, _, _, _, info = env.step(f"```{language}\n{source}\n```")
        times.append(time.perf_counter() - started)
        assert info["verdict"] == Verdict.CORRECT and info["scoring_error"] is None, info
        scores.append(info["performance_score"])
    return scores, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--languages", nargs="+", choices=compgeom.LANGUAGES, default=list(compgeom.LANGUAGES))
    args = parser.parse_args()
    rows = {}
    for language in args.languages:
        task = compgeom.load_tasks([PRIMITIVE], [language])[0]
        source = slower(language, compgeom.reference_solution(task), extra_calls=10)
        scored = gym.make("CompGeom-v0", primitives=[PRIMITIVE], max_turns=1, measure_performance=True)
        plain = gym.make("CompGeom-v0", primitives=[PRIMITIVE], max_turns=1)
        try:
            _steps(scored, language, source, 1)  # the reference's and the starter's counts
            idle, idle_s = _steps(scored, language, source, args.runs)
            _, plain_s = _steps(plain, language, source, args.runs)
            spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(os.cpu_count() or 2)]
            for spinner in spinners:
                spinner.start()
            try:
                busy, busy_s = _steps(scored, language, source, args.runs)
            finally:
                for spinner in spinners:
                    spinner.kill()
        finally:
            scored.close()
            plain.close()
        both = idle + busy
        rows[language] = {
            "scores_idle": idle, "scores_busy": busy,
            "spread_percent": round(100 * (max(both) - min(both)) / statistics.median(both), 4),
            "step_s_median": {"score_off": round(statistics.median(plain_s), 2),
                              "score_on_idle": round(statistics.median(idle_s), 2),
                              "score_on_busy": round(statistics.median(busy_s), 2)},
            "load_average": os.getloadavg()[0],
        }
        print(language, json.dumps(rows[language]), flush=True)


if __name__ == "__main__":
    main()

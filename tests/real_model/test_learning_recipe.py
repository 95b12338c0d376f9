"""The short form of the SmolLM2 GRPO recipe (examples/smollm2_grpo.py), run as a user runs it:
held-out eval through ``gym-sysmath eval``, two GRPO steps on the starter level, the eval again,
the log, the plot and the result. The long run is a benchmark (docs/learning.md), not a test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker]

RECIPE = Path(__file__).resolve().parents[2] / "examples" / "smollm2_grpo.py"


def test_recipe_short_form_trains_logs_and_evaluates(model_dir, docker_available, tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, str(RECIPE), "run", "--out", str(out), "--model-dir", str(model_dir),
               "--steps", "2", "--tasks-per-step", "2", "--group-size", "3", "--max-new-tokens", "24",
               "--eval-tasks", "10", "--eval-rollouts", "2", "--window", "4", "--threads", "1"]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-3000:]
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert [step["step"] for step in steps] == [0, 1]
    for step in steps:
        assert step["level"] == "starter" and 0.0 <= step["reward"] <= 1.0 and 0.0 <= step["format_errors"] <= 1.0
        assert step["scoring_errors"] == 0 and step["watch_disagreements"] == 0
    rollouts = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 2 * 2 * 3 and all(r["task_id"].startswith("train/") for r in rollouts)
    result = json.loads((out / "result.json").read_text())
    for tag in ("before", "after"):
        held_out = result[tag]
        assert held_out["tasks"] == 10 and held_out["samples"] == 20 and len(held_out["per_seed"]) == 2
        low, high = held_out["ci95"]
        assert low <= held_out["reward"] <= high
        summary = json.loads((out / tag / "eval" / "summary.json").read_text())  # the project's own eval wrote it
        assert summary
    assert result["totals"]["scoring_errors"] == 0 and result["totals"]["watch_disagreements"] == 0
    assert (out / "curve.png").stat().st_size > 10_000

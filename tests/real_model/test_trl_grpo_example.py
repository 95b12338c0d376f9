"""``examples/trl_grpo.py``, the README's TRL path, runs as a newcomer runs it: a subprocess on
the model ``make real-model`` installed, one step, and it prints the reward the trainer logged
and saves the model and ``trainer_state.json`` where it says. (That the logged reward is the
envs' own grading is test_grpo.py's question.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.docker


def test_trl_grpo_example_runs_a_step_and_saves_where_it_says(model_dir, docker_available, tmp_path, capsys):
    pytest.importorskip("trl")
    out = tmp_path / "trl-grpo"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "trl_grpo.py"), "--model", str(model_dir),
                           "--steps", "1", "--out", str(out)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=900)
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-4000:]
    printed = re.findall(r"^step (\d+): mean reward ([0-9.]+) over (\d+) completions \((.*)\)$", done.stdout, re.M)
    assert [step for step, *_ in printed] == ["1"], done.stdout
    _, mean, completions, verdicts = printed[0]
    assert int(completions) == 4  # --generations' default: one prompt, four completions
    assert sum(int(count) for count in re.findall(r" (\d+)(?:,|$)", verdicts)) == 4, verdicts
    assert f"{out.resolve()}" in done.stdout.splitlines()[-1]
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    assert not list(out.glob("checkpoint-*"))  # no 1 GB optimizer state for a demonstration
    logged = [entry for entry in json.loads((out / "trainer_state.json").read_text())["log_history"]
              if "rewards/sysmath_reward/mean" in entry]
    assert len(logged) == 1 and abs(logged[0]["rewards/sysmath_reward/mean"] - float(mean)) < 1e-3
    assert logged[0]["sysmath/scoring_errors"] == 0
    with capsys.disabled():
        print(f"\nexamples/trl_grpo.py --steps 1: {elapsed:.0f} s; step 1 mean reward {mean} ({verdicts})")

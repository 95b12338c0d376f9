"""The ``vf-eval gym-sysmath`` of docs/integrations.md against SmolLM2 behind ``transformers serve``: no rollout
fails, and each recorded reward is the env's own grading of the reply the model gave.

``transformers serve`` ends its streams without ``data: [DONE]``, which verifiers' interception
server waits for (every rollout failed on it); the run goes through ``sse_done.done_proxy``,
which adds the line. Kept short: LinearAlgebra's one-turn tasks, two of them, 48 tokens."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gym_sysmath.answers import strip_end_tokens
from gym_sysmath.integrations.episodes import TaskRef, grade_completion
from tests.real_model.sse_done import done_proxy

N = 2
MAX_TOKENS = 48
RUN_LIMIT_S = 900


def test_vf_eval_against_transformers_serve_fails_no_rollout(server, tmp_path):
    venv_bin = Path(sys.executable).parent
    if not (venv_bin / "vf-eval").exists() or shutil.which("uv", path=str(venv_bin)) is None:
        pytest.fail("the real-model tier needs the frameworks extra (vf-eval and uv)")
    started = time.monotonic()
    with done_proxy(server.url) as url:
        run = subprocess.run(
            [str(venv_bin / "vf-eval"), "gym-sysmath", "--env.taskset.env-id", "LinearAlgebra-v0",
             "--env.taskset.n", str(N), "-m", server.model, "--client.base-url", url,
             "--env.player.runtime.type", "subprocess", "--sampling.max-tokens", str(MAX_TOKENS),
             "--sampling.temperature", "0", "--no-push"],
            cwd=tmp_path, capture_output=True, text=True, timeout=RUN_LIMIT_S,
            env={**os.environ, "PATH": f"{venv_bin}:{os.environ['PATH']}"})
    elapsed = time.monotonic() - started
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    [traces] = list(tmp_path.glob("outputs/*/traces.jsonl"))
    episodes = [json.loads(line) for line in traces.open()]
    assert len(episodes) == N
    for episode in episodes:
        [trace] = episode["traces"]
        assert episode["ok"] and not trace["errors"], trace["errors"]
        [reply] = [node["message"]["content"] for node in trace["nodes"] if node["sampled"]]  # one turn
        assert reply and trace["calls"][0]["finish_reason"] in ("stop", "length")
        reward, info = grade_completion(TaskRef.parse(episode["task"]["data"]["ref"]), strip_end_tokens(reply.strip()))
        assert (trace["rewards"]["sysmath"]["score"], trace["info"]["verdict"]) == (reward, info["verdict"])
    print(f"\nvf-eval against transformers serve: {N} rollouts, 0 failed, {elapsed:.0f} s; verdicts "
          f"{[e['traces'][0]['info']['verdict'] for e in episodes]}")

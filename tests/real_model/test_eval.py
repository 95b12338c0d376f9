"""``gym-sysmath eval --agent openai`` against a real model behind a real server, every family.

One run is started, interrupted with SIGINT once some samples are logged, and finished with
``--resume``; its log is then replayed with ``--agent responses``. What is asserted: every
planned sample is logged once and graded (no failure, no scoring error), each turn keeps the
model's own text with its token usage and finish reason (a greedy request for a logged turn
gives the logged text back), the replay gives identical rewards and verdicts, and the
interrupted part of the log is kept as it was. The figures docs/results.md quotes are printed at
the end (and written to ``$GYM_SYSMATH_REAL_MODEL_REPORT`` when set).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

ENV_IDS = ("CsappExact-v0", "LinearAlgebra-v0", "CompGeom-v0")  # every family
N = 3  #: tasks per env
MAX_TURNS = 2  #: a tool turn and a final one: multi-turn, within CI's time
MAX_TOKENS = 160
CONCURRENCY = 2
RUN_LIMIT_S = 1200  #: each CLI call; a hang fails the test instead of stalling CI
FINISH_REASONS = {"stop", "length"}
MEASURED: dict[str, float] = {}  #: figures the tests below take on the way, for the report

pytestmark = pytest.mark.docker


def cli() -> list[str]:
    return [str(Path(sys.executable).with_name("gym-sysmath"))]


def eval_args(server, out: Path) -> list[str]:
    return [*cli(), "eval", *ENV_IDS, "--agent", "openai", "--model", server.model, "--base-url", server.url,
            "-n", str(N), "-c", str(CONCURRENCY), "--temperature", "0", "--max-tokens", str(MAX_TOKENS),
            "--env-arg", f"max_turns={MAX_TURNS}", "--out", str(out), "--quiet"]


def with_default_sigint(args: list[str]) -> list[str]:
    """``args`` run with SIGINT's default disposition, so that Python turns it into
    KeyboardInterrupt: a shell that starts a job in the background (as `nohup make ... &` does)
    leaves SIGINT ignored, and an ignored SIGINT stays ignored across exec."""
    return [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
            "os.execv(sys.argv[1], sys.argv[1:])", *args]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def run(args: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True, timeout=RUN_LIMIT_S)
    return done, time.monotonic() - started


@pytest.fixture(scope="module")
def runs(server, docker_available, tmp_path_factory) -> dict:
    """The interrupted run, its resume, and the replay: their exit codes, outputs and logs."""
    out = tmp_path_factory.mktemp("eval") / "run"
    results = out / "results.jsonl"
    started = time.monotonic()
    process = subprocess.Popen(with_default_sigint(eval_args(server, out)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + RUN_LIMIT_S
        while process.poll() is None and time.monotonic() < deadline:
            if results.exists() and len(read_jsonl(results)) >= 2:
                process.send_signal(signal.SIGINT)  # Ctrl-C: in-flight episodes finish and are logged
                break
            time.sleep(0.5)
        stdout, stderr = process.communicate(timeout=RUN_LIMIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    interrupted_s = time.monotonic() - started
    interrupted_log = results.read_bytes() if results.exists() else b""
    resumed, resumed_s = run([*eval_args(server, out), "--resume"])
    replay_out = out.parent / "replay"
    replay, replay_s = run([*cli(), "eval", "--agent", "responses", str(results), "--env-arg",
                            f"max_turns={MAX_TURNS}", "-c", str(CONCURRENCY), "--out", str(replay_out), "--quiet"])
    return {"interrupted": (process.returncode, stdout, stderr, interrupted_s), "interrupted_log": interrupted_log,
            "resumed": (resumed, resumed_s), "replay": (replay, replay_s), "out": out, "replay_out": replay_out}


def test_interrupt_keeps_the_logged_samples_and_resume_finishes_the_rest(runs):
    code, _, stderr, _ = runs["interrupted"]
    assert code == 130, stderr[-2000:]
    assert "interrupted" in stderr and "--resume" in stderr
    logged = runs["interrupted_log"]
    assert logged.endswith(b"\n") and 2 <= logged.count(b"\n") < N * len(ENV_IDS)
    resumed, _ = runs["resumed"]
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert (runs["out"] / "results.jsonl").read_bytes().startswith(logged)  # nothing logged was redone
    assert "wrote results.jsonl, summary.json" in resumed.stdout


def test_every_sample_is_graded_with_the_models_texts_usage_and_finish_reasons(runs, server):
    records = read_jsonl(runs["out"] / "results.jsonl")
    keys = [(r["env_id"], r["task_id"], r["rollout"]) for r in records]
    assert len(keys) == len(set(keys)) == N * len(ENV_IDS)
    assert {r["env_id"] for r in records} == set(ENV_IDS)
    summary = json.loads((runs["out"] / "summary.json").read_text())
    assert summary["planned"] == N * len(ENV_IDS) and summary["missing"] == 0
    assert summary["overall"]["scoring_errors"] == 0
    served = json.loads((runs["out"] / "run.json").read_text())["fingerprint"]["agent"]["served_model"]
    assert served["id"] == server.model  # as /v1/models names it, in the fingerprint resume checks
    for record in records:
        assert record["scoring_error"] is None and record["verdict"] not in ("scoring_error", "failed"), record
        assert record["agent"] == f"openai:{server.model}"
        assert record["final_info"]["verdict"] == record["verdict"] and "turn" in record["final_info"]
        assert 1 <= len(record["actions"]) == len(record["turns"]) <= MAX_TURNS
        assert len(record["observations"]) == len(record["actions"]) + 1
        for turn in record["turns"]:
            assert turn["model"] == server.model and turn["id"]
            assert turn["finish_reason"] in FINISH_REASONS
            usage = turn["usage"]
            assert usage["prompt_tokens"] > 0 and 0 < usage["completion_tokens"] <= MAX_TOKENS
            assert turn["latency_s"] > 0 and turn["attempts"] == len(turn["retries"]) + 1 and turn["wait_s"] >= 0
            assert turn["request"] == {"temperature": 0, "max_tokens": MAX_TOKENS, "seed": record["seed"]}
    assert summary["overall"]["usage"]["model_turns"] == sum(len(r["turns"]) for r in records)
    assert summary["overall"]["usage"]["total_tokens"] == sum(t["usage"]["total_tokens"] for r in records
                                                              for t in r["turns"])
    assert summary["overall"]["failed"] == 0 and summary["time"]["sessions"] == 2


def test_a_logged_text_is_what_the_model_says(runs, server):
    """Greedy decoding is deterministic: asking again for a logged first turn gives its text."""
    records = read_jsonl(runs["out"] / "results.jsonl")
    record = max((r for r in records if r["env_id"] == "LinearAlgebra-v0"),
                 key=lambda r: r["turns"][0]["usage"]["completion_tokens"])  # the longest: a decode figure too
    started = time.perf_counter()
    reply = server.chat({"model": server.model, "messages": [{"role": "user", "content": record["observations"][0]}],
                         "temperature": 0, "max_tokens": MAX_TOKENS})
    elapsed = time.perf_counter() - started
    assert reply["choices"][0]["message"]["content"] == record["actions"][0]
    assert reply["usage"] == record["turns"][0]["usage"]
    MEASURED["solo_request_s"] = round(elapsed, 2)
    MEASURED["solo_request_tokens_per_s"] = round(reply["usage"]["completion_tokens"] / elapsed, 1)


def test_replaying_the_log_gives_identical_rewards(runs):
    replay, _ = runs["replay"]
    assert replay.returncode == 0, replay.stdout[-2000:] + replay.stderr[-2000:]
    original = {(r["env_id"], r["task_id"], r["rollout"]): (r["reward"], r["verdict"], r["actions"])
                for r in read_jsonl(runs["out"] / "results.jsonl")}
    replayed = {(r["env_id"], r["task_id"], r["rollout"]): (r["reward"], r["verdict"], r["actions"])
                for r in read_jsonl(runs["replay_out"] / "results.jsonl")}
    assert replayed == original


def test_report_the_measured_figures(runs, server):
    """Not a check: the figures of docs/results.md, printed (``-s``) and written to a JSON file if asked."""
    records = read_jsonl(runs["out"] / "results.jsonl")
    turns = [turn for r in records for turn in r["turns"]]
    completion = sum(turn["usage"]["completion_tokens"] for turn in turns)
    prompt = sum(turn["usage"]["prompt_tokens"] for turn in turns)
    latency = sum(turn["latency_s"] for turn in turns)
    agent_s = [r["timings"]["agent_s"] for r in records]
    # What the eval adds to a sample beyond the model's answering requests: the sandbox, the
    # env, waiting for a request slot behind the other episode, and its own bookkeeping.
    model_s = [sum(turn["latency_s"] for turn in r["turns"]) for r in records]
    waited_s = [sum(turn["wait_s"] for turn in r["turns"]) for r in records]
    overhead_s = [r["timings"]["total_s"] - m - w for r, m, w in zip(records, model_s, waited_s, strict=True)]
    env_s = [r["timings"]["env_s"] + r["timings"]["reset_s"] for r in records]
    summary = json.loads((runs["out"] / "summary.json").read_text())
    generating_s = runs["interrupted"][3] + runs["resumed"][1]  # the server is busy all along: -c 2, one slot
    report = {
        "samples": len(records), "model_turns": len(turns), "prompt_tokens": prompt, "completion_tokens": completion,
        "server_completion_tokens_per_s": round(completion / generating_s, 1), **MEASURED,
        "mean_turn_latency_s": round(latency / len(turns), 2),  # queueing behind the other episode included
        "per_sample_model_s": round(statistics.mean(agent_s), 2),
        "per_sample_request_latency_s": round(statistics.mean(model_s), 2),
        "per_sample_slot_wait_s": round(statistics.mean(waited_s), 2),
        "per_sample_eval_overhead_s": round(statistics.mean(overhead_s), 4),
        "eval_overhead_share": round(sum(overhead_s) / sum(r["timings"]["total_s"] for r in records), 5),
        "per_sample_sandbox_s": round(statistics.mean(env_s), 3),
        "sandbox_share": round(sum(env_s) / (sum(env_s) + sum(agent_s)), 4),
        "interrupted_run_s": round(runs["interrupted"][3], 1), "resumed_run_s": round(runs["resumed"][1], 1),
        "interrupted_samples": runs["interrupted_log"].count(b"\n"),
        "replay_s": round(runs["replay"][1], 1),
        "finish_reasons": summary["overall"]["usage"]["finish_reasons"],
        "accuracy": {env_id: stats["accuracy"] for env_id, stats in summary["envs"].items()},
        "verdicts": {env_id: stats["verdicts"] for env_id, stats in summary["envs"].items()},
    }
    print("\nreal-model eval:", json.dumps(report, indent=1))
    target = os.environ.get("GYM_SYSMATH_REAL_MODEL_REPORT")
    if target:
        path = Path(target)
        merged = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps({**merged, "eval": report}, indent=1) + "\n")

"""The CLI's common mistakes end fast, with one clear line and no traceback: an endpoint that is
not there, a responses file that is not there, a python agent that does not exist, a split an
env does not have, a reader that closes the pipe. It never claims a file it did not write, and
the openai agent's per-turn records (finish reason, usage, latency, attempts) reach the log.

LinearAlgebra-v0 answers are graded without running code, so no Docker is needed here.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gym_sysmath.agents import OpenAIAgent, make_agent
from gym_sysmath.cli import build_parser, main
from tests.test_eval_cli import FakeChat, read_jsonl

LINALG = "LinearAlgebra-v0"
PROCESS = ["--sandbox", "process"]
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")
CLI = [str(Path(sys.executable).with_name("gym-sysmath"))]


def refused_url() -> str:
    """A localhost port with nothing listening on it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def always_fails(observation: str, history: list[dict], info: dict) -> str:
    raise RuntimeError("this agent never answers")


def test_an_unreachable_endpoint_fails_before_any_episode(tmp_path, capsys):
    started = time.monotonic()
    rc = main(["eval", LINALG, "--agent", "openai", "--model", "m", "--base-url", refused_url(), "-n", "2",
               "--retries", "1", "--out", str(tmp_path / "run"), "--quiet", *PROCESS])
    assert rc == 2 and time.monotonic() - started < 10
    err = capsys.readouterr().err
    assert "cannot connect to http://127.0.0.1:" in err and "2 attempt(s)" in err and "--connect-timeout" in err
    assert "Traceback" not in err and not (tmp_path / "run" / "results.jsonl").exists()


def test_timeouts_and_retry_policy_are_flags():
    args = build_parser().parse_args(["eval", "--agent", "openai", "--model", "m", "--connect-timeout", "2.5",
                                      "--retries", "0", "--request-timeout", "30"])
    assert (args.connect_timeout, args.retries, args.request_timeout) == (2.5, 0, 30)
    agent = OpenAIAgent(model="m", base_url="http://127.0.0.1:1/v1", connect_timeout_s=2.5, retries=0,
                        timeout_s=30)
    assert agent.fingerprint() == OpenAIAgent(model="m", base_url="http://127.0.0.1:1/v1").fingerprint()
    with pytest.raises(Exception, match="must be"):
        make_agent("openai", model="m", base_url=refused_url(), retries=-1)


def test_a_missing_responses_file_is_one_line(tmp_path, capsys):
    assert main(["eval", "--agent", "responses", str(tmp_path / "nope.jsonl"), "--quiet", *PROCESS]) == 2
    err = capsys.readouterr().err
    missing = tmp_path / "nope.jsonl"
    assert err.strip() == f"gym-sysmath: cannot read responses file {missing}: No such file or directory"


@pytest.mark.parametrize("target, says", [("json:no_such_function", "'json' has no 'no_such_function'"),
                                           ("no_such_module_here:act", "cannot import 'no_such_module_here'"),
                                           ("json:__doc__", "is not callable")])
def test_a_bad_python_agent_is_one_line(target, says, capsys):
    assert main(["eval", LINALG, "--agent", "python", target, "--quiet", *PROCESS]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_export_of_a_split_the_env_lacks_is_one_line(capsys, monkeypatch):
    from gym_sysmath.envs.compgeom import CompGeomEnv

    monkeypatch.setattr(CompGeomEnv, "splits", ("eval",))  # CompGeom has a train split now: take it away
    assert main(["export", "CompGeom-v0", "--split", "train", "--out", "-"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gym-sysmath: export CompGeom-v0 --split train:") and "'eval'" in err
    assert main(["export", "NoSuchEnv-v0", "--out", "-"]) == 2
    assert "unknown env id 'NoSuchEnv-v0'" in capsys.readouterr().err


def test_a_closed_pipe_ends_export_quietly():
    # 1 MB of records, far past a pipe's buffer: export is still writing when head closes it
    done = subprocess.run(f"{CLI[0]} export LinearAlgebra-v0 --split train -n 2000 --out - | head -n 1; "
                          "echo \"rc=${PIPESTATUS[0]}\"",
                          shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=120)
    first, status = done.stdout.splitlines()
    assert json.loads(first)["env_id"] == LINALG
    assert status == "rc=141" and done.stderr == ""  # as a tool the closed pipe killed: no traceback


def test_when_every_sample_failed_the_cli_says_so_and_logs_each_failure(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["eval", LINALG, "--agent", "python", "tests.test_cli_errors:always_fails", "-n", "2", "--out",
               str(out), "--quiet", *PROCESS])
    captured = capsys.readouterr()
    assert rc == 1 and "wrote results.jsonl" not in captured.out
    assert "every sample failed (2)" in captured.err and "--resume plays them again" in captured.err
    assert "this agent never answers" in captured.err
    rows = read_jsonl(out / "results.jsonl")
    assert [r["verdict"] for r in rows] == ["failed", "failed"]
    assert all("this agent never answers" in r["error"] for r in rows)


def test_openai_turn_records_reach_the_log_and_the_summary(tmp_path):
    chat = FakeChat(["Done.\nANSWER: 7"], failures=1)
    out = tmp_path / "run"
    try:
        rc = main(["eval", LINALG, "--agent", "openai", "--model", "m", "--base-url", chat.url, "-n", "1",
                   "--out", str(out), "--quiet", *PROCESS])
    finally:
        chat.close()
    assert rc == 0
    (record,) = read_jsonl(out / "results.jsonl")
    (turn,) = record["turns"]
    assert turn["id"] == "x" and turn["model"] == "m" and turn["finish_reason"] == "stop"
    assert turn["attempts"] == 2 and turn["latency_s"] > 0  # the 503 was retried, and that is recorded
    usage = json.loads((out / "summary.json").read_text())["overall"]["usage"]
    assert usage == {"model_turns": 1, "tokens": {}, "total_tokens": 0, "finish_reasons": {"stop": 1},
                     "retries": 1, "models": ["m"]}

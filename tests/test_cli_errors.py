"""The CLI's common mistakes end fast, with one clear line and no traceback: every row of
docs/mistakes.md (read from the page and run as a user runs it), a misspelled argument or filter
value of every registered env id (generated), an endpoint that is not there, a responses file
that is not there, a python agent that does not exist, a split an env does not have, a reader
that closes the pipe. An unexpected error is one line too, its traceback kept in a file. It never
claims a file it did not write, and the openai agent's per-turn records (finish reason, usage,
latency, attempts) reach the log.

LinearAlgebra-v0 answers are graded without running code, so no Docker is needed here; every
documented mistake stops before any sandbox is taken.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from functools import cache
from io import StringIO
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.envs.registration import load_env_creator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gym_sysmath import env_ids
from gym_sysmath.agents import OpenAIAgent, make_agent
from gym_sysmath.cli import DEBUG_ENV, build_parser, main
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


# --------------------------------------------------------------------------- docs/mistakes.md, row by row

MISTAKES_PAGE = Path(__file__).resolve().parents[1] / "docs" / "mistakes.md"
ROW = re.compile(r"^\|\s*(?P<mistake>[^|]+?)\s*\|\s*`(?P<command>gym-sysmath[^`]*)`\s*\|\s*`(?P<line>[^`]+)`\s*\|\s*$")
ELIDED = "..."


def documented_mistakes() -> list[tuple[str, str, str]]:
    """(mistake, command, the line it prints) for each row of the page's table of mistakes."""
    rows = [(m["mistake"], m["command"], m["line"])
            for m in map(ROW.match, MISTAKES_PAGE.read_text(encoding="utf-8").splitlines()) if m]
    assert len(rows) >= 30, "the table of docs/mistakes.md was not found"
    return rows


def setup_commands() -> str:
    """The page's bash block: what made the directory its commands were run in."""
    text = MISTAKES_PAGE.read_text(encoding="utf-8")
    return text.split("```bash\n", 1)[1].split("```", 1)[0]


def shows(line: str, documented: str) -> bool:
    """Whether ``line`` holds the documented text, ``...`` standing for anything."""
    at = 0
    for part in documented.split(ELIDED):
        found = line.find(part, at)
        if found < 0:
            return False
        at = found + len(part)
    return True


@pytest.fixture(scope="module")
def mistakes_run(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Every documented command, run as a user runs it (the installed entry point, in a
    directory made by the page's own setup block, without OPENAI_API_KEY), a few at a time."""
    where = tmp_path_factory.mktemp("mistakes")
    bin_dir = str(Path(sys.executable).parent)
    env = {key: value for key, value in os.environ.items() if key not in {"OPENAI_API_KEY", DEBUG_ENV}}
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    made = subprocess.run(["bash", "-euc", setup_commands()], cwd=where, env=env, capture_output=True, text=True,
                          timeout=120)
    assert made.returncode == 0, made.stderr[-2000:]

    def run(command: str) -> subprocess.CompletedProcess:
        argv = [str(Path(bin_dir) / "gym-sysmath"), *shlex.split(command)[1:]]
        return subprocess.run(argv, cwd=where, env=env, capture_output=True, text=True, timeout=120)

    commands = [command for _, command, _ in documented_mistakes()]
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(commands, pool.map(run, commands), strict=True))


@pytest.mark.parametrize("mistake, command, line", documented_mistakes(), ids=[row[0] for row in documented_mistakes()])
def test_each_documented_mistake_is_one_line_and_exit_2(mistakes_run, mistake, command, line):
    done = mistakes_run[command]
    said = done.stderr.splitlines()
    assert done.returncode == 2, f"{command}: exit {done.returncode}\n{done.stderr[-2000:]}"
    assert len(said) == 1 and said[0].strip(), f"{command}: not one line:\n{done.stderr[-2000:]}"
    assert "Traceback" not in done.stderr and "usage:" not in done.stderr
    assert shows(said[0], line), f"{command}:\n printed:    {said[0]}\n documented: {line}"


def test_the_documented_commands_are_the_documented_mistakes():
    """A row's command parses or fails as a user would type it: shell words, no placeholders."""
    for _, command, _ in documented_mistakes():
        assert "<" not in command and shlex.split(command)[0] == "gym-sysmath", command


# --------------------------------------------------------------------------- generated: every env id's names


@cache
def env_class(env_id: str) -> type:
    return load_env_creator(gym.spec(env_id).entry_point)  # type: ignore[arg-type, return-value]


@cache
def accepted_arguments(env_id: str) -> tuple[str, ...]:
    return tuple(inspect.signature(env_class(env_id)).parameters)


#: Keywords gym.make takes itself: a typo landing on one is not the env's to refuse.
MAKE_OWN = frozenset(inspect.signature(gym.make).parameters)
LETTERS = "abcdefghijklmnopqrstuvwxyz_"


@st.composite
def typo_of(draw, name: str) -> str:
    """``name`` with one character deleted, inserted, replaced, or two neighbours swapped."""
    at = draw(st.integers(0, len(name) - 1))
    letter = draw(st.sampled_from(LETTERS))
    edit = draw(st.sampled_from(["delete", "insert", "replace", "swap"]))
    if edit == "delete":
        return name[:at] + name[at + 1:]
    if edit == "insert":
        return name[:at] + letter + name[at:]
    if edit == "replace":
        return name[:at] + letter + name[at + 1:]
    return name[:at] + name[at + 1:at + 2] + name[at] + name[at + 2:]


def eval_refusal(*args: str) -> tuple[int, str]:
    """``gym-sysmath eval ARGS`` in this process: its exit code and its stderr."""
    err = StringIO()
    with redirect_stderr(err), redirect_stdout(StringIO()):
        code = main(["eval", *args, "--quiet"])
    return code, err.getvalue()


GENERATED = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@GENERATED
@given(data=st.data())
def test_a_misspelled_env_argument_of_any_env_is_one_line_with_a_suggestion(data):
    env_id = data.draw(st.sampled_from(env_ids()))
    accepted = accepted_arguments(env_id)
    typo = data.draw(typo_of(data.draw(st.sampled_from(accepted))))
    if not typo or "=" in typo or typo in accepted or typo in MAKE_OWN:
        return  # not a misspelling after all
    code, err = eval_refusal(env_id, "--env-arg", f"{typo}=1")
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"unknown argument {typo!r}; did you mean " in err and "(choose from " in err, err
    assert "was raised from the environment creator" not in err  # gymnasium's tail is left out


@GENERATED
@given(data=st.data())
def test_a_misspelled_filter_value_of_any_env_is_one_line_with_a_suggestion(data):
    env_id = data.draw(st.sampled_from([i for i in env_ids() if env_class(i).filters]))
    task_filter = data.draw(st.sampled_from(env_class(env_id).filters))
    typo = data.draw(typo_of(data.draw(st.sampled_from(task_filter.choices))))
    if not typo or typo in task_filter.choices:
        return
    value = json.dumps([typo] if task_filter.many else typo)
    code, err = eval_refusal(env_id, "--env-arg", f"{task_filter.argument}={value}")
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"unknown {task_filter.key} {typo!r}; did you mean " in err, err


# --------------------------------------------------------------------------- what comes after an eval


def test_an_eval_with_out_ends_with_the_command_that_shows_it(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["eval", LINALG, "-n", "1", "--out", str(out), "--quiet", *PROCESS]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith(f"next: gym-sysmath report {out}  (writes {out / 'report.html'}"), last
    assert main(["report", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote {out / 'report.html'}"
    assert (out / "report.html").stat().st_size > 0


def test_a_list_filter_takes_the_python_spelling_its_error_suggests(tmp_path, capsys):
    assert main(["eval", LINALG, "-n", "1", "--env-arg", "topics=['rank']", "--quiet", *PROCESS]) == 0


def test_name_labels_each_agent_and_comes_once_per_agent(capsys):
    assert main(["eval", LINALG, "-n", "1", "--agent", "reference", "--name", "oracle", *PROCESS]) == 0
    assert "eval oracle " in capsys.readouterr().err  # the progress line
    assert main(["eval", LINALG, "-n", "1", "--agent", "reference", "--agent", "random", "--name", "a", "--name",
                 "a", "--quiet", *PROCESS]) == 2
    assert capsys.readouterr().err.strip() == "gym-sysmath: --name 'a' was given twice: give each agent its own"


# --------------------------------------------------------------------------- the unexpected


def test_an_unexpected_error_is_one_line_naming_its_traceback_file(monkeypatch, capsys):
    import gym_sysmath.cli as cli

    def broken(args):
        raise RuntimeError("a bug\nover two lines")

    monkeypatch.setattr(cli, "_list", broken)
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    assert main(["list"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("gym-sysmath list: unexpected error: RuntimeError: a bug over two lines (traceback in ")
    kept = Path(re.search(r"traceback in (\S+);", line)[1])
    try:
        assert "Traceback" in kept.read_text() and "a bug" in kept.read_text()
    finally:
        kept.unlink()
    monkeypatch.setenv(DEBUG_ENV, "1")
    with pytest.raises(RuntimeError, match="a bug"):
        main(["list"])

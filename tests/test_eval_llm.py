"""`gym-sysmath eval` as an LLM eval: nothing lost on Ctrl-C, every failure a logged row, the
request limits, retries honouring Retry-After, complete per-turn records, the served model in
the fingerprint, the key kept to its host, and the HTML transcript viewer in a real Chromium.

The endpoint is ``tests.chat_server.ChatServer``, a real HTTP server on 127.0.0.1 whose
behaviour each test scripts; the agent's ``openai.OpenAI`` client talks to it over a socket. LinearAlgebra-v0 on
the process backend needs no Docker (``max_turns=2`` gives it a tool turn).
"""

from __future__ import annotations

import email.utils
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import pytest

from gym_sysmath.agents import OpenAIAgent
from gym_sysmath.cli import main
from tests.chat_server import OVERFLOW, Behaviour, ChatServer

LINALG = "LinearAlgebra-v0"
PROCESS = ["--sandbox", "process"]
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process':UserWarning")
CODE = "```python\nimport numpy as np\nprint(np.eye(2).sum())  # two\n```"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def eval_cli(server: ChatServer, out: Path, *args: str) -> int:
    return main(["eval", LINALG, "--agent", "openai", "--model", "m", "--base-url", server.url, "--out", str(out),
                 "--quiet", *PROCESS, *args])


@pytest.fixture(autouse=True)
def _quiet_process_backend(monkeypatch):
    monkeypatch.setenv("PYTHONWARNINGS", "ignore")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


# --------------------------------------------------------------------------- records


def test_each_turn_records_what_was_sent_and_what_came_back(tmp_path):
    replies = {0: CODE}
    with ChatServer(lambda i, body: replies.get(sum(m["role"] == "assistant" for m in body["messages"]),
                                                "The sum is two.\nANSWER: 2")) as server:
        rc = eval_cli(server, tmp_path / "run", "-n", "2", "--env-arg", "max_turns=2", "--temperature", "0.3",
                      "--top-p", "0.9", "--max-tokens", "50", "--stop", "</s>", "--stop", "STOP",
                      "--extra-body", '{"top_k": 5}', "--seed", "7")
    assert rc == 0
    bodies = [request["body"] for request in server.requests]
    assert all(b["temperature"] == 0.3 and b["top_p"] == 0.9 and b["max_tokens"] == 50 and b["top_k"] == 5
               and b["stop"] == ["</s>", "STOP"] for b in bodies)
    rows = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert len(rows) == 2
    for row in rows:
        assert len(row["turns"]) == len(row["actions"]) == 2
        assert {b["seed"] for b in bodies if b["messages"][0]["content"] == row["observations"][0]} == {row["seed"]}
        for turn in row["turns"]:
            assert turn["request"] == {"temperature": 0.3, "top_p": 0.9, "max_tokens": 50, "stop": ["</s>", "STOP"],
                                       "seed": row["seed"], "top_k": 5}
            assert turn["model"] == "served-v1" and turn["id"].startswith("chatcmpl-")
            assert turn["finish_reason"] == "stop" and turn["usage"]["total_tokens"] > 0
            assert turn["latency_s"] > 0 and turn["attempts"] == 1 and turn["retries"] == []
        assert row["final_info"]["verdict"] == row["verdict"] and "turn" in row["final_info"]
    header = json.loads((tmp_path / "run" / "run.json").read_text())["fingerprint"]["agent"]
    assert header["served_model"] == {"id": "served-v1", "owned_by": "test"}
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    usage = summary["overall"]["usage"]
    assert usage["total_tokens"] == sum(t["usage"]["total_tokens"] for r in rows for t in r["turns"])
    assert usage["models"] == ["served-v1"]


def test_resume_refuses_another_model_behind_the_same_name(tmp_path, capsys):
    with ChatServer() as server:
        assert eval_cli(server, tmp_path / "run", "-n", "2") == 0
        server.model_id = "another-model.gguf"
        capsys.readouterr()
        assert eval_cli(server, tmp_path / "run", "-n", "3", "--resume") == 2
        err = capsys.readouterr().err
        assert "agent.served_model.id" in err and "another-model.gguf" in err
        server.model_id = "served-v1"
        assert eval_cli(server, tmp_path / "run", "-n", "3", "--resume") == 0
    assert len(read_jsonl(tmp_path / "run" / "results.jsonl")) == 3


def test_the_scoreboard_counts_format_errors_and_states_the_denominator(tmp_path, capsys):
    with ChatServer(lambda i, body: "no answer line here") as server:
        assert eval_cli(server, tmp_path / "run", "-n", "3") == 0
    printed = capsys.readouterr().out
    assert "format_err" in printed and "0.0% of 3" in printed
    overall = json.loads((tmp_path / "run" / "summary.json").read_text())["overall"]
    assert (overall["format_errors"], overall["scored"], overall["failed"]) == (3, 3, 0)
    sessions = read_jsonl(tmp_path / "run" / "sessions.jsonl")
    assert len(sessions) == 1 and sessions[0]["logged"] == 3 and not sessions[0]["interrupted"]


# --------------------------------------------------------------------------- failures are rows


def test_context_overflow_ends_the_episode_with_its_turns_and_resume_keeps_it(tmp_path):
    def script(index: int, body: dict) -> str | Behaviour:
        return CODE if len(body["messages"]) == 1 else OVERFLOW

    with ChatServer(script) as server:
        assert eval_cli(server, tmp_path / "run", "-n", "1", "--env-arg", "max_turns=2") == 0
        (row,) = read_jsonl(tmp_path / "run" / "results.jsonl")
        assert row["verdict"] == "context_overflow" and row["reward"] == 0.0
        assert row["actions"] == [CODE] and len(row["turns"]) == 1 and len(row["observations"]) == 2
        assert "exceeds the available context size" in row["error"] and "HTTP 400" in row["error"]
        assert len(server.requests) == 2  # an overflow is not retried
        assert eval_cli(server, tmp_path / "run", "-n", "1", "--env-arg", "max_turns=2", "--resume") == 0
        assert len(server.requests) == 2  # nor replayed: the same prompt would overflow again
    stats = json.loads((tmp_path / "run" / "summary.json").read_text())["overall"]
    assert (stats["context_overflows"], stats["scored"], stats["accuracy"]) == (1, 1, 0.0)


#: The three ways a server asks for a wait of 2 s; openai-python's own first backoff is 0.5 s at most.
RETRY_AFTER = {"seconds": lambda: {"Retry-After": "2"}, "milliseconds": lambda: {"retry-after-ms": "2000"},
               "http date": lambda: {"Retry-After": email.utils.formatdate(time.time() + 3, usegmt=True)}}


@pytest.mark.parametrize("form", sorted(RETRY_AFTER))
def test_a_rate_limit_waits_what_retry_after_asks_and_is_recorded(tmp_path, form):
    def script(index: int, body: dict) -> str | Behaviour:
        if index == 0:  # the date is written when the request comes
            return Behaviour(status=429, body='{"error": "slow down"}', headers=RETRY_AFTER[form]())
        return "ANSWER: 1"

    with ChatServer(script) as server:
        assert eval_cli(server, tmp_path / "run", "-n", "1") == 0
    first, second = server.requests
    assert second["arrived"] - first["ended"] >= 1.0  # the backoff alone would have been 0.5 s at most
    (row,) = read_jsonl(tmp_path / "run" / "results.jsonl")
    (turn,) = row["turns"]
    assert turn["attempts"] == 2
    (retry,) = turn["retries"]
    assert retry["wait_s"] >= 1.0 and "HTTP 429" in retry["error"] and "slow down" in retry["error"]
    assert ("retry_after_ms" if form == "milliseconds" else "retry_after") in retry  # the server's words


def test_a_server_asking_to_wait_a_day_is_not_waited(tmp_path):
    limited = Behaviour(status=429, body='{"error": "come back tomorrow"}', headers={"Retry-After": "86400"})
    with ChatServer(lambda i, body: limited if i == 0 else "ANSWER: 1") as server:
        started = time.monotonic()
        rc = eval_cli(server, tmp_path / "run", "-n", "1")
        assert time.monotonic() - started < 60
        (row,) = read_jsonl(tmp_path / "run" / "results.jsonl")
        if rc == 1:  # openai-python >= 2.3x: an ask past its limit (2 min) is an error at once
            assert row["verdict"] == "failed" and "HTTP 429" in row["error"] and "after 1 attempt(s)" in row["error"]
            assert eval_cli(server, tmp_path / "run", "-n", "1", "--resume") == 0  # and --resume plays it again
        else:  # older: the ask is ignored and its own backoff waited
            assert rc == 0 and row["turns"][0]["retries"][0]["wait_s"] < 10
    assert read_jsonl(tmp_path / "run" / "results.jsonl")[-1]["verdict"] != "failed"


def test_a_server_error_is_retried_unless_the_server_says_not_to(tmp_path):
    busy = Behaviour(status=503, body="busy")
    final = Behaviour(status=503, body="down for good", headers={"x-should-retry": "false"})
    with ChatServer(lambda i, body: busy if i == 0 else final if i == 1 else "ANSWER: 1") as server:
        assert eval_cli(server, tmp_path / "run", "-n", "1") == 1
    assert len(server.requests) == 2
    (row,) = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert "HTTP 503" in row["error"] and "down for good" in row["error"] and "after 2 attempt(s)" in row["error"]


def test_a_timed_out_request_is_a_recorded_retry_and_a_failed_row_that_resume_replays(tmp_path, capsys):
    slow = Behaviour(text="ANSWER: 1", delay_s=1.5)
    with ChatServer(lambda i, body: slow) as server:
        rc = eval_cli(server, tmp_path / "run", "-n", "1", "--request-timeout", "0.3", "--retries", "1")
        assert rc == 1
        captured = capsys.readouterr()
        assert "every sample failed (1)" in captured.err and "wrote" not in captured.out
        assert "0.0% of 0" not in captured.out and "- of 0" in captured.out
        (row,) = read_jsonl(tmp_path / "run" / "results.jsonl")
        assert row["verdict"] == "failed" and "timed out" in row["error"] and "after 2 attempt(s)" in row["error"]
        stats = json.loads((tmp_path / "run" / "summary.json").read_text())["overall"]
        assert (stats["failed"], stats["scored"], stats["accuracy"]) == (1, 0, None)
        server.script = lambda i, body: "ANSWER: 1"
        assert eval_cli(server, tmp_path / "run", "-n", "1", "--resume") == 0
    rows = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert rows[0]["verdict"] == "failed" and rows[1]["verdict"] != "failed"  # the later row wins
    stats = json.loads((tmp_path / "run" / "summary.json").read_text())["overall"]
    assert (stats["samples"], stats["failed"], stats["scored"]) == (1, 0, 1)
    time_spent = json.loads((tmp_path / "run" / "summary.json").read_text())["time"]
    assert time_spent["sessions"] == 2


@pytest.mark.parametrize("body", ['{"object": "chat.completion"}', '{"choices": "none"}', '{"choices": []}',
                                  '{"choices": [', "<html>busy</html>"])
def test_a_reply_that_is_no_chat_completion_is_a_failed_row_that_quotes_it(tmp_path, body):
    odd = Behaviour(body=body, headers={"Content-Type": "text/html" if body.startswith("<") else "application/json"})
    with ChatServer(lambda i, request: odd) as server:
        assert eval_cli(server, tmp_path / "run", "-n", "1") == 1
    (row,) = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert row["verdict"] == "failed" and ("unexpected chat-completions reply" in row["error"]
                                           or "did not answer JSON" in row["error"])
    assert "Traceback" not in row["error"]


# --------------------------------------------------------------------------- limits


def test_model_concurrency_caps_requests_in_flight_while_episodes_run_side_by_side(tmp_path):
    slow = Behaviour(text="ANSWER: 1", delay_s=0.8)  # long enough for the other episodes to ask meanwhile
    with ChatServer(lambda i, body: slow) as server:
        assert eval_cli(server, tmp_path / "one", "-n", "4", "-c", "4") == 0
        assert server.max_in_flight == 1  # the default: one request at a time, a single local server
        server.max_in_flight = 0
        assert eval_cli(server, tmp_path / "two", "-n", "4", "-c", "4", "--model-concurrency", "2") == 0
        assert server.max_in_flight == 2
    waits = [t["wait_s"] for r in read_jsonl(tmp_path / "one" / "results.jsonl") for t in r["turns"]]
    assert max(waits) > 0  # queued behind another episode's request, and the record says so


def test_requests_per_minute_spaces_request_starts(tmp_path):
    with ChatServer() as server:
        assert eval_cli(server, tmp_path / "run", "-n", "3", "-c", "3", "--model-concurrency", "3",
                        "--rpm", "120") == 0
    arrivals = sorted(request["arrived"] for request in server.requests)
    assert all(later - earlier >= 0.45 for earlier, later in itertools.pairwise(arrivals))


@pytest.mark.parametrize("honours_n", [True, False])
def test_rollouts_share_a_first_turn_request_with_n_choices(tmp_path, honours_n):
    shared = Behaviour(choices=("ANSWER: 10", "ANSWER: 11"))
    with ChatServer(lambda i, body: shared, honours_n=honours_n) as server:
        assert eval_cli(server, tmp_path / "run", "-n", "2", "-r", "4", "--choices-per-request", "2") == 0
    asked_n = [request["body"].get("n") for request in server.requests]
    rows = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert len(rows) == 8
    if honours_n:  # 2 tasks x 2 blocks of 2 rollouts: one request per block, one choice per rollout
        assert asked_n == [2, 2, 2, 2]
        for row in rows:
            (turn,) = row["turns"]
            assert turn["choice"] == row["rollout"] % 2 and row["actions"] == [shared.choices[row["rollout"] % 2]]
            assert turn["request"]["n"] == 2 and (turn["usage"] is None) == (row["rollout"] % 2 == 1)
    else:  # one choice came back: choice 0 is used, the other rollout asks alone
        assert sorted(asked_n, key=str) == [2, 2, 2, 2, None, None, None, None]
        assert all(row["actions"] == ["ANSWER: 10"] for row in rows)
        assert all(row["turns"][0]["usage"] is not None for row in rows)
    usage = json.loads((tmp_path / "run" / "summary.json").read_text())["overall"]["usage"]
    assert usage["tokens"]["completion_tokens"] == sum(  # each request counted once
        4 if n == 2 and honours_n else 2 for n in asked_n)


# --------------------------------------------------------------------------- the key


def test_openais_key_goes_to_openai_only_unless_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-meant-for-openai")
    # what else openai-python reads from the environment for OpenAI's host
    meant_for_openai = {"OPENAI_ADMIN_KEY": "sk-admin-meant-for-openai", "OPENAI_ORG_ID": "org-meant-for-openai",
                        "OPENAI_PROJECT_ID": "proj-meant-for-openai"}
    for variable, value in meant_for_openai.items():
        monkeypatch.setenv(variable, value)
    with ChatServer() as server:
        assert eval_cli(server, tmp_path / "plain", "-n", "1") == 0
        assert "OPENAI_API_KEY is not sent to" in capsys.readouterr().err
        assert eval_cli(server, tmp_path / "named", "-n", "1", "--api-key-env", "OPENAI_API_KEY") == 0
    assert [request["auth"] for request in server.requests] == [None, "Bearer sk-meant-for-openai"]
    sent = json.dumps([request["headers"] for request in server.requests])
    assert not any(value in sent for value in meant_for_openai.values())


def test_a_redirect_is_refused_so_the_key_stays_on_its_host(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sekrit")
    with ChatServer() as elsewhere:
        moved = Behaviour(status=307, headers={"Location": f"{elsewhere.url}/chat/completions"})
        with ChatServer(lambda i, body: moved) as server:
            assert eval_cli(server, tmp_path / "run", "-n", "1", "--api-key-env", "MY_KEY") == 1
    assert elsewhere.requests == [] and server.requests[0]["auth"] == "Bearer sekrit"
    (row,) = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert row["verdict"] == "failed" and "redirect" in row["error"] and "refused" in row["error"]


@pytest.mark.parametrize("args, says", [
    (["--extra-body", "{top_k: 5}"], "--extra-body is not JSON"),
    (["--extra-body", "[1]"], "--extra-body must be a JSON object"),
    (["--model-concurrency", "0"], "--model-concurrency must be at least 1"),
    (["--rpm", "0"], "--rpm above 0"),
    (["--choices-per-request", "0"], "--choices-per-request must be at least 1"),
    (["--retries", "-1"], "--retries must be >= 0"),
    (["--request-timeout", "0"], "--request-timeout: must be a finite number of seconds above 0"),
    (["--connect-timeout", "nan"], "--connect-timeout: must be a finite number of seconds above 0"),
])
def test_a_bad_request_setting_is_one_line_before_any_request(tmp_path, capsys, args, says):
    with ChatServer() as server:
        try:
            code = eval_cli(server, tmp_path / "run", "-n", "1", *args)
        except SystemExit as refused:  # argparse's own refusal of a value its type rejects
            code = refused.code
        assert code == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and server.requests == []


def test_the_agent_pickles_without_its_limiter():
    import pickle

    agent = OpenAIAgent(model="m", base_url="http://127.0.0.1:1/v1", max_concurrent_requests=2)
    agent.limiter  # noqa: B018 (made on first use)
    copy = pickle.loads(pickle.dumps(agent))
    assert copy == agent and copy.limiter is not agent.limiter


# --------------------------------------------------------------------------- Ctrl-C


def slow_agent(observation: str, history: list, info: dict) -> str:
    """Sleeps (the last planned task longest, so it outlasts the others), marking each start."""
    marks = Path(os.environ["SLOW_AGENT_MARKS"])
    (marks / f"{info['task_id'].replace('/', '_')}-{info['rollout']}").write_text("")
    slowest = info["task_id"] == os.environ.get("SLOW_LAST")
    time.sleep(float(os.environ.get("SLOW_AGENT_S", "1")) * (3 if slowest else 1))
    return "ANSWER: 0"


def _sigint_default(args: list[str]) -> list[str]:
    """Run ``args`` with SIGINT's default disposition (a backgrounded shell job ignores it)."""
    return [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
            "os.execv(sys.argv[1], sys.argv[1:])", *args]


REPO = Path(__file__).parent.parent


def _slow_eval(out: Path, *extra: str) -> list[str]:
    return [str(Path(sys.executable).with_name("gym-sysmath")), "eval", LINALG, "--agent", "python",
            f"{__name__}:slow_agent", "-n", "6", "-c", "3", "--out", str(out), "--quiet", *PROCESS, *extra]


def _slow_env(marks: Path, slow_s: float, last: str = "") -> dict[str, str]:
    marks.mkdir(exist_ok=True)
    return {**os.environ, "SLOW_AGENT_MARKS": str(marks), "SLOW_AGENT_S": str(slow_s), "SLOW_LAST": last,
            "PYTHONWARNINGS": "ignore"}


def _start(out: Path, marks: Path, slow_s: float, last: str) -> tuple[subprocess.Popen, Path]:
    """The eval in a subprocess, its stderr going to a file the test reads while it runs."""
    stderr = out.parent / "stderr.txt"
    with stderr.open("w") as sink:
        process = subprocess.Popen(_sigint_default(_slow_eval(out)), cwd=REPO, env=_slow_env(marks, slow_s, last),
                                   stdout=subprocess.DEVNULL, stderr=sink)
    return process, stderr


def _wait_for(condition, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def _started(marks: Path) -> set[str]:
    return {path.name for path in marks.iterdir()}


def _logged(out: Path) -> list[str]:
    path = out / "results.jsonl"
    return [f"{r['task_id'].replace('/', '_')}-{r['rollout']}" for r in read_jsonl(path)] if path.exists() else []


def _plan() -> list[str]:
    from gym_sysmath.evaluation import choose_tasks

    env = gym.make(LINALG)
    try:
        return choose_tasks(LINALG, env.unwrapped.task_ids, 6)
    finally:
        env.close()


def test_ctrl_c_logs_every_episode_in_flight_and_resume_finishes_the_rest(tmp_path):
    out, marks = tmp_path / "run", tmp_path / "marks"
    tasks = _plan()
    process, log = _start(out, marks, slow_s=1.0, last=tasks[2])  # in the first wave, the slowest
    try:
        _wait_for(lambda: len(_started(marks)) >= 3)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
    finally:
        process.kill()
    stderr = log.read_text()
    assert process.returncode == 130, stderr[-2000:]
    (flying,) = map(int, re.findall(r"interrupted: no new episodes; waiting for the (\d+) in flight", stderr))
    assert "Ctrl-C again abandons them" in stderr and stderr.count("still in flight") == flying >= 1
    logged = _logged(out)
    assert sorted(logged) == sorted(_started(marks)) and 3 <= len(logged) < 6  # every one started is logged
    assert f"{tasks[2].replace('/', '_')}-0" in logged  # the slowest one too
    sessions = read_jsonl(out / "sessions.jsonl")
    assert sessions[-1]["interrupted"] and sessions[-1]["logged"] == len(logged)
    kept = (out / "results.jsonl").read_bytes()
    resumed = subprocess.run(_slow_eval(out, "--resume"), cwd=REPO, env=_slow_env(marks, 0.0), capture_output=True,
                             text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert (out / "results.jsonl").read_bytes().startswith(kept)
    assert sorted(_logged(out)) == sorted(f"{t.replace('/', '_')}-0" for t in tasks)
    assert json.loads((out / "summary.json").read_text())["time"]["sessions"] == 2


def test_a_second_ctrl_c_abandons_the_episodes_in_flight_and_names_them(tmp_path):
    out, marks = tmp_path / "run", tmp_path / "marks"
    process, log = _start(out, marks, slow_s=30.0, last="")
    try:
        _wait_for(lambda: len(_started(marks)) >= 3)
        process.send_signal(signal.SIGINT)
        _wait_for(lambda: "Ctrl-C again" in log.read_text())
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    finally:
        process.kill()
    stderr = log.read_text()
    assert process.returncode == 130, stderr[-2000:]
    assert "abandoned 3 episode(s) in flight, not logged" in stderr and "--resume plays them" in stderr
    for name in _started(marks):
        task = name.rsplit("-", 1)[0]
        assert any(task == shown.replace("/", "_") for shown in re.findall(rf"{LINALG} (\S+) r0", stderr)), name
    assert _logged(out) == []


# --------------------------------------------------------------------------- the viewer


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: `make setup` installs it (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return path


def _dump_dom(page: Path, fragment: str = "") -> str:
    """The page's DOM after its scripts ran, from a real headless Chromium."""
    done = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--no-first-run", "--virtual-time-budget=5000", "--dump-dom",
                           page.as_uri() + fragment], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _visible_samples(dom: str) -> list[str]:
    return re.findall(r'<details class="sample" data-verdict="([a-z_]+)" data-env="[^"]+">', dom)


#: A reply that would run script in a page that pasted it as HTML (a model's text is untrusted).
HOSTILE_HTML = ('<!--<script></script><img src=x onerror="document.body.dataset.pwned=1">'
                '<script>document.title="pwned"</script>')
HOSTILE_HTML_SHOWN = "&lt;/script&gt;&lt;img src=x onerror=\"document.body.dataset.pwned=1\"&gt;"


def test_the_report_page_shows_the_transcripts_in_a_real_browser(tmp_path, capsys):
    first_turns = itertools.count()

    def script(index: int, body: dict) -> str | Behaviour:
        if len(body["messages"]) == 1:
            return CODE if next(first_turns) % 2 == 0 else f"no answer here {HOSTILE_HTML}"
        return "It printed 2.0.\nANSWER: 2"

    with ChatServer(script) as server:
        assert eval_cli(server, tmp_path / "run", "-n", "4", "--env-arg", "max_turns=2") == 0
    rows = read_jsonl(tmp_path / "run" / "results.jsonl")
    verdicts = sorted(r["verdict"] for r in rows)
    assert set(verdicts) == {"format_error", "wrong_answer"}  # two kinds, so that filtering shows something
    assert main(["report", str(tmp_path / "run")]) == 0
    page = tmp_path / "run" / "report.html"
    assert str(page) in capsys.readouterr().out
    source = page.read_text()
    assert not re.search(r'(src|href)="(https?:)?//', source)  # self-contained: nothing fetched

    dom = _dump_dom(page)
    assert 'data-ready="1"' in dom
    # The model's text is shown, never parsed as markup or run (the page's own scripts aside).
    shown = re.sub(r"<script\b.*?</script>", "", dom, flags=re.DOTALL)
    assert HOSTILE_HTML_SHOWN in shown and "<img" not in shown
    assert 'data-pwned="1"' not in shown and "<title>pwned" not in shown
    assert sorted(_visible_samples(dom)) == verdicts
    assert f"{len(rows)} of {len(rows)} samples shown" in dom
    assert '<span class="kw">import</span>' in dom and '<span class="com"># two</span>' in dom  # highlighted
    assert "finish stop" in dom and "model served-v1" in dom and "final info" in dom
    assert "served: served-v1" in dom and '<td class="format_errors">' in dom
    first = rows[0]
    assert first["task_id"] in dom and f"{first['turns'][0]['usage']['prompt_tokens']} / completion" in dom

    wanted = verdicts[0]
    filtered = _dump_dom(page, f"#verdict={wanted}")
    shown = re.findall(r'<details class="sample" data-verdict="([a-z_]+)" data-env="[^"]+"( hidden="")?>', filtered)
    assert sorted(v for v, hidden in shown if not hidden) == [v for v in verdicts if v == wanted]
    assert f"{verdicts.count(wanted)} of {len(rows)} samples shown" in filtered


#: A reply whose prose holds inline fences (as CompGeom's prompts do) and one real fenced block.
INLINE_FENCES = ("Reply in one ```python code block, or use `np.linalg` <b>here</b>:\n"
                 "```python\nprint(1)  # run\n```\nANSWER: 0")


def _half_wrong_run(tmp_path: Path) -> Path:
    """A real answer-only run, no Docker: LinearAlgebra-v0 task i right on its first i of 3
    rollouts (0 to 3 of 3 correct) and CompGeomPython-v0 with no code (format errors), from a
    responses file written from the reference answers."""
    answers, compgeom = tmp_path / "answers.jsonl", tmp_path / "compgeom.jsonl"
    assert main(["export", LINALG, "-n", "4", "--out", str(answers), "--with-answers"]) == 0
    assert main(["export", "CompGeomPython-v0", "-n", "1", "--out", str(compgeom)]) == 0
    lines = [{"env_id": LINALG, "task_id": row["task_id"], "rollout": rollout,
              "response": row["reference_action"] if rollout < index else INLINE_FENCES if index == 0 else "ANSWER: 0"}
             for index, row in enumerate(read_jsonl(answers)) for rollout in range(3)]
    lines += [{"env_id": "CompGeomPython-v0", "task_id": row["task_id"], "rollout": rollout,
               "response": "No code from me."} for row in read_jsonl(compgeom) for rollout in range(3)]
    responses = tmp_path / "half_wrong.jsonl"
    responses.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = tmp_path / "run"
    assert main(["eval", "--agent", "responses", str(responses), "--out", str(run), "--quiet", *PROCESS]) == 0
    return run


def test_the_report_shows_pass_at_k_each_tasks_k_of_r_the_chart_and_prompts_as_prose(tmp_path):
    run = _half_wrong_run(tmp_path)
    assert main(["report", str(run)]) == 0
    dom = _dump_dom(run / "report.html")
    assert 'data-ready="1"' in dom
    summary = json.loads((run / "summary.json").read_text())
    rows = read_jsonl(run / "results.jsonl")

    # pass@k per env and overall, every k to the rollouts: summary.json's numbers, read off the page.
    shown: dict[str, dict[str, float]] = {}
    table = dom[dom.index('class="scores pass-at-k"'):]
    for env, cells in re.findall(r'<tr data-env="([^"]+)">(.*?)</tr>', table[:table.index("</table>")]):
        shown[env] = {k: float(value) for k, value in re.findall(r'data-k="(\d+)" data-value="([^"]+)"', cells)}
    expected = {env: stats["pass_at_k"] for env, stats in summary["envs"].items()} | {
        "all": summary["overall"]["pass_at_k"]}
    assert shown == expected and set(shown[LINALG]) == {"1", "2", "3"}

    # Each task: k of r from the log, its rollouts under it, collapsed.
    tasks = re.findall(r'<details class="task" data-env="([^"]+)" data-task="([^"]+)" data-correct="(\d+)" '
                       r'data-scored="(\d+)" data-samples="(\d+)"[^>]*><summary><span class="k-of-r [a-z]+">([^<]+)<',
                       dom)
    logged: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        logged.setdefault((row["env_id"], row["task_id"]), []).append(row["verdict"])
    assert {(env, task): (int(c), int(s), int(n), text) for env, task, c, s, n, text in tasks} == {
        key: (v.count("correct"), len(v), len(v), f"{v.count('correct')} of {len(v)} correct")
        for key, v in logged.items()}
    assert sorted(int(c) for env, _, c, *_ in tasks if env == LINALG) == [0, 1, 2, 3]
    assert "<details class=\"task\" open" not in dom and len(_visible_samples(dom)) == len(rows)

    # The breakdowns chart: one bar per env and per breakdown value, at summary.json's accuracy.
    bars = re.findall(r'<rect class="bar" [^>]*data-panel="([^"]+)" data-group="([^"]+)" data-accuracy="([^"]+)"', dom)
    wanted = [("accuracy by env", env, str(stats["accuracy"])) for env, stats in summary["envs"].items()]
    wanted += [(f"{env}: {key}", value, str(group["accuracy"])) for env, stats in summary["envs"].items()
               for key, groups in stats["breakdowns"].items() for value, group in groups.items()]
    assert [(panel, group, float(accuracy)) for panel, group, accuracy in bars] == [
        (panel, group, float(accuracy)) for panel, group, accuracy in wanted]
    assert '<svg class="chart"' in dom

    # A CompGeom prompt: its contract is prose with inline code, its starter the one code block.
    start = dom.index('data-env="CompGeomPython-v0" data-task=')
    prompt = dom[start:dom.index('<details class="sample"', start)]
    assert prompt.count('<pre class="code"') == 1 and 'data-lang="python"' in prompt
    prose = re.match(r'.*?<div class="prose">((?:[^<]|<code>[^<]*</code>)*)</div>', prompt, re.DOTALL)
    assert prose and "in one ```python code block" in prose[1] and "# Contract: <code>" in prose[1]
    assert "## The result" in prose[1] and prose[1].count("<code>") > 5
    # A reply with inline fences and a real one: prose, inline code, one highlighted block, no markup.
    assert ('<div class="prose">Reply in one ```python code block, or use <code>np.linalg</code> '
            '&lt;b&gt;here&lt;/b&gt;:\n</div><pre class="code" data-lang="python">') in dom
    assert '<span class="com"># run</span>' in dom

    # A harness failure on a wrong rollout (as a broken container is logged): not scored, never wrong.
    broken = next(row for row in rows if row["verdict"] == "wrong_answer" and logged[(LINALG, row["task_id"])].count(
        "correct") == 1)
    broken.update(verdict="scoring_error", reward=0.0, scoring_error="container_start_failed")
    (run / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert main(["report", str(run)]) == 0
    hardest = _dump_dom(run / "report.html", "#sort=hardest&env=LinearAlgebra-v0")
    order = re.findall(rf'<details class="task" data-env="{LINALG}" [^>]*data-correct="(\d+)" data-scored="(\d)"',
                       hardest)
    assert order == [("0", "3"), ("1", "2"), ("2", "3"), ("3", "3")]
    assert '<span class="k-of-r some">1 of 2 correct (+1 not scored)</span>' in hardest
    assert "summary.json differs from results.jsonl for" in hardest


def test_report_of_a_directory_without_a_log_is_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "results.jsonl does not exist" in err and len(err.strip().splitlines()) == 1

"""`gym-sysmath eval`, `list` and `export`: agents, the per-sample log, resume, summary math,
offline scoring, and the OpenAI-compatible agent against a local fake endpoint.

LinearAlgebra-v0 is single-turn by default and needs no sandbox, so most tests run without
Docker; the ones that run code, or every registered env, are marked ``docker``.
"""

from __future__ import annotations

import dataclasses
import http.server
import itertools
import json
import sys
import threading
from pathlib import Path

import pytest

from gym_sysmath import env_ids
from gym_sysmath.agents import OpenAIAgent
from gym_sysmath.cli import main
from gym_sysmath.evaluation import (
    ResultsLog,
    SampleResult,
    choose_tasks,
    pass_at_k,
    plot_summary,
    run_fingerprint,
    summarize,
)
from gym_sysmath.families import primary_ids
from gym_sysmath.tasks import csapp

LINALG = "LinearAlgebra-v0"
CSAPP = "CsappExact-v0"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def outcomes(path: Path) -> list[tuple]:
    return sorted((r["env_id"], r["task_id"], r["rollout"], r["verdict"], r["reward"]) for r in read_jsonl(path))


def eval_cli(*args: str) -> int:
    return main(["eval", *args, "--quiet"])


# --------------------------------------------------------------------------- a python agent

#: Filled by the tests: task id -> reference action, and every call the agent gets.
REFERENCE: dict[str, str] = {}
CALLS: list[tuple[str, int]] = []


def half_right(observation: str, history: list[dict], info: dict) -> str:
    """Right on some (task, rollout) pairs and wrong on the others, deterministically."""
    CALLS.append((info["task_id"], info["rollout"]))
    right = (sum(map(ord, info["task_id"])) + info["rollout"]) % 3 != 0
    return REFERENCE[info["task_id"]] if right else "ANSWER: 0"


def load_reference(tmp_path: Path, env_id: str, n: int) -> None:
    path = tmp_path / "answers.jsonl"
    assert main(["export", env_id, "-n", str(n), "--out", str(path), "--with-answers"]) == 0
    REFERENCE.update({r["task_id"]: r["reference_action"] for r in read_jsonl(path)})


# --------------------------------------------------------------------------- reference and responses


@pytest.mark.docker
def test_reference_agent_scores_100_percent_on_every_family_once(docker_available, tmp_path):
    out = tmp_path / "ref"
    assert eval_cli("--all", "--agent", "reference", "-n", "3", "-r", "2", "-c", "3", "--out", str(out)) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["envs"]) == set(primary_ids())  # --all: CompGeom once, not again per language alias
    for env_id, stats in summary["envs"].items():
        assert stats["samples"] == 6, env_id
        assert stats["accuracy"] == 1.0 and stats["scoring_errors"] == 0, (env_id, stats["verdicts"])
        assert stats["pass_at_k"] == {"1": 1.0, "2": 1.0}
    assert len(read_jsonl(out / "results.jsonl")) == 6 * len(primary_ids())


@pytest.mark.docker
def test_responses_agent_reproduces_the_reference_score_on_every_env(docker_available, tmp_path):
    reference, replay = tmp_path / "reference", tmp_path / "replay"
    assert eval_cli("--all", "--agent", "reference", "-n", "4", "--out", str(reference)) == 0
    # An eval's own results.jsonl is a responses file; with no ids, the file names the envs.
    assert eval_cli("--agent", f"responses:{reference / 'results.jsonl'}", "--out", str(replay)) == 0
    assert outcomes(replay / "results.jsonl") == outcomes(reference / "results.jsonl")
    ran, replayed = (json.loads((d / "summary.json").read_text()) for d in (reference, replay))
    assert replayed["envs"] == ran["envs"] and replayed["overall"]["accuracy"] == 1.0


def test_responses_agent_scores_a_minimal_file_like_the_reference_agent(tmp_path):
    reference = tmp_path / "reference"
    assert eval_cli(LINALG, "--agent", "reference", "-n", "6", "-r", "2", "--out", str(reference)) == 0
    minimal = tmp_path / "generated.jsonl"
    lines = [{"task_id": r["task_id"], "rollout": r["rollout"], "response": r["actions"][0]}
             for r in read_jsonl(reference / "results.jsonl")]
    wrong = lines[0]["task_id"], lines[0]["rollout"]
    lines[0]["response"] = "ANSWER: 123456789"
    minimal.write_text("".join(json.dumps(line) + "\n" for line in lines))
    replay = tmp_path / "replay"
    assert eval_cli(LINALG, "--agent", "responses", str(minimal), "--out", str(replay)) == 0
    expected = [(e, t, r, "wrong_answer" if (t, r) == wrong else v, 0.0 if (t, r) == wrong else w)
                for e, t, r, v, w in outcomes(reference / "results.jsonl")]
    assert outcomes(replay / "results.jsonl") == expected
    assert json.loads((replay / "summary.json").read_text())["overall"]["accuracy"] == 11 / 12


def test_reference_and_random_together_write_one_directory_each_and_a_plot(tmp_path, capsys):
    out = tmp_path / "run"
    assert eval_cli(LINALG, "--agent", "reference", "--agent", "random", "-n", "5", "--out", str(out)) == 0
    printed = capsys.readouterr().out
    assert "reference" in printed and "random" in printed and "accuracy" in printed
    reference, random = (json.loads((out / name / "summary.json").read_text()) for name in ("reference", "random"))
    assert reference["overall"]["accuracy"] == 1.0
    assert random["overall"]["accuracy"] == 0.0 and random["overall"]["scored"] == 5
    pytest.importorskip("matplotlib")
    assert (out / "reference" / "breakdowns.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_is_skipped_with_a_message_without_matplotlib(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    summary = summarize([_result("t", 0, "correct", {"topic": "a"})])
    assert plot_summary(summary, tmp_path / "plot.png") is None
    assert "matplotlib is not installed" in caplog.text  # a warning of the gym_sysmath logger
    assert not (tmp_path / "plot.png").exists()


# --------------------------------------------------------------------------- resume


def test_resume_plays_only_missing_samples_and_gives_the_same_summary(tmp_path):
    load_reference(tmp_path, LINALG, 8)
    agent = ["--agent", "python", f"{__name__}:half_right"]
    args = [LINALG, *agent, "-n", "8", "-r", "3", "-c", "2"]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    CALLS.clear()
    assert eval_cli(*args, "--out", str(whole)) == 0
    assert len(CALLS) == 24
    summary = json.loads((whole / "summary.json").read_text())
    assert 0 < summary["overall"]["accuracy"] < 1

    assert eval_cli(*args, "--out", str(cut)) == 0
    log = cut / "results.jsonl"
    kept = log.read_text().splitlines(keepends=True)[:10]
    log.write_text("".join(kept) + kept[0][:40])  # killed mid-line after 10 samples
    assert eval_cli(*args, "--out", str(cut)) == 2  # refuses to clobber without --resume
    CALLS.clear()
    assert eval_cli(*args, "--out", str(cut), "--resume") == 0
    assert len(CALLS) == 14
    lines = log.read_text().splitlines(keepends=True)
    assert lines[:10] == kept and len(lines) == 24
    assert len({(r["task_id"], r["rollout"]) for r in read_jsonl(log)}) == 24
    resumed = json.loads((cut / "summary.json").read_text())
    assert resumed["time"]["sessions"] == 2 and summary["time"]["sessions"] == 1  # its whole time, every session
    assert {**resumed, "time": None} == {**summary, "time": None}

    CALLS.clear()
    assert eval_cli(*args, "--out", str(cut), "--resume") == 0
    assert CALLS == []
    assert eval_cli(*args, "--seed", "1", "--out", str(cut), "--resume") == 2  # another run's log


def _answers_file(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_sample_answered_twice_in_a_responses_file_is_refused_not_counted_twice(tmp_path, capsys):
    load_reference(tmp_path, LINALG, 4)
    tasks = sorted(REFERENCE)[:4]
    rows = [{"env_id": LINALG, "task_id": t, "response": REFERENCE[t] if t == tasks[0] else "ANSWER: 0"}
            for t in tasks]
    # The same sample once more without env_id (say, a hand-written file concatenated to an export).
    twice = _answers_file(tmp_path / "twice.jsonl", [*rows, {"task_id": tasks[0], "response": REFERENCE[tasks[0]]}])
    capsys.readouterr()
    assert eval_cli(LINALG, "--agent", "responses", str(twice), "--out", str(tmp_path / "twice")) == 2
    err = capsys.readouterr().err
    assert "lines 1 and 5" in err and repr(tasks[0]) in err and LINALG in err
    assert not (tmp_path / "twice" / "results.jsonl").exists()
    # Written twice with the same env_id (or twice without one) is refused as well.
    same = _answers_file(tmp_path / "same.jsonl", [*rows, rows[0]])
    assert eval_cli(LINALG, "--agent", "responses", str(same), "--out", str(tmp_path / "same")) == 2
    assert "duplicate of line 1" in capsys.readouterr().err
    # Once per sample: 1 correct of 4, pass@1 = pass@k = 25%.
    once = _answers_file(tmp_path / "once.jsonl", rows)
    assert eval_cli(LINALG, "--agent", "responses", str(once), "--out", str(tmp_path / "once")) == 0
    overall = json.loads((tmp_path / "once" / "summary.json").read_text())["overall"]
    assert (overall["samples"], overall["correct"], overall["accuracy"]) == (4, 1, 0.25)
    assert overall["pass_at_k"] == {"1": 0.25}


def test_an_env_id_named_twice_is_evaluated_once(tmp_path):
    out = tmp_path / "run"
    assert eval_cli(LINALG, LINALG, "--agent", "reference", "-n", "3", "--out", str(out)) == 0
    assert json.loads((out / "summary.json").read_text())["overall"]["samples"] == 3
    assert len(read_jsonl(out / "results.jsonl")) == 3


def test_resume_refuses_a_different_responses_file_of_the_same_name(tmp_path, capsys):
    load_reference(tmp_path, LINALG, 4)
    tasks = sorted(REFERENCE)[:4]
    first = _answers_file(tmp_path / "a" / "resp.jsonl", [{"task_id": t, "response": REFERENCE[t]} for t in tasks[:2]])
    other = _answers_file(tmp_path / "b" / "resp.jsonl", [{"task_id": t, "response": "ANSWER: 0"} for t in tasks])
    out = tmp_path / "run"
    assert eval_cli(LINALG, "--agent", "responses", str(first), "--out", str(out)) == 0
    logged = (out / "results.jsonl").read_text()
    summary = (out / "summary.json").read_text()
    capsys.readouterr()
    assert eval_cli(LINALG, "--agent", "responses", str(other), "--out", str(out), "--resume") == 2
    err = capsys.readouterr().err
    assert "written by another run" in err and "agent.sha256" in err
    assert (out / "results.jsonl").read_text() == logged and (out / "summary.json").read_text() == summary
    # The same file resumes (nothing left to play), and so does a byte-identical copy of it.
    assert eval_cli(LINALG, "--agent", "responses", str(first), "--out", str(out), "--resume") == 0
    copy = tmp_path / "c" / "resp.jsonl"
    copy.parent.mkdir()
    copy.write_bytes(first.read_bytes())
    assert eval_cli(LINALG, "--agent", "responses", str(copy), "--out", str(out), "--resume") == 0
    assert (out / "results.jsonl").read_text() == logged
    # Starting again on purpose is still possible.
    assert eval_cli(LINALG, "--agent", "responses", str(other), "--out", str(out), "--overwrite") == 0
    assert json.loads((out / "summary.json").read_text())["overall"]["correct"] == 0


@pytest.mark.docker
def test_resume_refuses_changed_env_args_sandbox_or_rollouts(tmp_path, capsys, docker_available):
    args = [LINALG, "--agent", "reference", "-n", "3", "--out", str(tmp_path / "run")]
    assert eval_cli(*args) == 0
    log = tmp_path / "run" / "results.jsonl"
    logged = log.read_text()
    capsys.readouterr()
    for changed, named in [(["--env-arg", "max_turns=2"], "env_args.max_turns: logged unset, this run 2"),
                           (["--sandbox", "process"], 'sandbox: logged "docker", this run "process"'),
                           (["-r", "2"], "rollouts: logged 1, this run 2"),
                           (["--seed", "3"], "seed: logged 0, this run 3")]:
        assert eval_cli(*args, *changed, "--resume") == 2, changed
        assert named in capsys.readouterr().err, changed
    assert log.read_text() == logged
    assert eval_cli(*args, "--resume") == 0
    assert eval_cli(*args, "-n", "5", "--resume") == 0  # a larger -n extends the run
    assert len(read_jsonl(log)) == 5


def test_resume_refuses_a_log_without_its_run_header(tmp_path, capsys):
    args = [LINALG, "--agent", "reference", "-n", "2", "--out", str(tmp_path / "run")]
    assert eval_cli(*args) == 0
    header = json.loads((tmp_path / "run" / "run.json").read_text())["fingerprint"]
    assert header["agent"] == {"kind": "reference"} and header["env_ids"] == [LINALG]
    (tmp_path / "run" / "run.json").unlink()
    capsys.readouterr()
    assert eval_cli(*args, "--resume") == 2
    assert "run.json" in capsys.readouterr().err


def test_openai_fingerprint_holds_the_sampling_arguments_never_the_key(monkeypatch):
    monkeypatch.setenv("FAKE_KEY", "sekrit-value")
    base = OpenAIAgent(model="m", base_url="http://127.0.0.1:1/v1/", api_key_env="FAKE_KEY", temperature=0.5,
                       max_tokens=64, system_prompt="be brief")
    fingerprint = run_fingerprint([LINALG], base, rollouts=1, seed=0, make_kwargs={"sandbox": "docker"})
    assert "sekrit" not in json.dumps(fingerprint) and "FAKE_KEY" not in json.dumps(fingerprint)
    assert fingerprint["agent"] == {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:1/v1",
                                    "temperature": 0.5, "max_tokens": 64, "top_p": None, "stop": None,
                                    "send_seed": True, "extra_body": None, "system_prompt": "be brief",
                                    "choices_per_request": None, "served_model": None}
    for change in [{"temperature": 1.0}, {"max_tokens": 65}, {"system_prompt": None}, {"model": "n"},
                   {"base_url": "http://127.0.0.1:2/v1"}, {"top_p": 0.5}, {"stop": ("x",)}, {"send_seed": False},
                   {"extra_body": {"top_k": 3}}, {"served_model": {"id": "other.gguf"}}, {"choices_per_request": 2}]:
        assert dataclasses.replace(base, **change).fingerprint() != base.fingerprint(), change
    same = dataclasses.replace(base, api_key_env="OTHER", timeout_s=5.0, retries=0, max_concurrent_requests=4,
                               requests_per_minute=10.0, connect_timeout_s=1.0)
    assert same.fingerprint() == base.fingerprint()


# --------------------------------------------------------------------------- summary math


def _result(task_id: str, rollout: int, verdict: str, metadata: dict, env_id: str = LINALG) -> SampleResult:
    return SampleResult(env_id, task_id, rollout, 0, "test", ("a",), ("p", "o"), float(verdict == "correct"),
                        verdict, "worker_died: gone" if verdict == "scoring_error" else None, None, metadata, {})


def test_scoring_errors_are_excluded_from_accuracy_never_counted_wrong(tmp_path):
    results = [
        _result("t1", 0, "correct", {"topic": "a"}), _result("t1", 1, "correct", {"topic": "a"}),
        _result("t1", 2, "scoring_error", {"topic": "a"}),
        _result("t2", 0, "correct", {"topic": "b"}), _result("t2", 1, "wrong_answer", {"topic": "b"}),
        _result("t2", 2, "scoring_error", {"topic": "b"}),
    ]
    log = ResultsLog(tmp_path / "results.jsonl")
    for result in results:
        log.append(result)
    summary = summarize(log.load().values())
    stats = summary["envs"][LINALG]
    assert (stats["samples"], stats["scored"], stats["correct"], stats["scoring_errors"]) == (6, 4, 3, 2)
    assert stats["accuracy"] == 0.75  # 3/4, not 3/6
    assert stats["verdicts"] == {"correct": 3, "scoring_error": 2, "wrong_answer": 1}
    assert stats["breakdowns"]["topic"]["a"]["accuracy"] == 1.0  # 2/2, the error left out
    assert stats["breakdowns"]["topic"]["b"]["accuracy"] == 0.5
    # Each task has n = 2 scored samples: t1 (c=2) and t2 (c=1).
    assert stats["pass_at_k"] == {"1": (1.0 + 0.5) / 2, "2": 1.0}
    assert summary["overall"]["accuracy"] == 0.75


def test_a_logged_scoring_error_makes_eval_fail_but_not_count_as_wrong(tmp_path):
    out = tmp_path / "run"
    assert eval_cli(LINALG, "--agent", "reference", "-n", "3", "-r", "2", "--out", str(out)) == 0
    log = out / "results.jsonl"
    records = read_jsonl(log)
    records[0].update(verdict="scoring_error", reward=0.0, scoring_error="container_killed: test")
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert eval_cli(LINALG, "--agent", "reference", "-n", "3", "-r", "2", "--out", str(out), "--resume") == 1
    stats = json.loads((out / "summary.json").read_text())["envs"][LINALG]
    assert (stats["scored"], stats["scoring_errors"], stats["accuracy"]) == (5, 1, 1.0)


def test_pass_at_k_matches_counting_k_subsets():
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(5, 2, 3) == pytest.approx(0.9)
    assert pass_at_k(5, 2, 4) == 1.0 and pass_at_k(5, 0, 3) == 0.0
    for n, c, k in [(4, 1, 2), (6, 3, 2), (7, 2, 3), (5, 4, 5)]:
        subsets = list(itertools.combinations([1] * c + [0] * (n - c), k))
        assert pass_at_k(n, c, k) == pytest.approx(sum(map(any, subsets)) / len(subsets))
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


# --------------------------------------------------------------------------- list and export


def test_list_names_every_registered_env_with_its_task_count(capsys):
    assert main(["list"]) == 0
    printed = capsys.readouterr().out
    for env_id in env_ids():
        assert env_id in printed
    csapp_tasks = len(csapp.load_tasks())
    assert str(csapp_tasks) in printed.split(CSAPP)[1].splitlines()[0]


@pytest.mark.parametrize("env_id", env_ids())
def test_export_omits_answers_unless_flagged(tmp_path, env_id):
    plain, answered = tmp_path / "plain.jsonl", tmp_path / "answered.jsonl"
    assert main(["export", env_id, "-n", "4", "--out", str(plain)]) == 0
    assert main(["export", env_id, "-n", "4", "--out", str(answered), "--with-answers"]) == 0
    rows, keyed = read_jsonl(plain), read_jsonl(answered)
    assert [r["task_id"] for r in rows] == [r["task_id"] for r in keyed]
    assert len(rows) == 4 and all(r["prompt"] and r["env_id"] == env_id for r in rows)
    assert all(set(r) == {"env_id", "task_id", "split", "seed", "max_turns", "env_kwargs", "task_set", "prompt",
                       "metadata"}
               for r in rows)
    assert all("answer" in r and "reference_action" in r for r in keyed)
    assert all(r["reference_action"] not in json.dumps(rows) for r in keyed)


def test_export_picks_the_tasks_eval_picks_and_train_draws_fresh_ones(tmp_path):
    path, train = tmp_path / "eval.jsonl", tmp_path / "train.jsonl"
    assert main(["export", LINALG, "-n", "5", "--out", str(path)]) == 0
    out = tmp_path / "run"
    assert eval_cli(LINALG, "--agent", "random", "-n", "5", "--out", str(out)) == 0
    exported, evaluated = read_jsonl(path), read_jsonl(out / "results.jsonl")
    assert sorted(r["task_id"] for r in exported) == sorted(r["task_id"] for r in evaluated)
    assert main(["export", LINALG, "--split", "train", "-n", "3", "--out", str(train)]) == 0
    assert all(r["task_id"].startswith("train/") for r in read_jsonl(train))
    ids = [f"t{i}" for i in range(50)]
    assert set(choose_tasks(LINALG, ids, 5)) < set(choose_tasks(LINALG, ids, 10))  # a larger -n extends


# --------------------------------------------------------------------------- openai agent


class FakeChat:
    """An OpenAI-compatible /chat/completions endpoint on localhost that replays a script."""

    def __init__(self, replies: list[str], failures: int = 0):
        self.replies, self.failures, self.requests = list(replies), failures, []
        chat = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # no model list here: the agent records that and carries on
                self.send_error(404)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                chat.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                if chat.failures:
                    chat.failures -= 1
                    self.send_response(503)
                    self.end_headers()
                    return
                turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
                reply = {"id": "x", "object": "chat.completion", "model": body["model"],
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": chat.replies[turn]}}]}
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_openai_agent_without_the_openai_package_says_which_extra_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "openai", None)  # what an install without the [openai] extra imports
    monkeypatch.delitem(sys.modules, "gym_sysmath.chat_client", raising=False)
    assert eval_cli(LINALG, "--agent", "openai", "--model", "m", "--base-url", "http://127.0.0.1:1/v1") == 2
    err = capsys.readouterr().err
    assert "pip install 'gym-sysmath[openai]'" in err and len(err.strip().splitlines()) == 1


@pytest.mark.docker
def test_openai_agent_drives_a_multi_turn_episode(docker_available, tmp_path, monkeypatch):
    answers = tmp_path / "answers.jsonl"
    assert main(["export", CSAPP, "-n", "1", "--out", str(answers), "--with-answers"]) == 0
    (task,) = read_jsonl(answers)
    code = f"```python\nresult = {task['answer']!r}\nprint('computed', len(result))\n```"
    chat = FakeChat([code, f"The session agrees.\n{task['reference_action']}"])
    monkeypatch.setenv("FAKE_KEY", "sekrit")
    out = tmp_path / "run"
    try:
        rc = eval_cli(CSAPP, "--agent", "openai", "--model", "tiny", "--base-url", chat.url, "--api-key-env",
                      "FAKE_KEY", "--temperature", "0.5", "--max-tokens", "64", "-n", "1", "--out", str(out))
    finally:
        chat.close()
    assert rc == 0
    (record,) = read_jsonl(out / "results.jsonl")
    assert record["verdict"] == "correct" and record["actions"] == chat.replies
    first, second = (request["body"] for request in chat.requests)
    assert all(r["path"] == "/v1/chat/completions" and r["auth"] == "Bearer sekrit" for r in chat.requests)
    assert first["model"] == "tiny" and first["temperature"] == 0.5 and first["max_tokens"] == 64
    assert first["messages"] == [{"role": "user", "content": task["prompt"]}]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert second["messages"][1]["content"] == code
    assert second["messages"][2]["content"] == record["observations"][1]
    assert "computed" in record["observations"][1]


def test_openai_agent_retries_a_busy_endpoint_and_needs_no_key_off_openai(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    chat = FakeChat(["Thinking done.\nANSWER: 7"], failures=1)
    out = tmp_path / "run"
    try:
        rc = eval_cli(LINALG, "--agent", "openai", "--model", "m", "--base-url", chat.url, "-n", "1",
                      "--out", str(out))
    finally:
        chat.close()
    assert rc == 0 and len(chat.requests) == 2 and chat.requests[0]["auth"] is None
    assert "temperature" not in chat.requests[1]["body"]  # unset sampling arguments are not sent
    (record,) = read_jsonl(out / "results.jsonl")
    assert record["actions"] == chat.replies

"""Honest sampling: an eval with several rollouts at a temperature above 0 (or the server's
default) says so when a task's rollouts all came back byte-identical, since a server that
ignores the temperature makes pass@r pass@1 at r times the cost; a greedy or deterministic run,
or a run whose rollouts differ, says nothing.

The endpoint is ``tests.chat_server.ChatServer``, a real HTTP server on 127.0.0.1 scripted to
answer every rollout the same or each differently; the property over random rollout layouts
checks ``summarize`` and the note against the rule itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gym_sysmath.cli import main
from gym_sysmath.evaluation import SampleResult, summarize
from gym_sysmath.evaluation.run import sample_verdict
from gym_sysmath.evaluation.summary import identical_rollouts_note
from tests.chat_server import ChatServer

LINALG = "LinearAlgebra-v0"
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process':UserWarning")


@pytest.fixture(autouse=True)
def _quiet_process_backend(monkeypatch):
    monkeypatch.setenv("PYTHONWARNINGS", "ignore")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def same_every_time(index: int, body: dict) -> str:
    return "The answer.\nANSWER: 0"


def by_seed(index: int, body: dict) -> str:
    """What a sampling server does: each rollout's request carries its own seed."""
    return f"Sampled with seed {body['seed']}.\nANSWER: 0"


def first_task_stuck() -> object:
    """The first task's rollouts all the same, the other's each different."""
    prompts: list[str] = []

    def script(index: int, body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        if prompt not in prompts:
            prompts.append(prompt)
        return same_every_time(index, body) if prompt == prompts[0] else by_seed(index, body)

    return script


def run_eval(tmp_path: Path, script, *args: str) -> tuple[int, dict]:
    with ChatServer(script) as server:
        rc = main(["eval", LINALG, "--agent", "openai", "--model", "m", "--base-url", server.url, "-n", "2",
                   "--out", str(tmp_path / "run"), "--quiet", "--sandbox", "process", *args])
    return rc, json.loads((tmp_path / "run" / "summary.json").read_text())


@pytest.mark.parametrize("script, args, found", [
    (same_every_time, ["-r", "3", "--temperature", "0.7"], {"tasks": 2, "of": 2, "temperature": 0.7}),
    (same_every_time, ["-r", "2"], {"tasks": 2, "of": 2, "temperature": None}),
    (first_task_stuck(), ["-r", "3", "--temperature", "1"], {"tasks": 1, "of": 2, "temperature": 1.0}),
    (by_seed, ["-r", "3", "--temperature", "1"], {"tasks": 0, "of": 2, "temperature": 1.0}),
    (same_every_time, ["-r", "3", "--temperature", "0"], None),
    (same_every_time, ["-r", "1", "--temperature", "0.7"], None),
    (same_every_time, ["-r", "3", "--temperature", "0.7", "--extra-body", '{"top_k": 1}'], None),
    (same_every_time, ["-r", "3", "--extra-body", '{"temperature": "0"}'], None),
    (same_every_time, ["-r", "3", "--extra-body", '{"do_sample": false}'], None),
], ids=["identical-at-0.7", "identical-at-server-default", "one-task-identical", "sampled", "greedy", "one-rollout",
        "greedy-by-top-k", "greedy-by-a-string-temperature", "greedy-by-do-sample"])
def test_identical_rollouts_are_counted_and_warned_of_only_when_sampling_was_asked(tmp_path, capsys, script, args,
                                                                                  found):
    rc, summary = run_eval(tmp_path, script, *args)
    assert rc == 0
    assert summary.get("identical_rollouts") == found
    notes = [line for line in capsys.readouterr().out.splitlines() if "byte-identical" in line]
    if found and found["tasks"]:
        (note,) = notes
        temperature = found["temperature"]
        at = "the server's default temperature" if temperature is None else f"temperature {temperature}"
        assert note.startswith(f"note: {found['tasks']} of 2 tasks got byte-identical replies in every rollout at {at}")
        likely = "is likely not sampling" if found["tasks"] == found["of"] else "can repeat by chance"
        assert likely in note and "docs/evaluation.md" in note
    else:
        assert notes == []


def test_a_deterministic_agent_never_warns(tmp_path, capsys):
    assert main(["eval", LINALG, "--agent", "reference", "-n", "2", "-r", "3", "--out", str(tmp_path / "run"),
                 "--quiet", "--sandbox", "process"]) == 0
    assert "identical_rollouts" not in json.loads((tmp_path / "run" / "summary.json").read_text())
    assert "byte-identical" not in capsys.readouterr().out


# --------------------------------------------------------------------------- the rule, over random layouts

TEMPERATURES = st.sampled_from([None, 0, 0.0, 0.2, 0.7, 1, 1.5])
#: Per task, its rollouts' replies: each turn's text from a tiny alphabet, so that collisions happen.
REPLIES = st.lists(st.tuples(st.sampled_from(["A", "B"]), st.sampled_from(["", "x"])), min_size=1, max_size=4)


def sample(task: int, rollout: int, reply: tuple[str, str], temperature, endpoint: bool,
           verdict: str) -> SampleResult:
    actions = tuple(text for text in reply if text)
    request = {"max_tokens": 9, "seed": rollout} | ({} if temperature is None else {"temperature": temperature})
    turns = tuple({"request": request, "model": "m"} if endpoint else {} for _ in actions)
    return SampleResult(LINALG, f"t{task}", rollout, rollout, "openai:m" if endpoint else "reference", actions,
                        ("prompt", *("obs" for _ in actions)), float(verdict == "correct"), sample_verdict(verdict),
                        None, None, {}, {}, turns)


@settings(max_examples=150, deadline=None)
@given(st.lists(REPLIES, min_size=1, max_size=4), TEMPERATURES, st.booleans(), st.data())
def test_the_warning_comes_iff_a_task_got_identical_sampled_rollouts(layout, temperature, endpoint, data):
    """Warned iff the agent sampled (an endpoint at a temperature unset or above 0) and some task
    has two or more replied, unfailed rollouts that are all the same, turn by turn."""
    results = []
    for task, replies in enumerate(layout):
        for rollout, reply in enumerate(replies):
            verdict = data.draw(st.sampled_from(["correct", "wrong_answer", "failed"]))
            results.append(sample(task, rollout, reply, temperature, endpoint, verdict))
    counted = {}
    for result in results:
        if result.actions and result.verdict.value != "failed":
            counted.setdefault(result.task_id, []).append(result.actions)
    rolled = [replies for replies in counted.values() if len(replies) > 1]
    sampling = endpoint and (temperature is None or temperature > 0)
    rollouts = max(len(replies) for replies in layout)
    summary = summarize(results, {"rollouts": rollouts})
    note = identical_rollouts_note(summary)
    stuck = sum(all(replies == group[0] for replies in group) for group in rolled)
    assert (note is not None) == (sampling and stuck > 0)
    if sampling and rolled:
        assert summary["identical_rollouts"] == {"tasks": stuck, "of": len(rolled), "temperature": temperature}
    else:
        assert "identical_rollouts" not in summary
    if note:
        assert note.startswith(f"{stuck} of {len(rolled)} tasks") and f"pass@{rollouts} is then pass@1" in note

"""The eval's progress line and its labels: the line stays one bounded line whatever order turns
and samples end in, from however many threads; an LLM eval's line shows turns and tokens before
its first sample ends (through a real HTTP endpoint, ``tests.chat_server``); a path-like model id
gets a short label, unique on the scoreboard, and ``make_agent(name=...)`` wins over it.

No test sleeps: the progress line takes its clock as an argument.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import string
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gym_sysmath.agents import make_agent, short_label
from gym_sysmath.evaluation import evaluate
from gym_sysmath.evaluation.plan import SampleSpec
from gym_sysmath.evaluation.report import AGENT_COLUMN, EvalRun, Progress, distinct_labels, format_scoreboard
from gym_sysmath.evaluation.run import SampleFailure, SampleResult, TurnEvent, sample_verdict
from gym_sysmath.evaluation.summary import summarize
from tests.chat_server import ChatServer

LINALG = "LinearAlgebra-v0"
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process':UserWarning")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _outcome(index: int, seconds: float, verdict: str) -> SampleResult | SampleFailure:
    """A finished sample that took ``seconds``; ``failed``: a failure after one wrong turn."""
    result = SampleResult(LINALG, f"t{index}", 0, index, "openai:m", ("a",), ("p", "o"), float(verdict == "correct"),
                          sample_verdict("wrong_answer" if verdict == "failed" else verdict), None, None, {},
                          {"total_s": seconds})
    if verdict == "failed":
        return SampleFailure(SampleSpec(LINALG, f"t{index}", 0, index), "AgentError: down", result)
    return result


def _drawn(stream: io.StringIO, tty: bool) -> list[str]:
    """Each line the progress wrote, as a reader sees it."""
    text = stream.getvalue()
    if tty:
        assert "\n" not in text.rstrip("\n")
        return [part for part in text.rstrip("\n").split("\r\x1b[2K") if part]
    assert text.endswith("\n") and "\r" not in text
    return text[:-1].split("\n")


#: One sample's script: the completion tokens of each of its turns (None: a turn without usage),
#: the seconds it takes and how it ends.
samples = st.lists(st.tuples(st.lists(st.none() | st.integers(0, 5000), min_size=1, max_size=4),
                             st.floats(0.01, 900), st.sampled_from(["correct", "wrong_answer", "format_error",
                                                                    "failed"])),
                   min_size=1, max_size=12)


@settings(max_examples=100, deadline=None)
@given(samples, st.booleans(), st.booleans(), st.integers(0, 5), st.data())
def test_any_interleaving_of_turns_and_samples_keeps_the_counts_whole_and_the_line_one_bounded_line(
        scripts, tty, turns, resumed, data):
    now = [0.0]
    stream = Terminal() if tty else io.StringIO()
    total = len(scripts) + resumed
    progress = Progress(total, "eval openai:" + "x" * data.draw(st.integers(0, 200)), done=resumed, stream=stream,
                        turns=turns, clock=lambda: now[0])
    progress._width = lambda: 120  # a terminal of 120 columns, whatever runs the test
    left = {index: list(tokens) for index, (tokens, _, _) in enumerate(scripts)}
    running: set[int] = set()
    started = finished = tokens_so_far = 0
    while left:
        index = data.draw(st.sampled_from(sorted(left)))
        now[0] += data.draw(st.floats(0, 7))
        if index in running:  # its turn ends
            running.discard(index)
            used = left[index].pop(0)
            progress.turn(TurnEvent((LINALG, f"t{index}", 0), 0, finished=True, completion_tokens=used))
            finished += 1
            tokens_so_far += used or 0
        elif left[index]:  # its next turn starts
            running.add(index)
            progress.turn(TurnEvent((LINALG, f"t{index}", 0), 0, finished=False))
            started += 1
        else:  # every turn done: the sample ends
            del left[index]
            _, seconds, verdict = scripts[index]
            progress.update(_outcome(index, seconds, verdict))
        assert (progress.turns_started, progress.turns_finished, progress.tokens) == (started, finished, tokens_so_far)
        assert progress.turns_running == started - finished >= 0
        assert resumed <= progress.done <= progress.total
        line = progress.line()
        assert "\n" not in line and "\r" not in line and len(line) <= 120
    assert progress.done == total and progress.turns_running == 0
    if turns:  # the mean of the samples' own times, the finished ones' failures included
        timed = [seconds for _, seconds, _ in scripts]
        assert f" {sum(timed) / len(timed):.1f}s/sample eta 0s " in progress.line(width=1000)
    drawn = _drawn(stream, tty)
    assert all(len(line) <= 120 for line in drawn)
    if not tty:  # a log gets a line per LOG_INTERVAL_S at most, besides the first, first turn, first and last sample
        assert len(drawn) <= 4 + 1 + now[0] // Progress.LOG_INTERVAL_S
    assert f"{total}/{total}" in drawn[-1]
    if turns and finished:
        assert f"turns {finished} (+0 running)" in drawn[-1]
        reported = any(used is not None for tokens, _, _ in scripts for used in tokens)
        assert (f"{tokens_so_far:,} completion tok" in drawn[-1]) == reported


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.lists(st.integers(0, 300), min_size=1, max_size=3), min_size=1, max_size=5),
                min_size=2, max_size=6))
def test_turns_and_samples_reported_from_many_threads_add_up(threads):
    stream = io.StringIO()
    total = sum(map(len, threads))
    progress = Progress(total, "eval openai:m", stream=stream, turns=True)
    start = threading.Barrier(len(threads))

    def worker(number: int, samples: list[list[int]]) -> None:
        start.wait()
        for index, tokens in enumerate(samples):
            for turn, used in enumerate(tokens):
                progress.turn(TurnEvent((LINALG, f"t{number}-{index}", 0), turn, finished=False))
                progress.turn(TurnEvent((LINALG, f"t{number}-{index}", 0), turn, finished=True, completion_tokens=used))
            progress.update(_outcome(index, 1.0, "correct"))

    workers = [threading.Thread(target=worker, args=(number, samples)) for number, samples in enumerate(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    turns = sum(len(tokens) for samples in threads for tokens in samples)
    assert (progress.done, progress.turns_started, progress.turns_finished) == (total, turns, turns)
    assert progress.tokens == sum(sum(tokens) for samples in threads for tokens in samples)
    drawn = _drawn(stream, tty=False)
    assert all(len(line) <= Progress.LOG_WIDTH for line in drawn)  # each write whole: the lock keeps lines apart
    assert re.match(rf"eval openai:m( \[#+\])? {total}/{total} turns {turns} \(\+0 running\) ", drawn[-1])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.none() | st.integers(0, 900), max_size=4), min_size=1, max_size=8))
def test_samples_from_ray_count_their_turns_and_tokens_as_they_land(samples):
    """Ray actors cannot call back per turn: each landed sample's records are counted, nothing runs."""
    stream = io.StringIO()
    progress = Progress(len(samples), "eval openai:m", stream=stream, turns=True, live_turns=False)
    for index, tokens in enumerate(samples):
        records = tuple({"usage": None if used is None else {"completion_tokens": used}} for used in tokens)
        progress.update(dataclasses.replace(_outcome(index, 2.0, "correct"), turns=records))
    turns = sum(map(len, samples))
    assert (progress.turns_started, progress.turns_finished, progress.turns_running) == (turns, turns, 0)
    assert progress.tokens == sum(used or 0 for tokens in samples for used in tokens)
    last = _drawn(stream, tty=False)[-1]
    assert f" turns {turns} " in last and "running" not in last and " 2.0s/sample " in last


def test_a_reference_eval_keeps_the_plain_line():
    now = [0.0]
    stream = io.StringIO()
    progress = Progress(4, "eval reference", stream=stream, clock=lambda: now[0])
    progress.turn(TurnEvent((LINALG, "t", 0), 0, finished=False))
    progress.turn(TurnEvent((LINALG, "t", 0), 0, finished=True))
    now[0] = 2.0
    progress.update(_outcome(0, 1.0, "correct"))
    assert _drawn(stream, tty=False) == ["eval reference [........................] 0/4 0.0/s eta - acc -",
                                         "eval reference [######..................] 1/4 0.5/s eta 6s acc 100.0%"]


def test_an_llm_eval_shows_turns_and_tokens_before_its_first_sample_ends(tmp_path, capsys, monkeypatch):
    """A real endpoint, a two-turn sample (a tool turn, then the answer); stderr is a log, not a
    terminal, so the lines drawn are the forced ones: the first, the first turn's end, the last."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    replies = ["```python\nprint(1)\n```", "ANSWER: 1"]
    model = "/srv/models/smollm2/model"
    with ChatServer(lambda index, body: replies[sum(m["role"] == "assistant" for m in body["messages"])]) as server:
        agent = make_agent("openai", model=model, base_url=server.url)
        run = evaluate([LINALG], agent, n=1, out=tmp_path, plot=False,
                       make_kwargs={"sandbox": "process", "max_turns": 2})
    lines = capsys.readouterr().err.splitlines()
    label = re.escape("eval openai:smollm2/model")
    assert re.fullmatch(rf"{label} \[\.+\] 0/1 turns 0 \(\+0 running\) 0s\+/sample eta - acc -", lines[0])
    words = len(replies[0].split())  # the server counts a reply's words as its completion tokens
    assert re.fullmatch(rf"{label} \[\.+\] 0/1 turns 1 \(\+0 running\) {words} completion tok [\d.]+/s "
                        rf"\d+s\+/sample eta - acc -", lines[1])
    assert re.match(rf"{label} \[#+\] 1/1 turns 2 \(\+0 running\) \d+ completion tok ", lines[2])
    assert len(lines) == 3
    assert re.search(r"^LinearAlgebra-v0 +openai:smollm2/model +1 ", format_scoreboard([run]), re.M)
    assert all(row["agent"] == f"openai:{model}" for row in map(json.loads, (tmp_path / "results.jsonl").open()))
    assert json.loads((tmp_path / "run.json").read_text())["fingerprint"]["agent"]["model"] == model


# --------------------------------------------------------------------------- labels

component = st.text(string.ascii_letters + string.digits + "-_.", min_size=1, max_size=20).filter(
    lambda part: part not in (".", ".."))
#: Paths: absolute, relative to here or home, or three components and more.
paths = (st.builds(lambda parts, lead: lead + "/".join(parts), st.lists(component, min_size=1, max_size=8),
                   st.sampled_from(["/", "./", "~/"]))
         | st.lists(component, min_size=3, max_size=8).map("/".join))
#: Hub ids (``org/name``, no file extension): names, never shortened.
hub_ids = st.builds(lambda org, name, size: f"{org}/{name}-{size}B", component.filter(lambda c: c[0] not in ".~"),
                    component, st.integers(1, 400))


@settings(max_examples=100, deadline=None)
@given(st.lists(paths, min_size=1, max_size=6, unique=True), st.lists(hub_ids, max_size=3, unique=True))
def test_path_like_model_ids_get_short_labels_unique_on_the_board(models, hubs):
    names = [f"openai:{model}" for model in [*models, *hubs]]
    labels = distinct_labels([(name, None) for name in names])
    assert len(set(labels)) == len(labels)
    assert labels == distinct_labels([(name, None) for name in names])  # deterministic
    for name, label in zip(names, labels, strict=True):
        assert label.startswith("openai:") and (label == name or len(label) < len(name))
        assert all(part in name for part in label.removeprefix("openai:").split("/"))  # no invented words
    for model in models:
        assert 1 <= len(short_label(f"openai:{model}").split("/")) <= 2, model
    for hub in hubs:
        assert short_label(f"openai:{hub}") == f"openai:{hub}"


def test_the_scoreboard_stays_narrow_whatever_the_label(tmp_path):
    rows = [_outcome(index, 1.0, "correct") for index in range(3)]
    summary = summarize([row for row in rows if isinstance(row, SampleResult)], {})
    runs = [EvalRun("openai:/root/.venv/share/gym-sysmath/smollm2/model", summary, (), (), None, 1.0),
            EvalRun("openai:/srv/other/smollm2/model", summary, (), (), None, 1.0),
            EvalRun("openai:m", summary, (), (), None, 1.0, label="smollm2 at temperature 0.7 " * 4)]
    board = format_scoreboard(runs)
    assert max(map(len, board.splitlines())) <= 125
    column = board.splitlines()[0].index("agent")
    shown: list[str] = []
    for line in board.splitlines()[2:]:  # a row, then the rest of its label wrapped below it
        piece = line[column:column + AGENT_COLUMN].strip()
        shown += [piece] if line[:column].strip() else []
        shown[-1] += "" if line[:column].strip() else piece
    assert [label.replace(" ", "") for label in shown] == [
        "openai:gym-sysmath/smollm2/model", "openai:other/smollm2/model", ("smollm2 at temperature 0.7" * 4).replace(
            " ", "")]


def test_a_given_name_wins_and_stays_out_of_the_fingerprint():
    agent = make_agent("reference", name="my baseline")
    assert (agent.label, agent.name, agent.fingerprint()) == ("my baseline", "reference", {"kind": "reference"})
    assert distinct_labels([("openai:/a/b/model", "mine"), ("openai:/a/b/model", None)]) == ["mine",
                                                                                             "openai:b/model"]
    for bad in ("", "  ", "two\nlines"):
        with pytest.raises(ValueError, match="--name"):
            make_agent("random", name=bad)

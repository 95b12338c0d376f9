"""A run directory has one writer: a second eval on an ``--out`` another eval is writing stops at
once with one line naming the holder, whatever its flags, and touches no file there; the lock
goes with its holder (an eval that ends, raises, is interrupted or is killed). A log two writers
filled anyway is read with its duplicate rows counted, and the count is said.

The holder is a real second process holding the real lock (``one_writer``); the evals are the
real CLI on LinearAlgebra-v0 with the reference agent on the process backend (no Docker).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gym_sysmath.cli import main
from gym_sysmath.evaluation import EvalError, SampleResult
from gym_sysmath.evaluation.log import RUN_LOCK, ResultsLog, duplicate_rows, one_writer
from gym_sysmath.evaluation.run import sample_verdict

LINALG = "LinearAlgebra-v0"
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process':UserWarning")
REPO = Path(__file__).parent.parent
#: Takes the directory's lock, says so, and holds it until its stdin closes or it is killed.
HOLDER = ("import sys; from pathlib import Path; from gym_sysmath.evaluation.log import one_writer\n"
          "with one_writer(Path(sys.argv[1])):\n    print('held', flush=True); sys.stdin.read()")


def eval_cli(out: Path, *args: str) -> int:
    return main(["eval", LINALG, "--agent", "reference", "-n", "2", "-r", "2", "--out", str(out), "--quiet",
                 "--sandbox", "process", *args])


@pytest.fixture
def holder(tmp_path) -> Iterator[subprocess.Popen]:
    """Another process writing ``tmp_path / "run"``."""
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "run")], cwd=REPO, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdout.readline() == "held\n"
        yield process
    finally:
        process.kill()
        process.wait(30)


def snapshot(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.name != RUN_LOCK}


@pytest.mark.parametrize("flags", [[], ["--resume"], ["--overwrite"]])
def test_a_second_eval_on_a_directory_being_written_stops_at_once_naming_the_writer(tmp_path, holder, capsys,
                                                                                    flags):
    run = tmp_path / "run"
    for name in ("results.jsonl", "run.json", "sessions.jsonl"):
        (run / name).write_text(f"{name} as the other eval left it\n")
    before = snapshot(run)
    assert eval_cli(run, *flags) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"{run} is being written by another eval (pid {holder.pid} on host {socket.gethostname()}, since " in err
    assert "use another --out" in err
    assert snapshot(run) == before


def test_a_killed_writer_leaves_no_stale_lock(tmp_path, holder):
    run = tmp_path / "run"
    assert json.loads((run / RUN_LOCK).read_text())["pid"] == holder.pid
    holder.send_signal(signal.SIGKILL)
    holder.wait(30)
    assert (run / RUN_LOCK).exists()  # the file stays; the lock died with its process
    assert eval_cli(run) == 0
    assert not (run / RUN_LOCK).exists()
    assert len((run / "results.jsonl").read_text().splitlines()) == 4


def test_the_lock_is_released_when_the_block_ends_raises_or_is_interrupted(tmp_path):
    run = tmp_path / "run"
    for ending in (None, EvalError("refused"), KeyboardInterrupt()):
        with pytest.raises(type(ending)) if ending else contextlib.nullcontext(), one_writer(run):
            with pytest.raises(EvalError, match=f"pid {os.getpid()} on host"), one_writer(run):  # even in-process
                pass
            if ending:
                raise ending
        assert not (run / RUN_LOCK).exists()


def test_a_refused_resume_releases_the_directory(tmp_path, capsys):
    run = tmp_path / "run"
    assert eval_cli(run) == 0
    assert eval_cli(run, "--resume", "--seed", "1") == 2  # another run's log: refused after the lock was taken
    assert "written by another run" in capsys.readouterr().err
    assert not (run / RUN_LOCK).exists()
    assert eval_cli(run, "--resume") == 0


def test_an_eval_refused_before_writing_leaves_no_directory_behind(tmp_path):
    assert eval_cli(tmp_path / "new" / "run", "--env-arg", "no_such_argument=1") == 2  # refused by gym.make
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- duplicate rows


def row(task_id: str, rollout: int, verdict: str) -> SampleResult:
    return SampleResult(LINALG, task_id, rollout, 0, "test", ("ANSWER: 1",), ("p", "o"), float(verdict == "correct"),
                        sample_verdict(verdict), None, None, {}, {})


#: One sample's honest history: failed attempts, each replayed by --resume, then maybe a scored row.
HISTORY = st.tuples(st.integers(0, 3), st.sampled_from([None, "correct", "wrong_answer", "format_error"]))


@settings(max_examples=60, deadline=None)
@given(st.lists(HISTORY, min_size=1, max_size=6), st.data())
def test_duplicate_rows_are_exactly_the_rows_a_second_writer_added(histories, data):
    """Interleave every sample's honest history (failed rows and their replays count nothing),
    then let a second writer log some scored samples again: exactly those rows are counted."""
    streams = [[row(f"t{i}", 0, "failed")] * failures + ([row(f"t{i}", 0, final)] if final else [])
               for i, (failures, final) in enumerate(histories)]
    log: list[SampleResult] = []
    while any(streams):
        stream = data.draw(st.sampled_from([s for s in streams if s]))
        log.append(stream.pop(0))
    assert duplicate_rows(log) == 0
    scored = [result for result in log if result.verdict.value != "failed"]
    again = data.draw(st.lists(st.sampled_from(scored), max_size=5)) if scored else []
    for result in again:  # a second writer's rows land after the first's
        log.insert(data.draw(st.integers(log.index(result) + 1, len(log))), result)
    assert duplicate_rows(log) == len(again)


def test_a_log_two_evals_filled_is_resumed_with_its_duplicates_counted_and_said(tmp_path, capsys, caplog):
    run = tmp_path / "run"
    assert eval_cli(run) == 0
    single = json.loads((run / "summary.json").read_text())
    assert single["duplicate_rows"] == 0
    log = run / "results.jsonl"
    log.write_text(log.read_text() * 2)  # what two evals wrote side by side before the lock
    reader = ResultsLog(log, resume=True)
    reader.load()
    assert reader.duplicate_rows == 4
    capsys.readouterr()
    with caplog.at_level(logging.INFO, logger="gym_sysmath.evaluation"):
        assert eval_cli(run, "--resume") == 0
    resumed = json.loads((run / "summary.json").read_text())
    assert resumed["duplicate_rows"] == 4
    assert resumed["overall"] == single["overall"]  # each sample's last row, counted once
    out = capsys.readouterr().out
    assert "note: results.jsonl holds 4 duplicate row(s)" in out
    assert any("4 duplicate row(s)" in record.getMessage() and "resuming" in record.getMessage()
               for record in caplog.records)


def test_an_overwritten_run_counts_only_its_own_time(tmp_path):
    """``--overwrite`` (as ``make run`` does each time) starts a new run: the summary's time and
    session count are its own, not the sum with the run it replaced; ``--resume`` adds sessions."""
    run = tmp_path / "run"
    for flags in ([], ["--overwrite"], ["--overwrite"]):
        assert eval_cli(run, *flags) == 0
        assert json.loads((run / "summary.json").read_text())["time"]["sessions"] == 1
        assert len((run / "sessions.jsonl").read_text().splitlines()) == 1
    assert eval_cli(run, "--resume") == 0
    assert json.loads((run / "summary.json").read_text())["time"]["sessions"] == 2


def test_a_planted_lock_link_is_refused_and_its_target_left_alone(tmp_path, capsys):
    """A run directory copied or unpacked with ``eval.lock`` a link to another file: the eval
    refuses it in one line and never truncates or writes the file it points to."""
    run, victim = tmp_path / "run", tmp_path / "precious.txt"
    run.mkdir()
    victim.write_text("precious data\n")
    (run / RUN_LOCK).symlink_to(victim)
    assert eval_cli(run) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{run / RUN_LOCK} is a symbolic link" in err
    assert victim.read_text() == "precious data\n" and (run / RUN_LOCK).is_symlink()


@contextlib.contextmanager
def holding(directory: Path) -> Iterator[subprocess.Popen]:
    """Another process holding ``directory``'s lock while the block runs."""
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(directory)], cwd=REPO, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdout.readline() == "held\n"
        yield process
    finally:
        process.kill()
        process.wait(30)


@pytest.mark.parametrize("occupied", ["a log without --resume", "another run's log to resume", "another writer"])
def test_several_agents_check_every_directory_before_the_first_plays(tmp_path, capsys, occupied):
    """``--agent reference --agent random --out DIR``: when ``DIR/random`` cannot be opened, the
    eval stops before the reference agent plays (an LLM agent may play for hours first)."""
    run = tmp_path / "run"
    assert main(["eval", LINALG, "--agent", "random", "-n", "2", "--out", str(run / "random"), "--quiet",
                 "--sandbox", "process"]) == 0
    flags = {"a log without --resume": [], "another run's log to resume": ["--resume", "--seed", "7"],
             "another writer": ["--overwrite"]}[occupied]
    before = snapshot(run / "random")
    with holding(run / "random") if occupied == "another writer" else contextlib.nullcontext():
        code = main(["eval", LINALG, "--agent", "reference", "--agent", "random", "-n", "2", "--out", str(run),
                     "--quiet", "--sandbox", "process", *flags])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(run / "random") in err
    assert not (run / "reference").exists()
    assert snapshot(run / "random") == before

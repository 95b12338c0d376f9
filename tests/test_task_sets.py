"""Versioned task sets: every recorded task set is what the install measures (the generated
check), a change to a task, key or grading rule moves the digest and the check names the part
and the command, every ``info``, eval row and summary names the task set, ``task_set=`` pins it
(another version is refused, naming the installed one and where the other shipped), and
``eval --resume`` refuses a log played on another task set."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gym_sysmath import env_ids
from gym_sysmath.cli import main
from gym_sysmath.env import INFO_KEYS, core_env
from gym_sysmath.envs.linalg import LinearAlgebraEnv
from gym_sysmath.families import families, family, family_of, task_set
from gym_sysmath.task_sets import TaskSetError, installed, parse_label, require
from gym_sysmath.task_sets import lock as task_set_lock
from gym_sysmath.task_sets.__main__ import main as task_sets_main
from gym_sysmath.task_sets.digest import NO_SANDBOX, PARTS, measure
from gym_sysmath.verdicts import Verdict

LINALG = "LinearAlgebra-v0"


@pytest.fixture(scope="module")
def linalg_digest():
    return measure(family("linalg"))


# ------------------------------------------------------------------ the generated check


@pytest.mark.parametrize("name", [row.name for row in families()])
def test_every_recorded_task_set_is_what_this_install_measures(name):
    """Fails when a task, key, hidden case or grading rule changed without a version bump; the
    message names the parts that moved and the command (docs/task-sets.md has the rule)."""
    assert task_set_lock.check([name]) == []


def test_the_check_command_says_current_and_exits_0(capsys):
    assert task_sets_main(["--check", "linalg"]) == 0
    assert "current" in capsys.readouterr().out


def test_the_labels_are_family_at_version_and_the_hashes_are_the_recorded_digests():
    for row in families():
        current = installed(row.name)
        assert task_set(row.name) == current.label == f"{row.name}@{current.version}" and current.version >= 1
        assert re.fullmatch(r"[0-9a-f]{16}", current.hash) and current.release(current.version).hash == current.hash
        assert parse_label(current.label) == (row.name, current.version)


def _moved(monkeypatch, linalg_digest, attribute, replacement) -> set[str]:
    monkeypatch.setattr(LinearAlgebraEnv, attribute, replacement)
    moved = measure(family("linalg"))
    return {name for name in PARTS if moved.parts[name] != linalg_digest.parts[name]}


def test_a_changed_key_moves_the_keys_and_the_verdicts(monkeypatch, linalg_digest):
    original = LinearAlgebraEnv.grading_key
    assert _moved(monkeypatch, linalg_digest, "grading_key",
                  lambda self: ("changed", original(self))) == {"eval_keys", "train_draws"}


def test_a_changed_grading_rule_moves_the_verdicts_only(monkeypatch, linalg_digest):
    original = LinearAlgebraEnv._grade_final

    def lenient(self, reply):
        grade = original(self, reply)
        return grade if grade.verdict is not Verdict.FORMAT_ERROR else type(grade)(Verdict.WRONG_ANSWER, "lenient")

    assert _moved(monkeypatch, linalg_digest, "_grade_final", lenient) == {"verdicts"}


def test_a_changed_prompt_moves_the_tasks_and_the_check_says_bump(monkeypatch, linalg_digest):
    original = LinearAlgebraEnv._select_task

    def reworded(self, options):
        task = original(self, options)
        return type(task)(task.task_id, task.family, task.prompt + " Show your work.", task.answer, task.metadata)

    monkeypatch.setattr(LinearAlgebraEnv, "_select_task", reworded)
    message = task_set_lock.problem(family("linalg"))
    assert message is not None and "eval_tasks, train_draws differ" in message
    assert "--bump linalg --why" in message and message.startswith(installed("linalg").label)


def test_a_digest_is_the_same_in_another_process(linalg_digest):
    """Hash randomisation must not reach it: the recorded hash was measured in another process."""
    assert linalg_digest.hash == installed("linalg").hash


def test_a_missing_or_old_format_lock_names_the_record_command(monkeypatch, linalg_digest):
    monkeypatch.setattr(task_set_lock, "read_lock", lambda name: None)
    assert "--record linalg --why 'first version'" in task_set_lock.problem(family("linalg"), linalg_digest)
    monkeypatch.setattr(task_set_lock, "read_lock", lambda name: {"version": 3, "hash": "0", "digest_format": 0})
    assert "re-record every family, versions unchanged" in task_set_lock.problem(family("linalg"), linalg_digest)


def test_record_then_bump_writes_the_history_and_pins_name_the_release(monkeypatch, tmp_path):
    """In a scratch lock: the first record is version 1; a bump with nothing changed is refused;
    after a change it is version 2, and a pin to version 1 names the release that shipped it."""
    import gym_sysmath.task_sets as task_sets

    scratch = tmp_path / "task_set.json"
    monkeypatch.setattr(task_sets, "lock_path", lambda name: scratch)
    monkeypatch.setattr(task_set_lock, "lock_path", lambda name: scratch)
    task_sets.installed.cache_clear()
    try:
        row = family("linalg")
        assert task_set_lock.record(row, "first version").startswith("linalg@1 ")
        with pytest.raises(ValueError, match="the digest saw no change"):
            task_set_lock.bump(row, "nothing")
        original = LinearAlgebraEnv.grading_key
        monkeypatch.setattr(LinearAlgebraEnv, "grading_key", lambda self: ("v2", original(self)))
        assert "bumped from linalg@1" in task_set_lock.bump(row, "the keys changed")
        written = json.loads(scratch.read_text())
        assert written["version"] == 2 and [entry["version"] for entry in written["history"]] == [1, 2]
        assert written["_generated"].startswith("Generated by `python -m gym_sysmath.task_sets")
        assert task_set_lock.check(["linalg"]) == []
        with pytest.raises(TaskSetError, match=r"this install has linalg@2 .*linalg@1 shipped with gym-sysmath"):
            require("linalg", 1)
    finally:
        task_sets.installed.cache_clear()


# ------------------------------------------------------------------ info, pins


@pytest.mark.parametrize("env_id", env_ids())
def test_every_info_names_the_task_set_at_reset_and_step(env_id):
    env = gym.make(env_id, sandbox=NO_SANDBOX)
    try:
        current = installed(family_of(env_id).name)
        _, info = env.reset(seed=0)
        assert (info["task_set"], info["task_set_hash"]) == (current.label, current.hash)
        *_, info = env.step("I cannot work this out.")  # graded with no code run
        assert (info["task_set"], info["task_set_hash"]) == (current.label, current.hash)
        assert {"task_set", "task_set_hash"} <= set(INFO_KEYS)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", env_ids())
def test_a_pin_to_the_installed_task_set_makes_the_env(env_id):
    current = installed(family_of(env_id).name)
    for pin in (current.label, current.version, str(current.version)):
        env = gym.make(env_id, task_set=pin, sandbox=NO_SANDBOX)
        assert core_env(env).task_set == current
        env.close()


@settings(max_examples=25, deadline=None)
@given(version=st.integers(min_value=0, max_value=10_000), as_label=st.booleans())
def test_a_pin_to_any_other_version_is_refused_naming_the_installed_one(version, as_label):
    current = installed("csapp")
    if version == current.version:
        return
    with pytest.raises(TaskSetError, match=rf"task set csapp@{version} is not installed: this install has "
                                           rf"{current.label} \(hash {current.hash}\); "):
        gym.make("CsappExact-v0", task_set=f"csapp@{version}" if as_label else version)


def test_a_pin_to_another_family_or_an_old_fingerprint_is_refused():
    with pytest.raises(TaskSetError, match=r"is a task set of linalg, not of csapp"):
        gym.make("CsappExact-v0", task_set=installed("linalg").label)
    with pytest.raises(TaskSetError, match=r"before task sets were versioned"):
        gym.make("CsappExact-v0", task_set="csapp-37a37b252544")


def test_the_pin_shows_in_every_family_signature():
    for row in families():
        module, _, name = row.entry_point.partition(":")
        cls = getattr(__import__(module, fromlist=[name]), name)
        parameters = inspect.signature(cls).parameters
        assert "task_set" in parameters and "split" in parameters  # the family's own arguments stay visible


# ------------------------------------------------------------------ eval rows, summary, resume


def _eval(out: Path, *extra: str) -> int:
    return main(["eval", LINALG, "--agent", "reference", "-n", "3", "--sandbox", "process", "--out", str(out),
                 "--quiet", *extra])


def test_eval_rows_and_summary_name_the_task_set_and_resume_refuses_another(tmp_path, capsys):
    current = installed("linalg")
    assert _eval(tmp_path) == 0
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert rows and all((r["task_set"], r["task_set_hash"]) == (current.label, current.hash) for r in rows)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["task_sets"] == {current.label: current.hash}
    assert (summary["envs"][LINALG]["task_set"], summary["envs"][LINALG]["task_set_hash"]) == (current.label,
                                                                                             current.hash)
    assert _eval(tmp_path, "--resume") == 0  # the same task set resumes

    rows[0] = {**rows[0], "task_set": "linalg@0", "task_set_hash": "0" * 16}
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert _eval(tmp_path, "--resume") == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert f"played on task set linalg@0 ({'0' * 16}), this install has {current.label} ({current.hash})" in error

    del rows[0]["task_set"], rows[0]["task_set_hash"]  # a row logged before task sets were recorded
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _eval(tmp_path, "--resume") == 2
    assert "before task sets were versioned" in capsys.readouterr().err


def test_eval_takes_the_pin_as_an_env_argument_and_refuses_another_in_one_line(tmp_path, capsys):
    current = installed("linalg")
    assert _eval(tmp_path / "pinned", "--env-arg", f"task_set={current.label}") == 0
    assert _eval(tmp_path / "other", "--env-arg", f"task_set=linalg@{current.version + 1}") == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and f"this install has {current.label}" in error

"""Versioned task sets: every recorded task set is what the install measures (the generated
check), a change to a task, key or grading rule moves the digest and the check names the part
and the command, every ``info``, eval row and summary names the task set, ``task_set=`` pins it
(another version is refused, naming the installed one and where the other shipped), and
``eval --resume`` refuses a log played on another task set."""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from fractions import Fraction
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
from gym_sysmath.task_sets.probes import other_value, reply_probes, value_variants
from gym_sysmath.tasks.csapp.taskfile import read_task_text
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


# ------------------------------------------------------------------ the digest sees real changes


def _grader():
    from gym_sysmath.tasks.linalg import grader
    return grader


#: Real grading-rule changes, each as (module, attribute, replacement(original)), and the part
#: that must move: every one of them once passed the check (the digest graded too few replies).
RULE_CHANGES = {
    "answers inside <think> count": ("gym_sysmath.answers", "strip_think", lambda original: lambda text: text,
                                     "verdicts"),
    "several ANSWER values graded as the first": (
        "gym_sysmath.tasks.linalg.grader", "choose_answer",
        lambda original: lambda values, normalise, same: original(values[:1], normalise, same), "verdicts"),
    "eigenvectors only as positive multiples": (
        "gym_sysmath.tasks.linalg.grader", "_parallel",
        lambda original: lambda answer, gold, tol: original(answer, gold, tol) and sum(
            a * g for a, g in zip(answer, gold, strict=True)) > 0, "verdicts"),
    "tolerance doubled": ("gym_sysmath.tasks.linalg.grader", "_within",
                          lambda original: lambda value, target, tol, scale: original(value, target, 2 * tol, scale),
                          "rules"),
    "no echo rule": ("gym_sysmath.tasks.linalg.grader", "_prompt_numbers", lambda original: lambda prompt: frozenset(),
                     "rules"),
}


@pytest.mark.parametrize("change", list(RULE_CHANGES))
def test_a_changed_grading_rule_fails_the_check_naming_the_part(monkeypatch, change):
    import importlib

    module_name, attribute, replacement, part = RULE_CHANGES[change]
    module = importlib.import_module(module_name)
    monkeypatch.setattr(module, attribute, replacement(getattr(module, attribute)))
    message = task_set_lock.problem(family("linalg"))
    assert message is not None and (f"({part}" in message or f", {part}" in message), message
    assert "--bump linalg" in message


_NUMBERS = st.one_of(st.integers(-10**6, 10**6), st.fractions(max_denominator=50).filter(lambda f: f.denominator > 1))


@settings(max_examples=60, deadline=None)
@given(st.lists(_NUMBERS, min_size=1, max_size=5), st.booleans())
def test_each_value_variant_is_another_answer_and_the_probes_cover_the_rules(numbers, nested):
    """Generated values: every variant differs from the value and from the others; the probes hold
    the value inside <think>, beside a different value (both orders) and with each variant."""
    value = "[" + ", ".join(str(Fraction(n)) for n in numbers) + "]"
    value = f"[{value}]" if nested else value
    variants = list(value_variants(value))
    assert value not in variants and len(variants) == len(set(variants)) and variants
    replies = list(reply_probes(f"Work.\n\nANSWER: {value}", "A number 7 and 12 in the prompt."))
    line = f"ANSWER: {value}"
    assert f"<think>\n{line}\n</think>\nI am not sure." in replies
    other = other_value(value)
    assert other != value and f"{line}\nANSWER: {other}" in replies and f"ANSWER: {other}\n{line}" in replies
    assert all(f"ANSWER: {variant}" in replies for variant in variants) and "ANSWER: 7" in replies


@pytest.fixture(scope="module")
def csapp_env():
    env = gym.make("CsappExact-v0", sandbox=NO_SANDBOX)
    yield env
    env.close()


@settings(max_examples=30, deadline=None)
@given(index=st.integers(min_value=0, max_value=10**6))
def test_the_csapp_probes_sit_on_the_rules_they_test(csapp_env, index):
    """On a generated eval task: the key right, inside <think> not an answer, beside another value
    wrong, a hex key in capitals wrong, a float key one ulp off wrong (so changing any of those
    rules flips a verdict the digest records)."""
    core = core_env(csapp_env)
    ids = core._eval_ids()
    task_id = ids[index % len(ids)]
    prompt, _ = csapp_env.reset(seed=0, options={"task_id": task_id})
    reference = core.reference_action()
    value = reference.removeprefix("ANSWER: ")
    verdicts = {}
    for reply in reply_probes(reference, prompt):
        csapp_env.reset(seed=0, options={"task_id": task_id})
        verdicts[reply] = csapp_env.step(reply)[4]["verdict"]
    assert verdicts[reference] == "correct"
    assert verdicts[f"<think>\n{reference}\n</think>\nI am not sure."] == "format_error"
    other = other_value(value)
    assert verdicts[f"{reference}\nANSWER: {other}"] == verdicts[f"ANSWER: {other}\n{reference}"] == "wrong_answer"
    capitals = re.sub(r"0x[0-9a-f]+", lambda m: "0x" + m.group(0)[2:].upper(), value)
    if capitals != value:
        assert verdicts[f"ANSWER: {capitals}"] == "wrong_answer"
    key = core.task.answer
    if any(isinstance(item, float) and item == item for item in key):
        ulp = re.sub(r"(?<![\w.])-?\d+\.\d+(?:[eE][+-]?\d+)?(?![\w.])",
                     lambda m: repr(__import__("math").nextafter(float(m.group(0)), float("inf"))), value)
        assert verdicts[f"ANSWER: {ulp}"] == "wrong_answer"


ROOT = Path(__file__).resolve().parents[1]


def _scratch_tree(tmp_path: Path) -> Path:
    """The package, envs/ and tasks/ copied (symlinks kept), for a mutation of real files."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("gym_sysmath", "envs", "tasks"):
        shutil.copytree(ROOT / name, tmp_path / name, symlinks=True, ignore=ignore)
    return tmp_path


#: Real changes to shipped files (path, text, replacement) that once passed the check.
FILE_CHANGES = {
    "linalg: the hard determinant bound 6 -> 7": (
        "tasks/linalg/generators.py", '"hard": (4, 6)}[difficulty]\n    a = _ints(rng, bound, (n, n))',
        '"hard": (4, 7)}[difficulty]\n    a = _ints(rng, bound, (n, n))', "linalg"),
    "csapp: hex strings compared case-insensitively": (
        "gym_sysmath/exact.py", "return isinstance(actual, str) and actual == expected",
        "return isinstance(actual, str) and actual.lower() == expected.lower()", "csapp"),
}


@pytest.mark.slow
@pytest.mark.parametrize("change", list(FILE_CHANGES))
def test_a_changed_file_in_a_copy_fails_the_check_command(tmp_path, change):
    """The real command, on a copy of the tree with one shipped file changed: exit 1, naming the family."""
    relative, old, new, name = FILE_CHANGES[change]
    root = _scratch_tree(tmp_path)
    path = root / relative
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{relative} no longer holds the text this test changes"
    path.write_text(text.replace(old, new), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "gym_sysmath.task_sets", "--check", name], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"task sets: {installed(name).label}: the task set changed" in done.stderr


def test_a_raising_train_generator_is_one_line_naming_the_family(monkeypatch, capsys):
    from gym_sysmath.tasks import linalg

    def broken(*args, **kwargs):
        raise RuntimeError("the generator gave up")

    monkeypatch.setattr(linalg, "generate_problem", broken)
    assert task_sets_main(["--check", "linalg"]) == 1
    error = capsys.readouterr().err.strip()
    assert error.splitlines() == [f"task sets: {installed('linalg').label}: the digest could not be measured: "
                                  f"RuntimeError: the generator gave up"]


def test_a_missing_or_old_format_lock_names_the_record_command(monkeypatch, linalg_digest):
    monkeypatch.setattr(task_set_lock, "read_lock", lambda name: None)
    assert "--record linalg --why 'first version'" in task_set_lock.problem(family("linalg"), linalg_digest)
    monkeypatch.setattr(task_set_lock, "read_lock", lambda name: {"version": 3, "hash": "0", "digest_format": 0})
    assert "re-record every family, versions unchanged" in task_set_lock.problem(family("linalg"), linalg_digest)


@pytest.fixture
def scratch_lock(monkeypatch, tmp_path):
    """Every family's lock file is one scratch file; the installed-task-set cache is cleared around."""
    import gym_sysmath.task_sets as task_sets

    scratch = tmp_path / "task_set.json"
    monkeypatch.setattr(task_sets, "lock_path", lambda name: scratch)
    monkeypatch.setattr(task_set_lock, "lock_path", lambda name: scratch)
    task_sets.installed.cache_clear()
    yield scratch
    task_sets.installed.cache_clear()


def test_record_then_bump_writes_the_history_and_pins_name_the_release(monkeypatch, scratch_lock):
    """In a scratch lock: the first record is version 1; a bump with nothing changed is refused;
    after a change it is version 2, and a pin to version 1 names the release that shipped it."""
    row = family("linalg")
    assert task_set_lock.record(row, "first version").startswith("linalg@1 ")
    with pytest.raises(ValueError, match="the digest saw no change"):
        task_set_lock.bump(row, "nothing")
    original = LinearAlgebraEnv.grading_key
    monkeypatch.setattr(LinearAlgebraEnv, "grading_key", lambda self: ("v2", original(self)))
    assert "bumped from linalg@1" in task_set_lock.bump(row, "the keys changed")
    written = json.loads(scratch_lock.read_text())
    assert written["version"] == 2 and [entry["version"] for entry in written["history"]] == [1, 2]
    assert written["_generated"].startswith("Generated by `python -m gym_sysmath.task_sets")
    assert task_set_lock.check(["linalg"]) == []
    with pytest.raises(TaskSetError, match=r"this install has linalg@2 .*linalg@1 shipped with gym-sysmath"):
        require("linalg", 1)


def test_record_never_redefines_a_recorded_version_unless_it_never_shipped(monkeypatch, scratch_lock, capsys):
    """A new hash for a recorded version under the same digest format is refused (bump it), in
    one line; ``--unshipped`` re-records it and keeps the hash it replaces in the history."""
    row = family("linalg")
    task_set_lock.record(row, "first version")
    first = json.loads(scratch_lock.read_text())["hash"]
    original = LinearAlgebraEnv.grading_key
    monkeypatch.setattr(LinearAlgebraEnv, "grading_key", lambda self: ("tidied", original(self)))
    assert task_sets_main(["--record", "linalg", "--why", "tidy"]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "--bump linalg" in error and "--unshipped" in error
    assert json.loads(scratch_lock.read_text())["hash"] == first  # nothing written
    assert "--record linalg --unshipped" in task_set_lock.check(["linalg"])[0]
    assert task_sets_main(["--record", "linalg", "--unshipped", "--why", "never shipped"]) == 0
    written = json.loads(scratch_lock.read_text())
    assert written["version"] == 1 and written["hash"] != first
    assert [earlier["hash"] for earlier in written["history"][0]["earlier_hashes"]] == [first]
    assert installed("linalg").release(1).earlier_hashes == (first,)


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


@pytest.mark.parametrize("pin", ["\u00b9", "csapp@01", "csapp@\uff11", "01", "csapp@1.0", "csapp@+1", " 1"])
def test_a_pin_is_ascii_digits_in_canonical_form(pin):
    with pytest.raises(TaskSetError, match="is not a task set label"):
        gym.make("CsappExact-v0", task_set=pin)


def test_a_forked_task_file_serves_an_unversioned_task_set_and_refuses_a_pin(tmp_path):
    shipped = read_task_text()[0]
    same, forked = tmp_path / "same.json", tmp_path / "forked.json"
    same.write_text(shipped, encoding="utf-8")
    forked.write_text(shipped.replace('"0x', '"0X', 1) if '"0x' in shipped else shipped + "\n", encoding="utf-8")
    current = installed("csapp")
    env = gym.make("CsappExact-v0", tasks_path=str(same), task_set=current.label, sandbox=NO_SANDBOX)
    assert core_env(env).task_set == current  # the shipped file's bytes, elsewhere: the installed set
    env.close()
    env = gym.make("CsappExact-v0", tasks_path=str(forked), sandbox=NO_SANDBOX)
    _, info = env.reset(seed=0)
    assert info["task_set"] == "csapp@unversioned" and re.fullmatch(r"file-[0-9a-f]{11}", info["task_set_hash"])
    env.close()
    with pytest.raises(TaskSetError, match=r"pins csapp@\d+, but this env serves tasks from a file that is not the "
                                           r"shipped task set \(csapp@unversioned, file-"):
        gym.make("CsappExact-v0", tasks_path=str(forked), task_set=current.label, sandbox=NO_SANDBOX)


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


def test_resume_accepts_a_pin_to_the_installed_task_set(tmp_path):
    """The pin is not part of a run's identity: it changes no outcome, and the rows name the set."""
    current = installed("linalg")
    assert _eval(tmp_path) == 0
    assert _eval(tmp_path, "--resume", "--env-arg", f"task_set={current.label}") == 0
    assert _eval(tmp_path, "--resume", "--env-arg", f"task_set={current.version}") == 0


def test_eval_takes_the_pin_as_an_env_argument_and_refuses_another_in_one_line(tmp_path, capsys):
    current = installed("linalg")
    assert _eval(tmp_path / "pinned", "--env-arg", f"task_set={current.label}") == 0
    assert _eval(tmp_path / "other", "--env-arg", f"task_set=linalg@{current.version + 1}") == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and f"this install has {current.label}" in error

"""Independent re-check of every task in a task file (``--verify``, ``gym-sysmath verify csapp``).

Per task: the reference runs again and reproduces the stored key and distractors; the trap still
holds; it gives the same answers in two fresh interpreters (different hash seeds); the key is a
flat list of JSON primitives with lowercase hex; it survives both the task-file codec and plain
JSON text (the ``ANSWER:`` channel) bit for bit; the distractors differ from it; and
``reference_code`` reproduces it. The machine model is also held to known x86-64 facts.

Then the real toolchain, in the sandbox: every task whose question is C code is compiled with the
image's gcc and run, and must print its key (a machine or linking task is rebuilt from its files
and must reproduce ``compiled.json`` exactly; a task with a ``RunCheck`` is checked both ways:
every output its runs print is allowed, and every output its key calls possible is printed, by
a plain run or forced by a schedule, ``schedules``); and every task whose key comes from a
model must agree with the template's second, independently written model.

The same oracles then face fresh train draws of every template (``train``: RL trains there, so a
wrong train key is a wrong reward), and the guessability audit says how well a constant answers
each field (``guessability``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import numpy as np

from gym_sysmath.answers import plain_answer_text
from gym_sysmath.exact import dumps_exact, exact_equal, is_json_primitive_list, loads_exact

from . import cprint, guessability, toolchain_results
from .answers import parse_answer_value, reference_code
from .catalog import TEMPLATES
from .machine import CacheGeometry, ctype, misses, simulate, struct_layout
from .runs import TRAIN_PLAIN_RUNS, run_problems
from .runs import programs_of as programs_of_check
from .task import CsappTask
from .taskfile import load_tasks
from .template import BuildError, instantiate
from .toolchain import Program, ProgramResult, result_record, run_programs
from .train import sample_from

_HASH_SEEDS = ("1", "2")


@dataclass(frozen=True)
class TaskFailure:
    task_id: str
    problems: tuple[str, ...]


@dataclass(frozen=True)
class VerifyReport:
    """Counts and per-task failures; ``ok`` only when every task and every anchor passed."""

    total: int
    passed: int
    failures: tuple[TaskFailure, ...] = ()
    anchor_failures: tuple[str, ...] = ()
    #: Tasks whose C was compiled and run in the sandbox, and how many of them printed the key.
    c_programs: int = 0
    c_passed: int = 0
    #: Tasks with a second model, and how many agreed with the key.
    second_models: int = 0
    second_passed: int = 0
    #: Outputs forced (every one a key calls possible) and refuted (called impossible), eval and
    #: train together (``schedules``).
    forced: int = 0
    refuted: int = 0
    #: Fresh train draws checked by the same oracles (real program, forced schedules, second
    #: model), and those that failed.
    train_total: int = 0
    train_failures: tuple[TaskFailure, ...] = ()
    #: The guessability audit (``guessability.lines``), and whether a field offends.
    guess_lines: tuple[str, ...] = ()
    guess_offends: bool = False

    @property
    def ok(self) -> bool:
        return (self.passed == self.total and not self.anchor_failures and not self.train_failures
                and not self.guess_offends)

    def summary(self) -> str:
        return f"{self.passed}/{self.total}"

    def lines(self) -> list[str]:
        """What a CLI prints: one line per problem, the toolchain and second-model counts, then
        the ``passed/total`` count."""
        out = [f"FAIL {f.task_id}: {problem}" for f in self.failures for problem in f.problems]
        out += [f"FAIL train {f.task_id}: {problem}" for f in self.train_failures for problem in f.problems]
        out += [f"FAIL machine anchor: {anchor}" for anchor in self.anchor_failures]
        out += list(self.guess_lines)
        out.append(f"C compiled and run in the sandbox (gcc): {self.c_passed}/{self.c_programs} tasks print their key")
        out.append(f"schedules, both ways: {self.forced} outputs a key calls possible were forced and printed, "
                   f"{self.refuted} it calls impossible could not be forced")
        out.append(f"second, independent model: {self.second_passed}/{self.second_models} tasks agree")
        if self.train_total:
            out.append(f"train draws checked by the same oracles: {self.train_total - len(self.train_failures)}/"
                       f"{self.train_total} agree")
        return [*out, self.summary()]


def machine_anchors() -> list[str]:
    """Facts of the x86-64 System V ABI and of caches that the machine model must reproduce.

    They pin the layout algorithm and the simulator to independently known numbers, so an
    error in the model cannot hide behind keys that were computed by that same model.
    """
    failures = []

    def size(*specs: str) -> int:
        return struct_layout([ctype(s) for s in specs]).size

    if size("char", "int", "char") != 12:
        failures.append("sizeof(struct {char; int; char}) must be 12")
    if size("int", "char", "char") != 8:
        failures.append("sizeof(struct {int; char; char}) must be 8")
    if size("char", "double") != 16 or size("short", "char") != 4:
        failures.append("struct layout disagrees with the x86-64 ABI on double/short alignment")
    # int a[4][8] on a 2-set direct-mapped cache of 16-byte blocks: 8 misses row-major, 32 column-major
    g = CacheGeometry(sets=2, ways=1, block=16)
    rows = misses(simulate(g, [(i * 8 + j) * 4 for i in range(4) for j in range(8)]))
    cols = misses(simulate(g, [(i * 8 + j) * 4 for j in range(8) for i in range(4)]))
    if (rows, cols) != (8, 32):
        failures.append(f"cache simulator: row/column-major misses are {rows}/{cols}, expected 8/32")
    return failures


def _execute_all(tasks: tuple[CsappTask, ...]) -> dict[str, Any]:
    """Each task's reference answers, or the error it raised, keyed by task id."""
    out: dict[str, Any] = {}
    for task in tasks:
        template = TEMPLATES.get(task.template)
        if template is None:
            out[task.task_id] = {"error": f"unknown template {task.template!r}"}
            continue
        try:
            out[task.task_id] = {
                "answer": template.reference(task.params),
                "distractors": [w.answer(task.params) for w in template.wrong],
            }
        except Exception as err:  # a reference that raises is a verify failure, not a crash
            out[task.task_id] = {"error": f"{type(err).__name__}: {err}"}
    return out


def _fresh_runs(path: str | None) -> tuple[list[dict[str, Any] | None], str | None]:
    """Run the references in two fresh interpreters; their outputs, or why they failed."""
    command = [sys.executable, "-m", "gym_sysmath.tasks.csapp.verify", "--execute"]
    if path is not None:
        command.append(os.fspath(path))
    runs: list[dict[str, Any] | None] = []
    for seed in _HASH_SEEDS:
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
        if proc.returncode != 0:
            return [], f"fresh interpreter (PYTHONHASHSEED={seed}) failed: {proc.stderr.strip()[-500:]}"
        runs.append(loads_exact(proc.stdout))
    return runs, None


def _check_task(task: CsappTask, runs: list[dict[str, Any] | None]) -> list[str]:
    problems: list[str] = []
    template = TEMPLATES.get(task.template)
    if template is None:
        return [f"unknown template {task.template!r}"]
    try:
        fresh = instantiate(template, task.params, task.task_id)
    except BuildError as err:
        return [f"rebuild failed: {err}"]
    except Exception as err:
        return [f"reference raised {type(err).__name__}: {err}"]
    if fresh.category != task.category:
        problems.append(f"category {task.category!r}, template says {fresh.category!r}")
    if fresh.instruction != task.instruction:
        problems.append("instruction differs from the template's rendering")
    if not exact_equal(fresh.answer, task.answer):
        problems.append(f"stored key {task.answer!r} differs from the executed key {fresh.answer!r}")
    if not exact_equal(fresh.distractors, task.distractors):
        problems.append("stored distractors differ from the executed wrong readings")
    if not is_json_primitive_list(task.answer):
        problems.append("key is not a non-empty list of JSON primitives")
    if any(isinstance(v, str) and v != v.lower() for v in task.answer):
        problems.append("key holds a hex string that is not lowercase")
    if not task.distractors:
        problems.append("no distractors")
    if any(exact_equal(task.answer, d) for d in task.distractors):
        problems.append("a distractor equals the key")
    if not exact_equal(loads_exact(dumps_exact(task.answer)), task.answer):
        problems.append("key does not survive the task-file codec")
    try:
        if not exact_equal(parse_answer_value(json.dumps(task.answer)), task.answer):
            problems.append("key does not survive plain JSON text (the ANSWER: channel)")
    except ValueError as err:
        problems.append(f"key cannot be written as an ANSWER: {err}")
    namespace: dict[str, Any] = {}
    exec(reference_code(task), namespace)  # our own generated literal code
    if not exact_equal(namespace.get("result"), task.answer):
        problems.append("reference_code does not reproduce the key")
    outputs = [run.get(task.task_id) if run is not None else None for run in runs]
    for i, output in enumerate(outputs, 1):
        if output is None:
            problems.append(f"fresh run {i}: no result for this task")
        elif "error" in output:
            problems.append(f"fresh run {i}: {output['error']}")
        elif not exact_equal(output["answer"], task.answer):
            problems.append(f"fresh run {i} gave {output['answer']!r}, not the stored key")
    if len(outputs) == 2 and outputs[0] is not None and not exact_equal(outputs[0], outputs[1]):
        problems.append("the two fresh runs disagree (not deterministic)")
    return problems


def _second_model(task: CsappTask) -> list[str] | None:
    """None when the template has no second model; else the problems (empty: it agrees)."""
    template = TEMPLATES.get(task.template)
    if template is None or template.independent is None:
        return None
    try:
        other = template.independent(task.params)
    except Exception as err:
        return [f"second model raised {type(err).__name__}: {err}"]
    if not exact_equal(other, task.answer):
        return [f"second model gives {other!r}, the key is {task.answer!r}"]
    return []


def programs_of(task: CsappTask, plain_runs: int | None = None) -> tuple[list[Program], Any] | None:
    """The C the task's question shows, built as the toolchain check runs it (with its forced
    build, for a ``RunCheck`` that forces; ``plain_runs`` instead of its own count of plain
    runs), and the check; None for a task without C."""
    template = TEMPLATES.get(task.template)
    if template is None:
        return None
    family = toolchain_results.FAMILIES.get(task.template)
    if family is not None:
        return [family.program(task.params)], None
    check = template.runs(task.params) if template.runs is not None else cprint.run_check(
        template, task.params, task.answer)
    if check is None:
        return None
    if plain_runs is not None and template.runs is not None:
        check = replace(check, runs=plain_runs)
    return programs_of_check(check), check


def program_of(task: CsappTask) -> tuple[Program, Any] | None:
    """The task's C program (the plain one, without a forced build) and its check, or None."""
    built = programs_of(task)
    return None if built is None else (built[0][0], built[1])


def _toolchain_problems(task: CsappTask, programs: list[Program], check: Any,
                        results: list[ProgramResult]) -> list[str]:
    if check is not None:  # a RunCheck: both ways, every output allowed and every allowed one printed
        return run_problems(check, *results)
    program, result = programs[0], results[0]
    fresh = result_record(result)
    try:
        stored = toolchain_results.outputs(program)
    except BuildError as err:
        return [str(err)]
    problems = []
    if (fresh["built"], fresh["failed_step"], fresh["shown"]) != (stored.built, stored.failed_step, stored.shown):
        problems.append(f"rebuilding differs from {toolchain_results.DATA_FILE} (build result or the assembly shown)")
    if (tuple(fresh["outputs"]), tuple(fresh["exit_codes"])) != (stored.outputs, stored.exit_codes):
        problems.append(f"the rebuilt program printed {fresh['outputs']!r}; {toolchain_results.DATA_FILE} says "
                        f"{stored.outputs!r}")
    with toolchain_results.recorded({program.key: fresh}):
        try:
            key = TEMPLATES[task.template].reference(task.params)
        except Exception as err:
            return [*problems, f"reading the rebuilt program's output raised {type(err).__name__}: {err}"]
    if not exact_equal(key, task.answer):
        problems.append(f"the rebuilt program gives the key {key!r}, not {task.answer!r}")
    return problems


@dataclass
class _OracleCounts:
    c_programs: int = 0
    c_passed: int = 0
    second_models: int = 0
    second_passed: int = 0
    forced: int = 0
    refuted: int = 0


def _oracle_problems(tasks: Sequence[CsappTask], lease: Any, counts: _OracleCounts,
                     plain_runs: int | None = None) -> dict[str, list[str]]:
    """Each task's problems by the oracles that do not read the task file: its C in the sandbox
    (both ways for a ``RunCheck``, with ``plain_runs`` plain runs if given) and the template's
    second model."""
    built = {task.task_id: b for task in tasks if (b := programs_of(task, plain_runs)) is not None}
    flat = [program for programs, _ in built.values() for program in programs]
    toolchain_error = None
    results: dict[str, list[ProgramResult]] = {}
    try:
        ran = iter(run_programs(flat, lease))
        results = {task_id: [next(ran) for _ in programs] for task_id, (programs, _) in built.items()}
    except Exception as err:  # the sandbox failed: every C check fails, none passes silently
        toolchain_error = f"the sandbox toolchain run failed: {type(err).__name__}: {err}"
    out: dict[str, list[str]] = {}
    for task in tasks:
        problems: list[str] = []
        if task.task_id in built:
            programs, check = built[task.task_id]
            c_problems = ([toolchain_error] if toolchain_error
                          else _toolchain_problems(task, programs, check, results[task.task_id]))
            counts.c_programs += 1
            counts.c_passed += not c_problems
            if check is not None and check.forced is not None and not c_problems:
                counts.forced += len(check.forced.produce)
                counts.refuted += len(check.forced.refute)
            problems += c_problems
        second = _second_model(task)
        if second is not None:
            counts.second_models += 1
            counts.second_passed += not second
            problems += second
        out[task.task_id] = problems
    return out


def train_draws(per_template: int, seed: int = 0) -> list[CsappTask]:
    """``per_template`` fresh train draws of every template, drawn as the train split draws them
    (distinct ids only: a template with a small pool gives fewer)."""
    rng = np.random.default_rng(seed)
    out: dict[str, CsappTask] = {}
    for template in TEMPLATES.values():
        for _ in range(per_template):
            task = sample_from(rng, template)
            out.setdefault(task.task_id, task)
    return list(out.values())


def verify(path: str | os.PathLike[str] | None = None, *, lease: Any = None, train: int = 0,
           guess_draws: int = 0) -> VerifyReport:
    """Re-check every task of the shipped file (or of ``path``) independently; the C programs
    run in a sandbox container (``lease``, or a fresh Docker sandbox). With ``train``, that many
    fresh train draws per template face the same oracles; with ``guess_draws``, the
    guessability audit runs over that many draws per template."""
    tasks = load_tasks(path)
    runs, run_error = _fresh_runs(None if path is None else os.fspath(path))
    counts = _OracleCounts()
    oracle = _oracle_problems(tasks, lease, counts)
    failures = []
    for task in tasks:
        problems = _check_task(task, runs)
        if run_error:
            problems.append(run_error)
        problems += oracle[task.task_id]
        if problems:
            failures.append(TaskFailure(task.task_id, tuple(problems)))
    train_failures: list[TaskFailure] = []
    drawn = train_draws(train) if train else []
    if drawn:
        train_counts = _OracleCounts()
        for task_id, problems in _oracle_problems(drawn, lease, train_counts, TRAIN_PLAIN_RUNS).items():
            if problems:
                train_failures.append(TaskFailure(task_id, tuple(problems)))
        counts.forced += train_counts.forced
        counts.refuted += train_counts.refuted
    guesses = guessability.audit(guess_draws, jobs=min(4, os.cpu_count() or 1)) if guess_draws else []
    return VerifyReport(
        total=len(tasks),
        passed=len(tasks) - len(failures),
        failures=tuple(failures),
        anchor_failures=tuple(machine_anchors()),
        c_programs=counts.c_programs, c_passed=counts.c_passed, second_models=counts.second_models,
        second_passed=counts.second_passed, forced=counts.forced, refuted=counts.refuted,
        train_total=len(drawn), train_failures=tuple(train_failures),
        guess_lines=tuple(guessability.lines(guesses)) if guesses else (),
        guess_offends=bool(guessability.offenders(guesses)),
    )


def _execute_main(argv: list[str]) -> int:
    """Child side of the determinism check: print every task's executed answers."""
    print(dumps_exact(_execute_all(load_tasks(argv[0] if argv else None))))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["--execute"]:
        sys.exit("usage: python -m gym_sysmath.tasks.csapp.verify --execute [TASK_FILE]")
    sys.exit(_execute_main(sys.argv[2:]))


def confirms(task: CsappTask, text: str) -> bool | None:
    """A second opinion on a reply the grader passed, for the reward-hacking watch: the answer
    line (``answers.plain_answer_text``, not the grader's reader) parsed by plain ``json.loads``,
    an integral number read as the int it spells where the key has an int (``3.0`` is ``3``),
    against the key executed afresh from the template's reference and, where the template has
    one, its second, independently written model. ``None``: plain JSON cannot read the line (or
    the reply has none: a ``result`` left in code), so there is no second opinion."""
    line = plain_answer_text(text)
    if line is None:
        return None
    try:
        value = json.loads(line, parse_float=Decimal)
    except (json.JSONDecodeError, ArithmeticError):
        return None
    template = TEMPLATES.get(task.template)
    if template is None:
        return False
    keys = [instantiate(template, task.params, task.task_id).answer]
    if template.independent is not None:
        keys.append(template.independent(task.params))
    return all(exact_equal(_as_key_types(value, key), key) for key in keys)


def _as_key_types(value: Any, key: Any) -> Any:
    """``value`` (JSON with decimals kept exact) with each number in the type of the key's
    element at its place: an integral decimal where the key has an int becomes that int."""
    if isinstance(value, list) and isinstance(key, list) and len(value) == len(key):
        return [_as_key_types(v, k) for v, k in zip(value, key, strict=True)]
    if isinstance(value, Decimal):
        if isinstance(key, int) and not isinstance(key, bool) and value == value.to_integral_value():
            return int(value)
        return float(value)
    return value

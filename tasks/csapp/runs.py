"""The build's run check: every task with a ``RunCheck`` runs its C many times in the sandbox.

An exhaustive model of the schedules (fork, signals, threads) says which outputs a program can
print; the real program, compiled with the image's gcc (``toolchain``) and run
``RunCheck.runs`` times, must print nothing else and exit 0. Both ways: the same program,
gated (``schedules``), is also made to follow a schedule for every output the model allows, and
must print it. The build refuses to write the task file otherwise; ``verify csapp`` repeats the
same check on the shipped file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from .catalog import TEMPLATES
from .schedules import batches, split_batches
from .task import CsappTask
from .template import VOID_RUN, RunCheck
from .toolchain import Program, ProgramResult, ToolchainError, run_programs, single_file

#: Programs per sandbox job: a few hundred fork trees and thread pairs per job keep well inside
#: the job's memory limit (a batch of all 15 was refused with ``memory_limit`` now and then).
BATCH = 4


@dataclass(frozen=True)
class RunReport:
    """What one task's runs showed: how many plain runs, how many distinct outputs, how many
    outputs were forced and how many refused, and what was wrong."""

    task_id: str
    runs: int
    distinct: int
    problems: tuple[str, ...]
    forced: int = 0
    refuted: int = 0


#: Void runs (the machine refused a fork or a thread) tolerated before a check counts as failed.
MAX_VOID_FRACTION = 0.1


def programs_of(check: RunCheck) -> list[Program]:
    """The plain program, run ``check.runs`` times, then its gated build (when the check forces),
    run once per schedule: produce first, then refute."""
    plain = single_file(check.source, times=check.runs, reaped=check.reaped)
    if check.forced is None:
        return [plain]
    inputs = batches(check.forced.produce, check.forced.refute)
    return [plain, single_file(check.forced.source, reaped=check.reaped, inputs=inputs)]


def run_problems(check: RunCheck, result: ProgramResult, forced: ProgramResult | None = None) -> list[str]:
    """Why the runs of ``check.source`` disagree with its model (empty when they agree), both
    ways: every output a plain run printed is allowed, and every allowed output was printed,
    by a plain run or by a forced one; no refuted schedule could be followed.

    A void run is neither evidence for the model nor against it; more than a tenth of them
    means the check did not really run, which is a failure too.
    """
    if not result.built:
        return [f"the C program did not compile: {result.build_log.strip()[-300:]}"]
    seen = Counter(check.observed(out) for out in result.outputs)
    void = seen.pop(VOID_RUN, 0)
    problems = [f"printed an output the model rules out ({count} of {len(result.outputs)} runs): {out!r}"
                for out, count in sorted(seen.items()) if out not in check.allowed]
    if void > MAX_VOID_FRACTION * len(result.outputs):
        problems.append(f"{void} of {len(result.outputs)} runs were void (a fork or thread refused)")
    exits = set(code for out, code in zip(result.outputs, result.exit_codes, strict=True)
                if check.observed(out) != VOID_RUN)
    if exits - {0}:
        problems.append(f"a run exited with status {sorted(exits - {0})}")
    produced = set(seen)
    if check.forced is not None:
        if forced is None or not forced.built:
            log = "" if forced is None else forced.build_log.strip()[-300:]
            return [*problems, f"the forced-schedule build did not compile: {log}"]
        produced |= _forced_problems(check, forced, problems)
    problems += [f"the key calls {out!r} possible, but no run printed it, forced or not"
                 for out in sorted(check.allowed - produced)]
    return problems


def _forced_problems(check: RunCheck, forced: ProgramResult, problems: list[str]) -> set[str]:
    """Read the forced runs: append what is wrong to ``problems``, return the outputs produced."""
    assert check.forced is not None
    produce, refute = check.forced.produce, check.forced.refute
    outcomes = split_batches(forced.outputs)
    if len(outcomes) != len(produce) + len(refute):
        problems.append(f"{len(outcomes)} forced runs came back for {len(produce) + len(refute)} schedules")
        return set()
    produced: set[str] = set()
    void = 0
    for schedule, (out, code) in zip(produce, outcomes, strict=False):
        if check.observed(out) == VOID_RUN:
            void += 1
        elif out == schedule.output and code == 0:
            produced.add(check.observed(out))
        else:
            problems.append(f"a forced run of {schedule.output!r}, which the key calls possible, printed "
                            f"{out!r} (status {code})")
    for schedule, (out, code) in zip(refute, outcomes[len(produce):], strict=True):
        if out == schedule.output and code == 0:
            problems.append(f"a forced run printed {out!r}, which the key calls impossible")
    if void > MAX_VOID_FRACTION * max(1, len(produce)):
        problems.append(f"{void} of {len(produce)} forced runs were void (a fork or thread refused)")
    return produced


#: Plain runs per train draw (``check_runs(plain_runs=...)``): the forced schedules carry the
#: allowed-to-produced direction, so many draws with fewer runs each see more programs for the time.
TRAIN_PLAIN_RUNS = 40


def check_runs(tasks: Iterable[CsappTask], lease: Any = None, *, plain_runs: int | None = None) -> list[RunReport]:
    """Run every task whose template has a ``RunCheck`` (a sandbox job per ``BATCH`` of them):
    its plain runs (``plain_runs`` of them instead of the check's own count, if given) and its
    forced schedules."""
    checks = [(task, runs(task.params)) for task in tasks if (runs := TEMPLATES[task.template].runs) is not None]
    if plain_runs is not None:
        checks = [(task, replace(check, runs=plain_runs)) for task, check in checks]
    programs = [programs_of(c) for _, c in checks]
    flat = [program for group in programs for program in group]
    results: list[ProgramResult] = []
    for start in range(0, len(flat), BATCH):
        chunk = flat[start:start + BATCH]
        try:
            results += run_programs(chunk, lease)
        except ToolchainError:  # the harness, not a program: one retry, then it is raised
            results += run_programs(chunk, lease)
    reports, at = [], 0
    for (task, check), group in zip(checks, programs, strict=True):
        mine, at = results[at:at + len(group)], at + len(group)
        forced = check.forced
        reports.append(RunReport(task.task_id, len(mine[0].outputs), len(set(mine[0].outputs)),
                                 tuple(run_problems(check, *mine)),
                                 forced=len(forced.produce) if forced else 0,
                                 refuted=len(forced.refute) if forced else 0))
    return reports

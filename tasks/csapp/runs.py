"""The build's run check: every task with a ``RunCheck`` runs its C many times in the sandbox.

An exhaustive model of the schedules (fork, signals, threads) says which outputs a program can
print; the real program, compiled with the image's gcc (``toolchain``) and run
``RunCheck.runs`` times, must print nothing else and exit 0. The build refuses to write the task
file otherwise; ``verify csapp`` repeats the same check on the shipped file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .catalog import TEMPLATES
from .task import CsappTask
from .template import VOID_RUN, RunCheck
from .toolchain import ProgramResult, ToolchainError, run_programs, single_file

#: Programs per sandbox job: a few hundred fork trees and thread pairs per job keep well inside
#: the job's memory limit (a batch of all 15 was refused with ``memory_limit`` now and then).
BATCH = 4


@dataclass(frozen=True)
class RunReport:
    """What one task's runs showed: how many, how many distinct outputs, and what was wrong."""

    task_id: str
    runs: int
    distinct: int
    problems: tuple[str, ...]


#: Void runs (the machine refused a fork or a thread) tolerated before a check counts as failed.
MAX_VOID_FRACTION = 0.1


def run_problems(check: RunCheck, result: ProgramResult) -> list[str]:
    """Why the runs of ``check.source`` disagree with its model (empty when they agree).

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
    return problems


def check_runs(tasks: Iterable[CsappTask], lease: Any = None) -> list[RunReport]:
    """Run every task whose template has a ``RunCheck`` (a sandbox job per ``BATCH`` of them)."""
    checks = [(task, runs(task.params)) for task in tasks if (runs := TEMPLATES[task.template].runs) is not None]
    programs = [single_file(c.source, times=c.runs) for _, c in checks]
    results: list[ProgramResult] = []
    for start in range(0, len(programs), BATCH):
        chunk = programs[start:start + BATCH]
        try:
            results += run_programs(chunk, lease)
        except ToolchainError:  # the harness, not a program: one retry, then it is raised
            results += run_programs(chunk, lease)
    return [RunReport(task.task_id, len(result.outputs), len(set(result.outputs)), tuple(run_problems(check, result)))
            for (task, check), result in zip(checks, results, strict=True)]

"""CompGeom tasks: intersection primitives (``primitives.PRIMITIVES``), each in C++20, Rust 2021 and Python 3.

The agent implements one primitive against a clean contract adapted from Geometric Tools'
query semantics; a generated harness calls it on case inputs in the sandbox, and the host grades
the printed records against exact expectations that never leave the host.

    load_tasks()                      3 tasks per primitive, ordered by primitive, then cpp, rust, python
    job_files(task, source)           the files of one sandbox job: harness + candidate
    reference_solution(task)          the known-good fixture, which passes every case
    stdin_for(cases), compare(...)    the harness's stdin, and the grading of its stdout
    check_fixtures(run)               good fixtures pass, bad ones fail, starters score 0

Files live in ``tasks/compgeom/<primitive>/`` (see ``layout.py``); generated ones are rebuilt and
checked by ``python -m gym_sysmath.tasks.compgeom.build [--check|--verify]``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from gym_sysmath.filters import unknown_name

from .cases import Case, load_cases
from .fixtures import FixtureReport, check_fixtures, good_source
from .grading import ABS_TOL, REL_TOL, CaseReport, compare, describe_failures, stdin_for
from .languages import BY_LANGUAGE, LANGUAGES
from .layout import contract_path, harness_path, read, starter_path
from .primitives import PRIMITIVES
from .prompt import build_prompt
from .render import strip_header
from .runner import run_local

__all__ = [
    "ABS_TOL", "LANGUAGES", "PRIMITIVES", "REL_TOL", "Case", "CaseReport", "CompGeomTask", "FixtureReport",
    "check_fixtures", "compare", "describe_failures", "job_files", "load_tasks",
    "prompt_for", "reference_solution", "run_local", "stdin_for",
]


@dataclass(frozen=True)
class CompGeomTask:
    """One (primitive, language) task: what the agent reads and the cases it is graded on."""

    task_id: str
    primitive: str
    language: str
    candidate_file: str
    harness_file: str
    contract: str
    starter: str
    prompt: str
    public_cases: tuple[Case, ...]
    hidden_cases: tuple[Case, ...]


@cache
def _task(primitive: str, language: str) -> CompGeomTask:
    lang = BY_LANGUAGE[language]
    contract = strip_header(read(contract_path(primitive)))
    starter = strip_header(read(starter_path(primitive, language)))
    return CompGeomTask(
        task_id=f"{primitive}/{language}",
        primitive=primitive,
        language=language,
        candidate_file=lang.candidate_file,
        harness_file=lang.harness_file,
        contract=contract,
        starter=starter,
        prompt=build_prompt(primitive, lang, contract, starter),
        public_cases=_cases(primitive, "public"),
        hidden_cases=_cases(primitive, "hidden"),
    )


@cache
def _cases(primitive: str, visibility: str) -> tuple[Case, ...]:
    return load_cases(primitive, visibility)


def load_tasks(primitives: Iterable[str] | None = None, languages: Iterable[str] | None = None
               ) -> tuple[CompGeomTask, ...]:
    """The tasks in stable order: primitive (as in ``PRIMITIVES``), then cpp, rust, python."""
    chosen_p = set(PRIMITIVES if primitives is None else primitives)
    chosen_l = set(LANGUAGES if languages is None else languages)
    for argument, noun, chosen, known in (("primitives", "primitive", chosen_p, PRIMITIVES),
                                          ("languages", "language", chosen_l, LANGUAGES)):
        unknown = sorted(chosen - set(known))
        if unknown:  # the first, in the env's own words (gym_sysmath.filters)
            raise unknown_name(noun, unknown[0], known, where=argument)
    return tuple(_task(p, lang) for p in PRIMITIVES if p in chosen_p for lang in LANGUAGES if lang in chosen_l)


def prompt_for(task: CompGeomTask, max_turns: int, code_via: str = "fence") -> str:
    """The task statement for an episode of ``max_turns`` replies (one reply: no test turns);
    ``code_via="tool"``: tests run through the ``run_code`` tool."""
    return build_prompt(task.primitive, BY_LANGUAGE[task.language], task.contract, task.starter, max_turns, code_via)


def job_files(task: CompGeomTask, candidate_source: str) -> dict[str, str]:
    """The files of one sandbox job, by name: the generated harness and the candidate."""
    return {task.harness_file: read(harness_path(task.primitive, task.language)),
            task.candidate_file: candidate_source}


def reference_solution(task: CompGeomTask) -> str:
    """The known-good fixture in the task's language; it passes every public and hidden case."""
    return good_source(task.primitive, task.language)

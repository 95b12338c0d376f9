"""CsappExact-v0 tasks: machine-level systems problems with executed answer keys.

Original tasks on two's complement, overflow, IEEE-754, bits, memory layout, caches, x86-64
assembly, linking, processes, virtual memory and concurrency, each an instance of a template
whose executed code computed the key (a reference implementation, an exhaustive model, or the
sandbox image's gcc and ld), plus a training split of fresh template draws. Rebuild the shipped
files with ``python -m gym_sysmath.tasks.csapp.compiled`` (the toolchain's results, for machine
and linking) and then ``python -m gym_sysmath.tasks.csapp.build``.
"""

from .answers import parse_answer_value, read_answer_value, reference_code
from .difficulty import LEVELS, STANDARD_LEVELS, check_level, task_level
from .task import CATEGORIES, CsappTask, TaskFileError, check_categories
from .taskfile import load_tasks
from .train import sample_task

__all__ = [
    "CATEGORIES",
    "LEVELS",
    "STANDARD_LEVELS",
    "CsappTask",
    "TaskFileError",
    "check_categories",
    "check_level",
    "load_tasks",
    "parse_answer_value",
    "read_answer_value",
    "reference_code",
    "sample_task",
    "task_level",
]

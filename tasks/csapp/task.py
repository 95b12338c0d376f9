"""The task record that crosses module boundaries, and its checked conversion from JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gym_sysmath.exact import is_json_primitive_list
from gym_sysmath.filters import known_names

CATEGORIES: tuple[str, ...] = (
    "integers", "floats", "bits", "memory", "cache", "machine", "linking", "processes", "vm", "concurrency",
)


def check_categories(categories: Any) -> tuple[str, ...] | None:
    """A ``categories`` filter as a tuple of ``CATEGORIES`` (``None``: all). The one check the env
    (``gym.make``, reset options) and the train split (``sample_task``) both make: a bare string,
    an empty list and an unknown name are refused with the same words wherever they are given."""
    return known_names("categories", categories, CATEGORIES, noun="category")

Answer = list[Any]  # a non-empty flat list of bool | int | float | str

FIELDS: tuple[str, ...] = (
    "task_id", "category", "template", "instruction", "params", "answer", "distractors",
)


@dataclass(frozen=True)
class CsappTask:
    """One task: the prompt, the inputs its key was executed from, the key and the wrong keys.

    ``answer`` and ``distractors`` were produced by running the template's reference and its
    tempting wrong readings on ``params``; nothing in them was typed by hand.
    """

    task_id: str
    category: str
    template: str
    instruction: str
    params: dict[str, Any]
    answer: Answer
    distractors: list[Answer]

    def to_record(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS}


class TaskFileError(ValueError):
    """A task file that cannot be trusted: wrong shape, unknown category, malformed key."""


def task_from_record(record: object, where: str) -> CsappTask:
    """Check one decoded task record field by field and build the task, naming what is wrong."""
    if not isinstance(record, dict):
        raise TaskFileError(f"{where}: a task must be a JSON object")
    missing = [name for name in FIELDS if name not in record]
    extra = sorted(set(record) - set(FIELDS))
    if missing or extra:
        raise TaskFileError(f"{where}: missing fields {missing}, unexpected fields {extra}")
    for name in ("task_id", "category", "template", "instruction"):
        if not isinstance(record[name], str) or not record[name]:
            raise TaskFileError(f"{where}: {name!r} must be a non-empty string")
    if record["category"] not in CATEGORIES:
        raise TaskFileError(f"{where}: category {record['category']!r} is not one of {CATEGORIES}")
    if not isinstance(record["params"], dict):
        raise TaskFileError(f"{where}: 'params' must be a JSON object")
    if not is_json_primitive_list(record["answer"]):
        raise TaskFileError(f"{where}: 'answer' must be a non-empty list of bool/int/float/str")
    distractors = record["distractors"]
    if not isinstance(distractors, list) or not all(is_json_primitive_list(d) for d in distractors):
        raise TaskFileError(f"{where}: 'distractors' must be a list of answer lists")
    return CsappTask(**{name: record[name] for name in FIELDS})

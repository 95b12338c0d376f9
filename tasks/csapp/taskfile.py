"""The shipped task file: how it is written and how it is read back and checked.

One task per line keeps diffs of a rebuild readable; every float is stored by bit pattern so
-0.0, infinities and NaN payloads survive.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from gym_sysmath.exact import dumps_exact, loads_exact

from .task import CsappTask, TaskFileError, task_from_record

TASK_FILE = "tasks.json"
FORMAT = "csapp-tasks/1"
GENERATED_BY = "python -m gym_sysmath.tasks.csapp.build"
_FLOATS_NOTE = 'every float is written as {"f64": its 64-bit pattern}; read with gym_sysmath.exact.loads_exact'


def render_task_file(tasks: Sequence[CsappTask]) -> str:
    """The exact text of the task file for ``tasks``; ``--check`` compares against it byte for byte."""
    header = {"generated_by": GENERATED_BY, "format": FORMAT, "floats": _FLOATS_NOTE, "count": len(tasks)}
    lines = ["{"]
    lines += [f"  {json.dumps(key)}: {json.dumps(value)}," for key, value in header.items()]
    lines.append('  "tasks": [')
    lines += [f"    {dumps_exact(t.to_record())}{',' * (i < len(tasks) - 1)}" for i, t in enumerate(tasks)]
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def shipped_path() -> Path:
    """Where the task file of this installation lives (package data)."""
    return Path(str(resources.files("gym_sysmath.tasks.csapp").joinpath(TASK_FILE)))


def read_task_text(path: str | os.PathLike[str] | None = None) -> tuple[str, str]:
    """(text, where) of the shipped file or of ``path``."""
    if path is None:
        resource = resources.files("gym_sysmath.tasks.csapp").joinpath(TASK_FILE)
        return resource.read_text(encoding="utf-8"), f"shipped {TASK_FILE}"
    return Path(path).read_text(encoding="utf-8"), os.fspath(path)


def parse_task_file(text: str, where: str) -> tuple[CsappTask, ...]:
    """Decode and validate a task file, naming the first thing wrong with it."""
    try:
        document = loads_exact(text)
    except ValueError as err:  # json.JSONDecodeError is a ValueError, and so is a bad float tag
        raise TaskFileError(f"{where}: not a valid task file: {err}") from None
    if not isinstance(document, dict) or not isinstance(document.get("tasks"), list):
        raise TaskFileError(f"{where}: expected a JSON object with a 'tasks' list")
    if document.get("format") != FORMAT:
        raise TaskFileError(f"{where}: format {document.get('format')!r} is not {FORMAT!r}")
    if not document["tasks"]:
        raise TaskFileError(f"{where}: the task list is empty")
    tasks = tuple(task_from_record(r, f"{where}: task #{i}") for i, r in enumerate(document["tasks"]))
    seen: set[str] = set()
    for task in tasks:
        if task.task_id in seen:
            raise TaskFileError(f"{where}: duplicate task_id {task.task_id!r}")
        seen.add(task.task_id)
    if "count" in document and document["count"] != len(tasks):
        raise TaskFileError(f"{where}: header says {document['count']} tasks, the file holds {len(tasks)}")
    return tasks


def load_tasks(path: str | os.PathLike[str] | None = None) -> tuple[CsappTask, ...]:
    """The eval tasks: the shipped file by default, or a forked file at ``path``.

    Raises ``TaskFileError`` (a ``ValueError``) with the file and the task named when the file is
    malformed, and ``FileNotFoundError`` when ``path`` does not exist.
    """
    text, where = read_task_text(path)
    return parse_task_file(text, where)

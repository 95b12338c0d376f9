"""Versioned task sets: what a score was measured on.

The Gymnasium ids stay (``CsappExact-v0``); each family's *task set* (its tasks, answer keys,
hidden cases and grading rules) carries an integer version of its own, declared in the family's
task folder (``tasks/<family>/task_set.json``) with the behavioural digest recorded for it.
Its label is ``<family>@<version>`` (``csapp@1``). Every ``info``, every eval row and summary,
every exported dataset row and the server's ``/health`` name it, so two scores are comparable
when their labels (and hashes) are equal.

This module reads the declarations (cheap, no env is made); ``task_sets.digest`` measures the
behaviour and ``python -m gym_sysmath.task_sets --check`` proves each declaration current.
The rule for bumping a version is in ``docs/task-sets.md``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The file in a family's task folder that declares its task set (generated: ``--record``/``--bump``).
LOCK_FILE = "task_set.json"
#: Between a family's name and its version in a label: ``csapp@1``.
SEPARATOR = "@"
#: The label's version part for a family with no ``task_set.json`` (a plug-in family, or a new
#: one before its first ``--record``): its scores name no comparable task set.
UNVERSIONED = "unversioned"
#: A version as a label or pin writes it: ASCII digits in canonical form (``1``, never ``01`` or a full-width one).
_VERSION = re.compile(r"0|[1-9][0-9]*")


class TaskSetError(ValueError):
    """A task set that is not this install's was asked for (``task_set=`` pin, a dataset row)."""


@dataclass(frozen=True)
class Release:
    """One version of a family's task set, as its history records it."""

    version: int
    hash: str
    gym_sysmath: str  #: the package version that first shipped it
    after_commit: str  #: the commit it was recorded on (it ships in the next one)
    why: str  #: what changed from the previous version
    #: the hashes it had before, under an earlier digest format (``--record`` keeps them)
    earlier_hashes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TaskSet:
    """A family's installed task set: its version and recorded digest (``None``: unversioned)."""

    family: str
    version: int | None
    hash: str | None
    history: tuple[Release, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.family}{SEPARATOR}{UNVERSIONED if self.version is None else self.version}"

    def release(self, version: int) -> Release | None:
        return next((entry for entry in self.history if entry.version == version), None)


def task_folder(family: str) -> Path | None:
    """The family's task package folder (``gym_sysmath.tasks.<family>``), or ``None`` (a plug-in)."""
    try:
        spec = importlib.util.find_spec(f"gym_sysmath.tasks.{family}")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def lock_path(family: str) -> Path | None:
    """Where ``family``'s declaration lives (it may not exist yet), or ``None`` for a family
    with no task folder in ``gym_sysmath.tasks``."""
    folder = task_folder(family)
    return None if folder is None else folder / LOCK_FILE


def read_lock(family: str) -> dict[str, Any] | None:
    """``family``'s ``task_set.json`` as JSON, or ``None`` when it has none."""
    path = lock_path(family)
    if path is None or not path.is_file():
        return None
    return dict(json.loads(path.read_text(encoding="utf-8")))


@functools.cache
def installed(family: str) -> TaskSet:
    """The task set this install declares for ``family`` (read once per process)."""
    lock = read_lock(family)
    if lock is None:
        return TaskSet(family, None, None)
    history = tuple(Release(int(entry["version"]), str(entry["hash"]), str(entry["gym_sysmath"]),
                            str(entry["after_commit"]), str(entry["why"]),
                            tuple(str(earlier["hash"]) for earlier in entry.get("earlier_hashes", ())))
                    for entry in lock.get("history", ()))
    return TaskSet(family, int(lock["version"]), str(lock["hash"]), history)


def parse_label(label: str) -> tuple[str, int | None]:
    """``"csapp@1"`` -> ``("csapp", 1)``; ``"csapp@unversioned"`` -> ``("csapp", None)``."""
    family, separator, version = label.partition(SEPARATOR)
    if not separator or not family or not (_VERSION.fullmatch(version) or version == UNVERSIONED):
        raise TaskSetError(f"{label!r} is not a task set label: one is <family>{SEPARATOR}<version>, e.g. csapp@1 "
                           f"(a <family>-<12 hex> fingerprint is from before task sets were versioned)")
    return family, None if version == UNVERSIONED else int(version)


def how_to_get(family: str, version: int) -> str:
    """Where task set ``family@version`` can be had, for a refusal: the release that shipped it,
    or (a version this install's history does not know) a newer gym-sysmath."""
    current = installed(family)
    release = current.release(version)
    if release is not None:
        return (f"{family}{SEPARATOR}{version} shipped with gym-sysmath {release.gym_sysmath} (recorded on commit "
                f"{release.after_commit}): install that release, or check out the commit after it")
    if version < 1:
        return (f"version {version} stands for the task sets from before versions were recorded, which changed "
                f"under one id, so no install can be pinned to one (docs/task-sets.md)")
    if current.version is not None and version < current.version:
        return f"this install's history of {family} has no version {version}"
    return "no version of gym-sysmath this install knows of has it: upgrade (pip install -U gym-sysmath)"


def require(family: str, wanted: str | int) -> TaskSet:
    """This install's task set of ``family`` when it is ``wanted`` (a label like ``"csapp@1"`` or
    a version number), else a ``TaskSetError`` naming the installed one and where ``wanted`` is."""
    current = installed(family)
    if isinstance(wanted, bool) or not isinstance(wanted, (str, int)):
        raise TaskSetError(f"task_set is a label like {current.label!r} or a version number, got {wanted!r}")
    version: int | None
    if isinstance(wanted, int) or _VERSION.fullmatch(wanted):
        asked_family, version = family, int(wanted)
    else:
        asked_family, version = parse_label(wanted)
    if asked_family != family:
        raise TaskSetError(f"task_set {wanted!r} is a task set of {asked_family}, not of {family} "
                           f"(this install has {current.label})")
    if current.version is None:
        raise TaskSetError(f"{family} declares no task set version (it has no {LOCK_FILE}), so task_set={wanted!r} "
                           f"cannot be checked; drop task_set")
    if version != current.version:
        where = "" if version is None else f"; {how_to_get(family, version)}"
        asked = f"{family}{SEPARATOR}{UNVERSIONED if version is None else version}"
        raise TaskSetError(f"task set {asked} is not installed: this install has {current.label} (hash "
                           f"{current.hash}){where}")
    return current


def from_file(family: str, text: str, shipped: str) -> TaskSet:
    """The task set an env serves when it loads its tasks from a file holding ``text`` instead
    of the family's shipped file (``shipped``, its text): the installed one when the two are the
    same, else ``<family>@unversioned`` with ``file-`` and the file's sha256 (11 hex) as the hash,
    so scores on a forked file never pass for the installed task set's."""
    if text == shipped:
        return installed(family)
    return TaskSet(family, None, "file-" + hashlib.sha256(text.encode()).hexdigest()[:11])


def require_served(served: TaskSet, wanted: str | int) -> None:
    """Refuse a ``task_set=`` pin on an env that serves ``served`` rather than the installed
    task set (a forked task file): the pin would name tasks the env does not serve."""
    current = installed(served.family)
    if served != current:
        raise TaskSetError(f"task_set={wanted!r} pins {current.label}, but this env serves tasks from a file that "
                           f"is not the shipped task set ({served.label}, {served.hash}); drop task_set, or the "
                           f"forked file (tasks_path) to serve {current.label}")

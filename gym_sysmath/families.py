"""The family registry: one row per family, the one place that says which Gymnasium ids a family
has, which env class builds them, what ``gym-sysmath verify <family>`` runs and which task
metadata the eval summary breaks accuracy down by. ``import gym_sysmath`` registers the built-in
rows with Gymnasium; the CLI (``list``, ``export``, ``eval --all``, ``verify``), the eval summary
and the README's id table are read from here. ``docs/adding-a-family.md`` shows a new row.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from gym_sysmath.task_sets import installed


@dataclass(frozen=True)
class EnvId:
    """One Gymnasium id of a family and the ``gym.make`` kwargs it fixes (an alias is a subset
    of the family's primary id, e.g. ``CompGeomCpp-v0`` is ``CompGeom-v0`` with ``languages=["cpp"]``)."""

    env_id: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Family:
    """A family's registry row. Entry points are ``"module:attribute"`` strings, so nothing is
    imported until used and a Gymnasium spec pickles and has a JSON form. Every id also gets the
    batched vector env (``gym_sysmath.vector_ids:<id>``, i.e. ``vector.make_vector``): a row names none."""

    name: str  #: the family name: ``env.unwrapped.family``, ``tasks/<name>/``, ``gym-sysmath verify <name>``
    entry_point: str  #: the env class
    ids: tuple[EnvId, ...]  #: the first is the primary id (the whole family); the rest are aliases
    #: ``"module:function"`` that ``gym-sysmath verify <name>`` calls with its argparse namespace, -> exit
    #: code; by default the task folder's ``build.py --verify`` (``gym_sysmath.tasks.<name>.build``)
    verifier: str = "gym_sysmath.verification:build_verify"
    breakdown_keys: tuple[str, ...] = ()  #: task metadata keys the eval summary groups accuracy by
    #: breakdown keys whose values have an order of their own (difficulty: easy to hard), each to the
    #: ``"module:attribute"`` tuple that lists them in it; the summary lists other values alphabetically
    breakdown_order: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.ids:
            raise ValueError(f"family {self.name!r} declares no ids")

    @property
    def primary_id(self) -> str:
        return self.ids[0].env_id


_BUILT_IN: tuple[Family, ...] = (
    Family("csapp", "gym_sysmath.envs.csapp:CsappExactEnv", (EnvId("CsappExact-v0"),),
           breakdown_keys=("category", "difficulty"),
           breakdown_order={"difficulty": "gym_sysmath.tasks.csapp.difficulty:LEVELS"}),
    Family("linalg", "gym_sysmath.envs.linalg:LinearAlgebraEnv", (EnvId("LinearAlgebra-v0"),),
           breakdown_keys=("difficulty", "topic"),
           breakdown_order={"difficulty": "gym_sysmath.tasks.linalg.problem:LEVELS"}),
    Family("compgeom", "gym_sysmath.envs.compgeom:CompGeomEnv",
           (EnvId("CompGeom-v0"), EnvId("CompGeomCpp-v0", {"languages": ["cpp"]}),
            EnvId("CompGeomRust-v0", {"languages": ["rust"]}), EnvId("CompGeomPython-v0", {"languages": ["python"]})),
           verifier="gym_sysmath.verification:compgeom", breakdown_keys=("language",)),
)

_FAMILIES: dict[str, Family] = {family.name: family for family in _BUILT_IN}


def families() -> tuple[Family, ...]:
    """Every registered family, built-in ones first, in registration order."""
    return tuple(_FAMILIES.values())


def family(name: str) -> Family:
    try:
        return _FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown family {name!r}; registered: {', '.join(_FAMILIES)}") from None


def family_of(env_id: str) -> Family | None:
    """The family that declares ``env_id`` (primary or alias), or ``None``."""
    for candidate in _FAMILIES.values():
        if any(entry.env_id == env_id for entry in candidate.ids):
            return candidate
    return None


def all_ids() -> tuple[str, ...]:
    """Every id, aliases included, family by family."""
    return tuple(entry.env_id for candidate in _FAMILIES.values() for entry in candidate.ids)


def primary_ids() -> tuple[str, ...]:
    """One id per family: what ``eval --all`` runs, so an alias's tasks are not counted twice."""
    return tuple(candidate.primary_id for candidate in _FAMILIES.values())


def breakdown_keys(env_id: str) -> tuple[str, ...]:
    """The metadata keys the summary of ``env_id`` breaks down by; an id no family declares
    (a responses file's own) gets every family's keys."""
    owner = family_of(env_id)
    return every_breakdown_key() if owner is None else owner.breakdown_keys


def every_breakdown_key() -> tuple[str, ...]:
    return tuple(dict.fromkeys(key for candidate in _FAMILIES.values() for key in candidate.breakdown_keys))


def breakdown_order(env_id: str, key: str) -> tuple[str, ...]:
    """The values of ``key`` in the order ``env_id``'s family declares for them, or ``()`` (none:
    alphabetical); an id no family declares gets the first order any family declares for ``key``."""
    owner = family_of(env_id)
    for candidate in (owner,) if owner is not None else tuple(_FAMILIES.values()):
        if key in candidate.breakdown_order:
            module, _, attribute = candidate.breakdown_order[key].partition(":")
            return tuple(getattr(importlib.import_module(module), attribute))
    return ()


def task_set(name: str) -> str:
    """The label of family ``name``'s installed task set, ``<name>@<version>`` (``csapp@1``):
    what an exported dataset row, ``/health`` and every ``info`` name, so a row made on another
    task set is refused, not mis-graded (``TaskRef.check_task_set``). ``gym_sysmath.task_sets``
    has its version, hash and history."""
    return installed(name).label


def _register_with_gymnasium(row: Family) -> None:
    for entry in row.ids:
        if entry.env_id not in gym.registry:
            gym.register(id=entry.env_id, entry_point=row.entry_point, kwargs=dict(entry.kwargs),
                         vector_entry_point=f"gym_sysmath.vector_ids:{entry.env_id}", disable_env_checker=False)


def register_family(row: Family) -> None:
    """Add a family (its ids go to Gymnasium too). A name or id already taken is refused, so a
    plug-in cannot silently replace a built-in family."""
    if row.name in _FAMILIES:
        raise ValueError(f"family {row.name!r} is already registered")
    taken = sorted({entry.env_id for entry in row.ids} & set(all_ids()))
    if taken:
        raise ValueError(f"family {row.name!r}: id(s) {taken} already belong to another family")
    _FAMILIES[row.name] = row
    _register_with_gymnasium(row)


def unregister_family(name: str) -> None:
    """Remove a family added by :func:`register_family` and its Gymnasium ids (tests, notebooks)."""
    row = family(name)
    if row in _BUILT_IN:
        raise ValueError(f"family {name!r} is built in and cannot be unregistered")
    del _FAMILIES[name]
    for entry in row.ids:
        gym.registry.pop(entry.env_id, None)


def register_built_in() -> None:
    """Register the built-in families' ids with Gymnasium (idempotent)."""
    for row in _BUILT_IN:
        _register_with_gymnasium(row)

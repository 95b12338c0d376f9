"""Gymnasium ids of every family. ``import gym_sysmath`` registers them (Gymnasium 1.x has no
plugin discovery), and ``gym.make("gym_sysmath:CsappExact-v0")`` works too."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym


@dataclass(frozen=True)
class EnvEntry:
    env_id: str
    entry_point: str
    vector_entry_point: str  #: a "module:function" string, so the spec pickles and has a JSON form
    kwargs: dict[str, Any] = field(default_factory=dict)


_COMPGEOM, _COMPGEOM_VECTOR = "gym_sysmath.envs.compgeom:CompGeomEnv", "gym_sysmath.vector:compgeom_vector"

ENTRIES: tuple[EnvEntry, ...] = (
    EnvEntry("CsappExact-v0", "gym_sysmath.envs.csapp:CsappExactEnv", "gym_sysmath.vector:csapp_vector"),
    EnvEntry("LinearAlgebra-v0", "gym_sysmath.envs.linalg:LinearAlgebraEnv", "gym_sysmath.vector:linalg_vector"),
    EnvEntry("CompGeom-v0", _COMPGEOM, _COMPGEOM_VECTOR),
    EnvEntry("CompGeomCpp-v0", _COMPGEOM, _COMPGEOM_VECTOR, {"languages": ["cpp"]}),
    EnvEntry("CompGeomRust-v0", _COMPGEOM, _COMPGEOM_VECTOR, {"languages": ["rust"]}),
    EnvEntry("CompGeomPython-v0", _COMPGEOM, _COMPGEOM_VECTOR, {"languages": ["python"]}),
)


def env_ids() -> tuple[str, ...]:
    return tuple(entry.env_id for entry in ENTRIES)


def register_all() -> None:
    for entry in ENTRIES:
        if entry.env_id not in gym.registry:
            gym.register(id=entry.env_id, entry_point=entry.entry_point, kwargs=dict(entry.kwargs),
                         vector_entry_point=entry.vector_entry_point, disable_env_checker=False)

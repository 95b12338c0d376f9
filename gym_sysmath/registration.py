"""Gymnasium ids of every family. ``import gym_sysmath`` registers them (Gymnasium 1.x has no
plugin discovery), and ``gym.make("gym_sysmath:CsappExact-v0")`` works too."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from gym_sysmath.vector import vector_entry_point


@dataclass(frozen=True)
class EnvEntry:
    env_id: str
    entry_point: str
    kwargs: dict[str, Any] = field(default_factory=dict)


ENTRIES: tuple[EnvEntry, ...] = (
    EnvEntry("CsappExact-v0", "gym_sysmath.envs.csapp:CsappExactEnv"),
    EnvEntry("LinearAlgebra-v0", "gym_sysmath.envs.linalg:LinearAlgebraEnv"),
    EnvEntry("CompGeom-v0", "gym_sysmath.envs.compgeom:CompGeomEnv"),
    EnvEntry("CompGeomCpp-v0", "gym_sysmath.envs.compgeom:CompGeomEnv", {"languages": ["cpp"]}),
    EnvEntry("CompGeomRust-v0", "gym_sysmath.envs.compgeom:CompGeomEnv", {"languages": ["rust"]}),
    EnvEntry("CompGeomPython-v0", "gym_sysmath.envs.compgeom:CompGeomEnv", {"languages": ["python"]}),
)


def env_ids() -> tuple[str, ...]:
    return tuple(entry.env_id for entry in ENTRIES)


def register_all() -> None:
    for entry in ENTRIES:
        if entry.env_id not in gym.registry:
            gym.register(id=entry.env_id, entry_point=entry.entry_point, kwargs=dict(entry.kwargs),
                         vector_entry_point=vector_entry_point(entry.entry_point), disable_env_checker=False)

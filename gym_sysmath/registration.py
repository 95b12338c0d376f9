"""Gymnasium ids of every family. ``import gym_sysmath`` registers them (Gymnasium 1.x has no
plugin discovery), and ``gym.make("gym_sysmath:CsappExact-v0")`` works too. The ids themselves
are declared once, in the family registry (``gym_sysmath.families``)."""

from __future__ import annotations

from gym_sysmath.families import all_ids, register_built_in


def env_ids() -> tuple[str, ...]:
    """Every registered id, aliases included (``families.primary_ids()`` has one per family)."""
    return all_ids()


def register_all() -> None:
    register_built_in()

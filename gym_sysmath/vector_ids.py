"""The ``vector_entry_point`` of every registered id: ``gym_sysmath.vector_ids:<env id>`` is
``vector.make_vector`` for that id.

Gymnasium calls a vector entry point with ``num_envs`` and kwargs only, never the id, and loads a
string one with ``getattr``; a string (not a closure) keeps each spec picklable and
JSON-serialisable. The lookup lives in a module of its own so that ``gym_sysmath.vector`` keeps
only its real names (a module ``__getattr__`` there would let a misspelled import type-check)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def __getattr__(name: str) -> Callable[..., Any]:
    from gym_sysmath.families import family_of
    from gym_sysmath.vector import make_vector

    if family_of(name) is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r} (nor a registered gym-sysmath id)")
    return functools.partial(make_vector, name)

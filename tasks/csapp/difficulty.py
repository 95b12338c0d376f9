"""Difficulty levels (easy, medium, hard) for every template, from the size of its parameters.

A template's level of an instance is where its *measure* (by default ``param_size``: how many
bits, digits and list elements the parameters hold; a template may state its own, such as the
number of ``fork`` calls) falls among the measures of a fixed calibration sample of that
template's own sampler, split into thirds by mid-rank (a measure many draws share goes to one
level as a whole). The split is the same on every machine (the calibration generator is seeded
by the template's name), and an eval task's level is computed the same way as a train draw's.
Where ties would leave a level empty, the split goes by rank among the distinct measures
instead, so every template keeps three levels; a level may then hold few of the draws.

A template whose measure takes fewer than three values has fewer levels; ``levels_of`` says
which, and the train split draws a requested level only from templates that have it.

Below easy sits ``starter``: the single operations of ``starter.py``, whose templates exist for
that level alone (``Template.level``). It is opt-in: only a ``difficulty="starter"`` draw asks
for it, and the standard levels' thirds are the same as before it existed.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
from typing import TYPE_CHECKING

import numpy as np

from gym_sysmath.filters import known_name

from .catalog import TEMPLATES
from .size import param_size

if TYPE_CHECKING:
    from .task import CsappTask
    from .template import Params, Template

#: The standard levels, thirds of each template's calibration: what an env made without
#: ``difficulty`` draws from.
STANDARD_LEVELS: tuple[str, ...] = ("easy", "medium", "hard")
#: The whole ladder, easiest first (a curriculum climbs it).
LEVELS: tuple[str, ...] = ("starter", *STANDARD_LEVELS)
CALIBRATION_DRAWS = 240


def check_level(level: object) -> str:
    """``level`` itself when it is one of ``LEVELS``; otherwise a ``ValueError`` naming them
    (``filters.known_name``: the env's own refusal of an unknown ``difficulty``)."""
    return known_name("difficulty", level, LEVELS)


def measure(template: Template, params: Params) -> float:
    """The template's own measure of an instance, or ``param_size`` of its parameters."""
    return float(template.measure(params)) if template.measure is not None else param_size(params)


def _calibration_rng(name: str) -> np.random.Generator:
    seed = int.from_bytes(hashlib.sha256(f"csapp-difficulty/{name}".encode()).digest()[:8], "little")
    return np.random.default_rng(seed)


@functools.cache
def _calibration(template: Template) -> tuple[tuple[float, ...], bool]:
    """The measures of ``CALIBRATION_DRAWS`` draws of the template's sampler, sorted, and
    whether levels go by rank among the distinct values (see ``level_of``)."""
    rng = _calibration_rng(template.name)
    values = tuple(sorted(measure(template, template.sample(rng)) for _ in range(CALIBRATION_DRAWS)))
    by_midrank = {_midrank_level(values, v) for v in values}
    return values, len(by_midrank) < len(STANDARD_LEVELS) <= len(set(values))


def _midrank_level(values: tuple[float, ...], m: float) -> int:
    share = (bisect.bisect_left(values, m) + bisect.bisect_right(values, m)) / (2 * len(values))
    return min(len(STANDARD_LEVELS) - 1, int(share * len(STANDARD_LEVELS)))


def _level_index(template: Template, m: float) -> int:
    values, by_distinct = _calibration(template)
    if not by_distinct:
        return _midrank_level(values, m)
    distinct = sorted(set(values))
    rank = min(bisect.bisect_left(distinct, m), len(distinct) - 1)
    return min(len(STANDARD_LEVELS) - 1, rank * len(STANDARD_LEVELS) // len(distinct))


def level_of(template: Template, params: Params) -> str:
    """The level of one instance: the third of the calibration draws its measure falls in (by
    mid-rank, so ties share a level), or, when ties would leave a level empty, the third of the
    distinct calibration measures. A template made for one level (``Template.level``) is there."""
    if template.level is not None:
        return template.level
    return STANDARD_LEVELS[_level_index(template, measure(template, params))]


def levels_of(template: Template) -> tuple[str, ...]:
    """The levels this template's draws reach (all three standard ones unless its measure barely
    varies; its own one for a template made for one level)."""
    if template.level is not None:
        return (template.level,)
    values, _ = _calibration(template)
    return tuple(STANDARD_LEVELS[i] for i in sorted({_level_index(template, v) for v in set(values)}))


def task_level(task: CsappTask) -> str:
    """The level of a task (eval or train) from its template and stored parameters."""
    return level_of(TEMPLATES[task.template], task.params)

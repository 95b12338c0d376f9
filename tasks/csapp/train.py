"""The training split: procedural variants of every template, keyed at draw time.

Values come only from the caller's ``numpy.random.Generator``, so the same generator state gives
the same task and nothing touches a global RNG. A draw whose instance does not show its trap (or
whose wrong reading happens to hit the key) is rejected and redrawn from the same generator.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

from gym_sysmath.exact import dumps_exact

from .catalog import EVAL_SET, TEMPLATES
from .difficulty import check_level, level_of, levels_of
from .task import CsappTask, check_categories
from .template import BuildError, Params, Template, instantiate

MAX_DRAWS = 200
#: The eval tasks' parameters, per template: a train draw that lands on one is redrawn, so the
#: train split never serves an eval question (small templates, such as two loops of increments,
#: could otherwise hit one).
_EVAL_PARAMS = frozenset((name, dumps_exact(params, sort_keys=True)) for _, name, params in EVAL_SET)
MAX_LEVEL_MISSES = 5000


def train_task_id(template: Template, params: Params) -> str:
    digest = hashlib.sha256(dumps_exact(params, sort_keys=True).encode()).hexdigest()[:12]
    return f"train/{template.name}/{digest}"


def _templates_in(categories: Iterable[str] | None) -> list[Template]:
    wanted = check_categories(categories)
    return [t for t in TEMPLATES.values() if wanted is None or t.category in wanted]


def sample_task(rng: np.random.Generator, categories: tuple[str, ...] | None = None,
                difficulty: str | None = None) -> CsappTask:
    """Draw a template (uniformly among those in ``categories``) and fresh parameters, and key it.

    With ``difficulty`` (starter, easy, medium, hard) only templates that reach that level are drawn,
    and parameters are redrawn until the instance is at that level (``difficulty.level_of``).
    The key and distractors are executed now and the template's trap is re-asserted on them.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, not {type(rng).__name__}")
    pool = _templates_in(categories)
    if difficulty is not None:
        check_level(difficulty)
        pool = [t for t in pool if difficulty in levels_of(t)]
        if not pool:
            having = sorted({t.category for t in TEMPLATES.values() if difficulty in levels_of(t)})
            raise ValueError(f"no template in the categories {list(categories or ())} has a {difficulty!r} level; "
                             f"the categories that have it: {', '.join(having)}"
                             + (" (a Curriculum skips it with start='easy')" if difficulty == "starter" else ""))
    else:  # the standard levels: a template made for one level (the starter ones) is drawn only when asked for
        pool = [t for t in pool if t.level is None]
    template = pool[int(rng.integers(len(pool)))]
    return sample_from(rng, template, difficulty)


def sample_from(rng: np.random.Generator, template: Template, difficulty: str | None = None) -> CsappTask:
    """A train instance of ``template`` itself, drawn as ``sample_task`` draws one once it has
    picked the template (redrawn while the trap fails or the draw is an eval task's parameters)."""
    misses = 0
    for _ in range(MAX_DRAWS):
        params = template.sample(rng)
        while difficulty is not None and level_of(template, params) != difficulty and misses < MAX_LEVEL_MISSES:
            misses += 1  # a rare level can take a few dozen draws, a sampler call each
            params = template.sample(rng)
        if difficulty is not None and level_of(template, params) != difficulty:
            break
        if (template.name, dumps_exact(params, sort_keys=True)) in _EVAL_PARAMS:
            continue
        try:
            return instantiate(template, params, train_task_id(template, params))
        except BuildError:
            continue
    raise RuntimeError(f"{template.name}: {MAX_DRAWS} draws in a row failed to show the trap"
                       + (f" at level {difficulty!r}" if difficulty else ""))

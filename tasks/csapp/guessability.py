"""How well a constant answers each field of the train split: a policy that learns a constant
should not score on it.

For every template and every answer field (by its position in the answer list, 1-based as the
prompt numbers it; a template whose number of fields varies is counted, per position, over the
instances that have that position), ``audit`` draws train instances of that template the way
the train split draws them (``train.sample_from``: the template's sampler, redrawn while the
trap fails or the draw is an eval task's parameters) and measures the share of the draws that
the field's most common value answers. A field whose best constant is right more than
``THRESHOLD`` of the time is an offender: its question is a guess, not a computation.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from gym_sysmath.exact import dumps_exact, loads_exact

from .catalog import TEMPLATES
from .template import Template
from .train import sample_from

THRESHOLD = 0.8
DRAWS = 1000

_HEX = re.compile(r"0x[0-9a-f]+")


@dataclass(frozen=True)
class FieldGuess:
    """The best constant answer to one field of one template, over ``draws`` train instances."""

    template: str
    position: int  # 1-based, as the prompt numbers the fields
    field: str  # the field's description (its hex numbers elided), the most common one at this position
    best: Any  # the most common value
    share: float  # the fraction of the draws that ``best`` answers
    draws: int  # the instances that have this position

    @property
    def offends(self) -> bool:
        return self.share > THRESHOLD


def audit_template(template: Template, draws: int = DRAWS, seed: int = 0) -> list[FieldGuess]:
    """The best constant of each field of ``template`` over ``draws`` train instances."""
    rng = np.random.default_rng(seed)
    values: dict[int, Counter[str]] = {}
    names: dict[int, Counter[str]] = {}
    for _ in range(draws):
        task = sample_from(rng, template)
        fields = template.fields(task.params)
        for i, (value, field) in enumerate(zip(task.answer, fields, strict=True), 1):
            # the exact text tells True from 1 and -0.0 from 0.0, as the grader does
            values.setdefault(i, Counter())[dumps_exact(value)] += 1
            names.setdefault(i, Counter())[_HEX.sub("...", field.what)] += 1
    out = []
    for i in sorted(values):
        best, count = values[i].most_common(1)[0]
        total = sum(values[i].values())
        described = names[i].most_common(1)[0][0]
        if len(names[i]) > 1:  # a position a varying layout fills with different fields
            described += f" (or {len(names[i]) - 1} other field{'s' * (len(names[i]) > 2)})"
        out.append(FieldGuess(template.name, i, described, loads_exact(best), count / total, total))
    return out


def _timed(name: str, draws: int, seed: int) -> tuple[list[FieldGuess], float, str | None]:
    start = time.perf_counter()
    try:
        rows, error = audit_template(TEMPLATES[name], draws, seed), None
    except Exception as err:
        rows, error = [], f"{type(err).__name__}: {err}"
    return rows, time.perf_counter() - start, error


def audit(draws: int = DRAWS, seed: int = 0, templates: Iterable[str] | None = None, *, jobs: int = 1,
          timings: dict[str, float] | None = None, errors: dict[str, str] | None = None) -> list[FieldGuess]:
    """``audit_template`` for every template (or those named), in registry order, over ``jobs``
    processes (each template's draws come from its own generator, so the rows do not depend on
    ``jobs``). With ``timings``, each template's seconds are recorded there. A template whose
    draws raise stops the audit, unless ``errors`` is given: then the error is recorded there and
    the audit goes on without that template's rows."""
    names = list(TEMPLATES if templates is None else templates)
    if jobs > 1:
        # fork where there is one: the workers need the registry, not a re-run of ``__main__``
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context(method)) as pool:
            results = list(pool.map(_timed, names, [draws] * len(names), [seed] * len(names)))
    else:
        results = [_timed(name, draws, seed) for name in names]
    out: list[FieldGuess] = []
    for name, (rows, seconds, error) in zip(names, results, strict=True):
        if error is not None:
            if errors is None:
                raise RuntimeError(f"{name}: {error}")
            errors[name] = error
        if timings is not None:
            timings[name] = seconds
        out += rows
    return out


def offenders(guesses: Iterable[FieldGuess]) -> list[FieldGuess]:
    return [g for g in guesses if g.offends]


def lines(guesses: Iterable[FieldGuess], errors: dict[str, str] | None = None) -> list[str]:
    """The audit as text: one row per field (offenders marked), a line per template whose draws
    failed (``errors``, as ``audit`` fills it), then a summary line."""
    guesses = list(guesses)
    width = max((len(g.template) for g in guesses), default=8)
    out = [f"{'template':<{width}}  pos  share  draws  best constant  field"]
    for g in guesses:
        mark = "  OFFENDER" if g.offends else ""
        best = dumps_exact(g.best)
        out.append(f"{g.template:<{width}}  {g.position:>3}  {g.share:5.1%}  {g.draws:>5}  "
                   f"{best[:13]:<13}  {g.field}{mark}")
    out += [f"ERROR {name}: its draws failed: {why}" for name, why in (errors or {}).items()]
    bad = offenders(guesses)
    out.append(f"guessability: {len(bad)} of {len(guesses)} fields answered by a constant more than "
               f"{THRESHOLD:.0%} of the time" + (": " + ", ".join(f"{g.template}#{g.position}" for g in bad)
                                                  if bad else ""))
    return out


def main(argv: list[str]) -> int:
    """``python -m gym_sysmath.tasks.csapp.guessability [DRAWS]``: the table, errors and timings;
    exit status 1 when a field offends or a template's draws fail."""
    took: dict[str, float] = {}
    failed: dict[str, str] = {}
    result = audit(int(argv[0]) if argv else DRAWS, jobs=min(4, os.cpu_count() or 1), timings=took, errors=failed)
    print("\n".join(lines(result, failed)))
    slowest = sorted(took.items(), key=lambda kv: -kv[1])
    print("seconds per template, slowest first: " + ", ".join(f"{name} {s:.1f}" for name, s in slowest))
    return int(bool(offenders(result) or failed))


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))

"""The behavioural digest of a family's task set: what a model is shown and how its replies are
graded, measured through the env's own API, so that moving or renaming code leaves it alone and
changing a task, a key, a hidden case or a grading rule moves it. It runs no code (no Docker)
and takes seconds.

Five parts, each a sha256 of canonical JSON lines, on the family's primary id with default
arguments:

- ``eval_tasks``: every eval task's id, prompt and metadata (what a model sees), levels served
  only when asked for (``difficulty="starter"``) included;
- ``eval_keys``: every eval task's ``grading_key()`` (its answer key; a family graded on hidden
  cases adds them, its public cases, its harness and its run limits) and ``reference_action()``;
- ``train_draws``: ``TRAIN_DRAWS`` unfiltered train draws, then draws for every combination of
  filter names (``DRAWS_PER_COMBINATION``), so that a generator only one category, topic,
  primitive or level reaches is measured; again with each name a filter serves only when asked
  for;
- ``verdicts``: the verdict and reward of every eval task on replies that hold no code: a fixed
  corpus, and probes made from the task's reference answer that sit on either side of each
  grading rule (``probes.reply_probes``), so a change to how answers are read or compared flips
  one of them. A family whose answer is its code (CompGeom) is graded by running it: the corpus
  covers what needs no sandbox;
- ``rules``: a family's probes that no reply makes (``probes.RULES``): linalg's tolerance and
  echo rule on problems widened to show them, CompGeom's host-side ``compare`` on perturbed
  expected outputs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import gymnasium as gym

from gym_sysmath.env import INFO_KEYS, SysmathEnv, core_env
from gym_sysmath.families import Family
from gym_sysmath.sandbox.pool import NO_SANDBOX
from gym_sysmath.task_sets.probes import RULES, reply_probes

#: Bump when what the digest measures changes (a part, the corpus or probes, the draws): every
#: family's hash is then re-recorded (``--record``), with no version bumped. 2: probes, rules,
#: draws per filter combination, CompGeom's public cases and limits.
DIGEST_FORMAT = 2
#: Train draws with no filter (seeds 0, 1, ...); then one draw for each combination of filter
#: names (every category x level, topic x level, primitive x language: each name is drawn once
#: per name of the other filter), so a generator only one of them reaches is measured too.
TRAIN_DRAWS = 4
#: Draws per filter combination where a family's draws are cheap enough for more than one (a
#: few ms each, against about 0.3 s for a CompGeom draw, which computes its hidden cases):
#: enough that every template of a combination is drawn (csapp's cache category has six).
DRAWS_PER_COMBINATION = {"csapp": 12, "linalg": 4}
PARTS = ("eval_tasks", "eval_keys", "train_draws", "verdicts", "rules")
#: Replies every task is graded on; none holds code.
FIXED_REPLIES = ("", "I cannot work this out.", "ANSWER: 0", "ANSWER: 1", "ANSWER: -1", "ANSWER: 0x0",
                 "ANSWER: [0, 0]", "ANSWER: yes", "ANSWER:")


class DigestError(RuntimeError):
    """The digest could not be measured (a reply needed a sandbox, a task failed to build)."""


@dataclass(frozen=True)
class Digest:
    """A family's measured task set: one hash per part and the hash over them."""

    family: str
    parts: Mapping[str, str]

    @property
    def hash(self) -> str:
        combined = hashlib.sha256(f"format {DIGEST_FORMAT}".encode())
        for name in PARTS:
            combined.update(f"\0{name}={self.parts[name]}".encode())
        return combined.hexdigest()[:16]


def canonical(value: Any) -> Any:
    """``value`` as JSON that is the same in every process: mappings by sorted key, sets sorted,
    dataclasses as their fields, exact numbers as text, arrays as lists."""
    if isinstance(value, Mapping):
        return {str(key): canonical(item) for key, item in sorted(value.items(), key=lambda pair: str(pair[0]))}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return canonical({field.name: getattr(value, field.name) for field in dataclasses.fields(value)})
    if isinstance(value, (list, tuple)):
        return [canonical(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((canonical(item) for item in value), key=repr)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, float):
        return repr(value)  # every bit of it
    if isinstance(value, Fraction):
        return str(value)
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return canonical(value.tolist())
    return repr(value)


class _Part:
    def __init__(self) -> None:
        self._sha = hashlib.sha256()

    def add(self, *values: Any) -> None:
        self._sha.update(json.dumps(canonical(values), sort_keys=True, ensure_ascii=False).encode() + b"\n")

    def hex(self) -> str:
        return self._sha.hexdigest()[:16]


def _metadata(info: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in info.items() if key not in INFO_KEYS}


def _replies(reference: str, prompt: str) -> Iterator[str]:
    """The fixed corpus, then the probes made from the reference answer (``probes.reply_probes``)."""
    seen: set[str] = set()
    for reply in (*FIXED_REPLIES, *reply_probes(reference, prompt)):
        if reply not in seen:
            seen.add(reply)
            yield reply


def _graded(env: gym.Env, core: SysmathEnv, task_id: str, reply: str) -> tuple[Any, ...]:
    env.reset(seed=0, options={"task_id": task_id})
    try:
        _, reward, terminated, truncated, info = env.step(reply)
    except Exception as exc:
        raise DigestError(f"{core.family}: grading {reply[:40]!r} on {task_id} raised {type(exc).__name__}: {exc} "
                          f"(the digest runs no code: a reply it grades must need no sandbox)") from exc
    if info.get("scoring_error"):
        raise DigestError(f"{core.family}: grading {reply[:40]!r} on {task_id} was a scoring error: "
                          f"{info['scoring_error']}")
    return reply, info.get("verdict"), float(reward), bool(terminated), bool(truncated)


def _asked_for(core: SysmathEnv) -> list[dict[str, Any]]:
    """The ``gym.make`` filters to draw train tasks under: none, then each name a filter serves
    only when asked for (a name outside its ``unset``, e.g. ``difficulty="starter"``)."""
    configurations: list[dict[str, Any]] = [{}]
    for entry in core.filters:
        for name in entry.choices:
            if entry.unset is not None and name not in entry.unset:
                configurations.append({entry.argument: [name] if entry.many else name})
    return configurations


def _filter_combinations(core: SysmathEnv) -> list[dict[str, Any]]:
    """Every combination of one name per filter that ``core`` serves, as reset options."""
    served = []
    for entry in core.filters:
        names = core.applied_filters.get(entry.argument) or entry.choices
        served.append([(entry.argument, [name] if entry.many else name) for name in names])
    return [dict(combination) for combination in itertools.product(*served)]


def measure(row: Family, *, train_draws: int = TRAIN_DRAWS) -> Digest:
    """The digest of ``row``'s installed task set (its primary id, default arguments)."""
    parts = {name: _Part() for name in PARTS}
    env = gym.make(row.primary_id, sandbox=NO_SANDBOX)
    try:
        core = core_env(env)
        for task_id in core._eval_ids():  # every eval task the family ships, opt-in levels included
            prompt, info = env.reset(seed=0, options={"task_id": task_id})
            parts["eval_tasks"].add(task_id, prompt, _metadata(info))
            reference = core.reference_action()
            parts["eval_keys"].add(task_id, core.grading_key(), reference)
            for reply in _replies(reference, prompt):
                parts["verdicts"].add(task_id, *_graded(env, core, task_id, reply))
    finally:
        env.close()
    for filters in _asked_for(core) if "train" in core.splits else ():
        env = gym.make(row.primary_id, sandbox=NO_SANDBOX, split="train", **filters)
        try:
            drawing = core_env(env)
            draws: list[tuple[dict[str, Any], int]] = [({}, seed) for seed in range(train_draws)]
            each = DRAWS_PER_COMBINATION.get(row.name, 1)
            draws += [(options, index * each + draw) for index, options in enumerate(_filter_combinations(drawing))
                      for draw in range(each)]
            for options, seed in draws:
                try:
                    prompt, info = env.reset(seed=seed, options=options)
                except ValueError:  # a combination no task has (csapp's starter level in floats)
                    parts["train_draws"].add(filters, options, seed, "refused")
                    continue
                parts["train_draws"].add(filters, options, seed, info["task_id"], prompt, _metadata(info),
                                         drawing.grading_key(), drawing.reference_action())
        finally:
            env.close()
    for probe in RULES.get(row.name, lambda: iter(()))():
        parts["rules"].add(*probe)
    return Digest(row.name, {name: part.hex() for name, part in parts.items()})

"""The behavioural digest of a family's task set: what a model is shown and how its replies are
graded, measured through the env's own API, so that moving or renaming code leaves it alone and
changing a task, a key, a hidden case or a grading rule moves it. It runs no code (no Docker)
and takes seconds.

Four parts, each a sha256 of canonical JSON lines, on the family's primary id with default
arguments:

- ``eval_tasks``: every eval task's id, prompt and metadata (what a model sees), levels served
  only when asked for (``difficulty="starter"``) included;
- ``eval_keys``: every eval task's ``grading_key()`` (its answer key; a family graded on hidden
  cases adds them and its harness) and ``reference_action()``;
- ``train_draws``: the first ``TRAIN_DRAWS`` train draws (seeds 0, 1, ...): id, prompt,
  metadata, grading key and reference action; again with each name a filter serves only when
  asked for;
- ``verdicts``: the verdict and reward of every eval task on a fixed corpus of replies that hold
  no code (wrong, malformed and reworded answers; the reference answer when it is an ANSWER
  line), so a change to how answers are read or compared shows. A family whose answer is its
  code (CompGeom) is graded by running it: the corpus covers what needs no sandbox.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import gymnasium as gym

from gym_sysmath.env import INFO_KEYS, SysmathEnv, core_env
from gym_sysmath.families import Family

#: Bump when what the digest measures changes (a part, the corpus, ``TRAIN_DRAWS``): every
#: family's hash is then re-recorded (``--record``), with no version bumped.
DIGEST_FORMAT = 1
TRAIN_DRAWS = 8
PARTS = ("eval_tasks", "eval_keys", "train_draws", "verdicts")
#: A sandbox backend that does not exist: a reply the digest grades must never run code.
NO_SANDBOX = "none (the task-set digest runs no code)"
#: Replies every task is graded on; none holds code.
FIXED_REPLIES = ("", "I cannot work this out.", "ANSWER: 0", "ANSWER: 1", "ANSWER: -1", "ANSWER: 0x0",
                 "ANSWER: [0, 0]", "ANSWER: yes", "ANSWER:")
_ANSWER_LINE = re.compile(r"^ANSWER:.*$", re.MULTILINE)


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


def _replies(reference: str) -> Iterator[str]:
    """The fixed corpus, then (for a family that reads ANSWER lines) the reference answer as it
    is, with every digit shifted by one (well formed, wrong), lower-cased and in bold."""
    yield from FIXED_REPLIES
    match = _ANSWER_LINE.search(reference)
    if match is not None and "```" not in reference:
        line = match.group(0)
        yield reference
        yield re.sub(r"\d", lambda digit: str((int(digit.group(0)) + 1) % 10), line)
        yield "answer:" + line.removeprefix("ANSWER:")
        yield f"**{line}**"


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
            for reply in _replies(reference):
                parts["verdicts"].add(task_id, *_graded(env, core, task_id, reply))
    finally:
        env.close()
    for filters in _asked_for(core) if "train" in core.splits else ():
        env = gym.make(row.primary_id, sandbox=NO_SANDBOX, split="train", **filters)
        try:
            drawing = core_env(env)
            for seed in range(train_draws):
                prompt, info = env.reset(seed=seed)
                parts["train_draws"].add(filters, seed, info["task_id"], prompt, _metadata(info),
                                         drawing.grading_key(), drawing.reference_action())
        finally:
            env.close()
    return Digest(row.name, {name: part.hex() for name, part in parts.items()})

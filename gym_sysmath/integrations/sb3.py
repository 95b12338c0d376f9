"""Stable-Baselines3 adapter: a text family as a numeric multiple-choice env.

SB3 has no ``Text`` space. ``CandidateChoiceEnv`` turns each CsappExact episode into a choice
among *executed* answers: the task's key and the answers of its tempting wrong readings (the
distractors every task ships, computed by the same reference machinery as the key), shuffled
with the env's own RNG so a position never tells which one is the key. The observation
describes the task (category, template) and every candidate numerically: JSON type, sign,
magnitude, which C integer widths it fits, float32 exactness, infinities, signed zero, bit
counts, hex width, and its rank among the candidates. That is enough for a policy to learn a
*reading* ("the unsigned one", "the value a float32 holds") and nothing that names the key.

The chosen candidate is submitted to the wrapped env as an ``ANSWER:`` line, so the reward is
the env's own exact verdict, never a label computed here.

Scoring errors (the harness failed, not the agent) are never folded into a 0 reward silently:
``info["scoring_error"]`` and ``info["verdict"] == "scoring_error"`` pass through, the wrapper
counts them in ``scoring_errors``, and the step is returned *truncated* (not terminated) with
the pre-step observation as the final one. SB3's on-policy collectors bootstrap a truncated
step from the value of that observation, so the sample's advantage is ``(gamma - 1) * V(s)``:
about zero instead of a false "wrong answer". With ``on_scoring_error="raise"`` the step raises
``ScoringError`` instead (the one of ``gym_sysmath.integrations.episodes``, which every adapter
raises), for runs that must stop on a broken harness.

Only CsappExact-v0 is supported. LinearAlgebra-v0 problems carry no executed wrong readings,
and perturbations invented here would teach "spot the made-up number", not linear algebra.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gym_sysmath.exact import exact_equal, json_kind
from gym_sysmath.integrations.episodes import ScoringError, TaskRef
from gym_sysmath.tasks.csapp import CATEGORIES, CsappTask
from gym_sysmath.tasks.csapp.catalog import TEMPLATES
from gym_sysmath.tasks.csapp.machine import f32

__all__ = [
    "CandidateChoiceEnv",
    "ScoringError",
    "csapp_record",
    "element_features",
    "make_choice_env",
]

#: One more than the most wrong readings any template has: the key plus every distractor.
DEFAULT_CHOICES = 1 + max(len(template.wrong) for template in TEMPLATES.values())
#: Answer lists longer than this are described up to this many elements.
DEFAULT_MAX_ELEMENTS = 12
#: The standard templates; a starter one (drawn only on request) takes the one-hot's last, unknown
#: slot, so the observation space is what policies saved before the starter level expect.
TEMPLATE_NAMES: tuple[str, ...] = tuple(sorted(name for name, template in TEMPLATES.items() if template.level is None))

_INT_WIDTHS: tuple[tuple[int, bool], ...] = tuple(
    (bits, signed) for bits in (8, 16, 32, 64) for signed in (True, False))
_MASK64 = (1 << 64) - 1
_FLOAT32_MIN_NORMAL = 2.0 ** -126
_LOG_CAP = 128.0

# Layout of one element's features (see element_features); RANK is filled in per candidate set.
_PRESENT, _IS_BOOL, _IS_INT, _IS_FLOAT, _IS_HEX = range(5)
_TRUE, _NEGATIVE, _ZERO, _LOG_MAGNITUDE = range(5, 9)
_FITS = 9  # 8 slots: int8, uint8, int16, uint16, int32, uint32, int64, uint64
_POPCOUNT, _TRAILING_ZEROS = 17, 18
_F32_EXACT, _INTEGRAL, _INFINITE, _NAN, _NEGATIVE_ZERO, _F32_SUBNORMAL = range(19, 25)
_HEX_DIGITS, _RANK = 25, 26
ELEMENT_FEATURES = 27


def _as_number(value: object) -> int | float | None:
    """The number an answer element denotes: bools as 0/1, hex strings (also ``-0x..``) parsed."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        try:
            return int(value, 16)
        except ValueError:
            return None
    return None


def _fits(number: int, bits: int, signed: bool) -> bool:
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return low <= number <= high


def _float32_exact(number: float) -> bool:
    return f32(number) == number


def element_features(value: object) -> np.ndarray:
    """Numeric description of one answer element, each feature in [-1, 1].

    The features are the machine-level facts a reading turns on (a width it fits, whether a
    float32 can hold it, its sign bit), not anything derived from the key.
    """
    features = np.zeros(ELEMENT_FEATURES, dtype=np.float32)
    features[_PRESENT] = 1.0
    kind = json_kind(value)
    features[_IS_BOOL] = kind == "bool"
    features[_IS_INT] = kind == "int"
    features[_IS_FLOAT] = kind == "float"
    features[_IS_HEX] = kind == "str"
    number = _as_number(value)
    if number is None:
        return features
    if isinstance(number, float) and math.isnan(number):
        features[_NAN] = 1.0
        return features
    negative = number < 0 or (isinstance(number, float) and math.copysign(1.0, number) < 0)
    magnitude = abs(number)
    log_magnitude = _LOG_CAP if math.isinf(magnitude) else min(math.log2(1 + magnitude), _LOG_CAP)
    features[_TRUE] = value is True
    features[_NEGATIVE] = negative
    features[_ZERO] = number == 0
    features[_LOG_MAGNITUDE] = (-1.0 if negative else 1.0) * log_magnitude / _LOG_CAP
    integral = isinstance(number, int) or (math.isfinite(number) and number.is_integer())
    features[_INTEGRAL] = integral
    if integral:
        whole = int(number)
        for offset, (bits, signed) in enumerate(_INT_WIDTHS):
            features[_FITS + offset] = _fits(whole, bits, signed)
        pattern = whole & _MASK64
        features[_POPCOUNT] = pattern.bit_count() / 64
        features[_TRAILING_ZEROS] = ((pattern & -pattern).bit_length() - 1) / 64 if pattern else 1.0
    if isinstance(number, float):
        features[_F32_EXACT] = _float32_exact(number)
        features[_INFINITE] = math.isinf(number)
        features[_NEGATIVE_ZERO] = number == 0 and negative
        features[_F32_SUBNORMAL] = 0 < magnitude < _FLOAT32_MIN_NORMAL
    if kind == "str":
        features[_HEX_DIGITS] = min(len(str(value).lstrip("-")) - 2, 16) / 16
    return features


def _ranks(candidates: Sequence[list], position: int) -> list[float]:
    """Each candidate's rank in [0, 1] among the candidates' numbers at ``position``."""
    numbers = []
    for candidate in candidates:
        number = _as_number(candidate[position]) if position < len(candidate) else None
        numbers.append(None if number is None or (isinstance(number, float) and math.isnan(number)) else number)
    known = [n for n in numbers if n is not None]
    if len(known) < 2:
        return [0.5] * len(candidates)
    return [0.5 if n is None else sum(other < n for other in known) / (len(known) - 1) for n in numbers]


def _one_hot(index: int, size: int) -> np.ndarray:
    vector = np.zeros(size, dtype=np.float32)
    vector[index] = 1.0
    return vector


def csapp_record(env: gym.Env) -> CsappTask:
    """The current CsappExact task with its distractors (host side; the text agent never sees them)."""
    record = getattr(env.unwrapped, "current_task", None)
    if not isinstance(record, CsappTask):
        raise TypeError(f"{type(env.unwrapped).__name__} is not a CsappExact env after reset(); "
                        "CandidateChoiceEnv needs a family whose tasks carry executed distractors")
    return record


class CandidateChoiceEnv(gym.Wrapper):
    """CsappExact as ``Discrete(n_choices)`` over executed candidates with a ``Box`` observation.

    Each episode is one step: ``reset`` draws a task from the wrapped env and lays out its key
    and distractors in shuffled slots (a task with fewer candidates than slots repeats the
    shuffled list, so a repeated slot is as likely to be the key as any other); ``step(i)``
    submits slot ``i`` as ``ANSWER: [...]`` and returns the env's reward and info, plus
    ``choice`` and ``submitted``. A random policy scores about ``1 / candidates`` per task.

    Arguments: ``env`` (a ``CsappExact-v0`` env, ideally ``split="train"`` for an unlimited
    task stream), ``n_choices`` (slots; default: the most candidates any template has),
    ``max_elements`` (answer elements described per candidate), ``on_scoring_error``
    (``"truncate"`` or ``"raise"``, see the module docstring).
    """

    metadata = {"render_modes": []}

    def __init__(self, env: gym.Env, n_choices: int = DEFAULT_CHOICES, max_elements: int = DEFAULT_MAX_ELEMENTS,
                 on_scoring_error: Literal["truncate", "raise"] = "truncate"):
        super().__init__(env)
        if n_choices < 2:
            raise ValueError(f"n_choices must be at least 2, got {n_choices}")
        if on_scoring_error not in ("truncate", "raise"):
            raise ValueError(f"on_scoring_error must be 'truncate' or 'raise', got {on_scoring_error!r}")
        if getattr(env.unwrapped, "family", None) != "csapp":
            raise ValueError(f"CandidateChoiceEnv supports CsappExact-v0 only, not the "
                             f"{getattr(env.unwrapped, 'family', '?')!r} family (its tasks carry no "
                             "executed wrong readings)")
        self.n_choices = int(n_choices)
        self.max_elements = int(max_elements)
        self.on_scoring_error = on_scoring_error
        self.slot_size = 1 + self.max_elements * ELEMENT_FEATURES
        self.header_size = len(CATEGORIES) + len(TEMPLATE_NAMES) + 1
        size = self.header_size + self.n_choices * self.slot_size
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(size,), dtype=np.float32)
        self.action_space = spaces.Discrete(self.n_choices)
        self.scoring_errors = 0
        self.slots: list[list] = []
        self.key_slots: tuple[int, ...] = ()  # host-side, for tests and evaluation
        self._observation = np.zeros(size, dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        _, info = self.env.reset(seed=seed, options=options)
        record = csapp_record(self.env)
        rng = self.env.unwrapped.np_random
        wrong = [d for d in record.distractors if not exact_equal(record.answer, d)]
        if len(wrong) > self.n_choices - 1:
            wrong = [wrong[i] for i in sorted(rng.choice(len(wrong), self.n_choices - 1, replace=False))]
        candidates = [record.answer, *wrong]
        order = rng.permutation(len(candidates))
        shuffled = [candidates[int(i)] for i in order]
        self.slots = [shuffled[i % len(shuffled)] for i in range(self.n_choices)]
        self.key_slots = tuple(i for i in range(self.n_choices) if order[i % len(order)] == 0)
        self._observation = self._observe(record, shuffled)
        info = dict(info)
        info["n_candidates"] = len(candidates)
        return self._observation.copy(), info

    def _observe(self, record: CsappTask, shuffled: list[list]) -> np.ndarray:
        category = _one_hot(CATEGORIES.index(record.category), len(CATEGORIES))
        known = record.template in TEMPLATE_NAMES
        template = _one_hot(TEMPLATE_NAMES.index(record.template) if known else len(TEMPLATE_NAMES),
                            len(TEMPLATE_NAMES) + 1)
        ranks = [_ranks(shuffled, position) for position in range(self.max_elements)]
        described = []
        for index, candidate in enumerate(shuffled):
            slot = np.zeros(self.slot_size, dtype=np.float32)
            slot[0] = min(len(candidate), self.max_elements) / self.max_elements
            for position, value in enumerate(candidate[: self.max_elements]):
                features = element_features(value)
                features[_RANK] = ranks[position][index]
                start = 1 + position * ELEMENT_FEATURES
                slot[start: start + ELEMENT_FEATURES] = features
            described.append(slot)
        slots = [described[i % len(described)] for i in range(self.n_choices)]
        return np.concatenate([category, template, *slots]).astype(np.float32)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        choice = int(action)
        if not 0 <= choice < self.n_choices:
            raise ValueError(f"action must be in [0, {self.n_choices}), got {action!r}")
        submitted = f"ANSWER: {json.dumps(self.slots[choice])}"
        _, reward, terminated, truncated, info = self.env.step(submitted)
        info = dict(info)
        info["choice"], info["submitted"] = choice, submitted
        if info.get("scoring_error"):
            self.scoring_errors += 1
            if self.on_scoring_error == "raise":
                env_id = self.env.spec.id if self.env.spec is not None else type(self.env.unwrapped).__name__
                ref = TaskRef(env_id, str(info.get("task_id")), getattr(self.env.unwrapped, "split", "eval"))
                raise ScoringError(ref, str(info["scoring_error"]), 1)
            return self._observation.copy(), 0.0, False, True, info
        return self._observation.copy(), float(reward), bool(terminated), bool(truncated), info

    def render(self) -> None:
        return None


def make_choice_env(env_id: str = "CsappExact-v0", *, split: str = "train", n_choices: int = DEFAULT_CHOICES,
                    on_scoring_error: Literal["truncate", "raise"] = "truncate", **env_kwargs: Any
                    ) -> CandidateChoiceEnv:
    """``gym.make(env_id, split=split, **env_kwargs)`` wrapped for SB3 (``make_vec_env`` takes it)."""
    import gym_sysmath  # noqa: F401  (registers the ids)

    return CandidateChoiceEnv(gym.make(env_id, split=split, **env_kwargs), n_choices=n_choices,
                              on_scoring_error=on_scoring_error)

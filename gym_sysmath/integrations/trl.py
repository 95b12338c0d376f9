"""A reward function for TRL's ``GRPOTrainer`` (or any prompts + completions -> rewards loop).

``SysmathReward`` grades every completion through the real env: it resets an env to the
sample's task (``options={"task_id": ...}`` for the fixed eval tasks, the recorded ``seed`` for
train-split draws, checked against the recorded ``task_id``) and steps it with the completion
text, so the reward is exactly the env's verdict and no grading logic is duplicated here.

TRL calls a reward function as ``f(prompts=..., completions=..., completion_ids=..., **columns)``
where every extra dataset column arrives as a list, one entry per completion. The columns this
adapter reads are the ones ``build_dataset`` writes: ``task_id``, ``env_id``, ``split`` and
``seed``. Completions may be strings or conversational message lists (the last assistant
message is the action; content given as a list of text parts is joined).

Scoring errors (the grading harness failed, not the model) are kept apart from wrong answers:
such a sample's reward is ``None`` and it is listed in ``last_scoring_errors``. TRL documents
``None`` as "not applicable to this sample"; since TRL 1.x a completion for which every reward
function returned ``None`` is excluded from its group's baseline and gets advantage 0 (older
releases summed it to 0: pass ``scoring_error_reward=0.0`` there only if you accept that bias).
When TRL passes ``log_metric``, the batch's scoring-error count is logged as
``sysmath/scoring_errors``.

Each completion is a whole episode. Envs are made with ``max_turns=1`` by default, so a
completion holding a ```python block is the last turn: CsappExact runs it and grades the list
left in ``result``; LinearAlgebra grades its ANSWER line. With a larger ``max_turns`` an
episode still open after the completion is closed by one final action without an ANSWER line
(graded from the session's ``result`` where the family supports it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from gym_sysmath.evaluation import choose_tasks

__all__ = ["Graded", "SysmathReward", "build_dataset", "completion_text"]

CLOSING_ACTION = "No further turns: this is my final reply."


@dataclass(frozen=True)
class Graded:
    """One completion's outcome; ``reward`` is ``None`` exactly when ``scoring_error`` is set."""

    index: int
    env_id: str
    task_id: str
    reward: float | None
    verdict: str | None
    scoring_error: str | None


def _content_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = [part.get("text") for part in content if isinstance(part, Mapping) and part.get("type") == "text"]
        if parts and all(isinstance(part, str) for part in parts):
            return "\n".join(parts)
    return None


def completion_text(completion: Any) -> Any:
    """The action text of a TRL completion: a string as is, else the last assistant message.

    Anything that is not recognisably text is returned unchanged, so the env grades it as the
    ``format_error`` its contract gives a non-string action.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        text = _content_text(completion.get("content"))
        return completion if text is None else text
    if isinstance(completion, Sequence) and completion and all(isinstance(m, Mapping) for m in completion):
        replies = [m for m in completion if m.get("role", "assistant") == "assistant"]
        if replies:
            text = _content_text(replies[-1].get("content"))
            if text is not None:
                return text
    return completion


def _column(kwargs: Mapping[str, Any], name: str, size: int, default: Any) -> list[Any]:
    values = kwargs.get(name)
    if values is None:
        return [default] * size
    values = list(values)
    if len(values) != size:
        raise ValueError(f"column {name!r} has {len(values)} entries for {size} completions")
    return values


class SysmathReward:
    """``reward_fn(prompts, completions, **columns) -> list[float | None]`` backed by real envs.

    Arguments: ``env_id`` (used when a sample has no ``env_id`` column), ``env_kwargs`` (passed
    to ``gym.make``, e.g. ``{"sandbox": "process"}``; must match what ``build_dataset`` used),
    ``max_turns`` (1: a completion is one final action), ``concurrency`` (threads grading at once,
    each with its own envs on the shared sandbox pool), ``scoring_error_reward`` (what a scoring
    error returns; ``None`` by default, see the module docstring).

    After each call: ``last_results`` (one ``Graded`` per completion) and ``last_scoring_errors``
    (the ``Graded`` whose harness failed). ``close()`` releases the envs.
    """

    def __init__(self, env_id: str | None = None, *, env_kwargs: Mapping[str, Any] | None = None,
                 max_turns: int = 1, concurrency: int = 1, scoring_error_reward: float | None = None):
        import gym_sysmath  # noqa: F401  (registers the ids)

        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.max_turns = max_turns
        self.concurrency = concurrency
        self.scoring_error_reward = scoring_error_reward
        self.__name__ = f"sysmath_{env_id or 'reward'}"  # TRL names reward columns after it
        self.last_results: list[Graded] = []
        self.last_scoring_errors: list[Graded] = []
        self._local = threading.local()
        self._envs: list[gym.Env] = []
        self._lock = threading.Lock()
        self._threads = (ThreadPoolExecutor(concurrency, thread_name_prefix="sysmath-reward")
                         if concurrency > 1 else None)

    # ------------------------------------------------------------------ envs

    def _env(self, env_id: str, split: str) -> gym.Env:
        """This thread's env for (env_id, split): one env instance is never shared by threads."""
        cache: dict[tuple[str, str], gym.Env] = self._local.__dict__.setdefault("envs", {})
        key = (env_id, split)
        if key not in cache:
            env = gym.make(env_id, split=split, max_turns=self.max_turns, **self.env_kwargs)
            cache[key] = env
            with self._lock:
                self._envs.append(env)
        return cache[key]

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=True)
            self._threads = None
        with self._lock:
            envs, self._envs = self._envs, []
            self._local = threading.local()  # a later call makes fresh envs
        for env in envs:
            env.close()

    def __enter__(self) -> SysmathReward:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ grading

    def grade(self, index: int, completion: Any, env_id: str, task_id: str, split: str, seed: int | None) -> Graded:
        """Grade one completion as one episode of the real env."""
        env = self._env(env_id, split)
        if seed is not None and seed >= 0:
            _, info = env.reset(seed=int(seed))
            if info["task_id"] != task_id:
                raise ValueError(f"{env_id} split={split!r} seed={seed} gives task {info['task_id']!r}, the dataset "
                                 f"says {task_id!r}: make the dataset and the reward with the same env_kwargs")
        else:
            env.reset(options={"task_id": task_id})
        _, reward, terminated, truncated, info = env.step(completion_text(completion))
        if not (terminated or truncated):
            _, reward, terminated, truncated, info = env.step(CLOSING_ACTION)
        if info.get("scoring_error"):
            return Graded(index, env_id, task_id, None, info.get("verdict"), str(info["scoring_error"]))
        return Graded(index, env_id, task_id, float(reward), info.get("verdict"), None)

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (),
                 **kwargs: Any) -> list[float | None]:
        size = len(completions)
        env_ids = _column(kwargs, "env_id", size, self.env_id)
        if any(env_id is None for env_id in env_ids):
            raise ValueError("no env_id: pass SysmathReward(env_id=...) or an env_id dataset column")
        if kwargs.get("task_id") is None:
            raise ValueError("no task_id column: build the dataset with gym_sysmath.integrations.trl.build_dataset")
        task_ids = _column(kwargs, "task_id", size, None)
        splits = _column(kwargs, "split", size, "eval")
        seeds = _column(kwargs, "seed", size, None)
        jobs = list(zip(range(size), completions, env_ids, task_ids, splits, seeds, strict=True))
        if self._threads is None:
            results = [self.grade(*job) for job in jobs]
        else:
            results = list(self._threads.map(lambda job: self.grade(*job), jobs))
        self.last_results = results
        self.last_scoring_errors = [result for result in results if result.scoring_error is not None]
        log_metric: Callable[[str, float], None] | None = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric("sysmath/scoring_errors", float(len(self.last_scoring_errors)))
        return [self.scoring_error_reward if result.scoring_error is not None else result.reward
                for result in results]


def build_dataset(env_id: str, *, split: str = "eval", n: int | None = None, seed: int = 0,
                  conversational: bool = False, system_prompt: str | None = None, max_turns: int = 1,
                  env_kwargs: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Rows ``{"prompt", "task_id", "env_id", "split", "seed"}`` for ``datasets.Dataset.from_list``.

    ``split="eval"``: the env's fixed tasks in stable order (the first ``n`` if given; ``seed``
    is ``None``, the task is found by id). ``split="train"``: ``n`` draws from seeds ``seed``,
    ``seed + 1``, ..., recorded so the reward replays the same draw. ``conversational`` makes
    the prompt a message list (with ``system_prompt`` first if given). Answers are never
    written. Use the same ``max_turns`` and ``env_kwargs`` as the ``SysmathReward``.
    """
    import gym_sysmath  # noqa: F401  (registers the ids)

    env = gym.make(env_id, split=split, max_turns=max_turns, **dict(env_kwargs or {}))
    try:
        if split == "train":
            if n is None:
                raise ValueError("split='train' is unlimited: pass n, the number of rows")
            draws: Iterable[tuple[dict[str, Any], int | None]] = (({"seed": seed + i}, seed + i) for i in range(n))
        else:
            ids = choose_tasks(env_id, env.unwrapped.task_ids, n)  # the same subset `eval -n` picks
            draws = (({"options": {"task_id": task_id}}, None) for task_id in ids)
        rows = []
        for reset_kwargs, row_seed in draws:
            prompt, info = env.reset(**reset_kwargs)
            if conversational:
                messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
                prompt = [*messages, {"role": "user", "content": prompt}]
            rows.append({"prompt": prompt, "task_id": info["task_id"], "env_id": env_id, "split": split,
                         "seed": row_seed})
        return rows
    finally:
        env.close()

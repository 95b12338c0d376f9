"""A reward function for TRL's ``GRPOTrainer`` (or any prompts + completions -> rewards loop).

``SysmathReward`` grades every completion through the real env: it resets an env to the
sample's task (``options={"task_id": ...}`` for the fixed eval tasks, the recorded ``seed`` for
train-split draws, checked against the recorded ``task_id``) and steps it with the completion
text, so the reward is exactly the env's verdict and no grading logic is duplicated here.

TRL calls a reward function as ``f(prompts=..., completions=..., completion_ids=..., **columns)``
where every extra dataset column arrives as a list, one entry per completion. The columns this
adapter reads are the ones ``build_dataset`` and ``gym-sysmath export`` write, with the same
meaning: ``task_id``, ``env_id``, ``split`` and ``seed`` (the reset seed; an eval task is found by
its id, a train draw is replayed from its seed and checked against its id), and, where present,
``env_kwargs`` (the ``gym.make`` arguments the prompt was made with, under this reward's own),
``task_set`` (refused when it is not the installed one) and ``max_turns``. Completions may be
strings or conversational message lists (the last assistant message is the action; content
given as a list of text parts is joined); trailing end-of-turn tokens (``<|im_end|>``,
``</s>``, DeepSeek's full-width ones...) are stripped by ``gym_sysmath.answers.strip_end_tokens``.

Scoring errors (the grading harness failed, not the model) are kept apart from wrong answers:
such a sample's reward is ``None`` and it is listed in ``last_scoring_errors``. TRL documents
``None`` as "not applicable to this sample"; since TRL 1.x a completion for which every reward
function returned ``None`` is excluded from its group's baseline and gets advantage 0 (older
releases summed it to 0: pass ``scoring_error_reward=0.0`` there only if you accept that bias).
When TRL passes ``log_metric``, the batch's scoring-error count is logged as
``sysmath/scoring_errors``.

TRL drops a sample only when *every* reward function returns ``None`` for it. With a second
reward function (a format bonus, say) a scoring error's ``None`` is summed away and the sample
is trained on as a wrong answer. ``reward.mask(other)`` wraps the other function so it returns
``None`` wherever this reward found a scoring error in the same batch: list ``reward`` first in
``reward_funcs``, then ``reward.mask(other)``.

Multi-turn (tool turns): under TRL only function-tool calls run, never a fenced block in a
reply, so the rows must be made with ``env_kwargs={"code_via": "tool"}``: their prompts
describe the ``run_code`` tool and say that the first reply without a tool call is final.
``SysmathToolEnv`` is the ``environment_factory``: each rollout resets it to its row's task
(with the row's ``env_kwargs``), the model's ``run_code`` calls are tool turns of the real env
in the episode's own sandbox session, and ``SysmathReward``, which TRL hands the rollouts'
environments, grades the final assistant message in that same episode as the family grades a
last turn (a fenced block in it: CsappExact runs it and reads ``result``, CompGeom submits it,
LinearAlgebra reads only the ANSWER line). A rollout that ends on a call TRL did not run (its
``max_tool_calling_iterations``, or an output past ``max_completion_length``) is graded the same
way and counted in ``sysmath/unrun_tool_calls``. A row whose prompt was not made that way is refused
at ``reset`` (its prompt would promise fenced code runs that never happen), and a tool-mode row
graded without its environment is refused too (its prompt promised a tool).

Without environments, each completion is a whole episode. Envs are made with ``max_turns=1`` by default, so a
completion holding a ```python block is the last turn: CsappExact runs it and grades the list
left in ``result``; LinearAlgebra grades its ANSWER line. With a larger ``max_turns`` an
episode still open after the completion is closed by one final action without an ANSWER line
(graded from the session's ``result`` where the family supports it).

Served envs: ``SysmathReward(remote=URL)`` and ``SysmathToolEnv(remote=URL)`` (give it with
``functools.partial``) play every episode on a ``gym-sysmath serve`` server instead of in this
process (``token=``, default ``GYM_SYSMATH_SERVE_TOKEN``): each tool env holds one WebSocket
session, its ``run_code`` calls are tool turns on the server, and a row's ``task_set`` is checked
against the server's. The trainer's machine then needs no Docker; a step the serving path loses
(a dropped connection, a dead server) is a scoring error like a harness failure.

Prompt length: ``GRPOConfig`` (TRL 1.16) has no ``max_prompt_length`` and cuts no prompt;
``max_completion_length`` (512 by default) bounds a whole multi-turn rollout, tool outputs
included. On a CPU, ``cpu_training_args()`` gives the ``GRPOConfig`` settings for this machine
(TRL defaults ``bf16=True`` and ``gradient_checkpointing=True``, slow where bf16 is emulated).
"""

from __future__ import annotations

import atexit
import inspect
import json
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, SupportsFloat, cast

import gymnasium as gym

from gym_sysmath.answers import strip_end_tokens
from gym_sysmath.env import core_env
from gym_sysmath.evaluation.plan import choose_tasks, sample_seed
from gym_sysmath.integrations.episodes import (
    CLOSING_ACTION,
    TaskRef,
    make_env,
    require_single_turn_prompt,
    task_kwargs,
)

__all__ = ["Graded", "SysmathReward", "SysmathToolEnv", "build_dataset", "close_tool_envs", "completion_text",
           "cpu_has_native_bf16", "cpu_training_args"]

#: What a TRL reward function returns for a batch: one reward per completion, None to drop it.
Rewards = Sequence[float | None]

#: How to make rows for ``SysmathToolEnv``: ``build_dataset(..., env_kwargs=TOOL_MODE, max_turns=...)``.
TOOL_MODE = {"code_via": "tool"}


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
        texts = [part for part in parts if isinstance(part, str)]
        if parts and len(texts) == len(parts):
            return "\n".join(texts)
    return None


def _message_text(completion: Any) -> Any:
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


def completion_text(completion: Any) -> Any:
    """The action text of a TRL completion: a string, else the last assistant message, without
    the end-of-turn tokens a chat template leaves at its end (``answers.strip_end_tokens``).

    Anything that is not recognisably text is returned unchanged, so the env grades it as the
    ``format_error`` its contract gives a non-string action.
    """
    text = _message_text(completion)
    return strip_end_tokens(text) if isinstance(text, str) else text


def _column(kwargs: Mapping[str, Any], name: str, size: int, default: Any) -> list[Any]:
    values = kwargs.get(name)
    if values is None:
        return [default] * size
    values = list(values)
    if len(values) != size:
        raise ValueError(f"column {name!r} has {len(values)} entries for {size} completions")
    return values


def _row_ref(row: Mapping[str, Any]) -> TaskRef:
    """A row's task reference (``TaskRef.parse``); a negative seed is none."""
    seed = row.get("seed")
    if isinstance(seed, int) and seed < 0:
        row = {**row, "seed": None}
    return TaskRef.parse(row)


def _make_kwargs(env_id: str, env_kwargs: Mapping[str, Any],
                 env_kwargs_by_id: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    return {**env_kwargs, **dict(env_kwargs_by_id.get(env_id, {}))}


def _tool_mode_refusal(ref: TaskRef) -> str:
    return (f"{ref.env_id} task {ref.task_id!r}: this row was made with code_via='tool', so its prompt describes a "
            f"run_code tool, but it is graded without a SysmathToolEnv: the model was promised a tool it never had. "
            f"Train with GRPOTrainer(environment_factory=SysmathToolEnv), or make the rows without code_via='tool'")


class SysmathReward:
    """``reward_fn(prompts, completions, **columns) -> list[float | None]`` backed by real envs.

    Arguments: ``env_id`` (used when a sample has no ``env_id`` column), ``env_kwargs`` (passed
    to ``gym.make`` for every id, over a row's own ``env_kwargs`` column, e.g. ``{"sandbox":
    "process"}``), ``env_kwargs_by_id`` (per id, over ``env_kwargs``: one reward for families
    with different filters, such as ``{"CsappExact-v0": {"categories": ["floats"]},
    "LinearAlgebra-v0": {"topics": ["rank"]}}``; both must match what ``build_dataset`` used),
    ``max_turns`` (None: a row's ``max_turns`` column, else 1, so a completion is one final
    action), ``concurrency`` (threads grading at once, each with its own envs on the shared
    sandbox pool), ``scoring_error_reward`` (what a scoring error returns; ``None`` by default,
    see the module docstring), ``remote`` (a ``gym-sysmath serve`` URL: every episode runs
    there; ``env_kwargs`` must then leave ``sandbox`` to the server) and ``token`` (its token,
    default ``GYM_SYSMATH_SERVE_TOKEN``).

    After each call: ``last_results`` (one ``Graded`` per completion) and ``last_scoring_errors``
    (the ``Graded`` whose harness failed). ``close()`` releases the envs.
    """

    def __init__(self, env_id: str | None = None, *, env_kwargs: Mapping[str, Any] | None = None,
                 env_kwargs_by_id: Mapping[str, Mapping[str, Any]] | None = None,
                 max_turns: int | None = None, concurrency: int = 1, scoring_error_reward: float | None = None,
                 remote: str | None = None, token: str | None = None):
        import gym_sysmath  # noqa: F401  (registers the ids)

        if token is not None and remote is None:
            raise ValueError("token= is a gym-sysmath server's: pass remote=URL with it")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.env_kwargs_by_id = {key: dict(value) for key, value in (env_kwargs_by_id or {}).items()}
        self.max_turns = max_turns
        self.concurrency = concurrency
        self.scoring_error_reward = scoring_error_reward
        self.remote, self.token = remote, token
        self.__name__ = f"sysmath_{env_id or 'reward'}"  # TRL names reward columns after it
        self.last_results: list[Graded] = []
        self.last_scoring_errors: list[Graded] = []
        self._last_completions: Sequence[Any] | None = None
        self._local = threading.local()
        self._envs: list[gym.Env] = []
        self._lock = threading.Lock()
        self._threads = (ThreadPoolExecutor(concurrency, thread_name_prefix="sysmath-reward")
                         if concurrency > 1 else None)

    # ------------------------------------------------------------------ envs

    def _env(self, env_id: str, split: str, max_turns: int, kwargs: Mapping[str, Any]) -> gym.Env:
        """This thread's env for these settings: one env instance is never shared by threads."""
        cache: dict[str, gym.Env] = self._local.__dict__.setdefault("envs", {})
        key = json.dumps([env_id, split, max_turns, dict(kwargs)], sort_keys=True, default=repr)
        if key not in cache:
            env = make_env(env_id, remote=self.remote, token=self.token, split=split,
                           **{**kwargs, "max_turns": max_turns})
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

    def grade(self, index: int, completion: Any, env_id: str, task_id: str, split: str, seed: int | None,
              env_kwargs: Any = None, task_set: str | None = None, max_turns: int | None = None) -> Graded:
        """Grade one completion as one episode of the real env (the row's ``env_kwargs`` under
        this reward's own)."""
        ref = _row_ref({"env_id": env_id, "task_id": task_id, "split": split, "seed": seed,
                        "env_kwargs": env_kwargs, "task_set": task_set, "max_turns": max_turns})
        kwargs = {**ref.env_kwargs, **_make_kwargs(env_id, self.env_kwargs, self.env_kwargs_by_id)}
        if kwargs.get("code_via") == "tool":
            raise ValueError(_tool_mode_refusal(ref))
        require_single_turn_prompt(ref)
        turns = self.max_turns if self.max_turns is not None else (ref.max_turns or 1)
        env = self._env(env_id, split, turns, kwargs)
        ref.reset(env)
        _, reward, terminated, truncated, info = env.step(completion_text(completion))
        if not (terminated or truncated):
            _, reward, terminated, truncated, info = env.step(CLOSING_ACTION)
        return _graded(index, env_id, task_id, reward, info)

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (),
                 **kwargs: Any) -> list[float | None]:
        size = len(completions)
        environments = kwargs.get("environments")
        if environments is not None and all(isinstance(env, SysmathToolEnv) for env in environments):
            # multi-turn rollouts: each episode is still open in its tool env; finish it there
            jobs: list[tuple[Any, ...]] = list(zip(range(size), completions, environments, strict=True))
            grade: Callable[..., Graded] = _finish_tool_episode
        else:
            env_ids = _column(kwargs, "env_id", size, self.env_id)
            if any(env_id is None for env_id in env_ids):
                raise ValueError("no env_id: pass SysmathReward(env_id=...) or an env_id dataset column")
            if kwargs.get("task_id") is None:
                raise ValueError("no task_id column: build the dataset with gym_sysmath.integrations.trl.build_dataset")
            jobs = list(zip(range(size), completions, env_ids, _column(kwargs, "task_id", size, None),
                            _column(kwargs, "split", size, "eval"), _column(kwargs, "seed", size, None),
                            _column(kwargs, "env_kwargs", size, None), _column(kwargs, "task_set", size, None),
                            _column(kwargs, "max_turns", size, None), strict=True))
            grade = self.grade
        if self._threads is None or grade is _finish_tool_episode:  # a tool env is driven by one thread
            results = [grade(*job) for job in jobs]
        else:
            results = list(self._threads.map(lambda job: grade(*job), jobs))
        self.last_results = results
        self.last_scoring_errors = [result for result in results if result.scoring_error is not None]
        self._last_completions = completions
        log_metric: Callable[[str, float], None] | None = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric("sysmath/scoring_errors", float(len(self.last_scoring_errors)))
            if grade is _finish_tool_episode:  # ended on a call TRL never ran: its text was graded as final
                log_metric("sysmath/unrun_tool_calls", float(sum(map(_ends_on_tool_call, completions))))
        return [self.scoring_error_reward if result.scoring_error is not None else result.reward
                for result in results]

    # ------------------------------------------------------------------ other reward functions

    def mask(self, reward_func: Callable[..., Rewards | Awaitable[Rewards]]
             ) -> Callable[..., list[float | None] | Awaitable[list[float | None]]]:
        """``reward_func``, returning ``None`` wherever this reward found a scoring error in the
        same batch, so TRL drops those samples (it drops a sample only when every reward
        function returns ``None``). Put this reward before the masked ones in ``reward_funcs``."""

        def failed(completions: Sequence[Any]) -> set[int]:
            if self._last_completions is None or (completions is not self._last_completions
                                                  and list(completions) != list(self._last_completions)):
                raise RuntimeError(f"{name} is masked by {self.__name__}, which has not graded this batch: list the "
                                   f"SysmathReward before the reward functions it masks in reward_funcs")
            return {result.index for result in self.last_scoring_errors}

        def apply(values: Sequence[float | None], completions: Sequence[Any]) -> list[float | None]:
            dropped = failed(completions)
            return [None if index in dropped else value for index, value in enumerate(values)]

        name = getattr(reward_func, "__name__", type(reward_func).__name__)
        if inspect.iscoroutinefunction(reward_func) or inspect.iscoroutinefunction(type(reward_func).__call__):
            async def masked_async(prompts: Any = None, completions: Sequence[Any] = (),
                                   **kwargs: Any) -> list[float | None]:
                values = reward_func(prompts=prompts, completions=completions, **kwargs)
                return apply(await cast("Awaitable[Rewards]", values), completions)  # a coroutine function's

            masked_async.__name__ = name
            return masked_async

        def masked(prompts: Any = None, completions: Sequence[Any] = (), **kwargs: Any) -> list[float | None]:
            values = reward_func(prompts=prompts, completions=completions, **kwargs)
            return apply(cast("Rewards", values), completions)  # not a coroutine function: its values

        masked.__name__ = name
        return masked


def _graded(index: int, env_id: str, task_id: str, reward: SupportsFloat, info: Mapping[str, Any]) -> Graded:
    if info.get("scoring_error"):
        return Graded(index, env_id, task_id, None, info.get("verdict"), str(info["scoring_error"]))
    return Graded(index, env_id, task_id, float(reward), info.get("verdict"), None)


def _prompt_text(prompt: Any) -> str | None:
    """The text a row's prompt gives the model for its task: a string, or the last user message."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        users = [m for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
        if users:
            return _content_text(users[-1].get("content"))
    return None


class SysmathToolEnv:
    """One multi-turn rollout for ``trl.GRPOTrainer(environment_factory=...)``.

    TRL makes one instance per concurrent rollout, calls ``reset(**row)`` with the dataset row
    (``build_dataset``'s columns) before generating, and offers every public method but
    ``reset`` to the model as a tool: here ``run_code``, one tool turn of the real env. Grading
    is ``SysmathReward``'s: it finishes each episode with the rollout's final assistant message,
    graded as the family grades a last turn.

    The rows must be made in tool mode, ``build_dataset(..., env_kwargs={"code_via": "tool"},
    max_turns=N)``: their prompts describe ``run_code`` (at most ``N - 1`` calls) and the final
    reply. ``reset`` refuses any other row with a ``ValueError`` (a fenced-block prompt under
    TRL promises code runs that never happen), and checks that the row's prompt is the one its
    env gives for the task. A row without a ``prompt`` gets the env's (``reset`` returns it and
    TRL puts it in the user message).

    Arguments (give them with ``functools.partial``, TRL calls the factory without any):
    ``env_kwargs``, ``env_kwargs_by_id`` (as ``SysmathReward``'s: over the row's own
    ``env_kwargs``, e.g. the sandbox), ``max_turns`` (tool calls plus the final reply, when the
    row has no ``max_turns`` column; default 6), ``remote`` and ``token`` (as ``SysmathReward``'s:
    the episode, its ``run_code`` calls included, runs on that ``gym-sysmath serve`` server, in one
    session per instance). Envs are closed at exit or by ``close_tool_envs()``.
    """

    def __init__(self, env_kwargs: Mapping[str, Any] | None = None,
                 env_kwargs_by_id: Mapping[str, Mapping[str, Any]] | None = None, max_turns: int = 6,
                 remote: str | None = None, token: str | None = None):
        import gym_sysmath  # noqa: F401  (registers the ids)

        if token is not None and remote is None:
            raise ValueError("token= is a gym-sysmath server's: pass remote=URL with it")
        if max_turns < 2:
            raise ValueError(f"max_turns must be at least 2 (a tool turn and the answer), got {max_turns}")
        self._env_kwargs = dict(env_kwargs or {})
        self._env_kwargs_by_id = {key: dict(value) for key, value in (env_kwargs_by_id or {}).items()}
        self._max_turns = max_turns
        self._remote, self._token = remote, token
        self._envs: dict[str, gym.Env] = {}
        self._env: gym.Env | None = None
        self._row: tuple[str, str] = ("", "")
        #: the final step's (reward, info) once the episode has ended, else None
        self.outcome: tuple[float, dict[str, Any]] | None = None
        self.tool_calls = 0
        _LIVE_TOOL_ENVS.add(self)

    def reset(self, prompt: Any = None, **row: Any) -> str | None:
        """Reset to the row's task, made with the row's ``env_kwargs``; refuse a row whose prompt
        was not made for the ``run_code`` tool. Returns ``None`` (the prompt is the row's), or
        the env's prompt for a row without one."""
        if row.get("env_id") is None or row.get("task_id") is None:
            raise ValueError("SysmathToolEnv needs env_id and task_id columns: build the dataset with "
                             "gym_sysmath.integrations.trl.build_dataset(..., env_kwargs={'code_via': 'tool'})")
        ref = _row_ref(row)
        made_with = ref.env_kwargs.get("code_via", "fence")
        if made_with != "tool":
            raise ValueError(
                f"{ref.env_id} task {ref.task_id!r}: SysmathToolEnv runs code only through its run_code tool, but "
                f"this row was made with code_via={made_with!r}, so its prompt tells the model that a fenced code "
                f"block runs, which never happens under TRL. Make the rows with build_dataset(..., "
                f"env_kwargs={{'code_via': 'tool'}}, max_turns=N) (or `gym-sysmath export --env-arg code_via=tool`)")
        kwargs = {**ref.env_kwargs, **_make_kwargs(ref.env_id, self._env_kwargs, self._env_kwargs_by_id),
                  "code_via": "tool"}
        max_turns = ref.max_turns if ref.max_turns is not None else self._max_turns
        key = json.dumps([ref.env_id, ref.split, max_turns, kwargs], sort_keys=True, default=repr)
        if key not in self._envs:
            if self._remote is not None:  # one session per rollout: the last task's env makes way
                self._close()
            self._envs[key] = make_env(ref.env_id, remote=self._remote, token=self._token, split=ref.split,
                                       **{**kwargs, "max_turns": max_turns})
            if self._remote is not None and not callable(getattr(self._envs[key], "run_code", None)):
                raise RuntimeError("this gym_sysmath.serving.client has no RemoteSysmathEnv.run_code: a served "
                                   "SysmathToolEnv needs a gym-sysmath whose client and server carry run_code calls")
        self._env = self._envs[key]
        self._row = (ref.env_id, ref.task_id)
        self.outcome = None
        self.tool_calls = 0
        observation, _ = ref.reset(self._env)
        if prompt is None:
            return observation
        text = _prompt_text(prompt)
        if text is None or observation not in text:
            raise ValueError(
                f"{ref.env_id} task {ref.task_id!r}: the row's prompt is not the one this env gives for the task "
                f"with code_via='tool' and max_turns={max_turns} (made with another max_turns or other settings?): "
                f"the model would be told a protocol other than the one that runs. Make the rows with the same "
                f"max_turns as SysmathToolEnv(max_turns=...)")
        return None

    def run_code(self, code: str) -> str:
        """Run code for the current task in its sandbox and return what it printed.

        Python for CsappExact and LinearAlgebra (a persistent session: variables survive between
        calls); the task's language for CompGeom (the code is the candidate, run on the public tests).

        Args:
            code: The source code to run.

        Returns:
            The program's output and a status line.
        """
        if self._env is None:
            raise RuntimeError("run_code before reset")
        if self.outcome is not None:
            return "The episode is over: no more code runs. Give your final answer."
        self.tool_calls += 1
        if self._remote is None:
            observation, reward, terminated, truncated, info = core_env(self._env).run_code(code)
        else:
            observation, reward, terminated, truncated, info = self._served_run_code(code)
        if terminated or truncated:  # the harness failed
            self.outcome = (float(reward), info)
        return observation

    def _served_run_code(self, code: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """``run_code`` as a tool turn on the server. A call the server refuses is the harness
        failing (the episode ends as a scoring error), never an error text the model trains on:
        TRL would hand any exception raised here to the model as the tool's output."""
        from gym_sysmath.families import family_of
        from gym_sysmath.serving.client import RemoteEnvError
        from gym_sysmath.serving.protocol import remote_scoring_error

        env_id, task_id = self._row
        try:
            return cast(Any, self._env).run_code(code)
        except RemoteEnvError as exc:
            row = family_of(env_id)
            return remote_scoring_error(f"the server refused a run_code call: {exc}", task_id=task_id,
                                        family=row.name if row is not None else None)

    def _finish(self, index: int, completion: Any) -> Graded:
        """Grade the rollout: its final assistant message is the episode's final reply."""
        env_id, task_id = self._row
        if self._env is None:
            raise RuntimeError("a SysmathToolEnv graded before reset")
        if self.outcome is None:
            _, reward, terminated, truncated, info = self._env.step(completion_text(completion))
            if not (terminated or truncated):  # code_via='tool': every reply is final
                raise RuntimeError(f"{env_id} task {task_id!r}: the final reply left the episode open")
            self.outcome = (float(reward), info)
        reward, info = self.outcome
        return _graded(index, env_id, task_id, reward, info)

    def _close(self) -> None:
        envs, self._envs, self._env = list(self._envs.values()), {}, None
        for env in envs:
            env.close()


def _ends_on_tool_call(completion: Any) -> bool:
    """Whether a rollout's last message is a tool call TRL did not run (its
    ``max_tool_calling_iterations``, or a tool output that would pass ``max_completion_length``)."""
    if not isinstance(completion, Sequence) or isinstance(completion, str) or not completion:
        return False
    last = completion[-1]
    return isinstance(last, Mapping) and last.get("role", "assistant") == "assistant" and bool(last.get("tool_calls"))


def _finish_tool_episode(index: int, completion: Any, environment: SysmathToolEnv) -> Graded:
    return environment._finish(index, completion)


_LIVE_TOOL_ENVS: weakref.WeakSet[SysmathToolEnv] = weakref.WeakSet()


def close_tool_envs() -> None:
    """Close the envs (and so the sandbox containers) of every ``SysmathToolEnv`` in this process."""
    for tool_env in list(_LIVE_TOOL_ENVS):
        tool_env._close()


atexit.register(close_tool_envs)


# ---------------------------------------------------------------------- training on a CPU

#: /proc/cpuinfo flags of CPUs that compute bfloat16 in hardware (x86: AVX512-BF16, AMX; Arm: BF16).
_NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def cpu_has_native_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this CPU computes bfloat16 in hardware, read from ``/proc/cpuinfo``'s ``flags``
    (x86) or ``Features`` (Arm) lines, or from ``cpuinfo`` text if given. No ``/proc/cpuinfo``
    (macOS, Windows): ``False``, the safe answer (fp32 is never the slow path)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return False
    for line in cpuinfo.splitlines():
        label, _, values = line.partition(":")
        if label.strip().lower() in ("flags", "features") and _NATIVE_BF16_FLAGS & set(values.split()):
            return True
    return False


def cpu_training_args(cpuinfo: str | None = None) -> dict[str, Any]:
    """``GRPOConfig`` arguments for training on this machine's CPU: ``use_cpu=True``;
    ``bf16`` only where the CPU has it in hardware (TRL defaults ``bf16=True``, which on a CPU
    without it runs every matmul through emulation: one GRPO step of SmolLM2-135M took 769 s
    against 36 s in fp32); ``gradient_checkpointing=False`` (TRL defaults it on: it recomputes
    every layer's forward pass in the backward pass, trading time for memory a CPU run of a
    small model does not need; given as ``activation_checkpointing``, its name since
    transformers 5.2x, where ``gradient_checkpointing`` is a deprecated alias)."""
    import dataclasses

    from transformers import TrainingArguments

    names = {field.name for field in dataclasses.fields(TrainingArguments)}
    checkpointing = "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"
    return {"use_cpu": True, "bf16": cpu_has_native_bf16(cpuinfo), checkpointing: False}


def build_dataset(env_id: str, *, split: str = "eval", n: int | None = None, seed: int = 0,
                  conversational: bool = False, system_prompt: str | None = None, max_turns: int | None = 1,
                  env_kwargs: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Rows ``{"prompt", "task_id", "env_id", "split", "seed", "max_turns", "env_kwargs", "task_set"}``
    for ``datasets.Dataset.from_list``.

    The rows are ``gym-sysmath export``'s (same tasks, order, prompts and ``seed`` column), so
    either feeds ``SysmathReward``. ``split="eval"``: the env's fixed tasks in stable order (the
    subset ``eval -n`` picks if ``n`` is given); an eval task is found by its id, its ``seed`` is
    the sample seed ``eval`` and ``export`` use. ``split="train"``: ``n`` draws from seeds
    ``seed``, ``seed + 1``, ..., recorded so the reward replays the same draw. ``conversational`` makes
    the prompt a message list (with ``system_prompt`` first if given). Answers are never
    written. Use the same ``max_turns`` (None: the family's default) and ``env_kwargs`` as the
    ``SysmathReward``. Each row records what grading needs besides: ``max_turns`` (the turns its
    prompt offers), ``env_kwargs`` (JSON text:
    the arguments above less how the env runs, ``episodes.RUNTIME_KWARGS``) and ``task_set``
    (``families.task_set``, the versioned label ``csapp@1``: an install with another task set
    refuses the row rather than mis-grade it).
    """
    import gym_sysmath  # noqa: F401  (registers the ids)
    from gym_sysmath.families import task_set as installed_task_set

    if system_prompt is not None and not conversational:
        raise ValueError("system_prompt needs conversational=True: a plain-text prompt has no system turn to put it in")

    env = gym.make(env_id, split=split, max_turns=max_turns, **dict(env_kwargs or {}))
    recorded = json.dumps(task_kwargs(env_kwargs), sort_keys=True)
    task_set = installed_task_set(core_env(env).family)
    turns = core_env(env).max_turns  # what the prompts offer (the family's default when max_turns is None)
    try:
        if split == "train":
            if n is None:
                raise ValueError("split='train' is unlimited: pass n, the number of rows")
            draws: Iterable[tuple[dict[str, Any], int | None]] = (({"seed": seed + i}, seed + i) for i in range(n))
        else:
            ids = choose_tasks(env_id, core_env(env).task_ids, n)  # the same subset `eval -n` picks
            draws = (({"seed": sample_seed(seed, env_id, task_id, 0), "options": {"task_id": task_id}},
                      sample_seed(seed, env_id, task_id, 0)) for task_id in ids)
        rows = []
        for reset_kwargs, row_seed in draws:
            prompt, info = env.reset(**reset_kwargs)
            if conversational:
                messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
                prompt = [*messages, {"role": "user", "content": prompt}]
            rows.append({"prompt": prompt, "task_id": info["task_id"], "env_id": env_id, "split": split,
                         "seed": row_seed, "max_turns": turns, "env_kwargs": recorded, "task_set": task_set})
        return rows
    finally:
        env.close()

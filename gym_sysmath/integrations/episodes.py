"""What every framework adapter shares: the task reference a trainer holds, and an episode
that survives a harness failure by being replayed on a fresh container.

A trainer's dataset never holds an answer key. Its "ground truth" is a ``TaskRef``: the env
id, the task id, the split and the seed that rebuild the task host-side, where the key is
executed and stays. Envs are built lazily in the process (and thread) that grades, so a
reference can be pickled to any worker and graded there.

A scoring error (``info["scoring_error"]``: the harness failed, not the model) is never a
wrong answer. ``Episode.step`` first replays the episode's actions on a fresh reset (a new
container) up to ``retries`` times; when the harness still fails it raises ``ScoringError``,
and each framework adapter turns that into what its framework can keep apart (see the
per-framework sections of docs/integrations.md).

Where episodes run is one switch: ``remote=URL`` (a ``gym-sysmath serve`` server; ``token=`` or
``GYM_SYSMATH_SERVE_TOKEN``) makes ``make_env`` / ``make_async_env`` return the served env in
place of ``gym.make``'s, and every adapter passes its own ``remote=`` down to them. A reference's
``task_set`` is then checked against the task set the server serves (its ``/health``), since the
server's install is the one that grades.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import gymnasium as gym

if TYPE_CHECKING:
    from gym_sysmath.async_env import AsyncSysmathEnv
    from gym_sysmath.env import SysmathEnv
    from gym_sysmath.serving.client import AsyncRemoteSysmathEnv

__all__ = ["CLOSING_ACTION", "RUNTIME_KWARGS", "SERVED_TASK_SETS_TTL_S", "Episode", "PromptTooLong", "ScoringError",
           "TaskRef", "chat_prompt", "close_served_envs", "default_turns", "grade_completion", "make_async_env",
           "make_env", "offered_turns", "prompt_tokens", "require_prompts_fit", "require_single_turn_prompt",
           "served_task_sets", "task_kwargs", "tool_mode_refusal"]

#: Closes an episode still open after a single-turn completion (graded from what it left).
CLOSING_ACTION = "No further turns: this is my final reply."

#: ``gym.make`` arguments that say how an env runs, not which tasks it holds or how they are
#: graded: a task reference never records them (the grading process picks its own sandbox);
#: ``split`` and ``max_turns`` are fields of the reference itself.
RUNTIME_KWARGS = frozenset({"sandbox", "pool_size", "render_mode", "split", "max_turns"})


#: How long a server's task sets (its ``/health``) are trusted before they are read again: a
#: server restarted from another install at the same URL is seen within this time.
SERVED_TASK_SETS_TTL_S = 60.0


def make_env(env_id: str, *, remote: str | None = None, token: str | None = None, **kwargs: Any) -> gym.Env:
    """``gym.make(env_id, **kwargs)``; with ``remote`` (a ``gym-sysmath serve`` URL) the same env
    served there (``RemoteSysmathEnv``: reset and step run on the server, ``token`` default
    ``GYM_SYSMATH_SERVE_TOKEN``). ``sandbox`` and ``pool_size`` are then the server's, and refused here."""
    if remote is None:
        if token is not None:
            raise ValueError("token= is a gym-sysmath server's: pass remote=URL with it")
        import gym_sysmath  # noqa: F401  (registers the ids)

        return gym.make(env_id, **kwargs)
    from gym_sysmath.serving.client import RemoteSysmathEnv

    return RemoteSysmathEnv(remote, env_id, token=token, **kwargs)


async def make_async_env(env_id: str, *, remote: str | None = None, token: str | None = None,
                         **kwargs: Any) -> AsyncSysmathEnv | AsyncRemoteSysmathEnv:
    """``make_env``'s asyncio twin: ``async_env.make_async(env_id, **kwargs)``, or with ``remote``
    an ``AsyncRemoteSysmathEnv`` (the same ``await reset/step/close``, no thread per episode)."""
    if remote is None:
        if token is not None:
            raise ValueError("token= is a gym-sysmath server's: pass remote=URL with it")
        from gym_sysmath.async_env import make_async

        return await make_async(env_id, **kwargs)
    from gym_sysmath.serving.client import AsyncRemoteSysmathEnv

    return AsyncRemoteSysmathEnv(remote, env_id, token=token, **kwargs)


_SERVED: dict[str, tuple[float, dict[str, str]]] = {}


def served_task_sets(url: str, *, token: str | None = None, refresh: bool = False) -> dict[str, str]:
    """``{family: task set}`` a ``gym-sysmath serve`` server grades with (its ``/health``), read
    once per URL and ``SERVED_TASK_SETS_TTL_S`` (``refresh``: now)."""
    from gym_sysmath.serving.client import server_health

    key = url.rstrip("/")
    cached = _SERVED.get(key)
    if refresh or cached is None or time.monotonic() - cached[0] > SERVED_TASK_SETS_TTL_S:
        task_sets = {str(name): str(value) for name, value in server_health(url, token=token)["task_sets"].items()}
        cached = _SERVED[key] = (time.monotonic(), task_sets)
    return dict(cached[1])


def _remote_url(env: Any) -> str | None:
    """The server of a served env (``RemoteSysmathEnv``), else ``None``."""
    client = sys.modules.get("gym_sysmath.serving.client")  # not imported: no env of this process is served
    if client is None or not isinstance(env, (client.RemoteSysmathEnv, client.AsyncRemoteSysmathEnv)):
        return None
    return str(env.codec.base)


def task_kwargs(env_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``gym.make`` arguments a task reference records: all but ``RUNTIME_KWARGS``, as JSON
    values (a filter given as a tuple comes back a list; anything JSON cannot hold is refused)."""
    kept = {key: value for key, value in (env_kwargs or {}).items() if key not in RUNTIME_KWARGS}
    try:
        return dict(json.loads(json.dumps(kept, sort_keys=True)))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"a task reference records its gym.make arguments as JSON; {sorted(kept)} cannot be: "
                         f"{exc}") from exc


def tool_mode_refusal(env_kwargs: Mapping[str, Any]) -> str | None:
    """Why rows made with ``env_kwargs`` cannot be graded outside TRL's ``SysmathToolEnv`` (their
    prompts describe its run_code tool), or ``None`` when they can."""
    code_via = env_kwargs.get("code_via", "fence")
    if code_via == "fence":
        return None
    return (f"made with code_via={code_via!r}: its prompt promises a run_code tool, which only TRL's SysmathToolEnv "
            f"offers; export the rows without code_via for this trainer")


def _parse_kwargs(value: Any) -> dict[str, Any]:
    """A reference's ``env_kwargs``: a mapping, its JSON text (a parquet column), or nothing."""
    if _missing(value) or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"a task reference's env_kwargs is a JSON object, got {value[:80]!r}: {exc}") from exc
    if not isinstance(value, Mapping):
        raise ValueError(f"a task reference's env_kwargs is a JSON object, got {value!r:.80}")
    return task_kwargs(value)


@dataclass(frozen=True)
class TaskRef:
    """A task by reference: enough to rebuild it host-side, nothing that grades it."""

    env_id: str
    task_id: str
    split: str = "eval"
    seed: int | None = None
    #: The turns the prompt was written for (it tells the model); ``None``: the family's default.
    max_turns: int | None = None
    #: The ``gym.make`` arguments the row was made with (filters, difficulty...), ``RUNTIME_KWARGS`` left out.
    env_kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)
    #: The label of the task set the row was made on (``csapp@1``, ``families.task_set``); ``None``: not checked.
    task_set: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def parse(cls, value: str | Mapping[str, Any]) -> TaskRef:
        """A reference from its JSON text or a mapping (a dataset row's columns are accepted:
        ``prompt`` and other non-reference fields are ignored)."""
        if isinstance(value, str):
            text = value
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"a gym-sysmath ground truth is a task reference in JSON, got {text[:80]!r}: "
                                 f"{exc}") from exc
        if not isinstance(value, Mapping) or not {"env_id", "task_id"} <= value.keys():
            raise ValueError(f"a task reference needs env_id and task_id, got {value!r:.200}; build the dataset "
                             f"with `gym-sysmath export --format ...` or gym_sysmath.integrations.trl.build_dataset")
        seed, max_turns, task_set = value.get("seed"), value.get("max_turns"), value.get("task_set")
        return cls(str(value["env_id"]), str(value["task_id"]), str(value.get("split") or "eval"),
                   _whole_or_none(seed), _whole_or_none(max_turns),
                   _parse_kwargs(value.get("env_kwargs")), None if _missing(task_set) else str(task_set))

    def check_task_set(self, env: gym.Env) -> None:
        """Refuse to grade a reference made from another task set than ``env``'s."""
        if self.task_set is None:
            return
        from gym_sysmath.env import core_env
        from gym_sysmath.families import family_of, task_set
        from gym_sysmath.task_sets import SEPARATOR, how_to_get

        url = _remote_url(env)
        if url is None:
            installed, where = task_set(core_env(env).family), "this install has"
        else:  # the server's install grades: its task set is the one that must match
            row = family_of(self.env_id)
            family = row.name if row is not None else self.task_set.partition(SEPARATOR)[0]
            served = served_task_sets(url)
            if served.get(family) != self.task_set:  # read again: the server may have been restarted
                served = served_task_sets(url, refresh=True)
            installed, where = served.get(family, "none of it"), f"the gym-sysmath server at {url} serves"
        if installed != self.task_set:
            family, _, version = self.task_set.partition(SEPARATOR)
            where_else = f" ({how_to_get(family, int(version))})" if version.isdigit() and url is None else ""
            raise ValueError(f"{self.env_id} task {self.task_id!r} was exported from task set {self.task_set}, "
                             f"{where} {installed}: its prompt or key may differ there, so it is not graded. "
                             f"Export the dataset again with the install that grades (`gym-sysmath export`), "
                             f"or grade it with the install that has {self.task_set}{where_else}")

    def reset(self, env: gym.Env) -> tuple[str, dict[str, Any]]:
        """Reset ``env`` to this task: eval tasks by id, train draws by seed (checked against the id)."""
        self.check_task_set(env)
        if self.split == "train":
            if self.seed is None:
                raise ValueError(f"{self}: a train-split reference needs the seed of its draw")
            observation, info = env.reset(seed=self.seed)
            if info["task_id"] != self.task_id:
                raise ValueError(f"{self.env_id} split='train' seed={self.seed} gives task {info['task_id']!r}, the "
                                 f"reference says {self.task_id!r}: grade with the same env_kwargs the dataset "
                                 f"was made with")
            return observation, info
        return env.reset(seed=self.seed, options={"task_id": self.task_id})


def _missing(value: Any) -> bool:
    """``None``, or the NaN a dataframe puts in a column a row lacks."""
    return value is None or (isinstance(value, float) and value != value)


def _whole_or_none(value: Any) -> int | None:
    return None if _missing(value) else int(value)


class ScoringError(RuntimeError):
    """The grading harness failed on this task after every retry: not the model's fault."""

    def __init__(self, ref: TaskRef, cause: str, attempts: int):
        super().__init__(f"{ref.env_id} task {ref.task_id!r}: the grading harness failed {attempts} time(s), "
                         f"last: {cause}. The sample must not be scored; check the sandbox "
                         f"(`gym-sysmath sandbox status`)")
        self.ref = ref
        self.cause = cause
        self.attempts = attempts


class _Envs(threading.local):
    """This thread's envs, keyed by how they were made; a forked child starts its own."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.envs: dict[str, gym.Env] = {}

    def get(self, env_id: str, split: str, max_turns: int | None, env_kwargs: Mapping[str, Any],
            remote: tuple[str | None, str | None] = (None, None)) -> gym.Env:
        if self.pid != os.getpid():  # inherited through fork: those envs' containers belong to the parent
            self.pid, self.envs = os.getpid(), {}
        key = json.dumps([env_id, split, max_turns, dict(env_kwargs), remote], sort_keys=True, default=repr)
        if key not in self.envs:
            self.envs[key] = _make(env_id, split, max_turns, env_kwargs, remote)
        return self.envs[key]


def _make(env_id: str, split: str, max_turns: int | None, env_kwargs: Mapping[str, Any],
          remote: tuple[str | None, str | None]) -> gym.Env:
    kwargs = {**env_kwargs, **({} if max_turns is None else {"max_turns": max_turns})}
    env = make_env(env_id, remote=remote[0], token=remote[1], split=split, **kwargs)
    if remote[0] is not None:
        with _SERVED_LOCK:
            _SERVED_ENVS.add(env)
    return env


#: Every served env an ``Episode`` made in this process and did not close. Held, not weakly: a
#: served env dropped unclosed keeps its WebSocket open (its reader thread holds it), and a
#: draining server waits for every open session; the threads' cached envs stay open between episodes.
_SERVED_ENVS: set[gym.Env] = set()
_SERVED_LOCK = threading.Lock()


def _close_env(env: gym.Env) -> None:
    with _SERVED_LOCK:
        _SERVED_ENVS.discard(env)
    env.close()


def close_served_envs() -> None:
    """Close the server sessions of every served env the episodes of this process opened (the
    threads' cached ones too; a later episode opens a new one). Runs at exit."""
    with _SERVED_LOCK:
        envs = list(_SERVED_ENVS)
        _SERVED_ENVS.clear()
    for env in envs:
        env.close()


atexit.register(close_served_envs)


_THREAD_ENVS = _Envs()


class Episode:
    """One episode of a referenced task, for adapters that drive ``step`` themselves.

    ``messages`` is the episode as chat: the prompt, then each action (assistant) and the
    observation it got (user). ``own_env=True`` makes a private env (closed by ``close``);
    otherwise the thread's shared env for these settings is used, so keep one ``Episode`` per
    thread at a time. ``remote``/``token``: play it on a ``gym-sysmath serve`` server (``make_env``).
    """

    def __init__(self, ref: TaskRef, *, env_kwargs: Mapping[str, Any] | None = None, max_turns: int | None = None,
                 retries: int = 1, own_env: bool = False, remote: str | None = None, token: str | None = None):
        if retries < 0:
            raise ValueError(f"retries must be at least 0, got {retries}")
        self.ref = ref
        self.retries = retries
        max_turns = ref.max_turns if max_turns is None else max_turns
        self._env_args = (ref.env_id, ref.split, max_turns, {**ref.env_kwargs, **dict(env_kwargs or {})})
        refusal = tool_mode_refusal(self._env_args[3])
        if refusal:
            raise ValueError(f"{ref.env_id} task {ref.task_id!r}: {refusal}")
        self._own_env = own_env
        self._remote = (remote, token)
        self._env: gym.Env | None = None
        self.actions: list[str] = []
        self.messages: list[dict[str, str]] = []
        self.done = False
        self.info: dict[str, Any] = {}

    @property
    def env(self) -> gym.Env:
        if self._env is None:
            if self._own_env:
                self._env = _make(*self._env_args, self._remote)
            else:
                self._env = _THREAD_ENVS.get(*self._env_args, self._remote)
                if self._remote[0] is not None:  # reopened after close_served_envs: closed at exit again
                    with _SERVED_LOCK:
                        _SERVED_ENVS.add(self._env)
        return self._env

    @property
    def core(self) -> SysmathEnv:
        """The env under Gymnasium's wrappers (its ``turn``, ``max_turns``, ``reference_action``);
        a served episode's env is on the server: use ``info`` (``turn``) instead."""
        from gym_sysmath.env import core_env  # on use: this module loads without the env machinery

        if self._remote[0] is not None:
            raise AttributeError(f"{self.ref.env_id} task {self.ref.task_id!r} runs on {self._remote[0]}: its core env "
                                 f"is there, not in this process")
        return core_env(self.env)

    def reset(self) -> tuple[str, dict[str, Any]]:
        observation, self.info = self.ref.reset(self.env)
        self.actions, self.done = [], False
        self.messages = [{"role": "user", "content": observation}]
        return observation, self.info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """``env.step``; a harness failure is replayed on a fresh reset, then raised as ``ScoringError``."""
        if not self.messages:
            self.reset()
        outcome = self.env.step(action)
        attempts = 1
        while outcome[4].get("scoring_error") and attempts <= self.retries:
            attempts += 1
            outcome = self._replay(action)
        observation, reward, terminated, truncated, info = outcome
        if info.get("scoring_error"):
            self.done = True
            raise ScoringError(self.ref, str(info["scoring_error"]), attempts)
        self.actions.append(action)
        self.messages += [{"role": "assistant", "content": action}, {"role": "user", "content": observation}]
        self.done, self.info = terminated or truncated, info
        return observation, float(reward), terminated, truncated, info

    def _replay(self, action: str) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """The episode so far, then ``action``, on a fresh reset (the harness's next container; a
        served episode's next session). A server gone since is the harness failing, not the model."""
        try:
            self.ref.reset(self.env)
        except ConnectionError as exc:  # RemoteUnavailable: the server died or is draining
            if self._remote[0] is None:
                raise
            from gym_sysmath.serving.protocol import remote_scoring_error

            return remote_scoring_error(str(exc), task_id=self.ref.task_id, family=self.info.get("family"))
        for earlier in self.actions:
            outcome = self.env.step(earlier)
            if outcome[4].get("scoring_error"):
                return outcome
        return self.env.step(action)

    def close(self) -> None:
        if self._own_env and self._env is not None:
            _close_env(self._env)
        self._env = None


def chat_prompt(prompt: str | Sequence[Mapping[str, str]], system_prompt: str | None = None) -> list[dict[str, str]]:
    """A dataset row's prompt as chat messages (a plain prompt becomes the user message)."""
    if not isinstance(prompt, str):
        return [dict(message) for message in prompt]
    return [*([{"role": "system", "content": system_prompt}] if system_prompt else []),
            {"role": "user", "content": prompt}]


def grade_completion(ref: TaskRef, completion: str, *, env_kwargs: Mapping[str, Any] | None = None,
                     max_turns: int | None = None, retries: int = 1, remote: str | None = None,
                     token: str | None = None) -> tuple[float, dict[str, Any]]:
    """One completion as one whole episode of ``ref``: ``(reward, info)``, or ``ScoringError``;
    on the ``gym-sysmath serve`` server at ``remote`` when given.

    ``max_turns``: the reference's, else 1. With 1 the completion is the final action; with
    more (a reference that records no turns, and a caller asking for more), an episode still
    open after it is closed by ``CLOSING_ACTION`` (graded from what the session left). A
    reference whose prompt offered more than one turn is refused (``require_single_turn_prompt``).
    """
    max_turns = max_turns if max_turns is not None else (ref.max_turns or 1)
    episode = Episode(ref, env_kwargs=env_kwargs, max_turns=max_turns, retries=retries, remote=remote,
                      token=token)  # refuses tool-mode rows
    require_single_turn_prompt(ref)
    episode.reset()
    _, reward, terminated, truncated, info = episode.step(completion)
    if not (terminated or truncated):
        _, reward, _, _, info = episode.step(CLOSING_ACTION)
    return reward, info


def require_single_turn_prompt(ref: TaskRef) -> None:
    """Refuse to grade one completion against a prompt that offered several turns: it told the
    model a code block's output comes back, so a model that follows it would score 0."""
    if ref.max_turns is not None and ref.max_turns > 1:
        raise ValueError(f"{ref.env_id} task {ref.task_id!r}: its prompt offers {ref.max_turns} turns (a code block's "
                         f"output comes back), but one completion is graded here, so a model that follows the prompt "
                         f"would score 0. Make single-turn rows for this trainer (`gym-sysmath export --max-turns 1`, "
                         f"build_dataset(max_turns=1)), or train through its multi-turn path")


def default_turns(env_id: str) -> int:
    """The turns an episode of ``env_id`` gets when ``max_turns`` is not given: its registered
    arguments' (an alias may fix them), else its env class's ``default_max_turns``."""
    import importlib

    import gym_sysmath  # noqa: F401  (registers the ids)

    try:
        spec = gym.spec(env_id)
    except gym.error.Error as exc:
        raise ValueError(f"unknown gym-sysmath env id {env_id!r}: {exc}") from exc
    if spec.kwargs.get("max_turns"):
        return int(spec.kwargs["max_turns"])
    if not isinstance(spec.entry_point, str):
        raise ValueError(f"{env_id}: its entry point is not a gym-sysmath env class")
    module, _, name = spec.entry_point.partition(":")
    return int(getattr(importlib.import_module(module), name).default_max_turns)


def offered_turns(ref: TaskRef) -> int:
    """The turns a reference's prompt offers: its own ``max_turns``, else its env's default."""
    return default_turns(ref.env_id) if ref.max_turns is None else ref.max_turns


class PromptTooLong(ValueError):
    """A trainer would cut or drop prompts at its length limit: raise the limit, never train on them."""


def prompt_tokens(prompt: str | Sequence[Mapping[str, str]], tokenizer: Any, *, apply_chat_template: bool = True,
                  system_prompt: str | None = None) -> int:
    """Tokens of one prompt as a trainer feeds it: through the tokenizer's chat template with the
    generation prompt (``apply_chat_template``), else the plain text."""
    if apply_chat_template:
        ids = tokenizer.apply_chat_template(chat_prompt(prompt, system_prompt), tokenize=True,
                                            add_generation_prompt=True)
        if isinstance(ids, Mapping):  # transformers 5 returns a BatchEncoding
            ids = ids["input_ids"]
        return len(ids)
    text = prompt if isinstance(prompt, str) else "\n".join(message["content"] for message in prompt)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def require_prompts_fit(prompts: Sequence[str | Sequence[Mapping[str, str]]], tokenizer: Any, limit: int, *,
                        setting: str, apply_chat_template: bool = True) -> int:
    """The longest prompt's token count; ``PromptTooLong`` when any is over ``limit``, naming the
    trainer ``setting`` to raise and the value every prompt needs."""
    lengths = [prompt_tokens(prompt, tokenizer, apply_chat_template=apply_chat_template) for prompt in prompts]
    longest = max(lengths, default=0)
    over = sum(length > limit for length in lengths)
    if over:
        raise PromptTooLong(f"{over} of {len(lengths)} prompts are longer than {setting}={limit} tokens (the longest "
                            f"is {longest}): the trainer would cut or drop them, losing the task statement. Set "
                            f"{setting} to at least {longest}")
    return longest

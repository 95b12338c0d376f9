"""Run samples: ``run_episode`` plays one; ``run_local`` runs many on threads, each thread
owning its own env instances while all share the process's warm sandbox pool
(``evaluation.ray_runner`` runs the same ``play`` on Ray actors).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

import gymnasium as gym

from gym_sysmath.agents import Agent, ContextOverflow, Turn
from gym_sysmath.env import INFO_KEYS, core_env
from gym_sysmath.evaluation.plan import SampleSpec
from gym_sysmath.verdicts import Verdict

#: ``info`` fields every env sets on every step: not task metadata.
BASE_INFO_KEYS = frozenset({*INFO_KEYS, "detail"})  # the contract's fields: not task metadata
#: A safety net: every family ends an episode within its ``max_turns``.
MAX_STEPS = 256
Key = TypeVar("Key")  #: ``close_all`` takes envs under any keys
logger = logging.getLogger(__name__)


class RowVerdict(StrEnum):
    """The verdicts of a logged sample that the env did not give (the env's own are ``Verdict``)."""

    #: The sample got no verdict from the env (``SampleFailure``): ``--resume`` plays it again.
    FAILED = "failed"
    #: The endpoint ended the episode because its conversation outgrew the model's context.
    CONTEXT_OVERFLOW = "context_overflow"


#: A logged sample's verdict: the env's, or one of the eval's own.
SampleVerdict = Verdict | RowVerdict


def sample_verdict(name: str) -> SampleVerdict:
    """The verdict ``name`` (as logged) stands for; a ``ValueError`` naming them all otherwise."""
    for kind in (Verdict, RowVerdict):
        try:
            return kind(name)
        except ValueError:
            continue
    known = ", ".join([*Verdict, *RowVerdict])
    raise ValueError(f"unknown verdict {name!r}; a logged sample's verdict is one of {known}")


@dataclass(frozen=True)
class SampleResult:
    """One played episode, as logged: ``observations[0]`` is the prompt and
    ``observations[i + 1]`` what the env answered to ``actions[i]``. ``turns[i]`` is the
    agent's record of how ``actions[i]`` was made (for ``openai``: response id and model,
    ``finish_reason``, token ``usage``, latency, retries, the sampling fields sent), ``{}``
    when it keeps none. ``final_info`` is the last step's ``info`` (``hidden_passed``,
    ``compile_success``, ``format_ok``, ...); ``error`` says why a ``context_overflow`` or
    ``failed`` sample stopped. ``verdict`` is read into its enum (``sample_verdict``), so a
    row with a verdict neither enum has is refused where it is made or loaded. ``task_set`` and
    ``task_set_hash`` name the task set the sample was played on (the env's ``info``; ``None``
    in a row logged before task sets were versioned), so ``--resume`` never mixes two."""

    env_id: str
    task_id: str
    rollout: int
    seed: int
    agent: str
    actions: tuple[str, ...]
    observations: tuple[str, ...]
    reward: float
    verdict: SampleVerdict
    scoring_error: str | None
    detail: str | None
    metadata: Mapping[str, Any]
    timings: Mapping[str, float]
    turns: tuple[Mapping[str, Any], ...] = ()
    final_info: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    task_set: str | None = None
    task_set_hash: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", sample_verdict(self.verdict))

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.env_id, self.task_id, self.rollout)

    def to_record(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id, "task_id": self.task_id, "rollout": self.rollout, "seed": self.seed,
            "agent": self.agent, "actions": list(self.actions), "observations": list(self.observations),
            "reward": self.reward, "verdict": self.verdict.value, "scoring_error": self.scoring_error,
            "detail": self.detail, "metadata": dict(self.metadata), "timings": dict(self.timings),
            "turns": [dict(turn) for turn in self.turns], "final_info": dict(self.final_info), "error": self.error,
            "task_set": self.task_set, "task_set_hash": self.task_set_hash,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> SampleResult:
        return cls(
            env_id=record["env_id"], task_id=record["task_id"], rollout=int(record["rollout"]),
            seed=int(record["seed"]), agent=record.get("agent", ""), actions=tuple(record.get("actions", ())),
            observations=tuple(record.get("observations", ())), reward=float(record["reward"]),
            verdict=record["verdict"], scoring_error=record.get("scoring_error"), detail=record.get("detail"),
            metadata=dict(record.get("metadata") or {}), timings=dict(record.get("timings") or {}),
            turns=tuple(dict(turn or {}) for turn in record.get("turns") or ()),
            final_info=dict(record.get("final_info") or {}), error=record.get("error"),
            task_set=record.get("task_set"), task_set_hash=record.get("task_set_hash"),
        )


@dataclass(frozen=True)
class SampleFailure:
    """A sample that produced no verdict (the agent or the host failed, not the task's
    grading). It is logged as a ``failed`` row with the turns it got through
    (``as_result``), counted apart in the summary, and ``--resume`` plays it again."""

    spec: SampleSpec
    error: str
    partial: SampleResult | None = None  #: the turns played before the failure, when there were some

    @property
    def key(self) -> tuple[str, str, int]:
        return self.spec.key

    def as_result(self, agent: str, task_set: tuple[str | None, str | None] = (None, None)) -> SampleResult:
        """The row logged for it: verdict ``failed``, reward 0, the error and the turns so far;
        ``task_set`` (label, hash) is the run's, for a sample that failed before its reset said."""
        spec, partial = self.spec, self.partial
        return SampleResult(
            env_id=spec.env_id, task_id=spec.task_id, rollout=spec.rollout, seed=spec.seed, agent=agent,
            actions=partial.actions if partial else (), observations=partial.observations if partial else (),
            reward=0.0, verdict=RowVerdict.FAILED, scoring_error=None, detail=None,
            metadata=partial.metadata if partial else {}, timings=partial.timings if partial else {},
            turns=partial.turns if partial else (), final_info=partial.final_info if partial else {},
            error=self.error, task_set=partial.task_set if partial else task_set[0],
            task_set_hash=partial.task_set_hash if partial else task_set[1])


Outcome = SampleResult | SampleFailure


@dataclass(frozen=True)
class TurnEvent:
    """A turn of a sample starting (``finished`` False) or ending, for a progress line: a slow
    model's sample is several turns, and the line should move as each one ends. Display only:
    nothing here reaches a reward or a log."""

    key: tuple[str, str, int]  #: the sample's (env id, task id, rollout)
    index: int  #: 0 for the episode's first turn
    finished: bool
    #: The ``completion_tokens`` of the turn's ``usage``, as logged; None when it reported none.
    completion_tokens: int | None = None


#: Called from the worker threads as each turn starts and ends (``run_local``'s ``on_turn``).
TurnHook = Callable[[TurnEvent], None]


def completion_tokens(record: Mapping[str, Any] | None) -> int | None:
    """The ``completion_tokens`` a turn's record reports (an endpoint's ``usage``), or None."""
    usage = (record or {}).get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, Mapping) else None
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0 else None


def _tell(on_turn: TurnHook | None, event: TurnEvent) -> None:
    """Report a turn to the progress hook; a display that fails never fails the sample."""
    if on_turn is None:
        return
    try:
        on_turn(event)
    except Exception:
        logger.debug("the turn hook failed on %s", event, exc_info=True)


def _env_verdict(info: Mapping[str, Any]) -> SampleVerdict:
    """The verdict the env gave in ``info``; ``failed`` while it has given none (an episode
    stopped before its end, whose row is logged as ``failed`` anyway)."""
    given = info.get("verdict")
    return RowVerdict.FAILED if given is None else Verdict(given)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class _EpisodeFailed(Exception):
    """An exception raised mid-episode, carrying the turns played before it."""

    def __init__(self, error: BaseException, partial: SampleResult):
        super().__init__(str(error))
        self.error, self.partial = error, partial


def run_episode(env: gym.Env, agent: Agent, spec: SampleSpec, on_turn: TurnHook | None = None) -> SampleResult:
    """Play one sample to its end: reset on the task, ask the agent, step, repeat. An
    endpoint that refuses a turn for the context's size ends the episode as
    ``context_overflow`` with the turns before it; any other exception after the reset
    comes with them too (``_EpisodeFailed``), so the failed row shows how far it got.
    ``on_turn`` hears each agent turn start and end (for a progress line, never a score)."""
    started = time.perf_counter()
    observation, info = env.reset(seed=spec.seed, options={"task_id": spec.task_id})
    if info.get("task_id") != spec.task_id:
        raise RuntimeError(f"{spec.env_id} reset to {info.get('task_id')!r}, not {spec.task_id!r}")
    reset_s = time.perf_counter() - started
    task_set, task_set_hash = info.get("task_set"), info.get("task_set_hash")
    metadata = _jsonable({key: value for key, value in info.items() if key not in BASE_INFO_KEYS})
    history: list[dict[str, str]] = []
    actions: list[str] = []
    turns: list[dict[str, Any]] = []
    observations = [observation]
    agent_s = env_s = 0.0
    reward, error = 0.0, None
    verdict: RowVerdict | None = None

    def result() -> SampleResult:
        timings = {"reset_s": reset_s, "agent_s": agent_s, "env_s": env_s, "total_s": time.perf_counter() - started}
        return SampleResult(
            env_id=spec.env_id, task_id=spec.task_id, rollout=spec.rollout, seed=spec.seed, agent=agent.name,
            actions=tuple(actions), observations=tuple(observations), reward=float(reward),
            verdict=verdict or _env_verdict(info), scoring_error=None if verdict else info.get("scoring_error"),
            detail=None if verdict or info.get("detail") is None else str(info["detail"]), metadata=metadata,
            timings={key: round(value, 6) for key, value in timings.items()}, turns=tuple(turns),
            final_info=_jsonable(dict(info)), error=error, task_set=task_set, task_set_hash=task_set_hash)

    try:
        for index in range(MAX_STEPS):
            mark = time.perf_counter()
            _tell(on_turn, TurnEvent(spec.key, index, finished=False))
            record: dict[str, Any] | None = None
            try:
                reply = agent.reply(Turn(spec.env_id, spec.task_id, spec.rollout, spec.seed, index, observation,
                                         tuple(history), info, env))
                record = _jsonable(dict(reply.record or {}))
            except ContextOverflow as exc:
                agent_s += time.perf_counter() - mark
                reward, verdict, error = 0.0, RowVerdict.CONTEXT_OVERFLOW, str(exc)
                return result()
            finally:
                _tell(on_turn, TurnEvent(spec.key, index, finished=True, completion_tokens=completion_tokens(record)))
            action = reply.text
            turns.append(record or {})
            agent_s += time.perf_counter() - mark
            mark = time.perf_counter()
            next_observation, step_reward, terminated, truncated, info = env.step(action)
            reward = float(step_reward)
            env_s += time.perf_counter() - mark
            logged = action if isinstance(action, str) else repr(action)
            history += [{"role": "user", "content": observation}, {"role": "assistant", "content": logged}]
            actions.append(logged)
            observations.append(next_observation)
            observation = next_observation
            if terminated or truncated:
                return result()
        raise RuntimeError(f"{spec.env_id} did not end the episode within {MAX_STEPS} steps")
    except Exception as exc:
        if len(turns) > len(actions):  # the reply came, the step failed: keep the reply's record aligned
            turns.pop()
        raise _EpisodeFailed(exc, result()) from exc


def take_sandbox(env: gym.Env) -> gym.Env:
    """Take ``env``'s sandbox now (envs take it on first use), so that a node without Docker
    fails its first sample up front, as ``SandboxUnavailableError``, even where that sample
    would only have answered."""
    core = core_env(env)
    if core.needs_sandbox:
        core.sandbox  # noqa: B018 - the property acquires it
    return env


def play(envs: dict[str, gym.Env], agent: Agent, spec: SampleSpec, make_kwargs: Mapping[str, Any],
         on_turn: TurnHook | None = None) -> Outcome:
    """``run_episode`` on this worker's env for the sample's id (made on first use); any
    exception becomes a ``SampleFailure`` (with the turns played before it) so one bad
    sample does not stop the eval."""
    try:
        env = envs.get(spec.env_id)
        if env is None:
            env = gym.make(spec.env_id, **make_kwargs)
            try:
                take_sandbox(env)
            except BaseException:
                env.close()
                raise
            envs[spec.env_id] = env
        return run_episode(env, agent, spec, on_turn)
    except _EpisodeFailed as failed:  # reported per sample, retried by --resume
        partial = failed.partial if failed.partial.actions else None
        return SampleFailure(spec, f"{type(failed.error).__name__}: {failed.error}", partial)
    except Exception as exc:
        return SampleFailure(spec, f"{type(exc).__name__}: {exc}")


def close_all(envs: dict[Key, gym.Env]) -> None:
    for env in envs.values():
        try:
            env.close()
        except Exception:  # closing is best effort
            pass
    envs.clear()


def _say(message: str) -> None:
    """What a Ctrl-C does to the episodes in flight: a warning, shown by the CLI at every --log-level."""
    logger.warning(message)


def _names(specs: Sequence[SampleSpec], limit: int = 6) -> str:
    shown = ", ".join(f"{spec.env_id} {spec.task_id} r{spec.rollout}" for spec in specs[:limit])
    return shown + (f" and {len(specs) - limit} more" if len(specs) > limit else "")


def run_local(specs: Sequence[SampleSpec], agent: Agent, on_outcome: Callable[[Outcome], None], *,
              concurrency: int = 1, make_kwargs: Mapping[str, Any] | None = None,
              say: Callable[[str], None] = _say, on_turn: TurnHook | None = None) -> None:
    """Play ``specs`` on ``concurrency`` threads in this process. Each thread owns its envs;
    the envs share the process-wide warm sandbox pool. ``on_turn`` hears every turn start and
    end, from the worker threads (a progress line's; it must be thread-safe).

    Ctrl-C starts no new episode, says how many are in flight and names each as it finishes
    (its outcome is delivered, so logged); a second Ctrl-C abandons the rest, names them,
    and delivers nothing after. Either way KeyboardInterrupt is raised once the wait ends.
    The main thread waits in ``time.sleep``, never in ``Thread.join``: on Python 3.11 an
    interrupt inside ``join`` can mark a running thread stopped, and its episode was lost."""
    work: queue.SimpleQueue[SampleSpec] = queue.SimpleQueue()
    for spec in specs:
        work.put(spec)
    stop = threading.Event()
    lock = threading.Lock()
    in_flight: dict[int, SampleSpec] = {}
    abandoned = False
    kwargs = dict(make_kwargs or {})
    count = max(1, min(concurrency, len(specs)))
    running = [count]

    def worker() -> None:
        envs: dict[str, gym.Env] = {}
        me = threading.get_ident()
        try:
            while not stop.is_set():
                try:
                    spec = work.get_nowait()
                except queue.Empty:
                    return
                with lock:
                    in_flight[me] = spec
                outcome = play(envs, agent, spec, kwargs, on_turn)
                with lock:
                    in_flight.pop(me, None)
                    if abandoned:
                        return
                    on_outcome(outcome)
                    if stop.is_set():
                        say(f"finished {_names([spec])}; {len(in_flight)} still in flight")
        finally:
            close_all(envs)
            with lock:
                running[0] -= 1

    threads = [threading.Thread(target=worker, name=f"gym-sysmath-eval-{i}", daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()

    def wait() -> None:
        while True:
            with lock:
                if not running[0]:
                    return
            time.sleep(0.1)

    try:
        wait()
        return
    except KeyboardInterrupt:
        stop.set()
        with lock:
            flying = list(in_flight.values())
        say(f"interrupted: no new episodes; waiting for the {len(flying)} in flight to finish and be logged "
            f"({_names(flying)}); Ctrl-C again abandons them")
    try:
        wait()
    except KeyboardInterrupt:
        with lock:
            abandoned = True
            flying = list(in_flight.values())
        say(f"abandoned {len(flying)} episode(s) in flight, not logged ({_names(flying, 20)}); --resume plays them")
    raise KeyboardInterrupt

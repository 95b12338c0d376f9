"""Run samples: ``run_episode`` plays one; ``run_local`` runs many on threads, each thread
owning its own env instances while all share the process's warm sandbox pool
(``integrations.ray_rollouts`` runs the same ``play`` on Ray actors).
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from gym_sysmath.agents import Agent, Turn
from gym_sysmath.env import INFO_KEYS
from gym_sysmath.evaluation.plan import SampleSpec

#: ``info`` fields every env sets on every step: not task metadata.
BASE_INFO_KEYS = frozenset({*INFO_KEYS, "detail"})  # the contract's fields: not task metadata
#: A safety net: every family ends an episode within its ``max_turns``.
MAX_STEPS = 256


@dataclass(frozen=True)
class SampleResult:
    """One played episode, as logged: ``observations[0]`` is the prompt and
    ``observations[i + 1]`` what the env answered to ``actions[i]``. ``turns[i]`` is the
    agent's record of how ``actions[i]`` was made (for ``openai``: response id and model,
    ``finish_reason``, token ``usage``, latency and attempts), ``{}`` when it keeps none."""

    env_id: str
    task_id: str
    rollout: int
    seed: int
    agent: str
    actions: tuple[str, ...]
    observations: tuple[str, ...]
    reward: float
    verdict: str
    scoring_error: str | None
    detail: str | None
    metadata: Mapping[str, Any]
    timings: Mapping[str, float]
    turns: tuple[Mapping[str, Any], ...] = ()

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.env_id, self.task_id, self.rollout)

    def to_record(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id, "task_id": self.task_id, "rollout": self.rollout, "seed": self.seed,
            "agent": self.agent, "actions": list(self.actions), "observations": list(self.observations),
            "reward": self.reward, "verdict": self.verdict, "scoring_error": self.scoring_error,
            "detail": self.detail, "metadata": dict(self.metadata), "timings": dict(self.timings),
            "turns": [dict(turn) for turn in self.turns],
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
        )


@dataclass(frozen=True)
class SampleFailure:
    """A sample that produced no result (the agent or the host failed, not the task's
    grading): it is not logged, so ``--resume`` plays it again."""

    spec: SampleSpec
    error: str


Outcome = SampleResult | SampleFailure


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def run_episode(env: gym.Env, agent: Agent, spec: SampleSpec) -> SampleResult:
    """Play one sample to its end: reset on the task, ask the agent, step, repeat."""
    started = time.perf_counter()
    observation, info = env.reset(seed=spec.seed, options={"task_id": spec.task_id})
    if info.get("task_id") != spec.task_id:
        raise RuntimeError(f"{spec.env_id} reset to {info.get('task_id')!r}, not {spec.task_id!r}")
    reset_s = time.perf_counter() - started
    metadata = _jsonable({key: value for key, value in info.items() if key not in BASE_INFO_KEYS})
    history: list[dict[str, str]] = []
    actions: list[str] = []
    turns: list[dict[str, Any]] = []
    observations = [observation]
    agent_s = env_s = 0.0
    for index in range(MAX_STEPS):
        mark = time.perf_counter()
        reply = agent.reply(Turn(spec.env_id, spec.task_id, spec.rollout, spec.seed, index, observation,
                                 tuple(history), info, env))
        action = reply.text
        turns.append(_jsonable(dict(reply.record or {})))
        agent_s += time.perf_counter() - mark
        mark = time.perf_counter()
        next_observation, reward, terminated, truncated, info = env.step(action)
        env_s += time.perf_counter() - mark
        logged = action if isinstance(action, str) else repr(action)
        history += [{"role": "user", "content": observation}, {"role": "assistant", "content": logged}]
        actions.append(logged)
        observations.append(next_observation)
        observation = next_observation
        if terminated or truncated:
            break
    else:
        raise RuntimeError(f"{spec.env_id} did not end the episode within {MAX_STEPS} steps")
    timings = {"reset_s": reset_s, "agent_s": agent_s, "env_s": env_s, "total_s": time.perf_counter() - started}
    return SampleResult(
        env_id=spec.env_id, task_id=spec.task_id, rollout=spec.rollout, seed=spec.seed, agent=agent.name,
        actions=tuple(actions), observations=tuple(observations), reward=float(reward),
        verdict=str(info.get("verdict")), scoring_error=info.get("scoring_error"),
        detail=None if info.get("detail") is None else str(info["detail"]), metadata=metadata,
        timings={key: round(value, 6) for key, value in timings.items()}, turns=tuple(turns),
    )


def play(envs: dict[str, gym.Env], agent: Agent, spec: SampleSpec, make_kwargs: Mapping[str, Any]) -> Outcome:
    """``run_episode`` on this worker's env for the sample's id (made on first use); any
    exception becomes a ``SampleFailure`` so one bad sample does not stop the eval."""
    try:
        env = envs.get(spec.env_id)
        if env is None:
            env = envs[spec.env_id] = gym.make(spec.env_id, **make_kwargs)
        return run_episode(env, agent, spec)
    except Exception as exc:  # reported per sample, retried by --resume
        return SampleFailure(spec, f"{type(exc).__name__}: {exc}")


def close_all(envs: dict[str, gym.Env]) -> None:
    for env in envs.values():
        try:
            env.close()
        except Exception:  # closing is best effort
            pass
    envs.clear()


def run_local(specs: Sequence[SampleSpec], agent: Agent, on_outcome: Callable[[Outcome], None], *,
              concurrency: int = 1, make_kwargs: Mapping[str, Any] | None = None) -> None:
    """Play ``specs`` on ``concurrency`` threads in this process. Each thread owns its envs;
    the envs share the process-wide warm sandbox pool. Ctrl-C lets the episodes in flight
    finish (their results are logged) and then re-raises."""
    work: queue.SimpleQueue[SampleSpec] = queue.SimpleQueue()
    for spec in specs:
        work.put(spec)
    stop = threading.Event()
    kwargs = dict(make_kwargs or {})

    def worker() -> None:
        envs: dict[str, gym.Env] = {}
        try:
            while not stop.is_set():
                try:
                    spec = work.get_nowait()
                except queue.Empty:
                    return
                on_outcome(play(envs, agent, spec, kwargs))
        finally:
            close_all(envs)

    threads = [threading.Thread(target=worker, name=f"gym-sysmath-eval-{i}", daemon=True)
               for i in range(max(1, min(concurrency, len(specs))))]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    except KeyboardInterrupt:
        stop.set()
        for thread in threads:
            thread.join()
        raise

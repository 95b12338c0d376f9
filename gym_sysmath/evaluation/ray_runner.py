"""The eval's Ray runner: episodes of a plan played on Ray actors, one warm sandbox pool per
actor (see ``gym_sysmath.integrations.ray_rollouts``, the public face of this module, for what
runs where). It lives in the evaluation package so that ``evaluate(..., ray=...)`` needs nothing
from ``integrations``; Ray itself is imported only inside these functions.
"""

from __future__ import annotations

import logging
import os
import socket
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from gym_sysmath.agents import Agent, OpenAIAgent
from gym_sysmath.evaluation.plan import SampleSpec
from gym_sysmath.evaluation.run import Outcome, SampleFailure, close_all, play

#: Episodes queued on each actor, so it starts the next one while the driver handles the last.
IN_FLIGHT_PER_WORKER = 2

#: Scoring-error causes that mean the actor's node cannot start a sandbox at all.
UNSTARTABLE_CAUSES = ("container_start_failed",)


@dataclass(frozen=True)
class SandboxDown:
    """A sample its actor could not run because the actor's sandbox cannot start there."""

    spec: SampleSpec
    worker: str
    reason: str


def sandbox_down_reason(outcome: Outcome) -> str | None:
    """Why ``outcome`` says its node cannot run a sandbox, or None when it is an ordinary result."""
    if isinstance(outcome, SampleFailure):
        return outcome.error if outcome.error.startswith("SandboxUnavailableError:") else None
    scoring_error = outcome.scoring_error or ""
    return scoring_error if scoring_error.startswith(UNSTARTABLE_CAUSES) else None


class RolloutWorker:
    """The body of one Ray actor: envs made on first use (one pool per actor process)."""

    def __init__(self, agent: Agent, make_kwargs: Mapping[str, Any]):
        import gym_sysmath  # noqa: F401 - registers the ids in this worker process

        self.agent = agent
        self.make_kwargs = dict(make_kwargs)
        self.envs: dict[str, gym.Env] = {}

    def play(self, spec: SampleSpec) -> Outcome | SandboxDown:
        outcome = play(self.envs, self.agent, spec, self.make_kwargs)
        reason = sandbox_down_reason(outcome)
        return outcome if reason is None else SandboxDown(spec, self.where(), reason)

    def where(self) -> str:
        return f"{socket.gethostname()}:{os.getpid()}"

    def close(self) -> None:
        close_all(self.envs)


def _ray():
    try:
        import ray
    except ImportError as exc:
        raise ImportError("the Ray path needs ray: pip install 'ray>=2' (or the package's ray extra)") from exc
    return ray


def connect(address: str | None = None) -> bool:
    """Join the cluster at ``address`` (None: ``RAY_ADDRESS`` or a new local instance).
    Returns True when this call connected, so the caller shuts down what it started."""
    ray = _ray()
    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, logging_level=logging.WARNING)
    else:
        ray.init(logging_level=logging.WARNING)
    return True


def _runtime_env(agent: Agent) -> dict[str, Any] | None:
    """Hand the driver's API key to the actors, which run where the variable may be unset."""
    variable = agent.api_key_variable if isinstance(agent, OpenAIAgent) else None
    if variable and os.environ.get(variable):
        return {"env_vars": {variable: os.environ[variable]}}
    return None


def run_ray(specs: Sequence[SampleSpec], agent: Agent, on_outcome: Callable[[Outcome], None], *,
            workers: int | None = None, make_kwargs: Mapping[str, Any] | None = None, address: str | None = None,
            cpus_per_worker: float = 1.0) -> dict[str, Any]:
    """Play ``specs`` on up to ``workers`` actors (default: one per cluster CPU), calling
    ``on_outcome`` on the driver as each lands. A dead actor's samples become
    ``SampleFailure``s and the others carry on; an actor whose sandbox cannot start is marked
    unhealthy and its samples are played again elsewhere.

    Returns ``{"workers", "unhealthy": [{"worker", "reason", "samples_rerun"}], "samples_rerun"}``."""
    if not specs:
        return {"workers": 0, "unhealthy": [], "samples_rerun": 0}
    ray = _ray()
    owned = connect(address)
    actors: list[Any] = []
    try:
        cluster_cpus = float(ray.cluster_resources().get("CPU", 1.0))
        fits = max(1, int(cluster_cpus // cpus_per_worker)) if cpus_per_worker > 0 else len(specs)
        count = max(1, min(workers or fits, fits, len(specs)))
        actor_class = ray.remote(RolloutWorker)
        options: dict[str, Any] = {"num_cpus": cpus_per_worker, "scheduling_strategy": "SPREAD"}
        runtime_env = _runtime_env(agent)
        if runtime_env:
            options["runtime_env"] = runtime_env
        actors = [actor_class.options(**options).remote(agent, dict(make_kwargs or {})) for _ in range(count)]
        unhealthy = dispatch(ray, actors, deque(specs), on_outcome)
        return {"workers": count, "unhealthy": unhealthy,
                "samples_rerun": sum(entry["samples_rerun"] for entry in unhealthy)}
    finally:
        _stop(ray, actors)
        if owned:
            ray.shutdown()


def dispatch(ray: Any, actors: list[Any], waiting: deque[SampleSpec],
             on_outcome: Callable[[Outcome], None]) -> list[dict[str, Any]]:
    """Play ``waiting`` on ``actors`` (``RolloutWorker`` actors), keeping every usable one busy;
    returns the unhealthy actors' report (``run_ray``'s ``unhealthy``)."""
    in_flight: dict[Any, tuple[Any, SampleSpec]] = {}
    dead: set[int] = set()
    unhealthy: dict[int, dict[str, Any]] = {}  # by id(actor): its report entry

    def submit(actor: Any) -> None:
        if waiting and id(actor) not in dead and id(actor) not in unhealthy:
            spec = waiting.popleft()
            in_flight[actor.play.remote(spec)] = (actor, spec)

    def usable() -> list[Any]:
        return [actor for actor in actors if id(actor) not in dead and id(actor) not in unhealthy]

    for _ in range(IN_FLIGHT_PER_WORKER):
        for actor in actors:
            submit(actor)
    while in_flight:
        ready, _ = ray.wait(list(in_flight), num_returns=1)
        for ref in ready:
            actor, spec = in_flight.pop(ref)
            try:
                outcome = ray.get(ref)
            except Exception as exc:  # an actor or its node died
                dead.add(id(actor))
                outcome = SampleFailure(spec, f"ray worker lost: {type(exc).__name__}: {exc}")
            if isinstance(outcome, SandboxDown):
                entry = unhealthy.setdefault(id(actor), {"worker": outcome.worker, "reason": outcome.reason[:300],
                                                         "samples_rerun": 0})
                entry["samples_rerun"] += 1
                waiting.appendleft(spec)  # played again on a healthy actor
                for other in usable():  # an idle healthy actor takes it now
                    if sum(1 for owner, _ in in_flight.values() if owner is other) < IN_FLIGHT_PER_WORKER:
                        submit(other)
                        break
            else:
                on_outcome(outcome)
                submit(actor)
        if waiting and not usable():
            reasons = ("; ".join(sorted({entry["reason"] for entry in unhealthy.values()}))
                       or "every ray worker was lost")
            while waiting:
                on_outcome(SampleFailure(waiting.popleft(), f"no healthy ray worker left: {reasons}"[:600]))
    return list(unhealthy.values())


def _stop(ray: Any, actors: Sequence[Any]) -> None:
    """Close each actor's envs (its containers go with its pool), then end the actor."""
    if not actors:
        return
    try:
        ray.get([actor.close.remote() for actor in actors], timeout=60)
    except Exception:  # lost actors have nothing left to close
        pass
    for actor in actors:
        try:
            ray.kill(actor)
        except Exception:  # already gone
            pass

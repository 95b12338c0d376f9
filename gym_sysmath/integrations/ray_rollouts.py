"""Episodes spread over a Ray cluster, for evals and rollout collection beyond one machine.

Each Ray actor makes its own envs, and so its own warm sandbox pool on the node it lands on:
the Docker daemon is local to each node, so no node's containers are driven from another.
Actors are placed with the ``SPREAD`` strategy and each plays one episode at a time through
the same ``run_episode`` as the local path, so a sample's result does not depend on where it
ran. Every node needs gym-sysmath installed and its sandbox image built
(``gym-sysmath sandbox build``); a ``python:MODULE:FUNCTION`` agent's module must be
importable there too.

A node whose sandbox cannot start (no Docker daemon, an unreachable ``DOCKER_HOST``, no
image) would otherwise turn every sample routed to it into a failure. An actor that reports
so (``SandboxUnavailableError`` making an env, or a ``container_start_failed`` scoring error)
is marked unhealthy and gets no more work; the samples it could not run are played again on
the healthy actors, and ``run_ray`` returns a report of it (``summary["ray"]`` in an eval).

Ray is imported only inside these functions: the package works without it.

    from gym_sysmath.agents import make_agent
    from gym_sysmath.evaluation import plan_samples
    from gym_sysmath.integrations.ray_rollouts import ray_rollouts

    agent = make_agent("reference")
    specs = plan_samples("CsappExact-v0", task_ids, agent, rollouts=4)
    outcomes = ray_rollouts(specs, agent, address="auto", workers=16)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gym_sysmath.agents import Agent
from gym_sysmath.evaluation.plan import SampleSpec
from gym_sysmath.evaluation.ray_runner import (
    IN_FLIGHT_PER_WORKER,
    UNSTARTABLE_CAUSES,
    RolloutWorker,
    SandboxDown,
    connect,
    dispatch,
    run_ray,
    sandbox_down_reason,
)
from gym_sysmath.evaluation.run import Outcome, SampleFailure

__all__ = ["IN_FLIGHT_PER_WORKER", "UNSTARTABLE_CAUSES", "RolloutWorker", "SandboxDown", "connect", "dispatch",
           "ray_rollouts", "run_ray", "sandbox_down_reason"]


def ray_rollouts(specs: Sequence[SampleSpec], agent: Agent, *, address: str | None = None,
                 workers: int | None = None, make_kwargs: Mapping[str, Any] | None = None) -> list[Outcome]:
    """Play ``specs`` over Ray and return their outcomes in the order of ``specs``."""
    outcomes: dict[tuple[str, str, int], Outcome] = {}

    def keep(outcome: Outcome) -> None:
        spec = outcome.spec if isinstance(outcome, SampleFailure) else outcome
        outcomes[spec.key] = outcome

    run_ray(specs, agent, keep, workers=workers, make_kwargs=make_kwargs, address=address)
    return [outcomes[spec.key] for spec in specs]

"""Plan an eval: which samples to play, each (env id, task id, rollout) with its own seed.

A sample's seed is derived from its identity and the run seed alone, so it does not depend on
``-n``, on order or on concurrency.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gym_sysmath.agents import Agent


class EvalError(RuntimeError):
    """The eval cannot start as asked (a results file from another run, an empty plan)."""


@dataclass(frozen=True)
class SampleSpec:
    """One episode to play."""

    env_id: str
    task_id: str
    rollout: int
    seed: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.env_id, self.task_id, self.rollout)


def sample_seed(run_seed: int, env_id: str, task_id: str, rollout: int) -> int:
    """A 31-bit seed from the sample's identity alone (stable across processes and runs)."""
    sequence = np.random.SeedSequence([run_seed, zlib.crc32(env_id.encode()), zlib.crc32(task_id.encode()), rollout])
    return int(sequence.generate_state(1)[0] >> 1)


def choose_tasks(env_id: str, task_ids: Sequence[str], n: int | None) -> list[str]:
    """``n`` of ``task_ids`` (all when ``n`` is None or large), in task order: the first
    ``n`` of a permutation fixed per env id. Not the first ``n`` (task lists are grouped by
    topic), not evenly spaced (that aliases with the grouping), and not tied to ``--seed``,
    so runs with different seeds see the same tasks; a larger ``n`` keeps a smaller one's."""
    if n is None or n >= len(task_ids):
        return list(task_ids)
    order = np.random.default_rng(zlib.crc32(env_id.encode())).permutation(len(task_ids))
    return [task_ids[i] for i in sorted(order[: max(n, 0)])]


def plan_samples(env_id: str, task_ids: Sequence[str], agent: Agent, n: int | None = None,
                 rollouts: int = 1, seed: int = 0) -> list[SampleSpec]:
    """The samples of one env, in task order then rollout order."""
    decided = agent.samples(env_id, task_ids)
    if decided is None:
        pairs = [(task_id, rollout) for task_id in choose_tasks(env_id, task_ids, n) for rollout in range(rollouts)]
    else:
        chosen = set(choose_tasks(env_id, list(dict.fromkeys(task_id for task_id, _ in decided)), n))
        pairs = [pair for pair in decided if pair[0] in chosen]
        repeated = [pair for pair, count in Counter(pairs).items() if count > 1]
        if repeated:
            task_id, rollout = repeated[0]
            raise EvalError(f"{agent.name} plans {env_id} task {task_id!r} rollout {rollout} more than once; "
                            "each sample must be planned once")
    return [SampleSpec(env_id, task_id, rollout, sample_seed(seed, env_id, task_id, rollout))
            for task_id, rollout in pairs]

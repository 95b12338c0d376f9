"""verifiers (v1): a taskset plugin, so ``vf-eval gym-sysmath`` and prime-rl run every family.

verifiers resolves a taskset id to an installed package exporting one ``Taskset`` subclass
(and optionally one ``Env`` subclass) through ``__all__``; ``gym_sysmath`` re-exports the two
below, so the id is ``gym-sysmath``. ``--env.taskset.env-id`` picks the family (``split``,
``n``, ``seed``, ``max-turns``, ``env-kwargs``, ``retries`` as in ``build_dataset``).

Each task's data carries a task reference (``ref``), never the key. ``SysmathVfEnv.run``
plays the user, like verifiers' own TextArena env: the model speaks first on the task prompt,
each reply is one ``env.step`` host-side (a python block runs in the episode's sandboxed
session and its output is the next user turn), and the episode's verdict is the reward
``sysmath`` (with ``trace.info["verdict"]``). The player's harness is verifiers' ``null``
chat harness: the code runs in gym-sysmath's sandbox, not in a harness box.

Scoring errors are kept apart the way verifiers keeps rollout failures: a harness failure
that survives its replay on a fresh container raises ``verifiers.v1.SandboxError`` from
``run``, so the episode is recorded with the error (``ok`` false, ``sandbox_error``), which
``vf-eval`` reports and ``--resume`` re-runs, and which never becomes a reward.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any, Literal

import verifiers.v1 as vf

from gym_sysmath.integrations.episodes import Episode, ScoringError, TaskRef

__all__ = ["SysmathData", "SysmathTask", "SysmathTaskset", "SysmathTasksetConfig", "SysmathVfEnv",
           "SysmathVfEnvConfig"]

#: Train draws made at a time when ``n`` is unset (the taskset is then infinite).
_TRAIN_CHUNK = 64


class SysmathTasksetConfig(vf.TasksetConfig):
    env_id: str = "CsappExact-v0"
    """The gym-sysmath id (``gym-sysmath list``)."""
    split: Literal["eval", "train"] = "eval"
    n: int | None = None
    """Tasks to load: eval, the ones ``eval -n`` picks (all if unset); train, draws from
    ``seed`` on (unbounded if unset)."""
    seed: int = 0
    max_turns: int | None = None
    """Turns per episode (the family's default if unset); the prompt says how many."""
    env_kwargs: dict[str, Any] = {}
    """Extra ``gym.make`` arguments, e.g. ``{"sandbox": "docker"}``."""
    retries: int = 1
    """Replays on a fresh container before a harness failure is raised."""


class SysmathData(vf.TaskData):
    ref: dict[str, Any]
    """The task reference (``TaskRef``): env id, task id, split, seed, max_turns."""


class SysmathTask(vf.Task[SysmathData, vf.State, vf.TaskConfig]):
    @property
    def key(self) -> str:
        return TaskRef.parse(self.data.ref).to_json()


class SysmathTaskset(vf.Taskset[SysmathTask, SysmathTasksetConfig]):
    @property
    def bounded(self) -> bool:
        return (self.config.split == "eval" or self.config.n is not None) if self._bounded is None else self._bounded

    def load(self) -> Iterator[SysmathTask]:
        from gym_sysmath.integrations.trl import build_dataset

        config = self.config
        kwargs = {"max_turns": config.max_turns, "env_kwargs": {**config.env_kwargs, "sandbox": "process"}}
        if config.split == "eval":
            chunks: Iterator[list[dict[str, Any]]] = iter([build_dataset(config.env_id, n=config.n, **kwargs)])
        elif config.n is not None:
            chunks = iter([build_dataset(config.env_id, split="train", n=config.n, seed=config.seed, **kwargs)])
        else:
            chunks = (build_dataset(config.env_id, split="train", n=_TRAIN_CHUNK, seed=config.seed + k * _TRAIN_CHUNK,
                                    **kwargs) for k in itertools.count())
        for rows in chunks:
            for row in rows:
                ref = TaskRef.parse({**row, "max_turns": config.max_turns})
                yield SysmathTask(SysmathData(id=ref.to_json(), name=f"{ref.env_id}/{ref.task_id}",
                                              prompt=row["prompt"], ref=asdict(ref)),
                                  config.task)


class SysmathVfEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"})


class SysmathVfEnv(vf.Env[SysmathVfEnvConfig]):
    async def run(self, task: SysmathTask, agents: Any) -> None:
        config: SysmathTasksetConfig = self.taskset.config
        episode = Episode(TaskRef.parse(task.data.ref), env_kwargs=config.env_kwargs, retries=config.retries,
                          own_env=True)
        try:
            await asyncio.to_thread(episode.reset)
            await play(episode, agents.player, task)
        finally:
            await asyncio.to_thread(episode.close)


async def play(episode: Episode, player: Any, task: SysmathTask) -> None:
    """One episode with ``player`` (a verifiers agent): each reply is one ``env.step``."""
    reward = 0.0
    async with player.interaction(task) as interaction:
        segment = await interaction.turn()
        while not segment.terminated:
            try:
                observation, reward, terminated, truncated, _ = await asyncio.to_thread(
                    episode.step, segment.last_reply)
            except ScoringError as error:
                raise vf.SandboxError(str(error)) from error
            if terminated or truncated:
                break
            segment = await interaction.turn(observation)
    trace = interaction.trace
    trace.record_reward("sysmath", reward, 1.0)
    trace.info["verdict"] = episode.info.get("verdict")
    trace.info["task_id"] = episode.ref.task_id

"""verifiers (v1): a taskset plugin, so ``vf-eval gym-sysmath`` and prime-rl run every family.

verifiers resolves a taskset id to an installed package exporting one ``Taskset`` subclass
(and optionally one ``Env`` subclass) through ``__all__``; ``gym_sysmath`` re-exports the two
below, so the id is ``gym-sysmath``. ``--env.taskset.env-id`` picks the family (``split``,
``n``, ``seed``, ``max-turns``, ``env-kwargs``, ``retries`` as in ``build_dataset``;
``--env.taskset.remote URL`` plays every episode on a ``gym-sysmath serve`` server, with
``--env.taskset.token`` or ``GYM_SYSMATH_SERVE_TOKEN``).

Each task's data carries a task reference (``ref``), never the key. ``SysmathVfEnv.run``
plays the user, like verifiers' own TextArena env: the model speaks first on the task prompt,
each reply is one ``env.step`` host-side (a python block runs in the episode's sandboxed
session and its output is the next user turn), and the episode's verdict is the reward
``sysmath`` (with ``trace.info["verdict"]``). The player's harness is verifiers' ``null``
chat harness: the code runs in gym-sysmath's sandbox, not in a harness box.

Every reply goes through ``answers.strip_end_tokens`` before ``env.step`` (a model served
without stripping its end-of-turn token still grades).

Turn caps: verifiers' ``--env.player.max-turns`` defaults to ``None`` (no cap) and the episode
runs the env's own budget (``--env.taskset.max-turns``, else the family's default), whose last
turn is graded. A player cap below that budget becomes the episode's budget (the prompt says
so, and the reply on the capped turn is the graded last turn); a cap below an explicit
``--env.taskset.max-turns`` is refused when the config is built. An interaction that verifiers
ends early for any other reason (a token cap, the agent timeout, a ``@stop``) is closed with
``episodes.CLOSING_ACTION`` and graded from what the episode left, like ``grade_completion``:
the reward is always the env's verdict (``trace.info["verdict"]``, and ``closed_by`` names the
stop).

Failures are kept apart the way verifiers keeps them: a rollout verifiers records as failed
(a model call that broke, the harness program dying) gets no ``sysmath`` reward at all (the
trace's ``ok`` is false and its error is on it; vf-eval's headline reward is the mean over
rollouts that did not fail, with the error share beside it); a harness failure that survives
its replay on a fresh container raises ``verifiers.v1.SandboxError`` from ``run``, so the
episode is recorded with the error (``ok`` false, ``sandbox_error``), which ``vf-eval``
reports and ``--resume`` re-runs, and which never becomes a reward.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any, Literal

import verifiers.v1 as vf
from pydantic import model_validator

from gym_sysmath.answers import strip_end_tokens
from gym_sysmath.async_env import run_blocking
from gym_sysmath.integrations.episodes import CLOSING_ACTION, Episode, ScoringError, TaskRef, default_turns

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
    """Turns per episode (the family's default if unset, or ``--env.player.max-turns`` if that
    is lower); the prompt says how many."""
    env_kwargs: dict[str, Any] = {}
    """Extra ``gym.make`` arguments, e.g. ``{"sandbox": "docker"}``."""
    retries: int = 1
    """Replays on a fresh container before a harness failure is raised."""
    remote: str | None = None
    """A ``gym-sysmath serve`` URL: every episode runs there (``env-kwargs`` then leaves
    ``sandbox`` to the server); the tasks' ``task_set`` is checked against the server's."""
    token: str | None = None
    """The server's token (default ``GYM_SYSMATH_SERVE_TOKEN``)."""


class SysmathData(vf.TaskData):
    ref: dict[str, Any]
    """The task reference (``TaskRef.to_json``): env id, task id, split, seed, max_turns, the
    ``gym.make`` arguments the task was made with (``env_kwargs``) and the task set."""


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
                                              prompt=row["prompt"], ref=json.loads(ref.to_json())),
                                  config.task)


class SysmathVfEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"})

    @model_validator(mode="after")
    def _one_turn_budget(self) -> SysmathVfEnvConfig:
        """The player's turn cap and the episode's budget agree, so the capped turn is graded."""
        taskset, cap = self.taskset, self.player.max_turns
        if not isinstance(taskset, SysmathTasksetConfig) or cap is None:
            return self
        if taskset.max_turns is None:
            if cap < default_turns(taskset.env_id):
                taskset.max_turns = cap
        elif cap < taskset.max_turns:
            raise ValueError(f"--env.player.max-turns {cap} is below --env.taskset.max-turns {taskset.max_turns}: "
                             f"verifiers would end the episode before its graded last turn. Set one of them, or "
                             f"both to the same number")
        return self


class SysmathVfEnv(vf.Env[SysmathVfEnvConfig]):
    async def run(self, task: SysmathTask, agents: Any) -> None:
        config: SysmathTasksetConfig = self.taskset.config
        episode = Episode(TaskRef.parse(task.data.ref), env_kwargs=config.env_kwargs, retries=config.retries,
                          own_env=True, remote=config.remote, token=config.token)
        try:
            await run_blocking(episode.reset)
            await play(episode, agents.player, task)
        finally:
            await run_blocking(episode.close)


async def play(episode: Episode, player: Any, task: SysmathTask) -> None:
    """One episode with ``player`` (a verifiers agent): each reply is one ``env.step``.

    The reward is the episode's verdict. An interaction verifiers ends while the episode is
    open is closed with ``CLOSING_ACTION`` (graded from what it left) when it stopped, and
    gets no reward when it failed (its trace carries the error; ``ok`` is false)."""
    reward = 0.0
    async with player.interaction(task) as interaction:
        segment = await interaction.turn()
        while not segment.terminated:
            reward, observation = await _step(episode, strip_end_tokens(segment.last_reply))
            if episode.done:
                break
            segment = await interaction.turn(observation)
        trace = interaction.trace
        trace.info["task_id"] = episode.ref.task_id
        if not episode.done:
            if trace.errors:  # the rollout failed: verifiers records it as such, never as a score
                trace.info["verdict"] = None
                return
            trace.info["closed_by"] = trace.stop_condition or "the harness ended"
            reward, _ = await _step(episode, CLOSING_ACTION)
        trace.record_reward("sysmath", reward, 1.0)
        trace.info["verdict"] = episode.info.get("verdict")


async def _step(episode: Episode, action: str) -> tuple[float, str]:
    try:
        observation, reward, _, _, _ = await run_blocking(episode.step, action)
    except ScoringError as error:
        raise vf.SandboxError(str(error)) from error
    return reward, observation

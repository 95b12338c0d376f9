"""Batched stepping: n envs of one family whose sandbox jobs run concurrently on one pool.

Registered as each id's ``vector_entry_point``, so
``gym.make_vec(id, n, vectorization_mode="vector_entry_point")`` returns this. Unlike
``SyncVectorEnv`` (one job at a time) or ``AsyncVectorEnv`` (a process, and a pool, per env),
the n envs live in this process, share one warm pool, and step in threads: the host only
waits on sockets while the containers work.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from gymnasium.envs.registration import load_env_creator
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from gym_sysmath.env import SysmathEnv


class SysmathVectorEnv(VectorEnv):
    """``num_envs`` copies of one family stepping concurrently (autoreset: next step).

    Arguments: ``entry_point`` (the single env's class or "module:Class"), ``num_envs``,
    ``pool_size`` (a cap on the sandbox containers; default: one per live episode, each episode
    in a container of its own), and the family's own keyword arguments.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": ["ansi"]}

    def __init__(self, entry_point: str | type[SysmathEnv], num_envs: int = 1, pool_size: int | None = None,
                 **env_kwargs: Any):
        creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
        env_kwargs.pop("max_episode_steps", None)
        self.envs: list[SysmathEnv] = [creator(pool_size=pool_size, **env_kwargs) for _ in range(num_envs)]
        self.num_envs = num_envs
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.render_mode = env_kwargs.get("render_mode")
        self._autoreset = np.zeros(num_envs, dtype=bool)
        self._threads = ThreadPoolExecutor(max_workers=num_envs, thread_name_prefix="gym-sysmath-step")

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[tuple[str, ...], dict[str, Any]]:
        if seed is None or isinstance(seed, int):
            seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"expected {self.num_envs} seeds, got {len(seeds)}")
        infos: dict[str, Any] = {}
        observations = []
        for index, (env, env_seed) in enumerate(zip(self.envs, seeds, strict=True)):
            observation, info = env.reset(seed=env_seed, options=options)
            observations.append(observation)
            infos = self._add_info(infos, info, index)
        self._autoreset[:] = False
        return tuple(observations), infos

    def _guarded_step(self, index: int, action: str):
        try:
            return self._step_one(index, action)
        except Exception as exc:  # re-raised by step() once every env has stepped
            return exc

    def _step_one(self, index: int, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        env = self.envs[index]
        if self._autoreset[index]:
            observation, info = env.reset()
            return observation, 0.0, False, False, info
        return env.step(action)

    def step(self, actions: Sequence[str]):
        if len(actions) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {len(actions)}")
        if self.num_envs == 1:  # no thread hop for a single env
            outcomes = [self._guarded_step(0, actions[0])]
        else:
            outcomes = list(self._threads.map(self._guarded_step, range(self.num_envs), actions))
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        if failures:
            # an exception out of one env's step: every env starts a fresh episode next step,
            # instead of the failed ones refusing every later step until a reset
            self._autoreset[:] = True
            raise failures[0]
        results = outcomes
        infos: dict[str, Any] = {}
        for index, (*_, info) in enumerate(results):
            infos = self._add_info(infos, info, index)
        rewards = np.array([r[1] for r in results], dtype=np.float64)
        terminations = np.array([r[2] for r in results], dtype=bool)
        truncations = np.array([r[3] for r in results], dtype=bool)
        self._autoreset = terminations | truncations
        return tuple(r[0] for r in results), rewards, terminations, truncations, infos

    def render(self) -> tuple[str | None, ...]:
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        self._threads.shutdown(wait=True)
        for env in self.envs:
            env.close()


def vector_entry_point(entry_point: str):
    """The ``vector_entry_point`` callable registered for one family's id."""

    def make(num_envs: int = 1, **kwargs: Any) -> SysmathVectorEnv:
        return SysmathVectorEnv(entry_point, num_envs=num_envs, **kwargs)

    make.__qualname__ = make.__name__ = f"make_vector[{entry_point}]"
    return make

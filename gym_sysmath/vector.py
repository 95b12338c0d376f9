"""Batched stepping: n envs of one family whose sandbox jobs run concurrently on one pool.

Every registered id's ``vector_entry_point`` (``gym_sysmath.vector_ids:<id>``, see that module)
is ``make_vector(id, ...)``, so
``gym.make_vec(id, n, vectorization_mode="vector_entry_point")`` returns this for every family. Unlike
``SyncVectorEnv`` (one job at a time) or ``AsyncVectorEnv`` (a process, and a pool, per env),
the n envs live in this process, share one warm pool, and step in threads: the host only
waits on sockets while the containers work.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import load_env_creator
from gymnasium.error import ResetNeeded
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, VectorEnv
from gymnasium.vector.async_vector_env import AsyncState
from gymnasium.vector.utils import batch_space

from gym_sysmath.env import SysmathEnv


def _batched(env: object, entry_point: str | type[SysmathEnv]) -> SysmathEnv:
    """One env ``entry_point`` made, checked: the batch reads the gym-sysmath contract of each."""
    if not isinstance(env, SysmathEnv):
        raise TypeError(f"{entry_point!r} made a {type(env).__name__}, not a gym-sysmath env (SysmathEnv)")
    return env


class SysmathVectorEnv(VectorEnv):
    """``num_envs`` copies of one family stepping concurrently.

    Arguments: ``entry_point`` (the single env's class or "module:Class"), ``num_envs``,
    ``pool_size`` (a cap on the sandbox containers; default: one per live episode, each episode
    in a container of its own), ``max_episode_steps`` (truncate an episode after that many steps,
    as ``gym.make``'s ``TimeLimit`` does), ``autoreset_mode`` (Gymnasium's ``AutoresetMode``:
    ``NEXT_STEP`` by default, ``SAME_STEP`` or ``DISABLED``), and the family's own keyword
    arguments.

    ``SAME_STEP`` is the mode for LLM loops: an env whose episode ends is reset within the same
    ``step``, its new prompt returned as its observation and the last step's observation and
    info in ``infos["final_obs"]`` / ``infos["final_info"]``, so no generation is spent on a
    step that only resets. ``reset(options={"reset_mask": mask})`` resets only the masked envs.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": ["ansi"]}

    def __init__(self, entry_point: str | type[SysmathEnv], num_envs: int = 1, pool_size: int | None = None,
                 max_episode_steps: int | None = None,
                 autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP, **env_kwargs: Any):
        if max_episode_steps is not None and (isinstance(max_episode_steps, bool)
                                              or not isinstance(max_episode_steps, int) or max_episode_steps < 1):
            raise ValueError(f"max_episode_steps must be a positive int or None, got {max_episode_steps!r}")
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.metadata = {**self.metadata, "autoreset_mode": self.autoreset_mode}
        self.max_episode_steps = max_episode_steps
        creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
        self.envs = [_batched(creator(pool_size=pool_size, **env_kwargs), entry_point) for _ in range(num_envs)]
        self.num_envs = num_envs
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.render_mode = env_kwargs.get("render_mode")
        self._autoreset = np.zeros(num_envs, dtype=bool)
        self._elapsed = np.zeros(num_envs, dtype=np.int64)  # steps since each env's reset
        self._threads = ThreadPoolExecutor(max_workers=num_envs, thread_name_prefix="gym-sysmath-step")

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[tuple[str, ...], dict[str, Any]]:
        if seed is None or isinstance(seed, int):
            seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"expected {self.num_envs} seeds, got {len(seeds)}")
        options = dict(options) if options else None
        mask = np.ones(self.num_envs, dtype=bool)
        if options is not None and "reset_mask" in options:
            mask = self._check_reset_mask(options.pop("reset_mask"))
        infos: dict[str, Any] = {}
        observations = list(getattr(self, "_observations", [""] * self.num_envs))
        for index, (env, env_seed) in enumerate(zip(self.envs, seeds, strict=True)):
            if mask[index]:
                observations[index], info = env.reset(seed=env_seed, options=options)
                infos = self._add_info(infos, info, index)
        self._autoreset[mask] = False
        self._elapsed[mask] = 0
        self._observations = tuple(observations)
        return self._observations, infos

    def _check_reset_mask(self, mask: Any) -> np.ndarray:
        """Gymnasium's rules for ``options["reset_mask"]`` (``SyncVectorEnv.reset``)."""
        if not isinstance(mask, np.ndarray):
            raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(mask)}")
        if mask.shape != (self.num_envs,):
            raise ValueError(f"`options['reset_mask']` must have shape `({self.num_envs},)`, got {mask.shape}")
        if mask.dtype != np.bool_:
            raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {mask.dtype}")
        if not mask.any():
            raise ValueError(f"`options['reset_mask']` must contain at least one True value, got {mask}")
        return mask

    def _guarded_step(self, index: int, action: str):
        try:
            return self._step_one(index, action)
        except Exception as exc:  # re-raised by step() once every env has stepped
            return exc

    def _step_one(self, index: int, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        env = self.envs[index]
        if self._autoreset[index]:  # NEXT_STEP, or any mode after an exception out of a step
            self._elapsed[index] = 0
            observation, info = env.reset()
            return observation, 0.0, False, False, info
        observation, reward, terminated, truncated, info = env.step(action)
        self._elapsed[index] += 1
        if self.max_episode_steps is not None and self._elapsed[index] >= self.max_episode_steps:
            truncated = True  # what gymnasium.wrappers.TimeLimit does for gym.make
        if self.autoreset_mode == AutoresetMode.SAME_STEP and (terminated or truncated):
            final = {"final_obs": observation, "final_info": info}
            self._elapsed[index] = 0
            observation, reset_info = env.reset()
            return observation, reward, terminated, truncated, {**final, **reset_info}
        return observation, reward, terminated, truncated, info

    def step(self, actions: Sequence[str]):
        if len(actions) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {len(actions)}")
        if self.autoreset_mode == AutoresetMode.DISABLED and self._autoreset.any():
            finished = np.flatnonzero(self._autoreset).tolist()
            raise ResetNeeded(f"envs {finished} finished their episodes: with AutoresetMode.DISABLED, call "
                              f"reset(options={{'reset_mask': mask}}) for them before the next step")
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
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            self._autoreset[:] = False  # already reset within this step
        self._observations = tuple(r[0] for r in results)
        return self._observations, rewards, terminations, truncations, infos

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """An attribute of every env (``get_attr("messages")``: each episode's chat so far)."""
        return tuple(getattr(env, name) for env in self.envs)

    # As SyncVectorEnv's: an env without render_mode="ansi" renders None, which gymnasium's RenderFrame leaves out.
    def render(self) -> tuple[str | None, ...]:  # type: ignore[override]
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        self._threads.shutdown(wait=True)
        for env in self.envs:
            env.close()


class WorkerDiedError(RuntimeError):
    """A worker process of a ``SysmathAsyncVectorEnv`` died (killed, out of memory): its env
    and episode are gone. Its sandbox containers are removed by its owner watcher
    (``gym_sysmath.sandbox.daemon``); ``close()`` closes the other workers cleanly."""


class SysmathAsyncVectorEnv(AsyncVectorEnv):
    """Gymnasium's ``AsyncVectorEnv`` (one process per env, each with its own sandbox pool) that
    survives a worker's death: the first call after it raises ``WorkerDiedError`` naming the
    worker and how it died (every later call raises the same error), and ``close()`` closes the
    live workers and returns, where Gymnasium's class raises ``BrokenPipeError``,
    ``ConnectionResetError`` or ``EOFError`` from both. Same arguments as ``AsyncVectorEnv``;
    ``async_vector(env_id, num_envs, **kwargs)`` makes one for a registered id.
    (``gym.make_vec(id, n, vectorization_mode="async")`` builds Gymnasium's own class: a dead
    worker's containers are removed all the same, but its errors are Gymnasium's.)"""

    _death: WorkerDiedError | None = None

    def _dead_workers(self) -> list[int]:
        return [index for index, process in enumerate(self.processes) if not process.is_alive()]

    def _died(self) -> WorkerDiedError:
        """The error for the workers found dead (made once, then raised by every call)."""
        if self._death is None:
            dead = self._dead_workers()
            parts = []
            for index in dead:
                process = self.processes[index]
                code = process.exitcode
                how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
                       else f"exit status {code}")
                parts.append(f"worker {index} (pid {process.pid}) died, {how}")
            what = "; ".join(parts) or "a worker's pipe broke"
            self._death = WorkerDiedError(
                f"{what}: its env and its episode are gone (its sandbox containers are removed). "
                "close() this vector env (the live workers close cleanly) and make a new one")
            self._state = AsyncState.DEFAULT  # the pending call cannot complete
        return self._death

    @contextlib.contextmanager
    def _watching(self) -> Iterator[None]:
        if not self.closed and (self._death is not None or self._dead_workers()):
            raise self._died()
        try:
            yield
        except (EOFError, OSError) as exc:  # a pipe to a worker that died mid-call
            if not self._dead_workers():
                time.sleep(0.2)  # the pipe broke as the process was ending: let it end
            raise self._died() from exc

    def reset_async(self, *args: Any, **kwargs: Any) -> None:
        with self._watching():
            super().reset_async(*args, **kwargs)

    def reset_wait(self, *args: Any, **kwargs: Any) -> Any:
        with self._watching():
            return super().reset_wait(*args, **kwargs)

    def step_async(self, actions: Any) -> None:
        with self._watching():
            super().step_async(actions)

    def step_wait(self, *args: Any, **kwargs: Any) -> Any:
        with self._watching():
            return super().step_wait(*args, **kwargs)

    def call_async(self, name: str, /, *args: object, **kwargs: object) -> None:
        with self._watching():
            super().call_async(name, *args, **kwargs)

    def call_wait(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        with self._watching():
            return super().call_wait(*args, **kwargs)

    def set_attr(self, name: str, values: Any) -> None:
        with self._watching():
            super().set_attr(name, values)

    def close_extras(self, timeout: float | None = None, terminate: bool = False) -> None:
        if self._death is None and not self._dead_workers():
            super().close_extras(timeout=timeout, terminate=terminate)
            return
        self._died()
        deadline = time.monotonic() + (60.0 if timeout is None else timeout)
        for index, pipe in enumerate(self.parent_pipes):
            process = self.processes[index]
            if pipe is None or pipe.closed:
                continue
            if not terminate and process.is_alive():
                try:  # a reply to a call the death cut short may come before the close's
                    pipe.send(("close", None))
                    while True:
                        if not pipe.poll(max(0.0, deadline - time.monotonic())):
                            raise TimeoutError
                        reply = pipe.recv()
                        if isinstance(reply, tuple) and len(reply) == 2 and reply[0] is None:
                            break
                except (OSError, EOFError, TimeoutError):
                    process.terminate()
            pipe.close()
        for process in self.processes:
            if process.is_alive() and terminate:
                process.terminate()
            process.join()


def async_vector(env_id: str, num_envs: int, **kwargs: Any) -> SysmathAsyncVectorEnv:
    """``num_envs`` workers, each ``gym.make(env_id, **kwargs)`` in a process of its own."""
    return SysmathAsyncVectorEnv([functools.partial(gym.make, env_id, **kwargs)] * num_envs)


def make_vector(env_id: str, num_envs: int = 1, **kwargs: Any) -> SysmathVectorEnv:
    """``num_envs`` envs of the registered ``env_id`` (its spec's kwargs, then ``kwargs``) batched
    in this process: what ``gym.make_vec(env_id, num_envs, vectorization_mode="vector_entry_point")``
    returns, for every family alike."""
    spec = gym.spec(env_id)
    if not isinstance(spec.entry_point, str):  # every family row names its class as "module:Class"
        raise TypeError(f"{env_id} is not a gym-sysmath id: its entry point is {spec.entry_point!r}")
    return SysmathVectorEnv(spec.entry_point, num_envs=num_envs, **{**spec.kwargs, **kwargs})

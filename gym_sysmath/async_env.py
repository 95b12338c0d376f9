"""Async stepping: ``await env.reset()`` / ``await env.step(action)`` for callers whose event loop
must never block (verifiers, OpenRLHF's agent functions, SkyRL's generator, OpenEnv servers).

A step of a sysmath env mostly waits on its sandbox container (a tool turn, a compile, the
hidden tests), so it runs in a thread. Not asyncio's default executor: that one has
``min(32, cpus + 4)`` threads (6 on a two-core machine), so the seventh episode in flight waits
for a whole step of another one. Every step of this module runs on ONE process-wide pool,
``step_pool()``, of ``step_threads()`` threads (``GYM_SYSMATH_STEP_THREADS``, or
``set_step_threads(n)`` before the first step; default ``DEFAULT_STEP_THREADS``): a thread per
episode in flight costs memory, not CPU, and the sandbox pool bounds the containers.

One env holds one episode: ``AsyncSysmathEnv`` runs its calls one at a time, even when a caller
cancels an ``await`` whose step is still running in its thread (the next call waits for it).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import gymnasium as gym

__all__ = ["DEFAULT_STEP_THREADS", "AsyncSysmathEnv", "make_async", "run_blocking", "set_step_threads", "step_pool",
           "step_threads"]

#: Threads of the step pool when nothing sets them: episodes in flight at once per process.
DEFAULT_STEP_THREADS = 256

T = TypeVar("T")

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_threads: int | None = None


def step_threads() -> int:
    """The step pool's size: ``set_step_threads``'s, else ``GYM_SYSMATH_STEP_THREADS``, else the default."""
    if _threads is not None:
        return _threads
    text = os.environ.get("GYM_SYSMATH_STEP_THREADS", "")
    if not text:
        return DEFAULT_STEP_THREADS
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"GYM_SYSMATH_STEP_THREADS must be a positive whole number, got {text!r}")
    return int(text)


def set_step_threads(threads: int) -> None:
    """Size the step pool (the steps that may run at once in this process). Call it before the
    first async step; afterwards the pool in use keeps its size and this raises."""
    global _threads
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"step threads must be a positive int, got {threads!r}")
    with _lock:
        if _pool is not None and _pool_pid == os.getpid() and threads != _pool._max_workers:
            raise RuntimeError(f"the step pool already runs with {_pool._max_workers} threads: call "
                               f"set_step_threads before the first async step (or set GYM_SYSMATH_STEP_THREADS)")
        _threads = threads


def step_pool() -> ThreadPoolExecutor:
    """The process-wide pool every async step runs on (made on first use; a forked child makes its
    own, since the parent's threads do not exist there)."""
    global _pool, _pool_pid
    with _lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(step_threads(), thread_name_prefix="gym-sysmath-step")
            _pool_pid = os.getpid()
        return _pool


async def run_blocking(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)`` on the step pool, awaited without blocking the running loop
    (in a copy of the caller's context, as ``asyncio.to_thread`` runs it)."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    return await loop.run_in_executor(step_pool(), functools.partial(context.run, function, *args, **kwargs))


class AsyncSysmathEnv:
    """A Gymnasium env for asyncio callers: ``await reset()``, ``await step()``, ``await close()``.

    Wraps any env (``make_async(env_id, **kwargs)`` makes one for a registered id without blocking
    the loop); the results are exactly the wrapped env's. ``env`` is the wrapped env, for its
    spaces, ``spec`` and ``unwrapped``. Use it as ``async with``, or ``await close()``.

    Example::

        env = await make_async("LinearAlgebra-v0")
        observation, info = await env.reset(seed=0)
        observation, reward, terminated, truncated, info = await env.step("ANSWER: 3")
        await env.close()
    """

    def __init__(self, env: gym.Env):
        self.env = env
        #: held by the thread running a call, so a cancelled await cannot let two calls overlap
        self._busy = threading.Lock()
        self.closed = False

    def _one_at_a_time(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with self._busy:
            if self.closed:
                raise RuntimeError("this AsyncSysmathEnv is closed")
            return function(*args, **kwargs)

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
                    ) -> tuple[Any, dict[str, Any]]:
        return await run_blocking(self._one_at_a_time, self.env.reset, seed=seed, options=options)

    async def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return await run_blocking(self._one_at_a_time, self.env.step, action)

    def _close(self) -> None:
        with self._busy:
            if not self.closed:
                self.closed = True
                self.env.close()

    async def close(self) -> None:
        """Close the wrapped env (its container goes back to the pool); idempotent."""
        await run_blocking(self._close)

    async def __aenter__(self) -> AsyncSysmathEnv:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncSysmathEnv({self.env!r})"


async def make_async(env_id: str, **kwargs: Any) -> AsyncSysmathEnv:
    """``gym.make(env_id, **kwargs)`` on the step pool (importing a family takes a moment the
    first time), wrapped in an ``AsyncSysmathEnv``."""
    import gym_sysmath  # noqa: F401  (registers the ids)

    return AsyncSysmathEnv(await run_blocking(gym.make, env_id, **kwargs))

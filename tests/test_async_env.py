"""``AsyncSysmathEnv``: an asyncio caller's loop keeps running while steps run, many episodes are in
flight at once (more than asyncio's default executor would run), results are the sync env's, and
one env never runs two calls at once, even when an await is cancelled mid-step."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading

import gymnasium as gym
import pytest

from gym_sysmath import async_env
from gym_sysmath.async_env import AsyncSysmathEnv, make_async, run_blocking

PROCESS = {"sandbox": "process"}
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")

#: Episodes in flight in the barrier test: more than asyncio's default executor (min(32, cpus + 4)).
IN_FLIGHT = 40


def barrier_code(directory: str, index: int, parties: int) -> str:
    """A tool turn that checks in, then waits (bounded) until ``parties`` turns have checked in."""
    return ("```python\nimport os, time\n"
            f"open(os.path.join({directory!r}, '{index}'), 'w').close()\n"
            "deadline = time.monotonic() + 20\n"
            f"while len(os.listdir({directory!r})) < {parties} and time.monotonic() < deadline:\n"
            "    time.sleep(0.02)\n"
            "print('present', len(os.listdir(" + repr(directory) + ")))\n```")


@pytest.fixture
def shared_directory():
    """A directory every sandboxed turn can write (the process sandbox runs code as another user)."""
    directory = tempfile.mkdtemp(prefix="gym-sysmath-barrier-")
    os.chmod(directory, 0o777)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_forty_episodes_are_in_flight_at_once_and_the_loop_keeps_running(shared_directory):
    """Each tool turn waits until all 40 have started: with fewer step threads than episodes
    (asyncio's default executor has at most 32) the first ones time out seeing fewer."""

    async def main() -> tuple[list[str], int]:
        envs = await asyncio.gather(*(make_async("LinearAlgebra-v0", max_turns=3, **PROCESS)
                                      for _ in range(IN_FLIGHT)))
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        ticking = asyncio.create_task(ticker())
        try:
            await asyncio.gather(*(env.reset(seed=i) for i, env in enumerate(envs)))
            outcomes = await asyncio.gather(*(env.step(barrier_code(shared_directory, i, IN_FLIGHT))
                                              for i, env in enumerate(envs)))
        finally:
            stop.set()
            await ticking
            await asyncio.gather(*(env.close() for env in envs))
        return [observation for observation, *_ in outcomes], ticks

    observations, ticks = asyncio.run(main())
    assert all(f"present {IN_FLIGHT}" in observation for observation in observations), observations[0]
    assert ticks > 5  # the loop ran its own coroutine while every step was in a thread


@pytest.mark.parametrize("env_id", ["LinearAlgebra-v0", "CsappExact-v0", "CompGeomPython-v0"])
def test_async_results_are_the_sync_envs(env_id):
    sync = gym.make(env_id, max_turns=1, **PROCESS)
    expected_observation, expected_info = sync.reset(seed=3)
    action = sync.unwrapped.reference_action()
    expected = sync.step(action)
    sync.close()

    async def main():
        async with await make_async(env_id, max_turns=1, **PROCESS) as env:
            observation, info = await env.reset(seed=3)
            return observation, info, await env.step(action)

    observation, info, outcome = asyncio.run(main())
    assert (observation, info["task_id"]) == (expected_observation, expected_info["task_id"])
    assert outcome[1:4] == expected[1:4] and outcome[4]["verdict"] == expected[4]["verdict"]
    assert outcome[1] == 1.0


def test_a_cancelled_step_still_finishes_before_the_next_call_starts():
    """Cancelling an ``await`` cannot cancel the thread running the step: the env must not start
    a second call on the same episode while the first is still running."""
    started, release = threading.Event(), threading.Event()
    calls: list[str] = []

    class Slow(gym.Env):
        observation_space = action_space = gym.spaces.Text(16)

        def reset(self, *, seed=None, options=None):
            calls.append("reset")
            return "", {}

        def step(self, action):
            calls.append(f"step {action} begins")
            started.set()
            release.wait(10)
            calls.append(f"step {action} ends")
            return "", 0.0, False, False, {}

    async def main():
        env = AsyncSysmathEnv(Slow())
        first = asyncio.create_task(env.step("a"))
        await run_blocking(started.wait, 10)
        first.cancel()
        second = asyncio.create_task(env.step("b"))
        await asyncio.sleep(0.2)
        release.set()
        await second
        await env.close()
        with pytest.raises(RuntimeError, match="closed"):
            await env.step("c")

    asyncio.run(main())
    assert calls == ["step a begins", "step a ends", "step b begins", "step b ends"]


def test_the_step_pool_is_one_per_process_and_sized_by_the_setting(monkeypatch):
    monkeypatch.setattr(async_env, "_pool", None)
    monkeypatch.setattr(async_env, "_threads", None)
    monkeypatch.setenv("GYM_SYSMATH_STEP_THREADS", "48")
    assert async_env.step_threads() == 48
    pool = async_env.step_pool()
    assert pool is async_env.step_pool() and pool._max_workers == 48
    with pytest.raises(RuntimeError, match="before the first async step"):
        async_env.set_step_threads(8)
    monkeypatch.setenv("GYM_SYSMATH_STEP_THREADS", "lots")
    monkeypatch.setattr(async_env, "_pool", None)
    with pytest.raises(ValueError, match="GYM_SYSMATH_STEP_THREADS"):
        async_env.step_threads()
    pool.shutdown()

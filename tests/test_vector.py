"""The batched vector env: one shared warm pool, concurrent sandbox jobs, next-step autoreset."""

from __future__ import annotations

import time

import gymnasium as gym
import pytest

from gym_sysmath.vector import SysmathVectorEnv

pytestmark = pytest.mark.docker


@pytest.fixture
def vector(docker_available):
    envs = gym.make_vec("CsappExact-v0", num_envs=2, vectorization_mode="vector_entry_point", pool_size=2)
    yield envs
    envs.close()


def test_vector_entry_point_is_the_batched_env_with_one_shared_pool(vector):
    assert isinstance(vector, SysmathVectorEnv)
    assert vector.envs[0].sandbox is vector.envs[1].sandbox


def test_observations_match_single_envs(vector):
    observations, infos = vector.reset(seed=[4, 9])
    single = gym.make("CsappExact-v0")
    try:
        assert observations == (single.reset(seed=4)[0], single.reset(seed=9)[0])
        assert list(infos["task_id"]) == [single.reset(seed=s)[1]["task_id"] for s in (4, 9)]
    finally:
        single.close()


def test_sandbox_jobs_run_concurrently(vector):
    vector.reset(seed=0)
    vector.step(["```python\nprint(0)\n```"] * 2)  # warm both workers
    started = time.monotonic()
    observations, *_ = vector.step(["```python\nimport time\ntime.sleep(1)\nprint('slept')\n```"] * 2)
    elapsed = time.monotonic() - started
    assert all(obs.startswith("slept") for obs in observations)
    assert elapsed < 1.8, f"two 1 s jobs took {elapsed:.2f} s: they ran one after the other"


def test_finished_env_resets_on_the_next_step(vector):
    vector.reset(seed=0)
    reference = vector.envs[0].reference_action()
    _, rewards, terminated, _, infos = vector.step([reference, "```python\nx = 1\n```"])
    assert list(rewards) == [1.0, 0.0] and list(terminated) == [True, False]
    observations, rewards, terminated, _, infos = vector.step(["ignored", "```python\nprint(x)\n```"])
    assert infos["turn"][0] == 0 and infos["verdict"][0] is None, "env 0 should have been reset"
    assert observations[1].startswith("1")

"""The batched vector env: every registered id's ``vector_entry_point``, one shared warm pool,
concurrent sandbox jobs, next-step autoreset."""

from __future__ import annotations

import time

import gymnasium as gym
import pytest

import gym_sysmath
from gym_sysmath.vector import SysmathVectorEnv, make_vector


@pytest.mark.filterwarnings("ignore:sandbox='process'")  # resets run no code
@pytest.mark.parametrize("env_id", gym_sysmath.env_ids())
def test_every_id_vectorizes_through_the_one_generic_factory(env_id):
    """No family names a factory: ``gym_sysmath.vector_ids:<id>`` is ``make_vector(id)``, with the id's own kwargs."""
    spec = gym.spec(env_id)
    assert spec.vector_entry_point == f"gym_sysmath.vector_ids:{env_id}"
    envs = gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point", sandbox="process")
    single = gym.make(env_id, sandbox="process")
    try:
        assert isinstance(envs, SysmathVectorEnv)
        core = single.unwrapped
        assert all((env.task_ids, env.max_turns) == (core.task_ids, core.max_turns) for env in envs.envs)
        observations, _ = envs.reset(seed=[5, 6])
        assert observations == (single.reset(seed=5)[0], single.reset(seed=6)[0])
    finally:
        envs.close()
        single.close()
    direct = make_vector(env_id, 1, sandbox="process")
    assert type(direct.envs[0]) is type(single.unwrapped)
    direct.close()


def test_an_id_no_family_registers_has_no_vector_entry_point():
    import gym_sysmath.vector_ids

    with pytest.raises(AttributeError, match="nor a registered gym-sysmath id"):
        gym_sysmath.vector_ids.CartPole_v1  # noqa: B018

    with pytest.raises(AttributeError, match="nor a registered gym-sysmath id"):
        getattr(gym_sysmath.vector_ids, "CartPole-v1")


def test_the_vector_module_has_only_its_real_names():
    """No module ``__getattr__`` there: a misspelled ``from gym_sysmath.vector import make_vectr`` fails."""
    with pytest.raises(ImportError):
        exec("from gym_sysmath.vector import make_vectr", {})


@pytest.fixture
def vector(docker_available):
    envs = gym.make_vec("CsappExact-v0", num_envs=2, vectorization_mode="vector_entry_point", pool_size=2)
    yield envs
    envs.close()


@pytest.mark.docker
def test_vector_entry_point_is_the_batched_env_with_one_shared_pool(vector):
    assert isinstance(vector, SysmathVectorEnv)
    assert vector.envs[0].sandbox is vector.envs[1].sandbox


@pytest.mark.docker
def test_observations_match_single_envs(vector):
    observations, infos = vector.reset(seed=[4, 9])
    single = gym.make("CsappExact-v0")
    try:
        assert observations == (single.reset(seed=4)[0], single.reset(seed=9)[0])
        assert list(infos["task_id"]) == [single.reset(seed=s)[1]["task_id"] for s in (4, 9)]
    finally:
        single.close()


@pytest.mark.docker
def test_sandbox_jobs_run_concurrently(vector):
    vector.reset(seed=0)
    vector.step(["```python\nprint(0)\n```"] * 2)  # warm both workers
    started = time.monotonic()
    observations, *_ = vector.step(["```python\nimport time\ntime.sleep(1)\nprint('slept')\n```"] * 2)
    elapsed = time.monotonic() - started
    assert all(obs.startswith("slept") for obs in observations)
    assert elapsed < 1.8, f"two 1 s jobs took {elapsed:.2f} s: they ran one after the other"


@pytest.mark.docker
def test_finished_env_resets_on_the_next_step(vector):
    vector.reset(seed=0)
    reference = vector.envs[0].reference_action()
    _, rewards, terminated, _, infos = vector.step([reference, "```python\nx = 1\n```"])
    assert list(rewards) == [1.0, 0.0] and list(terminated) == [True, False]
    observations, rewards, terminated, _, infos = vector.step(["ignored", "```python\nprint(x)\n```"])
    assert infos["turn"][0] == 0 and infos["verdict"][0] is None, "env 0 should have been reset"
    assert observations[1].startswith("1")

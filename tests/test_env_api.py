"""The Gymnasium surface a custom training loop leans on: specs that serialise, arguments that
are refused instead of misread, observations that replay, the chat so far, and the batched
vector env's step limit and autoreset modes, each checked against Gymnasium's own behaviour."""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.registration import EnvSpec
from gymnasium.error import ResetNeeded
from gymnasium.vector import AutoresetMode

import gym_sysmath
from gym_sysmath.vector import SysmathVectorEnv

PROCESS = {"sandbox": "process"}
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")


@pytest.mark.parametrize("env_id", gym_sysmath.env_ids())
def test_every_spec_pickles_and_has_a_json_form(env_id):
    spec = gym.spec(env_id)
    assert pickle.loads(pickle.dumps(spec)) == spec
    again = EnvSpec.from_json(spec.to_json())
    assert again.vector_entry_point == spec.vector_entry_point and isinstance(again.vector_entry_point, str)
    assert again.kwargs == spec.kwargs


def test_a_vector_made_from_the_json_spec_is_the_batched_env():
    spec = EnvSpec.from_json(gym.spec("LinearAlgebra-v0").to_json())
    envs = gym.make_vec(spec, num_envs=2, vectorization_mode="vector_entry_point", topics=["rank"], **PROCESS)
    try:
        assert isinstance(envs, SysmathVectorEnv)
        _, infos = envs.reset(seed=0)
        assert list(infos["topic"]) == ["rank", "rank"]
    finally:
        envs.close()


@pytest.mark.parametrize(("env_id", "bad"), [("CsappExact-v0", {"category": ["floats"]}),
                                             ("LinearAlgebra-v0", {"topic": ["rank"]})])
def test_unknown_reset_option_is_refused_by_name(env_id, bad):
    env = gym.make(env_id, **PROCESS)
    try:
        with pytest.raises(ValueError, match=f"unknown reset option.*{next(iter(bad))}.*task_id"):
            env.reset(seed=0, options=bad)
    finally:
        env.close()


@pytest.mark.parametrize(("env_id", "kwargs"), [("CsappExact-v0", {"categories": "floats"}),
                                                ("LinearAlgebra-v0", {"topics": "rank"})])
def test_a_string_filter_is_refused_not_split_into_letters(env_id, kwargs):
    (name, value), = kwargs.items()
    with pytest.raises(TypeError, match=rf"{name} must be a list of names.*{name}=\['{value}'\]"):
        gym.make(env_id, **kwargs, **PROCESS)


def test_a_string_filter_in_reset_options_is_refused_too():
    env = gym.make("CsappExact-v0", **PROCESS)
    try:
        with pytest.raises(TypeError, match="categories must be a list"):
            env.reset(seed=0, options={"categories": "floats"})
        assert env.reset(seed=0, options={"categories": ["floats"]})[1]["category"] == "floats"
    finally:
        env.close()


def test_messages_are_the_episode_as_openai_chat():
    env = gym.make("LinearAlgebra-v0", **PROCESS)
    try:
        prompt, _ = env.reset(seed=0)
        assert env.unwrapped.messages == [{"role": "user", "content": prompt}]
        observation, *_ = env.step("ANSWER: 0")
        assert env.unwrapped.messages == [{"role": "user", "content": prompt},
                                          {"role": "assistant", "content": "ANSWER: 0"},
                                          {"role": "user", "content": observation}]
        env.unwrapped.messages.append({"role": "user", "content": "x"})  # a copy: the env's stays as it was
        assert len(env.unwrapped.messages) == 3
    finally:
        env.close()


@pytest.mark.docker
def test_same_seed_and_actions_give_the_same_observations(docker_available):
    """Tool-turn timings vary run to run: they are in ``info["timing"]``, not in the text."""
    code = "```python\nimport time\ntime.sleep(0.01 * __import__('random').random())\nprint(6 * 7)\n```"
    runs = []
    for _ in range(2):
        env = gym.make("CsappExact-v0")
        try:
            observations = [env.reset(seed=3)[0]]
            observation, _, _, _, info = env.step(code)
            observations.append(observation)
            assert set(info["timing"]) == {"wall_s", "cpu_s"} and info["timing"]["wall_s"] > 0
            assert " ms" not in observation
            runs.append(observations)
        finally:
            env.close()
    assert runs[0] == runs[1]
    assert runs[0][1] == "42\n[status: ok; turn 1 of 5]"


# ---------------------------------------------------------------------------- the batched vector env


def _vector(mode: str, n: int = 2, **kwargs):
    """LinearAlgebra with Python tool turns (process backend: the code runs on the host)."""
    return gym.make_vec("LinearAlgebra-v0", num_envs=n, vectorization_mode=mode, max_turns=3, **PROCESS, **kwargs)


def _wrong(n: int) -> list[str]:
    return ["I will not commit to an answer."] * n  # a final reply: format_error, the episode ends


@pytest.mark.parametrize("mode", ["vector_entry_point", "sync"])
def test_max_episode_steps_truncates_in_every_vectorization_mode(mode):
    """The batched env truncates as ``sync`` (``TimeLimit``) does: same step, same flags."""
    envs = gym.make_vec("LinearAlgebra-v0", num_envs=2, vectorization_mode=mode, max_turns=5, max_episode_steps=2,
                        **PROCESS)
    try:
        envs.reset(seed=0)
        code = ["```python\nx = 1\n```"] * 2
        _, _, terminated, truncated, _ = envs.step(code)
        assert not truncated.any() and not terminated.any()
        _, _, terminated, truncated, _ = envs.step(code)
        assert truncated.all() and not terminated.any()
        _, _, _, truncated, infos = envs.step(code)  # next-step autoreset: a fresh episode
        assert not truncated.any() and list(infos["turn"]) == [0, 0]
    finally:
        envs.close()


def test_a_bad_max_episode_steps_is_refused():
    with pytest.raises(ValueError, match="max_episode_steps"):
        _vector("vector_entry_point", max_episode_steps=0)


def test_same_step_autoreset_matches_sync_vector_env():
    """SAME_STEP: the finished env is reset in the same step; its last observation and info
    are in ``final_obs`` / ``final_info``, exactly as Gymnasium's SyncVectorEnv reports them."""
    ours = _vector("vector_entry_point", autoreset_mode=AutoresetMode.SAME_STEP)
    theirs = _vector("sync", vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})
    try:
        assert ours.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        results = []
        for envs in (ours, theirs):
            first, _ = envs.reset(seed=[5, 6])
            answer = envs.envs[0].unwrapped.reference_action()
            observations, rewards, terminated, truncated, infos = envs.step([answer, "```python\nx = 1\n```"])
            results.append((first, observations, rewards, terminated, truncated, infos))
            assert observations[0] != first[0] and infos["turn"][0] == 0  # already the next episode's prompt
            assert infos["final_obs"][0] == "Episode over. Verdict: correct."
            assert infos["final_info"]["verdict"][0] == "correct" and infos["_final_info"].tolist() == [True, False]
            observations, *_ , infos = envs.step(["ANSWER: 0", "ANSWER: 0"])  # env 0 answers its new task now
            assert infos["turn"][0] == 0 and infos["final_info"]["turn"].tolist() == [1, 2]
        (a_first, a_obs, a_rew, a_term, a_trunc, a_info), (b_first, b_obs, b_rew, b_term, b_trunc, b_info) = results
        assert a_first == b_first and a_obs == b_obs
        assert a_rew.tolist() == b_rew.tolist() and a_term.tolist() == b_term.tolist()
        assert a_trunc.tolist() == b_trunc.tolist()
        assert sorted(a_info) == sorted(b_info)
        assert a_info["final_info"]["task_id"].tolist() == b_info["final_info"]["task_id"].tolist()
    finally:
        ours.close()
        theirs.close()


def test_disabled_autoreset_refuses_a_step_until_the_masked_reset():
    envs = _vector("vector_entry_point", autoreset_mode="Disabled")
    try:
        envs.reset(seed=[1, 2])
        stepped, *_ = envs.step(["ANSWER: 0", "```python\nx = 1\n```"])
        with pytest.raises(ResetNeeded, match="reset_mask"):
            envs.step(["ANSWER: 0", "ANSWER: 0"])
        assert envs.envs[1].turn == 1  # the refused step stepped no env
        observations, infos = envs.reset(seed=[7, None], options={"reset_mask": np.array([True, False])})
        assert observations[1] == stepped[1] and infos["_task_id"].tolist() == [True, False]
        _, _, terminated, _, _ = envs.step(_wrong(2))
        assert terminated.tolist() == [True, True]
        with pytest.raises(TypeError, match="reset_mask"):
            envs.reset(options={"reset_mask": [True, True]})
    finally:
        envs.close()


def test_get_attr_reads_each_episode_s_messages():
    envs = _vector("vector_entry_point")
    try:
        observations, _ = envs.reset(seed=0)
        assert [m[0]["content"] for m in envs.get_attr("messages")] == list(observations)
    finally:
        envs.close()


def test_a_plug_in_family_may_mix_in_abc_and_take_its_own_task_set_argument():
    """The base class's metaclass (which checks ``task_set=`` pins) is an ``ABCMeta``, and a
    family that declares ``task_set`` itself receives it after the check."""
    import abc

    from gym_sysmath.envs.linalg import LinearAlgebraEnv
    from gym_sysmath.task_sets import installed

    class Described(abc.ABC):
        @abc.abstractmethod
        def describe(self) -> str: ...

    class Mixed(LinearAlgebraEnv, Described):
        def __init__(self, *, task_set: str | None = None, **kwargs):
            self.asked_for = task_set
            super().__init__(**kwargs)

        def describe(self) -> str:
            return "mixed"

    label = installed("linalg").label
    assert Mixed(task_set=label).asked_for == label
    assert Mixed().asked_for is None

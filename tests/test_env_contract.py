"""The contract every registered env keeps: spaces, seeding, info fields, typed verdicts,
and harness failures reported as scoring errors rather than wrong answers."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import gym_sysmath
from gym_sysmath.sandbox import daemon
from gym_sysmath.verdicts import Verdict

pytestmark = pytest.mark.docker
ENV_IDS = gym_sysmath.env_ids()
INFO_KEYS = {"task_id", "family", "turn", "verdict", "correct", "scoring_error"}
VERDICTS = {v.value for v in Verdict}
CODE = "```python\nprint('hello')\n```"


@pytest.fixture
def csapp_env(docker_available):
    env = gym.make("CsappExact-v0")
    yield env
    env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_check_env_passes(env_id, docker_available):
    env = gym.make(env_id)
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_task_and_info_never_holds_the_answer(env_id, docker_available):
    env = gym.make(env_id)
    try:
        first, info = env.reset(seed=7)
        again, _ = env.reset(seed=7)
        assert first == again
        assert set(info) >= INFO_KEYS
        assert info["verdict"] is None and info["scoring_error"] is None
        assert "answer" not in info and "distractors" not in info
        answer = env.unwrapped.task.answer
        assert all(value != answer for key, value in info.items() if key not in INFO_KEYS)
        if len(json.dumps(answer)) > 8:  # long enough that a chance match is impossible
            assert json.dumps(answer) not in json.dumps(info, default=str)
        prompts = {env.reset(seed=seed)[0] for seed in range(12)}
        assert len(prompts) > 1, "different seeds should reach different tasks"
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reference_action_scores_one_and_info_is_complete(env_id, docker_available):
    env = gym.make(env_id)
    try:
        env.reset(seed=3)
        for _ in range(3):  # multi-turn families: the code as a tool turn, then the submission
            _, reward, terminated, truncated, info = env.step(env.unwrapped.reference_action())
            if terminated or truncated:
                break
        assert (reward, terminated, truncated) == (1.0, True, False)
        assert set(info) >= INFO_KEYS and info["verdict"] == "correct" and info["correct"] is True
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("bad", ["", "   ", "x" * 40_000, None, 42])
def test_actions_outside_the_space_are_format_errors(env_id, bad, docker_available):
    env = gym.make(env_id, disable_env_checker=True)
    try:
        env.reset(seed=0)
        _, reward, terminated, truncated, info = env.step(bad)
        assert (reward, terminated, truncated) == (0.0, True, False)
        assert info["verdict"] == "format_error" and info["scoring_error"] is None
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sampled_garbage_never_raises(env_id, docker_available):
    env = gym.make(env_id)
    env.action_space.seed(0)
    try:
        for seed in range(25):
            env.reset(seed=seed)
            _, reward, terminated, truncated, info = env.step(env.action_space.sample())
            assert reward in (0.0, 1.0) and info["verdict"] in VERDICTS | {None}
            assert info["scoring_error"] is None and not truncated
            assert terminated == (info["verdict"] is not None)
    finally:
        env.close()


def test_wrong_answer_is_a_wrong_answer_not_a_scoring_error(csapp_env):
    csapp_env.reset(seed=0)
    answer = csapp_env.unwrapped.task.answer
    wrong = [("0x0" if isinstance(answer[0], str) else not answer[0] if isinstance(answer[0], bool)
              else answer[0] + 1), *answer[1:]]
    _, reward, terminated, truncated, info = csapp_env.step(f"ANSWER: {json.dumps(wrong)}")
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert info["verdict"] == "wrong_answer" and info["scoring_error"] is None


def test_step_before_reset_is_refused(csapp_env):
    with pytest.raises(gym.error.ResetNeeded):
        csapp_env.unwrapped.step("ANSWER: [1]")


def test_answer_only_episode_leases_no_container(docker_available):
    # the reserve may start containers for it in the background; the episode itself takes none
    env = gym.make("CsappExact-v0")
    pool = env.unwrapped.sandbox
    before = pool.stats()
    env.reset(seed=1)
    env.step(env.unwrapped.reference_action())
    after = pool.stats()
    assert (after.leases, after.requests) == (before.leases, before.requests)
    env.close()


def test_close_leaves_no_container(docker_available):
    client = daemon.docker_client()
    env = gym.make("CsappExact-v0")
    env.reset(seed=0)
    env.step(CODE)
    mine = daemon.containers_of_this_process(client)
    assert mine, "a code step should have started a container"
    env.close()
    left = daemon.containers_of_this_process(client)
    assert left == []


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec_returns_intact_text_observations(mode, docker_available):
    envs = gym.make_vec("CsappExact-v0", num_envs=2, vectorization_mode=mode)
    try:
        observations, _ = envs.reset(seed=[0, 1])
        single = gym.make("CsappExact-v0")
        assert observations[0] == single.reset(seed=0)[0]
        assert observations[1] == single.reset(seed=1)[0]
        single.close()
        # Unicode program output arrives as text; what the charset lacks arrives escaped, not garbled
        observations, *_ = envs.step(["```python\nprint('caf\\u00e9 \\u2713 \\u2018q\\u2019 \\U0001f600')\n```"] * 2)
        assert all(obs.startswith("caf\u00e9 \u2713 \u2018q\u2019 \\U0001f600") for obs in observations)
    finally:
        envs.close()


def test_render_ansi_shows_the_transcript(docker_available):
    env = gym.make("CsappExact-v0", render_mode="ansi")
    try:
        prompt, _ = env.reset(seed=0)
        env.step("ANSWER: [0]")
        text = env.render()
        assert prompt[:40] in text and "ANSWER: [0]" in text and "Verdict:" in text
    finally:
        env.close()


def test_process_backend_runs_code_actions():
    env = gym.make("CsappExact-v0", sandbox="process")
    try:
        env.reset(seed=0)
        observation, *_ = env.step("```python\nx = 6 * 7\nprint(x)\n```")
        assert observation.startswith("42")
        observation, *_ = env.step("```python\nprint(x + 1)\n```")
        assert observation.startswith("43")
    finally:
        env.close()


def test_async_vector_env_beside_a_live_env_leaves_it_working(docker_available):
    parent = gym.make("CsappExact-v0")
    try:
        parent.reset(seed=0)
        assert parent.step(CODE)[0].startswith("hello")
        client = daemon.docker_client()
        mine = {c.id for c in daemon.containers_of_this_process(client)}
        envs = gym.make_vec("CsappExact-v0", num_envs=2, vectorization_mode="async")
        try:
            envs.reset(seed=0)
            observations, *_ = envs.step([CODE] * 2)
            assert all(obs.startswith("hello") for obs in observations)
            child_pids = {str(process.pid) for process in envs.processes}
            owners = {c.labels[daemon.LABEL_OWNER].split(":")[1] for c in daemon.our_containers(client)}
            assert child_pids <= owners, "each worker process must run its own pool, not the parent's sockets"
        finally:
            envs.close()
        still = {c.id for c in daemon.containers_of_this_process(client)}
        assert mine and mine <= still, "forked children must not remove the parent's containers"
        assert parent.step(CODE)[0].startswith("hello")
    finally:
        parent.close()


def test_render_escapes_terminal_control_sequences():
    # an action (or program output) must not drive the terminal that shows the transcript
    env = gym.make("LinearAlgebra-v0", render_mode="ansi")
    env.reset(seed=0)
    env.step("\x1b]0;pwned\x07\x1b[2J\rANSWER: 1\x9b31m")
    shown = env.render()
    assert not any(ch in shown for ch in "\x1b\x07\r\x9b")
    assert "\\x1b]0;pwned\\x07" in shown and "\n" in shown
    env.close()

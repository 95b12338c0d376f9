"""LinearAlgebra-v0 through Gymnasium: every key scores, filters and seeds hold, and the
optional tool turns run numpy in the sandbox."""

from __future__ import annotations

import gymnasium as gym
import pytest

from gym_sysmath.tasks import linalg

PROBLEMS = linalg.load_problems()


@pytest.fixture(scope="module")
def env():
    environment = gym.make("LinearAlgebra-v0")
    yield environment
    environment.close()


def test_single_turn_env_needs_no_sandbox(env):
    assert env.unwrapped._sandbox is None


@pytest.mark.parametrize("problem", PROBLEMS, ids=[p.problem_id for p in PROBLEMS])
def test_every_reference_response_scores_through_the_env(env, problem):
    env.reset(options={"task_id": problem.problem_id})
    _, reward, terminated, _, info = env.step(env.unwrapped.reference_action())
    assert (reward, terminated, info["verdict"], info["format_ok"]) == (1.0, True, "correct", True)


def test_missing_answer_line_is_a_format_error_with_format_ok_false(env):
    env.reset(seed=0)
    *_, info = env.step("The determinant is 6.")
    assert info["verdict"] == "format_error" and info["format_ok"] is False


def test_filters_restrict_the_draw():
    environment = gym.make("LinearAlgebra-v0", difficulty="hard", topics=["rank", "trace"])
    try:
        assert len(environment.unwrapped.task_ids) == 4
        for seed in range(10):
            _, info = environment.reset(seed=seed)
            assert info["difficulty"] == "hard" and info["topic"] in ("rank", "trace")
        _, info = environment.reset(seed=0, options={"topics": ["trace", "matmul"]})  # narrows, for this reset
        assert (info["difficulty"], info["topic"]) == ("hard", "trace")
        with pytest.raises(ValueError, match=r"reset option difficulty='easy' is outside this env's filter "
                                             r"difficulty='hard'.*cannot widen"):
            environment.reset(seed=0, options={"difficulty": "easy", "topics": ["matmul"]})
    finally:
        environment.close()


def test_train_split_is_seeded_and_gradable():
    environment = gym.make("LinearAlgebra-v0", split="train")
    try:
        first, info = environment.reset(seed=123)
        assert environment.reset(seed=123)[0] == first
        assert info["task_id"].startswith("train/")
        assert environment.step(environment.unwrapped.reference_action())[1] == 1.0
    finally:
        environment.close()


@pytest.mark.docker
def test_tool_turn_runs_numpy_in_the_sandbox(docker_available):
    environment = gym.make("LinearAlgebra-v0", max_turns=3)
    try:
        problem = next(p for p in PROBLEMS if p.topic == "determinant")
        environment.reset(options={"task_id": problem.problem_id})
        matrix = problem.inputs["A"]
        code = f"import numpy as np\nprint(round(np.linalg.det(np.array({matrix}))))"
        observation, reward, terminated, _, info = environment.step(f"```python\n{code}\n```")
        assert (reward, terminated, info["verdict"]) == (0.0, False, None)
        value = observation.splitlines()[0]
        _, reward, terminated, _, info = environment.step(f"ANSWER: {value}")
        assert (reward, terminated, info["verdict"]) == (1.0, True, "correct")
    finally:
        environment.close()

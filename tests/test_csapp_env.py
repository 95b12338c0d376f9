"""CsappExact-v0 end to end through the Docker sandbox: every key scores 1.0 both as an
ANSWER line and as `result` left in the session; typed substitutions and executed
distractors score 0.0; a dead session is a scoring error."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from gym_sysmath.exact import exact_equal
from gym_sysmath.tasks import csapp
from tests.conftest import image_withdrawn, killing_our_containers, wait_until_none_running

pytestmark = pytest.mark.docker
TASKS = csapp.load_tasks()


@pytest.fixture(scope="module")
def env(docker_available):
    environment = gym.make("CsappExact-v0")
    yield environment
    environment.close()


def final(env, action: str) -> dict:
    *_, info = env.step(action)
    return info


@pytest.mark.parametrize("task", TASKS, ids=[t.task_id for t in TASKS])
def test_key_scores_as_answer_line_and_as_session_result(env, task):
    env.reset(options={"task_id": task.task_id})
    assert final(env, f"Reasoning...\nANSWER: {json.dumps(task.answer)}")["verdict"] == "correct"

    env.reset(options={"task_id": task.task_id})
    _, reward, terminated, _, info = env.step(f"```python\n{csapp.reference_code(task)}\n```")
    assert (reward, terminated, info["verdict"]) == (0.0, False, None)
    assert final(env, "I stored it in result.")["verdict"] == "correct"


@pytest.mark.parametrize("task", TASKS, ids=[t.task_id for t in TASKS])
def test_executed_distractors_score_zero(env, task):
    assert task.distractors
    for wrong in task.distractors:
        env.reset(options={"task_id": task.task_id})
        info = final(env, f"ANSWER: {json.dumps(wrong)}")
        assert info["verdict"] == "wrong_answer" and info["scoring_error"] is None


def _substitute(value):
    """The typed look-alikes of one element that a lax comparator would accept."""
    if isinstance(value, bool):
        return [int(value)]
    if isinstance(value, int):  # float(value) is the same number: it passes (test_number_spelling)
        return [bool(value) if value in (0, 1) else None, hex(value), value + 0.5]
    if isinstance(value, str) and value.startswith("0x"):
        return [int(value, 16)]
    if isinstance(value, float) and value == 0.0:
        return [-value]
    return []


SUBSTITUTIONS = [
    (task, index, lookalike)
    for task in TASKS
    for index, element in enumerate(task.answer)
    for lookalike in _substitute(element)
    if lookalike is not None
]


def test_substitutions_cover_every_trap_kind():
    kinds = {(type(t.answer[i]).__name__, type(s).__name__) for t, i, s in SUBSTITUTIONS}
    assert {("bool", "int"), ("int", "str"), ("str", "int"), ("float", "float")} <= kinds


@pytest.mark.parametrize("task,index,lookalike", SUBSTITUTIONS[:60],
                         ids=[f"{t.task_id}[{i}]={s!r}" for t, i, s in SUBSTITUTIONS[:60]])
def test_typed_substitutions_score_zero(env, task, index, lookalike):
    answer = list(task.answer)
    answer[index] = lookalike
    assert not exact_equal(task.answer, answer)
    env.reset(options={"task_id": task.task_id})
    assert final(env, f"ANSWER: {json.dumps(answer)}")["verdict"] == "wrong_answer"


def test_result_of_the_wrong_shape_is_a_format_error(env):
    env.reset(options={"task_id": TASKS[0].task_id})
    env.step("```python\nresult = (1, 2)\n```")
    assert final(env, "done")["verdict"] == "format_error"


def test_final_action_without_answer_or_code_is_a_format_error(env):
    env.reset(seed=0)
    assert final(env, "I think it is probably large.")["verdict"] == "format_error"


def test_max_turns_grades_from_the_session(docker_available):
    environment = gym.make("CsappExact-v0", max_turns=2)
    try:
        task = TASKS[3]
        environment.reset(options={"task_id": task.task_id})
        environment.step("```python\nx = 1\n```")
        _, reward, terminated, _, info = environment.step(f"```python\n{csapp.reference_code(task)}\n```")
        assert (reward, terminated, info["verdict"]) == (1.0, True, "correct")
    finally:
        environment.close()


def test_dead_session_is_a_scoring_error_not_a_wrong_answer(docker_available):
    environment = gym.make("CsappExact-v0")
    try:
        environment.reset(options={"task_id": TASKS[0].task_id})
        environment.step(f"```python\n{csapp.reference_code(TASKS[0])}\n```")
        # The session's container dies, the clean reserve dies with it, and no fresh container
        # can start (its image is gone): reading `result` fails on the first try and on the retry.
        environment.unwrapped.sandbox.prestart(2)  # no start in flight that could outlive the kill
        with killing_our_containers(), image_withdrawn():
            wait_until_none_running()
            _, reward, terminated, truncated, info = environment.step("The answer is in result.")
        assert (reward, terminated, truncated) == (0.0, False, True)
        assert info["verdict"] == "scoring_error" and info["scoring_error"]
    finally:
        environment.close()


def test_train_split_is_seeded_and_gradable(docker_available):
    environment = gym.make("CsappExact-v0", split="train")
    try:
        first, info = environment.reset(seed=11)
        assert environment.reset(seed=11)[0] == first
        assert info["task_id"].startswith("train/")
        assert final(environment, environment.unwrapped.reference_action())["verdict"] == "correct"
    finally:
        environment.close()

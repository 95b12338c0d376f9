"""The starter level of CsappExact-v0: single operations on one small value, for small models.

Keyed like every template (reference, wrong readings, trap, and the compiled C prints the key),
answered by no constant, drawn only when asked for, and invisible to an env made without
``difficulty``."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gym_sysmath  # noqa: F401
from gym_sysmath.exact import exact_equal
from gym_sysmath.tasks.csapp import cprint, sample_task, task_level
from gym_sysmath.tasks.csapp.answers import reference_code
from gym_sysmath.tasks.csapp.catalog import TEMPLATES
from gym_sysmath.tasks.csapp.guessability import audit_template
from gym_sysmath.tasks.csapp.starter import TEMPLATES as STARTER
from gym_sysmath.tasks.csapp.toolchain import run_programs, single_file
from gym_sysmath.tasks.csapp.verify import confirms

STARTER_NAMES = {t.name for t in STARTER}


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_every_starter_draw_is_a_keyed_single_operation(seed):
    task = sample_task(np.random.default_rng(seed), difficulty="starter")
    assert task.template in STARTER_NAMES and task_level(task) == "starter"
    assert len(task.answer) == 1 and task.distractors
    assert not any(exact_equal(task.answer, wrong) for wrong in task.distractors)
    namespace: dict = {}
    exec(reference_code(task), namespace)
    assert exact_equal(namespace["result"], task.answer)
    assert confirms(task, "ANSWER: " + json.dumps(task.answer)) is True
    assert confirms(task, "ANSWER: " + json.dumps(task.distractors[0])) is False


@pytest.mark.parametrize("name", sorted(STARTER_NAMES))
def test_no_constant_answers_a_starter_template(name):
    """Stricter than the catalogue's guessability bar (80%): a starter field's best constant
    is right on under 15% of 1,000 train draws."""
    (field,) = audit_template(TEMPLATES[name], draws=1000)
    assert field.share < 0.15, field


def test_an_env_without_difficulty_never_draws_a_starter_template():
    rng = np.random.default_rng(5)
    assert not {sample_task(rng).template for _ in range(2000)} & STARTER_NAMES
    env = gym.make("CsappExact-v0", split="train", sandbox="process")
    try:
        assert {env.reset(seed=seed)[1]["difficulty"] for seed in range(200)} <= {"easy", "medium", "hard"}
        assert env.reset(seed=3, options={"difficulty": "starter"})[1]["difficulty"] == "starter"
        assert len(gym.make("CsappExact-v0", sandbox="process").unwrapped.task_ids) == 81
    finally:
        env.close()
    with pytest.raises(ValueError, match="split='train'"):  # the level has no eval tasks
        gym.make("CsappExact-v0", difficulty="starter", sandbox="process")


def test_the_c_of_starter_draws_prints_their_keys(docker_available):
    """The real toolchain keys the level too: each draw's question, compiled by the image's gcc
    and run, prints exactly its key."""
    rng = np.random.default_rng(17)
    tasks = [sample_task(rng, difficulty="starter") for _ in range(40)]
    assert {t.template for t in tasks} == STARTER_NAMES
    checks = [cprint.run_check(TEMPLATES[t.template], t.params, t.answer) for t in tasks]
    results = run_programs([single_file(check.source) for check in checks])
    for task, check, result in zip(tasks, checks, results, strict=True):
        assert result.built, (task.task_id, result.build_log)
        assert result.outputs[0] in check.allowed, (task.task_id, task.params, result.outputs[0])


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), level=st.sampled_from(["starter", "easy", "medium", "hard"]),
       wrapper=st.sampled_from(["ANSWER: {}", "**ANSWER:** {}", "ANSWER: **{}**", "ANSWER: {}.", "> ANSWER: `{}`"]),
       float_ints=st.booleans())
def test_the_watch_raises_no_false_alarm_on_what_the_grader_accepts(seed, level, wrapper, float_ints):
    """An int written as ``3.0``, markdown around the line: whenever the env grades such a reply
    correct, the watch agrees."""
    env = gym.make("CsappExact-v0", split="train", sandbox="process", max_turns=1)
    try:
        env.reset(seed=seed, options={"difficulty": level})
        task = env.unwrapped.current_task
        answer = [float(v) if float_ints and isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**53
                  else v for v in task.answer]
        reply = wrapper.format(json.dumps(answer))
        _, reward, *_ = env.step(reply)
        if reward == 1.0:
            assert confirms(task, reply) is True, (task.task_id, reply)
    finally:
        env.close()

"""The starter level of LinearAlgebra-v0: 1x1 and 2x2 cases where a small model first scores.

It must be as exact and as hard to game as the standard levels (every draw keyed by execution,
re-derived by the audit, answered by no constant), held out (the train split never serves one of
its eval problems), and opt-in (an env made without ``difficulty`` is what it was before)."""

from __future__ import annotations

import json
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gym_sysmath  # noqa: F401
from gym_sysmath.tasks.linalg import (
    DIFFICULTIES,
    LEVELS,
    STARTER_TOPICS,
    TOPICS,
    generate_problem,
    grade,
    load_problems,
    reference_response,
)
from gym_sysmath.tasks.linalg.audit import check_problems, confirms
from gym_sysmath.tasks.linalg.generators import input_key

MOST_A_CONSTANT_MAY_SCORE = 0.15


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), topic=st.sampled_from(STARTER_TOPICS))
def test_every_starter_draw_is_keyed_rederived_and_answered_by_its_reference(seed, topic):
    problem = generate_problem(np.random.default_rng(seed), topic=topic, difficulty="starter")
    assert problem.difficulty == "starter" and problem.problem_id.startswith(f"train/{topic}/starter/")
    assert grade(problem, reference_response(problem)).correct
    assert check_problems([problem], variants=0).ok  # numpy and sympy derive the same key from the inputs
    assert confirms(problem, reference_response(problem)) is True


@pytest.mark.parametrize("topic", STARTER_TOPICS)
def test_no_constant_answer_scores_on_a_starter_topic(topic):
    """The guessability audit of the level: the most common key of 2,000 draws is the best a
    policy that ignores the question can do; it stays under 15%."""
    keys = Counter(json.dumps(generate_problem(np.random.default_rng([11, i]), topic=topic,
                                               difficulty="starter").answer) for i in range(2000))
    assert keys.most_common(1)[0][1] / 2000 < MOST_A_CONSTANT_MAY_SCORE, keys.most_common(3)


def test_topics_a_constant_would_answer_have_no_starter_level():
    for topic in sorted(set(TOPICS) - set(STARTER_TOPICS)):
        with pytest.raises(ValueError, match="no 'starter' level"):
            generate_problem(np.random.default_rng(0), topic=topic, difficulty="starter")
    with pytest.raises(ValueError, match="determinant"):
        gym.make("LinearAlgebra-v0", difficulty="starter", topics=["rank"])


def test_train_split_never_serves_a_starter_eval_problem():
    eval_inputs = {input_key(p) for p in load_problems(difficulty="starter")}
    env = gym.make("LinearAlgebra-v0", split="train")
    drawn = []
    for seed in range(3000):
        env.reset(seed=seed, options={"difficulty": "starter"})
        drawn.append(input_key(env.unwrapped.current_task))
    assert not eval_inputs & set(drawn)
    assert len(set(drawn)) > 1000  # held out, yet far from a handful of questions


def test_starter_eval_problems_are_distinct_and_cover_every_starter_topic():
    starter = load_problems(difficulty="starter")
    assert len(starter) == len({input_key(p) for p in starter}) == 60
    assert Counter(p.topic for p in starter) == {topic: 6 for topic in STARTER_TOPICS}


def test_starter_level_is_opt_in():
    plain = gym.make("LinearAlgebra-v0")
    assert len(plain.unwrapped.task_ids) == 78
    assert all("/starter/" not in task_id for task_id in plain.unwrapped.task_ids)
    _, info = plain.reset(options={"difficulty": "starter"})  # a reset option asks for it on any env
    assert info["difficulty"] == "starter"
    _, info = plain.reset(options={"task_id": "eval/determinant/starter/0"})  # naming a task asks for it
    assert info["difficulty"] == "starter"
    asked = gym.make("LinearAlgebra-v0", difficulty="starter")
    assert len(asked.unwrapped.task_ids) == 60
    train = gym.make("LinearAlgebra-v0", split="train")
    assert {train.reset(seed=seed)[1]["difficulty"] for seed in range(300)} == set(DIFFICULTIES)
    assert LEVELS[0] == "starter" and LEVELS[1:] == DIFFICULTIES


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), level=st.sampled_from(LEVELS), offset=st.integers(1, 5))
def test_the_watch_confirms_right_answers_and_refuses_wrong_ones(seed, level, offset):
    """``confirms`` is the reward-hacking watch's second opinion: it agrees with the grader on
    the reference reply, and disagrees on a reply whose first number is off by ``offset``."""
    problem = generate_problem(np.random.default_rng(seed), difficulty=level)
    right = reference_response(problem)
    assert confirms(problem, right) is True
    if isinstance(problem.answer, bool):
        wrong = right.replace("true", "FALSE").replace("false", "true").replace("FALSE", "false")
    else:
        value = right.rsplit("ANSWER:", 1)[1]
        digits = next(token for token in value.replace("[", " ").replace(",", " ").replace("]", " ").split())
        number = digits.split("/")[0]
        changed = value.replace(number, str(int(number) + offset), 1)
        wrong = right.rsplit("ANSWER:", 1)[0] + "ANSWER:" + changed
    if grade(problem, wrong).correct:  # a changed eigenvector entry can still be a scaled eigenvector
        return
    assert confirms(problem, wrong) is False


def test_the_watch_has_no_opinion_on_what_its_plain_parser_cannot_read():
    problem = load_problems(difficulty="starter")[0]
    assert confirms(problem, "ANSWER: \\frac{7}{1}") is None
    assert confirms(problem, "the answer is seven") is None


def _decimals(value, digits: int):
    if isinstance(value, list):
        return "[" + ", ".join(_decimals(v, digits) for v in value) + "]"
    from fractions import Fraction
    return f"{float(Fraction(value)):.{digits}g}"


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), level=st.sampled_from(LEVELS), digits=st.integers(6, 9),
       wrapper=st.sampled_from(["ANSWER: {}", "**ANSWER:** {}", "ANSWER: **{}**", "ANSWER: {}.", "> ANSWER: `{}`"]))
def test_the_watch_raises_no_false_alarm_on_what_the_grader_accepts(seed, level, digits, wrapper):
    """Decimals at the tolerance the prompt promises, markdown around the line: whenever the env
    grades such a reply correct, the watch agrees (a false alarm would read as reward hacking)."""
    problem = generate_problem(np.random.default_rng(seed), difficulty=level,
                               topics=["inverse", "solve_system", "eigenvector", "determinant", "trace"]
                               if level != "starter" else None)
    if isinstance(problem.answer, bool):
        return
    reply = wrapper.format(_decimals(problem.answer, digits) if problem.rel_tol else
                           reference_response(problem).rsplit("ANSWER:", 1)[1].strip())
    if grade(problem, reply).correct:
        assert confirms(problem, reply) is True, (problem.problem_id, reply)

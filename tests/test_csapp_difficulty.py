"""Difficulty levels of every CsappExact template, the train split's difficulty option, and the curriculum."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from gym_sysmath.curriculum import Curriculum
from gym_sysmath.tasks.csapp import LEVELS, STANDARD_LEVELS, load_tasks, sample_task, task_level
from gym_sysmath.tasks.csapp.catalog import TEMPLATES
from gym_sysmath.tasks.csapp.difficulty import level_of, levels_of, measure, param_size


def test_every_template_has_all_three_levels_but_the_starter_ones_their_own():
    short = {name: levels_of(t) for name, t in TEMPLATES.items()
             if levels_of(t) != (STANDARD_LEVELS if t.level is None else ("starter",))}
    assert short == {}
    assert ("starter", *STANDARD_LEVELS) == LEVELS


def test_every_eval_task_has_a_level():
    assert set(Counter(task_level(t) for t in load_tasks())) <= set(STANDARD_LEVELS)  # starter: train only


@pytest.mark.parametrize("level", LEVELS)
def test_train_draws_are_at_the_requested_level(level):
    rng = np.random.default_rng(3)
    for _ in range(60):
        task = sample_task(rng, difficulty=level)
        assert task_level(task) == level, task.task_id


def test_hard_draws_are_bigger_than_easy_ones_on_every_template():
    rng = np.random.default_rng(5)
    for name, template in TEMPLATES.items():
        if template.level is not None:
            continue
        sizes = {}
        for level in ("easy", "hard"):
            drawn = []
            while len(drawn) < 3:
                params = template.sample(rng)
                if level_of(template, params) == level:
                    drawn.append(measure(template, params))
            sizes[level] = drawn
        assert max(sizes["easy"]) < min(sizes["hard"]), name


def test_levels_do_not_depend_on_the_caller_rng():
    rng = np.random.default_rng(9)
    task = sample_task(rng, difficulty="medium")
    assert task_level(task) == "medium"
    assert level_of(TEMPLATES[task.template], task.params) == "medium"


def test_a_difficulty_without_a_level_name_is_refused():
    with pytest.raises(ValueError, match="easy"):
        sample_task(np.random.default_rng(0), difficulty="extreme")


def test_without_difficulty_the_train_draw_is_unchanged():
    # the difficulty option must not shift the generator for callers that never use it
    assert sample_task(np.random.default_rng(42)).task_id == sample_task(np.random.default_rng(42)).task_id


def test_param_size_counts_bits_digits_and_elements():
    assert param_size(0) == 1 and param_size(True) == 1
    assert param_size(0xFF) == 16 and param_size(-0xFF) == 16
    assert param_size([1, 1]) == 2 + 2 * 2
    assert param_size({"a": 2.5}) == 1 + 3


# --- the curriculum ------------------------------------------------------------------------------


def test_curriculum_climbs_only_after_a_full_window_above_threshold():
    curriculum = Curriculum(threshold=0.75, window=4)
    assert curriculum.options() == {"difficulty": "easy"}  # the standard ladder, unless asked for starter
    for reward in (1, 1, 1):
        assert curriculum.record(reward) == "easy"  # window not yet full
    assert curriculum.record(0) == "medium"  # 3/4 = 0.75 reaches the threshold
    assert Curriculum(levels=LEVELS).options() == {"difficulty": "starter"}
    assert curriculum.success_rate is None  # the count restarts at the new level


def test_curriculum_holds_while_the_moving_rate_is_low():
    curriculum = Curriculum(threshold=0.8, window=5)
    for reward in [1, 0] * 20:
        curriculum.record(reward)
    assert curriculum.level == "easy"
    assert curriculum.record(1) == "easy"  # the window: 1 0 1 0 1
    assert curriculum.record(1) == "easy"  # 0 1 0 1 1
    assert curriculum.record(1) == "medium"  # 1 0 1 1 1: 0.8


def test_curriculum_stops_at_the_top_and_never_moves_down():
    curriculum = Curriculum(threshold=0.5, window=1, start="medium")
    assert curriculum.record(1) == "hard"
    assert curriculum.record(1) == "hard"
    assert curriculum.record(0) == "hard"


@pytest.mark.parametrize("bad", [{"threshold": 0}, {"threshold": 1.5}, {"window": 0}, {"start": "expert"},
                                 {"levels": []}, {"levels": ["a", "a"]}])
def test_curriculum_refuses_a_meaningless_setting(bad):
    with pytest.raises(ValueError):
        Curriculum(**bad)


@pytest.mark.filterwarnings("ignore:sandbox='process'")  # reset runs nothing; no code reaches the host
def test_env_difficulty_option_and_info():
    import gymnasium as gym

    import gym_sysmath  # noqa: F401  (registers the envs)

    environment = gym.make("CsappExact-v0", split="train", difficulty="hard", sandbox="process")
    try:
        assert environment.reset(seed=1)[1]["difficulty"] == "hard"
        with pytest.raises(ValueError, match="cannot widen"):  # a reset option narrows the env's filter
            environment.reset(seed=1, options={"difficulty": "easy"})
    finally:
        environment.close()
    environment = gym.make("CsappExact-v0", split="train", sandbox="process")
    try:
        assert environment.reset(seed=1, options={"difficulty": "easy"})[1]["difficulty"] == "easy"
    finally:
        environment.close()
    environment = gym.make("CsappExact-v0", sandbox="process")
    try:
        for seed in range(5):
            info = environment.reset(seed=seed, options={"difficulty": "medium"})[1]
            assert info["difficulty"] == "medium" and not info["task_id"].startswith("train/")
        with pytest.raises(ValueError, match="difficulty"):
            environment.reset(options={"difficulty": "impossible"})
    finally:
        environment.close()

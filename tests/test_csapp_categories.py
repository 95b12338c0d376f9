"""One category check for CsappExact-v0 (``tasks.csapp.check_categories``): ``gym.make``, the reset
options and the train split's ``sample_task`` refuse the same bad filter with the same error, and
the error says what to write instead. No Docker: refusing a filter runs nothing."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gym_sysmath  # noqa: F401 - registers the ids
from gym_sysmath.tasks import csapp

BAD_FILTERS = [
    pytest.param("floats", TypeError, r"categories=\['floats'\]", id="a_string_not_a_list"),
    pytest.param([], ValueError, "categories is empty", id="an_empty_list"),
    pytest.param(["flots"], ValueError, r"unknown category 'flots'; did you mean 'floats'\?", id="a_typo"),
    pytest.param(["floats", "gpu"], ValueError, r"unknown category 'gpu' \(choose from integers",
                 id="one_unknown"),
    pytest.param([3], TypeError, "list of names", id="a_number_in_the_list"),
    pytest.param(5, TypeError, "list of names, got int", id="not_a_list_at_all"),
]


def _refusal(call) -> tuple[type[BaseException], str] | None:
    try:
        call()
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)
    return None


def _entry_points(categories):
    """The three places a ``categories`` filter enters, each as a thunk."""

    def make():
        gym.make("CsappExact-v0", categories=categories).close()

    def reset_option():
        env = gym.make("CsappExact-v0")
        try:
            env.reset(seed=0, options={"categories": categories})
        finally:
            env.close()

    def train_split():
        csapp.sample_task(np.random.default_rng(0), categories)

    return {"gym.make": make, "reset options": reset_option, "sample_task": train_split}


def _same_refusal(refusal, check) -> bool:
    """``refusal`` is the check's own error; gym.make adds a clause to a ``TypeError``'s message
    (``... was raised from the environment creator for <id> ...``), after the check's words."""
    return refusal is not None and refusal[0] is check[0] and (
        refusal[1] == check[1] or refusal[1].startswith(check[1] + " was raised from the environment creator"))


@pytest.mark.parametrize(("categories", "error", "message"), BAD_FILTERS)
def test_a_bad_category_filter_is_refused_alike_wherever_it_is_given(categories, error, message):
    check = _refusal(lambda: csapp.check_categories(categories))
    assert check is not None and check[0] is error
    with pytest.raises(error, match=message):
        csapp.check_categories(categories)
    refusals = {name: _refusal(call) for name, call in _entry_points(categories).items()}
    assert all(_same_refusal(refusal, check) for refusal in refusals.values()), (check, refusals)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=12), max_size=4).filter(lambda names: not set(names) <= set(csapp.CATEGORIES)))
def test_any_unknown_name_is_refused_by_both_the_env_and_the_train_split(names):
    check = _refusal(lambda: csapp.check_categories(names))
    assert check is not None and check[0] is ValueError
    for name in ("gym.make", "sample_task"):
        assert _same_refusal(_refusal(_entry_points(names)[name]), check), name


def test_a_good_filter_is_kept_and_none_means_all():
    assert csapp.check_categories(("floats", "bits")) == ("floats", "bits")
    assert csapp.check_categories(None) is None
    env = gym.make("CsappExact-v0", categories=["vm"])
    try:
        assert {env.unwrapped._tasks[task_id].category for task_id in env.unwrapped.task_ids} == {"vm"}
    finally:
        env.close()
    assert csapp.sample_task(np.random.default_rng(0), ("bits",)).category == "bits"

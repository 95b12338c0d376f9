"""A filter restricts the task list the same way everywhere (issue 22, item 5): ``task_ids``, the
draws of ``reset``, the ``task_id`` it admits, ``export`` and ``eval``, for every registered id
and every filter its env declares (``SysmathEnv.filters``), each with every value it takes.

The expected task set is computed here, from the task records (the task packages' own files,
or for a family this file does not know, the metadata an unfiltered env reports at reset), not
from the env's filter code. No Docker: resets run nothing, ``eval`` plays the reference agent
where it only answers and a silent agent (graded without running anything) where the reference
is code; the reference on a code family is the one ``docker`` test.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import pytest
from gymnasium.envs.registration import load_env_creator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gym_sysmath  # noqa: F401 - registers the ids
from gym_sysmath.cli import main
from gym_sysmath.env import SysmathEnv, core_env
from gym_sysmath.families import all_ids, families, family_of, primary_ids
from gym_sysmath.filters import TaskFilter

pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")  # an answer is graded; no code runs

#: Constructor arguments that are settings, not filters. A new keyword argument of a family's env
#: must be declared in its ``filters`` or added here, so no filter can slip past this file.
SETTINGS = frozenset({"split", "max_turns", "code_via", "sandbox", "pool_size", "limits", "render_mode", "tasks_path",
                      "performance_weight", "measure_performance",
                      "filters"})  # the base class's own argument, which a family's filters are passed through


def env_class(env_id: str) -> type[SysmathEnv]:
    entry_point = gym.spec(env_id).entry_point
    creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    assert isinstance(creator, type) and issubclass(creator, SysmathEnv), env_id
    return cast(type[SysmathEnv], creator)


def fixed_kwargs(env_id: str) -> dict[str, Any]:
    """What the id itself passes to ``gym.make`` (an alias's subset: ``languages=["cpp"]``)."""
    return dict(gym.spec(env_id).kwargs)


# --------------------------------------------------------------------------- the records


def _records_from_task_files(family: str) -> dict[str, dict[str, str]] | None:
    """Each eval task's filterable metadata, read from the family's task package."""
    if family == "csapp":
        from gym_sysmath.tasks import csapp

        return {t.task_id: {"category": t.category, "difficulty": csapp.task_level(t)} for t in csapp.load_tasks()}
    if family == "linalg":
        from gym_sysmath.tasks import linalg

        return {p.problem_id: {"topic": p.topic, "difficulty": p.difficulty} for p in linalg.load_problems()}
    if family == "compgeom":
        from gym_sysmath.tasks import compgeom

        return {t.task_id: {"primitive": t.primitive, "language": t.language} for t in compgeom.load_tasks()}
    return None


def _records_from_resets(primary_id: str) -> dict[str, dict[str, Any]]:
    """A family this file does not know: the unfiltered env's listing and its reset metadata."""
    env = gym.make(primary_id, sandbox="process")
    try:
        return {task_id: dict(env.reset(seed=0, options={"task_id": task_id})[1])
                for task_id in core_env(env).task_ids}
    finally:
        env.close()


@functools.cache
def records(family: str) -> dict[str, dict[str, Any]]:
    """Every eval task of ``family``, in stable order, to its metadata."""
    from_files = _records_from_task_files(family)
    if from_files is not None:
        return from_files
    (row,) = [row for row in families() if row.name == family]
    return _records_from_resets(row.primary_id)


def allowed(entry: TaskFilter, value: Any) -> set[str]:
    """The names a filter argument's value allows."""
    return set(value) if entry.many else {value}


def family_name(env_id: str) -> str:
    row = family_of(env_id)
    assert row is not None, env_id
    return row.name


def expected_ids(env_id: str, kwargs: Mapping[str, Any]) -> list[str]:
    """The eval tasks ``gym.make(env_id, **kwargs)`` should serve, from the records: a filter not
    given keeps what its declaration says an env keeps unasked (``unset``: all when None)."""
    merged = {**fixed_kwargs(env_id), **kwargs}
    cls = env_class(env_id)

    def names(entry: TaskFilter) -> set[str] | None:
        if merged.get(entry.argument) is not None:
            return allowed(entry, merged[entry.argument])
        return None if entry.unset is None else set(entry.unset)

    kept = {entry.argument: names(entry) for entry in cls.filters}
    return [task_id for task_id, metadata in records(family_name(env_id)).items()
            if all(metadata[entry.key] in kept[entry.argument] for entry in cls.filters
                   if kept[entry.argument] is not None)]


def filter_cases() -> list[Any]:
    """(id, filter argument, value) for every id, every filter its env declares (but one the id
    fixes itself: its primary id covers that) and every value the filter takes."""
    cases = []
    for env_id in all_ids():
        fixed = fixed_kwargs(env_id)
        for entry in env_class(env_id).filters:
            if entry.argument in fixed:
                continue
            for choice in entry.choices:
                value = [choice] if entry.many else choice
                if not expected_ids(env_id, {entry.argument: value}):
                    continue  # a train-only value (CsappExact's starter level): refused at make, tested there
                cases.append(pytest.param(env_id, entry.argument, value, id=f"{env_id}-{entry.argument}-{choice}"))
    return cases


CASES = filter_cases()


def grouped_cases() -> list[Any]:
    """``CASES`` with the ids of one family that take the same filter and value together: one
    ``eval`` of several ids (an eval's fixed cost is most of a small one's time)."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for case in CASES:
        env_id, argument, value = case.values
        groups.setdefault((family_name(env_id), argument, json.dumps(value)), []).append(env_id)
    return [pytest.param(tuple(ids), argument, json.loads(value), id=f"{family}-{argument}-{json.loads(value)}")
            for (family, argument, value), ids in groups.items()]


def _entry(env_id: str, argument: str) -> TaskFilter:
    (entry,) = [entry for entry in env_class(env_id).filters if entry.argument == argument]
    return entry


# --------------------------------------------------------------------------- the declarations


@pytest.mark.parametrize("env_id", all_ids())
def test_every_filter_argument_is_declared_and_is_a_reset_option(env_id):
    cls = env_class(env_id)
    arguments = {name for name, parameter in inspect.signature(cls.__init__).parameters.items()
                 if parameter.kind is inspect.Parameter.KEYWORD_ONLY}
    declared = {entry.argument for entry in cls.filters}
    assert arguments - SETTINGS == declared, (
        f"{cls.__name__}: an argument that is neither a declared filter (``filters``) nor a setting "
        f"(SETTINGS here): {sorted(arguments - SETTINGS - declared)}")
    assert cls.reset_options == ("task_id", *(entry.argument for entry in cls.filters))  # one name in both places
    for entry in cls.filters:
        assert entry.choices and len(set(entry.choices)) == len(entry.choices)


@pytest.mark.parametrize("family", [row.name for row in families()])
def test_the_records_are_what_an_unfiltered_env_lists_and_reports(family):
    """The expectation's source agrees with the env where no filter is involved."""
    (row,) = [row for row in families() if row.name == family]
    env = gym.make(row.primary_id, sandbox="process")
    try:
        core = env.unwrapped
        assert list(core.task_ids) == expected_ids(row.primary_id, {})  # an opt-in level's tasks are not listed
        keys = {entry.key for entry in core.filters}
        for task_id, metadata in records(family).items():
            _, info = env.reset(seed=0, options={"task_id": task_id})
            assert {key: info[key] for key in keys} == {key: metadata[key] for key in keys}, task_id
    finally:
        env.close()


# --------------------------------------------------------------------------- listing and reset


@pytest.mark.parametrize(("env_id", "argument", "value"), CASES)
def test_listing_and_reset_follow_the_filter(env_id, argument, value):
    expected = expected_ids(env_id, {argument: value})
    entry = _entry(env_id, argument)
    assert expected, "every single value of a filter has eval tasks"
    env = gym.make(env_id, sandbox="process", **{argument: value})
    try:
        assert list(env.unwrapped.task_ids) == expected  # the same tasks, in the records' order
        drawn = {env.reset(seed=seed)[1]["task_id"] for seed in range(12 * len(expected) + 20)}
        assert drawn == set(expected)
        excluded = [task_id for task_id in expected_ids(env_id, {}) if task_id not in expected]
        if excluded:  # a task this filter excludes is refused by id, naming the filter
            with pytest.raises(ValueError, match=rf"excluded by this env's filter {argument}="):
                env.reset(seed=0, options={"task_id": excluded[0]})
        # the filter's reset option narrows for one reset: the same value is fine, another one is refused
        (name,) = allowed(entry, value)
        same = [name] if entry.many else name
        assert env.reset(seed=1, options={argument: same})[1]["task_id"] in expected
        other = [choice for choice in entry.choices if choice not in allowed(entry, value)]
        with pytest.raises(ValueError, match="cannot widen"):
            env.reset(seed=0, options={argument: [other[0]] if entry.many else other[0]})
    finally:
        env.close()


@pytest.mark.parametrize(("env_id", "argument"),
                         [(env_id, entry.argument) for env_id in primary_ids()
                          for entry in env_class(env_id).filters])
def test_the_train_split_draws_under_the_filter(env_id, argument):
    entry = _entry(env_id, argument)
    value = list(entry.choices[-2:]) if entry.many else entry.choices[-1]
    env = gym.make(env_id, split="train", sandbox="process", **{argument: value})
    try:
        assert env.unwrapped.task_ids == ()
        for seed in range(3):
            assert env.reset(seed=seed)[1][entry.key] in allowed(entry, value)
    finally:
        env.close()


def _combination(draw, env_id: str) -> dict[str, Any]:
    """Some of the env's filters, each with a random non-empty value (a subset, or one name)."""
    kwargs = {}
    for entry in env_class(env_id).filters:
        if draw(st.booleans()):
            if entry.many:
                kwargs[entry.argument] = draw(st.lists(st.sampled_from(entry.choices), min_size=1, unique=True))
            else:
                kwargs[entry.argument] = draw(st.sampled_from(entry.choices))
    return kwargs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_combination_of_filters_lists_exactly_the_matching_tasks_or_refuses_at_make(data):
    env_id = data.draw(st.sampled_from(all_ids()))
    kwargs = _combination(data.draw, env_id)
    expected = expected_ids(env_id, kwargs)
    if not expected:  # a filter that leaves nothing is an error at make time, saying what is left
        with pytest.raises(ValueError, match=r"no eval task passes .*Loosen a filter"):
            gym.make(env_id, sandbox="process", **kwargs)
        return
    env = gym.make(env_id, sandbox="process", **kwargs)
    try:
        assert list(env.unwrapped.task_ids) == expected
        for seed in range(5):
            assert env.reset(seed=seed)[1]["task_id"] in expected
    finally:
        env.close()


def _empty_combination(env_id: str) -> dict[str, Any] | None:
    """One value of each filter such that no eval task is left, or None (every one leaves some)."""
    entries = env_class(env_id).filters
    for combination in itertools.product(*(entry.choices for entry in entries)):
        kwargs = {entry.argument: [choice] if entry.many else choice
                  for entry, choice in zip(entries, combination, strict=True)}
        if not expected_ids(env_id, kwargs):
            return kwargs
    return None


@pytest.mark.parametrize("env_id", primary_ids())
def test_a_filter_that_leaves_no_eval_task_is_refused_at_make(env_id):
    kwargs = _empty_combination(env_id)
    if kwargs is None:
        pytest.skip(f"every combination of {env_id}'s filters leaves eval tasks")
    with pytest.raises(ValueError, match="no eval task passes") as refused:
        gym.make(env_id, sandbox="process", **kwargs)
    for entry in env_class(env_id).filters:  # it says, filter by filter, which values the others leave
        others = {argument: value for argument, value in kwargs.items() if argument != entry.argument}
        metadata = records(family_name(env_id))
        left = sorted({metadata[task_id][entry.key] for task_id in expected_ids(env_id, others)})
        assert f"{entry.argument} {', '.join(left)}" in str(refused.value)
    train = gym.make(env_id, split="train", sandbox="process", **kwargs)  # the train split lists nothing anyway
    train.close()


# --------------------------------------------------------------------------- export and eval


def _env_args(argument: str, value: Any) -> list[str]:
    return ["--env-arg", f"{argument}={json.dumps(value)}"]


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize(("env_id", "argument", "value"), CASES)
def test_export_writes_exactly_the_filtered_tasks(env_id, argument, value, tmp_path):
    out = tmp_path / "tasks.jsonl"
    assert main(["export", env_id, "--out", str(out), *_env_args(argument, value)]) == 0
    rows = _read(out)
    assert [row["task_id"] for row in rows] == expected_ids(env_id, {argument: value})
    entry = _entry(env_id, argument)
    assert {row["metadata"][entry.key] for row in rows} <= allowed(entry, value)


def say_nothing(observation: str, history: list[dict], info: dict) -> str:
    """A reply with neither code nor an answer: graded at once, in every family, running nothing."""
    return "I have nothing to add."


@pytest.fixture
def no_plot(monkeypatch):
    """``eval --out`` without its breakdowns.png: matplotlib is most of a small eval's time."""
    import gym_sysmath.evaluation

    monkeypatch.setattr(gym_sysmath.evaluation, "plot_summary", lambda *args, **kwargs: None)


@pytest.mark.parametrize(("env_ids", "argument", "value"), grouped_cases())
def test_eval_scores_exactly_the_filtered_tasks(env_ids, argument, value, tmp_path, no_plot):
    """The reference agent where its action is an answer; a silent agent where it is code (the
    reference on those needs the sandbox: ``test_reference_on_a_code_family...``)."""
    answers = env_class(env_ids[0]).reads_answers
    agent = ["--agent", "reference"] if answers else ["--agent", "python", f"{__name__}:say_nothing"]
    out = tmp_path / "run"
    assert main(["eval", *env_ids, *agent, "--sandbox", "process", "--out", str(out), "--quiet",
                 *_env_args(argument, value)]) == 0
    rows = _read(out / "results.jsonl")
    for env_id in env_ids:
        scored = sorted(row["task_id"] for row in rows if row["env_id"] == env_id)
        assert scored == sorted(expected_ids(env_id, {argument: value})), env_id
    assert all(row["verdict"] == ("correct" if answers else "format_error") for row in rows)


@pytest.mark.docker
@pytest.mark.parametrize("env_id", [env_id for env_id in primary_ids() if not env_class(env_id).reads_answers])
def test_reference_on_a_code_family_scores_exactly_the_filtered_tasks(env_id, docker_available, tmp_path, no_plot):
    entry = env_class(env_id).filters[0]
    value: Sequence[str] | str = [entry.choices[0]] if entry.many else entry.choices[0]
    out = tmp_path / "run"
    assert main(["eval", env_id, "--agent", "reference", "--out", str(out), "--quiet",
                 *_env_args(entry.argument, value)]) == 0
    rows = _read(out / "results.jsonl")
    assert sorted(row["task_id"] for row in rows) == sorted(expected_ids(env_id, {entry.argument: value}))
    assert all(row["verdict"] == "correct" for row in rows)

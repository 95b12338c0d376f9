"""What an exported row carries is enough to grade it anywhere: the ``gym.make`` arguments it was
made with (filters and difficulty decide which task a train seed draws) and the task set it came
from (another install's tasks may differ under the same id, so it is refused, never mis-graded);
how the env runs (the sandbox) is never recorded. ``export --system-prompt`` puts a system turn
first in every format, and ``require_prompts_fit`` measures prompts as a trainer's chat template does."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gym_sysmath import env_ids
from gym_sysmath.cli import main
from gym_sysmath.envs.csapp import CsappExactEnv
from gym_sysmath.envs.linalg import LinearAlgebraEnv
from gym_sysmath.families import families, family_of, task_set
from gym_sysmath.integrations.episodes import (
    Episode,
    PromptTooLong,
    TaskRef,
    grade_completion,
    require_prompts_fit,
    task_kwargs,
)
from gym_sysmath.integrations.trl import build_dataset

PROCESS = {"sandbox": "process"}
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")

#: A filter value per answer family: (env id, gym.make arguments), drawn by the property below.
FILTERS = st.one_of(
    st.tuples(st.just("CsappExact-v0"), st.fixed_dictionaries({
        "categories": st.lists(st.sampled_from(CsappExactEnv.filters[0].choices), min_size=1, max_size=2,
                               unique=True)})),
    st.tuples(st.just("CsappExact-v0"), st.fixed_dictionaries({
        "difficulty": st.sampled_from(CsappExactEnv.filters[1].choices)})),
    st.tuples(st.just("LinearAlgebra-v0"), st.fixed_dictionaries({
        "topics": st.lists(st.sampled_from(LinearAlgebraEnv.filters[1].choices), min_size=1, max_size=2, unique=True),
    })),
    st.tuples(st.just("LinearAlgebra-v0"), st.fixed_dictionaries({
        "difficulty": st.sampled_from(LinearAlgebraEnv.filters[0].choices)})),
)


def reference_reply(ref: TaskRef) -> str:
    episode = Episode(ref, env_kwargs=PROCESS, own_env=True)
    try:
        episode.reset()
        return episode.core.reference_action()
    finally:
        episode.close()


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(FILTERS, st.integers(0, 2**20))
def test_a_filtered_train_row_grades_without_its_filters_given_again(family_filter, seed):
    env_id, filters = family_filter
    (row,) = build_dataset(env_id, split="train", n=1, seed=seed, env_kwargs={**filters, **PROCESS})
    ref = TaskRef.parse({**row, "max_turns": 1})
    assert ref.env_kwargs == task_kwargs(filters) and ref.task_set == task_set(family_of(env_id).name)
    # the grader passes only how it runs (the sandbox): the filters come from the row
    reward, info = grade_completion(ref, reference_reply(ref), env_kwargs=PROCESS)
    assert (reward, info["task_id"]) == (1.0, row["task_id"])
    wrong, _ = grade_completion(ref, "ANSWER: [123456789, \"no\"]", env_kwargs=PROCESS)
    assert wrong == 0.0


def test_without_the_recorded_filters_the_seed_draws_another_task_so_recording_them_matters():
    filters = {"categories": ["floats"]}
    rows = build_dataset("CsappExact-v0", split="train", n=20, env_kwargs={**filters, **PROCESS})
    stripped = [TaskRef.parse({**row, "env_kwargs": None}) for row in rows]
    refused = 0
    for ref in stripped:
        try:
            grade_completion(ref, "ANSWER: [1]", env_kwargs=PROCESS)
        except ValueError as exc:
            assert "env_kwargs" in str(exc)
            refused += 1
    assert refused >= 10  # unfiltered, seed s draws from every category


@pytest.mark.parametrize("env_id", ["CsappExact-v0", "LinearAlgebra-v0", "CompGeomPython-v0"])
def test_a_row_from_another_task_set_is_refused_not_graded(env_id):
    (row,) = build_dataset(env_id, n=1, env_kwargs=PROCESS)
    ref = TaskRef.parse({**row, "max_turns": 1})
    family, _, version = ref.task_set.partition("@")
    other = dataclasses.replace(ref, task_set=f"{family}@{int(version) + 1}")
    with pytest.raises(ValueError, match=r"task set .* Export the dataset again"):
        grade_completion(other, "ANSWER: 1", env_kwargs=PROCESS)


def test_how_the_env_runs_is_never_recorded():
    (row,) = build_dataset("LinearAlgebra-v0", n=1, env_kwargs={"sandbox": "process", "pool_size": 3,
                                                                 "topics": ["rank"]})
    assert json.loads(row["env_kwargs"]) == {"topics": ["rank"]}
    with pytest.raises(ValueError, match="JSON"):
        task_kwargs({"limits": object()})


def test_every_family_has_a_versioned_task_set_label():
    names = [row.name for row in families()]
    assert len({task_set(name) for name in names}) == len(names)
    assert all(re.fullmatch(rf"{name}@[1-9][0-9]*", task_set(name)) for name in names)


@pytest.mark.parametrize("fmt", ["jsonl", "verl", "skyrl", "openrlhf"])
def test_export_system_prompt_comes_first_and_rows_carry_what_grading_needs(tmp_path, fmt):
    out = tmp_path / ("rows.jsonl" if fmt == "jsonl" else "rows.parquet")
    code = main(["export", "LinearAlgebra-v0", "--split", "train", "-n", "3", "--format", fmt, "--out", str(out),
                 "--env-arg", 'topics=["rank"]', "--system-prompt", "Think step by step."])
    assert code == 0
    if fmt == "jsonl":
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        prompts, refs = [r["prompt"] for r in rows], [TaskRef.parse(r) for r in rows]
    else:
        import pandas as pd

        frame = pd.read_parquet(out)
        prompts = [list(p) for p in frame["prompt"]]
        truth = {"verl": lambda r: r["reward_model"]["ground_truth"],
                 "skyrl": lambda r: r["reward_spec"]["ground_truth"], "openrlhf": lambda r: r["label"]}[fmt]
        refs = [TaskRef.parse(truth(r)) for r in frame.to_dict("records")]
    assert all(p[0] == {"role": "system", "content": "Think step by step."} and p[1]["role"] == "user"
               for p in prompts)
    assert all(ref.env_kwargs == {"topics": ["rank"]} and ref.task_set == task_set("linalg") for ref in refs)
    assert all(grade_completion(ref, reference_reply(ref), env_kwargs=PROCESS)[0] == 1.0 for ref in refs)


def test_require_prompts_fit_names_the_setting_and_the_length_every_prompt_needs(smollm2_tokenizer):
    prompts = [row["prompt"] for row in build_dataset("CsappExact-v0", env_kwargs=PROCESS)]
    longest = require_prompts_fit(prompts, smollm2_tokenizer, 100_000, setting="data.max_prompt_length")
    assert longest > 64
    with pytest.raises(PromptTooLong, match=rf"data.max_prompt_length to at least {longest}\b"):
        require_prompts_fit(prompts, smollm2_tokenizer, longest - 1, setting="data.max_prompt_length")
    assert require_prompts_fit(prompts, smollm2_tokenizer, longest, setting="x") == longest


def test_every_id_exports_rows_with_a_task_set():
    for env_id in env_ids():
        (row,) = build_dataset(env_id, n=1, env_kwargs=PROCESS)
        assert row["task_set"] == task_set(family_of(env_id).name)


def test_rows_that_promise_the_run_code_tool_are_refused_where_no_such_tool_runs():
    """Tool-mode prompts describe TRL's run_code tool; verl, OpenRLHF, SkyRL and verifiers grade
    through ``Episode``, where no such tool exists, so the row is refused rather than scored 0."""
    (row,) = build_dataset("LinearAlgebra-v0", n=1, max_turns=3, env_kwargs={**PROCESS, "code_via": "tool"})
    ref = TaskRef.parse(row)
    assert ref.env_kwargs == {"code_via": "tool"} and ref.max_turns == 3
    with pytest.raises(ValueError, match="run_code tool"):
        grade_completion(ref, "ANSWER: 1", env_kwargs=PROCESS)


def test_export_refuses_rows_whose_prompts_promise_what_the_trainer_never_runs(tmp_path, capsys):
    out = str(tmp_path / "rows.parquet")
    assert main(["export", "LinearAlgebra-v0", "--format", "verl", "--max-turns", "3", "--out", out]) == 2
    assert "--max-turns 1" in capsys.readouterr().err
    for fmt in ("verl", "skyrl", "openrlhf"):
        assert main(["export", "LinearAlgebra-v0", "--format", fmt, "--env-arg", "code_via=tool", "--out", out]) == 2
        assert "run_code" in capsys.readouterr().err


def test_one_completion_is_never_graded_against_a_prompt_that_offered_more_turns():
    (row,) = build_dataset("CsappExact-v0", n=1, max_turns=5, env_kwargs=PROCESS)
    ref = TaskRef.parse(row)
    assert ref.max_turns == 5
    with pytest.raises(ValueError, match="offers 5 turns"):
        grade_completion(ref, "```python\nprint(1)\n```", env_kwargs=PROCESS)
    with pytest.raises(ValueError, match="system_prompt needs conversational"):
        build_dataset("LinearAlgebra-v0", n=1, system_prompt="Be brief.", env_kwargs=PROCESS)

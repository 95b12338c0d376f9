"""verl: ``compute_score`` loaded the way verl loads a custom reward function (its own
``get_custom_reward_fn``) and called by verl's own reward managers on a real ``DataProto``; the
export writes verl's parquet schema with a task reference, never the key, as ground truth; a
harness failure is retried on a fresh reset and then raised, never scored 0.0.

verl 0.9.1 installs with ``--no-deps`` (its pins would replace transformers); its reward
managers need only tensordict, codetiming, hydra/omegaconf and pylatexenc, all on CPU. The
README's commands through verl's own ``main_ppo``, dataset and rollout: ``test_verl_readme.py``."""

from __future__ import annotations

import asyncio
import json

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gym_sysmath  # noqa: F401
from gym_sysmath.envs.csapp import CsappExactEnv
from gym_sysmath.integrations import verl as sysmath_verl
from gym_sysmath.integrations.episodes import PromptTooLong, ScoringError, TaskRef
from gym_sysmath.integrations.trl import build_dataset
from gym_sysmath.sandbox import SandboxError
from tests.char_tokenizer import char_tokenizer

pytest.importorskip("verl.workers.reward_manager", reason="the frameworks extra is not installed")
PROCESS = {"sandbox": "process"}
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")


def reference_answer(ref: TaskRef) -> str:
    env = gym.make(ref.env_id, split=ref.split, max_turns=1, **{**ref.env_kwargs, **PROCESS})
    try:
        ref.reset(env)
        return env.unwrapped.reference_action()
    finally:
        env.close()


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return sysmath_verl.verl_rows(build_dataset("CsappExact-v0", n=2, env_kwargs=PROCESS)
                                  + build_dataset("LinearAlgebra-v0", split="train", n=2, seed=7))


def data_proto(tokenizer, rows: list[dict], responses: list[str]):
    """A batch laid out as verl's rollout leaves it: left-padded prompts, right-padded responses."""
    import torch
    from verl import DataProto

    def pad(texts, left):
        ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
        width = max(map(len, ids))
        tensor = torch.zeros(len(ids), width, dtype=torch.long)
        mask = torch.zeros(len(ids), width, dtype=torch.long)
        for i, row in enumerate(ids):
            span = slice(width - len(row), width) if left else slice(0, len(row))
            tensor[i, span], mask[i, span] = torch.tensor(row), 1
        return tensor, mask

    prompts, prompt_mask = pad(["Q" for _ in rows], left=True)
    answers, answer_mask = pad(responses, left=False)
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": answers, "attention_mask": torch.cat([prompt_mask, answer_mask], 1)},
        non_tensors={key: np.array([row[key] for row in rows], dtype=object)
                     for key in ("data_source", "reward_model", "extra_info")})


def loaded_compute_score(**reward_kwargs):
    """``compute_score`` as verl's trainer loads it from ``reward.custom_reward_function``."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    config = OmegaConf.create({"reward": {"custom_reward_function": {
        "path": sysmath_verl.__file__, "name": "compute_score", "reward_kwargs": reward_kwargs}}})
    return get_custom_reward_fn(config)


def test_rows_hold_a_task_reference_and_never_the_answer(rows):
    for row in rows:
        assert set(row) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
        assert row["data_source"].startswith("gym_sysmath/") and row["prompt"][-1]["role"] == "user"
        ref = TaskRef.parse(row["reward_model"]["ground_truth"])
        assert row["data_source"] == "gym_sysmath/" + ref.env_id
        assert ref.max_turns == 1  # the prompt says so, and the grader plays it so
        env = gym.make(ref.env_id, split=ref.split, max_turns=1, **PROCESS)
        try:
            prompt, _ = ref.reset(env)
            answer = json.dumps(env.unwrapped.task.answer, default=str)
        finally:
            env.close()
        assert row["prompt"][-1]["content"] == prompt
        assert set(json.loads(row["reward_model"]["ground_truth"])) == {"env_id", "task_id", "split", "seed",
                                                                         "max_turns", "env_kwargs", "task_set"}
        assert ref.env_kwargs == {} and ref.task_set  # how the env runs is the grader's: not recorded
        assert answer not in json.dumps([row["reward_model"], row["extra_info"]])


def test_verl_reward_manager_scores_references_one_and_wrong_answers_zero(rows):
    from verl.workers.reward_manager import get_reward_manager_cls

    tokenizer = char_tokenizer()
    responses = [reference_answer(TaskRef.parse(row["reward_model"]["ground_truth"])) for row in rows]
    responses[1] = "ANSWER: [123456789]"
    manager = get_reward_manager_cls("naive")(tokenizer, num_examine=0,
                                              compute_score=loaded_compute_score(env_kwargs=PROCESS))
    out = manager(data_proto(tokenizer, rows, responses), return_dict=True)
    assert out["reward_tensor"].sum(dim=1).tolist() == [1.0, 0.0, 1.0, 1.0]
    assert out["reward_extra_info"]["verdict"][:2] == ["correct", "wrong_answer"]


def test_verl_reward_loop_manager_runs_the_same_score(rows):
    """verl 0.9's default path: ``load_reward_manager`` and the async reward loop's ``run_single``."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import load_reward_manager

    tokenizer = char_tokenizer()
    config = OmegaConf.create({"reward": {
        "custom_reward_function": {"path": sysmath_verl.__file__, "name": "compute_score",
                                   "reward_kwargs": {"env_kwargs": PROCESS}},
        "reward_manager": {"source": "register", "name": "naive"}}})
    manager = load_reward_manager(config, tokenizer)
    ref = TaskRef.parse(rows[0]["reward_model"]["ground_truth"])
    data = data_proto(tokenizer, rows[:1], [reference_answer(ref)])
    result = manager.loop.run_until_complete(manager.run_single(data)) if not manager.loop.is_running() \
        else asyncio.run(manager.run_single(data))
    assert result["reward_score"] == 1.0 and result["reward_extra_info"]["verdict"] == "correct"


def test_harness_failure_is_retried_then_raised_never_scored(rows, monkeypatch):
    ref = TaskRef.parse(rows[0]["reward_model"]["ground_truth"])
    answer = reference_answer(ref)
    original = CsappExactEnv._grade_final
    calls = []

    def failing_harness(self, reply, fail_first=1):
        calls.append(self.task.task_id)
        if len(calls) <= fail_first:
            raise SandboxError("worker_died", "container killed (simulated)")
        return original(self, reply)

    compute_score = loaded_compute_score(env_kwargs=PROCESS)
    monkeypatch.setattr(CsappExactEnv, "_grade_final", failing_harness)
    assert compute_score(data_source=rows[0]["data_source"], solution_str=answer,
                         ground_truth=rows[0]["reward_model"]["ground_truth"])["score"] == 1.0
    assert len(calls) == 2  # failed, replayed on a fresh reset, graded

    calls.clear()
    monkeypatch.setattr(CsappExactEnv, "_grade_final", lambda self, reply: failing_harness(self, reply, 99))
    with pytest.raises(ScoringError, match="worker_died"):
        compute_score(data_source=rows[0]["data_source"], solution_str=answer,
                      ground_truth=rows[0]["reward_model"]["ground_truth"])
    assert len(calls) == 2  # one retry by default, then raised


def test_foreign_data_source_and_ground_truth_are_refused(rows):
    with pytest.raises(ValueError, match="not a gym-sysmath row"):
        sysmath_verl.compute_score("openai/gsm8k", "42", "42")
    with pytest.raises(ValueError, match="task reference"):
        sysmath_verl.compute_score(rows[0]["data_source"], "ANSWER: 1", "42")


def test_cli_export_writes_verl_parquet_that_grades(tmp_path):
    import pandas as pd

    from gym_sysmath.cli import main

    out = tmp_path / "train.parquet"
    assert main(["export", "LinearAlgebra-v0", "--split", "train", "-n", "3", "--seed", "5",
                 "--format", "verl", "--out", str(out), "--system-prompt", "Be exact."]) == 0
    frame = pd.read_parquet(out)
    assert list(frame.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert len(frame) == 3
    row = frame.iloc[0]
    assert [message["role"] for message in row["prompt"]] == ["system", "user"]
    assert row["prompt"][0]["content"] == "Be exact."
    ref = TaskRef.parse(row["reward_model"]["ground_truth"])
    assert (ref.split, ref.seed) == ("train", 5)
    score = sysmath_verl.compute_score(row["data_source"], reference_answer(ref), row["reward_model"]["ground_truth"])
    assert score["score"] == 1.0


def test_verls_own_dataset_reads_the_export(tmp_path):
    """verl's ``RLHFDataset`` (what ``data.train_files`` goes through) yields the chat prompt and
    the reference that ``compute_score`` grades."""
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from gym_sysmath.cli import main

    out = tmp_path / "eval.parquet"
    assert main(["export", "CsappExact-v0", "-n", "2", "--format", "verl", "--out", str(out)]) == 0
    dataset = RLHFDataset(data_files=[str(out)], tokenizer=char_tokenizer(),
                          config=OmegaConf.create({"filter_overlong_prompts": False, "cache_dir": str(tmp_path)}))
    assert len(dataset) == 2
    item = dataset[1]
    assert item["raw_prompt"][-1]["role"] == "user" and item["index"] == 1
    ref = TaskRef.parse(item["reward_model"]["ground_truth"])
    score = sysmath_verl.compute_score(item["data_source"], reference_answer(ref), item["reward_model"]["ground_truth"],
                                       item["extra_info"], env_kwargs=PROCESS)
    assert score["score"] == 1.0


@pytest.mark.docker
def test_dead_containers_are_raised_not_scored(docker_available):
    """A real harness failure: every container of this process killed and no image to start a
    fresh one from, so the replay fails too and compute_score raises instead of scoring."""
    from gym_sysmath.tasks import csapp
    from tests.conftest import image_withdrawn, killing_our_containers, wait_until_none_running

    [row] = sysmath_verl.verl_rows(build_dataset("CsappExact-v0", n=1))
    ref = TaskRef.parse(row["reward_model"]["ground_truth"])
    task = {task.task_id: task for task in csapp.load_tasks()}[ref.task_id]
    code = f"```python\n{csapp.reference_code(task)}\n```"
    score = sysmath_verl.compute_score(row["data_source"], code, row["reward_model"]["ground_truth"])
    assert score == {"score": 1.0, "acc": 1.0, "verdict": "correct"}  # run in a real container
    with killing_our_containers(), image_withdrawn():
        wait_until_none_running()
        with pytest.raises(ScoringError) as raised:
            sysmath_verl.compute_score(row["data_source"], code, row["reward_model"]["ground_truth"])
    assert raised.value.attempts == 2 and raised.value.ref == ref


#: End-of-turn tokens of common chat templates (ChatML, Llama 3, Llama 2/Mistral, Gemma, DeepSeek).
END_TOKENS = ["<|im_end|>", "<|eot_id|>", "<|endoftext|>", "</s>", "<eos>", "<end_of_turn>",
              "<\uff5cend\u2581of\u2581sentence\uff5c>"]


@pytest.fixture(scope="module")
def reward_loop(smollm2_tokenizer):
    """verl 0.9's reward loop (``load_reward_manager``, the naive manager) with a real tokenizer."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import load_reward_manager

    config = OmegaConf.create({"reward": {
        "custom_reward_function": {"path": "pkg://gym_sysmath.integrations.verl", "name": "compute_score",
                                   "reward_kwargs": {"env_kwargs": PROCESS}},
        "reward_manager": {"source": "register", "name": "naive"}}})
    manager = load_reward_manager(config, smollm2_tokenizer)
    return lambda data: manager.loop.run_until_complete(manager.run_single(data))


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tokens=st.lists(st.sampled_from(END_TOKENS), min_size=1, max_size=3),
       gaps=st.lists(st.sampled_from(["", "\n", " ", "\n\n"]), min_size=3, max_size=3))
def test_end_of_turn_tokens_are_stripped_through_verls_reward_loop(rows, reward_loop, smollm2_tokenizer, tokens, gaps):
    """A reference reply followed by any common template's end-of-turn tokens, as token ids
    decoded by verl's reward manager (special tokens skipped, the others kept as text), scores
    1.0 exactly as the bare reply does."""
    row = rows[0]
    ref = TaskRef.parse(row["reward_model"]["ground_truth"])
    reply = reference_answer(ref) + "".join(gap + token for gap, token in zip(gaps, tokens, strict=False))
    result = reward_loop(data_proto(smollm2_tokenizer, [row], [reply]))
    assert (result["reward_score"], result["reward_extra_info"]["verdict"]) == (1.0, "correct"), reply


def test_end_of_turn_token_after_a_code_reply_is_stripped(rows):
    """CsappExact grades a fenced block's ``result``: a DeepSeek end token after the closing
    fence, plain text to most tokenizers, leaves it graded as the bare block is."""
    from gym_sysmath.tasks import csapp

    ref = TaskRef.parse(rows[0]["reward_model"]["ground_truth"])
    task = {task.task_id: task for task in csapp.load_tasks()}[ref.task_id]
    code = f"```python\n{csapp.reference_code(task)}\n```"
    compute_score = loaded_compute_score(env_kwargs=PROCESS)
    bare = compute_score(data_source=rows[0]["data_source"], solution_str=code,
                         ground_truth=rows[0]["reward_model"]["ground_truth"])
    for token in END_TOKENS:
        assert compute_score(data_source=rows[0]["data_source"], solution_str=code + token,
                             ground_truth=rows[0]["reward_model"]["ground_truth"]) == bare


def test_row_exported_with_env_args_grades_without_reward_kwargs(tmp_path):
    """``--env-arg difficulty=hard`` changes which task a train seed draws; the row's ground
    truth records it (and the task set), so ``compute_score`` loaded with no ``env_kwargs``
    replays the same draw and grades the reference 1.0."""
    import pandas as pd

    from gym_sysmath.cli import main

    out = tmp_path / "hard.parquet"
    assert main(["export", "LinearAlgebra-v0", "--split", "train", "-n", "3", "--seed", "5", "--env-arg",
                 "difficulty=hard", "--format", "verl", "--out", str(out)]) == 0
    frame = pd.read_parquet(out)
    plain = build_dataset("LinearAlgebra-v0", split="train", n=3, seed=5, env_kwargs=PROCESS)
    assert [row["task_id"] for row in plain] != [info["task_id"] for info in frame["extra_info"]]
    compute_score = loaded_compute_score()  # no env_kwargs: the row has them
    for _, row in frame.iterrows():
        ref = TaskRef.parse(row["reward_model"]["ground_truth"])
        assert ref.env_kwargs == {"difficulty": "hard"} and ref.task_set
        score = compute_score(data_source=row["data_source"], solution_str=reference_answer(ref),
                              ground_truth=row["reward_model"]["ground_truth"], extra_info=row["extra_info"])
        assert score == {"score": 1.0, "acc": 1.0, "verdict": "correct"}


def test_verl_rows_refuse_a_prompt_over_the_limit_with_a_tokenizer(smollm2_tokenizer):
    """Given the tokenizer, ``verl_rows`` measures each chat prompt and refuses a set verl would
    cut, naming ``data.max_prompt_length`` and the length needed; at that length it passes."""
    from gym_sysmath.integrations.episodes import prompt_tokens

    dataset = build_dataset("LinearAlgebra-v0", n=3, env_kwargs=PROCESS)
    longest = max(prompt_tokens(row["prompt"], smollm2_tokenizer, system_prompt="Be exact.") for row in dataset)
    with pytest.raises(PromptTooLong, match=rf"data.max_prompt_length={longest - 1} .*at least {longest}"):
        sysmath_verl.verl_rows(dataset, system_prompt="Be exact.", tokenizer=smollm2_tokenizer,
                               max_prompt_length=longest - 1)
    assert len(sysmath_verl.verl_rows(dataset, system_prompt="Be exact.", tokenizer=smollm2_tokenizer,
                                      max_prompt_length=longest)) == 3


def test_dataset_class_measures_prompts_as_verl_renders_them(tmp_path, smollm2_tokenizer):
    """``SysmathRLHFDataset`` (``data.custom_cls``) measures each prompt through the chat template
    with verl's ``data.apply_chat_template_kwargs``, as verl's agent loop renders it: a template
    that doubles the prompt is refused at a limit the plain template fits."""
    import pandas as pd
    from omegaconf import OmegaConf

    from gym_sysmath.integrations.episodes import prompt_tokens

    rows = sysmath_verl.verl_rows(build_dataset("LinearAlgebra-v0", n=3, env_kwargs=PROCESS))
    pd.DataFrame(rows).to_parquet(tmp_path / "rows.parquet")
    limit = max(prompt_tokens(row["prompt"], smollm2_tokenizer) for row in rows)

    def dataset(**data):
        config = OmegaConf.create({"max_prompt_length": limit, "cache_dir": str(tmp_path), **data})
        return sysmath_verl.SysmathRLHFDataset(data_files=[str(tmp_path / "rows.parquet")],
                                               tokenizer=smollm2_tokenizer, config=config)

    assert len(dataset()) == 3
    doubled = "{% for m in messages %}{{ m.content }}\n{{ m.content }}{% endfor %}"
    with pytest.raises(PromptTooLong, match=rf"3 of 3 prompts are longer than data.max_prompt_length={limit}"):
        dataset(apply_chat_template_kwargs={"chat_template": doubled})

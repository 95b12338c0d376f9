"""The TRL/GRPO reward adapter: every completion is graded by the real env; reference
completions score 1.0, wrong ones 0.0, chat-format completions are read, and a harness failure
comes back as ``None`` with its cause in ``last_scoring_errors``, never as a wrong answer.

Answer-only completions never run code, so most tests use the process backend (nothing starts
until code runs); the code path and a real container failure are Docker tests. The last test
runs one real ``GRPOTrainer`` step on a tiny local model when TRL is installed."""

from __future__ import annotations

import importlib.util
import json
import string
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import gym_sysmath  # noqa: F401
from gym_sysmath.envs.csapp import CsappExactEnv
from gym_sysmath.integrations.trl import SysmathReward, build_dataset, completion_text
from gym_sysmath.sandbox import SandboxError
from gym_sysmath.tasks import csapp
from tests.conftest import image_withdrawn, killing_our_containers, wait_until_none_running

PROCESS = {"sandbox": "process"}
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")


def columns(rows: list[dict]) -> dict[str, list]:
    """What TRL passes: every non-prompt column as a list, one entry per completion."""
    return {key: [row[key] for row in rows] for key in ("task_id", "env_id", "split", "seed")}


def references(rows: list[dict], env_kwargs_by_id: dict | None = None) -> list[str]:
    """Each row's reference action, from a fresh env reset to the row's task."""
    completions = []
    for row in rows:
        env = gym.make(row["env_id"], split=row["split"], max_turns=1, **PROCESS,
                       **(env_kwargs_by_id or {}).get(row["env_id"], {}))
        try:
            if row["split"] == "eval":  # an eval task by its id; a train draw by its seed
                env.reset(seed=row["seed"], options={"task_id": row["task_id"]})
            else:
                env.reset(seed=row["seed"])
            completions.append("Let me think.\n" + env.unwrapped.reference_action())
        finally:
            env.close()
    return completions


@pytest.fixture
def reward():
    function = SysmathReward(env_kwargs=PROCESS)
    yield function
    function.close()


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return (build_dataset("CsappExact-v0", n=6, env_kwargs=PROCESS)
            + build_dataset("LinearAlgebra-v0", n=6)
            + build_dataset("CsappExact-v0", split="train", n=4, seed=100, env_kwargs=PROCESS)
            + build_dataset("LinearAlgebra-v0", split="train", n=4, seed=100))


def test_dataset_rows_carry_prompt_and_task_but_never_the_answer(rows):
    assert {tuple(sorted(row)) for row in rows} == {("env_id", "prompt", "seed", "split", "task_id")}
    eval_ids = [row["task_id"] for row in rows if row["env_id"] == "CsappExact-v0" and row["split"] == "eval"]
    tasks = {task.task_id: task for task in csapp.load_tasks()}
    for task_id in eval_ids:
        row = next(r for r in rows if r["task_id"] == task_id)
        assert isinstance(row["seed"], int) and json.dumps(tasks[task_id].answer) not in json.dumps(row)
    assert all(row["seed"] >= 100 for row in rows if row["split"] == "train")
    chat = build_dataset("LinearAlgebra-v0", n=1, conversational=True, system_prompt="Be exact.")
    assert [m["role"] for m in chat[0]["prompt"]] == ["system", "user"]


def test_reference_completions_score_one_across_families_and_splits(reward, rows):
    prompts = [row["prompt"] for row in rows]
    assert reward(prompts, references(rows), **columns(rows)) == [1.0] * len(rows)
    assert reward.last_scoring_errors == []
    assert {result.verdict for result in reward.last_results} == {"correct"}


def test_wrong_completions_score_zero(reward, rows):
    tasks = {task.task_id: task for task in csapp.load_tasks()}
    wrong = []
    for row in rows:
        if row["task_id"] in tasks:
            wrong.append(f"ANSWER: {json.dumps(tasks[row['task_id']].distractors[0])}")  # an executed trap
        else:
            wrong.append("I believe the answer is 7 but I will not commit to it.")  # no ANSWER line
    scores = reward([row["prompt"] for row in rows], wrong, **columns(rows))
    assert scores == [0.0] * len(rows)
    assert reward.last_scoring_errors == []
    verdicts = {result.verdict for result in reward.last_results}
    assert verdicts <= {"wrong_answer", "format_error"} and "wrong_answer" in verdicts


def test_chat_format_completions_are_read(reward, rows):
    texts = references(rows[:4])
    chat = [[{"role": "assistant", "content": texts[0]}],
            [{"role": "assistant", "content": [{"type": "text", "text": texts[1]}]}],
            [{"role": "assistant", "content": "ANSWER: [0]"}, {"role": "tool", "content": "ok"},
             {"role": "assistant", "content": texts[2]}],  # the last assistant message is the action
            {"role": "assistant", "content": texts[3]}]
    assert reward([row["prompt"] for row in rows[:4]], chat, **columns(rows[:4])) == [1.0] * 4
    assert completion_text([{"role": "assistant", "content": "x"}]) == "x"
    assert completion_text(42) == 42  # not text: the env grades it as a format error


def test_env_id_falls_back_to_the_constructor_and_missing_columns_fail_loudly(rows):
    row = rows[0]
    with SysmathReward("CsappExact-v0", env_kwargs=PROCESS) as reward:
        assert reward([row["prompt"]], references([row]), task_id=[row["task_id"]]) == [1.0]
        with pytest.raises(ValueError, match="task_id"):
            reward([row["prompt"]], ["ANSWER: [1]"])
    with SysmathReward(env_kwargs=PROCESS) as reward, pytest.raises(ValueError, match="env_id"):
        reward([row["prompt"]], ["ANSWER: [1]"], task_id=[row["task_id"]])


def test_a_dataset_made_with_other_settings_is_refused(rows):
    from gym_sysmath.tasks.csapp.catalog import TEMPLATES

    train = next(row for row in rows if row["split"] == "train" and row["env_id"] == "CsappExact-v0"
                 and TEMPLATES[row["task_id"].split("/")[1]].category != "cache")
    with (SysmathReward(env_kwargs={**PROCESS, "categories": ["cache"]}) as reward,
          pytest.raises(ValueError, match="same env_kwargs")):
        reward([train["prompt"]], ["ANSWER: [1]"], **columns([train]))


def test_scoring_error_is_none_and_reported_not_a_wrong_answer(rows, monkeypatch):
    broken_task = rows[1]["task_id"]
    original = CsappExactEnv._grade_final

    def failing_harness(self, action):
        if self.task.task_id == broken_task:
            raise SandboxError("worker_died", "container killed (simulated)")
        return original(self, action)

    monkeypatch.setattr(CsappExactEnv, "_grade_final", failing_harness)
    batch = rows[:3]
    completions = references(batch)
    completions[2] = "ANSWER: [123456789]"
    logged: dict[str, float] = {}
    with SysmathReward(env_kwargs=PROCESS) as reward:
        scores = reward([r["prompt"] for r in batch], completions, **columns(batch),
                        log_metric=logged.__setitem__)
        assert scores == [1.0, None, 0.0]
        [error] = reward.last_scoring_errors
        assert (error.index, error.task_id, error.verdict) == (1, broken_task, "scoring_error")
        assert "worker_died" in error.scoring_error
        assert logged == {"sysmath/scoring_errors": 1.0}
    with SysmathReward(env_kwargs=PROCESS, scoring_error_reward=0.0) as reward:
        assert reward([r["prompt"] for r in batch], completions, **columns(batch)) == [1.0, 0.0, 0.0]
        assert len(reward.last_scoring_errors) == 1  # still reported apart


def test_export_rows_and_build_dataset_rows_are_interchangeable(tmp_path):
    """``gym-sysmath export`` rows (their ``seed`` included) feed the reward like
    ``build_dataset``'s, and the shared columns are identical, in eval and train."""
    from gym_sysmath.cli import main

    for split, extra in (("eval", []), ("train", ["--seed", "100"])):
        out = tmp_path / f"{split}.jsonl"
        assert main(["export", "CsappExact-v0", "--split", split, "-n", "5", "--out", str(out), *extra,
                     "--env-arg", "sandbox=process", "--env-arg", "max_turns=1"]) == 0  # build_dataset's default
        exported = [json.loads(line) for line in out.read_text().splitlines()]
        built = build_dataset("CsappExact-v0", split=split, n=5, seed=100 if split == "train" else 0,
                              env_kwargs=PROCESS)
        shared = ("prompt", "task_id", "env_id", "split", "seed")
        assert [{k: row[k] for k in shared} for row in exported] == [{k: row[k] for k in shared} for row in built]
        with SysmathReward(env_kwargs=PROCESS) as reward:
            extra_columns = {"metadata": [row["metadata"] for row in exported]}  # TRL passes it too
            assert reward([r["prompt"] for r in exported], references(built), **columns(exported),
                          **extra_columns) == [1.0] * 5


def test_one_reward_mixes_families_with_different_filters():
    by_id = {"CsappExact-v0": {"categories": ["floats"]}, "LinearAlgebra-v0": {"topics": ["rank"]}}
    rows = (build_dataset("CsappExact-v0", split="train", n=3, seed=7, env_kwargs={**PROCESS, **by_id["CsappExact-v0"]})
            + build_dataset("LinearAlgebra-v0", split="train", n=3, seed=7, env_kwargs=by_id["LinearAlgebra-v0"]))
    with SysmathReward(env_kwargs=PROCESS, env_kwargs_by_id=by_id) as reward:
        assert reward([r["prompt"] for r in rows], references(rows, by_id), **columns(rows)) == [1.0] * 6
    with (SysmathReward(env_kwargs={**PROCESS, "categories": ["floats"]}) as reward,
          pytest.raises(TypeError, match="categories")):  # one env_kwargs for both: LinearAlgebra has no categories
        reward([r["prompt"] for r in rows], references(rows), **columns(rows))


def test_mask_drops_the_other_reward_where_the_harness_failed(rows, monkeypatch):
    broken_task = rows[1]["task_id"]
    original = CsappExactEnv._grade_final

    def failing_harness(self, action):
        if self.task.task_id == broken_task:
            raise SandboxError("worker_died", "container killed (simulated)")
        return original(self, action)

    monkeypatch.setattr(CsappExactEnv, "_grade_final", failing_harness)
    batch = rows[:3]

    def bonus(prompts, completions, **kwargs):
        return [0.5] * len(completions)

    with SysmathReward(env_kwargs=PROCESS) as reward:
        masked = reward.mask(bonus)
        assert masked.__name__ == "bonus"
        with pytest.raises(RuntimeError, match="before the reward functions it masks"):
            masked([r["prompt"] for r in batch], ["ANSWER: [1]"] * 3, **columns(batch))
        completions = references(batch)
        assert reward([r["prompt"] for r in batch], completions, **columns(batch)) == [1.0, None, 1.0]
        assert masked([r["prompt"] for r in batch], completions, **columns(batch)) == [0.5, None, 0.5]


def test_concurrent_grading_matches_sequential(rows):
    completions = references(rows)
    with SysmathReward(env_kwargs=PROCESS, concurrency=4) as reward:
        assert reward([r["prompt"] for r in rows], completions, **columns(rows)) == [1.0] * len(rows)
        assert [r.index for r in reward.last_results] == list(range(len(rows)))


@pytest.mark.docker
def test_code_completion_runs_in_the_sandbox_and_sets_result(docker_available):
    rows = build_dataset("CsappExact-v0", n=2)
    tasks = {task.task_id: task for task in csapp.load_tasks()}
    code = [f"```python\n{csapp.reference_code(tasks[row['task_id']])}\n```" for row in rows]
    code[1] = "```python\nresult = [0]\n```"
    with SysmathReward() as reward:
        assert reward([r["prompt"] for r in rows], code, **columns(rows)) == [1.0, 0.0]


@pytest.mark.docker
def test_dead_container_is_a_scoring_error(docker_available):
    rows = build_dataset("CsappExact-v0", n=2)
    tasks = {task.task_id: task for task in csapp.load_tasks()}
    code = [f"```python\n{csapp.reference_code(tasks[row['task_id']])}\n```" for row in rows]
    with SysmathReward() as reward:
        reward([rows[0]["prompt"]], ["ANSWER: [0]"], **columns(rows[:1]))  # envs made while the image exists
        with killing_our_containers(), image_withdrawn():
            wait_until_none_running()  # the clean reserve too: no fresh container to retry in
            scores = reward([r["prompt"] for r in rows], code, **columns(rows))
        assert scores == [None, None]
        assert [e.index for e in reward.last_scoring_errors] == [0, 1]


def _tiny_model_and_tokenizer():
    """A one-layer GPT-2 over printable characters, built locally (nothing is downloaded)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, **{ch: i + 2 for i, ch in enumerate(string.printable)}}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>")
    config = GPT2Config(vocab_size=len(vocab), n_positions=4096, n_embd=16, n_layer=1, n_head=2,
                        pad_token_id=0, bos_token_id=1, eos_token_id=1)
    return GPT2LMHeadModel(config), tokenizer


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_grpo_trainer_runs_a_step_with_the_reward(rows, tmp_path, monkeypatch):
    pytest.importorskip("trl")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    broken_task = rows[0]["task_id"]
    original = CsappExactEnv._grade_final

    def failing_harness(self, action):
        if self.task.task_id == broken_task:
            raise SandboxError("worker_died", "container killed (simulated)")
        return original(self, action)

    monkeypatch.setattr(CsappExactEnv, "_grade_final", failing_harness)
    model, tokenizer = _tiny_model_and_tokenizer()
    config = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2,
                        max_completion_length=8, max_steps=1, report_to="none", use_cpu=True,
                        logging_steps=1, save_strategy="no", seed=0)
    with SysmathReward(env_kwargs=PROCESS) as reward:
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[reward], args=config,
                              train_dataset=Dataset.from_list(rows[:2]))
        trainer.train()
        graded = {result.task_id for result in reward.last_results}
        assert graded <= {row["task_id"] for row in rows[:2]}
    logs = trainer.state.log_history[0]
    assert f"rewards/{reward.__name__}/mean" in logs
    assert logs["sysmath/scoring_errors"] > 0  # the broken task's completions, reported apart


def _load_example(name: str):
    path = Path(__file__).resolve().parents[1] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_example", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    return module


def test_grpo_loop_advantages_are_group_relative_and_mask_scoring_errors():
    example = _load_example("grpo_loop")
    rewards = np.array([1.0, 0.0, 0.0, 0.0])
    advantages = example.group_advantages(rewards, np.array([True, True, True, False]))
    assert advantages[3] == 0.0  # the scoring error: no signal, and not in the group's mean
    assert advantages[0] > 0 > advantages[1] == advantages[2]
    assert abs(advantages[:3].sum()) < 1e-9
    same = example.group_advantages(np.ones(4), np.ones(4, dtype=bool))
    assert not same.any()  # a group that all agrees teaches nothing


def test_grpo_loop_example_learns_in_seconds():
    example = _load_example("grpo_loop")
    started = time.perf_counter()
    result = example.main(example.Args(sandbox="process"))
    assert time.perf_counter() - started < 30
    assert result["scoring_errors"] == 0
    assert result["after"] >= result["before"] + 0.05, result

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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gym_sysmath  # noqa: F401
from gym_sysmath.envs.csapp import CsappExactEnv
from gym_sysmath.integrations.trl import (
    SysmathReward,
    SysmathToolEnv,
    build_dataset,
    close_tool_envs,
    completion_text,
    cpu_training_args,
)
from gym_sysmath.sandbox import SandboxError
from gym_sysmath.tasks import csapp
from tests.conftest import image_withdrawn, killing_our_containers, wait_until_none_running

PROCESS = {"sandbox": "process"}
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")


def columns(rows: list[dict]) -> dict[str, list]:
    """What TRL passes: every non-prompt column as a list, one entry per completion."""
    return {key: [row[key] for row in rows] for key in rows[0] if key != "prompt"}


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
    assert {tuple(sorted(row)) for row in rows} == {("env_id", "env_kwargs", "max_turns", "prompt", "seed", "split",
                                                     "task_id", "task_set")}
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
        with SysmathReward(env_kwargs=PROCESS) as reward:  # TRL passes every column, metadata too
            assert "metadata" in columns(exported)
            assert reward([r["prompt"] for r in exported], references(built), **columns(exported)) == [1.0] * 5


def test_one_reward_mixes_families_with_different_filters():
    by_id = {"CsappExact-v0": {"categories": ["floats"]}, "LinearAlgebra-v0": {"topics": ["rank"]}}
    rows = (build_dataset("CsappExact-v0", split="train", n=3, seed=7, env_kwargs={**PROCESS, **by_id["CsappExact-v0"]})
            + build_dataset("LinearAlgebra-v0", split="train", n=3, seed=7, env_kwargs=by_id["LinearAlgebra-v0"]))
    with SysmathReward(env_kwargs=PROCESS, env_kwargs_by_id=by_id) as reward:
        assert reward([r["prompt"] for r in rows], references(rows, by_id), **columns(rows)) == [1.0] * 6
    with SysmathReward(env_kwargs=PROCESS) as reward:  # the rows' env_kwargs column carries each family's filter
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
        reward([rows[0]["prompt"]], code[:1], **columns(rows[:1]))  # envs and their pool made while the image exists
        with killing_our_containers(), image_withdrawn():
            wait_until_none_running()  # the clean reserve too: no fresh container to retry in
            scores = reward([r["prompt"] for r in rows], code, **columns(rows))
        assert scores == [None, None]
        assert [e.index for e in reward.last_scoring_errors] == [0, 1]


def test_tool_env_offers_trl_one_tool_and_a_reset():
    """What GRPOTrainer lists as tools: the class's public functions other than reset."""
    import inspect

    public = {name for name, _ in inspect.getmembers(SysmathToolEnv, predicate=inspect.isfunction)
              if not name.startswith("_")}
    assert public == {"reset", "run_code"}
    doc = inspect.getdoc(SysmathToolEnv.run_code)
    assert "Args:" in doc and "code:" in doc and "Returns:" in doc  # the Google style TRL's schema reads


@pytest.mark.docker
def test_tool_env_runs_tool_turns_in_the_episode_and_the_reward_grades_it_there(docker_available):
    rows = build_dataset("CsappExact-v0", n=2, conversational=True, max_turns=6, env_kwargs={"code_via": "tool"})
    tasks = {task.task_id: task for task in csapp.load_tasks()}
    envs = [SysmathToolEnv(), SysmathToolEnv()]
    try:
        for env, row in zip(envs, rows, strict=True):
            assert env.reset(**row) is None  # the prompt is the row's
        output = envs[0].run_code(csapp.reference_code(tasks[rows[0]["task_id"]]) + "\nprint('ran')")
        assert "ran" in output and "[status: ok; turn 1 of 6]" in output
        envs[1].run_code("result = [0]")
        assert envs[1].run_code("print(result)").startswith("[0]")  # one persistent session per rollout
        final = [{"role": "assistant", "content": "Done: `result` holds it."}]  # no ANSWER line: `result` is graded
        completions = [[{"role": "assistant", "content": "", "tool_calls": []}, {"role": "tool", "content": "x"},
                        *final]] * 2
        with SysmathReward() as reward:
            scores = reward([r["prompt"] for r in rows], completions, **columns(rows), environments=envs)
        assert scores == [1.0, 0.0]
        assert [r.verdict for r in reward.last_results] == ["correct", "wrong_answer"]
        assert [env.tool_calls for env in envs] == [1, 2]
    finally:
        close_tool_envs()


@pytest.mark.docker
def test_tool_env_harness_failure_is_a_scoring_error(docker_available):
    row = build_dataset("CsappExact-v0", n=1, max_turns=6, env_kwargs={"code_via": "tool"})[0]
    env = SysmathToolEnv()
    try:
        env.reset(**row)
        env.run_code("x = 1")  # the episode's container is live
        with killing_our_containers(), image_withdrawn():
            wait_until_none_running()
            observation = env.run_code("print(x)")
        assert "not your fault" in observation
        assert "no more code runs" in env.run_code("print(1)")
        with SysmathReward() as reward:
            assert reward([row["prompt"]], ["ANSWER: [1]"], **columns([row]), environments=[env]) == [None]
            assert reward.last_scoring_errors[0].verdict == "scoring_error"
    finally:
        close_tool_envs()


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
                        max_completion_length=8, max_steps=1, report_to="none", logging_steps=1,
                        save_strategy="no", seed=0, **cpu_training_args())
    with SysmathReward(env_kwargs=PROCESS) as reward:
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[reward], args=config,
                              train_dataset=Dataset.from_list(rows[:2]))
        trainer.train()
        graded = {result.task_id for result in reward.last_results}
        assert graded <= {row["task_id"] for row in rows[:2]}
    logs = trainer.state.log_history[0]
    assert f"rewards/{reward.__name__}/mean" in logs
    assert logs["sysmath/scoring_errors"] > 0  # the broken task's completions, reported apart


def _advantages_with_two_reward_functions(rows, tmp_path, masked: bool) -> tuple[list[float], list[float], list]:
    """One real GRPOTrainer step, 1 prompt x 4 generations, rewards ``[SysmathReward, bonus]``
    (``bonus`` masked or not); the harness fails on the group's first completion only.
    Returns (advantages, bonus values, SysmathReward results), as the trainer computed them."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    def bonus(prompts, completions, **kwargs):  # varies by completion, so the group has a spread
        return [(sum(map(ord, completion_text(c))) % 7) / 7 for c in completions]

    model, tokenizer = _tiny_model_and_tokenizer()
    config = GRPOConfig(output_dir=str(tmp_path / str(masked)), per_device_train_batch_size=4, num_generations=4,
                        max_completion_length=8, max_steps=1, report_to="none", logging_steps=1,
                        save_strategy="no", seed=0, **cpu_training_args())
    recorded: dict[str, list] = {}
    with SysmathReward(env_kwargs=PROCESS) as reward:
        def recording_bonus(prompts, completions, **kwargs):
            recorded["bonus"] = bonus(prompts, completions)
            return recorded["bonus"]

        second = reward.mask(recording_bonus) if masked else recording_bonus
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[reward, second], args=config,
                              train_dataset=Dataset.from_list(rows[:1]))
        generate = trainer._generate_and_score_completions

        def recording(inputs):
            output = generate(inputs)
            recorded["advantages"] = output["advantages"].tolist()
            recorded["results"] = list(reward.last_results)
            return output

        trainer._generate_and_score_completions = recording
        trainer.train()
    return recorded["advantages"], recorded["bonus"], recorded["results"]


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_scoring_error_gets_no_advantage_under_two_reward_functions_only_when_masked(rows, tmp_path, monkeypatch):
    """Measured on TRL's own advantage computation: with a second reward function, TRL turns the
    scoring error's None into 0 and trains on it as a wrong answer; ``reward.mask`` makes it
    unscorable (advantage 0) and leaves it out of the group's baseline."""
    pytest.importorskip("trl")
    import torch
    from trl.trainer.utils import nanstd

    calls = {"n": 0}
    original = CsappExactEnv._grade_final

    def first_of_each_group_fails(self, action):
        calls["n"] += 1
        if calls["n"] % 4 == 1:
            raise SandboxError("worker_died", "container killed (simulated)")
        return original(self, action)

    monkeypatch.setattr(CsappExactEnv, "_grade_final", first_of_each_group_fails)
    for masked in (False, True):
        advantages, bonus, results = _advantages_with_two_reward_functions(rows, tmp_path, masked)
        assert [r.scoring_error is not None for r in results] == [True, False, False, False]
        others = torch.tensor([r.reward + b for r, b in zip(results[1:], bonus[1:], strict=True)])
        if not masked:  # TRL's own treatment: the failed sample is a wrong answer with its bonus
            everyone = torch.tensor([0.0 + bonus[0], *others.tolist()])
            expected = (everyone[0] - everyone.mean()) / (nanstd(everyone) + 1e-4)
            assert advantages[0] == pytest.approx(expected.item(), abs=1e-5)
            assert advantages[0] != 0.0  # seed 0: +0.855, the policy moves on a sample nobody graded
        else:
            assert advantages[0] == 0.0
            expected = (others - others.mean()) / (nanstd(others) + 1e-4)  # the baseline of the three scored
            assert advantages[1:] == pytest.approx(expected.tolist(), abs=1e-5)


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


# --------------------------------------------------------------------------- multi-turn: the run_code tool

TOOL_TURNS = 3  # two run_code calls, then the final reply
TOOL_ROWS = {"env_kwargs": {"code_via": "tool"}, "max_turns": TOOL_TURNS, "conversational": True}


def tool_factory():
    return SysmathToolEnv(env_kwargs=PROCESS, max_turns=TOOL_TURNS)


def _chat_char_tokenizer(texts: list[str], words: list[str] = ()):
    """A character-level tokenizer over printable ASCII and every character of ``texts``, with
    ``<|im_end|>`` as one token (its EOS), each of ``words`` as one token (a scripted reply
    generated in one step) and Qwen2.5's chat template, one TRL parses tool calls from: a
    scripted model's prompts cost characters, not a 49k-entry vocabulary."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen2_5_chat_template

    chars = sorted(set(string.printable) | {ch for text in texts for ch in text})
    vocab = {"<pad>": 0, "<|im_end|>": 1, **{ch: i + 2 for i, ch in enumerate(chars)}}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<|im_end|>")
    tokenizer.chat_template = qwen2_5_chat_template
    tokenizer.add_tokens(list(words))
    return tokenizer


def _scripted_model(tokenizer, script_for):
    """A one-layer GPT-2 over ``tokenizer``'s vocabulary whose ``generate`` writes, for each row,
    the text ``script_for(decoded input)`` and then EOS: the model still computes every logit and
    TRL still parses, runs and trains on what it wrote (a logits processor keeps one token)."""
    from transformers import GPT2Config, GPT2LMHeadModel, LogitsProcessorList

    from tests.forced_tokens import forced_tokens

    config = GPT2Config(vocab_size=len(tokenizer), n_positions=4096, n_embd=16, n_layer=1, n_head=2,
                        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.eos_token_id,
                        eos_token_id=tokenizer.eos_token_id)
    model = GPT2LMHeadModel(config)
    generate = model.generate

    def scripted(*args, **kwargs):
        input_ids = kwargs["input_ids"]
        scripts = [tokenizer.encode(script_for(tokenizer.decode(ids)), add_special_tokens=False)
                   for ids in input_ids.tolist()]
        kwargs["logits_processor"] = LogitsProcessorList([forced_tokens(dict(enumerate(scripts)), input_ids.shape[1],
                                                                        tokenizer.eos_token_id)])
        return generate(*args, **kwargs)

    model.generate = scripted
    return model


def _tool_call(code: str) -> str:
    return f"<tool_call>\n{json.dumps({'name': 'run_code', 'arguments': {'code': code}})}\n</tool_call>"


def _replay(row: dict, code: str, final: str) -> tuple[str, float, str]:
    """A fresh tool-mode env: the row's task, one run_code call, the final reply."""
    env = gym.make(row["env_id"], max_turns=TOOL_TURNS, code_via="tool", **PROCESS)
    try:
        env.reset(seed=row["seed"], options={"task_id": row["task_id"]})
        output, *_ = env.unwrapped.run_code(code)
        _, reward, terminated, _, info = env.step(completion_text(final))
        assert terminated and info["scoring_error"] is None, info
        return output, float(reward), info["verdict"]
    finally:
        env.close()


def _grpo_config(tmp_path, **overrides):
    from trl import GRPOConfig

    settings = {"output_dir": str(tmp_path), "per_device_train_batch_size": 2, "gradient_accumulation_steps": 4,
                "num_generations": 2, "max_steps": 1, "report_to": "none", "logging_steps": 1,
                "save_strategy": "no", "seed": 0, "dataloader_num_workers": 0, **cpu_training_args(), **overrides}
    return GRPOConfig(**settings)


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_grpo_trainer_with_the_tool_env_gives_a_model_following_the_tool_prompt_the_envs_reward(tmp_path):
    """Through TRL's own tool loop (``environment_factory``): every rollout's model reads the
    tool-mode prompt, calls ``run_code`` as it says, TRL runs the call in the rollout's episode and
    feeds the output back, and the final reply (no tool call) is graded by the env's last-turn
    rule, end-of-turn tokens and all: `result` set by the tool, a ```python block in the final
    reply (CsappExact runs it), an ANSWER line; a wrong ANSWER scores 0."""
    pytest.importorskip("trl")
    from datasets import Dataset
    from trl import GRPOTrainer

    picks = {"CsappExact-v0": ["int-division-truncates"],  # the shortest prompts: a char-level model reads them
             "LinearAlgebra-v0": ["eval/dot_product/easy/1", "eval/dot_product/easy/0"]}
    rows = [row for env_id, ids in picks.items() for row in build_dataset(env_id, **TOOL_ROWS) if row["task_id"] in ids]
    tasks = {task.task_id: task for task in csapp.load_tasks()}
    reference = csapp.reference_code(tasks[rows[0]["task_id"]])
    plan = {  # row -> (run_code's code, final reply), as the tool-mode prompt describes them
        # the call keeps the key in the session and leaves `result` wrong; the final reply's block sets it: 1.0
        # only if the call ran in this episode's session and the final block ran as a last turn
        0: (f"{reference}\nkey = result\nresult = [0]\nprint('stored')", "```python\nresult = key\n```"),
        1: ("print(2 + 2)", references(rows[1:2])[0] + "<|eot_id|>"),
        2: ("print(2 + 2)", "ANSWER: 1234567 <\uff5cend\u2581of\u2581sentence\uff5c>"),
    }
    expected = [(1.0, "correct"), (1.0, "correct"), (0.0, "wrong_answer")]
    for row in rows:
        assert "`run_code` tool" in row["prompt"][-1]["content"]
    marks = [row["prompt"][-1]["content"] for row in rows]
    assert len(set(marks)) == len(rows)

    def script_for(text: str) -> str:
        [index] = [i for i, mark in enumerate(marks) if mark in text]
        code, final = plan[index]
        return _tool_call(code) if "<tool_response>" not in text else final

    scripts = [text for code, final in plan.values() for text in (_tool_call(code), final)]
    tokenizer = _chat_char_tokenizer(marks + scripts, words=scripts)
    model = _scripted_model(tokenizer, script_for)
    config = _grpo_config(tmp_path, max_completion_length=1024, gradient_accumulation_steps=3)
    assert config.bf16 is False or "avx512_bf16" in Path("/proc/cpuinfo").read_text()
    graded: list[list] = []

    class Recording(SysmathReward):
        def __call__(self, *args, **kwargs):
            values = super().__call__(*args, **kwargs)
            graded.append(list(zip(kwargs["completions"], values, self.last_results, kwargs["environments"],
                                   strict=True)))
            return values

    with Recording() as reward:
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[reward], args=config,
                              train_dataset=Dataset.from_list(rows), environment_factory=tool_factory)
        try:
            trainer.train()
        finally:
            close_tool_envs()
    [batch] = graded
    assert len(batch) == 6  # 3 rows x 2 generations, none dropped
    seen = set()
    for completion, value, result, environment in batch:
        index = next(i for i, row in enumerate(rows) if row["task_id"] == result.task_id)
        seen.add(index)
        code, final = plan[index]
        tool_messages = [m for m in completion if m["role"] == "tool"]
        assert [m["name"] for m in tool_messages] == ["run_code"] and environment.tool_calls == 1
        output, replay_reward, replay_verdict = _replay(rows[index], code, final)
        assert tool_messages[0]["content"] == output  # the env's own tool output reached the model
        assert (value, result.verdict) == (replay_reward, replay_verdict) == expected[index], (index, completion)
    assert seen == {0, 1, 2}
    logs = trainer.state.log_history[0]
    assert logs[f"rewards/{reward.__name__}/mean"] == pytest.approx(2 / 3)
    assert logs["sysmath/scoring_errors"] == logs["sysmath/unrun_tool_calls"] == 0


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_grpo_trainer_refuses_fence_prompts_with_the_tool_env(tmp_path):
    """Rows whose prompt says a fenced block runs, under TRL's tool loop where it never would,
    stop the run before anything is generated (no rollout scored 0 for following its prompt)."""
    pytest.importorskip("trl")
    from datasets import Dataset
    from trl import GRPOTrainer

    rows = build_dataset("LinearAlgebra-v0", n=2, max_turns=TOOL_TURNS, conversational=True)  # code_via='fence'
    assert "```python block" in rows[0]["prompt"][-1]["content"]
    tokenizer = _chat_char_tokenizer([row["prompt"][-1]["content"] for row in rows])
    model = _scripted_model(tokenizer, lambda text: "ANSWER: 1")
    with SysmathReward() as reward:
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[reward],
                              args=_grpo_config(tmp_path, max_completion_length=16, gradient_accumulation_steps=1),
                              train_dataset=Dataset.from_list(rows), environment_factory=tool_factory)
        with pytest.raises(ValueError, match=r"code_via='fence'.*fenced code block runs, which never happens"):
            trainer.train()
    close_tool_envs()


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_rollout_ending_on_a_call_trl_never_ran_is_graded_as_final_and_counted(tmp_path):
    """TRL's max_tool_calling_iterations (here 0) ends a rollout on a tool call it does not run:
    the env grades that last message as the final reply (no ANSWER line: format_error, as the
    prompt says) and the reward logs it under sysmath/unrun_tool_calls, not as a silent zero."""
    pytest.importorskip("trl")
    from datasets import Dataset
    from trl import GRPOTrainer

    rows = build_dataset("LinearAlgebra-v0", **TOOL_ROWS)[:1]
    call = _tool_call("print(1)")
    tokenizer = _chat_char_tokenizer([rows[0]["prompt"][-1]["content"], call], words=[call])
    model = _scripted_model(tokenizer, lambda text: call)
    config = _grpo_config(tmp_path, max_completion_length=64, gradient_accumulation_steps=1,
                          max_tool_calling_iterations=0)
    with SysmathReward() as reward:
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[reward], args=config,
                              train_dataset=Dataset.from_list(rows), environment_factory=tool_factory)
        trainer.train()
        results = list(reward.last_results)
        tool_calls = [env.tool_calls for env in trainer.environments]
    close_tool_envs()
    assert [(r.reward, r.verdict) for r in results] == [(0.0, "format_error")] * 2 and tool_calls == [0, 0]
    logs = trainer.state.log_history[0]
    assert logs["sysmath/unrun_tool_calls"] == 2 and logs["sysmath/scoring_errors"] == 0


def test_tool_env_refuses_a_prompt_made_for_other_turns_and_the_reward_refuses_tool_rows_without_it():
    rows = build_dataset("LinearAlgebra-v0", n=1, **{**TOOL_ROWS, "max_turns": TOOL_TURNS + 2})
    env = tool_factory()
    try:
        assert env.reset(**rows[0]) is None  # the row says the turns its prompt offers: the env follows it
        without_turns = {k: v for k, v in rows[0].items() if k != "max_turns"}
        with pytest.raises(ValueError, match="not the one this env gives"):
            env.reset(**without_turns)  # its prompt offers 4 calls; this env's default allows 2
        assert "run_code" in env.reset(**{k: v for k, v in without_turns.items() if k != "prompt"})  # the env's
    finally:
        env._close()
    with SysmathReward(env_kwargs=PROCESS) as reward, pytest.raises(ValueError, match="promised a tool"):
        reward([rows[0]["prompt"]], ["ANSWER: 1"], **columns(rows))


def test_tool_mode_prompts_describe_run_code_and_its_final_reply_in_every_family():
    for env_id in ("CsappExact-v0", "LinearAlgebra-v0", "CompGeomCpp-v0"):
        for code_via in ("fence", "tool"):
            env = gym.make(env_id, max_turns=4, code_via=code_via, **PROCESS)
            prompt, _ = env.reset(seed=0)
            env.close()
            assert ("`run_code` tool" in prompt) == (code_via == "tool"), (env_id, code_via)
            if code_via == "tool":  # the calls allowed, and what the final reply is
                assert "up to 3 times" in prompt and "reply without a tool call" in prompt
                assert "```python block and no ANSWER line runs" not in prompt and "To test, reply" not in prompt
    with pytest.raises(ValueError, match="code_via"):
        gym.make("LinearAlgebra-v0", code_via="json")


def test_tool_mode_env_runs_code_only_through_run_code_and_grades_every_reply_as_final():
    """What SysmathToolEnv relies on: with code_via='tool' a reply never runs as a tool turn (it
    is final, graded as the last turn), run_code runs at most max_turns - 1 times and never
    ends the episode; a fence-mode env has no run_code."""
    env = gym.make("LinearAlgebra-v0", max_turns=TOOL_TURNS, code_via="tool", **PROCESS)
    try:
        env.reset(seed=0)
        core = env.unwrapped
        outputs = [core.run_code("x = 6 * 7\nprint(x)")[0], core.run_code("print(x + 1)")[0]]
        assert outputs[0].startswith("42") and outputs[1].startswith("43")  # one persistent session
        refused, reward, terminated, truncated, info = core.run_code("print(1)")
        assert "allows 2 run_code call(s), all used" in refused and not (terminated or truncated)
        assert core.turn == 2
        _, reward, terminated, _, info = env.step("```python\nprint(x)\n```")  # a block: final, not a tool turn
        assert terminated and info["verdict"] == "format_error" and "the final reply" in info["detail"]
        env.reset(seed=0)
        _, reward, terminated, _, info = env.step(core.reference_action())
        assert (reward, terminated, core.turn) == (1.0, True, 1)  # the first reply is final
    finally:
        env.close()
    fence = gym.make("LinearAlgebra-v0", max_turns=TOOL_TURNS, **PROCESS)
    fence.reset(seed=0)
    with pytest.raises(RuntimeError, match="code_via='tool'"):
        fence.unwrapped.run_code("print(1)")
    fence.close()


# --------------------------------------------------------------------------- end-of-turn tokens

END_TOKENS = ("<|im_end|>", "<|eot_id|>", "</s>", "<end_of_turn>", "<eos>", "<|endoftext|>", "<|end|>",
              "<\uff5cend\u2581of\u2581sentence\uff5c>", "<|im_end|>\n<|endoftext|>")


@pytest.fixture(scope="module")
def answer_rows() -> list[dict]:
    return build_dataset("LinearAlgebra-v0", n=3) + build_dataset("CsappExact-v0", n=3, env_kwargs=PROCESS)


@settings(max_examples=25, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=st.sampled_from(END_TOKENS), space=st.sampled_from(["", " ", "\n"]),
       chat=st.booleans(), correct=st.booleans())
def test_end_of_turn_tokens_never_change_a_reward(answer_rows, token, space, chat, correct):
    """SysmathReward called as TRL calls it (prompts, completions, completion_ids, every column):
    a completion with a chat template's end token after it is the completion, and scores as it."""
    texts = references(answer_rows) if correct else ["ANSWER: [7]"] * len(answer_rows)
    suffixed = [text + space + token for text in texts]
    if chat:
        texts, suffixed = ([[{"role": "assistant", "content": t}] for t in batch] for batch in (texts, suffixed))
    assert [completion_text(c) for c in suffixed] == [completion_text(c) for c in texts]
    with SysmathReward(env_kwargs=PROCESS) as reward:
        call = {"prompts": [row["prompt"] for row in answer_rows], "completion_ids": [[0]] * len(answer_rows),
                **columns(answer_rows)}
        assert reward(completions=suffixed, **call) == reward(completions=texts, **call) == [float(correct)] * 6


# --------------------------------------------------------------------------- TRL's defaults on a CPU

NO_BF16 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw\n"
X86_BF16 = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n"
ARM_BF16 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


@pytest.mark.filterwarnings("ignore:`gradient_checkpointing` is deprecated:FutureWarning")  # TRL's own default
def test_cpu_training_args_turn_off_trl_defaults_that_emulate_bf16():
    """TRL's GRPOConfig defaults bf16=True and gradient_checkpointing=True even with use_cpu=True;
    the helper keeps bf16 only where the CPU has it, and reaches TRL's own config."""
    pytest.importorskip("trl")
    from trl import GRPOConfig

    from gym_sysmath.integrations.trl import cpu_has_native_bf16

    default = GRPOConfig(output_dir="unused", use_cpu=True, report_to="none")
    assert (default.bf16, default.gradient_checkpointing) == (True, True)  # what the helper is for
    assert [cpu_has_native_bf16(text) for text in (NO_BF16, X86_BF16, ARM_BF16, "")] == [False, True, True, False]
    config = GRPOConfig(output_dir="unused", report_to="none", **cpu_training_args(NO_BF16))
    assert (config.use_cpu, config.bf16, config.gradient_checkpointing) == (True, False, False)
    assert GRPOConfig(output_dir="unused", report_to="none", **cpu_training_args(X86_BF16)).bf16 is True


def test_grpo_config_cuts_no_prompt_and_tool_prompts_fit_smollm2_context(smollm2_tokenizer):
    """TRL 1.16 has no max_prompt_length (a prompt is never cut; this fails if a release brings the
    setting back, so the adapter is looked at again); what binds is the model's context, which
    must hold the prompt, the run_code schema and max_completion_length (512 by default)."""
    pytest.importorskip("trl")
    import copy
    import dataclasses

    from trl import GRPOConfig
    from trl.chat_template_utils import qwen2_5_chat_template

    from gym_sysmath.integrations.episodes import require_prompts_fit

    names = {field.name for field in dataclasses.fields(GRPOConfig)}
    assert "max_prompt_length" not in names and GRPOConfig.max_completion_length == 512
    tokenizer = copy.deepcopy(smollm2_tokenizer)
    tokenizer.chat_template = qwen2_5_chat_template
    room = 8192 - GRPOConfig.max_completion_length  # SmolLM2-135M-Instruct's max_position_embeddings
    schema = len(tokenizer.apply_chat_template([{"role": "user", "content": ""}], tools=[SysmathToolEnv.run_code],
                                               add_generation_prompt=True))
    schema -= len(tokenizer.apply_chat_template([{"role": "user", "content": ""}], add_generation_prompt=True))
    for env_id in ("CsappExact-v0", "LinearAlgebra-v0", "CompGeomCpp-v0"):
        rows = build_dataset(env_id, conversational=True, max_turns=TOOL_TURNS,
                             env_kwargs={"code_via": "tool", **PROCESS})
        require_prompts_fit([row["prompt"] for row in rows], tokenizer, room - schema,
                            setting="the model's context less max_completion_length and the run_code schema")

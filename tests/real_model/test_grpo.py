"""A real ``trl.GRPOTrainer`` on SmolLM2-135M-Instruct (the GGUF file through transformers'
loader, copied into a plain fp32 model) with ``SysmathReward``, on LinearAlgebra-v0 and
CsappExact-v0 at once (the ``env_id`` column routes each row to its env).

After every step, the rewards the trainer logged for its completions are checked against a
fresh env's own grading of the same completion texts (reward and verdict, task by task), and
the step's logged mean against theirs: the reward TRL trains on is the env's verdict, nothing
else. (The 135M model rarely writes an answer the envs accept, so most rewards are 0; the
verdicts, format error against wrong answer, are compared too.)
"""

from __future__ import annotations

import math
import time
from collections import Counter

import gymnasium as gym
import pytest

from gym_sysmath.integrations.trl import build_dataset, completion_text, cpu_training_args
from tests.real_model import smollm2
from tests.real_model.recording import RecordingReward

STEPS = 3
ROWS_PER_ENV = 3
MAX_COMPLETION_TOKENS = 64

pytestmark = [pytest.mark.docker, pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]


def env_grading(row: dict, text: str) -> tuple[float, str]:
    """The env's own (reward, verdict) for a completion: a fresh env, the row's task, one step."""
    env = gym.make(row["env_id"], max_turns=1)
    try:
        env.reset(options={"task_id": row["task_id"]})
        _, reward, terminated, truncated, info = env.step(text)
        assert terminated or truncated
        assert info["scoring_error"] is None, info
        return float(reward), info["verdict"]
    finally:
        env.close()


def test_grpo_trainer_logs_the_rewards_the_envs_give(model_dir, docker_available, tmp_path, capsys):
    trl = pytest.importorskip("trl")
    from datasets import Dataset
    from transformers import TrainerCallback

    rows = [row for pair in zip(build_dataset("LinearAlgebra-v0", n=ROWS_PER_ENV, conversational=True),
                                build_dataset("CsappExact-v0", n=ROWS_PER_ENV, conversational=True), strict=True)
            for row in pair]
    by_prompt = {row["prompt"][-1]["content"]: row for row in rows}
    model, tokenizer = smollm2.plain_model_from_gguf()
    assert getattr(model, "hf_quantizer", None) is None and not getattr(model, "is_quantized", False)
    config = trl.GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2,
                            max_completion_length=MAX_COMPLETION_TOKENS, max_steps=STEPS, learning_rate=1e-6,
                            report_to="none", logging_steps=1, save_strategy="no", seed=0,
                            dataloader_num_workers=0, **cpu_training_args())  # fp32 where the CPU lacks bf16
    steps: list[dict] = []

    class Record(TrainerCallback):
        """Each logged step: the trainer's own record of its batch (prompts, completions,
        per-function rewards; ``_logs`` keeps exactly the last generation batch) and its metrics."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            batch = trainer._logs  # TRL's buffer behind log_completions; no public accessor exists
            steps.append({"logs": dict(logs or {}), "prompts": list(batch["prompt"]),
                          "completions": list(batch["completion"]),
                          "rewards": {name: list(values) for name, values in batch["rewards"].items()}})

    started = time.perf_counter()
    with RecordingReward(concurrency=2) as reward:
        trainer = trl.GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[reward], args=config,
                                  train_dataset=Dataset.from_list(rows), callbacks=[Record()])
        trainer.train()
    elapsed = time.perf_counter() - started

    assert len(steps) >= STEPS
    train_steps = [step for step in steps if f"rewards/{reward.__name__}/mean" in step["logs"]]
    assert len(train_steps) == STEPS
    assert len(reward.calls) == STEPS  # one reward call per generation batch
    graded_envs, verdicts = set(), []
    for step, call in zip(train_steps, reward.calls, strict=True):
        logged = step["rewards"][reward.__name__]
        assert len(logged) == len(step["completions"]) == len(call) == config.per_device_train_batch_size
        own = []
        for prompt, completion, value, graded in zip(step["prompts"], step["completions"], logged, call, strict=True):
            row = by_prompt[prompt[-1]["content"]]
            text = completion_text(completion)
            assert isinstance(text, str)
            reward_value, verdict = env_grading(row, text)
            own.append(reward_value)
            assert value == reward_value, (row["task_id"], text)
            assert (graded.env_id, graded.task_id, graded.verdict) == (row["env_id"], row["task_id"], verdict)
            graded_envs.add(row["env_id"])
            verdicts.append(verdict)
        assert math.isclose(step["logs"][f"rewards/{reward.__name__}/mean"], sum(own) / len(own), abs_tol=1e-6)
        assert step["logs"]["sysmath/scoring_errors"] == 0
    assert graded_envs == {"LinearAlgebra-v0", "CsappExact-v0"}
    with capsys.disabled():
        print(f"\nreal-model GRPO: {STEPS} steps x {config.per_device_train_batch_size} completions in "
              f"{elapsed:.0f} s (bf16={config.bf16}, gradient_checkpointing={config.gradient_checkpointing}); "
              f"mean rewards per step: "
              f"{[round(step['logs'][f'rewards/{reward.__name__}/mean'], 3) for step in train_steps]}; "
              f"verdicts {dict(Counter(verdicts))}")

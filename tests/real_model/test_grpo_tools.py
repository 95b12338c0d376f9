"""A real ``trl.GRPOTrainer`` multi-turn step on SmolLM2-135M-Instruct through
``SysmathToolEnv`` (``environment_factory``): the model's tool call runs as a Python tool turn of
the real CsappExact env in the rollout's own sandbox session, TRL feeds the output back, the
model writes its final turn, and ``SysmathReward`` grades that turn in the same episode. The rows
are made with ``code_via="tool"``: the prompt the model reads describes that tool (at most
``MAX_TURNS - 1`` calls) and says that its first reply without a tool call is graded.

The 135M model does not write tool calls by itself, so its *first* turn is steered to one: a
logits processor on its ``generate`` lets through only the tokens of a ``run_code`` call that
sets ``result = [0]`` in the session (the model still computes every logit; TRL still parses
the call, runs the tool, and trains on those tokens). Its second turn, after the tool output,
is free (at most ``FINAL_TOKENS``, for the tier's time). Everything is then checked against a
replay in a fresh env: the tool output TRL put in the conversation, and the reward and verdict
of the final turn, which come from the same session (a final turn without an ANSWER line is
graded on ``result``: ``wrong_answer``, where a fresh episode would give ``format_error``).
"""

from __future__ import annotations

import copy
import json
import time

import gymnasium as gym
import pytest

from gym_sysmath.integrations.trl import (
    SysmathToolEnv,
    build_dataset,
    close_tool_envs,
    completion_text,
    cpu_training_args,
)
from tests.real_model.recording import RecordingReward

pytestmark = [pytest.mark.docker, pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

MAX_TURNS = 4
FINAL_TOKENS = 24
CODE = "result = [0]\nprint('result set')"
SYSTEM = "You are a careful engineer. Call run_code to compute, then reply with the answer."


def scripted_first_turn(model, tokenizer, script: list[int]):
    """Wrap ``model.generate``: rows whose prompt holds no tool response yet (the first turn)
    may only produce the tokens of ``script``; the turn after the tool output is free."""
    from transformers import LogitsProcessorList

    from tests.forced_tokens import forced_tokens

    generate = model.generate

    def steered(*args, **kwargs):
        input_ids = kwargs["input_ids"]
        rows = {}
        for row, ids in enumerate(input_ids.tolist()):
            text = tokenizer.decode(ids)
            if "<tool_response>" not in text:
                rows[row] = script
        if rows:
            kwargs["logits_processor"] = LogitsProcessorList([forced_tokens(rows, input_ids.shape[1],
                                                                            tokenizer.eos_token_id)])
        else:  # the turn after the tool output: the model's own, kept short
            kwargs["generation_config"] = copy.deepcopy(kwargs["generation_config"])
            kwargs["generation_config"].max_new_tokens = FINAL_TOKENS
        return generate(*args, **kwargs)

    model.generate = steered


def replay(row: dict, code: str, final: str) -> tuple[str, float, str]:
    """A fresh tool-mode env: the row's task, the run_code call, the final reply -> (tool output,
    reward, verdict)."""
    env = gym.make(row["env_id"], max_turns=MAX_TURNS, code_via="tool")
    try:
        env.reset(seed=row["seed"], options={"task_id": row["task_id"]})
        output, *_ = env.unwrapped.run_code(code)
        _, reward, terminated, _, info = env.step(final)
        assert terminated and info["scoring_error"] is None, info  # with the tool, every reply is final
        return output, float(reward), info["verdict"]
    finally:
        env.close()


def test_grpo_trainer_runs_the_envs_tool_turns(model_dir, docker_available, tmp_path, capsys):
    trl = pytest.importorskip("trl")
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    candidates = build_dataset("CsappExact-v0", conversational=True, system_prompt=SYSTEM, max_turns=MAX_TURNS,
                               env_kwargs={"code_via": "tool"})  # prompts that describe the run_code tool
    rows = candidates[:2]

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # SmolLM2's own template has no tool role; Qwen2.5's uses the same <|im_start|>/<|im_end|> tokens and
    # is one TRL knows how to parse tool calls from.
    tokenizer.chat_template = qwen2_5_chat_template
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    call = json.dumps({"name": "run_code", "arguments": {"code": CODE}})
    script = [*tokenizer.encode(f"<tool_call>\n{call}\n</tool_call>", add_special_tokens=False), tokenizer.eos_token_id]
    scripted_first_turn(model, tokenizer, script)
    budget = len(script) + 32 + FINAL_TOKENS  # the call, its output, the answer

    config = trl.GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2,
                            max_completion_length=budget, max_steps=1, learning_rate=1e-6, report_to="none",
                            logging_steps=1, save_strategy="no", seed=0, dataloader_num_workers=0,
                            max_tool_calling_iterations=1, **cpu_training_args())  # fp32 where the CPU lacks bf16
    made: list[SysmathToolEnv] = []

    def factory() -> SysmathToolEnv:
        made.append(SysmathToolEnv(max_turns=MAX_TURNS))
        return made[-1]

    started = time.perf_counter()
    try:
        with RecordingReward() as reward:
            trainer = trl.GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[reward], args=config,
                                      train_dataset=Dataset.from_list(rows), environment_factory=factory)
            trainer.train()
            batch = trainer._logs  # TRL's buffer behind log_completions: the last generation batch
            completions, logged = list(batch["completion"]), list(batch["rewards"][reward.__name__])
            environments = list(trainer.environments)
        elapsed = time.perf_counter() - started
        [graded] = reward.calls
        assert len(graded) == len(completions) == len(environments) == 4
        verdicts = []
        for completion, value, result, environment in zip(completions, logged, graded, environments, strict=True):
            row = next(r for r in rows if r["task_id"] == result.task_id)
            assert environment.tool_calls == 1  # TRL called the env's tool once, in this rollout's episode
            tool_messages = [m for m in completion if m["role"] == "tool"]
            assert [m["name"] for m in tool_messages] == ["run_code"]
            output, replay_reward, replay_verdict = replay(row, CODE, completion_text(completion))
            assert tool_messages[0]["content"] == output  # the env's own observation, deterministic text
            assert "[status: ok; turn 1 of 4]" in output
            assert (value, result.reward, result.verdict) == (replay_reward, replay_reward, replay_verdict)
            verdicts.append(result.verdict)
    finally:
        close_tool_envs()
    with capsys.disabled():
        print(f"\nreal-model GRPO with tool turns: 1 step x 4 rollouts in {elapsed:.0f} s (bf16={config.bf16}); "
              f"verdicts {verdicts}; "
              f"tool envs made {len(made)}")

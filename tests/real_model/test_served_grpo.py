"""A real ``trl.GRPOTrainer`` on SmolLM2-135M-Instruct whose rewards and tool turns all run on a
running ``gym-sysmath serve`` (the shared ``gym_server``: every id, Docker): ``SysmathReward`` and
``SysmathToolEnv`` given ``remote=`` the server's URL, nothing else changed from
``test_grpo_tools.py`` (the same steered first turn, a ``run_code`` call, and a free final turn).

Every reward comes from the server: for the trainer's run, a step or a ``run_code`` call of an
env in this process raises, and while the reward grades, the server's ``/health`` counts a live
session for each rollout. Afterwards each rollout is replayed in a fresh local env: the tool
output TRL put in the conversation and the reward and verdict of the final turn must match.
"""

from __future__ import annotations

import functools
import time

import pytest

from gym_sysmath.env import SysmathEnv
from gym_sysmath.integrations.trl import (
    SysmathToolEnv,
    build_dataset,
    close_tool_envs,
    completion_text,
    cpu_training_args,
)
from gym_sysmath.serving.client import RemoteSysmathEnv
from tests.real_model.recording import RecordingReward
from tests.real_model.test_grpo_tools import CODE, MAX_TURNS, SYSTEM, replay, scripted_first_turn

pytestmark = [pytest.mark.docker, pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

STEPS = 1
BATCH = 2  # one prompt's group of two rollouts: what proves the path, at CI's cost


def no_local_step(*args, **kwargs):
    raise AssertionError("an env stepped in the trainer's process: this run grades only on the gym-sysmath server")


def test_grpo_trainer_gets_every_reward_and_tool_turn_from_gym_sysmath_serve(model_dir, gym_server, tmp_path,
                                                                              capsys, monkeypatch):
    trl = pytest.importorskip("trl")
    import json

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    rows = build_dataset("CsappExact-v0", conversational=True, system_prompt=SYSTEM, max_turns=MAX_TURNS,
                         env_kwargs={"code_via": "tool"})[:2]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.chat_template = qwen2_5_chat_template  # SmolLM2's own template has no tool role
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    call = json.dumps({"name": "run_code", "arguments": {"code": CODE}})
    script = [*tokenizer.encode(f"<tool_call>\n{call}\n</tool_call>", add_special_tokens=False), tokenizer.eos_token_id]
    scripted_first_turn(model, tokenizer, script)
    config = trl.GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=BATCH, num_generations=2,
                            max_completion_length=len(script) + 64, max_steps=STEPS, learning_rate=1e-6,
                            report_to="none", logging_steps=1, save_strategy="no", seed=0, dataloader_num_workers=0,
                            max_tool_calling_iterations=1, **cpu_training_args())
    sessions: list[int] = []

    class ServedReward(RecordingReward):
        def __call__(self, *args, **kwargs):
            sessions.append(gym_server.health()["sessions"])  # the rollouts' episodes, still open there
            values = super().__call__(*args, **kwargs)
            self.batches = [*getattr(self, "batches", []), (list(kwargs["completions"]), list(values),
                                                           list(kwargs["environments"]))]
            return values

    started = time.perf_counter()
    try:
        with monkeypatch.context() as local:
            local.setattr(SysmathEnv, "step", no_local_step)
            local.setattr(SysmathEnv, "run_code", no_local_step)
            with ServedReward(remote=gym_server.url) as reward:
                trainer = trl.GRPOTrainer(
                    model=model, processing_class=tokenizer, reward_funcs=[reward], args=config,
                    train_dataset=Dataset.from_list(rows),
                    environment_factory=functools.partial(SysmathToolEnv, remote=gym_server.url, max_turns=MAX_TURNS))
                trainer.train()
        elapsed = time.perf_counter() - started
        assert len(reward.calls) == len(reward.batches) == STEPS  # the trainer ran its steps, each graded
        logged = [entry for entry in trainer.state.log_history if f"rewards/{reward.__name__}/mean" in entry]
        assert len(logged) == STEPS and all(entry["sysmath/scoring_errors"] == 0 for entry in logged)
        verdicts = []
        for (completions, values, environments), graded, open_sessions in zip(reward.batches, reward.calls, sessions,
                                                                               strict=True):
            assert len(completions) == len(environments) == BATCH and open_sessions >= len(environments)
            for completion, value, result, environment in zip(completions, values, graded, environments, strict=True):
                assert isinstance(environment._env, RemoteSysmathEnv) and environment.tool_calls == 1
                row = next(r for r in rows if r["task_id"] == result.task_id)
                [tool] = [m["content"] for m in completion if m["role"] == "tool"]
                output, replay_reward, replay_verdict = replay(row, CODE, completion_text(completion))
                assert tool == output and "[status: ok; turn 1 of 4]" in output  # the server's tool output
                assert (value, result.verdict) == (replay_reward, replay_verdict)
                verdicts.append(result.verdict)
    finally:
        close_tool_envs()
    with capsys.disabled():
        print(f"\nreal-model GRPO over gym-sysmath serve: {STEPS} step(s) x {BATCH} rollouts in {elapsed:.0f} s; "
              f"live sessions on the server while grading {sessions}; verdicts {verdicts}")

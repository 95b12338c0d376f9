"""OpenRLHF: this package's reward file loaded by OpenRLHF's own ``SingleTurnAgentExecutor`` (as
``--reward.remote_url file.py`` does) and its ``AgentExecutor`` run by OpenRLHF's own
``MultiTurnAgentExecutor`` loop, through a real tokenizer's encode/decode. The policy is a
scripted engine standing in for vLLM (which does not install on CPU): it replies with fixed
texts, so what is tested is OpenRLHF's code path around the env. A harness failure that
survives its retry comes back as NaN, which OpenRLHF's dynamic filtering drops with its group.

OpenRLHF 0.11.2 installs with ``--no-deps`` (it pins deepspeed, flash-attn and transformers);
``openrlhf.utils.agent`` needs only aiohttp and pylatexenc besides what is here."""

from __future__ import annotations

import asyncio
import importlib.util
import math
from types import SimpleNamespace

import gymnasium as gym
import pytest

import gym_sysmath  # noqa: F401
from gym_sysmath.envs.csapp import CsappExactEnv
from gym_sysmath.integrations import openrlhf as sysmath_openrlhf
from gym_sysmath.integrations.episodes import TaskRef
from gym_sysmath.integrations.trl import build_dataset
from gym_sysmath.sandbox import SandboxError
from tests.char_tokenizer import char_tokenizer

agent = pytest.importorskip("openrlhf.utils.agent", reason="the frameworks extra is not installed")
PROCESS = {"sandbox": "process"}
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")


class ScriptedEngine:
    """Replies with the next text of ``replies``, tokenized, as vLLM's ``generate`` returns it."""

    def __init__(self, tokenizer, replies: list[str]):
        self.tokenizer, self.replies = tokenizer, list(replies)

    async def generate(self, token_ids, sampling_params, multi_modal_data=None):
        text = self.replies.pop(0)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        output = SimpleNamespace(token_ids=ids, text=text + self.tokenizer.eos_token, finish_reason="stop",
                                 logprobs=None)
        return SimpleNamespace(outputs=[output])


def sampling_params():
    return SimpleNamespace(max_tokens=None, logprobs=None)


@pytest.fixture(autouse=True)
def process_sandbox(monkeypatch):
    monkeypatch.setenv("GYM_SYSMATH_ENV_KWARGS", '{"sandbox": "process"}')


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return sysmath_openrlhf.openrlhf_rows(build_dataset("CsappExact-v0", n=2, env_kwargs=PROCESS))


def prompt_text(row: dict) -> str:
    """A templated prompt as OpenRLHF's dataset hands it to the executor (ASCII: the tokenizer's)."""
    return "User: " + row["prompt"][-1]["content"].encode("ascii", "replace").decode() + "\nAssistant: "


def reference_answer(label: str, max_turns: int | None = 1) -> str:
    ref = TaskRef.parse(label)
    env = gym.make(ref.env_id, split=ref.split, max_turns=max_turns, **PROCESS)
    try:
        ref.reset(env)
        return env.unwrapped.reference_action()
    finally:
        env.close()


def run_single_turn(row: dict, reply: str) -> dict:
    tokenizer = char_tokenizer()
    executor = agent.SingleTurnAgentExecutor(remote_rm_url=sysmath_openrlhf.__file__)
    return asyncio.run(executor.execute(prompt_text(row), row["label"], sampling_params(), 4096, tokenizer,
                                        ScriptedEngine(tokenizer, [reply])))


def test_reward_file_grades_through_openrlhfs_executor(rows):
    right = run_single_turn(rows[0], reference_answer(rows[0]["label"]))
    wrong = run_single_turn(rows[1], "ANSWER: [123456789]")
    assert right["reward"].tolist() == [1.0] and right["scores"].tolist() == [1.0]
    assert wrong["reward"].tolist() == [0.0]
    assert right["extra_logs"]["sysmath_scoring_error"].tolist() == [0.0]


def test_the_prompts_own_answer_example_is_never_graded(rows):
    """The decoded query holds the prompt (whose instructions show an ANSWER line): only what
    follows it is the response."""
    query = prompt_text(rows[0]) + "ANSWER: [1]<|im_end|>"
    assert sysmath_openrlhf.response_text(query, prompt_text(rows[0])) == "ANSWER: [1]"
    with pytest.raises(ValueError, match="holds neither the prompt nor its last characters"):
        sysmath_openrlhf.response_text("something else", prompt_text(rows[0]))


def test_scoring_error_is_nan_and_dropped_by_dynamic_filtering(rows, monkeypatch):
    def failing_harness(self, reply):
        raise SandboxError("worker_died", "container killed (simulated)")

    monkeypatch.setattr(CsappExactEnv, "_grade_final", failing_harness)
    out = run_single_turn(rows[0], reference_answer(rows[0]["label"]))
    assert math.isnan(out["reward"].item()) and math.isnan(out["scores"].item())
    assert out["extra_logs"]["sysmath_scoring_error"].tolist() == [1.0]
    # OpenRLHF's dynamic filter (samples_generator.py, which imports vLLM, so not run here) keeps
    # a group only when min < mean score < max, never with a NaN in it


def test_agent_func_runs_a_multi_turn_episode_in_openrlhfs_loop():
    [row] = sysmath_openrlhf.openrlhf_rows(build_dataset("CsappExact-v0", n=1, max_turns=None, env_kwargs=PROCESS),
                                           max_turns=None)
    label = row["label"]
    spec = importlib.util.spec_from_file_location("agent_module", sysmath_openrlhf.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # as OpenRLHF's _load_agent_executor loads --train.agent_func_path
    executor = module.AgentExecutor()
    assert isinstance(executor, agent.AgentExecutorBase)
    tokenizer = char_tokenizer()
    replies = ["Checking.\n```python\nprint(6 * 7)\n```", reference_answer(label, max_turns=None)]
    out = asyncio.run(executor.execute(prompt_text(row), label, sampling_params(), 8192, tokenizer,
                                       ScriptedEngine(tokenizer, replies)))
    assert out["reward"] == 1.0 and len(out["action_ranges"]) == 2
    transcript = tokenizer.decode(out["observation_tokens"])
    assert "42" in transcript and "User: " in transcript.split("print(6 * 7)")[1]


def test_cli_export_writes_rows_openrlhf_reads_and_grades(tmp_path):
    import pandas as pd

    from gym_sysmath.cli import main

    out = tmp_path / "prompts.parquet"
    assert main(["export", "CsappExact-v0", "-n", "2", "--format", "openrlhf", "--out", str(out)]) == 0
    frame = pd.read_parquet(out)
    assert list(frame.columns) == ["prompt", "label"]
    row = {"prompt": [dict(m) for m in frame.iloc[0]["prompt"]], "label": frame.iloc[0]["label"]}
    assert TaskRef.parse(row["label"]).max_turns == 1
    assert run_single_turn(row, reference_answer(row["label"]))["reward"].tolist() == [1.0]

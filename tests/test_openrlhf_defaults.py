"""OpenRLHF 0.11.2 under its own defaults and the flags of docs/integrations.md: prompts templated by OpenRLHF's
own ``PromptDataset`` (``--data.input_key prompt --data.label_key label
--data.apply_chat_template``) with the real SmolLM2 tokenizer, rolled out by its own
``SingleTurnAgentExecutor`` (the reward file loaded from its path, as ``--reward.remote_url``
does) and its ``MultiTurnAgentExecutor`` loop (``AgentExecutor`` loaded as
``--train.agent_func_path`` does), at its default ``--data.max_len`` 2048 and
``--rollout.max_new_tokens`` None. A scripted engine stands in for vLLM, replying as vLLM does
under OpenRLHF's sampling defaults (``skip_special_tokens=False``: the text ends in ``<|im_end|>``).
OpenRLHF's ``SamplesGenerator`` (dynamic filtering) runs on a local Ray with the executor in
the driver, and that page's commands go through ``train_ppo_ray``'s own ``__main__`` block
(parser and checks; the module itself imports vLLM and DeepSpeed). Every reward is compared
with the env's own grading; none may be ``None``."""

from __future__ import annotations

import argparse
import ast
import asyncio
import importlib.util
import json
import logging
import math
import re
import shlex
import sys
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gym_sysmath  # noqa: F401
from gym_sysmath.integrations import openrlhf as sysmath_openrlhf
from gym_sysmath.integrations.episodes import TaskRef
from gym_sysmath.integrations.trl import build_dataset

agent = pytest.importorskip("openrlhf.utils.agent", reason="the frameworks extra is not installed")
prompts_dataset = pytest.importorskip("openrlhf.datasets.prompts_dataset")
PROCESS = {"sandbox": "process"}
MAX_LEN = 2048  # OpenRLHF 0.11.2's --data.max_len default; --rollout.max_new_tokens defaults to None
README_LENGTHS = ["--data.max_len", "8192", "--rollout.max_new_tokens", "4096"]
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")

#: End-of-turn texts of common chat templates (ChatML, Llama 3, Llama 2/Mistral, Gemma, Phi-3,
#: gpt-oss, DeepSeek, Cohere, GPT-2/Qwen base).
END_TOKENS = ["<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|endoftext|>", "</s>",
              "<end_of_turn>", "<eos>", "<|end|>", "<|return|>", "<\uff5cend\u2581of\u2581sentence\uff5c>",
              "<|END_OF_TURN_TOKEN|>"]


class ScriptedEngine:
    """vLLM's ``generate`` as OpenRLHF calls it: the next reply, its tokens ending in EOS, and
    its text with the EOS token kept (OpenRLHF's ``skip_special_tokens=False``)."""

    def __init__(self, tokenizer, replies: list[str]):
        self.tokenizer, self.replies, self.prompts = tokenizer, list(replies), []

    async def generate(self, token_ids, sampling_params, multi_modal_data=None):
        self.prompts.append(list(token_ids))
        text = self.replies.pop(0)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        ids = ids[:sampling_params.max_tokens]
        output = SimpleNamespace(token_ids=ids, text=self.tokenizer.decode(ids, skip_special_tokens=False),
                                 finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[output])


def sampling_params(max_new_tokens: int | None = None):
    return SimpleNamespace(max_tokens=max_new_tokens, logprobs=None)


@pytest.fixture(autouse=True)
def process_sandbox(monkeypatch):
    """How grading runs is the one setting beside the labels (the sandbox is not under test here)."""
    monkeypatch.setenv("GYM_SYSMATH_ENV_KWARGS", json.dumps(PROCESS))


def dataset(rows: list[dict], tokenizer) -> list[tuple[str, str]]:
    """(prompt, label) pairs as OpenRLHF's ``PromptDataset`` makes them from the page's flags."""
    data = SimpleNamespace(input_key="prompt", label_key="label", apply_chat_template=True)
    strategy = SimpleNamespace(args=SimpleNamespace(data=data), is_rank_0=lambda: False)
    loaded = prompts_dataset.PromptDataset(rows, tokenizer, strategy)
    return [(loaded[i][1], loaded[i][2]) for i in range(len(loaded))]


def exported(env_id: str, n: int | None, max_turns: int | None = 1) -> list[dict]:
    return sysmath_openrlhf.openrlhf_rows(build_dataset(env_id, n=n, max_turns=max_turns, env_kwargs=PROCESS),
                                          max_turns=max_turns)


def env_grade(label: str, actions: list[str]) -> tuple[float, str]:
    """The env's own reward and verdict for these actions, no adapter in between."""
    ref = TaskRef.parse(label)
    env = gym.make(ref.env_id, split=ref.split, max_turns=ref.max_turns, **PROCESS)
    try:
        ref.reset(env)
        for action in actions:
            _, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        return float(reward), info.get("verdict")
    finally:
        env.close()


def reference_answer(label: str) -> str:
    ref = TaskRef.parse(label)
    env = gym.make(ref.env_id, split=ref.split, max_turns=ref.max_turns, **PROCESS)
    try:
        ref.reset(env)
        return env.unwrapped.reference_action()
    finally:
        env.close()


def single_turn(tokenizer, prompt: str, label: str, reply: str, *, max_len: int = MAX_LEN,
                max_new_tokens: int | None = None) -> dict:
    executor = agent.SingleTurnAgentExecutor(remote_rm_url=sysmath_openrlhf.__file__)
    return asyncio.run(executor.execute(prompt, label, sampling_params(max_new_tokens), max_len, tokenizer,
                                        ScriptedEngine(tokenizer, [reply])))


def agent_executor():
    """``AgentExecutor`` loaded from the file as OpenRLHF's ``_load_agent_executor`` loads it."""
    spec = importlib.util.spec_from_file_location("agent_module", sysmath_openrlhf.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    executor = module.AgentExecutor()
    assert isinstance(executor, agent.AgentExecutorBase)
    return executor


@pytest.fixture(scope="module")
def loaded_agent():
    return agent_executor()


@pytest.fixture(scope="module")
def linalg(smollm2_tokenizer) -> list[tuple[str, str]]:
    return dataset(exported("LinearAlgebra-v0", 3), smollm2_tokenizer)


@pytest.fixture(scope="module")
def csapp_multi_turn(smollm2_tokenizer) -> list[tuple[str, str]]:
    return dataset(exported("CsappExact-v0", 2, max_turns=None), smollm2_tokenizer)


@pytest.fixture(scope="module")
def compgeom_multi_turn(smollm2_tokenizer) -> list[tuple[str, str]]:
    return dataset(exported("CompGeom-v0", None, max_turns=None), smollm2_tokenizer)


def test_deepseek_end_of_sentence_after_a_right_answer_scores_one(smollm2_tokenizer, linalg):
    prompt, label = linalg[0]
    reply = reference_answer(label) + "<\uff5cend\u2581of\u2581sentence\uff5c>"
    out = single_turn(smollm2_tokenizer, prompt, label, reply)
    assert out["reward"].tolist() == [1.0] == [env_grade(label, [reference_answer(label)])[0]]


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ends=st.lists(st.tuples(st.sampled_from(["", " ", "\n", "\n\n"]), st.sampled_from(END_TOKENS)),
                     min_size=1, max_size=3),
       which=st.integers(0, 2), right=st.booleans())
def test_end_tokens_of_common_chat_templates_never_change_the_reward(smollm2_tokenizer, linalg, loaded_agent, ends,
                                                                     which, right):
    """Through both boundaries: the reward file's query and the agent's step (a one-turn label)."""
    prompt, label = linalg[which]
    answer = reference_answer(label) if right else "ANSWER: 123456789"
    reply = answer + "".join(space + token for space, token in ends)
    expected = env_grade(label, [answer])[0]
    out = single_turn(smollm2_tokenizer, prompt, label, reply)
    assert out["reward"].tolist() == [expected] == [1.0 if right else 0.0]
    assert {flag: value.item() for flag, value in out["extra_logs"].items()} == dict.fromkeys(sysmath_openrlhf.FLAGS,
                                                                                              0.0)
    stepped = asyncio.run(loaded_agent.execute(prompt, label, sampling_params(), MAX_LEN, smollm2_tokenizer,
                                               ScriptedEngine(smollm2_tokenizer, [reply])))
    assert stepped["reward"] == expected and len(stepped["action_ranges"]) == 1


def test_a_prompt_openrlhf_cut_is_graded_from_its_response_and_flagged(smollm2_tokenizer, linalg, caplog):
    """A prompt over ``max_len - max_new_tokens`` is cut from its start by OpenRLHF's executor;
    the decoded query then lacks the prompt's head. The response is still found, graded as the
    env grades it, flagged, and the cut logged at ERROR naming the task and the flags to raise."""
    prompt, label = linalg[0]
    length = len(smollm2_tokenizer(prompt, add_special_tokens=False)["input_ids"])
    answer = reference_answer(label)
    for reply, expected in ((answer, 1.0), ("ANSWER: 123456789", 0.0)):
        with caplog.at_level(logging.ERROR, logger=sysmath_openrlhf.__name__):
            out = single_turn(smollm2_tokenizer, prompt, label, reply, max_len=length - 40 + 64, max_new_tokens=64)
        query = smollm2_tokenizer.decode(out["observation_tokens"])
        assert prompt not in query  # OpenRLHF did cut it
        assert out["reward"].tolist() == [expected] == [env_grade(label, [reply])[0]]
        assert out["extra_logs"]["sysmath_prompt_cut"].tolist() == [1.0]
    assert TaskRef.parse(label).task_id in caplog.text and "--data.max_len" in caplog.text


def test_compgeom_at_openrlhfs_defaults_is_cut_and_flagged_never_a_silent_zero(smollm2_tokenizer,
                                                                              compgeom_multi_turn, caplog):
    """At OpenRLHF's defaults (``--data.max_len`` 2048, ``--rollout.max_new_tokens`` unset) its
    single-turn executor keeps the last 2047 tokens of a longer CompGeom prompt and leaves the
    reply one token: the reward file grades that token as the env does and flags the cut."""
    single = [(prompt, json.dumps({**json.loads(label), "max_turns": 1})) for prompt, label in compgeom_multi_turn]
    over = [pair for pair in single if len(smollm2_tokenizer(pair[0], add_special_tokens=False)["input_ids"]) > 2047]
    assert len(over) >= len(single) // 2
    prompt, label = over[0]
    with caplog.at_level(logging.ERROR, logger=sysmath_openrlhf.__name__):
        out = single_turn(smollm2_tokenizer, prompt, label, "```cpp\nbool f() { return true; }\n```")
    assert len(out["observation_tokens"]) == MAX_LEN and out["action_ranges"] == [(MAX_LEN - 1, MAX_LEN)]
    reply = smollm2_tokenizer.decode(out["observation_tokens"][-1:])
    assert out["reward"].tolist() == [env_grade(label, [reply])[0]]
    assert out["extra_logs"]["sysmath_prompt_cut"].tolist() == [1.0]
    assert TaskRef.parse(label).task_id in caplog.text


def test_a_failing_reward_file_is_nan_flagged_and_logged_never_openrlhfs_silent_none(smollm2_tokenizer, linalg,
                                                                                     caplog):
    """OpenRLHF's executor turns any exception of ``reward_func`` into reward ``None``, logged at
    INFO; the reward file raises none: a label naming a task that does not exist comes back NaN
    with ``sysmath_reward_error`` and an ERROR naming the task."""
    prompt, label = linalg[0]
    bad = json.dumps({**json.loads(label), "task_id": "no-such-task"})
    with caplog.at_level(logging.ERROR, logger=sysmath_openrlhf.__name__):
        out = single_turn(smollm2_tokenizer, prompt, bad, reference_answer(label))
    assert out["reward"] is not None and math.isnan(out["reward"].item()) and math.isnan(out["scores"].item())
    assert out["extra_logs"]["sysmath_reward_error"].tolist() == [1.0]
    assert out["extra_logs"]["sysmath_scoring_error"].tolist() == [0.0]
    assert "no-such-task" in caplog.text and "sysmath_reward_error" in caplog.text


def test_labels_carry_env_kwargs_so_grading_needs_no_env_var(smollm2_tokenizer, monkeypatch):
    """The export's task arguments (a difficulty filter changes which task a train seed draws)
    travel in the label, so the reward file grades with no ``GYM_SYSMATH_ENV_KWARGS`` at all
    (that variable only picks how grading runs, e.g. the sandbox). A label stripped of them is
    refused (NaN, ``sysmath_reward_error``), not graded against another task."""
    monkeypatch.delenv("GYM_SYSMATH_ENV_KWARGS")
    rows = build_dataset("LinearAlgebra-v0", split="train", n=1, seed=3, env_kwargs={**PROCESS, "difficulty": "hard"})
    [(prompt, label)] = dataset(sysmath_openrlhf.openrlhf_rows(rows), smollm2_tokenizer)
    assert json.loads(label)["env_kwargs"] == {"difficulty": "hard"}
    ref = TaskRef.parse(label)
    env = gym.make(ref.env_id, split="train", max_turns=1, difficulty="hard", **PROCESS)
    try:
        ref.reset(env)
        answer = env.unwrapped.reference_action()
    finally:
        env.close()
    assert single_turn(smollm2_tokenizer, prompt, label, answer)["reward"].tolist() == [1.0]
    stripped = json.dumps({**json.loads(label), "env_kwargs": {}})
    out = single_turn(smollm2_tokenizer, prompt, stripped, answer)
    assert math.isnan(out["reward"].item()) and out["extra_logs"]["sysmath_reward_error"].tolist() == [1.0]


def readme_commands(text: str) -> dict[str, list[str]]:
    """The OpenRLHF commands of docs/integrations.md (its paragraph up to the next framework's), as argv after
    the module name, keyed by the module: ``check`` and each ``train_ppo_ray`` run."""
    start = re.search(r"^\*\*OpenRLHF\*\*", text, re.MULTILINE)
    assert start, "the README has an **OpenRLHF** paragraph"
    end = re.compile(r"^(\*\*|#)", re.MULTILINE).search(text, start.end())
    section = text[start.start():end.start() if end else len(text)]
    lines = section.replace("\\\n", " ").splitlines()
    commands: dict[str, list[str]] = {}
    for line in lines:
        if not line.startswith("    ") or "openrlhf" not in line:  # code lines only
            continue
        argv = shlex.split(line, comments=True)
        for module in ("openrlhf.cli.train_ppo_ray", "gym_sysmath.integrations.openrlhf"):
            if module in argv:
                key = module + (f" {len([k for k in commands if k.startswith(module)])}" if module in commands else "")
                commands[key] = argv[argv.index(module) + 1:]
    return commands


def openrlhf_main_args(argv: list[str]) -> SimpleNamespace:
    """``python -m openrlhf.cli.train_ppo_ray ARGV`` up to ``train(args)``: its own ``__main__``
    block (parser, defaults and checks) run from its source, since the module imports vLLM and
    DeepSpeed at the top, which do not install on CPU."""
    path = Path(agent.__file__).parents[1] / "cli" / "train_ppo_ray.py"
    tree = ast.parse(path.read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test))
    started: list[SimpleNamespace] = []
    namespace = {"argparse": argparse, "datetime": datetime, "train": started.append}
    old_argv = sys.argv
    sys.argv = ["train_ppo_ray.py", *argv]
    try:
        exec(compile(ast.Module(body=block.body, type_ignores=[]), str(path), "exec"), namespace)
    finally:
        sys.argv = old_argv
    [args] = started
    return args


def test_readme_commands_pass_openrlhfs_own_parser_and_every_family_fits(smollm2_tokenizer):
    """The page's commands, run through OpenRLHF's own argument parsing and checks: they start,
    read the export's columns, load this file, and leave every family's longest prompt uncut."""
    from tests.real_model import smollm2

    text = (Path(__file__).parents[1] / "docs" / "integrations.md").read_text()  # the OpenRLHF section
    commands = readme_commands(text)
    runs = [argv for key, argv in commands.items() if key.startswith("openrlhf.cli")]
    assert len(runs) == 2, "one single-turn and one multi-turn train_ppo_ray command"
    here = sysmath_openrlhf.__file__
    rows = {env_id: exported(env_id, None, max_turns=None) for env_id in ("CompGeom-v0", "CsappExact-v0",
                                                                           "LinearAlgebra-v0")}
    entry_points, checked = set(), set()
    for argv in runs:
        argv = [{"$F": here, "$MODEL": str(smollm2.FP32_DIR)}.get(arg, arg) for arg in argv]
        args = openrlhf_main_args(argv)
        assert (args.data.input_key, args.data.label_key, args.data.apply_chat_template) == ("prompt", "label", True)
        assert args.algo.dynamic_filtering_enable and list(args.algo.dynamic_filtering_range) == [-0.01, 1.01]
        entry_points.add("agent" if args.train.agent_func_path == here else
                         "reward" if args.reward.remote_url == [here] else None)
        lengths = (args.data.max_len, args.rollout.max_new_tokens)
        for env_id, family_rows in rows.items() if lengths not in checked else ():
            longest = sysmath_openrlhf.check_prompts(family_rows, smollm2_tokenizer, max_len=lengths[0],
                                                     max_new_tokens=lengths[1])  # refuses one that would be cut
            assert longest <= sysmath_openrlhf.prompt_limit(*lengths), env_id
        checked.add(lengths)
    assert entry_points == {"agent", "reward"}
    [check] = [argv for key, argv in commands.items() if key.startswith("gym_sysmath")]
    assert check[0] == "check" and check[check.index("--data.max_len") + 1] == str(args.data.max_len)
    assert check[check.index("--rollout.max_new_tokens") + 1] == str(args.rollout.max_new_tokens)


def test_check_refuses_compgeom_at_openrlhfs_default_max_len(smollm2_tokenizer, tmp_path, capsys):
    """``python -m gym_sysmath.integrations.openrlhf check`` on a ``gym-sysmath export`` file: at
    OpenRLHF's default ``--data.max_len`` CompGeom prompts would be cut, so it refuses, naming
    the flags and the length needed; with the page's lengths they fit."""
    from gym_sysmath.cli import main
    from tests.real_model import smollm2

    path = tmp_path / "compgeom.parquet"
    assert main(["export", "CompGeom-v0", "--format", "openrlhf", "--out", str(path)]) == 0
    check = ["check", str(path), "--pretrain", str(smollm2.FP32_DIR), "--data.input_key", "prompt",
             "--data.apply_chat_template"]
    assert sysmath_openrlhf._main(check) == 1
    refusal = capsys.readouterr().err
    assert "of 39 prompts are longer than --data.max_len minus --rollout.max_new_tokens=2047 tokens" in refusal
    assert sysmath_openrlhf._main([*check, *README_LENGTHS]) == 0
    assert "39 prompts fit" in capsys.readouterr().out


def test_agent_executor_refuses_a_prompt_openrlhf_would_cut(smollm2_tokenizer, compgeom_multi_turn):
    """OpenRLHF's multi-turn loop would cut the prompt's start with a warning; the agent refuses
    it (OpenRLHF does not catch errors there, so the run stops with the message)."""
    from gym_sysmath.integrations.episodes import PromptTooLong

    prompt, label = max(compgeom_multi_turn, key=lambda pair: len(pair[0]))
    assert len(smollm2_tokenizer(prompt, add_special_tokens=False)["input_ids"]) > MAX_LEN - 1
    engine = ScriptedEngine(smollm2_tokenizer, ["ANSWER: 1"])
    with pytest.raises(PromptTooLong, match=r"--data\.max_len minus --rollout\.max_new_tokens=2047"):
        asyncio.run(agent_executor().execute(prompt, label, sampling_params(), MAX_LEN, smollm2_tokenizer, engine))
    assert engine.prompts == []  # refused before generating


def test_tool_turn_feedback_is_a_user_turn_of_the_models_chat_template(smollm2_tokenizer, csapp_multi_turn):
    """The whole trajectory OpenRLHF trains on is the model's chat template over the episode's
    messages: each observation a user turn, the next reply an assistant turn."""
    prompt, label = csapp_multi_turn[0]
    code, answer = "Checking.\n```python\nprint(6 * 7)\n```", reference_answer(label)
    engine = ScriptedEngine(smollm2_tokenizer, [code, answer])
    out = asyncio.run(agent_executor().execute(prompt, label, sampling_params(), MAX_LEN, smollm2_tokenizer,
                                               engine))
    assert out["reward"] == 1.0 == env_grade(label, [code, answer])[0] and len(out["action_ranges"]) == 2
    ref = TaskRef.parse(label)
    env = gym.make(ref.env_id, split=ref.split, max_turns=ref.max_turns, **PROCESS)
    try:
        observation, _ = ref.reset(env)
        feedback = env.step(code)[0]
    finally:
        env.close()
    messages = [{"role": "user", "content": observation}, {"role": "assistant", "content": code},
                {"role": "user", "content": feedback}, {"role": "assistant", "content": answer}]
    transcript = smollm2_tokenizer.decode(out["observation_tokens"])
    assert "42" in feedback and "User:" not in transcript
    assert transcript + "\n" == smollm2_tokenizer.apply_chat_template(messages, tokenize=False)
    assert out["extra_logs"]["sysmath_closed_at_budget"].tolist() == [0.0]


def test_token_budget_ending_an_open_episode_closes_and_grades_it(smollm2_tokenizer, csapp_multi_turn):
    """OpenRLHF stops a trajectory when ``--data.max_len`` is spent, whatever the episode's
    state; its reward would be the last turn's 0.0. The agent closes the episode and grades what
    the session left, as ``grade_completion`` does."""
    prompt, label = csapp_multi_turn[1]
    values = json.loads(reference_answer(label).removeprefix("ANSWER:"))
    code = f"```python\nresult = {values!r}\n```"
    length = len(smollm2_tokenizer(prompt, add_special_tokens=False)["input_ids"])
    reply = len(smollm2_tokenizer(code, add_special_tokens=False)["input_ids"]) + 1
    engine = ScriptedEngine(smollm2_tokenizer, [code, "never asked"])
    out = asyncio.run(agent_executor().execute(prompt, label, sampling_params(), length + reply + 5,
                                               smollm2_tokenizer, engine))
    assert len(out["action_ranges"]) == 1  # OpenRLHF's budget ended it after one turn
    closing = sysmath_openrlhf.CLOSING_ACTION
    assert out["reward"] == 1.0 == env_grade(label, [code, closing])[0]
    assert out["extra_logs"]["sysmath_closed_at_budget"].tolist() == [1.0]


def test_feedback_after_a_reply_cut_at_its_token_limit_closes_the_turn_first(smollm2_tokenizer):
    """A reply OpenRLHF cut at ``max_tokens`` has no end-of-turn token: the feedback closes the
    assistant turn before the user turn, so the trajectory is still the chat template's."""
    messages = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "partial"},
                {"role": "user", "content": "out"}]
    templated = smollm2_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    head = templated[:templated.index("partial")]
    for action in ("partial", "partial<|im_end|>"):
        assert head + action + sysmath_openrlhf.feedback_text(smollm2_tokenizer, action, "out") == templated
    assert sysmath_openrlhf.feedback_text(None, "partial", "out") == sysmath_openrlhf.FEEDBACK.format(observation="out")


class _Remote:
    """A Ray actor method's ``.remote`` for a method run here (its result put in Ray's store)."""

    def __init__(self, method):
        self.method = method

    def remote(self, *args, **kwargs):
        import ray

        return ray.put(self.method(*args, **kwargs))


class ScriptedRollouts:
    """OpenRLHF's ``RolloutRayActor`` without vLLM: ``generate_responses`` runs OpenRLHF's own
    ``SingleTurnAgentExecutor`` (this reward file) over scripted replies, one list per task."""

    def __init__(self, replies: dict[str, list[str]]):
        self.replies = replies
        self.executor = agent.SingleTurnAgentExecutor(remote_rm_url=sysmath_openrlhf.__file__)
        self.generate_responses = _Remote(self._generate_responses)
        self.get_num_unfinished_requests = _Remote(lambda: 0)

    def _generate_responses(self, prompt, label, sampling_params, max_length, hf_tokenizer, num_samples=1,
                            images=None):
        replies = self.replies[TaskRef.parse(label).task_id]
        assert len(replies) == num_samples

        async def rollouts():
            return await asyncio.gather(*(self.executor.execute(prompt, label, sampling_params, max_length,
                                                                hf_tokenizer, ScriptedEngine(hf_tokenizer, [reply]))
                                          for reply in replies))

        return asyncio.run(rollouts())


@pytest.fixture
def vllm_names(monkeypatch):
    """vLLM does not install on CPU: the three names OpenRLHF's rollout modules import from it."""
    import types

    modules = {name: types.ModuleType(name) for name in ("vllm", "vllm.inputs", "vllm.utils")}
    modules["vllm"].__version__ = "0.11.0"
    modules["vllm"].SamplingParams = lambda **fields: SimpleNamespace(**fields)
    modules["vllm.inputs"].TokensPrompt = dict
    modules["vllm.utils"].random_uuid = lambda: "scripted"
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)


@pytest.fixture
def local_ray():
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=1, include_dashboard=False, logging_level=logging.WARNING)
    yield
    if started:
        ray.shutdown()


def test_readme_dynamic_filtering_drops_only_a_nan_group_and_draws_a_replacement(smollm2_tokenizer, tmp_path,
                                                                                  vllm_names, local_ray):
    """OpenRLHF's ``SamplesGenerator.generate_samples`` over an export loaded by its own
    ``blending_datasets`` and ``PromptDataset``, with the page's flags (8 samples a prompt,
    range -0.01..1.01): the group whose label is refused (a stale task set: NaN) is dropped and a
    replacement prompt drawn; all-right and mixed groups are kept, every reward the env's own."""
    import pandas as pd
    from openrlhf.datasets.utils import blending_datasets
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
    from torch.utils.data import DataLoader

    from gym_sysmath.cli import main

    path = tmp_path / "prompts.parquet"
    assert main(["export", "LinearAlgebra-v0", "-n", "4", "--format", "openrlhf", "--out", str(path)]) == 0
    frame = pd.read_parquet(path)
    labels = list(frame["label"])
    right = {TaskRef.parse(label).task_id: reference_answer(label) for label in labels}
    tasks = list(right)
    frame.loc[2, "label"] = json.dumps({**json.loads(labels[2]), "task_set": "linalg-000000000000"})
    frame.to_parquet(path)
    replies = {tasks[0]: [right[tasks[0]]] * 8, tasks[1]: [right[tasks[1]], "ANSWER: 123456789"] * 4,
               tasks[2]: [right[tasks[2]]] * 8, tasks[3]: ["ANSWER: 0.5", right[tasks[3]]] * 4}

    args = openrlhf_main_args([*README_LENGTHS, "--data.prompt_dataset", str(path), "--data.input_key", "prompt",
                               "--data.label_key", "label", "--data.apply_chat_template",
                               "--reward.remote_url", sysmath_openrlhf.__file__, "--rollout.n_samples_per_prompt",
                               "8", "--algo.advantage.estimator", "group_norm", "--algo.dynamic_filtering_enable",
                               "--algo.dynamic_filtering_range", "-0.01", "1.01", "--rollout.batch_size", "3"])
    strategy = SimpleNamespace(args=args, print=lambda *_: None, is_rank_0=lambda: False)
    data = blending_datasets(args.data.prompt_dataset, args.data.prompt_probs, strategy, args.train.seed,
                             max_count=args.data.max_samples, dataset_split=args.data.prompt_split)
    prompts = prompts_dataset.PromptDataset(data, smollm2_tokenizer, strategy, input_template=args.data.input_template)
    loader = DataLoader(prompts, batch_size=1, shuffle=False, collate_fn=prompts.collate_fn)
    generator = SamplesGenerator(strategy, loader, None, smollm2_tokenizer, [ScriptedRollouts(replies)])
    samples, _, consumed, _ = generator.generate_samples(
        do_sample=True, max_len=args.data.max_len, max_new_tokens=args.rollout.max_new_tokens,
        temperature=args.rollout.temperature, top_p=args.rollout.top_p)  # what train_ppo_ray passes

    assert consumed == 4 and len(samples) == 24  # (OpenRLHF's pass rate divides samples by prompts: 600%)
    kept = [(TaskRef.parse(sample.labels[0]).task_id, sample) for sample in samples]
    assert sorted({task for task, _ in kept}) == sorted([tasks[0], tasks[1], tasks[3]])
    for task, sample in kept:
        reply = smollm2_tokenizer.decode(sample.sequences[0][sample.action_mask[0].nonzero()[0] + 1:],
                                         skip_special_tokens=True)
        label = next(label for label in labels if TaskRef.parse(label).task_id == task)
        assert sample.rewards.tolist() == [env_grade(label, [reply])[0]]
        assert {flag: sample.info[flag].item() for flag in sysmath_openrlhf.FLAGS} == dict.fromkeys(
            sysmath_openrlhf.FLAGS, 0.0)
    assert sorted(sample.rewards.item() for _, sample in kept) == [0.0] * 8 + [1.0] * 16

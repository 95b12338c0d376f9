"""SkyRL: every id is in ``skyrl_gym``'s registry, ``skyrl_gym.make`` builds the env from an
exported row the way SkyRL's generator does, a multi-turn trajectory runs the real Python tool
turns, and a harness failure is retried on a fresh reset, then raised, never rewarded 0.0.

Then SkyRL's trainer (the ``skyrl`` wheel, installed ``--no-deps``) under its own defaults and
the settings docs/integrations.md gives: its config loader with ``environment.skyrl_gym.gym_sysmath``
added (``main``'s), its ``PromptDataset`` and its ``SkyRLGymGenerator`` (agent loop and batched
path) with a scripted inference engine in vLLM's place and the real SmolLM2 tokenizer. Each
reward is compared with the env's own grading of the same replies."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import subprocess
import sys

import gymnasium as gym
import pytest

import gym_sysmath
from gym_sysmath.envs.csapp import CsappExactEnv
from gym_sysmath.integrations.episodes import (
    CLOSING_ACTION,
    Episode,
    PromptTooLong,
    ScoringError,
    TaskRef,
    grade_completion,
)
from gym_sysmath.integrations.trl import build_dataset
from gym_sysmath.sandbox import SandboxError

skyrl_gym = pytest.importorskip("skyrl_gym", reason="the frameworks extra is not installed")
from gym_sysmath.integrations import skyrl as sysmath_skyrl  # noqa: E402

PROCESS = {"sandbox": "process"}
CONFIG = {"env_kwargs": PROCESS}
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")


def make(row: dict, config: dict = CONFIG):
    """As SkyRL's generator does: the row's env_class, its other fields as ``extras``."""
    extras = {key: value for key, value in row.items() if key not in ("prompt", "env_class")}
    env = skyrl_gym.make(row["env_class"], env_config=config, extras=extras)
    prompt, _ = env.init(row["prompt"])
    return env, prompt


@pytest.fixture(scope="module")
def csapp_rows() -> list[dict]:
    return sysmath_skyrl.skyrl_rows(build_dataset("CsappExact-v0", n=2, max_turns=None, env_kwargs=PROCESS))


def test_every_id_is_registered_with_skyrl_gym():
    names = ["gym_sysmath", *(sysmath_skyrl.env_class(env_id) for env_id in gym_sysmath.env_ids())]
    assert all(name in skyrl_gym.registry for name in names)
    assert sysmath_skyrl.register_envs() == names  # idempotent


def test_rows_carry_a_reference_and_the_env_default_turns(csapp_rows):
    row = csapp_rows[0]
    assert set(row) == {"data_source", "prompt", "env_class", "reward_spec", "extra_info"}
    assert row["env_class"] == "gym_sysmath"  # a name SkyRL's config can hold settings for
    ref = TaskRef.parse(row["reward_spec"]["ground_truth"])
    assert ref.max_turns is None and "answer" not in json.loads(row["reward_spec"]["ground_truth"])
    env, prompt = make(row)
    try:
        assert prompt == row["prompt"]
        assert env.max_turns == CsappExactEnv.default_max_turns > 1
    finally:
        env.close()


def test_end_of_turn_tokens_are_stripped_from_every_action(csapp_rows):
    env, _ = make(csapp_rows[0])
    try:
        env.step("```python\nprint(6 * 7)\n```<|im_end|>")
        answer = env.episode.env.unwrapped.reference_action()
        assert env.step(answer + "\n<\uff5cend\u2581of\u2581sentence\uff5c>")["reward"] == 1.0  # DeepSeek's
        assert env.episode.actions == ["```python\nprint(6 * 7)\n```", answer]
    finally:
        env.close()


def test_settings_are_checked_and_generator_max_turns_caps_the_episode(csapp_rows):
    with pytest.raises(ValueError, match="unknown gym_sysmath env setting"):
        make(csapp_rows[0], config={"turns": 2})
    env, _ = make(csapp_rows[0], config={"max_turns": 2})  # env_config's cap (the older README's) still caps
    try:
        assert env.max_turns == 2
    finally:
        env.close()
    with pytest.raises(ValueError, match=r"generator\.max_turns"):
        make(csapp_rows[0], config={"env_kwargs": {**PROCESS, "max_turns": 2}})
    row = {**csapp_rows[0], "max_turns": 1}  # SkyRL's generator puts generator.max_turns in the extras
    env, _ = make(row)
    try:
        out = env.step("```python\nresult = [0]\n```")  # the last turn: its code runs, then it is graded
        assert out["done"] and out["metadata"]["verdict"] == "wrong_answer" and env.max_turns == 1
    finally:
        env.close()


def test_multi_turn_trajectory_runs_a_tool_turn_then_grades(csapp_rows):
    row = csapp_rows[0]
    env, _ = make(row)
    try:
        out = env.step("Let me compute.\n```python\nprint(6 * 7)\n```")
        assert not out["done"] and out["reward"] == 0.0
        [message] = out["observations"]
        assert message["role"] == "user" and "42" in message["content"]
        out = env.step(env.episode.env.unwrapped.reference_action())
        assert out["done"] and out["reward"] == 1.0 and out["observations"] == []
        assert out["metadata"]["verdict"] == "correct" and env.turns == 2
        assert env.get_metrics() == {"correct": 1.0, "turns": 2.0}
    finally:
        env.close()


def test_wrong_answer_is_zero_and_the_cli_export_is_skyrl_parquet(tmp_path):
    import pandas as pd

    from gym_sysmath.cli import main

    out = tmp_path / "skyrl.parquet"
    assert main(["export", "LinearAlgebra-v0", "-n", "2", "--format", "skyrl", "--out", str(out)]) == 0
    frame = pd.read_parquet(out)
    assert list(frame.columns) == ["data_source", "prompt", "env_class", "reward_spec", "extra_info"]
    row = frame.iloc[0].to_dict()
    row["prompt"] = [dict(message) for message in row["prompt"]]
    env, _ = make(row, config={})
    try:
        out_step = env.step("ANSWER: definitely not this")
        assert out_step["done"] and out_step["reward"] == 0.0 and out_step["metadata"]["verdict"] != "correct"
    finally:
        env.close()


def test_harness_failure_is_retried_then_raised_never_rewarded(csapp_rows, monkeypatch):
    original = CsappExactEnv._grade_final
    calls = []

    def failing_harness(self, reply):
        calls.append(self.turn)
        if len(calls) <= failures:
            raise SandboxError("worker_died", "container killed (simulated)")
        return original(self, reply)

    monkeypatch.setattr(CsappExactEnv, "_grade_final", failing_harness)
    failures = 1
    env, _ = make(csapp_rows[1])
    try:
        assert env.step(env.episode.env.unwrapped.reference_action())["reward"] == 1.0  # replayed, graded
        failures, calls[:] = 99, []
        env.init(csapp_rows[1]["prompt"])
        with pytest.raises(ScoringError, match="worker_died"):
            env.step(env.episode.env.unwrapped.reference_action())
        assert len(calls) == 2
    finally:
        env.close()


@pytest.mark.docker
def test_tool_turns_run_in_the_docker_sandbox(docker_available, csapp_rows):
    env, _ = make(csapp_rows[0], config={})  # the default backend: a real container per trajectory
    try:
        out = env.step("```python\nx = 6 * 7\nprint(x)\n```")
        assert "42" in out["observations"][0]["content"]
        out = env.step("```python\nprint(x + 1)\n```")  # the session persists across turns
        assert "43" in out["observations"][0]["content"]
        assert env.step(env.episode.env.unwrapped.reference_action())["reward"] == 1.0
    finally:
        env.close()


# ------------------------------------------------------------------ SkyRL's trainer (the skyrl wheel)
#
# SkyRL's own config loader, dataset class and generator, with a scripted inference engine in
# vLLM's place (vLLM does not install on CPU) and the real SmolLM2 tokenizer and chat template.

#: What docs/integrations.md tells a user to set (besides the model and data): the prompt length every
#: family's prompts need under SmolLM2's template (CompGeom's longest: 2,888 tokens).
DOCUMENTED = ["trainer.max_prompt_length=3072"]
#: ... and for tool turns, room for them (with generator.max_turns: the turns the export offers).
ROOM_FOR_TURNS = "generator.max_input_length=16384"
SETTINGS = ["environment.skyrl_gym.gym_sysmath.env_kwargs.sandbox=process"]


@pytest.fixture(scope="module")
def trainer():
    if importlib.util.find_spec("skyrl") is None:
        pytest.skip("SkyRL's trainer (the skyrl wheel) is not installed")
    return sysmath_skyrl._trainer()


def load_config(smollm2_tokenizer, *overrides: str):
    """SkyRL's config as its entry point parses the command line, through this module's ``main``."""
    return sysmath_skyrl.load_config([f"trainer.policy.model.path={smollm2_tokenizer.name_or_path}",
                                      "trainer.logger=console",  # SkyRL's default, wandb, needs WANDB_API_KEY
                                      "trainer.override_entrypoint=gym_sysmath.integrations.skyrl", *overrides])


class ScriptedEngine:
    """vLLM's place in SkyRL's generator: trajectory ``i`` (session ``i_0``) gets ``replies[i]``
    in order, as token ids ending in EOS and the text vLLM decodes without it."""

    def __init__(self, tokenizer, replies: list[list[str]]):
        self.tokenizer, self.replies = tokenizer, [list(texts) for texts in replies]
        self.calls: list[int] = []

    def _reply(self, index: int) -> tuple[str, list[int]]:
        self.calls.append(index)
        text = self.replies[index].pop(0)
        return text, self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]

    async def generate(self, input_batch, model=None):
        sessions = input_batch.get("session_ids") or range(len(input_batch["prompt_token_ids"]))  # batched: none
        texts, ids = zip(*(self._reply(int(str(session).split("_")[0])) for session in sessions), strict=True)
        return {"responses": list(texts), "response_ids": list(ids), "stop_reasons": ["stop"] * len(texts),
                "response_logprobs": [[0.0] * len(one) for one in ids]}

    async def finish_session(self, session_id):
        pass


def engine(tokenizer, replies):
    """A ``ScriptedEngine`` that is an ``InferenceEngineInterface`` (the rest of it is not used)."""
    from skyrl.backends.skyrl_train.inference_servers.base import InferenceEngineInterface

    def not_used(*args, **kwargs):
        raise NotImplementedError("not used by SkyRL's generator")

    unused = {name: not_used for name in InferenceEngineInterface.__abstractmethods__
              if name not in ("generate", "finish_session")}
    cls = type("ScriptedInferenceEngine", (ScriptedEngine, InferenceEngineInterface), unused)
    return cls(tokenizer, replies)


def generate(generator, rows: list[dict]):
    """SkyRL's ``generate`` on dataset rows, as its trainer hands them (``PromptDataset`` items)."""
    from skyrl.train.generators.base import TrajectoryID

    batch = {"prompts": [row["prompt"] for row in rows], "env_classes": [row["env_class"] for row in rows],
             "env_extras": [{k: v for k, v in row.items() if k not in ("prompt", "env_class")} for row in rows],
             "trajectory_ids": [TrajectoryID(instance_id=str(i), repetition_id=0) for i in range(len(rows))]}
    return asyncio.run(generator.generate(batch, disable_tqdm=True))


def sysmath_generator(trainer, cfg, tokenizer, replies):
    """The generator this module's entry point builds (``SysmathPPOExp.get_generator``; the rest of
    the experiment needs GPUs and is not built)."""
    exp = object.__new__(trainer["SysmathPPOExp"])
    return exp.get_generator(cfg, tokenizer, engine(tokenizer, replies))


def answer_of(row: dict) -> object:
    """The key of a row's task, read host-side (what a correct model would compute)."""
    env = gym.make(TaskRef.parse(row["reward_spec"]["ground_truth"]).env_id, **PROCESS)
    try:
        TaskRef.parse(row["reward_spec"]["ground_truth"]).reset(env)
        return env.unwrapped.task.answer
    finally:
        env.close()


def episode_reward(row: dict, replies: list[str], max_turns: int) -> float:
    """The env's own grading of ``replies`` (``Episode``), closed by ``CLOSING_ACTION`` if still open."""
    episode = Episode(TaskRef.parse(row["reward_spec"]["ground_truth"]), env_kwargs=PROCESS, max_turns=max_turns)
    episode.reset()
    for reply in replies:
        _, reward, *_ = episode.step(reply)
    if not episode.done:
        _, reward, *_ = episode.step(CLOSING_ACTION)
    return reward


def total(reward) -> float:
    """A trajectory's return: SkyRL gives token-level rewards (one per step, at its last token)."""
    return float(sum(reward)) if isinstance(reward, list) else float(reward)


def test_skyrl_config_overrides_reach_the_env_through_its_generator(trainer, smollm2_tokenizer, csapp_rows,
                                                                      monkeypatch):
    from skyrl.train.config import SkyRLTrainConfig

    with pytest.raises(ValueError, match="Invalid fields"):  # SkyRL's own config has no key for it
        SkyRLTrainConfig.from_cli_overrides(["environment.skyrl_gym.gym_sysmath.retries=0"])
    cfg = load_config(smollm2_tokenizer, *DOCUMENTED, *SETTINGS, "environment.skyrl_gym.gym_sysmath.retries=0")
    settings = cfg.environment.skyrl_gym.gym_sysmath
    assert (settings.env_kwargs, settings.retries) == (PROCESS, 0) and cfg.environment.env_class == "gym_sysmath"
    assert getattr(cfg.environment.skyrl_gym, "gym_sysmath/CsappExact-v0") is settings  # rows exported before

    def failing_harness(self, reply):
        raise SandboxError("worker_died", "container killed (simulated)")

    monkeypatch.setattr(CsappExactEnv, "_grade_final", failing_harness)
    old_row = {**csapp_rows[0], "env_class": sysmath_skyrl.env_class("CsappExact-v0")}
    for row in (csapp_rows[0], old_row):  # retries=0 reached the env: the first harness failure is raised
        generator = sysmath_generator(trainer, cfg, smollm2_tokenizer, [["ANSWER: [1]"]])
        with pytest.raises(ScoringError, match="worker_died"):
            generate(generator, [row])
    with pytest.raises(ValueError, match="not a setting"):
        load_config(smollm2_tokenizer, *DOCUMENTED, "environment.skyrl_gym.gym_sysmath.env_kwargs.max_turns=3")
    with pytest.raises(ValueError, match=r"generator\.max_turns=1"):
        load_config(smollm2_tokenizer, *DOCUMENTED, *SETTINGS, "generator.batched=true", "generator.max_turns=5")


def test_batched_generation_grades_a_code_reply_as_the_whole_episode(trainer, smollm2_tokenizer, csapp_rows):
    cfg = load_config(smollm2_tokenizer, *DOCUMENTED, *SETTINGS, "generator.batched=true")
    assert cfg.generator.max_turns == 1  # SkyRL's default: one step per trajectory
    replies = [f"Computing it.\n```python\nresult = {answer_of(row)!r}\n```" for row in csapp_rows]
    replies[1] = "```python\nresult = [123456789]\n```"
    out = generate(sysmath_generator(trainer, cfg, smollm2_tokenizer, [[reply] for reply in replies]), csapp_rows)
    expected = [grade_completion(TaskRef.parse(row["reward_spec"]["ground_truth"]), reply, env_kwargs=PROCESS,
                                 max_turns=1)[0] for row, reply in zip(csapp_rows, replies, strict=True)]
    assert out["rewards"] == expected == [1.0, 0.0]  # the run: 0.0 for the correct one
    prompt = smollm2_tokenizer.decode(out["prompt_token_ids"][0])  # what the model was asked: one reply
    assert "This is your only reply" in prompt and "You have 5 replies" in csapp_rows[0]["prompt"][-1]["content"]


def test_trajectory_cut_at_max_input_length_is_graded_not_zero(trainer, smollm2_tokenizer, csapp_rows):
    from skyrl.train.generators.skyrl_gym_generator import SkyRLGymGenerator

    cfg = load_config(smollm2_tokenizer, *DOCUMENTED, *SETTINGS, "generator.max_turns=5")
    assert cfg.generator.max_input_length == cfg.trainer.max_prompt_length  # SkyRL's default
    row = csapp_rows[0]
    long_turn = f"```python\nresult = {answer_of(row)!r}\nprint('word ' * 6000)\n```"
    out = generate(sysmath_generator(trainer, cfg, smollm2_tokenizer, [[long_turn, "ANSWER: [0]"]]), [row])
    assert out["stop_reasons"] == ["length"]  # SkyRL stopped after the first turn's output
    assert total(out["rewards"][0]) == episode_reward(row, [long_turn], max_turns=5) == 1.0
    stock = SkyRLGymGenerator(cfg.generator, cfg.environment.skyrl_gym, engine(smollm2_tokenizer, [[long_turn]]),
                              smollm2_tokenizer)
    with pytest.raises(sysmath_skyrl.TrajectoryCutShort, match=r"generator\.max_input_length"):
        generate(stock, [row])  # SkyRL's own generator would keep 0.0: refused


def test_generator_max_turns_ends_the_episode_through_skyrls_agent_loop(trainer, smollm2_tokenizer, csapp_rows):
    cfg = load_config(smollm2_tokenizer, *DOCUMENTED, *SETTINGS, ROOM_FOR_TURNS, "generator.max_turns=2")
    csapp = csapp_rows[0]
    linalg = sysmath_skyrl.skyrl_rows(build_dataset("LinearAlgebra-v0", n=1, env_kwargs=PROCESS))[0]
    env = gym.make("LinearAlgebra-v0", **PROCESS)
    TaskRef.parse(linalg["reward_spec"]["ground_truth"]).reset(env)
    linalg_reply = env.unwrapped.reference_action() + "<\uff5cend\u2581of\u2581sentence\uff5c>"  # DeepSeek's
    env.close()
    csapp_replies = ["```python\nx = 6 * 7\nprint(x)\n```", f"```python\nresult = {answer_of(csapp)!r}\n```",
                     "ANSWER: [0]"]
    scripted = [csapp_replies, [linalg_reply]]
    generator = sysmath_generator(trainer, cfg, smollm2_tokenizer, scripted)
    out = generate(generator, [csapp, linalg])
    assert generator.inference_engine_client.calls.count(0) == 2  # the third reply is never asked for
    assert [total(reward) for reward in out["rewards"]] == [episode_reward(csapp, csapp_replies[:2], max_turns=2),
                                                              1.0] == [1.0, 1.0]
    assert out["stop_reasons"] == ["stop", "stop"]


def test_default_prompt_length_drops_rows_and_the_entrypoint_refuses(trainer, smollm2_tokenizer, tmp_path):
    import pandas as pd
    from skyrl.train.config import SkyRLTrainConfig
    from skyrl.train.dataset import PromptDataset

    from gym_sysmath.cli import main

    paths = []
    for env_id in ("CsappExact-v0", "LinearAlgebra-v0", "CompGeom-v0"):
        paths.append(str(tmp_path / f"{env_id}.parquet"))
        assert main(["export", env_id, "--format", "skyrl", "--out", paths[-1]]) == 0
    exported = [len(pd.read_parquet(path)) for path in paths]
    default = SkyRLTrainConfig().trainer.max_prompt_length
    csapp = PromptDataset(paths[:1], smollm2_tokenizer, default, num_workers=1)  # SkyRL's loader, its default
    assert default == 512 and 0 < len(csapp) < exported[0]  # rows dropped with a log line
    exp = object.__new__(trainer["SysmathPPOExp"])  # the entry point's experiment (the rest needs GPUs)
    exp.cfg, exp.tokenizer = load_config(smollm2_tokenizer, f"data.train_data=[{paths[0]}]"), smollm2_tokenizer
    dropped = f"{exported[0] - len(csapp)} of {exported[0]} prompts"
    with pytest.raises(PromptTooLong, match=rf"{dropped} are longer than trainer\.max_prompt_length=512"):
        exp.get_train_dataset()  # refused before SkyRL's loader would drop them
    cfg = load_config(smollm2_tokenizer, *DOCUMENTED)
    every = PromptDataset(paths, smollm2_tokenizer, cfg.trainer.max_prompt_length, num_workers=1)
    assert len(every) == sum(exported)  # nothing dropped at the documented length
    assert sysmath_skyrl.require_dataset_fits(paths, smollm2_tokenizer, cfg.trainer.max_prompt_length) <= 3072
    with pytest.warns(UserWarning, match=r"offer 5 replies but generator\.max_turns=1"):
        sysmath_skyrl._warn_if_turns_cut(paths[:1], cfg.generator.max_turns)


def test_readme_command_refuses_prompts_over_skyrls_default_length(trainer, smollm2_tokenizer, tmp_path):
    from gym_sysmath.cli import main

    data = tmp_path / "train.parquet"
    assert main(["export", "CsappExact-v0", "--format", "skyrl", "--out", str(data)]) == 0
    command = [sys.executable, "-m", "gym_sysmath.integrations.skyrl", "trainer.logger=console",
               f"trainer.policy.model.path={smollm2_tokenizer.name_or_path}", f"data.train_data=[{data}]",
               f"trainer.log_path={tmp_path / 'logs'}"]  # SkyRL's lengths: Ray starts, the experiment refuses
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode != 0
    assert re.search(r"PromptTooLong: \d+ of \d+ prompts are longer than trainer\.max_prompt_length=512", run.stderr)

"""The verl commands of docs/integrations.md, run as written, through verl's own entry point and defaults.

The ``gym-sysmath export ... --format verl`` lines run as real subprocesses (only a train
``-n`` above 8 is cut to 8, to fit CI's time: the rows come from the same generator), and the
``python -m verl.trainer.main_ppo`` command is read from that page's text itself and run by bash
with hydra's ``--cfg job`` (verl's ``main`` composes its ``ppo_trainer`` defaults with the
page's overrides, prints the config and stops: no GPU here to train on), plus the settings
the page leaves to the user (the model: SmolLM2; ``rollout.name``). From that config, verl's
own code: ``create_rl_dataset`` (the ``data.custom_cls`` the page names), the
``AgentLoopWorker`` that renders, caps and pads prompts (a scripted model in place of vLLM), and
the ``RewardLoopWorker`` that loads ``compute_score`` through ``reward.custom_reward_function``
and scores each rollout (called in process instead of through a Ray actor handle).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

import gym_sysmath  # noqa: F401
from gym_sysmath.integrations import verl as sysmath_verl
from gym_sysmath.integrations.episodes import PromptTooLong, TaskRef

pytest.importorskip("verl.experimental.agent_loop", reason="the frameworks extra is not installed")
pytest.importorskip("hydra", reason="the frameworks extra is not installed")
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")

README = Path(__file__).resolve().parents[1] / "docs" / "integrations.md"  # the verl section moved there
#: The train draws an export line of the page makes here (it asks for 20,000).
TRAIN_ROWS = 8
#: The page's "plus your model and rollout settings" (besides the model, SmolLM2): what verl's
#: ``main`` requires before it starts Ray.
USER_SETTINGS = ("actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
                 "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
                 "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1")
#: How grading runs in this test (the page's command grades in Docker, the default).
GRADE_IN_PROCESS = {"sandbox": "process"}


def readme_verl_commands(text: str) -> list[str]:
    """The shell commands of the verl section of docs/integrations.md, continuation lines joined."""
    section = text[text.index("**verl**"):text.index("**OpenRLHF**")]
    block = re.search(r"\n\n((?: {4}.*\n|\n)+)", section)
    assert block, "the README's verl section has no command block"
    joined = block.group(1).replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip()]


def shell(command: str, cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def readme(tmp_path_factory, smollm2_tokenizer):
    """The page's commands run in a fresh directory: its exports, and the config verl's
    ``main_ppo`` composes from them."""
    from omegaconf import OmegaConf

    from tests.real_model import smollm2

    commands = readme_verl_commands(README.read_text(encoding="utf-8"))
    exports = [line for line in commands if line.startswith("gym-sysmath export") and "--format verl" in line]
    [main_ppo] = [line for line in commands if line.startswith("python -m verl.trainer.main_ppo")]
    assert len(exports) == 2, commands
    cwd = tmp_path_factory.mktemp("verl_readme")
    (cwd / "data").mkdir()
    runs = [shell(re.sub(r" -n (\d+)", lambda m: f" -n {min(int(m.group(1)), TRAIN_ROWS)}", line), cwd)
            for line in exports]
    user_settings = " ".join([f"actor_rollout_ref.model.path={smollm2.FP32_DIR}", *USER_SETTINGS])
    command = re.sub(r"\s+#.*$", "", main_ppo)  # the page's trailing comment
    runs.append(shell(f"{command} {user_settings} --cfg job", cwd))
    outputs = [run.communicate(timeout=300) for run in runs]
    for run, (_, err) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, f"{run.args[-1]}\n{err[-3000:]}"
    config = OmegaConf.create(outputs[-1][0])
    return SimpleNamespace(cwd=cwd, config=config, exports=exports, tokenizer=smollm2_tokenizer)


@pytest.fixture(autouse=True)
def in_readme_dir(request, monkeypatch):
    """The page's data paths are relative to where it is run."""
    if "readme" in request.fixturenames:
        monkeypatch.chdir(request.getfixturevalue("readme").cwd)


def prompt_builder(config, tokenizer):
    """verl's agent-loop prompt renderer for this model (the Continuous Token builder)."""
    from transformers import AutoConfig
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    model_type = AutoConfig.from_pretrained(config.actor_rollout_ref.model.path).model_type
    return create_continuous_token_builder(tokenizer, hf_model_type=model_type,
                                           chat_template_kwargs=dict(config.data.apply_chat_template_kwargs))


def datasets(config, tokenizer):
    from verl.trainer.ppo.utils import create_rl_dataset

    return {name: create_rl_dataset(config.data[f"{name}_files"], config.data, tokenizer, None,
                                    is_train=name == "train") for name in ("train", "val")}


@pytest.mark.filterwarnings("ignore:Disabled critic")  # GRPO has none
def test_readme_main_ppo_starts_and_sets_lengths_that_fit(readme):
    """verl's own ``main_ppo`` composes the page's command (hydra and the rest of what it
    imports are installed) into a config its ``main`` validates, with a prompt limit every
    family's prompts fit and the dataset class that refuses one that would not; its rollout
    caps prompts at the same length."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    config = readme.config
    validate_config(config=config.copy(), use_reference_policy=need_reference_policy(config),
                    use_critic=need_critic(config))
    assert config.data.max_prompt_length == sysmath_verl.VERL_MAX_PROMPT_LENGTH
    assert OmegaConf.to_container(config, resolve=True)["actor_rollout_ref"]["rollout"]["prompt_length"] \
        == config.data.max_prompt_length
    assert config.data.custom_cls.name == "SysmathRLHFDataset"
    assert config.reward.custom_reward_function.name == "compute_score"
    builder = prompt_builder(config, readme.tokenizer)
    from gym_sysmath.integrations.trl import build_dataset

    longest = {env_id: max(len(builder.build_initial_tokens(row["prompt"])) for row in sysmath_verl.verl_rows(
        build_dataset(env_id, env_kwargs=GRADE_IN_PROCESS)))
        for env_id in ("CsappExact-v0", "LinearAlgebra-v0", "CompGeom-v0")}
    assert max(longest.values()) <= config.data.max_prompt_length, longest


def test_readme_datasets_keep_every_row_and_every_prompt_whole(readme):
    """verl's ``create_rl_dataset`` on the page's exports: no row dropped, and every prompt,
    rendered as verl's agent loop renders it, passes its length cap uncut."""
    import pandas as pd
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase

    config, tokenizer = readme.config, readme.tokenizer
    built = datasets(config, tokenizer)
    assert type(built["val"]).__name__ == "SysmathRLHFDataset"
    assert len(built["train"]) == len(pd.read_parquet(config.data.train_files)) == TRAIN_ROWS
    eval_env = gym.make("CsappExact-v0", sandbox="process")
    assert len(built["val"]) == len(pd.read_parquet(config.data.val_files)) == len(eval_env.unwrapped.task_ids)
    eval_env.close()
    builder = prompt_builder(config, tokenizer)
    loop = SimpleNamespace(rollout_config=SimpleNamespace(prompt_length=config.data.max_prompt_length))
    for dataset in built.values():
        for index in range(len(dataset)):
            messages = dataset[index]["raw_prompt"]
            ids = builder.build_initial_tokens(messages)
            assert AgentLoopBase._cap_text_prompt_length(loop, ids) == ids
            text = tokenizer.decode(ids)
            assert text.startswith("<|im_start|>system") and messages[-1]["content"] in text


def test_readme_rollout_and_reward_loop_grade_as_the_env_does(readme):
    """One verl rollout batch end to end: the dataset's items through ``AgentLoopWorker`` (a
    scripted model replying to the exact prompt ids it expects: a cut prompt finds no reply)
    and ``RewardLoopWorker``; the rewards are the env's own grading, 1.0 for a reference reply
    and 0.0 for a wrong one, and no sample is dropped."""
    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.utils.dataset.rl_dataset import collate_fn
    from verl.workers.rollout.replica import TokenOutput

    config, tokenizer = readme.config.copy(), readme.tokenizer
    OmegaConf.update(config, "reward.custom_reward_function.reward_kwargs.env_kwargs", GRADE_IN_PROCESS,
                     force_add=True)
    built = datasets(config, tokenizer)
    builder = prompt_builder(config, tokenizer)
    val = built["val"]
    lengths = [len(builder.build_initial_tokens(val[index]["raw_prompt"])) for index in range(len(val))]
    items = [val[int(np.argmax(lengths))], val[int(np.argmin(lengths))], val[0], built["train"][0]]
    replies, expected = {}, []
    for position, item in enumerate(items):
        ref = TaskRef.parse(item["reward_model"]["ground_truth"])
        env = gym.make(ref.env_id, split=ref.split, max_turns=1, **GRADE_IN_PROCESS)
        try:
            ref.reset(env)
            reply = "ANSWER: [123456789]" if position == 2 else env.unwrapped.reference_action()
            ref.reset(env)
            expected.append(env.step(reply)[1])
        finally:
            env.close()
        replies[tuple(builder.build_initial_tokens(item["raw_prompt"]))] = reply

    class ScriptedModel:
        async def generate(self, *, prompt_ids, **_):
            reply = replies.get(tuple(prompt_ids))
            assert reply is not None, f"verl sent a prompt of {len(prompt_ids)} tokens that is no whole prompt"
            return TokenOutput(token_ids=[*tokenizer.encode(reply, add_special_tokens=False), tokenizer.eos_token_id])

    rewards = RewardLoopWorker(config)

    class InProcessHandle:  # what a Ray actor handle of RewardLoopWorker offers the agent loop
        compute_score = SimpleNamespace(remote=rewards.compute_score)

    worker = AgentLoopWorker(config, ScriptedModel(), reward_loop_worker_handles=[InProcessHandle()])
    batch = DataProto.from_single_dict(collate_fn(items))
    out = rewards.loop.run_until_complete(worker.generate_sequences(batch))
    assert len(out) == len(items)
    assert expected == [1.0, 1.0, 0.0, 1.0]
    assert out.batch["rm_scores"].sum(dim=-1).tolist() == expected
    assert list(out.non_tensor_batch["verdict"]) == ["correct", "correct", "wrong_answer", "correct"]
    width = out.batch["prompts"].shape[1]
    for row, item in enumerate(items):
        prompt = out.batch["prompts"][row][out.batch["attention_mask"][row, :width].bool()].tolist()
        assert prompt == builder.build_initial_tokens(item["raw_prompt"])


def test_verls_default_prompt_limit_would_cut_the_task_so_the_dataset_refuses(readme):
    """At verl's default ``data.max_prompt_length`` (512) verl's agent loop keeps a long
    prompt's last 512 tokens (system turn and task statement gone, only a log warning); the
    page's dataset class refuses the whole dataset first, naming the setting, also with
    ``data.filter_overlong_prompts=True`` (which would drop the rows instead)."""
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop import agent_loop
    from verl.trainer.ppo.utils import create_rl_dataset

    data_defaults = OmegaConf.load(Path(agent_loop.__file__).parents[2] / "trainer/config/data/legacy_data.yaml")
    default = data_defaults.max_prompt_length
    assert default == sysmath_verl.VERL_DEFAULT_MAX_PROMPT_LENGTH
    tokenizer = readme.tokenizer
    builder = prompt_builder(readme.config, tokenizer)
    import pandas as pd

    prompts = [list(prompt) for prompt in pd.read_parquet(readme.config.data.val_files)["prompt"]]
    lengths = [len(builder.build_initial_tokens(prompt)) for prompt in prompts]
    over = sum(length > default for length in lengths)
    assert over > 0
    longest = prompts[int(np.argmax(lengths))]
    loop = SimpleNamespace(rollout_config=SimpleNamespace(prompt_length=default))
    cut = tokenizer.decode(agent_loop.AgentLoopBase._cap_text_prompt_length(loop,
                                                                             builder.build_initial_tokens(longest)))
    assert "<|im_start|>system" not in cut and longest[-1]["content"][:200] not in cut
    for filter_overlong in (False, True):
        data = readme.config.data.copy()
        data.max_prompt_length, data.filter_overlong_prompts = default, filter_overlong
        with pytest.raises(PromptTooLong, match=rf"{over} of {len(prompts)} prompts are longer than "
                                                rf"data.max_prompt_length={default} tokens \(the longest is "
                                                rf"{max(lengths)}\)"):
            create_rl_dataset(data.val_files, data, tokenizer, None, is_train=False)

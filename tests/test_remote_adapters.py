"""Every trainer adapter against a running ``gym-sysmath serve`` (the shared ``gym_server``: every
id, Docker, two warm containers), switched there by its own ``remote`` setting and exercised
through its framework's own entry point, as the in-process tests drive it: TRL's ``GRPOTrainer``
(the reward, and ``environment_factory`` with one ``run_code`` turn over the wire), OpenRLHF's
``SingleTurnAgentExecutor`` and ``MultiTurnAgentExecutor``, verifiers' env ``run``, SkyRL's config
loader and generator, verl's reward manager.

For each: the rewards equal the in-process path's on the same rows and replies; a harness
failure on the server (its containers killed mid-step) reaches the adapter as that adapter's
scoring error (TRL ``None``, OpenRLHF NaN, verifiers ``SandboxError``, SkyRL and verl
``ScoringError``), never a 0; a row exported from another task set than the SERVER's is refused,
and the task set of the trainer's own install is not the one checked."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import time
from collections.abc import Iterator

import gymnasium as gym
import pytest

import gym_sysmath  # noqa: F401
from gym_sysmath.integrations.episodes import (
    ScoringError,
    TaskRef,
    close_served_envs,
    make_async_env,
    make_env,
    served_task_sets,
)
from gym_sysmath.integrations.trl import SysmathReward, SysmathToolEnv, build_dataset, close_tool_envs
from gym_sysmath.serving.client import RemoteSysmathEnv
from tests.conftest import killing_our_containers

PROCESS = {"sandbox": "process"}
#: a task set no install has: a row "exported elsewhere"
FOREIGN = "linalg@999"
#: a reply whose code runs in a container for 3 s: long enough to kill the container under it
SLEEPY = "```python\nimport time\ntime.sleep(3)\nresult = [0]\n```"
REFUSED = r"task set linalg@999, the gym-sysmath server at http://127\.0\.0\.1:\d+ serves linalg@\d+"
pytestmark = [pytest.mark.docker, pytest.mark.filterwarnings("ignore:sandbox='process'")]


@pytest.fixture(scope="module")
def server(gym_server):
    """The shared server; the sessions the episodes' cached envs hold are closed after this module
    (a draining server waits for open sessions)."""
    yield gym_server
    close_served_envs()


@pytest.fixture(scope="module")
def linalg() -> list[dict]:
    """Two answer-only rows (nothing runs in a container) and, for each, a right and a wrong reply."""
    return build_dataset("LinearAlgebra-v0", n=2, env_kwargs=PROCESS)


@pytest.fixture(scope="module")
def csapp() -> list[dict]:
    return build_dataset("CsappExact-v0", n=1, env_kwargs=PROCESS)


def reference(row: dict, max_turns: int | None = 1, **kwargs) -> str:
    env = gym.make(row["env_id"], split=row["split"], max_turns=max_turns, **PROCESS, **kwargs)
    try:
        TaskRef.parse(row).reset(env)
        return env.unwrapped.reference_action()
    finally:
        env.close()


@pytest.fixture(scope="module")
def replies(linalg) -> list[str]:
    """Row 0 answered right, row 1 wrong."""
    return [reference(linalg[0]), "ANSWER: 123456789"]


def columns(rows: list[dict]) -> dict[str, list]:
    return {key: [row[key] for row in rows] for key in rows[0] if key != "prompt"}


def foreign(row: dict) -> dict:
    return {**row, "task_set": FOREIGN}


@contextlib.contextmanager
def killing_server_containers(server, delay_s: float = 0.5) -> Iterator[None]:
    """Keep killing the server's sandbox containers (a real harness failure on the server, its
    retry included) until the block exits; then wait until its pool has a live reserve again."""
    try:
        with killing_our_containers(delay_s, owner_pid=server.process.pid):
            yield
    finally:
        deadline = time.monotonic() + 60
        time.sleep(1.0)  # the pool notices its dead reserve
        while time.monotonic() < deadline:
            pool = server.health()["pool"]
            if pool["reserve"] >= 1 and pool["starting"] == 0:
                break
            time.sleep(0.25)


def test_the_task_sets_checked_are_the_servers(server):
    from gym_sysmath.families import task_set

    served = served_task_sets(server.url, refresh=True)
    assert served == server.health()["task_sets"] and served["linalg"] == task_set("linalg")


def test_one_switch_makes_the_served_env_blocking_or_async_with_the_local_results(server, linalg, replies):
    from gym_sysmath.serving.client import AsyncRemoteSysmathEnv

    ref = TaskRef.parse(linalg[0])
    local = make_env("LinearAlgebra-v0", max_turns=1, **PROCESS)
    served = make_env("LinearAlgebra-v0", remote=server.url, max_turns=1)
    try:
        assert isinstance(served, RemoteSysmathEnv)
        assert ref.reset(served)[0] == ref.reset(local)[0]
        assert served.step(replies[0])[1:4] == local.step(replies[0])[1:4] == (1.0, True, False)
    finally:
        served.close()
        local.close()

    async def episode():
        env = await make_async_env("LinearAlgebra-v0", remote=server.url, max_turns=1)
        async with env:
            assert isinstance(env, AsyncRemoteSysmathEnv)
            await env.reset(seed=ref.seed, options={"task_id": ref.task_id})
            return (await env.step(replies[1]))[1:4]

    assert asyncio.run(episode()) == (0.0, True, False)
    with pytest.raises(ValueError, match="pass remote=URL"):
        make_env("LinearAlgebra-v0", token="secret")
    with pytest.raises(ValueError, match="chosen by the server"):
        make_env("LinearAlgebra-v0", remote=server.url, **PROCESS)


def test_a_server_with_a_token_is_reached_with_token_or_its_environment_variable(linalg, replies, monkeypatch):
    from gym_sysmath.integrations.episodes import grade_completion
    from gym_sysmath.serving.client import RemoteUnavailable
    from tests.served import running_server

    with running_server(token="s3cret") as server:  # no warm containers: answer-only rows start none
        with SysmathReward(remote=server.url) as reward, pytest.raises(RemoteUnavailable, match="refused the token"):
            reward(completions=replies, **columns(linalg))
        with SysmathReward(remote=server.url, token="s3cret") as reward:
            assert reward(completions=replies, **columns(linalg)) == [1.0, 0.0]
        monkeypatch.setenv("GYM_SYSMATH_SERVE_TOKEN", "s3cret")  # what OpenRLHF's workers and SkyRL's read
        assert grade_completion(TaskRef.parse(linalg[0]), replies[0], remote=server.url)[0] == 1.0
        close_served_envs()


# ------------------------------------------------------------------------------------------- TRL


def _scripted_trainer(tmp_path, rows: list[dict], plan: dict[int, list[str]], reward, **trainer_kwargs):
    """TRL's ``GRPOTrainer`` over a scripted model (``tests/test_trl_reward.py``'s): row ``i``'s
    rollouts write ``plan[i]`` in order, one reply per model turn."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from tests.test_trl_reward import _chat_char_tokenizer, _grpo_config, _scripted_model

    marks = [row["prompt"][-1]["content"] for row in rows]
    scripts = [text for texts in plan.values() for text in texts]

    def script_for(text: str) -> str:
        [index] = [i for i, mark in enumerate(marks) if mark in text]
        return plan[index][min(text.count("<tool_response>"), len(plan[index]) - 1)]

    tokenizer = _chat_char_tokenizer(marks + scripts, words=scripts)
    config = _grpo_config(tmp_path, max_completion_length=512, gradient_accumulation_steps=len(rows))
    return GRPOTrainer(model=_scripted_model(tokenizer, script_for), processing_class=tokenizer, reward_funcs=[reward],
                       args=config, train_dataset=Dataset.from_list(rows), **trainer_kwargs)


class Recording(SysmathReward):
    """``SysmathReward`` keeping what TRL handed it and what it returned."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches: list[tuple[list, dict, list]] = []
        self.tool_env_kinds: list[type] = []  # the env each rollout's episode ran in, when graded

    def __call__(self, *args, **kwargs):
        values = super().__call__(*args, **kwargs)
        self.batches.append((list(kwargs["completions"]), kwargs, list(values)))
        self.tool_env_kinds += [type(environment._env) for environment in kwargs.get("environments") or ()]
        return values


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_trl_grpo_trainer_rewards_come_from_the_server_and_equal_in_process(server, tmp_path):
    pytest.importorskip("trl")
    rows = build_dataset("LinearAlgebra-v0", n=2, conversational=True, env_kwargs=PROCESS)
    plan = {0: [reference(rows[0])], 1: ["ANSWER: 123456789"]}
    with Recording(remote=server.url) as reward:
        trainer = _scripted_trainer(tmp_path, rows, plan, reward)
        trainer.train()
        assert reward._envs and all(isinstance(env, RemoteSysmathEnv) for env in reward._envs)  # nothing local
    [(completions, kwargs, values)] = reward.batches
    assert sorted(values) == [0.0, 0.0, 1.0, 1.0]  # 2 rows x 2 generations
    grading = {key: value for key, value in kwargs.items() if key in rows[0]}
    with SysmathReward(env_kwargs=PROCESS) as local:
        assert local(completions=completions, **grading) == values
    assert trainer.state.log_history[0]["sysmath/scoring_errors"] == 0


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_trl_environment_factory_runs_its_tool_turn_on_the_server(server, tmp_path):
    """TRL's own tool loop with ``SysmathToolEnv(remote=...)``: the model's ``run_code`` call runs
    in the rollout's session on the server, its output reaches the model, and the final reply is
    graded in that same served episode as a local tool env grades it."""
    pytest.importorskip("trl")
    from tests.test_trl_reward import _replay, _tool_call

    rows = [row for row in build_dataset("LinearAlgebra-v0", env_kwargs={"code_via": "tool"}, max_turns=3,
                                         conversational=True) if row["task_id"] == "eval/dot_product/easy/0"]
    code, final = "print(6 * 7)", reference(rows[0], max_turns=3, code_via="tool") + "<|eot_id|>"
    factory = functools.partial(SysmathToolEnv, remote=server.url, max_turns=3)
    with Recording(remote=server.url) as reward:
        trainer = _scripted_trainer(tmp_path, rows, {0: [_tool_call(code), final]}, reward,
                                    environment_factory=factory)
        try:
            trainer.train()
        finally:
            close_tool_envs()
    [(completions, kwargs, values)] = reward.batches
    output, local_reward, _ = _replay(rows[0], code, final)
    assert "42" in output and values == [local_reward, local_reward] == [1.0, 1.0]
    for completion, environment in zip(completions, kwargs["environments"], strict=True):
        assert [m["content"] for m in completion if m["role"] == "tool"] == [output]  # the server's tool output
        assert environment.tool_calls == 1
    assert reward.tool_env_kinds == [RemoteSysmathEnv, RemoteSysmathEnv]  # each rollout's episode: on the server
    assert not reward._envs  # graded in the tool envs' served episodes, no other env made


def test_trl_reward_harness_failure_on_the_server_is_none_never_zero(server, csapp):
    with SysmathReward(remote=server.url) as reward:
        with killing_server_containers(server):
            values = reward(completions=[SLEEPY], **columns(csapp))
        assert values == [None]
        [error] = reward.last_scoring_errors
        assert error.verdict == "scoring_error" and "worker_died" in error.scoring_error


def test_trl_refuses_a_row_of_another_task_set_than_the_servers(server, linalg, replies, monkeypatch):
    with SysmathReward(remote=server.url) as reward:
        with pytest.raises(ValueError, match=REFUSED + r".*Export the dataset again"):
            reward(completions=replies[:1], **columns([foreign(linalg[0])]))
        monkeypatch.setattr("gym_sysmath.families.task_set", lambda name: f"{name}@998")  # this install's
        assert reward(completions=replies, **columns(linalg)) == [1.0, 0.0]  # the server's set is the one checked


# -------------------------------------------------------------------------------------- OpenRLHF


@pytest.fixture
def openrlhf_remote(server, monkeypatch):
    pytest.importorskip("openrlhf.utils.agent", reason="the frameworks extra is not installed")
    from gym_sysmath.integrations import openrlhf as sysmath_openrlhf

    monkeypatch.setenv("GYM_SYSMATH_ENV_KWARGS", "{}")
    monkeypatch.setenv(sysmath_openrlhf.REMOTE_ENV, server.url)
    return sysmath_openrlhf


def openrlhf_rollouts(sysmath_openrlhf, rows: list[dict], replies: list[str], *, agent: bool) -> list[dict]:
    """OpenRLHF's own executors (``tests/test_openrlhf.py``'s harness): the reward file loaded
    from its path, or ``AgentExecutor`` loaded as ``--train.agent_func_path`` loads it."""
    import importlib.util

    from openrlhf.utils.agent import SingleTurnAgentExecutor

    from tests.char_tokenizer import char_tokenizer
    from tests.test_openrlhf import ScriptedEngine, prompt_text, sampling_params

    if agent:
        spec = importlib.util.spec_from_file_location("agent_module", sysmath_openrlhf.__file__)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        executor = module.AgentExecutor()
    else:
        executor = SingleTurnAgentExecutor(remote_rm_url=sysmath_openrlhf.__file__)
    tokenizer = char_tokenizer()
    return [asyncio.run(executor.execute(prompt_text(row), row["label"], sampling_params(), 4096, tokenizer,
                                         ScriptedEngine(tokenizer, [reply])))
            for row, reply in zip(rows, replies, strict=True)]


def rewards_of(results: list[dict]) -> list[float]:
    return [float(result["reward"]) for result in results]


def test_openrlhf_reward_file_and_agent_grade_on_the_server_as_in_process(openrlhf_remote, linalg, replies,
                                                                         monkeypatch):
    rows = openrlhf_remote.openrlhf_rows(linalg)
    served = {agent: openrlhf_rollouts(openrlhf_remote, rows, replies, agent=agent) for agent in (False, True)}
    monkeypatch.delenv(openrlhf_remote.REMOTE_ENV)
    monkeypatch.setenv("GYM_SYSMATH_ENV_KWARGS", json.dumps(PROCESS))
    local = {agent: openrlhf_rollouts(openrlhf_remote, rows, replies, agent=agent) for agent in (False, True)}
    for agent in (False, True):
        assert rewards_of(served[agent]) == rewards_of(local[agent]) == [1.0, 0.0]
        assert all(result["extra_logs"]["sysmath_reward_error"].tolist() == [0.0] for result in served[agent])


def test_openrlhf_harness_failure_on_the_server_is_nan_and_flagged(openrlhf_remote, server, csapp):
    rows = openrlhf_remote.openrlhf_rows(csapp)
    with killing_server_containers(server):
        [result] = openrlhf_rollouts(openrlhf_remote, rows, [SLEEPY], agent=False)
    assert math.isnan(result["reward"].item())
    assert result["extra_logs"]["sysmath_scoring_error"].tolist() == [1.0]


def test_openrlhf_refuses_a_row_of_another_task_set_than_the_servers(openrlhf_remote, linalg, replies, caplog):
    rows = openrlhf_remote.openrlhf_rows([foreign(linalg[0])])
    [result] = openrlhf_rollouts(openrlhf_remote, rows, replies[:1], agent=False)
    assert math.isnan(result["reward"].item()) and result["extra_logs"]["sysmath_reward_error"].tolist() == [1.0]
    assert "Export the dataset again" in caplog.text


# ------------------------------------------------------------------------------------- verifiers


@pytest.fixture
def verifiers_env(server):
    pytest.importorskip("verifiers.v1", reason="the frameworks extra is not installed")
    from gym_sysmath.integrations import verifiers as sysmath_vf
    from tests.test_verifiers import make_env

    def make(**taskset):
        env = make_env(remote=server.url, env_kwargs={}, **taskset)
        assert isinstance(env.taskset.config, sysmath_vf.SysmathTasksetConfig)
        return env

    return make


def vf_play(env, task, replies: list[str]):
    from tests.test_verifiers import play

    return play(env, task, replies)


def test_verifiers_env_plays_its_episodes_on_the_server_as_in_process(verifiers_env, server):
    from tests.test_verifiers import make_env

    served = verifiers_env(env_id="LinearAlgebra-v0", n=2)
    assert served.taskset.config.remote == server.url
    local = make_env(env_id="LinearAlgebra-v0", n=2)
    tasks = list(served.taskset)
    replies = [reference(tasks[0].data.ref), "ANSWER: 123456789"]
    for task, reply in zip(tasks, replies, strict=True):
        assert vf_play(served, task, [reply]).trace.rewards == vf_play(local, task, [reply]).trace.rewards
    assert vf_play(served, tasks[0], [replies[0]]).trace.rewards == {"sysmath": 1.0}


def test_verifiers_harness_failure_on_the_server_is_a_failed_rollout(verifiers_env, server):
    import verifiers.v1 as vf
    from verifiers.v1.errors import EnvError, boundary, stop_condition

    from tests.test_verifiers import ScriptedPlayer

    env = verifiers_env(env_id="CsappExact-v0", n=1, max_turns=1)
    [task] = list(env.taskset)
    player = ScriptedPlayer([SLEEPY])

    async def episode():  # verifiers' own boundary around Env.run
        async with boundary(EnvError, "SysmathVfEnv.run()"):
            await env.run(task, type("Agents", (), {"player": player})())

    with killing_server_containers(server), pytest.raises(vf.SandboxError, match="worker_died") as raised:
        asyncio.run(episode())
    assert stop_condition(raised.value) == "sandbox_error" and player.trace.rewards == {}


def test_verifiers_refuses_a_task_of_another_task_set_than_the_servers(verifiers_env):
    from gym_sysmath.integrations import verifiers as sysmath_vf

    env = verifiers_env(env_id="LinearAlgebra-v0", n=1)
    [task] = list(env.taskset)
    task = sysmath_vf.SysmathTask(task.data.model_copy(update={"ref": {**task.data.ref, "task_set": FOREIGN}}),
                                  env.taskset.config.task)
    with pytest.raises(ValueError, match=REFUSED):
        vf_play(env, task, ["ANSWER: 1"])


# ----------------------------------------------------------------------------------------- SkyRL


@pytest.fixture(scope="module")
def skyrl_trainer():
    import importlib.util

    pytest.importorskip("skyrl_gym", reason="the frameworks extra is not installed")
    if importlib.util.find_spec("skyrl") is None:
        pytest.skip("SkyRL's trainer (the skyrl wheel) is not installed")
    from gym_sysmath.integrations import skyrl as sysmath_skyrl

    return sysmath_skyrl._trainer()


def skyrl_overrides(server) -> list[str]:
    """The SkyRL settings of docs/integrations.md with the server: keys Hydra's override grammar parses (no ``/``)."""
    from tests.test_skyrl import DOCUMENTED

    return [*DOCUMENTED, f"environment.skyrl_gym.gym_sysmath.remote={server.url}"]


def test_skyrl_remote_setting_passes_hydras_grammar_and_skyrls_loader(skyrl_trainer, smollm2_tokenizer, server):
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    from tests.test_skyrl import load_config

    parsed = OverridesParser.create().parse_overrides(skyrl_overrides(server))
    assert {o.key_or_group: o.value() for o in parsed}["environment.skyrl_gym.gym_sysmath.remote"] == server.url
    with pytest.raises(HydraException):  # what the settings of a per-id class name would need
        OverridesParser.create().parse_overrides(["environment.skyrl_gym.gym_sysmath/CsappExact-v0.retries=0"])
    cfg = load_config(smollm2_tokenizer, *skyrl_overrides(server), "environment.skyrl_gym.gym_sysmath.token=abc")
    settings = cfg.environment.skyrl_gym.gym_sysmath
    assert (settings.remote, settings.token) == (server.url, "abc")


def test_skyrl_generator_grades_on_the_server_as_in_process(skyrl_trainer, smollm2_tokenizer, server, linalg,
                                                            replies):
    from gym_sysmath.integrations import skyrl as sysmath_skyrl
    from tests.test_skyrl import episode_reward, generate, load_config, sysmath_generator, total

    rows = sysmath_skyrl.skyrl_rows(linalg, max_turns=1)
    cfg = load_config(smollm2_tokenizer, *skyrl_overrides(server))
    out = generate(sysmath_generator(skyrl_trainer, cfg, smollm2_tokenizer, [[reply] for reply in replies]), rows)
    local = [episode_reward(row, [reply], max_turns=1) for row, reply in zip(rows, replies, strict=True)]
    assert [total(reward) for reward in out["rewards"]] == local == [1.0, 0.0]


def test_skyrl_harness_failure_on_the_server_is_raised_never_zero(skyrl_trainer, smollm2_tokenizer, server, csapp):
    from gym_sysmath.integrations import skyrl as sysmath_skyrl
    from tests.test_skyrl import generate, load_config, sysmath_generator

    rows = sysmath_skyrl.skyrl_rows(csapp, max_turns=1)
    cfg = load_config(smollm2_tokenizer, *skyrl_overrides(server))
    generator = sysmath_generator(skyrl_trainer, cfg, smollm2_tokenizer, [[SLEEPY]])
    with killing_server_containers(server), pytest.raises(ScoringError, match="worker_died"):
        generate(generator, rows)


def test_skyrl_refuses_a_row_of_another_task_set_than_the_servers(skyrl_trainer, smollm2_tokenizer, server, linalg):
    from gym_sysmath.integrations import skyrl as sysmath_skyrl
    from tests.test_skyrl import generate, load_config, sysmath_generator

    rows = sysmath_skyrl.skyrl_rows([foreign(linalg[0])], max_turns=1)
    cfg = load_config(smollm2_tokenizer, *skyrl_overrides(server))
    with pytest.raises(ValueError, match=REFUSED):
        generate(sysmath_generator(skyrl_trainer, cfg, smollm2_tokenizer, [["ANSWER: 1"]]), rows)


# ------------------------------------------------------------------------------------------ verl


@pytest.fixture
def verl_manager():
    pytest.importorskip("verl.workers.reward_manager", reason="the frameworks extra is not installed")
    from verl.workers.reward_manager import get_reward_manager_cls

    from tests.char_tokenizer import char_tokenizer
    from tests.test_verl import data_proto, loaded_compute_score

    def run(rows: list[dict], responses: list[str], **reward_kwargs) -> list[float]:
        tokenizer = char_tokenizer()
        manager = get_reward_manager_cls("naive")(tokenizer, num_examine=0,
                                                  compute_score=loaded_compute_score(**reward_kwargs))
        return manager(data_proto(tokenizer, rows, responses), return_dict=True)["reward_tensor"].sum(dim=1).tolist()

    return run


def test_verl_reward_manager_grades_on_the_server_as_in_process(verl_manager, server, linalg, replies):
    from gym_sysmath.integrations import verl as sysmath_verl

    rows = sysmath_verl.verl_rows(linalg)
    assert verl_manager(rows, replies, remote=server.url) == verl_manager(rows, replies, env_kwargs=PROCESS) == [1.0,
                                                                                                                 0.0]


def test_verl_harness_failure_on_the_server_is_raised_never_zero(verl_manager, server, csapp):
    from gym_sysmath.integrations import verl as sysmath_verl

    with killing_server_containers(server), pytest.raises(ScoringError, match="worker_died"):
        verl_manager(sysmath_verl.verl_rows(csapp), [SLEEPY], remote=server.url)


def test_verl_refuses_a_row_of_another_task_set_than_the_servers(verl_manager, server, linalg):
    from gym_sysmath.integrations import verl as sysmath_verl

    with pytest.raises(ValueError, match=REFUSED):
        verl_manager(sysmath_verl.verl_rows([foreign(linalg[0])]), ["ANSWER: 1"], remote=server.url)

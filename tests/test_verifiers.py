"""verifiers v1: the id ``gym-sysmath`` resolves, through verifiers' own plugin loaders and its
``vf-eval`` config, to this package's taskset and env; tasks carry a reference, never the key;
``run`` plays a multi-turn episode (a real Python tool turn, then the answer) and records the
reward; a harness failure that survives its replay is raised as verifiers' ``SandboxError``,
which verifiers' own error boundary keeps as a failed rollout (``sandbox_error``), not a reward.

The player is a scripted stand-in for a verifiers agent (its ``interaction`` / ``turn`` /
``trace`` surface): a real agent runs its harness's chat program through ``uv`` in a runtime
box, which this test does not provision."""

from __future__ import annotations

import asyncio
import contextlib
import json

import gymnasium as gym
import pytest

from gym_sysmath.envs.csapp import CsappExactEnv
from gym_sysmath.integrations.episodes import TaskRef
from gym_sysmath.sandbox import SandboxError

vf = pytest.importorskip("verifiers.v1", reason="the frameworks extra is not installed")
from verifiers.v1.errors import EnvError, boundary, stop_condition  # noqa: E402
from verifiers.v1.utils.loaders import environment_class, load_environment, taskset_class  # noqa: E402

from gym_sysmath.integrations import verifiers as sysmath_vf  # noqa: E402

PROCESS = {"sandbox": "process"}
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")


class ScriptedPlayer:
    """Replies with ``replies`` in order (``reply(prompt)`` when a reply is callable)."""

    def __init__(self, replies):
        self.replies, self.seen = list(replies), []
        self.trace = type("Trace", (), {})()
        self.trace.rewards, self.trace.info = {}, {}
        self.trace.record_reward = lambda name, value, weight=1.0: self.trace.rewards.__setitem__(name, value)

    @contextlib.asynccontextmanager
    async def interaction(self, task):
        player = self

        class Interaction:
            trace = player.trace

            async def turn(self, message=None):
                player.seen.append(message if message is not None else task.data.prompt)
                reply = player.replies.pop(0) if player.replies else None
                return vf.Segment(messages=[vf.AssistantMessage(content=reply)] if reply else [],
                                  terminated=reply is None)

        yield Interaction()


def make_env(**taskset):
    config = sysmath_vf.SysmathVfEnvConfig(taskset=sysmath_vf.SysmathTasksetConfig(
        id="gym-sysmath", env_kwargs=PROCESS, **taskset))
    return load_environment(config)


def reference_answer(task) -> str:
    ref = TaskRef.parse(task.data.ref)
    env = gym.make(ref.env_id, split=ref.split, max_turns=ref.max_turns, **PROCESS)
    try:
        ref.reset(env)
        return env.unwrapped.reference_action()
    finally:
        env.close()


def play(env, task, replies):
    player = ScriptedPlayer(replies)
    asyncio.run(env.run(task, type("Agents", (), {"player": player})()))
    return player


def test_the_plugin_id_resolves_to_this_taskset_and_env():
    assert taskset_class("gym-sysmath") is sysmath_vf.SysmathTaskset
    assert environment_class("gym-sysmath") is sysmath_vf.SysmathVfEnv
    env = make_env(env_id="LinearAlgebra-v0", n=3)
    assert env.config.player.harness.id == "null"  # plain chat: code runs in gym-sysmath's sandbox


def test_tasks_hold_a_reference_never_the_key():
    env = make_env(env_id="CsappExact-v0", n=3)
    tasks = list(env.taskset)
    assert len(tasks) == 3 and len({task.key for task in tasks}) == 3
    for task in tasks:
        ref = TaskRef.parse(task.data.ref)
        assert set(task.data.ref) == {"env_id", "task_id", "split", "seed", "max_turns"}
        probe = gym.make(ref.env_id, split=ref.split, **PROCESS)
        try:
            prompt, _ = ref.reset(probe)
            answer = json.dumps(probe.unwrapped.task.answer)
        finally:
            probe.close()
        assert task.data.prompt == prompt and answer not in task.data.model_dump_json(exclude={"prompt"})


def test_an_unbounded_train_taskset_is_lazy_and_bounded_views_work():
    env = make_env(env_id="LinearAlgebra-v0", split="train", seed=11)
    assert not env.taskset.bounded
    tasks = list(env.taskset.take(3))
    assert [TaskRef.parse(t.data.ref).seed for t in tasks] == [11, 12, 13]


def test_run_plays_a_tool_turn_then_the_answer_and_records_the_reward():
    env = make_env(env_id="CsappExact-v0", n=1)
    [task] = list(env.taskset)
    player = play(env, task, ["```python\nprint(6 * 7)\n```", reference_answer(task)])
    assert "42" in player.seen[1]  # the tool turn's output came back as the user turn
    assert player.trace.rewards == {"sysmath": 1.0} and player.trace.info["verdict"] == "correct"
    wrong = play(env, task, ["ANSWER: [123456789]"])
    assert wrong.trace.rewards == {"sysmath": 0.0}


def test_scoring_error_is_a_failed_rollout_never_a_reward(monkeypatch):
    env = make_env(env_id="CsappExact-v0", n=1)
    [task] = list(env.taskset)

    def failing_harness(self, reply):
        raise SandboxError("worker_died", "container killed (simulated)")

    monkeypatch.setattr(CsappExactEnv, "_grade_final", failing_harness)
    player = ScriptedPlayer([reference_answer(task)])

    async def episode():  # verifiers' own boundary around Env.run, as in Env.run_episode
        async with boundary(EnvError, "SysmathVfEnv.run()"):
            await env.run(task, type("Agents", (), {"player": player})())

    with pytest.raises(vf.SandboxError, match="worker_died") as raised:
        asyncio.run(episode())
    assert stop_condition(raised.value) == "sandbox_error"
    assert player.trace.rewards == {}

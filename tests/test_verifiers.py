"""verifiers v1: the id ``gym-sysmath`` resolves, through verifiers' own plugin loaders and its
``vf-eval`` config, to this package's taskset and env; tasks carry a reference, never the key;
``run`` plays a multi-turn episode (a real Python tool turn, then the answer) and records the
reward; a harness failure that survives its replay is raised as verifiers' ``SandboxError``,
which verifiers' own error boundary keeps as a failed rollout (``sandbox_error``), not a reward.

These tests drive ``run`` with a scripted player (verifiers' ``interaction`` / ``turn`` / ``trace``
surface); ``tests/test_verifiers_defaults.py`` runs the real ``vf-eval`` end to end (its null
chat harness, provisioned by ``uv`` in the subprocess runtime) against a scripted
OpenAI-compatible server on localhost, with verifiers' defaults."""

from __future__ import annotations

import asyncio
import contextlib
import json

import gymnasium as gym
import pytest

from gym_sysmath.answers import strip_end_tokens
from gym_sysmath.envs.csapp import CsappExactEnv
from gym_sysmath.integrations.episodes import Episode, TaskRef
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
        self.trace.rewards, self.trace.info, self.trace.errors, self.trace.stop_condition = {}, {}, [], None
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
    taskset.setdefault("env_kwargs", PROCESS)
    config = sysmath_vf.SysmathVfEnvConfig(taskset=sysmath_vf.SysmathTasksetConfig(id="gym-sysmath", **taskset))
    return load_environment(config)


def reference_answer(task) -> str:
    ref = TaskRef.parse(task.data.ref)
    env = gym.make(ref.env_id, split=ref.split, max_turns=ref.max_turns, **{**ref.env_kwargs, **PROCESS})
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
        assert set(task.data.ref) == {"env_id", "task_id", "split", "seed", "max_turns", "env_kwargs", "task_set"}
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


def test_tasks_record_the_env_arguments_they_were_made_with_and_episodes_use_them():
    """``env_kwargs`` (less how the env runs, e.g. the sandbox) and the task set ride each task,
    so the episode is rebuilt with the same filters the prompt was drawn under."""
    env = make_env(env_id="LinearAlgebra-v0", split="train", n=2, seed=3, env_kwargs={"difficulty": "easy", **PROCESS})
    tasks = list(env.taskset)
    for task in tasks:
        ref = TaskRef.parse(task.data.ref)
        assert dict(ref.env_kwargs) == {"difficulty": "easy"} and ref.task_set
        player = play(env, task, [reference_answer(task)])
        assert player.trace.rewards == {"sysmath": 1.0} and player.trace.info["verdict"] == "correct"


def test_every_reply_is_stepped_without_its_end_of_turn_token():
    env = make_env(env_id="CsappExact-v0", n=1)
    [task] = list(env.taskset)
    episode = Episode(TaskRef.parse(task.data.ref), env_kwargs=PROCESS, own_env=True)
    ends = ["<|im_end|>", "<\uff5cend\u2581of\u2581sentence\uff5c>"]
    replies = ["```python\nprint(6 * 7)\n```" + ends[0], reference_answer(task) + ends[1]]
    try:
        episode.reset()
        player = ScriptedPlayer(replies)
        asyncio.run(sysmath_vf.play(episode, player, task))
    finally:
        episode.close()
    assert episode.actions == [strip_end_tokens(reply) for reply in replies] != replies
    assert player.trace.rewards == {"sysmath": 1.0}

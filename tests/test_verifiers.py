"""verifiers v1: the id ``gym-sysmath`` resolves, through verifiers' own plugin loaders and its
``vf-eval`` config, to this package's taskset and env; tasks carry a reference, never the key;
``run`` plays a multi-turn episode (a real Python tool turn, then the answer) and records the
reward; a harness failure that survives its replay is raised as verifiers' ``SandboxError``,
which verifiers' own error boundary keeps as a failed rollout (``sandbox_error``), not a reward.

Most tests drive ``run`` with a scripted player (verifiers' ``interaction`` / ``turn`` / ``trace``
surface); the last runs the real ``vf-eval`` end to end (its null chat harness, provisioned by
``uv`` in the subprocess runtime) against a scripted OpenAI-compatible server on localhost."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

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


class ScriptedChat(BaseHTTPRequestHandler):
    """``/v1/chat/completions`` (streamed, as the chat harness asks): a python block on the
    first turn, then the reply ``answers`` maps the task prompt to; every request is kept."""

    answers: dict[str, str] = {}
    requests: list[dict] = []

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.requests.append(request)
        users = [m["content"] for m in request["messages"] if m["role"] == "user"]
        reply = "```python\nprint(6 * 7)\n```" if len(users) == 1 else self.answers.get(users[0], "ANSWER: ?")
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": int(time.time()), "model": request["model"],
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": reply}, "finish_reason": None}]}
        done = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())

    def log_message(self, *args):
        pass


def test_vf_eval_runs_the_taskset_end_to_end(tmp_path):
    venv_bin = Path(sys.executable).parent
    if not (venv_bin / "vf-eval").exists() or shutil.which("uv", path=str(venv_bin)) is None:
        pytest.skip("vf-eval and uv come with the frameworks extra")
    tasks = list(make_env(env_id="CsappExact-v0", n=2).taskset)
    ScriptedChat.answers = {tasks[0].data.prompt: reference_answer(tasks[0]), tasks[1].data.prompt: "ANSWER: [7]"}
    ScriptedChat.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedChat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        run = subprocess.run(
            [str(venv_bin / "vf-eval"), "gym-sysmath", "--env.taskset.env-id", "CsappExact-v0", "--env.taskset.n", "2",
             "--env.taskset.env-kwargs", json.dumps(PROCESS), "-r", "1", "-m", "scripted",
             "--client.base-url", f"http://127.0.0.1:{server.server_port}/v1", "--client.api-key-var", "SCRIPTED_KEY",
             "--env.player.runtime.type", "subprocess"],
            cwd=tmp_path, capture_output=True, text=True, timeout=600,
            env={**os.environ, "SCRIPTED_KEY": "unused", "PATH": f"{venv_bin}:{os.environ['PATH']}"})
    finally:
        server.shutdown()
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    [traces] = list(tmp_path.glob("outputs/*/traces.jsonl"))
    episodes = {json.loads(line)["task"]["data"]["ref"]["task_id"]: json.loads(line) for line in traces.open()}
    scores = {task_id: (e["ok"], e["traces"][0]["rewards"]["sysmath"]["score"], e["traces"][0]["info"]["verdict"])
              for task_id, e in episodes.items()}
    refs = [TaskRef.parse(task.data.ref).task_id for task in tasks]
    assert scores == {refs[0]: (True, 1.0, "correct"), refs[1]: (True, 0.0, "wrong_answer")}
    tool_turns = [r["messages"][-1]["content"] for r in ScriptedChat.requests if len(r["messages"]) > 1]
    assert len(tool_turns) == 2 and all("42" in turn for turn in tool_turns)  # the env's tool output, as the user

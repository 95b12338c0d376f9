"""verifiers v1 under its own defaults, driven through ``vf-eval`` (its null chat harness, its
interception server, its trace records): every rollout that is not recorded as failed carries
the reward the env itself gives the same replies, the reply on the last allowed turn is graded
(whoever's cap it is), a failed rollout carries no reward, and every reply is stripped of its
end-of-turn token before ``env.step``.

The model is a scripted OpenAI-compatible server on localhost: for each task (found by its
prompt) a list of replies, one per turn; ``BROKEN`` answers with a stream that never finishes."""

from __future__ import annotations

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

from gym_sysmath.answers import strip_end_tokens
from gym_sysmath.integrations.episodes import CLOSING_ACTION, TaskRef

vf = pytest.importorskip("verifiers.v1", reason="the frameworks extra is not installed")
from verifiers.v1.utils.loaders import load_environment  # noqa: E402

from gym_sysmath.integrations import verifiers as sysmath_vf  # noqa: E402

PROCESS = {"sandbox": "process"}
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")

BROKEN = object()  #: a reply whose stream ends without its finish chunk (the model call fails)
TOOL_TURN = "```python\nprint(6 * 7)\n```"
DEEPSEEK_END = "<\uff5cend\u2581of\u2581sentence\uff5c>"


class Script(BaseHTTPRequestHandler):
    """``/v1/chat/completions``, streamed as the chat harness asks: the reply for the task whose
    prompt opens the conversation, at the turn the conversation is on; every request is kept."""

    replies: dict[str, list] = {}
    tokens: dict[str, int] = {}  #: the completion tokens each reply of a task reports (1 if not given)
    requests: list[dict] = []

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.requests.append(request)
        users = [m["content"] for m in request["messages"] if m["role"] == "user"]
        script = self.replies.get(users[0], [])
        reply = script[len(users) - 1] if len(users) <= len(script) else "ANSWER: ?"
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": int(time.time()), "model": request["model"],
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": "" if reply is BROKEN else reply},
                              "finish_reason": None}]}
        done = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": self.tokens.get(users[0], 1), "total_tokens": 2}}
        events = [chunk] if reply is BROKEN else [chunk, done]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write("".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
                         + (b"" if reply is BROKEN else b"data: [DONE]\n\n"))

    def log_message(self, *args):
        pass


def tasks_of(**taskset):
    config = sysmath_vf.SysmathVfEnvConfig(taskset=sysmath_vf.SysmathTasksetConfig(
        id="gym-sysmath", env_kwargs=PROCESS, **taskset))
    return list(load_environment(config).taskset)


def env_grades(task, replies) -> tuple[float, str | None]:
    """What the env itself gives ``replies`` (each stripped of its end token, as every adapter
    does), played straight through ``gym.make``: ``(reward, verdict)``."""
    ref = TaskRef.parse(task.data.ref)
    env = gym.make(ref.env_id, split=ref.split, max_turns=ref.max_turns, **ref.env_kwargs, **PROCESS)
    try:
        ref.reset(env)
        for reply in replies:
            _, reward, terminated, truncated, info = env.step(strip_end_tokens(reply))
            if terminated or truncated:
                return reward, info["verdict"]
        return reward, None
    finally:
        env.close()


def solution(task) -> tuple[str, str]:
    """The task's answer as an ANSWER line, and as code that leaves it in ``result``."""
    ref = TaskRef.parse(task.data.ref)
    env = gym.make(ref.env_id, split=ref.split, max_turns=ref.max_turns, **PROCESS)
    try:
        ref.reset(env)
        answer = env.unwrapped.task.answer
    finally:
        env.close()
    return f"ANSWER: {json.dumps(answer)}", f"```python\nresult = {json.dumps(answer)}\nprint('done')\n```"


def vf_eval(tmp_path, replies: dict[str, list], *args: str,
            tokens: dict[str, int] | None = None) -> tuple[subprocess.CompletedProcess, dict[str, dict]]:
    """``vf-eval gym-sysmath ARGS`` against the script; the episodes of ``traces.jsonl`` by task id."""
    venv_bin = Path(sys.executable).parent
    if not (venv_bin / "vf-eval").exists() or shutil.which("uv", path=str(venv_bin)) is None:
        pytest.skip("vf-eval and uv come with the frameworks extra")
    Script.replies, Script.tokens, Script.requests = replies, tokens or {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Script)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        run = subprocess.run(
            [str(venv_bin / "vf-eval"), "gym-sysmath", "--env.taskset.env-kwargs", json.dumps(PROCESS), "-r", "1",
             "-m", "scripted", "--client.base-url", f"http://127.0.0.1:{server.server_port}/v1",
             "--client.api-key-var", "SCRIPTED_KEY", "--env.player.runtime.type", "subprocess", *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=600,
            env={**os.environ, "SCRIPTED_KEY": "unused", "PATH": f"{venv_bin}:{os.environ['PATH']}"})
    finally:
        server.shutdown()
    [traces] = list(tmp_path.glob("outputs/*/traces.jsonl"))
    episodes = [json.loads(line) for line in traces.open()]
    return run, {e["task"]["data"]["ref"]["task_id"]: e for e in episodes}


def outcome(episode: dict) -> tuple[bool, float | None, str | None]:
    """``(ok, sysmath reward or None when none was recorded, verdict)`` of a recorded episode."""
    [trace] = episode["traces"]
    reward = trace["rewards"].get("sysmath")
    return episode["ok"], None if reward is None else reward["score"], trace["info"].get("verdict")


def test_vf_eval_readme_command_grades_the_last_allowed_turn_and_keeps_a_failed_rollout_unscored(tmp_path):
    """The ``vf-eval`` of docs/integrations.md with verifiers' defaults (no player turn cap) on CsappExact's own
    5 turns: four tool turns (their output comes back as the user turn), then the right answer
    on the 5th, ending in DeepSeek's end token; a wrong answer after a tool turn; and a task
    whose model call fails (its stream never finishes) on the first turn."""
    tasks = tasks_of(env_id="CsappExact-v0", n=3)
    answer, _ = solution(tasks[0])
    script = {tasks[0].data.prompt: [TOOL_TURN] * 4 + [answer + DEEPSEEK_END],
              tasks[1].data.prompt: [TOOL_TURN, "ANSWER: [7]"],
              tasks[2].data.prompt: [BROKEN]}
    run, episodes = vf_eval(tmp_path, script, "--env.taskset.env-id", "CsappExact-v0", "--env.taskset.n", "3")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    ids = [TaskRef.parse(task.data.ref).task_id for task in tasks]
    assert TaskRef.parse(tasks[0].data.ref).max_turns is None  # the family's own budget: 5
    for task in tasks[:2]:
        expected = env_grades(task, script[task.data.prompt])
        assert outcome(episodes[TaskRef.parse(task.data.ref).task_id]) == (True, *expected)
    assert [outcome(episodes[i]) for i in ids[:2]] == [(True, 1.0, "correct"), (True, 0.0, "wrong_answer")]
    tool_turns = [r["messages"][-1]["content"] for r in Script.requests if len(r["messages"]) > 1]
    assert len(tool_turns) == 5 and all("42" in turn for turn in tool_turns)  # the env's tool output, as the user
    failed = episodes[ids[2]]
    assert outcome(failed) == (False, None, None) and failed["traces"][0]["errors"]  # failed, and no score
    assert "err 0.33" in run.stdout + run.stderr, run.stdout[-3000:]


def test_vf_eval_player_caps_end_episodes_on_a_graded_turn(tmp_path):
    """``--env.player.max-turns 2`` on CsappExact (5 turns of its own): the prompt offers 2
    turns and the reply on the 2nd (code leaving the answer in ``result``) is graded as the last
    turn, where a 5-turn episode would have taken it as a tool turn and verifiers ended it
    ungraded; a task whose 2nd reply leaves no answer gets the env's verdict, not a silent 0.
    ``--env.player.max-output-tokens 100``: a task whose first reply (code leaving the answer)
    spends 500 tokens is stopped by verifiers before its 2nd turn, and graded from what it left."""
    tasks = tasks_of(env_id="CsappExact-v0", n=3, max_turns=2)
    _, code = solution(tasks[0])
    _, code_c = solution(tasks[2])
    script = {tasks[0].data.prompt: [TOOL_TURN, code], tasks[1].data.prompt: [TOOL_TURN, TOOL_TURN],
              tasks[2].data.prompt: [code_c, "ANSWER: [7]"]}
    run, episodes = vf_eval(tmp_path, script, "--env.taskset.env-id", "CsappExact-v0", "--env.taskset.n", "3",
                            "--env.player.max-turns", "2", "--env.player.max-output-tokens", "100",
                            tokens={tasks[2].data.prompt: 500})
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    played = {tasks[0].data.prompt: script[tasks[0].data.prompt], tasks[1].data.prompt: script[tasks[1].data.prompt],
              tasks[2].data.prompt: [code_c, CLOSING_ACTION]}
    for task in tasks:
        episode = episodes[TaskRef.parse(task.data.ref).task_id]
        assert episode["task"]["data"]["ref"]["max_turns"] == 2  # the prompt the model saw offers 2 turns:
        assert episode["task"]["data"]["prompt"] == task.data.prompt
        assert outcome(episode) == (True, *env_grades(task, played[task.data.prompt]))
    assert [outcome(episodes[TaskRef.parse(t.data.ref).task_id])[1:] for t in tasks] == [
        (1.0, "correct"), (0.0, "format_error"), (1.0, "correct")]
    stopped = episodes[TaskRef.parse(tasks[2].data.ref).task_id]["traces"][0]
    assert stopped["stop_condition"] == "max_output_tokens" and stopped["info"]["closed_by"] == "max_output_tokens"
    assert len(Script.requests) == 5  # two turns for the first two tasks, one for the third


def test_a_player_cap_below_an_explicit_taskset_budget_is_refused():
    with pytest.raises(ValueError, match=r"player\.max-turns 2 is below --env\.taskset\.max-turns 4"):
        sysmath_vf.SysmathVfEnvConfig(taskset={"id": "gym-sysmath", "env_id": "CsappExact-v0", "max_turns": 4},
                                      player={"max_turns": 2})
    config = sysmath_vf.SysmathVfEnvConfig(taskset={"id": "gym-sysmath", "env_id": "CsappExact-v0"},
                                           player={"max_turns": 3})
    assert config.taskset.max_turns == 3 and config.player.harness.id == "null"
    roomy = sysmath_vf.SysmathVfEnvConfig(taskset={"id": "gym-sysmath", "env_id": "CsappExact-v0"},
                                          player={"max_turns": 9})
    assert roomy.taskset.max_turns is None  # the env's own 5 turns end the episode first

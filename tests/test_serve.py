"""`gym-sysmath serve`: a served episode is the local episode, over OpenEnv's protocol; the serving
path failing is a scoring error, never a wrong answer; the token, capacity, idle timeout and drain
hold. Every test talks to a real server process (tests/served.py), started from its own venv."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gym_sysmath  # noqa: F401
from gym_sysmath.serving.client import (
    AsyncRemoteSysmathEnv,
    RemoteEnvError,
    RemoteSysmathEnv,
    RemoteUnavailable,
    server_health,
)
from gym_sysmath.serving.protocol import EXPIRED_PREFIX, jsonable
from tests.conftest import killing_our_containers
from tests.served import SERVE_PYTHON, running_server, serve_or_skip

pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")

ANSWER_IDS = ("CsappExact-v0", "LinearAlgebra-v0")


def _local(env_id: str, sandbox: str = "docker", **kwargs) -> gym.Env:
    return gym.make(env_id, sandbox=sandbox, **kwargs)


def _wire(result: tuple) -> tuple:
    """A local result as the wire carries it (enums as their values), less the clock's timings."""
    *head, info = jsonable(list(result))
    info.pop("timing", None)
    return (*head, info) if len(head) > 1 else (head[0], info)


def _assert_same(served: tuple, local: tuple) -> None:
    assert _wire(served) == _wire(local)


def _assert_scoring_error(result) -> None:
    _, reward, terminated, truncated, info = result
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert info["verdict"] == "scoring_error" and info["scoring_error"], info


# ---------------------------------------------------------------- the served episode is the local one


@pytest.mark.docker
def test_served_reference_episodes_equal_local_episodes_on_every_family(gym_server) -> None:
    """Reset observation and info, then the whole step result, value for value: CsappExact and
    LinearAlgebra over several seeds, and a CompGeom reference compiled and tested on the server."""
    plan = [(env_id, seed) for env_id in ANSWER_IDS for seed in range(6)] + [("CompGeomPython-v0", 0)]
    envs = {env_id: (_local(env_id), RemoteSysmathEnv(gym_server.url, env_id)) for env_id, _ in plan}
    try:
        for env_id, seed in plan:
            local, remote = envs[env_id]
            _assert_same(remote.reset(seed=seed), local.reset(seed=seed))
            for _ in range(4):  # CompGeom: the reference code, then its final reply
                action = local.unwrapped.reference_action()
                served, expected = remote.step(action), local.step(action)
                _assert_same(served, expected)
                if served[2] or served[3]:
                    break
            assert served[1] == 1.0, (env_id, seed, served[4])
    finally:
        for local, remote in envs.values():
            local.close()
            remote.close()


@pytest.mark.docker
def test_a_tool_turn_runs_on_the_server_and_returns_the_local_output(gym_server) -> None:
    code = "```python\nprint(sum(range(10)), 2**70)\n```"
    local, remote = _local("CsappExact-v0", max_turns=3), RemoteSysmathEnv(gym_server.url, "CsappExact-v0", max_turns=3)
    try:
        _assert_same(remote.reset(seed=11), local.reset(seed=11))
        served, expected = remote.step(code), local.step(code)
        _assert_same(served, expected)
        assert "45 1180591620717411303424" in served[0]
    finally:
        local.close()
        remote.close()


REPLIES = st.one_of(
    st.text(max_size=300),
    st.builds(lambda body: f"**Final Answer:**\n\nANSWER: {body}", st.text(max_size=40)),
    st.builds(lambda n: f"ANSWER: {n}", st.integers(-2**70, 2**70)),
    st.builds(lambda body: f"```python\n{body}\n```", st.text(max_size=60)),
    st.integers(), st.none(), st.binary(max_size=20), st.lists(st.text(max_size=4), max_size=3),
)


@pytest.mark.docker
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(env_id=st.sampled_from(ANSWER_IDS), seed=st.integers(0, 10_000), reply=REPLIES)
def test_fuzzed_replies_get_the_local_result_over_the_wire(gym_server, env_id, seed, reply) -> None:
    """Any Unicode (lone surrogates, controls, emphasis, fences) and any non-string action: the
    served step result is the local one. A value JSON cannot carry (bytes) keeps its verdict."""
    local, remote = _local(env_id), RemoteSysmathEnv(gym_server.url, env_id)
    try:
        _assert_same(remote.reset(seed=seed), local.reset(seed=seed))
        served, expected = remote.step(reply), local.step(reply)
        if isinstance(reply, bytes):  # sent as a marker: the same refusal, named for another type
            assert served[1:4] == expected[1:4] and served[4]["verdict"] == expected[4]["verdict"] == "format_error"
        else:
            _assert_same(served, expected)
    finally:
        local.close()
        remote.close()


@pytest.mark.docker
def test_openenv_own_client_drives_the_server(gym_server) -> None:
    """OpenEnv's EnvClient (the typed SysmathEnvClient, in the serve environment) plays an episode."""
    script = (
        "import json, sys\n"
        "from gym_sysmath.serving.openenv_client import SysmathEnvClient\n"
        "with SysmathEnvClient(base_url=sys.argv[1]).sync() as env:\n"
        "    first = env.reset(env_id='LinearAlgebra-v0', seed=5)\n"
        "    result = env.step(sys.argv[2])\n"
        "    print(json.dumps([first.observation.info['task_id'], result.reward, result.done,\n"
        "                      result.observation.info['verdict']]))\n")
    local = _local("LinearAlgebra-v0", sandbox="process")
    _, info = local.reset(seed=5)
    answer = local.unwrapped.reference_action()
    done = subprocess.run([str(SERVE_PYTHON), "-c", script, gym_server.url, answer], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [info["task_id"], 1.0, True, "correct"]


@pytest.mark.docker
def test_async_clients_play_many_sessions_at_once_and_give_them_back(gym_server) -> None:
    sessions = 48
    local = _local("LinearAlgebra-v0", sandbox="process")
    answers = []
    for seed in range(sessions):
        local.reset(seed=seed)
        answers.append(local.unwrapped.reference_action())

    async def one(seed: int) -> float:
        async with AsyncRemoteSysmathEnv(gym_server.url, "LinearAlgebra-v0") as env:
            await env.reset(seed=seed)
            _, reward, _, _, _ = await env.step(answers[seed])
            return reward

    async def run() -> list[float]:
        return await asyncio.gather(*(one(seed) for seed in range(sessions)))

    assert asyncio.run(run()) == [1.0] * sessions
    deadline = time.monotonic() + 10
    while gym_server.health()["sessions"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gym_server.health()["sessions"] == 0


@pytest.mark.docker
def test_health_reports_capacity_and_the_served_task_sets(gym_server) -> None:
    from gym_sysmath.families import families, task_set
    from gym_sysmath.task_sets import installed

    deadline = time.monotonic() + 60
    while not server_health(gym_server.url)["ready"] and time.monotonic() < deadline:  # primed, reserve warm
        time.sleep(0.2)
    health = server_health(gym_server.url)
    assert health["status"] == "healthy" and health["ready"]
    assert health["pool"]["reserve"] + health["pool"]["leased"] >= 2
    assert health["task_sets"] == {row.name: task_set(row.name) for row in families()}  # every id is served
    assert health["task_set_hashes"] == {row.name: installed(row.name).hash for row in families()}
    assert health["pool"]["backend"] == "docker" and health["pool"]["warm_target"] == 2
    with RemoteSysmathEnv(gym_server.url, "CsappExact-v0", max_turns=2) as env:
        env.reset(seed=0)
        env.step("```python\nprint(1)\n```")  # a tool turn leases a container
        during = server_health(gym_server.url)
        assert during["sessions"] >= 1 and during["pool"]["leased"] >= 1
    assert set(health["pool"]) == {"backend", "leased", "reserve", "starting", "queued", "warm_target"}


# ---------------------------------------------------------------- the serving path failing


@pytest.mark.docker
def test_harness_failure_on_the_server_arrives_as_a_scoring_error(tmp_path) -> None:
    """The server's containers killed under a tool turn (retry included): the client reads the
    env's scoring error, not a wrong answer."""
    with running_server("CsappExact-v0", tmp_dir=tmp_path) as server:
        with RemoteSysmathEnv(server.url, max_turns=3) as env:
            env.reset(seed=2)
            with killing_our_containers(owner_pid=server.process.pid):
                result = env.step("```python\nimport time\ntime.sleep(2)\nprint('done')\n```")
        _assert_scoring_error(result)
        assert "not your fault" in result[0]


def test_server_killed_mid_step_is_a_scoring_error_then_reset_says_unreachable(tmp_path) -> None:
    with running_server("CsappExact-v0", "--sandbox", "process", tmp_dir=tmp_path) as server:
        env = RemoteSysmathEnv(server.url, max_turns=3)
        env.reset(seed=1)
        threading.Timer(1.5, server.process.kill).start()
        result = env.step("```python\nimport time\ntime.sleep(20)\n```")
        _assert_scoring_error(result)
        assert "lost" in result[4]["scoring_error"]
        with pytest.raises(RuntimeError, match="reset first"):
            env.step("ANSWER: 1")
        with pytest.raises(RemoteUnavailable, match="cannot open a session"):
            env.reset(seed=1)
        env.close()


def test_idle_session_is_closed_and_the_next_step_is_a_scoring_error(tmp_path) -> None:
    flags = ("LinearAlgebra-v0", "--sandbox", "process", "--idle-timeout", "1")
    with running_server(*flags, tmp_dir=tmp_path) as server, RemoteSysmathEnv(server.url) as env:
        env.reset(seed=0)
        time.sleep(2.5)
        result = env.step("ANSWER: 1")
        _assert_scoring_error(result)
        assert EXPIRED_PREFIX in result[4]["scoring_error"]
        env.reset(seed=0)  # a new session
        assert env.step("ANSWER: 1")[4]["verdict"] in ("wrong_answer", "correct", "format_error")


# ---------------------------------------------------------------- token, capacity, drain, refusals


@pytest.fixture(scope="module")
def guarded_server(tmp_path_factory):
    with running_server("LinearAlgebra-v0", "--sandbox", "process", "--max-sessions", "2", token="s3cret-token",
                        tmp_dir=tmp_path_factory.mktemp("guarded")) as server:
        yield server


def _status(url: str, method: str = "GET", token: str | None = None) -> int:
    request = urllib.request.Request(url, method=method, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_token_is_required_everywhere_but_health(guarded_server) -> None:
    url = guarded_server.url
    assert _status(url + "/health") == 200
    assert _status(url + "/schema") == 401 and _status(url + "/drain", "POST") == 401
    assert _status(url + "/schema", token="wrong") == 401
    assert _status(url + "/schema", token="s3cret-token") == 200
    for token in (None, "wrong", "s3cret-token-and-more"):
        with pytest.raises(RemoteUnavailable, match="refused the token"):
            RemoteSysmathEnv(url, token=token or "").reset(seed=0)
    with RemoteSysmathEnv(url, token="s3cret-token") as env:
        assert env.reset(seed=0)[1]["family"] == "linalg"


def test_sessions_beyond_max_sessions_are_refused_with_the_reason(guarded_server) -> None:
    url, token = guarded_server.url, "s3cret-token"
    first, second = RemoteSysmathEnv(url, token=token), RemoteSysmathEnv(url, token=token)
    first.reset(seed=0)
    second.reset(seed=1)
    assert guarded_server.health()["sessions"] == 2
    third = RemoteSysmathEnv(url, token=token)
    with pytest.raises((RemoteEnvError, RemoteUnavailable), match=r"(?i)capacity|max"):
        third.reset(seed=2)
    first.close()
    deadline = time.monotonic() + 10
    while guarded_server.health()["sessions"] > 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    third = RemoteSysmathEnv(url, token=token)
    assert third.reset(seed=2)[1]["family"] == "linalg"
    second.close()
    third.close()


def test_a_client_may_not_choose_the_server_sandbox(guarded_server) -> None:
    with pytest.raises(ValueError, match="chosen by the server"):
        RemoteSysmathEnv(guarded_server.url, token="s3cret-token", sandbox="process")
    with (pytest.raises(RemoteEnvError, match="does not serve 'CsappExact-v0'"),
          RemoteSysmathEnv(guarded_server.url, "CsappExact-v0", token="s3cret-token") as env):
        env.reset(seed=0)


def test_drain_refuses_new_sessions_and_finishes_the_live_ones(tmp_path) -> None:
    with running_server("LinearAlgebra-v0", "--sandbox", "process", tmp_dir=tmp_path) as server:
        live = RemoteSysmathEnv(server.url)
        live.reset(seed=4)
        server.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while server.health()["status"] != "draining" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.health()["status"] == "draining"
        with pytest.raises(RemoteUnavailable, match="draining"):
            RemoteSysmathEnv(server.url).reset(seed=0)
        local = _local("LinearAlgebra-v0", sandbox="process")
        local.reset(seed=4)
        answer = local.unwrapped.reference_action()
        assert live.step(answer)[1] == 1.0  # the live session finishes its episode
        assert server.process.poll() is None
        live.close()
        assert server.process.wait(timeout=20) == 0
        assert "drained" in server.output()


@pytest.mark.parametrize(("flags", "message"), [
    (["--host", "0.0.0.0"], "set GYM_SYSMATH_SERVE_TOKEN"),
    (["--token-file", "/nonexistent/token"], "cannot read --token-file"),
    (["NotAnEnv-v0"], "unknown env id"),
    (["--max-sessions", "0"], "--max-sessions must be at least 1"),
])
def test_serve_refuses_what_it_cannot_run_with_in_one_line(flags, message) -> None:
    serve_or_skip()
    environment = {key: value for key, value in os.environ.items() if key != "GYM_SYSMATH_SERVE_TOKEN"}
    done = subprocess.run([str(SERVE_PYTHON), "-m", "gym_sysmath.cli", "serve", *flags], capture_output=True,
                          text=True, timeout=120, env=environment)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.docker
def test_remote_rollouts_example_runs_against_a_server(gym_server) -> None:
    """examples/remote_rollouts.py, as the docs run it: every episode scored, none lost."""
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "remote_rollouts.py"
    done = subprocess.run([sys.executable, str(example), "--url", gym_server.url, "--episodes", "4"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("4 episodes: {'wrong_answer': 4}"), done.stdout


@pytest.mark.docker
def test_a_client_dropped_without_close_gives_its_session_back(gym_server) -> None:
    """A served env garbage-collected unclosed ends its session (a draining server would wait on it)."""
    import gc

    before = gym_server.health()["sessions"]
    env = RemoteSysmathEnv(gym_server.url, "LinearAlgebra-v0")
    env.reset(seed=0)
    assert gym_server.health()["sessions"] == before + 1
    del env
    gc.collect()
    deadline = time.monotonic() + 10
    while gym_server.health()["sessions"] > before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gym_server.health()["sessions"] == before

"""`gym-sysmath serve` under attack from its clients: a hostile or careless client (or a web page
in the operator's browser) against a real server process (tests/served.py), one test per attack.

What each must hold: a served step is never mis-scored (a correct answer never comes back as a
0 without ``scoring_error``); no client reaches another's session or makes sessions the server
cannot take back; a drain ends; the secret is not published; the server does not buffer what no
env can read. The process sandbox keeps these tests off Docker: the sandbox is not under test.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
from websockets.exceptions import InvalidStatus, WebSocketException
from websockets.sync.client import connect

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.env import core_env
from gym_sysmath.serving.client import AsyncRemoteSysmathEnv, RemoteSysmathEnv, RemoteUnavailable
from gym_sysmath.serving.protocol import jsonable
from tests.served import SERVE_PYTHON, Server, free_port, running_server, serve_or_skip, stop

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:sandbox='process'")]

TOKEN = "hostile-" + secrets.token_hex(8)
SERVED = ("LinearAlgebra-v0", "CsappExact-v0")
#: a tool turn long enough for a caller to give up on it
SLOW_TURN = "```python\nimport time\ntime.sleep(1.5)\nprint('slept')\n```"


@pytest.fixture(scope="module")
def open_server(tmp_path_factory) -> Iterator[Server]:
    """``gym-sysmath serve`` as most users start it: no token, loopback only."""
    with running_server(*SERVED, "--sandbox", "process", "--max-sessions", "6",
                        tmp_dir=tmp_path_factory.mktemp("open")) as server:
        yield server


@pytest.fixture(scope="module")
def guarded_server(tmp_path_factory) -> Iterator[Server]:
    with running_server(*SERVED, "--sandbox", "process", "--max-sessions", "6", token=TOKEN,
                        tmp_dir=tmp_path_factory.mktemp("guarded")) as server:
        yield server


def _reference(env_id: str, seed: int) -> str:
    local = gym.make(env_id, sandbox="process")
    try:
        local.reset(seed=seed)
        return str(core_env(local).reference_action())
    finally:
        local.close()


def _ws(server: Server, path: str = "/ws", **headers: str):
    if server.token:
        headers.setdefault("Authorization", f"Bearer {server.token}")
    return connect(server.url.replace("http", "ws", 1) + path, additional_headers=headers, open_timeout=30,
                   max_size=None)


def _send(socket, kind: str, data: dict | None = None) -> dict:
    socket.send(json.dumps({"type": kind, **({"data": data} if data is not None else {})}))
    return json.loads(socket.recv(timeout=60))


def _post(server: Server, path: str, body: bytes = b"", **headers: str) -> tuple[int, dict]:
    if server.token:
        headers.setdefault("Authorization", f"Bearer {server.token}")
    request = urllib.request.Request(server.url + path, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status), json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return int(error.code), {}
    except OSError:  # refused: a server that drained and exited
        return 0, {}


def _rpc(method: str, **params: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()


def _wait_sessions(server: Server, count: int, timeout_s: float = 10.0) -> int:
    deadline = time.monotonic() + timeout_s
    while server.health()["sessions"] != count and time.monotonic() < deadline:
        time.sleep(0.05)
    return int(server.health()["sessions"])


# ---------------------------------------------------------------- a client that gives up


def test_a_cancelled_async_step_never_scores_the_next_answer_wrong(guarded_server) -> None:
    """An asyncio trainer that times out a slow step (``asyncio.wait_for``) must not leave that
    step's reply on the socket: read by the next call, it made the reference answer of the next
    episode come back as reward 0 with no ``scoring_error`` (a wrong answer)."""
    answer = _reference("CsappExact-v0", 4)

    async def play() -> tuple[dict, tuple]:
        env = AsyncRemoteSysmathEnv(guarded_server.url, "CsappExact-v0", token=TOKEN, max_turns=3)
        try:
            await env.reset(seed=4)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(env.step(SLOW_TURN), 0.3)
            await asyncio.sleep(2.0)  # the abandoned step's reply is on its way meanwhile
            _, info = await env.reset(seed=4)
            return info, await env.step(answer)
        finally:
            await env.close()

    info, (_, reward, _, _, step_info) = asyncio.run(play())
    assert step_info.get("scoring_error") or (reward, step_info["verdict"]) == (1.0, "correct"), (
        f"the reference answer was scored {reward} with no scoring_error: {step_info}")
    assert info["turn"] == 0 and info["verdict"] is None, f"reset answered with a stale step reply: {info}"


# ---------------------------------------------------------------- a web page in the operator's browser


def test_a_cross_origin_page_cannot_drive_a_tokenless_server(open_server) -> None:
    """Browsers let any page open a WebSocket to 127.0.0.1 and POST to it without a CORS
    preflight; only the ``Origin`` header says who asks. A tokenless server must refuse a
    request from another origin, or any page the operator visits runs tool turns on it (host
    code under ``--sandbox process``), fills its sessions, or drains it."""
    evil = "https://evil.example"
    try:
        with _ws(open_server, Origin=evil) as socket:
            reply = _send(socket, "reset", {"env_id": "CsappExact-v0", "seed": 1})
    except (InvalidStatus, WebSocketException, OSError):
        reply = {"type": "refused"}
    assert reply["type"] != "observation", "a cross-origin page opened a session and reset an env"
    status, _ = _post(open_server, "/mcp", _rpc("tools/list"), Origin=evil, **{"Content-Type": "text/plain"})
    assert status >= 400, f"a cross-origin simple POST reached /mcp (HTTP {status})"


# ---------------------------------------------------------------- OpenEnv's session side doors


def test_http_mcp_cannot_create_sessions_no_socket_closes(open_server) -> None:
    """OpenEnv's ``POST /mcp`` ``openenv/session/create`` makes a session tied to no socket: the
    server never reaps it (no session timeout), so one request per slot fills ``--max-sessions``
    for good, and a drain waits on it until ``--drain-timeout``."""
    before = _wait_sessions(open_server, 0)
    status, reply = _post(open_server, "/mcp", _rpc("openenv/session/create"), **{"Content-Type": "application/json"})
    created = (reply.get("result") or {}).get("session_id")
    try:
        assert not created and open_server.health()["sessions"] == before, (
            f"POST /mcp made a detached session {created} (HTTP {status}); sessions now "
            f"{open_server.health()['sessions']}")
    finally:
        if created:
            _post(open_server, "/mcp", _rpc("openenv/session/close", session_id=created))


def test_a_second_socket_cannot_attach_to_a_live_session(open_server) -> None:
    """``/ws?session_id=ID`` attaches a socket to an existing session, and a session learns its
    own id from an ``mcp`` message: whoever holds the id plays (or closes) that episode from a
    second socket. One session, one socket."""
    answer = _reference("LinearAlgebra-v0", 3)
    with _ws(open_server) as owner:
        first = _send(owner, "reset", {"env_id": "LinearAlgebra-v0", "seed": 3})
        assert first["type"] == "observation"
        reply = _send(owner, "mcp", {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}})
        session_id = ((reply.get("data") or {}).get("result") or {}).get("session_id")
        if not session_id:
            return  # the id is not handed out: nothing to attach with
        try:
            with _ws(open_server, f"/ws?session_id={session_id}") as intruder:
                stolen = _send(intruder, "step", {"text": answer})
        except (InvalidStatus, WebSocketException, OSError):
            stolen = {"type": "refused"}
        assert stolen["type"] != "observation", f"a second socket played the owner's episode: {stolen['data']}"


# ---------------------------------------------------------------- messages no env can read


def test_a_message_far_beyond_any_action_is_refused_before_it_is_parsed(guarded_server) -> None:
    """An action is at most ``MAX_ACTION_CHARS`` (32,768) characters, yet the server accepted and
    parsed 64 MiB messages on its event loop: three at once took 0.5 GB and stalled /health
    0.9 s, and ``--max-sessions`` of them would exhaust memory. An over-long action that fits a
    sane frame still gets the local env's result."""
    long_reply = "ANSWER: 1\n" + "x" * 40_000
    local = gym.make("LinearAlgebra-v0", sandbox="process")
    try:
        local.reset(seed=2)
        expected = local.step(long_reply)
    finally:
        local.close()
    with RemoteSysmathEnv(guarded_server.url, "LinearAlgebra-v0", token=TOKEN) as env:
        env.reset(seed=2)
        served = env.step(long_reply)
    assert jsonable(list(served[1:4])) == jsonable(list(expected[1:4]))
    assert served[4]["verdict"] == expected[4]["verdict"] == "format_error"

    flood = json.dumps({"type": "step", "data": {"text": "ANSWER: " + "1," * (4 * 1024 * 1024)}})  # 8 MiB
    with _ws(guarded_server) as socket:
        _send(socket, "reset", {"env_id": "LinearAlgebra-v0", "seed": 2})
        try:
            socket.send(flood)
            reply = json.loads(socket.recv(timeout=60))
        except WebSocketException:
            reply = {"type": "refused"}
    assert reply["type"] != "observation", "an 8 MiB message was read, parsed and stepped"


# ---------------------------------------------------------------- the secret


def test_the_token_is_not_on_the_server_command_line(guarded_server) -> None:
    """Every local user reads every process's command line (``ps``, ``/proc/PID/cmdline``), and so
    does a ``--sandbox process`` tool turn: a token given as ``--token`` (as the docs show it) is
    published to all of them. It belongs in the environment or a file."""
    command_line = Path(f"/proc/{guarded_server.process.pid}/cmdline").read_bytes()
    assert TOKEN.encode() not in command_line, command_line.replace(b"\0", b" ").decode(errors="replace")


def test_a_reachable_host_refuses_the_process_sandbox(tmp_path) -> None:
    """``--sandbox process`` runs tool turns as host processes with no filesystem or network
    isolation: served on a non-loopback address it is host code execution (and the hidden tests'
    files) for every token holder. ``serve`` must refuse it there, as it refuses a missing token."""
    serve_or_skip()
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "w") as sink:
        process = subprocess.Popen([str(SERVE_PYTHON), "-m", "gym_sysmath.cli", "serve", "LinearAlgebra-v0", "--host",
                                    "0.0.0.0", "--port", str(port), "--sandbox", "process", "--max-sessions", "1",
                                    "--drain-timeout", "0"], stdout=sink, stderr=subprocess.STDOUT,
                                   env={**os.environ, "GYM_SYSMATH_SERVE_TOKEN": TOKEN})
    listening = False
    try:
        deadline = time.monotonic() + 120
        while process.poll() is None and time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read()
                listening = True
                break
            except OSError:
                time.sleep(0.2)
    finally:
        stop(process, timeout_s=30)
    assert not listening, "serve --host 0.0.0.0 --sandbox process started serving"
    assert process.returncode == 2, log.read_text()[-2000:]


# ---------------------------------------------------------------- the drain


def test_sessions_made_over_http_do_not_hold_a_drain_open(tmp_path) -> None:
    """A session made by ``POST /mcp`` has no socket to close: the drain waited for it until
    ``--drain-timeout`` (15 min by default), and ``/mcp`` took new sessions while draining."""
    with running_server("LinearAlgebra-v0", "--sandbox", "process", "--drain-timeout", "60",
                        tmp_dir=tmp_path) as server:
        _post(server, "/mcp", _rpc("openenv/session/create"))
        server.process.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        _, reply = _post(server, "/mcp", _rpc("openenv/session/create"))
        assert not (reply.get("result") or {}).get("session_id"), "a session was made while draining"
        try:
            server.process.wait(timeout=6)
        except subprocess.TimeoutExpired:
            pytest.fail(f"no live socket, yet the drain still waits on {server.health()['sessions']} session(s)")


def test_a_live_session_starts_no_new_episode_while_draining(tmp_path) -> None:
    """A drain lets live sessions finish their episodes; a trainer that keeps one session and
    resets it for the next episode (the client's normal use) kept the server up until
    ``--drain-timeout``, then had its steps in flight cut. The next reset must say the server
    is draining, so the trainer takes its episodes elsewhere."""
    with running_server("LinearAlgebra-v0", "--sandbox", "process", tmp_dir=tmp_path) as server:
        env = RemoteSysmathEnv(server.url)
        try:
            env.reset(seed=0)
            env.step(_reference("LinearAlgebra-v0", 0))
            server.process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 10
            while server.health()["status"] != "draining" and time.monotonic() < deadline:
                time.sleep(0.05)
            with pytest.raises(RemoteUnavailable, match="draining"):
                env.reset(seed=1)
        finally:
            env.close()
        assert server.process.wait(timeout=20) == 0

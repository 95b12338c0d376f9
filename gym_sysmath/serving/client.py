"""Clients of ``gym-sysmath serve``: a served env with the local env's API, blocking or async.

``RemoteSysmathEnv(url, env_id, **env_kwargs)`` is a ``gymnasium.Env`` whose ``reset`` and
``step`` run on the server (one WebSocket session per env); ``AsyncRemoteSysmathEnv`` is its
``await``-able twin, with ``AsyncSysmathEnv``'s API. Results are the local env's, value for
value (the info dict as JSON carries it).

The serving path failing is never a wrong answer: a step whose connection drops, whose server
dies or does not answer within ``CLIENT_MESSAGE_TIMEOUT_S``, or whose session the server closed
comes back as the env's own scoring error (reward 0, truncated, ``info["scoring_error"]``), and
the next ``reset`` opens a new session. A reset that cannot reach the server raises
``RemoteUnavailable`` (there is no sample yet to drop); what the server refuses (an unknown id,
a bad filter) raises ``RemoteEnvError`` with the server's message, as ``gym.make`` would.

Needs only ``websockets`` (the ``remote`` extra), not ``openenv``: the wire is OpenEnv's
protocol, so OpenEnv's own ``EnvClient`` can drive the same server.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
import weakref
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from gym_sysmath.serving.protocol import (
    CLIENT_MESSAGE_TIMEOUT_S,
    DRAINING_PREFIX,
    EXPIRED_PREFIX,
    MAX_MESSAGE_BYTES,
    SERVER_CHOSEN_KWARGS,
    TOKEN_ENV,
    jsonable,
    remote_scoring_error,
)
from gym_sysmath.spaces import text_space

__all__ = ["AsyncRemoteSysmathEnv", "RemoteEnvError", "RemoteSysmathEnv", "RemoteUnavailable", "server_health"]

StepResult = tuple[str, float, bool, bool, dict[str, Any]]


class RemoteEnvError(RuntimeError):
    """The server refused a call (what the local env would have raised), with its message."""


class RemoteUnavailable(ConnectionError):
    """The server could not be reached, refused the token, or is draining."""


class _Garbled(Exception):
    """A reply that is not the one the call waits for (not an observation, a step without a reward):
    the session is out of step with its caller, so the call's result cannot be trusted."""


def _urls(url: str) -> tuple[str, str]:
    """(http base, ws endpoint) for a server URL given as http(s):// or ws(s)://."""
    base = url.rstrip("/")
    if base.endswith("/ws"):
        base = base[:-3]
    if base.startswith("ws"):
        base = "http" + base[2:]
    if not base.startswith(("http://", "https://")):
        raise ValueError(f"a server URL starts with http://, https://, ws:// or wss://, got {url!r}")
    return base, "ws" + base[4:] + "/ws"


def _headers(token: str | None) -> dict[str, str]:
    token = token if token is not None else os.environ.get(TOKEN_ENV) or None
    return {"Authorization": f"Bearer {token}"} if token else {}


def server_health(url: str, *, token: str | None = None, timeout_s: float = 10.0) -> dict[str, Any]:
    """The server's ``/health``: status, live sessions, the pool's capacity, served task sets."""
    base, _ = _urls(url)
    request = urllib.request.Request(base + "/health", headers=_headers(token))
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return dict(json.loads(response.read()))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise RemoteUnavailable(f"cannot reach the gym-sysmath server at {base}: {exc}") from exc


class _Codec:
    """The messages of one session and how to read the replies (shared by both clients)."""

    def __init__(self, url: str, env_id: str | None, token: str | None, env_kwargs: Mapping[str, Any]):
        refused = sorted(SERVER_CHOSEN_KWARGS & set(env_kwargs))
        if refused:
            raise ValueError(f"{refused} are chosen by the server (`gym-sysmath serve --sandbox ...`), not the client")
        self.base, self.ws_url = _urls(url)
        self.env_id, self.env_kwargs = env_id, jsonable(dict(env_kwargs))
        self.headers = _headers(token)
        self.last_info: dict[str, Any] = {}
        self.in_episode = False

    def reset_message(self, seed: int | None, options: Mapping[str, Any] | None) -> str:
        data = {"env_id": self.env_id, "env_kwargs": self.env_kwargs, "seed": seed,
                "options": jsonable(dict(options)) if options else None}
        return json.dumps({"type": "reset", "data": data})

    @staticmethod
    def step_message(action: Any) -> str:
        """The action as sent. A string longer than any action may be goes cut to one character
        over the limit (the env refuses it the same way; ``detail`` then counts the cut length);
        what JSON cannot carry (bytes, a tuple, NaN) goes as a marker naming its type, which the
        server turns into an object of that type name for the env to refuse."""
        from gym_sysmath.env import MAX_ACTION_CHARS

        if isinstance(action, str) and len(action) > MAX_ACTION_CHARS + 1:
            action = action[:MAX_ACTION_CHARS + 1]
        try:
            if isinstance(action, (str, int, float, bool, list, dict)) or action is None:
                text = json.dumps({"type": "step", "data": {"text": action}}, allow_nan=False)
                if len(text) <= MAX_MESSAGE_BYTES // 2:
                    return text
        except (TypeError, ValueError):
            pass
        return json.dumps({"type": "step", "data": {"text": {"unsendable": type(action).__name__}}})

    @staticmethod
    def read(raw: str | bytes) -> dict[str, Any]:
        message = json.loads(raw)
        data = message.get("data") or {}
        if message.get("type") == "error":
            raise RemoteEnvError(str(data.get("message", data)))
        if message.get("type") != "observation" or not isinstance(data.get("observation"), dict):
            raise _Garbled(f"the server answered with a {message.get('type')!r} message, not an observation")
        return dict(data)

    def reset_result(self, data: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        observation = data["observation"]
        self.last_info, self.in_episode = dict(observation.get("info", {})), True
        return str(observation.get("text", "")), dict(self.last_info)

    def step_result(self, data: Mapping[str, Any]) -> StepResult:
        observation = data["observation"]
        reward = data.get("reward")
        if not isinstance(reward, (int, float)):
            raise _Garbled("the server's reply to a step carries no reward (a reset's reply read out of turn?)")
        info = dict(observation.get("info", {}))
        self.last_info = info
        return (str(observation.get("text", "")), float(reward), bool(observation.get("terminated", False)),
                bool(observation.get("truncated", False)), info)

    def lost(self, why: str) -> StepResult:
        """A step the serving path lost: the env's scoring-error shape; the episode is over."""
        self.in_episode = False
        info = self.last_info
        return remote_scoring_error(f"gym-sysmath server {self.base}: {why}", task_id=info.get("task_id"),
                                    family=info.get("family"), turn=info.get("turn"))

    def reset_failure(self, exc: Exception, last_try: bool) -> Exception | None:
        """What a failed reset raises (``exc`` itself, or what it means), or ``None``: open a new
        session and try again (the session died between episodes, or the connection did)."""
        if isinstance(exc, RemoteUnavailable):
            return exc
        if isinstance(exc, RemoteEnvError):
            if str(exc).startswith(DRAINING_PREFIX):
                return RemoteUnavailable(f"the gym-sysmath server at {self.base} is draining and starts no new "
                                         "episode")
            return exc if last_try or not _is_lost_session(exc) else None
        if isinstance(exc, _retryable_on_reset()):
            return self.unreachable(exc) if last_try else None
        return exc

    @staticmethod
    def lost_because(exc: Exception, message_timeout_s: float) -> str | None:
        """Why a step was lost on the serving path (its result is then a scoring error), or
        ``None`` when ``exc`` is not the path's failure (the server refused the call: re-raised)."""
        if isinstance(exc, RemoteEnvError):
            return str(exc) if _is_lost_session(exc) else None
        if isinstance(exc, TimeoutError):
            return f"no reply within {message_timeout_s:.0f} s"
        if isinstance(exc, _Garbled):
            return str(exc)
        if isinstance(exc, _transport_errors()):  # the connection dropped, the server died
            return f"the connection was lost mid-step ({type(exc).__name__}: {exc})"
        return None

    def unreachable(self, exc: BaseException) -> RemoteUnavailable:
        text = str(exc)
        if "401" in text:
            return RemoteUnavailable(f"the gym-sysmath server at {self.base} refused the token: pass token= or set "
                                     f"{TOKEN_ENV} (the value given to `gym-sysmath serve --token`)")
        if "503" in text:
            return RemoteUnavailable(f"the gym-sysmath server at {self.base} is draining and takes no new sessions")
        return RemoteUnavailable(f"cannot open a session on the gym-sysmath server at {self.base}: {exc}")


def _run_code_message(code: str) -> str:
    """A ``run_code`` tool call: its code, marked as a call, not a reply."""
    return json.dumps({"type": "step", "data": {"text": code if isinstance(code, str) else str(code),
                                                "tool": "run_code"}})


def _is_lost_session(error: RemoteEnvError) -> bool:
    return str(error).startswith(EXPIRED_PREFIX)


def _transport_errors() -> tuple[type[BaseException], ...]:
    """What a dropped, refused or silent connection raises (``websockets`` imported on use)."""
    from websockets.exceptions import WebSocketException

    return (OSError, TimeoutError, EOFError, WebSocketException)


def _retryable_on_reset() -> tuple[type[BaseException], ...]:
    """What makes a reset open a new session and try once more."""
    return (_Garbled, *_transport_errors())


class _Held:
    """A sync client's socket, apart from the env so that a finalizer can close it: an env dropped
    without ``close()`` would otherwise keep its session (and a draining server) open, since the
    socket's reader thread keeps the socket alive."""

    socket: Any = None

    def close(self) -> None:
        socket, self.socket = self.socket, None
        if socket is not None:
            try:
                socket.close()
            except Exception:  # already gone
                pass


class RemoteSysmathEnv(gym.Env):
    """A served env: ``gymnasium.Env`` whose episodes run on a ``gym-sysmath serve`` server.

    Args:
        url: the server, e.g. ``http://10.0.0.5:8040`` (``ws://`` works too).
        env_id: the id to play (may be omitted when the server serves one id).
        token: the server's token; default ``GYM_SYSMATH_SERVE_TOKEN`` from the environment.
        message_timeout_s: how long one reply may take before the step counts as lost.
        **env_kwargs: ``gym.make`` arguments (filters, difficulty, split, max_turns...), sent
            with every reset; ``sandbox`` and ``pool_size`` are the server's.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, url: str, env_id: str | None = None, *, token: str | None = None,
                 connect_timeout_s: float = 30.0, message_timeout_s: float = CLIENT_MESSAGE_TIMEOUT_S,
                 **env_kwargs: Any):
        from gym_sysmath.env import MAX_ACTION_CHARS, MAX_OBSERVATION_CHARS

        self.codec = _Codec(url, env_id, token, env_kwargs)
        self.connect_timeout_s, self.message_timeout_s = connect_timeout_s, message_timeout_s
        self.observation_space = text_space(MAX_OBSERVATION_CHARS)
        self.action_space = text_space(MAX_ACTION_CHARS)
        self._held = _Held()
        weakref.finalize(self, self._held.close)  # dropped unclosed: the session still ends

    def _open(self) -> Any:
        from websockets.sync.client import connect

        if self._held.socket is None:
            try:
                connection = connect(self.codec.ws_url, additional_headers=self.codec.headers,
                                     open_timeout=self.connect_timeout_s, max_size=None,
                                     ping_interval=20.0, ping_timeout=60.0)
                self._held.socket = connection.__enter__()  # held across calls; `_drop` closes it
            except Exception as exc:  # refused, unreachable, a 401/503 handshake
                raise self.codec.unreachable(exc) from exc
        return self._held.socket

    def _call(self, message: str) -> dict[str, Any]:
        from websockets.exceptions import ConnectionClosed

        socket = self._open()
        try:
            try:
                socket.send(message)
            except ConnectionClosed:  # the server may have said why before it closed (a full server)
                pass
            return self.codec.read(socket.recv(timeout=self.message_timeout_s))
        except RemoteEnvError:
            raise  # the server answered this call: the session is in step
        except BaseException:  # no reply read (interrupted, timed out, dropped, garbled): never reuse it
            self._drop()
            self.codec.in_episode = False
            raise

    def _drop(self) -> None:
        socket, self._held.socket = self._held.socket, None
        if socket is not None:
            try:
                socket.close()
            except Exception:  # already gone
                pass

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        message = self.codec.reset_message(seed, options)
        for last_try in (False, True):  # a session that died between episodes is replaced once
            try:
                return self.codec.reset_result(self._call(message))
            except Exception as exc:
                failure = self.codec.reset_failure(exc, last_try)
                if failure is exc:
                    raise
                if failure is not None:
                    raise failure from exc
            self._drop()
        raise AssertionError("unreachable")

    def step(self, action: Any) -> StepResult:
        return self._step(self.codec.step_message(action))

    def run_code(self, code: str) -> StepResult:
        """One ``run_code`` tool call on the server (an env made with ``code_via="tool"``): the
        served env's ``run_code``, with ``step``'s five values and its lost-step handling."""
        return self._step(_run_code_message(code))

    def _step(self, message: str) -> StepResult:
        if not self.codec.in_episode:
            raise RuntimeError("step before reset (or after a lost step): call reset first")
        try:
            return self.codec.step_result(self._call(message))
        except Exception as exc:
            why = self.codec.lost_because(exc, self.message_timeout_s)
            if why is None:
                raise
        self._drop()
        return self.codec.lost(why)

    def close(self) -> None:
        if self._held.socket is not None:
            try:
                self._held.socket.send(json.dumps({"type": "close", "data": {}}))
            except Exception:  # already gone
                pass
        self._drop()

    def __repr__(self) -> str:
        return f"RemoteSysmathEnv({self.codec.base!r}, {self.codec.env_id!r})"


async def _close_quietly(socket: Any) -> None:
    try:
        await socket.close()
    except Exception:  # already gone
        pass


class AsyncRemoteSysmathEnv:
    """``RemoteSysmathEnv`` for asyncio callers: ``await reset()``, ``await step()``, ``await close()``
    (``AsyncSysmathEnv``'s API), without a thread per episode."""

    def __init__(self, url: str, env_id: str | None = None, *, token: str | None = None,
                 connect_timeout_s: float = 30.0, message_timeout_s: float = CLIENT_MESSAGE_TIMEOUT_S,
                 **env_kwargs: Any):
        import asyncio

        self.codec = _Codec(url, env_id, token, env_kwargs)
        self.connect_timeout_s, self.message_timeout_s = connect_timeout_s, message_timeout_s
        self._socket: Any = None
        self._busy = asyncio.Lock()
        self.closed = False

    async def _open(self) -> Any:
        from websockets.asyncio.client import connect

        if self._socket is None:
            try:
                self._socket = await connect(self.codec.ws_url, additional_headers=self.codec.headers,
                                             open_timeout=self.connect_timeout_s, max_size=None,
                                             ping_interval=20.0, ping_timeout=60.0)
            except Exception as exc:
                raise self.codec.unreachable(exc) from exc
        return self._socket

    async def _call(self, message: str) -> dict[str, Any]:
        import asyncio

        from websockets.exceptions import ConnectionClosed

        socket = await self._open()
        try:
            try:
                await socket.send(message)
            except ConnectionClosed:  # the server may have said why before it closed (a full server)
                pass
            return self.codec.read(await asyncio.wait_for(socket.recv(), self.message_timeout_s))
        except RemoteEnvError:
            raise  # the server answered this call: the session is in step
        except BaseException:  # cancelled, timed out, dropped, garbled: its reply may still come, so
            self._socket = None  # the socket is never read again
            self.codec.in_episode = False
            asyncio.get_running_loop().create_task(_close_quietly(socket))
            raise

    async def _drop(self) -> None:
        socket, self._socket = self._socket, None
        if socket is not None:
            try:
                await socket.close()
            except Exception:
                pass

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
                    ) -> tuple[str, dict[str, Any]]:
        message = self.codec.reset_message(seed, options)
        async with self._busy:
            if self.closed:
                raise RuntimeError("this AsyncRemoteSysmathEnv is closed")
            for last_try in (False, True):
                try:
                    return self.codec.reset_result(await self._call(message))
                except Exception as exc:
                    failure = self.codec.reset_failure(exc, last_try)
                    if failure is exc:
                        raise
                    if failure is not None:
                        raise failure from exc
                await self._drop()
        raise AssertionError("unreachable")

    async def step(self, action: Any) -> StepResult:
        return await self._step(self.codec.step_message(action))

    async def run_code(self, code: str) -> StepResult:
        """``RemoteSysmathEnv.run_code``, awaited."""
        return await self._step(_run_code_message(code))

    async def _step(self, message: str) -> StepResult:
        async with self._busy:
            if not self.codec.in_episode:
                raise RuntimeError("step before reset (or after a lost step): call reset first")
            try:
                return self.codec.step_result(await self._call(message))
            except Exception as exc:
                why = self.codec.lost_because(exc, self.message_timeout_s)
                if why is None:
                    raise
            await self._drop()
            return self.codec.lost(why)

    async def close(self) -> None:
        async with self._busy:
            self.closed = True
            if self._socket is not None:
                try:
                    await self._socket.send(json.dumps({"type": "close", "data": {}}))
                except Exception:
                    pass
            await self._drop()

    async def __aenter__(self) -> AsyncRemoteSysmathEnv:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncRemoteSysmathEnv({self.codec.base!r}, {self.codec.env_id!r})"

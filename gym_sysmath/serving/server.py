"""``gym-sysmath serve``: every env id behind one OpenEnv server, for trainers on other machines or
in other processes (TRL's ``environment_factory``, async rollout loops, Ray workers).

One WebSocket session (OpenEnv's ``/ws``) is one env at a time: ``reset`` with ``env_id``,
``env_kwargs``, ``seed`` and ``options`` makes it (or reuses it when those match), ``step`` plays
the episode, closing the socket gives its container back. Every session's env shares this
process's warm sandbox pool, which the server holds for its whole life (``--warm N`` pre-starts
N containers), so a trainer that restarts does not pay for the reserve again.

What OpenEnv's server leaves to us, and this module adds:

- **A token** (``--token`` or ``GYM_SYSMATH_SERVE_TOKEN``, sent as ``Authorization: Bearer``) on
  every route but ``/health``; refusing to start on a non-loopback address without one.
- **``/health`` with capacity**: live sessions, calls in flight, the pool's leased containers,
  warm reserve, starts and queue, and the served task sets (clients check a dataset row's
  ``task_set`` against them).
- **Timeouts that fit the lease wait**: no idle reaper that could close a session in the middle
  of a step; ours closes only sessions idle between calls for ``--idle-timeout`` seconds, and
  clients wait ``CLIENT_MESSAGE_TIMEOUT_S`` for a reply (above the 300 s lease wait).
- **Graceful drain**: SIGTERM, the first Ctrl-C or ``POST /drain`` refuses new sessions and
  waits for the live ones to close (``--drain-timeout``), then exits; a second Ctrl-C stops now.
- **No stateless routes**: OpenEnv's production mode, so no HTTP ``/reset`` or ``/step`` makes a
  throwaway env outside the session count.

``openenv`` is imported here only (the ``serve`` extra, in an environment of its own: it pins an
``mcp`` that verifiers cannot share); the client (``client.py``) needs only ``websockets``.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym

from gym_sysmath.serving.protocol import (
    DEFAULT_PORT,
    DRAINING_PREFIX,
    EXPIRED_PREFIX,
    MAX_MESSAGE_BYTES,
    SERVER_CHOSEN_KWARGS,
    jsonable,
)

__all__ = ["DEFAULT_DRAIN_TIMEOUT_S", "DEFAULT_IDLE_TIMEOUT_S", "DEFAULT_MAX_SESSIONS", "OPEN_PATHS", "SERVED_PATHS",
           "ServeError", "ServeSettings", "build_app", "health", "is_loopback", "prime", "serve", "start_drain"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_SESSIONS = 512
#: a session idle (between calls) this long is closed and its container handed back
DEFAULT_IDLE_TIMEOUT_S = 1800.0
DEFAULT_DRAIN_TIMEOUT_S = 900.0
#: paths a caller without the token may use: a load balancer's probe must not need the secret
OPEN_PATHS = frozenset({"/health"})
#: every path the server answers; OpenEnv's others (``/mcp``'s sessions tied to no socket, the
#: harness and task routes, the docs) are not served: they bypass the session count and the drain
SERVED_PATHS = frozenset({"/health", "/ws", "/drain", "/schema", "/metadata"})


class ServeError(ValueError):
    """A setting the server cannot run with (one line for the CLI)."""


@dataclass
class ServeSettings:
    """How ``gym-sysmath serve`` runs; the CLI's flags, one field each."""

    env_ids: tuple[str, ...] = ()  # the ids served; empty: every registered id
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = None
    max_sessions: int = DEFAULT_MAX_SESSIONS
    warm: int = 0  # containers pre-started and kept warm for the server's life
    sandbox: str = "docker"
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S
    allow_origins: tuple[str, ...] = ()  # browser origins a tokenless server accepts (default: none)

    def check(self) -> None:
        """Refuse what would serve unsafely or not at all (``ServeError``, one line)."""
        import gym_sysmath  # noqa: F401  (registers the ids)
        from gym_sysmath.families import all_ids

        unknown = [env_id for env_id in self.env_ids if env_id not in all_ids()]
        if unknown:
            raise ServeError(f"unknown env id(s) {unknown}; served ids are {list(all_ids())}")
        if not self.token and not is_loopback(self.host):
            raise ServeError(f"--host {self.host} is reachable from other machines: set GYM_SYSMATH_SERVE_TOKEN "
                             "(or --token-file); without a token the server binds only to loopback")
        if self.sandbox == "process" and not is_loopback(self.host):
            raise ServeError(f"--sandbox process runs tool turns as host processes, unisolated: serve it on "
                             f"loopback only, not --host {self.host} (the docker sandbox isolates)")
        if self.max_sessions < 1:
            raise ServeError(f"--max-sessions must be at least 1, got {self.max_sessions}")
        if self.warm < 0:
            raise ServeError(f"--warm must be 0 or more, got {self.warm}")
        if self.idle_timeout_s <= 0 or self.drain_timeout_s < 0:
            raise ServeError("--idle-timeout must be positive and --drain-timeout 0 or more")

    def served_ids(self) -> tuple[str, ...]:
        from gym_sysmath.families import all_ids

        return self.env_ids or all_ids()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def prime(settings: ServeSettings) -> float:
    """Reset one env of each served family to each of its eval tasks, so the per-process caches a
    first reset fills (CsappExact's difficulty calibration: about 0.2 s of CPU per template) are
    filled before the first session, not by 128 sessions at once under the GIL. No container is
    leased (a reset runs no code). Returns the seconds it took."""
    from gym_sysmath.families import family_of

    started = time.monotonic()
    primed: set[str] = set()
    for env_id in settings.served_ids():
        row = family_of(env_id)
        if row is None or row.name in primed:
            continue
        primed.add(row.name)
        env = gym.make(env_id, sandbox=settings.sandbox)
        try:
            for task_id in env.unwrapped.task_ids:  # type: ignore[attr-defined]
                env.reset(seed=0, options={"task_id": task_id})
        finally:
            env.close()
    return time.monotonic() - started


@dataclass
class _Board:
    """What the server knows about its sessions, for ``/health``, the idle reaper and the drain."""

    settings: ServeSettings
    draining: bool = False
    drain_started: float | None = None
    calls_in_flight: int = 0
    envs: set[Any] = field(default_factory=set)  # every live _ServedEnv
    lock: threading.Lock = field(default_factory=threading.Lock)
    sandbox: Any = None  # the pool held for the server's life
    primed: bool = False  # every served family's first-reset caches are filled (``prime``)
    cut_sessions: int = 0  # live sessions a timed-out drain cut (the exit status says so)


def _served_env_class(board: _Board) -> tuple[type, type, type]:
    """The OpenEnv Environment, Action and Observation classes (``openenv`` imported here)."""
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State
    from pydantic import Field

    class SysmathAction(Action):
        """One reply of the agent: the text ``env.step`` takes."""

        #: Any JSON value, passed to ``env.step`` as sent: a non-string gets the env's own format error
        text: Any = Field(description="the agent's reply (an answer, or a fenced code block for a tool turn)")
        #: ``run_code``: ``text`` is the code of one run_code tool call (an env made with
        #: ``code_via="tool"``: TRL's ``environment_factory``), not a reply
        tool: Literal["run_code"] | None = Field(default=None, description="run_code: text is a run_code call's code")

    class SysmathObservation(Observation):
        """``env.reset`` / ``env.step``'s results; ``done`` is ``terminated or truncated``."""

        text: str = Field(default="", description="the env's observation")
        info: dict[str, Any] = Field(default_factory=dict, description="the env's info dict")
        terminated: bool = False
        truncated: bool = False

    class SysmathServedEnv(Environment):
        """One session's env: made on its first reset, remade when the id or kwargs change."""

        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self.env: gym.Env | None = None
            self.made_with: tuple[str, str] | None = None
            self.idle_since = time.monotonic()
            self.expired: str | None = None
            self.steps = 0
            self.episode_id: str | None = None
            self._call = threading.Lock()
            with board.lock:
                board.envs.add(self)

        def _enter(self) -> None:
            if self.expired:  # the client opens a new session (client.py: EXPIRED_PREFIX)
                raise RuntimeError(self.expired)
            with board.lock:
                board.calls_in_flight += 1
            self.idle_since = float("inf")

        def _leave(self) -> None:
            with board.lock:
                board.calls_in_flight -= 1
            self.idle_since = time.monotonic()

        def reset(self, seed: int | None = None, episode_id: str | None = None, env_id: str | None = None,
                  env_kwargs: Mapping[str, Any] | None = None, options: Mapping[str, Any] | None = None,
                  **unknown: Any) -> SysmathObservation:
            if unknown:
                raise ValueError(f"reset takes env_id, env_kwargs, seed and options, not {sorted(unknown)}")
            if board.draining:  # the live episode has ended: no new one starts here
                raise RuntimeError(f"{DRAINING_PREFIX}it starts no new episode; reset on another server")
            with self._call:
                self._enter()
                try:
                    env = self._env_for(env_id, dict(env_kwargs or {}))
                    observation, info = env.reset(seed=seed, options=dict(options) if options else None)
                finally:
                    self._leave()
            self.steps, self.episode_id = 0, episode_id
            return SysmathObservation(text=observation, info=jsonable(info), reward=None, done=False)

        def _env_for(self, env_id: str | None, env_kwargs: dict[str, Any]) -> gym.Env:
            served = board.settings.served_ids()
            if env_id is None:
                if len(served) != 1:
                    raise ValueError(f"reset needs an env_id: this server serves {list(served)}")
                env_id = served[0]
            if env_id not in served:
                import difflib

                close = difflib.get_close_matches(env_id, served, 1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"this server does not serve {env_id!r}{hint}; it serves {list(served)}")
            refused = sorted(SERVER_CHOSEN_KWARGS & set(env_kwargs))
            if refused:
                raise ValueError(f"env_kwargs {refused} are the server's to choose (it runs sandbox="
                                 f"{board.settings.sandbox!r}); leave them out")
            key = (env_id, json.dumps(jsonable(env_kwargs), sort_keys=True))
            if self.env is None or self.made_with != key:
                self._close_env()
                self.env = gym.make(env_id, sandbox=board.settings.sandbox, **env_kwargs)
                self.made_with = key
            return self.env

        def step(self, action: SysmathAction, timeout_s: float | None = None, **_: Any) -> SysmathObservation:
            with self._call:
                if self.env is None and not self.expired:
                    raise RuntimeError("step before reset: reset the session with an env_id first")
                self._enter()
                try:
                    assert self.env is not None
                    sent = action.text
                    if isinstance(sent, dict) and set(sent) == {"unsendable"}:  # client.py: not JSON-able
                        sent = _stand_in(str(sent["unsendable"]))
                    outcome: tuple[Any, Any, bool, bool, dict[str, Any]]
                    if action.tool == "run_code":  # a function-tool turn of a code_via='tool' env
                        from gym_sysmath.env import core_env

                        outcome = core_env(self.env).run_code(sent)
                    else:
                        outcome = self.env.step(sent)
                    observation, reward, terminated, truncated, info = outcome
                finally:
                    self._leave()
            self.steps += 1
            return SysmathObservation(text=observation, info=jsonable(info), reward=float(reward),
                                      done=bool(terminated or truncated), terminated=bool(terminated),
                                      truncated=bool(truncated))

        @property
        def state(self) -> State:
            return State(episode_id=self.episode_id, step_count=self.steps)

        def _close_env(self) -> None:
            if self.env is not None:
                env, self.env, self.made_with = self.env, None, None
                env.close()

        def expire(self, reason: str, idle_timeout_s: float) -> None:
            """Close an idle session's env (its container goes back); its next call fails with ``reason``."""
            if not self._call.acquire(blocking=False):  # a call came in meanwhile: not idle
                return
            try:
                if time.monotonic() - self.idle_since <= idle_timeout_s:
                    return
                self.expired = reason
                self._close_env()
            finally:
                self._call.release()

        def close(self) -> None:
            with self._call:
                self._close_env()
            with board.lock:
                board.envs.discard(self)

    return SysmathServedEnv, SysmathAction, SysmathObservation


class _Gate:
    """ASGI middleware in front of OpenEnv's app: only ``SERVED_PATHS``; the token on all but
    ``/health``; without a token, no browser page (an ``Origin`` not allowed) and no name but
    loopback in ``Host`` (DNS rebinding); a session is the socket's own (no ``session_id``
    attach); no new session while draining."""

    def __init__(self, app: Callable[..., Any], board: _Board):
        self.app, self.board = app, board

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        refusal = self._refusal(scope)
        if refusal is not None:
            return await _refuse(scope, send, *refusal)
        return await self.app(scope, receive, send)

    def _refusal(self, scope: Mapping[str, Any]) -> tuple[int, str] | None:
        path, settings = scope["path"], self.board.settings
        if path not in SERVED_PATHS:
            return 404, f"not served: {path[:100]} (this server answers {sorted(SERVED_PATHS)})"
        token = settings.token
        if not token:
            origin = _header(scope, b"origin")
            if origin is not None and origin not in settings.allow_origins:
                return 403, "a page in a browser may not use a tokenless server (set a token, or --allow-origin)"
            if not is_loopback(_host_name(_header(scope, b"host") or "")):
                return 403, "a tokenless server answers only requests addressed to a loopback name"
        if path in OPEN_PATHS:
            return None
        if token and not hmac.compare_digest(_bearer(scope).encode(), token.encode()):
            return 401, "a valid token is required (Authorization: Bearer TOKEN)"
        if path == "/ws" and b"session_id" in scope.get("query_string", b""):
            return 403, "a session belongs to the socket that opened it: open /ws without session_id"
        if self.board.draining and path == "/ws":
            return 503, "the server is draining: it takes no new sessions"
        return None


def _header(scope: Mapping[str, Any], wanted: bytes) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == wanted:
            return str(value.decode("latin-1"))
    return None


def _host_name(host: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:8040`` is ``::1``)."""
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _bearer(scope: Mapping[str, Any]) -> str:
    text = _header(scope, b"authorization") or ""
    return text[7:].strip() if text[:7].lower() == "bearer " else ""


def _stand_in(type_name: str) -> object:
    """An object whose type is named ``type_name``: what a client sent that JSON cannot carry
    (bytes, a tuple, NaN), so the env refuses it with its own words for that type."""
    return type(type_name[:60] or "object", (), {})()


async def _refuse(scope: Mapping[str, Any], send: Callable[..., Any], status: int, message: str) -> None:
    body = json.dumps({"detail": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
    elif "websocket.http.response" in scope.get("extensions", {}):  # a real status the client can read
        await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1008 if status == 401 else 1013, "reason": message[:120]})


def health(board: _Board, server: Any) -> dict[str, Any]:
    """``/health``: OpenEnv's ``status`` plus the capacity a router or an operator reads."""
    from gym_sysmath.families import family_of
    from gym_sysmath.task_sets import installed

    stats = board.sandbox.stats() if board.sandbox is not None else None
    served = board.settings.served_ids()
    families = sorted({row.name for row in (family_of(env_id) for env_id in served) if row is not None})
    with board.lock:
        in_flight, envs = board.calls_in_flight, len(board.envs)
    return {
        "status": "draining" if board.draining else "healthy",
        "ready": board.primed and (stats is None or stats.clean_now + stats.leased_now >= board.settings.warm),
        "sessions": server.active_sessions,
        "max_sessions": board.settings.max_sessions,
        "calls_in_flight": in_flight,
        "envs": envs,
        "pool": None if stats is None else {
            "backend": board.settings.sandbox, "leased": stats.leased_now, "reserve": stats.clean_now,
            "starting": stats.starting_now, "queued": stats.waiting_now, "warm_target": board.settings.warm},
        "env_ids": list(served),
        "task_sets": {name: installed(name).label for name in families},  # what a dataset row's task_set must be
        "task_set_hashes": {name: installed(name).hash for name in families},
        "idle_timeout_s": board.settings.idle_timeout_s,
    }


def _without_web_ui() -> None:
    """This server mounts no OpenEnv web UI, so keep gradio out (2.4 s of every start): OpenEnv
    imports its web interface only when it can (``ModuleNotFoundError`` leaves it unset)."""
    import sys

    if "gradio" not in sys.modules and "openenv" not in sys.modules:
        sys.modules["gradio"] = None  # type: ignore[assignment]  # an import of it raises ModuleNotFoundError


def build_app(settings: ServeSettings) -> tuple[Any, _Board, Any]:
    """The ASGI app (gated), its board, and OpenEnv's ``HTTPEnvServer`` (for the session count)."""
    _without_web_ui()
    from fastapi import FastAPI
    from openenv.core.env_server.http_server import HTTPEnvServer
    from openenv.core.env_server.types import ConcurrencyConfig, ServerMode

    board = _Board(settings)
    env_class, action_class, observation_class = _served_env_class(board)
    app = FastAPI(title="gym-sysmath env server", version="1",
                  description="Every gym-sysmath env id over OpenEnv's WebSocket protocol (/ws).")
    server = HTTPEnvServer(env_class, action_class, observation_class,
                           concurrency_config=ConcurrencyConfig(max_concurrent_envs=settings.max_sessions,
                                                                session_timeout=None),
                           env_name="gym-sysmath")

    @app.get("/health")
    async def _health() -> dict[str, Any]:
        return health(board, server)

    @app.post("/drain")
    async def _drain() -> dict[str, Any]:
        start_drain(board)
        return health(board, server)

    server.register_routes(app, mode=ServerMode.PRODUCTION)  # our /health is registered first and wins
    return _Gate(app, board), board, server


def start_drain(board: _Board) -> None:
    if not board.draining:
        board.draining, board.drain_started = True, time.monotonic()
        logger.warning("draining: no new sessions; waiting for the live ones to close")


async def _watch(board: _Board, server: Any, uvicorn_server: Any) -> None:
    """Close idle sessions; end the process when a drain has no live session left (or timed out)."""
    settings = board.settings
    while not uvicorn_server.should_exit:
        await asyncio.sleep(0.2)
        now = time.monotonic()
        with board.lock:
            idle = [env for env in board.envs if now - env.idle_since > settings.idle_timeout_s and not env.expired]
        for env in idle:
            reason = (f"{EXPIRED_PREFIX}idle for over {settings.idle_timeout_s:.0f} s (--idle-timeout); its "
                      "container went back to the pool: open a new session")
            await asyncio.get_running_loop().run_in_executor(None, env.expire, reason, settings.idle_timeout_s)
        if board.draining and board.drain_started is not None:
            waited = now - board.drain_started
            if server.active_sessions == 0 or waited > settings.drain_timeout_s:
                board.cut_sessions = server.active_sessions
                logger.warning("drained: %d session(s) still open after %.1f s", server.active_sessions, waited)
                uvicorn_server.should_exit = True


class _QuietDenials(logging.Filter):
    """uvicorn (0.54, websockets-sansio) logs an error for every WebSocket refused with an HTTP
    response (the ASGI denial extension: our 401/403/503), though the client got it: drop that line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "ASGI callable returned without completing handshake."


def serve(settings: ServeSettings, *, ready: Callable[[str], None] | None = None) -> int:
    """Run the server until drained; ``ready(url)`` is called once it listens. Returns an exit code."""
    import uvicorn

    from gym_sysmath.sandbox.pool import acquire_shared, release_shared

    settings.check()
    app, board, server = build_app(settings)
    board.sandbox = acquire_shared(settings.sandbox)
    if settings.warm:
        threading.Thread(target=board.sandbox.prestart, args=(settings.warm, 600.0), daemon=True,
                         name="gym-sysmath-serve-warm").start()

    def prime_then_mark() -> None:
        try:
            logger.info("primed the served families in %.1f s", prime(settings))
        except Exception:  # a session's own reset reports what is wrong
            logger.exception("priming the served families failed")
        board.primed = True

    threading.Thread(target=prime_then_mark, daemon=True, name="gym-sysmath-serve-prime").start()

    class DrainingServer(uvicorn.Server):
        """First SIGTERM/SIGINT drains; a second SIGINT stops at once (uvicorn's own)."""

        def handle_exit(self, sig: int, frame: Any) -> None:
            if not board.draining:
                start_drain(board)
                return
            super().handle_exit(sig, frame)

        async def startup(self, sockets: Sequence[Any] | None = None) -> None:
            await super().startup(sockets=list(sockets) if sockets is not None else None)
            asyncio.get_running_loop().create_task(_watch(board, server, self))
            if ready is not None:
                ready(f"http://{settings.host}:{settings.port}")

    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning",
                            ws_ping_interval=20.0, ws_ping_timeout=60.0, ws_max_size=MAX_MESSAGE_BYTES,
                            timeout_graceful_shutdown=5)
    runner = DrainingServer(config)
    logging.getLogger("uvicorn.error").addFilter(_QuietDenials())
    try:
        runner.run()
    finally:
        release_shared(board.sandbox)
    if not runner.started or board.cut_sessions:
        return 1  # it never served, or the drain timed out and cut live sessions
    return 0


"""The sandbox facade: a warm pool of workers, jobs with one retry, and Python sessions.

Envs in one process share a pool (``acquire_shared``), so a vector of envs keeps one set of
warm containers. A harness failure is retried once on another worker; if it persists the
``SandboxError`` reaches the env, which reports a ``scoring_error``.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import threading
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from gym_sysmath.sandbox.execution import (
    ExecutionResult,
    Job,
    Limits,
    SandboxError,
    SandboxUnavailableError,
)
from gym_sysmath.sandbox.workers import ContainerSettings, DockerWorker, ProcessWorker, Worker

BACKENDS = ("docker", "process")
SESSION_LIMITS = Limits(wall_s=20.0, cpu_s=20.0)  # per turn
SESSION_LIFETIME_S = 600.0  # CPU rlimit of the session process over all its turns


def default_pool_size() -> int:
    return max(2, os.cpu_count() or 1)


@dataclasses.dataclass(frozen=True)
class PoolStats:
    """What a pool has done since it started; the hostile tests and the soak run watch it.

    ``workers_lost`` counts workers thrown away because they broke (died, were killed, could
    not clean up after a job), not those closed with the pool; ``retries`` counts harness
    failures absorbed by re-running a job or rebuilding a session on another worker.
    """

    requests: int
    workers_started: int
    workers_lost: int
    retries: int
    live_workers: int


class Sandbox:
    """Runs jobs and sessions on a lazily grown pool of warm workers."""

    def __init__(self, backend: str = "docker", pool_size: int | None = None,
                 settings: ContainerSettings | None = None):
        if backend not in BACKENDS:
            raise SandboxUnavailableError(f"unknown sandbox backend {backend!r}; choose one of {BACKENDS}")
        self.backend = backend
        self.pool_size = pool_size or default_pool_size()
        self.settings = settings or ContainerSettings()
        self._idle: list[Worker] = []
        self._busy: set[Worker] = set()
        self._starting = 0
        self._cond = threading.Condition()
        self._closed = False
        self._builders: dict[str, Worker] = {}  # build key -> the worker whose cache holds it
        self._counts = {"requests": 0, "workers_started": 0, "workers_lost": 0, "retries": 0}
        self._factory = self._make_factory()
        self._finalizer = weakref.finalize(self, _destroy_all, self._idle, self._busy)
        _all_sandboxes.add(self)

    def _make_factory(self) -> Callable[[], Worker]:
        if self.backend == "process":
            warnings.warn(
                "sandbox='process' runs code as host processes: no network or filesystem isolation, so code "
                "can read files on this machine (task files included). Use it for notebooks and debugging, "
                "not for rewards you train on; the Docker backend isolates.", UserWarning, stacklevel=4)
            return ProcessWorker
        from gym_sysmath.sandbox import image

        client = image.docker_client()
        tag = image.require_current_image(client)
        image.require_runtime(client, self.settings.runtime)
        image.reap_orphans(client)
        owner = image.owner_label()
        return lambda: DockerWorker(client, tag, self.settings, owner)

    # ------------------------------------------------------------------ pool

    def _acquire(self, pinned: Worker | None = None, prefer: Worker | None = None) -> Worker:
        with self._cond:
            while True:
                if self._closed:
                    raise SandboxError("sandbox_closed", "the sandbox was closed")
                if prefer is not None and prefer in self._idle:
                    self._idle.remove(prefer)
                    self._busy.add(prefer)
                    return prefer
                if pinned is not None:
                    if pinned.broken:
                        raise SandboxError("worker_died", f"{pinned.name} is gone")
                    if pinned in self._idle:
                        self._idle.remove(pinned)
                        self._busy.add(pinned)
                        return pinned
                elif self._idle:
                    worker = self._idle.pop()
                    self._busy.add(worker)
                    return worker
                elif len(self._busy) + self._starting < self.pool_size:
                    self._starting += 1
                    break
                self._cond.wait()
        try:
            worker = self._factory()
        finally:
            with self._cond:
                self._starting -= 1
                self._cond.notify_all()
        with self._cond:
            self._busy.add(worker)
            self._counts["workers_started"] += 1
        return worker

    def _release(self, worker: Worker) -> None:
        with self._cond:
            self._busy.discard(worker)
            if worker.broken or self._closed:
                if worker.broken:
                    self._counts["workers_lost"] += 1
                worker.destroy()
            else:
                self._idle.append(worker)
            self._cond.notify_all()

    def _request(self, message: dict[str, Any], timeout_s: float, pinned: Worker | None = None,
                 prefer: Worker | None = None) -> tuple[Worker, dict[str, Any]]:
        worker = self._acquire(pinned, prefer)
        with self._cond:
            self._counts["requests"] += 1
        try:
            return worker, worker.request(message, timeout_s)
        finally:
            self._release(worker)

    # ------------------------------------------------------------------ jobs

    def run(self, job: Job) -> ExecutionResult:
        """Run one job; retried once on another worker if the harness fails."""
        message = {"op": "run", "job": job.to_wire()}
        key = job.build_key
        try:
            with self._cond:
                preferred = self._builders.get(key)
            worker, reply = self._request(message, job.request_timeout_s, prefer=preferred)
        except SandboxError as first:
            if first.cause == "sandbox_closed":
                raise
            self.count_retry()
            try:
                worker, reply = self._request(message, job.request_timeout_s)
            except SandboxError as second:
                raise SandboxError(second.cause, f"{second.detail} (after a retry; first: {first})") from second
        if key is not None:
            with self._cond:
                self._builders.pop(key, None)
                self._builders[key] = worker
                while len(self._builders) > 4096:
                    self._builders.pop(next(iter(self._builders)))
        return ExecutionResult.from_wire(reply.get("result") or {})

    def count_retry(self) -> None:
        """A harness failure was absorbed by a retry (of a job, or of a session's rebuild)."""
        with self._cond:
            self._counts["retries"] += 1

    def stats(self) -> PoolStats:
        with self._cond:
            return PoolStats(**self._counts, live_workers=len(self._idle) + len(self._busy))

    def fork_floor(self, code: str) -> float:
        """Benchmark primitive: bare fork + exec(code) + wait inside a worker, in seconds."""
        _, reply = self._request({"op": "fork_floor", "code": code}, 30.0)
        return float(reply["result"]["wall_s"])

    def open_session(self, limits: Limits = SESSION_LIMITS) -> PythonSession:
        return PythonSession(self, limits)

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for worker in idle:
            worker.destroy()
        # busy workers are destroyed by _release when their request returns

    @property
    def closed(self) -> bool:
        return self._closed


def _forget_after_fork(self: Sandbox) -> None:
    """In a forked child (AsyncVectorEnv workers, multiprocessing): the parent's workers are
    not ours. Drop them without destroying them, so neither side breaks the other."""
    self._finalizer.detach()
    self._idle, self._busy = [], set()
    self._cond = threading.Condition()
    self._closed = True


_all_sandboxes: weakref.WeakSet[Sandbox] = weakref.WeakSet()


def _destroy_all(idle: list[Worker], busy: set[Worker]) -> None:
    for worker in [*idle, *busy]:
        worker.destroy()


class PythonSession:
    """A REPL-like Python process in one worker; globals survive across turns.

    If the worker dies (a harness failure) the session is rebuilt once on another worker by
    replaying the turns that completed, then the turn is retried. If the agent's own code
    ends the session (time-out, output flood), the next turn starts a fresh one:
    ``restarts`` counts those, and the env tells the agent its state is gone.
    """

    def __init__(self, sandbox: Sandbox, limits: Limits):
        self.sandbox = sandbox
        self.limits = limits
        self.history: list[str] = []
        self.restarts = 0  # the agent's own code ended the session: its state is gone
        self.rebuilds = 0  # the harness lost the session: it was rebuilt by replaying history
        self._worker: Worker | None = None
        self._name: str | None = None

    def _open(self) -> None:
        lifetime = dataclasses.replace(self.limits, cpu_s=SESSION_LIFETIME_S, wall_s=SESSION_LIFETIME_S)
        worker, reply = self.sandbox._request({"op": "session_open", "limits": lifetime.to_wire()}, 30.0)
        self._worker, self._name = worker, reply["session"]

    def _turn(self, code: str, fetch: str | None) -> ExecutionResult:
        if self._worker is None:
            self._open()
        _, reply = self.sandbox._request(
            {"op": "session_run", "session": self._name, "code": code, "fetch": fetch,
             "limits": self.limits.to_wire()},
            self.limits.wall_s + 15.0, pinned=self._worker)
        raw = reply.get("result") or {}
        if raw.get("status") == "session_ended":
            raise SandboxError("session_lost", str(raw.get("detail", "the session is gone")))
        return ExecutionResult.from_wire(raw)

    def _rebuild(self) -> None:
        self.close()  # best effort: the old worker may still be alive with our processes in it
        self._worker = self._name = None
        for past in self.history:
            self._turn(past, None)

    def run(self, code: str, fetch: str | None = None) -> ExecutionResult:
        """Execute one turn; ``fetch`` names a global whose value comes back in ``.value``."""
        try:
            result = self._turn(code, fetch)
        except SandboxError as first:
            if first.cause == "sandbox_closed":
                raise
            self.sandbox.count_retry()
            try:
                self._rebuild()
                self.rebuilds += 1
                result = self._turn(code, fetch)
            except SandboxError as second:
                raise SandboxError(second.cause, f"{second.detail} (after a retry; first: {first})") from second
        if result.session_ended:
            self._worker = self._name = None
            self.history = []
            self.restarts += 1
        elif code:
            self.history.append(code)
        return result

    def close(self) -> None:
        worker, name = self._worker, self._name
        self._worker = self._name = None
        if worker is not None and not worker.broken and not self.sandbox.closed:
            try:
                self.sandbox._request({"op": "session_close", "session": name}, 30.0, pinned=worker)
            except SandboxError:
                pass


# --------------------------------------------------------------------------- sharing

_shared: dict[tuple[str, int | None], tuple[Sandbox, int]] = {}
_shared_lock = threading.Lock()


def acquire_shared(backend: str = "docker", pool_size: int | None = None) -> Sandbox:
    """The process-wide sandbox for this backend; pair every call with ``release_shared``."""
    key = (backend, pool_size)
    with _shared_lock:
        sandbox, count = _shared.get(key, (None, 0))
        if sandbox is None or sandbox.closed:
            sandbox, count = Sandbox(backend, pool_size), 0
        _shared[key] = (sandbox, count + 1)
        return sandbox


def release_shared(sandbox: Sandbox) -> None:
    with _shared_lock:
        for key, (shared, count) in list(_shared.items()):
            if shared is sandbox:
                if count <= 1:
                    del _shared[key]
                    sandbox.close()
                else:
                    _shared[key] = (shared, count - 1)
                return
    sandbox.close()


def _after_fork_in_child() -> None:
    global _shared_lock
    _shared_lock = threading.Lock()
    _shared.clear()
    for sandbox in list(_all_sandboxes):
        _forget_after_fork(sandbox)


os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _close_shared() -> None:
    with _shared_lock:
        for sandbox, _ in _shared.values():
            sandbox.close()
        _shared.clear()

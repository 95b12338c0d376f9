"""The sandbox facade: one container per rollout, leased from a reserve of clean ones.

The isolation boundary is the rollout (one env instance's episode): its tool turns, builds,
graded runs and timing runs all go to the container its ``Lease`` holds, and no other
rollout's code runs there while it lives. When the lease ends the container is purged (every
process killed, the scratch emptied, what is left checked) before any rollout may take it
again, or destroyed when the purge fails. Per-rollout limits are therefore the container's own
cgroup limits (memory with shmem and memfd, pids, CPU).

Rollouts do not wait for ``docker run``: a reserve of started, clean containers is kept ahead
of demand (the number of live envs, ``expect_rollouts``), replenished and purged in background
threads. A harness failure is retried once on a fresh container; if it persists the
``SandboxError`` reaches the env, which reports a ``scoring_error``.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import queue
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gym_sysmath.sandbox.execution import (
    ExecutionResult,
    Job,
    Limits,
    SandboxError,
    SandboxUnavailableError,
)
from gym_sysmath.sandbox.image.supervisor.statuses import NO_SESSION
from gym_sysmath.sandbox.workers import ContainerSettings, DockerWorker, ProcessWorker, Worker

#: Pool events: containers started (debug), purged and reused (debug), lost (warning), destroyed
#: (debug); a lease that waits (info) or gives up (warning); a job retried on a fresh container (warning).
logger = logging.getLogger(__name__)

BACKENDS = ("docker", "process")
#: A backend an env accepts but no pool starts: code run under it is a scoring error. The
#: task-set digest builds its envs with it, so a reply it grades can never run code.
NO_SANDBOX = "none (the task-set digest runs no code)"
SESSION_LIMITS = Limits(wall_s=20.0, cpu_s=20.0)  # per turn
SESSION_LIFETIME_S = 600.0  # CPU rlimit of the session process over all its turns
#: Clean containers kept beyond what the live rollouts hold, so a reset never waits for a purge.
SPARE_CONTAINERS = 2
#: Containers started at once in the background (the daemon parallelises about this well).
START_CONCURRENCY = 8
PURGE_CONCURRENCY = 4
PURGE_TIMEOUT_S = 30.0
#: How long a rollout waits for a container when ``pool_size`` caps them and all are held.
LEASE_WAIT_S = 300.0


class ForkedLeaseError(RuntimeError):
    """A lease (an episode's container) was used in a process forked from the one that took it.

    Not a ``SandboxError``: the harness did not fail, the caller misused an inherited env, and
    the env raises it out of ``step`` instead of scoring the sample as a harness failure."""


def default_pool_size() -> int:
    """How many episodes callers run at once by default (threads in eval, workers in verify)."""
    return max(2, os.cpu_count() or 1)


@dataclasses.dataclass(frozen=True)
class PoolStats:
    """What a pool has done since it started; the hostile tests and the soak run watch it.

    ``workers_lost`` counts containers thrown away because they broke (died, were killed, could
    not be purged clean), not those closed with the pool or trimmed from the reserve;
    ``retries`` counts harness failures absorbed by re-running a job or rebuilding a session
    on a fresh container; ``purges`` counts leases whose container was purged and reused;
    ``live_workers`` counts the containers that are clean, leased or being purged; the ``*_now``
    fields are the moment's capacity (a server's ``/health``): held by rollouts, clean and waiting
    (the warm reserve), starting, and rollouts queued for a container under a ``pool_size`` cap.
    """

    requests: int
    workers_started: int
    workers_lost: int
    retries: int
    live_workers: int
    leases: int = 0
    purges: int = 0
    leased_now: int = 0
    clean_now: int = 0
    starting_now: int = 0
    waiting_now: int = 0


class Lease:
    """One rollout's container, from the rollout's first job to the end of its episode.

    Every job and session of the rollout runs in this container, and nothing of any other
    rollout does. If the container breaks, the lease takes a fresh one (``generation`` counts
    them; sessions on the old one are gone). ``release`` hands it back to be purged.
    """

    def __init__(self, sandbox: Sandbox):
        self.sandbox = sandbox
        self.generation = 0
        self.released = False
        self.pid = os.getpid()  # the process whose container this is
        self._worker: Worker | None = None
        self._lock = threading.RLock()

    def _current(self) -> Worker:
        if self.pid != os.getpid():
            # A forked child must never speak on the parent's attach socket: it would run in the
            # parent's session (reading its variables) and corrupt the parent's stream.
            raise ForkedLeaseError(
                f"this episode's sandbox container belongs to process {self.pid}, and this is process "
                f"{os.getpid()} (forked from it mid-episode): call reset() to start an episode in a container "
                "of this process, or make the env in this process (AsyncVectorEnv's env_fns do)")
        if self.released:
            raise SandboxError("lease_released", "this rollout's container was already handed back")
        if self._worker is None or self._worker.broken:
            if self._worker is not None:
                self.sandbox._recycle(self._worker)
                self._worker = None
            self._worker = self.sandbox._take()
            self.generation += 1
        return self._worker

    @property
    def worker(self) -> Worker | None:
        """The container this lease holds now (None before its first request)."""
        return self._worker

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        with self._lock:
            worker = self._current()
            self.sandbox._count("requests")
            return worker.request(message, timeout_s)

    def run(self, job: Job) -> ExecutionResult:
        """Run one job in this rollout's container; retried once on a fresh one if the harness fails."""
        message = {"op": "run", "job": job.to_wire()}
        try:
            reply = self.request(message, job.request_timeout_s)
        except SandboxError as first:
            if first.cause in ("sandbox_closed", "lease_released", "no_container"):
                raise
            self.sandbox.count_retry(first)
            try:
                reply = self.request(message, job.request_timeout_s)
            except SandboxError as second:
                raise SandboxError(second.cause, f"{second.detail} (after a retry; first: {first})") from second
        return ExecutionResult.from_wire(reply.get("result") or {})

    def open_session(self, limits: Limits = SESSION_LIMITS) -> PythonSession:
        return PythonSession(self, limits)

    def fork_floor(self, code: str) -> float:
        """Benchmark primitive: bare fork + exec(code) + wait in this container, in seconds."""
        return float(self.request({"op": "fork_floor", "code": code}, 30.0)["result"]["wall_s"])

    def release(self) -> None:
        """The rollout is over: its container goes back to be purged (or destroyed if broken)."""
        if self.pid != os.getpid():  # a forked child's copy: the container is the parent's
            self.released, self._worker = True, None
            return
        with self._lock:
            if self.released:
                return
            self.released = True
            worker, self._worker = self._worker, None
        if worker is not None:
            self.sandbox._recycle(worker)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Sandbox:
    """Leases containers to rollouts from a reserve kept warm in the background.

    ``pool_size`` caps the live containers (None: as many as the live rollouts hold, plus
    ``SPARE_CONTAINERS``). A cap below the number of rollouts running at once makes them wait
    for each other's episodes to end (up to ``LEASE_WAIT_S``, then a scoring error).
    """

    def __init__(self, backend: str = "docker", pool_size: int | None = None,
                 settings: ContainerSettings | None = None):
        if backend not in BACKENDS:
            raise SandboxUnavailableError(f"unknown sandbox backend {backend!r}; choose one of {BACKENDS}")
        if pool_size is not None and pool_size < 1:
            raise ValueError(f"pool_size must be at least 1 (or None), got {pool_size}")
        self.backend = backend
        self.pool_size = pool_size
        self.settings = settings or ContainerSettings()
        self.image_tag: str | None = None  # the Docker image containers start from
        self._clean: list[Worker] = []
        self._leased: set[Worker] = set()
        self._starting = 0
        self._purging = 0  # handed back, being purged
        self._destroying = 0  # broken, dirty or surplus, being removed
        self._waiting = 0
        self._rollouts = 0
        self._prestarted = 0  # the reserve ``prestart`` asked for: a floor, not more rollouts
        self._last_start_error: SandboxError | None = None
        self._cond = threading.Condition()
        self._closed = False
        self._orphaned = False  # set in a forked child: the containers are the parent's
        self._watched = False  # counted by daemon.watch_owner (the Docker backend)
        self._counts = {"requests": 0, "workers_started": 0, "workers_lost": 0, "retries": 0,
                        "leases": 0, "purges": 0}
        self._factory = self._make_factory()
        self._starter = ThreadPoolExecutor(START_CONCURRENCY, thread_name_prefix="gym-sysmath-start")
        self._purger = ThreadPoolExecutor(PURGE_CONCURRENCY, thread_name_prefix="gym-sysmath-purge")
        self._finalizer = weakref.finalize(self, _destroy_all, self._clean, self._leased, self._watched)
        _all_sandboxes.add(self)

    def _make_factory(self) -> Callable[[], Worker]:
        if self.backend == "process":
            warnings.warn(
                "sandbox='process' runs code as host processes: no network or filesystem isolation, so code "
                "can read files on this machine (task files included). Use it for notebooks and debugging, "
                "not for rewards you train on; the Docker backend isolates.", UserWarning, stacklevel=4)
            return ProcessWorker
        from gym_sysmath.sandbox import daemon

        client = daemon.docker_client()
        self.image_tag = daemon.require_current_image(client)
        daemon.require_runtime(client, self.settings.runtime)
        daemon.reap_orphans(client)
        daemon.watch_owner()
        self._watched = True
        owner = daemon.owner_label()
        parent = daemon.capped_cgroup_parent(client, self.settings.host_memory_fraction)
        # read at each start, so a test can point this pool (and no other) at a missing image
        return lambda: DockerWorker(client, self.image_tag or "", self.settings, owner, parent)

    # ------------------------------------------------------------------ leases

    def lease(self) -> Lease:
        """A rollout's own container, taken on its first request (see ``Lease``)."""
        with self._cond:
            if self._orphaned:
                raise SandboxError("sandbox_closed", "this sandbox belongs to the process this one was forked "
                                                     "from: make a Sandbox (or the env) in this process")
            if self._closed:
                raise SandboxError("sandbox_closed", "the sandbox was closed")
            self._counts["leases"] += 1
        return Lease(self)

    def expect_rollouts(self, change: int) -> None:
        """``change`` more (or fewer) live envs will lease containers: size the reserve for them."""
        with self._cond:
            self._rollouts = max(0, self._rollouts + change)
            self._top_up()
            self._trim()

    def prestart(self, count: int, timeout_s: float = 120.0) -> int:
        """Start containers until ``count`` are clean and waiting and no start or purge is in
        flight (benchmarks, big vectors); returns how many are clean. The reserve keeps at least
        that many from then on; envs made before or after the call count toward it, not on top
        of it (``prestart(n)`` then ``n`` envs keeps ``n`` + ``SPARE_CONTAINERS``, not twice as many)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._prestarted = max(self._prestarted, count)
            self._top_up()
            while ((len(self._clean) < count or self._starting or self._purging)
                   and time.monotonic() < deadline and not self._closed):
                if self._starting == 0 and self._last_start_error is not None:
                    raise self._last_start_error
                self._cond.wait(0.5)
            return len(self._clean)

    def _live(self) -> int:
        return len(self._clean) + len(self._leased) + self._starting + self._purging + self._destroying

    def _room(self) -> bool:
        return self.pool_size is None or self._live() < self.pool_size

    def _wanted(self) -> int:
        wanted = max(self._rollouts, self._prestarted, len(self._leased) + self._waiting) + SPARE_CONTAINERS
        return wanted if self.pool_size is None else min(wanted, self.pool_size)

    def _top_up(self) -> None:
        """Start containers in the background until the reserve covers what is wanted (lock held).

        Paused after a failed start (the daemon may be down): the next lease then starts one
        in its own thread and gets the error, or resumes the reserve by succeeding."""
        if self._closed or self._orphaned or self._last_start_error is not None:
            return
        while self._live() < self._wanted():
            try:
                self._starter.submit(self._start_one)
            except RuntimeError:  # interpreter exit: no more threads
                return
            self._starting += 1

    def _trim(self) -> None:
        """Destroy clean containers beyond what is wanted (lock held): when envs close or are
        dropped, the reserve shrinks back to what the live ones need. Containers being destroyed
        already count in ``_live`` (for the cap), not in the reserve."""
        while (self._clean and not self._closed and not self._orphaned
               and self._live() - self._destroying > self._wanted()):
            worker = self._clean.pop(0)  # the longest idle
            worker.broken = True
            self._destroying += 1
            try:
                self._purger.submit(self._destroy, worker)
            except RuntimeError:  # interpreter exit: no more threads; the pool's close removes it
                self._destroying -= 1
                self._clean.append(worker)
                return

    def _start(self, *, lease: bool) -> Worker:
        """Start a container the caller counted in ``_starting``: it joins the reserve, or the
        leased set with ``lease``. A failure is remembered (it pauses the reserve) and raised."""
        try:
            worker = self._factory()
        except BaseException as exc:
            error = exc if isinstance(exc, SandboxError) else SandboxError(
                "container_start_failed", f"{type(exc).__name__}: {str(exc)[:300]}")
            with self._cond:
                self._starting -= 1
                self._last_start_error = error
                self._cond.notify_all()
            logger.warning("sandbox %s: a container failed to start: %s", self.backend, error)
            if error is exc or not isinstance(exc, Exception):
                raise
            raise error from exc
        with self._cond:
            self._starting -= 1
            self._counts["workers_started"] += 1
            self._last_start_error = None
            closed = self._closed
            logger.debug("sandbox %s: started %s (%s)", self.backend, worker.name, "leased" if lease else "reserve")
            if not closed:
                if lease:
                    self._leased.add(worker)
                else:
                    self._clean.append(worker)
                self._top_up()
            self._cond.notify_all()
        if closed:
            worker.destroy()
            raise SandboxError("sandbox_closed", "the sandbox was closed")
        return worker

    def _start_one(self) -> None:
        """The reserve's background start: nothing may escape the thread (a failure is kept)."""
        try:
            self._start(lease=False)
        except BaseException:
            pass

    def _take(self) -> Worker:
        """A clean container for a lease: from the reserve, or started here when none is coming."""
        deadline = time.monotonic() + LEASE_WAIT_S
        with self._cond:
            self._waiting += 1
            waiting = True
            announced = False
            try:
                while True:
                    if self._closed:
                        raise SandboxError("sandbox_closed", "the sandbox was closed")
                    if self._clean:
                        worker = self._clean.pop()
                        self._leased.add(worker)
                        # no longer waiting before the reserve is sized: counted in both, this lease
                        # would make _top_up start a surplus container, destroyed at the next purge
                        self._waiting -= 1
                        waiting = False
                        self._top_up()
                        return worker
                    nothing_coming = self._starting == 0 and self._purging == 0
                    if self._room() and (nothing_coming or self._last_start_error is not None):
                        self._starting += 1  # start one in this thread (and get its error, if any)
                        break
                    self._top_up()
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        error = SandboxError(
                            "no_container", f"no sandbox container came free in {LEASE_WAIT_S:.0f} s: "
                            f"{len(self._leased)} are held by live rollouts and pool_size caps them at "
                            f"{self.pool_size}")
                        logger.warning("sandbox %s: %s", self.backend, error.detail)
                        raise error
                    if not announced:  # once per lease: info when the cap holds it back, else a start is due
                        announced = True
                        logger.log(logging.DEBUG if self._room() else logging.INFO,
                                   "sandbox %s: a lease waits for a container (%d held, %d starting, pool_size %s)",
                                   self.backend, len(self._leased), self._starting, self.pool_size)
                    self._cond.wait(min(remaining, 1.0))
            finally:
                if waiting:
                    self._waiting -= 1
        return self._start(lease=True)

    def _recycle(self, worker: Worker) -> None:
        """A lease let go of ``worker``: purge it for the next rollout, or destroy it."""
        with self._cond:
            if self._orphaned:
                return  # a forked child's copy of the parent's container: not ours to touch
            self._leased.discard(worker)
            if self._closed:
                destroy_now = True
            else:
                destroy_now = False
                if worker.broken:
                    self._counts["workers_lost"] += 1
                    logger.warning("sandbox %s: lost %s (it broke during a lease); it is replaced",
                                   self.backend, worker.name)
                if worker.broken or self.settings.fresh_per_rollout:
                    worker.broken = True  # no other rollout may have it
                    self._destroying += 1  # counted until it is gone, so the cap holds
                else:
                    self._purging += 1
                try:
                    self._purger.submit(self._destroy if worker.broken else self._purge, worker)
                except RuntimeError:  # interpreter exit: no more threads
                    if worker.broken:
                        self._destroying -= 1
                    else:
                        self._purging -= 1
                    destroy_now = True
                self._top_up()
            self._cond.notify_all()
        if destroy_now:
            worker.destroy()

    def _purge(self, worker: Worker) -> None:
        clean = False
        try:
            clean = worker.request({"op": "purge"}, PURGE_TIMEOUT_S).get("clean") is True
        except SandboxError:
            pass
        with self._cond:
            self._purging -= 1
            keep = clean and not worker.broken and not self._closed and self._live() < self._wanted()
            if keep:
                self._clean.append(worker)
                self._counts["purges"] += 1
                self._cond.notify_all()
                logger.debug("sandbox %s: purged %s for reuse", self.backend, worker.name)
                return
            if not clean and not self._closed:
                self._counts["workers_lost"] += 1
                logger.warning("sandbox %s: lost %s (its purge did not come back clean); it is replaced",
                               self.backend, worker.name)
            self._destroying += 1
        self._destroy(worker)

    def _destroy(self, worker: Worker) -> None:
        logger.debug("sandbox %s: destroying %s", self.backend, worker.name)
        try:
            worker.destroy()
        finally:
            with self._cond:
                self._destroying -= 1
                self._top_up()
                self._cond.notify_all()

    def _count(self, name: str) -> None:
        with self._cond:
            self._counts[name] += 1

    # ------------------------------------------------------------------ one-off use

    def run(self, job: Job) -> ExecutionResult:
        """Run one job in a container of its own (a one-job rollout)."""
        with self.lease() as lease:
            return lease.run(job)

    def open_session(self, limits: Limits = SESSION_LIMITS) -> PythonSession:
        """A Python session in a container of its own; closing it ends the lease."""
        return PythonSession(self.lease(), limits, owns_lease=True)

    def fork_floor(self, code: str) -> float:
        with self.lease() as lease:
            return lease.fork_floor(code)

    def count_retry(self, failure: SandboxError | None = None) -> None:
        """A harness failure was absorbed by a retry (of a job, or of a session's rebuild)."""
        self._count("retries")
        logger.warning("sandbox %s: retrying on a fresh container after a harness failure: %s", self.backend,
                       failure if failure is not None else "unknown")

    def stats(self) -> PoolStats:
        with self._cond:
            return PoolStats(**self._counts, live_workers=len(self._clean) + len(self._leased) + self._purging,
                             leased_now=len(self._leased), clean_now=len(self._clean),
                             starting_now=self._starting, waiting_now=self._waiting)

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            doomed = [*self._clean, *self._leased]
            self._clean.clear()
            self._leased.clear()
            self._cond.notify_all()
        for worker in doomed:
            worker.broken = True
        _destroy_concurrently(doomed)
        # Queued starts are cancelled; running ones see the pool closed and destroy what they made.
        self._starter.shutdown(wait=True, cancel_futures=True)
        self._purger.shutdown(wait=True)
        with self._cond:
            self._starting = 0
        self._finalizer.detach()  # closed: nothing left for it, and the watch is ended here
        if self._watched:
            from gym_sysmath.sandbox import daemon

            self._watched = False
            daemon.unwatch_owner()

    @property
    def closed(self) -> bool:
        return self._closed


def _forget_after_fork(self: Sandbox) -> None:
    """In a forked child (AsyncVectorEnv workers, multiprocessing): the parent's containers are
    not ours. Drop them without destroying them, so neither side breaks the other."""
    self._finalizer.detach()
    self._clean, self._leased = [], set()
    self._cond = threading.Condition()
    self._closed = True
    self._orphaned = True
    self._watched = False  # the daemon module forgot the parent's watcher too


_all_sandboxes: weakref.WeakSet[Sandbox] = weakref.WeakSet()


def _destroy_all(clean: list[Worker], leased: set[Worker], watched: bool = False) -> None:
    """A pool collected without close(): remove its containers."""
    _destroy_concurrently([*clean, *leased])
    if watched:
        from gym_sysmath.sandbox import daemon

        daemon.unwatch_owner_later()  # in the collector's context: no lock here


def _destroy_concurrently(workers: list[Worker]) -> None:
    """Remove many containers at once (one ``docker rm`` takes ~0.1 s); serially where threads
    can no longer start (at interpreter exit)."""
    threads = []
    for chunk in range(START_CONCURRENCY):
        part = workers[chunk::START_CONCURRENCY]
        if part:
            thread = threading.Thread(target=lambda part=part: [w.destroy() for w in part], daemon=True)
            try:
                thread.start()
            except RuntimeError:
                for worker in part:
                    worker.destroy()
                continue
            threads.append(thread)
    for thread in threads:
        thread.join()


class PythonSession:
    """A REPL-like Python process in a rollout's container; globals survive across turns.

    If the container dies (a harness failure) the session is rebuilt once in the lease's fresh
    container by replaying the turns that completed, then the turn is retried. If the agent's
    own code ends the session (time-out, output flood), the next turn starts a fresh one:
    ``restarts`` counts those, and the env tells the agent its state is gone.
    """

    def __init__(self, lease: Lease, limits: Limits, owns_lease: bool = False):
        self.lease = lease
        self.sandbox = lease.sandbox
        self.limits = limits
        self.history: list[str] = []
        self.restarts = 0  # the agent's own code ended the session: its state is gone
        self.rebuilds = 0  # the harness lost the session: it was rebuilt by replaying history
        self._owns_lease = owns_lease
        self._name: str | None = None
        self._generation = -1  # the lease's container the session lives in

    def _open(self) -> None:
        lifetime = dataclasses.replace(self.limits, cpu_s=SESSION_LIFETIME_S, wall_s=SESSION_LIFETIME_S)
        reply = self.lease.request({"op": "session_open", "limits": lifetime.to_wire()}, 30.0)
        self._name, self._generation = reply["session"], self.lease.generation

    def _turn(self, code: str, fetch: str | None) -> ExecutionResult:
        if self._name is not None and (self.lease.worker is None or self.lease.worker.broken
                                       or self._generation != self.lease.generation):
            raise SandboxError("session_lost", "the rollout's container was replaced")
        if self._name is None:
            self._open()
        reply = self.lease.request(
            {"op": "session_run", "session": self._name, "code": code, "fetch": fetch,
             "limits": self.limits.to_wire()},
            self.limits.wall_s + 30.0)  # room for the stop, the kills and the disk check after a turn
        raw = reply.get("result") or {}
        if raw.get("status") == NO_SESSION:
            raise SandboxError("session_lost", str(raw.get("detail", "the session is gone")))
        return ExecutionResult.from_wire(raw)

    def _rebuild(self) -> None:
        self._name = None
        for past in self.history:
            self._turn(past, None)

    def run(self, code: str, fetch: str | None = None) -> ExecutionResult:
        """Execute one turn; ``fetch`` names a global whose value comes back in ``.value``."""
        try:
            result = self._turn(code, fetch)
        except SandboxError as first:
            if first.cause in ("sandbox_closed", "lease_released", "no_container"):
                raise
            self.sandbox.count_retry(first)
            try:
                self._rebuild()
                self.rebuilds += 1
                result = self._turn(code, fetch)
            except SandboxError as second:
                raise SandboxError(second.cause, f"{second.detail} (after a retry; first: {first})") from second
        if result.turn_ended_session:
            self._name = None
            self.history = []
            self.restarts += 1
        elif code:
            self.history.append(code)
        return result

    def close(self) -> None:
        """End the session (and its lease, when it has one of its own)."""
        name, self._name = self._name, None
        if self.lease.pid != os.getpid():
            return  # a forked child's copy: the session is the parent's
        if self._owns_lease:
            self.lease.release()  # the purge ends the session with everything else
            return
        worker = self.lease.worker
        if (name is not None and not self.lease.released and worker is not None and not worker.broken
                and self._generation == self.lease.generation):
            try:
                self.lease.request({"op": "session_close", "session": name}, 30.0)
            except SandboxError:
                pass


# --------------------------------------------------------------------------- what an env holds

class SandboxHold:
    """What one env holds of this process's sandbox: the shared pool (counted in its reserve
    with ``expect_rollouts``) and the current episode's ``Lease``.

    ``release`` (the env's ``close``) hands both back. An env dropped without ``close`` hands
    them back too: a finalizer on the env (``weakref.finalize``, which holds this object, never
    the env) puts the hold on a queue, and the reclaimer thread releases it. The finalizer takes
    no lock and makes no sandbox call, because the garbage collector runs it inside whatever
    thread allocates, possibly one that holds the pool's or the sharing lock already.

    In a process forked from the one that acquired it, the hold's pool and lease are the
    parent's: they are dropped untouched, and the next ``acquire`` takes this process's own pool
    (``Lease`` refuses to run an inherited episode's jobs: ``ForkedLeaseError``).
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.sandbox: Sandbox | None = None
        self.lease: Lease | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def inherited(self) -> bool:
        """Whether this hold was made in another process (this one is a fork of it)."""
        return self.pid != os.getpid()

    def acquire(self, owner: object, backend: str, pool_size: int | None) -> Sandbox:
        """The pool, acquired for ``owner`` (the env) on first use; a finalizer on ``owner`` hands
        the hold back if ``owner`` is dropped without ``release``."""
        if self.inherited:
            self._forget()
        if self.sandbox is None:
            sandbox = acquire_shared(backend, pool_size)
            try:
                sandbox.expect_rollouts(1)
            except BaseException:
                release_shared(sandbox)
                raise
            self.sandbox = sandbox
            self._finalizer = weakref.finalize(owner, _queue_dropped, self)
            self._finalizer.atexit = False  # at exit the pools close, their containers with them
        return self.sandbox

    def rollout(self) -> Lease:
        """The current episode's lease (a new one, from the pool, when the episode has none yet)."""
        if self.lease is None:
            if self.sandbox is None:
                raise RuntimeError("the sandbox is not acquired")
            self.lease = self.sandbox.lease()
        return self.lease

    def end_episode(self) -> None:
        """The episode is over: its container goes back to be purged."""
        lease, self.lease = self.lease, None
        if lease is not None:
            lease.release()  # a no-op in a forked child (the container is the parent's)

    def release(self) -> None:
        """The env is closed (or was dropped): the lease and the pool go back."""
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self.inherited:
            self._forget()
            return
        self.end_episode()
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            sandbox.expect_rollouts(-1)
            release_shared(sandbox)

    def _forget(self) -> None:
        """In a forked child: drop the parent's pool and lease without touching them."""
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer, self.sandbox, self.lease = None, None, None
        self.pid = os.getpid()


#: Holds of envs dropped without close(), queued by their finalizers. ``SimpleQueue.put`` is
#: safe to call from a finalizer (it takes no lock that the interrupted code may hold).
_dropped: queue.SimpleQueue[SandboxHold | None] = queue.SimpleQueue()
_reclaimer: threading.Thread | None = None


def _queue_dropped(hold: SandboxHold) -> None:
    """The finalizer of an env dropped without close(): queue its hold, nothing else."""
    _dropped.put(hold)


def _reclaim() -> None:
    """The reclaimer thread: release the holds of dropped envs; it ends when no pool is shared
    (a ``None`` on the queue wakes it to check; ``acquire_shared`` starts another when needed)."""
    global _reclaimer
    while True:
        hold = _dropped.get()
        if hold is None:
            with _shared_lock:
                if not _shared:
                    _reclaimer = None
                    return
            continue
        try:
            hold.release()
            logger.debug("sandbox: an env dropped without close() handed back its container and reserve")
        except Exception as exc:  # the thread must live on; the pool's close removes what is left
            logger.warning("sandbox: releasing a dropped env's sandbox failed: %s", exc)


def _ensure_reclaimer() -> None:
    """Start the reclaimer thread if none runs (``_shared_lock`` held)."""
    global _reclaimer
    if _reclaimer is None:
        thread = threading.Thread(target=_reclaim, name="gym-sysmath-reclaim", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # interpreter exit: nothing left to reclaim for
            return
        _reclaimer = thread


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
        _ensure_reclaimer()
        return sandbox


def shared_pools() -> list[tuple[str, int | None, Sandbox]]:
    """This process's shared sandboxes as (backend, pool_size, sandbox): what a server or a Ray
    node reports as its capacity."""
    with _shared_lock:
        return [(backend, size, sandbox) for (backend, size), (sandbox, _) in _shared.items()]


def release_shared(sandbox: Sandbox) -> None:
    with _shared_lock:
        for key, (shared, count) in list(_shared.items()):
            if shared is sandbox:
                if count <= 1:
                    del _shared[key]
                    sandbox.close()
                    if not _shared:
                        _dropped.put(None)  # the reclaimer ends (acquire_shared starts another)
                else:
                    _shared[key] = (shared, count - 1)
                return
    sandbox.close()


def _after_fork_in_child() -> None:
    global _shared_lock, _dropped, _reclaimer
    _shared_lock = threading.Lock()
    _shared.clear()
    _dropped, _reclaimer = queue.SimpleQueue(), None  # the parent's thread is not in this process
    for sandbox in list(_all_sandboxes):
        _forget_after_fork(sandbox)


os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _close_shared() -> None:
    with _shared_lock:
        for sandbox, _ in _shared.values():
            sandbox.close()
        _shared.clear()

"""Python sessions: a process under its own uid whose globals persist between turns, stopped
while the agent thinks, and held to a disk budget in the shared scratch."""

from __future__ import annotations

import os
import select
import signal
import time
from dataclasses import dataclass
from typing import Any

from . import zygote
from .counting import namespace_last_pid, only_these_run
from .processes import as_uid, cpu_of, kill_uid_processes, peak_memory_of, wait_stopped
from .protocol import FrameError, take_frame, write_frame
from .purge import purge_uid, request_retirement
from .runtime import IS_ROOT
from .stages import classify, prepare_workdir
from .statuses import NO_SESSION, ExecutionStatus
from .values import sanitize_value

SESSION_REPLY_MAX_BYTES = 8 * 1024 * 1024
SESSION_FILES = 10_000  # files and dirs a session may keep in the scratch (see DiskBudget)


@dataclass(frozen=True)
class DiskBudget:
    """What a session's files may hold in the shared scratch between turns.

    A job's files go with the job, but a session's stay until it ends, and the scratch is
    shared by every job and session of the worker: without a budget, one rollout's session
    could leave the next rollout's build no room. Requests run one at a time, so the change in
    the scratch's usage over a turn is that session's own doing; the sum over its turns is
    checked after each turn.
    """

    bytes: int
    files: int


def _scratch_usage(path: str) -> tuple[int, int]:
    stats = os.statvfs(path)
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize, stats.f_files - stats.f_ffree


class Session:
    """A Python process under its own uid whose globals persist between turns."""

    def __init__(self, uid: int, workdir: str, limits: dict, disk: DiskBudget | None = None):
        self.uid = uid
        self.workdir = workdir
        self.limits = limits
        self.disk = disk
        self.disk_used = (0, 0)  # bytes and files its turns have added to the scratch
        self.ended: str | None = None
        self.turn = 0  # echoed in each reply: a frame for another turn is stale or forged
        prepare_workdir(uid, workdir)  # nothing of the supervisor's goes in here
        ctrl_r, self.ctrl_w = os.pipe()
        self.status_r, status_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            self.pid = zygote.ZYGOTE.spawn_session({"uid": uid, "workdir": workdir, "limits": limits},
                                            (null, out_w, err_w, ctrl_r, status_w))
        finally:
            for fd in (null, ctrl_r, status_w, out_w, err_w):
                os.close(fd)
        # Signals go through a pidfd: if the session dies and the zygote reaps it, its pid may
        # name another rollout's process, which a plain kill would then hit.
        try:
            self.pidfd = os.pidfd_open(self.pid)
        except OSError:
            self.pidfd = -1
        for fd in (self.out_r, self.err_r, self.status_r):
            os.set_blocking(fd, False)

    def run(self, code: str, fetch: str | None, turn_limits: dict) -> dict:
        if self.ended:
            return {"status": NO_SESSION, "detail": self.ended}
        self._discard_pending_output()
        started = time.monotonic()
        deadline = started + turn_limits["wall_s"]
        usage_before = _scratch_usage(self.workdir) if self.disk else (0, 0)
        last_pid_before = namespace_last_pid()
        self._signal(signal.SIGCONT)
        self.turn += 1
        try:
            write_frame(self.ctrl_w, {"code": code, "fetch": fetch, "turn": self.turn})
        except OSError:  # the session's own code closed or broke its control pipe
            self._terminate("the session closed its control pipe")
            return {"status": ExecutionStatus.RUNTIME_ERROR, "stdout": "",
                    "stderr": "sandbox: the session process is gone\n", "exit_code": None, "signal": None,
                    "stdout_truncated": False, "stderr_truncated": False, "wall_s": 0.0, "cpu_s": 0.0,
                    "peak_memory_bytes": 0, "turn_ended_session": True}
        caps = {self.out_r: turn_limits["stdout_bytes"], self.err_r: turn_limits["stderr_bytes"]}
        buffers = {self.out_r: bytearray(), self.err_r: bytearray()}
        truncated = {self.out_r: False, self.err_r: False}
        status_buf = bytearray()
        reply = None
        killed_for: ExecutionStatus | None = None
        poller = select.poll()
        for fd in (self.out_r, self.err_r, self.status_r):
            poller.register(fd, select.POLLIN)
        while reply is None and killed_for is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                killed_for = ExecutionStatus.TIMEOUT
                break
            for fd, _event in poller.poll(int(remaining * 1000) + 1):
                try:
                    chunk = os.read(fd, 1 << 16)
                except (BlockingIOError, InterruptedError):
                    continue
                if not chunk:
                    poller.unregister(fd)
                    if fd == self.status_r:
                        killed_for = ExecutionStatus.RUNTIME_ERROR  # the session process died
                    continue
                if fd == self.status_r:
                    status_buf += chunk
                    reply, status_buf = self._next_reply(status_buf)
                    continue
                room = caps[fd] - len(buffers[fd])
                buffers[fd] += chunk[: max(room, 0)]
                if len(chunk) > room:
                    truncated[fd] = True
                    killed_for = ExecutionStatus.OUTPUT_LIMIT
                    break
        if reply is not None:
            self._drain_into(buffers, caps, truncated)
            if killed_for is None and any(truncated.values()):
                killed_for = ExecutionStatus.OUTPUT_LIMIT  # past a cap in what it wrote just before replying
        result: dict[str, Any] = {
            "exit_code": None,
            "signal": None,
            "stdout": buffers[self.out_r].decode("utf-8", "backslashreplace"),
            "stderr": buffers[self.err_r].decode("utf-8", "backslashreplace"),
            "stdout_truncated": truncated[self.out_r],
            "stderr_truncated": truncated[self.err_r],
            "wall_s": round(time.monotonic() - started, 6),
            "cpu_s": cpu_of(self.pid),
            "peak_memory_bytes": peak_memory_of(self.pid),
        }
        if reply is None or killed_for:
            stderr = bytes(buffers[self.err_r])
            if killed_for is ExecutionStatus.RUNTIME_ERROR:  # it died; the zygote reaps it, so no exit status here
                killed_for = None
            verdict = classify(result, killed_for, self.limits, stderr) if killed_for is None else killed_for
            if verdict is ExecutionStatus.OK:
                verdict = ExecutionStatus.RUNTIME_ERROR
            result["status"] = verdict
            self._terminate(f"the session ended with {verdict}")
            result["turn_ended_session"] = True
            return result
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            result["status"] = ExecutionStatus.RUNTIME_ERROR
            result["stderr"] += "\nsandbox: the session broke its reply protocol\n"
            self._terminate("protocol violated by the session")
            result["turn_ended_session"] = True
            return result
        result["status"] = ExecutionStatus.OK if reply["ok"] else classify(
            {**result, "exit_code": 1}, None, self.limits, bytes(buffers[self.err_r]))  # MemoryError: memory_limit
        result["exit_code"] = 0 if reply["ok"] else 1
        if fetch:
            result["defined"] = reply.get("defined") is True
            result["value"] = sanitize_value(reply.get("value"))
        if not self._stop_between_turns(last_pid_before):
            result["stderr"] += "\nsandbox: the session's threads did not stop after the turn; the session was ended\n"
            self._terminate("its threads did not stop between turns")
            result["turn_ended_session"] = True
            return result
        if self.disk and self._over_disk_budget(self.disk, usage_before):
            result["status"] = ExecutionStatus.OUTPUT_LIMIT
            result["stderr"] += (f"\nsandbox: the session's files passed {self.disk.bytes // 2**20} MiB or "
                                 f"{self.disk.files} files in all; the session was ended\n")
            self._terminate("its files passed the session's disk budget")
            result["turn_ended_session"] = True
        return result

    def _over_disk_budget(self, disk: DiskBudget, usage_before: tuple[int, int]) -> bool:
        (used_bytes, used_files), (after_bytes, after_files) = self.disk_used, _scratch_usage(self.workdir)
        before_bytes, before_files = usage_before
        self.disk_used = (used_bytes + after_bytes - before_bytes, used_files + after_files - before_files)
        return self.disk_used[0] > disk.bytes or self.disk_used[1] > disk.files

    def _next_reply(self, buffer: bytearray) -> tuple[dict | None, bytearray]:
        """This turn's reply, skipping well-formed frames of other turns: the session's own code
        can write to its status pipe, and a frame it forged would otherwise leave the real
        reply to be read as the next turn's. A malformed frame is returned (it ends the session)."""
        while True:
            try:
                complete, reply = take_frame(buffer, SESSION_REPLY_MAX_BYTES)
            except FrameError as exc:  # written by untrusted code: a protocol violation
                return {"protocol": str(exc)}, bytearray()
            if not complete:
                return None, buffer
            if reply is None or not isinstance(reply, dict) or "protocol" in reply or reply.get("turn") == self.turn:
                return reply, buffer

    def _stop_between_turns(self, last_pid_before: int | None) -> bool:
        """Nothing of the turn runs on while the agent thinks: only the stopped session stays.

        In the container's own pid namespace pids are handed out in order, so an unchanged
        ``ns_last_pid`` shows the turn made no process and no thread, and the pids cgroup counting
        exactly the tasks of tini, the supervisor, its zygote and the session proves nothing else
        exists (whatever pid wrap-around did): stopping the session is then enough. Otherwise
        ``kill(-1, SIGSTOP)`` as the session's uid stops every process of that uid in one pass
        under the kernel's task-list lock, which a fork cannot complete across;
        then every stopped process but the session is killed, and the session's threads are seen
        stopped (their writes have landed) before the disk budget is measured.
        """
        self._signal(signal.SIGSTOP)
        if (last_pid_before is not None and namespace_last_pid() == last_pid_before
                and only_these_run((1, os.getpid(), zygote.ZYGOTE.pid, self.pid))):
            return wait_stopped(self.pid)
        keep = self.pid if self._alive() else None
        if IS_ROOT:  # never as an ordinary host user (process backend): -1 would be all their processes
            as_uid(self.uid, lambda: os.kill(-1, signal.SIGSTOP), deadline_s=5.0)
        kill_uid_processes(self.uid, keep=keep)
        return keep is None or wait_stopped(keep)

    def _alive(self) -> bool:
        if self.pidfd < 0:
            return False
        readable, _, _ = select.select([self.pidfd], [], [], 0)
        return not readable  # a pidfd turns readable when its process exits

    def _signal(self, sig: int) -> None:
        if self.pidfd >= 0:
            try:
                signal.pidfd_send_signal(self.pidfd, sig)
            except (ProcessLookupError, OSError):
                pass

    def _discard_pending_output(self) -> None:
        for fd in (self.out_r, self.err_r):
            try:
                while os.read(fd, 1 << 16):
                    pass
            except (BlockingIOError, InterruptedError, OSError):
                pass

    def _drain_into(self, buffers: dict, caps: dict, truncated: dict) -> None:
        for fd in (self.out_r, self.err_r):
            try:
                while True:
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        break
                    room = caps[fd] - len(buffers[fd])
                    buffers[fd] += chunk[: max(room, 0)]
                    truncated[fd] = truncated[fd] or len(chunk) > room
            except (BlockingIOError, InterruptedError):
                pass

    def _terminate(self, why: str) -> None:
        if self.ended:
            return
        self.ended = why
        self._signal(signal.SIGKILL)
        kill_uid_processes(self.uid)
        for fd in (self.ctrl_w, self.status_r, self.out_r, self.err_r, self.pidfd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.pidfd = -1
        if not purge_uid(self.uid, self.workdir):
            request_retirement()

    def close(self) -> None:
        self._terminate("closed")

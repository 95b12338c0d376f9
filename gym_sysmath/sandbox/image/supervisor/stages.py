"""Running one stage of a job (a compiler, a program, or Python source): fork it into its sandbox,
feed its stdin, stream its output against the caps, kill it at the deadline, and say how it ended."""

from __future__ import annotations

import os
import select
import shutil
import signal
import time

from ..toolchains import TOOLCHAIN_GID
from . import zygote
from .child import enter_sandbox, report_setup_failure, write_files
from .counting import counted_argv, exec_sealed, namespace_last_pid
from .processes import kill_group, read_to_end
from .runtime import IS_ROOT, SetupError
from .statuses import ExecutionStatus
from .zygote import ZygoteWaiter

DRAIN_GRACE_S = 0.05
MEMORY_ERROR_MARKERS = (b"MemoryError", b"std::bad_alloc", b"memory allocation of")


class StageRunner:
    """Forks one stage (a command or Python source), feeds stdin, streams output against caps."""

    def __init__(self, uid: int, workdir: str, limits: dict, program_is_jobs: bool = False,
                 counted: bool = False, toolchain: bool = False):
        self.uid = uid
        self.workdir = workdir
        self.limits = limits
        #: whether an exec failure is the job's (its own compiled program) or ours (a compiler)
        self.program_is_jobs = program_is_jobs
        #: run the program under the instruction counter (``counted_argv``), sealed against exec
        self.counted = counted
        #: the toolchain's group as a supplementary group: only a compiler stage, or a Python job
        #: whose host asked for it (``Job.toolchain``), may run or read gcc, as, ld, rustc...
        self.groups = (TOOLCHAIN_GID,) if toolchain else ()

    def run(self, *, argv: list[str] | None = None, python: str | None = None,
            files: dict | None = None, stdin: bytes = b"") -> dict:
        """Run ``argv`` (forked here, then exec'd) or Python source (forked by the zygote)."""
        if not os.path.isdir(self.workdir):
            prepare_workdir(self.uid, self.workdir)
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        setup_r, setup_w = os.pipe()  # closed (by exec, or by hand) once the job's own code starts
        last_pid = namespace_last_pid() if self.counted else None
        if self.counted and last_pid is None:
            raise SetupError("instruction counts need the container's own pid namespace")
        started = time.monotonic()
        waiter: ChildWaiter | ZygoteWaiter
        if python is not None:
            waiter = zygote.ZYGOTE.spawn_job({"uid": self.uid, "workdir": self.workdir, "limits": self.limits,
                                              "groups": list(self.groups)},
                                      (in_r, out_w, err_w, setup_w), {"python": python, "files": files or {}})
        else:
            assert argv is not None  # a stage runs argv or Python source
            waiter = ChildWaiter(self._fork_exec(argv, files, (in_r, out_w, err_w, setup_w)))
        for fd in (in_r, out_w, err_w, setup_w):
            os.close(fd)
        failure = read_to_end(setup_r)
        if failure:
            for fd in (in_w, out_r, err_r):
                os.close(fd)
            kill_group(waiter.pid)
            waiter.block()
            raise SetupError(f"cannot start the job: {failure.decode('utf-8', 'replace')}")
        result = self._supervise(waiter, started, in_w, out_r, err_r, stdin)
        if self.counted:  # the pid namespace handed out one pid (the job's) or it made more
            result["made_processes"] = last_pid is None or namespace_last_pid() != last_pid + 1
        return result

    def _fork_exec(self, argv: list[str], files: dict | None, fds: tuple[int, int, int, int]) -> int:
        pid = os.fork()
        if pid == 0:  # child: the exec replaces this copy of the supervisor's memory
            report = fds[3]
            try:
                # 077 for compilers too: the supervisor reads a build through CAP_DAC_OVERRIDE
                (report,) = enter_sandbox(self.uid, self.workdir, self.limits, fds[:3], keep=(fds[3],),
                                          groups=self.groups)
                if files:
                    write_files(files)
            except BaseException as exc:  # before the job's code ran: the sandbox's failure
                report_setup_failure(report, exc)
            try:
                if self.counted:
                    exec_sealed(counted_argv(argv, self.workdir), dict(os.environ))
                os.execvpe(argv[0], argv, os.environ)
            except OSError as exc:  # a program the job built may be unrunnable (a bad ELF header)
                if self.counted or not self.program_is_jobs:
                    os.write(report, f"cannot run {argv[0]}: {exc}".encode()[:500])
                else:
                    os.write(2, f"sandbox: cannot execute the program: {exc}\n".encode())
            os._exit(127)
        return pid

    def _supervise(self, waiter, started: float, in_w: int, out_r: int, err_r: int,
                   stdin: bytes) -> dict:
        limits = self.limits
        pid = waiter.pid
        deadline = started + limits["wall_s"]
        caps = {out_r: limits["stdout_bytes"], err_r: limits["stderr_bytes"]}
        buffers = {out_r: bytearray(), err_r: bytearray()}
        truncated = {out_r: False, err_r: False}
        pending_stdin = memoryview(stdin)
        poller = select.poll()
        for fd in (out_r, err_r):
            os.set_blocking(fd, False)
            poller.register(fd, select.POLLIN)
        if pending_stdin:
            os.set_blocking(in_w, False)
            poller.register(in_w, select.POLLOUT)
        else:
            os.close(in_w)
            in_w = -1
        wake_fd = waiter.wake_fd
        if wake_fd >= 0:
            poller.register(wake_fd, select.POLLIN)
        killed_for: ExecutionStatus | None = None
        status = None
        open_outputs = {out_r, err_r}
        exit_seen_at: float | None = None  # set with status: when the job's exit was seen
        while True:
            now = time.monotonic()
            if status is None:
                status = waiter.check()
                if status is not None:
                    exit_seen_at = now
            if exit_seen_at is not None and (not open_outputs or now - exit_seen_at > DRAIN_GRACE_S):
                break
            if status is None and now >= deadline:
                killed_for = ExecutionStatus.TIMEOUT
                kill_group(pid)
                continue
            wake_at = deadline if exit_seen_at is None else exit_seen_at + DRAIN_GRACE_S
            timeout_ms = max(0, int((wake_at - now) * 1000)) + 1
            if wake_fd < 0 and status is None:
                timeout_ms = min(timeout_ms, 5)
            for fd, _event in poller.poll(timeout_ms):
                if fd == wake_fd:
                    poller.unregister(wake_fd)
                    wake_fd = -1
                elif fd == in_w:
                    try:
                        written = os.write(in_w, pending_stdin[: 1 << 16])
                        pending_stdin = pending_stdin[written:]
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:  # the job closed its stdin: fine
                        pending_stdin = pending_stdin[:0]
                    if not pending_stdin:
                        poller.unregister(in_w)
                        os.close(in_w)
                        in_w = -1
                elif fd in buffers:
                    try:
                        chunk = os.read(fd, 1 << 16)
                    except (BlockingIOError, InterruptedError):
                        continue
                    if not chunk:
                        poller.unregister(fd)
                        open_outputs.discard(fd)
                        continue
                    room = caps[fd] - len(buffers[fd])
                    buffers[fd] += chunk[: max(room, 0)]
                    if len(chunk) > room:
                        truncated[fd] = True
                        if killed_for is None and status is None:
                            killed_for = ExecutionStatus.OUTPUT_LIMIT
                            kill_group(pid)
        if status is None:
            status = waiter.block()
        # No killpg here: the leader is reaped, so its pid may already name another process.
        # What the job left behind dies with its uid in the purge.
        waiter.close()
        for fd in (in_w, out_r, err_r):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        raw, cpu, maxrss_kb = status
        wall = time.monotonic() - started
        result = {
            "exit_code": os.WEXITSTATUS(raw) if os.WIFEXITED(raw) else None,
            "signal": os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else None,
            "stdout": buffers[out_r].decode("utf-8", "backslashreplace"),
            "stderr": buffers[err_r].decode("utf-8", "backslashreplace"),
            "stdout_truncated": truncated[out_r],
            "stderr_truncated": truncated[err_r],
            "wall_s": round(wall, 6),
            "cpu_s": round(cpu, 6),
            "peak_memory_bytes": maxrss_kb * 1024,
        }
        if killed_for is None and (truncated[out_r] or truncated[err_r]):
            killed_for = ExecutionStatus.OUTPUT_LIMIT  # it passed a cap and exited before we read past it
        result["status"] = classify(result, killed_for, self.limits, bytes(buffers[err_r]))
        return result


class ChildWaiter:
    """Waits for a child of the supervisor (an exec'd program): pidfd to wake, wait4 to reap."""

    def __init__(self, pid: int):
        self.pid = pid
        try:
            self.wake_fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.wake_fd = -1

    @staticmethod
    def _status(raw: int, usage) -> tuple[int, float, int]:
        return raw, usage.ru_utime + usage.ru_stime, usage.ru_maxrss

    def check(self) -> tuple[int, float, int] | None:
        waited, raw, usage = os.wait4(self.pid, os.WNOHANG)
        return self._status(raw, usage) if waited else None

    def block(self) -> tuple[int, float, int]:
        _, raw, usage = os.wait4(self.pid, 0)
        return self._status(raw, usage)

    def close(self) -> None:
        if self.wake_fd >= 0:
            os.close(self.wake_fd)
            self.wake_fd = -1


def classify(result: dict, killed_for: ExecutionStatus | None, limits: dict, stderr: bytes) -> ExecutionStatus:
    """Turn how a job ended into a verdict; everything here is the job's own doing."""
    if killed_for:
        return killed_for
    sig = result["signal"]
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and result["cpu_s"] >= limits["cpu_s"] - 0.05):
        return ExecutionStatus.TIMEOUT
    if sig == signal.SIGXFSZ:
        return ExecutionStatus.OUTPUT_LIMIT
    if result["exit_code"] == 0 and sig is None:
        return ExecutionStatus.OK
    if any(marker in stderr for marker in MEMORY_ERROR_MARKERS):
        return ExecutionStatus.MEMORY_LIMIT
    if sig == signal.SIGKILL:  # not ours and not the CPU limit: the kernel's OOM killer
        return ExecutionStatus.MEMORY_LIMIT
    return ExecutionStatus.RUNTIME_ERROR


def prepare_workdir(uid: int, workdir: str, program: str | None = None) -> None:
    """A fresh dir owned by the job's uid alone (mode 0700; the scratch root itself is root's and
    unlistable), holding a copy of ``program`` as ``prog`` when given (a cached build). The
    supervisor reaches into it for the build cache through CAP_DAC_OVERRIDE, no other uid can."""
    os.mkdir(workdir, 0o700)
    if program is not None:
        target = os.path.join(workdir, "prog")
        shutil.copyfile(program, target)
        os.chmod(target, 0o700)
        if IS_ROOT:
            os.chown(target, uid, uid)
    if IS_ROOT:
        os.chown(workdir, uid, uid)

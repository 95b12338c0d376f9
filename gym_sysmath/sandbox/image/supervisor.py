"""In-sandbox supervisor: runs untrusted jobs and Python sessions on behalf of the host.

Standard library only: it is copied into the sandbox image and also run as a plain host
process by the opt-in process backend. The host speaks to it over its stdin/stdout with
framed JSON messages (``<decimal length>\\n<utf-8 json>``); nothing else ever writes there,
because the protocol descriptors are moved out of the way at start and every child closes
them before running untrusted code.

Per job: a fresh scratch dir, a fork, a new session (process group), an unprivileged uid,
rlimits, output streamed against byte caps while the job runs, the whole group killed at
the wall-clock limit, and everything left under the job's uid killed before the next job.
Anything the job does is reported as a verdict; only the supervisor's own failures
(a malformed request, an internal exception) are reported as errors, which the host
treats as harness failures.
"""

from __future__ import annotations

import builtins
import ctypes
import errno
import fcntl
import hashlib
import json
import linecache
import os
import platform
import resource
import secrets
import select
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any

PROTOCOL_VERSION = 2
MAX_FRAME_BYTES = 256 * 1024 * 1024
DRAIN_GRACE_S = 0.05
IS_ROOT = os.geteuid() == 0

JOB_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}

#: Where the image keeps a precompiled <bits/stdc++.h> built with exactly the C++ flags below.
PCH_DIR = "/opt/gym-sysmath/pch"
COMPILERS = {
    "cpp": ("main.cpp", ["g++", "-std=c++20", "-O2", "-pipe", f"-I{PCH_DIR}", "-o", "prog", "main.cpp"]),
    "rust": ("main.rs", ["rustc", "--edition", "2021", "-O", "-o", "prog", "main.rs"]),
}

#: Imported once by the supervisor so that forked jobs get them for free (and so that, under
#: the process backend, they work even where the job's uid cannot read the interpreter's files).
PRELOADED_MODULES = ("collections", "dataclasses", "decimal", "enum", "fractions", "functools", "itertools",
                     "math", "random", "re", "statistics", "string", "typing")

MEMORY_ERROR_MARKERS = (b"MemoryError", b"std::bad_alloc", b"memory allocation of")


# --------------------------------------------------------------------------- instruction counts

#: A counted job runs its program under cachegrind with the cache and branch simulations off: it
#: counts the instructions the program executes (Ir), which the machine's load does not change.
VALGRIND_LAUNCHER = "/usr/bin/valgrind"
VALGRIND_LIB = "/usr/libexec/valgrind"
COUNT_FILE = ".instructions"  # cachegrind's output, written in the job's dir when the program ends
COUNT_FILE_MAX_BYTES = 64 * 1024 * 1024
COUNTED_PYTHON = ["python3", "-s", "-P", "main.py"]  # a fresh interpreter: the zygote cannot be counted
#: Per machine, for ``_exec_sealed``: AUDIT_ARCH, the x32 syscall bit (or 0), execve, execveat.
_SEAL_SYSCALLS = {"x86_64": (0xC000003E, 0x40000000, 59, 322), "aarch64": (0xC00000B7, 0, 221, 281)}
_VALGRIND_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


def counted_argv(program: list[str], workdir: str) -> list[str]:
    """``program`` under cachegrind. Children are not followed: a counted job cannot exec
    (``_exec_sealed``), and one that made a process or a thread gets no count (``StageRunner``).
    No gdbserver: it is of no use here, and with it Python runs were killed now and then."""
    return [VALGRIND_LAUNCHER, "--tool=cachegrind", "-q", "--cache-sim=no", "--branch-sim=no",
            "--trace-children=no", "--vgdb=no", f"--cachegrind-out-file={os.path.join(workdir, COUNT_FILE)}", *program]


def _exec_sealed(argv: list[str], env: dict) -> None:
    """Exec valgrind's tool for ``argv`` so that neither it nor its program can ever exec again.

    A counted program that could exec would run the rest of its work uncounted (a native
    program after valgrind) and could then write a count of its choosing. A seccomp filter
    installed here refuses ``execveat`` and lets ``execve`` through only for a filename pointer
    drawn at random in this process, which the next program cannot learn; valgrind's launcher,
    which would exec once more, is skipped (the tool runs with the variables it would set).
    Forks are not refused here but seen afterwards (refusing them, by this filter or by
    RLIMIT_NPROC 1, had Python runs under valgrind SIGKILLed at random points).
    """
    machine = platform.machine()
    if machine not in _SEAL_SYSCALLS:
        raise OSError(f"instruction counts are not supported on {machine}")
    audit_arch, x32_bit, nr_execve, nr_execveat = _SEAL_SYSCALLS[machine]
    tool = os.path.join(VALGRIND_LIB, f"cachegrind-{_VALGRIND_ARCH[machine]}-linux")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    libc.syscall.restype = ctypes.c_long
    path = tool.encode() + b"\0"
    for _ in range(32):  # a random page in [2^40, 2^46), at a random offset
        page = ((1 << 28) + secrets.randbelow((1 << 34) - (1 << 28))) << 12
        mapped = libc.mmap(page, 4096, 3, 0x22 | 0x100000, -1, 0)  # RW, private|anonymous|FIXED_NOREPLACE
        if mapped == page:
            break
    else:
        raise OSError("no page for the exec seal")
    address = page + secrets.randbelow(4096 - len(path))
    ctypes.memmove(address, path, len(path))
    deny, allow = 0x00050000 | errno.EPERM, 0x7FFF0000  # SECCOMP_RET_ERRNO | EPERM, SECCOMP_RET_ALLOW
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF LD|W|ABS, JMP|JEQ|K, JMP|JGE|K, RET|K
    program = [  # (code, jt, jf, k), offsets into seccomp_data: nr 0, arch 4, args[0] 16 (low) and 20
        (ld, 0, 0, 4), (jeq, 1, 0, audit_arch), (ret, 0, 0, deny),
        (ld, 0, 0, 0), (jge, 0, 1, x32_bit or 0xFFFFFFFF), (ret, 0, 0, deny),
        (jeq, 0, 1, nr_execveat), (ret, 0, 0, deny),
        (jeq, 1, 0, nr_execve), (ret, 0, 0, allow),
        (ld, 0, 0, 16), (jeq, 0, 3, address & 0xFFFFFFFF),
        (ld, 0, 0, 20), (jeq, 0, 1, address >> 32), (ret, 0, 0, allow), (ret, 0, 0, deny),
    ]
    code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *op) for op in program))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program), ctypes.addressof(code))
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # NO_NEW_PRIVS, SECCOMP
        raise OSError(ctypes.get_errno(), "cannot install the exec seal")
    c_argv = (ctypes.c_char_p * (len(argv) + 1))(*[a.encode() for a in argv], None)
    environment = {**env, "VALGRIND_LAUNCHER": VALGRIND_LAUNCHER, "VALGRIND_LIB": VALGRIND_LIB}
    c_env = (ctypes.c_char_p * (len(environment) + 1))(*[f"{k}={v}".encode() for k, v in environment.items()], None)
    libc.syscall(ctypes.c_long(nr_execve), ctypes.c_void_p(address), c_argv, c_env)
    raise OSError(ctypes.get_errno(), f"cannot run {tool}")


def read_count(workdir: str, uid: int) -> int | None:
    """The instructions cachegrind counted, or None when its file is not what cachegrind leaves.

    Cachegrind writes the file when the program has ended (creating it 0600, or truncating the
    one there), so its last line is its own. A program could only leave its own text there by
    making that write fail: a symlink, a FIFO or a directory in its place, or a file without
    write permission (the mode check), a disk or size limit (then the summary is missing).
    """
    try:
        fd = os.open(os.path.join(workdir, COUNT_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if (not stat.S_ISREG(info.st_mode) or stat.S_IMODE(info.st_mode) != 0o600
                or (IS_ROOT and info.st_uid != uid) or info.st_size > COUNT_FILE_MAX_BYTES):
            return None
        os.lseek(fd, max(0, info.st_size - 4096), os.SEEK_SET)
        tail = _read_to_end(os.dup(fd)).decode("ascii", "replace")
    finally:
        os.close(fd)
    last = tail.rstrip("\n").rsplit("\n", 1)[-1]
    words = last.split(" ")
    if len(words) == 2 and words[0] == "summary:" and words[1].isdigit() and tail.endswith("\n"):
        return int(words[1])
    return None


# --------------------------------------------------------------------------- framing

def read_frame(fd: int) -> dict | None:
    """Read one framed JSON message; None on a clean EOF before a header."""
    header = b""
    while not header.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            if header:
                raise EOFError("stream ended inside a frame header")
            return None
        header += chunk
        if len(header) > 20:
            raise ValueError("frame header too long")
    size = int(header)
    if size < 0 or size > MAX_FRAME_BYTES:
        raise ValueError(f"frame size {size} out of range")
    body = bytearray()
    while len(body) < size:
        chunk = os.read(fd, min(size - len(body), 1 << 20))
        if not chunk:
            raise EOFError("stream ended inside a frame body")
        body += chunk
    return json.loads(body.decode("utf-8"))


def write_frame(fd: int, message: dict) -> None:
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    data = b"%d\n" % len(body) + body
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


# --------------------------------------------------------------------------- limits

def _limits(spec: dict | None) -> dict:
    base = {
        "wall_s": 10.0,
        "cpu_s": 10.0,
        "memory_bytes": 2 * 1024**3,
        "processes": 64,
        "file_bytes": 64 * 1024**2,
        "open_files": 256,
        "stdout_bytes": 1024**2,
        "stderr_bytes": 256 * 1024,
    }
    base.update({k: v for k, v in (spec or {}).items() if v is not None})
    return base


def _apply_rlimits(limits: dict) -> None:
    cpu = max(1, int(limits["cpu_s"] + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"], limits["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_bytes"], limits["file_bytes"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"], limits["open_files"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if IS_ROOT:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"], limits["processes"]))


def _drop_privileges(uid: int) -> None:
    if IS_ROOT:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


def _make_oom_preferred() -> None:
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")
    except OSError:
        pass


# --------------------------------------------------------------------------- child side

def _enter_sandbox(uid: int, workdir: str, limits: dict, stdio: tuple[int, int, int],
                   keep: tuple[int, ...] = (), umask: int = 0o077) -> list[int]:
    """In a freshly forked child: own session, stdio pipes, no other inherited fds, an
    unprivileged uid, rlimits, and the scratch dir as cwd, HOME and TMPDIR.

    Returns the new numbers of the ``keep`` descriptors (moved to 1000 and up).
    """
    os.setsid()
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 1000) for fd in keep]
    os.closerange(3, 1000)
    os.closerange(1000 + len(moved), 65536)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    _make_oom_preferred()
    _drop_privileges(uid)
    os.chdir(workdir)
    os.umask(umask)  # 077: what a job or session writes is its uid's alone
    _apply_rlimits(limits)
    os.environ.clear()
    os.environ.update(JOB_ENV)
    os.environ["HOME"] = workdir
    os.environ["TMPDIR"] = workdir
    return moved


def _write_files(files: dict) -> None:
    for name, content in files.items():
        if "/" in name or name in ("", ".", ".."):
            raise ValueError(f"bad file name {name!r}")
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as handle:
            handle.write(content)


def _job_path() -> list[str]:
    """The job's import path: its scratch dir first, then the interpreter's own, without the
    supervisor's directory."""
    own = os.path.dirname(os.path.abspath(__file__))
    return [os.getcwd(), *[p for p in sys.path if p and os.path.abspath(p) != own]]


def _reopen_std_streams() -> None:
    sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)


def _exit_code_of(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _print_agent_traceback(exc: BaseException) -> None:
    """Print ``exc`` as Python would, without this file's frames: the agent sees its own code."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _run_python_in_child(source: str, filename: str, argv: list[str]) -> int:
    """Execute Python source in this already-warm interpreter (the fork fast path)."""
    _reopen_std_streams()
    sys.argv = [filename, *argv]
    sys.path[:] = _job_path()
    namespace = {"__name__": "__main__", "__file__": filename, "__builtins__": builtins}
    code = 0
    try:
        exec(compile(source, filename, "exec"), namespace)
    except SystemExit as exc:
        code = _exit_code_of(exc)
    except BaseException as exc:
        _print_agent_traceback(exc)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            code = code or 1
    return code


# --------------------------------------------------------------------------- parent side

class SetupError(RuntimeError):
    """The sandbox could not start a job (scratch full, exec failed): the harness's failure,
    reported to the host as an error so it retries on a fresh worker."""


def _read_to_end(fd: int) -> bytes:
    data = b""
    try:
        while chunk := os.read(fd, 4096):
            data += chunk
    finally:
        os.close(fd)
    return data


class StageRunner:
    """Forks one stage (a command or Python source), feeds stdin, streams output against caps."""

    def __init__(self, uid: int, workdir: str, limits: dict, program_is_jobs: bool = False,
                 counted: bool = False):
        self.uid = uid
        self.workdir = workdir
        self.limits = limits
        #: whether an exec failure is the job's (its own compiled program) or ours (a compiler)
        self.program_is_jobs = program_is_jobs
        #: run the program under the instruction counter (``counted_argv``), sealed against exec
        self.counted = counted

    def run(self, *, argv: list[str] | None = None, python: str | None = None,
            files: dict | None = None, stdin: bytes = b"") -> dict:
        """Run ``argv`` (forked here, then exec'd) or Python source (forked by the zygote)."""
        if not os.path.isdir(self.workdir):
            _prepare_workdir(self.uid, self.workdir)
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        setup_r, setup_w = os.pipe()  # closed (by exec, or by hand) once the job's own code starts
        last_pid = _last_pid() if self.counted else None
        if self.counted and last_pid is None:
            raise SetupError("instruction counts need the container's own pid namespace")
        started = time.monotonic()
        waiter: ChildWaiter | ZygoteWaiter
        if python is not None:
            waiter = ZYGOTE.spawn_job({"uid": self.uid, "workdir": self.workdir, "limits": self.limits},
                                      (in_r, out_w, err_w, setup_w), {"python": python, "files": files or {}})
        else:
            assert argv is not None  # a stage runs argv or Python source
            waiter = ChildWaiter(self._fork_exec(argv, files, (in_r, out_w, err_w, setup_w)))
        for fd in (in_r, out_w, err_w, setup_w):
            os.close(fd)
        failure = _read_to_end(setup_r)
        if failure:
            for fd in (in_w, out_r, err_r):
                os.close(fd)
            _kill_group(waiter.pid)
            waiter.block()
            raise SetupError(f"cannot start the job: {failure.decode('utf-8', 'replace')}")
        result = self._supervise(waiter, started, in_w, out_r, err_r, stdin)
        if self.counted:  # the pid namespace handed out one pid (the job's) or it made more
            result["made_processes"] = last_pid is None or _last_pid() != last_pid + 1
        return result

    def _fork_exec(self, argv: list[str], files: dict | None, fds: tuple[int, int, int, int]) -> int:
        pid = os.fork()
        if pid == 0:  # child: the exec replaces this copy of the supervisor's memory
            report = fds[3]
            try:
                # 077 for compilers too: the supervisor reads a build through CAP_DAC_OVERRIDE
                (report,) = _enter_sandbox(self.uid, self.workdir, self.limits, fds[:3], keep=(fds[3],))
                if files:
                    _write_files(files)
            except BaseException as exc:  # before the job's code ran: the sandbox's failure
                try:
                    os.write(report, f"{type(exc).__name__}: {exc}".encode()[:500])
                except OSError:
                    pass
                os._exit(127)
            try:
                if self.counted:
                    _exec_sealed(counted_argv(argv, self.workdir), dict(os.environ))
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
        killed_for = None
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
                killed_for = "timeout"
                _kill_group(pid)
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
                            killed_for = "output_limit"
                            _kill_group(pid)
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
            killed_for = "output_limit"  # it passed a cap and exited before we read past it
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


def classify(result: dict, killed_for: str | None, limits: dict, stderr: bytes) -> str:
    """Turn how a job ended into a verdict; everything here is the job's own doing."""
    if killed_for:
        return killed_for
    sig = result["signal"]
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and result["cpu_s"] >= limits["cpu_s"] - 0.05):
        return "timeout"
    if sig == signal.SIGXFSZ:
        return "output_limit"
    if result["exit_code"] == 0 and sig is None:
        return "ok"
    if any(marker in stderr for marker in MEMORY_ERROR_MARKERS):
        return "memory_limit"
    if sig == signal.SIGKILL:  # not ours and not the CPU limit: the kernel's OOM killer
        return "memory_limit"
    return "runtime_error"


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _prepare_workdir(uid: int, workdir: str, program: str | None = None) -> None:
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


def _as_uid(uid: int, action, deadline_s: float) -> bool:
    """Run ``action`` in a child holding only ``uid``'s rights; False if it outlived the deadline."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setsid()
            _drop_privileges(uid)
            action()
        except BaseException:
            code = 1
        os._exit(code)
    deadline = time.monotonic() + deadline_s
    while True:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited:
            return True
        if time.monotonic() > deadline:
            _kill_group(pid)
            os.waitpid(pid, 0)
            return False
        time.sleep(0.0005)


def _scratch_nearly_full(scratch: str, reserve: int = 32 * 1024 * 1024) -> bool:
    """Whether the scratch filesystem itself is out of room or inodes (what the compiler says is
    the job's business)."""
    stats = os.statvfs(scratch)
    return stats.f_bavail * stats.f_frsize < reserve or (stats.f_files > 0 and stats.f_favail < 4096)


def _empty_dir(folder: str) -> None:
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)


#: POSIX shared memory and semaphores (``multiprocessing`` needs them): the container's own tmpfs,
#: emptied of a job's files with the job and of everything with the rollout.
SHM_DIR = "/dev/shm"


def _remove_owned_by(folder: str, uid: int) -> None:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.stat(follow_symlinks=False).st_uid != uid:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


PURGE_DEADLINE_S = 10.0  # the host's request timeout leaves room for it (execution.Job.request_timeout_s)
RETIRE_REQUESTED = False  # a scratch dir could not be cleaned: the host should replace this worker


def _request_retirement() -> None:
    global RETIRE_REQUESTED
    RETIRE_REQUESTED = True


def _purge_uid(uid: int, workdir: str | None, deadline_s: float = PURGE_DEADLINE_S) -> bool:
    """Kill every process left under ``uid`` (kill(-1) as that uid) and remove its scratch dir.

    ``shutil.rmtree`` recurses in Python, so a 1,000-level tree would survive it; the fallback
    is one ``find -delete`` (iterative). The whole purge has a deadline: False means it did not
    finish, and the worker should be retired rather than reused.
    """
    def action() -> None:
        if IS_ROOT:
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if OWN_PID_NAMESPACE:  # the container's own /dev/shm (never a host's): what the uid left there
            _remove_owned_by(SHM_DIR, uid)
        if workdir:  # its contents; the dir itself is in root's scratch root, so root removes it
            try:
                _empty_dir(workdir)
            except (OSError, RecursionError):
                subprocess.run(["chmod", "-R", "u+rwx", workdir], stderr=subprocess.DEVNULL, check=False)
                subprocess.run(["find", workdir, "-mindepth", "1", "-delete"], stderr=subprocess.DEVNULL,
                               check=False)
    if not _as_uid(uid, action, deadline_s):
        return False
    if workdir and os.path.isdir(workdir):
        try:
            os.rmdir(workdir)
        except OSError as exc:  # not empty: say so in the container log
            print(f"supervisor: cannot remove {workdir}: {exc}", file=sys.stderr)
            return False
    return True


# --------------------------------------------------------------------------- the zygote

class Zygote:
    """A clean process, forked before the first request, that forks in-interpreter Python.

    Python jobs and sessions run in a fork of a warm interpreter (milliseconds instead of a
    fresh ``python3``). A fork of the supervisor itself would hand the job the supervisor's
    memory: earlier requests' code (other rollouts' solutions) and the build cache's table.
    The zygote never receives code: it forks on request, and the child reads its own code
    from a pipe. It reaps what it forks and reports each job's exit status and CPU time.
    """

    def __init__(self) -> None:
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            self.sock.close()
            _zygote_main(theirs)
        theirs.close()

    def _spawn(self, header: dict, fds: tuple[int, ...]) -> int:
        try:
            socket.send_fds(self.sock, [json.dumps(header).encode()], list(fds))
            reply = json.loads(self.sock.recv(4096) or b"{}")
        except (OSError, ValueError) as exc:
            raise SetupError(f"the zygote is gone: {exc}") from exc
        if "pid" not in reply:
            raise SetupError(f"the zygote could not fork: {reply.get('error', 'no reply')}")
        return int(reply["pid"])

    def spawn_job(self, header: dict, fds: tuple[int, int, int, int], spec: dict) -> ZygoteWaiter:
        spec_r, spec_w = os.pipe()
        try:
            pid = self._spawn({"kind": "job", **header}, (*fds, spec_r))
        finally:
            os.close(spec_r)
        with os.fdopen(spec_w, "wb") as pipe:
            try:
                pipe.write(json.dumps(spec).encode())
            except BrokenPipeError:
                pass  # the child died before reading: its setup pipe says why
        return ZygoteWaiter(self, pid)

    def spawn_session(self, header: dict, fds: tuple[int, int, int, int, int]) -> int:
        return self._spawn({"kind": "session", **header}, fds)


class ZygoteWaiter:
    """Waits for a job the zygote forked: the zygote's exit report wakes us and carries the status."""

    def __init__(self, zygote: Zygote, pid: int):
        self.zygote = zygote
        self.pid = pid
        self.wake_fd = zygote.sock.fileno()

    def _status(self, data: bytes) -> tuple[int, float, int]:
        report = json.loads(data or b"{}")
        if report.get("pid") != self.pid:
            raise SetupError(f"the zygote reported {report!r} for job {self.pid}")
        return report["status"], report["cpu_s"], report["maxrss_kb"]

    def check(self) -> tuple[int, float, int] | None:
        try:
            data = self.zygote.sock.recv(4096, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        return self._status(data)

    def block(self) -> tuple[int, float, int]:
        return self._status(self.zygote.sock.recv(4096, 0))

    def close(self) -> None:
        self.wake_fd = -1  # the socket is the zygote's, not ours to close


def _zygote_main(sock: socket.socket) -> None:
    """The zygote's loop: fork on request; never read a job's code; report job exits."""
    keep = sock.fileno()
    os.closerange(3, keep)
    os.closerange(keep + 1, 65536)
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 65536, 8)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)
        _reap_children()  # sessions that ended, up to this request: no zombie outlives its session by a job
        header = json.loads(data)
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"error": str(exc)}).encode())
            continue
        if pid == 0:
            sock.close()
            if header["kind"] == "job":
                _zygote_job_child(header, fds)
            else:
                _zygote_session_child(header, fds)
            os._exit(127)
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"pid": pid}).encode())
        if header["kind"] == "job":
            _, raw, usage = os.wait4(pid, 0)
            sock.send(json.dumps({"pid": pid, "status": raw, "cpu_s": usage.ru_utime + usage.ru_stime,
                                  "maxrss_kb": usage.ru_maxrss}).encode())


def _zygote_job_child(header: dict, fds: list[int]) -> None:
    in_r, out_w, err_w, setup_w, spec_r = fds
    report = setup_w
    try:
        with os.fdopen(spec_r, "rb") as pipe:
            spec = json.loads(pipe.read())
        (report,) = _enter_sandbox(header["uid"], header["workdir"], header["limits"], (in_r, out_w, err_w),
                                   keep=(setup_w,))
        if spec["files"]:
            _write_files(spec["files"])
        os.close(report)
    except BaseException as exc:  # before the job's code ran: the sandbox's failure
        try:
            os.write(report, f"{type(exc).__name__}: {exc}".encode()[:500])
        except OSError:
            pass
        os._exit(127)
    os._exit(_run_python_in_child(spec["python"], "main.py", []))


def _zygote_session_child(header: dict, fds: list[int]) -> None:
    null_r, out_w, err_w, ctrl_r, status_w = fds
    try:
        ctrl, status = _enter_sandbox(header["uid"], header["workdir"], header["limits"], (null_r, out_w, err_w),
                                      keep=(ctrl_r, status_w))
        _session_worker(ctrl, status)
    except BaseException:
        pass
    os._exit(1)


ZYGOTE: Zygote  # started by main() before the first request

# --------------------------------------------------------------------------- sessions

FLOAT_TAG = "f64"  # {"f64": "0x<16 hex digits>"}: the same form as gym_sysmath.exact's task files


def _encode_value(value, depth: int = 0):
    """Wire form of a session variable: JSON natives, floats by bit pattern, others tagged.

    numpy scalars count as the Python scalar they hold (``np.float64`` is a float, ``np.bool_``
    a bool); every other type keeps its name so the grader can say what it got.
    """
    if depth > 32:
        return {"unsupported": "nesting too deep"}
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        value = value.item()
    if type(value) is int and value.bit_length() > 4096:
        return {"unsupported": "int too large"}
    if value is None or isinstance(value, (bool, str)) or type(value) is int:
        return value
    if type(value) is float:
        return {FLOAT_TAG: "0x" + struct.pack(">d", value).hex()}
    if type(value) is list:
        return [_encode_value(item, depth + 1) for item in value]
    return {"unsupported": type(value).__name__}


def _reap_children() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def _session_worker(ctrl_fd: int, status_fd: int) -> None:
    """Long-lived REPL loop in the session child: globals survive across turns."""
    _reopen_std_streams()
    sys.argv = ["session"]
    sys.path[:] = _job_path()
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    turn = 0
    while True:
        request = read_frame(ctrl_fd)
        if request is None:
            os._exit(0)
        _reap_children()  # stragglers of the last turn were killed by the supervisor
        turn += 1
        ok = True
        filename = f"<turn {turn}>"
        source = request["code"]
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # lines in tracebacks
        try:
            exec(compile(source, filename, "exec"), namespace)
        except SystemExit:
            pass
        except BaseException as exc:
            _print_agent_traceback(exc)
            ok = False
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        reply: dict = {"ok": ok, "turn": request.get("turn")}
        fetch = request.get("fetch")
        if fetch:
            reply["defined"] = fetch in namespace
            try:
                reply["value"] = _encode_value(namespace.get(fetch))
                json.dumps(reply["value"])
            except BaseException as exc:
                reply["value"] = {"unsupported": f"unreadable: {type(exc).__name__}"}
        write_frame(status_fd, reply)


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
        _prepare_workdir(uid, workdir)  # nothing of the supervisor's goes in here
        ctrl_r, self.ctrl_w = os.pipe()
        self.status_r, status_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            self.pid = ZYGOTE.spawn_session({"uid": uid, "workdir": workdir, "limits": limits},
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
            return {"status": "session_ended", "detail": self.ended}
        self._discard_pending_output()
        started = time.monotonic()
        deadline = started + turn_limits["wall_s"]
        usage_before = _scratch_usage(self.workdir) if self.disk else (0, 0)
        last_pid_before = _last_pid()
        self._signal(signal.SIGCONT)
        self.turn += 1
        try:
            write_frame(self.ctrl_w, {"code": code, "fetch": fetch, "turn": self.turn})
        except OSError:  # the session's own code closed or broke its control pipe
            self._terminate("the session closed its control pipe")
            return {"status": "runtime_error", "stdout": "", "stderr": "sandbox: the session process is gone\n",
                    "exit_code": None, "signal": None, "stdout_truncated": False, "stderr_truncated": False,
                    "wall_s": 0.0, "cpu_s": 0.0, "peak_memory_bytes": 0, "session_ended": True}
        caps = {self.out_r: turn_limits["stdout_bytes"], self.err_r: turn_limits["stderr_bytes"]}
        buffers = {self.out_r: bytearray(), self.err_r: bytearray()}
        truncated = {self.out_r: False, self.err_r: False}
        status_buf = bytearray()
        reply = None
        killed_for = None
        poller = select.poll()
        for fd in (self.out_r, self.err_r, self.status_r):
            poller.register(fd, select.POLLIN)
        while reply is None and killed_for is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                killed_for = "timeout"
                break
            for fd, _event in poller.poll(int(remaining * 1000) + 1):
                try:
                    chunk = os.read(fd, 1 << 16)
                except (BlockingIOError, InterruptedError):
                    continue
                if not chunk:
                    poller.unregister(fd)
                    if fd == self.status_r:
                        killed_for = "runtime_error"  # the session process died
                    continue
                if fd == self.status_r:
                    status_buf += chunk
                    reply, status_buf = self._next_reply(status_buf)
                    continue
                room = caps[fd] - len(buffers[fd])
                buffers[fd] += chunk[: max(room, 0)]
                if len(chunk) > room:
                    truncated[fd] = True
                    killed_for = "output_limit"
                    break
        if reply is not None:
            self._drain_into(buffers, caps, truncated)
            if killed_for is None and any(truncated.values()):
                killed_for = "output_limit"  # past a cap in what it wrote just before replying
        result: dict[str, Any] = {
            "exit_code": None,
            "signal": None,
            "stdout": buffers[self.out_r].decode("utf-8", "backslashreplace"),
            "stderr": buffers[self.err_r].decode("utf-8", "backslashreplace"),
            "stdout_truncated": truncated[self.out_r],
            "stderr_truncated": truncated[self.err_r],
            "wall_s": round(time.monotonic() - started, 6),
            "cpu_s": _cpu_of(self.pid),
            "peak_memory_bytes": _peak_memory_of(self.pid),
        }
        if reply is None or killed_for:
            stderr = bytes(buffers[self.err_r])
            if killed_for == "runtime_error":  # it died; the zygote reaps it, so no exit status here
                killed_for = None
            verdict = classify(result, killed_for, self.limits, stderr) if killed_for is None else killed_for
            if verdict == "ok":
                verdict = "runtime_error"
            result["status"] = verdict
            self._terminate(f"the session ended with {verdict}")
            result["session_ended"] = True
            return result
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            result["status"] = "runtime_error"
            result["stderr"] += "\nsandbox: the session broke its reply protocol\n"
            self._terminate("protocol violated by the session")
            result["session_ended"] = True
            return result
        result["status"] = "ok" if reply["ok"] else classify(
            {**result, "exit_code": 1}, None, self.limits, bytes(buffers[self.err_r]))  # MemoryError: memory_limit
        result["exit_code"] = 0 if reply["ok"] else 1
        if fetch:
            result["defined"] = reply.get("defined") is True
            result["value"] = _sanitize_value(reply.get("value"))
        if not self._stop_between_turns(last_pid_before):
            result["stderr"] += "\nsandbox: the session's threads did not stop after the turn; the session was ended\n"
            self._terminate("its threads did not stop between turns")
            result["session_ended"] = True
            return result
        if self.disk and self._over_disk_budget(self.disk, usage_before):
            result["status"] = "output_limit"
            result["stderr"] += (f"\nsandbox: the session's files passed {self.disk.bytes // 2**20} MiB or "
                                 f"{self.disk.files} files in all; the session was ended\n")
            self._terminate("its files passed the session's disk budget")
            result["session_ended"] = True
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
            reply, buffer = _try_parse_frame(buffer)
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
        if (last_pid_before is not None and _last_pid() == last_pid_before
                and _only_these_run((1, os.getpid(), ZYGOTE.pid, self.pid))):
            return _wait_stopped(self.pid)
        keep = self.pid if self._alive() else None
        if IS_ROOT:  # never as an ordinary host user (process backend): -1 would be all their processes
            _as_uid(self.uid, lambda: os.kill(-1, signal.SIGSTOP), deadline_s=5.0)
        _kill_uid_processes(self.uid, keep=keep)
        return keep is None or _wait_stopped(keep)

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
        _kill_uid_processes(self.uid)
        for fd in (self.ctrl_w, self.status_r, self.out_r, self.err_r, self.pidfd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.pidfd = -1
        if not _purge_uid(self.uid, self.workdir):
            _request_retirement()

    def close(self) -> None:
        self._terminate("closed")


SESSION_REPLY_MAX_BYTES = 8 * 1024 * 1024
SESSION_FILES = 10_000  # files and dirs a session may keep in the scratch (see DiskBudget)


#: Set by ``--own-pid-namespace`` (the Docker backend): the supervisor's container is its pid
#: namespace, so ``ns_last_pid`` counts only this rollout's forks.
OWN_PID_NAMESPACE = False
#: Whether ``ns_last_pid`` was seen to move when the zygote was forked (a runtime such as gVisor
#: may not keep it); without it every turn takes the full stop.
PID_COUNTER_WORKS = False
_PIDS_CURRENT = ("/sys/fs/cgroup/pids/pids.current", "/sys/fs/cgroup/pids.current")


def _read_last_pid() -> int | None:
    try:
        with open("/proc/sys/kernel/ns_last_pid") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return None


def _last_pid() -> int | None:
    """The last pid this pid namespace handed out, or None where it proves nothing (a host)."""
    return _read_last_pid() if OWN_PID_NAMESPACE and PID_COUNTER_WORKS else None


def _only_these_run(pids: tuple[int, ...]) -> bool:
    """Whether the container's pids cgroup counts exactly the tasks of ``pids``: no other
    process or thread exists (a check that pid wrap-around cannot fool; False when unknown)."""
    for path in _PIDS_CURRENT:
        try:
            with open(path) as handle:
                current = int(handle.read())
            break
        except (OSError, ValueError):
            continue
    else:
        return False
    try:
        return current == sum(len(os.listdir(f"/proc/{pid}/task")) for pid in pids)
    except OSError:
        return False


def _wait_stopped(pid: int, deadline_s: float = 1.0) -> bool:
    """Wait until every thread of ``pid`` is stopped (or gone): a stop signal is only delivered
    as each thread leaves the kernel, so until then a write of its may still be landing."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            states = []
            for tid in os.listdir(f"/proc/{pid}/task"):
                fields = _task_stat_fields(pid, tid)
                if fields:
                    states.append(fields[0])
        except OSError:
            return True
        if all(state in ("T", "t", "Z", "X") for state in states):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0)  # yield the CPU so the stop can be delivered


def _task_stat_fields(pid: int, tid: str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/task/{tid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _live_uid_processes(uid: int, keep: int | None = None) -> list[int]:
    """Pids of ``uid``'s processes but ``keep``, skipping the truly dead (a zombie leader whose
    other threads still run counts as alive)."""
    live = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == keep:
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            fields = _proc_stat_fields(int(entry))
            if fields and fields[0] in ("Z", "X") and len(os.listdir(f"/proc/{entry}/task")) <= 1:
                continue
            live.append(int(entry))
        except OSError:
            pass
    return live


def _kill_uid_processes(uid: int, keep: int | None = None, deadline_s: float = 2.0) -> None:
    """SIGKILL every process of ``uid`` but ``keep``, scanning until none is left: a fork chain
    (each member forks, then exits) survives one pass, never a pass that finds it empty."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        live = _live_uid_processes(uid, keep)
        if not live:
            return
        for pid in live:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _job_uids() -> set[int]:
    """Uids of the live processes that are not root's: every job and session process."""
    uids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                uid = os.stat(f"/proc/{entry}").st_uid
            except OSError:
                continue
            if uid != 0:
                uids.add(uid)
    return uids


def _kill_job_processes(own_uids: range, deadline_s: float = 5.0) -> bool:
    """Kill every job process, one ``kill(-1)`` per uid, until a scan finds none alive.

    In a container (its own pid namespace) that is every process not root's. On the process
    backend the supervisor sees the whole host, so only the uids it hands out (``own_uids``)
    are its jobs': any other non-root process belongs to someone else (another pool's
    containers among them) and must never be touched."""
    if not IS_ROOT:
        return True  # the process backend as a host user: its jobs ran as this user, purged by uid
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        live = {uid for uid in _job_uids() if (OWN_PID_NAMESPACE or uid in own_uids) and _live_uid_processes(uid)}
        if not live:
            return True
        for uid in live:
            _as_uid(uid, lambda: os.kill(-1, signal.SIGKILL), deadline_s=2.0)
        _reap_children()
    return False


def _residue(scratch: str, own_pids: set[int]) -> list[str]:
    """What a purge left that a next rollout could see: processes, files, sockets, IPC."""
    problems = []
    if IS_ROOT and OWN_PID_NAMESPACE:
        strangers = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) not in own_pids:
                fields = _proc_stat_fields(int(entry))
                if fields and fields[0] not in ("Z", "X"):
                    strangers.append(entry)
        if strangers:
            problems.append(f"processes left: {', '.join(strangers[:8])}")
    left = [name for name in os.listdir(scratch) if name != ".build-cache"]
    if left or os.listdir(os.path.join(scratch, ".build-cache")):
        problems.append(f"files left in the scratch: {', '.join(left[:8]) or '.build-cache'}")
    if OWN_PID_NAMESPACE:
        if os.path.isdir(SHM_DIR) and os.listdir(SHM_DIR):
            problems.append(f"files left in {SHM_DIR}")
        sockets = _sockets_left()
        if sockets:
            problems.append(f"sockets left: {', '.join(sockets[:8])}")
    return problems


def _sockets_left(settle_s: float = 0.5) -> list[str]:
    """Unix sockets with a name, and inet sockets of any kind (TIME_WAIT included), in the
    container's network namespace. Sockets whose last reference was in flight (passed over a unix socket) when their
    processes died are freed by the kernel a moment later: wait ``settle_s`` for them."""
    deadline = time.monotonic() + settle_s
    while True:
        left = []
        for table in ("unix", "tcp", "tcp6", "udp", "udp6", "raw", "raw6"):
            try:
                with open(f"/proc/net/{table}") as handle:
                    rows = handle.read().splitlines()[1:]
            except OSError:
                continue
            if table == "unix":  # a nameless one nobody holds can be found by no one
                left += [row.split()[-1] for row in rows if len(row.split()) >= 8]
            else:
                left += [f"{table}:{row.split()[1]}" for row in rows if row.strip()]
        if not left or time.monotonic() > deadline:
            return left
        # Unreachable sockets (a cycle of them, each in flight in another) are freed by the
        # kernel's unix garbage collector, which a unix socket's release sets off.
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).close()
        time.sleep(0.02)


def _try_parse_frame(buffer: bytearray, max_size: int = SESSION_REPLY_MAX_BYTES):
    """Parse a frame written by untrusted code: anything malformed is a protocol violation."""
    newline = buffer.find(b"\n")
    if newline < 0:
        if len(buffer) > 20:
            return {"protocol": "bad header"}, bytearray()
        return None, buffer
    try:
        size = int(buffer[:newline])
    except ValueError:
        return {"protocol": "bad header"}, bytearray()
    if size < 0 or size > max_size:
        return {"protocol": "bad size"}, bytearray()
    end = newline + 1 + size
    if len(buffer) < end:
        return None, buffer
    try:
        return json.loads(bytes(buffer[newline + 1:end])), buffer[end:]
    except (ValueError, RecursionError):
        return {"protocol": "bad json"}, bytearray()


def _sanitize_value(value, depth: int = 0):
    """Re-check a session's reported value: only the wire forms _encode_value makes pass."""
    if value is None or isinstance(value, (bool, str)) or type(value) is int:
        return value
    if type(value) is list:
        if depth >= 32:
            return {"unsupported": "nesting too deep"}
        return [_sanitize_value(item, depth + 1) for item in value]
    if type(value) is not dict:  # a bare JSON float, say: _encode_value never writes one
        return {"unsupported": "malformed value"}
    bits = value.get(FLOAT_TAG)
    if set(value) == {FLOAT_TAG} and isinstance(bits, str) and len(bits) == 18 and bits.startswith("0x") \
            and all(ch in "0123456789abcdef" for ch in bits[2:]):
        return value
    if set(value) == {"unsupported"} and isinstance(value["unsupported"], str):
        return {"unsupported": value["unsupported"][:100]}
    return {"unsupported": "malformed value"}


def _proc_stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _cpu_of(pid: int) -> float:
    fields = _proc_stat_fields(pid)
    if not fields:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def _peak_memory_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# --------------------------------------------------------------------------- build cache

class BuildCache:
    """Compiled programs keyed by a hash of (language, compiler command, toolchain, sources).

    RL rollouts resubmit identical code often; a hit skips the compiler. Entries live in a
    root-owned dir that jobs can execute from but not write to. Only successful builds are
    cached: a failed one may be the machine's fault (a full scratch), so it is tried again.
    """

    def __init__(self, root: str, capacity: int = 64, max_bytes: int = 128 * 1024 * 1024):
        self.root = root
        self.capacity = capacity
        self.max_bytes = max_bytes  # the cache lives in the scratch tmpfs, i.e. in the container's memory
        self.entries: dict[str, dict] = {}  # insertion order doubles as LRU order
        self._toolchains: dict[str, str] = {}

    def _toolchain(self, compiler: str) -> str:
        if compiler not in self._toolchains:
            path = shutil.which(compiler, path=JOB_ENV["PATH"]) or compiler
            try:
                info = os.stat(os.path.realpath(path))
                self._toolchains[compiler] = f"{os.path.realpath(path)}:{info.st_size}:{info.st_mtime_ns}"
            except OSError:
                self._toolchains[compiler] = path
        return self._toolchains[compiler]

    def key(self, language: str, argv: list[str], files: dict) -> str:
        digest = hashlib.sha256()
        for part in (language, "\0".join(argv), self._toolchain(argv[0])):
            digest.update(part.encode() + b"\1")
        for name in sorted(files):
            digest.update(name.encode() + b"\2" + files[name].encode() + b"\3")
        return digest.hexdigest()[:32]

    def get(self, key: str) -> dict | None:
        entry = self.entries.pop(key, None)
        if entry is None:
            return None
        if entry.get("binary") and not os.path.exists(entry["binary"]):
            return None
        self.entries[key] = entry
        return entry

    def put(self, key: str, compiled: dict, workdir: str) -> dict:
        entry: dict[str, Any] = {"compile": compiled, "binary": None}
        if compiled["status"] == "ok":
            folder = os.path.join(self.root, key)
            target = os.path.join(folder, "prog")
            try:
                os.makedirs(folder, mode=0o700, exist_ok=True)
                shutil.copyfile(os.path.join(workdir, "prog"), target)
                os.chmod(target, 0o700)
            except OSError:
                return entry  # the job removed or hid its binary, or the disk is full: don't cache
            entry["binary"] = target
            entry["bytes"] = os.path.getsize(target)
        else:
            return entry
        self.entries[key] = entry
        while len(self.entries) > self.capacity or (
                len(self.entries) > 1 and sum(e.get("bytes", 0) for e in self.entries.values()) > self.max_bytes):
            old_key, _ = next(iter(self.entries.items()))
            self.entries.pop(old_key)
            shutil.rmtree(os.path.join(self.root, old_key), ignore_errors=True)
        return entry


# --------------------------------------------------------------------------- the service

class Supervisor:
    """Serves requests one at a time; a container runs one of these under its init."""

    MAX_SESSIONS = 32

    def __init__(self, scratch: str, uid_base: int, session_disk: DiskBudget | None = None):
        self.scratch = scratch
        self.uid_base = uid_base
        self.session_disk = session_disk
        self.sessions: dict[str, Session] = {}
        self.builds = BuildCache(os.path.join(scratch, ".build-cache"))

    def _fresh_name(self, kind: str) -> str:
        return f"{kind}-{os.urandom(8).hex()}"

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        if op == "ping":
            return {"ok": True, "protocol": PROTOCOL_VERSION, "pid": os.getpid(), "root": IS_ROOT}
        if op == "run":
            return {"ok": True, "result": self.run_job(request["job"])}
        if op == "session_open":
            return self.session_open(request.get("limits") or {})
        if op == "session_run":
            session = self.sessions.get(request["session"])
            if session is None:
                return {"ok": True, "result": {"status": "session_ended", "detail": "unknown session"}}
            result = session.run(request["code"], request.get("fetch"), _limits(request.get("limits")))
            if session.ended:
                self.sessions.pop(request["session"], None)
            return {"ok": True, "result": result}
        if op == "session_close":
            session = self.sessions.pop(request["session"], None)
            if session:
                session.close()
            return {"ok": True}
        if op == "purge":
            return self.purge()
        if op == "fork_floor":
            return {"ok": True, "result": self.fork_floor(request["code"])}
        return {"ok": False, "error": f"unknown op {op!r}"}

    def run_job(self, job: dict) -> dict:
        uid = self.uid_base
        workdir = os.path.join(self.scratch, self._fresh_name("job"))
        language = job["language"]
        files = dict(job.get("files") or {})
        stdin = (job.get("stdin") or "").encode("utf-8")
        limits = _limits(job.get("limits"))
        counted = bool(job.get("count_instructions"))
        try:
            if language == "python" and counted:
                result = StageRunner(uid, workdir, limits, counted=True).run(argv=COUNTED_PYTHON, files=files,
                                                                             stdin=stdin)
            elif language == "python":
                source = files.pop("main.py")
                runner = StageRunner(uid, workdir, limits)
                return runner.run(python=source, files=files, stdin=stdin)
            elif language in COMPILERS:
                result = self._compile_and_run(job, language, files, stdin, limits, uid, workdir, counted)
            else:
                raise ValueError(f"unknown language {language!r}")
            if counted and result["status"] == "ok" and not result.pop("made_processes"):
                result["instructions"] = read_count(workdir, uid)
            result.pop("made_processes", None)
            return result
        finally:
            if not _purge_uid(uid, workdir):
                _request_retirement()

    def _compile_and_run(self, job: dict, language: str, files: dict, stdin: bytes, limits: dict,
                         uid: int, workdir: str, counted: bool = False) -> dict:
        _, compile_argv = COMPILERS[language]
        compile_limits = _limits(job.get("compile_limits"))
        key = self.builds.key(language, compile_argv, files)
        entry = self.builds.get(key) if job.get("cache", True) else None
        if entry is None:
            compiled = StageRunner(uid, workdir, compile_limits).run(argv=compile_argv, files=files)
            if compiled["status"] != "ok" and _scratch_nearly_full(self.scratch):
                raise SetupError("the scratch disk is full")
            if compiled["status"] != "ok":  # rejected, or over the compile limits: the build failed
                compiled["status"] = "compile_error"
            entry = self.builds.put(key, compiled, workdir)
            compiled = dict(compiled, cached=False)
        else:
            compiled = dict(entry["compile"], cached=True, wall_s=0.0, cpu_s=0.0)
        if compiled["status"] != "ok":
            return dict(compiled, compile=compiled)
        if entry["binary"] and not os.path.isdir(workdir):
            _prepare_workdir(uid, workdir, program=entry["binary"])
        result = StageRunner(uid, workdir, limits, program_is_jobs=True, counted=counted).run(argv=["./prog"],
                                                                                               stdin=stdin)
        result["compile"] = compiled
        return result

    def session_open(self, limits: dict) -> dict:
        if len(self.sessions) >= self.MAX_SESSIONS:
            oldest = next(iter(self.sessions))
            self.sessions.pop(oldest).close()
        used = {session.uid for session in self.sessions.values()}
        uid = next(self.uid_base + 1 + slot for slot in range(self.MAX_SESSIONS)
                   if self.uid_base + 1 + slot not in used)
        name = self._fresh_name("session")
        session_limits = _limits(limits)
        self.sessions[name] = Session(uid, os.path.join(self.scratch, name), session_limits, self.session_disk)
        return {"ok": True, "session": name}

    def purge(self) -> dict:
        """The rollout is over: nothing it made may reach the next rollout in this container.

        Every session ends, every process of a job uid is killed (by uid, with ``kill(-1)``, until
        none is left), the whole scratch is emptied (the build cache with it: its entries were
        built where the rollout's code ran), and what is left is checked. ``clean`` is False when
        anything survived; the host then destroys the container instead of reusing it.
        """
        for name in list(self.sessions):
            self.sessions.pop(name).close()
        problems = []
        if not _kill_job_processes(range(self.uid_base, self.uid_base + 1 + self.MAX_SESSIONS)):
            problems.append("job processes survived")
        try:
            _empty_dir(self.scratch)
        except (OSError, RecursionError):
            subprocess.run(["find", self.scratch, "-mindepth", "1", "-delete"], stderr=subprocess.DEVNULL,
                           check=False)
        if OWN_PID_NAMESPACE and os.path.isdir(SHM_DIR):
            try:
                _empty_dir(SHM_DIR)
            except (OSError, RecursionError):
                subprocess.run(["find", SHM_DIR, "-mindepth", "1", "-delete"], stderr=subprocess.DEVNULL,
                               check=False)
        self.builds = BuildCache(self.builds.root)
        try:
            os.makedirs(self.builds.root, mode=0o700, exist_ok=True)
        except OSError as exc:
            problems.append(f"cannot remake the build cache: {exc}")
        problems += _residue(self.scratch, {os.getpid(), ZYGOTE.pid, 1})
        global RETIRE_REQUESTED
        if not problems:
            RETIRE_REQUESTED = False  # whatever a job left that could not be cleaned is gone now
        return {"ok": True, "clean": not problems, "detail": "; ".join(problems)[:500]}

    def fork_floor(self, source: str) -> dict:
        """The bare floor for the benchmark: fork, exec(code) in the child, wait. No isolation."""
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            try:
                exec(compile(source, "floor.py", "exec"), {"__name__": "__main__"})
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        return {"wall_s": time.monotonic() - started}


def serve(in_fd: int, out_fd: int, supervisor: Supervisor) -> None:
    while True:
        try:
            request = read_frame(in_fd)
        except (ValueError, EOFError) as exc:
            write_frame(out_fd, {"ok": False, "error": f"bad frame: {exc}"})
            return
        if request is None or request.get("op") == "shutdown":
            return
        try:
            reply = supervisor.handle(request)
        except Exception as exc:  # the supervisor's own fault: a harness error for the host
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                     "trace": traceback.format_exc(limit=5)}
        reply["id"] = request.get("id")
        if RETIRE_REQUESTED:
            reply["retire"] = True
        write_frame(out_fd, reply)


def main(argv: list[str]) -> int:
    global OWN_PID_NAMESPACE, PID_COUNTER_WORKS, ZYGOTE
    scratch = "/scratch"
    uid_base = 20000
    session_disk = None
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag == "--scratch":
            scratch = args.pop(0)
        elif flag == "--uid-base":
            uid_base = int(args.pop(0))
        elif flag == "--own-pid-namespace":
            OWN_PID_NAMESPACE = True
        elif flag == "--session-disk-mib":
            session_disk = DiskBudget(int(args.pop(0)) * 1024 * 1024, SESSION_FILES)
        else:
            print(f"supervisor: unknown argument {flag}", file=sys.stderr)
            return 2
    # Move the protocol stream off fds 0/1 so that nothing but frames can reach the host.
    in_fd = os.dup(0)
    out_fd = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.set_inheritable(in_fd, False)
    os.set_inheritable(out_fd, False)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # jobs control the other ends of our pipes
    for module in PRELOADED_MODULES:
        __import__(module)
    before = _read_last_pid()
    ZYGOTE = Zygote()  # before the first request: it must never hold one
    PID_COUNTER_WORKS = before is not None and _read_last_pid() not in (None, before)
    os.makedirs(scratch, exist_ok=True)
    supervisor = Supervisor(scratch, uid_base, session_disk)
    os.makedirs(supervisor.builds.root, mode=0o700, exist_ok=True)
    try:
        serve(in_fd, out_fd, supervisor)
    except OSError as exc:
        if exc.errno not in (errno.EPIPE, errno.EBADF):
            raise
    finally:
        for session in list(supervisor.sessions.values()):
            session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The child side: what a freshly forked child does before the job's own code runs (its own
session, stdio, uid, rlimits and dir), then that code: a job's Python or a session's turns."""

from __future__ import annotations

import builtins
import fcntl
import json
import linecache
import os
import resource
import signal
import sys
import traceback
from typing import NoReturn

from .processes import drop_privileges, reap_children
from .protocol import read_frame, write_frame
from .runtime import IS_ROOT
from .values import encode_value

#: This package's folder, and the image folder that holds it (beside ``toolchains``).
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
IMAGE_DIR = os.path.dirname(PACKAGE_DIR)

JOB_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


def _apply_rlimits(limits: dict) -> None:
    cpu = max(1, int(limits["cpu_s"] + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"], limits["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_bytes"], limits["file_bytes"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"], limits["open_files"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if IS_ROOT:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"], limits["processes"]))


def _make_oom_preferred() -> None:
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")
    except OSError:
        pass


def enter_sandbox(uid: int, workdir: str, limits: dict, stdio: tuple[int, int, int],
                   keep: tuple[int, ...] = (), umask: int = 0o077, groups: tuple[int, ...] = ()) -> list[int]:
    """In a freshly forked child: own session, stdio pipes, no other inherited fds, an
    unprivileged uid (with ``groups``, the toolchain's or none, as its supplementary groups),
    rlimits, and the scratch dir as cwd, HOME and TMPDIR.

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
    drop_privileges(uid, groups)
    os.chdir(workdir)
    os.umask(umask)  # 077: what a job or session writes is its uid's alone
    _apply_rlimits(limits)
    os.environ.clear()
    os.environ.update(JOB_ENV)
    os.environ["HOME"] = workdir
    os.environ["TMPDIR"] = workdir
    return moved


def write_files(files: dict) -> None:
    for name, content in files.items():
        if "/" in name or name in ("", ".", ".."):
            raise ValueError(f"bad file name {name!r}")
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as handle:
            handle.write(content)


def report_setup_failure(report: int, exc: BaseException) -> NoReturn:
    """Before the job's own code ran, a failure is the sandbox's: say so on the report pipe
    (the parent raises ``SetupError`` with it) and exit."""
    try:
        os.write(report, f"{type(exc).__name__}: {exc}".encode()[:500])
    except OSError:
        pass
    os._exit(127)


def _job_path() -> list[str]:
    """The job's import path: its scratch dir first, then the interpreter's own, without the
    supervisor's directory."""
    return [os.getcwd(), *[p for p in sys.path if p and os.path.abspath(p) != IMAGE_DIR]]


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
    """Print ``exc`` as Python would, without the supervisor's frames: the agent sees its own code."""
    tb = exc.__traceback__
    while tb is not None and os.path.dirname(tb.tb_frame.f_code.co_filename) == PACKAGE_DIR:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def run_python_in_child(source: str, filename: str, argv: list[str]) -> int:
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


def session_worker(ctrl_fd: int, status_fd: int) -> None:
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
        reap_children()  # stragglers of the last turn were killed by the supervisor
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
                reply["value"] = encode_value(namespace.get(fetch))
                json.dumps(reply["value"])
            except BaseException as exc:
                reply["value"] = {"unsupported": f"unreadable: {type(exc).__name__}"}
        write_frame(status_fd, reply)

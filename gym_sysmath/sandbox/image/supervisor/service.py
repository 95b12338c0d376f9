"""The service: the supervisor's request loop (``serve``), what each request does
(``Supervisor``), and its start (``main``), which the image's entry point runs."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
import traceback

from ..toolchains import COMPILERS, PYTHON
from . import counting, purge, runtime, zygote
from .builds import BuildCache
from .counting import COUNTED_JOB_DIR, COUNTED_PYTHON, PRECOMPILE_PYTHON, read_count
from .limits import with_defaults
from .protocol import PROTOCOL_VERSION, FrameError, read_frame, write_frame
from .purge import SHM_DIR, empty_dir, kill_job_processes, purge_uid, request_retirement, residue, scratch_nearly_full
from .runtime import IS_ROOT, SetupError
from .sessions import SESSION_FILES, DiskBudget, Session
from .stages import StageRunner, prepare_workdir
from .statuses import NO_SESSION, ExecutionStatus

#: Imported once by the supervisor so that forked jobs get them for free (and so that, under
#: the process backend, they work even where the job's uid cannot read the interpreter's files).
PRELOADED_MODULES = ("collections", "dataclasses", "decimal", "enum", "fractions", "functools", "itertools",
                     "math", "random", "re", "statistics", "string", "typing")


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
                return {"ok": True, "result": {"status": NO_SESSION, "detail": "unknown session"}}
            result = session.run(request["code"], request.get("fetch"), with_defaults(request.get("limits")))
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
        counted = bool(job.get("count_instructions"))
        if counted and not counting.counter_installed():
            raise SetupError(counting.NO_COUNTER)
        workdir = os.path.join(self.scratch, COUNTED_JOB_DIR if counted else self._fresh_name("job"))
        language = job["language"]
        files = dict(job.get("files") or {})
        stdin = (job.get("stdin") or "").encode("utf-8")
        limits = with_defaults(job.get("limits"))
        try:
            if language == "python" and counted:
                result = self._count_python(uid, workdir, limits, files, stdin)
            elif language == "python":
                source = files.pop("main.py")
                runner = StageRunner(uid, workdir, limits, toolchain=job.get("toolchain") is True)
                return runner.run(python=source, files=files, stdin=stdin)
            elif language in COMPILERS:
                result = self._compile_and_run(job, language, files, stdin, limits, uid, workdir, counted)
            else:
                raise ValueError(f"unknown language {language!r}")
            if counted and result["status"] == ExecutionStatus.OK and not result.pop("made_processes"):
                # a full scratch may have cut cachegrind's write short: no count then
                result["instructions"] = None if scratch_nearly_full(self.scratch) else read_count(workdir, uid)
            result.pop("made_processes", None)
            return result
        finally:
            if not purge_uid(uid, workdir):
                request_retirement()

    def _count_python(self, uid: int, workdir: str, limits: dict, files: dict, stdin: bytes) -> dict:
        """Compile the job's modules to bytecode, uncounted, then count the program: as a C++
        build is not in its count, a module's size (comments, unused code) is not in this one."""
        modules = sorted(name for name in files if name.endswith(".py") and name != PYTHON.source)
        if modules:
            compiled = StageRunner(uid, workdir, limits).run(argv=[*PRECOMPILE_PYTHON, *modules], files=files)
            if compiled["status"] != ExecutionStatus.OK:
                return compiled
            files = {}
        return StageRunner(uid, workdir, limits, counted=True).run(argv=COUNTED_PYTHON, files=files, stdin=stdin)

    def _compile_and_run(self, job: dict, language: str, files: dict, stdin: bytes, limits: dict,
                         uid: int, workdir: str, counted: bool = False) -> dict:
        _, compile_argv = COMPILERS[language]
        compile_limits = with_defaults(job.get("compile_limits"))
        key = self.builds.key(language, compile_argv, files)
        entry = self.builds.get(key) if job.get("cache", True) else None
        if entry is None:
            compiled = StageRunner(uid, workdir, compile_limits, toolchain=True).run(argv=compile_argv, files=files)
            if compiled["status"] != ExecutionStatus.OK and scratch_nearly_full(self.scratch):
                raise SetupError("the scratch disk is full")
            if compiled["status"] != ExecutionStatus.OK:  # rejected, or over the compile limits: the build failed
                compiled["status"] = ExecutionStatus.COMPILE_ERROR
            entry = self.builds.put(key, compiled, workdir)
            compiled = dict(compiled, cached=False)
        else:
            compiled = dict(entry["compile"], cached=True, wall_s=0.0, cpu_s=0.0)
        if compiled["status"] != ExecutionStatus.OK:
            return dict(compiled, compile=compiled)
        if entry["binary"] and not os.path.isdir(workdir):
            prepare_workdir(uid, workdir, program=entry["binary"])
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
        session_limits = with_defaults(limits)
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
        if not kill_job_processes(range(self.uid_base, self.uid_base + 1 + self.MAX_SESSIONS)):
            problems.append("job processes survived")
        try:
            empty_dir(self.scratch)
        except (OSError, RecursionError):
            subprocess.run(["find", self.scratch, "-mindepth", "1", "-delete"], stderr=subprocess.DEVNULL,
                           check=False)
        if runtime.OWN_PID_NAMESPACE and os.path.isdir(SHM_DIR):
            try:
                empty_dir(SHM_DIR)
            except (OSError, RecursionError):
                subprocess.run(["find", SHM_DIR, "-mindepth", "1", "-delete"], stderr=subprocess.DEVNULL,
                               check=False)
        self.builds = BuildCache(self.builds.root)
        try:
            os.makedirs(self.builds.root, mode=0o700, exist_ok=True)
        except OSError as exc:
            problems.append(f"cannot remake the build cache: {exc}")
        problems += residue(self.scratch, {os.getpid(), zygote.ZYGOTE.pid, 1})
        if not problems:
            purge.RETIRE_REQUESTED = False  # whatever a job left that could not be cleaned is gone now
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
        except (FrameError, EOFError) as exc:
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
        if purge.RETIRE_REQUESTED:
            reply["retire"] = True
        write_frame(out_fd, reply)


def main(argv: list[str]) -> int:
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
            runtime.OWN_PID_NAMESPACE = True
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
    before = counting.read_last_pid()
    zygote.ZYGOTE = zygote.Zygote()  # before the first request: it must never hold one
    counting.PID_COUNTER_WORKS = before is not None and counting.read_last_pid() not in (None, before)
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

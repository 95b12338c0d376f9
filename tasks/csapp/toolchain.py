"""The real toolchain: compile, link and run C programs with the sandbox image's gcc and ld.

Keys of the machine and linking templates, and ``verify csapp``'s check of every task whose
question is C code, come from here. A batch of programs travels as one Python job into one
sandbox container, whose script runs each program's gcc/ld/ar steps in a fresh directory and then
its binary, so a few hundred programs cost one job, not a few hundred.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gym_sysmath.exact import dumps_exact

#: What every single-file check is compiled with: PLATFORM's -fwrapv, and pthreads for the
#: concurrency programs.
CHECK_FLAGS = ("-std=gnu17", "-O1", "-fwrapv", "-pthread")


@dataclass(frozen=True)
class Program:
    """Source files, the build steps (gcc, ld, ar argv lists, run in order until one fails),
    and how to run the result. ``show`` names a file the build writes (``gcc -S`` output) whose
    text comes back; ``times`` runs the binary that many times (outputs of racy programs vary)."""

    files: Mapping[str, str]
    steps: tuple[tuple[str, ...], ...]
    run: tuple[str, ...] = ("./prog",)
    times: int = 1
    show: str | None = None
    stdin: str = ""
    #: When given, the binary runs once per text here, that text on its stdin (``times`` and
    #: ``stdin`` unused): a forced-schedule program, one schedule a run.
    inputs: tuple[str, ...] = ()

    def spec(self) -> dict[str, Any]:
        spec = {"files": dict(sorted(self.files.items())), "steps": [list(s) for s in self.steps],
                "run": list(self.run), "times": self.times, "show": self.show, "stdin": self.stdin}
        return {**spec, "inputs": list(self.inputs)} if self.inputs else spec  # older keys unchanged

    @property
    def key(self) -> str:
        """Content hash of everything that decides the result: the data file's index."""
        return hashlib.sha256(dumps_exact(self.spec(), sort_keys=True).encode()).hexdigest()[:20]


#: The run harness of fork programs: a child subreaper (``PR_SET_CHILD_SUBREAPER``) that runs the
#: program and reaps every process of its tree, orphans included, so the program itself needs no
#: reaping of its own (which would change when its processes end) and leaves no zombie behind.
#: Its status is the program's own.
REAPER_C = r"""#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int status, code = 126;
    pid_t pid, child;
    (void) argc;
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) return 125;
    child = fork();
    if (child == 0) {
        execv(argv[1], argv + 1);
        _exit(127);
    }
    while ((pid = wait(&status)) > 0)
        if (pid == child) code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return code;
}
"""


def single_file(source: str, *, times: int = 1, flags: Sequence[str] = CHECK_FLAGS, reaped: bool = False,
                inputs: Sequence[str] = ()) -> Program:
    """A one-file C program built with ``flags``; ``reaped`` runs it under ``REAPER_C``, and
    ``inputs`` runs it once per stdin text."""
    build = ("gcc", *flags, "-o", "prog", "prog.c", "-lm")
    if not reaped:
        return Program({"prog.c": source}, (build,), times=times, inputs=tuple(inputs))
    return Program({"prog.c": source, "reaper.c": REAPER_C}, (build, ("gcc", "-O1", "-o", "reaper", "reaper.c")),
                   run=("./reaper", "./prog"), times=times, inputs=tuple(inputs))


@dataclass(frozen=True)
class ProgramResult:
    """What a program did: whether every build step succeeded (``failed_step`` is the index of
    the first that did not), the shown file, and each run's stdout and exit status."""

    built: bool
    failed_step: int | None = None
    build_log: str = ""
    shown: str | None = None
    outputs: tuple[str, ...] = ()
    exit_codes: tuple[int, ...] = ()


#: A batch job killed from outside (seen on a busy shared host: SIGKILL within a second, with no
#: OOM record, to programs that run cleanly alone) keeps what it finished, and the rest is run
#: again; this many kills in a row that finish nothing end the run.
BATCH_ATTEMPTS = 8


class ToolchainError(RuntimeError):
    """The batch job itself failed (the sandbox, not a program): never a task's answer."""


#: Runs inside the container: reads the batch from stdin and prints one JSON line per program as
#: it finishes ([index, result]), so a batch killed part way keeps what it finished.
_RUNNER = r"""
import json, os, shutil, subprocess, sys, tempfile, threading
from concurrent.futures import ThreadPoolExecutor

lock = threading.Lock()

def one(item):
    index, spec = item
    d = tempfile.mkdtemp(dir=".")
    try:
        out = build_and_run(spec, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)  # the scratch dir is memory: keep only one program's files
    with lock:
        sys.stdout.write(json.dumps([index, out]) + "\n")
        sys.stdout.flush()

def build_and_run(spec, d):
    for name, text in spec["files"].items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    out = {"built": True, "failed_step": None, "build_log": "", "shown": None, "outputs": [], "exit_codes": []}
    for i, step in enumerate(spec["steps"]):
        p = subprocess.run(step, cwd=d, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            out.update(built=False, failed_step=i, build_log=p.stderr[-2000:])
            return out
    if spec["show"]:
        with open(os.path.join(d, spec["show"])) as f:
            out["shown"] = f.read()
    for stdin in spec.get("inputs") or [spec["stdin"]] * spec["times"]:
        try:
            p = subprocess.run(spec["run"], cwd=d, input=stdin, capture_output=True, text=True, timeout=20)
        except subprocess.TimeoutExpired as err:  # a stalled run is a result, not the batch's end
            stdout = err.stdout.decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
            out["outputs"].append(stdout + "<timed out>\n")
            out["exit_codes"].append(-9)
            continue
        out["outputs"].append(p.stdout)
        out["exit_codes"].append(p.returncode)
    return out

with ThreadPoolExecutor(int(os.environ.get("TOOLCHAIN_THREADS", "2"))) as pool:
    list(pool.map(one, json.load(sys.stdin)))
"""


def _finished(stdout: str) -> dict[int, ProgramResult]:
    """The complete result lines of a batch's output (a killed batch may end mid-line)."""
    done = {}
    for line in stdout.splitlines():
        try:
            index, raw = json.loads(line)
        except ValueError:
            continue
        done[index] = ProgramResult(
            built=raw["built"], failed_step=raw["failed_step"], build_log=raw["build_log"],
            shown=raw["shown"], outputs=tuple(raw["outputs"]), exit_codes=tuple(raw["exit_codes"]))
    return done


def run_programs(programs: Sequence[Program], lease: Any = None, *, batch: int = 40) -> list[ProgramResult]:
    """Build and run ``programs`` in the sandbox (a lease of ``gym_sysmath.sandbox.Sandbox``, or
    a fresh one), in batches; results in the same order. A batch killed from outside keeps what
    it finished and the rest runs again; ``ToolchainError`` when ``BATCH_ATTEMPTS`` runs in a row
    finish nothing."""
    from gym_sysmath.sandbox import Job, Limits, Sandbox

    owned = None
    if lease is None:
        owned = Sandbox()
        lease = owned.lease()
    limits = Limits(wall_s=600.0, cpu_s=1200.0, processes=64, stdout_bytes=64 * 1024**2,
                    file_bytes=256 * 1024**2)
    results: dict[int, ProgramResult] = {}
    fruitless = 0
    try:
        while len(results) < len(programs):
            todo = [i for i in range(len(programs)) if i not in results][:batch]
            job = Job("python", {"main.py": _RUNNER}, limits=limits, cache=False, toolchain=True,
                      stdin=json.dumps([[i, programs[i].spec()] for i in todo]))
            ran = lease.run(job)
            finished = {i: r for i, r in _finished(ran.stdout).items() if i in todo}
            results.update(finished)
            if ran.ok and len(finished) != len(todo):
                raise ToolchainError(f"a toolchain batch exited cleanly with {len(todo) - len(finished)} results "
                                     f"missing: {ran.stderr.strip()[-1000:]}")
            fruitless = 0 if finished else fruitless + 1
            if fruitless == BATCH_ATTEMPTS:
                raise ToolchainError(f"toolchain batches ended {ran.status} {BATCH_ATTEMPTS} times in a row "
                                     f"without finishing a program: {ran.stderr.strip()[-1000:]}")
            if not ran.ok:
                time.sleep(1.0 * fruitless)  # let the pressure that killed it pass
    finally:
        if owned is not None:
            lease.release()
            owned.close()
    return [results[i] for i in range(len(programs))]


def result_record(result: ProgramResult) -> dict[str, Any]:
    """The part of a result a data file keeps: what decides a key, never the compiler's chatter."""
    return {"built": result.built, "failed_step": result.failed_step, "shown": result.shown,
            "outputs": list(result.outputs), "exit_codes": list(result.exit_codes)}


@dataclass(frozen=True)
class Outputs:
    """A compiled program's recorded behaviour, as the templates read it back."""

    built: bool
    failed_step: int | None
    shown: str | None
    outputs: tuple[str, ...] = field(default=())
    exit_codes: tuple[int, ...] = field(default=())

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Outputs:
        return cls(record["built"], record["failed_step"], record["shown"], tuple(record["outputs"]),
                   tuple(record["exit_codes"]))

    @property
    def stdout(self) -> str:
        if not self.outputs:
            raise ValueError("the program did not run")
        return self.outputs[0]

"""What crosses the sandbox boundary: limits, jobs, execution results, and harness errors."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

# Limits (and their defaults), the statuses a job ends with and the session value codec are the
# supervisor's own: one definition
from gym_sysmath.sandbox.image.supervisor.limits import Limits
from gym_sysmath.sandbox.image.supervisor.statuses import ExecutionStatus
from gym_sysmath.sandbox.image.supervisor.values import decode_value
from gym_sysmath.sandbox.image.toolchains import LANGUAGES, TOOLCHAINS


class SandboxError(RuntimeError):
    """The harness failed (daemon unreachable, container died, protocol broken).

    Never the job's fault: the environment turns it into a ``scoring_error`` verdict.
    ``cause`` is a short machine-readable tag such as ``worker_died`` or ``worker_timeout``.
    """

    def __init__(self, cause: str, detail: str = ""):
        super().__init__(f"{cause}: {detail}" if detail else cause)
        self.cause = cause
        self.detail = detail


class SandboxUnavailableError(RuntimeError):
    """The requested backend cannot be used at all here; the message says what to do."""


COMPILE_LIMITS = Limits(wall_s=60.0, cpu_s=60.0, memory_bytes=2 * 1024**3,  # under the container's 3 GiB
                        stdout_bytes=64 * 1024, stderr_bytes=64 * 1024)


@dataclass(frozen=True)
class Job:
    """One program to run: its language, source files, stdin and limits.

    ``files`` maps plain file names to contents; the entry file is the language's ``source``
    (``main.py``, ``main.cpp``, ``main.rs``: ``toolchains.TOOLCHAINS``). Compiled languages are
    compiled (under ``compile_limits``) then run.
    """

    language: str
    files: dict[str, str]
    stdin: str = ""
    limits: Limits = field(default_factory=Limits)
    compile_limits: Limits = COMPILE_LIMITS
    #: Reuse a binary compiled earlier from identical sources (the workers keep a build cache).
    cache: bool = True
    #: Run the program under valgrind's instruction counter (``ExecutionResult.instructions``).
    #: Such a run cannot exec, and gets no count if it forks or starts a thread; it is about 5x (C++, Rust) to 20x
    #: (Python) slower than a plain one.
    count_instructions: bool = False
    #: Python jobs only: let the job run and read the image's compilers, assemblers and linkers
    #: (gcc, as, ld, rustc: ``toolchains.TOOLCHAIN_GROUP``). Off, as for every session, they are
    #: neither runnable nor readable (Docker backend; the process backend isolates nothing). The
    #: host's own build-time jobs set it (``tasks/csapp/toolchain``); no env sets it for an agent's
    #: code. A C++ or Rust job's compile stage always has them, its program never.
    toolchain: bool = False

    def __post_init__(self) -> None:
        if self.language not in LANGUAGES:
            raise ValueError(f"unknown language {self.language!r}; expected one of {LANGUAGES}")
        if self.toolchain and TOOLCHAINS[self.language].compiled:
            raise ValueError("toolchain=True is for Python jobs: a compiled job's build always has the "
                             "toolchain and its program never")
        for name in self.files:  # the supervisor refuses them too; here the caller learns why
            if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\0" in name:
                raise ValueError(f"job file names must be plain names in the job's dir, got {name!r}")

    def to_wire(self) -> dict[str, Any]:
        return {
            "language": self.language,
            "files": dict(self.files),
            "stdin": self.stdin,
            "limits": self.limits.to_wire(),
            "compile_limits": self.compile_limits.to_wire(),
            "cache": self.cache,
            "count_instructions": self.count_instructions,
            "toolchain": self.toolchain,
        }

    @property
    def build_key(self) -> str | None:
        """Identity of what a compiled job builds, for routing it to the worker that has it cached."""
        if not TOOLCHAINS[self.language].compiled:
            return None
        digest = hashlib.sha256(self.language.encode())
        for name in sorted(self.files):
            digest.update(b"\0" + name.encode() + b"\1" + self.files[name].encode())
        return digest.hexdigest()

    @property
    def request_timeout_s(self) -> float:
        """How long the host waits for the supervisor before declaring the worker dead."""
        compile_s = self.compile_limits.wall_s if TOOLCHAINS[self.language].compiled else 0.0
        return self.limits.wall_s + compile_s + 30.0  # margin: start-up and the 10 s cleanup deadline


@dataclass(frozen=True)
class ExecutionResult:
    """How one job (or one session turn) ended, as observed by the supervisor."""

    status: ExecutionStatus
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    signal: int | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_memory_bytes: int = 0
    compile: ExecutionResult | None = None
    #: Compile stages only: the binary came from the worker's build cache.
    cached: bool = False
    #: Session turns only: whether the fetched variable existed, and its decoded value.
    defined: bool = False
    value: Any = None
    #: Session turns only: this turn ended its session (its code killed it, or broke a limit), so
    #: the next turn starts a fresh one. Not the supervisor's ``SESSION_ENDED`` status, which
    #: says a session is unknown to it (retired): the host replays that one instead.
    turn_ended_session: bool = False
    #: Counted jobs that exited 0: the instructions the program executed, or None if the
    #: counter left no well-formed count (see ``read_count`` in ``image/supervisor/counting.py``).
    instructions: int | None = None

    def __post_init__(self) -> None:  # ExecutionResult("timeout") is typed too; a misspelt status is refused
        object.__setattr__(self, "status", ExecutionStatus(self.status))

    @property
    def ok(self) -> bool:
        return self.status is ExecutionStatus.OK

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ExecutionResult:
        wire: Any = data.get("status")
        try:
            status = ExecutionStatus(wire)
        except ValueError:
            raise SandboxError("protocol_error", f"unexpected job status {wire!r}") from None
        compiled = data.get("compile")
        try:
            return cls(
                status=status,
                stdout=str(data.get("stdout", "")),
                stderr=str(data.get("stderr", "")),
                exit_code=data.get("exit_code"),
                signal=data.get("signal"),
                stdout_truncated=bool(data.get("stdout_truncated")),
                stderr_truncated=bool(data.get("stderr_truncated")),
                wall_s=float(data.get("wall_s", 0.0)),
                cpu_s=float(data.get("cpu_s", 0.0)),
                peak_memory_bytes=int(data.get("peak_memory_bytes", 0)),
                compile=cls.from_wire(compiled) if compiled else None,
                cached=bool(data.get("cached")),
                defined=bool(data.get("defined")),
                value=decode_value(data.get("value")),
                turn_ended_session=bool(data.get("turn_ended_session")),
                instructions=_count(data.get("instructions")),
            )
        except (TypeError, ValueError) as exc:
            raise SandboxError("protocol_error", f"malformed result: {exc}") from exc


def _count(wire: Any) -> int | None:
    if wire is None:
        return None
    if type(wire) is not int or wire < 0:
        raise ValueError(f"bad instruction count {wire!r}")
    return wire

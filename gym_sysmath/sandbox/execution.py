"""What crosses the sandbox boundary: limits, jobs, execution results, and harness errors."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import Any

from gym_sysmath.exact import FLOAT_BITS, FLOAT_TAG, float_from_bits
from gym_sysmath.sandbox.image.toolchains import LANGUAGES, TOOLCHAINS

#: How a job can end. ``ok`` means it exited 0; every other status is the job's own failure.
EXECUTION_STATUSES = ("ok", "compile_error", "runtime_error", "timeout", "memory_limit", "output_limit")


class SandboxError(RuntimeError):
    """The harness failed (daemon unreachable, container died, protocol broken).

    Never the job's fault: the environment turns it into a ``scoring_error`` verdict.
    ``cause`` is a short machine-readable tag such as ``worker_died`` or ``daemon_unreachable``.
    """

    def __init__(self, cause: str, detail: str = ""):
        super().__init__(f"{cause}: {detail}" if detail else cause)
        self.cause = cause
        self.detail = detail


class SandboxUnavailableError(RuntimeError):
    """The requested backend cannot be used at all here; the message says what to do."""


@dataclass(frozen=True)
class Limits:
    """Per-job resource limits, enforced inside the sandbox with rlimits and a wall clock."""

    wall_s: float = 10.0
    cpu_s: float = 10.0
    memory_bytes: int = 2 * 1024**3
    processes: int = 64
    file_bytes: int = 64 * 1024**2
    open_files: int = 256
    stdout_bytes: int = 1024**2
    stderr_bytes: int = 256 * 1024

    def to_wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


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

    def __post_init__(self) -> None:
        if self.language not in LANGUAGES:
            raise ValueError(f"unknown language {self.language!r}; expected one of {LANGUAGES}")
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

    status: str
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
    session_ended: bool = False
    #: Counted jobs that exited 0: the instructions the program executed, or None if the
    #: counter left no well-formed count (see the supervisor's ``read_count``).
    instructions: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ExecutionResult:
        status = data.get("status")
        if status not in EXECUTION_STATUSES:
            raise SandboxError("protocol_error", f"unexpected job status {status!r}")
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
                session_ended=bool(data.get("session_ended")),
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


class Unsupported:
    """A session value that has no JSON form (a tuple, a dict, a numpy array...)."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<unsupported {self.type_name}>"


def decode_value(wire: Any) -> Any:
    """Inverse of the supervisor's session encoding (the task files' float tags): floats come
    back by bit pattern, anything else tagged comes back as ``Unsupported``."""
    if isinstance(wire, list):
        return [decode_value(item) for item in wire]
    if isinstance(wire, dict):
        bits = wire.get(FLOAT_TAG)
        if set(wire) == {FLOAT_TAG} and isinstance(bits, str) and FLOAT_BITS.fullmatch(bits):
            return float_from_bits(int(bits, 16))
        return Unsupported(str(wire.get("unsupported", "malformed value"))[:100])
    return wire

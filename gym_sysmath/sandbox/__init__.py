"""Sandboxed execution of untrusted code: a warm Docker pool, or an opt-in host process.

``Sandbox.run(Job)`` returns an ``ExecutionResult`` whose status is the job's own doing;
``SandboxError`` means the harness failed. See ``image/supervisor.py`` for what happens
inside each worker.
"""

from gym_sysmath.sandbox.execution import (
    COMPILE_LIMITS,
    EXECUTION_STATUSES,
    LANGUAGES,
    ExecutionResult,
    Job,
    Limits,
    SandboxError,
    SandboxUnavailableError,
)
from gym_sysmath.sandbox.pool import (
    BACKENDS,
    SESSION_LIMITS,
    PoolStats,
    PythonSession,
    Sandbox,
    acquire_shared,
    release_shared,
)

__all__ = [
    "BACKENDS",
    "COMPILE_LIMITS",
    "EXECUTION_STATUSES",
    "LANGUAGES",
    "SESSION_LIMITS",
    "ExecutionResult",
    "Job",
    "Limits",
    "PoolStats",
    "PythonSession",
    "Sandbox",
    "SandboxError",
    "SandboxUnavailableError",
    "acquire_shared",
    "release_shared",
]

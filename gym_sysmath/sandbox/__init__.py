"""Sandboxed execution of untrusted code: one Docker container per rollout, or an opt-in host process.

``Sandbox.lease()`` gives a rollout its own container; ``Lease.run(Job)`` returns an
``ExecutionResult`` whose status is the job's own doing; ``SandboxError`` means the harness
failed. See ``pool.py`` for the leases, ``daemon.py`` for the image and the Docker daemon, and the
package ``image`` (the image's own sources) for what happens inside each container.
"""

from gym_sysmath.sandbox.execution import (
    COMPILE_LIMITS,
    LANGUAGES,
    ExecutionResult,
    ExecutionStatus,
    Job,
    Limits,
    SandboxError,
    SandboxUnavailableError,
)
from gym_sysmath.sandbox.pool import (
    BACKENDS,
    SESSION_LIMITS,
    Lease,
    PoolStats,
    PythonSession,
    Sandbox,
    acquire_shared,
    release_shared,
)

__all__ = [
    "BACKENDS",
    "COMPILE_LIMITS",
    "LANGUAGES",
    "SESSION_LIMITS",
    "ExecutionResult",
    "ExecutionStatus",
    "Job",
    "Lease",
    "Limits",
    "PoolStats",
    "PythonSession",
    "Sandbox",
    "SandboxError",
    "SandboxUnavailableError",
    "acquire_shared",
    "release_shared",
]

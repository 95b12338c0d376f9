"""A job's resource limits and their defaults: the host's ``Limits`` and the supervisor's reading
of a request's limits are this one definition (imported on the host as
``gym_sysmath.sandbox.image.supervisor.limits``, re-exported by ``gym_sysmath.sandbox``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


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


def with_defaults(spec: dict[str, Any] | None) -> dict[str, Any]:
    """A request's limits: the ones it sets (None is unset), the defaults for the rest."""
    limits = Limits().to_wire()
    limits.update({k: v for k, v in (spec or {}).items() if v is not None})
    return limits

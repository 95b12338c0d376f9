"""``gym-sysmath doctor``: is this host ready to grade? Each check says what it found and, when
it fails, what to do. The seccomp check does not trust the configuration: it starts a real
container and runs a probe that a refused syscall must fail."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gym_sysmath.sandbox import daemon
from gym_sysmath.sandbox.execution import Job, Limits, SandboxError, SandboxUnavailableError

OK, WARN, FAIL = "ok", "warn", "FAIL"

#: ``memfd_create`` is refused by the profile (see ``gym_sysmath.sandbox.seccomp``) and harmless
#: where it is allowed: the probe prints which of the two it met.
SECCOMP_PROBE = """\
import os
try:
    os.close(os.memfd_create("gym-sysmath-doctor"))
except PermissionError:
    print("refused")
else:
    print("allowed")
"""


@dataclass(frozen=True)
class Check:
    name: str
    status: str  #: OK, WARN (works, weaker than it could be) or FAIL
    detail: str
    fix: str = ""  #: what to do, for WARN and FAIL

    def line(self) -> str:
        text = f"[{self.status:<4}] {self.name}: {self.detail}"
        return text + (f"\n       -> {self.fix}" if self.fix and self.status != OK else "")


def check_daemon() -> tuple[Check, Any]:
    """The daemon answers; its version and runtime, and any runtime GYM_SYSMATH_RUNTIME asks for."""
    from gym_sysmath.sandbox.workers import RUNTIME_VARIABLE, ContainerSettings

    try:
        client = daemon.docker_client()
    except SandboxUnavailableError as exc:
        where = f" at DOCKER_HOST={os.environ['DOCKER_HOST']}" if os.environ.get("DOCKER_HOST") else ""
        found = f"not reachable{where}: {str(exc).split('. ')[0]}"
        return Check("daemon", FAIL, found, daemon.HOW_TO_START_DOCKER), None
    version = client.version().get("Version", "?")
    info = client.info()
    runtime = ContainerSettings().runtime
    detail = f"reachable, Docker {version}, default runtime {info.get('DefaultRuntime', '?')}"
    try:
        daemon.require_runtime(client, runtime)
    except SandboxUnavailableError as exc:
        return Check("daemon", FAIL, f"{detail}; no runtime {runtime!r}", str(exc)), client
    if runtime:
        detail += f", {RUNTIME_VARIABLE}={runtime}"
    return Check("daemon", OK, detail), client


def check_image(client: Any) -> Check:
    status = daemon.image_status(client)
    if status.current:
        return Check("image", OK, status.describe())
    return Check("image", FAIL, status.describe(),
                 "run `gym-sysmath sandbox build` (add --bootstrap on a host that reaches no registry)")


def check_container(sandbox: Any) -> list[Check]:
    """A container starts and speaks this host's protocol, and the seccomp profile refuses what it
    must: the probe runs inside it. ``sandbox`` is any pool (the process backend fails the probe)."""
    from gym_sysmath.sandbox import seccomp
    from gym_sysmath.sandbox.workers import PROTOCOL_VERSION

    job = Job("python", {"main.py": SECCOMP_PROBE}, limits=Limits(wall_s=30.0, cpu_s=10.0))
    try:
        with sandbox.lease() as lease:
            result = lease.run(job)
            worker = lease.worker.name if lease.worker is not None else "a container"
    except SandboxError as exc:
        fix = ("rebuild the image (`gym-sysmath sandbox build --force`)" if exc.cause == "protocol_error"
               else "see `gym-sysmath sandbox status` and the daemon's log; SECURITY.md lists what a container needs")
        return [Check("container", FAIL, f"{exc.cause}: {exc.detail}", fix),
                Check("seccomp", FAIL, "not probed: no container ran", "fix the container check first")]
    checks = [Check("container", OK, f"{worker} started and speaks protocol {PROTOCOL_VERSION}")]
    answer = result.stdout.strip()
    profile = "the profile for this host's architecture" if seccomp.security_option() else "no profile for this arch"
    if answer == "refused":
        checks.append(Check("seccomp", OK, f"{profile} is applied: the probe's memfd_create was refused"))
    elif answer == "allowed":
        checks.append(Check("seccomp", FAIL, f"the probe's memfd_create was allowed ({profile}): rollouts run "
                                             "without the sandbox's seccomp profile",
                            "run containers under the Docker backend on a daemon that applies seccomp "
                            "(`docker info` lists seccomp under Security Options); see SECURITY.md"))
    else:
        checks.append(Check("seccomp", FAIL, f"the probe did not answer ({result.status}: {result.stderr[-200:]!r})",
                            "rebuild the image (`gym-sysmath sandbox build --force`)"))
    return checks


def check_cgroup_cap(client: Any) -> Check:
    """All sandbox containers together under one memory-capped parent cgroup, where the host allows it."""
    from gym_sysmath.sandbox.workers import ContainerSettings

    fraction = ContainerSettings().host_memory_fraction
    parent = daemon.capped_cgroup_parent(client, fraction)
    if parent is None:
        return Check("cgroup cap", WARN, "no parent cgroup caps the sandbox containers together (each keeps its "
                                         "own memory limit)",
                     "run as root against a local daemon with the cgroupfs driver to cap them at "
                     f"{fraction:.0%} of host memory; see SECURITY.md")
    return Check("cgroup cap", OK, f"containers run under {parent}, capped at {fraction:.0%} of host memory")


def run_checks(say: Callable[[Check], None] = lambda check: None) -> list[Check]:
    """Every check, in order; a check that needs what failed before it is reported as failed too."""
    checks: list[Check] = []

    def add(check: Check) -> None:
        checks.append(check)
        say(check)

    reachable, client = check_daemon()
    add(reachable)
    if client is None:
        for name in ("image", "container", "seccomp", "cgroup cap"):
            add(Check(name, FAIL, "not checked: the daemon is not reachable", "fix the daemon check first"))
        return checks
    current = check_image(client)
    add(current)
    blocker = None
    if current.status == FAIL:
        blocker = "no current image"
    elif reachable.status == FAIL:
        blocker = "the daemon lacks the runtime"
    if blocker is None:
        from gym_sysmath.sandbox.pool import Sandbox

        try:
            sandbox = Sandbox("docker", pool_size=1)
        except SandboxUnavailableError as exc:
            blocker = str(exc)[:300]
        else:
            try:
                for check in check_container(sandbox):
                    add(check)
            finally:
                sandbox.close()
    if blocker is not None:
        for name in ("container", "seccomp"):
            add(Check(name, FAIL, f"not checked: {blocker}", "fix the checks above first"))
    add(check_cgroup_cap(client))
    return checks

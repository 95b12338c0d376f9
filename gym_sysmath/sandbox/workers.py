"""Workers: one running supervisor each, in a hardened container or (opt-in) a host process.

A worker answers one request at a time. Any failure to reach or understand its supervisor
raises ``SandboxError`` and marks the worker broken, so the pool replaces it.
"""

from __future__ import annotations

import itertools
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from gym_sysmath.sandbox import seccomp
from gym_sysmath.sandbox.channel import DockerStreamSource, FdSource, FrameReader
from gym_sysmath.sandbox.execution import SandboxError
from gym_sysmath.sandbox.image.supervisor.protocol import PROTOCOL_VERSION, encode_frame

LABEL_SANDBOX = "gym_sysmath.sandbox"
LABEL_OWNER = "gym_sysmath.owner"
RUNTIME_VARIABLE = "GYM_SYSMATH_DOCKER_RUNTIME"
FRESH_CONTAINERS_VARIABLE = "GYM_SYSMATH_FRESH_CONTAINERS"


def supervisor_path() -> str:
    """The supervisor's entry point, run with ``python3 -s -P`` (in the image, its ENTRYPOINT)."""
    return str(resources.files("gym_sysmath.sandbox.image") / "run_supervisor.py")


def _fresh_uid_base() -> int:
    """Distinct unprivileged uids per worker: RLIMIT_NPROC counts per uid across the host."""
    return 100_000 + 64 * secrets.randbelow(30_000_000)


class Worker(ABC):
    """A supervisor reachable through a framed channel."""

    _ids = itertools.count(1)

    def __init__(self) -> None:
        self.broken = False
        self.name = "worker"

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one request and wait for its reply; a harness failure raises SandboxError."""
        if self.broken:
            raise SandboxError("worker_died", f"{self.name} is no longer usable")
        request_id = next(self._ids)
        try:
            self._send(encode_frame({**message, "id": request_id}))
            reply = self._reader.read(time.monotonic() + timeout_s)
        except SandboxError:
            self.broken = True
            raise
        except OSError as exc:
            self.broken = True
            raise SandboxError("worker_died", f"{self.name}: {exc}") from exc
        if reply.get("id") != request_id:
            self.broken = True
            raise SandboxError("protocol_error", f"{self.name} answered request {reply.get('id')!r}, "
                                                 f"expected {request_id}")
        if not reply.get("ok"):
            self.broken = True
            raise SandboxError("supervisor_error", str(reply.get("error", "unknown error"))[:500])
        if reply.get("retire"):  # it could not clean up after a job: answer stands, worker goes
            self.broken = True
        return reply

    def ping(self, timeout_s: float = 30.0) -> None:
        """Check the supervisor answers, and speaks this host's protocol."""
        reply = self.request({"op": "ping"}, timeout_s)
        if reply.get("protocol") != PROTOCOL_VERSION:
            self.broken = True
            raise SandboxError("protocol_error", f"{self.name} speaks protocol {reply.get('protocol')!r}, "
                                                 f"this host {PROTOCOL_VERSION}: rebuild the sandbox image")

    @abstractmethod
    def _send(self, data: bytes) -> None: ...

    @abstractmethod
    def destroy(self) -> None: ...

    _reader: FrameReader


@dataclass(frozen=True)
class ContainerSettings:
    """Hardening and sizing of each pool container (see the sandbox threat model)."""

    memory_bytes: int = 3 * 1024**3
    cpus: float = 1.0
    pids_limit: int = 256
    scratch_bytes: int = 512 * 1024**2
    shm_bytes: int = 64 * 1024**2
    #: What all sandbox containers on the host may hold together, as a share of its memory (a
    #: parent cgroup, where one can be made: ``image.capped_cgroup_parent``).
    host_memory_fraction: float = 0.75
    #: What one Python session's files may hold in the scratch in all (and at most 10,000 files):
    #: past it the session ends, so sessions cannot leave the worker's builds and jobs no room.
    session_disk_bytes: int = 64 * 1024**2
    #: Replace a rollout's container instead of purging it for the next rollout: closes the
    #: counters a purge cannot reset (inode and pid numbers, see SECURITY.md), at the price of a
    #: container start per rollout (in the background, off the rollout's path).
    fresh_per_rollout: bool = field(default_factory=lambda: os.environ.get(FRESH_CONTAINERS_VARIABLE) == "1")
    #: OCI runtime, e.g. "runsc" for gVisor (see SECURITY.md); None is the daemon's default (runc).
    runtime: str | None = field(default_factory=lambda: os.environ.get(RUNTIME_VARIABLE) or None)


class DockerWorker(Worker):
    """A long-lived container running the supervisor under tini, spoken to over attach."""

    def __init__(self, client: Any, image: str, settings: ContainerSettings, owner: str,
                 cgroup_parent: str | None = None):
        super().__init__()
        import docker.types

        self.client = client
        self.container = None
        self.container_name: str | None = f"gym-sysmath-{secrets.token_hex(8)}"
        sweep_left_behind(client)
        try:
            self.container = client.containers.create(
                image,
                name=self.container_name,
                command=["--scratch", "/scratch", "--uid-base", str(_fresh_uid_base()), "--own-pid-namespace",
                         "--session-disk-mib", str(settings.session_disk_bytes // 2**20)],
                stdin_open=True,
                detach=True,
                network_mode="none",
                read_only=True,
                # An empty read-only /dev/pts: no pty (the kernel's pty pool is the host's), and
                # /dev/ptmx, a link into it, leads nowhere.
                tmpfs={"/scratch": f"size={settings.scratch_bytes},mode=0711,exec",
                       "/dev/pts": "ro,size=4k,mode=0755"},
                # A private /dev/shm (POSIX semaphores and shared memory: multiprocessing needs them),
                # emptied with each job and rollout; no SysV IPC and no POSIX queues.
                ipc_mode="private",
                shm_size=settings.shm_bytes,
                sysctls={"kernel.shmmax": "0", "kernel.shmall": "0", "kernel.shmmni": "0", "kernel.msgmni": "0",
                         "kernel.sem": "0 0 0 0", "fs.mqueue.queues_max": "0"},
                mem_limit=settings.memory_bytes,
                memswap_limit=settings.memory_bytes,
                pids_limit=settings.pids_limit,
                nano_cpus=int(settings.cpus * 1e9),
                cap_drop=["ALL"],
                # The supervisor's own rights (jobs drop every capability with their uid): switching
                # uids, signalling and handing files to a job, and reading and removing what a
                # job left in its private (0700) dir.
                cap_add=["SETUID", "SETGID", "KILL", "CHOWN", "DAC_OVERRIDE", "FOWNER"],
                security_opt=["no-new-privileges", *filter(None, [seccomp.security_option()])],
                ulimits=[docker.types.Ulimit(name="core", soft=0, hard=0)],
                labels={LABEL_SANDBOX: "1", LABEL_OWNER: owner},
                # The protocol stream is the container's stdout: logged, every frame (program
                # output included) would also be written to the host's disk for the container's life.
                log_config=docker.types.LogConfig(type="none"),
                user="0",
                runtime=settings.runtime,
                cgroup_parent=cgroup_parent,
            )
            self.name = f"container {self.container.short_id}"
            attached = self.container.attach_socket(params={"stdin": 1, "stdout": 1, "stream": 1})
            self.sock: socket.socket = getattr(attached, "_sock", attached)
            self._attached = attached
            self.container.start()
            self._reader = FrameReader(DockerStreamSource(self.sock))
            self.ping()
        except SandboxError:
            self.destroy()
            raise
        except Exception as exc:  # docker.errors.*, requests errors: the daemon's side
            self.destroy()  # by name: the daemon may have made the container before failing
            raise SandboxError("container_start_failed", str(exc)[:300]) from exc

    def _send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def destroy(self) -> None:
        self.broken = True
        for stream in (getattr(self, "_attached", None), getattr(self, "sock", None)):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        if self.container_name is not None:
            _remove_container(self.client, self.container_name)
            self.container_name = None
            self.container = None


#: Names of this process's containers whose creation or removal failed (the daemon was stopping
#: or restarting): the daemon may still hold them, so they are removed when the pool next starts a
#: worker. By name, because a create that failed may still have made the container.
_left_behind: set[str] = set()
_left_behind_lock = threading.Lock()


def _remove_container(client: Any, name: str) -> None:
    import docker.errors

    try:
        client.api.remove_container(name, force=True)
    except docker.errors.NotFound:
        pass
    except Exception:  # the daemon is unreachable: swept when the pool next starts a worker
        with _left_behind_lock:
            _left_behind.add(name)


def sweep_left_behind(client: Any) -> None:
    """Remove the containers this process failed to create or remove earlier."""
    with _left_behind_lock:
        names = list(_left_behind)
        _left_behind.clear()
    for name in names:
        _remove_container(client, name)


class ProcessWorker(Worker):
    """The same supervisor as a host process: rlimits and process groups, but no container.

    Opt-in only (``sandbox="process"``): there is no network or filesystem isolation beyond
    what an unprivileged uid gives, and none at all when the host process is not root.
    """

    def __init__(self) -> None:
        super().__init__()
        self.scratch = tempfile.mkdtemp(prefix="gym-sysmath-scratch-")
        os.chmod(self.scratch, 0o755)
        self.process = subprocess.Popen(
            [sys.executable, "-s", "-P", supervisor_path(), "--scratch", self.scratch,
             "--uid-base", str(_fresh_uid_base())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONHASHSEED": "0", "LANG": "C.UTF-8"},
        )
        self.name = f"process {self.process.pid}"
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None  # both are pipes (above)
        self._stdin, self._stdout = stdin, stdout
        self._reader = FrameReader(FdSource(stdout.fileno()))
        try:
            self.ping()
        except SandboxError:
            self.destroy()
            raise

    def _send(self, data: bytes) -> None:
        self._stdin.write(data)
        self._stdin.flush()

    def destroy(self) -> None:
        self.broken = True
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self._stdin, self._stdout):
            try:
                stream.close()
            except OSError:
                pass
        shutil.rmtree(self.scratch, ignore_errors=True)

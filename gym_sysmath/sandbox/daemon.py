"""What this host asks of the Docker daemon: a client, the sandbox image (content hash, build,
status), the cgroup that caps the containers together, and reaping the containers of dead owners.

The image is tagged by package version and a hash of its build context (every source in the
package ``gym_sysmath.sandbox.image``: the Dockerfile, the supervisor package and what it reads
beside it), and labelled with that hash, so an image built from other sources is never used in
its place: it is rebuilt (beside the other, which keeps working for its own checkout).

The Dockerfile has two targets (``ImageVariant``): the default image, and a ``performance``
variant that adds the patched cachegrind CompGeom's performance count needs (tagged ``...-perf``).
A pool uses the variant when it is current, else the default (docs/sandbox-image.md).
"""

from __future__ import annotations

import hashlib
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata, resources
from typing import Any

from gym_sysmath.sandbox.execution import SandboxUnavailableError
from gym_sysmath.sandbox.workers import LABEL_OWNER, LABEL_SANDBOX, RUNTIME_VARIABLE

IMAGE_REPOSITORY = "gym-sysmath-sandbox"
BASE_IMAGE_REGISTRY = "debian:bookworm-slim"
BASE_IMAGE_BOOTSTRAP = "gym-sysmath-base:bookworm"
LABEL_CONTENT_HASH = "gym_sysmath.content_hash"
LABEL_VARIANT = "gym_sysmath.variant"
DEFAULT_MIRROR = "http://deb.debian.org/debian"

HOW_TO_START_DOCKER = (
    "Start the Docker daemon (for example `sudo dockerd &` or `sudo systemctl start docker`), "
    "or point DOCKER_HOST at a reachable daemon. To run without Docker, pass "
    "sandbox=\"process\" to gym.make (weaker isolation: host processes with rlimits)."
)


def package_version() -> str:
    try:
        return metadata.version("gym-sysmath")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def image_tag() -> str:
    """The default image's tag, version and content hash: images built from other sources
    (another checkout, an older release) live beside this one instead of replacing it."""
    return f"{IMAGE_REPOSITORY}:{package_version()}-{content_hash()}"


@dataclass(frozen=True)
class ImageVariant:
    """One target of the image's Dockerfile. Each has its own tag suffix and label, so the two
    never share a tag, and a pool can tell from the tag whether its image counts instructions."""

    name: str
    target: str  # the Dockerfile stage it builds
    tag_suffix: str

    def tag(self) -> str:
        return image_tag() + self.tag_suffix


DEFAULT_IMAGE = ImageVariant("default", "sandbox", "")
#: The default image and the patched cachegrind (``--with-performance``): slow to build, and
#: needed only by ``measure_performance=True``, whose score is reported, never rewarded.
PERFORMANCE_IMAGE = ImageVariant("performance", "performance", "-perf")
IMAGE_VARIANTS = (DEFAULT_IMAGE, PERFORMANCE_IMAGE)
NO_INSTRUCTION_COUNTER = (
    "measure_performance=True needs instruction counts, which only the sandbox image's performance variant "
    "can take (a patched cachegrind), and this host's pool runs the default image. Build the variant with "
    "`gym-sysmath sandbox build --with-performance` (it compiles valgrind: about 8 more minutes on 2 cores; "
    "docs/sandbox-image.md), or drop measure_performance.")


def counts_instructions(tag: str) -> bool:
    """Whether the image a pool runs (``Sandbox.image_tag``) has the instruction counter."""
    return tag.endswith(PERFORMANCE_IMAGE.tag_suffix)


def _is_source(name: str) -> bool:
    """Not a bytecode cache, nor a hidden or backup file: what may change the content hash."""
    return not (name == "__pycache__" or name.startswith(".") or name.endswith((".pyc", ".pyo", "~")))


def _context_files() -> dict[str, bytes]:
    """The build context: every source in the image package, by its path there (``supervisor/service.py``)."""
    files: dict[str, bytes] = {}
    pending = [("", resources.files("gym_sysmath.sandbox.image"))]
    while pending:
        prefix, folder = pending.pop()
        for entry in folder.iterdir():
            if not _is_source(entry.name):
                continue
            if entry.is_dir():
                pending.append((f"{prefix}{entry.name}/", entry))
            elif entry.is_file():
                files[prefix + entry.name] = entry.read_bytes()
    return files


def content_hash() -> str:
    digest = hashlib.sha256()
    for name, data in sorted(_context_files().items()):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()[:16]


#: How long the first contact with the daemon may take: a daemon that accepts connections but
#: never answers (hung, or a stale socket forwarded from elsewhere) fails `make` after this.
PING_TIMEOUT_S = 10


def docker_client(timeout: int = 120) -> Any:
    """A docker-py client for DOCKER_HOST (or the local socket), or a clear error.

    The first contact is bounded by ``PING_TIMEOUT_S``; later calls (image builds, container
    starts under load) get ``timeout``.
    """
    import docker

    try:
        # Containers start and are removed START_CONCURRENCY at a time: room for them all.
        client = docker.from_env(timeout=min(timeout, PING_TIMEOUT_S), max_pool_size=32)
        client.ping()
        client.api.timeout = timeout
    except Exception as exc:
        raise SandboxUnavailableError(
            f"The Docker daemon is not reachable ({type(exc).__name__}: {str(exc)[:200]}). "
            + HOW_TO_START_DOCKER
        ) from exc
    return client


@dataclass(frozen=True)
class ImageStatus:
    tag: str
    expected_hash: str
    present: bool
    actual_hash: str | None
    variant: ImageVariant = DEFAULT_IMAGE
    actual_variant: str | None = None  # its label (images built before the variants: the default)

    @property
    def built_as(self) -> str:
        return self.actual_variant or DEFAULT_IMAGE.name

    @property
    def current(self) -> bool:
        return self.present and self.actual_hash == self.expected_hash and self.built_as == self.variant.name

    def describe(self) -> str:
        if self.current:
            return f"{self.tag}: current (content hash {self.expected_hash})"
        if not self.present:
            return f"{self.tag}: missing"
        if self.actual_hash == self.expected_hash:
            return f"{self.tag}: stale (built as the {self.built_as} variant, not the {self.variant.name})"
        return f"{self.tag}: stale (built from {self.actual_hash}, sources are {self.expected_hash})"


def image_status(client: Any, variant: ImageVariant = DEFAULT_IMAGE) -> ImageStatus:
    import docker

    tag = variant.tag()
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return ImageStatus(tag, content_hash(), False, None, variant)
    labels = image.attrs.get("Config", {}).get("Labels") or {}
    return ImageStatus(tag, content_hash(), True, labels.get(LABEL_CONTENT_HASH), variant, labels.get(LABEL_VARIANT))


def require_current_image(client: Any) -> str:
    """The tag a pool starts its containers from: the performance variant when it is current
    (it is the default image and the counter), else the default; neither current is an error."""
    performance = image_status(client, PERFORMANCE_IMAGE)
    if performance.current:
        return performance.tag
    status = image_status(client)
    if not status.current:
        raise SandboxUnavailableError(
            f"The sandbox image is not usable: {status.describe()}. Build it with "
            "`gym-sysmath sandbox build` (add `--bootstrap` on hosts that reach no container registry)."
        )
    return status.tag


def require_runtime(client: Any, runtime: str | None) -> None:
    """Refuse to start when a runtime was asked for (gVisor's ``runsc``) but the daemon lacks it:
    falling back to runc would silently weaken the isolation the user chose."""
    if runtime is None or runtime.startswith("io.containerd."):  # a containerd shim, resolved by containerd
        return
    known = sorted(client.info().get("Runtimes") or {})
    if runtime not in known:
        raise SandboxUnavailableError(
            f"The Docker daemon has no runtime {runtime!r} (it has {', '.join(known) or 'none'}), but "
            f"{RUNTIME_VARIABLE} asks for it. Install it and restart dockerd (for gVisor: `runsc install`), "
            f"or unset {RUNTIME_VARIABLE} to use the default runtime. See SECURITY.md.")


def host_mirror() -> str:
    """The Debian mirror this host's apt uses, so the image fetches from the same place."""
    for path in ("/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"):
        try:
            with open(path) as handle:
                for line in handle:
                    for word in line.split():
                        if word.startswith("http") and word.rstrip("/").endswith("/debian"):
                            return word.rstrip("/")
        except OSError:
            continue
    return DEFAULT_MIRROR


def bootstrap_base(client: Any, mirror: str, log: Callable[[str], None]) -> None:
    """Build the base rootfs with debootstrap and `docker import` it (no registry needed)."""
    if shutil.which("debootstrap") is None:
        raise SandboxUnavailableError("debootstrap is not installed: `apt-get install -y debootstrap`.")
    if os.geteuid() != 0:
        raise SandboxUnavailableError("debootstrap needs root: run `sudo gym-sysmath sandbox build --bootstrap`.")
    with tempfile.TemporaryDirectory(prefix="gym-sysmath-rootfs-") as workdir:
        root = os.path.join(workdir, "root")
        log(f"debootstrap --variant=minbase bookworm from {mirror} (about a minute)")
        subprocess.run(["debootstrap", "--variant=minbase", "bookworm", root, mirror],
                       check=True, stdout=subprocess.DEVNULL)
        archive = os.path.join(workdir, "rootfs.tar")
        subprocess.run(["tar", "-C", root, "-cf", archive, "."], check=True)
        repository, tag = BASE_IMAGE_BOOTSTRAP.split(":")
        log(f"docker import -> {BASE_IMAGE_BOOTSTRAP}")
        client.api.import_image_from_file(archive, repository=repository, tag=tag)


#: A comment line ``# estimate: N s`` above a Dockerfile step: how long the step took from
#: nothing (--no-cache) on a busy 2-core machine (docs/sandbox-image.md has the measurements).
_ESTIMATE = re.compile(r"#\s*estimate:\s*(\d+)\s*s\b")


@dataclass(frozen=True)
class BuildStep:
    """One instruction of the Dockerfile, numbered as the classic builder's ``Step N/M``."""

    number: int
    stage: str  # the name of the stage it belongs to ("" before the first FROM)
    instruction: str  # its first line
    estimate_s: int  # 0 where the Dockerfile gives none: a step of seconds


def dockerfile_steps(text: str) -> list[BuildStep]:
    """The Dockerfile's instructions in order, each with the estimate written above it."""
    steps: list[BuildStep] = []
    stage, estimate, continued = "", 0, False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or (continued and line.startswith("#")):  # Docker drops these inside an instruction too
            continue
        if continued:
            continued = line.endswith("\\")
            continue
        if line.startswith("#"):
            found = _ESTIMATE.fullmatch(line)
            estimate = int(found.group(1)) if found else estimate
            continue
        words = line.split()
        if words[0].upper() == "FROM":
            stage = words[3] if len(words) >= 4 and words[2].upper() == "AS" else f"stage{len(steps)}"
        steps.append(BuildStep(len(steps) + 1, stage, line.rstrip("\\ "), estimate))
        estimate, continued = 0, line.endswith("\\")
    return steps


def build_steps(variant: ImageVariant) -> list[BuildStep]:
    """The steps a build of ``variant`` runs: every stage up to its target, as the classic
    builder does (the default's stage comes first, so it builds nothing of valgrind's)."""
    steps = dockerfile_steps(_context_files()["Dockerfile"].decode())
    last = max(step.number for step in steps if step.stage == variant.target)
    return steps[:last]


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def build_image(client: Any, *, variant: ImageVariant = DEFAULT_IMAGE, bootstrap: bool = False,
                force: bool = False, mirror: str | None = None, log: Callable[[str], None] = print) -> ImageStatus:
    """Build ``variant`` of the sandbox image unless a current one exists (a stale one is
    rebuilt), saying each step as it starts with its estimate, and the time it all took."""
    import docker

    status = image_status(client, variant)
    if status.current and not force:
        log(status.describe())
        return status
    started = time.monotonic()
    mirror = mirror or host_mirror()
    try:  # a base made by an earlier --bootstrap is used even without the flag
        client.images.get(BASE_IMAGE_BOOTSTRAP)
        base = BASE_IMAGE_BOOTSTRAP
        log(f"base image {base} present")
    except docker.errors.ImageNotFound:
        base = BASE_IMAGE_REGISTRY
        if bootstrap:
            bootstrap_base(client, mirror, log)
            base = BASE_IMAGE_BOOTSTRAP
    steps = {step.number: step for step in build_steps(variant)}
    cached = variant is not DEFAULT_IMAGE and image_status(client).current  # its stage's layers are
    expected = sum(step.estimate_s for step in steps.values() if not (cached and step.stage == DEFAULT_IMAGE.target))
    with tempfile.TemporaryDirectory(prefix="gym-sysmath-context-") as context:
        for name, data in _context_files().items():
            path = os.path.join(context, *name.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(data)
        labels = {LABEL_CONTENT_HASH: status.expected_hash, LABEL_VARIANT: variant.name}  # a step each
        log(f"docker build {status.tag} (target {variant.target}) FROM {base}: {len(steps) + len(labels)} steps, "
            f"about {_minutes(expected)} on a busy 2-core machine" + (", the default's cached" if cached else ""))
        mirror_host = mirror.rsplit("/debian", 1)[0]
        stream = client.api.build(path=context, tag=status.tag, target=variant.target, rm=True, forcerm=True,
                                  decode=True, buildargs={"BASE_IMAGE": base, "DEBIAN_MIRROR": mirror_host},
                                  labels=labels)
        for chunk in stream:
            if "error" in chunk:
                raise SandboxUnavailableError(f"docker build failed: {chunk['error'].strip()}")
            _log_build_output(chunk.get("stream", "").rstrip(), steps, started, log)
    final = image_status(client, variant)
    if not final.current:
        raise SandboxUnavailableError(f"build finished but the image is not current: {final.describe()}")
    log(f"{final.describe()}; built in {_minutes(time.monotonic() - started)}")
    return final


_STEP = re.compile(r"Step (\d+)/(\d+) : (.*)")


def _log_build_output(text: str, steps: dict[int, BuildStep], started: float, log: Callable[[str], None]) -> None:
    """A step as it starts (elapsed time, number, instruction, estimate), and rustc's version."""
    found = _STEP.match(text)
    if found:
        number, total, instruction = int(found.group(1)), found.group(2), found.group(3)
        step = steps.get(number)
        estimate = f" (about {_minutes(step.estimate_s)})" if step and step.estimate_s else ""
        elapsed = int(time.monotonic() - started)
        shown = instruction if len(instruction) <= 72 else instruction[:69] + "..."
        log(f"[{elapsed // 60:2d}:{elapsed % 60:02d}] step {number}/{total}{estimate}: {shown}")
    elif "rustc " in text:
        log(text)


# --------------------------------------------------------------------------- containers

#: The cgroup every sandbox container is made under (cgroupfs driver), capped together.
CGROUP_PARENT = "gym-sysmath"


def capped_cgroup_parent(client: Any, host_memory_fraction: float) -> str | None:
    """A parent cgroup whose memory limit caps all sandbox containers on this host together.

    Each container's own limit holds one rollout in; together they may promise far more than
    the host has (a few hundred rollouts at 3 GiB each). Under this parent, capped at
    ``host_memory_fraction`` of the host's memory, an out-of-memory condition stays among the
    sandbox containers and never reaches the trainer or the host. Made only where this process
    can: a local daemon with the cgroupfs driver, as root, cgroup v1 or v2 with the memory
    controller; None elsewhere (each container keeps its own limit only; see SECURITY.md).
    """
    if os.geteuid() != 0 or os.environ.get("DOCKER_HOST", "unix://").split("://")[0] not in ("unix", ""):
        return None
    try:
        info = client.info()
    except Exception:
        return None
    if info.get("CgroupDriver") != "cgroupfs":
        return None
    try:
        with open("/proc/meminfo") as meminfo:
            total = int(next(line for line in meminfo if line.startswith("MemTotal:")).split()[1]) * 1024
    except (OSError, StopIteration, ValueError):
        return None
    limit = int(total * host_memory_fraction)
    if info.get("CgroupVersion") == "2":
        folder, files = f"/sys/fs/cgroup/{CGROUP_PARENT}", {"memory.max": str(limit)}
    else:
        folder, files = f"/sys/fs/cgroup/memory/{CGROUP_PARENT}", {"memory.limit_in_bytes": str(limit)}
    try:
        os.makedirs(folder, exist_ok=True)
        for name, value in files.items():
            with open(os.path.join(folder, name), "w") as handle:
                handle.write(value)
    except OSError:
        return None
    return f"/{CGROUP_PARENT}"


def owner_label() -> str:
    """host:pid:start-time of this process, so a reaper can tell a live owner from a dead one."""
    return f"{socket.gethostname()}:{os.getpid()}:{_process_start_time(os.getpid())}"


def _process_start_time(pid: int) -> str:
    return _process_state_and_start(pid)[1]


def _process_state_and_start(pid: int) -> tuple[str, str]:
    """The state letter (R, S, Z...) and start time (clock ticks since boot) of ``pid``, from
    /proc/<pid>/stat; ("?", "?") when it cannot be read (gone, or not this pid namespace)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()  # the name in parentheses may hold anything
        return fields[0], fields[19]
    except (OSError, IndexError):
        return "?", "?"


#: States of a process that has exited: a zombie (exited, not yet waited for by its parent: an
#: AsyncVectorEnv worker killed with SIGKILL stays one until the vector env joins it) and dead.
EXITED_STATES = frozenset({"Z", "X", "x"})


def _owner_alive(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return True  # another machine's container: not ours to judge
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    state, started = _process_state_and_start(pid)
    # the start time guards against a reused pid; a zombie has exited and can start nothing
    return started == start and state not in EXITED_STATES


# A process killed with SIGKILL (an AsyncVectorEnv worker, the trainer itself) cannot remove its
# containers, and a pool that starts later reaps them only if one starts. So each process that
# runs Docker pools keeps a small watcher process: it reads a pipe whose write end only the owner
# holds. When the owner exits by any means the kernel closes that end, the watcher reads EOF and
# removes the containers labelled with the owner's label. When the owner's last pool closes it
# writes "q" first, and the watcher exits removing nothing.
_WATCHER = r"""
import sys, time
if sys.stdin.buffer.read().endswith(b"q"):
    raise SystemExit(0)
sys.path[:0] = %r  # the owner's import path (not its working directory), for docker-py
import docker
client = docker.from_env(timeout=60)
for attempt in range(3):  # a create in flight when the owner died may land a moment later
    for found in client.api.containers(all=True, filters={"label": %r}):
        try:
            client.api.remove_container(found["Id"], force=True)
        except Exception:
            pass
    time.sleep(1.0)
"""

_watch_lock = threading.Lock()
_watcher: subprocess.Popen[bytes] | None = None
_watched_pools = 0
#: Pools collected without close(): their finalizers cannot take ``_watch_lock`` (the collector
#: may run inside a thread that holds it), so they queue here, and the next watch or unwatch counts them.
_unwatched_later: queue.SimpleQueue[None] = queue.SimpleQueue()


def unwatch_owner_later() -> None:
    """``unwatch_owner`` for a finalizer: counted at the next ``watch_owner`` or ``unwatch_owner``."""
    _unwatched_later.put(None)


def _count_unwatched_later() -> None:
    global _watched_pools
    while True:
        try:
            _unwatched_later.get_nowait()
        except queue.Empty:
            return
        _watched_pools = max(0, _watched_pools - 1)


def watch_owner() -> None:
    """A pool of this process started: make sure a watcher will remove this process's
    containers if it dies without closing them (see ``_WATCHER``). Best effort: without a
    watcher, the next pool's start or ``gym-sysmath sandbox prune`` reaps them."""
    global _watcher, _watched_pools
    with _watch_lock:
        _count_unwatched_later()
        _watched_pools += 1
        if _watcher is not None and _watcher.poll() is None:
            return
        try:
            _watcher = subprocess.Popen(
                [sys.executable, "-I", "-c",
                 _WATCHER % ([entry for entry in sys.path if entry], f"{LABEL_OWNER}={owner_label()}")],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)  # a signal to the owner's process group does not reach it
        except OSError:
            _watcher = None


def unwatch_owner() -> None:
    """A pool of this process closed; after the last one the watcher exits removing nothing."""
    global _watcher, _watched_pools
    with _watch_lock:
        _count_unwatched_later()
        _watched_pools = max(0, _watched_pools - 1)
        if _watched_pools or _watcher is None:
            return
        watcher, _watcher = _watcher, None
    assert watcher.stdin is not None  # a pipe (above)
    try:
        watcher.stdin.write(b"q")
        watcher.stdin.close()
    except OSError:
        pass
    try:
        watcher.wait(timeout=10)
    except subprocess.TimeoutExpired:
        watcher.kill()
        watcher.wait()


def _forget_watcher_after_fork() -> None:
    """In a forked child: the watcher watches the parent, so close our copy of its pipe (the
    parent's death must still reach it) and start one of our own with our first pool."""
    global _watch_lock, _watcher, _watched_pools, _unwatched_later
    _watch_lock = threading.Lock()
    watcher, _watcher, _watched_pools = _watcher, None, 0
    _unwatched_later = queue.SimpleQueue()
    if watcher is not None and watcher.stdin is not None:
        try:
            watcher.stdin.close()
        except OSError:
            pass


os.register_at_fork(after_in_child=_forget_watcher_after_fork)


def our_containers(client: Any) -> list[Any]:
    """Every gym-sysmath container on the daemon. Others remove containers while we list them
    (other pools, reapers): one gone by the time it is inspected is left out, not an error."""
    import docker.errors

    try:
        return client.containers.list(all=True, filters={"label": f"{LABEL_SANDBOX}=1"}, ignore_removed=True)
    except docker.errors.NotFound:
        return []


def containers_of_this_process(client: Any) -> list[Any]:
    """The sandbox containers this process owns (all its pools')."""
    owner = owner_label()
    return [c for c in our_containers(client) if c.labels.get(LABEL_OWNER) == owner]


def reap_orphans(client: Any) -> int:
    """Remove sandbox containers whose owning process on this host is gone (best effort: reaping
    is housekeeping, and must never stop a pool from starting)."""
    removed = 0
    try:
        containers = our_containers(client)
    except Exception:  # the daemon's listing failed: try again when the next pool starts
        return 0
    for container in containers:
        owner = container.labels.get(LABEL_OWNER, "")
        if not _owner_alive(owner):
            try:
                container.remove(force=True)
                removed += 1
            except Exception:  # gone already, or raced with another reaper
                pass
    return removed


def prune(client: Any, *, everything: bool = False) -> int:
    """Remove orphaned sandbox containers (all of ours with ``everything``)."""
    if not everything:
        return reap_orphans(client)
    removed = 0
    for container in our_containers(client):
        try:
            container.remove(force=True)
            removed += 1
        except Exception:
            pass
    return removed

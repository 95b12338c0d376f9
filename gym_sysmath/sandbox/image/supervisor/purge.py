"""Cleaning up: after a job, everything left under its uid and its dir; after a rollout, every
job process, the scratch and ``/dev/shm``, then a check of what survived."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

from . import runtime
from .processes import as_uid, job_uids, live_uid_processes, proc_stat_fields, reap_children
from .runtime import IS_ROOT

#: POSIX shared memory and semaphores (``multiprocessing`` needs them): the container's own tmpfs,
#: emptied of a job's files with the job and of everything with the rollout.
SHM_DIR = "/dev/shm"


def _remove_owned_by(folder: str, uid: int) -> None:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.stat(follow_symlinks=False).st_uid != uid:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


def empty_dir(folder: str) -> None:
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)


PURGE_DEADLINE_S = 10.0  # the host's request timeout leaves room for it (execution.Job.request_timeout_s)
RETIRE_REQUESTED = False  # a scratch dir could not be cleaned: the host should replace this worker


def request_retirement() -> None:
    global RETIRE_REQUESTED
    RETIRE_REQUESTED = True


def purge_uid(uid: int, workdir: str | None, deadline_s: float = PURGE_DEADLINE_S) -> bool:
    """Kill every process left under ``uid`` (kill(-1) as that uid) and remove its scratch dir.

    ``shutil.rmtree`` recurses in Python, so a 1,000-level tree would survive it; the fallback
    is one ``find -delete`` (iterative). The whole purge has a deadline: False means it did not
    finish, and the worker should be retired rather than reused.
    """
    def action() -> None:
        if IS_ROOT:
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if runtime.OWN_PID_NAMESPACE:  # the container's own /dev/shm (never a host's): what the uid left there
            _remove_owned_by(SHM_DIR, uid)
        if workdir:  # its contents; the dir itself is in root's scratch root, so root removes it
            try:
                empty_dir(workdir)
            except (OSError, RecursionError):
                subprocess.run(["chmod", "-R", "u+rwx", workdir], stderr=subprocess.DEVNULL, check=False)
                subprocess.run(["find", workdir, "-mindepth", "1", "-delete"], stderr=subprocess.DEVNULL,
                               check=False)
    if not as_uid(uid, action, deadline_s):
        return False
    if workdir and os.path.isdir(workdir):
        try:
            os.rmdir(workdir)
        except OSError as exc:  # not empty: say so in the container log
            print(f"supervisor: cannot remove {workdir}: {exc}", file=sys.stderr)
            return False
    return True


def kill_job_processes(own_uids: range, deadline_s: float = 5.0) -> bool:
    """Kill every job process, one ``kill(-1)`` per uid, until a scan finds none alive.

    In a container (its own pid namespace) that is every process not root's. On the process
    backend the supervisor sees the whole host, so only the uids it hands out (``own_uids``)
    are its jobs': any other non-root process belongs to someone else (another pool's
    containers among them) and must never be touched."""
    if not IS_ROOT:
        return True  # the process backend as a host user: its jobs ran as this user, purged by uid
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        live = {uid for uid in job_uids() if (runtime.OWN_PID_NAMESPACE or uid in own_uids) and live_uid_processes(uid)}
        if not live:
            return True
        for uid in live:
            as_uid(uid, lambda: os.kill(-1, signal.SIGKILL), deadline_s=2.0)
        reap_children()
    return False


def residue(scratch: str, own_pids: set[int]) -> list[str]:
    """What a purge left that a next rollout could see: processes, files, sockets, IPC."""
    problems = []
    if IS_ROOT and runtime.OWN_PID_NAMESPACE:
        strangers = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) not in own_pids:
                fields = proc_stat_fields(int(entry))
                if fields and fields[0] not in ("Z", "X"):
                    strangers.append(entry)
        if strangers:
            problems.append(f"processes left: {', '.join(strangers[:8])}")
    left = [name for name in os.listdir(scratch) if name != ".build-cache"]
    if left or os.listdir(os.path.join(scratch, ".build-cache")):
        problems.append(f"files left in the scratch: {', '.join(left[:8]) or '.build-cache'}")
    if runtime.OWN_PID_NAMESPACE:
        if os.path.isdir(SHM_DIR) and os.listdir(SHM_DIR):
            problems.append(f"files left in {SHM_DIR}")
        sockets = _sockets_left()
        if sockets:
            problems.append(f"sockets left: {', '.join(sockets[:8])}")
    return problems


def _sockets_left(settle_s: float = 0.5) -> list[str]:
    """Unix sockets with a name, and inet sockets of any kind (TIME_WAIT included), in the
    container's network namespace. Sockets whose last reference was in flight (passed over a unix socket) when their
    processes died are freed by the kernel a moment later: wait ``settle_s`` for them."""
    deadline = time.monotonic() + settle_s
    while True:
        left = []
        for table in ("unix", "tcp", "tcp6", "udp", "udp6", "raw", "raw6"):
            try:
                with open(f"/proc/net/{table}") as handle:
                    rows = handle.read().splitlines()[1:]
            except OSError:
                continue
            if table == "unix":  # a nameless one nobody holds can be found by no one
                left += [row.split()[-1] for row in rows if len(row.split()) >= 8]
            else:
                left += [f"{table}:{row.split()[1]}" for row in rows if row.strip()]
        if not left or time.monotonic() > deadline:
            return left
        # Unreachable sockets (a cycle of them, each in flight in another) are freed by the
        # kernel's unix garbage collector, which a unix socket's release sets off.
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).close()
        time.sleep(0.02)


def scratch_nearly_full(scratch: str, reserve: int = 32 * 1024 * 1024) -> bool:
    """Whether the scratch filesystem itself is out of room or inodes (what the compiler says is
    the job's business)."""
    stats = os.statvfs(scratch)
    return stats.f_bavail * stats.f_frsize < reserve or (stats.f_files > 0 and stats.f_favail < 4096)

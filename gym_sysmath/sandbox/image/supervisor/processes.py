"""The supervisor's view of processes: what runs under a uid (read from ``/proc``), killing and
reaping, waiting for a stop, and running an action with only a uid's rights."""

from __future__ import annotations

import os
import signal
import time

from .runtime import IS_ROOT


def drop_privileges(uid: int, groups: tuple[int, ...] = ()) -> None:
    """Become ``uid`` (its gid the same number) with ``groups`` as the only supplementary groups."""
    if IS_ROOT:
        os.setgroups(list(groups))
        os.setgid(uid)
        os.setuid(uid)


def read_to_end(fd: int) -> bytes:
    """All that ``fd`` yields until its writers are gone (a child's report pipe), then close it."""
    data = b""
    try:
        while chunk := os.read(fd, 4096):
            data += chunk
    finally:
        os.close(fd)
    return data


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def as_uid(uid: int, action, deadline_s: float) -> bool:
    """Run ``action`` in a child holding only ``uid``'s rights; False if it outlived the deadline."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setsid()
            drop_privileges(uid)
            action()
        except BaseException:
            code = 1
        os._exit(code)
    deadline = time.monotonic() + deadline_s
    while True:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited:
            return True
        if time.monotonic() > deadline:
            kill_group(pid)
            os.waitpid(pid, 0)
            return False
        time.sleep(0.0005)


def reap_children() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def wait_stopped(pid: int, deadline_s: float = 1.0) -> bool:
    """Wait until every thread of ``pid`` is stopped (or gone): a stop signal is only delivered
    as each thread leaves the kernel, so until then a write of its may still be landing."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            states = []
            for tid in os.listdir(f"/proc/{pid}/task"):
                fields = _task_stat_fields(pid, tid)
                if fields:
                    states.append(fields[0])
        except OSError:
            return True
        if all(state in ("T", "t", "Z", "X") for state in states):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0)  # yield the CPU so the stop can be delivered


def _task_stat_fields(pid: int, tid: str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/task/{tid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def live_uid_processes(uid: int, keep: int | None = None) -> list[int]:
    """Pids of ``uid``'s processes but ``keep``, skipping the truly dead (a zombie leader whose
    other threads still run counts as alive)."""
    live = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == keep:
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            fields = proc_stat_fields(int(entry))
            if fields and fields[0] in ("Z", "X") and len(os.listdir(f"/proc/{entry}/task")) <= 1:
                continue
            live.append(int(entry))
        except OSError:
            pass
    return live


def kill_uid_processes(uid: int, keep: int | None = None, deadline_s: float = 2.0) -> None:
    """SIGKILL every process of ``uid`` but ``keep``, scanning until none is left: a fork chain
    (each member forks, then exits) survives one pass, never a pass that finds it empty."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        live = live_uid_processes(uid, keep)
        if not live:
            return
        for pid in live:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def job_uids() -> set[int]:
    """Uids of the live processes that are not root's: every job and session process."""
    uids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                uid = os.stat(f"/proc/{entry}").st_uid
            except OSError:
                continue
            if uid != 0:
                uids.add(uid)
    return uids


def proc_stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def cpu_of(pid: int) -> float:
    fields = proc_stat_fields(pid)
    if not fields:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def peak_memory_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0

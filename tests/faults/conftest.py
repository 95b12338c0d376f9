"""Fault injection on the real daemon: killing containers, stopping and starting dockerd."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from gym_sysmath.sandbox import daemon

#: Stopping the daemon stops every container on it, not only ours: opt in (CI does).
RESTART_VARIABLE = "GYM_SYSMATH_FAULTS_RESTART_DOCKERD"
DOCKERD_LOG = "/var/log/gym-sysmath-dockerd.log"


def _dockerd_pid() -> int | None:
    """The running dockerd; a stopped one may linger as a zombie where nobody reaps it."""
    found = subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, text=True)
    running = [pid for pid in map(int, found.stdout.split()) if _running(pid)]
    return running[0] if running else None


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs; reaps it if it is our child (a dockerd that ``start`` launched)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Dockerd:
    """The host's dockerd, stopped with SIGTERM and started again with its own command line."""

    def __init__(self) -> None:
        pid = _dockerd_pid()
        if pid is None:
            pytest.skip("no dockerd process on this machine")
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            self.argv = [part.decode() for part in handle.read().split(b"\0") if part]

    def stop(self, timeout_s: float = 60.0) -> None:
        pid = _dockerd_pid()
        if pid is None:
            return
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(pid), "dockerd did not stop"

    def start(self, timeout_s: float = 60.0) -> None:
        if _dockerd_pid() is None:
            with open(DOCKERD_LOG, "ab") as log:
                subprocess.Popen(self.argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                daemon.docker_client(timeout=10)
                return
            except Exception:
                time.sleep(0.5)
        raise AssertionError("dockerd did not come back")


@pytest.fixture
def dockerd(docker_available):
    if os.environ.get(RESTART_VARIABLE) != "1":
        pytest.skip(f"restarting dockerd stops every container on this machine; set {RESTART_VARIABLE}=1")
    if os.geteuid() != 0:
        pytest.skip("restarting dockerd needs root")
    daemon = Dockerd()
    yield daemon
    daemon.start()  # whatever the test did, leave a running daemon behind

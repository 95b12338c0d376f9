"""A real ``gym-sysmath serve`` for tests: started from its own environment (``make serve-venv``:
openenv pins an mcp that verifiers cannot share), on a free loopback port, drained at the end.

``running_server(*flags)`` starts one; the session fixture ``gym_server`` (tests/conftest.py)
shares one Docker-backed server across the tests that only need a server to talk to.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() == "true"
#: the interpreter of the serve environment (`make serve-venv`)
SERVE_PYTHON = Path(os.environ.get("GYM_SYSMATH_SERVE_PYTHON", ROOT / ".venv-serve" / "bin" / "python"))


def serve_or_skip() -> None:
    if not SERVE_PYTHON.exists():
        if IN_CI:
            pytest.fail(f"CI=true but the serve environment is missing ({SERVE_PYTHON}): `make serve-venv`")
        pytest.skip(f"no serve environment at {SERVE_PYTHON}: `make serve-venv`")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclasses.dataclass
class Server:
    url: str
    process: subprocess.Popen[str]
    token: str | None
    log: Path

    def health(self) -> dict:
        with urllib.request.urlopen(self.url + "/health", timeout=10) as response:
            return dict(json.loads(response.read()))

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def stop(process: subprocess.Popen[str], timeout_s: float) -> None:
    """SIGTERM (the server drains), then SIGKILL if it is still up after ``timeout_s``."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def running_server(*flags: str, token: str | None = None, tmp_dir: Path | None = None,
                   start_timeout_s: float = 120.0) -> Iterator[Server]:
    """``gym-sysmath serve FLAGS`` on a free port; SIGTERM (a drain) and a wait at the end."""
    serve_or_skip()
    port = free_port()
    log = Path(tmp_dir or "/tmp") / f"gym-sysmath-serve-{port}.log"
    command = [str(SERVE_PYTHON), "-m", "gym_sysmath.cli", "serve", "--port", str(port), *flags]
    if "--drain-timeout" not in flags:  # a test that leaves a session open must not hold the run
        command += ["--drain-timeout", "30"]
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    environment.pop("GYM_SYSMATH_SERVE_TOKEN", None)
    if token:  # as the docs say to give it: never on the command line, which `ps` shows
        environment["GYM_SYSMATH_SERVE_TOKEN"] = token
    with open(log, "w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                                   env=environment)
    server = Server(f"http://127.0.0.1:{port}", process, token, log)
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            if process.poll() is not None:
                pytest.fail(f"gym-sysmath serve exited with {process.returncode}:\n{server.output()[-3000:]}")
            try:
                server.health()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"gym-sysmath serve did not answer /health in {start_timeout_s} s:\n"
                                f"{server.output()[-3000:]}")
                time.sleep(0.25)
        yield server
    finally:
        stop(process, timeout_s=60)
        if process.returncode != 0:
            print(f"gym-sysmath serve exited with {process.returncode}:\n{server.output()[-2000:]}", file=sys.stderr)

"""The real-model tier: SmolLM2-135M-Instruct (``smollm2``) behind ``transformers serve`` on
127.0.0.1, driven by the real CLI, and a real ``trl.GRPOTrainer`` on the same weights.

It runs only when ``GYM_SYSMATH_REAL_MODEL=1`` (``make test-real-model`` sets it, after
``make real-model`` installed the model); without it every test here is skipped, so ``make
test`` keeps its time. With it, a missing model or server fails the tier instead of skipping.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.real_model import smollm2

ENABLED = os.environ.get("GYM_SYSMATH_REAL_MODEL") == "1"
SERVER_START_S = 300  #: loading the model; the first request compiles nothing, so this is generous
#: One torch thread: on two busy cores a second thread slows decoding down, it does not speed it up.
SERVER_THREADS = os.environ.get("GYM_SYSMATH_REAL_MODEL_THREADS", "1")


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.real_model)
            if not ENABLED:
                item.add_marker(pytest.mark.skip(reason="the real-model tier: `make test-real-model` "
                                                        "(GYM_SYSMATH_REAL_MODEL=1)"))


@dataclass(frozen=True)
class Server:
    url: str  #: the OpenAI-compatible API root, ending in /v1
    model: str  #: the model id it answers to
    log: Path
    process: subprocess.Popen

    def chat(self, body: dict, timeout_s: float = 300) -> dict:
        request = urllib.request.Request(f"{self.url}/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.loads(response.read())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _tail(path: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL if it is still there after 20 s."""
    for sig, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(wait_s)


@pytest.fixture(scope="session")
def model_dir() -> Path:
    if not smollm2.installed():
        pytest.fail(f"GYM_SYSMATH_REAL_MODEL=1 but the model is not installed under {smollm2.HOME}: "
                    "run `make real-model`")
    if not smollm2.samples_when_asked():
        pytest.fail(f"{smollm2.FP32_DIR / smollm2.GENERATION_CONFIG} does not say do_sample, so transformers serve "
                    "would answer every temperature greedily: run `make real-model` (it sets it in seconds)")
    return smollm2.FP32_DIR


@pytest.fixture(scope="session")
def server(model_dir, tmp_path_factory) -> Server:
    """``transformers serve`` on the fp32 copy, bound to 127.0.0.1, waited for (bounded), and
    stopped with its whole process group afterwards."""
    cli = Path(sys.executable).with_name("transformers")
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "transformers-serve.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": SERVER_THREADS,
           "MKL_NUM_THREADS": SERVER_THREADS, "TOKENIZERS_PARALLELISM": "false"}
    with log.open("wb") as sink:
        process = subprocess.Popen([str(cli), "serve", str(model_dir), "--host", "127.0.0.1", "--port", str(port),
                                    "--device", "cpu", "--dtype", "float32", "--log-level", "warning"],
                                   stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                   start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"transformers serve exited with {process.returncode}:\n{_tail(log)}")
            with contextlib.suppress(OSError, ValueError):
                with urllib.request.urlopen(f"{url}/v1/models", timeout=5) as response:
                    models = [entry["id"] for entry in json.loads(response.read())["data"]]
                if str(model_dir) in models:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"transformers serve did not list {model_dir} within {SERVER_START_S} s:\n{_tail(log)}")
            time.sleep(1)
        yield Server(f"{url}/v1", str(model_dir), log, process)
    finally:
        _stop(process)

"""`gym-sysmath eval` episode and model-request concurrency against one local server.

Runs the same eval (LinearAlgebra-v0 with a tool turn, greedy, short replies) under several
``-c`` / ``--model-concurrency`` settings and prints, per setting, the run's wall time, the
tokens the server reports, and how long turns waited for a request slot. With ``--serve`` it
starts SmolLM2-135M-Instruct behind ``transformers serve`` on 127.0.0.1 (what the real-model
tier uses; ``make real-model`` installs it), else it uses ``--base-url`` and ``--model``::

    .venv/bin/python benchmarks/eval_concurrency.py --serve -n 4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from gym_sysmath.evaluation import RowVerdict

SETTINGS = ((1, 1), (4, 1), (4, 4))  #: (-c, --model-concurrency)


def serve(threads: str = "1") -> tuple[subprocess.Popen, str, str]:
    """``transformers serve`` on the tier's fp32 SmolLM2, waited for; returns (process, url, model)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.real_model import smollm2
    from tests.real_model.conftest import _free_port

    if not smollm2.installed():
        raise SystemExit("SmolLM2 is not installed: run `make real-model`")
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
           "TOKENIZERS_PARALLELISM": "false"}
    process = subprocess.Popen([str(Path(sys.executable).with_name("transformers")), "serve", str(smollm2.FP32_DIR),
                                "--host", "127.0.0.1", "--port", str(port), "--device", "cpu", "--dtype", "float32",
                                "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5) as response:
                if str(smollm2.FP32_DIR) in response.read().decode():
                    return process, url, str(smollm2.FP32_DIR)
        except OSError:
            time.sleep(1)
    process.kill()
    raise SystemExit("transformers serve did not come up within 300 s")


def run(url: str, model: str, episodes: int, requests: int, n: int, max_tokens: int, out: Path) -> dict:
    cli = str(Path(sys.executable).with_name("gym-sysmath"))
    started = time.monotonic()
    done = subprocess.run([cli, "eval", "LinearAlgebra-v0", "--agent", "openai", "--model", model, "--base-url", url,
                           "-n", str(n), "-c", str(episodes), "--model-concurrency", str(requests), "--temperature",
                           "0", "--max-tokens", str(max_tokens), "--env-arg", "max_turns=2", "--out", str(out),
                           "--quiet"], capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr[-2000:])
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    turns = [turn for row in rows for turn in row["turns"]]
    return {"c": episodes, "model_concurrency": requests, "samples": len(rows), "turns": len(turns),
            "wall_s": round(wall, 1),
            "prompt_tokens": sum(t["usage"]["prompt_tokens"] for t in turns),
            "completion_tokens": sum(t["usage"]["completion_tokens"] for t in turns),
            "mean_request_s": round(sum(t["latency_s"] for t in turns) / len(turns), 2),
            "mean_slot_wait_s": round(sum(t["wait_s"] for t in turns) / len(turns), 2),
            "failed": sum(row["verdict"] == RowVerdict.FAILED for row in rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", action="store_true", help="start SmolLM2 behind transformers serve")
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("-n", type=int, default=4, help="tasks (default 4)")
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    process = None
    if args.serve:
        process, url, model = serve()
    elif args.base_url and args.model:
        url, model = args.base_url, args.model
    else:
        parser.error("give --serve, or --base-url and --model")
    try:
        with tempfile.TemporaryDirectory() as scratch:
            for episodes, requests in SETTINGS:
                figures = run(url, model, episodes, requests, args.n, args.max_tokens,
                              Path(scratch) / f"c{episodes}-m{requests}")
                print(json.dumps(figures), flush=True)
    finally:
        if process is not None:
            os.killpg(process.pid, 15)
            process.wait(30)


if __name__ == "__main__":
    main()

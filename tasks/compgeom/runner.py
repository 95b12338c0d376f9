"""A local stand-in for the sandbox: compile and run one job with the host toolchains, using the
sandbox's build and run commands (``toolchains.TOOLCHAINS``).

``run_local(language, files, stdin) -> (status, output)`` has the shape ``check_fixtures`` expects of any
runner (the env passes the Docker sandbox instead). ``status`` is the sandbox's own
``ExecutionStatus``: ``OK`` when the program compiled and exited 0, and then ``output`` is its
stdout; otherwise ``COMPILE_ERROR``, ``RUNTIME_ERROR`` or ``TIMEOUT``, and ``output`` is the
diagnostics.
It isolates nothing; use it for known code (fixtures, tests), never for agent submissions.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from gym_sysmath.sandbox.image.supervisor.statuses import ExecutionStatus

from .languages import BY_LANGUAGE

Runner = Callable[[str, Mapping[str, str], str], tuple[ExecutionStatus, str]]


def run_local(language: str, files: Mapping[str, str], stdin: str, *,
              compile_timeout_s: float = 120.0, run_timeout_s: float = 60.0) -> tuple[ExecutionStatus, str]:
    toolchain = BY_LANGUAGE[language].toolchain
    with tempfile.TemporaryDirectory(prefix="compgeom-") as tmp:
        for name, text in files.items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        if toolchain.compiled:
            try:
                built = subprocess.run(list(toolchain.build), cwd=tmp, capture_output=True, text=True,
                                       timeout=compile_timeout_s)
            except subprocess.TimeoutExpired:
                return ExecutionStatus.TIMEOUT, "compilation timed out"
            if built.returncode != 0:
                return ExecutionStatus.COMPILE_ERROR, built.stdout + built.stderr
            command = list(toolchain.run)
        else:  # the sandbox's command, with this interpreter for its python3
            command = [sys.executable, *toolchain.run[1:]]
        try:
            ran = subprocess.run(command, cwd=tmp, input=stdin, capture_output=True, text=True,
                                 timeout=run_timeout_s)
        except subprocess.TimeoutExpired:
            return ExecutionStatus.TIMEOUT, "run timed out"
        if ran.returncode != 0:
            return ExecutionStatus.RUNTIME_ERROR, f"exit status {ran.returncode}\n{ran.stderr[-4000:]}"
        return ExecutionStatus.OK, ran.stdout

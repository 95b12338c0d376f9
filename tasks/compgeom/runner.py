"""A local stand-in for the sandbox: compile and run one job with the host toolchains, using the
sandbox's build and run commands (``toolchains.TOOLCHAINS``).

``run_local(language, files, stdin) -> (status, output)`` has the shape ``verify`` expects of any
runner (the env passes the Docker sandbox instead). ``status`` is ``"ok"`` when the program
compiled and exited 0, and then ``output`` is its stdout; otherwise ``status`` names the failure
as its verdict does (``Verdict.COMPILE_ERROR``, ``RUNTIME_ERROR`` or ``TIMEOUT``, as the sandbox's
execution statuses do) and ``output`` is the diagnostics.
It isolates nothing; use it for known code (fixtures, tests), never for agent submissions.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from gym_sysmath.verdicts import Verdict

from .languages import BY_LANGUAGE

OK = "ok"
Runner = Callable[[str, Mapping[str, str], str], tuple[str, str]]


def run_local(language: str, files: Mapping[str, str], stdin: str, *,
              compile_timeout_s: float = 120.0, run_timeout_s: float = 60.0) -> tuple[str, str]:
    toolchain = BY_LANGUAGE[language].toolchain
    with tempfile.TemporaryDirectory(prefix="compgeom-") as tmp:
        for name, text in files.items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        if toolchain.compiled:
            try:
                built = subprocess.run(list(toolchain.build), cwd=tmp, capture_output=True, text=True,
                                       timeout=compile_timeout_s)
            except subprocess.TimeoutExpired:
                return Verdict.TIMEOUT, "compilation timed out"
            if built.returncode != 0:
                return Verdict.COMPILE_ERROR, built.stdout + built.stderr
            command = list(toolchain.run)
        else:  # the sandbox's command, with this interpreter for its python3
            command = [sys.executable, *toolchain.run[1:]]
        try:
            ran = subprocess.run(command, cwd=tmp, input=stdin, capture_output=True, text=True,
                                 timeout=run_timeout_s)
        except subprocess.TimeoutExpired:
            return Verdict.TIMEOUT, "run timed out"
        if ran.returncode != 0:
            return Verdict.RUNTIME_ERROR, f"exit status {ran.returncode}\n{ran.stderr[-4000:]}"
        return OK, ran.stdout

"""Pool and eval events go through ``logging`` under ``gym_sysmath``: the library prints nothing
and configures no handler but a NullHandler; the CLI shows them at ``--log-level``."""

from __future__ import annotations

import ast
import io
import logging
import sys
import warnings
from pathlib import Path

import pytest

import gym_sysmath
from gym_sysmath.cli import configure_logging, main
from gym_sysmath.sandbox import Job, Limits, Sandbox

PACKAGE = Path(gym_sysmath.__file__).resolve().parent
#: Where printing is the point: the command line and the bodies of its commands.
#: Command-line entry points (``python -m gym_sysmath.integrations.openrlhf check`` reports to the
#: terminal like ``gym-sysmath`` itself); everything else logs.
PRINTING_ALLOWED = {"cli.py", "verification.py", "integrations/openrlhf.py", "task_sets/__main__.py"}
LINALG = "LinearAlgebra-v0"


def test_no_library_module_prints():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[:2] == ("sandbox", "image") or str(relative) in PRINTING_ALLOWED:
            continue  # the image's supervisor talks to the host over stdout; it is not library code
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                offenders.append(f"{relative}:{node.lineno}")
    assert offenders == []


def test_importing_the_package_configures_no_root_handler_only_a_null_one():
    root_handlers = list(logging.getLogger().handlers)
    import importlib

    importlib.reload(gym_sysmath)
    assert logging.getLogger().handlers == root_handlers
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("gym_sysmath").handlers)


@pytest.fixture
def process_sandbox():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the process backend's isolation warning
        sandbox = Sandbox("process", pool_size=1)
    yield sandbox
    sandbox.close()


def test_a_killed_container_is_logged_as_lost_and_its_job_as_retried(process_sandbox, caplog):
    caplog.set_level(logging.DEBUG, logger="gym_sysmath.sandbox.pool")
    job = Job("python", {"main.py": "print(6 * 7)"}, limits=Limits(wall_s=10.0, cpu_s=10.0))
    with process_sandbox.lease() as lease:
        assert lease.run(job).stdout.strip() == "42"
        lease.worker.process.kill()  # the container dies under the rollout
        lease.worker.process.wait()
        assert lease.run(job).stdout.strip() == "42"
    messages = [record.getMessage() for record in caplog.records]
    assert any("started process" in m for m in messages), messages
    assert any("retrying on a fresh container after a harness failure" in m for m in messages), messages
    assert any(m.startswith("sandbox process: lost process") for m in messages), messages
    levels = {record.levelno for record in caplog.records if "lost process" in record.getMessage()}
    assert levels == {logging.WARNING}


def test_log_level_info_shows_the_runs_start_resume_and_end(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["--log-level", "info", "eval", LINALG, "-n", "2", "--quiet", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "INFO gym_sysmath.evaluation: eval reference: start: 2 samples on LinearAlgebra-v0" in err
    assert "eval reference: done: 2 sample(s) logged" in err
    assert main(["--log-level", "info", "eval", LINALG, "-n", "2", "--quiet", "--out", str(out), "--resume"]) == 0
    assert "resuming" in (err := capsys.readouterr().err) and "2 of 2 samples logged, 0 to play" in err


def test_the_default_log_level_keeps_stderr_quiet_on_a_clean_run(tmp_path, capsys):
    assert main(["eval", LINALG, "-n", "2", "--quiet", "--out", str(tmp_path / "run")]) == 0
    assert capsys.readouterr().err == ""
    assert main(["--log-level", "debug", "list"]) == 0
    with pytest.raises(SystemExit):
        main(["--log-level", "loud", "list"])


def test_a_pool_thread_logging_after_the_callers_stderr_was_swapped_and_closed_reaches_the_new_one(monkeypatch):
    """A notebook cell or a test's capture swaps sys.stderr and closes the old one; a container
    purged later in a pool thread must not print logging's 'I/O operation on closed file'."""
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    configure_logging("debug")  # the conftest puts the package logger back afterwards
    first.close()
    second = io.StringIO()
    monkeypatch.setattr(sys, "stderr", second)
    logging.getLogger("gym_sysmath.sandbox.pool").debug("sandbox process: purged process 1 for reuse")
    lines = second.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].endswith("purged process 1 for reuse"), lines

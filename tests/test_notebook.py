"""examples/quickstart.ipynb runs top to bottom in a fresh kernel, within a time budget, with the
Docker sandbox where it is usable and with the process fallback where it is not; and the
``notebook`` extra that runs it also opens it (Jupyter's front end, not only a headless kernel)."""

from __future__ import annotations

import configparser
import importlib.metadata
import importlib.util
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"
BUDGET_S = 90


def notebook_extra() -> list[str]:
    """The ``notebook`` extra's requirements, read from setup.cfg (so a package added there is checked too)."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return [line.strip() for line in config["options.extras_require"]["notebook"].splitlines() if line.strip()]


def test_the_notebook_extra_opens_the_notebook_with_jupyter():
    requirement = pytest.importorskip("packaging.requirements").Requirement
    wanted = [requirement(line) for line in notebook_extra()]
    assert "notebook" in {needed.name for needed in wanted}, "the extra installs no Jupyter front end"
    if importlib.util.find_spec("notebook") is None:
        pytest.skip("the notebook extra is not installed here: pip install -e '.[notebook]' (make setup does)")
    for needed in wanted:
        installed = importlib.metadata.version(needed.name)
        assert needed.specifier.contains(installed, prereleases=True), f"{needed.name} {installed}: not {needed}"
    assert importlib.util.find_spec("notebook.app") is not None  # the server `jupyter notebook` starts
    assert importlib.util.find_spec("nbconvert") is not None  # `jupyter nbconvert --execute` runs it headless
    jupyter = Path(sys.executable).with_name("jupyter")  # the entry point, dispatching to jupyter-notebook
    done = subprocess.run([str(jupyter), "notebook", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == importlib.metadata.version("notebook"), done.stdout


def execute(cwd: Path) -> tuple[object, float]:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    started = time.perf_counter()
    nbclient.NotebookClient(notebook, timeout=BUDGET_S, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}}).execute()
    return notebook, time.perf_counter() - started


def outputs(notebook) -> str:
    text = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            assert output.get("output_type") != "error", output
            text.append(output.get("text", "") + str(output.get("data", {}).get("text/plain", "")))
    return "\n".join(text)


def has_plot(notebook) -> bool:
    return any("image/png" in output.get("data", {}) for cell in notebook.cells for output in cell.get("outputs", []))


@pytest.mark.docker
def test_quickstart_runs_with_the_docker_sandbox(docker_available, tmp_path):
    notebook, elapsed = execute(tmp_path)
    text = outputs(notebook)
    assert "sandbox: docker" in text
    assert "Episode over. Verdict: correct." in text
    assert "[4294967295, '0xffffffff']" in text  # the code action's output came back
    assert re.search(r"^reference( +1\.00)+$", text, re.M), text  # every category and overall
    pytest.importorskip("matplotlib")
    assert has_plot(notebook)
    assert elapsed < BUDGET_S


def test_quickstart_falls_back_to_the_process_backend_without_docker(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    notebook, elapsed = execute(tmp_path)
    text = outputs(notebook)
    assert "sandbox: process" in text
    assert "Episode over. Verdict: correct." in text
    assert "[4294967295, '0xffffffff']" in text
    assert re.search(r"^first trap( +0\.00)+$", text, re.M), text
    assert elapsed < BUDGET_S

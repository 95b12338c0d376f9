"""examples/quickstart.ipynb runs top to bottom in a fresh kernel, within a time budget, with the
Docker sandbox where it is usable and with the process fallback where it is not."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "quickstart.ipynb"
BUDGET_S = 90


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

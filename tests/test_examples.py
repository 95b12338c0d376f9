"""Every script in examples/ parses, says what it is in a docstring, and answers ``--help``
(argparse's usage, exit 0) without a model, a server or Docker; every ``examples/...`` path
the README and docs name exists. The scripts' runs are tested elsewhere (test_sb3, test_ray_service,
tests/real_model): this is the newcomer's first ``python examples/X.py --help``."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "examples").glob("*.py"))
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_there_are_examples():
    assert len(SCRIPTS) >= 2 and (ROOT / "examples" / "trl_grpo.py") in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_example_parses_and_has_a_docstring(script: Path):
    module = ast.parse(script.read_text(), filename=str(script))
    docstring = ast.get_docstring(module)
    assert docstring and len(docstring.splitlines()[0]) > 20, f"{script.name}: no docstring saying what it is"
    assert any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in module.body), \
        f"{script.name}: no `if __name__ == '__main__'` entry point"


def third_party_modules(script: Path) -> set[str]:
    """The top-level modules ``script`` imports at module level (not inside functions)."""
    names = set()
    for node in ast.parse(script.read_text()).body:
        if isinstance(node, ast.Import):
            names |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.partition(".")[0])
    return names - set(sys.stdlib_module_names) - {"__future__"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_example_help_runs(script: Path):
    missing = sorted(name for name in third_party_modules(script) if importlib.util.find_spec(name) is None)
    if missing:
        pytest.skip(f"{script.name} imports {', '.join(missing)}, not installed here (an extra)")
    done = subprocess.run([sys.executable, str(script), "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage: "), done.stdout[:500]
    first_line = (ast.get_docstring(ast.parse(script.read_text())) or "").splitlines()[0]
    assert " ".join(first_line.split()) in " ".join(done.stdout.split()), "--help does not say what the script is"


@pytest.mark.parametrize(("mistake", "says"), [
    (["--model", "{tmp}/none"], ["no model at {tmp}/none", "run `make real-model`"]),
    (["--env-id", "LinearAlgebr-v0"],
     ["--env-id: unknown env id 'LinearAlgebr-v0'", "did you mean 'LinearAlgebra-v0'?"]),
], ids=["model not installed", "env id mistyped"])
def test_trl_grpo_refuses_a_newcomer_mistake_in_one_line_before_loading_anything(mistake, says, tmp_path):
    argv = [part.format(tmp=tmp_path) for part in mistake]
    script = ROOT / "examples" / "trl_grpo.py"
    done = subprocess.run([sys.executable, str(script), *argv, "--out", str(tmp_path / "out")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and all(part.format(tmp=tmp_path) in lines[0] for part in says), done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_example_a_document_names_exists(document: Path):
    named = set(re.findall(r"examples/[\w.-]+\.(?:py|ipynb)", document.read_text()))
    assert all((ROOT / path).is_file() for path in named), sorted(p for p in named if not (ROOT / p).is_file())

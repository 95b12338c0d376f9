"""No two top-level modules of gym_sysmath import each other, lazily or not: the Ray runner the
eval uses lives in ``evaluation`` (``integrations.ray_rollouts`` re-exports it), so
``evaluation`` needs nothing from ``integrations``. The root package is left out: it registers
the ids and resolves the verifiers plug-in, which every module may import."""

from __future__ import annotations

import ast
from pathlib import Path

import gym_sysmath

PACKAGE = Path(gym_sysmath.__file__).resolve().parent


def _unit(module: str) -> str:
    """``gym_sysmath.evaluation.run`` -> ``gym_sysmath.evaluation``: the level cycles are read at."""
    return ".".join(module.split(".")[:2])


def import_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE)
        if relative.parts[:2] == ("sandbox", "image"):
            continue  # copied into the image, standard library only
        importer = _unit(".".join(("gym_sysmath", *relative.with_suffix("").parts)))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                if name.startswith("gym_sysmath.") and _unit(name) != importer:
                    edges.setdefault(importer, set()).add(_unit(name))
    return edges


def test_no_two_modules_import_each_other():
    edges = import_edges()
    assert "gym_sysmath.integrations" in edges["gym_sysmath.cli"]  # the scan sees lazy imports too
    cycles = sorted((a, b) for a, targets in edges.items() for b in targets if a < b and a in edges.get(b, ()))
    assert cycles == []


def test_evaluation_imports_nothing_from_integrations():
    assert "gym_sysmath.integrations" not in import_edges()["gym_sysmath.evaluation"]

"""The package's import graph has no cycle, module by module, with the imports inside functions
counted as much as the ones at the top: a lazy import only hides a cycle until the day the
import order changes. The scan walks the package as it is installed or checked out, links
included, so the families' homes (``envs/`` and ``tasks/``) are in it in every install mode.

Only the root package is left out as a target: every module may import ``gym_sysmath`` (it
registers the ids), and ``gym_sysmath/__init__`` imports nothing back lazily."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import gym_sysmath

PACKAGE = Path(gym_sysmath.__file__).resolve().parent
ROOT = "gym_sysmath"


def modules() -> dict[str, Path]:
    """Every module of the package (``os.walk`` follows the links to ``envs/`` and ``tasks/``)."""
    found: dict[str, Path] = {}
    for folder, subfolders, files in os.walk(PACKAGE, followlinks=True):
        relative = Path(folder).relative_to(PACKAGE)
        if relative.parts[:2] == ("sandbox", "image"):
            subfolders.clear()  # copied into the image, standard library only
            continue
        subfolders[:] = [name for name in subfolders if name != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                parts = (ROOT, *relative.parts, name[:-3])
                found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = Path(folder, name)
    return found


def _imported(node: ast.AST, importer: str, is_package: bool, known: dict[str, Path]) -> list[str]:
    """The modules an import statement loads, relative ones resolved: ``from a import b`` loads
    the module ``a.b`` when there is one, else takes the name ``b`` from ``a``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.Call):
        return _loaded_by_call(node, known)
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        parts = importer.split(".")
        anchor = parts[: len(parts) - node.level + (1 if is_package else 0)]
        base = ".".join([*anchor, base] if base else anchor)
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]


def _loaded_by_call(node: ast.Call, known: dict[str, Path]) -> list[str]:
    """``importlib.import_module("a.b")`` and ``__import__("a.b")`` load ``a.b``; an f-string
    (``f"gym_sysmath.tasks.{name}.build"``) loads at least the module its constant prefix names."""
    function = node.func
    name = (function.attr if isinstance(function, ast.Attribute)
            else function.id if isinstance(function, ast.Name) else "")
    if name not in ("import_module", "__import__") or not node.args:
        return []
    argument = node.args[0]
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return [argument.value]
    if isinstance(argument, ast.JoinedStr) and argument.values and isinstance(argument.values[0], ast.Constant):
        prefix = str(argument.values[0].value).rstrip(".")
        while prefix and prefix not in known:
            prefix = prefix.rpartition(".")[0]
        return [prefix] if prefix else []
    return []


def import_edges() -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its body."""
    known = modules()
    edges: dict[str, set[str]] = {name: set() for name in known}
    for importer, path in known.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _imported(node, importer, is_package, known):
                if target in known and target not in (importer, ROOT):
                    edges[importer].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_scan_sees_the_families_homes_and_lazy_imports():
    edges = import_edges()
    assert "gym_sysmath.envs.csapp" in edges and "gym_sysmath.tasks.compgeom.cases" in edges
    assert "gym_sysmath.integrations.trl" in edges["gym_sysmath.cli"]  # imported inside a function


def test_no_import_cycle_between_modules():
    assert cycles(import_edges()) == []


def test_the_scan_sees_a_module_loaded_by_name():
    """``verification`` loads CompGeom's build module by its name: an edge all the same."""
    assert "gym_sysmath.tasks.compgeom.build" in import_edges()["gym_sysmath.verification"]
    call = ast.parse('importlib.import_module(f"gym_sysmath.tasks.{family}.build")').body[0]
    assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
    assert _loaded_by_call(call.value, modules()) == ["gym_sysmath.tasks"]


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_evaluation_imports_nothing_from_integrations():
    edges = import_edges()
    assert not {target for name, targets in edges.items() if name.startswith("gym_sysmath.evaluation")
                for target in targets if target.startswith("gym_sysmath.integrations")}

"""Verdicts and execution statuses only through their enums (``Verdict``, the eval's own
``RowVerdict``, and the sandbox's ``ExecutionStatus``, host and supervisor alike): no such name
written as a string where the code compares, returns, assigns or passes a verdict or status. The scan
reads the AST, so an ``info["scoring_error"]`` key, a summary's ``"failed"`` count, a column
header or a docstring that names a verdict is no finding; the hostile snippets below show each
place it looks at is really looked at."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from gym_sysmath.evaluation.run import RowVerdict
from gym_sysmath.sandbox import ExecutionStatus
from gym_sysmath.verdicts import FAILED_EXECUTION, Verdict

ROOT = Path(__file__).resolve().parents[1]
#: The packages held to it: the env modules, the library with its sandbox and the supervisor
#: (which send the statuses over the wire as these same strings), and the task builders.
SCANNED = ("envs", "gym_sysmath", "tasks")
VERDICT_NAMES = frozenset(member.value for member in (*Verdict, *RowVerdict, *ExecutionStatus))
#: Keyword arguments and dict keys whose value is a verdict (or a status named like one).
VERDICT_FIELDS = frozenset({"verdict", "status"})
#: Calls whose positional arguments are verdicts.
VERDICT_CALLS = frozenset({"Grade", "Verdict", "RowVerdict", "sample_verdict"})


def _verdict_constants(node: ast.AST | None) -> Iterator[ast.Constant]:
    """``node`` itself when it is a verdict name, or the verdict names of a tuple, list or set display."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in VERDICT_NAMES:
        yield node
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for element in node.elts:
            yield from _verdict_constants(element)


def _is_enum(node: ast.ClassDef) -> bool:
    return any(isinstance(base, ast.Name | ast.Attribute) and ast.unparse(base).endswith("Enum")
               for base in node.bases)


def _callee(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def verdict_literals(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of each verdict name written as a string where a verdict goes: compared
    (``==``, ``in``, ``match``), returned or yielded, assigned bare (outside an enum's own body),
    passed as ``verdict=``/``status=``, as the value of a ``"verdict"`` key, or to ``Grade(...)``."""
    tree = ast.parse(source)
    enum_members = {id(statement) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and _is_enum(node)
                    for statement in node.body}
    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                found += _verdict_constants(operand)
        elif isinstance(node, ast.Return | ast.Yield):
            found += _verdict_constants(node.value)
        elif isinstance(node, ast.Assign | ast.AnnAssign) and id(node) not in enum_members:
            if isinstance(node.value, ast.Constant):
                found += _verdict_constants(node.value)
        elif isinstance(node, ast.keyword) and node.arg in VERDICT_FIELDS:
            found += _verdict_constants(node.value)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value in VERDICT_FIELDS:
                    found += _verdict_constants(value)
        elif isinstance(node, ast.Call) and _callee(node) in VERDICT_CALLS:
            for argument in node.args:
                found += _verdict_constants(argument)
        elif isinstance(node, ast.MatchValue):
            found += _verdict_constants(node.value)
    return sorted((constant.lineno, constant.value) for constant in found)


def _scanned_files() -> list[Path]:
    return [path for package in SCANNED for path in sorted((ROOT / package).rglob("*.py"))]


def test_no_verdict_or_status_name_is_written_as_a_string_beside_its_enum():
    files = _scanned_files()
    supervisor = ROOT / "gym_sysmath" / "sandbox" / "image" / "supervisor"
    assert len(files) > 50 and {ROOT / "gym_sysmath" / "verdicts.py", supervisor / "stages.py"} <= set(files)
    findings = [f"{path.relative_to(ROOT)}:{line}: {name!r}" for path in files
                for line, name in verdict_literals(path.read_text(encoding="utf-8"))]
    assert findings == [], ("write the enum member (Verdict.X, RowVerdict.X, ExecutionStatus.X) instead:\n"
                            + "\n".join(findings))


def test_every_failed_execution_status_has_its_verdict():
    assert set(FAILED_EXECUTION) == set(ExecutionStatus) - {ExecutionStatus.OK}
    for status, verdict in FAILED_EXECUTION.items():
        assert verdict.value == status.value  # the info dict and the logs name both alike


@pytest.mark.parametrize("source", [
    'if info["verdict"] == "correct": pass',
    'ok = verdict in ("wrong_answer", "format_error")',
    'ok = "scoring_error" != verdict',
    'def grade():\n    return "timeout", "run timed out"',
    'def grades():\n    yield "memory_limit"',
    'FAILED = "failed"',
    'info["verdict"] = "context_overflow"',
    'row = SampleResult(verdict="failed")',
    'result = Result(status="compile_error")',
    'info = {"verdict": "runtime_error", "correct": False}',
    'grade = Grade("output_limit", "flood")',
    'verdict = Verdict("correct")',
    'match verdict:\n    case "wrong_answer":\n        pass',
    'killed_for = "timeout"',
    'result["status"] = "ok"',
    'if compiled["status"] != "ok": pass',
    'def classify(result):\n    return "memory_limit"',
    'reply = {"status": "output_limit", "stdout": ""}',
])
def test_a_verdict_literal_where_a_verdict_goes_is_found(source):
    assert verdict_literals(source), source


@pytest.mark.parametrize("source", [
    '"""A docstring that names correct."""',
    'error = info["scoring_error"]',
    'correct = info.get("correct")',
    'stats = {"failed": 0, "correct": 3}',
    'INFO_KEYS = ("task_id", "verdict", "correct", "scoring_error")',
    'header = f"{\'failed\':>6} {\'correct\':>7}"',
    'class Verdict(StrEnum):\n    CORRECT = "correct"',
    'if verdict is Verdict.CORRECT: pass',
    'return_value = "correct answers"',
    'reply = {"ok": True, "result": result}',
    'if reply.get("ok"): pass',
    'status = ExecutionStatus.OK if reply["ok"] else classify(result)',
])
def test_a_verdict_name_used_as_a_key_header_or_text_is_not_a_finding(source):
    assert verdict_literals(source) == [], source

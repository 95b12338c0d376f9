"""The answer channel: parsing an ``ANSWER:`` value and writing code that sets ``result``.

Both sides keep floats exact: JSON text carries ``-0.0``, ``Infinity`` and ``NaN`` (Python's json
reads them), and the generated code spells each float with ``float.fromhex`` so no decimal
rounding can creep in.
"""

from __future__ import annotations

import ast
import json
import math
import re
from decimal import Decimal

from gym_sysmath.exact import float_bits, is_json_primitive_list, json_kind

from .task import CsappTask

_CANONICAL_NAN_BITS = float_bits(math.nan)


def parse_answer_value(text: str) -> list:
    """Parse the text after ``ANSWER:`` as a non-empty, flat JSON list of bool/int/float/str.

    ``NaN``, ``Infinity``, ``-Infinity`` and ``-0.0`` are accepted. Anything else (invalid JSON,
    a scalar, an empty list, ``null``, a nested list or object) raises ``ValueError`` saying why.
    """
    if not isinstance(text, str):
        raise ValueError(f"the answer must be text, not {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise ValueError("the answer is empty; expected a JSON list such as [1, true, \"0x2a\"]")
    try:
        value = json.loads(stripped)
    except RecursionError:
        raise ValueError("the answer is nested too deeply to be an answer list") from None
    except ValueError as err:
        raise ValueError(f"the answer is not valid JSON ({err}); expected a list such as [1, true, \"0x2a\"]") from None
    if not isinstance(value, list):
        raise ValueError(f"the answer must be a JSON list, not a JSON {json_kind(value) or 'value'}")
    if not value:
        raise ValueError("the answer list is empty")
    if not is_json_primitive_list(value):
        bad = next(v for v in value if json_kind(v) not in ("bool", "int", "float", "str"))
        raise ValueError(f"answer elements must be numbers, booleans or strings; found {bad!r}")
    return value


_DECIMAL_INT = re.compile(r"[+-]?\d+\Z")


def _json_int(text: str) -> int | Decimal:
    """An integer literal; ``-0`` keeps its sign (as a Decimal) so it can be the float ``-0.0``."""
    value = int(text)
    return Decimal(text) if value == 0 and text.startswith("-") else value


def _segment(lines: list[bytes], node: ast.expr) -> str:
    """The source of ``node`` (offsets are UTF-8 byte offsets); "" when it spans lines."""
    if node.end_lineno != node.lineno or node.end_col_offset is None:
        return ""
    return lines[node.lineno - 1][node.col_offset:node.end_col_offset].decode(errors="replace")


def _python_list(text: str) -> list | None:
    """A flat Python list display of decimal numbers, ``True``/``False`` and strings, or None.

    Models copy their tool output (``[4294967295, '0xffffffff', False]``): the same typed value
    as the JSON spelling. Only literals are read (nothing is evaluated); an int spelled in hex,
    octal or binary (``0xff``) is refused, so a hex string never turns into an int.
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(tree.body, ast.List):
        return None
    # each element's source, sliced from lines encoded once (ast.get_source_segment splits the
    # whole text again per element: quadratic in a long display)
    lines = [line.encode() for line in text.strip().splitlines(keepends=True)]
    values: list = []
    for node in tree.body.elts:
        sign = 1
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            sign = -1 if isinstance(node.op, ast.USub) else 1
            node = node.operand
            if not isinstance(node, ast.Constant) or type(node.value) not in (int, float):
                return None
        if not isinstance(node, ast.Constant) or type(node.value) not in (int, float, bool, str):
            return None
        source = _segment(lines, node)
        signed = ("-" if sign < 0 else "") + source
        if type(node.value) is int:
            if not _DECIMAL_INT.match(source):
                return None
            values.append(_json_int(signed))
        elif type(node.value) is float:
            if "_" in source:
                return None
            values.append(Decimal(signed))
        else:
            values.append(node.value)
    return values


def read_answer_value(text: str) -> list:
    """Read an ANSWER value as the typed list it spells, numbers by exact value.

    JSON first (``NaN``, ``Infinity``, ``-Infinity`` and ``-0.0`` accepted): integers are ints,
    ``-0`` and decimals are ``Decimal`` so their value is exact (see ``exact.answer_matches``);
    then a Python list display (single quotes, ``True``/``False``). Raises ``ValueError`` saying
    why when it is neither, or not a non-empty flat list of numbers, booleans and strings.
    """
    if not isinstance(text, str):
        raise ValueError(f"the answer must be text, not {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise ValueError("the answer is empty; expected a JSON list such as [1, true, \"0x2a\"]")
    try:
        value = json.loads(stripped, parse_float=Decimal, parse_int=_json_int)
    except RecursionError:
        raise ValueError("the answer is nested too deeply to be an answer list") from None
    except ValueError as err:
        value = _python_list(stripped)
        if value is None:
            raise ValueError(f"the answer is not valid JSON ({err}); expected a list such as "
                             "[1, true, \"0x2a\"]") from None
    if not isinstance(value, list):
        raise ValueError(f"the answer must be a JSON list, not a JSON {json_kind(value) or 'value'}")
    if not value:
        raise ValueError("the answer list is empty")
    bad = next((v for v in value if not isinstance(v, (bool, int, float, str, Decimal))), None)
    if bad is not None or any(isinstance(v, (list, dict)) for v in value):
        raise ValueError(f"answer elements must be numbers, booleans or strings; found {bad!r}")
    return value


def _literal(value: object) -> str:
    if isinstance(value, float):
        if math.isnan(value) and float_bits(value) != _CANONICAL_NAN_BITS:
            return f'struct.unpack("<d", struct.pack("<Q", {float_bits(value):#018x}))[0]'
        return f"float.fromhex({value.hex()!r})"
    return repr(value)


def reference_code(task: CsappTask) -> str:
    """Python source that, run in a fresh namespace, sets ``result`` to exactly ``task.answer``."""
    needs_struct = any(
        isinstance(v, float) and math.isnan(v) and float_bits(v) != _CANONICAL_NAN_BITS for v in task.answer
    )
    lines = [f"# {task.task_id}: the key its reference implementation ({task.template}) computed"]
    if needs_struct:
        lines.append("import struct")
    lines.append(f"result = [{', '.join(_literal(v) for v in task.answer)}]")
    return "\n".join(lines) + "\n"

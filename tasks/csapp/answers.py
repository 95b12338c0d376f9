"""The answer channel: parsing an ``ANSWER:`` value and writing code that sets ``result``.

Both sides keep floats exact: JSON text carries ``-0.0``, ``Infinity`` and ``NaN`` (Python's json
reads them), and the generated code spells each float with ``float.fromhex`` so no decimal
rounding can creep in.
"""

from __future__ import annotations

import json
import math

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
        raise ValueError(f"answer elements must be numbers, booleans or strings; found {json.dumps(bad)}")
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

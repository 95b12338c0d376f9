"""What a task template is, and the one path that turns a template and parameters into a task.

A template is a small family of questions: it renders a prompt from parameters, runs a reference
implementation on them to get the key, runs each tempting wrong reading to get the distractors,
and asserts its trap (the reason the question exists) on the key it produced. ``instantiate``
refuses to return a task whose trap does not hold or whose distractors do not differ from the
key, so a bad parameter choice fails the build instead of shipping an empty question.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gym_sysmath.exact import (
    dumps_exact,
    exact_equal,
    float_bits,
    is_json_primitive_list,
    json_kind,
    loads_exact,
)

from .machine import f32
from .schedules import Forcing
from .task import CATEGORIES, Answer, CsappTask

if TYPE_CHECKING:
    import numpy as np

Params = dict[str, Any]

ANSWER_KINDS = ("int", "bool", "float", "hex")
_HEX_RE = re.compile(r"0x(0|[1-9a-f][0-9a-f]*)")

PLATFORM = (
    "Assume x86-64 Linux and gcc: char is 8 bits and signed, short 16, int 32, long and pointers "
    "64; integers are two's complement; float and double are IEEE-754 binary32 and binary64 with "
    "round-to-nearest-even; memory is little-endian; structs follow the x86-64 System V ABI "
    "(each scalar aligned to its size, an array to its element); >> on a negative signed integer "
    "is arithmetic; converting an out-of-range value to a signed type wraps modulo 2^w, and "
    "signed arithmetic wraps as with -fwrapv."
)


class BuildError(Exception):
    """A template instance that must not become a task."""


class TrapError(BuildError):
    """The instance does not show the trap its template exists for."""


def require(condition: bool, message: str) -> None:
    """Assert a trap; unlike ``assert`` it survives ``python -O``."""
    if not condition:
        raise TrapError(message)


@dataclass(frozen=True)
class Field:
    """One element of the answer list: what it is and its JSON kind."""

    what: str
    kind: str  # one of ANSWER_KINDS

    def __post_init__(self) -> None:
        if self.kind not in ANSWER_KINDS:
            raise ValueError(f"unknown answer kind {self.kind!r}")


@dataclass(frozen=True)
class WrongReading:
    """A tempting misreading of the question, run to produce a distractor."""

    name: str
    answer: Callable[[Params], Answer]


@dataclass(frozen=True)
class RunCheck:
    """A C program and the set of whole outputs (stdout texts) the model says it can print."""

    source: str
    allowed: frozenset[str]
    runs: int = 200
    #: "exact": the whole stdout must be allowed; "sorted lines": its lines, sorted, must be
    #: (for questions about what is printed, not in which order, whose orders are too many to list).
    compare: str = "exact"
    #: A line the program prints when the machine refused what the question assumes (a fork, a
    #: thread): such a run is void, never held against the model (``runs.run_problems`` bounds
    #: how many there may be).
    void: str | None = None
    #: The same program gated to follow chosen schedules: every output the key calls possible
    #: must be produced (``schedules``). None where the template states why it cannot force.
    forced: Forcing | None = None
    #: Run under a subreaper that reaps every orphan (fork programs): the program shown is the
    #: textbook one, with no reaping of its own to change when a process ends.
    reaped: bool = False

    def observed(self, stdout: str) -> str:
        """An output as ``allowed`` spells it (``VOID_RUN`` for a void run)."""
        if self.void is not None and f"{self.void}\n" in stdout:
            return VOID_RUN
        return stdout if self.compare == "exact" else "".join(sorted(stdout.splitlines(keepends=True)))


VOID_RUN = "<a void run: the machine refused a fork or a thread the question assumes>"


@dataclass(frozen=True)
class Template:
    """A task family: prompt, answer layout, reference, wrong readings, trap, sampler and measure."""

    name: str
    category: str
    question: Callable[[Params], str]
    fields: Callable[[Params], Sequence[Field]]
    reference: Callable[[Params], Answer]
    wrong: tuple[WrongReading, ...]
    trap: Callable[[Params, Answer], None]
    sample: Callable[[np.random.Generator], Params]
    #: How hard an instance is, for its difficulty level (``difficulty.py``); None: the size of
    #: its parameters. State one when size misleads (a trace's length, the number of forks).
    measure: Callable[[Params], float] | None = None
    #: A second model of the key, written apart from ``reference`` (another formulation, other
    #: code): ``verify csapp`` requires the two to agree on every task whose key is a model's.
    independent: Callable[[Params], Answer] | None = None
    #: The C program a task shows, with every output the model allows: ``verify csapp`` (and the
    #: build) compile it with the image's gcc and run it many times in the sandbox, and every
    #: output seen must be allowed.
    runs: Callable[[Params], RunCheck] | None = None
    #: The one level the template exists for (``starter``: the single operations of
    #: ``starter.py``), or None: its draws are levelled by ``measure`` among the standard levels.
    level: str | None = None

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"{self.name}: unknown category {self.category!r}")
        if not self.wrong:
            raise ValueError(f"{self.name}: a template needs at least one wrong reading")


def fixed(*fields: Field) -> Callable[[Params], Sequence[Field]]:
    """An answer layout that does not depend on the parameters."""
    return lambda _params: fields


_KIND_TEXT = {
    "int": "an integer, in decimal",
    "bool": "a boolean, true or false",
    "float": "a float, exact (see below)",
    "hex": 'a lowercase hex string such as "0x2a"',
}


def render_instruction(template: Template, params: Params) -> str:
    """Platform, question, then the answer layout, numbered, with its kind conventions."""
    fields = template.fields(params)
    lines = [PLATFORM, "", template.question(params).rstrip(), ""]
    lines.append(f"Answer with a JSON list of {len(fields)} element{'s' * (len(fields) != 1)}, in this order:")
    lines += [f"{i}. {f.what}: {_KIND_TEXT[f.kind]}" for i, f in enumerate(fields, 1)]
    kinds = {f.kind for f in fields}
    if "hex" in kinds:
        lines.append('Hex strings are written as Python\'s hex() writes the non-negative value: "0x", '
                     'lowercase digits, no leading zeros ("0x0" for zero).')
    if "float" in kinds:
        lines.append("A float is the exact value the C object holds, converted to double: a JSON "
                     "number with enough digits to round-trip (Python's repr), or -0.0, Infinity, "
                     "-Infinity or NaN.")
    return "\n".join(lines)


def check_key(answer: object, fields: Sequence[Field], what: str) -> None:
    """The key must be a flat JSON list matching the declared layout, hex strings canonical."""
    if not is_json_primitive_list(answer):
        raise BuildError(f"{what} is not a non-empty list of JSON primitives: {answer!r}")
    assert isinstance(answer, list)
    if len(answer) != len(fields):
        raise BuildError(f"{what} has {len(answer)} elements, the layout {len(fields)}")
    for i, (value, field) in enumerate(zip(answer, fields, strict=True)):
        kind = "hex" if json_kind(value) == "str" else json_kind(value)
        if kind != field.kind:
            raise BuildError(f"{what}[{i}] is {kind} but the layout says {field.kind}: {value!r}")
        if kind == "hex" and not _HEX_RE.fullmatch(value):
            raise BuildError(f"{what}[{i}] = {value!r} is not a lowercase, unpadded hex string")
        if kind == "float" and math.isnan(value) and float_bits(value) != float_bits(math.nan):
            raise BuildError(f"{what}[{i}] is a NaN that the JSON text NaN cannot express")


def instantiate(template: Template, params: Params, task_id: str) -> CsappTask:
    """Run the reference and the wrong readings on ``params`` and assert the trap.

    Raises ``TrapError`` when the instance does not show its trap and ``BuildError`` when the key
    is malformed or a distractor equals it.
    """
    stored = loads_exact(dumps_exact(params))  # also a private copy the task can keep
    if not exact_equal(stored, params):
        raise BuildError(f"{task_id}: params do not survive the JSON round trip: {params!r}")
    fields = template.fields(params)
    answer = template.reference(params)
    check_key(answer, fields, f"{task_id}: key")
    template.trap(params, answer)
    distractors: list[Answer] = []
    for reading in template.wrong:
        wrong = reading.answer(params)
        if not is_json_primitive_list(wrong):
            raise BuildError(f"{task_id}: wrong reading {reading.name!r} gave {wrong!r}")
        if exact_equal(answer, wrong):
            raise BuildError(f"{task_id}: wrong reading {reading.name!r} gives the key itself")
        if not any(exact_equal(wrong, d) for d in distractors):
            distractors.append(wrong)
    instruction = render_instruction(template, params)
    if not instruction.isascii():
        raise BuildError(f"{task_id}: the instruction must be ASCII (the env's Text charset)")
    return CsappTask(task_id, template.category, template.name, instruction, stored, answer, distractors)


# --- helpers the templates share for prompts and sampling ------------------------------------


def c_float(value: float) -> str:
    """A C float literal (``-2.7f``) that denotes exactly ``f32(value)``.

    A decimal literal rounds straight to float32 while ``f32`` rounds through double; the two
    agree unless the double sits exactly on a float32 tie, which is refused here.
    """
    if math.isfinite(value) and f32(value) != value and _is_f32_tie(value):
        raise BuildError(f"{value!r} is a float32 tie; a decimal literal would be ambiguous")
    return f"{value!r}f"


def _is_f32_tie(value: float) -> bool:
    """True when ``value`` lies exactly halfway between two adjacent float32 values."""
    magnitude = abs(value)
    shift = 150 if magnitude < 2.0**-126 else 25 - math.frexp(magnitude)[1]
    scaled = math.ldexp(magnitude, shift)  # exact: a power-of-two scaling
    return scaled.is_integer() and int(scaled) % 2 == 1


def draw_int(rng: np.random.Generator, low: int, high: int) -> int:
    """A Python int uniform in [low, high], for any width (numpy stops at 64 bits)."""
    span = high - low + 1
    n = 0
    for _ in range(span.bit_length() // 32 + 2):
        n = (n << 32) | int(rng.integers(0, 1 << 32))
    return low + n % span


def draw(rng: np.random.Generator, options: Sequence[Any]) -> Any:
    """One of ``options``, as the Python object itself (never a numpy scalar)."""
    return options[int(rng.integers(len(options)))]


def c_int(width: int, signed: bool = True) -> str:
    """The <stdint.h> name of a fixed-width integer type, e.g. ``uint32_t``."""
    return f"{'' if signed else 'u'}int{width}_t"

"""Reading one ANSWER value as a typed linear-algebra object.

The parser is deliberately kind-blind: it reports what the text *is* (a scalar, a vector, a
matrix or a boolean) and the grader decides whether that is the kind the question asked for, so a
vector never sneaks through as a matrix. It never raises and never evaluates arithmetic.

Accepted, beyond the plain forms ``6``, ``-1/3``, ``0.25``, ``[1, 0, -2]``, ``[[1, 2], [3, 4]]``:

- numbers: integers, decimals (read exactly: ``0.1`` is 1/10), scientific notation with a small
  exponent, fractions of those (``-1/3``, ``1/-3``, ``1.5/2``), LaTeX ``\\frac{a}{b}``, and the Unicode
  spellings ``answers.normalise_notation`` reads (minus sign, full-width digits, ``2 \u00d7 10^3``);
  a bare ``1,234`` with comma-grouped thousands is the number 1234, not a vector;
- lists in ``[...]`` or ``(...)``, items separated by commas or by whitespace (numpy's printed form,
  ``[[ 1  2]\\n [ 3  4]]``), rows optionally separated by ``;`` (MATLAB's ``[1 2; 3 4]``); a bare
  comma-separated sequence ``3, -1`` is a vector; ``(6)`` is the scalar 6 but ``[6]`` a vector;
- LaTeX ``pmatrix``/``bmatrix``/``Bmatrix``/``matrix``/``array`` environments; one with a single
  row or column is a vector, because that is how LaTeX writes vectors;
- wrappers ``array(...)``, ``np.array(...)``, ``Matrix(...)``, and a leading label such as
  ``x =`` or ``det(A) =``;
- booleans ``true``/``false`` and ``yes``/``no`` in any case: all unambiguous, and ``True`` is
  how Python prints it. Numbers are never booleans: ``1`` for a yes/no question is a type error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from gym_sysmath.answers import normalise_notation, unwrap

Number = Fraction
Vector = tuple[Fraction, ...]
Matrix = tuple[tuple[Fraction, ...], ...]
ParsedKind = Literal["scalar", "vector", "matrix", "boolean"]

#: Bounds that keep hostile input cheap: no giant exponents, numerals, nesting or entry counts.
MAX_TEXT = 5_000
MAX_ENTRIES = 1_000
MAX_DIGITS = 200
MAX_EXPONENT = 60
MAX_NESTING = 4


@dataclass(frozen=True)
class Parsed:
    """A value read from an answer: ``kind`` says which of the shapes ``value`` has."""

    kind: ParsedKind
    value: Number | Vector | Matrix | bool


_BOOLEANS = {"true": True, "yes": True, "false": False, "no": False}
_UNSIGNED = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_NUMBER = re.compile(rf"[+-]?{_UNSIGNED}(?:[ \t]*/[ \t]*[+-]?{_UNSIGNED})?")
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_EXPONENT = re.compile(r"[eE]([+-]?\d+)")
_FRAC = re.compile(
    r"(?:(?P<sign>[+-])\s*)?\\[dt]?frac\s*\{\s*(?P<num>[+-]?[\d.]+)\s*\}\s*\{\s*(?P<den>[+-]?[\d.]+)\s*\}"
)
_LATEX_ENV = re.compile(
    r"(?:\\left\s*[\[(]\s*)?"  # an array is often bracketed by hand
    r"\\begin\s*\{(?P<env>[pbB]?matrix|array)\}(?:\s*\{[^{}]*\})?"
    r"(?P<body>[^\\]*(?:\\(?!begin|end)[^\\]*)*)"  # no nested environments, and no backtracking
    r"\\end\s*\{(?P=env)\}"
    r"(?:\s*\\right\s*[\])])?",
    re.DOTALL,
)
_CALL_WRAPPER = re.compile(r"^(?:(?:np|numpy|sympy|sp)\s*\.\s*)?(?:array|Matrix)\s*\(")
_LABEL = re.compile(r"^[^\d\s\[\](){}+\-.=,;][^=\[\]]*=(?!=)")
_LATEX_NOISE = re.compile(r"\\(?:left|right|big|Big|bigg|Bigg)(?=[\[\]()|.])|(?<!\\)\\[,;:! ]|\\q?quad")
_ANGLES = re.compile(r"\\[lr]angle\b")


class _Unreadable(Exception):
    """Internal signal: the text is not a value. Never escapes :func:`parse_value`."""


def _number(text: str) -> Fraction:
    if len(text) > MAX_DIGITS:
        raise _Unreadable("numeral too long")
    for exponent in _EXPONENT.findall(text):
        if abs(int(exponent)) > MAX_EXPONENT:
            raise _Unreadable("exponent too large")
    numerator, _, denominator = text.replace(" ", "").replace("\t", "").partition("/")
    value = Fraction(numerator)
    if denominator:
        divisor = Fraction(denominator)
        if divisor == 0:
            raise _Unreadable("division by zero")
        value /= divisor
    return value


def _latex_env_to_list(match: re.Match[str]) -> str:
    rows = [row for row in re.split(r"\\\\(?:\[[^\]]*\])?", match.group("body")) if row.strip()]
    cells = [[cell.strip() for cell in row.split("&")] for row in rows]
    if len(cells) == 1:
        return "[" + ", ".join(cells[0]) + "]"
    if all(len(row) == 1 for row in cells):
        return "[" + ", ".join(row[0] for row in cells) + "]"
    return "[" + ", ".join("[" + ", ".join(row) + "]" for row in cells) + "]"


def _normalise_text(text: str) -> str:
    text = normalise_notation(text)
    text = unwrap(_ANGLES.sub(lambda m: "(" if m.group().startswith("\\l") else ")", text))
    text = _FRAC.sub(lambda m: f"{m['sign'] or ''}{m['num']}/{m['den']}", text)
    text = _LATEX_ENV.sub(_latex_env_to_list, text)
    text = unwrap(_LATEX_NOISE.sub(" ", text))
    label = _LABEL.match(text)
    if label is not None:
        text = unwrap(text[label.end() :])
    call = _CALL_WRAPPER.match(text)
    if call is not None and text.endswith(")"):
        text = unwrap(text[call.end() : -1])
    return text


class _Reader:
    """Recursive descent over ``value := number | list``; lists nest at most ``MAX_NESTING`` deep."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.entries = 0

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self.pos += 1

    def peek(self) -> str:
        self.skip_space()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def value(self, depth: int) -> object:
        char = self.peek()
        if char and char in "[(":
            if depth >= MAX_NESTING:
                raise _Unreadable("nested too deeply")
            return self.sequence(depth + 1)
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise _Unreadable(f"unexpected text at {self.text[self.pos : self.pos + 12]!r}")
        self.pos = match.end()
        self.entries += 1
        if self.entries > MAX_ENTRIES:
            raise _Unreadable("too many entries")
        return _number(match.group())

    def sequence(self, depth: int) -> object:
        """A bracketed list; ``;`` splits it into rows, commas or whitespace separate items."""
        opener = self.text[self.pos]
        closer = "]" if opener == "[" else ")"
        self.pos += 1
        rows: list[list[object]] = [[]]
        last = "open"  # what came before: open | item | comma | semicolon
        comma_seen = False
        while True:
            char = self.peek()
            if char == closer:
                self.pos += 1
                break
            if char == "":
                raise _Unreadable("unclosed bracket")
            if char in ",;":
                if last != "item":
                    raise _Unreadable("empty item")
                self.pos += 1
                if char == ";":
                    rows.append([])
                comma_seen = comma_seen or char == ","
                last = "comma" if char == "," else "semicolon"
                continue
            if last == "item" and comma_seen:
                raise _Unreadable("items mix commas and spaces")
            rows[-1].append(self.value(depth))
            last = "item"
        if len(rows) > 1:
            if not rows[-1]:
                rows.pop()
            return [row[0] if len(row) == 1 and isinstance(row[0], list) else row for row in rows]
        items = rows[0]
        if opener == "(" and len(items) == 1 and not comma_seen and isinstance(items[0], Fraction):
            return items[0]  # parentheses as grouping
        return items


def _typed(raw: object) -> Parsed | None:
    if isinstance(raw, Fraction):
        return Parsed("scalar", raw)
    if not isinstance(raw, list) or not raw:
        return None
    if all(isinstance(item, Fraction) for item in raw):
        return Parsed("vector", tuple(raw))
    if all(isinstance(row, list) and row and all(isinstance(v, Fraction) for v in row) for row in raw):
        width = len(raw[0])
        if all(len(row) == width for row in raw):
            return Parsed("matrix", tuple(tuple(row) for row in raw))
    return None


def parse_value(text: str) -> Parsed | None:
    """The typed value written in ``text``, or ``None`` when it is not one clean value."""
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        return None
    text = _normalise_text(text)
    word = text.strip().lower()
    if word in _BOOLEANS:
        return Parsed("boolean", _BOOLEANS[word])
    if _THOUSANDS.fullmatch(text):
        try:
            return Parsed("scalar", _number(text.replace(",", "")))
        except (_Unreadable, ValueError, ZeroDivisionError):
            return None
    reader = _Reader(text)
    try:
        items: list[object] = [reader.value(0)]
        while reader.peek() == ",":
            reader.pos += 1
            items.append(reader.value(0))
        if reader.peek() != "":
            return None
    except (_Unreadable, ValueError, ZeroDivisionError, OverflowError):
        return None
    if len(items) > 1:
        return _typed(items) if all(isinstance(item, Fraction) for item in items) else None
    return _typed(items[0])

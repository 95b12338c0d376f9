"""Final-answer extraction shared by the task families.

A response is free text that must end its work with a line ``ANSWER: <value>``. This module finds
those values and nothing else: it never falls back to "the last number in the text", because a
grader that does rewards responses that never committed to an answer. What a value *means* is the
family's business; here we only decide where values are and whether a response gave one.

Decisions, so graders agree on them:

- Reasoning blocks ``<think>...</think>`` (also ``<thinking>``) are removed before searching, so an
  ``ANSWER:`` line rehearsed while thinking neither counts nor floods. Text after an unclosed
  ``<think>`` is ignored (the model never left its reasoning). A ``</think>`` that appears before any
  opening tag closes an implicit block that began at the start of the text, which is how chat
  templates that open the block in the prompt produce responses.
- An answer line starts (after optional markdown decoration such as ``**``, ``#``, ``>`` or ``-``)
  with ``ANSWER:`` in any case, optionally ``Final answer:``. Mid-sentence "answer:" is prose.
- A value runs to the end of its line, and on over following lines while brackets are unbalanced,
  so a multi-line matrix is one value. When the line holds nothing after the colon, the value is the
  next non-blank line (code fences skipped).
- A value that is literally the placeholder ``<value>`` restates the instructions; it is dropped.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

T = TypeVar("T")

#: Longest value we keep; anything longer is cut there (and will not parse as a small answer).
MAX_VALUE_CHARS = 20_000
#: Most lines a bracket-balanced value may span.
MAX_VALUE_LINES = 64

_THINK_TAG = re.compile(r"<(/?)think(?:ing)?\s*>", re.IGNORECASE)
# Possessive quantifiers: runs of spaces must not be re-split (quadratic backtracking on long lines).
_ANSWER_LINE = re.compile(r"^[ \t>#*_\-+]*+(?:final[ \t]++)?answer[ \t]*+[*_]*+[ \t]*+:(?P<value>.*)$", re.IGNORECASE)
_FENCE_LINE = re.compile(r"^[ \t]*(?:```|~~~)[\w+-]*[ \t]*$")
_DECORATION_ONLY = re.compile(r"^[\s*_`$]*$")
_OPENERS = "[({"
_CLOSERS = "])}"
_ENV_BEGIN = re.compile(r"\\begin\s*\{")
_ENV_END = re.compile(r"\\end\s*\{")
_WRAPPER_COMMAND = re.compile(r"^\\(?:boxed|fbox|text|textbf|textrm|mathrm|mathbf|mbox)\s*\{")
_DELIMITER_PAIRS = (("\\(", "\\)"), ("\\[", "\\]"), ('"', '"'), ("'", "'"))
_EDGE_CHARS = " \t\r\n*_`$"
_PLACEHOLDER = "<value>"
_MAX_UNWRAP = 16


def strip_think(text: str) -> str:
    """Return ``text`` without its reasoning blocks (see the module docstring for the rules)."""
    visible: list[str] = []
    pos = 0
    inside = False
    seen_tag = False
    for match in _THINK_TAG.finditer(text):
        closing = match.group(1) == "/"
        if not closing and not inside:
            visible.append(text[pos : match.start()])
            inside = True
        elif closing and inside:
            inside = False
        elif closing and not seen_tag:
            visible.clear()  # implicit block opened before the response began
        else:
            visible.append(text[pos : match.start()])  # stray tag: drop the tag, keep the text
        seen_tag = True
        pos = match.end()
    if not inside:
        visible.append(text[pos:])
    return "".join(visible)


def _imbalance(text: str) -> int:
    depth = sum(text.count(c) for c in _OPENERS) - sum(text.count(c) for c in _CLOSERS)
    envs = len(_ENV_BEGIN.findall(text)) - len(_ENV_END.findall(text))
    display = text.count("$$") % 2
    return max(depth, 0) + max(envs, 0) + display


def find_answers(text: str) -> list[str]:
    """Raw values of every ``ANSWER:`` line outside reasoning blocks, in order of appearance."""
    lines = strip_think(text).splitlines()
    values: list[str] = []
    i = 0
    while i < len(lines):
        match = _ANSWER_LINE.match(lines[i])
        i += 1
        if match is None:
            continue
        parts = [match.group("value")]
        if _DECORATION_ONLY.match(parts[0]):
            while i < len(lines) and (not lines[i].strip() or _FENCE_LINE.match(lines[i])):
                i += 1
            if i < len(lines) and not _ANSWER_LINE.match(lines[i]):
                parts = [lines[i]]
                i += 1
        while (
            _imbalance("\n".join(parts)) > 0
            and i < len(lines)
            and len(parts) < MAX_VALUE_LINES
            and sum(map(len, parts)) < MAX_VALUE_CHARS
            and not _ANSWER_LINE.match(lines[i])
        ):
            if not _FENCE_LINE.match(lines[i]):
                parts.append(lines[i])
            i += 1
        value = "\n".join(parts)[:MAX_VALUE_CHARS].strip()
        if _PLACEHOLDER not in value.lower() or unwrap(value).lower() != _PLACEHOLDER:
            values.append(value)
    return values


def _matching_brace(text: str, open_index: int) -> int:
    """Index of the ``}`` closing the ``{`` at ``open_index``, or -1."""
    depth = 0
    for index in range(open_index, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return index
    return -1


def unwrap(value: str) -> str:
    """Strip presentation wrappers: ``**6**``, `` `6` ``, ``$6$``, ``\\(6\\)``, ``\\boxed{6}``, ``"6"``.

    Markdown emphasis, backticks and dollar signs are removed from both ends even when unmatched,
    because ``**ANSWER: 6**`` leaves ``6**`` behind; none of them can begin or end a real value.
    A trailing sentence full stop, comma or semicolon is dropped too.
    """
    previous = None
    for _ in range(_MAX_UNWRAP):  # nobody nests more wrappers than this; hostile input stops here
        if value == previous:
            break
        previous = value
        value = value.strip(_EDGE_CHARS).rstrip(".,;").strip(_EDGE_CHARS)
        for left, right in _DELIMITER_PAIRS:
            if len(value) >= len(left) + len(right) and value.startswith(left) and value.endswith(right):
                value = value[len(left) : len(value) - len(right)]
        command = _WRAPPER_COMMAND.match(value)
        if command is not None and _matching_brace(value, command.end() - 1) == len(value) - 1:
            value = value[command.end() : -1]
    return value


@dataclass(frozen=True)
class AnswerChoice(Generic[T]):
    """What a response committed to.

    ``status`` is ``"missing"`` (no ANSWER line), ``"unparseable"`` (every value failed to
    normalise), ``"several"`` (values that differ: flooding, or an unreadable value beside a
    readable one) or ``"one"`` (one value, possibly repeated); ``value`` is set only for ``"one"``.
    """

    status: Literal["missing", "unparseable", "several", "one"]
    value: T | None
    raw: str | None
    count: int


def choose_answer(
    values: Sequence[str],
    normalise: Callable[[str], T | None],
    same: Callable[[T, T], bool] = operator.eq,
) -> AnswerChoice[T]:
    """Decide between one committed answer and several different ones.

    ``normalise`` turns a raw value into the family's canonical form, or ``None`` when unreadable;
    ``same`` says when two canonical values are the same answer (for example equal up to a scalar).
    Repeating a value is fine; offering different values is flooding, so it is never ``"one"``.
    """
    if not values:
        return AnswerChoice("missing", None, None, 0)
    first: T | None = None
    unreadable = False
    for raw in dict.fromkeys(values):  # each distinct text once: a flood of copies costs one parse
        value = normalise(raw)
        if value is None:
            unreadable = True
        elif first is None:
            first = value
        elif not same(first, value):
            return AnswerChoice("several", None, values[0], len(values))
        if first is not None and unreadable:
            return AnswerChoice("several", None, values[0], len(values))
    if first is None:
        return AnswerChoice("unparseable", None, values[0], len(values))
    return AnswerChoice("one", first, values[0], len(values))

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
- Lines may end in LF, CRLF or a lone CR.
- Lines inside fenced code blocks are not answer lines (``# ANSWER: 5`` in code is a comment),
  except in a fenced block that holds nothing but one ANSWER line.
- A value runs to the end of its line, and on over following lines while brackets are unbalanced,
  so a multi-line matrix is one value. When the line holds nothing after the colon, the value is the
  next non-blank line (which may open the fenced block right after it).
- A value is read after ``normalise_notation``: the Unicode minus, dashes, no-break and thin spaces,
  full-width digits and punctuation, smart quotes and ``\u00d7 10^n`` models print for ASCII notation
  become that ASCII. Prose, reasoning and code are never rewritten.
- A value that is literally the placeholder ``<value>`` restates the instructions; it is dropped.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from gym_sysmath.fences import find_blocks, split_lines

T = TypeVar("T")

#: Longest value we keep; anything longer is cut there (and will not parse as a small answer).
MAX_VALUE_CHARS = 20_000
#: Most lines a bracket-balanced value may span.
MAX_VALUE_LINES = 64

_THINK_TAG = re.compile(r"<(/?)think(?:ing)?\s*>", re.IGNORECASE)
# Possessive quantifiers: runs of spaces must not be re-split (quadratic backtracking on long lines).
# \s is Unicode whitespace (a no-break space after the colon is still an answer line); the colon may
# be full-width.
_ANSWER_LINE = re.compile(
    r"^[\s>#*_\-+\u2022]*+(?:final\s++)?answer\s*+[*_]*+\s*+[:\uff1a](?P<value>.*)$", re.IGNORECASE
)
#: Inside a fence only a bare ANSWER line counts (``# ANSWER: 5`` there is a code comment).
_FENCED_ANSWER_LINE = re.compile(r"^\s*+[*_]*+(?:final\s++)?answer\s*+[*_]*+\s*+[:\uff1a](?P<value>.*)$",
                                 re.IGNORECASE)
_DECORATION_ONLY = re.compile(r"^[\s*_`$]*$")
_OPENERS = "[({"
_CLOSERS = "])}"
_ENV_BEGIN = re.compile(r"\\begin\s*\{")
_ENV_END = re.compile(r"\\end\s*\{")
_WRAPPER_COMMAND = re.compile(r"^\\(?:boxed|fbox|text|textbf|textrm|texttt|textit|mathrm|mathbf|mathtt|mbox)\s*\{")
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


def _regions(lines: list[str]) -> tuple[list[int | None], set[int], set[int]]:
    """Per line, None for prose or the number of the fenced block it is in (delimiters too); the
    delimiter lines; the numbers of the blocks that hold nothing but one ANSWER line."""
    regions: list[int | None] = [None] * len(lines)
    delimiters: set[int] = set()
    answer_blocks: set[int] = set()
    for number, block in enumerate(find_blocks(lines)):
        for index in range(block.first_line, block.last_line + 1):
            regions[index] = number
        delimiters.add(block.first_line)
        if not block.cut and _OPEN_DELIMITER.match(lines[block.last_line]):
            delimiters.add(block.last_line)
        content = [i for i in range(block.first_line + 1, block.last_line) if lines[i].strip()]
        if block.cut or not content or _FENCED_ANSWER_LINE.match(lines[content[0]]) is None:
            continue
        value = [lines[content[0]]]
        for i in content[1:]:
            if _imbalance(normalise_notation("\n".join(value))) <= 0:
                break
            value.append(lines[i])
        if len(value) == len(content):
            answer_blocks.add(number)
    return regions, delimiters, answer_blocks


_OPEN_DELIMITER = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[ \t]*$")


def is_answer_line(line: str) -> bool:
    """Whether ``line``, outside code, would be an ANSWER line."""
    return _ANSWER_LINE.match(line) is not None


def find_answers(text: str) -> list[str]:
    """Values of every ``ANSWER:`` line outside reasoning blocks and code fences, in order.

    The values come back with ``normalise_notation`` applied (Unicode minus, full-width digits,
    smart quotes, ...). A line inside a fenced block is never an answer line (``# ANSWER: 5`` in
    code is a comment), except in a block that holds nothing but one ANSWER line. A value left
    empty on its line is read from the next non-blank line, which may be the first line of the
    fenced block right after it (``ANSWER:`` then a ```` ``` ```` block holding a matrix).
    """
    lines = split_lines(strip_think(text))
    regions, delimiters, answer_blocks = _regions(lines)

    def answer_line(index: int) -> re.Match[str] | None:
        if index in delimiters or (regions[index] is not None and regions[index] not in answer_blocks):
            return None
        return _ANSWER_LINE.match(lines[index])

    values: list[str] = []
    i = 0
    while i < len(lines):
        match = answer_line(i)
        i += 1
        if match is None:
            continue
        parts = [match.group("value")]
        region = regions[i - 1]
        if _DECORATION_ONLY.match(parts[0]):
            while i < len(lines) and (not lines[i].strip() or i in delimiters):
                i += 1
            if i < len(lines) and answer_line(i) is None:
                parts = [lines[i]]
                region = regions[i]
                i += 1
        while (
            _imbalance(normalise_notation("\n".join(parts))) > 0
            and i < len(lines)
            and regions[i] == region
            and len(parts) < MAX_VALUE_LINES
            and sum(map(len, parts)) < MAX_VALUE_CHARS
            and answer_line(i) is None
        ):
            if i not in delimiters:
                parts.append(lines[i])
            i += 1
        value = normalise_notation("\n".join(parts)[:MAX_VALUE_CHARS]).strip()
        if _PLACEHOLDER not in value.lower() or unwrap(value).lower() != _PLACEHOLDER:
            values.append(value)
    return values


# ---------------------------------------------------------------- notation

def _fullwidth() -> dict[int | str, str]:
    return {code: chr(code - 0xFEE0) for code in range(0xFF01, 0xFF5F)}


#: Characters models print for ASCII notation, and their ASCII. Multiplication signs are handled
#: apart (``3 \u00d7 10^5`` is the number 3e5).
_NOTATION_MAP: dict[int | str, str] = {
    **_fullwidth(),
    **dict.fromkeys("\u2212\u2010\u2011\u2012\u2013\u2014\u2015\ufe58\ufe63", "-"),
    **dict.fromkeys("\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
                    "\u202f\u205f\u3000", " "),
    **dict.fromkeys("\u200b\u200c\u200d\u2060\ufeff", ""),
    **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033", '"'),
    **dict.fromkeys("\u2044\u2215\u00f7", "/"),
    "\u2217": "*", "\u3001": ",", "\u3002": ".", "\u2026": "...", "\u27e8": "(", "\u27e9": ")",
}
_NOTATION = str.maketrans(_NOTATION_MAP)
_SUPERSCRIPT = str.maketrans("\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079\u207a\u207b",
                             "0123456789+-")
_TIMES = "\u00d7\u00b7\u22c5\u2219"
_SCIENTIFIC = re.compile(
    rf"(?<=\d)[ \t]*+(?:\\times|\\cdot|[*x{_TIMES}])[ \t]*+10[ \t]*+"
    r"(?:(?:\^|\*\*)[ \t]*+(?:\{[ \t]*+(?P<braced>[+-]?\d{1,4})[ \t]*+\}|(?P<plain>[+-]?\d{1,4}))"
    "|(?P<super>[\u207a\u207b]?[\u2070\u00b9\u00b2\u00b3\u2074-\u2079]{1,4}))"
)
_REMAINING_TIMES = str.maketrans(dict.fromkeys(_TIMES, "*"))


def _exponent(match: re.Match[str]) -> str:
    exponent = match["braced"] or match["plain"] or match["super"].translate(_SUPERSCRIPT)
    return "e" + exponent


def normalise_notation(value: str) -> str:
    """``value`` with the characters models use for ASCII notation replaced by that ASCII.

    Unicode minus signs and dashes become ``-``; no-break, thin and other spaces become a space
    (zero-width ones vanish); full-width forms (digits, brackets, commas) their ASCII; smart
    quotes straight ones; ``\u00f7`` and fraction slashes ``/``; ``a \u00d7 10^b`` (also
    ``\\times``, ``\u00b7``, ``10\u207b\u00b3``) the number ``aeb``, and any other
    multiplication sign ``*``. Applied only to ANSWER values, never to prose or code.
    """
    value = value.translate(_NOTATION)
    value = _SCIENTIFIC.sub(_exponent, value)
    return value.translate(_REMAINING_TIMES)


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

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
  Lines labelled ``ANSWER`` in capitals win: lenient labels (``Answer:``, ``Final Answer:``) are
  read only when a reply has no capital one, so prose ``Answer:`` lines never cancel it.
- A label with no value whose next non-blank line is another answer line (``**Final Answer:**``
  above ``ANSWER: 6``) is a heading, not a value.
- Invisible characters (zero-width, BOM, word joiner, soft hyphen, direction marks) and
  chat-template tokens (``<|im_end|>``, ``</s>``, ...) are removed first (``clean_text``); an emoji
  after a value, an expression chain before it, a flat vector's ``^T`` and the quotes of a
  fraction are not part of it (``clean_value``).
- Every function here takes time linear in its input for any ``str``, and never raises.
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
import unicodedata
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
    r"^[\s>#*_\-+\u2022]*+(?:final\s++)?(?P<label>answer)\s*+[*_]*+\s*+[:\uff1a](?P<value>.*)$", re.IGNORECASE
)
#: Inside a fence only a bare ANSWER line counts (``# ANSWER: 5`` there is a code comment).
_FENCED_ANSWER_LINE = re.compile(
    r"^\s*+[*_]*+(?:final\s++)?(?P<label>answer)\s*+[*_]*+\s*+[:\uff1a](?P<value>.*)$", re.IGNORECASE
)
#: The label that wins over the lenient ones (``Answer:``, ``Final Answer:``): ``ANSWER`` in capitals.
_STRICT_LABEL = "ANSWER"
#: Characters that print as nothing: zero-width space, (non-)joiner, direction marks and embeddings,
#: word joiner, invisible operators, BOM, soft hyphen, Mongolian vowel separator. Removed before
#: answer lines are looked for, so they can neither hide a line nor change a value.
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
#: Chat-template end-of-turn and role tokens a decoder may leave in the text: ``<|im_end|>``,
#: ``<|eot_id|>``, ``<|end|>``, ``<|endoftext|>``, ``</s>``, ``<eos>``, Gemma's ``<end_of_turn>``,
#: DeepSeek's full-width ``<\uff5cend\u2581of\u2581sentence\uff5c>``. Bounded, so linear.
_SPECIAL_TOKEN = re.compile(
    r"<\|[^\s<>|]{1,48}\|>|<\uff5c[^\s<>\uff5c]{1,48}\uff5c>|</s>|<eos>|<end_of_turn>|<start_of_turn>"
    r"|<end_of_utterance>|<end_of_sentence>|<seed:eos>"
)
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


class _Balance:
    """Running count of the brackets, LaTeX environments and ``$$`` a value has left open, added
    line by line (each line is read once, so a value of n characters costs O(n))."""

    __slots__ = ("depth", "dollars", "envs")

    def __init__(self, line: str = "") -> None:
        self.depth = self.envs = self.dollars = 0
        self.add(line)

    def add(self, line: str) -> None:
        text = normalise_notation(line)
        self.depth += sum(text.count(c) for c in _OPENERS) - sum(text.count(c) for c in _CLOSERS)
        self.envs += len(_ENV_BEGIN.findall(text)) - len(_ENV_END.findall(text))
        self.dollars += text.count("$$")  # no "$$" spans a line end, so per-line counts add up

    @property
    def open(self) -> bool:
        return max(self.depth, 0) + max(self.envs, 0) + self.dollars % 2 > 0


def _regions(lines: list[str]) -> tuple[list[int | None], set[int], set[int]]:
    """Per line, None for prose or the number of the fenced block it is in (delimiters too); the
    delimiter lines; the numbers of the blocks that hold nothing but one ANSWER line.

    Every line is read a bounded number of times: O(total length)."""
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
        balance = _Balance(lines[content[0]])
        taken = 1
        for i in content[1:]:
            if not balance.open:
                break
            balance.add(lines[i])
            taken += 1
        if taken == len(content):
            answer_blocks.add(number)
    return regions, delimiters, answer_blocks


_OPEN_DELIMITER = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[ \t]*$")


def is_answer_line(line: str) -> bool:
    """Whether ``line``, outside code, would be an ANSWER line (any label, strict or lenient)."""
    return _ANSWER_LINE.match(line) is not None


def clean_text(text: str) -> str:
    """``text`` without invisible characters (zero-width, BOM, soft hyphen, direction marks) and
    chat-template tokens (``<|im_end|>``, ``</s>``, ...): what the ANSWER reader reads."""
    return _SPECIAL_TOKEN.sub("", _INVISIBLE.sub("", text))


_TOKEN_AT_END = re.compile(
    r"(?:<\|[^\s<>|]{1,48}\|>|<\uff5c[^\s<>\uff5c]{1,48}\uff5c>|</s>|<eos>|<end_of_turn>"
    r"|<end_of_utterance>|<end_of_sentence>|<seed:eos>|\[e~\[)\Z"
)
_LONGEST_TOKEN = 64


def strip_end_tokens(text: str) -> str:
    """``text`` without the chat-template tokens (and the spaces around them) at its end:
    ``42<|im_end|>``, ``42</s>\\n<|endoftext|>``, DeepSeek's ``<\uff5cend\u2581of\u2581sentence\uff5c>``.
    Text that ends in no token comes back unchanged. O(len(text)): each character is looked at
    a bounded number of times (a regex with ``\\s*`` before ``$`` would retry every start)."""
    end = len(text)
    stripped = False
    while True:
        last = end
        while last and text[last - 1].isspace():
            last -= 1
        token = _TOKEN_AT_END.search(text, max(0, last - _LONGEST_TOKEN), last)
        if token is None:
            break
        end, stripped = token.start(), True
    if not stripped:
        return text
    while end and text[end - 1].isspace():
        end -= 1
    return text[:end]


def find_answers(text: str) -> list[str]:
    """Values of the ``ANSWER:`` lines outside reasoning blocks and code fences, in order.

    Lines labelled ``ANSWER`` in capitals win: when the reply holds one, lenient labels
    (``Answer:``, ``Final answer:``, ``**Final Answer:**``) are prose; only when it holds none are
    their values read. A label with no value on its line takes the next non-blank line, unless
    that line is itself an answer line (or there is none): then it is a heading, not a value.

    The values come back with ``normalise_notation`` applied (Unicode minus, full-width digits,
    smart quotes, ...) and ``clean_value`` (an emoji after the value, an expression chain before
    it, a transposed flat vector, a quoted fraction). A line inside a fenced block is never an
    answer line (``# ANSWER: 5`` in code is a comment), except in a block that holds nothing but
    one ANSWER line. Time is O(len(text)) for any ``str``.
    """
    lines = split_lines(strip_think(clean_text(text)))
    regions, delimiters, answer_blocks = _regions(lines)

    def answer_line(index: int) -> re.Match[str] | None:
        if index in delimiters or (regions[index] is not None and regions[index] not in answer_blocks):
            return None
        return _ANSWER_LINE.match(lines[index])

    strict: list[str] = []
    lenient: list[str] = []
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
            if i >= len(lines) or answer_line(i) is not None:
                continue  # a label with no value: "**Final Answer:**" above "ANSWER: 6"
            parts = [lines[i]]
            region = regions[i]
            i += 1
        balance = _Balance(parts[0])
        size = len(parts[0])
        while (
            balance.open
            and i < len(lines)
            and regions[i] == region
            and len(parts) < MAX_VALUE_LINES
            and size < MAX_VALUE_CHARS
            and answer_line(i) is None
        ):
            if i not in delimiters:
                parts.append(lines[i])
                balance.add(lines[i])
                size += len(lines[i])
            i += 1
        value = clean_value(normalise_notation("\n".join(parts)[:MAX_VALUE_CHARS]).strip())
        if _PLACEHOLDER not in value.lower() or unwrap(value).lower() != _PLACEHOLDER:
            (strict if match.group("label") == _STRICT_LABEL else lenient).append(value)
    return strict or lenient


# ---------------------------------------------------------------- lenient value forms

#: What may trail a value without being part of it: pictographs (``\u2705``, ``\U0001f389``, category
#: So), emoji variation selectors, joiners, keycaps and skin-tone modifiers, and spaces.
_EMOJI_PARTS = frozenset("\ufe0e\ufe0f\u200d\u20e3 \t") | frozenset(map(chr, range(0x1F3FB, 0x1F400)))
_TRANSPOSE = re.compile(r"\s*+(?:\^\s*+(?:\{\s*+)?(?:T|\\top|\\intercal|\\mathsf\{T\}|\\mathrm\{T\})(?:\s*+\})?"
                        r"|\u1d40|')\Z")
_TRANSPOSE_TAIL = 32
_FLAT_GROUP = re.compile(r"\s*+(?:\[[^\[\]()]*\]|\([^\[\]()]*\))\s*+")
_QUOTED_FRACTION = re.compile(r"([\"'])\s*+([+-]?\d++(?:\.\d++)?\s*+/\s*+[+-]?\d++(?:\.\d++)?)\s*+\1")
_VALUE_EDGES = " \t*_`$"


def _after_expression_chain(value: str) -> str:
    """The text after the last ``=`` of ``a = b = value`` (the model wrote its working on the
    ANSWER line). Only an ``=`` outside brackets and quotes counts, never ``==``, ``<=``, ``>=``,
    ``!=`` or ``=>``, and not when a top-level comma or semicolon comes before it (``x = 3, y = 4``
    is two assignments, not a chain). One pass: O(len(value))."""
    depth = 0
    quote = ""
    last = -1
    separated = False
    for index, char in enumerate(value):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in _OPENERS:
            depth += 1
        elif char in _CLOSERS:
            depth -= 1
        elif depth == 0 and char in ",;":
            separated = True
        elif (depth == 0 and char == "=" and not separated and value[index - 1 : index] not in ("=", "<", ">", "!")
              and value[index + 1 : index + 2] not in ("=", ">")):
            last = index
    if last < 0 or quote or depth != 0:
        return value
    rest = value[last + 1 :].strip()
    return rest if rest.strip(_VALUE_EDGES) else value


def clean_value(value: str) -> str:
    """``value`` without what models put around a value that is no part of it.

    - pictographs after it (``42 \u2705``, ``[1, 2] \U0001f389``);
    - an expression chain before it: ``(5)(-6) - (-9)(-3) = -57`` is ``-57`` (see
      ``_after_expression_chain``: an ``=`` inside brackets or quotes, or after a comma, is not one);
    - the transpose mark of a flat vector: ``(1, 2, 3)^T`` is ``(1, 2, 3)`` (a matrix's ``^T`` is
      kept, as it changes the matrix);
    - the quotes of a quoted fraction: ``"3/4"`` is ``3/4`` (no answer key is a string that spells
      a fraction).

    Nothing is evaluated; a value that is none of these comes back as it was. O(len(value)).
    """
    end = len(value)
    while end and (value[end - 1] in _EMOJI_PARTS or unicodedata.category(value[end - 1]) == "So"):
        end -= 1
    if end < len(value) and value[:end].strip(_VALUE_EDGES):
        value = value[:end].rstrip()
    value = _after_expression_chain(value)
    core = value.strip(_VALUE_EDGES).rstrip()
    tail = len(core) - _TRANSPOSE_TAIL if len(core) > _TRANSPOSE_TAIL else 0  # the mark is short: O(1) search
    transposed = _TRANSPOSE.search(core, tail)
    if transposed is not None and _FLAT_GROUP.fullmatch(core, 0, transposed.start()):
        value = core[: transposed.start()]
    return _QUOTED_FRACTION.sub(r"\2", value)


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


_PLAIN_LINE = re.compile(r"^[\s>*_`#-]*(?P<label>(?:final\s+)?answer)[*_`\s]*:[*_`\s]*(?P<value>.*?)[\s*_`.]*$",
                         re.IGNORECASE | re.MULTILINE)


def plain_answer_text(text: str) -> str | None:
    """The last answer line's value, read the plain way, for audits that must not share the
    grader's reader (a reward-hacking watch's second opinion): a line starting with ``ANSWER:``
    (after markdown marks; lenient labels such as ``Answer:`` only when no capital one exists),
    with markdown marks and a closing period around the value removed. No fence, think-block,
    multi-line or notation handling: where those matter it reads nothing or the wrong thing, and
    the audit says it has no opinion or disagrees, which a person then reads."""
    found = [(m.group("label"), m.group("value")) for m in _PLAIN_LINE.finditer(text[:100_000])]
    capital = [value for label, value in found if label == "ANSWER"]
    values = capital or [value for _, value in found]
    return values[-1] if values and values[-1] else None

"""The action protocol shared by every family: one rule, read the same way on every turn.

    A reply with an ``ANSWER:`` line outside code fences is final and graded by that line (its
    code is not run); a reply with a complete code block and no ANSWER line is a tool turn; any
    other reply is final; on the last allowed turn the family's documented last-turn rule applies.

Details, for every family alike:

- An action may be any ``str`` (Unicode, emoji, CRLF or lone CR line ends). Only a non-string
  or one longer than the action space's ``max_length`` is a ``format_error`` by itself.
- ``<think>`` blocks are ignored, code and ANSWER lines in them included (``answers.strip_think``).
- Fences and their labels are read by ``gym_sysmath.fences`` (one alias table, whose runnable
  languages are the rows of ``gym_sysmath.sandbox.image.toolchains``: ``py``, ``c++20``, ``rs``,
  ``~~~``, a bare fence as the task's language, ...). The last complete block in a language
  the task runs is the code; blocks in another language are reported to the model, never run;
  output blocks (``text``, ``json``, ...) are prose.
- A reply that ends inside an unclosed fence (cut off by the token limit) runs nothing and is not
  graded final: the model is told its code was cut, and the turn counts. Chat-template tokens
  at the end of a reply (``<|im_end|>``, ``</s>``) are not part of it.
- CompGeom reads no ANSWER line: its answer is its code (see its docstring).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gym_sysmath.answers import find_answers, is_answer_line, strip_end_tokens, strip_think
from gym_sysmath.fences import DISPLAY, Block, find_blocks, split_lines
from gym_sysmath.spaces import CHARSET

MAX_ACTION_CHARS = 32_768
MAX_OBSERVATION_CHARS = 32_768
_CHARSET_SET = frozenset(CHARSET)


@dataclass(frozen=True)
class Reply:
    """What one action holds, read once: ANSWER values, fenced blocks, a cut-off fence.

    ``languages`` are the languages the task runs (a bare fence is the first of them).
    """

    text: str
    answers: tuple[str, ...]
    blocks: tuple[Block, ...]
    cut: Block | None
    languages: tuple[str, ...]

    @property
    def code_blocks(self) -> tuple[Block, ...]:
        return tuple(block for block in self.blocks if block.language in self.languages)

    @property
    def code(self) -> Block | None:
        """The block a tool turn runs: the last complete block in a language the task runs."""
        blocks = self.code_blocks
        return blocks[-1] if blocks else None

    @property
    def foreign(self) -> tuple[Block, ...]:
        """Complete blocks in a language the task does not run (neither its code nor output)."""
        return tuple(block for block in self.blocks
                     if block.language not in self.languages and block.language != DISPLAY)

    @property
    def empty(self) -> bool:
        return not strip_think(self.text).strip()

    def kind(self, reads_answers: bool) -> str:
        """``answer``, ``cut``, ``code``, ``foreign`` or ``final`` (see the module docstring)."""
        if reads_answers and self.answers:
            return "answer"
        if self.cut is not None:
            return "cut"
        if self.code is not None:
            return "code"
        if self.foreign:
            return "foreign"
        return "final"

    def describe(self, reads_answers: bool) -> str:
        """What was read, for ``info["detail"]``: the ANSWER values, the blocks, a cut fence."""
        parts = []
        if self.empty:
            parts.append("an empty reply")
        if reads_answers:
            if not self.answers:
                parts.append("no ANSWER line")
            elif len(set(self.answers)) == 1:
                repeat = f" (x{len(self.answers)})" if len(self.answers) > 1 else ""
                parts.append(f"ANSWER {_short(self.answers[0])}{repeat}")
            else:
                parts.append(f"{len(self.answers)} ANSWER lines: " + ", ".join(_short(v) for v in self.answers[:4]))
        for fence, count in Counter(block.fence for block in self.blocks).items():
            parts.append(f"{count} {fence} block" + ("s" if count > 1 else ""))
        if self.cut is not None:
            parts.append(f"an unclosed {self.cut.fence} fence at the end (cut off)")
        return "read " + "; ".join(parts) if parts else "read nothing"

    def notes(self) -> list[str]:
        """Lines for a tool turn's observation: blocks that did not run, and why."""
        notes = []
        ran = self.code
        if ran is not None and len(self.code_blocks) > 1:
            notes.append(f"[ran the last of {len(self.code_blocks)} {ran.fence} blocks; the others did not run]")
        if ran is not None and ran.surrogates:
            notes.append(f"[the block held {ran.surrogates} lone surrogate(s), which are not text; each ran as "
                         "U+FFFD]")
        for block in self.foreign:
            notes.append(f"[not run: the {block.fence} block; this task runs {_fences(self.languages)} blocks]")
        return notes


def _short(value: str, limit: int = 60) -> str:
    return repr(value if len(value) <= limit else value[:limit] + "...")


def _fences(languages: tuple[str, ...]) -> str:
    return " or ".join(f"```{language}" for language in languages) or "no code"


def check_action_text(action: object, max_length: int = MAX_ACTION_CHARS) -> str | None:
    """Why ``action`` cannot be read at all (not a str, too long), or None when it can."""
    if not isinstance(action, str):
        return f"the action must be a str, got {type(action).__name__}"
    if len(action) > max_length:
        return f"the action has {len(action)} characters; the limit is {max_length}"
    return None


def read_reply(text: str, languages: tuple[str, ...] = ()) -> Reply:
    """Read ``text`` once: its ANSWER values, its complete fenced blocks, a fence left open.

    Chat-template tokens at the end (a closing fence followed by ``<|im_end|>``) are not part of
    the last line, so they never leave a closed fence open."""
    lines = split_lines(strip_think(strip_end_tokens(text)))
    blocks = find_blocks(lines, languages[0] if languages else None)
    cut = blocks[-1] if blocks and blocks[-1].cut else None
    closed = tuple(block for block in blocks if not block.cut)
    return Reply(text, tuple(find_answers(text)), closed, cut, tuple(languages))


def code_comment_answer(reply: Reply) -> bool:
    """Whether a code block of ``reply`` holds what reads as an ANSWER line (one that is not read)."""
    return any(is_answer_line(line) for block in reply.blocks for line in block.code.splitlines())


def to_observation(text: str, max_length: int = MAX_OBSERVATION_CHARS) -> str:
    """Fit arbitrary text (program output included) into the observation space.

    Characters in the space's charset arrive as themselves; others (controls, emoji and other
    characters beyond it, see ``spaces.CHARSET``) become Python escapes such as ``\\x1b`` or
    ``\\U0001f600``. Overlong text keeps its head and tail.
    """
    clean = "".join(ch if ch in _CHARSET_SET else ch.encode("unicode_escape").decode("ascii") for ch in text)
    if len(clean) <= max_length:
        return clean
    longest = len(f"\n[... {len(clean)} characters cut ...]\n")  # the marker with the most digits
    cut = len(clean) - (max_length - longest)
    marker = f"\n[... {cut} characters cut ...]\n"
    head = (len(clean) - cut) * 2 // 3
    tail = len(clean) - cut - head
    return clean[:head] + marker + clean[len(clean) - tail:]

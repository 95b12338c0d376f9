"""Fenced code blocks in a reply: where they are and which language their label names.

One reader for every family, so a label means the same thing everywhere:

- A fence opens on a line of its own (any indentation) with three or more backticks or tildes,
  then an optional label: ```` ```python ````, ```` ~~~cpp ````, ```` ``` c++20 ````,
  ```` ```{.rust} ````, ```` ```python title="x.py" ```` (the first word counts), or nothing
  (a bare fence). A backtick fence whose line holds more backticks is inline code, not a fence.
- It closes on a line holding only the same character, at least as many times. A code line
  that ends with the backtick fence (``return 0;```) closes it too, as models write that.
- The opening fence's indentation is removed from the block's lines (a fence inside a list
  item keeps its Python runnable).
- A fence still open at the end of the text is *cut*: the reply was cut off (usually by the
  token limit) inside it.
- A lone surrogate (``\\ud83d``: a ``str`` may hold one, no UTF-8 text can) in a block's code
  becomes U+FFFD, the replacement character any decoder puts for what is not text, and the block
  counts it (``surrogates``): the code a sandbox gets is always encodable, for every language.

Labels go through ``FENCE_LANGUAGES``, the one alias table, which takes the labels of the languages the
sandbox runs from their rows in ``gym_sysmath.sandbox.image.toolchains``: ``py``/``python3`` are
Python, ``c++``/``c++20``/``cpp``/``cc``/``cxx``/``hpp`` are C++, ``rs`` is Rust, a file name counts by
its extension (``candidate.hpp``). Labels for output rather than code (``text``, ``json``,
``output``, ...) are ``DISPLAY``. A bare fence is the task's own language. Any other label is
a language of its own (``javascript``, ``c``, ``bash``) that a task may not take.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gym_sysmath.sandbox.image.toolchains import TOOLCHAINS

#: What a block holding output, data or notation (not a program) is read as.
DISPLAY = "display"

#: Fence label -> language: the sandbox's languages (their rows in ``toolchains``), then languages
#: no task runs, then output.
FENCE_LANGUAGES: dict[str, str] = {
    **{label: toolchain.name for toolchain in TOOLCHAINS.values() for label in toolchain.labels},
    **dict.fromkeys(("javascript", "js", "node", "mjs", "jsx"), "javascript"),
    **dict.fromkeys(("typescript", "ts", "tsx"), "typescript"),
    **dict.fromkeys(("bash", "sh", "shell", "zsh", "console", "shell-session", "sh-session"), "shell"),
    **dict.fromkeys(("text", "txt", "plaintext", "plain", "output", "stdout", "stderr", "result", "log",
                     "json", "json5", "jsonc", "markdown", "md", "latex", "tex", "math", "csv", "none",
                     "pycon", "nohighlight", "diff"), DISPLAY),
}
_EXTENSIONS = {**{extension: toolchain.name for toolchain in TOOLCHAINS.values() for extension in toolchain.extensions},
               "js": "javascript", "sh": "shell"}

_OPEN = re.compile(r"^(?P<indent>[ \t]*+)(?P<fence>`{3,}+|~{3,}+)(?P<info>.*)$")
_LABEL_NOISE = re.compile(r"^[{.]+|[}]+$")
_SURROGATE = re.compile("[\ud800-\udfff]")


def language_of(label: str, default: str | None) -> str | None:
    """The canonical language a fence label names; ``default`` for a bare fence."""
    word = label.split()[0] if label.split() else ""
    word = _LABEL_NOISE.sub("", word.split(":")[0].split(",")[0]).lower()
    if not word:
        return default
    if word in FENCE_LANGUAGES:
        return FENCE_LANGUAGES[word]
    if "." in word:
        extension = word.rsplit(".", 1)[1]
        if extension in _EXTENSIONS:
            return _EXTENSIONS[extension]
    return word


@dataclass(frozen=True)
class Block:
    """One fenced block: its raw label, the language it names (``None``: a bare fence with no
    default), its code, and whether it was still open at the end of the text (``cut``)."""

    label: str
    language: str | None
    code: str
    first_line: int
    last_line: int
    cut: bool = False
    surrogates: int = 0

    @property
    def fence(self) -> str:
        """How to name the block to a person: ```` ```python ```` or ```` ``` (bare) ````."""
        return f"```{self.label}" if self.label else "``` (bare)"


def split_lines(text: str) -> list[str]:
    """The text's lines, with CRLF and lone CR read as line ends."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def find_blocks(lines: list[str], default_language: str | None = None) -> list[Block]:
    """Every fenced block of ``lines`` (see the module docstring), in order."""
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opened = _OPEN.match(lines[i])
        if opened is None or (opened["fence"][0] == "`" and "`" in opened["info"]):
            i += 1
            continue
        fence, indent, label = opened["fence"], len(opened["indent"]), opened["info"].strip()
        body: list[str] = []
        j = i + 1
        closed = False
        while j < len(lines):
            line = lines[j]
            stripped = line.strip()
            if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                closed = True
                break
            if fence[0] == "`" and line.rstrip().endswith(fence) and not line.rstrip().endswith(fence + "`"):
                body.append(line.rstrip()[: -len(fence)])
                closed = True
                break
            body.append(line)
            j += 1
        code = "\n".join(_dedent(line, indent) for line in body)
        if body:
            code += "\n"
        code, surrogates = _SURROGATE.subn("\ufffd", code)
        blocks.append(Block(label, language_of(label, default_language), code, i, min(j, len(lines) - 1),
                            cut=not closed, surrogates=surrogates))
        i = j + 1
    return blocks


def _dedent(line: str, indent: int) -> str:
    removable = len(line) - len(line.lstrip(" \t"))
    return line[min(indent, removable):]

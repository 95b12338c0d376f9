"""The action protocol shared by every family.

An action is text. A fenced code block (```python, ```cpp, ```rust) makes it a code action;
anything else is a final action, whose ``ANSWER: <value>`` line (if any) a family reads.
Text outside the action space (non-ASCII, too long, empty) is rejected before parsing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gym_sysmath.spaces import CHARSET

MAX_ACTION_CHARS = 32_768
MAX_OBSERVATION_CHARS = 32_768

# Possessive quantifiers keep a long run of spaces after ``` linear to reject.
_FENCE = re.compile(r"```[ \t]*+([A-Za-z0-9_+-]*+)[ \t]*+\n(.*?)```", re.DOTALL)
LANGUAGE_ALIASES = {
    "python": "python", "py": "python", "python3": "python",
    "cpp": "cpp", "c++": "cpp", "cc": "cpp", "cxx": "cpp",
    "rust": "rust", "rs": "rust",
}


@dataclass(frozen=True)
class CodeAction:
    language: str
    code: str
    text: str


@dataclass(frozen=True)
class FinalAction:
    text: str


@dataclass(frozen=True)
class InvalidAction:
    reason: str


Action = CodeAction | FinalAction | InvalidAction


def check_action_text(action: object, max_length: int = MAX_ACTION_CHARS) -> str | None:
    """Why ``action`` is outside the action space, or None when it is inside."""
    if not isinstance(action, str):
        return f"the action must be a str, got {type(action).__name__}"
    if not action.strip():
        return "the action is empty"
    if len(action) > max_length:
        return f"the action has {len(action)} characters; the limit is {max_length}"
    bad = next((ch for ch in action if ch not in _CHARSET_SET), None)
    if bad is not None:
        return f"the action contains {bad!r}, outside printable ASCII"
    return None


_CHARSET_SET = frozenset(CHARSET)


def parse_action(action: object, max_length: int = MAX_ACTION_CHARS) -> Action:
    """Classify an action: the last fenced block in a known language makes it a code action."""
    problem = check_action_text(action, max_length)
    if problem:
        return InvalidAction(problem)
    assert isinstance(action, str)
    blocks = [(LANGUAGE_ALIASES.get(tag.lower()), body) for tag, body in _FENCE.findall(action)]
    known = [(language, body) for language, body in blocks if language]
    if known:
        language, body = known[-1]
        return CodeAction(language=language, code=body, text=action)
    return FinalAction(text=action)


def to_observation(text: str, max_length: int = MAX_OBSERVATION_CHARS) -> str:
    """Fit arbitrary text (program output included) into the observation space.

    Characters outside the charset become escapes; overlong text keeps its head and tail.
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

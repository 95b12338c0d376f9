"""Text bound for a terminal or a log: control characters escaped, so nothing an agent or a
program wrote can move the cursor, retitle the window, clear the screen or forge a log line.

Newlines and tabs stay as they are; every other C0 and C1 control character, DEL, the Unicode
line and paragraph separators, and lone surrogates (a ``str`` may hold one; no encoder can print
it) become a visible ``\\x..``/``\\u....`` escape.
"""

from __future__ import annotations

import re

_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def escape_controls(text: str) -> str:
    """``text`` with its control characters escaped (``\\n`` and ``\\t`` kept)."""
    return _CONTROLS.sub(_escape, text)

"""The text spaces of every env, and a fix for Text observations in shared memory.

The charset (``CHARSET``) is printable ASCII with tab, newline and carriage return, plus the
Unicode that programs, compilers and mathematical prose in these families print: Latin-1 and
Latin Extended, Greek, Cyrillic, the symbol blocks U+2000-U+2BFF (punctuation such as g++'s
quotes, super- and subscripts, arrows, mathematical operators, box drawing for sympy's pretty
printer), CJK symbols and punctuation, full-width ASCII and U+FFFD: 4,095 characters. Control and
invisible format characters (bidi overrides, zero-width spaces) are left out, so they arrive
escaped and visible.

Why not all of the BMP (63,392 usable characters)? Gymnasium's ``Text`` keeps a per-instance
index of its charset: measured on Gymnasium 1.4, the BMP costs 11 MB and 0.14 s per space (two per
env, and one more per env in a batched space), against 0.7 MB and 8 ms for this set. The
shared-memory cost does not depend on the charset: ``Text`` flattens to one int32 per character,
so an observation buffer is 4 bytes x ``max_length`` (128 KiB) per env either way. Characters
outside the charset (emoji, CJK ideographs, other scripts) arrive as Python escapes
(``actions.to_observation``). Actions are not limited to the charset: an action may be any
``str`` (the charset only shapes what ``action_space.sample()`` draws).

Gymnasium's ``AsyncVectorEnv(shared_memory=True)`` reads the shared buffer once, at
construction, and for ``Text`` that read makes a tuple of strings: a snapshot, not a view, so
every later observation comes back as the first (empty) one. Our ``Text`` subclass reads the
buffer lazily instead: a live view whose deepcopy (what the vector env returns) decodes the
current contents.
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import read_from_shared_memory

_ASCII = "".join(sorted(set(string.printable) - {"\x0b", "\x0c"}))
_UNICODE_RANGES = ((0x00A0, 0x024F), (0x0370, 0x03FF), (0x0400, 0x04FF), (0x2000, 0x2BFF), (0x3000, 0x303F),
                   (0xFF01, 0xFF5E), (0xFFFD, 0xFFFD))
#: Zero-width, bidi and other invisible format characters inside those ranges: escaped instead.
_INVISIBLE = {*range(0x200B, 0x2010), *range(0x2028, 0x202F), *range(0x2060, 0x2070)}

#: The characters of every text space, as an ordered string so that every process agrees on the
#: character indices (vector envs flatten Text by index). See the module docstring for the choice.
CHARSET = _ASCII + "".join(chr(code) for low, high in _UNICODE_RANGES for code in range(low, high + 1)
                           if code not in _INVISIBLE)


class SysmathText(spaces.Text):
    """``gymnasium.spaces.Text`` whose shared-memory reads stay current (and whose repr is short)."""

    def __repr__(self) -> str:
        return f"SysmathText({self.min_length}, {self.max_length}, charset=<{len(self.character_list)} characters>)"


def text_space(max_length: int) -> SysmathText:
    return SysmathText(max_length=max_length, min_length=0, charset=CHARSET)


class SharedTextView(Sequence):
    """The strings currently in a vector env's shared Text buffer, decoded on access."""

    def __init__(self, space: spaces.Text, shared_memory, n: int):
        self.space = space
        self.shared_memory = shared_memory
        self.n = n

    def _rows(self) -> np.ndarray:
        return np.frombuffer(self.shared_memory.get_obj(), dtype=np.int32).reshape((self.n, self.space.max_length))

    def _decode(self, row: np.ndarray) -> str:
        chars = self.space.character_list
        return "".join(chars[index] for index in row if index < len(chars))

    def __getitem__(self, index):
        rows = self._rows()
        if isinstance(index, slice):
            return tuple(self._decode(row) for row in rows[index])
        return self._decode(rows[index])

    def __len__(self) -> int:
        return self.n

    def __deepcopy__(self, memo) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other) -> bool:
        return tuple(self) == tuple(other) if isinstance(other, Sequence) else NotImplemented

    def __repr__(self) -> str:
        return repr(tuple(self))


@read_from_shared_memory.register(SysmathText)
def _read_text_view(space: SysmathText, shared_memory, n: int = 1) -> SharedTextView:
    return SharedTextView(space, shared_memory, n)

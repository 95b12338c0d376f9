"""The text spaces of every env, and a fix for Text observations in shared memory.

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

#: Printable ASCII plus newline, tab and carriage return, as an ordered string so that every
#: process agrees on the character indices (vector envs flatten Text by index).
CHARSET = "".join(sorted(set(string.printable) - {"\x0b", "\x0c"}))


class SysmathText(spaces.Text):
    """``gymnasium.spaces.Text`` whose shared-memory reads stay current."""


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

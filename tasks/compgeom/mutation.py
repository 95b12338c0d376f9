"""A named one-bug edit of a known-good fixture, per language (shared by the bug and tolerance lists)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Edit = tuple[str, str]

#: The include a C++ edit that calls ``std::abs`` or ``std::sqrt`` adds (the fixtures include only <algorithm>).
CMATH: Edit = ("#include <algorithm>\n", "#include <algorithm>\n#include <cmath>\n")


@dataclass(frozen=True)
class Mutation:
    """A named bug: per language, (old, new) replacements applied to the good fixture."""

    name: str
    bug: str
    edits: Mapping[str, tuple[Edit, ...]]


def apply_edits(text: str, mutation: Mutation, language: str, where: str) -> str:
    """``text`` with the mutation's edits for ``language``; each must match exactly once."""
    for old, new in mutation.edits[language]:
        if text.count(old) != 1:
            raise ValueError(f"{where}/{language}: mutation {mutation.name!r} edit {old!r} "
                             f"matches {text.count(old)} times in the good fixture, not once")
        text = text.replace(old, new)
    return text

"""Filter arguments (``categories``, ``topics``, ``primitives``, ``languages``): a list of names,
read once here so that every family refuses the same mistakes with the same words. A leaf
module (standard library only), so task packages check their filters without the env base."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any, overload


@overload
def filter_names(name: str, value: None) -> None: ...
@overload
def filter_names(name: str, value: Iterable[str]) -> tuple[str, ...]: ...
def filter_names(name: str, value: Any) -> tuple[str, ...] | None:
    """A filter argument as a tuple of names (``None`` stays ``None``: no filter).

    A bare string is refused: ``tuple("floats")`` is six one-letter names, which would match
    nothing or, worse, something else, without a word.
    """
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError(f"{name} must be a list of names, not the string {value!r}: write {name}=[{value!r}]")
    try:
        names = tuple(value)
    except TypeError:
        raise TypeError(f"{name} must be a list of names, got {type(value).__name__}") from None
    if not all(isinstance(item, str) for item in names):
        raise TypeError(f"{name} must be a list of names (strings), got {list(names)!r}")
    return names


def known_names(name: str, value: Any, known: Sequence[str]) -> tuple[str, ...] | None:
    """``filter_names``, and then every name one of ``known`` and at least one of them: an empty
    filter would draw from nothing, and an unknown name (a typo) would silently match nothing."""
    names = filter_names(name, value)
    if names is None:
        return None
    if not names:
        raise ValueError(f"{name} is empty: name at least one of {', '.join(known)}, or pass None for all")
    unknown = sorted(set(names) - set(known))
    if unknown:
        guesses = {wrong: difflib.get_close_matches(wrong, known, 1) for wrong in unknown}
        hints = "; ".join(f"{wrong!r}: did you mean {close[0]!r}?" for wrong, close in guesses.items() if close)
        hint = f" ({hints})" if hints else ""
        raise ValueError(f"unknown {name} {unknown}{hint}; choose from {', '.join(known)}")
    return names

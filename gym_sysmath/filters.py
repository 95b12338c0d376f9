"""Filter arguments (``categories``, ``topics``, ``primitives``, ``languages``: a list of names;
``difficulty``: one name), read once here so that every family refuses the same mistakes with the
same words, and ``TaskFilter``, a family's declaration of one filter (``SysmathEnv.filters``). A
leaf module (standard library only), so task packages check their filters without the env base."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
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


def one_name(name: str, value: Any, known: Sequence[str]) -> str:
    """A one-name filter (``difficulty="hard"``): ``value`` itself when it is one of ``known``,
    otherwise a ``ValueError`` naming them (a list is refused too: the filter takes one name)."""
    if isinstance(value, str) and value in known:
        return value
    close = difflib.get_close_matches(value, known, 1) if isinstance(value, str) else []
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"{name} must be one of {tuple(known)}, not {value!r}{hint}")


@dataclass(frozen=True)
class TaskFilter:
    """A filter a family's env takes: the ``gym.make`` argument ``argument`` keeps the eval tasks
    whose metadata ``key`` (the ``info`` field of the same name) is one of the names it gives, out
    of ``choices``. ``many``: the argument is a list of names (``categories=["vm"]``), else one
    name (``difficulty="hard"``). ``option`` (default: the argument's own name) is the reset
    option that narrows the filter for one reset, taking a list of names or one name as
    ``option_many`` says (default: as the argument).

    ``unset`` (default: all of ``choices``) is what an env keeps when neither its argument nor
    the reset option names any: a level served only when asked for (``difficulty="starter"``)
    stays out of an unfiltered env's eval set.

    ``SysmathEnv`` reads every filter of a family (its ``filters``) in one place: the eval tasks
    the env serves (``task_ids``, and so ``export`` and ``eval``), ``reset``'s draws and the
    ``task_id`` it admits, and the train split's draws all follow the same filters."""

    argument: str
    key: str
    choices: tuple[str, ...]
    many: bool = True
    option: str = ""
    option_many: bool | None = None
    unset: tuple[str, ...] | None = None

    @property
    def option_name(self) -> str:
        return self.option or self.argument

    def read(self, value: Any, *, option: bool = False) -> tuple[str, ...] | None:
        """The names ``value`` allows (``None``: no filter), checked against ``choices``: a bare
        string for a list, an empty list or an unknown name is refused, saying what to write."""
        if value is None:
            return None
        name = self.option_name if option else self.argument
        many = self.many if not option or self.option_many is None else self.option_many
        if many:
            return known_names(name, value, self.choices)
        return (one_name(name, value, self.choices),)

    def describe(self, names: Sequence[str], *, option: bool = False) -> str:
        """``names`` as the argument (or reset option) that gives them: ``difficulty='hard'``."""
        many = self.many if not option or self.option_many is None else self.option_many
        name = self.option_name if option else self.argument
        return f"{name}={list(names)!r}" if many or len(names) != 1 else f"{name}={names[0]!r}"

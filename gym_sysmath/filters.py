"""Filter arguments (``categories``, ``topics``, ``primitives``, ``languages``: a list of names;
``difficulty``: one name), read once here so that every family refuses the same mistakes with the
same words, and ``TaskFilter``, a family's declaration of one filter (``SysmathEnv.filters``).

One vocabulary: a filter has one name, its ``gym.make`` argument, and the reset option of that
name takes the same values (``primitives=["line2_line2"]`` in both places). Every unknown name,
a filter's value or a reset option's key alike, is refused by ``unknown_name``, with one wording
and one "did you mean". A leaf module (standard library only), so task packages check their
filters without the env base."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

#: A suggestion needs difflib's own similarity (its ``get_close_matches`` default) or, for the
#: short names difflib misses (``vn`` for ``vm``), this few edits per character of the name.
CLOSE_RATIO = 0.6
EDITS_PER_CHARACTER = 1 / 4


def edit_distance(first: str, second: str) -> int:
    """Insertions, deletions, substitutions and swaps of two neighbours that turn ``first`` into
    ``second`` (optimal string alignment): a typo is one or two of them."""
    previous2: list[int] = []
    previous = list(range(len(second) + 1))
    for i, char in enumerate(first, 1):
        current = [i]
        for j, other in enumerate(second, 1):
            cost = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != other))
            if i > 1 and j > 1 and char == second[j - 2] and first[i - 2] == other:
                cost = min(cost, previous2[j - 2] + 1)
            current.append(cost)
        previous2, previous = previous, current
    return previous[-1]


#: A value longer than this is no typo of a name: no suggestion is looked for (the edit distance is
#: quadratic, and a reset option's value can be a megabyte from a remote client).
LONGEST_TYPO = 100
#: How much of a refused value an error message repeats.
SHOWN_CHARACTERS = 80


def nearest(value: str, known: Sequence[str]) -> str | None:
    """The name of ``known`` that ``value`` most likely misspells, or ``None`` when none is close:
    fewest edits (case ignored), then difflib's similarity, then ``known``'s order."""
    if len(value) > LONGEST_TYPO:
        return None
    folded = value.casefold()
    allowance = max(1, int(len(value) * EDITS_PER_CHARACTER))
    ranked = []
    for index, name in enumerate(known):
        if (abs(len(name) - len(value)) > allowance
                and difflib.SequenceMatcher(None, value, name).real_quick_ratio() < CLOSE_RATIO):
            continue  # neither test below can pass: too far apart in length alone
        edits = edit_distance(folded, name.casefold())
        ratio = difflib.SequenceMatcher(None, value, name).ratio()
        if edits <= allowance or ratio >= CLOSE_RATIO:
            ranked.append((edits, -ratio, index, name))
    return min(ranked)[-1] if ranked else None


def unknown_name(noun: str, value: object, known: Sequence[str], *, where: str = "",
                 listed_in: str = "") -> ValueError:
    """The one refusal of a name that is not one of ``known``, wherever it was given (a filter's
    value at ``gym.make`` or in a reset option, a reset option's key, a task id): ``where:
    unknown primitive 'segment2_segmnt2'; did you mean 'segment2_segment2'? (choose from ...)``.
    ``listed_in``: where to read the names instead, when they are too many to list."""
    close = nearest(value, known) if isinstance(value, str) else None
    hint = f"; did you mean {close!r}?" if close is not None else ""
    prefix = f"{where}: " if where else ""
    choices = f"see {listed_in}" if listed_in else f"choose from {', '.join(known)}"
    return ValueError(f"{prefix}unknown {noun} {shown(value)}{hint} ({choices})")


def shown(value: object) -> str:
    """``repr(value)``, cut to ``SHOWN_CHARACTERS`` with the length it had: an error message
    names a refused value, it does not echo a megabyte of it."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARACTERS else f"{text[:SHOWN_CHARACTERS]}... ({len(text):,} characters)"


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
    if isinstance(value, Mapping):  # tuple({"vm": False}) is ("vm",): a dict is no list of names
        raise TypeError(f"{name} must be a list of names, got {type(value).__name__}")
    try:
        names = tuple(value)
    except TypeError:
        raise TypeError(f"{name} must be a list of names, got {type(value).__name__}") from None
    if not all(isinstance(item, str) for item in names):
        raise TypeError(f"{name} must be a list of names (strings), got {list(names)!r}")
    return names


def known_names(name: str, value: Any, known: Sequence[str], *, noun: str | None = None) -> tuple[str, ...] | None:
    """``filter_names``, and then every name one of ``known`` and at least one of them: an empty
    filter would draw from nothing, and an unknown name (a typo) would silently match nothing.
    ``noun``: what one name is (``category`` for ``categories``), for ``unknown_name``."""
    names = filter_names(name, value)
    if names is None:
        return None
    if not names:
        raise ValueError(f"{name} is empty: name at least one of {', '.join(known)}, or pass None for all")
    for item in names:
        if item not in known:
            raise unknown_name(noun or name, item, known, where=name)
    return names


def known_name(name: str, value: Any, known: Sequence[str], *, noun: str | None = None) -> str:
    """A one-name filter (``difficulty="hard"``): ``value`` itself when it is one of ``known``,
    otherwise ``unknown_name``'s refusal (a list is refused too: the filter takes one name)."""
    if isinstance(value, str) and value in known:
        return value
    raise unknown_name(noun or name, value, known, where=name)


@dataclass(frozen=True)
class TaskFilter:
    """A filter a family's env takes: the ``gym.make`` argument ``argument`` keeps the eval tasks
    whose metadata ``key`` (the ``info`` field of the same name, and the word for one of its
    names in errors) is one of the names it gives, out of ``choices``. ``many``: the argument is
    a list of names (``categories=["vm"]``), else one name (``difficulty="hard"``). The reset
    option of the same name takes the same values and narrows the filter for one reset.

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
    unset: tuple[str, ...] | None = None

    def read(self, value: Any) -> tuple[str, ...] | None:
        """The names ``value`` allows (``None``: no filter), checked against ``choices``: a bare
        string for a list, an empty list or an unknown name is refused, saying what to write."""
        if value is None:
            return None
        if self.many:
            return known_names(self.argument, value, self.choices, noun=self.key)
        return (known_name(self.argument, value, self.choices, noun=self.key),)

    def describe(self, names: Sequence[str]) -> str:
        """``names`` as the argument (or reset option) that gives them: ``difficulty='hard'``."""
        return f"{self.argument}={list(names)!r}" if self.many or len(names) != 1 else f"{self.argument}={names[0]!r}"

"""Run a Python solution in this process, case by case, the way the generated harness calls it.

For known code only (the good fixtures and their generated variants): the builder uses it to
check that every case is decided exactly in double precision by the good solution, and that
every tolerance candidate fails some hidden case at every tolerance size it tries. Agent code
never runs here; it runs in the sandbox.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterable
from functools import cache
from types import ModuleType
from typing import Any

from .case import Case
from .grading import _check
from .layout import fixture_path, good_source
from .primitives import BY_NAME

_counter = itertools.count()


def load_source(source: str, label: str) -> ModuleType:
    """The source executed as a fresh module (registered while its classes are made)."""
    name = f"_compgeom_inprocess_{next(_counter)}"
    module = ModuleType(name)
    module.__file__ = label
    sys.modules[name] = module
    try:
        exec(compile(source, label, "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module


@cache
def good_module(primitive: str) -> ModuleType:
    """The good Python fixture loaded once: the builder runs it on every case it draws."""
    return load_source(good_source(primitive, "python"), str(fixture_path(primitive, "good.py")))


def record(module: ModuleType, case: Case, number: Callable[[Any], float] = float
           ) -> tuple[str, list[list[float]]] | None:
    """(kind, lists) as the harness would print them for ``case``, or None if it raised.
    ``number`` makes each input number (``exactness.Tracked`` checks the arithmetic on them)."""
    primitive = BY_NAME[case.primitive]
    args: list[Any] = []
    for arg, shape in primitive.args:
        fields = case.input[arg]
        if primitive.is_box:
            values = {f: [number(x) for x in fields[f]] for f in shape.fields}
        else:
            vector = getattr(module, f"Vec{shape.dim}")
            values = {f: vector(*(number(x) for x in fields[f])) for f in shape.fields}
        args.append(getattr(module, shape.type_name)(**values))
    try:
        result = getattr(module, primitive.name)(*args)
        if primitive.is_box:
            return result.kind.value, [[float(x) for x in result.overlap.min], [float(x) for x in result.overlap.max]]
        lists = [[float(x) for entry in getattr(result, name) for x in (entry if width > 1 else [entry])]
                 for name, width in primitive.family.lists]
        return result.kind.value, lists
    except Exception:
        return None


def failure(module: ModuleType, case: Case) -> str | None:
    """Why ``module`` fails ``case`` (as the host would grade it), or None when it passes."""
    got = record(module, case)
    if got is None:
        return "raised"
    return _check(case, *got)


def first_failure(module: ModuleType, cases: Iterable[Case]) -> Case | None:
    """The first case ``module`` fails, or None when it passes them all."""
    return next((case for case in cases if failure(module, case) is not None), None)

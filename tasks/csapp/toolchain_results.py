"""What the real toolchain did, read back from the shipped ``compiled.json``.

The machine and linking templates register here how their instances become programs
(``register``), and their keys are these recorded results (``outputs``), never a compile at
reset. The command that rebuilds the file, ``python -m gym_sysmath.tasks.csapp.compiled``, needs
every template; this lookup needs none, so the templates can import it.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from gym_sysmath.exact import dumps_exact, loads_exact

from .template import BuildError
from .toolchain import Outputs, Program

if TYPE_CHECKING:
    from .template import Params

DATA_FILE = "compiled.json"
FORMAT = "csapp-compiled/1"
GENERATED_BY = "python -m gym_sysmath.tasks.csapp.compiled"


class NotCompiledError(BuildError):
    """A program this data file has no record of: rebuild the file."""


@dataclass(frozen=True)
class CompiledFamily:
    """How a template's instances become programs, and how fresh pool candidates are drawn."""

    program: Callable[[Params], Program]
    draw: Callable[[np.random.Generator], Params]


#: Filled by the template modules (``assembly``, ``linking``) as they are imported.
FAMILIES: dict[str, CompiledFamily] = {}
_override: dict[str, dict[str, Any]] | None = None


def register(name: str, program: Callable[[Params], Program],
             draw: Callable[[np.random.Generator], Params]) -> None:
    FAMILIES[name] = CompiledFamily(program, draw)


@functools.cache
def _shipped() -> dict[str, Any]:
    resource = resources.files("gym_sysmath.tasks.csapp").joinpath(DATA_FILE)
    try:
        document = loads_exact(resource.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"programs": {}, "pools": {}}
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"{DATA_FILE}: not a {FORMAT} file; run {GENERATED_BY}")
    return document


def outputs(program: Program) -> Outputs:
    """The recorded result of ``program``; ``NotCompiledError`` when the file lacks it."""
    records = _override if _override is not None else _shipped()["programs"]
    record = records.get(program.key)
    if record is None:
        raise NotCompiledError(f"program {program.key} is not in {DATA_FILE}; run {GENERATED_BY}")
    return Outputs.from_record(record)


def pool(name: str) -> list[Params]:
    """The train pool of template ``name`` (instances whose programs the file holds)."""
    return _shipped()["pools"].get(name, [])


def pool_sampler(name: str) -> Callable[[np.random.Generator], Params]:
    """A ``Template.sample`` that draws from the shipped pool (and, while the pool is being
    built and is still empty, from the template's fresh draws)."""

    def sample(rng: np.random.Generator) -> Params:
        instances = pool(name)
        if not instances or _override is not None:
            return FAMILIES[name].draw(rng)
        return loads_exact(dumps_exact(instances[int(rng.integers(len(instances)))]))

    return sample


@contextlib.contextmanager
def recorded(records: dict[str, dict[str, Any]]) -> Iterator[None]:
    """Read results from ``records`` instead of the shipped file (while building it)."""
    global _override
    previous, _override = _override, records
    try:
        yield
    finally:
        _override = previous

"""What the real toolchain did for every machine and linking task: the shipped ``compiled.json``.

    python -m gym_sysmath.tasks.csapp.compiled           # compile in the sandbox, write compiled.json
    python -m gym_sysmath.tasks.csapp.compiled --check   # compile again, exit 1 if the file differs

A machine task shows the assembly gcc emitted and is keyed by running it; a linking task is keyed
by building its files with gcc/ld and running the result. Both happen in the sandbox image at
build time, never at reset: the env only reads this file. Besides the eval instances the file
holds a train pool per template (``POOL_SIZE`` instances drawn from a generator seeded by the
template's name and kept when their trap holds), from which the train split draws.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gym_sysmath.exact import dumps_exact, loads_exact

from ..generated import check_current
from .catalog import EVAL_SET, TEMPLATES
from .template import BuildError, instantiate
from .toolchain import Program, result_record, run_programs

# The lookup the templates read lives in ``toolchain_results`` (this command needs every
# template, so the templates cannot import it); its names stay importable from here.
from .toolchain_results import (
    DATA_FILE,
    FAMILIES,
    FORMAT,
    GENERATED_BY,
    CompiledFamily,
    NotCompiledError,
    outputs,
    pool,
    pool_sampler,
    recorded,
    register,
)

if TYPE_CHECKING:
    from .template import Params

__all__ = [
    "DATA_FILE",
    "FAMILIES",
    "FORMAT",
    "GENERATED_BY",
    "POOL_CANDIDATES",
    "POOL_SIZE",
    "SOURCE_FILE",
    "BuildError",
    "CompiledFamily",
    "NotCompiledError",
    "build_document",
    "document_from",
    "main",
    "outputs",
    "pool",
    "pool_sampler",
    "programs_to_build",
    "recorded",
    "register",
    "render_document",
]

POOL_SIZE = 32
POOL_CANDIDATES = 44
SOURCE_FILE = Path(__file__).with_name(DATA_FILE)


def _candidates(name: str) -> list[Params]:
    seed = int.from_bytes(hashlib.sha256(f"csapp-compiled-pool/{name}".encode()).digest()[:8], "little")
    rng = np.random.default_rng(seed)
    return [FAMILIES[name].draw(rng) for _ in range(POOL_CANDIDATES)]


def _instances() -> tuple[list[tuple[str, str, Params]], dict[str, list[Params]]]:
    """The eval instances of the compiled templates, and each template's pool candidates."""
    evals = [(task_id, name, params) for task_id, name, params in EVAL_SET if name in FAMILIES]
    return evals, {name: _candidates(name) for name in sorted(FAMILIES)}


def programs_to_build() -> list[Program]:
    """Every program the file records: the eval instances' and the pool candidates', by key."""
    evals, candidates = _instances()
    programs = {FAMILIES[name].program(params).key: FAMILIES[name].program(params) for _, name, params in evals}
    for name, drawn in candidates.items():
        programs.update((FAMILIES[name].program(p).key, FAMILIES[name].program(p)) for p in drawn)
    return [programs[key] for key in sorted(programs)]


def build_document(lease: Any = None) -> dict[str, Any]:
    """Compile and run every eval instance and pool candidate in the sandbox (``lease``, or a
    fresh one) and make the file's document from what they did."""
    programs = programs_to_build()
    records = {p.key: result_record(r) for p, r in zip(programs, run_programs(programs, lease), strict=True)}
    return document_from(records)


def document_from(records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Keep the pool candidates whose trap holds. Raises ``BuildError`` when an eval instance
    fails its trap or a template keeps too few candidates."""
    evals, candidates = _instances()
    pools: dict[str, list[Params]] = {}
    used: set[str] = set()
    with recorded(records):
        for task_id, name, params in evals:
            instantiate(TEMPLATES[name], params, task_id)  # raises on a failed trap
            used.add(FAMILIES[name].program(params).key)
        for name, drawn in candidates.items():
            kept: list[Params] = []
            for i, params in enumerate(drawn):
                if len(kept) == POOL_SIZE:
                    break
                try:
                    instantiate(TEMPLATES[name], params, f"pool/{name}/{i}")
                except BuildError:
                    continue
                kept.append(params)
                used.add(FAMILIES[name].program(params).key)
            if len(kept) < POOL_SIZE // 2:
                raise BuildError(f"{name}: only {len(kept)} of {POOL_CANDIDATES} pool candidates show the trap")
            pools[name] = kept
    return {"generated_by": GENERATED_BY, "format": FORMAT,
            "note": "results of the sandbox image's gcc/ld, keyed by Program.key; pools: train instances",
            "count": len(used), "programs": {k: records[k] for k in sorted(used)}, "pools": pools}


def render_document(document: Mapping[str, Any]) -> str:
    """One program or pool per line, so a rebuild's diff is readable."""
    lines = ["{"]
    for key in ("generated_by", "format", "note", "count"):
        lines.append(f"  {json.dumps(key)}: {json.dumps(document[key])},")
    programs = list(document["programs"].items())
    lines.append('  "programs": {')
    lines += [f"    {json.dumps(k)}: {dumps_exact(v)}{',' * (i < len(programs) - 1)}"
              for i, (k, v) in enumerate(programs)]
    lines.append("  },")
    pools = list(document["pools"].items())
    lines.append('  "pools": {')
    lines += [f"    {json.dumps(k)}: {dumps_exact(v)}{',' * (i < len(pools) - 1)}" for i, (k, v) in enumerate(pools)]
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=GENERATED_BY, description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a fresh build differs from the file")
    parser.add_argument("--output", type=Path, default=SOURCE_FILE)
    args = parser.parse_args(argv)
    text = render_document(build_document())
    if args.check:
        return check_current(args.output, text, GENERATED_BY)
    args.output.write_text(text, encoding="utf-8")
    document = loads_exact(text)
    print(f"wrote {document['count']} programs and {sum(map(len, document['pools'].values()))} pool "
          f"instances to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

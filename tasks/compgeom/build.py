"""Generate, check and verify every CompGeom file.

    python -m gym_sysmath.tasks.compgeom.build            # write cases, harnesses, starters, contracts
    python -m gym_sysmath.tasks.compgeom.build --check    # exit 1 if any generated file is stale or stray
    python -m gym_sysmath.tasks.compgeom.build --verify   # compile and run all fixtures with the host toolchains
    python -m gym_sysmath.tasks.compgeom.build --fixtures DIR  # write the bad fixtures under DIR, to read

The bad fixtures (the good ones plus one bug each, ``fixtures.py``) are made in memory wherever
they are run, never committed; the build still makes every one, so a bug edit that no longer
applies fails it.

The build fails when the corpus is not trustworthy: an id used twice, a public input repeated in
the hidden set, a branch of a reference that the hidden cases never reach, a case that double
precision does not decide exactly (``exactness.py``, and the good Python solution run on it), a
tolerance candidate that passes every hidden case at some size (``tolerances.py``), a rewrite
candidate (equal in real arithmetic, rounded differently in double) that passes every hidden
case (``rewrites.py``), an input coordinate outside the range the contracts state
(``rounding.out_of_range``), or a bug edit that does not apply exactly once to its good fixture.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .cases import COMMAND, REACHABLE, VISIBILITIES, build_cases, exact_case, render_case_file
from .fixtures import bad_sources, check_fixtures
from .languages import LANGUAGES
from .layout import ROOT, case_path, contract_path, good_source, harness_path, starter_path
from .primitives import PRIMITIVES
from .render import contract_markdown, harness_source, starter_source
from .rewrites import uncaught as uncaught_rewrites
from .rounding import coordinates, out_of_range
from .runner import run_local
from .tolerances import uncaught

GENERATED_DIRS = ("cases", "harness", "starter")


class CorpusCheckError(RuntimeError):
    """A generated corpus that fails one of the build's checks: it must not be written."""


@functools.cache
def checked_cases(primitive: str) -> dict:
    """``build_cases(primitive)`` once it passes every check below (cached: the checks run the
    good solution and every tolerance candidate on the corpus)."""
    cases = build_cases(primitive)
    _check_corpus(primitive, cases)
    return cases


def _check_corpus(primitive: str, cases: dict) -> None:
    ids = [c.id for v in VISIBILITIES for c in cases[v]]
    if len(set(ids)) != len(ids):
        raise CorpusCheckError(f"{primitive}: duplicate case ids")
    hidden = {c.branch for c in cases["hidden"]}
    if hidden != REACHABLE[primitive]:
        raise CorpusCheckError(f"{primitive}: hidden cases miss branches {sorted(REACHABLE[primitive] - hidden)} "
                         f"or reach unknown ones {sorted(hidden - REACHABLE[primitive])}")
    inexact = [c.id for v in VISIBILITIES for c in cases[v] if not exact_case(c)]
    if inexact:
        raise CorpusCheckError(f"{primitive}: double precision does not decide these cases exactly: {inexact[:5]}")
    passing = uncaught(primitive, good_source(primitive, "python"), cases["hidden"])
    if passing:
        raise CorpusCheckError(f"{primitive}: tolerance candidates pass every hidden case: {passing[:5]}")
    passing = uncaught_rewrites(primitive, good_source(primitive, "python"), cases["hidden"])
    if passing:
        raise CorpusCheckError(f"{primitive}: rewrite candidates pass every hidden case: {passing[:5]}")
    wide = [c.id for v in VISIBILITIES for c in cases[v] if any(out_of_range(x) for x in coordinates(c.input))]
    if wide:
        raise CorpusCheckError(f"{primitive}: input coordinates outside the contracts' range: {wide[:5]}")


def generated_files() -> dict[Path, str]:
    """Every committed generated path and its expected text."""
    out: dict[Path, str] = {}
    for primitive in PRIMITIVES:
        cases = checked_cases(primitive)
        for visibility in VISIBILITIES:
            out[case_path(primitive, visibility)] = render_case_file(primitive, visibility, cases[visibility])
        out[contract_path(primitive)] = contract_markdown(primitive)
        for language in LANGUAGES:
            out[starter_path(primitive, language)] = starter_source(primitive, language)
            out[harness_path(primitive, language)] = harness_source(primitive, language)
    return out


def bad_fixture_files(root: Path) -> dict[Path, str]:
    """Every bad fixture at ``root/<primitive>/fixtures/bad_<bug>.<ext>`` (the layout they had
    when committed), made from the good fixtures; raises if a bug edit does not apply once."""
    return {root / primitive / "fixtures" / name: text for primitive in PRIMITIVES for language in LANGUAGES
            for name, text in bad_sources(primitive, language).items()}


def _stray(expected: dict[Path, str]) -> list[Path]:
    """Files in generated places that the build would not write: a renamed bug's output, or a
    bad fixture (they are made on demand, never kept in the source tree)."""
    found = []
    for primitive in PRIMITIVES:
        for sub in GENERATED_DIRS:
            found += [p for p in (ROOT / primitive / sub).glob("*") if p.is_file()]
        found += list((ROOT / primitive / "fixtures").glob("bad_*"))
    return sorted(p for p in found if p not in expected)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=(__doc__ or "").split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if a generated file differs from a fresh build")
    mode.add_argument("--verify", action="store_true", help="good fixtures pass, bad ones fail, starters score 0")
    mode.add_argument("--fixtures", type=Path, metavar="DIR",
                      help="write every bad fixture under DIR/<primitive>/fixtures/ (they are never committed)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="parallel compile jobs (--verify)")
    args = parser.parse_args(argv)

    if args.verify:
        started = time.monotonic()
        report = check_fixtures(run_local, max_workers=args.workers)
        print("\n".join(report.lines()))
        print(f"{len(report.results)} jobs in {time.monotonic() - started:.1f} s")
        return 0 if report.ok else 1

    if args.fixtures is not None:
        written = bad_fixture_files(args.fixtures)
        for path, text in written.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        print(f"wrote {len(written)} bad fixtures under {args.fixtures}")
        return 0

    expected = generated_files()
    bad_fixture_files(ROOT)  # every bug edit still applies exactly once
    if args.check:
        stale = [p for p, text in expected.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
        stray = _stray(expected)
        for path in stale:
            print(f"stale: {path.relative_to(ROOT)}", file=sys.stderr)
        for path in stray:
            print(f"stray: {path.relative_to(ROOT)}", file=sys.stderr)
        if stale or stray:
            print(f"run {COMMAND}", file=sys.stderr)
            return 1
        print(f"{len(expected)} generated files are current")
        return 0
    for path in _stray(expected):
        path.unlink()
    for path, text in expected.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(f"wrote {len(expected)} files under {ROOT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where each file of a primitive lives under ``tasks/compgeom/<primitive>/``.

    CONTRACT.md                  generated from reference/<primitive>.py and contract.py
    cases/{public,hidden}.json   generated case corpus (inputs and exact expectations)
    starter/candidate.<ext>      generated starter, the API with an unimplemented body
    harness/main.<ext>           generated harness that calls the candidate
    fixtures/good.<ext>          hand-written known-good solutions

The known-bad solutions (good + one bug) are not files here: ``fixtures.bad_sources`` makes
them on demand, and ``build --fixtures DIR`` writes them out to read.
"""

from __future__ import annotations

import functools
from pathlib import Path

from .languages import BY_LANGUAGE

ROOT = Path(__file__).parent


def contract_path(primitive: str) -> Path:
    return ROOT / primitive / "CONTRACT.md"


def case_path(primitive: str, visibility: str) -> Path:
    return ROOT / primitive / "cases" / f"{visibility}.json"


def starter_path(primitive: str, language: str) -> Path:
    return ROOT / primitive / "starter" / BY_LANGUAGE[language].candidate_file


def harness_path(primitive: str, language: str) -> Path:
    return ROOT / primitive / "harness" / BY_LANGUAGE[language].harness_file


def fixture_path(primitive: str, name: str) -> Path:
    return ROOT / primitive / "fixtures" / name


@functools.lru_cache(maxsize=512)
def read(path: Path) -> str:
    """A shipped file's text; cached, since harnesses and fixtures are read on every step."""
    return path.read_text(encoding="utf-8")


def good_source(primitive: str, language: str) -> str:
    """The hand-written known-good solution of one primitive in one language."""
    return read(fixture_path(primitive, f"good.{BY_LANGUAGE[language].ext}"))

"""The three languages a task can be posed in: file names, fences, comment syntax, build commands."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Language:
    name: str
    title: str
    candidate_file: str
    harness_file: str
    fence: str
    comment: str
    build: str
    run: str

    @property
    def ext(self) -> str:
        """The candidate's extension, also used for fixture files (good.hpp, good.rs, good.py)."""
        return self.candidate_file.rsplit(".", 1)[1]


CPP = Language("cpp", "C++20", "candidate.hpp", "main.cpp", "cpp", "//",
               "g++ -std=c++20 -O2 -o prog main.cpp", "./prog")
RUST = Language("rust", "Rust (edition 2021)", "candidate.rs", "main.rs", "rust", "//",
                "rustc --edition 2021 -O -o prog main.rs", "./prog")
PYTHON = Language("python", "Python 3.11", "candidate.py", "main.py", "python", "#",
                  "", "python3 main.py")

LANGUAGE_TABLE: tuple[Language, ...] = (CPP, RUST, PYTHON)
LANGUAGES: tuple[str, ...] = tuple(lang.name for lang in LANGUAGE_TABLE)
BY_LANGUAGE: dict[str, Language] = {lang.name: lang for lang in LANGUAGE_TABLE}

"""The languages a task can be posed in: the sandbox's (``toolchains``), with CompGeom's file names.

Everything but the candidate's file name comes from the language's row in
``gym_sysmath.sandbox.image.toolchains``, so the build command a prompt shows and the local
runner runs is the one the sandbox runs.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gym_sysmath.sandbox.image.toolchains import TOOLCHAINS, Toolchain

#: The file the agent writes, by language; the harness (the toolchain's ``source``) includes it.
CANDIDATE_FILES = {"cpp": "candidate.hpp", "rust": "candidate.rs", "python": "candidate.py"}


@dataclass(frozen=True)
class Language:
    toolchain: Toolchain
    candidate_file: str

    @property
    def name(self) -> str:
        return self.toolchain.name

    @property
    def title(self) -> str:
        return self.toolchain.title

    @property
    def harness_file(self) -> str:
        return self.toolchain.source

    @property
    def fence(self) -> str:
        return self.toolchain.name

    @property
    def comment(self) -> str:
        return self.toolchain.comment

    @property
    def build(self) -> str:
        """The build command as a prompt shows it; empty for Python."""
        return shlex.join(self.toolchain.build)

    @property
    def run(self) -> str:
        return shlex.join(self.toolchain.run)

    @property
    def ext(self) -> str:
        """The candidate's extension, also used for fixture files (good.hpp, good.rs, good.py)."""
        return self.candidate_file.rsplit(".", 1)[1]


LANGUAGE_TABLE: tuple[Language, ...] = tuple(Language(toolchain, CANDIDATE_FILES[name])
                                             for name, toolchain in TOOLCHAINS.items())
LANGUAGES: tuple[str, ...] = tuple(lang.name for lang in LANGUAGE_TABLE)
BY_LANGUAGE: dict[str, Language] = {lang.name: lang for lang in LANGUAGE_TABLE}

"""The languages code can be written in, one row each: the one table that every part reads.

The action parser reads a fence's label through ``name``, ``aliases`` and ``extensions``; the
sandbox checks a job's language and knows its entry file (``source``) and whether it is built;
the supervisor runs ``COMPILERS``; a family names the language (``title``), writes comments
(``comment``) and shows the exact ``build`` and ``run`` commands; the image's precompiled
<bits/stdc++.h> is built with ``CXX_FLAGS`` (tests/test_toolchains.py reads the Dockerfile).

Standard library only: it is copied into the sandbox image beside the supervisor, and the host
imports it as ``gym_sysmath.sandbox.image.toolchains``.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Where the image keeps a precompiled <bits/stdc++.h> built with exactly ``CXX_FLAGS``.
PCH_DIR = "/opt/gym-sysmath/pch"

#: The flags a C++ build and the precompiled header share: g++ ignores a header built otherwise.
CXX_FLAGS = ("-std=c++20", "-O2", "-pipe")

#: The group that alone may run or read the image's compilers, assemblers and linkers (gcc, g++,
#: cc1, as, ld, collect2, rustc, libLLVM...: the Dockerfile makes their files 0750 root:this
#: group). The supervisor gives it, as a supplementary group, to a compile stage and to a Python
#: job whose host asked for it (``Job.toolchain``), never to a session or to a built program.
TOOLCHAIN_GROUP = "gym-toolchain"
TOOLCHAIN_GID = 911


@dataclass(frozen=True)
class Toolchain:
    """One language: the fence labels that name it, its entry file, how it is built and run."""

    #: The canonical name: a job's and a task's ``language``, and the fence label prompts write.
    name: str
    #: How a prompt names the language.
    title: str
    #: Other fence labels read as this language (```c++20, ```rs, ```py3).
    aliases: tuple[str, ...]
    #: File extensions that a fence label naming a file reads as this language (```candidate.hpp).
    extensions: tuple[str, ...]
    #: The entry file in the job's dir, which ``build`` (or ``run``) reads.
    source: str
    #: The build command, run in the job's dir and writing ``./prog``; empty for an interpreted language.
    build: tuple[str, ...]
    #: The command that runs the program in the job's dir (Python runs it in a warm fork, as this would).
    run: tuple[str, ...]
    #: What starts a line comment.
    comment: str

    @property
    def compiled(self) -> bool:
        return bool(self.build)

    @property
    def labels(self) -> tuple[str, ...]:
        """Every fence label that names this language, the canonical one first."""
        return (self.name, *self.aliases)


CPP = Toolchain(
    name="cpp", title="C++20",
    aliases=("c++", "cc", "cxx", "hpp", "hxx", "hh", "h++", "cplusplus", "cpp20", "cpp17",
             "c++11", "c++14", "c++17", "c++20", "c++23", "gnu++20", "gnu++17"),
    extensions=("cpp", "cc", "cxx", "hpp", "h"),
    source="main.cpp", build=("g++", *CXX_FLAGS, f"-I{PCH_DIR}", "-o", "prog", "main.cpp"), run=("./prog",),
    comment="//",
)
RUST = Toolchain(
    name="rust", title="Rust (edition 2021)", aliases=("rs", "rust2021"), extensions=("rs",),
    source="main.rs", build=("rustc", "--edition", "2021", "-O", "-o", "prog", "main.rs"), run=("./prog",),
    comment="//",
)
PYTHON = Toolchain(
    name="python", title="Python 3.11",
    aliases=("py", "python3", "py3", "python3.11", "python3.12", "ipython", "pyw"), extensions=("py",),
    source="main.py", build=(), run=("python3", "-s", "-P", "main.py"),
    comment="#",
)

#: Every language, by name, in the order tasks list them.
TOOLCHAINS: dict[str, Toolchain] = {toolchain.name: toolchain for toolchain in (CPP, RUST, PYTHON)}
LANGUAGES: tuple[str, ...] = tuple(TOOLCHAINS)

#: language -> (the source file the build reads, the build command run in the job's dir).
COMPILERS: dict[str, tuple[str, list[str]]] = {
    toolchain.name: (toolchain.source, list(toolchain.build)) for toolchain in TOOLCHAINS.values() if toolchain.compiled
}

"""The language registry (``sandbox/image/toolchains.py``) is the one list of languages: the
action parser, the sandbox, CompGeom and the image's precompiled header all agree with it."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import gym_sysmath  # registers the ids
from gym_sysmath import fences
from gym_sysmath.actions import read_reply
from gym_sysmath.families import family
from gym_sysmath.sandbox import LANGUAGES as SANDBOX_LANGUAGES
from gym_sysmath.sandbox import Job
from gym_sysmath.sandbox.image.toolchains import (
    COMPILERS,
    CXX_FLAGS,
    LANGUAGES,
    PCH_DIR,
    TOOLCHAIN_GID,
    TOOLCHAIN_GROUP,
    TOOLCHAINS,
)
from gym_sysmath.tasks import compgeom
from gym_sysmath.tasks.compgeom.layout import harness_path

DOCKERFILE = Path(gym_sysmath.__file__).parent / "sandbox" / "image" / "Dockerfile"
NAMES = sorted(TOOLCHAINS)


def _pch_command() -> list[str]:
    """The Dockerfile's g++ command that precompiles <bits/stdc++.h>, as argv."""
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    commands = [part.strip() for line in text.splitlines() if line.startswith("RUN ")
                for part in line[len("RUN "):].split("&&") if "c++-header" in part]
    assert len(commands) == 1, f"expected one precompiled-header build in the Dockerfile, found {commands}"
    return shlex.split(commands[0])


def test_the_dockerfile_precompiles_the_header_with_exactly_the_cpp_build_flags():
    argv = _pch_command()
    assert argv[0] == "g++"
    assert tuple(argv[1:argv.index("-x")]) == CXX_FLAGS  # g++ silently skips a header built otherwise
    assert argv[argv.index("-o") + 1] == f"{PCH_DIR}/bits/stdc++.h.gch"
    build = TOOLCHAINS["cpp"].build
    assert build[:1 + len(CXX_FLAGS)] == ("g++", *CXX_FLAGS) and f"-I{PCH_DIR}" in build


def test_the_dockerfile_gives_the_toolchain_to_the_group_the_supervisor_grants():
    # the image's compilers are 0750 root:TOOLCHAIN_GROUP; the supervisor adds TOOLCHAIN_GID to a
    # compile stage and a host-asked Python job (tests/hostile/test_no_toolchain_in_csapp_turns.py)
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert f"groupadd --system --gid {TOOLCHAIN_GID} {TOOLCHAIN_GROUP}" in text
    assert f"os.setgroups([{TOOLCHAIN_GID}])" in text  # the build's own check that the group can compile
    assert f'chgrp {TOOLCHAIN_GROUP} "$@" && chmod o-rwx "$@"' in text


def test_only_python_jobs_ask_for_the_toolchain():
    # a compiled job's build always has it and its program never: asking is a mistake, said at once
    assert Job("python", {"main.py": ""}, toolchain=True).to_wire()["toolchain"] is True
    assert Job("python", {"main.py": ""}).to_wire()["toolchain"] is False
    with pytest.raises(ValueError, match="toolchain"):
        Job("cpp", {"main.cpp": ""}, toolchain=True)


@pytest.mark.parametrize("first", ["gym_sysmath.sandbox.image.toolchains", "gym_sysmath.sandbox.execution",
                                   "gym_sysmath.sandbox.daemon", "gym_sysmath.fences"])
def test_the_registry_imports_first_from_any_side(first):
    # the image's sources are a plain package that imports nothing of the host: no import order to keep
    done = subprocess.run([sys.executable, "-c", f"import {first}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def test_compilers_are_the_compiled_rows():
    compiled = {name: (row.source, list(row.build)) for name, row in TOOLCHAINS.items() if row.compiled}
    assert compiled == COMPILERS
    for source, argv in COMPILERS.values():
        assert argv[-1] == source and argv[-3:-1] == ["-o", "prog"]  # the supervisor runs ./prog
    assert all(row.run == ("./prog",) for row in TOOLCHAINS.values() if row.compiled)


def test_every_label_names_one_language():
    labels = [label for row in TOOLCHAINS.values() for label in row.labels]
    assert len(labels) == len(set(labels))
    extensions = [extension for row in TOOLCHAINS.values() for extension in row.extensions]
    assert len(extensions) == len(set(extensions))


@pytest.mark.parametrize("name", NAMES)
def test_the_parser_reads_every_label_of_a_language_as_it(name):
    row = TOOLCHAINS[name]
    for label in row.labels:
        reply = read_reply(f"```{label}\nx\n```", (name,))
        assert reply.code is not None and reply.code.language == name, label
    for extension in row.extensions:
        assert fences.language_of(f"file.{extension}", None) == name


def test_the_parser_reads_no_other_label_as_a_registry_language():
    runnable = {label for label, language in fences.FENCE_LANGUAGES.items() if language in TOOLCHAINS}
    assert runnable == {label for row in TOOLCHAINS.values() for label in row.labels}


def test_the_sandbox_takes_exactly_the_registry_languages():
    assert SANDBOX_LANGUAGES == LANGUAGES == tuple(TOOLCHAINS)
    for name, row in TOOLCHAINS.items():
        job = Job(name, {row.source: ""})
        assert (job.build_key is not None) == row.compiled
    with pytest.raises(ValueError, match="unknown language"):
        Job("javascript", {"main.js": ""})


def test_compgeom_poses_tasks_in_exactly_the_registry_languages():
    assert compgeom.LANGUAGES == LANGUAGES
    assert {task.language for task in compgeom.load_tasks()} == set(TOOLCHAINS)
    aliases = [language for env_id in family("compgeom").ids[1:] for language in env_id.kwargs["languages"]]
    assert sorted(aliases) == NAMES  # one CompGeom<Language>-v0 id per language
    for name in NAMES:  # no sandbox is taken to list them
        assert {task.split("/")[1] for task in gym.make("CompGeom-v0", languages=[name]).unwrapped.task_ids} == {name}
    with pytest.raises(ValueError, match="javascript"):
        gym.make("CompGeom-v0", languages=["javascript"])


@pytest.mark.parametrize("name", NAMES)
def test_compgeom_shows_and_builds_the_sandbox_commands(name):
    row = TOOLCHAINS[name]
    language = compgeom.BY_LANGUAGE[name]
    assert (language.harness_file, language.fence, language.comment) == (row.source, row.name, row.comment)
    assert fences.language_of(language.candidate_file, None) == name  # the candidate's file name reads back
    (task,) = compgeom.load_tasks(["segment2_segment2"], [name])
    assert harness_path(task.primitive, name).name == row.source
    assert f"run as `{shlex.join(row.run)}`" in task.prompt
    assert (f"built with `{shlex.join(row.build)}`" in task.prompt) == row.compiled

"""Every code snippet of README.md and docs/*.md is run (or parsed), and the docs site builds.

A fenced ```python block runs as written, alone, in a fresh interpreter (the README's print
exactly what the comments of their ``print(`` lines say). A comment line just
above a block says what it needs or why it is not run:

    <!-- needs: docker -->                 a `docker` test (skipped where the daemon is not up)
    <!-- needs: docker, trl -->            ... and the importable module trl
    <!-- not run: a GPU trainer's config -->

Every ``gym-sysmath ...`` command of a ```bash / ```console block, or of an indented code block,
is parsed by the CLI's own argparse parser (a shell block of templates, ``gym-sysmath verify
<name>``, carries ``<!-- not run: ... -->`` too). A block that is not run is skipped with its
reason, and counted (``NOT_RUN``), so a new one is a deliberate edit here. ``mkdocs build --strict``
fails on a broken link or anchor and on a page missing from the nav (mkdocs.yml's validation).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

#: How many blocks carry ``<!-- not run: ... -->``: change it when adding or removing one.
NOT_RUN = 4

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>needs|not run):\s*(?P<what>.*?)\s*-->\s*$")
SHELL_LANGS = {"bash", "console", "sh", "shell"}


@dataclass(frozen=True)
class Block:
    """One code block of a page: where it starts, its language, its text, the comment above it."""

    page: Path
    line: int
    lang: str
    code: str
    marker: tuple[str, str] | None = None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` (indentation removed), and its indented code blocks as ``indented``."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if opened:
            indent, fence = len(opened["indent"]), opened["fence"]
            end = next((j for j in range(i + 1, len(lines))
                        if lines[j].strip().startswith(fence) and not lines[j].strip().strip(fence[0])), len(lines))
            code = "\n".join(line[indent:] for line in lines[i + 1:end]) + "\n"
            above = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            marker = MARKER.match(above)
            found.append(Block(page, i + 1, opened["lang"].lower(), code,
                               (marker["kind"], marker["what"]) if marker else None))
            i = end + 1
        elif lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            end = i
            while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
                end += 1
            found.append(Block(page, i + 1, "indented", "\n".join(line[4:] for line in lines[i:end]) + "\n"))
            i = end
        else:
            i += 1
    return found


ALL_BLOCKS = [block for page in PAGES for block in blocks(page)]
PYTHON = [block for block in ALL_BLOCKS if block.lang in {"python", "py"}]
SHELL = [block for block in ALL_BLOCKS if block.lang in SHELL_LANGS | {"indented"}]


def cli_commands(block: Block) -> list[list[str]]:
    """The ``gym-sysmath`` command lines of a shell block, as argv after the program name."""
    commands = []
    for line in block.code.replace("\\\n", " ").splitlines():
        line = line.strip().removeprefix("$ ")
        try:
            words = shlex.split(line, comments=True)
        except ValueError:  # prose or output in an indented block
            continue
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):  # VAR=value before the command
            words.pop(0)
        if words and Path(words[0]).name == "gym-sysmath":
            commands.append(words[1:])
    return commands


def test_pages_have_code_blocks_to_check():
    assert len(PYTHON) >= 10 and sum(len(cli_commands(block)) for block in SHELL) >= 20


def promised_output(code: str) -> list[str]:
    """What a block says it prints: the ``# comment`` ending each top-level ``print(`` line."""
    return [line.rsplit("#", 1)[1].strip() for line in code.splitlines() if line.startswith("print(") and "#" in line]


def needs(block: Block) -> list[str]:
    """What a block's ``<!-- needs: ... -->`` names: ``docker`` or modules to import."""
    kind, what = block.marker or ("", "")
    return [word.strip() for word in what.split(",") if word.strip()] if kind == "needs" else []


#: Each block runs in an interpreter of its own (seconds each): `slow`, and `docker` where it says so.
PYTHON_PARAMS = [pytest.param(block, id=block.name,
                              marks=[pytest.mark.slow, *[pytest.mark.docker] * ("docker" in needs(block))])
                 for block in PYTHON]


@pytest.mark.parametrize("block", PYTHON_PARAMS)
def test_python_block_runs(block: Block, request, tmp_path):
    if block.marker and block.marker[0] == "not run":
        pytest.skip(f"not run: {block.marker[1]}")
    for need in needs(block):
        if need == "docker":
            request.getfixturevalue("docker_available")
        elif importlib.util.find_spec(need) is None:
            if IN_CI:
                pytest.fail(f"CI=true but {need} is not installed")
            pytest.skip(f"{need} is not installed")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", block.code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"{block.name} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
    if block.page.name == "README.md":  # the front page's examples print what their comments say
        assert done.stdout.splitlines() == promised_output(block.code), done.stdout + done.stderr[-3000:]


def test_blocks_not_run_are_counted_and_say_why():
    not_run = [block for block in PYTHON + SHELL if block.marker and block.marker[0] == "not run"]
    assert all(block.marker and block.marker[1] for block in not_run), "a <!-- not run: --> needs a reason"
    assert len(not_run) == NOT_RUN, "\n".join(f"{block.name}: {block.marker}" for block in not_run)


def test_markers_sit_above_a_code_block():
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if MARKER.match(line):
                after = next((later for later in lines[number + 1:] if later.strip()), "")
                opened = FENCE.match(after)
                assert opened and opened["lang"] in {"python", "py", *SHELL_LANGS}, f"{page.name}:{number + 1}: {line}"


@pytest.mark.parametrize("block", [block for block in SHELL if cli_commands(block)], ids=lambda block: block.name)
def test_cli_commands_parse(block: Block):
    from gym_sysmath.cli import build_parser

    if block.marker and block.marker[0] == "not run":
        pytest.skip(f"not run: {block.marker[1]}")
    for argv in cli_commands(block):
        refused = io.StringIO()
        with contextlib.redirect_stderr(refused):
            try:
                build_parser().parse_args(argv)
            except SystemExit:  # argparse's way to refuse a command line
                pytest.fail(f"{block.name}: gym-sysmath {shlex.join(argv)}: {refused.getvalue().strip()}")


@pytest.mark.slow
def test_docs_site_builds_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        if IN_CI:
            pytest.fail("CI=true but mkdocs is not installed (the docs extra)")
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]'")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]

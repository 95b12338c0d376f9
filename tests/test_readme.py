"""The README is a front page whose facts stay true: its two set-up commands, its extras, its
links, its length. Its code runs in tests/test_docs.py (the first example's printed verdict
included); its id table is read against the registry in tests/test_family_plugin.py."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

from tests.test_docs import PYTHON, promised_output

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TEXT = README.read_text(encoding="utf-8")


def test_front_page_stays_short():
    assert len(TEXT.splitlines()) < 200, "the manual lives in docs/: move the new text there"


def test_first_lines_are_the_two_set_up_commands_and_make_has_them():
    commands = [line.split("#")[0].strip() for line in TEXT.splitlines()[1:6] if line.startswith("    ")]
    assert commands == ["make run", "make test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    run = re.search(r"^run: (.*)\n\t(.*)$", makefile, re.MULTILINE)
    assert run and "image" in run[1] and "eval --all" in run[2], "make run: the image, then every env"
    test = re.search(r"^test: (.*)\n\t(.*)$", makefile, re.MULTILINE)
    assert test and "image" in test[1] and "pytest" in test[2], "make test: the image, then the suite"


def test_first_example_promises_the_verdict_it_prints():
    first = next(block for block in PYTHON if block.page == README)
    assert promised_output(first.code) == ["correct None 1.0"]


def test_installation_names_every_extra_and_only_those():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    extras = set(config["options.extras_require"])
    section = TEXT[TEXT.index("## Installation"):TEXT.index("\n## ", TEXT.index("## Installation") + 1)]
    listed = set(re.findall(r"^\| `([\w-]+)` \|", section, re.MULTILINE))
    assert listed == extras, f"extras in setup.cfg but not the README: {extras - listed}; gone: {listed - extras}"


def test_every_relative_link_resolves():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", TEXT)
    missing = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert not missing, missing


def test_front_page_sections():
    headings = re.findall(r"^## (.*)$", TEXT, re.MULTILINE)
    assert headings[0] == "Installation" and "The ids" in headings and "Documentation" in headings
    assert sum(heading.startswith("Quickstart") for heading in headings) == 3

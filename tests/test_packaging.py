"""What a user who installs the package relies on besides the envs: its version and its types."""

from __future__ import annotations

import configparser
from pathlib import Path

import gym_sysmath

ROOT = Path(__file__).resolve().parent.parent


def test_version_is_the_one_setup_cfg_declares():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    assert gym_sysmath.__version__ == config["metadata"]["version"]


def test_type_hints_are_shipped_with_a_py_typed_marker():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    assert (Path(gym_sysmath.__file__).parent / "py.typed").is_file()
    assert "py.typed" in config["options.package_data"]["gym_sysmath"]


def test_changelog_names_the_current_version():
    assert f"## [{gym_sysmath.__version__}]" in (ROOT / "CHANGELOG.md").read_text()

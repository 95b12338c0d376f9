"""What a user who installs the package relies on besides the envs: its version and its types."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

import gym_sysmath
from gym_sysmath.families import families

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


@pytest.mark.parametrize("family", [row.name for row in families()])
def test_every_env_docstring_has_a_parameter_table_and_a_version_history(family):
    import inspect

    from gymnasium.envs.registration import load_env_creator

    env_class = load_env_creator(next(row for row in families() if row.name == family).entry_point)
    doc = inspect.getdoc(env_class)
    assert doc and "## Version History" in doc, env_class.__name__
    for name in list(inspect.signature(env_class.__init__).parameters)[1:]:
        if name != "filters":  # the base class's channel for a family's own filter arguments
            assert f"| `{name}` |" in doc, f"{env_class.__name__}: no row for {name}"


def test_an_installed_copy_ships_every_file_the_image_is_built_from():
    # a wheel holds a package's modules and the package_data that setup.cfg names, nothing else
    import fnmatch
    import posixpath

    from setuptools import find_packages

    from gym_sysmath.sandbox import daemon

    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    packages = find_packages(str(ROOT), include=config["options.packages.find"]["include"].replace(",", " ").split())
    data = {package: [glob.strip() for glob in globs.split(",")]
            for package, globs in config["options.package_data"].items()}
    for name in daemon._context_files():
        folder, file = posixpath.split(name)
        package = ".".join(["gym_sysmath.sandbox.image", *filter(None, folder.split("/"))])
        assert package in packages, f"{name}: {package} is not a package setuptools finds (no __init__.py?)"
        if not file.endswith(".py"):
            assert any(fnmatch.fnmatch(file, glob) for glob in data.get(package, [])), \
                f"{name}: no package_data glob of {package} ships it"

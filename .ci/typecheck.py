"""Type-check the package as it is installed: `python .ci/typecheck.py [mypy args]`.

setup.cfg maps `gym_sysmath.envs` to `envs/` and `gym_sysmath.tasks` to `tasks/` (`package_dir`),
which an import hook resolves at run time but a type checker cannot see. This lays the installed
layout out as a tree of symlinks in a temporary folder, runs mypy on it with the options in
setup.cfg's `[mypy]` section, and prints the errors against the real paths.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAPPED = {"envs": ROOT / "envs", "tasks": ROOT / "tasks"}


def link_tree(into: Path) -> Path:
    """`into/gym_sysmath`, holding the package's own entries and the mapped subpackages."""
    package = into / "gym_sysmath"
    package.mkdir()
    for entry in (ROOT / "gym_sysmath").iterdir():
        if entry.name not in MAPPED and entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, source in MAPPED.items():
        (package / name).symlink_to(source)
    return package


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="gym-sysmath-typecheck-") as tmp:
        package = link_tree(Path(tmp))
        command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "setup.cfg"),
                   "--no-incremental", "gym_sysmath", *argv]
        done = subprocess.run(command, cwd=tmp, capture_output=True, text=True)
        real = {f"gym_sysmath{os.sep}{name}{os.sep}": f"{name}{os.sep}" for name in MAPPED}
        for line in (done.stdout + done.stderr).splitlines():
            for linked, actual in real.items():
                if line.startswith(linked):
                    line = actual + line[len(linked):]
                    break
            print(line)
        del package
        return done.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

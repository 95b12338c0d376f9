"""The README's first code example is run as written, and prints what its comment says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def first_python_block() -> str:
    match = re.search(r"^```python\n(.*?)^```$", README.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    assert match, "the README has no ```python block"
    return match.group(1)


@pytest.mark.docker
def test_first_readme_example_prints_what_it_promises(docker_available):
    code = first_python_block()
    promised = [line.rsplit("#", 1)[1].strip() for line in code.splitlines() if line.startswith("print(")]
    assert promised == ["correct None 1.0"], "the example's print line must end with a '# <expected output>' comment"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=README.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == promised, done.stdout + done.stderr[-3000:]

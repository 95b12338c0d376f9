"""Shipped generated files: a builder's ``--check`` compares a fresh build with the file on disk."""

from __future__ import annotations

import sys
from pathlib import Path


def check_current(path: Path, text: str, command: str) -> int:
    """0 when ``path`` holds exactly ``text``; else 1, saying which command rebuilds it."""
    current = path.read_text(encoding="utf-8") if path.exists() else None
    if current != text:
        print(f"{path} is stale; run {command}", file=sys.stderr)
        return 1
    print(f"{path} is current")
    return 0

"""The build cache: compiled programs kept by a hash of what built them, so a resubmitted
source skips the compiler. The compile commands themselves are ``toolchains.COMPILERS``."""

from __future__ import annotations

import hashlib
import os
import shutil
from typing import Any

from .child import JOB_ENV
from .statuses import ExecutionStatus


class BuildCache:
    """Compiled programs keyed by a hash of (language, compiler command, toolchain, sources).

    RL rollouts resubmit identical code often; a hit skips the compiler. Entries live in a
    root-owned dir that jobs can execute from but not write to. Only successful builds are
    cached: a failed one may be the machine's fault (a full scratch), so it is tried again.
    """

    def __init__(self, root: str, capacity: int = 64, max_bytes: int = 128 * 1024 * 1024):
        self.root = root
        self.capacity = capacity
        self.max_bytes = max_bytes  # the cache lives in the scratch tmpfs, i.e. in the container's memory
        self.entries: dict[str, dict] = {}  # insertion order doubles as LRU order
        self._toolchains: dict[str, str] = {}

    def _toolchain(self, compiler: str) -> str:
        if compiler not in self._toolchains:
            path = shutil.which(compiler, path=JOB_ENV["PATH"]) or compiler
            try:
                info = os.stat(os.path.realpath(path))
                self._toolchains[compiler] = f"{os.path.realpath(path)}:{info.st_size}:{info.st_mtime_ns}"
            except OSError:
                self._toolchains[compiler] = path
        return self._toolchains[compiler]

    def key(self, language: str, argv: list[str], files: dict) -> str:
        digest = hashlib.sha256()
        # surrogatepass: a key for any str (a lone surrogate in a source is the build's to refuse,
        # not the cache's to crash on)
        for part in (language, "\0".join(argv), self._toolchain(argv[0])):
            digest.update(part.encode("utf-8", "surrogatepass") + b"\1")
        for name in sorted(files):
            digest.update(name.encode("utf-8", "surrogatepass") + b"\2"
                          + files[name].encode("utf-8", "surrogatepass") + b"\3")
        return digest.hexdigest()[:32]

    def get(self, key: str) -> dict | None:
        entry = self.entries.pop(key, None)
        if entry is None:
            return None
        if entry.get("binary") and not os.path.exists(entry["binary"]):
            return None
        self.entries[key] = entry
        return entry

    def put(self, key: str, compiled: dict, workdir: str) -> dict:
        entry: dict[str, Any] = {"compile": compiled, "binary": None}
        if compiled["status"] == ExecutionStatus.OK:
            folder = os.path.join(self.root, key)
            target = os.path.join(folder, "prog")
            try:
                os.makedirs(folder, mode=0o700, exist_ok=True)
                shutil.copyfile(os.path.join(workdir, "prog"), target)
                os.chmod(target, 0o700)
            except OSError:
                return entry  # the job removed or hid its binary, or the disk is full: don't cache
            entry["binary"] = target
            entry["bytes"] = os.path.getsize(target)
        else:
            return entry
        self.entries[key] = entry
        while len(self.entries) > self.capacity or (
                len(self.entries) > 1 and sum(e.get("bytes", 0) for e in self.entries.values()) > self.max_bytes):
            old_key, _ = next(iter(self.entries.items()))
            self.entries.pop(old_key)
            shutil.rmtree(os.path.join(self.root, old_key), ignore_errors=True)
        return entry

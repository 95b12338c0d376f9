"""Host end of the supervisor protocol: framed JSON over one byte stream.

The frames are the supervisor's own codec (``image/supervisor/protocol.py``, one parser for both
ends); this module brings the bytes to it. The Docker backend reads the container's attached
stdout, which Docker multiplexes (8-byte headers per chunk); ``DockerStreamSource`` strips those.
Every failure here is the harness's, so it raises ``SandboxError``.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import time
from typing import Any, Protocol

from gym_sysmath.sandbox.execution import SandboxError
from gym_sysmath.sandbox.image.supervisor.protocol import FrameError, take_frame


class ByteSource(Protocol):
    def read_some(self, deadline: float) -> bytes: ...


class FdSource:
    """Raw bytes from a pipe (the process backend)."""

    def __init__(self, fd: int):
        self.fd = fd

    def read_some(self, deadline: float) -> bytes:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SandboxError("worker_timeout", "the supervisor did not answer in time")
        ready, _, _ = select.select([self.fd], [], [], remaining)
        if not ready:
            raise SandboxError("worker_timeout", "the supervisor did not answer in time")
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            raise SandboxError("worker_died", "the supervisor closed its stream")
        return chunk


class DockerStreamSource:
    """Payload bytes of the stdout stream from a multiplexed Docker attach socket."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.raw = bytearray()

    def _recv(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SandboxError("worker_timeout", "the supervisor did not answer in time")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(1 << 16)
        except TimeoutError as exc:
            raise SandboxError("worker_timeout", "the supervisor did not answer in time") from exc
        except OSError as exc:
            raise SandboxError("worker_died", f"attach socket failed: {exc}") from exc
        if not chunk:
            raise SandboxError("worker_died", "the container's stream closed")
        self.raw += chunk

    def read_some(self, deadline: float) -> bytes:
        while True:
            if len(self.raw) >= 8:
                stream_type = self.raw[0]
                (size,) = struct.unpack(">I", bytes(self.raw[4:8]))
                if stream_type not in (0, 1, 2):
                    raise SandboxError("protocol_error", f"bad docker stream header {bytes(self.raw[:8])!r}")
                if len(self.raw) >= 8 + size:
                    payload = bytes(self.raw[8 : 8 + size])
                    del self.raw[: 8 + size]
                    if stream_type == 1 and payload:
                        return payload
                    continue
            self._recv(deadline)


class FrameReader:
    """Reassembles frames from a byte source."""

    def __init__(self, source: ByteSource):
        self.source = source
        self.buffer = bytearray()

    def read(self, deadline: float) -> dict[str, Any]:
        while True:
            try:
                complete, message = take_frame(self.buffer)
            except FrameError as exc:
                raise SandboxError("protocol_error", str(exc)) from exc
            if complete:
                if not isinstance(message, dict):
                    raise SandboxError("protocol_error", "frame is not an object")
                return message
            self.buffer += self.source.read_some(deadline)

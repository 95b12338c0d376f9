"""The frame codec: how the host and the supervisor (and a session and the supervisor) talk.

A frame is ``<decimal length>\\n<utf-8 json>``. The host imports this module as
``gym_sysmath.sandbox.image.supervisor.protocol``; the supervisor runs it from the image. It is
the one parser of frames: the host reads the supervisor's replies with ``take_frame``, the
supervisor reads the host's requests with ``read_frame``, and a session's replies, written by
code the agent controls, with ``take_frame`` again.
"""

from __future__ import annotations

import json
import os
from typing import Any

#: Bumped whenever a request or a reply changes shape: the host refuses a supervisor speaking
#: another version (an image built from other sources) at its first ping.
PROTOCOL_VERSION = 2
MAX_FRAME_BYTES = 256 * 1024 * 1024
#: The most digits a header may have (a size past ``MAX_FRAME_BYTES`` has at most 9).
MAX_HEADER_BYTES = 20


class FrameError(ValueError):
    """The stream is not frames: a bad header, a size out of range, or a body that is not JSON."""


def encode_frame(message: Any) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    return b"%d\n" % len(body) + body


def frame_size(header: bytes | bytearray, max_bytes: int = MAX_FRAME_BYTES) -> int:
    """The body size that ``header`` (the bytes before the newline) announces."""
    try:
        size = int(header)
    except ValueError:
        raise FrameError(f"bad frame header {bytes(header[:40])!r}") from None
    if not 0 <= size <= max_bytes:
        raise FrameError(f"frame size {size} out of range")
    return size


def decode_body(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise FrameError(f"undecodable frame: {exc}") from exc


def take_frame(buffer: bytearray, max_bytes: int = MAX_FRAME_BYTES) -> tuple[bool, Any]:
    """Remove the first whole frame from ``buffer``: ``(True, message)``, or ``(False, None)``
    while the frame is still incomplete. Raises ``FrameError`` if it is malformed."""
    newline = buffer.find(b"\n", 0, MAX_HEADER_BYTES + 1)
    if newline < 0:
        if len(buffer) > MAX_HEADER_BYTES:
            raise FrameError(f"bad frame header {bytes(buffer[:40])!r}")
        return False, None
    end = newline + 1 + frame_size(buffer[:newline], max_bytes)
    if len(buffer) < end:
        return False, None
    body = bytes(buffer[newline + 1 : end])
    del buffer[:end]
    return True, decode_body(body)


def read_frame(fd: int, max_bytes: int = MAX_FRAME_BYTES) -> Any:
    """Read one frame from a blocking descriptor, and not a byte past it; None on a clean EOF
    before a header. Raises ``FrameError`` or ``EOFError`` (a stream cut inside a frame)."""
    header = b""
    while not header.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            if header:
                raise EOFError("stream ended inside a frame header")
            return None
        header += chunk
        if len(header) > MAX_HEADER_BYTES + 1:
            raise FrameError("frame header too long")
    size = frame_size(header[:-1], max_bytes)
    body = bytearray()
    while len(body) < size:
        chunk = os.read(fd, min(size - len(body), 1 << 20))
        if not chunk:
            raise EOFError("stream ended inside a frame body")
        body += chunk
    return decode_body(bytes(body))


def write_frame(fd: int, message: Any) -> None:
    view = memoryview(encode_frame(message))
    while view:
        written = os.write(fd, view)
        view = view[written:]

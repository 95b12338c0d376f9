"""The supervisor is a package of the standard library alone, copied whole into the image, and the
host speaks to it through the very same codecs (frames, values, limits), not copies of them."""

from __future__ import annotations

import ast
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import gym_sysmath.sandbox.image
from gym_sysmath import exact
from gym_sysmath.sandbox import channel, daemon, execution, workers
from gym_sysmath.sandbox.channel import FdSource, FrameReader
from gym_sysmath.sandbox.execution import SandboxError
from gym_sysmath.sandbox.image.supervisor import limits, protocol, statuses, values

IMAGE_DIR = Path(gym_sysmath.sandbox.image.__file__).parent
PACKAGE_DIR = IMAGE_DIR / "supervisor"
IMAGE_SOURCES = sorted([*PACKAGE_DIR.glob("*.py"), *IMAGE_DIR.glob("*.py")])


def test_the_host_has_no_frame_or_value_codec_of_its_own():
    assert workers.encode_frame is protocol.encode_frame
    assert workers.PROTOCOL_VERSION is protocol.PROTOCOL_VERSION
    assert channel.take_frame is protocol.take_frame
    assert execution.Limits is limits.Limits and execution.decode_value is values.decode_value
    assert execution.ExecutionStatus is statuses.ExecutionStatus
    assert (exact.FLOAT_TAG, exact.FLOAT_BITS) == (values.FLOAT_TAG, values.FLOAT_BITS)
    for module in (channel, workers, execution):  # nothing left that parses JSON off the wire
        assert "json" not in ast.unparse(ast.parse(Path(module.__file__).read_text()))


def test_a_frame_crosses_both_ways_through_the_one_codec():
    host_to_supervisor, supervisor_to_host = os.pipe(), os.pipe()
    try:
        request = {"op": "run", "job": {"files": {"main.py": "print('\u2212')"}}, "id": 7}
        os.write(host_to_supervisor[1], workers.encode_frame(request))
        assert protocol.read_frame(host_to_supervisor[0]) == request
        protocol.write_frame(supervisor_to_host[1], {"ok": True, "id": 7})
        assert FrameReader(FdSource(supervisor_to_host[0])).read(time.monotonic() + 10) == {"ok": True, "id": 7}
    finally:
        for fd in (*host_to_supervisor, *supervisor_to_host):
            os.close(fd)


@pytest.mark.parametrize("status", list(statuses.ExecutionStatus))
def test_a_status_crosses_the_wire_as_the_plain_string_it_always_was(status):
    assert protocol.encode_frame({"status": status}) == protocol.encode_frame({"status": status.value})
    assert execution.ExecutionResult.from_wire({"status": status.value}).status is status


@pytest.mark.parametrize("wire", [None, "OK", "no_session", "scoring_error", 0])
def test_a_status_the_host_does_not_know_is_the_harness_failing(wire):
    with pytest.raises(SandboxError) as failure:
        execution.ExecutionResult.from_wire({"status": wire})
    assert failure.value.cause == "protocol_error"


class Chunks:
    def __init__(self, data: bytes, sizes: list[int]):
        self.data, self.sizes = data, sizes

    def read_some(self, deadline: float) -> bytes:
        size = self.sizes.pop(0) if self.sizes else len(self.data)
        chunk, self.data = self.data[: max(size, 1)], self.data[max(size, 1):]
        if not chunk:
            raise SandboxError("worker_died", "the stream closed")
        return chunk


@given(st.lists(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3), min_size=1,
                max_size=4),
       st.lists(st.integers(min_value=1, max_value=9), max_size=40))
def test_frames_read_the_same_however_the_stream_is_cut(messages, cuts):
    reader = FrameReader(Chunks(b"".join(protocol.encode_frame(m) for m in messages), cuts))
    assert [reader.read(deadline=0) for _ in messages] == messages


@pytest.mark.parametrize("stream", [b"x\n{}", b"-1\n{}", b"9" * 21, b"%d\n" % (protocol.MAX_FRAME_BYTES + 1),
                                    b"2\n{]", b"2\n[]"])
def test_a_malformed_frame_is_the_harness_failing_on_the_host(stream):
    with pytest.raises(SandboxError) as failure:
        FrameReader(Chunks(stream, [])).read(deadline=0)
    assert failure.value.cause == "protocol_error"


any_float = st.floats(allow_nan=True, allow_infinity=True)
session_values = st.recursive(st.none() | st.booleans() | st.integers() | any_float | st.text(max_size=5),
                              lambda inner: st.lists(inner, max_size=4), max_leaves=10)


def _bits(value):
    if isinstance(value, list):
        return [_bits(item) for item in value]
    return ("f64", struct.pack(">d", value)) if type(value) is float else value


@given(session_values)
def test_a_session_value_reaches_the_host_bit_for_bit(value):
    wire = values.sanitize_value(values.encode_value(value))
    assert _bits(values.decode_value(wire)) == _bits(value)


def test_the_supervisor_reads_a_requests_limits_with_the_hosts_defaults():
    assert limits.with_defaults(None) == execution.Limits().to_wire()
    assert limits.with_defaults({"wall_s": 3.0, "cpu_s": None}) == {**execution.Limits().to_wire(), "wall_s": 3.0}


def test_the_supervisor_imports_the_standard_library_alone():
    for path in IMAGE_SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in sys.stdlib_module_names, f"{path.name} imports {name}"


def test_the_image_copies_the_package_whole_and_runs_it_with_s_and_p():
    dockerfile = (IMAGE_DIR / "Dockerfile").read_text()
    assert "COPY supervisor/ /opt/gym-sysmath/image/supervisor/\n" in dockerfile
    copied = [line.split()[1:-1] for line in dockerfile.splitlines()
              if line.startswith("COPY ") and line.endswith(" /opt/gym-sysmath/image/")]
    assert copied == [sorted(path.name for path in IMAGE_DIR.glob("*.py"))]  # __init__.py among them
    entrypoint = 'ENTRYPOINT ["/usr/bin/tini", "--", "python3", "-s", "-P", "/opt/gym-sysmath/image/run_supervisor.py"]'
    steps = daemon.dockerfile_steps(dockerfile)  # the default's stage ends with it; the variant's inherits it
    assert [step.instruction for step in steps if step.stage == daemon.DEFAULT_IMAGE.target][-1] == entrypoint
    assert [step.instruction for step in steps if step.instruction.startswith("ENTRYPOINT")] == [entrypoint]
    context = daemon._context_files()
    assert {f"supervisor/{path.name}" for path in PACKAGE_DIR.glob("*.py")} <= set(context)
    assert {"__init__.py", "run_supervisor.py", "toolchains.py", "Dockerfile"} <= set(context)
    assert workers.supervisor_path() == str(IMAGE_DIR / "run_supervisor.py")


def test_the_content_hash_covers_the_package_and_ignores_caches(tmp_path, monkeypatch):
    copy = tmp_path / "sandbox"
    shutil.copytree(IMAGE_DIR, copy / "image", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(daemon.resources, "files", lambda package: copy / "image")
    before = daemon.content_hash()
    (copy / "image" / "supervisor" / "__pycache__").mkdir()
    (copy / "image" / "supervisor" / "__pycache__" / "service.cpython-311.pyc").write_bytes(b"\0")
    (copy / "image" / "supervisor" / ".service.py.swp").write_bytes(b"\0")
    assert daemon.content_hash() == before
    (copy / "image" / "supervisor" / "service.py").write_text("# changed\n")
    assert daemon.content_hash() != before


def test_the_supervisor_runs_from_a_copy_of_the_folder_without_gym_sysmath(tmp_path):
    # -I -S: no site-packages, so nothing of gym_sysmath (nor of the venv) is importable
    folder = tmp_path / "image"
    shutil.copytree(IMAGE_DIR, folder, ignore=shutil.ignore_patterns("__pycache__"))
    scratch = tmp_path / "scratch"
    supervisor = subprocess.Popen([sys.executable, "-I", "-S", str(folder / "run_supervisor.py"),
                                   "--scratch", str(scratch), "--uid-base", "61000"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        reply, errors = supervisor.communicate(protocol.encode_frame({"op": "ping", "id": 1}), timeout=30)
        assert reply.startswith(b"%d\n" % (len(reply) - reply.index(b"\n") - 1)), errors.decode()
        done, message = protocol.take_frame(bytearray(reply))
        assert done and message["protocol"] == protocol.PROTOCOL_VERSION and message["id"] == 1
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()

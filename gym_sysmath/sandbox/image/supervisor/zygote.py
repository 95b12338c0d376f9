"""The zygote: a clean process, forked before the first request, that forks the Python jobs and
sessions, so that none of them holds the supervisor's memory."""

from __future__ import annotations

import json
import os
import socket

from .child import enter_sandbox, report_setup_failure, run_python_in_child, session_worker, write_files
from .processes import reap_children
from .runtime import SetupError


class Zygote:
    """A clean process, forked before the first request, that forks in-interpreter Python.

    Python jobs and sessions run in a fork of a warm interpreter (milliseconds instead of a
    fresh ``python3``). A fork of the supervisor itself would hand the job the supervisor's
    memory: earlier requests' code (other rollouts' solutions) and the build cache's table.
    The zygote never receives code: it forks on request, and the child reads its own code
    from a pipe. It reaps what it forks and reports each job's exit status and CPU time.
    """

    def __init__(self) -> None:
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            self.sock.close()
            _zygote_main(theirs)
        theirs.close()

    def _spawn(self, header: dict, fds: tuple[int, ...]) -> int:
        try:
            socket.send_fds(self.sock, [json.dumps(header).encode()], list(fds))
            reply = json.loads(self.sock.recv(4096) or b"{}")
        except (OSError, ValueError) as exc:
            raise SetupError(f"the zygote is gone: {exc}") from exc
        if "pid" not in reply:
            raise SetupError(f"the zygote could not fork: {reply.get('error', 'no reply')}")
        return int(reply["pid"])

    def spawn_job(self, header: dict, fds: tuple[int, int, int, int], spec: dict) -> ZygoteWaiter:
        spec_r, spec_w = os.pipe()
        try:
            pid = self._spawn({"kind": "job", **header}, (*fds, spec_r))
        finally:
            os.close(spec_r)
        with os.fdopen(spec_w, "wb") as pipe:
            try:
                pipe.write(json.dumps(spec).encode())
            except BrokenPipeError:
                pass  # the child died before reading: its setup pipe says why
        return ZygoteWaiter(self, pid)

    def spawn_session(self, header: dict, fds: tuple[int, int, int, int, int]) -> int:
        return self._spawn({"kind": "session", **header}, fds)


class ZygoteWaiter:
    """Waits for a job the zygote forked: the zygote's exit report wakes us and carries the status."""

    def __init__(self, zygote: Zygote, pid: int):
        self.zygote = zygote
        self.pid = pid
        self.wake_fd = zygote.sock.fileno()

    def _status(self, data: bytes) -> tuple[int, float, int]:
        report = json.loads(data or b"{}")
        if report.get("pid") != self.pid:
            raise SetupError(f"the zygote reported {report!r} for job {self.pid}")
        return report["status"], report["cpu_s"], report["maxrss_kb"]

    def check(self) -> tuple[int, float, int] | None:
        try:
            data = self.zygote.sock.recv(4096, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        return self._status(data)

    def block(self) -> tuple[int, float, int]:
        return self._status(self.zygote.sock.recv(4096, 0))

    def close(self) -> None:
        self.wake_fd = -1  # the socket is the zygote's, not ours to close


def _zygote_main(sock: socket.socket) -> None:
    """The zygote's loop: fork on request; never read a job's code; report job exits."""
    keep = sock.fileno()
    os.closerange(3, keep)
    os.closerange(keep + 1, 65536)
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 65536, 8)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)
        reap_children()  # sessions that ended, up to this request: no zombie outlives its session by a job
        header = json.loads(data)
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"error": str(exc)}).encode())
            continue
        if pid == 0:
            sock.close()
            if header["kind"] == "job":
                _zygote_job_child(header, fds)
            else:
                _zygote_session_child(header, fds)
            os._exit(127)
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"pid": pid}).encode())
        if header["kind"] == "job":
            _, raw, usage = os.wait4(pid, 0)
            sock.send(json.dumps({"pid": pid, "status": raw, "cpu_s": usage.ru_utime + usage.ru_stime,
                                  "maxrss_kb": usage.ru_maxrss}).encode())


def _zygote_job_child(header: dict, fds: list[int]) -> None:
    in_r, out_w, err_w, setup_w, spec_r = fds
    report = setup_w
    try:
        with os.fdopen(spec_r, "rb") as pipe:
            spec = json.loads(pipe.read())
        (report,) = enter_sandbox(header["uid"], header["workdir"], header["limits"], (in_r, out_w, err_w),
                                   keep=(setup_w,), groups=tuple(header.get("groups", ())))
        if spec["files"]:
            write_files(spec["files"])
        os.close(report)
    except BaseException as exc:  # before the job's code ran: the sandbox's failure
        report_setup_failure(report, exc)
    os._exit(run_python_in_child(spec["python"], "main.py", []))


def _zygote_session_child(header: dict, fds: list[int]) -> None:
    null_r, out_w, err_w, ctrl_r, status_w = fds
    try:
        ctrl, status = enter_sandbox(header["uid"], header["workdir"], header["limits"], (null_r, out_w, err_w),
                                      keep=(ctrl_r, status_w))
        session_worker(ctrl, status)
    except BaseException:
        pass
    os._exit(1)


ZYGOTE: Zygote  # started by main() before the first request

"""Counted runs and pid counts: a job's instructions counted by cachegrind, sealed against exec,
and the pid namespace's own counters, which show whether a run made any process or thread."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import secrets
import stat
import struct

from ..toolchains import PYTHON
from . import runtime
from .processes import read_to_end
from .runtime import IS_ROOT

#: A counted job runs its program under cachegrind with the cache and branch simulations off: it
#: counts the instructions the program executes (Ir), which the machine's load does not change.
VALGRIND_LAUNCHER = "/usr/bin/valgrind"
VALGRIND_LIB = "/usr/libexec/valgrind"
COUNT_FILE = ".instructions"  # cachegrind's output, written in the job's dir when the program ends
COUNT_FILE_MAX_BYTES = 64 * 1024 * 1024
COUNTED_PYTHON = list(PYTHON.run)  # a fresh interpreter: the zygote cannot be counted
#: Run first, uncounted, on a counted Python job's other modules (the same interpreter and
#: flags, on py_compile): the count then imports bytecode.
PRECOMPILE_PYTHON = [*PYTHON.run[:-1], "-m", "py_compile"]
#: Per machine, for ``exec_sealed``: AUDIT_ARCH, the x32 syscall bit (or 0), execve, execveat.
_SEAL_SYSCALLS = {"x86_64": (0xC000003E, 0x40000000, 59, 322), "aarch64": (0xC00000B7, 0, 221, 281)}
#: Per machine: clone, clone3, the other process-making calls (fork, vfork), and each call that
#: sends a signal with the offset of its signal argument in seccomp_data (args[i] at 16 + 8i):
#: kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo, pidfd_send_signal.
_PROCESS_SYSCALLS = {
    "x86_64": (56, 435, (57, 58), ((62, 24), (200, 24), (234, 32), (129, 24), (297, 32), (424, 24))),
    "aarch64": (220, 435, (), ((129, 24), (130, 24), (131, 32), (138, 24), (240, 32), (424, 24))),
}
CLONE_THREAD = 0x00010000
#: Per machine: setrlimit and prlimit64. A counted program may not set its own RLIMIT_CPU (whose
#: hard limit SIGKILLs it, which would pass for a kill from outside), RLIMIT_FSIZE (which makes
#: cachegrind's own write stop short, leaving a line of the program's choosing last in the
#: count file) or RLIMIT_RTTIME (SIGKILL again).
_RLIMIT_SYSCALLS = {"x86_64": (160, 302), "aarch64": (164, 261)}
GUARDED_RLIMITS = (0, 1, 15)  # RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_RTTIME
#: A counted Python job's dir: always the same path, because CPython's string hashing sees it
#: (the path is a key in its import caches), and a random name moved the count by a few hundred.
#: Jobs of one supervisor run one at a time and each job's dir is removed before the next.
COUNTED_JOB_DIR = "job-counted"
_VALGRIND_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}
#: Why a counted job is refused where the counter is not installed (the default image).
NO_COUNTER = ("this sandbox has no instruction counter: counted runs need the Docker backend and the image's "
              "performance variant (`gym-sysmath sandbox build --with-performance`)")


def counter_installed() -> bool:
    """Whether valgrind is here: only the image's ``performance`` target installs it."""
    return os.path.isfile(VALGRIND_LAUNCHER) and os.path.isdir(VALGRIND_LIB)


def counted_argv(program: list[str], workdir: str) -> list[str]:
    """``program`` under cachegrind. Children are not followed: a counted job cannot exec
    (``exec_sealed``), and one that made a process or a thread gets no count (``StageRunner``).
    No gdbserver: it is of no use here, and with it Python runs were killed now and then."""
    return [VALGRIND_LAUNCHER, "--tool=cachegrind", "-q", "--cache-sim=no", "--branch-sim=no",
            "--trace-children=no", "--vgdb=no", f"--cachegrind-out-file={os.path.join(workdir, COUNT_FILE)}", *program]


def exec_sealed(argv: list[str], env: dict) -> None:
    """Exec valgrind's tool for ``argv`` so that neither it nor its program can ever exec again,
    make another process, or send SIGKILL.

    A counted program that could exec would run the rest of its work uncounted (a native
    program after valgrind) and could then write a count of its choosing. A seccomp filter
    installed here refuses ``execveat`` and lets ``execve`` through only for a filename pointer
    drawn at random in this process, which the next program cannot learn; valgrind's launcher,
    which would exec once more, is skipped (the tool runs with the variables it would set).
    The same filter refuses ``fork``, ``vfork`` and a ``clone`` without ``CLONE_THREAD`` (EPERM)
    and ``clone3``, whose flags it cannot read (ENOSYS, so libc falls back to ``clone``): work in
    a child would be outside the count, and the pid counter (``StageRunner``) that sees a child
    afterwards can be wrapped on a host with a small ``pid_max``. Threads get through and void
    the count there. SIGKILL cannot be sent at all: a counted run that killed itself would be
    taken for one killed by someone else (envs/compgeom.py retries those, then calls the harness
    broken); nor can it set the limits that would get it killed or cut cachegrind's write short
    (``GUARDED_RLIMITS``; querying them is fine).
    """
    machine = platform.machine()
    if machine not in _SEAL_SYSCALLS:
        raise OSError(f"instruction counts are not supported on {machine}")
    audit_arch, x32_bit, nr_execve, nr_execveat = _SEAL_SYSCALLS[machine]
    nr_clone, nr_clone3, forks, signal_senders = _PROCESS_SYSCALLS[machine]
    tool = os.path.join(VALGRIND_LIB, f"cachegrind-{_VALGRIND_ARCH[machine]}-linux")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    libc.syscall.restype = ctypes.c_long
    path = tool.encode() + b"\0"
    for _ in range(32):  # a random page in [2^40, 2^46), at a random offset
        page = ((1 << 28) + secrets.randbelow((1 << 34) - (1 << 28))) << 12
        mapped = libc.mmap(page, 4096, 3, 0x22 | 0x100000, -1, 0)  # RW, private|anonymous|FIXED_NOREPLACE
        if mapped == page:
            break
    else:
        raise OSError("no page for the exec seal")
    address = page + secrets.randbelow(4096 - len(path))
    ctypes.memmove(address, path, len(path))
    deny, allow = 0x00050000 | errno.EPERM, 0x7FFF0000  # SECCOMP_RET_ERRNO | EPERM, SECCOMP_RET_ALLOW
    no_such_call = 0x00050000 | errno.ENOSYS
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF LD|W|ABS, JMP|JEQ|K, JMP|JGE|K, JMP|JSET|K, RET|K
    processes = [(jeq, 0, 1, nr_clone3), (ret, 0, 0, no_such_call)]
    for nr in forks:
        processes += [(jeq, 0, 1, nr), (ret, 0, 0, deny)]
    processes += [(jeq, 0, 4, nr_clone), (ld, 0, 0, 16), (jset, 1, 0, CLONE_THREAD), (ret, 0, 0, deny),
                  (ret, 0, 0, allow)]
    for nr, offset in signal_senders:  # the signal argument's low word: SIGKILL is refused
        processes += [(jeq, 0, 4, nr), (ld, 0, 0, offset), (jeq, 0, 1, 9), (ret, 0, 0, deny), (ret, 0, 0, allow)]
    nr_setrlimit, nr_prlimit64 = _RLIMIT_SYSCALLS[machine]
    cpu, fsize, rttime = GUARDED_RLIMITS
    processes += [  # setrlimit(resource, ...) of a guarded resource is refused
        (jeq, 0, 6, nr_setrlimit), (ld, 0, 0, 16),
        (jeq, 2, 0, cpu), (jeq, 1, 0, fsize), (jeq, 0, 1, rttime), (ret, 0, 0, deny), (ret, 0, 0, allow)]
    processes += [  # prlimit64(pid, resource, new, old) of a guarded resource with a new value is refused
        (jeq, 0, 10, nr_prlimit64), (ld, 0, 0, 24),
        (jeq, 2, 0, cpu), (jeq, 1, 0, fsize), (jeq, 0, 4, rttime),
        (ld, 0, 0, 32), (jeq, 0, 3, 0), (ld, 0, 0, 36), (jeq, 0, 1, 0), (ret, 0, 0, allow), (ret, 0, 0, deny)]
    program = [  # (code, jt, jf, k), offsets into seccomp_data: nr 0, arch 4, args[0] 16 (low) and 20
        (ld, 0, 0, 4), (jeq, 1, 0, audit_arch), (ret, 0, 0, deny),
        (ld, 0, 0, 0), (jge, 0, 1, x32_bit or 0xFFFFFFFF), (ret, 0, 0, deny),
        (jeq, 0, 1, nr_execveat), (ret, 0, 0, deny),
        *processes,
        (jeq, 1, 0, nr_execve), (ret, 0, 0, allow),
        (ld, 0, 0, 16), (jeq, 0, 3, address & 0xFFFFFFFF),
        (ld, 0, 0, 20), (jeq, 0, 1, address >> 32), (ret, 0, 0, allow), (ret, 0, 0, deny),
    ]
    code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *op) for op in program))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program), ctypes.addressof(code))
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # NO_NEW_PRIVS, SECCOMP
        raise OSError(ctypes.get_errno(), "cannot install the exec seal")
    c_argv = (ctypes.c_char_p * (len(argv) + 1))(*[a.encode() for a in argv], None)
    environment = {**env, "VALGRIND_LAUNCHER": VALGRIND_LAUNCHER, "VALGRIND_LIB": VALGRIND_LIB}
    c_env = (ctypes.c_char_p * (len(environment) + 1))(*[f"{k}={v}".encode() for k, v in environment.items()], None)
    libc.syscall(ctypes.c_long(nr_execve), ctypes.c_void_p(address), c_argv, c_env)
    raise OSError(ctypes.get_errno(), f"cannot run {tool}")


def read_count(workdir: str, uid: int) -> int | None:
    """The instructions cachegrind counted, or None when its file is not what cachegrind leaves.

    Cachegrind writes the file when the program has ended (creating it 0600, or truncating the
    one there). A program could only leave its own text there by making that write fail: a
    symlink, a FIFO or a directory in its place, a file without write permission (the mode
    check), or a write cut short, by a size limit (refused by ``exec_sealed``) or a full disk
    (``service`` drops the count then), right after a line it planted in a symbol's name. So the
    whole file must parse as cachegrind's (``parse_count``).
    """
    try:
        fd = os.open(os.path.join(workdir, COUNT_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if (not stat.S_ISREG(info.st_mode) or stat.S_IMODE(info.st_mode) != 0o600
                or (IS_ROOT and info.st_uid != uid) or info.st_size > COUNT_FILE_MAX_BYTES):
            return None
        text = read_to_end(os.dup(fd))
    finally:
        os.close(fd)
    return parse_count(text)


def parse_count(text: bytes) -> int | None:
    """The summary of a whole cachegrind file counting Ir alone, or None unless every line is
    cachegrind's: its header, then ``fl=``/``fn=`` names and ``<line> <count>`` rows, then one
    ``summary:`` line, last, equal to the sum of the rows. A name holding a newline can add
    rows of its own (only raising the sum) but cannot end the file or change the summary."""
    lines = text.split(b"\n")
    if len(lines) < 3 or lines.pop() != b"" or not lines[-1].startswith(b"summary: "):
        return None
    summary = lines.pop()[len(b"summary: "):]
    header = [line for line in lines[:5] if line.startswith((b"desc: ", b"cmd: "))]
    if not summary.isdigit() or lines[len(header):len(header) + 1] != [b"events: Ir"]:
        return None
    total = 0
    for line in lines[len(header) + 1:]:
        if line.startswith((b"fl=", b"fn=")):
            continue
        row = line.split(b" ")
        if len(row) != 2 or not (row[0].isdigit() and row[1].isdigit()):
            return None
        total += int(row[1])
    return total if total == int(summary) else None


#: Whether ``ns_last_pid`` was seen to move when the zygote was forked (a runtime such as gVisor
#: may not keep it); without it every turn takes the full stop.
PID_COUNTER_WORKS = False
_PIDS_CURRENT = ("/sys/fs/cgroup/pids/pids.current", "/sys/fs/cgroup/pids.current")


def read_last_pid() -> int | None:
    try:
        with open("/proc/sys/kernel/ns_last_pid") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return None


def namespace_last_pid() -> int | None:
    """The last pid this pid namespace handed out, or None where it proves nothing (a host)."""
    return read_last_pid() if runtime.OWN_PID_NAMESPACE and PID_COUNTER_WORKS else None


def only_these_run(pids: tuple[int, ...]) -> bool:
    """Whether the container's pids cgroup counts exactly the tasks of ``pids``: no other
    process or thread exists (a check that pid wrap-around cannot fool; False when unknown)."""
    for path in _PIDS_CURRENT:
        try:
            with open(path) as handle:
                current = int(handle.read())
            break
        except (OSError, ValueError):
            continue
    else:
        return False
    try:
        return current == sum(len(os.listdir(f"/proc/{pid}/task")) for pid in pids)
    except OSError:
        return False

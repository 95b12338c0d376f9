"""Splicing an attack into a known-good CompGeom candidate, in each language.

The attack runs before the candidate does any work: at import in Python, during static
initialisation in C++, and on the first call of the primitive in Rust (Rust has no code
before ``main``). If the attack achieves nothing, the candidate then answers correctly, so
an attack that the sandbox stops shows up as its own verdict and one that it shrugs off as
``correct``. A probe that *succeeds* at something it must not do exits with ``PROBE_HIT``.
"""

from __future__ import annotations

import base64
import functools
import re
import zlib

from gym_sysmath.tasks import compgeom

PRIMITIVE = "segment2_segment2"
#: Exit status of a probe that managed what the sandbox should have prevented.
PROBE_HIT = 99

#: Lists the processes in the worker that are not root's (the supervisor, the zygote) and not
#: the probe itself: one-shot jobs all run as one uid, so the probe's own uid counts too. A
#: zombie whose parent has not reaped it yet runs nothing and is not a leftover; a zombie
#: thread-group leader whose other threads still run is one.
LEFTOVER_PROBE = """\
import os
left = []
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        uid = os.stat('/proc/' + pid).st_uid
        command = open('/proc/' + pid + '/cmdline', 'rb').read()[:60]
        state = open('/proc/' + pid + '/stat').read().rsplit(')', 1)[1].split()[0]
        threads = len(os.listdir('/proc/' + pid + '/task'))
    except OSError:
        continue
    if uid != 0 and int(pid) != os.getpid() and (state != 'Z' or threads > 1):
        left.append((pid, uid, command))
print(left)
"""

#: The C library functions the Rust payloads call (Rust's std has no fork, kill or ptrace).
RUST_LIBC = """
    extern "C" {
        fn close(fd: i32) -> i32;
        fn fork() -> i32;
        fn setsid() -> i32;
        fn signal(signum: i32, handler: usize) -> usize;
        fn pause() -> i32;
        fn sleep(seconds: u32) -> u32;
        fn wait(status: *mut i32) -> i32;
        fn kill(pid: i32, sig: i32) -> i32;
        fn ptrace(request: i64, pid: i32, addr: usize, data: usize) -> i64;
        fn getpid() -> i32;
        fn _exit(code: i32) -> !;
    }
"""

CPP_HEADERS = """
#include <arpa/inet.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <netdb.h>
#include <netinet/in.h>
#include <string>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>
"""


def task_id(language: str) -> str:
    return f"{PRIMITIVE}/{language}"


def good_source(language: str) -> str:
    return compgeom.reference_solution(compgeom.load_tasks([PRIMITIVE], [language])[0])


def inject(language: str, payload: str) -> str:
    """The known-good candidate in ``language`` with ``payload`` run before its work."""
    source = good_source(language)
    if language == "python":
        return f"{source}\n\n# ---- attack ----\n{payload}\n"
    if language == "cpp":
        return (f"{source}\n{CPP_HEADERS}\nnamespace hostile {{\ninline int attack() {{\n{payload}\n"
                "    return 0;\n}\ninline const int launched = attack();\n}  // namespace hostile\n")
    if language == "rust":
        signature = re.search(rf"pub fn {PRIMITIVE}\([^{{]*\{{", source)
        assert signature is not None, "the Rust reference changed shape"
        call = "\n    static ONCE: std::sync::Once = std::sync::Once::new();\n    ONCE.call_once(hostile_attack);\n"
        source = source[:signature.end()] + call + source[signature.end():]
        return f"{source}\n#[allow(unused, unreachable_code)]\nfn hostile_attack() {{\n{payload}\n}}\n"
    raise ValueError(f"unknown language {language!r}")


def append(language: str, text: str) -> str:
    """The known-good candidate with ``text`` added at file scope (for attacks on the compiler)."""
    return f"{good_source(language)}\n{text}\n"


def job_files(language: str, source: str) -> dict[str, str]:
    """The sandbox job's files for ``source`` as the candidate (harness included)."""
    task = compgeom.load_tasks([PRIMITIVE], [language])[0]
    return compgeom.job_files(task, source)


# ---- cross-rollout attacks (tests/hostile/test_cross_rollout.py) ----

#: A C program (built once by a toolchain job, ``escape_hopper_elf``; a tool turn writes the
#: binary) that a tool turn runs to leave a process running after the turn: it forks away,
#: waits until the turn writes ``ending``, then forks and exits in a tight loop (so a single
#: /proc scan at the end of the turn can miss it) until the session process is stopped, and
#: then runs ``argv[2:]``. It gives up after 40 s, or when the session is gone.
ESCAPE_HOPPER_C = r"""
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static char state_of(const char* pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    FILE* f = fopen(path, "r");
    if (!f) return 'X';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char* end = strrchr(buf, ')');
    return end && end[1] && end[2] ? end[2] : 'X';
}
int main(int argc, char** argv) {
    if (argc < 3 || fork() != 0) return 0;
    setsid();
    time_t start = time(0);
    while (access("ending", F_OK) != 0) { if (time(0) - start > 30) _exit(0); usleep(1000); }
    for (char state; (state = state_of(argv[1])) != 'T'; ) {
        if (state == 'X' || state == 'Z' || time(0) - start > 40) _exit(0);  /* the session is gone */
        if (fork() != 0) _exit(0);
    }
    execvp(argv[2], argv + 2);
    _exit(1);
}
"""


@functools.cache
def escape_hopper_elf() -> str:
    """``ESCAPE_HOPPER_C`` built (stripped, zlib-compressed, base64): a tool turn has no compiler
    (tests/hostile/test_no_toolchain_in_csapp_turns.py), so the turn writes this binary itself,
    as an agent that knows the bytes of a program could. Built once, by a host-asked toolchain job."""
    from gym_sysmath.sandbox import Job, Sandbox

    build = (f"import base64, subprocess, sys, zlib\nopen('hop.c', 'w').write({ESCAPE_HOPPER_C!r})\n"
             "subprocess.run(['gcc', '-O2', '-s', '-o', 'hop', 'hop.c'], check=True)\n"
             "sys.stdout.write(base64.b64encode(zlib.compress(open('hop', 'rb').read(), 9)).decode())\n")
    box = Sandbox("docker", pool_size=1)
    try:
        built = box.run(Job("python", {"main.py": build}, toolchain=True))
    finally:
        box.close()
    assert built.ok and built.stdout, built
    zlib.decompress(base64.b64decode(built.stdout))  # whole
    return built.stdout


def probe_turn(probe: str, seconds: float, *, escape: bool = True) -> str:
    """A tool turn that runs ``probe`` (Python defining ``probe() -> str | None``) for ``seconds``
    in the foreground, exiting with ``PROBE_HIT`` on a hit, and (with ``escape``) also leaves it
    running after the turn in a process that tries to outlive the turn's sweep, recording hits
    in ``hits``: read them with ``CHECK_HITS`` in a later turn."""
    background = (f"import os, time\n{probe}\ndeadline = time.time() + 20\n"
                  "while time.time() < deadline and not os.path.exists('stop'):\n"
                  "    found = probe()\n    if found:\n"
                  "        with open('hits', 'a') as out:\n            out.write(str(found) + '\\n')\n"
                  "        break\n    time.sleep(0.005)\n")
    launch = ""
    if escape:
        launch = ("import base64, subprocess, zlib\n"
                  f"open('hop', 'wb').write(zlib.decompress(base64.b64decode({escape_hopper_elf()!r})))\n"
                  "os.chmod('hop', 0o700)\n"
                  f"open('probe_bg.py', 'w').write({background!r})\n"
                  "for stale in ('ending', 'stop', 'hits'):\n"
                  "    if os.path.exists(stale):\n        os.remove(stale)\n"
                  "subprocess.run(['./hop', str(os.getpid()), 'python3', 'probe_bg.py'], check=True)\n")
    return (f"import os, sys, time\n{launch}{probe}\n"
            f"_end = time.time() + {seconds}\n"
            "while time.time() < _end:\n    _found = probe()\n    if _found:\n"
            f"        print('PROBE HIT', _found)\n        sys.stdout.flush()\n        os._exit({PROBE_HIT})\n"
            "    time.sleep(0.005)\n"
            + ("open('ending', 'w').close()\ntime.sleep(0.05)\n" if escape else ""))


#: The turn after ``probe_turn``: stop the left-behind probe and fail if it found anything.
CHECK_HITS = f"""\
import os, sys
open('stop', 'w').close()
if os.path.exists('hits'):
    print('PROBE HIT (between turns)', open('hits').read()[:500])
    sys.stdout.flush()
    os._exit({PROBE_HIT})
"""


def candidate_probe(probe: str, seconds: float) -> str:
    """A Python candidate payload that runs ``probe`` for ``seconds`` and exits ``PROBE_HIT``
    on a hit (the candidate then answers correctly if nothing was found)."""
    return (f"import os, sys, time\n{probe}\n_end = time.time() + {seconds}\n"
            "while time.time() < _end:\n    if probe():\n"
            f"        os._exit({PROBE_HIT})\n    time.sleep(0.005)\n")


#: ``others()``: pids (as strings) of processes owned neither by root nor by the caller's uid.
OTHERS_PY = """\
def others():
    me = os.getuid()
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            owner = os.stat('/proc/' + pid).st_uid
        except OSError:
            continue
        if owner not in (0, me):
            yield pid
"""

#: Another rollout's job directory named in any process's command line (the assembler's and
#: linker's temporaries live in the job dir, since TMPDIR is the job dir).
JOB_DIRS_PY = """\
import re
def job_dirs():
    me = os.getuid()
    found = set()
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            if os.stat('/proc/' + pid).st_uid == me:
                continue
            command = open('/proc/' + pid + '/cmdline', 'rb').read()
        except OSError:
            continue
        found.update(m.decode() for m in re.findall(rb'/scratch/[A-Za-z0-9_.-]+', command))
    return found - {os.getcwd()}
"""

#: Probes (``probe() -> str | None``) for the attacks below.
READ_CMDLINE_PROBE = "import os\n" + JOB_DIRS_PY + """
def probe():
    dirs = job_dirs()
    return ', '.join(sorted(dirs)) if dirs else None
"""

STEAL_BINARY_PROBE = "import os\n" + JOB_DIRS_PY + """
def probe():
    for folder in job_dirs():
        for name in ('prog', 'main.cpp', 'main.rs', 'main.py', 'harness.py'):
            try:
                with open(os.path.join(folder, name), 'rb') as stolen:
                    data = stolen.read()
            except OSError:
                continue
            if data:
                with open('stolen-' + name, 'wb') as copy:
                    copy.write(data)
                return f'{folder}/{name}: {len(data)} bytes'
    return None
"""

SIGNAL_PROBE = "import os, ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n" + OTHERS_PY + """
def probe():
    for pid in others():
        try:
            os.kill(int(pid), 0)
            return f'may signal {pid}'
        except OSError:
            pass
        if libc.ptrace(16, int(pid), 0, 0) == 0:  # PTRACE_ATTACH
            return f'attached to {pid}'
        for part in ('mem', 'environ', 'fd/0', 'cwd/prog'):
            try:
                with open('/proc/' + pid + '/' + part, 'rb') as handle:
                    handle.read(1)
                return f'read /proc/{pid}/{part}'
            except OSError:
                pass
    return None
"""

#: Runs between turns only if the turn-end sweep missed it: its heartbeat says when it ran.
BETWEEN_TURNS_SPINNER = """\
import os, time
def probe():
    with open('beats', 'a') as beats:
        beats.write(f'{time.time()}\\n')
    spin = time.time() + 0.05
    while time.time() < spin:
        pass
    return None
"""

#: Marker the message attacks leave behind and look for (a reader sees it only through a leak).
LEAK_TOKEN = "gsmxrleak"
LEAK_KEY = 0x6573  # System V IPC key

#: A writer rollout leaves ``LEAK_TOKEN`` everywhere a process can: files (its own directory
#: opened to all, and every other directory it can write), abstract unix sockets of every kind
#: (held open between turns), System V shared memory, message queues and semaphores, a POSIX
#: message queue, its environment, the user keyring, and a process named after the token.
LEAK_WRITER = f"""\
import ctypes, os, socket, subprocess
TOKEN = {LEAK_TOKEN!r}
libc = ctypes.CDLL(None, use_errno=True)
left = []
try:
    os.chmod('.', 0o777)
except OSError:
    pass
for folder in (os.getcwd(), '/scratch', '/tmp', '/dev/shm', '/var/tmp', '/run', '/run/lock', '/dev/mqueue', '/'):
    try:
        path = os.path.join(folder, TOKEN + '.txt')
        with open(path, 'w') as out:
            out.write(TOKEN)
        os.chmod(path, 0o666)
        left.append(path)
    except OSError:
        pass
held = []
for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
    try:
        sock = socket.socket(socket.AF_UNIX, kind)
        sock.bind(b'\\0' + TOKEN.encode() + str(int(kind)).encode())
        if kind != socket.SOCK_DGRAM:
            sock.listen(64)
        held.append(sock)
        left.append('abstract socket ' + str(int(kind)))
    except OSError:
        pass
if libc.shmget({LEAK_KEY}, 4096, 0o1666) >= 0:
    left.append('shm')
if libc.msgget({LEAK_KEY}, 0o1666) >= 0:
    left.append('msg')
if libc.semget({LEAK_KEY}, 1, 0o1666) >= 0:
    left.append('sem')
try:
    librt = ctypes.CDLL('librt.so.1', use_errno=True)
    if librt.mq_open(('/' + TOKEN).encode(), os.O_CREAT | os.O_RDWR, 0o666, None) >= 0:
        left.append('mq')
except OSError:
    pass
os.environ['GSMXR'] = TOKEN
os.putenv('GSMXR', TOKEN)
if libc.syscall(248, b'user', TOKEN.encode(), TOKEN.encode(), len(TOKEN), -4) >= 0:  # add_key to @u
    left.append('key')
named = subprocess.Popen(['sleep', '30'], env={{'GSMXR': TOKEN}}, cwd='/')
os.environ.setdefault('PATH', '/usr/bin:/bin')
print('left', left)
"""

#: ``probe()`` of a reader rollout: ``LEAK_TOKEN`` anywhere it can look.
LEAK_READER = f"""\
import ctypes, os, socket
TOKEN = {LEAK_TOKEN!r}
libc = ctypes.CDLL(None, use_errno=True)
def probe():
    try:
        with open('/proc/net/unix', 'rb') as table:
            if TOKEN.encode() in table.read():
                return 'an abstract socket name'
    except OSError:
        pass
    for kind in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET, socket.SOCK_DGRAM):
        sock = socket.socket(socket.AF_UNIX, kind)
        try:
            sock.connect(b'\\0' + TOKEN.encode() + str(int(kind)).encode())
            return 'connected to the writer socket ' + str(int(kind))
        except OSError:
            pass
        finally:
            sock.close()
    for folder in ('/scratch', '/tmp', '/dev/shm', '/var/tmp', '/run', '/run/lock', '/dev/mqueue', '/', os.getcwd()):
        if os.path.exists(os.path.join(folder, TOKEN + '.txt')):
            return 'a file in ' + folder
        try:
            if any(TOKEN in name for name in os.listdir(folder)):
                return 'a name in ' + folder
        except OSError:
            pass
    for call, args in (('shmget', ({LEAK_KEY}, 0, 0)), ('msgget', ({LEAK_KEY}, 0)), ('semget', ({LEAK_KEY}, 0, 0))):
        if getattr(libc, call)(*args) >= 0:
            return 'System V ' + call
    for table in ('shm', 'msg', 'sem'):
        try:
            with open('/proc/sysvipc/' + table) as rows:
                if len(rows.read().splitlines()) > 1:
                    return 'a System V ' + table + ' object'
        except OSError:
            pass
    try:
        librt = ctypes.CDLL('librt.so.1', use_errno=True)
        if librt.mq_open(('/' + TOKEN).encode(), os.O_RDONLY) >= 0:
            return 'a POSIX message queue'
    except OSError:
        pass
    if libc.syscall(250, 0, -4, 0) >= 0 and libc.syscall(249, b'user', TOKEN.encode(), None, 0) >= 0:
        return 'a key in the user keyring'  # KEYCTL_GET_KEYRING_ID, request_key
    if TOKEN in repr(dict(os.environ)):
        return 'the environment'
    for pid in filter(str.isdigit, os.listdir('/proc')):
        for part in ('cmdline', 'environ'):
            try:
                with open('/proc/' + pid + '/' + part, 'rb') as handle:
                    if TOKEN.encode() in handle.read():
                        return f'/proc/{{pid}}/{{part}}'
            except OSError:
                pass
    return None
"""

"""Splicing an attack into a known-good CompGeom candidate, in each language.

The attack runs before the candidate does any work: at import in Python, during static
initialisation in C++, and on the first call of the primitive in Rust (Rust has no code
before ``main``). If the attack achieves nothing, the candidate then answers correctly, so
an attack that the sandbox stops shows up as its own verdict and one that it shrugs off as
``correct``. A probe that *succeeds* at something it must not do exits with ``PROBE_HIT``.
"""

from __future__ import annotations

import re

from gym_sysmath.tasks import compgeom

PRIMITIVE = "segment2_segment2"
#: Exit status of a probe that managed what the sandbox should have prevented.
PROBE_HIT = 99

#: Lists the processes in the worker that are not root's (the supervisor, the zygote) and not
#: the probe itself: one-shot jobs all run as one uid, so the probe's own uid counts too.
LEFTOVER_PROBE = """\
import os
left = []
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        uid = os.stat('/proc/' + pid).st_uid
        command = open('/proc/' + pid + '/cmdline', 'rb').read()[:60]
    except OSError:
        continue
    if uid != 0 and int(pid) != os.getpid():
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

"""Reward hacking: the answers are nowhere a job can look, forged records and early exits are
graded as what they are, and nothing a job prints can pass for the supervisor."""

from __future__ import annotations

import json

import pytest

from gym_sysmath.sandbox import Job
from gym_sysmath.tasks import compgeom
from gym_sysmath.verdicts import Verdict
from tests.hostile.conftest import ALL_PATHS, CODE_LANGUAGES
from tests.hostile.payloads import PRIMITIVE, PROBE_HIT

pytestmark = pytest.mark.docker


HIDDEN = compgeom.load_tasks([PRIMITIVE], ["python"])[0].hidden_cases
#: Strings that exist only on the host: hidden case ids and an expected result. They are
#: written reversed into the scanners so that the scanner's own source never matches.
NEEDLES = [HIDDEN[0].id, HIDDEN[-1].id, json.dumps(HIDDEN[5].expected["t0"] if "t0" in HIDDEN[5].expected
                                                   else HIDDEN[5].expected)]

SCAN_FILES = f"""\
import os, sys
needles = [n[::-1].encode() for n in {[needle[::-1] for needle in NEEDLES]!r}]
def leaked(data):
    return any(needle in data for needle in needles)
for top in (os.getcwd(), os.environ.get('HOME', '/'), os.environ.get('TMPDIR', '/tmp'), '/tmp', '/scratch',
            '/opt', '/etc', '/root', '/home', '/srv', '/run', '/var', '/mnt', '/media'):
    for folder, _, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            if 'hidden' in name or 'expected' in name:
                os._exit({PROBE_HIT})
            try:
                if os.path.isfile(path) and os.path.getsize(path) < (64 << 20) and leaked(open(path, 'rb').read()):
                    os._exit({PROBE_HIT})
            except OSError:
                pass
for folder, dirs, files in os.walk('/'):
    dirs[:] = [d for d in dirs if os.path.join(folder, d) not in ('/proc', '/sys', '/dev')]
    if any('hidden' in name and name.endswith('.json') for name in files):
        os._exit({PROBE_HIT})
"""

SCAN_PROCESSES = f"""\
import os
needles = [n[::-1].encode() for n in {[needle[::-1] for needle in NEEDLES] + ["neddih", "detcepxe"]!r}]
def leaked(data):
    return any(needle in data for needle in needles)
if leaked(repr(os.environ).encode()):
    os._exit({PROBE_HIT})
for pid in [p for p in os.listdir('/proc') if p.isdigit()] + ['self', 'thread-self']:
    for part in ('environ', 'cmdline', 'mem', 'maps', 'stack', 'fd/0', 'fd/1', 'fd/3'):
        try:
            with open('/proc/' + pid + '/' + part, 'rb') as handle:
                data = handle.read(1 << 20)
            owner = os.stat('/proc/' + pid).st_uid
        except OSError:
            continue
        if part == 'mem' and owner != os.getuid():
            os._exit({PROBE_HIT})  # another uid's memory is readable
        if leaked(data):
            os._exit({PROBE_HIT})
"""


def spawn_scanner(language: str, scanner: str) -> dict[str, str]:
    """Payloads that run ``scanner`` (Python) as a child and exit with its probe hit."""
    quoted = json.dumps(scanner)
    return {
        "python": scanner,
        "cpp": (f"    const char* scanner = {quoted};\n"
                "    pid_t child = fork();\n"
                "    if (child == 0) { execlp(\"python3\", \"python3\", \"-c\", scanner, (char*)nullptr); _exit(1); }\n"
                f"    int status = 0;\n    waitpid(child, &status, 0);\n"
                f"    if (WIFEXITED(status) && WEXITSTATUS(status) == {PROBE_HIT}) _exit({PROBE_HIT});"),
        "rust": (f"    let scanner = {quoted};\n"
                 "    let status = std::process::Command::new(\"python3\").arg(\"-c\").arg(scanner).status().unwrap();\n"
                 f"    if status.code() == Some({PROBE_HIT}) {{ std::process::exit({PROBE_HIT}); }}"),
    }


@pytest.mark.parametrize("scanner, prelude, plant", [
    (SCAN_FILES, "", {"hidden.json": "{}"}),
    (SCAN_FILES, "", {"notes.txt": NEEDLES[0]}),
    (SCAN_PROCESSES, "import os\nos.environ['PLANTED'] = 'expected'\n", {}),
], ids=["file-name", "file-content", "environment"])
def test_the_scanners_find_a_planted_answer(compgeom_envs, scanner, prelude, plant):
    # the probes below are only meaningful if they would see a leak: plant one and look
    pool = compgeom_envs["python"].unwrapped.sandbox
    assert pool.run(Job("python", {"main.py": prelude + scanner, **plant})).exit_code == PROBE_HIT


@ALL_PATHS
def test_reading_the_expected_outputs(attack, language):
    payloads = spawn_scanner(language, SCAN_FILES)
    attack(language, Verdict.CORRECT, python=payloads["python"], cpp=payloads.get("cpp"), rust=payloads.get("rust"))


@ALL_PATHS
def test_inspecting_the_parent_process_or_environment(attack, language):
    payloads = spawn_scanner(language, SCAN_PROCESSES)
    attack(language, Verdict.CORRECT, python=payloads["python"], cpp=payloads.get("cpp"), rust=payloads.get("rust"))


@CODE_LANGUAGES
def test_forging_the_harness_records(attack, language):
    # a plausible record for every case, an END line, then a clean exit before the harness runs
    attack(language, Verdict.WRONG_ANSWER,
           python=("import os, sys\ncount = int(sys.stdin.read().split()[0])\n"
                   "sys.stdout.write(''.join(f'R {i} none 0 0 0\\n' for i in range(count)) + f'END {count}\\n')\n"
                   "sys.stdout.flush()\nos._exit(0)"),
           cpp=("    long count = 0;\n    std::scanf(\"%ld\", &count);\n"
                "    for (long i = 0; i < count; ++i) std::printf(\"R %ld none 0 0 0\\n\", i);\n"
                "    std::printf(\"END %ld\\n\", count);\n    std::fflush(stdout);\n    std::_Exit(0);"),
           rust=(f"    for i in 0..{len(HIDDEN)} {{ println!(\"R {{i}} none 0 0 0\"); }}\n"
                 f"    println!(\"END {len(HIDDEN)}\");\n    std::process::exit(0);"))


@ALL_PATHS
def test_exiting_with_success_early(attack, language):
    attack(language, Verdict.WRONG_ANSWER, python="import os\nos._exit(0)", cpp="    std::_Exit(0);",
           rust="    std::process::exit(0);", session_status="runtime_error")


@ALL_PATHS
def test_forging_the_supervisors_result_frames(attack, language):
    # a well-formed "ok" frame written to every descriptor the job might share with the
    # supervisor; a session reaches its own status pipe, where a frame for another turn is ignored
    body = '{"ok":true,"turn":0}'
    frame = f"{len(body)}\\n{body}".replace('"', '\\"')
    attack(language, Verdict.CORRECT,
           python=f"import os\nfor fd in range(3, 1024):\n    try:\n        os.write(fd, b\"{frame}\")\n"
                  "    except OSError:\n        pass",
           cpp=f'    for (int fd = 3; fd < 1024; ++fd) write(fd, "{frame}", sizeof "{frame}" - 1);',
           rust=("    extern \"C\" { fn write(fd: i32, buf: *const u8, count: usize) -> isize; }\n"
                 f"    let frame = b\"{frame}\";\n"
                 "    for fd in 3..1024 { unsafe { write(fd, frame.as_ptr(), frame.len()); } }"))

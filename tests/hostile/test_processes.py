"""Processes: bombs are contained by the per-job process limit, and nothing a job starts can
reach the supervisor or outlive the job."""

from __future__ import annotations

import pytest

from gym_sysmath.verdicts import Verdict
from tests.hostile.conftest import ALL_PATHS, CODE_LANGUAGES, QUICK_LIMITS
from tests.hostile.payloads import PROBE_HIT, RUST_LIBC

pytestmark = pytest.mark.docker

ATTACK_LIMITS = QUICK_LIMITS  # every attack here runs until it is stopped


@ALL_PATHS
def test_fork_bomb(attack, language):
    attack(language, Verdict.TIMEOUT,
           python="import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
           cpp="    for (;;) fork();",
           rust=RUST_LIBC + "    loop { unsafe { fork(); } }")


#: Counts this uid's processes for a second and keeps the peak; a bomb that never started (no
#: process but the job's own) is a probe hit, since the test would then show nothing.
PEAK_PYTHON = ("import os, time\npeak, end = 0, time.time() + 1\nwhile time.time() < end:\n    count = 0\n"
               "    for pid in filter(str.isdigit, os.listdir('/proc')):\n        try:\n"
               "            count += os.stat('/proc/' + pid).st_uid == os.getuid()\n"
               "        except OSError:\n            pass\n    peak = max(peak, count)\n"
               f"if peak < 2:\n    os._exit({PROBE_HIT})\n")
PEAK_CPP = ("    int peak = 0;\n    for (int round = 0; round < 100; ++round, usleep(10000)) {\n"
            "        int count = 0;\n        DIR* proc = opendir(\"/proc\");\n"
            "        while (dirent* entry = readdir(proc)) {\n            struct stat info;\n"
            "            std::string path = std::string(\"/proc/\") + entry->d_name;\n"
            "            if (std::atoi(entry->d_name) > 0 && stat(path.c_str(), &info) == 0 && info.st_uid == getuid())"
            " ++count;\n        }\n        closedir(proc);\n        if (count > peak) peak = count;\n    }\n"
            f"    if (peak < 2) _exit({PROBE_HIT});\n")
PEAK_RUST = ("    use std::os::unix::fs::MetadataExt;\n"
             "    let me = std::fs::metadata(\"/proc/self\").unwrap().uid();\n    let mut peak = 0;\n"
             "    for _ in 0..100 {\n        let count = std::fs::read_dir(\"/proc\").unwrap().flatten()\n"
             "            .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())\n"
             "            .filter(|e| e.metadata().map(|m| m.uid() == me).unwrap_or(false)).count();\n"
             "        peak = peak.max(count);\n        std::thread::sleep(std::time::Duration::from_millis(10));\n    }\n"
             f"    if peak < 2 {{ std::process::exit({PROBE_HIT}); }}\n")


@ALL_PATHS
def test_shell_fork_bomb(attack, language):
    # the bomb runs in the background; the job checks that it took hold, then waits to be
    # killed with it
    bomb = "bomb() { bomb | bomb & }; bomb 2>/dev/null"
    attack(language, Verdict.TIMEOUT,
           python=f"import os, time\nif os.system({bomb!r}) != 0:\n    os._exit({PROBE_HIT})\n{PEAK_PYTHON}time.sleep(600)",
           cpp=f'    if (std::system("{bomb}") != 0) _exit({PROBE_HIT});\n{PEAK_CPP}    sleep(600);',
           rust=(f'    let shell = std::process::Command::new("sh").arg("-c").arg("{bomb}").status();\n'
                 f"    if !shell.map(|s| s.success()).unwrap_or(false) {{ std::process::exit({PROBE_HIT}); }}\n{PEAK_RUST}"
                 "    std::thread::sleep(std::time::Duration::from_secs(600));"))


@ALL_PATHS
def test_thread_bomb(attack, language):
    # Python and C++ fail at load; Rust panics inside the primitive, which the harness records
    # per case: every case then fails, a wrong answer.
    expect = Verdict.WRONG_ANSWER if language == "rust" else Verdict.RUNTIME_ERROR
    attack(language, expect,
           python="import threading, time\nwhile True:\n"
                  "    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()",
           cpp="    std::vector<std::thread> threads;\n    for (;;) threads.emplace_back([] { sleep(600); });",
           rust="    loop { std::mem::forget(std::thread::spawn(|| std::thread::sleep("
                "std::time::Duration::from_secs(600)))); }",
           session_status="runtime_error")


@ALL_PATHS
def test_kill_every_process_it_can(attack, language):
    # kill(-1, SIGKILL) reaches every process of the caller's uid: the supervisor is not one
    attack(language, Verdict.CORRECT,
           python="import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept ProcessLookupError:\n    pass",
           cpp="    kill(-1, SIGKILL);",
           rust=RUST_LIBC + "    unsafe { kill(-1, 9); }")


@ALL_PATHS
def test_signal_or_ptrace_the_supervisor(attack, language):
    attack(language, Verdict.CORRECT,
           python=("import ctypes, os, signal\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                   "for pid in [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:\n"
                   "    for sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM):\n"
                   "        try:\n            os.kill(pid, sig)\n        except OSError:\n            continue\n"
                   f"        os._exit({PROBE_HIT})\n"
                   "    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH\n"
                   f"        os._exit({PROBE_HIT})"),
           cpp=("    DIR* proc = opendir(\"/proc\");\n"
                "    while (dirent* entry = readdir(proc)) {\n"
                "        int pid = std::atoi(entry->d_name);\n"
                "        if (pid <= 0 || pid == getpid()) continue;\n"
                f"        if (kill(pid, SIGKILL) == 0 || kill(pid, SIGSTOP) == 0) _exit({PROBE_HIT});\n"
                f"        if (ptrace(PTRACE_ATTACH, pid, nullptr, nullptr) == 0) _exit({PROBE_HIT});\n"
                "    }\n    closedir(proc);"),
           rust=RUST_LIBC + (
                "    for entry in std::fs::read_dir(\"/proc\").unwrap() {\n"
                "        let Ok(pid) = entry.unwrap().file_name().to_string_lossy().parse::<i32>() else { continue };\n"
                "        unsafe {\n"
                "            if pid == getpid() { continue; }\n"
                f"            if kill(pid, 9) == 0 || kill(pid, 19) == 0 {{ _exit({PROBE_HIT}); }}\n"
                f"            if ptrace(16, pid, 0, 0) == 0 {{ _exit({PROBE_HIT}); }}\n"
                "        }\n    }"))


@CODE_LANGUAGES
def test_exiting_with_a_probe_hit_is_caught_by_the_catalogue(attack, language):
    # the catalogue's own check: a probe that "succeeds" ends as a runtime error, so the tests
    # above that expect `correct` would fail if any probe got through
    attack(language, Verdict.RUNTIME_ERROR, python=f"import os\nos._exit({PROBE_HIT})",
           cpp=f"    _exit({PROBE_HIT});", rust=RUST_LIBC + f"    unsafe {{ _exit({PROBE_HIT}); }}")

"""CPU and time: programs that never finish on their own are stopped at the limits."""

from __future__ import annotations

import pytest

from gym_sysmath.verdicts import Verdict
from tests.hostile.conftest import ALL_PATHS, QUICK_LIMITS
from tests.hostile.payloads import RUST_LIBC

pytestmark = pytest.mark.docker

ATTACK_LIMITS = QUICK_LIMITS  # every attack here runs until it is stopped


@ALL_PATHS
def test_busy_loop(attack, language):
    attack(language, Verdict.TIMEOUT,
           python="while True:\n    pass",
           cpp="    volatile unsigned long spin = 0;\n    for (;;) ++spin;",
           rust="    let mut spin = 0u64;\n    loop { spin = std::hint::black_box(spin + 1); }")


@ALL_PATHS
def test_sleep(attack, language):
    attack(language, Verdict.TIMEOUT,
           python="import time\ntime.sleep(600)",
           cpp="    sleep(600);",
           rust="    std::thread::sleep(std::time::Duration::from_secs(600));")


@ALL_PATHS
def test_process_ignoring_sigterm(attack, language):
    attack(language, Verdict.TIMEOUT,
           python="import signal\nfor sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
                  "    signal.signal(sig, signal.SIG_IGN)\nwhile True:\n    signal.pause()",
           cpp="    signal(SIGTERM, SIG_IGN);\n    signal(SIGINT, SIG_IGN);\n    signal(SIGHUP, SIG_IGN);\n"
               "    for (;;) pause();",
           rust=RUST_LIBC + "    unsafe { signal(15, 1); signal(2, 1); signal(1, 1); loop { pause(); } }")


@ALL_PATHS
def test_closing_stdout_then_spinning(attack, language):
    attack(language, Verdict.TIMEOUT,
           python="import os\nos.close(1)\nos.close(2)\nwhile True:\n    pass",
           cpp="    close(1);\n    close(2);\n    volatile unsigned long spin = 0;\n    for (;;) ++spin;",
           rust=RUST_LIBC + "    unsafe { close(1); close(2); }\n"
                            "    let mut spin = 0u64;\n    loop { spin = std::hint::black_box(spin + 1); }")


@ALL_PATHS
def test_double_forked_daemon_outliving_its_job(attack, language):
    # the daemon keeps the job's stdout open and sleeps; the job itself goes on and answers
    # correctly. The daemon must die with the job (the pool check lists leftover processes).
    attack(language, Verdict.CORRECT,
           python="import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
                  "        while True:\n            time.sleep(0.05)\n    os._exit(0)\nos.wait()",
           cpp="    if (fork() == 0) {\n        setsid();\n        if (fork() == 0) for (;;) sleep(1);\n"
               "        _exit(0);\n    }\n    int status = 0;\n    wait(&status);",
           rust=RUST_LIBC + "    unsafe {\n        if fork() == 0 {\n            setsid();\n"
                            "            if fork() == 0 { loop { sleep(1); } }\n            _exit(0);\n        }\n"
                            "        let mut status = 0;\n        wait(&mut status);\n    }")

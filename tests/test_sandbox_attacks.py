"""What the Docker sandbox withstands. Each test tries one attack or failure mode and asserts
the verdict; those that could damage the worker also assert that the next job still works."""

from __future__ import annotations

import time

import pytest

from gym_sysmath.sandbox import Job, Limits, Sandbox

pytestmark = pytest.mark.docker


#: Prints how many live (not zombie) processes share the running code's uid.
LIVE_PROCESSES_OF_MY_UID = (
    "import os\nalive = [p for p in os.listdir('/proc') if p.isdigit()\n"
    "         and os.stat('/proc/' + p).st_uid == os.getuid()\n"
    "         and open('/proc/' + p + '/stat').read().rsplit(')', 1)[1].split()[0] != 'Z']\n"
    "print(len(alive))")


def python(code: str, **limits) -> Job:
    return Job("python", {"main.py": code}, limits=Limits(**limits) if limits else Limits())


def assert_still_works(sandbox: Sandbox) -> None:
    result = sandbox.run(python("print(6 * 7)"))
    assert (result.status, result.stdout) == ("ok", "42\n")


def test_correct_program_output_is_returned(sandbox):
    result = sandbox.run(python("import sys\nprint(sys.stdin.read().upper())"))
    assert result.status == "ok"
    result = sandbox.run(Job("python", {"main.py": "import sys\nprint(sys.stdin.read().upper())"}, stdin="abc"))
    assert result.stdout == "ABC\n" and result.exit_code == 0


def test_infinite_loop_times_out(sandbox):
    result = sandbox.run(python("while True:\n    pass", wall_s=2, cpu_s=1))
    assert result.status == "timeout"
    assert result.wall_s < 3
    assert_still_works(sandbox)


def test_sleeping_job_is_killed_at_the_wall_clock(sandbox):
    started = time.monotonic()
    result = sandbox.run(python("import time\ntime.sleep(60)", wall_s=1))
    assert result.status == "timeout"
    assert time.monotonic() - started < 5
    assert_still_works(sandbox)


def test_allocating_4gb_is_a_memory_limit(sandbox):
    result = sandbox.run(python("block = bytearray(4 * 1024**3)"))
    assert result.status == "memory_limit"
    assert_still_works(sandbox)


def test_stdout_flood_is_an_output_limit_promptly(sandbox):
    result = sandbox.run(python("import sys\nfor _ in range(1600):\n    sys.stdout.write('x' * 65536)", wall_s=30))
    assert result.status == "output_limit"
    assert result.stdout_truncated
    assert result.wall_s < 5, "the flood must be cut when the cap is reached, not at the time limit"
    assert len(result.stdout) == Limits().stdout_bytes
    assert_still_works(sandbox)


def test_200kb_of_output_is_returned_whole(sandbox):
    result = sandbox.run(python("print('y' * 200_000)"))
    assert result.status == "ok"
    assert result.stdout == "y" * 200_000 + "\n"
    assert not result.stdout_truncated


def test_large_stdin_and_output_do_not_deadlock(sandbox):
    data = "z" * 1_000_000
    result = sandbox.run(Job("python", {"main.py": "import sys\nsys.stdout.write(sys.stdin.read()[:500000])"},
                             stdin=data))
    assert result.status == "ok" and len(result.stdout) == 500_000


def test_tcp_connection_fails(sandbox):
    code = "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)\nprint('connected')"
    result = sandbox.run(python(code))
    assert result.status == "runtime_error"
    assert "connected" not in result.stdout


def test_file_written_in_one_job_is_gone_in_the_next(sandbox):
    first = sandbox.run(python("import os\nopen('note.txt', 'w').write('secret')\nprint(os.getcwd())"))
    assert first.status == "ok"
    code = f"import os\nprint(os.path.exists({first.stdout.strip()!r} + '/note.txt'), os.listdir('.'))"
    second = sandbox.run(python(code))
    assert second.stdout == "False []\n"


def test_write_outside_scratch_is_refused(sandbox):
    for path in ("/tmp/x", "/scratch/x", "/opt/gym-sysmath/image/supervisor/service.py", "/dev/pts/x"):
        result = sandbox.run(python(f"open({path!r}, 'w').write('x')"))
        assert result.status == "runtime_error", path
    assert_still_works(sandbox)


def test_job_runs_unprivileged(sandbox):
    result = sandbox.run(python("import os\nprint(os.getuid(), os.getgid())"))
    uid, gid = map(int, result.stdout.split())
    assert uid >= 20000 and gid >= 20000


def test_fork_bomb_is_contained(sandbox):
    result = sandbox.run(python("import os\nwhile True:\n    os.fork()", wall_s=3))
    assert result.status in ("runtime_error", "timeout")
    assert_still_works(sandbox)


def test_background_process_does_not_survive_the_job(sandbox):
    code = ("import subprocess, os\n"
            "subprocess.Popen(['python3', '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
            "print(os.getpid())")
    assert sandbox.run(python(code)).status == "ok"
    alive = sandbox.run(python(LIVE_PROCESSES_OF_MY_UID)).stdout
    assert alive == "1\n", "the sleeper should have died with its job's uid"


def test_job_cannot_forge_supervisor_frames(sandbox):
    code = "import os\nfor fd in range(3, 64):\n    try: os.write(fd, b'11\\n{\"ok\":true}')\n    except OSError: pass"
    assert sandbox.run(python(code)).status == "ok"
    assert_still_works(sandbox)


def test_crash_is_a_runtime_error(sandbox):
    result = sandbox.run(python("raise ValueError('boom')"))
    assert result.status == "runtime_error" and "ValueError: boom" in result.stderr
    result = sandbox.run(python("import os\nos.kill(os.getpid(), 11)"))
    assert result.status == "runtime_error" and result.signal == 11


def test_cpp_compiles_with_cpp20_and_runs(sandbox):
    source = "#include <iostream>\n#include <span>\nint main(){int a[3]={1,2,3}; std::span s(a); std::cout<<s.size();}"
    result = sandbox.run(Job("cpp", {"main.cpp": source}))
    assert (result.status, result.stdout) == ("ok", "3")
    assert result.compile is not None and result.compile.status == "ok"


def test_cpp_compile_error_is_reported(sandbox):
    result = sandbox.run(Job("cpp", {"main.cpp": "int main() { return undefined_name; }"}))
    assert result.status == "compile_error"
    assert "undefined_name" in result.stderr


def test_rust_2021_compiles_let_else(sandbox):
    source = 'fn main() { let v = vec![7]; let Some(x) = v.first() else { return }; println!("{x}"); }'
    result = sandbox.run(Job("rust", {"main.rs": source}))
    assert (result.status, result.stdout) == ("ok", "7\n")


def test_session_keeps_globals_and_returns_exact_values(sandbox):
    session = sandbox.open_session()
    try:
        assert session.run("x = 41").status == "ok"
        assert session.run("x += 1\nprint(x)").stdout == "42\n"
        result = session.run("result = [x, True, -0.0, float('inf'), '0x2a']", fetch="result")
        assert result.defined
        value = result.value
        assert value[:2] == [42, True] and type(value[1]) is bool
        assert str(value[2]) == "-0.0" and value[3] == float("inf") and value[4] == "0x2a"
    finally:
        session.close()


def test_session_loop_times_out_and_the_next_turn_starts_fresh(sandbox):
    session = sandbox.open_session(Limits(wall_s=1, cpu_s=1))
    try:
        session.run("kept = 1")
        assert session.run("while True:\n    pass").status == "timeout"
        assert session.restarts == 1
        assert session.run("print('kept' in globals())").stdout == "False\n"
    finally:
        session.close()


def test_identical_resubmission_in_one_rollout_reuses_the_cached_build(sandbox):
    source = '#include <bits/stdc++.h>\nint main(){ long n; std::cin >> n; std::cout << n * 2 << "\\n"; }'
    with sandbox.lease() as rollout:
        first = rollout.run(Job("cpp", {"main.cpp": source}, stdin="21"))
        second = rollout.run(Job("cpp", {"main.cpp": source}, stdin="50"))
        assert (first.stdout, second.stdout) == ("42\n", "100\n")
        assert first.compile is not None and not first.compile.cached
        assert second.compile is not None and second.compile.cached
        changed = rollout.run(Job("cpp", {"main.cpp": source.replace("* 2", "* 3")}, stdin="2"))
        assert changed.stdout == "6\n" and not changed.compile.cached


def test_build_cache_is_never_shared_between_rollouts(sandbox):
    # a binary built where one rollout's code ran must not be handed to another rollout
    source = '#include <cstdio>\nint main(){ std::puts("built once"); }'
    for _ in range(3):  # a small pool: the later rollouts reuse the first one's purged container
        with sandbox.lease() as rollout:
            result = rollout.run(Job("cpp", {"main.cpp": source}))
        assert result.stdout == "built once\n" and not result.compile.cached


def test_failed_compile_is_never_cached(sandbox):
    # a failed build may be the machine's fault (full disk): it is compiled again next time
    source = "int main() { return missing_symbol_x; }"
    first = sandbox.run(Job("cpp", {"main.cpp": source}))
    second = sandbox.run(Job("cpp", {"main.cpp": source}))
    assert first.status == second.status == "compile_error"
    assert "missing_symbol_x" in second.stderr and not second.compile.cached


def test_jobs_cannot_tamper_with_the_build_cache(sandbox):
    sandbox.run(Job("rust", {"main.rs": 'fn main() { println!("honest"); }'}))
    code = ("import os, glob\n"
            "hits = glob.glob('/scratch/.build-cache/*/prog')\n"
            "for path in hits:\n"
            "    try:\n        open(path, 'wb').write(b'#!/bin/sh\\necho pwned\\n')\n"
            "    except OSError as exc:\n        print('refused', type(exc).__name__)\n")
    attack = sandbox.run(python(code))
    assert "pwned" not in attack.stdout
    again = sandbox.run(Job("rust", {"main.rs": 'fn main() { println!("honest"); }'}))
    assert again.stdout == "honest\n"


def test_session_writing_a_forged_status_frame_only_ends_its_own_session(sandbox):
    session = sandbox.open_session()
    try:
        forged = ("import os\nbody = b'{\"ok\":true,\"value\":' + b'[' * 100000 + b']' * 100000 + b'}'\n"
                  "os.write(1001, b'%d\\n' % len(body) + body)\nimport time\ntime.sleep(1)")
        result = session.run(forged, fetch="result")
        assert result.status == "runtime_error" and result.turn_ended_session
        assert session.run("print('fresh')").stdout == "fresh\n"
    finally:
        session.close()
    assert_still_works(sandbox)


def test_session_background_processes_end_with_the_turn(sandbox):
    session = sandbox.open_session()
    try:
        spawn = ("import os\nfor _ in range(3):\n    if os.fork() == 0:\n        os.setsid()\n"
                 "        while True:\n            pass\nprint('spawned')")
        assert session.run(spawn).stdout == "spawned\n"
        count = f"import time\ntime.sleep(0.2)\n{LIVE_PROCESSES_OF_MY_UID}"
        assert session.run(count).stdout == "1\n", "only the session process itself may outlive a turn"
    finally:
        session.close()


def test_session_frame_forged_for_another_turn_is_ignored(sandbox):
    # well formed, so not a protocol violation; taken as the reply, it would have left the real
    # reply in the pipe to be read as the next turn's
    session = sandbox.open_session()
    try:
        forged = ("import json, os\n"
                  "body = json.dumps({'ok': True, 'turn': 7, 'defined': True, 'value': 999}).encode()\n"
                  "os.write(1001, b'%d\\n' % len(body) + body)\nresult = 42")
        result = session.run(forged, fetch="result")
        assert (result.status, result.value, result.turn_ended_session) == ("ok", 42, False)
        assert session.run("result += 1", fetch="result").value == 43
    finally:
        session.close()


def test_session_value_with_forged_encoding_is_unsupported_not_a_crash(sandbox):
    session = sandbox.open_session()
    try:
        poison = ("import sys\nfor module in list(sys.modules.values()):  # the supervisor's encoder, wherever it is\n"
                  "    if hasattr(module, 'encode_value'):\n"
                  "        module.encode_value = lambda v, depth=0: {'f64': 'zz' * 8}\n"
                  "result = [1]")
        result = session.run(poison, fetch="result")
        assert result.status == "ok" and type(result.value).__name__ == "Unsupported"
    finally:
        session.close()


def test_dev_shm_files_of_one_job_are_gone_in_the_next(sandbox):
    # POSIX shared memory is allowed (multiprocessing needs it), but goes with the job
    with sandbox.lease() as rollout:
        write = rollout.run(python("open('/dev/shm/left-behind', 'w').write('x')\nprint('written')"))
        look = rollout.run(python("import os\nprint(os.listdir('/dev/shm'))"))
    assert (write.stdout, look.stdout) == ("written\n", "[]\n")


def test_sysv_shared_memory_and_message_queues_are_unavailable(sandbox):
    code = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "print(libc.shmget(0, 64 * 1024 * 1024, 0o1666), libc.msgget(0, 0o1666))")
    assert sandbox.run(python(code)).stdout == "-1 -1\n"


def test_deep_directory_tree_is_purged(docker_available):
    single = Sandbox("docker", pool_size=1)  # the probe must land on the attacked worker
    try:
        probe = python("import shutil\nprint(shutil.disk_usage('.').used)")
        before = int(single.run(probe).stdout)
        code = ("import os\nfor _ in range(1200):\n    os.mkdir('d')\n    os.chdir('d')\n"
                "open('parked', 'wb').write(b'x' * 32 * 1024 * 1024)\nprint(os.getcwd().count('/'))")
        assert int(single.run(python(code, wall_s=20)).stdout) > 1200
        assert int(single.run(probe).stdout) - before < 1024 * 1024, "the parked file outlived its job"
    finally:
        single.close()


def test_build_cache_cannot_be_listed_or_read_by_jobs(sandbox):
    sandbox.run(Job("cpp", {"main.cpp": "#include <cstdio>\nint main(){ std::puts(\"sibling\"); }"}))
    code = ("import os\ntry:\n    print(os.listdir('/scratch/.build-cache'))\n"
            "except PermissionError:\n    print('refused')")
    assert sandbox.run(python(code)).stdout == "refused\n"


def test_job_closing_its_stdin_early_is_not_a_harness_failure(sandbox):
    code = "import os\nos.close(0)\nprint('done')"
    result = sandbox.run(Job("python", {"main.py": code}, stdin="z" * 2_000_000))
    assert (result.status, result.stdout) == ("ok", "done\n")


def test_session_closing_its_control_pipe_only_ends_itself(sandbox):
    session = sandbox.open_session()
    try:
        session.run("import os\nos.close(1000)")
        result = session.run("print('next')")
        assert result.status == "runtime_error" and result.turn_ended_session
        assert session.run("print('fresh')").stdout == "fresh\n"
    finally:
        session.close()
    assert_still_works(sandbox)


def test_session_threads_do_not_run_between_turns(sandbox):
    session = sandbox.open_session()
    try:
        start = ("import threading, time\ncount = [0]\ndef spin():\n    while True:\n        count[0] += 1\n"
                 "threading.Thread(target=spin, daemon=True).start()\ntime.sleep(0.1)\nfirst = count[0]")
        session.run(start)
        time.sleep(0.5)
        result = session.run("print(count[0] - first < 10_000_000)")
        assert result.stdout == "True\n", "the spinning thread ran while no turn was in progress"
    finally:
        session.close()


def test_hash_seed_is_fixed_so_the_same_code_prints_the_same(sandbox):
    code = "print(hash('determinism'), list({'a', 'b', 'c', 'd', 'e'}))"
    outputs = {Sandbox("docker", pool_size=1).run(python(code)).stdout for _ in range(2)}
    assert len(outputs) == 1 and sandbox.run(python(code)).stdout in outputs


def test_python_job_cannot_find_earlier_jobs_code_in_its_memory(docker_available):
    # Python jobs run in a fork of a warm interpreter: it must be one that never held a request
    scan = python("import ctypes\nneedle = ('SIBLING_' + 'SECRET_' + '7c1e').encode()\nhits = 0\n"
                  "for line in open('/proc/self/maps'):\n"
                  "    span, perms = line.split()[:2]\n"
                  "    start, end = (int(x, 16) for x in span.split('-'))\n"
                  "    if perms.startswith('rw') and '[v' not in line:  # heap, stacks, anonymous maps\n"
                  "        hits += ctypes.string_at(start, end - start).count(needle)\n"
                  "print(hits)")
    single = Sandbox("docker", pool_size=1)  # the scan must run where the secret ran
    try:
        baseline = single.run(scan).stdout  # the scan's own needle
        single.run(python("token = 'SIBLING_' + 'SECRET_' + '7c1e'\nprint('SIBLING_SECRET_7c1e' * 50)"))
        assert single.run(scan).stdout == baseline
    finally:
        single.close()


def test_compiler_output_claiming_a_full_disk_is_still_a_compile_error(sandbox):
    source = '#pragma message("No space left on device")\nint main() { return missing; }'
    result = sandbox.run(Job("cpp", {"main.cpp": source}))
    assert result.status == "compile_error"
    assert_still_works(sandbox)


def test_session_fork_chain_ends_with_the_turn(sandbox):
    session = sandbox.open_session()
    try:
        chain = ("import os\nif os.fork() == 0:\n    os.setsid()\n    while True:\n"
                 "        if os.fork() > 0:\n            os._exit(0)\nprint('started')")
        assert session.run(chain).stdout == "started\n"
        count = f"import time\ntime.sleep(0.3)\n{LIVE_PROCESSES_OF_MY_UID}"
        assert session.run(count).stdout == "1\n", "a fork chain outlived the turn that started it"
    finally:
        session.close()
    assert_still_works(sandbox)


def test_program_that_cannot_be_executed_is_a_runtime_error_not_a_harness_failure(sandbox):
    # a 5000-byte .interp section makes execve fail with ENOEXEC: the program's own doing
    source = ('__attribute__((section(".interp"), used)) static const char interp[5000] = "x";\n'
              "int main() { return 0; }")
    assert sandbox.run(Job("cpp", {"main.cpp": source})).status == "runtime_error"
    assert_still_works(sandbox)


def test_session_thread_outliving_its_main_thread_ends_with_the_turn(sandbox):
    session = sandbox.open_session()
    try:
        spawn = ("import os, threading, ctypes, time\nif os.fork() == 0:\n    os.setsid()\n"
                 "    def spin():\n        while True:\n            open('beat', 'w').write(str(time.time()))\n"
                 "            time.sleep(0.01)\n"
                 "    threading.Thread(target=spin).start()\n"
                 "    ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: only the main thread ends\n"
                 "print('spawned')")
        assert session.run(spawn).stdout == "spawned\n"
        check = ("import os, time\ntime.sleep(0.5)\n"
                 "print(not os.path.exists('beat') or time.time() - float(open('beat').read() or 0) > 0.3)")
        assert session.run(check).stdout == "True\n", "a thread of a zombie leader kept running"
    finally:
        session.close()


def test_session_files_are_private_to_the_session(sandbox):
    victim, attacker = sandbox.open_session(), sandbox.open_session()
    try:
        where = victim.run("import os\nopen('notes.txt', 'w').write('private')\nprint(os.getcwd())").stdout.strip()
        probe = attacker.run(f"try:\n    print(open({where + '/notes.txt'!r}).read())\n"
                             "except OSError as exc:\n    print(type(exc).__name__)")
        assert "private" not in probe.stdout
    finally:
        victim.close()
        attacker.close()


# --------------------------------------------------------------------------- one container per rollout

def test_output_past_the_cap_then_exit_is_always_an_output_limit(sandbox):
    # a program that writes one byte past its cap and exits at once used to race the reader
    source = ('#include <cstdio>\n#include <string>\n'
              'int main(){ std::string s(4097, \'x\'); fwrite(s.data(), 1, s.size(), stdout); return 0; }')
    with sandbox.lease() as rollout:
        statuses = {rollout.run(Job("cpp", {"main.cpp": source}, limits=Limits(stdout_bytes=4096))).status
                    for _ in range(12)}
    assert statuses == {"output_limit"}


def test_session_output_past_the_cap_just_before_the_reply_is_an_output_limit(sandbox):
    session = sandbox.open_session(Limits(wall_s=10, cpu_s=10, stdout_bytes=4096))
    try:
        result = session.run("import sys\nsys.stdout.write('x' * 4097)\nsys.stdout.flush()")
        assert result.status == "output_limit" and result.stdout_truncated
    finally:
        session.close()


def test_sync_syncfs_and_ptrace_are_refused(sandbox):
    probe = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
             "for number in (162, 306, 101, 425):  # sync, syncfs, ptrace, io_uring_setup (x86_64)\n"
             "    print(libc.syscall(number, 0, 0, 0, 0), ctypes.get_errno())\n")
    result = sandbox.run(python(probe))
    assert result.stdout.split("\n")[:4] == ["-1 1"] * 4, result


def test_no_pty_can_be_opened(sandbox):
    # the kernel's pty pool is the host's: a rollout must not be able to drain it
    result = sandbox.run(python("import os\ntry:\n    os.openpty()\n    print('opened')\n"
                                "except OSError as exc:\n    print('refused', exc.errno)"))
    assert result.stdout.startswith("refused"), result


def test_threads_and_processes_still_work_under_the_seccomp_profile(sandbox):
    code = ("import concurrent.futures, multiprocessing, os, subprocess, threading, numpy, sympy\n"
            "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
            "with multiprocessing.Pool(2) as pool:\n    print(pool.map(abs, [-1, -2]))\n"
            "print(subprocess.run(['echo', 'ok'], capture_output=True, text=True).stdout.strip())\n"
            "pid = os.fork()\nif pid == 0:\n    os._exit(3)\nprint(os.waitpid(pid, 0)[1] >> 8)\n"
            "print(int(numpy.arange(4).sum()), sympy.factorint(12))")
    result = sandbox.run(python(code, processes=32))
    assert (result.status, result.stdout) == ("ok", "[1, 2]\nok\n3\n6 {2: 2, 3: 1}\n"), result
    threads = ('#include <thread>\n#include <cstdio>\nint main(){ int x = 0; std::thread t([&]{ x = 7; }); '
               't.join(); std::printf("%d\\n", x); }')
    assert sandbox.run(Job("cpp", {"main.cpp": threads})).stdout == "7\n"
    spawn = ('use std::process::Command; fn main(){ let h = std::thread::spawn(|| 2); '
             'let o = Command::new("echo").arg("hi").output().unwrap(); '
             'print!("{} {}", h.join().unwrap(), String::from_utf8_lossy(&o.stdout)); }')
    assert sandbox.run(Job("rust", {"main.rs": spawn})).stdout == "2 hi\n"


def test_next_rollout_in_a_purged_container_finds_nothing_of_the_last(docker_available):
    single = Sandbox("docker", pool_size=1)  # the second rollout must get the first one's container
    try:
        leave = ("import os, socket, subprocess\n"
                 "open('left.txt', 'w').write('secret')\n"
                 "s = socket.socket(socket.AF_UNIX); s.bind('\\0left-by-rollout-a'); s.listen()\n"
                 "subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
                 "print(os.getcwd())")
        with single.lease() as first:
            session = first.open_session()
            where = session.run(leave).stdout.strip()
            first_container = first.worker
        look = ("import os\n"
                "lines = open('/proc/net/unix').read().splitlines()[1:]\n"
                "named = [line.split()[-1] for line in lines if len(line.split()) > 7]\n"
                "others = [p for p in os.listdir('/proc')\n"
                "          if p.isdigit() and os.stat('/proc/' + p).st_uid not in (0, os.getuid())]\n"
                "listing = os.listdir('/scratch') if os.access('/scratch', os.R_OK) else '-'\n"
                f"print(named, others, os.path.exists({where!r}), listing)")
        with single.lease() as second:
            seen = second.run(python(look)).stdout
            assert second.worker is first_container  # the same container, purged
        assert seen == "[] [] False -\n", seen
        assert single.stats().purges >= 1
    finally:
        single.close()


def test_fast_fork_chains_never_outlive_their_turn(sandbox):
    # a chain whose members fork their successor and exit at once used to slip past a /proc
    # snapshot about one turn in six; the stop by uid cannot be outrun
    session = sandbox.open_session()
    chain = ("import os\nif os.fork() == 0:\n    while True:\n        if os.fork() > 0:\n"
             "            os._exit(0)\nprint('started')")
    try:
        for _ in range(10):
            assert session.run(chain).stdout == "started\n"
            assert session.run(LIVE_PROCESSES_OF_MY_UID).stdout == "1\n", "a fork chain outlived its turn"
    finally:
        session.close()


def test_thread_started_in_an_earlier_turn_does_not_run_between_turns(sandbox):
    # no new pid in the later turn, so the fast path is taken: the old thread must still be stopped
    session = sandbox.open_session()
    try:
        session.run("import threading, time\nticks = [0]\n"
                    "def spin():\n    while True:\n        ticks[0] += 1\n        time.sleep(0.001)\n"
                    "threading.Thread(target=spin, daemon=True).start()")
        session.run("print('no new task this turn')")
        before = session.run("print(ticks[0])").stdout  # the thread runs during this turn...
        time.sleep(0.5)
        after = session.run("print(ticks[0])").stdout
        assert int(after) - int(before) < 100, "the thread ran while the agent was thinking"  # ...not 500 ms
    finally:
        session.close()


def test_all_sandbox_containers_are_capped_together_below_the_hosts_memory(sandbox):
    # each container may hold 3 GiB; hundreds of them together must not be able to take the host
    # (or the trainer beside them): a parent cgroup caps them all, where one can be made here
    from gym_sysmath.sandbox import daemon

    with sandbox.lease() as rollout:
        rollout.run(python("print(1)"))
        container = daemon.docker_client().containers.get(rollout.worker.container_name)
    parent = container.attrs["HostConfig"].get("CgroupParent")
    if parent is None or parent == "":
        pytest.skip("no parent cgroup can be made here (not root, a remote daemon, or the systemd driver)")
    with open("/proc/meminfo") as meminfo:
        host = int(next(line for line in meminfo if line.startswith("MemTotal:")).split()[1]) * 1024
    for path in (f"/sys/fs/cgroup/memory{parent}/memory.limit_in_bytes", f"/sys/fs/cgroup{parent}/memory.max"):
        try:
            with open(path) as handle:
                cap = int(handle.read())
            break
        except (OSError, ValueError):
            continue
    else:
        pytest.fail(f"the parent cgroup {parent} has no readable memory limit")
    assert cap < host

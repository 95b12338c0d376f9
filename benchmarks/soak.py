"""Soak: N envs x M episodes of mixed actions (correct, wrong, hostile) on one shared sandbox,
for a bounded time. Reports steps, verdicts, scoring errors (target 0 when no fault is
injected), correct actions not rewarded (target 0), cross-rollout probes that found what they
must not (target 0), the pool's leases, purges, lost workers and retries, job processes left in
purged containers, containers and host processes left after close (target 0), and this
process's RSS over the run (target: flat).

    python benchmarks/soak.py [--envs 8] [--episodes 60] [--minutes 10] [--pool-size N] [--seed 0]

Every env is a thread stepping its own env (CsappExact and LinearAlgebra with Python tool
turns, CompGeom in all three languages), each episode in a container leased for it (by
default one per live env; ``--pool-size`` caps them, and rollouts then wait for each other).
Hostile episodes (30%) draw from two sets, at random: the hostile catalogue's kinds against
the rollout's own container (`tests/hostile/`: loops, bombs, floods, allocations, disk
filling, early exits), and the cross-rollout catalogue's attacks
(`tests/hostile/test_cross_rollout.py`, `tests/hostile/payloads.py`: read, steal, slow,
starve, signal, message, host), which run while the other envs' honest episodes run. A
cross-rollout probe that succeeds makes its tool turn or candidate fail (``PROBE_HIT``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root, for tests/

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.sandbox import ExecutionStatus, Job, Limits, daemon
from gym_sysmath.tasks import compgeom
from gym_sysmath.tasks.compgeom.fixtures import bad_sources
from gym_sysmath.verdicts import Verdict
from tests.hostile.payloads import (
    BETWEEN_TURNS_SPINNER,
    CHECK_HITS,
    LEAK_READER,
    LEAK_TOKEN,
    LEAK_WRITER,
    LEFTOVER_PROBE,
    PRIMITIVE,
    PROBE_HIT,
    READ_CMDLINE_PROBE,
    SIGNAL_PROBE,
    STEAL_BINARY_PROBE,
    candidate_probe,
    inject,
    probe_turn,
    task_id,
)
from tests.hostile.test_cross_rollout import MEMFD_HOG, PTY_HOARD, SOCKET_WRITER, THREAD_HOARD

LIMITS = Limits(wall_s=3.0, cpu_s=2.0)
KINDS = ("correct", "wrong", "hostile")
KIND_WEIGHTS = (0.4, 0.3, 0.3)

#: One payload per attack and language; each runs before the candidate's work (see payloads.py).
HOSTILE = {
    "busy_loop": {"python": "while True:\n    pass", "cpp": "    volatile long n = 0;\n    for (;;) ++n;",
                  "rust": "    let mut n = 0u64;\n    loop { n = std::hint::black_box(n + 1); }"},
    "fork_bomb": {"python": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
                  "cpp": "    for (;;) fork();",
                  "rust": '    extern "C" { fn fork() -> i32; }\n    loop { unsafe { fork(); } }'},
    "memory_growth": {"python": "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))",
                      "cpp": "    std::vector<std::string> chunks;\n    for (;;) chunks.emplace_back(16 << 20, 'x');",
                      "rust": "    let mut chunks = Vec::new();\n    loop { chunks.push(vec![1u8; 16 << 20]); }"},
    "stdout_flood": {"python": "import sys\nwhile True:\n    sys.stdout.write('spam\\n' * 1000)",
                     "cpp": '    for (;;) std::fputs("spam spam spam\\n", stdout);',
                     "rust": '    loop { println!("spam spam spam"); }'},
    "fill_scratch": {"python": "try:\n    for i in range(100):\n        open(f'f{i}', 'wb').write(bytes(32 << 20))\n"
                               "except OSError:\n    pass",
                     "cpp": "    std::string block(32 << 20, '\\0');\n    for (int i = 0; i < 100; ++i)\n"
                            "        if (!(std::ofstream(\"f\" + std::to_string(i)) << block)) break;",
                     "rust": "    for i in 0..100 { if std::fs::write(format!(\"f{i}\"), vec![0u8; 32 << 20]).is_err()"
                             " { break; } }"},
    "daemon_and_exit": {"python": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    while True:\n"
                                  "        time.sleep(1)\nos._exit(0)",
                        "cpp": "    if (fork() == 0) { setsid(); for (;;) sleep(1); }\n    std::_Exit(0);",
                        "rust": '    extern "C" { fn fork() -> i32; fn setsid() -> i32; }\n'
                                "    unsafe { if fork() == 0 { setsid(); loop { std::thread::sleep("
                                "std::time::Duration::from_secs(1)); } } }\n    std::process::exit(0);"},
}

#: How long a cross-rollout probe keeps probing (in its turn, or in its candidate).
CROSS_S = 1.0

SYNC_PROBE = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
              "def probe():\n    return 'sync() ran' if libc.syscall(162) == 0 else None\n")
HOST_CALLS_PROBE = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                    "attr = ctypes.create_string_buffer(128)\n"
                    "def probe():\n"
                    "    if libc.syscall(248, b'user', b'gsmxr', b'v', 1, -4) >= 0:\n        return 'add_key'\n"
                    "    if libc.syscall(323, 0) >= 0:\n        return 'userfaultfd'\n"
                    "    if libc.syscall(298, attr, 0, -1, -1, 0) >= 0:\n        return 'perf_event_open'\n"
                    "    return None\n")
SPIN_TURN = probe_turn(BETWEEN_TURNS_SPINNER, CROSS_S) + "open('turn-ended', 'w').write(str(time.time()))\n"
SPIN_CHECK = ("import os, sys, time\nstarted = time.time()\nended = float(open('turn-ended').read())\n"
              "open('stop', 'w').close()\n"
              "beats = [float(b) for b in open('beats').read().split()] if os.path.exists('beats') else []\n"
              "between = [b for b in beats if ended + 0.2 < b < started - 0.05]\n"
              f"if between:\n    print('PROBE HIT: ran between turns', len(between))\n    sys.stdout.flush()\n"
              f"    os._exit({PROBE_HIT})\n")

#: Cross-rollout attacks by tool-turn rollouts (CsappExact, LinearAlgebra): the turns, and
#: whether the attack must learn nothing (every turn ``ok``; a hit fails its turn with
#: PROBE_HIT) or only must not hurt anyone (starving attacks: any verdict of its own, no
#: scoring error anywhere). The probes also leave a process that tries to outlive the turn.
SESSION_CROSS = {
    "x_read_cmdline": ([probe_turn(READ_CMDLINE_PROBE, CROSS_S), CHECK_HITS], True),
    "x_steal_binary": ([probe_turn(STEAL_BINARY_PROBE, CROSS_S), CHECK_HITS], True),
    "x_signal": ([probe_turn(SIGNAL_PROBE, CROSS_S), CHECK_HITS], True),
    "x_between_turns": ([SPIN_TURN, SPIN_CHECK], True),
    "x_sync": ([probe_turn(SYNC_PROBE, CROSS_S), CHECK_HITS], True),
    "x_pty_hoard": ([PTY_HOARD], True),
    "x_leak_read": ([probe_turn(LEAK_READER, CROSS_S, escape=False)], True),
    # enablers and starvers: they take what they can and hold it while their session is stopped
    "x_leak_write": ([LEAK_WRITER, SOCKET_WRITER + "import time\ntime.sleep(1.5)\n"], False),
    "x_memfd_hog": ([MEMFD_HOG, "print('still holding', len(hog))"], False),
    "x_thread_hoard": ([THREAD_HOARD, "print('still holding', len(hoard))"], False),
}

# C++ and Rust candidate payloads, as in tests/hostile/test_cross_rollout.py (with CROSS_S).
_MS = int(CROSS_S * 1000)
CPP_READ_CMDLINE = (
    f"    for (int round = 0; round < {_MS // 5}; ++round, usleep(5000)) {{\n"
    "        DIR* proc = opendir(\"/proc\");\n"
    "        while (dirent* entry = readdir(proc)) {\n"
    "            struct stat info;\n"
    "            std::string pid = entry->d_name;\n"
    "            if (std::atoi(pid.c_str()) <= 0 || stat((\"/proc/\" + pid).c_str(), &info) != 0) continue;\n"
    "            if (info.st_uid == getuid()) continue;\n"
    "            std::ifstream in(\"/proc/\" + pid + \"/cmdline\", std::ios::binary);\n"
    "            std::string command((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());\n"
    f"            if (command.find(\"/scratch/\") != std::string::npos) _exit({PROBE_HIT});\n"
    "        }\n        closedir(proc);\n    }")
CPP_SYNC = ("    for (auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds("
            f"{_MS}); std::chrono::steady_clock::now() < end;)\n"
            f"        if (syscall(162) == 0) _exit({PROBE_HIT});  // SYS_sync")
CPP_SOCKET_CONNECT = (
    f"    for (auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds({_MS});"
    " std::chrono::steady_clock::now() < end; usleep(5000)) {\n"
    "        int sock = socket(AF_UNIX, SOCK_STREAM, 0);\n"
    "        sockaddr_un address{};\n        address.sun_family = AF_UNIX;\n"
    f"        const char name[] = \"{LEAK_TOKEN}1\";\n"
    "        std::memcpy(address.sun_path + 1, name, sizeof name - 1);\n"
    "        socklen_t length = offsetof(sockaddr_un, sun_path) + 1 + sizeof name - 1;\n"
    f"        if (connect(sock, (sockaddr*)&address, length) == 0) _exit({PROBE_HIT});\n"
    "        close(sock);\n    }")
CPP_OPENPT = (f"    for (int i = 0; i < 8; ++i) if (posix_openpt(O_RDWR | O_NOCTTY) >= 0) _exit({PROBE_HIT});\n"
              f"    if (open(\"/dev/pts/ptmx\", O_RDWR | O_NOCTTY) >= 0) _exit({PROBE_HIT});")
CPP_KILL_ALL = ("    pid_t killer = fork();\n"
                "    if (killer == 0) {\n        setsid();\n"
                "        for (auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds("
                f"{_MS}); std::chrono::steady_clock::now() < end;) {{ kill(-1, SIGKILL); usleep(2000); }}\n"
                "        _exit(0);\n    }\n"
                f"    usleep({_MS * 1000 + 300000});")
CPP_SPIN_ALL_CORES = ("    std::vector<std::thread> spinners;\n"
                      "    unsigned count = std::thread::hardware_concurrency() * 2 + 2;\n"
                      f"    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds({_MS});\n"
                      "    for (unsigned i = 0; i < count; ++i)\n"
                      "        spinners.emplace_back([end] { while (std::chrono::steady_clock::now() < end) {} });\n"
                      "    for (auto& spinner : spinners) spinner.join();")
RUST_WHILE = f"    let end = std::time::Instant::now() + std::time::Duration::from_millis({_MS});\n"
RUST_PROC_FD = ("    use std::os::unix::fs::MetadataExt;\n"
                "    let me = std::fs::metadata(\"/proc/self\").unwrap().uid();\n" + RUST_WHILE
                + "    while std::time::Instant::now() < end {\n"
                "        for entry in std::fs::read_dir(\"/proc\").unwrap().flatten() {\n"
                "            let name = entry.file_name().to_string_lossy().to_string();\n"
                "            if name.parse::<u32>().is_err() { continue; }\n"
                "            let Ok(meta) = entry.metadata() else { continue };\n"
                "            if meta.uid() == me || meta.uid() == 0 { continue; }\n"
                "            for part in [\"fd/0\", \"mem\", \"environ\", \"cwd\"] {\n"
                "                if std::fs::File::open(format!(\"/proc/{name}/{part}\")).is_ok()"
                f" {{ std::process::exit({PROBE_HIT}); }}\n"
                "            }\n        }\n"
                "        std::thread::sleep(std::time::Duration::from_millis(5));\n    }")
RUST_NET_UNIX = (RUST_WHILE + "    while std::time::Instant::now() < end {\n"
                 "        let table = std::fs::read_to_string(\"/proc/net/unix\").unwrap_or_default();\n"
                 f"        if table.contains(\"{LEAK_TOKEN[:4]}\") && table.contains(\"{LEAK_TOKEN[4:]}\")"
                 f" {{ std::process::exit({PROBE_HIT}); }}\n"
                 "        std::thread::sleep(std::time::Duration::from_millis(5));\n    }")
RUST_SYNCFS = ("    extern \"C\" { fn syscall(number: i64, ...) -> i64; }\n"
               "    use std::os::unix::io::AsRawFd;\n"
               "    let root = std::fs::File::open(\"/\").unwrap();\n" + RUST_WHILE
               + "    while std::time::Instant::now() < end {\n"
               "        if unsafe { syscall(306, root.as_raw_fd() as i64) } == 0"
               f" {{ std::process::exit({PROBE_HIT}); }}\n"
               f"        if unsafe {{ syscall(162) }} == 0 {{ std::process::exit({PROBE_HIT}); }}\n    }}")
RUST_IO_URING = ("    extern \"C\" { fn syscall(number: i64, ...) -> i64; }\n"
                 "    let mut params = [0u8; 120];\n" + RUST_WHILE
                 + "    while std::time::Instant::now() < end {\n"
                 "        if unsafe { syscall(425, 4i64, params.as_mut_ptr()) } >= 0"
                 f" {{ std::process::exit({PROBE_HIT}); }}\n"
                 "        std::thread::sleep(std::time::Duration::from_millis(20));\n    }")
RUST_SIGNAL = ("    extern \"C\" { fn kill(pid: i32, sig: i32) -> i32; fn ptrace(r: i64, pid: i32, a: usize, d: usize)"
               " -> i64; fn getpid() -> i32; }\n" + RUST_WHILE
               + "    while std::time::Instant::now() < end {\n"
               "        for entry in std::fs::read_dir(\"/proc\").unwrap().flatten() {\n"
               "            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };\n"
               "            if pid <= 1 || pid == unsafe { getpid() } { continue; }\n"
               "            use std::os::unix::fs::MetadataExt;\n"
               "            let Ok(meta) = entry.metadata() else { continue };\n"
               "            if meta.uid() == 0 { continue; }\n"
               "            if meta.uid() != std::fs::metadata(\"/proc/self\").unwrap().uid()"
               " && unsafe { kill(pid, 0) } == 0"
               f" {{ std::process::exit({PROBE_HIT}); }}\n"
               f"            if unsafe {{ ptrace(16, pid, 0, 0) }} == 0 {{ std::process::exit({PROBE_HIT}); }}\n"
               "        }\n        std::thread::sleep(std::time::Duration::from_millis(5));\n    }")
RUST_TMPFS_FILL = ("    let chunk = vec![1u8; 1 << 20];\n"
                   "    'fill: for file in 0..4096 {\n"
                   "        let Ok(mut out) = std::fs::File::create(format!(\"fill-{file}\")) else { break };\n"
                   "        for _ in 0..48 {\n"
                   "            if std::io::Write::write_all(&mut out, &chunk).is_err() { break 'fill; }\n"
                   "        }\n    }\n"
                   f"    std::thread::sleep(std::time::Duration::from_millis({_MS}));\n"
                   "    for file in 0..4096 { let _ = std::fs::remove_file(format!(\"fill-{file}\")); }")

#: Cross-rollout attacks by CompGeom candidates, per language: the payload (run before the
#: candidate's correct work) and whether it must learn nothing (the candidate then scores
#: ``correct``) or only must not hurt anyone.
CANDIDATE_CROSS = {
    "python": {
        "x_read_cmdline": (candidate_probe(READ_CMDLINE_PROBE, CROSS_S), True),
        "x_steal_binary": (candidate_probe(STEAL_BINARY_PROBE, CROSS_S), True),
        "x_signal": (candidate_probe(SIGNAL_PROBE, CROSS_S), True),
        "x_leak_read": (candidate_probe(LEAK_READER, CROSS_S), True),
        "x_host_calls": (candidate_probe(HOST_CALLS_PROBE, CROSS_S), True),
    },
    "cpp": {
        "x_read_cmdline": (CPP_READ_CMDLINE, True),
        "x_sync": (CPP_SYNC, True),
        "x_socket_connect": (CPP_SOCKET_CONNECT, True),
        "x_openpt": (CPP_OPENPT, True),
        "x_kill_all": (CPP_KILL_ALL, False),
        "x_spin_all_cores": (CPP_SPIN_ALL_CORES, False),
    },
    "rust": {
        "x_proc_fd": (RUST_PROC_FD, True),
        "x_net_unix": (RUST_NET_UNIX, True),
        "x_syncfs": (RUST_SYNCFS, True),
        "x_io_uring": (RUST_IO_URING, True),
        "x_signal": (RUST_SIGNAL, True),
        "x_tmpfs_fill": (RUST_TMPFS_FILL, False),
    },
}

ENV_MIX = (
    ("CsappExact-v0", {"max_turns": 3}),
    ("CompGeomPython-v0", {"max_turns": 1, "primitives": [PRIMITIVE]}),
    ("CompGeomCpp-v0", {"max_turns": 1, "primitives": [PRIMITIVE]}),
    ("LinearAlgebra-v0", {"max_turns": 3}),
    ("CompGeomRust-v0", {"max_turns": 1, "primitives": [PRIMITIVE]}),
)


@dataclass
class Tally:
    steps: int = 0
    episodes: int = 0
    verdicts: collections.Counter = field(default_factory=collections.Counter)
    executions: collections.Counter = field(default_factory=collections.Counter)
    scoring_errors: list[str] = field(default_factory=list)
    correct_not_rewarded: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    cross_episodes: collections.Counter = field(default_factory=collections.Counter)
    probe_hits: list[str] = field(default_factory=list)  # a cross-rollout probe found what it must not
    cross_inconclusive: list[str] = field(default_factory=list)  # a must-learn-nothing attack ended otherwise
    lock: threading.Lock = field(default_factory=threading.Lock)

    def step(self, env, action: str) -> tuple[float, bool, dict]:
        observation, reward, terminated, truncated, info = env.step(action)
        info = {**info, "observation": observation}
        with self.lock:
            self.steps += 1
            if info.get("execution"):
                self.executions[info["execution"]] += 1
            if info["scoring_error"]:
                self.scoring_errors.append(info["scoring_error"])
            if terminated or truncated:
                self.episodes += 1
                self.verdicts[info["verdict"]] += 1
        return reward, terminated or truncated, info


def language_of(env) -> str | None:
    """A CompGeom env's language (None for the tool-turn families)."""
    unwrapped = env.unwrapped
    return unwrapped.task_ids[0].split("/")[1] if unwrapped.family == "compgeom" else None


def attacks_for(env) -> list[str]:
    """The hostile kinds an env may draw: its own-container ones and its cross-rollout ones."""
    language = language_of(env)
    cross = SESSION_CROSS if language is None else CANDIDATE_CROSS[language]
    return sorted(HOSTILE) + sorted(cross)


def judge_cross(tally: Tally, env_id: str, attack: str, strict: bool, infos: list[dict]) -> None:
    """A cross-rollout attack's steps: a hit is a PROBE HIT in a tool turn's output, or a
    candidate that should have answered correctly ending with a runtime error (its PROBE_HIT exit)."""
    with tally.lock:
        tally.cross_episodes[attack] += 1
    if not strict:
        return
    for info in infos:
        outcome = info["verdict"] if info.get("verdict") is not None else info.get("execution")
        if outcome in (ExecutionStatus.OK, Verdict.CORRECT) or info["scoring_error"]:
            continue  # a scoring error is counted as one already
        record = f"{env_id} {attack}: {outcome}: {info['observation'][-300:]!r}"
        hit = "PROBE HIT" in info["observation"] or outcome in (ExecutionStatus.RUNTIME_ERROR, Verdict.RUNTIME_ERROR)
        with tally.lock:
            (tally.probe_hits if hit else tally.cross_inconclusive).append(record)


def episode(env, env_id: str, kind: str, attack: str, seed: int, tally: Tally) -> None:
    """One episode of ``kind``; a correct episode must earn 1.0."""
    unwrapped = env.unwrapped
    language = language_of(env)
    if language is not None:
        env.reset(options={"task_id": task_id(language)})
        if kind == "correct":
            source = compgeom.reference_solution(unwrapped.current_task)
        elif kind == "wrong":
            source = next(iter(bad_sources(PRIMITIVE, language).values()))
        elif attack in HOSTILE:
            source = inject(language, HOSTILE[attack][language])
        else:
            payload, strict = CANDIDATE_CROSS[language][attack]
            source = inject(language, payload)
        reward, _, info = tally.step(env, f"```{language}\n{source}\n```")
        if kind == "hostile" and attack not in HOSTILE:
            judge_cross(tally, env_id, attack, strict, [info])
    else:
        env.reset(seed=seed)
        if kind == "hostile":
            turns, strict = ([HOSTILE[attack]["python"]], False) if attack in HOSTILE else SESSION_CROSS[attack]
            infos = []
            for turn in turns:
                _, done, info = tally.step(env, f"```python\n{turn}\n```")
                infos.append(info)
                if done:
                    break
            if attack not in HOSTILE:
                judge_cross(tally, env_id, attack, strict, infos)
            if done:
                return
        action = unwrapped.reference_action() if kind != "wrong" else "ANSWER: 0"
        reward, _, info = tally.step(env, action)
    if kind == "correct" and reward != 1.0 and not info["scoring_error"]:
        with tally.lock:
            tally.correct_not_rewarded.append(f"{env_id} {info['task_id']}: {info['verdict']}")


def rss_mib() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def leftover_job_processes(pool) -> tuple[int, list[str]]:
    """Processes of job uids still alive in the purged containers once every episode is over
    (target none): one probe per clean container, run at once so that each lands on a different one
    (each ``pool.run`` is a one-job rollout of its own)."""
    pool.prestart(0, timeout_s=120)  # no purge in flight: every container is clean and waiting
    containers = pool.stats().live_workers
    probe = Job("python", {"main.py": LEFTOVER_PROBE})
    with ThreadPoolExecutor(containers) as threads:
        outputs = list(threads.map(lambda _: pool.run(probe).stdout.strip(), range(containers)))
    return containers, [output for output in outputs if output != "[]"]


def child_processes() -> list[str]:
    """Host processes this process started and left running (the Docker backend starts none)."""
    mine = str(os.getpid())
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            if fields[1] == mine:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    found.append(f"{pid} {handle.read()[:80]!r}")
        except OSError:
            continue
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=60, help="per env")
    parser.add_argument("--minutes", type=float, default=10.0, help="stop starting episodes after this")
    parser.add_argument("--pool-size", type=int, default=None,
                        help="cap on the containers (default: one per live env, plus the spare reserve)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args()

    rss = {"start": rss_mib()}
    client = daemon.docker_client()
    envs = [gym.make(env_id, pool_size=args.pool_size, limits=LIMITS, **kwargs)
            for env_id, kwargs in (ENV_MIX[i % len(ENV_MIX)] for i in range(args.envs))]
    pool = envs[0].unwrapped.sandbox
    tally = Tally()
    deadline = time.monotonic() + args.minutes * 60
    started = time.monotonic()
    samples: list[tuple[float, float]] = []

    def run_env(index: int) -> None:
        env_id = ENV_MIX[index % len(ENV_MIX)][0]
        rng = np.random.default_rng([args.seed, index])
        for _ in range(args.episodes):
            if time.monotonic() > deadline:
                return
            kind = str(rng.choice(KINDS, p=KIND_WEIGHTS))
            attack = str(rng.choice(attacks_for(envs[index])))
            seed = int(rng.integers(1 << 30))
            try:
                episode(envs[index], env_id, kind, attack, seed, tally)
            except Exception as exc:  # a crash of the library itself: reported, never hidden
                with tally.lock:
                    tally.crashes.append(f"{env_id} {kind} {attack}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run_env, args=(i,), daemon=True) for i in range(args.envs)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        time.sleep(5)
        samples.append((round(time.monotonic() - started, 1), round(rss_mib(), 1)))
    elapsed = time.monotonic() - started
    rss["end_before_close"] = rss_mib()
    stats = pool.stats()
    probed, left_in_workers = leftover_job_processes(pool)
    for env in envs:
        env.close()
    time.sleep(1)
    leaked = [c.short_id for c in daemon.containers_of_this_process(client)]
    report = {
        "envs": args.envs, "pool_size": args.pool_size, "seconds": round(elapsed, 1),
        "steps": tally.steps, "episodes": tally.episodes, "steps_per_second": round(tally.steps / elapsed, 2),
        "verdicts": dict(tally.verdicts), "tool_turn_executions": dict(tally.executions),
        "scoring_errors": len(tally.scoring_errors), "scoring_error_samples": tally.scoring_errors[:5],
        "correct_actions_not_rewarded": tally.correct_not_rewarded[:10], "crashes": tally.crashes[:10],
        "cross_rollout_episodes": dict(tally.cross_episodes),
        "cross_rollout_probe_hits": len(tally.probe_hits), "probe_hit_samples": tally.probe_hits[:10],
        "cross_rollout_inconclusive": len(tally.cross_inconclusive),
        "inconclusive_samples": tally.cross_inconclusive[:10],
        "pool": {"requests": stats.requests, "leases": stats.leases, "purges": stats.purges,
                 "workers_started": stats.workers_started, "workers_lost": stats.workers_lost,
                 "retries": stats.retries, "live_workers": stats.live_workers},
        "purged_containers_probed": probed, "job_processes_left_in_purged_containers": left_in_workers,
        "leaked_containers": leaked, "leaked_child_processes": child_processes(),
        "rss_mib": {"start": round(rss["start"], 1), "end": round(rss["end_before_close"], 1),
                    "max": max((mib for _, mib in samples), default=rss["end_before_close"])},
        "rss_samples": samples[:: max(1, len(samples) // 20)],
    }
    print(json.dumps(report, indent=2))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=2)
    ok = not (tally.scoring_errors or tally.correct_not_rewarded or tally.crashes or leaked or left_in_workers
              or report["leaked_child_processes"] or tally.probe_hits)
    print("soak: " + ("PASS" if ok else "FAIL") + f" ({tally.steps} steps in {elapsed:.0f} s)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

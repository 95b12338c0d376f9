"""Cross-rollout attacks: one live rollout against another live rollout, or against the host.

A rollout is one env instance's episode. Here several rollouts of one process (sharing one
``Sandbox``, as a vector of envs does) overlap: an attacker's step runs in a thread, for a few
seconds, while a victim rollout does correct work (a CompGeom reference submission in Python,
C++ or Rust, a CsappExact tool turn and its ANSWER, a LinearAlgebra tool turn and its answer).
Every test asserts that the victim's work still scores 1.0 with no ``scoring_error`` and that
the attacker learned nothing: a probe that finds what it must not (another rollout's job dir,
files, binary, processes, sockets; a host pty, ``sync``, io_uring) exits ``PROBE_HIT``, which
fails its turn or its candidate.

The attacker is the same policy in each of its rollouts. A tool-turn attacker also leaves its
probe running after the turn in a process that tries to outlive the turn-end sweep (a fork
chain), and holds what it took (memfds, threads, sockets, ptys) while its session is stopped,
so the attack covers both the turn and the time between turns. The classes are the issue's:
read, steal, slow, starve, signal, message, host. Two host checks are arithmetic on the live
containers' settings (their sum of memory limits, their log driver), since running those attacks
to the end would take down the machine the tests run on.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable

import gymnasium as gym
import pytest

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.sandbox import Limits
from gym_sysmath.sandbox.image.toolchains import TOOLCHAINS
from tests.hostile.conftest import COMPILED_LANGUAGES, LANGUAGES
from tests.hostile.payloads import (
    BETWEEN_TURNS_SPINNER,
    CHECK_HITS,
    LEAK_READER,
    LEAK_TOKEN,
    LEAK_WRITER,
    PROBE_HIT,
    READ_CMDLINE_PROBE,
    SIGNAL_PROBE,
    STEAL_BINARY_PROBE,
    candidate_probe,
    inject,
    probe_turn,
    task_id,
)

pytestmark = pytest.mark.docker

#: How long an attacker's step keeps attacking; victims start just after it does.
ATTACK_S = 2.0
#: Rollouts of the attacking policy for attacks that need to share the victim's machine.
ATTACKERS = 2
#: Attacker candidates get room to run their attack before they answer.
ATTACKER_LIMITS = Limits(wall_s=20.0, cpu_s=10.0)
VICTIMS = (*LANGUAGES, "csapp", "linalg")


class Rollouts:
    """The envs of one process: attacker and victim rollouts on one shared sandbox."""

    def __init__(self) -> None:
        self.sessions = [gym.make("CsappExact-v0", max_turns=5) for _ in range(2 * ATTACKERS)]
        self.candidates = {language: gym.make("CompGeom-v0", languages=[language], max_turns=1,
                                              limits=ATTACKER_LIMITS) for language in LANGUAGES}
        self.victims = {language: gym.make("CompGeom-v0", languages=[language], max_turns=1)
                        for language in LANGUAGES}
        self.victims["csapp"] = gym.make("CsappExact-v0", max_turns=3)
        self.victims["linalg"] = gym.make("LinearAlgebra-v0", max_turns=2)

    def close(self) -> None:
        for env in [*self.sessions, *self.candidates.values(), *self.victims.values()]:
            env.close()


@pytest.fixture(scope="module")
def rollouts(docker_available):
    envs = Rollouts()
    yield envs
    envs.close()


# --------------------------------------------------------------------------- victims


def victim_work(rollouts: Rollouts, victim: str) -> None:
    """The victim rollout's whole episode of correct work; asserts it scores 1.0."""
    env = rollouts.victims[victim]
    if victim in LANGUAGES:
        env.reset(options={"task_id": task_id(victim)})
        fence, body = env.unwrapped.reference_action().split("\n", 1)
        comment = TOOLCHAINS[victim].comment  # a fresh build: the cache cannot answer for it
        _, reward, _, _, info = env.step(f"{fence}\n{comment} rollout {secrets.token_hex(8)}\n{body}")
        assert (reward, info["verdict"], info["scoring_error"]) == (1.0, "correct", None), info
        return
    env.reset(seed=secrets.randbelow(1000))
    if victim == "csapp":
        code = env.unwrapped.reference_code() + "\nprint('victim result', result)"
        expected = "victim result"
    else:
        code = "import numpy as np\nprint('victim rank', np.linalg.matrix_rank(np.eye(5)))"
        expected = "victim rank 5"
    observation, reward, _, _, info = env.step(f"```python\n{code}\n```")
    assert (info["execution"], info["scoring_error"]) == ("ok", None), observation[-2000:]
    assert expected in observation, observation[-2000:]
    _, reward, terminated, _, info = env.step(env.unwrapped.reference_action())
    assert (reward, terminated, info["verdict"], info["scoring_error"]) == (1.0, True, "correct", None), info


# --------------------------------------------------------------------------- attackers

Attack = Callable[[threading.Event], list[dict]]


def session_attack(env, *turns: str, check: str | None = CHECK_HITS) -> Attack:
    """A tool-turn rollout: ``turns`` run at once; its episode stays open (its session stopped
    between turns, holding whatever it took) until the victim is done; then ``check`` runs."""

    def run(victim_done: threading.Event) -> list[dict]:
        env.reset(seed=0)
        infos = []
        try:
            for turn in turns:
                observation, _, _, _, info = env.step(f"```python\n{turn}\n```")
                infos.append({**info, "observation": observation})
            victim_done.wait(120)
            if check is not None:
                observation, _, _, _, info = env.step(f"```python\n{check}\n```")
                infos.append({**info, "observation": observation})
        finally:
            env.reset(seed=0)  # ends the episode and its session
        return infos

    return run


def candidate_attack(env, language: str, payload: str) -> Attack:
    """A CompGeom rollout whose candidate runs ``payload`` before its (correct) work."""

    def run(victim_done: threading.Event) -> list[dict]:
        env.reset(options={"task_id": task_id(language)})
        source = inject(language, payload)
        observation, _, _, _, info = env.step(f"```{language}\n{source}\n```")
        return [{**info, "observation": observation}]

    return run


def overlap(rollouts: Rollouts, victim: str, *attacks: Attack, lead_s: float = 0.4) -> list[list[dict]]:
    """Start each attack in a thread (staggered, so each takes a machine of its own where
    machines are shared), run the victim's episode meanwhile, and return what each attack's
    steps reported. The victim's assertions run first; an attacker's exception is re-raised;
    and no harness failure may have been absorbed by a retry meanwhile (a container broken by a
    neighbour, even one the retry hides)."""
    done = threading.Event()
    results: list[list[dict] | BaseException | None] = [None] * len(attacks)

    def runner(index: int, attack: Attack) -> None:
        try:
            results[index] = attack(done)
        except BaseException as exc:  # re-raised in the test's thread
            results[index] = exc

    pool = rollouts.victims[victim].unwrapped.sandbox
    retries = pool.stats().retries
    threads = [threading.Thread(target=runner, args=(index, attack), daemon=True)
               for index, attack in enumerate(attacks)]
    for thread in threads:
        thread.start()
        time.sleep(lead_s / max(len(threads), 1))
    time.sleep(lead_s / 2)
    try:
        victim_work(rollouts, victim)
    finally:
        done.set()
        for thread in threads:
            thread.join(180)
    for result in results:
        if isinstance(result, BaseException):
            raise result
        assert result is not None, "an attacker rollout did not finish"
    assert pool.stats().retries == retries, "a harness failure was absorbed by a retry: a machine broke under the attack"
    return results  # type: ignore[return-value]


def assert_no_scoring_error(results: list[list[dict]]) -> None:
    for steps in results:
        for info in steps:
            assert info["scoring_error"] is None, f"the attacker's own doing was blamed on the harness: {info}"


def assert_learned_nothing(results: list[list[dict]]) -> None:
    """Every attacker step ran and found nothing: turns ``ok``, candidates ``correct``."""
    assert_no_scoring_error(results)
    for steps in results:
        for info in steps:
            outcome = info["verdict"] if info.get("verdict") is not None else info.get("execution")
            assert outcome in ("ok", "correct"), f"the attacker found what it must not: {info['observation'][-1500:]}"


def sessions(rollouts: Rollouts, count: int = ATTACKERS) -> list:
    return rollouts.sessions[:count]


# --------------------------------------------------------------------------- the catalogue's own check


def test_the_cross_rollout_probes_find_what_they_look_for(rollouts):
    # the probes are only meaningful if they see a leak: within one rollout they must
    env = rollouts.sessions[0]
    env.reset(seed=0)
    try:
        _, _, _, _, info = env.step(f"```python\n{LEAK_WRITER}\n```")
        assert info["execution"] == "ok"
        observation, _, _, _, info = env.step(f"```python\n{probe_turn(LEAK_READER, 0.1, escape=False)}\n```")
        assert info["execution"] == "runtime_error" and "PROBE HIT" in observation, observation[-1500:]
    finally:
        env.reset(seed=0)


# --------------------------------------------------------------------------- read


@pytest.mark.parametrize("victim", COMPILED_LANGUAGES)
def test_read_neighbours_job_dir_from_proc_cmdline(rollouts, victim):
    # a tool turn (and what it leaves running) watches every command line for a job dir that is
    # not its own: the compiler's temporaries name the one a neighbour's build writes into
    attacks = [session_attack(env, probe_turn(READ_CMDLINE_PROBE, ATTACK_S)) for env in sessions(rollouts)]
    assert_learned_nothing(overlap(rollouts, victim, *attacks))


def test_read_neighbours_build_paths_from_a_compiled_candidate(rollouts):
    # the same look from a C++ candidate while a Rust neighbour builds
    payload = (f"    for (int round = 0; round < {int(ATTACK_S * 200)}; ++round, usleep(5000)) {{\n"
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
    results = overlap(rollouts, "rust", candidate_attack(rollouts.candidates["cpp"], "cpp", payload))
    assert_learned_nothing(results)


def test_read_neighbours_hidden_inputs_through_proc_fd(rollouts):
    # a Rust candidate opens the stdin, memory and environment of every process not its own,
    # while a Python neighbour reads its hidden cases from stdin
    payload = ("    use std::os::unix::fs::MetadataExt;\n"
               "    let me = std::fs::metadata(\"/proc/self\").unwrap().uid();\n"
               "    let end = std::time::Instant::now() + std::time::Duration::from_millis("
               f"{int(ATTACK_S * 1000)});\n"
               "    while std::time::Instant::now() < end {\n"
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
    results = overlap(rollouts, "python", candidate_attack(rollouts.candidates["rust"], "rust", payload))
    assert_learned_nothing(results)


# --------------------------------------------------------------------------- steal


@pytest.mark.parametrize("victim", COMPILED_LANGUAGES)
def test_steal_neighbours_compiled_binary(rollouts, victim):
    # find a neighbour's job dir in a command line, then copy its `prog` (or sources) out of it:
    # with it, a rollout that submits a loader scores what the neighbour earned
    attacks = [session_attack(env, probe_turn(STEAL_BINARY_PROBE, ATTACK_S)) for env in sessions(rollouts)]
    assert_learned_nothing(overlap(rollouts, victim, *attacks))


def test_steal_neighbours_sources_from_a_python_candidate(rollouts):
    results = overlap(rollouts, "cpp", candidate_attack(rollouts.candidates["python"], "python",
                                                        candidate_probe(STEAL_BINARY_PROBE, ATTACK_S)))
    assert_learned_nothing(results)


# --------------------------------------------------------------------------- slow


def test_cpu_spin_on_every_core_slows_neighbours_graded_run(rollouts):
    # a C++ candidate spins a thread per core (and then some) while a Python neighbour is graded
    payload = ("    std::vector<std::thread> spinners;\n"
               "    unsigned count = std::thread::hardware_concurrency() * 2 + 2;\n"
               "    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds("
               f"{int(ATTACK_S * 1000)});\n"
               "    for (unsigned i = 0; i < count; ++i)\n"
               "        spinners.emplace_back([end] { while (std::chrono::steady_clock::now() < end) {} });\n"
               "    for (auto& spinner : spinners) spinner.join();")
    results = overlap(rollouts, "python", candidate_attack(rollouts.candidates["cpp"], "cpp", payload))
    assert_no_scoring_error(results)  # its own verdict may be a time-out; the victim's is what counts


def test_background_spinner_runs_between_turns(rollouts):
    # what a turn leaves running must not run while the rollout is "thinking": every beat the
    # spinner logs between the end of one turn and the start of the next is CPU taken from others
    spin_turn = probe_turn(BETWEEN_TURNS_SPINNER, ATTACK_S) + "open('turn-ended', 'w').write(str(time.time()))\n"
    check = (f"import os, sys, time\nstarted = time.time()\nended = float(open('turn-ended').read())\n"
             "open('stop', 'w').close()\n"
             "beats = [float(b) for b in open('beats').read().split()] if os.path.exists('beats') else []\n"
             "between = [b for b in beats if ended + 0.2 < b < started - 0.05]\n"
             f"if between:\n    print('ran between turns', len(between))\n    sys.stdout.flush()\n"
             f"    os._exit({PROBE_HIT})\n")
    attacks = [session_attack(env, spin_turn, check=check) for env in sessions(rollouts)]
    assert_learned_nothing(overlap(rollouts, "rust", *attacks))


def test_sync_storm_flushes_the_hosts_page_cache(rollouts):
    # sync() writes back every dirty page of the host, not the container's: a C++ candidate
    # calls it in a loop while a Rust neighbour builds
    payload = ("    for (auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds("
               f"{int(ATTACK_S * 1000)}); std::chrono::steady_clock::now() < end;)\n"
               f"        if (syscall(162) == 0) _exit({PROBE_HIT});  // SYS_sync")
    results = overlap(rollouts, "rust", candidate_attack(rollouts.candidates["cpp"], "cpp", payload))
    assert_learned_nothing(results)


def test_syncfs_storm_flushes_the_hosts_disk(rollouts):
    payload = ("    extern \"C\" { fn syscall(number: i64, ...) -> i64; }\n"
               "    use std::os::unix::io::AsRawFd;\n"
               "    let root = std::fs::File::open(\"/\").unwrap();\n"
               "    let end = std::time::Instant::now() + std::time::Duration::from_millis("
               f"{int(ATTACK_S * 1000)});\n"
               "    while std::time::Instant::now() < end {\n"
               f"        if unsafe {{ syscall(306, root.as_raw_fd() as i64) }} == 0 {{ std::process::exit({PROBE_HIT}); }}\n"
               "        if unsafe { syscall(162) } == 0 { std::process::exit(" f"{PROBE_HIT}); }}\n"
               "    }")
    results = overlap(rollouts, "cpp", candidate_attack(rollouts.candidates["rust"], "rust", payload))
    assert_learned_nothing(results)


def test_session_sync_loop_between_turns(rollouts):
    # a tool turn calling sync() (and leaving a process that keeps calling it) while a
    # neighbour's session works
    probe = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
             "def probe():\n    return 'sync() ran' if libc.syscall(162) == 0 else None\n")
    attacks = [session_attack(env, probe_turn(probe, ATTACK_S)) for env in sessions(rollouts)]
    assert_learned_nothing(overlap(rollouts, "linalg", *attacks))


# --------------------------------------------------------------------------- starve

MEMFD_HOG = """\
import errno, os
def room():
    # what the machine's memory cgroup has left that cannot be reclaimed, less a little: a
    # neighbour's compiler needs more than that
    try:
        limit = int(open('/sys/fs/cgroup/memory/memory.limit_in_bytes').read())
        stat = dict(line.split() for line in open('/sys/fs/cgroup/memory/memory.stat'))
        return limit - int(stat['total_rss']) - int(stat['total_shmem']) - (16 << 20)
    except (OSError, ValueError, KeyError):
        pass
    try:
        limit = int(open('/sys/fs/cgroup/memory.max').read())
        stat = dict(line.split() for line in open('/sys/fs/cgroup/memory.stat'))
        return limit - int(stat['anon']) - int(stat['shmem']) - (16 << 20)
    except (OSError, ValueError, KeyError):
        return (2900 << 20) - taken_so_far[0]  # no cgroup to read: about the issue's 2.9 GiB
taken_so_far = [0]
hog = []
def take(total):
    chunk = b'\\1' * (1 << 20)
    taken = 0
    while taken < total and room() > len(chunk):
        try:
            fd = os.memfd_create('hog')
        except OSError:
            break
        hog.append(fd)
        try:
            for _ in range(56):  # each file stays under RLIMIT_FSIZE
                if room() <= len(chunk):
                    break
                os.write(fd, chunk)
                taken += len(chunk)
                taken_so_far[0] = taken
        except OSError as exc:
            if exc.errno != errno.EFBIG:
                print('memfd write failed', exc)
                break
    return taken
took = take(8 << 30)
print('memfd bytes held', took)
"""


@pytest.mark.parametrize("victim", ["cpp", "linalg"])
def test_memfd_hog_starves_neighbours_build(rollouts, victim):
    # memfd pages count toward neither RLIMIT_AS nor a disk budget: ~2.9 GiB held by a stopped
    # session must not OOM a neighbour's compiler or session
    attacks = [session_attack(env, MEMFD_HOG, check="print('still holding', len(hog))") for env in sessions(rollouts)]
    assert_no_scoring_error(overlap(rollouts, victim, *attacks))


THREAD_HOARD = """\
import threading
release = threading.Event()
hoard = []
while len(hoard) < 1000:
    try:
        thread = threading.Thread(target=release.wait, daemon=True)
        thread.start()
    except RuntimeError:
        break
    hoard.append(thread)
print('threads held', len(hoard))
"""


def test_threads_held_between_turns_fill_neighbours_pids(rollouts):
    # every rollout of the policy keeps as many threads as it may between turns: together they
    # must not leave a neighbour's build unable to fork its compiler and linker
    attacks = [session_attack(env, THREAD_HOARD, check="print('still holding', len(hoard))")
               for env in rollouts.sessions]
    assert_no_scoring_error(overlap(rollouts, "rust", *attacks, lead_s=1.0))


def test_fork_pressure_starves_neighbours_build(rollouts):
    # a C++ candidate forks until it may not, and keeps the children while a Rust neighbour
    # builds (a host-wide per-uid process limit shared by rollouts would fail that build)
    payload = ("    std::vector<pid_t> children;\n"
               "    for (int i = 0; i < 4096; ++i) {\n"
               "        pid_t child = fork();\n"
               f"        if (child == 0) {{ usleep({int(ATTACK_S * 1e6)}); _exit(0); }}\n"
               "        if (child < 0) break;\n"
               "        children.push_back(child);\n    }\n"
               "    for (pid_t child : children) waitpid(child, nullptr, 0);")
    results = overlap(rollouts, "rust", candidate_attack(rollouts.candidates["cpp"], "cpp", payload))
    assert_no_scoring_error(results)


def test_tmpfs_fill_starves_neighbours_build(rollouts):
    # a Rust candidate fills the scratch with files (every byte is memory on a tmpfs) and holds
    # them while a C++ neighbour builds
    payload = ("    let chunk = vec![1u8; 1 << 20];\n"
               "    'fill: for file in 0..4096 {\n"
               "        let Ok(mut out) = std::fs::File::create(format!(\"fill-{file}\")) else { break };\n"
               "        for _ in 0..48 {\n"
               "            if std::io::Write::write_all(&mut out, &chunk).is_err() { break 'fill; }\n"
               "        }\n    }\n"
               f"    std::thread::sleep(std::time::Duration::from_millis({int(ATTACK_S * 1000)}));\n"
               "    for file in 0..4096 { let _ = std::fs::remove_file(format!(\"fill-{file}\")); }")
    results = overlap(rollouts, "cpp", candidate_attack(rollouts.candidates["rust"], "rust", payload))
    assert_no_scoring_error(results)


def test_memory_balloon_starves_neighbours_session(rollouts):
    # a Python candidate forks children that each touch as much memory as they may (together more
    # than a container holds) while a CsappExact neighbour runs its tool turn
    payload = ("import os, time\nchildren = []\nfor _ in range(2):\n    pid = os.fork()\n    if pid == 0:\n"
               "        held = []\n        try:\n            while True:\n"
               "                held.append(bytearray(64 << 20))\n        except MemoryError:\n            pass\n"
               f"        time.sleep({ATTACK_S})\n        os._exit(0)\n    children.append(pid)\n"
               "for pid in children:\n    os.waitpid(pid, 0)\n")
    results = overlap(rollouts, "csapp", candidate_attack(rollouts.candidates["python"], "python", payload))
    assert_no_scoring_error(results)


# --------------------------------------------------------------------------- signal


def test_signal_or_ptrace_neighbours_processes_from_a_session(rollouts):
    # a tool turn (and what it leaves running) tries to signal, ptrace or open every process it
    # can see that is not its own, while a neighbour's session works
    attacks = [session_attack(env, probe_turn(SIGNAL_PROBE, ATTACK_S)) for env in sessions(rollouts)]
    assert_learned_nothing(overlap(rollouts, "csapp", *attacks))


def test_signal_neighbours_processes_from_a_compiled_candidate(rollouts):
    payload = ("    extern \"C\" { fn kill(pid: i32, sig: i32) -> i32; fn ptrace(r: i64, pid: i32, a: usize, d: usize)"
               " -> i64; fn getpid() -> i32; }\n"
               "    let end = std::time::Instant::now() + std::time::Duration::from_millis("
               f"{int(ATTACK_S * 1000)});\n"
               "    while std::time::Instant::now() < end {\n"
               "        for entry in std::fs::read_dir(\"/proc\").unwrap().flatten() {\n"
               "            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };\n"
               "            if pid <= 1 || pid == unsafe { getpid() } { continue; }\n"
               "            use std::os::unix::fs::MetadataExt;\n"
               "            let Ok(meta) = entry.metadata() else { continue };\n"
               "            if meta.uid() == 0 { continue; }\n"
               "            if meta.uid() != std::fs::metadata(\"/proc/self\").unwrap().uid() && unsafe { kill(pid, 0) } == 0"
               f" {{ std::process::exit({PROBE_HIT}); }}\n"
               f"            if unsafe {{ ptrace(16, pid, 0, 0) }} == 0 {{ std::process::exit({PROBE_HIT}); }}\n"
               "        }\n        std::thread::sleep(std::time::Duration::from_millis(5));\n    }")
    results = overlap(rollouts, "linalg", candidate_attack(rollouts.candidates["rust"], "rust", payload))
    assert_learned_nothing(results)


def test_kill_every_process_in_reach_while_neighbours_work(rollouts):
    # kill(-1, SIGKILL) in a loop from a C++ candidate reaches every process of its uid: no
    # neighbour's compiler, program or session may be one of them
    payload = ("    pid_t killer = fork();\n"
               "    if (killer == 0) {\n"
               "        setsid();\n"
               "        for (auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds("
               f"{int(ATTACK_S * 1000)}); std::chrono::steady_clock::now() < end;) {{ kill(-1, SIGKILL); usleep(2000); }}\n"
               "        _exit(0);\n    }\n"
               "    usleep(" f"{int((ATTACK_S + 0.5) * 1e6)});")
    results = overlap(rollouts, "cpp", candidate_attack(rollouts.candidates["cpp"], "cpp", payload))
    assert_no_scoring_error(results)


# --------------------------------------------------------------------------- message

SOCKET_WRITER = f"""\
import socket
TOKEN = {LEAK_TOKEN!r}
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(b'\\0' + TOKEN.encode() + b'1')
listener.listen(64)
"""


def test_abstract_socket_name_carries_data_to_another_rollout(rollouts):
    # the policy's writer rollout binds an abstract socket whose name is the message; a reader
    # rollout of the same policy (a Rust candidate) looks for it in /proc/net/unix
    payload = ("    let end = std::time::Instant::now() + std::time::Duration::from_millis("
               f"{int(ATTACK_S * 1000)});\n"
               "    while std::time::Instant::now() < end {\n"
               "        let table = std::fs::read_to_string(\"/proc/net/unix\").unwrap_or_default();\n"
               f"        if table.contains(\"{LEAK_TOKEN[:4]}\") && table.contains(\"{LEAK_TOKEN[4:]}\")"
               f" {{ std::process::exit({PROBE_HIT}); }}\n"
               "        std::thread::sleep(std::time::Duration::from_millis(5));\n    }")
    writer = session_attack(rollouts.sessions[0], SOCKET_WRITER, check=None)
    reader = candidate_attack(rollouts.candidates["rust"], "rust", payload)
    results = overlap(rollouts, "python", writer, reader)
    assert_learned_nothing(results)


def test_unix_socket_connection_reaches_another_rollout(rollouts):
    # a C++ candidate connects to the writer rollout's listening abstract socket: a connection
    # is a channel, even to a stopped listener (the kernel queues it)
    name = f"{LEAK_TOKEN}1"
    payload = ("    for (auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds("
               f"{int(ATTACK_S * 1000)}); std::chrono::steady_clock::now() < end; usleep(5000)) {{\n"
               "        int sock = socket(AF_UNIX, SOCK_STREAM, 0);\n"
               "        sockaddr_un address{};\n        address.sun_family = AF_UNIX;\n"
               f"        const char name[] = \"{name}\";\n"
               "        std::memcpy(address.sun_path + 1, name, sizeof name - 1);\n"
               "        socklen_t length = offsetof(sockaddr_un, sun_path) + 1 + sizeof name - 1;\n"
               f"        if (connect(sock, (sockaddr*)&address, length) == 0) _exit({PROBE_HIT});\n"
               "        close(sock);\n    }")
    writer = session_attack(rollouts.sessions[0], SOCKET_WRITER, check=None)
    reader = candidate_attack(rollouts.candidates["cpp"], "cpp", payload)
    results = overlap(rollouts, "csapp", writer, reader)
    assert_learned_nothing(results)


def test_same_policy_cannot_pass_data_between_rollouts(rollouts):
    # a writer rollout leaves the token everywhere it can (files, abstract sockets, /dev/shm,
    # its environment, System V and POSIX IPC, the keyring, a named process) and keeps its
    # episode open; reader rollouts look for it while the writer lives (a tool turn, and a
    # Python candidate) and after the writer's episode has ended (fresh episodes, one after
    # another, so that a recycled machine would be found)
    writer_env = rollouts.sessions[0]
    reader_env = rollouts.sessions[1]
    writer_env.reset(seed=0)
    ended = False
    try:
        _, _, _, _, info = writer_env.step(f"```python\n{LEAK_WRITER}\n```")
        assert (info["execution"], info["scoring_error"]) == ("ok", None), info
        concurrent = overlap(
            rollouts, "csapp",
            session_attack(reader_env, probe_turn(LEAK_READER, ATTACK_S, escape=False), check=None),
            candidate_attack(rollouts.candidates["python"], "python", candidate_probe(LEAK_READER, ATTACK_S)))
        assert_learned_nothing(concurrent)
        _, reward, terminated, _, info = writer_env.step(writer_env.unwrapped.reference_action())
        assert (reward, terminated, info["scoring_error"]) == (1.0, True, None), info
        ended = True
        no_victim = threading.Event()
        no_victim.set()
        for _ in range(3):
            later = session_attack(reader_env, probe_turn(LEAK_READER, 0.2, escape=False), check=None)
            assert_learned_nothing([later(no_victim)])
    finally:
        if not ended:
            writer_env.reset(seed=0)


# --------------------------------------------------------------------------- host

PTY_HOARD = f"""\
import os
ptys = []
for _ in range(8):
    try:
        ptys.append(os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY))
    except OSError:
        break
try:
    ptys.append(os.openpty()[0])
except OSError:
    pass
if ptys:
    print('ptys held', len(ptys))
    import sys
    sys.stdout.flush()
    os._exit({PROBE_HIT})
"""


def test_session_takes_the_hosts_ptys(rollouts):
    # the pty pool is the host's: stopped sessions holding ptys starve other containers of them
    attacks = [session_attack(env, PTY_HOARD, check=None) for env in sessions(rollouts)]
    assert_learned_nothing(overlap(rollouts, "csapp", *attacks))


def test_posix_openpt_takes_the_hosts_ptys(rollouts):
    payload = (f"    for (int i = 0; i < 8; ++i) if (posix_openpt(O_RDWR | O_NOCTTY) >= 0) _exit({PROBE_HIT});\n"
               f"    if (open(\"/dev/pts/ptmx\", O_RDWR | O_NOCTTY) >= 0) _exit({PROBE_HIT});\n"
               f"    usleep({int(ATTACK_S * 1e6)});")
    results = overlap(rollouts, "python", candidate_attack(rollouts.candidates["cpp"], "cpp", payload))
    assert_learned_nothing(results)


def test_io_uring_reaches_the_hosts_kernel(rollouts):
    # io_uring is a large kernel surface a rollout needs no access to (and its workers run
    # outside the container's accounting)
    payload = ("    extern \"C\" { fn syscall(number: i64, ...) -> i64; }\n"
               "    let mut params = [0u8; 120];\n"
               "    let end = std::time::Instant::now() + std::time::Duration::from_millis("
               f"{int(ATTACK_S * 1000)});\n"
               "    while std::time::Instant::now() < end {\n"
               f"        if unsafe {{ syscall(425, 4i64, params.as_mut_ptr()) }} >= 0 {{ std::process::exit({PROBE_HIT}); }}\n"
               "        std::thread::sleep(std::time::Duration::from_millis(20));\n    }")
    results = overlap(rollouts, "linalg", candidate_attack(rollouts.candidates["rust"], "rust", payload))
    assert_learned_nothing(results)


def test_kernel_keyring_and_other_host_wide_calls(rollouts):
    # keyrings are per uid across the host; userfaultfd, perf events and bpf are host kernel
    # surfaces: a Python candidate tries each while a CsappExact neighbour works
    probe = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
             "attr = ctypes.create_string_buffer(128)\n"
             "def probe():\n"
             "    if libc.syscall(248, b'user', b'gsmxr', b'v', 1, -4) >= 0:\n        return 'add_key'\n"
             "    if libc.syscall(250, 0, -4, 0) >= 0:\n        return 'keyctl'\n"
             "    if libc.syscall(323, 0) >= 0:\n        return 'userfaultfd'\n"
             "    if libc.syscall(298, attr, 0, -1, -1, 0) >= 0:\n        return 'perf_event_open'\n"
             "    if libc.syscall(321, 0, attr, 48) >= 0:\n        return 'bpf'\n"
             "    return None\n")
    results = overlap(rollouts, "csapp", candidate_attack(rollouts.candidates["python"], "python",
                                                          candidate_probe(probe, ATTACK_S)))
    assert_learned_nothing(results)


def our_containers() -> list:
    from gym_sysmath.sandbox import daemon

    return daemon.containers_of_this_process(daemon.docker_client())


def test_output_flood_fills_the_hosts_disk_through_container_logs(rollouts):
    # every byte a job prints comes back through the supervisor's stdout: with Docker's default
    # json-file log driver and no size cap, dockerd also writes it to the host's disk, for as long
    # as the container lives (across rollouts, since containers are purged and reused). A policy
    # printing its 1 MiB per turn in every rollout fills the host's disk.
    flood = "import sys\nsys.stdout.write('x' * 1000000)\nsys.stdout.flush()"
    attacks = [session_attack(env, flood, flood, flood, check=None) for env in sessions(rollouts)]
    assert_no_scoring_error(overlap(rollouts, "csapp", *attacks))
    unbounded = []
    for container in our_containers():
        container.reload()
        log = container.attrs["HostConfig"].get("LogConfig") or {}
        if log.get("Type") != "none" and "max-size" not in (log.get("Config") or {}):
            unbounded.append(f"{container.name}: {log}")
    assert not unbounded, f"containers whose output is logged to the host's disk without a cap: {unbounded[:3]}"


def _cgroup_memory_limit(parent: str) -> int | None:
    """The memory limit of the host's cgroup ``parent`` (readable where the tests run as root)."""
    for path in (f"/sys/fs/cgroup/memory{parent}/memory.limit_in_bytes", f"/sys/fs/cgroup{parent}/memory.max"):
        try:
            with open(path) as handle:
                return int(handle.read())
        except (OSError, ValueError):
            continue
    return None


def test_memfd_hogs_in_many_rollouts_cannot_exhaust_the_host(rollouts):
    # What a rollout holds in its processes, the OOM killer counts against them; what it holds
    # outside them (memfd, tmpfs and /dev/shm pages) it does not, and the same policy in k
    # rollouts holds k times that. Past what the live containers share (the host, or a parent
    # cgroup capping them all), the shared level's OOM killer would take the process with the most
    # resident memory: a neighbour's compiler or session, or the trainer. memfd_create is refused
    # (test_memfd_hog_starves_neighbours_build), so the unattributed memory of each container is
    # its tmpfs sizes: together they must fit. Checked by arithmetic, not by running the hog in
    # enough rollouts to take down the machine the tests share.
    env = rollouts.sessions[0]
    env.reset(seed=0)
    try:
        observation, _, _, _, info = env.step("```python\nimport os\ntry:\n    os.memfd_create('x')\n"
                                    "    print('memfd made')\nexcept OSError:\n    print('memfd refused')\n```")
        assert info["execution"] == "ok"
        assert "memfd refused" in observation
        limits, unattributed = [], []
        parents = set()
        for container in our_containers():
            container.reload()
            config = container.attrs["HostConfig"]
            limits.append(int(config.get("Memory") or 0))
            tmpfs = sum(_tmpfs_size(options) for options in (config.get("Tmpfs") or {}).values())
            unattributed.append(tmpfs + int(config.get("ShmSize") or 0))
            parents.add(config.get("CgroupParent") or "")
    finally:
        env.reset(seed=0)
    with open("/proc/meminfo") as meminfo:
        shared = int(next(line for line in meminfo if line.startswith("MemTotal:")).split()[1]) * 1024
    where = "the host"
    for parent in parents - {""}:
        capped = _cgroup_memory_limit(parent)
        if capped is not None and capped < shared:
            shared, where = capped, f"their parent cgroup {parent}"
    assert all(limits), "a container without a memory limit"
    assert sum(unattributed) <= shared, (
        f"{len(limits)} live containers may hold {sum(unattributed) / 2**30:.1f} GiB outside their processes "
        f"together, but {where} has {shared / 2**30:.0f} GiB for them all")


def _tmpfs_size(options: str) -> int:
    """The ``size=`` of a tmpfs mount's options, in bytes (Docker's default: half the host's memory)."""
    for option in options.split(","):
        if option.startswith("size="):
            value = option[5:]
            scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(value[-1:].lower(), 1)
            return int(value.rstrip("kKmMgG")) * scale
    return 1 << 62


#: A reader's look at what its container's cgroups remember of earlier rollouts: a peak memory
#: use of 1 GiB or more was not this rollout's (it uses a few dozen MiB).
CGROUP_MEMORY_READER = """\
import os
def probe():
    for path in ('/sys/fs/cgroup/memory/memory.max_usage_in_bytes', '/sys/fs/cgroup/memory.peak'):
        try:
            peak = int(open(path).read())
        except (OSError, ValueError):
            continue
        if peak >= 1 << 30:
            return f'{path} remembers {peak >> 20} MiB'
    return None
"""


@pytest.fixture
def fresh_pair(docker_available, monkeypatch):
    """A writer and a reader rollout on a pool whose containers are replaced, not purged."""
    monkeypatch.setenv("GYM_SYSMATH_FRESH_CONTAINERS", "1")
    pair = [gym.make("CsappExact-v0", max_turns=5, pool_size=4) for _ in range(2)]  # a pool of its own
    yield pair
    for env in pair:
        env.close()


def test_cgroup_counters_carry_data_to_the_next_rollout_in_the_container(fresh_pair):
    # purging a container empties its files and processes, not its cgroups' counters: a writer
    # rollout touches 1.5 GiB (the message: "more than 1 GiB", or any size it likes), ends its
    # episode, and the next rollouts that lease containers read the peak memory use. A purged
    # container keeps them (a documented limit, SECURITY.md "Counters survive a purge"); with
    # GYM_SYSMATH_FRESH_CONTAINERS=1 the next rollout never sees the writer's container.
    writer, reader = fresh_pair
    writer.reset(seed=0)
    _, _, _, _, info = writer.step("```python\nmessage = bytearray(1536 << 20)\ndel message\nprint('sent')\n```")
    assert (info["execution"], info["scoring_error"]) == ("ok", None), info
    _, reward, terminated, _, info = writer.step(writer.unwrapped.reference_action())
    assert (reward, terminated, info["scoring_error"]) == (1.0, True, None), info
    time.sleep(1.0)  # the writer's container is purged and back in the reserve
    no_victim = threading.Event()
    no_victim.set()
    for _ in range(3):
        later = session_attack(reader, probe_turn(CGROUP_MEMORY_READER, 0.05, escape=False), check=None)
        assert_learned_nothing([later(no_victim)])

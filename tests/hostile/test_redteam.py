"""Red-team findings against one-container-per-rollout (commit 9fe09ab): each test is one attack,
run through the real envs, and fails while the hole it names is open.

- Loopback TCP connections left in TIME_WAIT outlive every process of a job and of a rollout:
  the per-job purge does not see them and the rollout purge's residue check reads only
  ``/proc/net/unix``. Their 127.x.y.z addresses and ports carry kilobytes from one job to the next
  (CompGeom's timing runs memoise their answers: ``performance_score`` ~0.15 becomes 1.0) and from
  one rollout to the next rollout that leases the same container.
- Counters of the container's kernel state survive the purge (the scratch tmpfs's inode numbers,
  the pid namespace's ``ns_last_pid``): a rollout sets them, the next rollout reads them.
- ``multiprocessing`` pools, queues and locks need POSIX semaphores in ``/dev/shm``, which the
  container does not have: ordinary Python fails in a tool turn (a false positive).
- Unix sockets held only in flight (an SCM_RIGHTS cycle) when a rollout ends are still listed when
  the purge checks its residue, so one line of agent code costs the reserve its container.
"""

from __future__ import annotations

import re
import secrets

import gymnasium as gym
import pytest

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.tasks import compgeom

pytestmark = pytest.mark.docker


@pytest.fixture
def csapp(docker_available):
    """A CsappExact env on a pool of one container: every episode reuses it after a purge."""
    env = gym.make("CsappExact-v0", max_turns=4, pool_size=1)
    yield env
    env.close()


def _tool_turn(env, code: str) -> str:
    observation, _, _, _, info = env.step(f"```python\n{code}\n```")
    assert info["scoring_error"] is None, info
    return observation


def _episode_turn(env, code: str) -> str:
    """One tool turn in a fresh episode (the previous episode's container was purged)."""
    env.reset(seed=0)
    return _tool_turn(env, code)


# ---------------------------------------------------------------- TIME_WAIT sockets

TIME_WAIT_STORE = r"""
import socket
data = bytes.fromhex("{hex}")
data += b"\0" * (-len(data) % 3)
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 40000)); srv.listen(512)
for i in range(0, len(data), 3):
    cl = socket.socket(); cl.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    cl.bind(("127.%d.%d.%d" % tuple(data[i:i + 3]), 20000 + i // 3)); cl.connect(("127.0.0.1", 40000))
    peer, _ = srv.accept(); cl.close(); peer.close()  # the client closes first: 60 s in TIME_WAIT
print("stored")
"""

TIME_WAIT_LOAD = r"""
rows = []
for line in open("/proc/net/tcp").readlines()[1:]:
    fields = line.split()
    address, port = fields[1].split(":")
    if fields[3] == "06" and 20000 <= int(port, 16) < 30000:
        rows.append((int(port, 16), bytes.fromhex(address)[::-1][1:]))
print("LOADED", b"".join(chunk for _, chunk in sorted(rows)).hex(), "END")
"""


def test_time_wait_sockets_carry_data_to_the_next_rollout(csapp):
    """Rollout A leaves 120 bytes in TIME_WAIT connections; rollout B, the next lease of the same
    container, must not be able to read them back."""
    secret = secrets.token_bytes(120)
    stored = _episode_turn(csapp, TIME_WAIT_STORE.replace("{hex}", secret.hex()))
    assert "stored" in stored or "[Errno 97] Address family not supported" in stored, stored[-1000:]
    observation = _episode_turn(csapp, TIME_WAIT_LOAD)
    loaded = re.search(r"LOADED ([0-9a-f]*) END", observation)
    assert loaded is not None, observation[-1000:]
    assert secret.hex() not in loaded.group(1), "rollout B read rollout A's bytes back from TIME_WAIT sockets"


#: Wrapped around the reference: correct, but it does each case's work ten times.
SLOW = """
_fast_primitive = segment2_segment2
def segment2_segment2(*args, **kwargs):
    for _ in range(9):
        _fast_primitive(*args, **kwargs)
    return _fast_primitive(*args, **kwargs)
"""

#: At import: read stdin; if a TIME_WAIT memo for this exact input exists, print it and exit;
#: otherwise tee stdout and, once the harness printed END for the (large) timing input, store it.
MEMO = r'''
import hashlib as _h, io as _io, lzma as _lz, os as _os, socket as _so, sys as _sys
_data = _sys.stdin.buffer.read()
_sys.stdin = _io.TextIOWrapper(_io.BytesIO(_data))
_tag = 40000 + int(_h.sha256(_data).hexdigest(), 16) % 1000
def _load():
    rows = []
    for line in open("/proc/net/tcp").readlines()[1:]:
        f = line.split()
        if f[3] != "06":
            continue
        (la, lp), (ra, rp) = f[1].split(":"), f[2].split(":")
        if int(rp, 16) == _tag and 10000 <= int(lp, 16) < 40000:
            rows.append((int(lp, 16), bytes.fromhex(la)[::-1][1:] + bytes.fromhex(ra)[::-1][1:]))
    blob = b"".join(c for _, c in sorted(rows))
    if len(blob) < 4:
        return None
    try:
        return _lz.decompress(blob[4:4 + int.from_bytes(blob[:4], "big")]).decode()
    except Exception:
        return None
def _store(text):
    blob = _lz.compress(text.encode(), preset=9)
    blob = len(blob).to_bytes(4, "big") + blob
    blob += b"\0" * (-len(blob) % 6)
    srv = _so.socket(); srv.setsockopt(_so.SOL_SOCKET, _so.SO_REUSEADDR, 1); srv.bind(("", _tag)); srv.listen(64)
    for i in range(0, len(blob), 6):
        c = blob[i:i + 6]
        cl = _so.socket(); cl.setsockopt(_so.SOL_SOCKET, _so.SO_REUSEADDR, 1)
        cl.bind(("127.%d.%d.%d" % tuple(c[:3]), 10000 + i // 6)); cl.connect(("127.%d.%d.%d" % tuple(c[3:]), _tag))
        s, _ = srv.accept(); cl.close(); s.close()
_memo = _load()
if _memo is not None:
    _sys.stdout.write(_memo); _sys.stdout.flush(); _os._exit(0)
class _Tee:
    def __init__(self, real):
        self.real, self.parts, self.tail, self.done = real, [], "", False
    def write(self, s):
        self.parts.append(s)
        self.tail = (self.tail + s)[-80:]
        return self.real.write(s)
    def flush(self):
        self.real.flush()
        if not self.done and "\nEND " in self.tail and self.tail.endswith("\n") and len(_data) > 100000:
            self.done = True
            _store("".join(self.parts))
    def __getattr__(self, name):
        return getattr(self.real, name)
_sys.stdout = _Tee(_sys.stdout)
'''


def test_compgeom_timing_runs_memoised_in_time_wait_sockets(instruction_counter):
    """A correct candidate ~10x slower than the reference (an honest performance_score of about
    0.15) tries to memoise its timing output in TIME_WAIT sockets and print it back in a later
    run. Sockets are unix only, and the score is now one counted run with nothing before it to
    store; its performance_score must stay that of its real speed."""
    reference = compgeom.reference_solution(compgeom.load_tasks(["segment2_segment2"], ["python"])[0])
    env = gym.make("CompGeom-v0", languages=["python"], primitives=["segment2_segment2"], max_turns=1,
                   measure_performance=True, pool_size=1)
    try:
        env.reset(options={"task_id": "segment2_segment2/python"})
        *_, info = env.step(f"```python\n{reference}{SLOW}{MEMO}\n```")
    finally:
        env.close()
    assert (info["verdict"], info["scoring_error"]) == ("correct", None), info
    assert info["performance_score"] < 0.5, f"a ~10x slower candidate scored {info['performance_score']}"


# ---------------------------------------------------------------- kernel counters

INODE_SEND = r"""
import os
while True:
    fd = os.open("x", os.O_CREAT | os.O_WRONLY, 0o600); ino = os.fstat(fd).st_ino; os.close(fd); os.unlink("x")
    if ino % 4096 == {secret}:
        break
print("SENT", ino)
"""
INODE_RECEIVE = r"""
import os
fd = os.open("y", os.O_CREAT | os.O_WRONLY, 0o600)
print("SEEN", os.fstat(fd).st_ino)
"""
PID_SEND = r"""
import os
while int(open("/proc/sys/kernel/ns_last_pid").read()) % 1024 != {secret}:
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
print("SENT", open("/proc/sys/kernel/ns_last_pid").read())
"""
PID_RECEIVE = 'print("SEEN", open("/proc/sys/kernel/ns_last_pid").read())'


def _number(label: str, observation: str) -> int:
    found = re.search(rf"{label} (\d+)", observation)
    assert found is not None, observation[-1000:]
    return int(found.group(1))


@pytest.fixture
def fresh_csapp(docker_available, monkeypatch):
    """A CsappExact env whose rollouts each get a fresh container (GYM_SYSMATH_FRESH_CONTAINERS=1)."""
    monkeypatch.setenv("GYM_SYSMATH_FRESH_CONTAINERS", "1")
    env = gym.make("CsappExact-v0", max_turns=4, pool_size=3)  # a pool of its own, made with the setting
    yield env
    env.close()


@pytest.mark.parametrize("channel", ["scratch_inode_numbers", "ns_last_pid"])
def test_kernel_counters_carry_bits_to_the_next_rollout(fresh_csapp, channel):
    """Rollout A sets the low bits of a counter the purge cannot reset; rollout B reads them. One
    calibration pair (a known value) gives the purge's fixed offset; three random values follow.
    A purged container keeps such counters (a documented limit: SECURITY.md); with fresh
    containers per rollout nothing of A's is left to read."""
    csapp = fresh_csapp
    send, receive, modulus = {"scratch_inode_numbers": (INODE_SEND, INODE_RECEIVE, 4096),
                              "ns_last_pid": (PID_SEND, PID_RECEIVE, 1024)}[channel]
    offset = None
    decoded = []
    for _ in range(4):
        value = secrets.randbelow(modulus)
        sent = _number("SENT", _episode_turn(csapp, send.replace("{secret}", str(value))))
        seen = _number("SEEN", _episode_turn(csapp, receive))
        if offset is None:
            offset = seen - sent
            continue
        decoded.append((seen - offset) % modulus == value)
    assert not all(decoded), f"{channel}: every value sent by one rollout was read exactly by the next"


# ---------------------------------------------------------------- false positives

def test_multiprocessing_pool_runs_in_a_tool_turn(csapp):
    """Ordinary Python: a process pool (POSIX semaphores, which need /dev/shm)."""
    observation = _episode_turn(csapp, "import multiprocessing as mp\n"
                                       "with mp.Pool(2) as pool:\n    print('POOL', pool.map(abs, [-1, -2, -3]))\n"
                                       "queue = mp.Queue(); queue.put(7); print('QUEUE', queue.get())\n")
    assert "POOL [1, 2, 3]" in observation and "QUEUE 7" in observation, observation[-1500:]


# ---------------------------------------------------------------- reserve churn

INFLIGHT_CYCLE = r"""
import socket
keep = []
for i in range(50):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    bound = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); bound.bind("\0cycle%d" % i)
    socket.send_fds(a, [b"x"], [a.fileno(), b.fileno(), bound.fileno()])  # only the kernel's GC frees them
    keep.append((a, b, bound))
print("HELD")
"""


def test_sockets_in_flight_at_the_end_of_a_rollout_cost_its_container(csapp):
    """A session holding unix sockets in flight (an SCM_RIGHTS cycle) when its episode ends: the
    kernel collects them asynchronously, after the purge's residue check has read /proc/net/unix,
    so every such rollout's container is destroyed and a new one started. The purge should wait
    for the collection (or not count sockets that no process holds)."""
    pool = csapp.unwrapped.sandbox
    for _ in range(3):
        assert "HELD" in _episode_turn(csapp, INFLIGHT_CYCLE)
    csapp.reset(seed=0)
    assert "42" in _tool_turn(csapp, "print(6 * 7)")
    stats = pool.stats()
    assert (stats.workers_lost, stats.workers_started) == (0, 1), stats

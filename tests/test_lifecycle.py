"""Lifecycle misuse: envs dropped without close(), used after os.fork(), and async-vector
workers killed with SIGKILL. Each leaves no container, thread or fd behind, and the misuse the
caller can fix is refused with an error that says how. ``churn`` is also the core of
``benchmarks/soak_lifecycle.py`` (thousands of envs; here tens)."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass

import gymnasium as gym
import pytest

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.sandbox import daemon, pool
from gym_sysmath.sandbox.pool import SPARE_CONTAINERS, ForkedLeaseError
from gym_sysmath.vector import SysmathAsyncVectorEnv, WorkerDiedError, async_vector

TOOL_TURN = "```python\nx = 41\nprint(x)\n```"


# --------------------------------------------------------------------------- what a process holds

@dataclass(frozen=True)
class Footprint:
    """What this process holds that a leak would grow: sandbox containers (its own and those of
    the processes it forked), Python and OS threads, open fds, live child processes."""

    containers: int
    threads: int
    os_threads: int
    fds: int
    children: int

    def __str__(self) -> str:
        return (f"{self.containers} containers, {self.threads} threads ({self.os_threads} OS threads), "
                f"{self.fds} fds, {self.children} child processes")


def _children() -> list[int]:
    me = str(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me and fields[0] not in daemon.EXITED_STATES:
                found.append(int(entry))
    return found


def footprint(client, pids: set[int]) -> Footprint:
    """``pids``: the processes forked along the way, whose containers count as ours. ``client``
    is not used: each count opens a client of its own and closes it, so its connections to the
    daemon are not counted as the process's fds."""
    owners = {str(os.getpid()), *map(str, pids)}
    counting = daemon.docker_client()
    try:
        containers = [c for c in daemon.our_containers(counting)
                      if c.labels.get(daemon.LABEL_OWNER, "").split(":")[1:2] and
                      c.labels[daemon.LABEL_OWNER].split(":")[1] in owners]
    finally:
        counting.close()
    return Footprint(len(containers), threading.active_count(), len(os.listdir("/proc/self/task")),
                     _fds(), len(_children()))


def _fds() -> int:
    """Open fds, less multiprocessing's heap arenas (``/dev/shm/pym-*``: AsyncVectorEnv's shared
    observation buffers come from them, and the heap keeps an arena for reuse once made)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += not target.startswith("/dev/shm/pym-")
    return count


def settle(client, pids: set[int], baseline: Footprint, timeout_s: float = 60.0) -> Footprint:
    """Wait (collecting garbage) until the footprint is back to ``baseline`` or the time is up."""
    deadline = time.monotonic() + timeout_s
    while True:
        gc.collect()
        now = footprint(client, pids)
        if within(now, baseline) or time.monotonic() > deadline:
            return now
        time.sleep(0.25)


def within(now: Footprint, baseline: Footprint) -> bool:
    """Nothing beyond the baseline (which other tests' open pools and their watcher may be part of)."""
    return (now.containers <= baseline.containers and now.children <= baseline.children
            and now.threads <= baseline.threads and now.fds <= baseline.fds)


# --------------------------------------------------------------------------- the churn

FORK_CHILD = object()


def _forked_child_steps(env: gym.Env) -> int:
    """In a forked child: the parent's episode is refused, a reset starts one of our own."""
    try:
        env.step("```python\nprint(x + 1)\n```")
        return 3  # ran in the parent's session
    except ForkedLeaseError:
        pass
    env.reset(seed=1)
    observation, *_, info = env.step("```python\nprint('x' in dir())\n```")
    env.close()
    return 0 if observation.startswith("False") and info["scoring_error"] is None else 4


def churn(envs: int, *, forks: int = 0, kills: int = 0, env_id: str = "CsappExact-v0",
          closed_share: int = 10, keep_pool: bool = False, log=None) -> set[int]:
    """Make ``envs`` envs that each run a tool turn and are dropped, every ``closed_share``-th
    one closed instead; ``forks`` times, fork while an env is mid-episode and let the child step
    it; ``kills`` times, SIGKILL a worker of a two-worker async vector env mid-step. Returns the
    pids forked (their containers count as ours). Without ``keep_pool`` the shared pool closes
    with each env (it is the only one) and the next starts another; with it, one env stays open
    until the end, so dropped envs' containers are purged and reused."""
    pids: set[int] = set()
    fork_every = envs // forks if forks else 0
    kill_every = envs // kills if kills else 0
    keeper = gym.make(env_id, max_turns=4) if keep_pool else None
    if keeper is not None:
        keeper.unwrapped.sandbox  # noqa: B018 - acquires the shared pool
    try:
        _churn(envs, fork_every, kill_every, env_id, closed_share, log, pids)
    finally:
        if keeper is not None:
            keeper.close()
    return pids


def _churn(envs: int, fork_every: int, kill_every: int, env_id: str, closed_share: int, log,
           pids: set[int]) -> None:
    for index in range(envs):
        env = gym.make(env_id, max_turns=4)
        env.reset(seed=index)
        _, _, _, _, info = env.step(TOOL_TURN)
        assert info["scoring_error"] is None, info
        if fork_every and index % fork_every == fork_every - 1:
            child = os.fork()
            if child == 0:  # pragma: no cover - the child's exit status is the check
                code = 5
                try:
                    code = _forked_child_steps(env)
                finally:
                    os._exit(code)
            pids.add(child)
            _, status = os.waitpid(child, 0)
            assert os.waitstatus_to_exitcode(status) == 0, f"forked child: exit status {status}"
            observation, *_ = env.step("```python\nprint(x + 1)\n```")
            assert observation.startswith("42"), observation  # the parent's session is intact
        if kill_every and index % kill_every == kill_every - 1:
            pids |= kill_an_async_worker(env_id)
        if index % closed_share == 0:
            env.close()
        del env  # dropped (closed or not): its finalizer hands the container back
        if log is not None and index % 100 == 99:
            log(index + 1)


def kill_an_async_worker(env_id: str) -> set[int]:
    """Two workers; SIGKILL one mid-step; the step reports it, close() closes the other."""
    vector = async_vector(env_id, 2, max_turns=4)
    pids = {process.pid for process in vector.processes if process.pid is not None}
    try:
        vector.reset(seed=0)
        vector.step([TOOL_TURN] * 2)
        vector.step_async(["```python\nimport time\ntime.sleep(2)\nprint(1)\n```"] * 2)
        time.sleep(0.5)
        victim = vector.processes[0]
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        with pytest.raises(WorkerDiedError, match=r"worker 0 \(pid \d+\) died, killed by SIGKILL"):
            vector.step_wait()
        with pytest.raises(WorkerDiedError):  # the same report, not a pipe error
            vector.step([TOOL_TURN] * 2)
    finally:
        vector.close()
    assert all(process.exitcode is not None for process in vector.processes)
    assert vector.processes[1].exitcode == 0, "the live worker did not close cleanly"
    return pids


# --------------------------------------------------------------------------- tests

@pytest.fixture
def client(docker_available):
    return daemon.docker_client()


def test_drop_envs_without_close_returns_their_containers_and_shrinks_the_reserve(client):
    keeper = gym.make("CsappExact-v0", max_turns=4, pool_size=13)  # a pool size no other test uses
    try:
        keeper.reset(seed=0)
        keeper.step(TOOL_TURN)
        sandbox = keeper.unwrapped.sandbox
        for _ in range(2):  # the reported leak grew with each round
            envs = [gym.make("CsappExact-v0", max_turns=4, pool_size=13) for _ in range(6)]
            for seed, env in enumerate(envs):
                env.reset(seed=seed)
                env.step(TOOL_TURN)
            assert sandbox.stats().leased_now == 7
            del envs, env
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                gc.collect()
                stats = sandbox.stats()
                if stats.leased_now == 1 and stats.live_workers <= 1 + SPARE_CONTAINERS:
                    break
                time.sleep(0.2)
            stats = sandbox.stats()
            assert stats.leased_now == 1, f"dropped envs still hold containers: {stats}"
            assert stats.live_workers <= 1 + SPARE_CONTAINERS, f"the reserve did not shrink back: {stats}"
            assert sandbox._rollouts == 1
        observation, *_ = keeper.step("```python\nprint(x + 1)\n```")
        assert observation.startswith("42"), observation  # the keeper's episode was not touched
    finally:
        keeper.close()
    assert sandbox.closed  # the last env's close closed the shared pool


def test_drop_envs_in_reference_cycles_from_many_threads(client):
    """Finalizers run wherever the collector does, mid-lease in another thread included: they
    only queue, so nothing deadlocks and every container comes back."""
    baseline = footprint(client, set())

    def worker(seed: int) -> None:
        for round_ in range(3):
            env = gym.make("LinearAlgebra-v0", max_turns=3)
            env.reset(seed=seed * 10 + round_)
            env.step(TOOL_TURN)
            env.unwrapped.cycle = env  # only the collector can free it
            del env
            gc.collect()

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
        assert not thread.is_alive(), "a thread deadlocked dropping envs"
    after = settle(client, set(), baseline)
    assert after.containers <= baseline.containers, after


def test_fork_and_step_the_parents_episode_from_the_child(docker_available):
    """The child must not run in the parent's session (nor read its variables): it is refused,
    and a reset in the child starts an episode in a container of the child's own."""
    script = textwrap.dedent("""
        import os, sys
        import gymnasium as gym, gym_sysmath
        from gym_sysmath.sandbox import daemon
        from tests.test_lifecycle import _forked_child_steps
        env = gym.make("CsappExact-v0", max_turns=4)
        env.reset(seed=0)
        env.step("```python\\nx = 41\\nprint(x)\\n```")
        child = os.fork()
        if child == 0:
            os._exit(_forked_child_steps(env))
        _, status = os.waitpid(child, 0)
        observation, *_ = env.step("```python\\nprint(x + 1)\\n```")
        env.close()
        client = daemon.docker_client()
        left = [c for c in daemon.our_containers(client)
                if c.labels[daemon.LABEL_OWNER].split(":")[1] in (str(os.getpid()), str(child))]
        print("child", os.waitstatus_to_exitcode(status), "parent", observation.splitlines()[0], "left", len(left))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert done.stdout.strip().splitlines()[-1:] == ["child 0 parent 42 left 0"], done.stdout + done.stderr[-3000:]


def test_inherited_lease_refuses_with_what_to_do():
    lease = pool.Lease.__new__(pool.Lease)
    lease.pid, lease.released, lease._worker = os.getpid() + 1, False, None
    with pytest.raises(ForkedLeaseError, match=r"call reset\(\).*make the env in this process"):
        lease._current()


def test_sigkill_an_async_vector_worker_mid_step(client):
    pids = kill_an_async_worker("CsappExact-v0")
    deadline = time.monotonic() + 30
    while footprint(client, pids).containers and time.monotonic() < deadline:
        time.sleep(0.25)
    assert footprint(client, pids).containers == 0, "a dead worker's containers were left running"


def test_sigkill_an_async_vector_worker_between_steps(client):
    vector = SysmathAsyncVectorEnv([lambda: gym.make("CsappExact-v0", max_turns=4)] * 2)
    pids = {process.pid for process in vector.processes}
    try:
        vector.reset(seed=0)
        vector.step([TOOL_TURN] * 2)
        os.kill(vector.processes[1].pid, signal.SIGKILL)
        deadline = time.monotonic() + 30  # a zombie until close() joins it: its watcher removes its containers
        while footprint(client, {vector.processes[1].pid}).containers and time.monotonic() < deadline:
            time.sleep(0.25)
        assert footprint(client, {vector.processes[1].pid}).containers == 0
        with pytest.raises(WorkerDiedError, match=r"worker 1 .* killed by SIGKILL.*close\(\)"):
            vector.step([TOOL_TURN] * 2)
    finally:
        vector.close()
    assert footprint(client, pids).containers == 0


def test_zombie_owner_counts_as_dead():
    child = subprocess.Popen(["sleep", "30"])
    try:
        host = daemon.owner_label().split(":")[0]
        label = f"{host}:{child.pid}:{daemon._process_start_time(child.pid)}"
        assert daemon._owner_alive(label)
        assert not daemon._owner_alive(f"{host}:{child.pid}:1")  # a reused pid: the start time differs
        child.kill()
        deadline = time.monotonic() + 10
        while daemon._process_state_and_start(child.pid)[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert daemon._process_state_and_start(child.pid)[0] == "Z"  # not waited for: a zombie
        assert not daemon._owner_alive(label)
    finally:
        child.kill()
        child.wait()


def test_containers_of_a_zombie_owner_are_reaped(client):
    from gym_sysmath.sandbox.workers import ContainerSettings, DockerWorker

    child = subprocess.Popen(["sleep", "30"])
    worker = None
    try:
        owner = f"{daemon.owner_label().split(':')[0]}:{child.pid}:{daemon._process_start_time(child.pid)}"
        worker = DockerWorker(client, daemon.require_current_image(client), ContainerSettings(), owner)
        child.kill()
        while daemon._process_state_and_start(child.pid)[0] != "Z":
            time.sleep(0.05)
        daemon.reap_orphans(client)
        left = [c for c in daemon.our_containers(client) if c.labels[daemon.LABEL_OWNER] == owner]
        assert left == [], "a zombie owner's container was kept as if it were alive"
    finally:
        child.kill()
        child.wait()
        if worker is not None:
            worker.destroy()


def test_churn_of_tens_of_envs_forks_and_kills_leaves_nothing(client):
    """The soak's fast variant (benchmarks/soak_lifecycle.py runs thousands)."""
    gc.collect()
    baseline = footprint(client, set())
    pids = churn(20, forks=2, kills=1)
    after = settle(client, pids, baseline)
    assert within(after, baseline), f"{after}, beyond the baseline {baseline}"


def test_sigkill_a_worker_of_gymnasiums_own_async_vector_env(client):
    """``gym.make_vec(..., "async")`` is Gymnasium's class (its errors are its own), but the
    dead worker's containers go all the same: its watcher does not depend on the vector env."""
    vector = gym.make_vec("CsappExact-v0", 2, vectorization_mode="async", max_turns=4)
    try:
        vector.reset(seed=0)
        vector.step([TOOL_TURN] * 2)
        victim = vector.processes[0].pid
        assert footprint(client, {victim}).containers > 0
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while footprint(client, {victim}).containers and time.monotonic() < deadline:
            time.sleep(0.25)
        assert footprint(client, {victim}).containers == 0, "a dead worker's containers were left running"
    finally:
        vector.close(terminate=True)

"""Injected faults: each harness failure ends the step as a `scoring_error` with
`truncated=True` (never a wrong answer, never a pass), and the next episode works."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import gymnasium as gym
import pytest

import gym_sysmath  # noqa: F401
from gym_sysmath.sandbox import SandboxUnavailableError, daemon
from tests.conftest import killing_our_containers
from tests.hostile.payloads import inject, task_id

pytestmark = pytest.mark.docker

SLEEPY_TURN = "```python\nimport time\ntime.sleep(3)\nprint('woke')\n```"


def assert_scoring_error(step) -> dict:
    _, reward, terminated, truncated, info = step
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert info["verdict"] == "scoring_error" and info["scoring_error"], info
    return info


def assert_recovers(env) -> None:
    env.reset(seed=0)
    observation, _, _, _, info = env.step("```python\nprint(6 * 7)\n```")
    assert info["execution"] == "ok" and "42" in observation
    assert env.step(env.unwrapped.reference_action())[1] == 1.0


def our_containers() -> set[str]:
    client = daemon.docker_client()
    return {c.id for c in daemon.containers_of_this_process(client)}


# --------------------------------------------------------------------------- docker kill

def test_one_docker_kill_mid_job_is_absorbed_by_the_retry(docker_available):
    env = gym.make("CsappExact-v0", pool_size=1)
    try:
        env.reset(seed=0)
        pool = env.unwrapped.sandbox
        env.step("```python\nprint('warm')\n```")
        victim = next(iter(our_containers()))
        threading.Timer(0.5, lambda: daemon.docker_client().containers.get(victim).kill()).start()
        observation, _reward, _terminated, truncated, info = env.step(SLEEPY_TURN)
        assert (info["scoring_error"], info["execution"], truncated) == (None, "ok", False)
        assert "woke" in observation and "rebuilt" in observation  # the session was replayed, and the agent told
        assert pool.stats().retries == 1 and pool.stats().workers_lost == 1
    finally:
        env.close()


def test_docker_kill_of_every_try_is_a_scoring_error_then_recovers(docker_available):
    env = gym.make("CsappExact-v0")
    try:
        env.reset(seed=0)
        with killing_our_containers(delay_s=0.5):  # mid-job, and the retry's worker too
            assert_scoring_error(env.step(SLEEPY_TURN))
        assert_recovers(env)
    finally:
        env.close()


def test_docker_kill_during_a_build_and_run_is_a_scoring_error_then_recovers(docker_available):
    env = gym.make("CompGeomCpp-v0", max_turns=1)
    try:
        env.reset(options={"task_id": task_id("cpp")})
        with killing_our_containers(delay_s=0.5):
            assert_scoring_error(env.step(f"```cpp\n{inject('cpp', '    sleep(3);')}\n```"))
        env.reset(options={"task_id": task_id("cpp")})
        _, reward, _, _, info = env.step(env.unwrapped.reference_action())
        assert (reward, info["verdict"], info["scoring_error"]) == (1.0, "correct", None)
    finally:
        env.close()


# --------------------------------------------------------------------------- the daemon

def test_dockerd_stopped_mid_step_is_a_scoring_error_then_recovers(dockerd):
    env = gym.make("CsappExact-v0", pool_size=1)
    try:
        env.reset(seed=0)
        env.step("```python\nprint('warm')\n```")
        stopper = threading.Timer(0.5, dockerd.stop)
        stopper.start()
        started = time.monotonic()
        info = assert_scoring_error(env.step(SLEEPY_TURN))
        assert time.monotonic() - started < 60, "a step must not hang on a dead daemon"
        stopper.join()
        dockerd.start()
        assert "harness failed" in info["detail"]
        assert_recovers(env)
    finally:
        env.close()
    assert our_containers() == set(), "containers of the stopped daemon were left behind"


def test_dockerd_restarted_between_turns_rebuilds_the_session(dockerd):
    env = gym.make("CsappExact-v0", pool_size=1)
    try:
        env.reset(seed=0)
        env.step("```python\nkept = 41\n```")
        dockerd.stop()
        dockerd.start()
        observation, _, _, truncated, info = env.step("```python\nprint(kept + 1)\n```")
        assert (info["scoring_error"], truncated) == (None, False)
        assert "42" in observation and "rebuilt" in observation
        assert env.step(env.unwrapped.reference_action())[1] == 1.0
    finally:
        env.close()
    assert our_containers() == set()


def first_code_run(env_id: str, **kwargs) -> None:
    """Make an env and run a tool turn on one task: the first use of its sandbox."""
    env = gym.make(env_id, max_turns=2, **kwargs)
    try:
        env.reset(seed=0)
        env.step("```python\nprint(1)\n```")
    finally:
        env.close()


def test_unreachable_daemon_fails_the_first_code_run_clearly(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxUnavailableError, match=r"not reachable.*process"):
        first_code_run("CsappExact-v0")


def test_tasks_prompts_and_references_need_no_daemon(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    for env_id in ("CsappExact-v0", "CompGeom-v0", "LinearAlgebra-v0"):
        env = gym.make(env_id, pool_size=9)  # a pool size no other test uses
        try:
            assert env.unwrapped.task_ids
            prompt, info = env.reset(seed=0)
            assert prompt and info["task_id"] in env.unwrapped.task_ids
            assert env.unwrapped.reference_action()
        finally:
            env.close()


def test_a_runtime_the_daemon_lacks_is_refused_not_replaced_by_runc(monkeypatch, docker_available):
    monkeypatch.setenv("GYM_SYSMATH_DOCKER_RUNTIME", "runsc-not-installed")
    with pytest.raises(SandboxUnavailableError, match=r"no runtime 'runsc-not-installed'.*SECURITY\.md"):
        first_code_run("CsappExact-v0", pool_size=7)  # a pool size no other test uses: a new pool starts


def test_daemon_that_never_answers_fails_the_first_code_run_without_hanging(monkeypatch, tmp_path):
    path = str(tmp_path / "silent.sock")
    silent = socket.socket(socket.AF_UNIX)
    silent.bind(path)
    silent.listen(16)  # accepts connections (the kernel does), never answers
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    started = time.monotonic()
    try:
        with pytest.raises(SandboxUnavailableError, match="not reachable"):
            first_code_run("CsappExact-v0")
    finally:
        silent.close()
    assert time.monotonic() - started < daemon.PING_TIMEOUT_S + 10


# --------------------------------------------------------------------------- the host process

def test_containers_of_a_sigkilled_host_process_are_reaped_on_next_start(docker_available):
    script = ("import gymnasium as gym, gym_sysmath, sys\n"
              "env = gym.make('CsappExact-v0'); env.reset(seed=0)\n"
              "env.step(\"```python\\nprint(1)\\n```\")\n"
              "print('ready', flush=True)\n"
              "import time; time.sleep(120)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    client = daemon.docker_client()

    def owned_by_child():
        return [c for c in daemon.our_containers(client)
                if c.labels[daemon.LABEL_OWNER].split(":")[1] == str(child.pid)]

    try:
        assert child.stdout.readline().strip() == "ready"
        assert owned_by_child()
        # its owner watcher too (as a kill of the whole cgroup would): the next pool's start is the fallback
        for watcher in _owner_watchers(child.pid):
            os.kill(watcher, signal.SIGKILL)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert owned_by_child(), "the killed process could not have removed its containers"
    finally:
        if child.poll() is None:
            child.kill()
    env = gym.make("CsappExact-v0", pool_size=11)  # a pool size no other test uses: a new pool
    try:
        env.unwrapped.sandbox  # noqa: B018 - a new pool's start reaps orphans
        assert owned_by_child() == []
    finally:
        env.close()


def _owner_watchers(pid: int) -> list[int]:
    """The owner watcher ``pid`` started (``daemon.watch_owner``): its child running ``-I -c``."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as handle:
                parent = handle.read().rsplit(")", 1)[1].split()[1]
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if parent == str(pid) and b"-I" in argv and any(b"gym_sysmath.owner=" in part for part in argv):
            found.append(int(entry))
    return found


def test_containers_of_a_sigkilled_host_process_are_removed_by_its_watcher(docker_available):
    script = ("import gymnasium as gym, gym_sysmath, sys\n"
              "env = gym.make('CsappExact-v0'); env.reset(seed=0)\n"
              "env.step(\"```python\\nprint(1)\\n```\")\n"
              "print('ready', flush=True)\n"
              "import time; time.sleep(120)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    client = daemon.docker_client()

    def owned_by_child():
        return [c for c in daemon.our_containers(client)
                if c.labels[daemon.LABEL_OWNER].split(":")[1] == str(child.pid)]

    try:
        assert child.stdout.readline().strip() == "ready"
        assert owned_by_child() and _owner_watchers(child.pid)
        os.kill(child.pid, signal.SIGKILL)  # not waited for: a zombie, whose containers go all the same
        deadline = time.monotonic() + 30
        while owned_by_child() and time.monotonic() < deadline:
            time.sleep(0.25)
        assert owned_by_child() == [], "no pool started, yet the watcher should have removed them"
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


# --------------------------------------------------------------------------- load

def test_ten_times_oversubscribed_pool_queues_every_job(docker_available):
    envs = gym.make_vec("CompGeomPython-v0", num_envs=20, vectorization_mode="vector_entry_point",
                        pool_size=2, max_turns=1)
    try:
        envs.reset(seed=0)
        pool = envs.unwrapped.envs[0].sandbox
        for _ in range(2):
            actions = [env.reference_action() for env in envs.unwrapped.envs]
            _, rewards, _terminated, truncated, infos = envs.step(actions)
            assert list(infos["verdict"]) == ["correct"] * 20, infos
            assert list(rewards) == [1.0] * 20 and not truncated.any()
            envs.step(["reset"] * 20)  # next-step autoreset
        stats = pool.stats()
        assert (stats.live_workers, stats.workers_lost, stats.retries) == (2, 0, 0)
    finally:
        envs.close()

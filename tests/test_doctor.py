"""`gym-sysmath doctor` against the real daemon, against no daemon, a missing image, and a pool
without the seccomp profile: each failure is a FAIL line that says what to do, and exit 1."""

from __future__ import annotations

import warnings

import pytest

from gym_sysmath.cli import main
from gym_sysmath.sandbox import Sandbox, daemon, doctor


@pytest.mark.docker
def test_doctor_passes_on_this_host_with_a_probe_the_profile_refused(docker_available, capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    lines = {line.split("]")[1].split(":")[0].strip(): line for line in out.splitlines() if line.startswith("[")}
    assert set(lines) == {"daemon", "image", "container", "seccomp", "cgroup cap"}
    assert all(not line.startswith("[FAIL") for line in lines.values()), out
    assert "memfd_create was refused" in lines["seccomp"] and "protocol" in lines["container"]
    assert out.rstrip().endswith("doctor: ready to grade")


def test_doctor_without_a_daemon_says_how_to_start_one_and_exits_1(monkeypatch, capsys):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("[FAIL] daemon: not reachable at DOCKER_HOST=unix:///nonexistent/docker.sock")
    assert "Start the Docker daemon" in out and "point DOCKER_HOST at a reachable daemon" in out
    assert out.count("not checked: the daemon is not reachable") == 4
    assert "doctor: 5 check(s) failed" in out


@pytest.mark.docker
def test_doctor_with_the_image_missing_says_to_build_it(docker_available, monkeypatch, capsys):
    monkeypatch.setattr(daemon, "image_tag", lambda: "gym-sysmath-sandbox:withdrawn-by-test")  # this process only
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] image: gym-sysmath-sandbox:withdrawn-by-test: missing" in out
    assert "gym-sysmath sandbox build" in out and out.count("not checked: no current image") == 2


@pytest.mark.docker
def test_doctor_with_a_runtime_the_daemon_lacks_says_so_and_starts_nothing(docker_available, monkeypatch, capsys):
    monkeypatch.setenv("GYM_SYSMATH_DOCKER_RUNTIME", "runsc-not-installed")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] daemon:" in out and "no runtime 'runsc-not-installed'" in out and "runsc install" in out
    assert out.count("not checked: the daemon lacks the runtime") == 2


def test_the_seccomp_probe_fails_a_pool_that_runs_without_the_profile():
    """The check can fail: host processes (the process backend) have no seccomp profile."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the process backend's isolation warning
        sandbox = Sandbox("process", pool_size=1)
    try:
        container, seccomp = doctor.check_container(sandbox)
    finally:
        sandbox.close()
    assert container.status == doctor.OK
    assert seccomp.status == doctor.FAIL and "memfd_create was allowed" in seccomp.detail
    assert "->" in seccomp.line() and "SECURITY.md" in seccomp.fix

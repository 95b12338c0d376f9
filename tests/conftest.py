"""Shared fixtures. Docker tests use the real daemon and the real image; with CI=true a
missing daemon or image fails the run instead of skipping it."""

from __future__ import annotations

import os

import pytest

from gym_sysmath.sandbox import Sandbox, SandboxUnavailableError

IN_CI = os.environ.get("CI", "").lower() == "true"


def docker_or_skip() -> None:
    from gym_sysmath.sandbox import image

    try:
        image.require_current_image(image.docker_client(timeout=10))
    except SandboxUnavailableError as exc:
        if IN_CI:
            pytest.fail(f"CI=true but the Docker sandbox is unusable: {exc}")
        pytest.skip(f"Docker sandbox unavailable: {exc}")


@pytest.fixture(scope="session")
def docker_available() -> None:
    docker_or_skip()


@pytest.fixture(scope="module")
def sandbox(docker_available) -> Sandbox:
    box = Sandbox("docker", pool_size=2)
    yield box
    box.close()

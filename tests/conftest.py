"""Shared fixtures. Docker tests use the real daemon and the real image; with CI=true a
missing daemon or image fails the run instead of skipping it."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time

import pytest

from gym_sysmath.sandbox import Sandbox, SandboxUnavailableError

IN_CI = os.environ.get("CI", "").lower() == "true"
#: ``module:ROW`` names of family rows (space-separated) registered before collection, so every
#: test parametrized over the registry runs on them too: ``tests/test_family_plugin.py`` runs the
#: generic tests so on its example family, and a plug-in's author can do the same.
EXTRA_FAMILIES = os.environ.get("GYM_SYSMATH_TEST_FAMILIES", "").split()


@pytest.fixture(autouse=True)
def package_logging_restored():
    """A test that runs ``main`` in-process leaves the CLI's handler and level on the package
    logger; they are put back, so its debug records never reach a later test's stderr."""
    package = logging.getLogger("gym_sysmath")
    level, handlers = package.level, list(package.handlers)
    yield
    package.handlers[:] = handlers
    package.setLevel(level)


def pytest_configure(config: pytest.Config) -> None:
    if EXTRA_FAMILIES:
        import importlib

        from gym_sysmath.families import register_family

        for name in EXTRA_FAMILIES:
            module, _, attribute = name.partition(":")
            register_family(getattr(importlib.import_module(module), attribute))


def docker_or_skip() -> None:
    from gym_sysmath.sandbox import daemon

    try:
        daemon.require_current_image(daemon.docker_client(timeout=10))
    except SandboxUnavailableError as exc:
        if IN_CI:
            pytest.fail(f"CI=true but the Docker sandbox is unusable: {exc}")
        pytest.skip(f"Docker sandbox unavailable: {exc}")


@pytest.fixture(scope="session")
def docker_available() -> None:
    docker_or_skip()


@pytest.fixture(scope="session")
def instruction_counter(docker_available) -> None:
    """The image's performance variant (cachegrind), which counted runs need. Skipped without
    it, in CI too: CI builds the default image only (docs/sandbox-image.md)."""
    from gym_sysmath.sandbox import daemon

    if not daemon.image_status(daemon.docker_client(timeout=10), daemon.PERFORMANCE_IMAGE).current:
        pytest.skip("the sandbox image's performance variant (the instruction counter) is not built: "
                    "`gym-sysmath sandbox build --with-performance`")


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """SmolLM2-135M-Instruct's real tokenizer and chat template (`make real-model`, which
    `make test` runs): the framework tests measure prompts the way a trainer's default would."""
    from tests.real_model import smollm2

    if not smollm2.installed():
        if IN_CI:
            pytest.fail("CI=true but SmolLM2 is not installed (`make real-model`)")
        pytest.skip("SmolLM2 not installed: `make real-model`")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2.FP32_DIR)


@pytest.fixture(scope="session")
def gym_server(docker_available):
    """One real `gym-sysmath serve` (every id, Docker, two warm containers) for the tests that
    only need a server to talk to; tests that stop, drain or break a server start their own
    (tests/served.py)."""
    from tests.served import running_server

    with running_server("--warm", "2") as server:
        yield server


@pytest.fixture(scope="module")
def sandbox(docker_available) -> Sandbox:
    box = Sandbox("docker", pool_size=2)
    yield box
    box.close()


@contextlib.contextmanager
def killing_our_containers(delay_s: float = 0.0, owner_pid: int | None = None):
    """Keep killing this process's sandbox containers, or those of the process ``owner_pid`` on
    this host (a `gym-sysmath serve`), until the block exits: a real harness failure, retries
    included."""
    import socket

    from gym_sysmath.sandbox import daemon

    client = daemon.docker_client()
    stop = threading.Event()
    owner = f"{socket.gethostname()}:{owner_pid}:"

    def targets() -> list:
        if owner_pid is None:
            return daemon.containers_of_this_process(client)
        return [c for c in daemon.our_containers(client) if c.labels.get(daemon.LABEL_OWNER, "").startswith(owner)]

    def kill_loop() -> None:
        time.sleep(delay_s)
        while not stop.is_set():
            for container in targets():
                with contextlib.suppress(Exception):
                    container.kill()
            time.sleep(0.02)

    killer = threading.Thread(target=kill_loop, daemon=True)
    killer.start()
    try:
        yield
    finally:
        stop.set()
        killer.join()


def wait_until_none_running(timeout_s: float = 60.0, settle_checks: int = 3) -> None:
    """Inside ``killing_our_containers``: wait until none of this process's containers runs,
    the clean reserve included, on a few checks in a row (a start in flight may land late)."""
    from gym_sysmath.sandbox import daemon

    client = daemon.docker_client()
    deadline = time.monotonic() + timeout_s
    quiet = 0
    while quiet < settle_checks:
        assert time.monotonic() < deadline, "this process's containers outlived a minute of docker kill"
        running = any(c.status == "running" for c in daemon.containers_of_this_process(client))
        quiet = 0 if running else quiet + 1
        time.sleep(0.1)


@contextlib.contextmanager
def image_withdrawn():
    """Point every sandbox of this process at an image tag the daemon does not have, for the
    block, so no new worker can start: a real, persistent harness failure that leaves the shared
    image's tags (which other test processes use) alone."""
    from gym_sysmath.sandbox import pool

    boxes = [box for box in list(pool._all_sandboxes) if box.image_tag is not None]
    saved = [box.image_tag for box in boxes]
    for box in boxes:
        box.image_tag = "gym-sysmath-sandbox:withdrawn-by-test"
    try:
        yield
    finally:
        for box, tag in zip(boxes, saved, strict=True):
            box.image_tag = tag


#: Fixtures that reach the Docker daemon; a test that uses one (directly or through another
#: fixture) is a `docker` test, so `make test-fast` (``-m "not docker"``) never needs a daemon.
DOCKER_FIXTURES = frozenset({"docker_available", "sandbox"})

#: Tests that need no daemon but take seconds each (host compilers, Ray, a browser, a kernel, a
#: trainer, a subprocess CLI): `slow`, left out of `make test-fast`. Node-id prefixes.
SLOW_TESTS = (
    "tests/test_compgeom_harness.py::",  # builds every fixture with the host g++ and rustc
    "tests/test_ray_rollouts.py::",
    "tests/test_ray_service.py::",  # a three-node Ray cluster on this machine
    "tests/test_serve.py::",  # a `gym-sysmath serve` process per test or module (openenv imports in 5 s)
    "tests/test_remote_adapters.py::",
    "tests/hostile/test_serve_attacks.py::",
    "tests/test_notebook.py::",
    "tests/test_eval_llm.py::",  # a browser, SIGINT to a subprocess, a server that replies late
    # the framework integrations: importing torch, transformers, TRL, verl, Ray... takes seconds
    "tests/test_verifiers.py::",
    "tests/test_verifiers_defaults.py::",
    "tests/test_verl_readme.py::",
    "tests/test_task_refs.py::test_export_system_prompt",  # parquet: pandas, from the frameworks extra
    "tests/test_verl.py::",
    "tests/test_openrlhf.py::",
    "tests/test_openrlhf_defaults.py::",
    "tests/test_skyrl.py::",
    "tests/test_sb3.py::",
    "tests/test_trl_reward.py::",
    "tests/test_compgeom_train.py::test_every_train_draw_reaches_every_branch",  # many exact draws
    "tests/test_compgeom_reference.py::test_generated_files_are_current",  # the whole builder
    "tests/test_compgeom_reference.py::test_check_fails_on_a_stale_or_a_stray_file",  # builds twice
    "tests/test_compgeom_margins.py::test_without_the_margin_variants_tolerances_would_pass",
)


#: `make test-fast` sets this: whole files in SLOW_TESTS are not even imported (their imports
#: are most of their cost).
FAST_TIER = os.environ.get("GYM_SYSMATH_TEST_TIER") == "fast"
SLOW_FILES = frozenset(entry.removesuffix("::") for entry in SLOW_TESTS if entry.endswith("::"))


def pytest_ignore_collect(collection_path, config) -> bool | None:
    if FAST_TIER and collection_path.relative_to(config.rootpath).as_posix() in SLOW_FILES:
        return True
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if DOCKER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.docker)
        if item.nodeid.startswith(SLOW_TESTS):
            item.add_marker(pytest.mark.slow)

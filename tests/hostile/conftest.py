"""The hostile catalogue's one procedure: submit an attack, check the verdict, check the pool.

Every attack is a CompGeom candidate (the known-good solution of `segment2_segment2` with the
attack spliced in, so that an attack which achieves nothing still yields a correct answer) or,
for the persistent Python tool session, a CsappExact tool turn. ``attack(...)`` asserts:

- the verdict the attack must get, and reward 1.0 only when that verdict is ``correct``;
- ``scoring_error`` is None: what the program does is never the harness's fault;
- the next job on the same one-worker pool succeeds (the reference solution scores 1.0);
- the pool lost no worker, and no process of any job uid is left in it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import pytest

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.sandbox import Job, Limits, PoolStats, Sandbox
from gym_sysmath.sandbox.image.toolchains import TOOLCHAINS
from gym_sysmath.verdicts import Verdict
from tests.hostile.payloads import LEFTOVER_PROBE, inject, task_id

#: Room for the attacks that must not time out (touching 2 GiB, filling the scratch, walking the
#: filesystem) on a busy machine. A module whose attacks all run until stopped sets
#: ``ATTACK_LIMITS = QUICK_LIMITS`` to end them sooner.
HOSTILE_LIMITS = Limits(wall_s=20.0, cpu_s=10.0)
QUICK_LIMITS = Limits(wall_s=3.0, cpu_s=2.0)
LANGUAGES = tuple(TOOLCHAINS)
COMPILED_LANGUAGES = tuple(name for name, toolchain in TOOLCHAINS.items() if toolchain.compiled)


def _limits(request) -> Limits:
    return getattr(request.module, "ATTACK_LIMITS", HOSTILE_LIMITS)


@dataclass
class Outcome:
    """What the attack's step returned; for a tool turn, ``verdict`` is its execution status."""

    verdict: str
    reward: float
    info: dict
    observation: str


@pytest.fixture(scope="module")
def compgeom_envs(docker_available, request):
    """One env per language, all on one shared pool of a single worker."""
    envs = {language: gym.make("CompGeom-v0", languages=[language], max_turns=1, pool_size=1,
                               limits=_limits(request)) for language in LANGUAGES}
    yield envs
    for env in envs.values():
        env.close()


@pytest.fixture(scope="module")
def session_env(docker_available, request):
    env = gym.make("CsappExact-v0", max_turns=5, pool_size=1, limits=_limits(request))
    yield env
    env.close()


def _pool(env) -> Sandbox:
    return env.unwrapped.sandbox


def assert_pool_healthy(env, language: str, before: PoolStats) -> None:
    """The next job on the same pool works, and the attack left nothing behind in it."""
    pool = _pool(env)
    env.reset(options={"task_id": task_id(language)})
    _, reward, _, _, info = env.step(env.unwrapped.reference_action())
    assert (reward, info["verdict"], info["scoring_error"]) == (1.0, "correct", None), info
    leftovers = pool.run(Job("python", {"main.py": LEFTOVER_PROBE}))
    assert (leftovers.status, leftovers.stdout) == ("ok", "[]\n"), f"processes outlived their job: {leftovers}"
    assert pool.stats().workers_lost == before.workers_lost, "the attack cost the pool its worker"
    assert pool.stats().retries == before.retries, "the attack caused a harness failure that was retried"


#: Run each attack as a CompGeom candidate in these languages, and as a Python tool turn.
CODE_LANGUAGES = pytest.mark.parametrize("language", LANGUAGES)
ALL_PATHS = pytest.mark.parametrize("language", [*LANGUAGES, "session"])
COMPILED = pytest.mark.parametrize("language", COMPILED_LANGUAGES)


@pytest.fixture
def attack(compgeom_envs, session_env) -> Callable[..., Outcome]:
    """``attack(language, expect, python=..., cpp=..., rust=...)``: run the attack and check it.

    ``language="session"`` runs the Python payload as a tool turn of a CsappExact episode: the
    turn reports ``session_status`` (by default the execution status that ``expect`` stands
    for), the session answers the next turn, and the episode's correct answer still scores 1.
    """

    def run(language: str, expect: Verdict, *, python: str | None = None, cpp: str | None = None,
            rust: str | None = None, session_status: str | None = None) -> Outcome:
        if language == "session":
            assert python is not None
            status = session_status or ("ok" if expect in (Verdict.CORRECT, Verdict.WRONG_ANSWER) else expect.value)
            return _session_attack(session_env, python, status)
        payload = {"python": python, "cpp": cpp, "rust": rust}[language]
        assert payload is not None, f"no {language} payload"
        return _candidate_attack(compgeom_envs[language], language, inject(language, payload), expect)

    return run


@pytest.fixture
def submit(compgeom_envs) -> Callable[..., Outcome]:
    """``submit(language, source, expect)``: like ``attack`` with a whole candidate source."""

    def run(language: str, source: str, expect: Verdict) -> Outcome:
        return _candidate_attack(compgeom_envs[language], language, source, expect)

    return run


def _candidate_attack(env, language: str, source: str, expect: Verdict) -> Outcome:
    before = _pool(env).stats()
    env.reset(options={"task_id": task_id(language)})
    observation, reward, terminated, truncated, info = env.step(f"```{language}\n{source}\n```")
    assert info["scoring_error"] is None, f"the attack was blamed on the harness: {info}"
    assert (terminated, truncated) == (True, False)
    assert info["verdict"] == expect.value, info
    assert reward == (1.0 if expect is Verdict.CORRECT else 0.0)
    assert_pool_healthy(env, language, before)
    return Outcome(info["verdict"], reward, info, observation)


def _session_attack(env, code: str, expect_status: str) -> Outcome:
    pool = _pool(env)
    before = pool.stats()
    env.reset(seed=0)
    try:
        observation, reward, terminated, truncated, info = env.step(f"```python\n{code}\n```")
        assert info["scoring_error"] is None, f"the attack was blamed on the harness: {info}"
        assert (reward, terminated, truncated, info["verdict"]) == (0.0, False, False, None)
        assert info["execution"] == expect_status, observation[-2000:]
        after, *_, after_info = env.step("```python\nprint(6 * 7)\n```")
        assert after_info["execution"] == "ok" and "42" in after, after[-2000:]
        _, reward, terminated, _, final = env.step(env.unwrapped.reference_action())
        assert (reward, terminated, final["scoring_error"]) == (1.0, True, None)
    finally:
        env.reset(seed=0)  # ends the episode, and with it the session, even when a check failed
    leftovers = pool.run(Job("python", {"main.py": LEFTOVER_PROBE}))
    assert leftovers.stdout == "[]\n", f"processes outlived the session: {leftovers}"
    assert pool.stats().workers_lost == before.workers_lost, "the attack cost the pool its worker"
    assert pool.stats().retries == before.retries, "the attack caused a harness failure that was retried"
    return Outcome(info["execution"], 0.0, info, observation)

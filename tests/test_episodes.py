"""The pieces every framework adapter shares: a task reference survives JSON exactly, a bad or
mismatched one is refused with a message, envs are per thread and never inherited across a
fork, and a harness failure mid-episode is replayed (earlier turns included) on a fresh reset
before it is raised as ``ScoringError``."""

from __future__ import annotations

import multiprocessing
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gym_sysmath.envs.csapp import CsappExactEnv
from gym_sysmath.integrations import episodes
from gym_sysmath.integrations.episodes import Episode, ScoringError, TaskRef, grade_completion
from gym_sysmath.sandbox import SandboxError

PROCESS = {"sandbox": "process"}
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")


@given(st.text(min_size=1), st.text(min_size=1), st.sampled_from(["eval", "train"]),
       st.none() | st.integers(0, 2**31), st.none() | st.integers(1, 64))
def test_a_reference_survives_json_exactly(env_id, task_id, split, seed, max_turns):
    ref = TaskRef(env_id, task_id, split, seed, max_turns)
    assert TaskRef.parse(ref.to_json()) == ref


@pytest.mark.parametrize("ground_truth", ["42", "[1, 2]", '{"task_id": "x"}', "not json"])
def test_a_ground_truth_that_is_not_a_reference_is_refused(ground_truth):
    with pytest.raises(ValueError, match="task reference"):
        TaskRef.parse(ground_truth)


def test_a_reference_whose_seed_draws_another_task_is_refused():
    train = TaskRef("LinearAlgebra-v0", "train/not/the/draw", "train", 3)
    with pytest.raises(ValueError, match="gives task"):
        grade_completion(train, "ANSWER: 1")
    with pytest.raises(ValueError, match="needs the seed"):
        grade_completion(TaskRef("LinearAlgebra-v0", "x", "train"), "ANSWER: 1")


def test_threads_get_their_own_envs():
    made = []

    def make():
        made.append(episodes._THREAD_ENVS.get("LinearAlgebra-v0", "eval", 1, {}))

    make()
    thread = threading.Thread(target=make)
    thread.start()
    thread.join()
    assert made[0] is not made[1]
    made[1].close()


def _child_envs(queue) -> None:
    inherited = dict(episodes._THREAD_ENVS.envs)
    env = episodes._THREAD_ENVS.get("LinearAlgebra-v0", "eval", 1, {})
    queue.put((len(inherited), any(env is old for old in inherited.values())))


def test_a_forked_worker_never_uses_the_parents_envs():
    episodes._THREAD_ENVS.get("LinearAlgebra-v0", "eval", 1, {})
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_envs, args=(queue,))
    child.start()
    inherited, reused = queue.get(timeout=60)
    child.join(60)
    assert inherited >= 1 and not reused


def test_a_harness_failure_mid_episode_replays_the_earlier_turns_then_raises(monkeypatch):
    ref = TaskRef("CsappExact-v0", CsappExactEnv(split="eval", **PROCESS).task_ids[0], max_turns=3)
    original, ran = CsappExactEnv._grade_final, []

    def failing_harness(self, reply):
        ran.append("grade")
        if ran.count("grade") <= failures:
            raise SandboxError("worker_died", "container killed (simulated)")
        return original(self, reply)

    original_tool_turn = CsappExactEnv._tool_turn

    def counted_tool_turn(self, reply):
        ran.append("tool")
        return original_tool_turn(self, reply)

    monkeypatch.setattr(CsappExactEnv, "_grade_final", failing_harness)
    monkeypatch.setattr(CsappExactEnv, "_tool_turn", counted_tool_turn)
    failures = 1
    episode = Episode(ref, env_kwargs=PROCESS, own_env=True)
    try:
        episode.reset()
        episode.step("```python\nx = 6 * 7\nprint(x)\n```")
        _, reward, terminated, _, _ = episode.step(episode.core.reference_action())
        assert (reward, terminated) == (1.0, True)
        assert ran == ["tool", "grade", "tool", "grade"]  # the tool turn replayed before the answer
        assert [m["role"] for m in episode.messages] == ["user", "assistant", "user", "assistant", "user"]

        failures, ran[:] = 99, []
        episode.reset()
        with pytest.raises(ScoringError, match="worker_died") as raised:
            episode.step(episode.core.reference_action())
        assert raised.value.attempts == 2 and raised.value.ref == ref
    finally:
        episode.close()

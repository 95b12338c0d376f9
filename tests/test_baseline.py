"""The ``random`` agent is a chance baseline: a well-formed answer on every eval task of every
answer-only family, the same for the same sample seed, scoring the chance level the family's
candidates give (CsappExact: 1 in the candidate count; LinearAlgebra: a random value of the
asked-for shape), and a run it wrote before it was one is not resumed as its own."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.agents import RandomAgent, Turn
from gym_sysmath.cli import main
from gym_sysmath.env import core_env
from gym_sysmath.envs.linalg import CHANCE_RANGE
from gym_sysmath.evaluation.plan import sample_seed
from gym_sysmath.tasks import linalg

CSAPP, LINALG = "CsappExact-v0", "LinearAlgebra-v0"
#: (env id, gym.make kwargs): every eval task of the answer-only families, starter level included.
ANSWER_ONLY: tuple[tuple[str, dict[str, Any]], ...] = ((CSAPP, {}), (LINALG, {}), (LINALG, {"difficulty": "starter"}))
RUN_SEEDS = range(24)  #: eval --seed values: each task's sample seed comes from one, as eval derives it
SIGMAS = 4.5  #: how far from chance an accuracy may be (the seeds are fixed, so this never flakes)


def _episodes(env_id: str, kwargs: dict[str, Any]) -> Iterator[tuple[str, int, str, dict[str, Any]]]:
    """(task id, sample seed, the agent's action, the step's info) for every eval task and run seed."""
    agent = RandomAgent()
    env = gym.make(env_id, **kwargs)
    try:
        for task_id in core_env(env).task_ids:
            for run_seed in RUN_SEEDS:
                seed = sample_seed(run_seed, env_id, task_id, 0)
                observation, info = env.reset(seed=seed, options={"task_id": task_id})
                turn = Turn(env_id, task_id, 0, seed, 0, observation, (), info, env)
                action = agent.act(turn)
                assert agent.act(turn) == action, f"{task_id}: two draws for one sample seed"
                *_, step_info = env.step(action)
                yield task_id, seed, action, step_info
    finally:
        env.close()


@pytest.fixture(scope="module")
def played() -> dict[tuple[str, str], list[tuple[str, int, str, dict[str, Any]]]]:
    """Every answer-only episode, played once for the module's tests (about 2 s)."""
    return {(env_id, json.dumps(kwargs)): list(_episodes(env_id, kwargs)) for env_id, kwargs in ANSWER_ONLY}


def _near(hits: int, draws: int, chance: float) -> bool:
    spread = SIGMAS * math.sqrt(max(chance * (1 - chance), 1e-4) * draws)
    return abs(hits - chance * draws) <= spread


@pytest.mark.parametrize(("env_id", "kwargs"), ANSWER_ONLY, ids=lambda v: v if isinstance(v, str) else json.dumps(v))
def test_every_reply_is_a_well_formed_answer_that_no_harness_failure_scores(played, env_id, kwargs):
    episodes = played[(env_id, json.dumps(kwargs))]
    verdicts = {info["verdict"] for *_, info in episodes}
    assert verdicts <= {"correct", "wrong_answer"}, verdicts
    assert all(info["scoring_error"] is None for *_, info in episodes)
    assert {"correct", "wrong_answer"} == verdicts  # neither the key every time nor never


def test_csapp_scores_one_in_the_candidate_count(played):
    """Uniform over the key and its executed distractors: each task's chance is 1/k."""
    env = gym.make(CSAPP)
    candidates: dict[str, list] = {}
    for task_id in env.unwrapped.task_ids:
        env.reset(options={"task_id": task_id})
        task = env.unwrapped.current_task
        candidates[task_id] = [task.answer, *task.distractors]
    env.close()
    episodes = played[(CSAPP, "{}")]
    for task_id, _, action, _ in episodes:  # only ever a candidate: the key is read no further
        assert json.loads(action.removeprefix("ANSWER: ")) in candidates[task_id], action
    hits = sum(info["verdict"] == "correct" for *_, info in episodes)
    chance = sum(1 / len(candidates[task_id]) for task_id, *_ in episodes) / len(episodes)
    assert _near(hits, len(episodes), chance), (hits / len(episodes), chance)


def _draws(shape: Any) -> Iterator[Any]:
    """Every value the agent can draw for an answer shaped like ``shape``."""
    if isinstance(shape, bool):
        yield from (True, False)
    elif isinstance(shape, list):
        for parts in itertools.product(*(list(_draws(item)) for item in shape)):
            yield list(parts)
    else:
        yield from (str(v) for v in range(-CHANCE_RANGE, CHANCE_RANGE + 1))


def _leaves(shape: Any) -> int:
    return sum(_leaves(item) for item in shape) if isinstance(shape, list) else 1


@pytest.mark.parametrize("kwargs", [{}, {"difficulty": "starter"}], ids=["standard", "starter"])
def test_linalg_scores_the_chance_of_a_random_value_of_the_right_shape(played, kwargs):
    """The chance of each task with at most two entries is counted exactly, by grading every value
    the agent can draw with the real grader; a larger answer is hit about once in 19^3 draws."""
    problems = {p.problem_id: p for p in linalg.load_problems()}
    episodes = played[(LINALG, json.dumps(kwargs))]
    counted = [e for e in episodes if _leaves(problems[e[0]].answer) <= 2]
    exact_chance: dict[str, float] = {}
    for task_id in {task_id for task_id, *_ in counted}:
        problem = problems[task_id]
        values = list(_draws(problem.answer))
        right = sum(linalg.grade(problem, f"ANSWER: {linalg.render.inline(v)}").correct for v in values)
        exact_chance[task_id] = right / len(values)
    hits = sum(info["verdict"] == "correct" for *_, info in counted)
    chance = sum(exact_chance[task_id] for task_id, *_ in counted) / len(counted)
    assert 0 < chance < 1 and _near(hits, len(counted), chance), (hits / len(counted), chance)
    larger = [e for e in episodes if _leaves(problems[e[0]].answer) > 2]
    assert sum(info["verdict"] == "correct" for *_, info in larger) <= 3


@pytest.mark.filterwarnings("ignore:sandbox='process' runs code as host processes:UserWarning")
def test_compgeom_submits_the_starter_which_builds_and_solves_nothing():
    """A code family has no candidates: the random agent tests and submits the unimplemented starter."""
    env = gym.make("CompGeomPython-v0", sandbox="process", primitives=["line2_line2"])
    agent = RandomAgent()
    try:
        observation, info = env.reset(seed=0)
        history: tuple[dict[str, str], ...] = ()
        for index in range(env.unwrapped.max_turns):
            turn = Turn("CompGeomPython-v0", info["task_id"], 0, 0, index, observation, history, info, env)
            action = agent.act(turn)
            observation, reward, terminated, truncated, step_info = env.step(action)
            history += ({"role": "user", "content": turn.observation}, {"role": "assistant", "content": action})
            if terminated or truncated:
                break
    finally:
        env.close()
    assert index == 1 and action.startswith("Submitting")  # one test turn, then the submission
    assert (step_info["verdict"], reward, step_info["scoring_error"]) == ("wrong_answer", 0.0, None)
    assert step_info["compile_success"] and step_info["hidden_passed"] == 0 < step_info["hidden_total"]


def test_a_run_of_the_old_random_agent_is_not_resumed_as_the_baseline(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["eval", LINALG, "--agent", "random", "-n", "2", "--out", str(out), "--quiet"]) == 0
    header = json.loads((out / "run.json").read_text())
    assert header["fingerprint"]["agent"] == RandomAgent().fingerprint()
    header["fingerprint"]["agent"] = {"kind": "random", "max_chars": 200}  # version 1's: random characters
    (out / "run.json").write_text(json.dumps(header))
    capsys.readouterr()
    assert main(["eval", LINALG, "--agent", "random", "-n", "2", "--out", str(out), "--resume", "--quiet"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1

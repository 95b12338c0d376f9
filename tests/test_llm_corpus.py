"""A grading corpus of replies written the way language models write them, each with its reward.

``tests/llm_corpus/<family>.json`` holds the cases: markdown, LaTeX, Unicode (minus signs, smart
quotes, full-width digits, no-break spaces, emoji), code shown before the answer, answers repeated
in the conclusion, CRLF, fence labels such as ``c++20`` and ``py``; and the gamed or wrong ones
(two different answers, the answer only inside ``<think>`` or in a code comment, a bool for an int,
a reply cut off inside a fence). Every reply is one single-turn episode of the real env. In
CompGeom's cases ``{GOOD}``, ``{GOOD_PY}``, ``{BAD:<mutation>}`` and ``{STARTER}`` stand for the
task's known-good fixture, the Python one, a bad fixture and the starter file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import gymnasium as gym
import pytest

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.tasks import compgeom
from gym_sysmath.tasks.compgeom.fixtures import bad_fixture
from gym_sysmath.tasks.compgeom.layout import fixture_path, read

CORPUS = Path(__file__).parent / "llm_corpus"
ENV_IDS = {"csapp": "CsappExact-v0", "linalg": "LinearAlgebra-v0", "compgeom": "CompGeom-v0"}


def load(family: str) -> list[dict]:
    return json.loads((CORPUS / f"{family}.json").read_text(encoding="utf-8"))


def case_id(family: str, index: int, case: dict) -> str:
    return f"{family}-{index:03d}-" + re.sub(r"[^a-z0-9]+", "-", case["note"].lower()).strip("-")[:48]


CASES = [(family, case) for family in ENV_IDS for case in load(family)]
IDS = [case_id(family, index, case) for family in ENV_IDS for index, case in enumerate(load(family))]


def compgeom_reply(template: str, task_id: str) -> str:
    primitive, language = task_id.split("/")
    task = next(t for t in compgeom.load_tasks() if t.task_id == task_id)

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "GOOD":
            return compgeom.reference_solution(task)
        if name == "GOOD_PY":
            return read(fixture_path(primitive, "good.py"))
        if name == "STARTER":
            return task.starter
        return bad_fixture(primitive, language, name.split(':', 1)[1])

    return re.sub(r"\{(GOOD_PY|GOOD|STARTER|BAD:[a-z_]+)\}", fill, template)


@pytest.fixture(scope="module")
def envs(request):
    made: dict[tuple[str, int], gym.Env] = {}

    def get(family: str, max_turns: int) -> gym.Env:
        if (family, max_turns) not in made:
            if family != "linalg":
                request.getfixturevalue("docker_available")
            made[family, max_turns] = gym.make(ENV_IDS[family], max_turns=max_turns)
        return made[family, max_turns]

    yield get
    for env in made.values():
        env.close()


def test_corpus_is_large_and_balanced():
    assert len(CASES) >= 150
    for family in ENV_IDS:
        rewards = [case["reward"] for f, case in CASES if f == family]
        assert 1.0 in rewards and 0.0 in rewards, family
    assert sum(any(ord(ch) > 127 for ch in case["reply"]) for _, case in CASES) >= 30


@pytest.mark.parametrize("family,case", CASES, ids=IDS)
def test_reply_scores_its_expected_reward(envs, family, case):
    env = envs(family, case["max_turns"])
    reply = compgeom_reply(case["reply"], case["task_id"]) if family == "compgeom" else case["reply"]
    if case.get("crlf"):
        reply = reply.replace("\r\n", "\n").replace("\n", "\r\n")
    env.reset(options={"task_id": case["task_id"]})
    _, reward, terminated, truncated, info = env.step(reply)
    assert info["scoring_error"] is None, info["scoring_error"]
    assert (terminated, truncated) == (True, False)
    assert reward == case["reward"], f"{case['note']}: {info['verdict']}: {info.get('detail')}"

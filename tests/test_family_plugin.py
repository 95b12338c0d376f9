"""The family plug-in, proved by the shortest family there is: a parity question, its env class
and one registry row, defined here and run through the generic code (gym.make, reset/step, the
eval summary, `gym-sysmath verify` and `list`) with no edit anywhere else. docs/adding-a-family.md
walks through the same steps."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import gym_sysmath
from gym_sysmath.actions import Reply
from gym_sysmath.cli import main
from gym_sysmath.env import SysmathEnv, Task
from gym_sysmath.evaluation import evaluate
from gym_sysmath.families import (
    EnvId,
    Family,
    all_ids,
    breakdown_keys,
    breakdown_order,
    families,
    family_of,
    primary_ids,
    register_family,
    unregister_family,
)
from gym_sysmath.verdicts import Grade, Verdict

# ---------------------------------------------------------------- the example family: its tasks ...

PARITY_TASKS = {f"parity-{n}": n for n in (3, 8, 13, 20)}


def parity_key(n: int) -> str:
    return "even" if n % 2 == 0 else "odd"


# ... its env module ...

class ParityEnv(SysmathEnv):
    """Parity-v0: is n even or odd? Answer ``ANSWER: even`` or ``ANSWER: odd``."""

    family = "parity"

    def _needs_sandbox(self) -> bool:
        return False

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(PARITY_TASKS)

    def _select_task(self, options: Mapping[str, Any]) -> Task:
        task_id = options.get("task_id") or self._choose(self.task_ids)
        n = self._lookup(PARITY_TASKS, task_id)
        return Task(task_id, self.family, f"Is {n} even or odd?", parity_key(n),
                    {"magnitude": "small" if n < 10 else "large", "split": self.split})

    def _grade_final(self, reply: Reply) -> Grade:
        assert self.task is not None
        found = re.findall(r"^ANSWER:\s*(\w+)\s*$", reply.text, re.M)
        if not found:
            return Grade(Verdict.FORMAT_ERROR, "no ANSWER line")
        return Grade(Verdict.CORRECT if found[-1] == self.task.answer else Verdict.WRONG_ANSWER)

    _grade_last_turn = _grade_final

    def reference_action(self) -> str:
        assert self.task is not None
        return f"ANSWER: {self.task.answer}"


# ... its verifier ...

def verify_parity(args) -> int:
    """Recompute every key from n, independently of the env."""
    bad = [task_id for task_id, n in PARITY_TASKS.items() if parity_key(n) != ("odd", "even")[n % 2 == 0]]
    print(f"parity: {len(PARITY_TASKS) - len(bad)}/{len(PARITY_TASKS)} keys agree")
    return 1 if bad else 0


#: How the summary lists the magnitudes (not alphabetically).
MAGNITUDES = ("small", "large")

# ... and one registry row.
PARITY = Family("parity", f"{__name__}:ParityEnv", (EnvId("Parity-v0"), EnvId("ParityBig-v0", {"max_turns": 2})),
                verifier=f"{__name__}:verify_parity", breakdown_keys=("magnitude",),
                breakdown_order={"magnitude": f"{__name__}:MAGNITUDES"})


@pytest.fixture
def parity_family():
    register_family(PARITY)
    try:
        yield PARITY
    finally:
        unregister_family("parity")


# ---------------------------------------------------------------- the tests


def test_a_registered_family_makes_resets_steps_and_is_listed(parity_family, capsys):
    env = gym.make("Parity-v0")
    prompt, info = env.reset(seed=0, options={"task_id": "parity-13"})
    assert prompt == "Is 13 even or odd?" and info["family"] == "parity" and info["magnitude"] == "large"
    _, reward, terminated, _, info = env.step("ANSWER: odd")
    assert (reward, terminated, info["verdict"]) == (1.0, True, "correct")
    env.reset(seed=0, options={"task_id": "parity-8"})
    assert env.step("ANSWER: odd")[1] == 0.0
    env.close()
    assert gym.spec("ParityBig-v0").kwargs == {"max_turns": 2}
    assert main(["list"]) == 0
    assert re.search(r"^Parity-v0\s+parity\s+4$", capsys.readouterr().out, re.M)


def test_the_eval_summary_breaks_a_new_family_down_by_its_own_keys(parity_family):
    run = evaluate(["Parity-v0"], "reference", progress=False, plot=False)
    stats = run.summary["envs"]["Parity-v0"]
    assert stats["accuracy"] == 1.0 and stats["samples"] == 4
    assert set(stats["breakdowns"]) == {"magnitude"}
    assert [(value, group["samples"]) for value, group in stats["breakdowns"]["magnitude"].items()] == \
        [("small", 2), ("large", 2)]  # in the row's order


def test_verify_runs_the_rows_verifier(parity_family, capsys):
    assert main(["verify", "parity"]) == 0
    assert "parity: 4/4 keys agree" in capsys.readouterr().out


def test_eval_all_counts_each_family_once_not_its_aliases(parity_family):
    assert "Parity-v0" in primary_ids() and "ParityBig-v0" not in primary_ids()
    assert "CompGeom-v0" in primary_ids() and "CompGeomCpp-v0" not in primary_ids()
    assert len(primary_ids()) == len(families())
    assert set(all_ids()) == {entry.env_id for row in families() for entry in row.ids}


def test_unregistering_removes_the_ids_everywhere():
    register_family(PARITY)
    unregister_family("parity")
    assert "Parity-v0" not in gym.registry and family_of("Parity-v0") is None
    assert "Parity-v0" not in gym_sysmath.env_ids()
    with pytest.raises(SystemExit):  # `verify parity` is no longer a choice
        main(["verify", "parity"])


def test_a_plugin_cannot_take_a_built_in_name_or_id():
    with pytest.raises(ValueError, match="already registered"):
        register_family(Family("csapp", "x:Y", (EnvId("Other-v0"),), verifier="x:y"))
    with pytest.raises(ValueError, match="already belong"):
        register_family(Family("thief", "x:Y", (EnvId("CsappExact-v0"),), verifier="x:y"))
    with pytest.raises(ValueError, match="built in"):
        unregister_family("linalg")
    assert family_of("CsappExact-v0").name == "csapp"


def test_built_in_ids_and_breakdowns_are_unchanged():
    assert gym_sysmath.env_ids() == ("CsappExact-v0", "LinearAlgebra-v0", "CompGeom-v0", "CompGeomCpp-v0",
                                     "CompGeomRust-v0", "CompGeomPython-v0")
    assert primary_ids() == ("CsappExact-v0", "LinearAlgebra-v0", "CompGeom-v0")
    assert breakdown_keys("CsappExact-v0") == ("category", "difficulty")
    assert breakdown_keys("CompGeomRust-v0") == ("language",)
    assert breakdown_keys("Unregistered-v0") == ("category", "difficulty", "topic", "language")
    from gym_sysmath.tasks.csapp.difficulty import LEVELS
    from gym_sysmath.tasks.linalg import LEVELS as LINALG_LEVELS

    assert breakdown_order("CsappExact-v0", "difficulty") == LEVELS == ("starter", "easy", "medium", "hard")
    assert breakdown_order("LinearAlgebra-v0", "difficulty") == LINALG_LEVELS == ("starter", "easy", "medium", "hard")
    assert breakdown_order("Unregistered-v0", "difficulty") == LEVELS
    assert breakdown_order("CompGeom-v0", "language") == breakdown_order("CsappExact-v0", "category") == ()


def test_the_readme_id_table_lists_every_registered_family_and_id():
    """The README's id table is read against the registry: one row per family, aliases in it."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("| `") and "-v0`" in line.split("|")[1]]
    listed = [re.findall(r"`([A-Za-z]+-v\d+)`", row.split("|")[1]) for row in rows[:len(families())]]
    assert listed == [[entry.env_id for entry in row.ids] for row in families()]

"""The family plug-in, proved by the shortest family there is: a parity question, its env class
and one registry row, defined here and run through the generic code (gym.make, reset/step, the
batched vector env, the eval summary, `gym-sysmath verify` and `list`) with no edit anywhere
else, then through the same generic tests every built-in family gets. docs/adding-a-family.md
walks through the same steps."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.envs.registration import load_env_creator

import gym_sysmath
from gym_sysmath.actions import Reply
from gym_sysmath.cli import main
from gym_sysmath.env import SysmathEnv, Task, ToolTurn
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
from gym_sysmath.vector import SysmathVectorEnv
from gym_sysmath.verdicts import Grade, Verdict

ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------- the example family: its tasks ...

PARITY_TASKS = {f"parity-{n}": n for n in (3, 8, 13, 20)}


def parity_key(n: int) -> str:
    return "even" if n % 2 == 0 else "odd"


# ... its env module ...

class ParityEnv(SysmathEnv):
    """Is n even or odd? Answered on a final `ANSWER:` line.

    ## Description
    Four fixed numbers; the key is `n % 2`, computed, never typed.

    ## Action Space
    `Text`: a reply with a line `ANSWER: even` or `ANSWER: odd`.

    ## Observation Space
    `Text`: the question.

    ## Rewards
    1.0 for the right word, else 0.0.

    ## Starting State
    `reset(seed=..., options=...)`: `options` may carry `task_id`. The train split draws from the
    same four numbers.

    ## Episode End
    Terminated after a final reply; a code block before the last turn runs nothing.

    ## Arguments
    | name | type | default | meaning |
    | --- | --- | --- | --- |
    | `split` | `str` | `"eval"` | `"eval"` or `"train"` |
    | `max_turns` | `Optional[int]` | `1` | replies per episode |
    | `sandbox` | `str` | `"docker"` | unused: nothing runs |
    | `pool_size` | `Optional[int]` | `None` | unused |
    | `limits` | `Optional[Limits]` | `None` | unused |
    | `render_mode` | `Optional[str]` | `None` | `"ansi"`: the transcript as text |
    | `code_via` | `str` | `"fence"` | `"tool"`: every reply is final |

    ## Version History
    - v0: four numbers.
    """

    family = "parity"

    def _needs_sandbox(self) -> bool:
        return False

    def _eval_ids(self) -> tuple[str, ...]:
        return tuple(PARITY_TASKS)

    def _select_task(self, options: Mapping[str, Any]) -> Task:
        # both splits draw from the eval tasks (a family with a generator draws fresh ones on "train")
        task_id = self._eval_task_for_reset(options, self._reset_filters(options))
        n = PARITY_TASKS[task_id]
        return Task(task_id, self.family, f"Is {n} even or odd?", parity_key(n),
                    {"magnitude": "small" if n < 10 else "large", "split": self.split})

    def _grade_final(self, reply: Reply) -> Grade:
        assert self.task is not None
        found = re.findall(r"^ANSWER:\s*(\w+)\s*$", reply.text, re.M)
        if not found:
            return Grade(Verdict.FORMAT_ERROR, "no ANSWER line")
        return Grade(Verdict.CORRECT if found[-1] == self.task.answer else Verdict.WRONG_ANSWER)

    _grade_last_turn = _grade_final

    def _tool_turn(self, reply: Reply) -> ToolTurn:
        return ToolTurn(f"[parity runs no code; reply with an ANSWER line; turn {self.turn} of {self.max_turns}]")

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


def test_a_registered_family_gets_the_batched_vector_env(parity_family):
    envs = gym.make_vec("ParityBig-v0", num_envs=2, vectorization_mode="vector_entry_point")
    try:
        assert isinstance(envs, SysmathVectorEnv) and [env.max_turns for env in envs.envs] == [2, 2]
        envs.reset(seed=[0, 1])
        _, rewards, terminated, _, _ = envs.step([env.reference_action() for env in envs.envs])
        assert list(rewards) == [1.0, 1.0] and terminated.all()
    finally:
        envs.close()


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


def check_row(row: Family) -> None:
    """What a registry row promises, read back: its class (a ``SysmathEnv`` whose ``family`` is the
    row's name), its verifier, its breakdown orders, and the keys its resets report."""
    env_class = load_env_creator(row.entry_point)
    assert isinstance(env_class, type) and issubclass(env_class, SysmathEnv), row.entry_point
    assert env_class.family == row.name, f"{row.entry_point}.family is {env_class.family!r}, the row says {row.name!r}"
    module, _, function = row.verifier.partition(":")
    assert callable(getattr(importlib.import_module(module), function)), row.verifier
    if row.verifier == "gym_sysmath.verification:build_verify":
        assert callable(importlib.import_module(f"gym_sysmath.tasks.{row.name}.build").main)
    assert set(row.breakdown_order) <= set(row.breakdown_keys)
    for key in row.breakdown_order:
        assert isinstance(breakdown_order(row.primary_id, key), tuple)
    env = gym.make(row.primary_id, sandbox="process")
    try:
        _, info = env.reset(seed=0)
        assert set(row.breakdown_keys) <= set(info), f"{row.primary_id}: a breakdown key its reset info lacks"
    finally:
        env.close()


@pytest.mark.filterwarnings("ignore:sandbox='process'")  # a reset runs no code
@pytest.mark.parametrize("row", families(), ids=lambda row: row.name)
def test_every_row_names_a_class_a_verifier_and_keys_that_exist(row):
    check_row(row)


def test_the_example_row_names_a_class_a_verifier_and_keys_that_exist(parity_family):
    check_row(parity_family)


#: The generic test files: each runs its checks on every registered id or family (a module-level
#: ``parametrize`` over ``all_ids()``, ``primary_ids()`` or ``families()``).
GENERIC_TESTS = ("test_env_contract.py", "test_env_api.py", "test_listing_without_docker.py",
                 "test_filters_everywhere.py", "test_eval_cli.py", "test_packaging.py", "test_vector.py")


@pytest.mark.slow
def test_the_generic_tests_pass_on_the_example_family(tmp_path):
    """The generic files, collected with the example row registered (tests/conftest.py reads
    GYM_SYSMATH_TEST_FAMILIES), run every case that names it; all pass (the Docker ones skip
    without a daemon), and every file has such a case."""
    report = tmp_path / "report.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "parity", f"--junitxml={report}",
         *(f"tests/{name}" for name in GENERIC_TESTS)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "GYM_SYSMATH_TEST_FAMILIES": f"{__name__}:PARITY"})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    cases = ElementTree.parse(report).getroot().iter("testcase")
    ran = {case.get("classname", "").rpartition(".")[2] + ".py" for case in cases}
    assert ran == set(GENERIC_TESTS), f"no case on the example family in {set(GENERIC_TESTS) - ran}"


def test_built_in_ids_and_breakdowns_are_unchanged():
    """The design card's ids and breakdowns stay as they are; a new family only adds after them."""
    assert gym_sysmath.env_ids()[:6] == ("CsappExact-v0", "LinearAlgebra-v0", "CompGeom-v0", "CompGeomCpp-v0",
                                         "CompGeomRust-v0", "CompGeomPython-v0")
    assert primary_ids()[:3] == ("CsappExact-v0", "LinearAlgebra-v0", "CompGeom-v0")
    assert breakdown_keys("CsappExact-v0") == ("category", "difficulty")
    assert breakdown_keys("CompGeomRust-v0") == ("language",)
    assert breakdown_keys("Unregistered-v0")[:4] == ("category", "difficulty", "topic", "language")
    from gym_sysmath.tasks.csapp.difficulty import LEVELS
    from gym_sysmath.tasks.linalg import LEVELS as LINALG_LEVELS

    assert breakdown_order("CsappExact-v0", "difficulty") == LEVELS == ("starter", "easy", "medium", "hard")
    assert breakdown_order("LinearAlgebra-v0", "difficulty") == LINALG_LEVELS == ("starter", "easy", "medium", "hard")
    assert breakdown_order("Unregistered-v0", "difficulty") == LEVELS
    assert breakdown_order("CompGeom-v0", "language") == breakdown_order("CsappExact-v0", "category") == ()


def test_the_readme_id_table_agrees_with_the_registry():
    """Each row of the README's id table is one registered family's ids, aliases included, in
    registry order, and the design card's three families are listed. A family added since may
    be missing (``gym-sysmath list`` shows every id); a wrong or stale row fails."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("| `") and "-v0`" in line.split("|")[1]]
    listed = [re.findall(r"`([A-Za-z]+-v\d+)`", row.split("|")[1]) for row in rows]
    owners = [family_of(ids[0]) for ids in listed]
    assert None not in owners, f"the README lists ids no family registers: {listed}"
    assert listed == [[entry.env_id for entry in row.ids] for row in owners]
    order = [row.name for row in families()]
    names = [row.name for row in owners]
    assert names == sorted(names, key=order.index) and {"csapp", "linalg", "compgeom"} <= set(names)

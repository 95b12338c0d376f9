"""CompGeom's performance score is an instruction count: the same submission gets the same score,
a slower one a lower score, and a submission that games the counted run gets no bonus."""

from __future__ import annotations

import re

import gymnasium as gym
import pytest

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.tasks import compgeom
from gym_sysmath.tasks.compgeom.performance import performance_score

PRIMITIVE = "line2_line2"  # the fewest hidden cases: the quickest counted runs
WEIGHT = 0.5


def slower(language: str, source: str, extra_calls: int) -> str:
    """``source`` whose primitive also computes its answer ``extra_calls`` more times per call
    (kept from being optimised away), so it does the same work and more of it."""
    name = PRIMITIVE
    if language == "python":
        return f"{source}\n_fast = {name}\ndef {name}(*args):\n    for _ in range({extra_calls}):\n" \
               f"        _fast(*args)\n    return _fast(*args)\n"
    fast = source.replace(f"{name}(", f"{name}_fast(", 1)
    if language == "cpp":
        return fast + (f"\nnamespace compgeom {{\ntemplate <class... A> auto {name}(const A&... args) {{\n"
                       f"    for (int i = 0; i < {extra_calls}; ++i) {{ auto r = {name}_fast(args...); "
                       f"asm volatile(\"\" : : \"r\"(&r) : \"memory\"); }}\n    return {name}_fast(args...);\n}}\n}}\n")
    params, returns = re.search(rf"pub fn {name}_fast\((.*?)\) -> (\w+)", fast).groups()
    names = ", ".join(p.split(":")[0].strip() for p in params.split(","))
    return fast + (f"\npub fn {name}({params}) -> {returns} {{\n    for _ in 0..{extra_calls} {{ "
                   f"std::hint::black_box({name}_fast({names})); }}\n    {name}_fast({names})\n}}\n")


@pytest.fixture(scope="module")
def env(docker_available):
    environment = gym.make("CompGeom-v0", primitives=[PRIMITIVE], max_turns=1, performance_weight=WEIGHT)
    yield environment
    environment.close()


def submit(env, language: str, source: str) -> tuple[float, dict]:
    env.reset(options={"task_id": f"{PRIMITIVE}/{language}"})
    _, reward, _, _, info = env.step(f"```{language}\n{source}\n```")
    return reward, info


def reference(language: str) -> str:
    return compgeom.reference_solution(compgeom.load_tasks([PRIMITIVE], [language])[0])


def test_performance_score_is_the_reference_count_over_the_candidates_above_the_baseline():
    assert performance_score(reference=300, candidate=300, baseline=100) == 1.0
    assert performance_score(reference=300, candidate=500, baseline=100) == 0.5
    assert performance_score(reference=300, candidate=150, baseline=100) == 1.0  # capped
    with pytest.raises(ValueError):
        performance_score(reference=100, candidate=500, baseline=100)


@pytest.mark.parametrize("option", [{"performance_weight": 0.5}, {"measure_performance": True}])
def test_performance_on_the_process_backend_is_refused_up_front(option):
    # There every counted run is a SetupError: every correct answer would be a scoring_error.
    with pytest.raises(ValueError, match="sandbox='docker'"):
        gym.make("CompGeom-v0", sandbox="process", **option)


@pytest.mark.docker
@pytest.mark.parametrize("language", compgeom.LANGUAGES)
def test_same_submission_gets_the_same_score_twice_and_a_slower_one_less(env, language):
    candidate = slower(language, reference(language), extra_calls=10)
    (reward, first), (_, second) = submit(env, language, candidate), submit(env, language, candidate)
    assert (first["verdict"], first["scoring_error"]) == ("correct", None), first
    assert first["performance_score"] == second["performance_score"] < 0.9
    assert reward == 1.0 + WEIGHT * first["performance_score"]
    _, own = submit(env, language, reference(language))
    assert own["performance_score"] == 1.0


#: Python candidates (the reference with an attack at import) that pass the hidden run natively.
UNDER_COUNTER = "'vgpreload' in __import__('os').environ.get('LD_PRELOAD', '')"
GAMES = {
    # Skipped work: under the counter, answer every case "none" at once.
    "skips_work_under_the_counter": f"""
if {UNDER_COUNTER}:
    def {PRIMITIVE}(line0, line1):
        return Intersection(Kind.NONE, [], [], [])
""",
    # Detached work: a forked child would compute outside the counted process (fork is refused).
    "hands_work_to_a_forked_child": """
import os as _os
if _os.fork() == 0:
    _os._exit(0)
""",
    # Uncounted work: re-exec natively, then leave a forged count (exec is refused).
    "execs_an_uncounted_copy_that_forges_the_count": f"""
import os as _os, sys as _sys
if _os.environ.get("FORGE"):
    import atexit as _atexit
    _atexit.register(lambda: open(".instructions", "w").write("summary: 1\\n"))
elif {UNDER_COUNTER}:
    _os.execve(_sys.executable, [_sys.executable, "main.py"], {{**_os.environ, "FORGE": "1"}})
""",
    # A forged count the counter cannot overwrite (the file is refused).
    "plants_a_read_only_count": """
import os as _os
open(".instructions", "w").write("summary: 1\\n")
_os.chmod(".instructions", 0o400)
""",
}


@pytest.mark.docker
@pytest.mark.parametrize("game", GAMES)
def test_gaming_the_counted_run_gets_no_bonus(env, game):
    reward, info = submit(env, "python", reference("python") + GAMES[game])
    assert (info["verdict"], info["scoring_error"]) == ("correct", None), info
    assert (info["performance_score"], reward) == (0.0, 1.0)

"""CompGeom-v0 end to end in the Docker sandbox: references pass every hidden case in all
three languages; broken, cheating and crashing candidates do not; the episode protocol holds."""

from __future__ import annotations

import gymnasium as gym
import pytest

from gym_sysmath.tasks import compgeom
from gym_sysmath.tasks.compgeom.fixtures import bad_sources

pytestmark = pytest.mark.docker
TASKS = compgeom.load_tasks()
SEGMENTS_PY = "segment2_segment2/python"


@pytest.fixture(scope="module")
def env(docker_available):
    environment = gym.make("CompGeom-v0")
    yield environment
    environment.close()


def block(language: str, source: str) -> str:
    return f"```{language}\n{source}\n```"


@pytest.mark.parametrize("task", TASKS, ids=[t.task_id for t in TASKS])
def test_reference_passes_public_then_hidden(env, task):
    env.reset(options={"task_id": task.task_id})
    observation, reward, terminated, _, info = env.step(env.unwrapped.reference_action())
    assert (reward, terminated, info["verdict"]) == (0.0, False, None)
    assert info["public_passed"] == info["public_total"] > 0 and info["compile_success"]
    assert f"passed {info['public_total']}/{info['public_total']}" in observation
    _, reward, terminated, _, info = env.step("Submitting.")
    assert (reward, terminated, info["verdict"]) == (1.0, True, "correct")
    assert info["hidden_passed"] == info["hidden_total"] > 50


@pytest.mark.parametrize("language", compgeom.LANGUAGES)
def test_bad_fixtures_score_zero(env, language):
    for task in compgeom.load_tasks(["segment2_segment2", "ray2_ray2"], [language]):
        for name, bad in bad_sources(task.primitive, language).items():
            if name.startswith("bad_tol_") and "parallel_rel" not in name:
                continue  # one tolerance candidate here; `verify compgeom` runs them all
            env.reset(options={"task_id": task.task_id})
            env.step(block(language, bad))
            _, reward, _, _, info = env.step("submit")
            assert (reward, info["verdict"]) == (0.0, "wrong_answer"), bad[:80]
            assert info["hidden_passed"] < info["hidden_total"]


def test_max_turns_one_grades_the_first_code_action(docker_available):
    environment = gym.make("CompGeomRust-v0", max_turns=1)
    try:
        environment.reset(seed=0)
        _, reward, terminated, _, info = environment.step(environment.unwrapped.reference_action())
        assert (reward, terminated, info["verdict"]) == (1.0, True, "correct")
    finally:
        environment.close()


def test_compile_error_is_reported_and_graded_as_such(env):
    env.reset(options={"task_id": "line2_line2/cpp"})
    observation, _, _, _, info = env.step(block("cpp", "this is not C++"))
    assert "Build failed" in observation and info["compile_success"] is False
    _, reward, _, _, info = env.step("submit")
    assert (reward, info["verdict"], info["compile_success"]) == (0.0, "compile_error", False)


def test_submitting_without_code_is_a_format_error(env):
    env.reset(options={"task_id": SEGMENTS_PY})
    _, reward, terminated, _, info = env.step("I am done.")
    assert (reward, terminated, info["verdict"]) == (0.0, True, "format_error")


def test_code_in_another_language_is_not_run(env):
    env.reset(options={"task_id": "line2_ray2/rust"})
    observation, reward, terminated, _, info = env.step(block("python", "print(1)"))
    assert "rust" in observation and (reward, terminated, info["verdict"]) == (0.0, False, None)


def test_printing_fake_records_cannot_pass(env):
    task = next(t for t in TASKS if t.task_id == SEGMENTS_PY)
    cases = task.hidden_cases
    forged = "\n".join(f"R {i} none 0 0 0" for i in range(len(cases)))
    cheat = compgeom.reference_solution(task) + (
        "\nimport os, sys\n"
        f"sys.stdout.write({forged!r} + '\\nEND {len(cases)}\\n')\nsys.stdout.flush()\nos._exit(0)\n")
    env.reset(options={"task_id": SEGMENTS_PY})
    env.step(block("python", cheat))
    _, reward, _, _, info = env.step("submit")
    assert reward == 0.0 and info["verdict"] == "wrong_answer"


def test_expected_outputs_are_not_in_the_sandbox(env):
    probe = ("import os\nfound = []\nfor root, _, files in os.walk('/'):\n"
             "    if root.startswith('/proc') or root.startswith('/sys'):\n        continue\n"
             "    found += [f for f in files if f in ('hidden.json', 'public.json', 'tasks.json')]\n"
             "raise SystemExit(f'found {found}')\n")
    task = next(t for t in TASKS if t.task_id == SEGMENTS_PY)
    env.reset(options={"task_id": SEGMENTS_PY})
    observation, *_ = env.step(block("python", compgeom.reference_solution(task) + "\n" + probe))
    assert "found []" in observation


def test_endless_candidate_times_out(env):
    task = next(t for t in TASKS if t.task_id == SEGMENTS_PY)
    env.reset(options={"task_id": SEGMENTS_PY})
    env.step(block("python", compgeom.reference_solution(task) + "\nwhile True:\n    pass\n"))
    _, reward, _, _, info = env.step("submit")
    assert (reward, info["verdict"]) == (0.0, "timeout")


def test_identical_resubmission_in_one_episode_is_not_recompiled(env):
    env.reset(options={"task_id": "ray2_segment2/cpp"})
    code = env.unwrapped.reference_action()
    first, *_ = env.step(code)
    again, *_ = env.step(code)
    assert "Build: ok" in first and "(cached)" not in first
    assert "Build: ok (cached)" in again


def test_builds_are_not_shared_between_episodes(env):
    # a binary built where one rollout's code ran must never reach another rollout
    for _ in range(2):
        env.reset(options={"task_id": "ray2_segment2/cpp"})
        observation, *_ = env.step(env.unwrapped.reference_action())
        assert "Build: ok" in observation and "(cached)" not in observation


def test_a_negative_performance_weight_is_refused():
    with pytest.raises(ValueError, match="performance_weight must be >= 0"):
        gym.make("CompGeomPython-v0", performance_weight=-0.5)


def test_measured_performance_is_reported_not_rewarded(instruction_counter):
    environment = gym.make("CompGeomPython-v0", measure_performance=True, max_turns=1)
    try:
        environment.reset(options={"task_id": "line2_line2/python"})
        _, reward, _, _, info = environment.step(environment.unwrapped.reference_action())
        assert info["verdict"] == "correct" and 0.0 < info["performance_score"] <= 1.0
        assert reward == 1.0
    finally:
        environment.close()


def test_per_language_ids_select_their_language(docker_available):
    for env_id, language in (("CompGeomCpp-v0", "cpp"), ("CompGeomRust-v0", "rust"),
                             ("CompGeomPython-v0", "python")):
        environment = gym.make(env_id)
        try:
            assert len(environment.unwrapped.task_ids) == len(compgeom.PRIMITIVES)
            assert all(task_id.endswith("/" + language) for task_id in environment.unwrapped.task_ids)
        finally:
            environment.close()


def test_failing_public_cases_show_the_candidates_stderr_and_exception(env):
    task = next(t for t in TASKS if t.task_id == SEGMENTS_PY)
    env.reset(options={"task_id": SEGMENTS_PY})
    broken = compgeom.reference_solution(task) + (
        "\n_original = segment2_segment2\n\ndef segment2_segment2(a, b):\n"
        "    import sys\n    print('debug: called', file=sys.stderr)\n    raise ValueError('my own bug')\n")
    observation, *_ = env.step(block("python", broken))
    assert "standard error" in observation and "debug: called" in observation
    assert "ValueError: my own bug" in observation


def test_build_errors_keep_the_first_error_when_cut(env):
    env.reset(options={"task_id": "ray2_segment2/cpp"})
    source = "#pragma once\nint first_error_here = undefined_name_xyz;\n" + "".join(
        f"int filler_{i} = undefined_filler_{i};\n" for i in range(400))
    observation, *_ = env.step(block("cpp", source))
    assert "Build failed" in observation and "undefined_name_xyz" in observation and "characters cut" in observation
    assert "\\u2018" not in observation  # g++'s quotes arrive as text, not escapes


def test_python_candidate_traceback_shows_only_the_candidates_frames(env):
    # the harness's own frames are not the agent's code and only mislead it
    env.reset(options={"task_id": SEGMENTS_PY})
    task = next(t for t in TASKS if t.task_id == SEGMENTS_PY)
    broken = (compgeom.reference_solution(task).replace(f"def {task.primitive}(", "def _unused(")
              + f"\n\ndef {task.primitive}(a, b):\n    return helper_that_breaks()\n\n\n"
              "def helper_that_breaks():\n    raise ValueError('boom from the candidate')\n")
    observation, *_ = env.step(block("python", broken))
    trace = observation[observation.index("Traceback"):]
    assert "helper_that_breaks" in trace and "ValueError: boom from the candidate" in trace
    assert "main.py" not in trace and "def main" not in trace and "record(index" not in trace


@pytest.mark.parametrize("language", compgeom.LANGUAGES)
def test_train_episode_grades_on_fresh_cases_reference_passes_and_a_tolerance_fails(docker_available, language):
    environment = gym.make("CompGeom-v0", split="train", languages=[language], max_turns=1)
    try:
        environment.reset(seed=1, options={"primitives": ["ray2_segment2"]})
        hidden = environment.unwrapped._hidden
        assert hidden != compgeom.load_tasks(["ray2_segment2"], [language])[0].hidden_cases
        _, reward, _, _, info = environment.step(environment.unwrapped.reference_action())
        assert (reward, info["verdict"], info["hidden_total"]) == (1.0, "correct", len(hidden))
        environment.reset(seed=2, options={"primitives": ["ray2_segment2"]})
        bad = bad_sources("ray2_segment2", language)[f"bad_tol_interval.{compgeom.BY_LANGUAGE[language].ext}"]
        _, reward, _, _, info = environment.step(block(language, bad))
        assert (reward, info["verdict"]) == (0.0, "wrong_answer")
    finally:
        environment.close()

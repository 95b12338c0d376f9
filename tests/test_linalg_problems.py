"""The linear-algebra problem sets: the shipped 138 (78 standard, 60 starter) and the procedural train split."""

from __future__ import annotations

import json
import random
import string
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
import sympy

from gym_sysmath.tasks.linalg import (
    DIFFICULTIES,
    KIND_OF_TOPIC,
    STARTER_TOPICS,
    TOPICS,
    generate_problem,
    grade,
    load_problems,
    reference_response,
    verify,
)
from gym_sysmath.tasks.linalg.audit import check_problems
from gym_sysmath.tasks.linalg.build import (
    COMMAND,
    DEFAULT_PATH,
    SLOTS,
    build_item,
    build_problems,
    main,
    render_file,
)
from gym_sysmath.tasks.linalg.generators import GENERATORS

SHIPPED = load_problems()
_PRINTABLE = set(string.printable) - set("\x0b\x0c\r")


# --- the shipped eval set ---------------------------------------------------------------------


def test_shipped_set_is_13_topics_by_3_difficulties_by_2_variants_then_the_starter_level():
    assert len(SHIPPED) == 138
    standard = {(t, d): 2 for t in TOPICS for d in DIFFICULTIES}
    assert Counter((p.topic, p.difficulty) for p in SHIPPED) == standard | {(t, "starter"): 6 for t in STARTER_TOPICS}
    assert len({p.problem_id for p in SHIPPED}) == 138
    assert SHIPPED[0].problem_id == "eval/determinant/easy/0"
    assert all(p.difficulty != "starter" for p in SHIPPED[:78])  # the starter level renumbers none of the 78


def test_shipped_file_is_current():
    assert DEFAULT_PATH.read_text(encoding="utf-8") == render_file(build_problems())


def test_shipped_file_names_the_command_that_regenerates_it():
    header = json.loads(DEFAULT_PATH.read_text(encoding="utf-8"))
    assert header["generated_by"] == COMMAND == "python -m gym_sysmath.tasks.linalg.build"
    assert header["count"] == 138


def test_check_mode_fails_on_a_stale_file(tmp_path, capsys):
    stale = tmp_path / "problems.json"
    stale.write_text(DEFAULT_PATH.read_text(encoding="utf-8").replace('"count": 138', '"count": 137'), encoding="utf-8")
    assert main(["--check", "--path", str(stale)]) == 1
    assert main(["--check"]) == 0
    assert "stale" in capsys.readouterr().err


def test_build_writes_a_file_that_check_accepts(tmp_path):
    target = tmp_path / "problems.json"
    assert main(["--path", str(target)]) == 0
    assert main(["--check", "--path", str(target)]) == 0


def test_verify_rederives_every_key(capsys):
    report = verify()
    assert report.ok and report.summary() == "138/138", report.failures
    assert main(["--verify"]) == 0
    assert capsys.readouterr().out.strip().endswith("138/138")


def test_verify_catches_a_corrupted_key(tmp_path):
    data = json.loads(DEFAULT_PATH.read_text(encoding="utf-8"))
    victim = next(p for p in data["problems"] if p["topic"] == "eigenvector")
    victim["answer"] = [str(int(v) + 1) for v in victim["answer"]]
    bad = tmp_path / "problems.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    report = verify(bad)
    assert not report.ok and report.summary() == "137/138"
    assert victim["problem_id"] in report.failures[0] and "sympy" in report.failures[0]
    assert main(["--verify", "--path", str(bad)]) == 1


def test_verify_reports_missing_problems():
    report = check_problems(SHIPPED[:-1])
    assert not report.ok and any("missing" in f for f in report.failures)


def test_any_item_rebuilds_alone():
    for index in (0, 37, 77, 78, 137):
        assert build_item(index) == SHIPPED[index]


def test_each_slot_has_its_own_seed_so_variants_differ():
    assert len({json.dumps([p.topic, p.difficulty, p.inputs], sort_keys=True) for p in SHIPPED}) == 138
    assert [p.problem_id for p in SHIPPED] == [f"eval/{t}/{d}/{v}" for t, d, v in SLOTS]


def test_yes_no_questions_are_balanced_in_the_eval_set():
    answers = [p.answer for p in SHIPPED if p.topic == "is_symmetric"]
    assert sorted(answers) == [False, False, False, True, True, True]


def test_load_problems_filters():
    hard = load_problems(difficulty="hard")
    assert len(hard) == 26 and {p.difficulty for p in hard} == {"hard"}
    some = load_problems(topics=["rank", "trace"], difficulty="easy")
    assert [p.problem_id for p in some] == [f"eval/{t}/easy/{v}" for t in ("rank", "trace") for v in (0, 1)]
    with pytest.raises(ValueError):
        load_problems(difficulty="impossible")
    with pytest.raises(ValueError):
        load_problems(topics=["astrology"])


def test_reference_response_scores_for_all_138():
    assert all(grade(p, reference_response(p)).correct for p in SHIPPED)


# --- problem records --------------------------------------------------------------------------


@pytest.mark.parametrize("problem", SHIPPED, ids=lambda p: p.problem_id)
def test_record_is_consistent_and_json_native(problem):
    assert problem.kind == KIND_OF_TOPIC[problem.topic]
    assert problem.problem_id == f"eval/{problem.topic}/{problem.difficulty}/{problem.problem_id[-1]}"
    assert set(problem.prompt) <= _PRINTABLE, "prompts must fit the env's printable-ASCII Text space"
    assert problem.prompt.rstrip().splitlines()[-2] == "ANSWER: <value>"
    assert json.loads(json.dumps(problem.to_dict())) == problem.to_dict()
    for name, value in problem.inputs.items():
        flat = np.array(value).ravel().tolist()
        assert all(type(v) is int for v in flat), name


def test_rel_tol_is_zero_exactly_where_the_key_is_integral():
    for p in SHIPPED:
        if p.kind == "direction":
            assert p.rel_tol == 1e-6
        elif p.kind == "boolean":
            assert p.rel_tol == 0
        else:
            entries = np.array(p.answer, dtype=object).ravel().tolist()
            integral = all(Fraction(v).denominator == 1 for v in entries)
            assert p.rel_tol == (0.0 if integral else 1e-6), p.problem_id
    assert any(p.rel_tol > 0 for p in SHIPPED if p.topic in ("inverse", "solve_system"))


def test_difficulty_grows_with_size():
    size = {p.problem_id: len(p.inputs.get("A", p.inputs.get("v", p.inputs.get("u", [])))) for p in SHIPPED}
    for topic in TOPICS:
        easy, hard = size[f"eval/{topic}/easy/0"], size[f"eval/{topic}/hard/0"]
        assert easy < hard, topic


# --- the train split: generators --------------------------------------------------------------


@pytest.mark.parametrize("topic", TOPICS)
@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_generation_is_deterministic_per_seed(topic, difficulty):
    first = generate_problem(np.random.default_rng(123), topic=topic, difficulty=difficulty)
    second = generate_problem(np.random.default_rng(123), topic=topic, difficulty=difficulty)
    assert first == second
    assert first.problem_id.startswith(f"train/{topic}/{difficulty}/")


def test_generation_ignores_global_random_state():
    np.random.seed(1)
    random.seed(1)
    first = [generate_problem(np.random.default_rng(seed)) for seed in range(20)]
    np.random.seed(2)
    random.seed(2)
    np.random.random(100)
    second = [generate_problem(np.random.default_rng(seed)) for seed in range(20)]
    assert first == second


def test_different_seeds_give_different_problems():
    prompts = {generate_problem(np.random.default_rng(seed), topic="determinant").prompt for seed in range(50)}
    assert len(prompts) > 45


def test_unset_topic_and_difficulty_are_drawn_from_the_rng():
    drawn = [generate_problem(np.random.default_rng(seed)) for seed in range(300)]
    assert {p.topic for p in drawn} == set(TOPICS)
    assert {p.difficulty for p in drawn} == set(DIFFICULTIES)


def test_topic_filter_restricts_the_draw():
    drawn = [generate_problem(np.random.default_rng(s), topics=["rank", "inverse"]) for s in range(40)]
    assert {p.topic for p in drawn} == {"rank", "inverse"}


def test_unknown_topic_or_difficulty_is_rejected():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError):
        generate_problem(rng, topic="astrology")
    with pytest.raises(ValueError):
        generate_problem(rng, topics=["rank", "astrology"])
    with pytest.raises(ValueError):
        generate_problem(rng, difficulty="impossible")


def test_every_topic_has_a_generator():
    assert tuple(GENERATORS) == TOPICS


def test_reference_responses_grade_correct_for_hundreds_of_train_draws():
    drawn = [
        generate_problem(np.random.default_rng([7, seed]), topic=topic, difficulty=difficulty)
        for seed in range(8)
        for topic in TOPICS
        for difficulty in DIFFICULTIES
    ]
    assert len(drawn) == 312
    failures = [p.problem_id for p in drawn if not grade(p, reference_response(p)).correct]
    assert failures == []
    assert check_problems(drawn, variants=0).ok


def test_symmetric_matrices_are_about_half_of_train_draws():
    answers = [generate_problem(np.random.default_rng(s), topic="is_symmetric").answer for s in range(400)]
    assert 150 < sum(answers) < 250


def test_eigen_problems_have_integer_eigenvalues_and_a_simple_asked_eigenvalue():
    for seed in range(30):
        for difficulty in DIFFICULTIES:
            p = generate_problem(np.random.default_rng(seed), topic="eigenvector", difficulty=difficulty)
            a = sympy.Matrix(p.inputs["A"])
            eigenvalues = a.eigenvals()
            assert all(v.is_integer for v in eigenvalues)
            assert eigenvalues[p.inputs["eigenvalue"]] == 1
            assert not a.is_upper and not a.is_lower, "a triangular matrix gives its eigenvalues away"


def test_rank_problems_cover_deficient_ranks():
    ranks = Counter(
        (p.difficulty, int(p.answer))
        for s in range(60)
        for p in [generate_problem(np.random.default_rng(s), topic="rank")]
    )
    assert any(rank == 1 for _, rank in ranks) and any(rank >= 3 for _, rank in ranks)

"""The action protocol, the same for every family and turn (``gym_sysmath.actions``): how a reply
is read (fences, labels, line ends, cut-off fences, ANSWER lines) and what the env does with it."""

from __future__ import annotations

import json
import math
import string
from decimal import Decimal

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.actions import read_reply, to_observation
from gym_sysmath.answers import find_answers, is_answer_line, normalise_notation
from gym_sysmath.exact import answer_matches, exact_equal
from gym_sysmath.fences import DISPLAY, find_blocks, language_of, split_lines
from gym_sysmath.spaces import CHARSET, text_space
from gym_sysmath.tasks import csapp, linalg

PYTHON = ("python",)
DET = next(p for p in linalg.load_problems() if p.problem_id == "eval/determinant/easy/0")  # key -57
CSAPP = {task.task_id: task for task in csapp.load_tasks()}


# ---------------------------------------------------------------- fences and labels

@pytest.mark.parametrize("label,language", [
    ("python", "python"), ("py", "python"), ("python3", "python"), ("Python", "python"),
    ("c++", "cpp"), ("c++20", "cpp"), ("C++20", "cpp"), ("cpp", "cpp"), ("cc", "cpp"), ("cxx", "cpp"),
    ("hpp", "cpp"), ("rs", "rust"), ("rust", "rust"), ("{.python}", "python"), ("cpp candidate.hpp", "cpp"),
    ("candidate.rs", "rust"), ("python title=x.py", "python"), ("javascript", "javascript"), ("js", "javascript"),
    ("json", DISPLAY), ("text", DISPLAY), ("output", DISPLAY), ("", "python"),
])
def test_one_alias_table_reads_every_label(label, language):
    assert language_of(label, "python") == language


@pytest.mark.parametrize("fence", ["```python\n{}```", "~~~python\n{}~~~", "```\n{}```", "````py\n{}````",
                                   "  ```python\n  {}  ```"])
def test_fence_styles_all_read_as_the_same_code(fence):
    reply = read_reply(fence.format("print(1)\n"), PYTHON)
    assert reply.code is not None and reply.code.code == "print(1)\n" and reply.cut is None


def test_code_line_ending_in_the_fence_closes_it():
    reply = read_reply("```python\nprint(1)```\nDone.", PYTHON)
    assert reply.code.code == "print(1)\n" and reply.cut is None


def test_inline_triple_backticks_are_not_a_fence():
    assert find_blocks(split_lines("use ```python print(1)``` to run")) == []


@given(st.text(alphabet=string.ascii_letters + string.digits + " ()=+*-:'\"[],.", max_size=200))
def test_line_ends_never_change_what_is_read(body):
    text = f"Intro\n\n```python\n{body}\n```\nANSWER: [1]\n"
    plain, crlf, cr = (read_reply(t, PYTHON) for t in (text, text.replace("\n", "\r\n"), text.replace("\n", "\r")))
    assert plain.blocks == crlf.blocks == cr.blocks and plain.answers == crlf.answers == cr.answers == ("[1]",)


@pytest.mark.parametrize("text", ["```python\nprint(1)\n", "Let me check:\n```cpp\nint x;", "```\n",
                                  "~~~python\nx = 1"])
def test_reply_ending_inside_a_fence_is_cut(text):
    reply = read_reply(text, PYTHON)
    assert reply.cut is not None and reply.kind(True) == "cut"


# ---------------------------------------------------------------- the one rule

@pytest.mark.parametrize("text,kind", [
    ("```python\nprint(1)\n```\nANSWER: [1]", "answer"),          # an ANSWER line wins: code not run
    ("ANSWER: [1]\n```python\nprint(1)\n", "answer"),             # committed before the cut
    ("```python\nprint(1)\n```", "code"),
    ("```python\nprint(1)\n```\n```javascript\nx\n```", "code"),
    ("```javascript\nconsole.log(1)\n```", "foreign"),
    ("```python\nprint(1)\n", "cut"),
    ("```python\n# ANSWER: [1]\n```", "code"),                    # a comment is not an ANSWER line
    ("The answer is 1.", "final"),
    ("```json\n[1]\n```", "final"),                               # an output block is prose
    ("", "final"),
    ("<think>```python\nprint(1)\n```</think>Done.", "final"),    # code inside think is not run
])
def test_every_reply_is_read_by_one_rule(text, kind):
    assert read_reply(text, PYTHON).kind(reads_answers=True) == kind


def test_an_answer_family_and_a_code_family_read_the_same_reply_alike():
    text = "```python\nprint(1)\n```\nFinal answer: see above"
    assert read_reply(text, PYTHON).kind(reads_answers=True) == "answer"
    assert read_reply(text, PYTHON).kind(reads_answers=False) == "code"  # CompGeom reads no ANSWER line


def test_detail_says_what_was_read():
    reply = read_reply("```py\nx = 1\n```\n```javascript\ny\n```\nANSWER: [1]", PYTHON)
    text = reply.describe(True)
    assert "ANSWER '[1]'" in text and "```py block" in text and "```javascript block" in text


# ---------------------------------------------------------------- ANSWER values

@pytest.mark.parametrize("raw,value", [
    ("\u221257", "-57"), ("\u2013 7", "- 7"), ("\uff15\uff17", "57"), ("[1,\u00a02]", "[1, 2]"),
    ("\u201c0x2a\u201d", '"0x2a"'), ("1.5 \u00d7 10^3", "1.5e3"), ("2\\times 10^{-3}", "2e-3"),
    ("3\u00b710\u207b\u00b2", "3e-2"), ("1\u20443", "1/3"), ("[1,\u200b2]", "[1,2]"),
])
def test_notation_models_print_reads_as_ascii(raw, value):
    assert normalise_notation(raw) == value


def test_only_the_answer_value_is_normalised_not_prose_or_code():
    text = "Prose \u2212 stays.\n```python\ns = '\u2212'\n```\nANSWER: \u22121"
    reply = read_reply(text, PYTHON)
    assert reply.answers == ("-1",) and reply.code.code == "s = '\u2212'\n" and "\u2212" in reply.text


_PROSE = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=120).filter(
    lambda s: not any(is_answer_line(line) or "```" in line or "~~~" in line for line in split_lines(s))
    and "think" not in s.lower())


@settings(max_examples=150, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(before=_PROSE, after=_PROSE)
def test_any_unicode_prose_around_a_correct_answer_still_scores(before, after):
    response = f"{before}\n\nANSWER: -57\n\n{after}"
    assert linalg.grade(DET, response).verdict == "correct"


@settings(max_examples=100, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(before=_PROSE, after=_PROSE)
def test_any_unicode_prose_around_a_correct_csapp_answer_still_reads_it(before, after):
    key = CSAPP["int-unsigned-minus-one"].answer
    values = find_answers(f"{before}\n\nANSWER: {json.dumps(key)}\n\n{after}")
    assert values == [json.dumps(key)] and answer_matches(key, csapp.read_answer_value(values[0]))


@given(st.integers(-10**12, 10**12))
def test_unicode_minus_and_full_width_digits_spell_the_same_integer(n):
    fancy = str(n).replace("-", "\u2212").translate({ord(d): chr(0xFF10 + int(d)) for d in "0123456789"})
    assert linalg.parse.parse_value(normalise_notation(fancy)).value == n


# ---------------------------------------------------------------- CsappExact number spelling

@given(st.floats(allow_nan=False, allow_infinity=False))
def test_any_decimal_spelling_of_a_float_key_passes(x):
    for spelling in (repr(x), f"{x:.17g}", f"{x:.17e}"):
        assert answer_matches([x], csapp.read_answer_value(f"[{spelling}]"))


@given(st.integers(-2**53, 2**53))
def test_an_integral_float_key_takes_an_int_and_an_int_key_takes_its_float(n):
    assert answer_matches([float(n)], csapp.read_answer_value(f"[{n}]"))
    assert answer_matches([n], csapp.read_answer_value(f"[{n}.0]"))
    assert not answer_matches([n], csapp.read_answer_value(f"[{n}.5]"))


@given(st.floats(allow_nan=False, allow_infinity=False, max_value=1e308).filter(lambda x: x != 0))
def test_a_neighbouring_double_never_passes(x):
    neighbour = math.nextafter(x, math.inf)
    assert not answer_matches([x], csapp.read_answer_value(f"[{neighbour!r}]"))


def test_zero_is_not_negative_zero_either_way():
    assert answer_matches([-0.0], csapp.read_answer_value("[-0]"))
    assert answer_matches([-0.0], csapp.read_answer_value("[-0.0]"))
    assert not answer_matches([-0.0], csapp.read_answer_value("[0]"))
    assert not answer_matches([0.0], csapp.read_answer_value("[-0.0]"))
    assert answer_matches([0.0], csapp.read_answer_value("[0]"))


def test_nan_matches_by_bits_as_before():
    assert answer_matches([math.nan], csapp.read_answer_value("[NaN]"))
    assert not answer_matches([math.nan], csapp.read_answer_value("[0]"))


@given(st.integers(0, 2**64))
def test_bools_and_hex_strings_never_equal_numbers(n):
    assert not answer_matches([n], [hex(n)]) and not answer_matches([hex(n)], [n])
    assert not answer_matches([hex(n)], csapp.read_answer_value(f"[{n}]"))
    if n in (0, 1):
        assert not answer_matches([n], [bool(n)]) and not answer_matches([bool(n)], [n])
        assert not answer_matches([float(n)], [bool(n)])


def test_python_list_display_reads_but_an_unquoted_hex_int_does_not():
    assert csapp.read_answer_value("[4294967295, '0xffffffff', True]") == [4294967295, "0xffffffff", True]
    with pytest.raises(ValueError):
        csapp.read_answer_value("[0xffffffff]")
    with pytest.raises(ValueError):
        csapp.read_answer_value("[1 + 2]")


def test_overflowing_or_underflowing_decimals_are_not_infinity_or_zero():
    assert not answer_matches([math.inf], [Decimal("1e400")])
    assert not answer_matches([0.0], [Decimal("1e-400")])


def test_no_executed_distractor_matches_its_key_by_value():
    for task in CSAPP.values():
        for wrong in task.distractors:
            assert not answer_matches(task.answer, wrong), task.task_id
            assert not answer_matches(task.answer, json.loads(json.dumps(wrong), parse_float=Decimal))


def test_stored_values_still_compare_by_type():
    assert not exact_equal([3], [3.0])  # a record is not an answer: the builder keeps types apart


# ---------------------------------------------------------------- spaces

def test_the_charset_carries_the_unicode_tools_print():
    for ch in "\u2018\u2019\u2212\u00d7\u00e9\u03bb\u2264\u2500\u00a0\u3001\uff15\ufffd":
        assert ch in CHARSET
    for ch in "\x00\x1b\x7f\u200b\u202e\U0001f600":
        assert ch not in CHARSET
    assert len(CHARSET) == len(set(CHARSET))


def test_observations_keep_unicode_as_text_and_escape_what_the_space_lacks():
    space = text_space(1000)
    observation = to_observation("caf\u00e9 \u2018x\u2019 \x1b[0m \U0001f600", 1000)
    assert observation == "caf\u00e9 \u2018x\u2019 \\x1b[0m \\U0001f600" and space.contains(observation)


def test_space_repr_is_short():
    assert len(repr(text_space(10))) < 100


# ---------------------------------------------------------------- through the envs

def test_linalg_final_reply_with_code_and_answer_is_graded_by_the_answer_line():
    env = gym.make("LinearAlgebra-v0", max_turns=1)
    try:
        env.reset(options={"task_id": DET.problem_id})
        _, reward, terminated, _, info = env.step("```python\nprint(5*-6 - 27)\n```\n\nANSWER: \u221257")
        assert (reward, terminated) == (1.0, True) and "its code was not run" in info["detail"]
    finally:
        env.close()


def test_linalg_code_without_answer_on_the_last_turn_says_why_it_is_a_format_error():
    env = gym.make("LinearAlgebra-v0")
    try:
        env.reset(options={"task_id": DET.problem_id})
        _, reward, _, _, info = env.step("```python\nprint(-57)\n```")
        assert reward == 0.0 and info["verdict"] == "format_error"
        assert "not run on the last turn" in info["detail"] and "```python block" in info["detail"]
    finally:
        env.close()


def test_single_turn_prompts_promise_no_tool_turns():
    for env_id in ("LinearAlgebra-v0",):
        env = gym.make(env_id, max_turns=1)
        prompt, _ = env.reset(seed=0)
        assert "turns" not in prompt.lower() and "run python" not in prompt.lower()
        env.close()


@pytest.mark.docker
@pytest.mark.parametrize("env_id", ["CsappExact-v0", "CompGeomPython-v0"])
def test_single_turn_prompts_of_code_families_promise_no_tool_turns(env_id, docker_available):
    env = gym.make(env_id, max_turns=1)
    try:
        prompt, _ = env.reset(seed=0)
        assert "only reply" in prompt and "You have" not in prompt and "To test" not in prompt
    finally:
        env.close()


@pytest.fixture
def csapp_env(docker_available):
    env = gym.make("CsappExact-v0")
    yield env
    env.close()


@pytest.mark.docker
def test_cut_off_code_runs_nothing_is_told_and_the_turn_counts(csapp_env):
    csapp_env.reset(seed=0)
    observation, reward, terminated, truncated, info = csapp_env.step("Let me compute:\n```python\nx = 1\nprint(x")
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert "cut off" in observation and "nothing ran" in observation and "turn 1 of 5" in observation
    assert "unclosed ```python fence" in info["detail"] and info["turn"] == 1


@pytest.mark.docker
def test_a_block_in_another_language_is_reported_not_final(csapp_env):
    csapp_env.reset(seed=0)
    observation, reward, terminated, *_ = csapp_env.step("```javascript\nconsole.log(-1 >>> 0)\n```")
    assert (reward, terminated) == (0.0, False)
    assert "not run: the ```javascript block" in observation and "```python" in observation


@pytest.mark.docker
def test_empty_reply_falls_back_to_result(csapp_env):
    task = CSAPP["int-unsigned-minus-one"]
    csapp_env.reset(options={"task_id": task.task_id})
    csapp_env.step(f"```python\n{csapp.reference_code(task)}```")
    _, reward, terminated, _, info = csapp_env.step("")
    assert (reward, terminated, info["verdict"]) == (1.0, True, "correct")


@pytest.mark.docker
@pytest.mark.parametrize("max_turns", [1, 5])
def test_code_then_a_correct_answer_line_scores(max_turns, docker_available):
    env = gym.make("CsappExact-v0", max_turns=max_turns)
    try:
        env.reset(options={"task_id": "float-sum-not-associative"})
        reply = "```python\nprint((1e16 + 1) - 1e16)\n```\nSo the second sum is 0.\n\nANSWER: [3, 0, true]"
        _, reward, terminated, _, info = env.step(reply)
        assert (reward, terminated) == (1.0, True), info["detail"]
    finally:
        env.close()


@pytest.mark.docker
def test_tracebacks_show_only_the_agents_frames(csapp_env):
    csapp_env.reset(seed=0)
    observation, *_ = csapp_env.step("```python\ndef f():\n    return 1 / 0\n\nf()\n```")
    assert "ZeroDivisionError" in observation and "return 1 / 0" in observation
    assert "supervisor" not in observation and "_session_worker" not in observation
    observation, *_ = csapp_env.step("```python\nprint(1\n```")
    assert "SyntaxError" in observation and "supervisor" not in observation


@pytest.mark.docker
def test_crlf_code_runs(csapp_env):
    csapp_env.reset(seed=0)
    observation, *_ = csapp_env.step("```python\r\nfor i in range(2):\r\n    print('\u2212', i)\r\n```")
    assert observation.startswith("\u2212 0\n\u2212 1")


UNICODE_PRINT = "```python\nprint('caf\\u00e9 \\u2713 \\u2018q\\u2019 \\U0001f600')\n```"


@pytest.mark.docker
@pytest.mark.parametrize("mode,kwargs", [("sync", {}), ("async", {"shared_memory": True}),
                                         ("async", {"shared_memory": False}), ("vector_entry_point", {})],
                         ids=["sync", "async-shared-memory", "async-pipes", "vector_entry_point"])
def test_unicode_tool_output_survives_every_vectorisation_mode(mode, kwargs, docker_available):
    envs = gym.make_vec("CsappExact-v0", num_envs=2, vectorization_mode=mode, vector_kwargs=kwargs)
    try:
        envs.reset(seed=[0, 1])
        observations, *_ = envs.step([UNICODE_PRINT] * 2)
        assert all(obs.startswith("caf\u00e9 \u2713 \u2018q\u2019 \\U0001f600\n") for obs in observations), observations
        observations, *_ = envs.step(["```python\nprint('\u2212' * 3)\n```"] * 2)
        assert all(obs.startswith("\u2212\u2212\u2212\n") for obs in observations), observations
    finally:
        envs.close()

"""No reply can crash, stall or mis-grade a step: replies generated from a grammar, not a list.

The grammar composes what models write and what a hostile policy could: ANSWER lines under every
label (``ANSWER:``, ``Answer:``, ``**Final Answer:**``, a label with no value), values (numbers of
every spelling and size, ``inf``/``Infinity``, ``1e99999...``, fractions, nested lists, LaTeX,
expression chains, ``^T``), fences of every label (closed, cut, nested), ``<think>`` (closed,
unclosed, stray), chat-template tokens, invisible characters, emoji, lone surrogates, CRLF, and
repetition up to the action cap. Every reply is stepped through every family's env (the paths
that stay on the host: a one-turn code reply of CsappExact or CompGeom runs in the sandbox and is
only read), through ``grade_completion`` (the path TRL, verl and SkyRL use) and ``render``:

- nothing raises, and the verdict is one of ``Verdict`` (never ``scoring_error``);
- the reward is 1.0 only when the generator put the key on an answer line;
- ``render()`` and every code block the sandbox would get encode as UTF-8;
- work grows linearly: the host work of a shape repeated to cap/4 and to the cap is compared
  (best of three CPU timings; 4x for linear work, 16x for quadratic; the bound is a generous
  ``GROWTH_BOUND``, with a floor for timings too small to compare). No absolute time is asserted;
  ``benchmarks/reply_parsing.py`` measures the seconds.

And one property in the other direction: a reply holding one uppercase ANSWER line with the key,
amid the noise models write (prose, lenient ``Answer:`` lines, labels with no value, code, think
blocks, invisible characters, emoji and end-of-turn tokens on the value), always scores 1.0.

Seeded (``derandomize``) so the fast tier is the same run every time; ``*_long`` tests are the
longer profile (marked slow: ``make test`` runs them, ``make test-fast`` does not).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from fractions import Fraction

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.actions import MAX_ACTION_CHARS, read_reply
from gym_sysmath.answers import strip_end_tokens
from gym_sysmath.integrations.episodes import TaskRef, grade_completion
from gym_sysmath.verdicts import Verdict

CAP = MAX_ACTION_CHARS
VERDICTS = frozenset(verdict.value for verdict in Verdict) - {Verdict.SCORING_ERROR.value}
#: t(cap) / t(cap/4): 4 for linear work, 16 for quadratic; generous for a loaded 2-core machine.
GROWTH_BOUND = 9.0
#: Below this many CPU seconds at the cap a timing is noise, not growth.
GROWTH_FLOOR_S = 0.05

_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
           HealthCheck.large_base_example, HealthCheck.function_scoped_fixture]
FAST = settings(max_examples=120, deadline=None, derandomize=True, database=None, suppress_health_check=_CHECKS)
LONG = settings(max_examples=1500, deadline=None, derandomize=True, database=None, suppress_health_check=_CHECKS)
FAST_GROWTH = settings(FAST, max_examples=6)
LONG_GROWTH = settings(LONG, max_examples=60)

# ------------------------------------------------------------------ the tasks and their keys

LINALG_SCALAR = ("LinearAlgebra-v0", "eval/determinant/easy/0")  # key -57
LINALG_VECTOR = ("LinearAlgebra-v0", "eval/matvec/easy/0")  # key [81, -26]
CSAPP = ("CsappExact-v0", "float-overflow-to-infinity")  # key [inf, True, 1.2000000021991023e+39]
TASKS = (LINALG_SCALAR, LINALG_VECTOR, CSAPP, ("CompGeom-v0", None))

#: Spellings of each key a model may write, every one of which must read as the key.
KEY_SPELLINGS: dict[tuple[str, str | None], list[str]] = {
    LINALG_SCALAR: ["-57", "\u221257", "**-57**", "$-57$", "\\boxed{-57}", "$\\boxed{-57}$", "-114/2",
                    "(5)(-6) - (-9)(-3) = -57", "det(A) = -57", "-57 \u2705", "-57<|im_end|>", '"-57"',
                    "\uff0d\uff15\uff17", "-57.0", "-5\u200b7", "-57 \U0001f389"],
    LINALG_VECTOR: ["[81, -26]", "(81, -26)", "[81 -26]", "(81, -26)^T", "[81, -26]^T", '["162/2", "-26/1"]',
                    "\\begin{pmatrix} 81 \\\\ -26 \\end{pmatrix}", "A x = [81, -26]", "[81, \u221226] \u2705",
                    "[81, -26]<|eot_id|>", "[162/2, -26]"],
    CSAPP: ["[Infinity, true, 1.2000000021991023e+39]", "[inf, True, 1.2000000021991023e+39]",
            "[float('inf'), True, 1.2000000021991023e39]", "`[Infinity, true, 1.2000000021991023e+39]`",
            "[Infinity, true, 1.2000000021991023e+39]</s>", "[inf, True, 1.2000000021991023e+39] \u2705",
            "result = [inf, True, 1.2000000021991023e+39]",
            "[Infinity, true, 1.2000000021991023e+39]<\uff5cend\u2581of\u2581sentence\uff5c>"],
}
_KEY_NUMBERS = {-57.0, 81.0, -26.0, 1.2000000021991023e+39}

# ------------------------------------------------------------------ the grammar


def _not_a_key_number(spelling: str) -> str:
    """A random number must not be a key's by chance (the oracle says 1.0 only for the key)."""
    text = spelling.replace("\u2212", "-").replace(" ", "")
    try:
        if "/" in text:
            numerator, denominator = text.split("/")
            value = float(Fraction(int(numerator), int(denominator))) if len(text) < 24 else math.nan
        else:
            value = float(text)
    except (ValueError, ZeroDivisionError, OverflowError):
        return spelling
    return spelling + "1" if value in _KEY_NUMBERS else spelling


_SPECIAL_NUMBERS = ["Infinity", "-Infinity", "NaN", "inf", "-inf", "nan", "+inf", "float('nan')", "math.inf",
                    "1e99999999999999999999999999999", "-1e-99999999999999999999", "1e308", "1e309", "-0",
                    "-0.0", "0x2a", "0b101", "1_000", "\uff11\uff12", "\u22125", "3 \u00d7 10^5", "2.5 \\times 10^{3}",
                    "\\frac{1}{3}", "\\dfrac{-7}{3}", "1/0", "0/0", "1.5/2", "1,234", ".5", "5.", "1e", "--1",
                    "1e-400", "4294967295", "9007199254740993", "1.0000000000000002", "2**64"]
numbers = st.one_of(
    st.integers(-(10**40), 10**40).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: format(f, ".17e")),
    st.tuples(st.integers(-999, 999), st.integers(-99, 99)).map(lambda t: f"{t[0]}/{t[1]}"),
    st.integers(1, 6000).map(lambda n: "9" * n),
    st.integers(1, 400).map(lambda n: "1e" + "9" * n),
    st.sampled_from(_SPECIAL_NUMBERS),
).map(_not_a_key_number)
lone_surrogates = st.integers(0xD800, 0xDFFF).map(chr)
invisibles = st.sampled_from(["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u200e", "\u202e"])
end_tokens = st.sampled_from(["<|im_end|>", "<|eot_id|>", "</s>", "<|end|>", "<|endoftext|>", "<eos>",
                              "<end_of_turn>", "<\uff5cend\u2581of\u2581sentence\uff5c>", "<|im_start|>assistant"])
emoji = st.sampled_from(["\u2705", "\U0001f389", "\u2714\ufe0f", "\U0001f44d\U0001f3fd", "1\ufe0f\u20e3", "\u00b0"])
unicode_text = st.text(st.characters(codec=None), max_size=40)
strings = st.one_of(st.text(max_size=12).map(json.dumps), st.text(max_size=8).map(repr),
                    st.sampled_from(["'0x2a'", '"3/4"', "'1/2'", '"a=b"', "'it''s'", '"\\ud83d"', "'''x'''", '"']))
scalars = st.one_of(numbers, strings, st.sampled_from(["true", "false", "True", "False", "None", "null", "yes", "x"]))


def _bracketed(items: list[str], style: int) -> str:
    opener, closer, separator = [("[", "]", ", "), ("(", ")", ", "), ("[", "]", " "), ("[", "]", "; "),
                                 ("[", "", ", "), ("", "]", ","), ("{", "}", ", ")][style]
    return opener + separator.join(items) + closer


values = st.recursive(
    scalars,
    lambda inner: st.builds(_bracketed, st.lists(inner, max_size=6), st.integers(0, 6)),
    max_leaves=24,
)


def _decorate(value: str, how: int) -> str:
    return [value, f"**{value}**", f"${value}$", f"\\boxed{{{value}}}", f"`{value}`", f'"{value}"', f"{value}.",
            f"{value}^T", f"(1)(2) = {value}", f"x = {value}", f"\\({value}\\)", f"$$\n{value}\n$$",
            f"{value}\n{value}"][how]


decorated_values = st.builds(_decorate, values, st.integers(0, 12))
labels = st.sampled_from(["ANSWER:", "**ANSWER:**", "ANSWER\uff1a", "### ANSWER:", "> ANSWER:", "- ANSWER:",
                          "FINAL ANSWER:", "Answer:", "answer:", "Final Answer:", "Final answer:",
                          "**Final Answer:**", "### Final Answer:", "- **Answer**:", "**Answer:**", "ANSWER", ""])
fence_labels = st.sampled_from(["", "python", "py", "cpp", "c++20", "rust", "rs", "json", "text", "javascript",
                                "{.python}", "candidate.hpp", "python title=\"x.py\""])


@st.composite
def lines(draw: st.DrawFn, key: str | None = None) -> str:
    """One line (or a few) of a reply."""
    kind = draw(st.integers(0, 17))
    if kind <= 3:
        return f"{draw(labels)} {draw(decorated_values)}"
    if kind == 4:
        return draw(labels)  # a label with no value
    if kind == 5:
        return draw(st.sampled_from(["```", "~~~", "````"])) + draw(fence_labels)
    if kind == 6:
        return draw(st.sampled_from(["```", "~~~", "````", "    ```", "x = 1```", "```\u200b"]))
    if kind == 7:
        return draw(st.sampled_from(["<think>", "</think>", "<thinking>", "</thinking>", "<THINK >"]))
    if kind == 8:
        return draw(unicode_text)
    if kind == 9:
        return draw(end_tokens)
    if kind == 10:
        return draw(invisibles) + draw(labels) + " " + draw(decorated_values) + draw(invisibles)
    if kind == 11:
        return f"{draw(labels)} {draw(decorated_values)} {draw(emoji)}{draw(end_tokens)}"
    if kind == 12:
        return draw(lone_surrogates) + draw(unicode_text) + draw(lone_surrogates)
    if kind == 13:
        return "\\begin{pmatrix}" + draw(st.sampled_from(["1 & 2", "1 \\\\ 2", ""])) + draw(
            st.sampled_from(["\\end{pmatrix}", "", "\\end{bmatrix}"]))
    if kind == 14:
        return "# ANSWER: " + draw(decorated_values)  # a code comment, read only outside code
    if kind == 15:
        return draw(st.sampled_from(["Let me compute.", "So the answer: 12 I think", "Answer: (a) yes",
                                     "**Step 1.**", "$$", "\\[", "\\]", "[", "]", "((", "= -57 =", "1 2; 3 4"]))
    if kind == 16 and key is not None:
        return f"{draw(labels)} {key}"
    return ""


@st.composite
def replies(draw: st.DrawFn, keys: list[str] | None = None) -> tuple[str, bool]:
    """``(reply, whether a key spelling was put on a line)``."""
    key = draw(st.sampled_from(keys)) if keys and draw(st.booleans()) else None
    body = draw(st.lists(lines(key), min_size=0, max_size=14))
    if draw(st.integers(0, 4)) == 0:  # repetition, up to the cap
        unit = "\n".join(draw(st.lists(lines(key), min_size=1, max_size=3))) + "\n"
        body.append(unit * draw(st.integers(1, CAP // max(1, len(unit)))))
    text = draw(st.sampled_from(["\n", "\r\n", "\r"])).join(body)
    return text[:CAP], key is not None and key in text


# ------------------------------------------------------------------ the checks


@pytest.fixture(scope="module")
def envs():
    made = {(env_id, task_id): gym.make(env_id, max_turns=1, render_mode="ansi") for env_id, task_id in TASKS}
    yield made
    for env in made.values():
        env.close()


def _reset(env: gym.Env, task_id: str | None) -> None:
    env.reset(seed=0, options={"task_id": task_id} if task_id else None)


def _on_host(env: gym.Env, text: str) -> bool:
    """Whether a one-turn step of ``text`` stays on the host (a code reply runs in the sandbox)."""
    core = env.unwrapped
    return read_reply(text, core._languages()).kind(core.reads_answers) != "code"


def check_reply(envs, text: str, key_inserted: bool) -> None:
    for (env_id, task_id), env in envs.items():
        _reset(env, task_id)
        reply = read_reply(text, env.unwrapped._languages())
        for block in (*reply.blocks, *([reply.cut] if reply.cut else [])):
            block.code.encode("utf-8")  # what a sandbox would get is always text
        if not _on_host(env, text):
            continue
        _, reward, terminated, truncated, info = env.step(text)
        assert info["verdict"] in VERDICTS, (env_id, info)
        assert terminated and not truncated
        assert reward in (0.0, 1.0)
        assert reward == 0.0 or key_inserted, (env_id, text[:300], info["detail"])
        env.render().encode("utf-8")
        if task_id is not None and len(text) < 4096:  # the trainers' path, one env per call
            reward_tc, info_tc = grade_completion(TaskRef(env_id, task_id, max_turns=1), text)
            assert (reward_tc, info_tc["verdict"]) == (reward, info["verdict"])


def host_work(envs) -> Callable[[str], None]:
    """Everything a step does on the host with a reply, for the growth check."""
    linalg, csapp = envs[LINALG_SCALAR], envs[CSAPP]

    def run(text: str) -> None:
        strip_end_tokens(text)
        for env in (linalg, csapp):
            env.reset(seed=0)
            if _on_host(env, text):
                env.step(text)
                env.render()

    return run


def cpu(run: Callable[[], object]) -> float:
    best = math.inf
    for _ in range(3):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


def fill(head: str, unit: str, tail: str, size: int) -> str:
    return head + unit * max(1, (size - len(head) - len(tail)) // max(1, len(unit))) + tail


FRAMES = [("", ""), ("```\nANSWER: [\n", "```\n"), ("ANSWER: [", "'a']"), ("<think>", ""), ("```python\n", ""),
          ("ANSWER: ", ""), ("ANSWER: 5", "x<|im_end|>"), ("~~~\n", "~~~\n"), ("ANSWER:\n", "")]


def check_growth(envs, frame: int, unit: str) -> None:
    head, tail = FRAMES[frame]
    unit = unit or "x\n"
    small, large = fill(head, unit, tail, CAP // 4)[:CAP], fill(head, unit, tail, CAP)[:CAP]
    run = host_work(envs)
    t_small, t_large = cpu(lambda: run(small)), cpu(lambda: run(large))
    assert t_large <= max(GROWTH_BOUND * t_small, GROWTH_FLOOR_S), (
        f"host work grew {t_large / max(t_small, 1e-9):.1f}x from {len(small)} to {len(large)} characters "
        f"({t_small:.3f} s -> {t_large:.3f} s): frame {FRAMES[frame]!r}, unit {unit[:80]!r}")


units = st.lists(lines(), min_size=1, max_size=3).map(lambda parts: "\n".join(parts) + "\n").filter(
    lambda unit: 0 < len(unit) <= 400)

ALL_KEYS = [spelling for spellings in KEY_SPELLINGS.values() for spelling in spellings]

# ------------------------------------------------------------------ fast tier


@FAST
@given(replies(ALL_KEYS))
@example(("```\nANSWER: [\n" + "1,\n" * 10_000 + "```\n", False))
@example(("ANSWER: [[1.5]]", False))
@example(("ANSWER: [1e99999999999999999999999999999]", False))
@example(("ANSWER: [" + "1," * 9_000 + "'a']", False))
@example(("x\ud83d\n```cpp\nint main() { return 0; } // \ud83d\n```\nANSWER: \ud83d", False))
def test_fuzzed_replies_step_render_and_grade_without_raising(envs, generated):
    check_reply(envs, *generated)


class _UnprintableAction:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


NON_STRING_ACTIONS = st.one_of(
    st.integers(), st.builds(lambda digits: 10 ** digits, st.integers(4_000, 6_000)),  # past int's str limit
    st.floats(), st.none(), st.booleans(), st.binary(max_size=50), st.lists(st.text(max_size=5), max_size=4),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3), st.tuples(st.integers()),
    st.builds(_UnprintableAction))


@FAST
@given(NON_STRING_ACTIONS)
def test_a_non_string_action_is_a_format_error_never_an_exception(envs, action):
    """Whatever a policy hands ``step`` that is not a string (an int ``repr`` refuses, an object
    whose ``__repr__`` raises): a format error on every family, and the episode renders."""
    for (_env_id, task_id), env in envs.items():
        _reset(env, task_id)
        _, reward, terminated, truncated, info = env.step(action)
        assert (reward, terminated, truncated, info["verdict"]) == (0.0, True, False, Verdict.FORMAT_ERROR.value)
        assert isinstance(env.render(), str)


@FAST_GROWTH
@given(st.integers(0, len(FRAMES) - 1), units)
@example(1, "1,\n")
@example(2, "1,")
@example(6, " ")
def test_host_work_grows_linearly_with_the_reply(envs, frame, unit):
    check_growth(envs, frame, unit)


def _noise_line(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 7))
    if kind == 0:
        return draw(st.text(st.characters(codec=None, exclude_characters="`~<>\r\n\x1c\x1d\x1e\x85\u2028\u2029"),
                            max_size=60).filter(lambda s: "ANSWER" not in s.upper()))
    if kind == 1:
        return draw(st.sampled_from(["Answer: (a) the first part is 12.", "Answer: yes, it is.", "Final answer:",
                                     "**Final Answer:**", "### Final Answer:", "Final Answer: see below",
                                     "**Answer:**", "Q: what is x? Answer: 3"]))
    if kind == 2:
        return "<think>" + draw(st.sampled_from(["ANSWER: 1", "ANSWER: [0]", "hmm\n```python\n"])) + "</think>"
    if kind == 3:
        return "```" + draw(st.sampled_from(["python", "cpp", "", "text"])) + "\n# ANSWER: 3\nprint(2)\n```"
    if kind == 4:
        return draw(invisibles) + draw(lone_surrogates) + draw(emoji)
    if kind == 5:
        return "$$ (5)(-6) - (-9)(-3) = -57 $$"
    if kind == 6:
        return ""
    return draw(st.sampled_from(["Let me think step by step.", "1. First,", "| a | b |", "---", "* * *"]))


@st.composite
def keyed_replies(draw: st.DrawFn) -> tuple[tuple[str, str | None], str]:
    task = draw(st.sampled_from([LINALG_SCALAR, LINALG_VECTOR, CSAPP]))
    before = [_noise_line(draw) for _ in range(draw(st.integers(0, 6)))]
    after = [_noise_line(draw) for _ in range(draw(st.integers(0, 3)))]
    key_line = (draw(st.sampled_from(["", "**Final Answer:**\n", "### Final Answer:\n\n", "Final answer:\n"]))
                + draw(st.sampled_from(["", "\ufeff", "\u200b", "\u2060"]))
                + draw(st.sampled_from(["ANSWER: ", "**ANSWER:** ", "ANSWER:\n"]))
                + draw(st.sampled_from(KEY_SPELLINGS[task]))
                + draw(st.sampled_from(["", " \u2705", "<|im_end|>", "</s>", "<|eot_id|>", "  "])))
    return task, draw(st.sampled_from(["\n", "\r\n"])).join([*before, key_line, *after])


@FAST
@given(keyed_replies())
def test_one_uppercase_key_line_amid_model_noise_scores_one(envs, generated):
    (env_id, task_id), text = generated
    env = envs[env_id, task_id]
    _reset(env, task_id)
    _, reward, _, _, info = env.step(text)
    assert reward == 1.0, (text, info["detail"])


@pytest.fixture(scope="module")
def tool_envs():
    """The same tasks with ``code_via="tool"`` (TRL's run_code prompts): every reply is final."""
    made = {(env_id, task_id): gym.make(env_id, max_turns=3, code_via="tool") for env_id, task_id in TASKS}
    yield made
    for env in made.values():
        env.close()


@FAST
@given(st.one_of(replies(ALL_KEYS), keyed_replies().map(lambda generated: (generated[1], True))))
def test_a_tool_mode_reply_is_graded_as_the_family_grades_a_last_turn(envs, tool_envs, generated):
    """Tool mode's rule, against the one-turn env as oracle: any reply sent to ``step`` is final
    and gets exactly the reward and verdict the family gives a last turn, on every task."""
    text, _ = generated
    for key, fence in envs.items():
        tool = tool_envs[key]
        _reset(fence, key[1])
        _reset(tool, key[1])
        if not _on_host(fence, text):
            continue
        _, reward, terminated, _, info = fence.step(text)
        _, tool_reward, tool_terminated, _, tool_info = tool.step(text)
        assert (tool_reward, tool_info["verdict"], tool_terminated) == (reward, info["verdict"], terminated), key


# ------------------------------------------------------------------ the longer profile (`make test`)


@pytest.mark.slow
@LONG
@given(replies(ALL_KEYS))
def test_fuzzed_replies_step_render_and_grade_without_raising_long(envs, generated):
    check_reply(envs, *generated)


@pytest.mark.slow
@LONG_GROWTH
@given(st.integers(0, len(FRAMES) - 1), units)
def test_host_work_grows_linearly_with_the_reply_long(envs, frame, unit):
    check_growth(envs, frame, unit)


@pytest.mark.slow
@LONG
@given(keyed_replies())
def test_one_uppercase_key_line_amid_model_noise_scores_one_long(envs, generated):
    (env_id, task_id), text = generated
    env = envs[env_id, task_id]
    _reset(env, task_id)
    _, reward, _, _, info = env.step(text)
    assert reward == 1.0, (text, info["detail"])

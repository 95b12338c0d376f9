"""CsappExact-v0: machine-level systems questions with exact, typed grading."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from gym_sysmath.actions import Reply
from gym_sysmath.answers import choose_answer, unwrap
from gym_sysmath.env import SysmathEnv, Task, ToolTurn
from gym_sysmath.exact import answer_matches, exact_equal, is_json_primitive_list
from gym_sysmath.filters import TaskFilter
from gym_sysmath.sandbox import Limits
from gym_sysmath.task_sets import TaskSet, from_file, installed
from gym_sysmath.tasks import csapp
from gym_sysmath.tasks.csapp.taskfile import read_task_text
from gym_sysmath.verdicts import Grade, Verdict

#: What reading an ANSWER value may raise on hostile text; each is "not a value", never an error.
_UNREADABLE = (ValueError, TypeError, ArithmeticError, RecursionError, MemoryError)
#: Python's spellings of the special floats, read as their JSON twins (``inf`` is ``Infinity``).
_SPECIAL_FLOAT = re.compile(
    r"(?P<sign>[+-]?)\s*+(?:(?:(?:math|np|numpy)\s*+\.\s*+)?(?P<word>inf|infinity|nan)"
    r"|float\(\s*+(?P<q>['\"])(?P<inner>[+-]?(?:inf|infinity|nan))(?P=q)\s*+\))",
    re.IGNORECASE,
)
_TRIPLE_QUOTES = ("'" * 3, '"' * 3)


def _special_float(element: str) -> float | None:
    match = _SPECIAL_FLOAT.fullmatch(element)
    if match is None:
        return None
    word = (match["word"] or match["inner"]).lower()
    if "nan" in word:
        return math.nan  # NaN is NaN whatever its sign: Python prints both as nan
    negative = (match["sign"] == "-") != word.startswith("-")
    return -math.inf if negative else math.inf


def _display_elements(text: str) -> list[str] | None:
    """The elements of a flat Python list display ``[a, 'b', c]``, split at its top-level commas
    (string literals, escapes, triple quotes and comments respected); None when it is not one.
    One pass: O(len(text))."""
    if not (text.startswith("[") and text.endswith("]")):
        return None
    inner = text[1:-1]
    elements: list[str] = []
    pieces: list[str] = []  # the current element, comments left out
    start = i = depth = 0
    while i < len(inner):
        char = inner[i]
        if char in "'\"":
            quote = inner[i : i + 3] if inner[i : i + 3] in _TRIPLE_QUOTES else char
            i += len(quote)
            while i < len(inner) and not inner.startswith(quote, i):
                if inner[i] == "\n" and len(quote) == 1:
                    return None
                i += 2 if inner[i] == "\\" else 1
            if i >= len(inner):
                return None  # an unclosed string
            i += len(quote)
        elif char == "#":
            pieces.append(inner[start:i])
            end = inner.find("\n", i)
            i = start = end if end >= 0 else len(inner)
        elif char in "()":
            depth += 1 if char == "(" else -1  # float('inf'), (-1)
            i += 1
        elif char in "[]{}" or depth < 0:
            return None  # not flat (or not a list display at all)
        elif char == "," and depth == 0:
            elements.append("".join([*pieces, inner[start:i]]))
            pieces.clear()
            i = start = i + 1
        else:
            i += 1
    elements.append("".join([*pieces, inner[start:]]))
    if not elements[-1].strip() and len(elements) > 1:
        elements.pop()  # one trailing comma, as Python allows
    return elements


def _read_list(text: str) -> list:
    """The typed list an ANSWER value spells (``csapp.read_answer_value``'s rules), in time linear
    in its length: JSON is read whole; a Python list display element by element (so no element
    is re-read for each of the others), a special float spelled the Python way (``inf``,
    ``-inf``, ``nan``, ``float('inf')``, ``math.inf``) as its JSON twin. Raises ``ValueError``
    (or another of ``_UNREADABLE``) when it is not one."""
    try:
        shape = json.loads(text, parse_int=str, parse_float=str, parse_constant=str)
    except RecursionError:
        raise ValueError("the answer is nested too deeply to be an answer list") from None
    except ValueError:
        elements = _display_elements(text)
        if elements is None:
            raise ValueError("it is neither JSON nor a flat Python list display") from None
    else:
        if isinstance(shape, list) and any(isinstance(v, (list, dict)) for v in shape):
            raise ValueError("answer elements must be numbers, booleans or strings; found a nested list or object")
        return _read_value(text)
    values: list = []
    for element in elements:
        special = _special_float(element.strip())
        values.extend([special] if special is not None else _read_value(f"[{element}]"))
    if len(values) != len(elements):
        raise ValueError("an element of the list is not one number, boolean or string")
    return values


def _read_value(text: str) -> list:
    try:
        return csapp.read_answer_value(text)
    except ArithmeticError:
        raise ValueError("a number in it is out of range") from None


def _why_unreadable(raw: str) -> str:
    """Why the value ``raw`` is not an answer list, for ``info["detail"]``."""
    try:
        _read_list(unwrap(raw.strip().rstrip(".")))
    except _UNREADABLE as error:
        return (str(error) or type(error).__name__)[:200]
    return "it holds no answer list"


def _parse_or_none(raw: str) -> list | None:
    """The list on an ANSWER line (JSON, or a Python list display), after markdown wrappers
    (``**``, backticks, ``$``) and a closing period; None when it is not one. Never raises."""
    try:
        return _read_list(unwrap(raw.strip().rstrip(".")))
    except _UNREADABLE:
        return None


class CsappExactEnv(SysmathEnv):
    """Questions on machine-level number and memory representation, graded exactly.

    ## Description
    Each task asks about C integers (two's complement, overflow, unsigned conversion),
    IEEE-754 single and double precision, bit manipulation, struct layout, caches, x86-64
    assembly gcc emitted, or linking (strong, weak and common symbols, static, archives), in a
    place where the obvious answer is wrong. The eval tasks are original; every answer key was
    produced by running a reference implementation or, for assembly and linking, the real gcc
    and ld (at build time: the env only reads the recorded results). The agent may run Python
    for a few turns, like a programmer at a REPL, then answers. Its tool turns run Python without
    a C compiler, assembler or linker (the prompt says so), so a task keyed by what gcc or ld did
    cannot be answered by running them: the image's toolchain is unreadable to a session's uid.

    ## Action Space
    `Text` (see `gym_sysmath.spaces`); any `str` is accepted, Unicode included. The protocol,
    the same in every family (`gym_sysmath.actions`): a reply with an `ANSWER:` line outside
    code fences is final and graded by it (its code is not run); a reply with a complete
    ```python block (also ```py, ```python3, a bare fence) and no ANSWER line is a tool turn,
    run in a persistent sandboxed session (globals survive) whose output is the next
    observation; any other reply (an empty one too) is final and graded by the list the
    session holds in `result`. On the `max_turns`-th turn a reply without an ANSWER line has
    its python block run, then `result` is graded. A block in another language
    (```javascript) is reported, never run; a reply cut off inside an unclosed fence runs
    nothing and is told so (the turn counts). `info["detail"]` says what was read.

    ## Observation Space
    `Text`: the task prompt at reset, then the tool output (Unicode as text) and a status line
    per turn.

    ## Rewards
    1.0 only when the answer is the key: the same length, and element by element the same
    value of the same JSON type. A number is a number however it is spelled (`3`, `3.0` and
    `3e0` are the key `3.0`), floats by bit pattern (`0` is not `-0.0`; NaN by its bits);
    `true` is not `1`, `"0x2a"` is not `42`. A Python list display (`[1, '0x2a', True]`)
    reads as its JSON twin. Several different ANSWER values score 0. Otherwise 0.0.

    ## Starting State
    `reset(seed=..., options=...)` draws a task with the env's RNG; `options` may carry
    `task_id`, `categories` (`gym_sysmath.tasks.csapp.CATEGORIES`) or `difficulty` (easy,
    medium, hard: see `gym_sysmath.tasks.csapp.difficulty`; or `starter`, single operations on one
    small value, drawn only when asked for and only on the train split); `info["difficulty"]` is
    the task's level. `gym_sysmath.curriculum.Curriculum` raises the level as the success rate climbs.
    The filters (`categories`, `difficulty`) restrict everything alike: `task_ids`, `export`,
    `eval`, the draws of both splits and the `task_id`s reset accepts (one they exclude is a
    `ValueError` naming the filter). A filter given as a reset option narrows the env's own for
    that reset only and cannot widen it; a filter that leaves no eval task is a `ValueError`
    at `gym.make` (on the eval split).

    ## Episode End
    Terminated after a final action or the `max_turns`-th tool turn. Truncated, with
    `info["verdict"] == "scoring_error"`, when the sandbox harness fails.

    ## Arguments
    | name | type | default | meaning |
    | --- | --- | --- | --- |
    | `split` | `str` | `"eval"` | `"eval"` or `"train"` (below) |
    | `categories` | `Optional[Sequence[str]]` | `None` (all) | task categories to draw from |
    | `difficulty` | `Optional[str]` | `None` (standard) | `"starter"` (train only), `"easy"`, `"medium"`, `"hard"` |
    | `max_turns` | `Optional[int]` | `5` | replies per episode (the last must answer) |
    | `tasks_path` | `Optional[str]` | `None` | a task file to load instead of the shipped one |
    | `sandbox` | `str` | `"docker"` | `"docker"` or `"process"` |
    | `pool_size` | `Optional[int]` | `None` | cap on live containers (None: one per live env plus spares) |
    | `render_mode` | `Optional[str]` | `None` | `"ansi"`: the transcript as text |
    | `code_via` | `str` | `"fence"` | `"tool"`: code runs only through `run_code`, every reply is final |
    | `limits` | `Optional[Limits]` | 20 s wall per turn | limits of each tool turn |

    - `split`: `"eval"` (the fixed set, default) or `"train"` (fresh procedural variants; for
      assembly and linking, drawn from a pool compiled at build time).
    - `categories`: restrict tasks to these categories.
    - `difficulty`: restrict tasks to this level (a reset option may narrow, not widen, the filters).
    - `max_turns`: tool turns allowed (default 5).
    - `tasks_path`: a forked task file to load instead of the shipped one.
    - `code_via`: `"fence"` (a reply's ```python block is a tool turn) or `"tool"`, for trainers
      that offer function tools (TRL's `environment_factory`): the prompt describes a `run_code`
      tool, `env.unwrapped.run_code(code)` runs a tool turn (at most `max_turns - 1`), and every
      reply sent to `step` is final, graded as the last turn is.
    - `sandbox`: `"docker"` (default) or `"process"` (opt-in, weaker isolation).
    - `limits`: a `gym_sysmath.sandbox.Limits` for each tool turn (default: 20 s wall clock; the
      session's CPU is capped over its whole life).

    ## Version History
    - v0: 40 tasks in 5 categories (integers, floats, bits, memory, cache); then 81 in 10, adding
      machine, linking, processes, vm and concurrency, the 40 unchanged; difficulty levels; the
      opt-in `starter` level of the train split (5 single-operation templates).

    Examples:
        >>> import gymnasium as gym, gym_sysmath
        >>> env = gym.make("CsappExact-v0")
        >>> prompt, info = env.reset(seed=0)
    """

    family = "csapp"
    default_max_turns = 5
    filters = (TaskFilter("categories", "category", csapp.CATEGORIES),
               TaskFilter("difficulty", "difficulty", csapp.LEVELS, many=False, unset=csapp.STANDARD_LEVELS))

    def __init__(self, *, split: str = "eval", categories: tuple[str, ...] | list[str] | None = None,
                 max_turns: int | None = None, tasks_path: str | None = None, sandbox: str = "docker",
                 pool_size: int | None = None, limits: Limits | None = None,
                 render_mode: str | None = None, difficulty: str | None = None, code_via: str = "fence"):
        self._tasks = {task.task_id: task for task in csapp.load_tasks(tasks_path)}
        # a forked task file serves csapp@unversioned (its own hash), never the installed task set
        self._task_set = (installed(self.family) if tasks_path is None else
                          from_file(self.family, read_task_text(tasks_path)[0], read_task_text()[0]))
        self._current: csapp.CsappTask | None = None
        super().__init__(split=split, max_turns=max_turns, sandbox=sandbox, pool_size=pool_size,
                         limits=limits, render_mode=render_mode,
                         filters={"categories": categories, "difficulty": difficulty}, code_via=code_via)
        self.categories: tuple[str, ...] | None = self.applied_filters.get("categories")
        self.difficulty: str | None = self.applied_filters.get("difficulty", (None,))[0]

    @property
    def task_set(self) -> TaskSet:
        """The installed task set, or for a forked ``tasks_path`` ``csapp@unversioned`` with the file's hash."""
        return self._task_set

    def _eval_ids(self) -> tuple[str, ...]:
        return tuple(self._tasks)

    def _filter_value(self, task_id: str, key: str) -> str:
        task = self._tasks[task_id]
        return csapp.task_level(task) if key == "difficulty" else getattr(task, key)

    def _select_task(self, options: Mapping[str, Any]) -> Task:
        wanted = self._reset_filters(options)
        if self.split == "train" and "task_id" not in options:
            level = wanted.get("difficulty", (None,))[0]
            chosen = csapp.sample_task(self.np_random, wanted.get("categories"), difficulty=level)
        else:
            chosen = self._tasks[self._eval_task_for_reset(options, wanted)]
        self._current = chosen
        return Task(
            task_id=chosen.task_id,
            family=self.family,
            prompt=self._prompt(chosen),
            answer=chosen.answer,
            metadata={"category": chosen.category, "template": chosen.template, "split": self.split,
                      "difficulty": csapp.task_level(chosen)},
        )

    def _prompt(self, task: csapp.CsappTask) -> str:
        if self.max_turns == 1:
            return (
                f"{task.instruction}\n\n"
                "This is your only reply: no tool output comes back. End it with a line\n"
                "ANSWER: [ ... ]\n"
                "holding the JSON list, outside any code block. (A reply without an ANSWER line is graded by "
                "the list its ```python block leaves in a variable named `result`; that Python runs without a "
                "C compiler, assembler or linker.)"
            )
        if self.code_via == "tool":
            return (
                f"{task.instruction}\n\n"
                f"You may call the `run_code` tool up to {self.max_turns - 1} times: it runs its `code` in a "
                "persistent Python session and returns the output; the session runs Python only, without a C "
                "compiler, assembler or linker (work things out with Python itself: struct, math). Your first "
                "reply without a tool call is final and graded: end it with a line\n"
                "ANSWER: [ ... ]\n"
                "holding the JSON list, outside any code block; or leave the list in a variable named `result` "
                "(with run_code) and give no ANSWER line. (Code blocks in replies are not tools: in the final "
                "reply, a ```python block without an ANSWER line runs once, then `result` is read.)"
            )
        return (
            f"{task.instruction}\n\n"
            f"You have {self.max_turns} replies. A reply with a ```python block and no ANSWER line runs the "
            f"block in a persistent Python session and shows you its output; the session runs Python only, "
            "without a C compiler, assembler or linker (work things out with Python itself: struct, math). "
            "To finish, reply with a line\n"
            "ANSWER: [ ... ]\n"
            "holding the JSON list, outside any code block (code in that reply is not run); or leave the list "
            "in a variable named `result` and reply without an ANSWER line or code."
        )

    # ------------------------------------------------------------------ actions

    def _tool_turn(self, reply: Reply) -> ToolTurn:
        assert reply.code is not None
        return self._python_turn(reply.code.code)

    def _grade_last_turn(self, reply: Reply) -> Grade:
        if reply.kind(self.reads_answers) == "code":
            assert reply.code is not None
            self._python_turn(reply.code.code)
            return self._grade_session("its code ran, then `result` was read")
        return self._grade_session("nothing ran; `result` was read")

    def _grade_final(self, reply: Reply) -> Grade:
        assert self.task is not None
        key = self.task.answer

        def same(a: list, b: list) -> bool:
            return exact_equal(a, b) or (answer_matches(key, a) and answer_matches(key, b))

        choice = choose_answer(list(reply.answers), _parse_or_none, same)
        if choice.status == "missing":
            return self._grade_session("`result` was read")
        if choice.status == "unparseable":
            return Grade(Verdict.FORMAT_ERROR, "the ANSWER value is not a non-empty list (JSON, or a Python list "
                                               "display) of numbers, booleans and strings: "
                                               f"{_why_unreadable(choice.raw or '')}")
        if choice.status == "several":
            return Grade(Verdict.WRONG_ANSWER, "several different ANSWER values were given")
        assert choice.value is not None  # status "one" carries its value
        return self._compare(choice.value)

    def _grade_session(self, how: str) -> Grade:
        if self._session is None:
            return Grade(Verdict.FORMAT_ERROR, f"{how}: no ANSWER line, and no code ran to set `result`")
        read = self._session.run("", fetch="result")
        if not read.defined:
            return Grade(Verdict.FORMAT_ERROR, f"{how}: no ANSWER line, and `result` is not set in the session")
        if not is_json_primitive_list(read.value):
            return Grade(Verdict.FORMAT_ERROR, f"{how}: `result` must be a non-empty list of ints, floats, bools "
                                               "and strings")
        return self._compare(read.value, how)

    def _compare(self, value: list, how: str = "") -> Grade:
        assert self.task is not None
        if answer_matches(self.task.answer, value):
            return Grade(Verdict.CORRECT, how)
        return Grade(Verdict.WRONG_ANSWER, how)

    @property
    def current_task(self) -> csapp.CsappTask | None:
        """The current task's full record, distractors included (host side only)."""
        return self._current

    def reference_action(self) -> str:
        if self.task is None:
            raise RuntimeError("call reset() first")
        return f"ANSWER: {json.dumps(self.task.answer)}"

    def chance_action(self, rng: np.random.Generator) -> str:
        """One of the task's executed candidates (the key and its distractors, the tempting
        wrong readings) drawn uniformly: the multiple-choice chance level, 1 in the candidate count."""
        if self._current is None:
            raise RuntimeError("call reset() first")
        candidates = [self._current.answer, *self._current.distractors]
        return f"ANSWER: {json.dumps(candidates[int(rng.integers(len(candidates)))])}"

    def reference_code(self) -> str:
        """Python that sets `result` to the key (the code-path counterpart of reference_action)."""
        if self._current is None:
            raise RuntimeError("call reset() first")
        return csapp.reference_code(self._current)

"""LinearAlgebra-v0: undergraduate linear algebra with a math-aware, hack-resistant grader."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gym_sysmath.actions import Reply
from gym_sysmath.env import SysmathEnv, Task, ToolTurn
from gym_sysmath.filters import TaskFilter
from gym_sysmath.sandbox import Limits
from gym_sysmath.tasks import linalg
from gym_sysmath.tasks.linalg.render import inline
from gym_sysmath.verdicts import Grade, Verdict

#: The random agent's integers: uniform in [-CHANCE_RANGE, CHANCE_RANGE].
CHANCE_RANGE = 9


class LinearAlgebraEnv(SysmathEnv):
    """Core undergraduate linear algebra, answered on a final `ANSWER:` line.

    ## Description
    13 topics (determinant, rank, trace, transpose, dot_product, matvec, matmul, inverse,
    solve_system, eigenvalue, eigenvector, norm_squared, is_symmetric) at three difficulties.
    The eval split is a fixed set of 78 problems (13 x 3 x 2); every key was computed by
    numpy/sympy from seeded integer inputs, exact where the math allows.

    ## Action Space
    `Text` (see `gym_sysmath.spaces`); any `str` is accepted, Unicode included. Free reasoning
    with a line `ANSWER: <value>` outside code fences: a scalar (`6`, `-1/3`, `0.25`, `\\frac{1}{3}`,
    `\u22123`), a vector (`[1, 0, -2]`), a matrix (`[[1, 2], [3, 4]]`, a LaTeX `pmatrix`) or
    `true`/`false`. The protocol is the same in every family (`gym_sysmath.actions`): a reply
    with an ANSWER line is final and graded by it (its code is not run); with `max_turns > 1`,
    a reply with a complete ```python block and no ANSWER line is a tool turn, run in a
    sandboxed session (numpy and sympy available) whose output is the next observation; any
    other reply is final. On the last turn (every turn when `max_turns` is 1) code is not run
    and the reply must hold the ANSWER line. A cut-off fence runs nothing and is told so; a
    block in another language is reported. `info["detail"]` says what was read.

    ## Observation Space
    `Text`: the problem, then tool output on tool turns.

    ## Rewards
    1.0 for a correct answer, else 0.0. No ANSWER line scores 0 (no "last number" fallback);
    several different ANSWER values score 0; a scalar that only echoes a number of the prompt
    scores 0; `<think>` blocks are ignored. Eigenvectors count up to a nonzero scale,
    eigenvalues as a multiset; the relative tolerance is per problem.

    ## Starting State
    `reset(seed=..., options=...)`: `options` may carry `task_id`, `difficulty`, `topics`.
    The filters (`difficulty`, `topics`) restrict everything alike: `task_ids`, `export`,
    `eval`, the draws of both splits and the `task_id`s reset accepts (one they exclude is a
    `ValueError` naming the filter). A filter given as a reset option narrows the env's own for
    that reset only and cannot widen it; a filter that leaves no eval task is a `ValueError`
    at `gym.make` (on the eval split).

    ## Episode End
    Terminated after a final action (single-turn by default). Truncated with a
    `scoring_error` verdict only if the sandbox harness fails on a tool turn.

    ## Arguments
    | name | type | default | meaning |
    | --- | --- | --- | --- |
    | `split` | `str` | `"eval"` | `"eval"` or `"train"` (below) |
    | `difficulty` | `Optional[str]` | `None` (easy, medium, hard) | `"starter"`, `"easy"`, `"medium"` or `"hard"` |
    | `topics` | `Optional[Sequence[str]]` | `None` (all) | a topic filter |
    | `max_turns` | `Optional[int]` | `1` | replies per episode (1: no tool turns) |
    | `sandbox` | `str` | `"docker"` | `"docker"` or `"process"` (tool turns only) |
    | `pool_size` | `Optional[int]` | `None` | cap on live containers (None: one per live env plus spares) |
    | `render_mode` | `Optional[str]` | `None` | `"ansi"`: the transcript as text |
    | `code_via` | `str` | `"fence"` | `"tool"`: code runs only through `run_code`, every reply is final |
    | `limits` | `Optional[Limits]` | 20 s wall per turn | limits of each tool turn |

    - `split`: `"eval"` (default, the fixed 78; 60 starter problems besides) or `"train"` (unlimited
      seeded problems).
    - `difficulty`, `topics`: filters (above, Starting State). `"starter"` (1x1 and 2x2 cases of 10
      topics, where a small model first scores) is served only when asked for, as the argument or
      the reset option; without either an env serves and draws the standard three levels.
    - `max_turns`: 1 (default) disables tool turns.
    - `code_via`: `"fence"` (a reply's ```python block is a tool turn) or `"tool"`: the prompt
      describes a `run_code` tool, `env.unwrapped.run_code(code)` runs a tool turn (at most
      `max_turns - 1`), and every reply sent to `step` is final, graded as the last turn is.
    - `sandbox`: backend for tool turns.
    - `limits`: a `gym_sysmath.sandbox.Limits` for each tool turn (default: 20 s wall clock; the
      session's CPU is capped over its whole life).

    `info["format_ok"]` says whether a readable ANSWER value was found.

    ## Version History
    - v0: 78 eval problems, a seeded train split, optional Python tool turns; later the opt-in
      `starter` level (60 eval problems and its train draws).

    Examples:
        >>> import gymnasium as gym, gym_sysmath
        >>> env = gym.make("LinearAlgebra-v0")
        >>> prompt, info = env.reset(seed=0)
    """

    family = "linalg"
    default_max_turns = 1
    filters = (TaskFilter("difficulty", "difficulty", linalg.LEVELS, many=False, unset=linalg.DIFFICULTIES),
               TaskFilter("topics", "topic", linalg.TOPICS))

    def __init__(self, *, split: str = "eval", difficulty: str | None = None,
                 topics: Sequence[str] | None = None, max_turns: int | None = None, sandbox: str = "docker",
                 pool_size: int | None = None, limits: Limits | None = None,
                 render_mode: str | None = None, code_via: str = "fence"):
        self._all = {p.problem_id: p for p in linalg.load_problems()}
        self._problem: linalg.LinalgProblem | None = None
        super().__init__(split=split, max_turns=max_turns, sandbox=sandbox, pool_size=pool_size,
                         limits=limits, render_mode=render_mode, filters={"difficulty": difficulty, "topics": topics},
                         code_via=code_via)
        self.difficulty: str | None = self.applied_filters.get("difficulty", (None,))[0]
        self.topics: tuple[str, ...] | None = self.applied_filters.get("topics")

    @property
    def current_task(self) -> linalg.LinalgProblem | None:
        """The current problem's full record, key included (host side only)."""
        return self._problem

    def _needs_sandbox(self) -> bool:
        return self.max_turns > 1

    def _eval_ids(self) -> tuple[str, ...]:
        return tuple(self._all)

    def _filter_value(self, task_id: str, key: str) -> str:
        return str(getattr(self._all[task_id], key))

    def _select_task(self, options: Mapping[str, Any]) -> Task:
        wanted = self._reset_filters(options)
        if self.split == "train" and "task_id" not in options:
            problem = linalg.generate_problem(self.np_random, difficulty=wanted.get("difficulty", (None,))[0],
                                              topics=wanted.get("topics"))
        else:
            problem = self._all[self._eval_task_for_reset(options, wanted)]
        self._problem = problem
        prompt = problem.prompt
        if self.max_turns > 1 and self.code_via == "tool":
            prompt += (f"\n\nYou may run Python (numpy and sympy available) by calling the `run_code` tool, up to "
                       f"{self.max_turns - 1} times (a persistent session; it returns the output). Your first reply "
                       f"without a tool call is final and must hold the ANSWER line (code in it is not run).")
        elif self.max_turns > 1:
            prompt += (f"\n\nYou may run Python (numpy and sympy available) by replying with a ```python "
                       f"block, up to {self.max_turns - 1} times; your final reply must hold the ANSWER line.")
        return Task(problem.problem_id, self.family, prompt, problem.answer,
                    {"topic": problem.topic, "difficulty": problem.difficulty, "split": self.split})

    def _tool_turn(self, reply: Reply) -> ToolTurn:
        assert reply.code is not None
        return self._python_turn(reply.code.code)

    def _grade_last_turn(self, reply: Reply) -> Grade:
        grade = self._grade_final(reply)
        return Grade(grade.verdict, "code is not run on the last turn; " + grade.detail, grade.info)

    def _grade_final(self, reply: Reply) -> Grade:
        assert self._problem is not None
        outcome = linalg.grade(self._problem, reply.text)
        return Grade(Verdict(outcome.verdict), outcome.detail, {"format_ok": outcome.format_ok})

    def reference_action(self) -> str:
        if self._problem is None:
            raise RuntimeError("call reset() first")
        return linalg.reference_response(self._problem)

    def chance_action(self, rng: np.random.Generator) -> str:
        """A random value of the asked-for kind and shape (what the prompt's matrices already
        tell): integers uniform in [-9, 9], a boolean by a fair coin. A problem has no
        candidate answers, so this is the floor: about 1/2 on `is_symmetric`, near 0 elsewhere."""
        if self._problem is None:
            raise RuntimeError("call reset() first")

        def draw(shape: Any) -> Any:
            if isinstance(shape, bool):
                return bool(rng.integers(2))
            if isinstance(shape, list):
                return [draw(item) for item in shape]
            return str(int(rng.integers(-CHANCE_RANGE, CHANCE_RANGE + 1)))

        return f"A guess of the right shape.\n\nANSWER: {inline(draw(self._problem.answer))}"

"""CompGeom-v0: implement intersection primitives in C++20, Rust 2021 or Python 3."""

from __future__ import annotations

import hashlib
import signal
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gym_sysmath.actions import Reply
from gym_sysmath.env import SysmathEnv, Task, ToolTurn
from gym_sysmath.filters import TaskFilter
from gym_sysmath.sandbox import ExecutionResult, ExecutionStatus, Job, Limits, Sandbox, SandboxError
from gym_sysmath.sandbox.daemon import NO_INSTRUCTION_COUNTER, counts_instructions
from gym_sysmath.sandbox.execution import SandboxUnavailableError
from gym_sysmath.tasks import compgeom
from gym_sysmath.tasks.compgeom.cases import train_cases
from gym_sysmath.tasks.compgeom.performance import EMPTY_INPUT, performance_score
from gym_sysmath.verdicts import FAILED_EXECUTION, Grade, Verdict

RUN_LIMITS = Limits(wall_s=10.0, cpu_s=5.0, memory_bytes=2 * 1024**3)
#: A counted run is about 5x (C++, Rust) to 20x (Python) slower than a plain one.
PERF_LIMITS = Limits(wall_s=60.0, cpu_s=40.0, memory_bytes=2 * 1024**3, stdout_bytes=16 * 1024**2)
COUNT_TRIES = 5
UNEXPLAINED_KILL_BELOW = 0.75  # of the memory limit: a SIGKILL there is not the job's own OOM
#: The instruction count is not rewarded while it is kept in the counted process itself: a
#: program can write valgrind's memory and lower cachegrind's counters (a dozen lines of Python
#: ctypes score a 100x slower submission 1.0; SECURITY.md, "Valgrind is not a boundary"), so
#: the score is reported (``measure_performance``), never rewarded.
PERFORMANCE_REWARD_REFUSED = (
    "performance_weight > 0 is refused: a counted program shares its process with valgrind and can "
    "lower cachegrind's counters in memory, so the score can be forged (SECURITY.md, 'Valgrind is not a "
    "boundary'). measure_performance=True reports info['performance_score'] without rewarding it.")
#: (backend, task id) -> the reference's and the starter's instruction counts (``_reference_counts``).
_REFERENCE_COUNTS: dict[tuple[str, str, str], tuple[int, int]] = {}
_TRAIN_TIMING_CASES: dict[str, tuple[compgeom.Case, ...]] = {}
COMPILE_OUTPUT_CHARS = 4000
STDERR_CHARS = 2000  # of a failing public run: the harness's first traceback and the candidate's own output




def _train_timing_cases(task: compgeom.CompGeomTask) -> tuple[compgeom.Case, ...]:
    """The train split's counted inputs: one draw of the train generators per task, seeded by
    its id. Never the eval hidden cases: a train step's output on them would be graded, so its
    score would tell which eval cases a candidate gets wrong, and the candidate would see them."""
    if task.task_id not in _TRAIN_TIMING_CASES:
        seed = int.from_bytes(hashlib.sha256(f"timing/{task.task_id}".encode()).digest()[:8], "big")
        _TRAIN_TIMING_CASES[task.task_id] = train_cases(task.primitive, np.random.default_rng(seed), task.public_cases)
    return _TRAIN_TIMING_CASES[task.task_id]


def _killed_by_someone_else(result: ExecutionResult) -> bool:
    """A SIGKILL the job's memory does not explain (the sandbox's own kills have their verdicts)."""
    return (FAILED_EXECUTION.get(result.status) is Verdict.MEMORY_LIMIT and result.signal == signal.SIGKILL
            and result.peak_memory_bytes < UNEXPLAINED_KILL_BELOW * PERF_LIMITS.memory_bytes)


class CompGeomEnv(SysmathEnv):
    """Implement a 2D/3D/N-d intersection query; graded on hidden cases the agent never sees.

    ## Description
    Thirteen primitives (`aligned_box_aligned_box` in N dimensions; the 2D `line2_line2`,
    `line2_ray2`, `line2_segment2`, `ray2_ray2`, `ray2_segment2`, `segment2_segment2`; a
    segment, ray or line against a 2D box: `segment2_aligned_box2`, `ray2_aligned_box2`,
    `line2_aligned_box2`; the test query `triangle2_triangle2`; the 3D `ray3_aligned_box3`
    and `segment3_triangle3`) in three languages: 39 tasks. The prompt holds the contract (result kinds, parameters on
    each input, degenerate inputs) and a starter file with the API to keep. The candidate is
    compiled in the sandbox next to a generated harness, which reads case inputs on stdin and
    prints one record per case; the host compares the records with expectations computed by
    an exact rational reference. Expected outputs never enter the sandbox.

    ## Action Space
    `Text` (see `gym_sysmath.spaces`); any `str` is accepted, Unicode included. The protocol is
    the same in every family (`gym_sysmath.actions`); CompGeom's answer is its code, so it
    reads no ANSWER line. A reply with a complete block in the task's language (labels through
    one alias table: ```cpp, ```c++20, ```rs, ```py, a bare fence, ~~~) is a test turn: the
    last such block replaces the candidate, is built and run on the public cases, and the
    observation shows the build output (head and tail when long), the failing public cases
    and the program's standard error. A reply without code submits the last candidate. On
    the `max_turns`-th reply (every reply when `max_turns` is 1) a block is submitted as it
    is. A block in another language is reported, never built; a reply cut off inside an
    unclosed fence builds nothing and is told so (the turn counts). `info["detail"]` says
    what was read.

    ## Observation Space
    `Text`: the task statement, then build output and public-test reports.

    ## Rewards
    1.0 when the last candidate builds and passes every hidden case (kinds and counts exact,
    parameters and points within a tight relative tolerance), else 0.0. The performance
    score (`measure_performance=True`: `info["performance_score"]`) compares the instructions
    the candidate's run executes with the reference solution's in the same language (counted,
    so the same submission always gets the same score). It is reported, not rewarded:
    `performance_weight > 0` is refused, because a program can lower the counters valgrind
    keeps in its own process (SECURITY.md). Counting needs the sandbox image's performance
    variant (`gym-sysmath sandbox build --with-performance`; docs/sandbox-image.md).

    ## Starting State
    `reset(seed=..., options=...)`: `options` may carry `task_id`, `primitives` or `languages`
    (the filters' own names and values: `options={"primitives": ["line2_line2"]}`).
    On the train split the reset also draws the episode's hidden cases from the env's RNG.
    The filters (`primitives`, `languages`) restrict everything alike: `task_ids`, `export`,
    `eval`, the draws of both splits and the `task_id`s reset accepts (one they exclude is a
    `ValueError` naming the filter). A reset option narrows the env's own filter for that reset
    only and cannot widen it.

    ## Episode End
    Terminated on a submission, or when the `max_turns`-th code action is graded directly.
    Truncated with a `scoring_error` verdict if the sandbox harness fails.

    ## Arguments
    | name | type | default | meaning |
    | --- | --- | --- | --- |
    | `split` | `str` | `"eval"` | `"eval"` or `"train"` (below) |
    | `languages` | `Optional[Sequence[str]]` | `None` (all) | some of `cpp`, `rust`, `python` |
    | `primitives` | `Optional[Sequence[str]]` | `None` (all) | some of the 13 primitives |
    | `max_turns` | `Optional[int]` | `8` | code actions per episode |
    | `performance_weight` | `float` | `0.0` | must be 0 (below) |
    | `measure_performance` | `bool` | `False` | report `info["performance_score"]` |
    | `sandbox` | `str` | `"docker"` | `"docker"` or `"process"` |
    | `pool_size` | `Optional[int]` | `None` | cap on live containers (None: one per live env plus spares) |
    | `render_mode` | `Optional[str]` | `None` | `"ansi"`: the transcript as text |
    | `code_via` | `str` | `"fence"` | `"tool"`: code runs only through `run_code`, every reply is final |
    | `limits` | `Optional[Limits]` | 10 s wall, 5 s CPU, 2 GiB | limits of each candidate run |

    - `split`: `"eval"` (default: the 39 tasks, graded on their fixed hidden cases) or `"train"`:
      the same 39 tasks (prompt, contract, public cases), but every episode is graded on
      fresh hidden cases drawn from the env's RNG by the eval corpus's generators (each
      scenario under a random symmetry and at a random power-of-two scale, near misses at
      random sizes 2^-7 .. 2^-42, random configurations; every branch reached, every case
      exact in double), with expectations computed by the exact reference at reset. The same
      seed draws the same cases. `task_ids` is empty there, as in the other families' train
      splits; `options={"task_id": ...}` still picks the task.
    - `languages`: restrict to some of `cpp`, `rust`, `python` (the per-language ids set it).
    - `primitives`: restrict to some primitives.
    - `max_turns`: code actions allowed (default 8); `1` grades the first one directly.
    - `performance_weight`: 0 (default, and the only value taken) keeps the reward binary;
      any other value is refused while the count can be forged.
    - `measure_performance`: report `info["performance_score"]` for correct submissions (costs
      one counted run, and two more per task the first time); on a pool without the image's
      performance variant the first step raises `SandboxUnavailableError` saying how to build it.
    - `code_via`: `"fence"` (a reply's code block is a test run) or `"tool"`: the prompt describes
      a `run_code` tool, `env.unwrapped.run_code(code)` builds and tests a candidate (at most
      `max_turns - 1` times), and every reply sent to `step` submits, graded as the last turn is.
    - `sandbox`: `"docker"` (default) or `"process"`.
    - `limits`: a `gym_sysmath.sandbox.Limits` for each run of the candidate (default 10 s wall,
      5 s CPU, 2 GiB); the build keeps its own, larger limits.

    `info` adds `compile_success`, `public_passed`/`public_total`, `hidden_passed`/`hidden_total`
    and `performance_score`.

    ## Version History
    - v0: 7 primitives (21 tasks), then 13 (39 tasks); hidden corpora that fail every tolerance
      from 1e-12 up; a procedural train split; the performance score counted, not timed, and
      reported only (a program can write the counter's memory); the image's cachegrind refuses
      the client requests that let a program leave the count.

    Examples:
        >>> import gymnasium as gym, gym_sysmath
        >>> env = gym.make("CompGeomCpp-v0")
        >>> statement, info = env.reset(seed=0)
    """

    family = "compgeom"
    default_max_turns = 8
    filters = (TaskFilter("primitives", "primitive", compgeom.PRIMITIVES),
               TaskFilter("languages", "language", compgeom.LANGUAGES))
    splits = ("eval", "train")
    default_limits = RUN_LIMITS

    def __init__(self, *, split: str = "eval", languages: Sequence[str] | None = None,
                 primitives: Sequence[str] | None = None, max_turns: int | None = None,
                 performance_weight: float = 0.0, measure_performance: bool = False, sandbox: str = "docker",
                 pool_size: int | None = None, limits: Limits | None = None,
                 render_mode: str | None = None, code_via: str = "fence"):
        if performance_weight < 0:
            raise ValueError(f"performance_weight must be >= 0, got {performance_weight}")
        if performance_weight > 0:
            raise ValueError(PERFORMANCE_REWARD_REFUSED)
        self._tasks = {task.task_id: task for task in compgeom.load_tasks()}
        self.measure_performance = measure_performance
        if self.measure_performance and sandbox == "process":  # else every correct answer is a scoring_error
            raise ValueError("performance_weight and measure_performance need sandbox='docker': instruction "
                             "counts need the container's own pid namespace, which the process backend lacks")
        self._current: compgeom.CompGeomTask | None = None
        self._candidate: str | None = None
        self._public: compgeom.CaseReport | None = None
        self._hidden: tuple[compgeom.Case, ...] = ()  # the episode's hidden cases (host side only)
        self._stdin_cache: dict[tuple[str, str], str] = {}
        super().__init__(split=split, max_turns=max_turns, sandbox=sandbox, pool_size=pool_size,
                         limits=limits, render_mode=render_mode,
                         filters={"primitives": primitives, "languages": languages}, code_via=code_via)

    def _eval_ids(self) -> tuple[str, ...]:
        return tuple(self._tasks)

    def _filter_value(self, task_id: str, key: str) -> str:
        return str(getattr(self._tasks[task_id], key))

    @property
    def current_task(self) -> compgeom.CompGeomTask | None:
        return self._current

    def _select_task(self, options: Mapping[str, Any]) -> Task:
        # both splits start from one of the served tasks; the train split draws its hidden cases
        chosen = self._tasks[self._eval_task_for_reset(options, self._reset_filters(options))]
        self._current = chosen
        self._candidate = None
        self._public = None
        self._hidden = (train_cases(chosen.primitive, self.np_random, chosen.public_cases)
                        if self.split == "train" else chosen.hidden_cases)
        self._stdin_cache.pop((chosen.task_id, "train"), None)
        statement = compgeom.prompt_for(chosen, self.max_turns, self.code_via)
        return Task(chosen.task_id, self.family, statement, None,
                    {"primitive": chosen.primitive, "language": chosen.language, "split": self.split})

    # ------------------------------------------------------------------ actions

    reads_answers = False  # the answer is the code

    def _languages(self) -> tuple[str, ...]:
        assert self._current is not None
        return (self._current.language,)

    def _tool_turn(self, reply: Reply) -> ToolTurn:
        task = self._current
        assert task is not None and reply.code is not None
        self._candidate = reply.code.code
        result = self._run("public")
        self._public = None
        text = [self._compile_report(result)]
        if result.ok:
            self._public = compgeom.compare(task.public_cases, result.stdout)
            text.append("Public tests: " + compgeom.describe_failures(self._public, task.public_cases))
            if not self._public.ok and result.stderr.strip():
                text.append("Your program's standard error:" + _head_and_tail(result.stderr, STDERR_CHARS))
        elif FAILED_EXECUTION.get(result.status) is not Verdict.COMPILE_ERROR:  # the build report says it
            text.append(f"The run failed: {result.status}." + _head_and_tail(result.stderr, STDERR_CHARS))
        text.append(f"[turn {self.turn} of {self.max_turns}; reply without a code block to submit]")
        return ToolTurn("\n".join(part for part in text if part), self._metrics(result, self._public))

    def _grade_final(self, reply: Reply) -> Grade:
        return self._submit()

    def _grade_last_turn(self, reply: Reply) -> Grade:
        if reply.kind(self.reads_answers) == "code":
            assert reply.code is not None
            self._candidate = reply.code.code
            return self._submit()
        why = "its code was cut off" if reply.cut is not None else "it held no block in the task's language"
        grade = self._submit()
        return Grade(grade.verdict, f"the last reply was not a candidate ({why}), so the previous one was graded"
                     + (f"; {grade.detail}" if grade.detail else ""), grade.info, grade.bonus)

    def _submit(self) -> Grade:
        task = self._current
        assert task is not None
        if self._candidate is None:
            return Grade(Verdict.FORMAT_ERROR, f"no {task.language} code block was given before submitting",
                         self._metrics(None, None))
        result = self._run("hidden")
        if not result.ok:
            verdict = FAILED_EXECUTION.get(result.status, Verdict.RUNTIME_ERROR)
            return Grade(verdict, f"the program ended with {result.status}", self._metrics(result, None, hidden=True))
        report = compgeom.compare(self._hidden, result.stdout)
        info = self._metrics(result, report, hidden=True)
        if not report.ok:
            return Grade(Verdict.WRONG_ANSWER, f"hidden cases passed: {report.summary()}", info)
        if not self.measure_performance:
            return Grade(Verdict.CORRECT, "", info)
        info["performance_score"] = self._performance(task)
        return Grade(Verdict.CORRECT, "", info)

    # ------------------------------------------------------------------ sandbox

    @property
    def sandbox(self) -> Sandbox:
        """The pool, as the base class takes it; with ``measure_performance``, one whose image
        cannot count instructions (the default image, not its performance variant) is refused
        here, before a turn is spent, rather than every correct answer being a scoring_error."""
        pool = super().sandbox
        if self.measure_performance and pool.image_tag is not None and not counts_instructions(pool.image_tag):
            raise SandboxUnavailableError(NO_INSTRUCTION_COUNTER)
        return pool

    def _run(self, which: str, source: str | None = None, limits: Limits | None = None) -> ExecutionResult:
        """Build and run ``source`` (default: the candidate) on the ``which`` inputs of the task."""
        task = self._current
        assert task is not None
        source = self._candidate if source is None else source
        assert source is not None  # a candidate is set before anything runs it
        files = compgeom.job_files(task, source)
        return self.rollout.run(Job(task.language, files, stdin=self._stdin(task, which), limits=limits or self.limits))

    def _stdin(self, task: compgeom.CompGeomTask, which: str) -> str:
        """The harness's stdin for public, hidden or timing inputs: built once per task (the
        train split's hidden inputs once per episode). Inputs only, never expectations."""
        key = (task.task_id, "train" if which == "hidden" and self.split == "train" else which)
        if key not in self._stdin_cache:
            self._stdin_cache[key] = compgeom.stdin_for(self._cases(task, which))
        return self._stdin_cache[key]

    def _cases(self, task: compgeom.CompGeomTask, which: str) -> tuple[compgeom.Case, ...]:
        if which == "timing":  # one fixed set per task and split
            return task.hidden_cases if self.split == "eval" else _train_timing_cases(task)
        return task.public_cases if which == "public" else self._hidden

    def _performance(self, task: compgeom.CompGeomTask) -> float:
        """The reference's instructions over the candidate's on the timing inputs, each over
        the starter's start-up, capped at 1 (``tasks/compgeom/performance.py``).

        One counted run of the candidate: a count does not vary, so nothing is repeated and
        there is nothing to memoise. Its output is graded, so skipped work scores 0, and a
        run that fails under the counter (which it cannot fork or exec past) or leaves no
        count scores 0 too; the counter failing on the reference is a ``scoring_error``.
        """
        reference, baseline = self._reference_counts(task)
        cases = self._cases(task, "timing")
        result = self._counted(task, None, self._stdin(task, "timing"))
        if not result.ok or result.instructions is None or not compgeom.compare(cases, result.stdout).ok:
            return 0.0
        return performance_score(reference, result.instructions, baseline)

    def _reference_counts(self, task: compgeom.CompGeomTask) -> tuple[int, int]:
        """(reference on the timing inputs, starter on no input): the same every time for one
        image, so counted once per task, split and backend in this process."""
        key = (self.sandbox_backend, task.task_id, self.split)
        if key not in _REFERENCE_COUNTS:
            counts = []
            for what, source, stdin, cases in (
                    ("the reference solution", compgeom.reference_solution(task), self._stdin(task, "timing"),
                     self._cases(task, "timing")),
                    ("the starter on no input", task.starter, EMPTY_INPUT, ())):
                result = self._counted(task, source, stdin)
                if not result.ok or result.instructions is None or not compgeom.compare(cases, result.stdout).ok:
                    raise SandboxError("instruction_counter", f"counting {what} of {task.task_id} failed: "
                                       f"{result.status}, count {result.instructions}; {result.stderr[-300:]}")
                counts.append(result.instructions)
            if counts[0] <= counts[1]:
                raise SandboxError("instruction_counter", f"{task.task_id}: the reference's count {counts[0]} is "
                                   f"not above the starter's {counts[1]}")
            _REFERENCE_COUNTS[key] = (counts[0], counts[1])
        return _REFERENCE_COUNTS[key]

    def _counted(self, task: compgeom.CompGeomTask, source: str | None, stdin: str) -> ExecutionResult:
        """Build ``source`` (default: the candidate) and run it under the instruction counter.

        A run SIGKILLed far below its memory limit was killed by something other than its own
        allocations (such kills hit Python under valgrind while the process backend's purge
        killed every job on the host): it is tried again, up to ``COUNT_TRIES`` times, and then
        it is the harness's failure (a ``scoring_error``), never the candidate's 0.
        """
        source = self._candidate if source is None else source
        assert source is not None  # only a submitted candidate is scored
        job = Job(task.language, compgeom.job_files(task, source), stdin=stdin, limits=PERF_LIMITS,
                  count_instructions=True)
        for _ in range(COUNT_TRIES):
            result = self.rollout.run(job)
            if not _killed_by_someone_else(result):
                return result
        raise SandboxError("instruction_counter", f"the counted run of {task.task_id} was SIGKILLed {COUNT_TRIES} "
                           f"times at {result.peak_memory_bytes} bytes, far below its memory limit")

    # ------------------------------------------------------------------ reporting

    def _compile_report(self, result: ExecutionResult) -> str:
        compiled = result.compile
        if compiled is None:  # Python: nothing to build
            return ""
        if compiled.ok:
            return "Build: ok" + (" (cached)" if compiled.cached else "") + _head_and_tail(compiled.stderr)
        return f"Build failed ({compiled.status}):" + _head_and_tail(compiled.stderr or compiled.stdout)

    def _metrics(self, result: ExecutionResult | None, report: compgeom.CaseReport | None,
                 hidden: bool = False) -> dict[str, Any]:
        task = self._current
        assert task is not None
        public = self._public
        compiled = result is not None and (result.compile is None or result.compile.ok)
        return {
            "compile_success": compiled,
            "public_passed": public.passed if public else 0,
            "public_total": len(task.public_cases),
            "hidden_passed": report.passed if (hidden and report) else 0,
            "hidden_total": len(self._hidden),
            "performance_score": None,
        }

    def grading_key(self) -> dict[str, Any]:
        """What a submission is graded on, for the task-set digest: the episode's hidden and the
        task's public cases (inputs and expected outputs), the job's harness, and the limits of
        each run (the env's, ``RUN_LIMITS`` by default, and the performance run's)."""
        assert self._current is not None
        return {"hidden_cases": [case.to_record() for case in self._hidden],
                "public_cases": [case.to_record() for case in self._current.public_cases],
                "job_files": compgeom.job_files(self._current, ""),
                "limits": {"run": self.limits, "default": RUN_LIMITS, "performance": PERF_LIMITS}}

    def reference_action(self) -> str:
        """The known-good solution as a code block, then (once it is the candidate) a submission."""
        task = self._current
        if task is None:
            raise RuntimeError("call reset() first")
        solution = compgeom.reference_solution(task)
        if self._candidate == solution:
            return "Submitting the reference solution."
        return f"```{task.language}\n{solution}```"

    def chance_action(self, rng: np.random.Generator) -> str:
        """The starter file unchanged (its API, unimplemented), then its submission. A program
        has no candidate answers to draw from, and a random text builds nothing: the floor of a
        code family is the well-formed program that solves nothing (it builds, runs, and passes
        no hidden case: 0%). ``rng`` is not needed: every draw is the same."""
        task = self._current
        if task is None:
            raise RuntimeError("call reset() first")
        if self._candidate == task.starter:
            return "Submitting the starter as it is."
        return f"```{task.language}\n{task.starter}```"


def sandbox_runner(sandbox: Sandbox):
    """``compgeom.check_fixtures``'s runner on a real sandbox: (language, files, stdin) -> (status, output)."""

    def run(language: str, files: Mapping[str, str], stdin: str) -> tuple[ExecutionStatus, str]:
        result = sandbox.run(Job(language, dict(files), stdin=stdin, limits=RUN_LIMITS))
        return result.status, result.stdout if result.ok else result.stderr

    return run


def _head_and_tail(text: str, limit: int = COMPILE_OUTPUT_CHARS) -> str:
    """``text`` on a new line, cut in the middle when longer than ``limit``: a compiler's first
    errors (the cause) and its last lines (the count) both survive."""
    text = text.strip("\n")
    if not text:
        return ""
    if len(text) > limit:
        head = text[: limit * 2 // 3]
        tail = text[len(text) - (limit - len(head)):]
        text = f"{head}\n[... {len(text) - len(head) - len(tail)} characters cut ...]\n{tail}"
    return "\n" + text

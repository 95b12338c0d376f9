"""The environment base class every family inherits: the contract lives here, once.

A family supplies its tasks, its filters and three hooks: what a tool turn does (``_tool_turn``),
how a final reply is graded (``_grade_final``) and how the last turn is (``_grade_last_turn``).
This class owns the rest: text spaces, seeding,
turn counting, the ``info`` fields, the verdict-to-reward rule, and turning a harness failure
into a ``scoring_error`` that truncates the episode instead of masquerading as a wrong answer.
"""

from __future__ import annotations

import abc
import functools
import inspect
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.error import ResetNeeded

from gym_sysmath.actions import (
    MAX_ACTION_CHARS,
    MAX_OBSERVATION_CHARS,
    Reply,
    check_action_text,
    code_comment_answer,
    read_reply,
    to_observation,
)
from gym_sysmath.fences import Block
from gym_sysmath.filters import TaskFilter, unknown_name
from gym_sysmath.sandbox import (
    SESSION_LIMITS,
    ExecutionResult,
    Lease,
    Limits,
    PythonSession,
    Sandbox,
    SandboxError,
)
from gym_sysmath.sandbox.pool import BACKENDS, NO_SANDBOX, SandboxHold
from gym_sysmath.spaces import SysmathText, text_space
from gym_sysmath.task_sets import TaskSet, TaskSetError, installed, require, require_served
from gym_sysmath.terminal import escape_controls
from gym_sysmath.verdicts import Grade, Verdict

#: The ``info`` fields every step and reset carry, whatever the family.
INFO_KEYS = ("task_id", "family", "turn", "verdict", "correct", "scoring_error", "task_set", "task_set_hash")

_SURROGATE = re.compile("[\ud800-\udfff]")  # a lone surrogate is not text: run_code runs it as U+FFFD


def _safe_repr(value: object) -> str:
    """``repr`` for the transcript of a non-string action, which must not raise out of ``step``
    (an int of 5,000 digits refuses ``repr``; an object's ``__repr__`` may raise anything)."""
    try:
        return repr(value)[:1000]
    except Exception:
        return f"<{type(value).__name__}>"


@dataclass(frozen=True)
class Task:
    """One task as the host sees it. ``answer`` never reaches the agent or ``info``."""

    task_id: str
    family: str
    prompt: str
    answer: Any
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolTurn:
    """What a non-final code action returns: the observation for the next turn."""

    observation: str
    info: Mapping[str, Any] = field(default_factory=dict)


def tool_status(result: ExecutionResult) -> str:
    """What happened to a code turn, without its timing: the same seed and actions must give the
    same observation text, so wall and CPU time go to ``info`` (``tool_timing``), never here."""
    parts = [f"status: {result.status}"]
    if result.exit_code not in (None, 0):
        parts.append(f"exit code {result.exit_code}")
    if result.signal is not None:
        parts.append(f"signal {result.signal}")
    if result.stdout_truncated or result.stderr_truncated:
        parts.append("output truncated")
    return ", ".join(parts)


def tool_timing(result: ExecutionResult) -> dict[str, float]:
    """A code turn's timing, for ``info["timing"]``."""
    return {"wall_s": result.wall_s, "cpu_s": result.cpu_s}


def format_tool_output(result: ExecutionResult, turn: int, max_turns: int, restarted: bool) -> str:
    """The observation after a code turn: its output, then one status line (no timing)."""
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    parts.append(f"[{tool_status(result)}; turn {turn} of {max_turns}]")
    if restarted:
        parts.append("[the session was restarted: variables from earlier turns are gone]")
    return "\n".join(parts)


ROLES = {"prompt": "user", "action": "assistant", "observation": "user"}

#: How an episode's code runs (``gym.make(..., code_via=...)``): ``"fence"``, a reply holding a
#: code block is a tool turn; ``"tool"``, code runs only through the env's ``run_code`` (a
#: trainer's function tool, e.g. TRL's ``environment_factory``) and every reply is final.
CODE_VIA = ("fence", "tool")


def _signature(function: Any) -> inspect.Signature:
    """``inspect.signature`` that leaves annotations unevaluated on Python 3.14 as before it: a
    plug-in's constructor may annotate with a name only imported under ``TYPE_CHECKING``."""
    if sys.version_info >= (3, 14):
        import annotationlib

        return inspect.signature(function, annotation_format=annotationlib.Format.FORWARDREF)
    return inspect.signature(function)


class _TakesTaskSet(abc.ABCMeta):
    """Lets every family take ``task_set=`` without declaring it: ``gym.make("CsappExact-v0",
    task_set="csapp@1")`` checks the pin against the installed task set (``task_sets.require``:
    another version is refused, naming the installed one and where the other shipped) and drops
    it before the family's own ``__init__`` runs (unless that ``__init__`` declares ``task_set``
    itself). An ``ABCMeta``, so a plug-in may mix ``abc.ABC`` in."""

    family: str  # what SysmathEnv declares

    def __init__(cls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(name, bases, namespace, **kwargs)
        # inspect.signature(cls) would read __call__ below: show the family's arguments and task_set
        own = _signature(cls.__init__)  # type: ignore[misc]  # the family's constructor, as declared
        parameters = list(own.parameters.values())[1:]
        if "task_set" not in own.parameters:
            at = next((i for i, p in enumerate(parameters) if p.kind is p.VAR_KEYWORD), len(parameters))
            parameters.insert(at, inspect.Parameter("task_set", inspect.Parameter.KEYWORD_ONLY, default=None,
                                                    annotation="str | int | None"))
        cls.__signature__ = own.replace(parameters=parameters)

    def __call__(cls, *args: Any, task_set: str | int | None = None, **kwargs: Any) -> Any:
        if task_set is not None:
            require(cls.family, task_set)
            if "task_set" in _signature(cls.__init__).parameters:  # type: ignore[misc]  # the family takes it too
                kwargs["task_set"] = task_set
        accepted = cls.__signature__.parameters  # set in __init__ above
        if not any(parameter.kind is parameter.VAR_KEYWORD for parameter in accepted.values()):
            for key in kwargs:  # a misspelled gym.make argument: Python's TypeError, with a did-you-mean
                if key not in accepted:
                    raise TypeError(str(unknown_name("argument", key, tuple(accepted), where=cls.__name__)))
        env = super().__call__(*args, **kwargs)
        if task_set is not None:  # a forked task file (csapp's tasks_path) serves no installed task set
            try:
                require_served(env.task_set, task_set)
            except TaskSetError:
                env.close()
                raise
        return env


class SysmathEnv(gym.Env[str, str], metaclass=_TakesTaskSet):
    """Base of all gym-sysmath environments (see each family's docstring for the manual)."""

    # Not a ClassVar: gymnasium declares ``metadata`` as an attribute of ``Env``; instances only read it.
    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1}
    observation_space: SysmathText
    action_space: SysmathText
    family: ClassVar[str] = "base"
    default_max_turns: ClassVar[int] = 1
    splits: ClassVar[tuple[str, ...]] = ("eval", "train")
    #: Limits of one code run (a tool turn; in CompGeom, one build-and-run of the candidate).
    default_limits: ClassVar[Limits] = SESSION_LIMITS

    #: The family's filters (``gym.make`` arguments, each narrowed for one reset by its reset
    #: option); the base class applies them everywhere (see "filters" below).
    filters: ClassVar[tuple[TaskFilter, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "filters" in cls.__dict__ and "reset_options" not in cls.__dict__:  # one declaration: the filters
            cls.reset_options = ("task_id", *(entry.argument for entry in cls.filters))

    def __init__(self, *, split: str = "eval", max_turns: int | None = None, sandbox: str = "docker",
                 pool_size: int | None = None, limits: Limits | None = None, render_mode: str | None = None,
                 filters: Mapping[str, Any] | None = None, code_via: str = "fence"):
        if code_via not in CODE_VIA:
            raise ValueError(f"code_via must be one of {CODE_VIA}, got {code_via!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        if split not in self.splits:
            raise ValueError(f"split must be one of {self.splits}, got {split!r}")
        max_turns = self.default_max_turns if max_turns is None else max_turns
        if isinstance(max_turns, bool) or not isinstance(max_turns, (int, np.integer)):
            raise TypeError(f"max_turns must be a whole number, got {max_turns!r}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        # Checked here though an answer-only family never takes one: no silent typo.
        if sandbox not in BACKENDS and sandbox != NO_SANDBOX:
            raise ValueError(str(unknown_name("sandbox", sandbox, BACKENDS)))
        if pool_size is not None and (isinstance(pool_size, bool) or not isinstance(pool_size, (int, np.integer))
                                      or pool_size < 1):
            raise ValueError(f"pool_size must be a whole number of at least 1, got {pool_size!r}")
        self.split = split
        self.max_turns = int(max_turns)
        self.code_via = code_via
        self.render_mode = render_mode
        self.observation_space = text_space(MAX_OBSERVATION_CHARS)
        self.action_space = text_space(MAX_ACTION_CHARS)
        self.sandbox_backend = sandbox
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError(f"limits must be a gym_sysmath.sandbox.Limits, got {type(limits).__name__}")
        self.limits = limits or self.default_limits
        self._pool_size = pool_size
        # the shared pool and this episode's container (taken on its first job); handed back by
        # close(), or by a finalizer when the env is dropped without close() (pool.SandboxHold)
        self._hold = SandboxHold()
        self._session: PythonSession | None = None
        self.task: Task | None = None
        self.turn = 0
        self._done = True
        self._transcript: list[tuple[str, str]] = []
        self._closed = False
        self.applied_filters = self._read_filters(filters or {})
        if self.applied_filters and split == "eval" and not self._served:
            raise ValueError(self._nothing_served())

    # ------------------------------------------------------------------ family hooks

    def _eval_ids(self) -> Sequence[str]:
        """Every eval task id the family ships, in stable order, before any filter."""
        raise NotImplementedError

    def _filter_value(self, task_id: str, key: str) -> Any:
        """The metadata ``key`` of eval task ``task_id`` (the value its ``info[key]`` has), for a filter."""
        raise NotImplementedError

    def _select_task(self, options: Mapping[str, Any]) -> Task:
        """Pick a task for ``reset`` using only ``self.np_random`` and ``options``."""
        raise NotImplementedError

    #: The ``reset(options=...)`` keys the family takes; any other key is refused, not ignored.
    reset_options: ClassVar[tuple[str, ...]] = ("task_id",)

    #: Whether the family reads ``ANSWER:`` lines (CompGeom's answer is its code: it reads none).
    reads_answers: ClassVar[bool] = True

    def _languages(self) -> tuple[str, ...]:
        """The languages the current task runs, its own first (a bare fence is read as it)."""
        return ("python",)

    def _tool_turn(self, reply: Reply) -> ToolTurn | Grade:
        """A tool turn before the last: run ``reply.code`` and return the next observation."""
        raise NotImplementedError

    def _grade_final(self, reply: Reply) -> Grade:
        """Grade a final reply: one with an ANSWER line, or with no code at all."""
        raise NotImplementedError

    def _grade_last_turn(self, reply: Reply) -> Grade:
        """The last allowed turn brought code, a cut-off fence or foreign code and no ANSWER line."""
        raise NotImplementedError

    def reference_action(self) -> str:
        """An action text that solves the current task (for tests and offline eval only)."""
        raise NotImplementedError

    def chance_action(self, rng: np.random.Generator) -> str:
        """A well-formed action for the current turn that scores only by chance, drawn from
        ``rng``: the ``random`` agent's baseline. It reads the key no further than the family's
        own candidates (a multiple-choice draw), so its accuracy is the chance level."""
        raise NotImplementedError(f"{type(self).__name__} has no chance_action: the random agent has no baseline "
                                  "for its family")

    def grading_key(self) -> Any:
        """What the current task's replies are graded against, host side only: its answer key (a
        family graded on hidden cases returns those). The task-set digest hashes it
        (``gym_sysmath.task_sets.digest``), so a changed key or case changes the task set."""
        assert self.task is not None
        return self.task.answer

    @property
    def task_set(self) -> TaskSet:
        """The installed task set of this env's family: its label (``csapp@1``) and hash go in every ``info``."""
        return installed(self.family)

    def _needs_sandbox(self) -> bool:
        return True

    def _end_episode(self) -> None:
        """The rollout is over: hand its container back, to be purged before anyone reuses it
        (the purge ends the episode's Python session with everything else in it)."""
        self._session = None
        self._hold.end_episode()

    # ------------------------------------------------------------------ shared by families

    def _python_turn(self, code: str) -> ToolTurn:
        """Run a tool turn in the episode's persistent Python session (opened on first use)."""
        if self._session is None:
            self._session = self.rollout.open_session(self.limits)
        restarts, rebuilds = self._session.restarts, self._session.rebuilds
        result = self._session.run(code)
        observation = format_tool_output(result, self.turn, self.max_turns, self._session.restarts > restarts)
        if self._session.rebuilds > rebuilds:
            observation += ("\n[the sandbox lost this session; it was rebuilt by re-running your earlier turns, "
                            "so values drawn at random or from the clock may differ]")
        return ToolTurn(observation, {"execution": result.status, "timing": tool_timing(result)})

    # ------------------------------------------------------------------ filters
    #
    # One place decides which eval tasks a configured env serves: ``task_ids`` (and so ``list``,
    # ``export`` and ``eval``), the draws of ``reset``, the ``task_id`` it admits, and the filters
    # the train split draws under. A reset option of a filter narrows the env's own filter for that
    # reset only; it cannot widen it.

    @property
    def task_ids(self) -> tuple[str, ...]:
        """The eval tasks this env serves, in stable order: every eval task whose metadata passes
        the env's filters (empty on the train split, whose tasks are drawn, not listed)."""
        return () if self.split == "train" else self._served

    @functools.cached_property
    def _every_eval_id(self) -> tuple[str, ...]:
        return tuple(self._eval_ids())

    @functools.cached_property
    def _served(self) -> tuple[str, ...]:
        """The eval tasks the env's filters keep, on either split (the train split of a family
        whose draws start from an eval task draws from these)."""
        return tuple(task_id for task_id in self._every_eval_id
                     if self._excluded_by(task_id, self.applied_filters) is None)

    def _read_filters(self, values: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
        """The ``gym.make`` filter arguments, checked: each given one's names, by argument."""
        declared = {entry.argument for entry in self.filters}
        unknown = sorted(set(values) - declared)
        if unknown:
            raise TypeError(f"{type(self).__name__} declares no filter {unknown}; its filters: {sorted(declared)}")
        read = {entry.argument: entry.read(values.get(entry.argument)) for entry in self.filters}
        return {argument: names for argument, names in read.items() if names is not None}

    def _reset_filters(self, options: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
        """The filters of one reset: the env's, each narrowed by its reset option when given.
        An option that leaves none of the env's own names is refused: options narrow, never widen."""
        wanted = dict(self.applied_filters)
        for entry in self.filters:
            names = entry.read(options.get(entry.argument))
            if names is None:
                continue
            own = wanted.get(entry.argument)
            if own is not None:
                kept = tuple(name for name in own if name in names)
                if not kept:
                    raise ValueError(
                        f"reset option {entry.describe(names)} is outside this env's filter "
                        f"{entry.describe(own)}: a reset option narrows the env's filter for one reset, it cannot "
                        f"widen it; make the env without {entry.argument} to draw from all of them")
                names = kept
            wanted[entry.argument] = names
        return wanted

    def _excluded_by(self, task_id: str, wanted: Mapping[str, tuple[str, ...]], *,
                     unasked: bool = True) -> TaskFilter | None:
        """The first of ``wanted``'s filters that eval task ``task_id`` fails, or ``None``;
        ``unasked``: a filter ``wanted`` leaves out keeps its ``unset`` names (a task named by
        its id was asked for, so a reset by ``task_id`` checks only the filters given)."""
        for entry in self.filters:
            names = wanted.get(entry.argument, entry.unset if unasked else None)
            if names is not None and self._filter_value(task_id, entry.key) not in names:
                return entry
        return None

    def _eval_task_for_reset(self, options: Mapping[str, Any], wanted: Mapping[str, tuple[str, ...]]) -> str:
        """The eval task of this reset: ``options["task_id"]`` when given (it must pass the
        filters: the env's and the reset's own), else one drawn from the served tasks that pass
        ``wanted`` (``_reset_filters(options)``) with the env's RNG."""
        if "task_id" not in options:
            kept = [task_id for task_id in self._every_eval_id if self._excluded_by(task_id, wanted) is None]
            return self._choose(kept, wanted)
        task_id = options["task_id"]
        if task_id not in self._every_eval_id:
            raise unknown_name("task_id", task_id, self._every_eval_id, listed_in="env.unwrapped.task_ids")
        entry = self._excluded_by(task_id, wanted, unasked=False)
        if entry is not None:
            value = self._filter_value(task_id, entry.key)
            if entry.argument in self.applied_filters and value not in self.applied_filters[entry.argument]:
                where = f"this env's filter {entry.describe(self.applied_filters[entry.argument])}"
                fix = f"make the env without {entry.argument} to reset on it"
            else:
                where = f"the reset option {entry.describe(wanted[entry.argument])}"
                fix = "drop that option to reset on it"
            raise ValueError(f"task_id {task_id!r} is excluded by {where} (its {entry.key} is {value!r}); "
                             f"env.unwrapped.task_ids lists the tasks this env serves; {fix}")
        return task_id

    def _describe_filters(self, wanted: Mapping[str, tuple[str, ...]]) -> str:
        return ", ".join(entry.describe(wanted[entry.argument]) for entry in self.filters if entry.argument in wanted)

    def _nothing_served(self) -> str:
        """Why a filtered env serves no eval task, and which values the other filters leave."""
        hints = []
        for entry in self.filters:
            if entry.argument not in self.applied_filters:
                continue
            others = {argument: names for argument, names in self.applied_filters.items() if argument != entry.argument}
            values = sorted({str(self._filter_value(task_id, entry.key)) for task_id in self._every_eval_id
                             if self._excluded_by(task_id, others) is None})
            kept = f" with {self._describe_filters(others)}" if others else ""
            hints.append(f"{entry.argument} {', '.join(values)}{kept}" if values else
                         f"no {entry.argument} value{kept}")
        return (f"{type(self).__name__}: no eval task passes {self._describe_filters(self.applied_filters)}; "
                f"the eval split has tasks for {'; '.join(hints)}. Loosen a filter (or draw fresh tasks with "
                f"split='train' where the family has them)")

    @staticmethod
    def _lookup(records: Mapping[str, Any], task_id: str) -> Any:
        """The record of ``task_id``, or an error that says where the valid ids are."""
        if task_id not in records:
            raise unknown_name("task_id", task_id, tuple(records), listed_in="env.unwrapped.task_ids")
        return records[task_id]

    # ------------------------------------------------------------------ the contract

    @property
    def sandbox(self) -> Sandbox:
        """The process-wide pool this env leases its containers from, acquired on first use, so
        listing tasks, resetting, reading ``reference_action()`` and exporting need no Docker.
        An unusable backend raises ``SandboxUnavailableError`` here, saying what to do."""
        if self._hold.sandbox is None or self._hold.inherited:
            if not self._needs_sandbox():
                raise RuntimeError(f"{type(self).__name__} was configured without a sandbox")
            if self._closed:
                raise RuntimeError(f"{type(self).__name__} is closed")
            return self._hold.acquire(self, self.sandbox_backend, self._pool_size)
        return self._hold.sandbox

    @property
    def _sandbox(self) -> Sandbox | None:
        """The pool this env holds now (None before first use and after close)."""
        return self._hold.sandbox

    @property
    def _lease(self) -> Lease | None:
        """This episode's lease (None before its first job)."""
        return self._hold.lease

    @property
    def needs_sandbox(self) -> bool:
        """Whether this env's episodes run code (and so lease containers)."""
        return self._needs_sandbox()

    @property
    def rollout(self) -> Lease:
        """This episode's own container: every job and turn of the episode runs there, and
        nothing of any other episode does (see ``gym_sysmath.sandbox.pool``)."""
        if self._hold.lease is None:
            self.sandbox  # noqa: B018 - acquires the pool (this process's own, in a forked child)
        return self._hold.rollout()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._end_episode()
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(f"{type(self).__name__}: reset options must be a dict such as "
                            f"{{'task_id': ...}}, got {type(options).__name__}")
        options = dict(options or {})
        for key in options:
            if key not in self.reset_options:
                raise unknown_name("reset option", key, self.reset_options, where=type(self).__name__)
        self.task = self._select_task(options)
        self.turn = 0
        self._done = False
        observation = to_observation(self.task.prompt, self.observation_space.max_length)
        self._transcript = [("prompt", observation)]
        info = self._base_info(verdict=None, scoring_error=None)
        info.update(self.task.metadata)
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply the action protocol (``gym_sysmath.actions``), the same for every family and turn."""
        if self.task is None or self._done:
            raise ResetNeeded("call reset() before step(): the episode is over or has not started")
        self.turn += 1
        self._transcript.append(("action", action if isinstance(action, str) else _safe_repr(action)))
        problem = check_action_text(action, self.action_space.max_length)
        if problem:
            return self._finish(Grade(Verdict.FORMAT_ERROR, problem))
        reply = read_reply(action, self._languages())
        read = reply.describe(self.reads_answers)
        kind = reply.kind(self.reads_answers)
        last = self.turn >= self.max_turns or self.code_via == "tool"  # with the tool, every reply is final
        try:
            if kind in ("answer", "final"):
                how = "graded by its ANSWER line" if kind == "answer" else "a final reply"
                if kind == "answer" and (reply.blocks or reply.cut):
                    how += "; its code was not run"
                outcome: ToolTurn | Grade = self._grade_final(reply)
            elif last:
                how = (f"the last turn ({self.turn} of {self.max_turns})" if self.code_via == "fence" else
                       "the final reply (code_via='tool': a reply is graded as the last turn is)")
                outcome = self._grade_last_turn(reply)
            elif kind == "cut":
                how = "cut off inside a fence: nothing ran, the turn counts"
                outcome = ToolTurn(self._cut_message(reply))
            elif kind == "code":
                assert reply.code is not None  # kind "code" means a block in a language this task runs
                how = f"a tool turn: ran the {reply.code.fence} block"
                outcome = self._tool_turn(reply)
            else:
                how = "a tool turn: no block in a language this task runs"
                outcome = ToolTurn("\n".join([*reply.notes(), f"[turn {self.turn} of {self.max_turns}]"]))
        except SandboxError as error:
            return self._finish_with_scoring_error(error)
        if isinstance(outcome, ToolTurn):
            notes = reply.notes() if kind == "code" else []
            if self.reads_answers and code_comment_answer(reply):
                notes.append("[an ANSWER line inside a code block is not read: to answer, write it on a line of its "
                             "own outside code fences]")
            text = "\n".join([outcome.observation, *notes]) if notes else outcome.observation
            observation = to_observation(text, self.observation_space.max_length)
            self._transcript.append(("observation", observation))
            info = self._base_info(verdict=None, scoring_error=None)
            info["detail"] = f"{read}: {how}"
            info.update(outcome.info)
            return observation, 0.0, False, False, info
        return self._finish(outcome, f"{read}: {how}")

    def run_code(self, code: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """One call of the ``run_code`` tool (``code_via="tool"``): ``code`` runs as a code block
        of the task's language runs on a tool turn (CsappExact and LinearAlgebra: the episode's
        Python session; CompGeom: the candidate, built and run on the public cases). Returns
        ``step``'s five values; the observation is the tool's output.

        A call is a turn; the last turn is the final reply (``step``), so calls past
        ``max_turns - 1`` run nothing, say so and count nothing. A harness failure truncates
        the episode with a ``scoring_error``, as in ``step``.
        """
        if self.code_via != "tool":
            raise RuntimeError("run_code is the tool of an env made with code_via='tool'; this one runs the code "
                               "blocks of the replies sent to step()")
        if self.task is None or self._done:
            raise ResetNeeded("call reset() before run_code(): the episode is over or has not started")
        info = self._base_info(verdict=None, scoring_error=None)
        if self.turn >= self.max_turns - 1:
            info["detail"] = "a run_code call past the episode's calls: nothing ran, no turn counted"
            observation = (f"Not run: this episode allows {self.max_turns - 1} run_code call(s), all used. Reply "
                           f"without a tool call: that reply is graded.")
            return observation, 0.0, False, False, info
        self.turn += 1
        info["turn"] = self.turn  # the call's own turn, as step's info gives it
        language = self._languages()[0]
        problem = check_action_text(code, self.action_space.max_length)
        self._transcript.append(("action", f"[run_code]\n{code if isinstance(code, str) else repr(code)}"))
        if problem:
            text = f"Not run: the code {problem.removeprefix('the action ')}.\n[turn {self.turn} of {self.max_turns}]"
            info["detail"] = f"a run_code call that could not be read: {problem}"
        else:
            body, surrogates = _SURROGATE.subn("\ufffd", code if code.endswith("\n") else code + "\n")
            block = Block(language, language, body, 0, 0, surrogates=surrogates)
            reply = Reply(f"```{language}\n{body}```", (), (block,), None, self._languages())
            try:
                outcome = self._tool_turn(reply)
            except SandboxError as error:
                return self._finish_with_scoring_error(error)
            if isinstance(outcome, Grade):  # a family whose code turn ends the episode
                return self._finish(outcome, f"a run_code call ({language})")
            text = "\n".join([outcome.observation, *reply.notes()])
            info["detail"] = f"a run_code call: ran it as a {language} tool turn"
            info.update(outcome.info)
        observation = to_observation(text, self.observation_space.max_length)
        self._transcript.append(("observation", observation))
        return observation, 0.0, False, False, info

    def _cut_message(self, reply: Reply) -> str:
        assert reply.cut is not None
        return (f"Your reply ended inside an unclosed {reply.cut.fence} block (it was probably cut off by the "
                f"token limit), so nothing ran and nothing was graded. Send the code again, shorter if need be, "
                f"with its closing ```.\n[turn {self.turn} of {self.max_turns}]")

    def _finish(self, grade: Grade, read: str = "") -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._done = True
        self._end_episode()
        reward = 1.0 + grade.bonus if grade.correct else 0.0
        # The detail stays in info: it may describe the key (a shape, a sign) to a trainer.
        observation = f"Episode over. Verdict: {grade.verdict.value}."
        self._transcript.append(("observation", observation))
        info = self._base_info(verdict=grade.verdict.value, scoring_error=None)
        info["detail"] = "; ".join(part for part in (read, grade.detail) if part)
        info.update(grade.info)
        return observation, reward, True, False, info

    def _finish_with_scoring_error(self, error: SandboxError) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """The harness failed (after its retry): reward 0, truncated, and say so."""
        self._done = True
        self._end_episode()
        observation = "Episode stopped: the grading harness failed (not your fault); this step is not scored."
        self._transcript.append(("observation", observation))
        info = self._base_info(verdict=Verdict.SCORING_ERROR.value, scoring_error=str(error)[:500])
        info["detail"] = "the harness failed; the sample should be dropped, not counted as wrong"
        return observation, 0.0, False, True, info

    def _base_info(self, *, verdict: str | None, scoring_error: str | None) -> dict[str, Any]:
        """The contract's ``info`` fields (``INFO_KEYS``); families add their own after them."""
        assert self.task is not None
        return {
            "task_id": self.task.task_id,
            "family": self.family,
            "turn": self.turn,
            "verdict": verdict,
            "correct": verdict == Verdict.CORRECT.value,
            "scoring_error": scoring_error,
            "task_set": self.task_set.label,
            "task_set_hash": self.task_set.hash,
        }

    def _choose(self, candidates: Sequence[str], wanted: Mapping[str, tuple[str, ...]] | None = None) -> str:
        """Draw one id with the env's own RNG; a clear error when filters leave nothing."""
        if not candidates:
            which = (f"passes {self._describe_filters(wanted)} (the env's filters narrowed by the reset options)"
                     if wanted else "matches the given reset options")
            raise ValueError(f"no {self.family} eval task {which}; env.unwrapped.task_ids lists the tasks this "
                             "env serves")
        return candidates[int(self.np_random.integers(len(candidates)))]

    @property
    def messages(self) -> list[dict[str, str]]:
        """The episode so far as OpenAI-style chat messages: the prompt and every observation as
        ``user`` turns, every action as an ``assistant`` turn (a non-text action as its repr).
        The last message is what the model answers next (``Episode over...`` once it ended)."""
        return [{"role": ROLES[kind], "content": text} for kind, text in self._transcript]

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n".join(f"[{role}]\n{escape_controls(text)}" for role, text in self._transcript) + "\n"

    def close(self) -> None:
        self._end_episode()
        self._closed = True
        self._hold.release()
        super().close()


def core_env(env: gym.Env) -> SysmathEnv:
    """The gym-sysmath env under Gymnasium's wrappers (``env.unwrapped``), typed as one, so its
    ``task_ids``, ``family`` and ``reference_action()`` are checked where they are used."""
    core = env.unwrapped
    if not isinstance(core, SysmathEnv):
        raise TypeError(f"{type(core).__name__} is not a gym-sysmath env (a gym_sysmath.env.SysmathEnv)")
    return core

"""Offline evaluation: run an agent over envs' fixed eval tasks, log every sample, summarize.

What ``gym-sysmath eval`` does, as a library (``evaluate``, defined here with the orchestration
around it). The pieces, top to bottom, one module each:

- *Plan* (``plan``): each sample is (env id, task id, rollout) with a seed derived from those
  and the run seed alone, so a sample's seed does not depend on ``-n``, on order or on
  concurrency.
- *Run* (``run``): ``run_episode`` plays one sample; ``run_local`` runs many on threads, each
  thread owning its own env instances while all share the process's warm sandbox pool
  (``evaluation.ray_runner``, public as ``integrations.ray_rollouts``, runs the same function on Ray actors).
- *Log* (``log``): one JSON line per finished sample in ``results.jsonl``, flushed as it
  lands, a failed one included (verdict ``failed``, with its error and the turns it got
  through); with ``resume`` the samples already there are skipped, failed ones played
  again. ``run.json`` beside it holds the run's fingerprint (``run_fingerprint``: the
  agent's configuration and the model the server says it serves, env ids and arguments,
  seed, rollouts, sandbox backend), and ``resume`` refuses a log that another configuration
  wrote. Every row names the task set it was played on (``task_set``, ``task_set_hash``), and
  ``resume`` refuses a log played on another task set than this install's. One eval writes a
  directory at a time (``log.one_writer``: a second one stops at once, naming the first), and
  rows logged twice for one sample are counted (``duplicate_rows`` in ``summary.json``).
- *Summarize* (``summary``): a pure function of the logged samples in plan order, so a
  resumed run writes the same ``summary.json`` as an uninterrupted one (but for ``time``,
  the sessions' whole wall time). Scoring errors (harness failures) and failed samples are
  counted and left out of every denominator, never scored as wrong. Tasks whose sampled
  rollouts all came back byte-identical are counted too (``identical_rollouts``), and the
  run's notes warn of a server that may not be sampling.
- *Report* (``report``): a scoreboard table, breakdown lines, a PNG of the breakdowns
  (matplotlib, imported only to plot), and the progress bar; ``viewer`` writes a run
  directory's transcripts as one self-contained HTML page (``gym-sysmath report``).

The names exported here are the library's: ``evaluate``, what it returns and raises
(``EvalRun``, ``EvalError``) and the CLI's exit status over its runs (``exit_code``); the
logged rows (``SampleResult``, ``SampleFailure``, ``RowVerdict``); planning (``choose_tasks``,
``plan_samples``); and what reads a run back (``ResultsLog``, ``run_fingerprint``,
``summarize``, ``pass_at_k``, ``plot_summary``). Everything else is imported from its own module.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

from gym_sysmath.agents import Agent, make_agent
from gym_sysmath.env import core_env
from gym_sysmath.evaluation.log import (
    ResultsLog,
    bind_run_header,
    one_writer,
    record_session,
    run_fingerprint,
    sessions_time,
)
from gym_sysmath.evaluation.plan import EvalError, SampleSpec, choose_tasks, plan_samples
from gym_sysmath.evaluation.report import EvalRun, Progress, plot_summary
from gym_sysmath.evaluation.run import (
    Outcome,
    RowVerdict,
    SampleFailure,
    SampleResult,
    _jsonable,
    close_all,
    run_local,
    take_sandbox,
)
from gym_sysmath.evaluation.summary import identical_rollouts_note, pass_at_k, summarize
from gym_sysmath.task_sets import TaskSet

#: Eval events: a run's start, its resume (how much was logged), its end or interruption.
logger = logging.getLogger(__name__)

__all__ = [
    "EvalError",
    "EvalRun",
    "ResultsLog",
    "RowVerdict",
    "SampleFailure",
    "SampleResult",
    "choose_tasks",
    "evaluate",
    "exit_code",
    "pass_at_k",
    "plan_samples",
    "plot_summary",
    "run_fingerprint",
    "summarize",
]

#: A sample's key in the plan and the log: (env id, task id, rollout).
SampleKey = tuple[str, str, int]


def _task_ids(env_ids: Sequence[str], make_kwargs: Mapping[str, Any], take_sandboxes: bool
              ) -> tuple[dict[str, tuple[str, ...]], list[gym.Env]]:
    """Each env's eval task ids, from one env per id that stays open for the run. On the
    local path it is made like the workers' envs, so a missing Docker daemon or a stale image
    stops the eval before any episode, and it holds the shared sandbox pool while worker
    threads come and go; a Ray driver only lists tasks, which needs no Docker there."""
    probes: list[gym.Env] = []
    ids: dict[str, tuple[str, ...]] = {}
    try:
        for env_id in env_ids:
            probes.append(gym.make(env_id, **make_kwargs))
            if take_sandboxes:
                take_sandbox(probes[-1])  # a missing daemon stops the eval before any episode
            ids[env_id] = tuple(core_env(probes[-1]).task_ids)
            if not ids[env_id]:
                raise EvalError(f"{env_id} has no eval tasks with these arguments")
    except BaseException:
        close_all(dict(enumerate(probes)))
        raise
    return ids, probes


def _check_task_sets(done: Mapping[SampleKey, SampleResult], task_sets: Mapping[str, TaskSet],
                     path: Path) -> None:
    """Refuse to resume a log whose samples were played on another task set than this install's:
    their scores and the new ones would not measure the same tasks (failed rows are played again)."""
    for result in done.values():
        current = task_sets.get(result.env_id)
        if current is None or result.verdict is RowVerdict.FAILED:
            continue
        if (result.task_set, result.task_set_hash) != (current.label, current.hash):
            logged = (f"task set {result.task_set} ({result.task_set_hash})" if result.task_set else
                      "a task set it did not record (before task sets were versioned)")
            raise EvalError(f"{path}: its {result.env_id} samples were played on {logged}, this install has "
                            f"{current.label} ({current.hash}); resuming would mix two task sets: finish it with "
                            f"the install that started it, or use another --out")


def _check_resumable(done: Mapping[SampleKey, SampleResult], specs: Sequence[SampleSpec],
                     agent: Agent, path: Path) -> None:
    """Refuse to resume a log that another agent or seed wrote: its samples are not this run's."""
    for spec in specs:
        result = done.get(spec.key)
        if result is not None and (result.seed != spec.seed or result.agent != agent.name):
            raise EvalError(f"{path} was written by another run ({result.agent}, seed {result.seed} for "
                            f"{spec.key}; this run: {agent.name}, seed {spec.seed}); use another --out")


def _check_arguments(rollouts: int, resume: bool, out: str | Path | None) -> None:
    """Refuse arguments that cannot make a run, before any env is made."""
    if rollouts < 1:
        raise EvalError(f"rollouts must be at least 1, got {rollouts}")
    if resume and out is None:
        raise EvalError("resume needs an output directory (--out) holding results.jsonl")


def _plan(env_ids: Sequence[str], task_ids: Mapping[str, tuple[str, ...]], agent: Agent, n: int | None,
          rollouts: int, seed: int) -> list[SampleSpec]:
    """Every sample of the run in plan order, each key once: the order the summary follows."""
    specs = [spec for env_id in env_ids for spec in plan_samples(env_id, task_ids[env_id], agent, n, rollouts, seed)]
    if not specs:
        raise EvalError(f"nothing to evaluate for {agent.name} on {', '.join(env_ids)}")
    if len({spec.key for spec in specs}) != len(specs):  # plan_samples makes each env's keys unique; env ids are too
        raise EvalError(f"the plan for {agent.name} holds a sample more than once")
    return specs


def _open_log(out_dir: Path | None, specs: Sequence[SampleSpec], agent: Agent, fingerprint: Mapping[str, Any],
              task_sets: Mapping[str, TaskSet], *, resume: bool, overwrite: bool
              ) -> tuple[ResultsLog | None, dict[SampleKey, SampleResult]]:
    """The log to append to and, with ``resume``, what it holds: refused unless this run wrote it."""
    if out_dir is None:
        return None, {}
    log = ResultsLog(out_dir / "results.jsonl", resume=resume, overwrite=overwrite)
    done = log.load() if resume else {}
    bind_run_header(log, fingerprint)
    _check_task_sets(done, task_sets, log.path)
    _check_resumable(done, specs, agent, log.path)
    return log, done


def _left_to_play(specs: Sequence[SampleSpec], results: Mapping[SampleKey, SampleResult]) -> list[SampleSpec]:
    """The samples the log does not hold yet, and the failed ones, which are played again."""
    return [spec for spec in specs if spec.key not in results or results[spec.key].verdict is RowVerdict.FAILED]


def _duplicates_said(count: int) -> str:
    return (f"results.jsonl holds {count} duplicate row(s), a sample logged again after it was scored (two evals "
            "writing one --out?); each sample's last row is used")


def _notes(done: Mapping[SampleKey, SampleResult], planned: set[SampleKey], duplicates: int,
           summary: Mapping[str, Any]) -> tuple[str, ...]:
    """What the run should tell its user that the scoreboard does not show."""
    notes = []
    extra = len(done) - len(planned.intersection(done))
    if extra:
        notes.append(f"{extra} logged sample(s) outside this plan were kept in results.jsonl and left out")
    if duplicates:
        notes.append(_duplicates_said(duplicates))
    identical = identical_rollouts_note(summary)
    if identical:
        notes.append(identical)
    return tuple(notes)


class _Recorder:
    """Receives each outcome from the worker threads or actors: logs it, keeps it, moves the bar."""

    def __init__(self, agent: str, task_sets: Mapping[str, TaskSet], log: ResultsLog | None,
                 results: dict[SampleKey, SampleResult], bar: Progress):
        self.agent, self.task_sets, self.log, self.results, self.bar = agent, task_sets, log, results, bar
        self.failures: list[SampleFailure] = []
        self.logged = 0
        self._lock = threading.Lock()

    def __call__(self, outcome: Outcome) -> None:
        with self._lock:
            if isinstance(outcome, SampleFailure):
                self.failures.append(outcome)
                played_on = self.task_sets[outcome.spec.env_id]
                result = outcome.as_result(self.agent, (played_on.label, played_on.hash))
            else:
                result = outcome
            if self.log:
                self.log.append(result)
                self.logged += 1
            self.results[result.key] = result
        self.bar.update(outcome)


def _play_all(todo: Sequence[SampleSpec], agent: Agent, record: _Recorder, *, ray: bool | str | None,
              concurrency: int | None, make_kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    """Play the samples left to play on Ray actors or local threads; Ray's report of its actors, if Ray.
    Local threads tell the progress line each turn; Ray actors only each sample (no per-turn callback)."""
    if ray is not None and ray is not False:
        from gym_sysmath.evaluation.ray_runner import run_ray

        return run_ray(todo, agent, record, workers=concurrency, make_kwargs=make_kwargs,
                       address=None if ray is True else str(ray))
    from gym_sysmath.sandbox.pool import default_pool_size

    default = getattr(agent, "max_concurrent_requests", None) or default_pool_size()
    run_local(todo, agent, record, concurrency=concurrency or default, make_kwargs=make_kwargs,
              on_turn=record.bar.turn)
    return None


def _session(todo: Sequence[SampleSpec], agent: Agent, record: _Recorder, *, ray: bool | str | None,
             concurrency: int | None, make_kwargs: Mapping[str, Any], out_dir: Path | None,
             started: float) -> dict[str, Any] | None:
    """One session on the log: play, then say and record how it ended, an interrupted one included."""
    interrupted = True
    try:
        report = _play_all(todo, agent, record, ray=ray, concurrency=concurrency, make_kwargs=make_kwargs)
        interrupted = False
        return report
    finally:
        record.bar.close()
        if interrupted:
            logger.warning("eval %s: interrupted after logging %d sample(s); --resume continues",
                           agent.name, record.logged)
        else:
            logger.info("eval %s: done: %d sample(s) logged in %.1f s", agent.name, record.logged,
                        time.perf_counter() - started)
        if out_dir:
            record_session(out_dir, time.perf_counter() - started, record.logged, interrupted)


def _summary(ordered: Sequence[SampleResult], specs: Sequence[SampleSpec], config: Mapping[str, Any],
             ray_report: dict[str, Any] | None, out_dir: Path | None, started: float) -> dict[str, Any]:
    """``summary.json``: the logged samples' scores, what the plan left unplayed, and the run's time."""
    summary = summarize(ordered, config)
    summary["planned"] = len(specs)
    summary["missing"] = len(specs) - len(ordered)
    if ray_report is not None:  # the actors, and any whose sandbox could not start (their samples re-ran)
        summary["ray"] = ray_report
    summary["time"] = sessions_time(out_dir) if out_dir else {"seconds": round(time.perf_counter() - started, 3),
                                                               "sessions": 1}
    return summary


def _write_summary(out_dir: Path | None, summary: Mapping[str, Any], ordered: Sequence[SampleResult], plot: bool,
                   agent: str) -> Path | None:
    """Write ``summary.json`` and the breakdowns' PNG beside the log; the PNG's path, if drawn."""
    if out_dir is None:
        return None
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if plot and ordered:
        return plot_summary(summary, out_dir / "breakdowns.png", title=f"gym-sysmath eval: {agent}")
    return None


def evaluate(env_ids: Sequence[str], agent: Agent | str = "reference", *, n: int | None = None,
             rollouts: int = 1, seed: int = 0, concurrency: int | None = None, out: str | Path | None = None,
             resume: bool = False, overwrite: bool = False, make_kwargs: Mapping[str, Any] | None = None,
             ray: bool | str | None = None, progress: bool = True, plot: bool = True) -> EvalRun:
    """Evaluate ``agent`` on the eval split of each env id.

    ``n`` tasks per env (``choose_tasks``), ``rollouts`` samples per task,
    ``concurrency`` episodes in flight: threads here (default: the sandbox pool's size, or
    for an endpoint agent its ``max_concurrent_requests``, so that episodes do not queue
    behind one another's requests and evict one another's prompt cache), or Ray actors with
    ``ray`` (default: one per cluster CPU), which is True for a local or ``RAY_ADDRESS``
    instance, or a cluster's address. With ``out``, writes ``results.jsonl``,
    ``summary.json``, ``sessions.jsonl`` and ``breakdowns.png`` there; ``resume`` skips the
    samples already logged (failed ones are played again). ``out`` is held for the whole
    call: an eval already writing it makes this one raise ``EvalError`` at once, naming it.
    """
    agent = make_agent(agent) if isinstance(agent, str) else agent
    env_ids = list(dict.fromkeys(env_ids))  # an id named twice is evaluated once
    _check_arguments(rollouts, resume, out)
    make_kwargs = dict(make_kwargs or {})
    use_ray = ray is not None and ray is not False
    out_dir = Path(out) if out is not None else None
    with one_writer(out_dir) if out_dir is not None else contextlib.nullcontext():  # before any file is touched
        started = time.perf_counter()
        task_ids, probes = _task_ids(env_ids, make_kwargs, take_sandboxes=not use_ray)
        try:  # plan, open (or resume) the log, play what is left; then summarize
            task_sets = {env_id: core_env(probe).task_set for env_id, probe in zip(env_ids, probes, strict=True)}
            specs = _plan(env_ids, task_ids, agent, n, rollouts, seed)
            planned = {spec.key for spec in specs}
            fingerprint = run_fingerprint(env_ids, agent, rollouts=rollouts, seed=seed, make_kwargs=make_kwargs)
            log, done = _open_log(out_dir, specs, agent, fingerprint, task_sets, resume=resume, overwrite=overwrite)
            duplicates = log.duplicate_rows if log else 0
            results = {key: result for key, result in done.items() if key in planned}
            todo = _left_to_play(specs, results)
            if resume and log:
                logger.info("eval %s: resuming %s: %d of %d samples logged, %d to play (failed ones again)%s",
                            agent.name, log.path, len(specs) - len(todo), len(specs), len(todo),
                            f"; {_duplicates_said(duplicates)}" if duplicates else "")
            logger.info("eval %s: start: %d samples on %s (%s)", agent.name, len(todo), ", ".join(env_ids),
                        "ray" if use_ray else f"{concurrency or 'default'} in flight")
            bar = Progress(len(specs), f"eval {agent.label}", done=len(specs) - len(todo), enabled=progress,
                           turns=agent.turn_progress, live_turns=not use_ray)
            record = _Recorder(agent.name, task_sets, log, results, bar)
            ray_report = _session(todo, agent, record, ray=ray, concurrency=concurrency, make_kwargs=make_kwargs,
                                  out_dir=out_dir, started=started)
        finally:
            close_all(dict(enumerate(probes)))
        ordered = tuple(results[spec.key] for spec in specs if spec.key in results)
        config = {"agent": agent.name, "label": agent.label, "env_ids": list(env_ids), "n": n, "rollouts": rollouts,
                  "seed": seed, "make_kwargs": _jsonable(make_kwargs), "fingerprint": fingerprint}
        summary = _summary(ordered, specs, config, ray_report, out_dir, started)
        if log:
            summary["duplicate_rows"] = duplicates
        plot_path = _write_summary(out_dir, summary, ordered, plot, agent.name)
    return EvalRun(agent.name, summary, ordered, tuple(record.failures), out_dir, time.perf_counter() - started,
                   plot_path, _notes(done, planned, duplicates, summary), label=agent.given_label)


def exit_code(runs: Sequence[EvalRun]) -> int:
    """1 when the reference agent is below 100% or anything failed or failed to score; else 0."""
    for run in runs:
        overall = run.summary["overall"]
        if run.failures or run.summary.get("missing") or overall["scoring_errors"] or overall.get("failed"):
            return 1
        if run.agent == "reference" and any(stats["accuracy"] != 1.0 for stats in run.summary["envs"].values()):
            return 1
    return 0

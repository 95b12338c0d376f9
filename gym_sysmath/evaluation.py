"""Offline evaluation: run an agent over envs' fixed eval tasks, log every sample, summarize.

What ``gym-sysmath eval`` does, as a library (``evaluate``). The pieces, top to bottom:

- *Plan*: each sample is (env id, task id, rollout) with a seed derived from those and the run
  seed alone, so a sample's seed does not depend on ``-n``, on order or on concurrency.
- *Run*: ``run_episode`` plays one sample; ``run_local`` runs many on threads, each thread
  owning its own env instances while all share the process's warm sandbox pool
  (``integrations.ray_rollouts`` runs the same function on Ray actors).
- *Log*: one JSON line per finished sample in ``results.jsonl``, flushed as it lands; with
  ``resume`` the samples already there are skipped. ``run.json`` beside it holds the run's
  fingerprint (``run_fingerprint``: the agent's configuration, env ids and arguments, seed,
  rollouts, sandbox backend), and ``resume`` refuses a log that another configuration wrote.
- *Summarize*: a pure function of the logged samples in plan order, so a resumed run writes
  the same ``summary.json`` as an uninterrupted one. Scoring errors (harness failures) are
  counted and left out of every denominator, never scored as wrong.
- *Report*: a scoreboard table, breakdown lines, and a PNG of the breakdowns (matplotlib,
  imported only to plot).
"""

from __future__ import annotations

import inspect
import json
import math
import queue
import sys
import threading
import time
import warnings
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import gymnasium as gym
import numpy as np

from gym_sysmath.agents import Agent, Turn, make_agent
from gym_sysmath.env import INFO_KEYS, SysmathEnv

#: Task metadata keys that get a per-value accuracy breakdown, when a family provides them.
BREAKDOWN_KEYS = ("category", "difficulty", "topic", "language")
#: ``info`` fields every env sets on every step: not task metadata.
BASE_INFO_KEYS = frozenset({*INFO_KEYS, "detail"})  # the contract's fields: not task metadata
DIFFICULTY_ORDER = ("easy", "medium", "hard")
SCORING_ERROR = "scoring_error"
#: A safety net: every family ends an episode within its ``max_turns``.
MAX_STEPS = 256
#: The run header beside ``results.jsonl``: the fingerprint ``resume`` checks.
RUN_HEADER = "run.json"
RUN_HEADER_FORMAT = 1


class EvalError(RuntimeError):
    """The eval cannot start as asked (a results file from another run, an empty plan)."""


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class SampleSpec:
    """One episode to play."""

    env_id: str
    task_id: str
    rollout: int
    seed: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.env_id, self.task_id, self.rollout)


@dataclass(frozen=True)
class SampleResult:
    """One played episode, as logged: ``observations[0]`` is the prompt and
    ``observations[i + 1]`` what the env answered to ``actions[i]``."""

    env_id: str
    task_id: str
    rollout: int
    seed: int
    agent: str
    actions: tuple[str, ...]
    observations: tuple[str, ...]
    reward: float
    verdict: str
    scoring_error: str | None
    detail: str | None
    metadata: Mapping[str, Any]
    timings: Mapping[str, float]

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.env_id, self.task_id, self.rollout)

    def to_record(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id, "task_id": self.task_id, "rollout": self.rollout, "seed": self.seed,
            "agent": self.agent, "actions": list(self.actions), "observations": list(self.observations),
            "reward": self.reward, "verdict": self.verdict, "scoring_error": self.scoring_error,
            "detail": self.detail, "metadata": dict(self.metadata), "timings": dict(self.timings),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> SampleResult:
        return cls(
            env_id=record["env_id"], task_id=record["task_id"], rollout=int(record["rollout"]),
            seed=int(record["seed"]), agent=record.get("agent", ""), actions=tuple(record.get("actions", ())),
            observations=tuple(record.get("observations", ())), reward=float(record["reward"]),
            verdict=record["verdict"], scoring_error=record.get("scoring_error"), detail=record.get("detail"),
            metadata=dict(record.get("metadata") or {}), timings=dict(record.get("timings") or {}),
        )


@dataclass(frozen=True)
class SampleFailure:
    """A sample that produced no result (the agent or the host failed, not the task's
    grading): it is not logged, so ``--resume`` plays it again."""

    spec: SampleSpec
    error: str


Outcome = SampleResult | SampleFailure


# --------------------------------------------------------------------------- plan


def sample_seed(run_seed: int, env_id: str, task_id: str, rollout: int) -> int:
    """A 31-bit seed from the sample's identity alone (stable across processes and runs)."""
    sequence = np.random.SeedSequence([run_seed, zlib.crc32(env_id.encode()), zlib.crc32(task_id.encode()), rollout])
    return int(sequence.generate_state(1)[0] >> 1)


def choose_tasks(env_id: str, task_ids: Sequence[str], n: int | None) -> list[str]:
    """``n`` of ``task_ids`` (all when ``n`` is None or large), in task order: the first
    ``n`` of a permutation fixed per env id. Not the first ``n`` (task lists are grouped by
    topic), not evenly spaced (that aliases with the grouping), and not tied to ``--seed``,
    so runs with different seeds see the same tasks; a larger ``n`` keeps a smaller one's."""
    if n is None or n >= len(task_ids):
        return list(task_ids)
    order = np.random.default_rng(zlib.crc32(env_id.encode())).permutation(len(task_ids))
    return [task_ids[i] for i in sorted(order[: max(n, 0)])]


def plan_samples(env_id: str, task_ids: Sequence[str], agent: Agent, n: int | None = None,
                 rollouts: int = 1, seed: int = 0) -> list[SampleSpec]:
    """The samples of one env, in task order then rollout order."""
    decided = agent.samples(env_id, task_ids)
    if decided is None:
        pairs = [(task_id, rollout) for task_id in choose_tasks(env_id, task_ids, n) for rollout in range(rollouts)]
    else:
        chosen = set(choose_tasks(env_id, list(dict.fromkeys(task_id for task_id, _ in decided)), n))
        pairs = [pair for pair in decided if pair[0] in chosen]
        repeated = [pair for pair, count in Counter(pairs).items() if count > 1]
        if repeated:
            task_id, rollout = repeated[0]
            raise EvalError(f"{agent.name} plans {env_id} task {task_id!r} rollout {rollout} more than once; "
                            "each sample must be planned once")
    return [SampleSpec(env_id, task_id, rollout, sample_seed(seed, env_id, task_id, rollout))
            for task_id, rollout in pairs]


# --------------------------------------------------------------------------- run


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def run_episode(env: gym.Env, agent: Agent, spec: SampleSpec) -> SampleResult:
    """Play one sample to its end: reset on the task, ask the agent, step, repeat."""
    started = time.perf_counter()
    observation, info = env.reset(seed=spec.seed, options={"task_id": spec.task_id})
    if info.get("task_id") != spec.task_id:
        raise RuntimeError(f"{spec.env_id} reset to {info.get('task_id')!r}, not {spec.task_id!r}")
    reset_s = time.perf_counter() - started
    metadata = _jsonable({key: value for key, value in info.items() if key not in BASE_INFO_KEYS})
    history: list[dict[str, str]] = []
    actions: list[str] = []
    observations = [observation]
    agent_s = env_s = 0.0
    for index in range(MAX_STEPS):
        mark = time.perf_counter()
        action = agent.act(Turn(spec.env_id, spec.task_id, spec.rollout, spec.seed, index, observation,
                                tuple(history), info, env))
        agent_s += time.perf_counter() - mark
        mark = time.perf_counter()
        next_observation, reward, terminated, truncated, info = env.step(action)
        env_s += time.perf_counter() - mark
        logged = action if isinstance(action, str) else repr(action)
        history += [{"role": "user", "content": observation}, {"role": "assistant", "content": logged}]
        actions.append(logged)
        observations.append(next_observation)
        observation = next_observation
        if terminated or truncated:
            break
    else:
        raise RuntimeError(f"{spec.env_id} did not end the episode within {MAX_STEPS} steps")
    timings = {"reset_s": reset_s, "agent_s": agent_s, "env_s": env_s, "total_s": time.perf_counter() - started}
    return SampleResult(
        env_id=spec.env_id, task_id=spec.task_id, rollout=spec.rollout, seed=spec.seed, agent=agent.name,
        actions=tuple(actions), observations=tuple(observations), reward=float(reward),
        verdict=str(info.get("verdict")), scoring_error=info.get("scoring_error"),
        detail=None if info.get("detail") is None else str(info["detail"]), metadata=metadata,
        timings={key: round(value, 6) for key, value in timings.items()},
    )


def play(envs: dict[str, gym.Env], agent: Agent, spec: SampleSpec, make_kwargs: Mapping[str, Any]) -> Outcome:
    """``run_episode`` on this worker's env for the sample's id (made on first use); any
    exception becomes a ``SampleFailure`` so one bad sample does not stop the eval."""
    try:
        env = envs.get(spec.env_id)
        if env is None:
            env = envs[spec.env_id] = gym.make(spec.env_id, **make_kwargs)
        return run_episode(env, agent, spec)
    except Exception as exc:  # reported per sample, retried by --resume
        return SampleFailure(spec, f"{type(exc).__name__}: {exc}")


def close_all(envs: dict[str, gym.Env]) -> None:
    for env in envs.values():
        try:
            env.close()
        except Exception:  # closing is best effort
            pass
    envs.clear()


def run_local(specs: Sequence[SampleSpec], agent: Agent, on_outcome: Callable[[Outcome], None], *,
              concurrency: int = 1, make_kwargs: Mapping[str, Any] | None = None) -> None:
    """Play ``specs`` on ``concurrency`` threads in this process. Each thread owns its envs;
    the envs share the process-wide warm sandbox pool. Ctrl-C lets the episodes in flight
    finish (their results are logged) and then re-raises."""
    work: queue.SimpleQueue[SampleSpec] = queue.SimpleQueue()
    for spec in specs:
        work.put(spec)
    stop = threading.Event()
    kwargs = dict(make_kwargs or {})

    def worker() -> None:
        envs: dict[str, gym.Env] = {}
        try:
            while not stop.is_set():
                try:
                    spec = work.get_nowait()
                except queue.Empty:
                    return
                on_outcome(play(envs, agent, spec, kwargs))
        finally:
            close_all(envs)

    threads = [threading.Thread(target=worker, name=f"gym-sysmath-eval-{i}", daemon=True)
               for i in range(max(1, min(concurrency, len(specs))))]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    except KeyboardInterrupt:
        stop.set()
        for thread in threads:
            thread.join()
        raise


# --------------------------------------------------------------------------- log


class ResultsLog:
    """``results.jsonl``: appended one flushed line per sample, read back for ``--resume``."""

    def __init__(self, path: Path, *, resume: bool = False, overwrite: bool = False):
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size and not resume:
            if not overwrite:
                raise EvalError(f"{path} exists: pass --resume to continue it, --overwrite to replace it, "
                                "or choose another --out")
            path.unlink()

    def load(self) -> dict[tuple[str, str, int], SampleResult]:
        """The samples logged so far; a line cut short by a crash is dropped from the file."""
        if not self.path.exists():
            return {}
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            data = data[: data.rfind(b"\n") + 1]
            with self.path.open("r+b") as handle:
                handle.truncate(len(data))
        loaded: dict[tuple[str, str, int], SampleResult] = {}
        for number, line in enumerate(data.decode("utf-8").splitlines(), 1):
            if line.strip():
                try:
                    result = SampleResult.from_record(json.loads(line))
                except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    raise EvalError(f"{self.path}:{number}: not a result line ({exc})") from exc
                loaded[result.key] = result
        return loaded

    def append(self, result: SampleResult) -> None:
        line = json.dumps(result.to_record(), default=str) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()


def run_fingerprint(env_ids: Sequence[str], agent: Agent, *, rollouts: int, seed: int,
                    make_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """What decides a run's samples and their outcomes, as JSON: the agent's configuration
    (``Agent.fingerprint``: a responses file's sha256, a python target, an endpoint's model,
    URL and sampling arguments, never a key), the env ids and their ``gym.make`` arguments,
    the seed, the rollouts and the sandbox backend. Not ``-n`` (a larger ``-n`` extends a run),
    concurrency or Ray, which change no outcome."""
    env_args = dict(make_kwargs)
    sandbox = env_args.pop("sandbox", _DEFAULT_SANDBOX)
    return _jsonable({"agent": agent.fingerprint(), "env_ids": sorted(set(env_ids)), "env_args": env_args,
                      "sandbox": sandbox, "seed": seed, "rollouts": rollouts})


#: The backend an env uses when ``make_kwargs`` names none.
_DEFAULT_SANDBOX = inspect.signature(SysmathEnv.__init__).parameters["sandbox"].default
_UNSET = object()


def _show(value: Any, limit: int = 80) -> str:
    text = "unset" if value is _UNSET else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _differences(logged: Mapping[str, Any], current: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``name: logged X, this run Y`` for each field that differs, nested fields by dotted name."""
    lines = []
    for key in sorted(set(logged) | set(current), key=str):
        old, new = logged.get(key, _UNSET), current.get(key, _UNSET)
        if old == new:
            continue
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            lines += _differences(old, new, f"{prefix}{key}.")
        else:
            lines.append(f"{prefix}{key}: logged {_show(old)}, this run {_show(new)}")
    return lines


def bind_run_header(log: ResultsLog, fingerprint: Mapping[str, Any]) -> None:
    """Write ``run.json`` for a log with no samples yet; for one with samples, check that
    ``run.json`` holds this run's fingerprint, and raise ``EvalError`` naming what differs."""
    header = log.path.with_name(RUN_HEADER)
    if not (log.path.exists() and log.path.stat().st_size):
        temporary = header.with_name(f".{RUN_HEADER}.tmp")
        temporary.write_text(json.dumps({"format": RUN_HEADER_FORMAT, "fingerprint": fingerprint},
                                        indent=2, sort_keys=True) + "\n", encoding="utf-8")
        temporary.replace(header)
        return
    advice = "use another --out, or --overwrite to start it again"
    try:
        logged = json.loads(header.read_text(encoding="utf-8"))["fingerprint"]
        if not isinstance(logged, dict):
            raise TypeError("fingerprint is not an object")
    except FileNotFoundError as exc:
        raise EvalError(f"{log.path} has no {RUN_HEADER} beside it, so nothing shows which run wrote it; "
                        f"{advice}") from exc
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EvalError(f"{header} is unreadable ({exc}); {advice}") from exc
    differences = _differences(logged, fingerprint)
    if differences:
        raise EvalError(f"{log.path} was written by another run; " + "; ".join(differences) + f". To resume, "
                        f"run it as it was first run, or {advice}")


# --------------------------------------------------------------------------- summary


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from ``n`` samples with ``c`` correct (Chen et al. 2021):
    1 - C(n - c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _counts(results: Sequence[SampleResult]) -> dict[str, Any]:
    errors = sum(1 for r in results if r.verdict == SCORING_ERROR)
    scored = len(results) - errors
    correct = sum(1 for r in results if r.verdict == "correct")
    return {"samples": len(results), "scored": scored, "correct": correct, "scoring_errors": errors,
            "accuracy": correct / scored if scored else None}


def _pass_at_k(results: Sequence[SampleResult]) -> dict[str, float]:
    """pass@k for k = 1..(most scored samples of a task), each over the tasks with at least
    k scored samples; scoring errors shrink a task's n instead of counting as failures."""
    per_task: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for result in results:
        if result.verdict != SCORING_ERROR:
            tally = per_task[(result.env_id, result.task_id)]
            tally[0] += 1
            tally[1] += result.verdict == "correct"
    largest = max((n for n, _ in per_task.values()), default=0)
    table = {}
    for k in range(1, largest + 1):
        values = [pass_at_k(n, c, k) for n, c in per_task.values() if n >= k]
        table[str(k)] = sum(values) / len(values)
    return table


def _value_order(value: str) -> tuple[int, str]:
    """Breakdown values alphabetically, but difficulties easy to hard."""
    return (DIFFICULTY_ORDER.index(value) if value in DIFFICULTY_ORDER else len(DIFFICULTY_ORDER), value)


def _group_stats(results: Sequence[SampleResult], breakdowns: bool) -> dict[str, Any]:
    stats = _counts(results)
    stats["tasks"] = len({(r.env_id, r.task_id) for r in results})
    stats["pass_at_k"] = _pass_at_k(results)
    stats["verdicts"] = dict(sorted(Counter(r.verdict for r in results).items()))
    if breakdowns:
        stats["breakdowns"] = {}
        for key in BREAKDOWN_KEYS:
            groups: dict[str, list[SampleResult]] = {}
            for result in results:
                if key in result.metadata:
                    groups.setdefault(str(result.metadata[key]), []).append(result)
            if groups:
                stats["breakdowns"][key] = {value: _counts(groups[value]) for value in sorted(groups, key=_value_order)}
    return stats


def summarize(results: Iterable[SampleResult], config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The summary of logged samples: accuracy (correct / scored, scoring errors excluded),
    pass@k, verdict counts and metadata breakdowns, per env and overall."""
    ordered = sorted(results, key=lambda r: r.key)
    by_env: dict[str, list[SampleResult]] = {}
    for result in ordered:
        by_env.setdefault(result.env_id, []).append(result)
    return {
        "config": dict(config or {}),
        "envs": {env_id: _group_stats(members, breakdowns=True) for env_id, members in by_env.items()},
        "overall": _group_stats(ordered, breakdowns=False),
    }


# --------------------------------------------------------------------------- report


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


@dataclass(frozen=True)
class EvalRun:
    """One agent's eval: its summary, its samples in plan order, what failed, where it went."""

    agent: str
    summary: Mapping[str, Any]
    results: tuple[SampleResult, ...]
    failures: tuple[SampleFailure, ...]
    out_dir: Path | None
    seconds: float
    plot_path: Path | None = None
    notes: tuple[str, ...] = field(default=())


def format_scoreboard(runs: Sequence[EvalRun]) -> str:
    """The table ``gym-sysmath eval`` prints: one row per (agent, env)."""
    largest_k = max((max(map(int, run.summary["overall"]["pass_at_k"]), default=1) for run in runs), default=1)
    pass_column = f"pass@{largest_k}"
    env_width = max([22, *(len(env_id) for run in runs for env_id in run.summary["envs"])])
    agent_width = max([10, *(len(run.agent) for run in runs)])
    header = (f"{'env':<{env_width}} {'agent':<{agent_width}} {'samples':>7} {'scored':>6} {'correct':>7} "
              f"{'scoring_err':>11} {'failed':>6} {'accuracy':>8} {pass_column:>8} {'time':>7}")
    lines = [header, "-" * len(header)]
    for run in runs:
        failed = Counter(failure.spec.env_id for failure in run.failures)
        rows = list(run.summary["envs"].items())
        if len(rows) > 1:
            rows.append(("all", run.summary["overall"]))
        for env_id, stats in rows:
            pass_k = stats["pass_at_k"].get(str(largest_k))
            failures = sum(failed.values()) if env_id == "all" else failed.get(env_id, 0)
            seconds = f"{run.seconds:>6.1f}s" if env_id == rows[-1][0] else ""
            lines.append(f"{env_id:<{env_width}} {run.agent:<{agent_width}} {stats['samples']:>7} {stats['scored']:>6} "
                         f"{stats['correct']:>7} {stats['scoring_errors']:>11} {failures:>6} "
                         f"{_percent(stats['accuracy']):>8} {_percent(pass_k):>8} {seconds:>7}")
    return "\n".join(lines)


def format_breakdowns(summary: Mapping[str, Any], width: int = 110) -> str:
    """One wrapped line per (env, metadata key): ``value accuracy (scored)``."""
    lines = []
    for env_id, stats in summary["envs"].items():
        for key, groups in stats.get("breakdowns", {}).items():
            line = f"  {env_id} {key}:"
            for value, group in groups.items():
                cell = f"{value} {_percent(group['accuracy'])} ({group['scored']})"
                if len(line) + len(cell) + 2 > width:
                    lines.append(line)
                    line = "     "
                line += ("  " if line[-1] != ":" else " ") + cell
            lines.append(line)
    return "\n".join(lines)


def plot_summary(summary: Mapping[str, Any], path: Path, title: str = "") -> Path | None:
    """A PNG of accuracy per breakdown value (one panel per env and key). Returns None, with
    a message on stderr, when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("gym-sysmath: matplotlib is not installed; skipping the plot "
              "(pip install matplotlib, or the package's plot extra)", file=sys.stderr)
        return None
    panels = [(f"{env_id}: {key}", groups) for env_id, stats in summary["envs"].items()
              for key, groups in stats.get("breakdowns", {}).items()]
    if len(summary["envs"]) > 1 or not panels:
        panels.insert(0, ("accuracy by env", dict(summary["envs"])))
    heights = [max(len(groups), 1) * 0.32 + 0.8 for _, groups in panels]
    figure, axes = plt.subplots(len(panels), 1, figsize=(8, sum(heights) + 0.6),
                                gridspec_kw={"height_ratios": heights}, squeeze=False)
    for axis, (name, groups) in zip(axes[:, 0], panels, strict=True):
        labels = [f"{value} ({g['scored']})" for value, g in groups.items()]
        values = [g["accuracy"] or 0.0 for g in groups.values()]
        axis.barh(labels, values, color="#4C72B0")
        axis.invert_yaxis()
        axis.set_xlim(0, 1)
        axis.set_title(name, fontsize=10, loc="left")
        axis.tick_params(labelsize=8)
        for row, group in enumerate(groups.values()):
            axis.text(min(values[row], 0.85) + 0.01, row, _percent(group["accuracy"]), va="center", fontsize=7)
    axes[-1, 0].set_xlabel("accuracy (scored samples; scoring errors excluded)")
    if title:
        figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


class Progress:
    """A one-line progress bar on stderr: redrawn in place on a terminal, a line every few
    seconds otherwise (CI logs)."""

    def __init__(self, total: int, label: str, done: int = 0, stream: TextIO | None = None,
                 enabled: bool = True):
        self.total, self.label, self.done, self.initial = total, label, done, done
        self.correct = self.scored = self.failed = 0
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = self.last = time.monotonic()
        self._lock = threading.Lock()
        self._draw(force=True)

    def update(self, outcome: Outcome) -> None:
        with self._lock:
            self.done += 1
            if isinstance(outcome, SampleFailure):
                self.failed += 1
            elif outcome.verdict != SCORING_ERROR:
                self.scored += 1
                self.correct += outcome.verdict == "correct"
            self._draw(force=self.done == self.total)

    def _line(self) -> str:
        width = 24
        filled = width * self.done // self.total
        elapsed = time.monotonic() - self.started
        rate = (self.done - self.initial) / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        accuracy = _percent(self.correct / self.scored if self.scored else None)
        failed = f" failed {self.failed}" if self.failed else ""
        return (f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                f"{rate:.1f}/s eta {eta:.0f}s acc {accuracy}{failed}")

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self.last < (0.1 if self.tty else 5.0):
            return
        self.last = now
        self.stream.write(("\r\x1b[2K" if self.tty else "") + self._line() + ("" if self.tty else "\n"))
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()


# --------------------------------------------------------------------------- evaluate


def make_listing_env(env_id: str, **kwargs: Any) -> gym.Env:
    """An env made only to read its tasks and prompts (never stepped): on the process
    backend, whose pool starts nothing until a job runs, so no Docker is needed, and without
    that backend's isolation warning, which concerns running code."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="sandbox='process'", category=UserWarning)
        return gym.make(env_id, **{**kwargs, "sandbox": "process"})


def _task_ids(env_ids: Sequence[str], make_kwargs: Mapping[str, Any], listing_only: bool
              ) -> tuple[dict[str, tuple[str, ...]], list[gym.Env]]:
    """Each env's eval task ids, from one env per id that stays open for the run. On the
    local path it is made like the workers' envs, so a missing Docker daemon or a stale image
    stops the eval before any episode, and it holds the shared sandbox pool while worker
    threads come and go; a Ray driver only lists tasks, which needs no Docker there."""
    probes: list[gym.Env] = []
    ids: dict[str, tuple[str, ...]] = {}
    try:
        for env_id in env_ids:
            probes.append(make_listing_env(env_id, **make_kwargs) if listing_only else gym.make(env_id, **make_kwargs))
            ids[env_id] = tuple(probes[-1].unwrapped.task_ids)
            if not ids[env_id]:
                raise EvalError(f"{env_id} has no eval tasks with these arguments")
    except BaseException:
        close_all(dict(enumerate(probes)))
        raise
    return ids, probes


def _check_resumable(done: Mapping[tuple[str, str, int], SampleResult], specs: Sequence[SampleSpec],
                     agent: Agent, path: Path) -> None:
    for spec in specs:
        result = done.get(spec.key)
        if result is not None and (result.seed != spec.seed or result.agent != agent.name):
            raise EvalError(f"{path} was written by another run ({result.agent}, seed {result.seed} for "
                            f"{spec.key}; this run: {agent.name}, seed {spec.seed}); use another --out")


def evaluate(env_ids: Sequence[str], agent: Agent | str = "reference", *, n: int | None = None,
             rollouts: int = 1, seed: int = 0, concurrency: int | None = None, out: str | Path | None = None,
             resume: bool = False, overwrite: bool = False, make_kwargs: Mapping[str, Any] | None = None,
             ray: bool | str | None = None, progress: bool = True, plot: bool = True) -> EvalRun:
    """Evaluate ``agent`` on the eval split of each env id.

    ``n`` tasks per env (``choose_tasks``), ``rollouts`` samples per task,
    ``concurrency`` episodes in flight: threads here (default: the sandbox pool's size), or
    Ray actors with ``ray`` (default: one per cluster CPU), which is True for a local or
    ``RAY_ADDRESS`` instance, or a cluster's address. With ``out``, writes
    ``results.jsonl``, ``summary.json`` and ``breakdowns.png`` there; ``resume`` skips the
    samples already logged.
    """
    agent = make_agent(agent) if isinstance(agent, str) else agent
    env_ids = list(dict.fromkeys(env_ids))  # an id named twice is evaluated once
    if rollouts < 1:
        raise EvalError(f"rollouts must be at least 1, got {rollouts}")
    if resume and out is None:
        raise EvalError("resume needs an output directory (--out) holding results.jsonl")
    make_kwargs = dict(make_kwargs or {})
    use_ray = ray is not None and ray is not False
    started = time.perf_counter()
    task_ids, probes = _task_ids(env_ids, make_kwargs, listing_only=use_ray)
    try:
        specs = [spec for env_id in env_ids
                 for spec in plan_samples(env_id, task_ids[env_id], agent, n, rollouts, seed)]
        if not specs:
            raise EvalError(f"nothing to evaluate for {agent.name} on {', '.join(env_ids)}")
        planned = {spec.key for spec in specs}
        if len(planned) != len(specs):  # plan_samples makes each env's keys unique; env ids are too
            raise EvalError(f"the plan for {agent.name} holds a sample more than once")
        fingerprint = run_fingerprint(env_ids, agent, rollouts=rollouts, seed=seed, make_kwargs=make_kwargs)
        out_dir = Path(out) if out is not None else None
        log = ResultsLog(out_dir / "results.jsonl", resume=resume, overwrite=overwrite) if out_dir else None
        done = log.load() if log and resume else {}
        if log:
            bind_run_header(log, fingerprint)
            _check_resumable(done, specs, agent, log.path)
        results = {key: result for key, result in done.items() if key in planned}
        todo = [spec for spec in specs if spec.key not in results]
        failures: list[SampleFailure] = []
        bar = Progress(len(specs), f"eval {agent.name[:24]}", done=len(results), enabled=progress)
        lock = threading.Lock()

        def on_outcome(outcome: Outcome) -> None:
            with lock:
                if isinstance(outcome, SampleResult):
                    if log:
                        log.append(outcome)
                    results[outcome.key] = outcome
                else:
                    failures.append(outcome)
            bar.update(outcome)

        try:
            if use_ray:
                from gym_sysmath.integrations.ray_rollouts import run_ray

                run_ray(todo, agent, on_outcome, workers=concurrency, make_kwargs=make_kwargs,
                        address=None if ray is True else str(ray))
            else:
                from gym_sysmath.sandbox.pool import default_pool_size

                run_local(todo, agent, on_outcome, concurrency=concurrency or default_pool_size(),
                          make_kwargs=make_kwargs)
        finally:
            bar.close()
    finally:
        close_all(dict(enumerate(probes)))
    ordered = tuple(results[spec.key] for spec in specs if spec.key in results)
    config = {"agent": agent.name, "env_ids": list(env_ids), "n": n, "rollouts": rollouts, "seed": seed,
              "make_kwargs": _jsonable(make_kwargs), "fingerprint": fingerprint}
    summary = summarize(ordered, config)
    summary["planned"] = len(specs)
    summary["missing"] = len(specs) - len(ordered)
    plot_path = None
    notes = []
    extra = len(done) - sum(1 for key in done if key in planned)
    if extra:
        notes.append(f"{extra} logged sample(s) outside this plan were kept in results.jsonl and left out")
    if out_dir:
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        if plot and ordered:
            plot_path = plot_summary(summary, out_dir / "breakdowns.png", title=f"gym-sysmath eval: {agent.name}")
    return EvalRun(agent.name, summary, ordered, tuple(failures), out_dir, time.perf_counter() - started,
                   plot_path, tuple(notes))


def exit_code(runs: Sequence[EvalRun]) -> int:
    """1 when the reference agent is below 100% or anything failed to score; else 0."""
    for run in runs:
        overall = run.summary["overall"]
        if run.failures or run.summary.get("missing") or overall["scoring_errors"]:
            return 1
        if run.agent == "reference" and any(stats["accuracy"] != 1.0 for stats in run.summary["envs"].values()):
            return 1
    return 0

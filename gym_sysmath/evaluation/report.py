"""Report an eval: a scoreboard table, breakdown lines, a PNG of the breakdowns (matplotlib,
imported only to plot), and the progress bar drawn while it runs (``viewer`` has the HTML
transcripts).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from gym_sysmath.evaluation.run import Outcome, SampleFailure, SampleResult
from gym_sysmath.evaluation.summary import UNSCORED
from gym_sysmath.verdicts import Verdict


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


def _tokens(stats: Mapping[str, Any]) -> str:
    total = (stats.get("usage") or {}).get("total_tokens")
    return "-" if total is None else f"{total:,}"


def format_scoreboard(runs: Sequence[EvalRun]) -> str:
    """The table ``gym-sysmath eval`` prints: one row per (agent, env). Accuracy is correct
    out of ``scored`` (shown beside it): scoring errors and failed samples are counted in
    their own columns, never as wrong; ``time`` is the run's whole wall time, every session
    of a resumed run included."""
    largest_k = max((max(map(int, run.summary["overall"]["pass_at_k"]), default=1) for run in runs), default=1)
    pass_column = f"pass@{largest_k}"
    env_width = max([22, *(len(env_id) for run in runs for env_id in run.summary["envs"])])
    agent_width = max([10, *(len(run.agent) for run in runs)])
    header = (f"{'env':<{env_width}} {'agent':<{agent_width}} {'samples':>7} {'correct':>7} {'format_err':>10} "
              f"{'scoring_err':>11} {'failed':>6} {'accuracy (of scored)':>20} {pass_column:>8} {'tokens':>10} "
              f"{'time':>8}")
    lines = [header, "-" * len(header)]
    for run in runs:
        rows = list(run.summary["envs"].items())
        if len(rows) > 1:
            rows.append(("all", run.summary["overall"]))
        total_s = (run.summary.get("time") or {}).get("seconds", run.seconds)
        for env_id, stats in rows:
            pass_k = stats["pass_at_k"].get(str(largest_k))
            seconds = f"{total_s:>7.1f}s" if env_id == rows[-1][0] else ""
            accuracy = f"{_percent(stats['accuracy'])} of {stats['scored']}"
            lines.append(f"{env_id:<{env_width}} {run.agent:<{agent_width}} {stats['samples']:>7} "
                         f"{stats['correct']:>7} {stats.get('format_errors', 0):>10} {stats['scoring_errors']:>11} "
                         f"{stats.get('failed', 0):>6} {accuracy:>20} {_percent(pass_k):>8} {_tokens(stats):>10} "
                         f"{seconds:>8}")
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
        logging.getLogger(__name__).warning("matplotlib is not installed; skipping the plot "
                                            "(pip install matplotlib, or the package's plot extra)")
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
            elif outcome.verdict not in UNSCORED:
                self.scored += 1
                self.correct += outcome.verdict == Verdict.CORRECT
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

"""Report an eval: a scoreboard table, breakdown lines, a PNG of the breakdowns (matplotlib,
imported only to plot), and the progress bar drawn while it runs (``viewer`` has the HTML
transcripts).
"""

from __future__ import annotations

import logging
import shutil
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from gym_sysmath.agents import short_label
from gym_sysmath.evaluation.run import Outcome, SampleFailure, SampleResult, TurnEvent, completion_tokens
from gym_sysmath.evaluation.summary import UNSCORED
from gym_sysmath.terminal import escape_controls
from gym_sysmath.verdicts import Verdict

#: The scoreboard's agent column at its widest: a longer label wraps onto the lines below.
AGENT_COLUMN = 20


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
    #: The label the agent was given (``eval --name``); None: the scoreboard derives one from ``agent``.
    label: str | None = None


def distinct_labels(agents: Sequence[tuple[str, str | None]]) -> list[str]:
    """The scoreboard's label for each (agent name, given label): the given one, else
    ``short_label(name)``, reaching further back along the path while two collide; labels
    still equal (one agent evaluated twice) are numbered ``#1``, ``#2`` in order."""
    reach = [0] * len(agents)
    while True:
        labels = [given or short_label(name, reach[i]) for i, (name, given) in enumerate(agents)]
        counts = Counter(labels)
        colliding = [i for i, (name, given) in enumerate(agents)
                     if counts[labels[i]] > 1 and not given and labels[i] != name]
        if not colliding:
            break
        for i in colliding:
            reach[i] += 1
    seen: Counter[str] = Counter()
    numbered = []
    for label in labels:
        seen[label] += 1
        numbered.append(label if counts[label] == 1 else f"{label} #{seen[label]}")
    return [escape_controls(label).replace("\n", " ").replace("\t", " ") for label in numbered]


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in pieces of at most ``width`` characters, each broken after a ``/``, ``:``,
    ``-``, ``_``, ``.`` or space where one falls in its second half."""
    pieces = []
    while len(text) > width:
        cut = max(text.rfind(mark, width // 2, width) for mark in "/:-_. ") + 1 or width
        pieces.append(text[:cut])
        text = text[cut:]
    return [*pieces, text]


def _tokens(stats: Mapping[str, Any]) -> str:
    total = (stats.get("usage") or {}).get("total_tokens")
    return "-" if total is None else f"{total:,}"


def format_scoreboard(runs: Sequence[EvalRun]) -> str:
    """The table ``gym-sysmath eval`` prints: one row per (agent, env). Accuracy is correct
    out of ``scored`` (shown beside it): scoring errors and failed samples are counted in
    their own columns, never as wrong; ``time`` is the run's whole wall time, every session
    of a resumed run included. The agent column shows each run's label (``distinct_labels``:
    a path-like model id shortened, unique on the board), wrapped past ``AGENT_COLUMN``
    characters so that no label widens the table; the full name is in each run's logs."""
    largest_k = max((max(map(int, run.summary["overall"]["pass_at_k"]), default=1) for run in runs), default=1)
    header = ("env", "agent", "samples", "correct", "format_err", "scoring_err", "failed", "accuracy (of scored)",
              f"pass@{largest_k}", "tokens", "time")
    table: list[tuple[str, ...]] = []
    labels = distinct_labels([(run.agent, run.label) for run in runs])
    agent_width = min(max([len(header[1]), *map(len, labels)]), AGENT_COLUMN)
    for run, label in zip(runs, labels, strict=True):
        rows = list(run.summary["envs"].items())
        if len(rows) > 1:
            rows.append(("all", run.summary["overall"]))
        total_s = (run.summary.get("time") or {}).get("seconds", run.seconds)
        pieces = _wrap(label, agent_width)
        for index, (env_id, stats) in enumerate(rows):
            pass_k = stats["pass_at_k"].get(str(largest_k))
            agent = label if len(pieces) == 1 else pieces[index] if index < len(pieces) else ""
            table.append((env_id, agent, str(stats["samples"]), str(stats["correct"]),
                          str(stats.get("format_errors", 0)), str(stats["scoring_errors"]),
                          str(stats.get("failed", 0)), f"{_percent(stats['accuracy'])} of {stats['scored']}",
                          _percent(pass_k), _tokens(stats), f"{total_s:.1f}s" if index == len(rows) - 1 else ""))
        table += [("", piece, *[""] * (len(header) - 2)) for piece in pieces[len(rows):]]
    widths = [max([len(header[column]), *(len(row[column]) for row in table)]) for column in range(len(header))]
    widths[1] = agent_width

    def line(cells: Sequence[str]) -> str:
        return " ".join(cell.ljust(width) if column < 2 else cell.rjust(width)
                        for column, (cell, width) in enumerate(zip(cells, widths, strict=True))).rstrip()

    lines = [line(header), "-" * len(line(header))]
    return "\n".join([*lines, *map(line, table)])


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


def _duration(seconds: float) -> str:
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    return f"{whole // 60}m{whole % 60:02d}s" if whole < 3600 else f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _squeeze(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters with ``...`` in the middle, so both ends show."""
    if len(text) <= width:
        return text
    keep = max(width - 3, 2)
    return text[:(keep + 1) // 2] + "..." + text[len(text) - keep // 2:]


class Progress:
    """One line on stderr while an eval runs: redrawn in place on a terminal (at most every
    ``TTY_INTERVAL_S``), elsewhere (CI logs) a line at most every ``LOG_INTERVAL_S`` plus the
    first, the first turn's end, the first sample's and the last. Never wider than the terminal
    (``LOG_WIDTH`` off one).

    ``turns`` (an agent whose turns take seconds: a model) adds what moves while samples run:
    turns done and in flight, completion tokens so far and per second, seconds per sample (the
    mean of finished ones, or the time so far while the first runs), and the ETA once one has
    finished. ``turn`` hears each turn from the worker threads (``run_local``'s ``on_turn``).
    Ray actors report samples only (``live_turns`` False): their turns and tokens are then
    counted from each finished sample's records, and nothing is shown as running.
    Display only: its clock reaches no reward and no log."""

    TTY_INTERVAL_S = 0.1
    LOG_INTERVAL_S = 5.0
    LOG_WIDTH = 120
    LABEL_WIDTH = 40

    def __init__(self, total: int, label: str, done: int = 0, stream: TextIO | None = None,
                 enabled: bool = True, *, turns: bool = False, live_turns: bool = True,
                 clock: Callable[[], float] = time.monotonic):
        self.total, self.done, self.initial = total, done, done
        self.label = _squeeze(escape_controls(label).replace("\n", " ").replace("\t", " "), self.LABEL_WIDTH)
        self.correct = self.scored = self.failed = 0
        self.turns, self.live_turns = turns, live_turns
        self.turns_started = self.turns_finished = self.tokens = 0
        self.tokens_reported = False  #: whether any turn reported usage (a python agent may not)
        self.sample_seconds, self.timed_samples = 0.0, 0
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.clock = clock
        self.started = self.last = clock()
        self._lock = threading.Lock()
        self._draw(force=True)

    @property
    def turns_running(self) -> int:
        return self.turns_started - self.turns_finished

    def turn(self, event: TurnEvent) -> None:
        """A turn started or ended on some worker thread (``run_local``'s ``on_turn``)."""
        with self._lock:
            self._count_turn(event)
            if self.turns:
                self._draw(force=event.finished and self.turns_finished == 1)

    def _count_turn(self, event: TurnEvent) -> None:
        if event.finished:
            self.turns_finished += 1
            if event.completion_tokens is not None:
                self.tokens += event.completion_tokens
                self.tokens_reported = True
        else:
            self.turns_started += 1

    def update(self, outcome: Outcome) -> None:
        """A sample finished (logged, or failed)."""
        with self._lock:
            self.done += 1
            if isinstance(outcome, SampleFailure):
                self.failed += 1
            elif outcome.verdict not in UNSCORED:
                self.scored += 1
                self.correct += outcome.verdict == Verdict.CORRECT
            played = outcome.partial if isinstance(outcome, SampleFailure) else outcome
            if not self.live_turns and played is not None:
                for record in played.turns:
                    self._count_turn(TurnEvent(played.key, 0, finished=False))
                    self._count_turn(TurnEvent(played.key, 0, finished=True,
                                               completion_tokens=completion_tokens(record)))
            seconds = played.timings.get("total_s") if played is not None else None
            if isinstance(seconds, int | float):
                self.sample_seconds += seconds
                self.timed_samples += 1
            self._draw(force=self.done == self.total or self.done - self.initial == 1)

    def line(self, width: int | None = None) -> str:
        """The line as it would be drawn now, at most ``width`` characters (default: the stream's)."""
        width = width or self._width()
        elapsed = max(self.clock() - self.started, 0.0)
        finished = self.done - self.initial
        remaining = self.total - self.done
        eta = "0s" if remaining <= 0 else _duration(remaining * elapsed / finished) if finished and elapsed > 0 else "-"
        accuracy = _percent(self.correct / self.scored if self.scored else None)
        failed = f" failed {self.failed}" if self.failed else ""
        if self.turns:
            per_s = self.tokens / elapsed if elapsed > 0 else 0.0
            tokens = (f" {self.tokens:,} completion tok {per_s:,.{1 if per_s < 100 else 0}f}/s"
                      if self.tokens_reported else "")
            per_sample = (f"{self.sample_seconds / self.timed_samples:.1f}s/sample" if self.timed_samples
                          else f"{_duration(elapsed)}+/sample")
            running = f" (+{self.turns_running} running)" if self.live_turns else ""
            rest = (f" turns {self.turns_finished}{running}{tokens} {per_sample}"
                    f" eta {eta} acc {accuracy}{failed}")
        else:
            rate = finished / elapsed if elapsed > 0 else 0.0
            speed = f"{rate:.1f}/s" if rate >= 0.1 or not rate else f"{1 / rate:.0f}s/sample"
            rest = f" {speed} eta {eta} acc {accuracy}{failed}"
        for bar in (24, 20, 10, 0):
            filled = bar * self.done // self.total if self.total else 0
            drawn = f" [{'#' * filled}{'.' * (bar - filled)}]" if bar else ""
            line = f"{self.label}{drawn} {self.done}/{self.total}{rest}"
            if len(line) <= width:
                return line
        return line[:width - 3] + "..."

    def _width(self) -> int:
        return max(shutil.get_terminal_size((self.LOG_WIDTH + 1, 24)).columns - 1, 40) if self.tty else self.LOG_WIDTH

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if not force and now - self.last < (self.TTY_INTERVAL_S if self.tty else self.LOG_INTERVAL_S):
            return
        self.last = now
        self.stream.write(("\r\x1b[2K" if self.tty else "") + self.line() + ("" if self.tty else "\n"))
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()

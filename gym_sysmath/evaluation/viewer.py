"""A run directory's transcripts as one self-contained HTML page (``gym-sysmath report``).

The page holds its data (every logged sample, the summary, the fingerprint and the tasks'
k-of-r counts, as JSON in a ``<script type="application/json">``) and the JavaScript that
draws it: no network, no files beside it, so it can be mailed or attached to an issue. It shows
the scoreboard, pass@k per env and overall, the breakdowns as an inline SVG chart, and per env
each task as "k of r correct" (collapsed, sortable hardest first) holding its rollouts: verdict,
reward, every turn's action and observation, the turn's tokens, finish reason, latency and
retries, and the sample's final ``info``. The filters (verdict, env, text, tasks with none, some
or all rollouts correct) and the sort live in the URL's fragment
(``report.html#verdict=correct&sort=hardest``), so a view is a link.

The figures are ``summarize()`` of the logged rows (the function that writes ``summary.json``),
never a second formula. Prompts and actions are parsed here, in Python (``markup``), where a
test can generate cases for it; the page only turns the parts into text nodes.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gym_sysmath.evaluation.log import RUN_HEADER, duplicate_rows
from gym_sysmath.evaluation.run import RowVerdict, SampleResult, SampleVerdict
from gym_sysmath.evaluation.summary import UNSCORED, identical_rollouts_note, summarize
from gym_sysmath.verdicts import Verdict

REPORT_NAME = "report.html"
#: A verdict's badge colour on the page; the others are grey (the ``.verdict`` rule).
VERDICT_COLOURS: dict[SampleVerdict, str] = {
    Verdict.CORRECT: "#2e7d32", Verdict.WRONG_ANSWER: "#c62828", Verdict.FORMAT_ERROR: "#ef6c00",
    Verdict.SCORING_ERROR: "#6a1b9a", RowVerdict.FAILED: "#000", RowVerdict.CONTEXT_OVERFLOW: "#5d4037",
}
#: summary.json's figures the page compares with its own (a different plan, or a stale file, differs).
_COMPARED = ("samples", "correct", "scored", "pass_at_k")

# --------------------------------------------------------------------------- markup

#: A fence opens only at a line's start (after any indentation): three or more backticks, then
#: an info string without backticks (CommonMark), so "in one ```cpp code block" inside a
#: sentence is prose.
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,})([^`\n]*)(?:\n|\Z)", re.MULTILINE)
#: A paragraph break: an inline code span never crosses one.
_PARAGRAPH_BREAK = re.compile(r"(\n[ \t\r]*\n)")
_BACKTICKS = re.compile(r"`+")

#: A part of a parsed text, as JSON lists whose strings, joined, give the text back:
#: ``["prose", text]``, ``["inline", backticks, code]`` (a code span, its backticks on both
#: sides) and ``["fence", opening line, code, closing line (empty when unclosed), language]``.
Part = list[str]


def _closing_fence(ticks: int) -> re.Pattern[str]:
    return re.compile(rf"^[ \t]*`{{{ticks},}}[ \t]*\r?(?:\n|\Z)", re.MULTILINE)


def _inline(prose: str) -> list[Part]:
    """Prose split into text and code spans: a run of n backticks opens a span that the next
    run of exactly n closes within the paragraph; a run nothing closes is text."""
    parts: list[Part] = []
    text = ""
    for piece in _PARAGRAPH_BREAK.split(prose):
        runs = list(_BACKTICKS.finditer(piece))
        start = index = 0
        while index < len(runs):
            opening = runs[index]
            closing = next((later for later in range(index + 1, len(runs))
                            if len(runs[later].group()) == len(opening.group())), None)
            if closing is None:
                index += 1
                continue
            text += piece[start:opening.start()]
            if text:
                parts.append(["prose", text])
                text = ""
            parts.append(["inline", opening.group(), piece[opening.end():runs[closing].start()]])
            start = runs[closing].end()
            index = closing + 1
        text += piece[start:]
    if text:
        parts.append(["prose", text])
    return parts


def markup(text: str) -> list[Part]:
    """``text`` (a prompt or a model's reply) as prose, inline code and fenced code blocks.
    Only a fence that opens a line starts a block; one never closed runs to the end, as a
    reply cut off by the token limit does."""
    parts: list[Part] = []
    position = 0
    while (opening := _FENCE_OPEN.search(text, position)) is not None:
        parts.extend(_inline(text[position:opening.start()]))
        closing = _closing_fence(len(opening.group(1))).search(text, opening.end())
        code_end = closing.start() if closing else len(text)
        close = closing.group() if closing else ""
        language = (opening.group(2).split() or [""])[0]
        parts.append(["fence", opening.group(), text[opening.end():code_end], close, language])
        position = code_end + len(close)
    parts.extend(_inline(text[position:]))
    return parts


# --------------------------------------------------------------------------- the page's data


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _logged(path: Path) -> tuple[list[SampleResult], int]:
    """Each sample's last row, read without touching the file (a line cut short is skipped),
    and how many rows logged a sample again after it was scored (``log.duplicate_rows``)."""
    every: list[SampleResult] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            every.append(SampleResult.from_record(json.loads(line)))
        except (ValueError, KeyError, TypeError):
            continue
    last = {result.key: result for result in every}
    return sorted(last.values(), key=lambda result: result.key), duplicate_rows(every)


def _page_summary(results: Sequence[SampleResult], saved: Any) -> tuple[dict[str, Any], str | None]:
    """``summarize()`` of the logged rows, with what only ``summary.json`` knows (the run's
    time, its plan, its config) added; and a note when ``summary.json``'s figures differ."""
    computed = summarize(results)
    if not isinstance(saved, dict):
        return computed, None
    merged = {**saved, **{key: value for key, value in computed.items() if key != "config"}}
    note = None
    groups = [(env, saved.get("envs", {}).get(env), stats) for env, stats in computed["envs"].items()]
    groups.append(("all", saved.get("overall"), computed["overall"]))
    differing = [name for name, old, new in groups
                 if not isinstance(old, dict) or any(old.get(key) != new.get(key) for key in _COMPARED)]
    if differing or set(saved.get("envs", {})) != set(computed["envs"]):
        note = (f"summary.json differs from results.jsonl for {', '.join(differing or ['its envs'])} (a stale "
                "summary, or an eval whose plan covered fewer samples): this page counts every logged sample")
    return merged, note


def _tasks(results: Sequence[SampleResult]) -> list[dict[str, Any]]:
    """Each task's rollouts (indices into the samples) and its k of r: ``correct`` of
    ``scored``, scoring errors and failed samples left out of ``scored`` as the summary does."""
    tasks: dict[tuple[str, str], dict[str, Any]] = {}
    for index, result in enumerate(results):
        task = tasks.setdefault((result.env_id, result.task_id), {
            "env_id": result.env_id, "task_id": result.task_id, "samples": [], "verdicts": Counter()})
        task["samples"].append(index)
        task["verdicts"][result.verdict.value] += 1
    for task in tasks.values():
        verdicts = task["verdicts"]
        task["scored"] = len(task["samples"]) - sum(verdicts[verdict.value] for verdict in UNSCORED)
        task["correct"] = verdicts[Verdict.CORRECT.value]
        task["verdicts"] = dict(sorted(verdicts.items()))
    return list(tasks.values())


def page_data(run_dir: str | Path) -> dict[str, Any]:
    """What the page draws, from ``run_dir``'s ``results.jsonl`` (and ``summary.json`` and
    ``run.json`` when there). Each sample is its logged row with ``prompt`` and ``actions`` as
    indices into ``texts`` (each distinct text parsed once: a task's rollouts share one prompt)
    and ``replies``, the env's answer to each action. Raises ``FileNotFoundError`` when the
    directory holds no ``results.jsonl``."""
    run_dir = Path(run_dir)
    log_path = run_dir / "results.jsonl"
    if not log_path.is_file():
        raise FileNotFoundError(f"{log_path} does not exist: pass a directory an eval wrote with --out")
    results, duplicates = _logged(log_path)
    summary, note = _page_summary(results, _read_json(run_dir / "summary.json"))
    repeated = (f"results.jsonl holds {duplicates} duplicate row(s), a sample logged again after it was scored; "
                "each sample's last row is shown") if duplicates else None
    texts: dict[str, int] = {}

    def text_index(text: str) -> int:
        return texts.setdefault(text, len(texts))

    samples = []
    for result in results:
        record = result.to_record()
        observations = record.pop("observations")
        record["prompt"] = text_index(observations[0] if observations else "")
        record["actions"] = [text_index(action) for action in record["actions"]]
        record["replies"] = observations[1:]
        samples.append(record)
    # a directory name that is not UTF-8 (its undecodable bytes are surrogates in str) shows with U+FFFD
    shown_dir = os.fsencode(run_dir).decode("utf-8", errors="replace")
    return {"run_dir": shown_dir, "header": _read_json(run_dir / RUN_HEADER), "summary": summary,
            "notes": [text for text in (identical_rollouts_note(summary), note, repeated) if text],
            "tasks": _tasks(results), "samples": samples, "texts": [markup(text) for text in texts]}


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write ``report.html`` (or ``out``) for the run in ``run_dir``; returns its path.
    Raises ``FileNotFoundError`` when the directory holds no ``results.jsonl``."""
    data = page_data(run_dir)
    target = Path(out) if out is not None else Path(run_dir) / REPORT_NAME
    target.write_text(render(data), encoding="utf-8")
    return target


def render(data: Mapping[str, Any]) -> str:
    """The page for ``data`` (``page_data``'s)."""
    # Every "<" as \u003c (it only occurs inside JSON strings): no "</script>" and no "<!--"
    # in a model's text can end or re-open the data's script element.
    payload = json.dumps(data, default=str, ensure_ascii=True).replace("<", "\\u003c")
    title = html.escape(f"gym-sysmath eval: {data.get('run_dir', '')}")
    fills = {"__TITLE__": title, "__DATA__": payload}  # in one pass: neither is searched for the other's mark
    return re.sub("__TITLE__|__DATA__", lambda mark: fills[mark.group()], _PAGE)


def _verdict_styles() -> str:
    """The badge rules, two to a line: ``.verdict.<name>`` is the class the script gives a verdict."""
    rules = [f".verdict.{verdict.value} {{ background: {colour}; }}" for verdict, colour in VERDICT_COLOURS.items()]
    return "\n".join(" ".join(rules[start:start + 2]) for start in range(0, len(rules), 2))


_PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; } h3 { font-size: 1em; margin: .6em 0 .2em; }
table.scores { border-collapse: collapse; margin: .5em 0 1em; }
table.scores td, table.scores th { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
table.scores td:first-child, table.scores th:first-child { text-align: left; }
#filters { position: sticky; top: 0; background: #fff; padding: .5em 0; border-bottom: 1px solid #ddd; z-index: 1; }
#filters label { margin-right: .8em; white-space: nowrap; }
details.task { border: 1px solid #bbb; border-radius: 4px; margin: .4em 0; padding: .2em .6em; }
details.task > summary { cursor: pointer; }
.k-of-r { display: inline-block; min-width: 8em; font-weight: 600; }
.k-of-r.none { color: #c62828; } .k-of-r.all { color: #2e7d32; } .k-of-r.unscored { color: #6a1b9a; }
details.sample { border: 1px solid #ddd; border-radius: 4px; margin: .4em 0; padding: .2em .6em; }
details.sample > summary { cursor: pointer; }
.verdict { display: inline-block; padding: 0 6px; border-radius: 3px; font-weight: 600; color: #fff; background: #888; }
__VERDICT_STYLES__
.turn { border-left: 3px solid #90caf9; margin: .6em 0; padding-left: .6em; }
.meta { color: #555; font-size: 12px; }
.note { color: #8d6e00; }
pre, .prose { background: #f6f8fa; padding: .5em; overflow-x: auto; white-space: pre-wrap; word-break: break-word; }
.prose { margin: .5em 0; }
.prose code { font: 12.5px ui-monospace, monospace; background: #e3e6ea; padding: 0 3px; border-radius: 3px; }
pre.code { background: #1e1e1e; color: #ddd; }
.kw { color: #569cd6; } .str { color: #ce9178; } .com { color: #6a9955; } .num { color: #b5cea8; }
.error { color: #b71c1c; font-weight: 600; }
svg.chart text { font: 11px system-ui, sans-serif; fill: #222; }
svg.chart text.panel { font-weight: 600; }
svg.chart rect.bar { fill: #4c72b0; } svg.chart rect.track { fill: #eef0f3; }
</style></head>
<body>
<h1 id="title"></h1>
<div id="run"></div>
<div id="scoreboard"></div>
<div id="pass-at-k"></div>
<div id="chart"></div>
<div id="filters"></div>
<div id="count"></div>
<div id="samples"></div>
<script type="application/json" id="data">__DATA__</script>
<script>
"use strict";
const DATA = JSON.parse(document.getElementById("data").textContent);
const TEXT = new WeakMap();  // each sample's searchable text, kept off the DOM
const SVG = "http://www.w3.org/2000/svg";
const KEYWORDS = new Set(("def return if elif else for while in not and or import from class try except finally with "
  + "as lambda None True False pass break continue yield raise assert int char unsigned long short float double "
  + "void struct const static include fn let mut pub use impl match loop auto template typename namespace "
  + "std sizeof typedef enum union switch case default goto extern inline bool true false").split(" "));
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value; else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.append(document.createTextNode(String(text)));
  return node;
}
function highlight(code, language) {
  // Comments, strings, numbers and keywords as spans; everything else as text nodes.
  const pre = el("pre", {class: "code", "data-lang": language || ""});
  const token = new RegExp([String.raw`(\/\/[^\n]*|#[^\n]*|\/\*[\s\S]*?\*\/)`,
    String.raw`("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')`, String.raw`\b(0x[0-9a-fA-F]+|\d+(?:\.\d+)?)\b`,
    String.raw`\b([A-Za-z_]\w*)\b`].join("|"), "g");
  let last = 0, match;
  while ((match = token.exec(code)) !== null) {
    if (match.index > last) pre.append(code.slice(last, match.index));
    if (match[1]) pre.append(el("span", {class: "com"}, match[1]));
    else if (match[2]) pre.append(el("span", {class: "str"}, match[2]));
    else if (match[3]) pre.append(el("span", {class: "num"}, match[3]));
    else if (KEYWORDS.has(match[4])) pre.append(el("span", {class: "kw"}, match[4]));
    else pre.append(match[4]);
    last = token.lastIndex;
  }
  pre.append(code.slice(last));
  return pre;
}
function plain(index) {
  // A text as it was logged: markup() keeps every character in its parts.
  return DATA.texts[index].map(part => part[0] === "inline" ? part[1] + part[2] + part[1]
    : part[0] === "fence" ? part[1] + part[2] + part[3] : part[1]).join("");
}
function rich(index) {
  // Prose (with inline code) as text, each fenced block as highlighted code: the parts markup() made.
  const box = el("div", {class: "rich"});
  let prose = null;
  for (const part of DATA.texts[index]) {
    if (part[0] === "fence") {
      prose = null;
      box.append(highlight(part[2], part[4]));
      continue;
    }
    if (!prose) box.append(prose = el("div", {class: "prose"}));
    prose.append(part[0] === "inline" ? el("code", {}, part[2]) : document.createTextNode(part[1]));
  }
  for (const node of box.querySelectorAll(".prose")) if (!node.textContent.trim()) node.remove();
  if (!box.childNodes.length) box.append(el("pre", {class: "empty"}, "(empty)"));
  return box;
}
function tokens(turn) {
  const usage = (turn && turn.usage) || {};
  return usage.total_tokens || ((usage.prompt_tokens || 0) + (usage.completion_tokens || 0)) || 0;
}
function fmt(value, digits) { return typeof value === "number" ? value.toFixed(digits) : "-"; }
function percent(value) { return typeof value === "number" ? (100 * value).toFixed(1) + "%" : "-"; }
function turnMeta(turn) {
  if (!turn || !Object.keys(turn).length) return null;
  const usage = turn.usage || {};
  const bits = [`prompt ${usage.prompt_tokens ?? "-"} / completion ${usage.completion_tokens ?? "-"} tokens`,
    `finish ${turn.finish_reason ?? "-"}`, `latency ${fmt(turn.latency_s, 2)} s`];
  if (turn.wait_s) bits.push(`waited ${fmt(turn.wait_s, 2)} s for a slot`);
  if (turn.model) bits.push(`model ${turn.model}`);
  const retries = turn.retries || [];
  if (retries.length) bits.push(`${retries.length} retr${retries.length > 1 ? "ies" : "y"}: `
    + retries.map(r => r.error).join("; "));
  if (turn.request && Object.keys(turn.request).length) bits.push(`sent ${JSON.stringify(turn.request)}`);
  return el("div", {class: "meta turn-meta"}, bits.join(" · "));
}
function sampleNode(sample, taskPrompt) {
  const turns = sample.turns || [];
  const total = turns.reduce((sum, turn) => sum + tokens(turn), 0);
  const head = el("summary", {},
    el("span", {class: `verdict ${sample.verdict}`}, sample.verdict), " ",
    el("b", {}, sample.env_id), " ", el("span", {class: "task"}, sample.task_id), ` r${sample.rollout}`,
    el("span", {class: "meta"}, ` reward ${sample.reward} · ${sample.actions.length} turn(s) · ${total} tokens · `
      + `${fmt((sample.timings || {}).total_s, 2)} s (model ${fmt((sample.timings || {}).agent_s, 2)} s)`));
  // The prompt is shown once per task; a rollout whose prompt differs shows its own.
  const body = sample.prompt === taskPrompt ? [] : [el("h3", {}, "prompt"), rich(sample.prompt)];
  sample.actions.forEach((action, index) => {
    body.push(el("div", {class: "turn"}, el("b", {}, `turn ${index + 1}: action`), turnMeta(turns[index]), rich(action),
      el("b", {}, "observation"), el("pre", {class: "observation"}, sample.replies[index] ?? "")));
  });
  if (sample.error) body.push(el("p", {class: "error"}, sample.error));
  if (sample.scoring_error) body.push(el("p", {class: "error"}, `scoring error: ${sample.scoring_error}`));
  if (sample.detail) body.push(el("p", {class: "meta"}, `detail: ${sample.detail}`));
  body.push(el("b", {}, "final info"),
    el("pre", {class: "final-info"}, JSON.stringify(sample.final_info || {}, null, 1)));
  const node = el("details", {class: "sample", "data-verdict": sample.verdict, "data-env": sample.env_id},
    head, ...body);
  TEXT.set(node, (sample.task_id + " " + sample.actions.map(plain).join(" ")).toLowerCase());
  return node;
}
function solved(task) {
  // "none", "some" or "all" of its scored rollouts correct; "unscored" when none was scored.
  if (!task.scored) return "unscored";
  return task.correct === 0 ? "none" : task.correct === task.scored ? "all" : "some";
}
function kOfR(task) {
  const unscored = task.samples.length - task.scored;
  const text = task.scored ? `${task.correct} of ${task.scored} correct` : "not scored";
  return el("span", {class: `k-of-r ${solved(task)}`}, text,
    unscored && task.scored ? ` (+${unscored} not scored)` : "");
}
function taskNode(task, position) {
  const samples = task.samples.map(index => DATA.samples[index]);
  const prompt = samples[0].prompt;
  const counts = Object.entries(task.verdicts).map(([verdict, count]) =>
    el("span", {class: `verdict ${verdict}`}, `${count} ${verdict}`));
  const head = el("summary", {}, kOfR(task), " ", el("span", {class: "task"}, task.task_id), " ",
    ...counts.flatMap(badge => [badge, " "]));
  const node = el("details", {class: "task", "data-env": task.env_id, "data-task": task.task_id,
    "data-correct": task.correct, "data-scored": task.scored, "data-samples": task.samples.length,
    "data-solved": solved(task)}, head, el("h3", {}, "prompt"), rich(prompt),
    ...samples.map(sample => sampleNode(sample, prompt)));
  node.task = task;
  node.position = position;  // the task-id order page_data() gave
  return node;
}
function scoreboard(summary) {
  if (!summary || !summary.envs) return el("p", {}, "(no samples)");
  const table = el("table", {class: "scores"});
  const columns = ["samples", "correct", "format_errors", "scoring_errors", "failed", "scored", "accuracy"];
  table.append(el("tr", {}, el("th", {}, "env"), ...columns.map(c => el("th", {}, c)), el("th", {}, "tokens")));
  const rows = Object.entries(summary.envs).concat([["all", summary.overall]]);
  for (const [env, stats] of rows) {
    table.append(el("tr", {"data-env": env}, el("td", {}, env), ...columns.map(c => el("td", {class: c},
      c === "accuracy" ? (stats.accuracy === null ? "-" : percent(stats.accuracy)) : (stats[c] ?? 0))),
      el("td", {}, ((stats.usage || {}).total_tokens) ?? "-")));
  }
  return table;
}
function passAtK(summary) {
  // pass@k as summary.json has it (summarize()), k = 1..the most rollouts a task had scored.
  if (!summary || !summary.envs) return null;
  const rows = Object.entries(summary.envs).concat([["all", summary.overall]]);
  const largest = Math.max(0, ...rows.map(([, stats]) => Object.keys(stats.pass_at_k || {}).length));
  if (!largest) return null;
  const ks = Array.from({length: largest}, (_, i) => String(i + 1));
  const table = el("table", {class: "scores pass-at-k"});
  table.append(el("tr", {}, el("th", {}, "env"), el("th", {}, "tasks"), el("th", {}, "none correct"),
    ...ks.map(k => el("th", {}, `pass@${k}`))));
  for (const [env, stats] of rows) {
    const tasks = DATA.tasks.filter(task => env === "all" || task.env_id === env);
    table.append(el("tr", {"data-env": env}, el("td", {}, env), el("td", {class: "tasks"}, tasks.length),
      el("td", {class: "none-correct"}, tasks.filter(task => solved(task) === "none").length),
      ...ks.map(k => k in (stats.pass_at_k || {})
        ? el("td", {class: "pass", "data-k": k, "data-value": String(stats.pass_at_k[k])}, percent(stats.pass_at_k[k]))
        : el("td", {}, "-"))));
  }
  return el("div", {}, el("h2", {}, "pass@k"), table, el("p", {class: "meta"},
    "unbiased pass@k over the tasks with at least k scored rollouts; scoring errors and failed samples "
    + "are not scored. \"none correct\": tasks whose scored rollouts are all wrong."));
}
function chart(summary) {
  // Accuracy per breakdown value (per env and metadata key), and per env when there are several.
  if (!summary || !summary.envs || !Object.keys(summary.envs).length) return null;
  const panels = [];
  const envs = Object.entries(summary.envs);
  for (const [env, stats] of envs)
    for (const [key, groups] of Object.entries(stats.breakdowns || {})) panels.push([`${env}: ${key}`, groups]);
  if (envs.length > 1 || !panels.length) panels.unshift(["accuracy by env", summary.envs]);
  const label = 220, width = 360, row = 18, gap = 26;
  const height = panels.reduce((sum, [, groups]) => sum + gap + row * Object.keys(groups).length, 0) + 24;
  const box = svg("svg", {class: "chart", width: label + width + 80, height, role: "img",
    viewBox: `0 0 ${label + width + 80} ${height}`, "aria-label": "accuracy per breakdown value"});
  let y = 0;
  for (const [name, groups] of panels) {
    y += gap;
    box.append(svg("text", {class: "panel", x: 0, y: y - 8}, name));
    for (const [value, group] of Object.entries(groups)) {
      const accuracy = typeof group.accuracy === "number" ? group.accuracy : 0;
      box.append(svg("text", {x: label - 6, y: y + 13, "text-anchor": "end"}, `${value} (${group.scored})`),
        svg("rect", {class: "track", x: label, y: y + 2, width, height: row - 4}),
        svg("rect", {class: "bar", x: label, y: y + 2, width: (width * accuracy).toFixed(1), height: row - 4,
          "data-panel": name, "data-group": value, "data-accuracy": String(group.accuracy)}),
        svg("text", {x: label + width + 6, y: y + 13}, percent(group.accuracy)));
      y += row;
    }
  }
  box.append(svg("text", {x: label, y: y + 18}, "accuracy of the scored samples (scoring errors excluded)"));
  return el("div", {}, el("h2", {}, "breakdowns"), box);
}
function state() {
  const params = new URLSearchParams(location.hash.slice(1));
  return {verdict: params.get("verdict") || "", env: params.get("env") || "", text: params.get("q") || "",
    solved: params.get("solved") || "", sort: params.get("sort") || ""};
}
const ORDERS = {
  // Tasks not scored at all last; ties by task id.
  hardest: task => task.scored ? task.correct / task.scored : 2,
  easiest: task => task.scored ? -task.correct / task.scored : 2,
};
function order(sort) {
  const rank = ORDERS[sort];
  for (const section of document.querySelectorAll("section.env")) {
    const nodes = [...section.querySelectorAll(":scope > details.task")];
    nodes.sort((a, b) => (rank ? rank(a.task) - rank(b.task) : 0) || a.position - b.position);
    section.append(...nodes);
  }
}
function apply() {
  const wanted = state();
  let shown = 0, tasksShown = 0;
  order(wanted.sort);
  for (const task of document.querySelectorAll("details.task")) {
    let visibleSamples = 0;
    for (const node of task.querySelectorAll("details.sample")) {
      const visible = (!wanted.verdict || node.dataset.verdict === wanted.verdict)
        && (!wanted.env || node.dataset.env === wanted.env)
        && (!wanted.text || TEXT.get(node).includes(wanted.text.toLowerCase()))
        && (!wanted.solved || task.dataset.solved === wanted.solved);
      node.hidden = !visible;
      visibleSamples += visible;
    }
    task.hidden = !visibleSamples;
    shown += visibleSamples;
    tasksShown += visibleSamples > 0;
  }
  for (const section of document.querySelectorAll("section.env"))
    section.hidden = !section.querySelector("details.task:not([hidden])");
  document.getElementById("count").textContent = `${shown} of ${DATA.samples.length} samples shown`
    + ` · ${tasksShown} of ${DATA.tasks.length} tasks`;
  const controls = [["verdict-filter", wanted.verdict], ["env-filter", wanted.env], ["text-filter", wanted.text],
    ["solved-filter", wanted.solved], ["sort", wanted.sort]];
  for (const [id, value] of controls) {
    const control = document.getElementById(id);
    if (control && control.value !== value) control.value = value;
  }
}
function setFilter(name, value) {
  const params = new URLSearchParams(location.hash.slice(1));
  if (value) params.set(name, value); else params.delete(name);
  history.replaceState(null, "", "#" + params.toString());
  apply();
}
function select(id, name, label, values, first) {
  const options = values.map(v => Array.isArray(v) ? el("option", {value: v[0]}, v[1]) : el("option", {value: v}, v));
  const control = el("select", {id}, el("option", {value: ""}, first || "all"), ...options);
  control.addEventListener("change", () => setFilter(name, control.value));
  return el("label", {}, label + " ", control);
}
function main() {
  const header = (DATA.header || {}).fingerprint || {};
  const agent = header.agent || {};
  document.getElementById("title").textContent = `gym-sysmath eval: ${DATA.run_dir}`;
  const served = agent.served_model && agent.served_model.id ? ` (served: ${agent.served_model.id})` : "";
  const time = (DATA.summary || {}).time;
  // A responses file sets its own rollouts: the most a task has logged, when it differs from -r.
  const logged = Math.max(0, ...DATA.tasks.map(task => task.samples.length));
  const rollouts = !logged || header.rollouts === logged ? header.rollouts ?? "?"
    : `${logged} logged per task (-r ${header.rollouts ?? "?"})`;
  document.getElementById("run").append(el("p", {class: "meta"},
    `agent ${agent.kind || "?"}${agent.model ? " " + agent.model : ""}${served} · seed ${header.seed ?? "?"} · `
    + `rollouts ${rollouts} · sandbox ${header.sandbox ?? "?"}`
    + (time ? ` · ${time.seconds.toFixed(1)} s over ${time.sessions} session(s)` : "")));
  for (const note of DATA.notes) document.getElementById("run").append(el("p", {class: "meta note"}, note));
  document.getElementById("scoreboard").append(scoreboard(DATA.summary));
  document.getElementById("pass-at-k").append(passAtK(DATA.summary) || "");
  document.getElementById("chart").append(chart(DATA.summary) || "");
  const verdicts = [...new Set(DATA.samples.map(s => s.verdict))].sort();
  const envs = [...new Set(DATA.samples.map(s => s.env_id))].sort();
  const text = el("input", {id: "text-filter", type: "search", placeholder: "task id or action text"});
  text.addEventListener("input", () => setFilter("q", text.value));
  document.getElementById("filters").append(select("verdict-filter", "verdict", "verdict", verdicts),
    select("env-filter", "env", "env", envs),
    select("solved-filter", "solved", "tasks", [["none", "none correct"], ["some", "some correct"],
      ["all", "all correct"], ["unscored", "not scored"]]),
    select("sort", "sort", "order", [["hardest", "fewest correct first"], ["easiest", "most correct first"]],
      "task id"),
    el("label", {}, "search ", text));
  const list = document.getElementById("samples");
  let section = null;
  DATA.tasks.forEach((task, position) => {
    if (!section || section.dataset.env !== task.env_id) {
      section = el("section", {class: "env", "data-env": task.env_id},
        el("h2", {"data-env": task.env_id}, task.env_id));
      list.append(section);
    }
    section.append(taskNode(task, position));
  });
  window.addEventListener("hashchange", apply);
  apply();
  document.body.dataset.ready = "1";
}
main();
</script>
</body></html>
""".replace("__VERDICT_STYLES__", _verdict_styles())

"""A run directory's transcripts as one self-contained HTML page (``gym-sysmath report``).

The page holds its data (every logged sample, the summary and the fingerprint, as JSON in a
``<script type="application/json">``) and the few lines of JavaScript that draw it: no
network, no files beside it, so it can be mailed or attached to an issue. Per env and task:
verdict, reward, every turn's action (fenced code highlighted) and observation, the turn's
tokens, finish reason, latency and retries, and the sample's final ``info``. Filters by
verdict, env and text; the URL's fragment holds them (``report.html#verdict=correct&env=...``),
so a filtered view is a link.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gym_sysmath.evaluation.log import RUN_HEADER
from gym_sysmath.evaluation.run import RowVerdict, SampleResult, SampleVerdict
from gym_sysmath.verdicts import Verdict

REPORT_NAME = "report.html"
#: A verdict's badge colour on the page; the others are grey (the ``.verdict`` rule).
VERDICT_COLOURS: dict[SampleVerdict, str] = {
    Verdict.CORRECT: "#2e7d32", Verdict.WRONG_ANSWER: "#c62828", Verdict.FORMAT_ERROR: "#ef6c00",
    Verdict.SCORING_ERROR: "#6a1b9a", RowVerdict.FAILED: "#000", RowVerdict.CONTEXT_OVERFLOW: "#5d4037",
}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _logged(path: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Each sample's last row, read without touching the file (a line cut short is skipped)."""
    rows: dict[tuple[str, str, int], dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            result = SampleResult.from_record(json.loads(line))
        except (ValueError, KeyError, TypeError):
            continue
        rows[result.key] = result.to_record()
    return rows


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write ``report.html`` (or ``out``) for the run in ``run_dir``; returns its path.
    Raises ``FileNotFoundError`` when the directory holds no ``results.jsonl``."""
    run_dir = Path(run_dir)
    log_path = run_dir / "results.jsonl"
    if not log_path.is_file():
        raise FileNotFoundError(f"{log_path} does not exist: pass a directory an eval wrote with --out")
    samples = list(_logged(log_path).values())
    samples.sort(key=lambda record: (record["env_id"], record["task_id"], record["rollout"]))
    data = {"run_dir": str(run_dir), "samples": samples, "summary": _read_json(run_dir / "summary.json"),
            "header": _read_json(run_dir / RUN_HEADER)}
    target = Path(out) if out is not None else run_dir / REPORT_NAME
    target.write_text(render(data), encoding="utf-8")
    return target


def render(data: Mapping[str, Any]) -> str:
    """The page for ``data`` (``samples``, ``summary``, ``header``, ``run_dir``)."""
    # Every "<" as \u003c (it only occurs inside JSON strings): no "</script>" and no "<!--"
    # in a model's text can end or re-open the data's script element.
    payload = json.dumps(data, default=str, ensure_ascii=True).replace("<", "\\u003c")
    title = html.escape(f"gym-sysmath eval: {data.get('run_dir', '')}")
    return _PAGE.replace("__TITLE__", title).replace("__DATA__", payload)


def _verdict_styles() -> str:
    """The badge rules, two to a line: ``.verdict.<name>`` is the class the script gives a verdict."""
    rules = [f".verdict.{verdict.value} {{ background: {colour}; }}" for verdict, colour in VERDICT_COLOURS.items()]
    return "\n".join(" ".join(rules[start:start + 2]) for start in range(0, len(rules), 2))


_PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table.scores { border-collapse: collapse; margin: .5em 0 1em; }
table.scores td, table.scores th { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
table.scores td:first-child, table.scores th:first-child { text-align: left; }
#filters { position: sticky; top: 0; background: #fff; padding: .5em 0; border-bottom: 1px solid #ddd; }
#filters label { margin-right: .8em; white-space: nowrap; }
details.sample { border: 1px solid #ddd; border-radius: 4px; margin: .4em 0; padding: .2em .6em; }
details.sample > summary { cursor: pointer; }
.verdict { display: inline-block; padding: 0 6px; border-radius: 3px; font-weight: 600; color: #fff; background: #888; }
__VERDICT_STYLES__
.turn { border-left: 3px solid #90caf9; margin: .6em 0; padding-left: .6em; }
.meta { color: #555; font-size: 12px; }
pre { background: #f6f8fa; padding: .5em; overflow-x: auto; white-space: pre-wrap; word-break: break-word; }
pre.code { background: #1e1e1e; color: #ddd; }
.kw { color: #569cd6; } .str { color: #ce9178; } .com { color: #6a9955; } .num { color: #b5cea8; }
.error { color: #b71c1c; font-weight: 600; }
</style></head>
<body>
<h1 id="title"></h1>
<div id="run"></div>
<div id="scoreboard"></div>
<div id="filters"></div>
<div id="count"></div>
<div id="samples"></div>
<script type="application/json" id="data">__DATA__</script>
<script>
"use strict";
const DATA = JSON.parse(document.getElementById("data").textContent);
const TEXT = new WeakMap();  // each sample's searchable text, kept off the DOM
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
function highlight(code) {
  // Comments, strings, numbers and keywords as spans; everything else as text nodes.
  const pre = el("pre", {class: "code"});
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
function rich(text) {
  // Prose as <pre>, each ``` fenced block as highlighted code.
  const box = el("div");
  const parts = String(text).split(/```[^\n]*\n?/);
  parts.forEach((part, index) => {
    if (!part.trim()) return;
    box.append(index % 2 ? highlight(part) : el("pre", {}, part));
  });
  if (!box.childNodes.length) box.append(el("pre", {class: "empty"}, "(empty)"));
  return box;
}
function tokens(turn) {
  const usage = (turn && turn.usage) || {};
  return usage.total_tokens || ((usage.prompt_tokens || 0) + (usage.completion_tokens || 0)) || 0;
}
function fmt(value, digits) { return typeof value === "number" ? value.toFixed(digits) : "-"; }
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
function sampleNode(sample) {
  const turns = sample.turns || [];
  const total = turns.reduce((sum, turn) => sum + tokens(turn), 0);
  const head = el("summary", {},
    el("span", {class: `verdict ${sample.verdict}`}, sample.verdict), " ",
    el("b", {}, sample.env_id), " ", el("span", {class: "task"}, sample.task_id), ` r${sample.rollout}`,
    el("span", {class: "meta"}, ` reward ${sample.reward} · ${sample.actions.length} turn(s) · ${total} tokens · `
      + `${fmt((sample.timings || {}).total_s, 2)} s (model ${fmt((sample.timings || {}).agent_s, 2)} s)`));
  const body = [el("h3", {}, "prompt"), rich(sample.observations[0] ?? "")];
  sample.actions.forEach((action, index) => {
    body.push(el("div", {class: "turn"}, el("b", {}, `turn ${index + 1}: action`), turnMeta(turns[index]), rich(action),
      el("b", {}, "observation"), el("pre", {class: "observation"}, sample.observations[index + 1] ?? "")));
  });
  if (sample.error) body.push(el("p", {class: "error"}, sample.error));
  if (sample.scoring_error) body.push(el("p", {class: "error"}, `scoring error: ${sample.scoring_error}`));
  if (sample.detail) body.push(el("p", {class: "meta"}, `detail: ${sample.detail}`));
  body.push(el("b", {}, "final info"),
    el("pre", {class: "final-info"}, JSON.stringify(sample.final_info || {}, null, 1)));
  const node = el("details", {class: "sample", "data-verdict": sample.verdict, "data-env": sample.env_id},
    head, ...body);
  TEXT.set(node, (sample.task_id + " " + sample.actions.join(" ")).toLowerCase());
  return node;
}
function scoreboard(summary) {
  if (!summary || !summary.envs) return el("p", {}, "(no summary.json)");
  const table = el("table", {class: "scores"});
  const columns = ["samples", "correct", "format_errors", "scoring_errors", "failed", "scored", "accuracy"];
  table.append(el("tr", {}, el("th", {}, "env"), ...columns.map(c => el("th", {}, c)), el("th", {}, "tokens")));
  const rows = Object.entries(summary.envs).concat([["all", summary.overall]]);
  for (const [env, stats] of rows) {
    table.append(el("tr", {"data-env": env}, el("td", {}, env), ...columns.map(c => el("td", {class: c},
      c === "accuracy" ? (stats.accuracy === null ? "-" : (100 * stats.accuracy).toFixed(1) + "%") : (stats[c] ?? 0))),
      el("td", {}, ((stats.usage || {}).total_tokens) ?? "-")));
  }
  return table;
}
function state() {
  const params = new URLSearchParams(location.hash.slice(1));
  return {verdict: params.get("verdict") || "", env: params.get("env") || "", text: params.get("q") || ""};
}
function apply() {
  const wanted = state();
  let shown = 0;
  for (const node of document.querySelectorAll("details.sample")) {
    const visible = (!wanted.verdict || node.dataset.verdict === wanted.verdict)
      && (!wanted.env || node.dataset.env === wanted.env)
      && (!wanted.text || TEXT.get(node).includes(wanted.text.toLowerCase()));
    node.hidden = !visible;
    shown += visible;
  }
  document.getElementById("count").textContent = `${shown} of ${DATA.samples.length} samples shown`;
  const controls = [["verdict-filter", wanted.verdict], ["env-filter", wanted.env], ["text-filter", wanted.text]];
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
function select(id, name, label, values) {
  const control = el("select", {id}, el("option", {value: ""}, "all"), ...values.map(v => el("option", {value: v}, v)));
  control.addEventListener("change", () => setFilter(name, control.value));
  return el("label", {}, label + " ", control);
}
function main() {
  const header = (DATA.header || {}).fingerprint || {};
  const agent = header.agent || {};
  document.getElementById("title").textContent = `gym-sysmath eval: ${DATA.run_dir}`;
  const served = agent.served_model && agent.served_model.id ? ` (served: ${agent.served_model.id})` : "";
  const time = (DATA.summary || {}).time;
  document.getElementById("run").append(el("p", {class: "meta"},
    `agent ${agent.kind || "?"}${agent.model ? " " + agent.model : ""}${served} · seed ${header.seed ?? "?"} · `
    + `rollouts ${header.rollouts ?? "?"} · sandbox ${header.sandbox ?? "?"}`
    + (time ? ` · ${time.seconds.toFixed(1)} s over ${time.sessions} session(s)` : "")));
  document.getElementById("scoreboard").append(scoreboard(DATA.summary));
  const verdicts = [...new Set(DATA.samples.map(s => s.verdict))].sort();
  const envs = [...new Set(DATA.samples.map(s => s.env_id))].sort();
  const text = el("input", {id: "text-filter", type: "search", placeholder: "task id or action text"});
  text.addEventListener("input", () => setFilter("q", text.value));
  document.getElementById("filters").append(select("verdict-filter", "verdict", "verdict", verdicts),
    select("env-filter", "env", "env", envs), el("label", {}, "search ", text));
  const list = document.getElementById("samples");
  let env = null;
  for (const sample of DATA.samples) {
    if (sample.env_id !== env) { env = sample.env_id; list.append(el("h2", {"data-env": env}, env)); }
    list.append(sampleNode(sample));
  }
  window.addEventListener("hashchange", apply);
  apply();
  document.body.dataset.ready = "1";
}
main();
</script>
</body></html>
""".replace("__VERDICT_STYLES__", _verdict_styles())

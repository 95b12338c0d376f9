"""The report page's parsing and escaping, on generated texts (the browser's view of a real run
is in tests/test_eval_llm.py, in headless Chromium).

``markup`` decides what the page shows as a code block: only a fence that opens a line, never
"in one ```python code block" inside a sentence. It is checked against a line-by-line oracle
written apart from it; ``render`` must let no text of a model's end the data's script element.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gym_sysmath.cli import main
from gym_sysmath.evaluation import summarize
from gym_sysmath.evaluation.run import SampleResult
from gym_sysmath.evaluation.viewer import markup, page_data, render

#: Pieces a prompt or a reply is made of: prose, inline spans, fences that open a line and
#: ones that do not, indentation, CRLF, HTML and script-ending text, any Unicode.
PIECES = st.one_of(
    st.sampled_from(["```", "```python", "```cpp code block:", "````", "`", "``", "\n", "\n\n", "\n \n", "  ", "\t",
                     "\r\n", "\r", "x = 1", "print(1)", "ANSWER: 2", "`np.eye`", "``a`b``", "in one ```python code",
                     "<", ">", "&", "&amp;", "</script>", "</SCRIPT >", "<!--", "-->", "<b>", '"', "'", "\u2028",
                     "\u00e9", "\U0001f600", "\x00", "\ufeff"]),
    st.sampled_from(["\n```\n", "```\n", "\n```python\n", "\n  ````c\n", "\n```  \r\n", "\n````\n", "\n   ```"]),
    st.text(max_size=6),
)
TEXTS = st.lists(PIECES, max_size=40).map("".join)
#: Prose dense in backtick runs and line and paragraph breaks, for the inline code spans.
PROSE = st.lists(st.sampled_from(["`", "``", "```", "a", "b c", " ", "\n", "\n\n", "\n \n", "\r\n", "<", "\u00e9"]),
                 max_size=30).map("".join)


def _oracle(text: str) -> list[tuple[str, ...]]:
    """Line by line: a line whose first non-blank characters are 3+ backticks, with no backtick
    after them, opens a block; a line of at least as many backticks and blanks (a CR allowed)
    closes it; an unclosed block runs to the end. Prose between blocks is joined."""
    out: list[tuple[str, ...]] = []
    prose, opening, code, ticks_open = "", None, "", 0
    lines = text.split("\n")
    for number, line in enumerate(lines):
        line_end = "" if number == len(lines) - 1 else "\n"
        stripped = line.lstrip(" \t")
        ticks = len(stripped) - len(stripped.lstrip("`"))
        if opening is None:
            if ticks >= 3 and "`" not in stripped[ticks:]:
                if prose:
                    out.append(("prose", prose))
                prose, opening, code, ticks_open = "", line + line_end, "", ticks
            else:
                prose += line + line_end
            continue
        rest = stripped[ticks:]
        rest = rest[:-1] if rest.endswith("\r") else rest
        if ticks >= ticks_open and not rest.strip(" \t"):
            out.append(("fence", opening, code, line + line_end))
            opening = None
        else:
            code += line + line_end
    if opening is not None:
        out.append(("fence", opening, code, ""))
    elif prose:
        out.append(("prose", prose))
    return out


#: An inline code span: a run of backticks, then the nearest run of exactly as many, with no
#: paragraph break (a blank line) between.
_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n[ \t\r]*\n).)*?)(?<!`)\1(?!`)", re.DOTALL)


def _spans(prose: str) -> list[tuple[str, str]]:
    return [(match[1], match[2]) for match in _SPAN.finditer(prose)]


def _joined(parts: list[list[str]]) -> list[tuple[str, ...]]:
    """markup()'s parts with each run of prose and inline code joined back into its text."""
    out: list[tuple[str, ...]] = []
    for part in parts:
        if part[0] == "fence":
            out.append(("fence", *part[1:4]))
            continue
        text = part[1] if part[0] == "prose" else part[1] + part[2] + part[1]
        if out and out[-1][0] == "prose":
            out[-1] = ("prose", out[-1][1] + text)
        else:
            out.append(("prose", text))
    return out


@settings(max_examples=400, deadline=None)
@given(TEXTS)
def test_markup_loses_nothing_and_only_a_fence_opening_a_line_is_a_code_block(text):
    parts = markup(text)
    assert "".join("".join(part[1:4] if part[0] == "fence" else part[1:2] if part[0] == "prose"
                           else [part[1], part[2], part[1]]) for part in parts) == text
    assert _joined(parts) == _oracle(text)
    for part in parts:
        if part[0] == "fence":
            assert part[4] == (part[1].strip(" \t\r\n`").split() or [""])[0]


@settings(max_examples=400, deadline=None)
@given(st.one_of(TEXTS, PROSE))
def test_inline_code_spans_are_the_matching_backtick_runs_of_each_prose_run(text):
    runs: list[tuple[str, list[tuple[str, str]]]] = [("", [])]
    for part in markup(text):
        if part[0] == "fence":
            runs.append(("", []))
        elif part[0] == "inline":
            runs[-1] = (runs[-1][0] + part[1] + part[2] + part[1], [*runs[-1][1], (part[1], part[2])])
        else:
            runs[-1] = (runs[-1][0] + part[1], runs[-1][1])
    for prose, spans in runs:
        assert spans == _spans(prose)


def test_a_compgeom_sentence_with_an_inline_fence_is_prose_and_its_starter_a_block():
    text = ("To test, reply with the complete `candidate.py` in one ```python code block: it is run.\n\n"
            "## Starter\n\n```python\ndef f():\n    pass\n```\n")
    assert [part[0] for part in markup(text)] == ["prose", "inline", "prose", "fence"]
    assert markup(text)[-1] == ["fence", "```python\n", "def f():\n    pass\n", "```\n", "python"]


@settings(max_examples=200, deadline=None)
@given(TEXTS, TEXTS)
def test_no_text_of_a_model_ends_the_data_script_or_opens_a_comment(prompt, reply):
    data = {"run_dir": reply, "texts": [markup(prompt), markup(reply)], "samples": [{"actions": [1], "note": reply}]}
    page = render(data)
    assert page.lower().count("<script") == 2 and page.lower().count("</script") == 2
    assert "<!--" not in page
    start = page.index('<script type="application/json" id="data">') + len('<script type="application/json" id="data">')
    assert json.loads(page[start:page.index("</script>", start)]) == json.loads(json.dumps(data))
    title = page[page.index("<title>") + 7:page.index("</title>")]
    assert "<" not in title and ">" not in title


# --------------------------------------------------------------------------- the page's data


def _run(tmp_path: Path) -> Path:
    """A real answer-only LinearAlgebra-v0 run: 3 tasks, 2 rollouts, rollout 1 wrong."""
    answers = tmp_path / "answers.jsonl"
    assert main(["export", "LinearAlgebra-v0", "-n", "3", "--out", str(answers), "--with-answers"]) == 0
    rows = [json.loads(line) for line in answers.read_text().splitlines()]
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps({"task_id": row["task_id"], "rollout": rollout,
                                             "response": row["reference_action"] if rollout == 0 else "ANSWER: 0"})
                                 + "\n" for row in rows for rollout in range(2)))
    run = tmp_path / "run"
    assert main(["eval", "LinearAlgebra-v0", "--agent", "responses", str(responses), "--out", str(run), "--quiet",
                 "--sandbox", "process"]) == 0
    return run


def test_the_page_counts_a_scoring_error_as_not_scored_and_says_when_summary_json_disagrees(tmp_path, recwarn):
    run = _run(tmp_path)
    data = page_data(run)
    assert data["notes"] == []
    saved = json.loads((run / "summary.json").read_text())
    assert data["summary"]["envs"] == saved["envs"] and data["summary"]["overall"] == saved["overall"]
    assert {(task["correct"], task["scored"], len(task["samples"])) for task in data["tasks"]} == {(1, 2, 2)}
    assert all(len(data["texts"][sample["prompt"]]) for sample in data["samples"])
    assert len(data["texts"]) == 3 + 3 + 1  # three prompts, each shared by its two rollouts; 3 + 1 distinct replies

    # The harness fails on one sample (as a broken container is logged): not scored, never wrong.
    log = run / "results.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    rows[1].update(verdict="scoring_error", reward=0.0, scoring_error="container_start_failed")
    log.write_text("".join(json.dumps(row) + "\n" for row in rows))
    data = page_data(run)
    broken = next(task for task in data["tasks"] if task["task_id"] == rows[1]["task_id"])
    assert (broken["correct"], broken["scored"], broken["verdicts"]) == (
        1 - (rows[1]["rollout"] == 0), 1, {"correct" if rows[1]["rollout"] else "wrong_answer": 1, "scoring_error": 1})
    assert data["summary"]["envs"] == summarize(SampleResult.from_record(row) for row in rows)["envs"]
    assert len(data["notes"]) == 1 and "summary.json differs from results.jsonl for" in data["notes"][0]
    assert "LinearAlgebra-v0" in data["notes"][0]
    assert data["summary"]["time"] == json.loads((run / "summary.json").read_text())["time"]


def test_the_page_says_when_two_evals_logged_the_same_samples(tmp_path):
    """A log a second writer doubled (before the run lock, or copied together by hand): the page
    counts each sample once and says how many rows repeated one already scored."""
    run = _run(tmp_path)
    log = run / "results.jsonl"
    rows = log.read_text().splitlines(keepends=True)
    log.write_text("".join(rows + rows))
    data = page_data(run)
    assert len(data["samples"]) == len(rows)
    assert [note for note in data["notes"] if "duplicate row" in note] == [
        f"results.jsonl holds {len(rows)} duplicate row(s), a sample logged again after it was scored; "
        "each sample's last row is shown"]

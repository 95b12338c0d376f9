"""Summarize logged samples: a pure function of them in plan order, so a resumed run writes
the same ``summary.json`` as an uninterrupted one. Scoring errors (harness failures) are
counted and left out of every denominator, never scored as wrong; so are failed samples
(``failed``: the agent or the host gave no verdict), which ``--resume`` plays again.
Accuracy is ``correct / scored``, and each group states ``scored``, its denominator.
``identical_rollouts`` counts the tasks whose sampled rollouts all replied byte for byte the
same: a server that ignores ``temperature`` turns pass@r into pass@1 at r times the cost.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gym_sysmath.evaluation.run import RowVerdict, SampleResult, SampleVerdict
from gym_sysmath.families import breakdown_keys, breakdown_order, every_breakdown_key
from gym_sysmath.verdicts import Verdict

#: Every family's breakdown keys (each family declares its own in its registry row).
BREAKDOWN_KEYS = every_breakdown_key()
#: Verdicts that are no grade of the answer: left out of every denominator.
UNSCORED: frozenset[SampleVerdict] = frozenset({Verdict.SCORING_ERROR, RowVerdict.FAILED})


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from ``n`` samples with ``c`` correct (Chen et al. 2021):
    1 - C(n - c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _counts(results: Sequence[SampleResult]) -> dict[str, Any]:
    verdicts = Counter(r.verdict for r in results)
    scored = len(results) - sum(verdicts[verdict] for verdict in UNSCORED)
    correct = verdicts[Verdict.CORRECT]
    return {"samples": len(results), "scored": scored, "correct": correct,
            "scoring_errors": verdicts[Verdict.SCORING_ERROR], "failed": verdicts[RowVerdict.FAILED],
            "format_errors": verdicts[Verdict.FORMAT_ERROR], "context_overflows": verdicts[RowVerdict.CONTEXT_OVERFLOW],
            "accuracy": correct / scored if scored else None}


def _pass_at_k(results: Sequence[SampleResult]) -> dict[str, float]:
    """pass@k for k = 1..(most scored samples of a task), each over the tasks with at least
    k scored samples; scoring errors and failed samples shrink a task's n instead of counting as wrong."""
    per_task: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for result in results:
        if result.verdict not in UNSCORED:
            tally = per_task[(result.env_id, result.task_id)]
            tally[0] += 1
            tally[1] += result.verdict == Verdict.CORRECT
    largest = max((n for n, _ in per_task.values()), default=0)
    table = {}
    for k in range(1, largest + 1):
        values = [pass_at_k(n, c, k) for n, c in per_task.values() if n >= k]
        table[str(k)] = sum(values) / len(values)
    return table


def _usage(results: Sequence[SampleResult]) -> dict[str, Any] | None:
    """Model turns, token totals and finish reasons from the turns' records, when the agent
    keeps them (``openai``); ``None`` when no turn has a record."""
    records = [turn for result in results for turn in result.turns if turn]
    if not records:
        return None
    tokens: Counter[str] = Counter()
    for record in records:
        for key, value in (record.get("usage") or {}).items():
            if isinstance(value, int) and not isinstance(value, bool):
                tokens[key] += value
    reasons = Counter(str(record.get("finish_reason")) for record in records)
    retries = sum(len(record.get("retries") or ()) for record in records)
    return {"model_turns": len(records), "tokens": dict(sorted(tokens.items())),
            "total_tokens": tokens.get("total_tokens") or tokens["prompt_tokens"] + tokens["completion_tokens"],
            "finish_reasons": dict(sorted(reasons.items())), "retries": retries,
            "models": sorted({str(record.get("model")) for record in records if record.get("model")})}


def _sampled_temperature(result: SampleResult) -> tuple[bool, Any]:
    """(whether ``result``'s replies were sampled, the temperature its requests sent; ``None``:
    none sent, the server's default). Sampled: every turn records the request it was made by
    (an endpoint agent; deterministic agents record none) and its temperature is unset or
    above 0."""
    if not result.turns or not all(isinstance(turn.get("request"), Mapping) for turn in result.turns):
        return False, None
    request = result.turns[0]["request"]
    return not _asks_greedy(request), request.get("temperature")


def _number(value: Any) -> float | None:
    """A request field as a number (``--extra-body`` may send ``"0"``), else ``None``."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _asks_greedy(request: Mapping[str, Any]) -> bool:
    """Whether a request asks for one reply whatever the seed: temperature 0 (or below), top_k 1,
    top_p 0 or ``do_sample: false`` (any of them through ``--extra-body`` too)."""
    temperature, top_k, top_p = (_number(request.get(key)) for key in ("temperature", "top_k", "top_p"))
    return ((temperature is not None and temperature <= 0) or top_k == 1 or (top_p is not None and top_p <= 0)
            or request.get("do_sample") is False)


def identical_rollouts(results: Iterable[SampleResult]) -> dict[str, Any] | None:
    """``{"tasks": k, "of": m, "temperature": T}``: of the m tasks with two or more sampled
    rollouts (``failed`` rows and rows without a reply left out), k got byte-identical replies
    (every turn's text) in all of them. ``None`` when no task has two sampled rollouts: one
    rollout, temperature 0, or an agent that samples nothing."""
    replies: dict[tuple[str, str], list[tuple[str, ...]]] = defaultdict(list)
    temperatures = []
    for result in results:
        sampled, temperature = _sampled_temperature(result)
        if sampled and result.actions and result.verdict is not RowVerdict.FAILED:
            replies[(result.env_id, result.task_id)].append(result.actions)
            temperatures.append(temperature)
    rolled = [texts for texts in replies.values() if len(texts) > 1]
    if not rolled:
        return None
    sent = list({json.dumps(temperature, sort_keys=True): temperature for temperature in temperatures}.values())
    return {"tasks": sum(len(set(texts)) == 1 for texts in rolled), "of": len(rolled),
            "temperature": sent[0] if len(sent) == 1 else sent}


def identical_rollouts_note(summary: Mapping[str, Any]) -> str | None:
    """The warning for a summary whose ``identical_rollouts`` found a task with every sampled
    rollout the same (``None`` when none did): the server may be ignoring the temperature."""
    found = summary.get("identical_rollouts")
    if not found or not found["tasks"]:
        return None
    temperature = found.get("temperature")
    at = "the server's default temperature (none sent)" if temperature is None else f"temperature {temperature}"
    rollouts = (summary.get("config") or {}).get("rollouts") or "r"
    likely = ("the server is likely not sampling" if found["tasks"] == found["of"] else
              "a short reply can repeat by chance, but if most do, the server may not be sampling")
    return (f"{found['tasks']} of {found['of']} tasks got byte-identical replies in every rollout at {at}: "
            f"{likely}, and pass@{rollouts} is then pass@1; check that it honours temperature "
            "and the request's seed (transformers serve samples only when the model's generation_config.json says "
            "do_sample: true; see docs/evaluation.md)")


def _in_order(values: Iterable[str], order: tuple[str, ...]) -> list[str]:
    """Breakdown values in the order their family declares (difficulties easy to hard), the rest alphabetically."""
    return sorted(values, key=lambda value: (order.index(value) if value in order else len(order), value))


def task_sets(results: Iterable[SampleResult]) -> dict[str, str | None]:
    """The task sets ``results`` were played on, label to hash (``"unrecorded"``: rows logged
    before task sets were versioned)."""
    return dict(sorted({result.task_set or "unrecorded": result.task_set_hash for result in results}.items()))


def _group_stats(results: Sequence[SampleResult], env_id: str | None = None) -> dict[str, Any]:
    """The stats of ``results``; with ``env_id``, broken down by that family's metadata keys too."""
    stats = _counts(results)
    if env_id is not None:  # one task set, unless rows of several were logged (``--resume`` refuses that)
        played_on = task_sets(results)
        stats["task_set"] = next(iter(played_on)) if len(played_on) == 1 else sorted(played_on)
        stats["task_set_hash"] = next(iter(played_on.values())) if len(played_on) == 1 else None
    stats["tasks"] = len({(r.env_id, r.task_id) for r in results})
    stats["pass_at_k"] = _pass_at_k(results)
    stats["verdicts"] = dict(sorted(Counter(r.verdict.value for r in results).items()))
    usage = _usage(results)
    if usage:
        stats["usage"] = usage
    if env_id is not None:
        stats["breakdowns"] = {}
        for key in breakdown_keys(env_id):
            groups: dict[str, list[SampleResult]] = {}
            for result in results:
                if key in result.metadata:
                    groups.setdefault(str(result.metadata[key]), []).append(result)
            if groups:
                stats["breakdowns"][key] = {value: _counts(groups[value])
                                            for value in _in_order(groups, breakdown_order(env_id, key))}
    return stats


def summarize(results: Iterable[SampleResult], config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The summary of logged samples: accuracy (correct / scored, scoring errors and failed
    samples excluded), pass@k, verdict counts, token usage and metadata breakdowns, per env
    and overall, with the task set (label and hash) each env's samples were played on, and
    ``identical_rollouts`` when tasks have several sampled rollouts."""
    ordered = sorted(results, key=lambda r: r.key)
    by_env: dict[str, list[SampleResult]] = {}
    for result in ordered:
        by_env.setdefault(result.env_id, []).append(result)
    summary = {
        "config": dict(config or {}),
        "task_sets": task_sets(ordered),
        "envs": {env_id: _group_stats(members, env_id) for env_id, members in by_env.items()},
        "overall": _group_stats(ordered),
    }
    identical = identical_rollouts(ordered)
    if identical is not None:
        summary["identical_rollouts"] = identical
    return summary

"""verl: a ``compute_score`` for ``reward.custom_reward_function`` and rows in verl's parquet schema.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info, **reward_kwargs)``
once per response, from its reward manager's threads. Here ``ground_truth`` is a task
reference (``TaskRef`` JSON: env id, task id, split, seed), never the key; the env is built
lazily in the grading process and thread, and the response is graded as one whole episode.
``reward_kwargs`` may set ``env_kwargs`` (``gym.make`` arguments), ``max_turns`` (the
reference's: 1 in ``verl_rows``) and ``retries`` (1).

verl wants a float per sample and has no way to drop one. A scoring error is therefore
replayed on a fresh container (``retries`` times); if the harness still fails,
``compute_score`` raises ``ScoringError``, which stops the step with the task and the cause
named, rather than hand verl a 0.0 that it would learn from as a wrong answer.

Multi-turn: verl 0.9.1 on PyPI ships no ``verl.interactions`` package (the ``BaseInteraction``
of verl's main branch), so no interaction adapter exists yet; train single-turn here or
multi-turn through SkyRL, OpenRLHF's ``agent_func`` or TRL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gym_sysmath.integrations.episodes import TaskRef, chat_prompt, grade_completion

__all__ = ["DATA_SOURCE_PREFIX", "compute_score", "verl_rows"]

#: Every row's ``data_source`` starts with it (verl groups its metrics by data source).
DATA_SOURCE_PREFIX = "gym_sysmath/"


def compute_score(data_source: str, solution_str: str, ground_truth: str | Mapping[str, Any],
                  extra_info: Mapping[str, Any] | None = None, *, env_kwargs: Mapping[str, Any] | None = None,
                  max_turns: int | None = None, retries: int = 1, **_: Any) -> dict[str, Any]:
    """``{"score", "acc", "verdict"}`` for one response; ``ScoringError`` when the harness fails."""
    if not str(data_source).startswith(DATA_SOURCE_PREFIX):
        raise ValueError(f"data_source {data_source!r} is not a gym-sysmath row (expected {DATA_SOURCE_PREFIX}...); "
                         f"route other data sources to their own compute_score")
    reward, info = grade_completion(TaskRef.parse(ground_truth), solution_str, env_kwargs=env_kwargs,
                                    max_turns=max_turns, retries=retries)
    return {"score": reward, "acc": float(bool(info.get("correct"))), "verdict": str(info.get("verdict"))}


def verl_rows(rows: Sequence[Mapping[str, Any]], *, max_turns: int = 1,
              system_prompt: str | None = None) -> list[dict[str, Any]]:
    """``build_dataset`` rows (made with this ``max_turns``) in verl's RL schema: ``data_source``,
    chat ``prompt``, ``ability``, ``reward_model{style, ground_truth}`` and ``extra_info``; the
    ground truth is the task reference."""
    out = []
    for index, row in enumerate(rows):
        ref = TaskRef.parse({**row, "max_turns": max_turns})
        out.append({
            "data_source": DATA_SOURCE_PREFIX + ref.env_id,
            "prompt": chat_prompt(row["prompt"], system_prompt),
            "ability": "sysmath",
            "reward_model": {"style": "rule", "ground_truth": ref.to_json()},
            "extra_info": {"index": index, "env_id": ref.env_id, "task_id": ref.task_id, "split": ref.split,
                           "seed": ref.seed},
        })
    return out

"""verl: a ``compute_score`` for ``reward.custom_reward_function``, a dataset class for
``data.custom_cls`` that refuses prompts verl would cut, and rows in verl's parquet schema.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info, **reward_kwargs)``
once per response, from its reward manager's threads. Here ``ground_truth`` is a task
reference (``TaskRef`` JSON: env id, task id, split, seed, the ``gym.make`` arguments the row
was exported with and the task set's fingerprint), never the key; the env is built lazily in
the grading process and thread, and the response is graded as one whole episode, after
``gym_sysmath.answers.strip_end_tokens`` (verl decodes with ``skip_special_tokens=True``, but
another model's end token, ``</s>`` or DeepSeek's full-width one, is plain text to a tokenizer
that does not know it). ``reward_kwargs`` may set ``env_kwargs`` (``gym.make``
arguments over the row's own: how grading runs, e.g. ``{"sandbox": "docker"}``), ``max_turns``
(the reference's: 1 in ``verl_rows``), ``retries`` (1), and ``remote`` / ``token`` (a
``gym-sysmath serve`` URL and its token, default ``GYM_SYSMATH_SERVE_TOKEN``: every response is
graded there, ``+reward.custom_reward_function.reward_kwargs.remote=URL``).

Prompt length: verl 0.9.1 cuts a prompt longer than ``actor_rollout_ref.rollout.prompt_length``
(``data.max_prompt_length``, 512 by default) from its start in the agent loop, with only a log
warning, losing the system turn and the task statement; ``data.truncation`` (``error`` by
default) is read by ``RLHFDataset`` but used nowhere, and ``data.filter_overlong_prompts=True``
drops the rows instead. Set ``data.max_prompt_length`` to fit (``VERL_MAX_PROMPT_LENGTH``, the
command in docs/integrations.md) and pass ``data.custom_cls.path=pkg://gym_sysmath.integrations.verl
data.custom_cls.name=SysmathRLHFDataset``: verl's ``RLHFDataset`` that measures every prompt
through the model's chat template (with ``data.apply_chat_template_kwargs``, as the agent loop
renders it) when the trainer builds it and raises ``PromptTooLong`` (naming
``data.max_prompt_length`` and the length needed) rather than let one be cut or dropped.
``compute_score`` cannot see the prompt (verl hands it only the response), so the dataset is
where it is checked; a ``rollout.prompt_length`` set below ``data.max_prompt_length`` by hand is
not seen.

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

from gym_sysmath.answers import strip_end_tokens
from gym_sysmath.integrations.episodes import TaskRef, chat_prompt, grade_completion, require_prompts_fit

# ``SysmathRLHFDataset`` is public too, made on first access (module ``__getattr__``: it subclasses verl's).
__all__ = ["DATA_SOURCE_PREFIX", "PROMPT_LENGTH_SETTING", "VERL_DEFAULT_MAX_PROMPT_LENGTH", "VERL_MAX_PROMPT_LENGTH",
           "compute_score", "verl_rows"]

#: Every row's ``data_source`` starts with it (verl groups its metrics by data source).
DATA_SOURCE_PREFIX = "gym_sysmath/"

#: The verl setting that bounds a prompt (``actor_rollout_ref.rollout.prompt_length`` follows it).
PROMPT_LENGTH_SETTING = "data.max_prompt_length"

#: verl 0.9.1's default ``data.max_prompt_length`` (``trainer/config/data/legacy_data.yaml``).
VERL_DEFAULT_MAX_PROMPT_LENGTH = 512

#: The ``data.max_prompt_length`` the command in docs/integrations.md sets: every family's prompts fit it with
#: room for a system prompt (longest with SmolLM2's chat template: CompGeom 2,850 tokens,
#: CsappExact 1,085, LinearAlgebra 270).
VERL_MAX_PROMPT_LENGTH = 4096


def compute_score(data_source: str, solution_str: str, ground_truth: str | Mapping[str, Any],
                  extra_info: Mapping[str, Any] | None = None, *, env_kwargs: Mapping[str, Any] | None = None,
                  max_turns: int | None = None, retries: int = 1, remote: str | None = None,
                  token: str | None = None, **_: Any) -> dict[str, Any]:
    """``{"score", "acc", "verdict"}`` for one response; ``ScoringError`` when the harness fails."""
    if not str(data_source).startswith(DATA_SOURCE_PREFIX):
        raise ValueError(f"data_source {data_source!r} is not a gym-sysmath row (expected {DATA_SOURCE_PREFIX}...); "
                         f"route other data sources to their own compute_score")
    reward, info = grade_completion(TaskRef.parse(ground_truth), strip_end_tokens(solution_str),
                                    env_kwargs=env_kwargs, max_turns=max_turns, retries=retries, remote=remote,
                                    token=token)
    return {"score": reward, "acc": float(bool(info.get("correct"))), "verdict": str(info.get("verdict"))}


def verl_rows(rows: Sequence[Mapping[str, Any]], *, max_turns: int = 1, system_prompt: str | None = None,
              tokenizer: Any = None, max_prompt_length: int = VERL_DEFAULT_MAX_PROMPT_LENGTH) -> list[dict[str, Any]]:
    """``build_dataset`` rows (made with this ``max_turns``) in verl's RL schema: ``data_source``,
    chat ``prompt``, ``ability``, ``reward_model{style, ground_truth}`` and ``extra_info``; the
    ground truth is the task reference (with the row's ``env_kwargs`` and ``task_set``).

    With a ``tokenizer``, ``PromptTooLong`` when a prompt (through its chat template) is longer
    than ``max_prompt_length`` (verl's default unless given), which verl would cut."""
    out, prompts = [], []
    for index, row in enumerate(rows):
        ref = TaskRef.parse({**row, "max_turns": max_turns})
        prompts.append(chat_prompt(row["prompt"], system_prompt))
        out.append({
            "data_source": DATA_SOURCE_PREFIX + ref.env_id,
            "prompt": prompts[-1],
            "ability": "sysmath",
            "reward_model": {"style": "rule", "ground_truth": ref.to_json()},
            "extra_info": {"index": index, "env_id": ref.env_id, "task_id": ref.task_id, "split": ref.split,
                           "seed": ref.seed},
        })
    if tokenizer is not None:
        require_prompts_fit(prompts, tokenizer, max_prompt_length, setting=PROMPT_LENGTH_SETTING)
    return out


class _Template:
    """``tokenizer`` whose ``apply_chat_template`` takes the dataset's own extra arguments (verl's
    ``data.apply_chat_template_kwargs`` and tool schemas), as verl's agent loop renders the prompt."""

    def __init__(self, tokenizer: Any, kwargs: Mapping[str, Any]):
        self.tokenizer, self.kwargs = tokenizer, dict(kwargs)

    def apply_chat_template(self, messages: Any, **kwargs: Any) -> Any:
        return self.tokenizer.apply_chat_template(messages, **{**self.kwargs, **kwargs})


def _dataset_class() -> type:
    from verl.utils.dataset.rl_dataset import RLHFDataset

    class SysmathRLHFDataset(RLHFDataset):
        """verl's ``RLHFDataset`` that refuses, when the trainer builds it, any prompt longer than
        ``data.max_prompt_length`` through the model's chat template: verl would cut it from its
        start (or, with ``data.filter_overlong_prompts``, drop it)."""

        def maybe_filter_out_long_prompts(self, dataframe: Any = None) -> Any:
            kwargs = {**self.apply_chat_template_kwargs,
                      **({"tools": self.tool_schemas} if self.tool_schemas is not None else {})}
            require_prompts_fit(list(dataframe[self.prompt_key]), _Template(self.tokenizer, kwargs),
                                int(self.max_prompt_length), setting=PROMPT_LENGTH_SETTING)
            return super().maybe_filter_out_long_prompts(dataframe)

    SysmathRLHFDataset.__module__, SysmathRLHFDataset.__qualname__ = __name__, "SysmathRLHFDataset"
    return SysmathRLHFDataset


def __getattr__(name: str) -> Any:
    """``SysmathRLHFDataset`` is made on first use, so importing this module needs no verl."""
    if name == "SysmathRLHFDataset":
        cls = globals()[name] = _dataset_class()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

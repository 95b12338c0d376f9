"""OpenRLHF: this file is both a ``--reward.remote_url`` reward file and an ``--train.agent_func_path``.

Single-turn: OpenRLHF loads ``reward_func(queries, prompts, labels)`` from this file and calls
it per response with the decoded prompt + response (special tokens kept). The response is
what follows the prompt, less trailing special tokens; the label (``--data.label_key``) is the
task reference (``TaskRef`` JSON, see ``openrlhf_rows``), graded as one whole episode.

Multi-turn: OpenRLHF loads ``AgentExecutor`` from this file (a ``MultiTurnAgentExecutor`` over
``AgentInstance``): each trajectory gets its own env, reset to the label's task; every
generation is one ``env.step``, its observation goes back as ``environment_feedback`` in
``FEEDBACK`` (a plain chat frame; subclass ``AgentInstance`` to use your model's template).

OpenRLHF has no way to drop one sample. A scoring error is replayed on a fresh container
(once); if the harness still fails, the sample's reward and score are NaN (``extra_logs``
``sysmath_scoring_error`` = 1): run with ``--algo.dynamic_filtering_enable`` and a range
holding every real reward (``--algo.dynamic_filtering_range -0.01 1.01``) and OpenRLHF drops
the whole group and draws a replacement prompt; without it the NaN reaches the loss loudly
instead of training on a fake wrong answer.

Settings, read from the environment because OpenRLHF passes none: ``GYM_SYSMATH_ENV_KWARGS``
(JSON ``gym.make`` arguments, e.g. ``{"sandbox": "docker"}``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from gym_sysmath.answers import strip_end_tokens
from gym_sysmath.integrations.episodes import Episode, ScoringError, TaskRef, chat_prompt, grade_completion

__all__ = ["FEEDBACK", "grade_query", "openrlhf_rows", "reward_func"]

#: How an observation goes back to the policy in a multi-turn trajectory.
FEEDBACK = "\n\nUser: {observation}\n\nAssistant: "


def _env_kwargs() -> dict[str, Any]:
    return json.loads(os.environ.get("GYM_SYSMATH_ENV_KWARGS") or "{}")


def response_text(query: str, prompt: str) -> str:
    """The response inside OpenRLHF's decoded prompt + response, without trailing special tokens."""
    start = query.find(prompt)
    if start < 0:
        raise ValueError("the decoded query does not contain its prompt, so the response cannot be cut out "
                         "(grading the prompt's own ANSWER example would be wrong)")
    return strip_end_tokens(query[start + len(prompt):])


def grade_query(query: str, prompt: str, label: str | Mapping[str, Any]) -> tuple[float, bool]:
    """``(reward, scoring_error)`` of one response; the reward is NaN exactly on a scoring error."""
    try:
        reward, _ = grade_completion(TaskRef.parse(label), response_text(query, prompt), env_kwargs=_env_kwargs())
    except ScoringError:
        return math.nan, True
    return reward, False


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[str], **_: Any) -> dict[str, Any]:
    """OpenRLHF's reward-file entry point: ``{"rewards", "scores", "extra_logs"}`` as tensors."""
    import torch

    graded = [grade_query(q, p, label) for q, p, label in zip(queries, prompts, labels, strict=True)]
    rewards = torch.tensor([reward for reward, _ in graded], dtype=torch.float32)
    errors = torch.tensor([float(error) for _, error in graded])
    return {"rewards": rewards, "scores": rewards.clone(), "extra_logs": {"sysmath_scoring_error": errors}}


def openrlhf_rows(rows: Sequence[Mapping[str, Any]], *, max_turns: int | None = 1,
                  system_prompt: str | None = None) -> list[dict[str, Any]]:
    """``build_dataset`` rows (made with this ``max_turns``) as ``{"prompt", "label"}`` for
    ``--data.input_key prompt --data.label_key label`` (chat prompts: ``--data.apply_chat_template``)."""
    return [{"prompt": chat_prompt(row["prompt"], system_prompt),
             "label": TaskRef.parse({**row, "max_turns": max_turns}).to_json()} for row in rows]


try:
    from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor
except ImportError:  # the reward file needs no OpenRLHF; the agent classes do
    pass
else:
    import asyncio

    class AgentInstance(AgentInstanceBase):
        """One multi-turn trajectory: its own env, reset to the label's task."""

        feedback = FEEDBACK

        def __init__(self, *args: Any, **kwargs: Any):
            self.episode: Episode | None = None

        def __del__(self) -> None:
            # OpenRLHF drops an instance whose token budget ran out without telling it: the
            # episode's container goes back when the instance does
            if self.episode is not None:
                self.episode.close()

        async def reset(self, states: dict, **kwargs: Any) -> dict:
            self.episode = Episode(TaskRef.parse(states["label"]), env_kwargs=_env_kwargs(), own_env=True)
            await asyncio.to_thread(self.episode.reset)
            return {"observation": states["observation"]}

        async def step(self, states: dict, **kwargs: Any) -> dict:
            import torch

            assert self.episode is not None, "reset() comes first"
            action = strip_end_tokens(states["action_text"])
            try:
                observation, reward, terminated, truncated, _ = await asyncio.to_thread(self.episode.step, action)
            except ScoringError:
                reward, done, feedback, error = math.nan, True, "", 1.0
            else:
                done, error = terminated or truncated, 0.0
                feedback = "" if done else self.feedback.format(observation=observation)
            if done:
                await asyncio.to_thread(self.episode.close)
            return {"rewards": torch.tensor([reward]), "scores": torch.tensor([reward]),
                    "environment_feedback": feedback, "done": done,
                    "sampling_params": states.get("sampling_params"),
                    "extra_logs": {"sysmath_scoring_error": torch.tensor([error])}}

    class AgentExecutor(MultiTurnAgentExecutor):
        """What ``--train.agent_func_path`` loads: OpenRLHF's multi-turn loop over ``AgentInstance``."""

        def __init__(self) -> None:
            super().__init__(AgentInstance)

    __all__ += ["AgentExecutor", "AgentInstance"]

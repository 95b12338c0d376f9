"""OpenRLHF: this file is both a ``--reward.remote_url`` reward file and an ``--train.agent_func_path``.

Single-turn: OpenRLHF's ``SingleTurnAgentExecutor`` loads ``reward_func(queries, prompts, labels)``
from this file and calls it per response with the decoded prompt + response (special tokens
kept, so the reply ends in its end-of-turn token). The response is what follows the prompt, less
trailing end-of-turn tokens (``answers.strip_end_tokens``); the label (``--data.label_key``) is
the task reference (``TaskRef`` JSON with the ``env_kwargs`` it was exported with, see
``openrlhf_rows``), graded as one whole episode.

Prompt length: OpenRLHF 0.11.2 has no prompt limit of its own. ``--data.max_len`` (default 2048)
bounds prompt + response; a prompt over ``max_len - max_new_tokens`` (``max_len - 1`` when
``--rollout.max_new_tokens`` is unset, its default) is cut from the start, with only a warning.
``check_prompts`` (``python -m gym_sysmath.integrations.openrlhf check``) templates the dataset
with OpenRLHF's own loader and refuses one that would be cut, before training; ``AgentExecutor``
refuses such a prompt when it arrives (its error stops the run). A cut the reward file still
meets is graded from the response (found after the prompt's last characters) and flagged.

OpenRLHF's executor catches every exception of ``reward_func`` and leaves the sample's reward
``None`` (logged at INFO), so ``reward_func`` raises nothing: a failure is the reward and score
NaN, an ``extra_logs`` flag and an ERROR log naming the task and the cause. The flags (always
all present, 0 or 1): ``sysmath_scoring_error`` (the harness failed after its retry),
``sysmath_reward_error`` (anything else: a bad label, a task set that changed) and
``sysmath_prompt_cut`` (graded, but the query held only the end of the prompt). Run with
``--algo.dynamic_filtering_enable --algo.dynamic_filtering_range -0.01 1.01``: a group with a NaN
is dropped and a replacement prompt drawn; without it the NaN reaches the loss loudly instead of
training on a fake wrong answer.

Multi-turn: OpenRLHF loads ``AgentExecutor`` (its ``MultiTurnAgentExecutor`` over
``AgentInstance``): each trajectory gets its own env, reset to the label's task; every
generation is one ``env.step``. Its observation goes back as the next user turn in the policy's
own chat template (the tokenizer OpenRLHF hands ``execute``; ``FEEDBACK``, a plain frame, only
when the tokenizer has no chat template). When OpenRLHF's token budget ends a trajectory with
the episode still open, the episode is closed and graded from what it left, as
``grade_completion`` does (``extra_logs`` ``sysmath_closed_at_budget``), not left at the last
turn's 0.0. OpenRLHF does not catch errors there, so a bad label stops the run with its message;
a harness failure is NaN as above.

Settings: the task arguments each label carries (``TaskRef.env_kwargs``: what the export was made
with, e.g. a difficulty filter). How grading runs (``sandbox``, ``pool_size``) is not in a label:
``GYM_SYSMATH_ENV_KWARGS`` (JSON ``gym.make`` arguments, e.g. ``{"sandbox": "process"}``) sets it
where the reward file runs, since OpenRLHF passes the reward file no settings. For the same
reason ``GYM_SYSMATH_REMOTE`` (a ``gym-sysmath serve`` URL; its token in
``GYM_SYSMATH_SERVE_TOKEN``) makes both entry points play every episode on that server (give
them to Ray's workers with ``ray job submit --runtime-env-json '{"env_vars": {...}}'``); a
server that cannot be reached is a scoring error (NaN, ``sysmath_scoring_error``), never a 0.
"""

from __future__ import annotations

import contextvars
import json
import logging
import math
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gym_sysmath.answers import strip_end_tokens
from gym_sysmath.integrations.episodes import (
    CLOSING_ACTION,
    Episode,
    PromptTooLong,
    ScoringError,
    TaskRef,
    chat_prompt,
    grade_completion,
    require_prompts_fit,
)

__all__ = ["AGENT_FLAGS", "DEFAULT_MAX_LEN", "FEEDBACK", "FLAGS", "REMOTE_ENV", "check_prompts", "feedback_text",
           "find_response", "grade_query", "openrlhf_rows", "prompt_limit", "response_text", "reward_func"]

#: By name: OpenRLHF loads this file as a module named ``reward_func`` or ``agent_module``.
log = logging.getLogger("gym_sysmath.integrations.openrlhf")

#: How an observation goes back to a policy whose tokenizer has no chat template.
FEEDBACK = "\n\nUser: {observation}\n\nAssistant: "

#: The ``extra_logs`` flags every result carries (0.0 or 1.0).
FLAGS = ("sysmath_scoring_error", "sysmath_reward_error", "sysmath_prompt_cut")

#: ... and, from ``AgentExecutor``, ``sysmath_closed_at_budget``: OpenRLHF's token budget ended the
#: trajectory before the episode did, so it was closed and graded (as ``grade_completion`` closes one).
AGENT_FLAGS = (*FLAGS, "sysmath_closed_at_budget")

#: OpenRLHF 0.11.2's ``--data.max_len`` default (prompt + response tokens).
DEFAULT_MAX_LEN = 2048

_LENGTH_FLAGS = "--data.max_len minus --rollout.max_new_tokens"


#: Where the reward file and the agent play their episodes: a ``gym-sysmath serve`` URL, or unset (here).
REMOTE_ENV = "GYM_SYSMATH_REMOTE"


def _env_kwargs() -> dict[str, Any]:
    return json.loads(os.environ.get("GYM_SYSMATH_ENV_KWARGS") or "{}")


def _remote() -> str | None:
    return os.environ.get(REMOTE_ENV) or None


def prompt_limit(max_len: int = DEFAULT_MAX_LEN, max_new_tokens: int | None = None) -> int:
    """The longest prompt (tokens) OpenRLHF's executors pass uncut: ``max_len - max_new_tokens``,
    or ``max_len - 1`` when ``max_new_tokens`` is None (the response gets what is left)."""
    return max_len - (max_new_tokens or 1)


def find_response(query: str, prompt: str) -> tuple[str, bool]:
    """``(response, prompt_cut)``: the response inside OpenRLHF's decoded prompt + response, less
    trailing end-of-turn tokens. When the query does not hold the whole prompt (OpenRLHF cut its
    start, or the tokenizer does not round-trip it), the response starts after the first match of
    the prompt's last characters (a tail found only once in the prompt), and ``prompt_cut`` is True.
    Never the prompt's own ANSWER example: with no such tail in the query this raises ValueError."""
    at = query.find(prompt)
    if at >= 0:
        return strip_end_tokens(query[at + len(prompt):]), False
    for size in (256, 128, 64, 32, 16, 8):
        tail = prompt[-size:]
        if size > len(prompt) or prompt.find(tail) != len(prompt) - size:
            continue  # a tail found earlier in the prompt could match inside the kept part
        at = query.find(tail)
        if at >= 0:
            return strip_end_tokens(query[at + size:]), True
    raise ValueError("the decoded query holds neither the prompt nor its last characters, so the response "
                     "cannot be cut out (grading the prompt's own ANSWER example would be wrong)")


def response_text(query: str, prompt: str) -> str:
    """The response inside OpenRLHF's decoded prompt + response (``find_response``'s text)."""
    return find_response(query, prompt)[0]


def _flags(**set_flags: float) -> dict[str, float]:
    return {flag: float(set_flags.get(flag, 0.0)) for flag in FLAGS}


def _task_name(label: Any) -> str:
    try:
        ref = TaskRef.parse(label)
    except Exception:  # the label itself is what failed: name it as given
        return f"label {str(label)[:120]!r}"
    return f"{ref.env_id} task {ref.task_id!r} ({ref.split})"


def grade_query(query: str, prompt: str, label: str | Mapping[str, Any]) -> tuple[float, dict[str, float]]:
    """``(reward, flags)`` of one response; never raises. The reward is NaN exactly when
    ``sysmath_scoring_error`` or ``sysmath_reward_error`` is set, and each failure is logged at
    ERROR (OpenRLHF would turn a raise into a silent ``None``)."""
    try:
        ref = TaskRef.parse(label)
        response, cut = find_response(query, prompt)
        reward, _ = grade_completion(ref, response, env_kwargs=_env_kwargs(), remote=_remote())
    except (ScoringError, ConnectionError) as exc:  # ConnectionError: the gym-sysmath server is unreachable
        log.error("gym-sysmath reward NaN (sysmath_scoring_error): %s", exc)
        return math.nan, _flags(sysmath_scoring_error=1)
    except Exception as exc:
        log.error("gym-sysmath reward NaN (sysmath_reward_error) for %s: %s: %s", _task_name(label),
                  type(exc).__name__, exc, exc_info=not isinstance(exc, ValueError))  # ValueError: says it all
        return math.nan, _flags(sysmath_reward_error=1)
    if cut:
        log.error("gym-sysmath: %s was graded from a query holding only the end of its prompt (OpenRLHF "
                  "cuts a prompt's start past its length limit: raise %s; `python -m "
                  "gym_sysmath.integrations.openrlhf check` finds such prompts before training)",
                  _task_name(label), _LENGTH_FLAGS)
    return reward, _flags(sysmath_prompt_cut=float(cut))


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[str], **_: Any) -> dict[str, Any]:
    """OpenRLHF's reward-file entry point: ``{"rewards", "scores", "extra_logs"}`` as tensors."""
    import torch

    graded = [grade_query(q, p, label) for q, p, label in zip(queries, prompts, labels, strict=True)]
    rewards = torch.tensor([reward for reward, _ in graded], dtype=torch.float32)
    extra_logs = {flag: torch.tensor([flags[flag] for _, flags in graded]) for flag in FLAGS}
    return {"rewards": rewards, "scores": rewards.clone(), "extra_logs": extra_logs}


def openrlhf_rows(rows: Sequence[Mapping[str, Any]], *, max_turns: int | None = 1,
                  system_prompt: str | None = None) -> list[dict[str, Any]]:
    """``build_dataset`` rows (made with this ``max_turns``) as ``{"prompt", "label"}`` for
    ``--data.input_key prompt --data.label_key label`` (chat prompts: ``--data.apply_chat_template``)."""
    return [{"prompt": chat_prompt(row["prompt"], system_prompt),
             "label": TaskRef.parse({**row, "max_turns": max_turns}).to_json()} for row in rows]


def check_prompts(rows: Iterable[Mapping[str, Any]], tokenizer: Any, *, max_len: int = DEFAULT_MAX_LEN,
                  max_new_tokens: int | None = None, input_key: str = "prompt", input_template: str | None = None,
                  apply_chat_template: bool = True) -> int:
    """Template ``rows`` as OpenRLHF's ``PromptDataset`` does with these ``--data.*`` settings and
    raise ``PromptTooLong`` when one would be cut at ``max_len``/``max_new_tokens``; returns the
    longest prompt's length in tokens."""
    from openrlhf.datasets.prompts_dataset import preprocess_data

    template = tokenizer.apply_chat_template if apply_chat_template else None
    prompts = [preprocess_data(dict(row), input_template, input_key, None, template)[0] for row in rows]
    return require_prompts_fit(prompts, tokenizer, prompt_limit(max_len, max_new_tokens), setting=_LENGTH_FLAGS,
                               apply_chat_template=False)


def feedback_text(tokenizer: Any, action: str, observation: str) -> str:
    """What follows ``action`` (as generated, end-of-turn token included) so that ``observation``
    is the next user turn of ``tokenizer``'s chat template and the assistant's turn is open again:
    the template's text after an assistant message, from past the end-of-turn token the action
    already ends with. ``FEEDBACK`` when the tokenizer has no chat template."""
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return FEEDBACK.format(observation=observation)
    marker = "\x00gym-sysmath-action\x00"
    chat = [{"role": "user", "content": "task"}, {"role": "assistant", "content": marker},
            {"role": "user", "content": observation}]
    text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    if marker not in text:
        log.warning("gym-sysmath: this chat template does not show an assistant message as written; the "
                    "observation goes back in the plain FEEDBACK frame")
        return FEEDBACK.format(observation=observation)
    after = text[text.index(marker) + len(marker):]
    # the end-of-turn token the action was generated with is in the trajectory already: go past
    # the template's own copy of it (before the observation), else past what the two share
    generated_end = action[len(strip_end_tokens(action)):].strip()
    before_observation = after.find(observation) if observation else len(after)
    at = after.find(generated_end, 0, before_observation) if generated_end else -1
    if at >= 0:
        return after[at + len(generated_end):]
    overlap = next((size for size in range(min(len(after), len(action)), 0, -1)
                    if action.endswith(after[:size])), 0)
    return after[overlap:]


try:
    from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor
except ImportError:  # the reward file needs no OpenRLHF; the agent classes do
    pass
else:
    import copy

    from gym_sysmath.async_env import run_blocking

    #: This trajectory's tokenizer (OpenRLHF hands it to ``execute``, not to ``AgentInstance``)
    #: and the list its instance registers in.
    _TRAJECTORY: contextvars.ContextVar[tuple[Any, list]] = contextvars.ContextVar("gym_sysmath_openrlhf")

    class AgentInstance(AgentInstanceBase):
        """One multi-turn trajectory: its own env, reset to the label's task."""

        def __init__(self, *args: Any, **kwargs: Any):
            self.episode: Episode | None = None
            self.tokenizer, instances = _TRAJECTORY.get((None, []))
            instances.append(self)

        def __del__(self) -> None:
            # an instance OpenRLHF drops mid-episode returns its container when it goes
            if self.episode is not None:
                self.episode.close()

        def feedback(self, action: str, observation: str) -> str:
            """The observation as the next user turn (override for another frame)."""
            return feedback_text(self.tokenizer, action, observation)

        async def reset(self, states: dict, **kwargs: Any) -> dict:
            self.episode = Episode(TaskRef.parse(states["label"]), env_kwargs=_env_kwargs(), own_env=True,
                                   remote=_remote())
            await run_blocking(self.episode.reset)
            return {"observation": states["observation"]}

        async def _step(self, action: str) -> tuple[float, bool, str, dict[str, float]]:
            """One ``env.step``; the episode's env is closed once it is done."""
            episode = self.episode
            assert episode is not None, "reset() comes first"
            try:
                observation, reward, terminated, truncated, _ = await run_blocking(episode.step, action)
            except ScoringError as exc:
                log.error("gym-sysmath reward NaN (sysmath_scoring_error): %s", exc)
                reward, done, observation, flags = math.nan, True, "", _flags(sysmath_scoring_error=1)
            else:
                done, flags = terminated or truncated, _flags()
            if done:
                await run_blocking(episode.close)
            return reward, done, observation, flags

        async def step(self, states: dict, **kwargs: Any) -> dict:
            reward, done, observation, flags = await self._step(strip_end_tokens(states["action_text"]))
            return {"rewards": _tensor(reward), "scores": _tensor(reward),
                    "environment_feedback": "" if done else self.feedback(states["action_text"], observation),
                    "done": done, "sampling_params": states.get("sampling_params"),
                    "extra_logs": {flag: _tensor(value) for flag, value in flags.items()}}

        async def close_open_episode(self, result: dict) -> dict:
            """OpenRLHF ended the trajectory on its token budget with the episode still open (the
            reward so far is no verdict): close it as ``grade_completion`` does, graded from what it left."""
            if self.episode is None or self.episode.done or not self.episode.messages:
                return result
            reward, done, _, flags = await self._step(CLOSING_ACTION)
            if not done:  # its reward stands, as in grade_completion
                await run_blocking(self.episode.close)
            return {**result, "reward": result["reward"] + reward, "scores": _tensor(reward),
                    "extra_logs": {flag: _tensor(value) for flag, value in
                                   {**flags, "sysmath_closed_at_budget": 1.0}.items()}}

    def _tensor(value: float) -> Any:
        import torch

        return torch.tensor([float(value)])

    class AgentExecutor(MultiTurnAgentExecutor):
        """What ``--train.agent_func_path`` loads: OpenRLHF's multi-turn loop over ``AgentInstance``,
        refusing a prompt it would cut, with the policy's tokenizer for the feedback turns and the
        episode graded when the token budget ends it."""

        def __init__(self) -> None:
            super().__init__(AgentInstance)

        async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine,
                          images=None):
            # OpenRLHF's loop sets max_tokens on the object it is given, which the other samples
            # of this prompt share: each trajectory gets its own copy
            sampling_params = copy.deepcopy(sampling_params)
            require_prompts_fit([prompt], hf_tokenizer, prompt_limit(max_length, sampling_params.max_tokens),
                                setting=_LENGTH_FLAGS, apply_chat_template=False)
            instances: list[AgentInstance] = []
            _TRAJECTORY.set((hf_tokenizer, instances))
            result = await super().execute(prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine,
                                           images=images)
            result["extra_logs"] = {**{flag: _tensor(0.0) for flag in AGENT_FLAGS}, **result["extra_logs"]}
            for instance in instances:
                result = await instance.close_open_episode(result)
            return result

    __all__ += ["AgentExecutor", "AgentInstance"]


def _main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m gym_sysmath.integrations.openrlhf",
                                     description="Refuse a prompt dataset OpenRLHF would cut at these settings.")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="template the prompts as OpenRLHF does and count their tokens")
    check.add_argument("dataset", help="a parquet or JSON-lines file `gym-sysmath export --format openrlhf` wrote")
    check.add_argument("--pretrain", required=True, help="the model (or tokenizer) path: --actor.model_name_or_path")
    check.add_argument("--data.max_len", dest="max_len", type=int, default=DEFAULT_MAX_LEN)
    check.add_argument("--rollout.max_new_tokens", dest="max_new_tokens", type=int, default=None)
    check.add_argument("--data.input_key", dest="input_key", default="prompt")
    check.add_argument("--data.input_template", dest="input_template", default=None)
    check.add_argument("--data.apply_chat_template", dest="apply_chat_template", action="store_true")
    args = parser.parse_args(argv)

    import pandas as pd
    from transformers import AutoTokenizer

    frame = pd.read_parquet(args.dataset) if args.dataset.endswith(".parquet") else pd.read_json(args.dataset,
                                                                                                    lines=True)
    rows = [{key: (value.tolist() if hasattr(value, "tolist") else value) for key, value in row.items()}
            for row in frame.to_dict("records")]
    tokenizer = AutoTokenizer.from_pretrained(args.pretrain, trust_remote_code=True)
    try:
        longest = check_prompts(rows, tokenizer, max_len=args.max_len, max_new_tokens=args.max_new_tokens,
                                input_key=args.input_key, input_template=args.input_template,
                                apply_chat_template=args.apply_chat_template)
    except PromptTooLong as exc:
        print(f"{args.dataset}: {exc}", file=sys.stderr)
        return 1
    print(f"{len(rows)} prompts fit: the longest is {longest} tokens, the limit "
          f"{prompt_limit(args.max_len, args.max_new_tokens)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())

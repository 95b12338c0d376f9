"""SkyRL-gym: a ``BaseTextEnv`` over each gym-sysmath id, registered in ``skyrl_gym``'s registry.

Importing this module registers ``gym_sysmath/<env id>`` (e.g. ``gym_sysmath/CsappExact-v0``)
for every id; a SkyRL row names it as ``env_class`` and holds the task reference as
``reward_spec.ground_truth`` (``skyrl_rows`` or ``gym-sysmath export --format skyrl``). SkyRL
makes one env per trajectory (``skyrl_gym.make(env_class, env_config=..., extras=row)``); its
episode is the real env's, multi-turn included: a python block is a tool turn whose output
comes back as the next user message, an ANSWER line (or the last turn) ends it with the verdict.

``env_config`` may set ``env_kwargs`` (``gym.make`` arguments), ``max_turns`` (the
reference's) and ``retries`` (1). SkyRL rewards are floats with no way to drop a sample, so
a scoring error is replayed on a fresh container and, if the harness still fails, raised as
``ScoringError`` (the trajectory stops with the cause named) instead of a 0.0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
from skyrl_gym.envs.registration import register, registry

from gym_sysmath.integrations.episodes import Episode, TaskRef, chat_prompt

__all__ = ["ENV_CLASS_PREFIX", "SysmathTextEnv", "env_class", "register_envs", "skyrl_rows"]

ENV_CLASS_PREFIX = "gym_sysmath/"


def env_class(env_id: str) -> str:
    """The SkyRL ``env_class`` of a gym-sysmath id."""
    return ENV_CLASS_PREFIX + env_id


def _setting(config: Any, name: str, default: Any) -> Any:
    """A field of SkyRL's ``env_config`` (a dict or an OmegaConf node), or ``default``."""
    if config is None:
        return default
    value = config.get(name, default) if hasattr(config, "get") else getattr(config, name, default)
    return default if value is None else value


class SysmathTextEnv(BaseTextEnv):
    """One trajectory of a gym-sysmath task, in SkyRL's text-env protocol."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None):
        super().__init__()
        extras = extras or {}
        if "reward_spec" not in extras or "ground_truth" not in extras["reward_spec"]:
            raise ValueError("a gym-sysmath SkyRL row needs reward_spec.ground_truth (a task reference): make the "
                             "dataset with `gym-sysmath export --format skyrl`")
        ref = TaskRef.parse(extras["reward_spec"]["ground_truth"])
        env_kwargs = _setting(env_config, "env_kwargs", {})
        self.episode = Episode(ref, env_kwargs=dict(env_kwargs), max_turns=_setting(env_config, "max_turns", None),
                               retries=int(_setting(env_config, "retries", 1)), own_env=True)
        self.max_turns = self.episode.core.max_turns

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """The row's prompt (it is the env's own, from the same reset) and the task's id."""
        self.episode.reset()
        return prompt, {"task_id": self.episode.ref.task_id}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        observation, reward, terminated, truncated, info = self.episode.step(action)
        self.turns = self.episode.core.turn
        done = terminated or truncated
        metadata = {"task_id": info["task_id"], "turn": info["turn"], "verdict": info["verdict"]}
        return BaseTextEnvStepOutput(observations=[] if done else [{"role": "user", "content": observation}],
                                     reward=reward, done=done, metadata=metadata)

    def get_metrics(self) -> dict[str, Any]:
        return {"correct": float(bool(self.episode.info.get("correct"))), "turns": float(self.turns)}

    def close(self) -> None:
        self.episode.close()


def register_envs() -> list[str]:
    """Register every gym-sysmath id with ``skyrl_gym`` (idempotent); the ``env_class`` names."""
    from gym_sysmath import env_ids

    names = [env_class(env_id) for env_id in env_ids()]
    for name in names:
        if name not in registry:
            register(id=name, entry_point=SysmathTextEnv)
    return names


def skyrl_rows(rows: Sequence[Mapping[str, Any]], *, max_turns: int | None = None,
               system_prompt: str | None = None) -> list[dict[str, Any]]:
    """``build_dataset`` rows (made with this ``max_turns``) in SkyRL's schema: ``data_source``,
    chat ``prompt``, ``env_class``, ``reward_spec{method, ground_truth}``, ``extra_info``."""
    out = []
    for index, row in enumerate(rows):
        ref = TaskRef.parse({**row, "max_turns": max_turns})
        out.append({
            "data_source": ENV_CLASS_PREFIX + ref.env_id,
            "prompt": chat_prompt(row["prompt"], system_prompt),
            "env_class": env_class(ref.env_id),
            "reward_spec": {"method": "rule", "ground_truth": ref.to_json()},
            "extra_info": {"index": index, "env_id": ref.env_id, "task_id": ref.task_id, "split": ref.split,
                           "seed": ref.seed},
        })
    return out


register_envs()

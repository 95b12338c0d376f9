"""SkyRL: a ``BaseTextEnv`` over every gym-sysmath id in ``skyrl_gym``'s registry, and an entry
point for SkyRL's trainer (the ``skyrl`` package) that gets its settings, turns and lengths right.

Importing this module registers ``gym_sysmath`` with ``skyrl_gym``: one env class for every id,
the id read from the row's task reference (``reward_spec.ground_truth``, written by
``skyrl_rows`` or ``gym-sysmath export --format skyrl``); ``gym_sysmath/<id>``, the names rows
exported before carry, stay registered. SkyRL's generator makes one env per trajectory
(``skyrl_gym.make(env_class, env_config=..., extras=row)``) and steps it once per reply: a
python block is a tool turn whose output comes back as the next user message, an ANSWER line
or the last turn ends the episode with the verdict as reward.

Turns: the episode ends after ``generator.max_turns`` replies (SkyRL hands it to the env as
``extras["max_turns"]``; 1 by default) or the turns its prompt offers, whichever is fewer, and
the last reply is graded as the final action (a python block in it runs, then is graded), as
``grade_completion`` grades a single-turn completion; with fewer turns than the row's prompt
offers, ``init`` gives the model the env's prompt for the turns it has. So SkyRL's single-step
paths (the default ``max_turns=1``, and ``generator.batched=true``) grade a code reply instead
of scoring 0.0.

Train with SkyRL's own entry point naming this module as its ``trainer.override_entrypoint``
(``python -m skyrl.train.entrypoints.main_base trainer.override_entrypoint=gym_sysmath.integrations.skyrl
...``; on Python 3.11, where SkyRL 0.3.0's entry point does not import, ``python -m
gym_sysmath.integrations.skyrl ...``): both run ``main``. SkyRL's config gains
``environment.skyrl_gym.gym_sysmath`` (``env_kwargs``: ``gym.make`` arguments; ``retries``: 1),
which SkyRL's generator hands each env as its ``env_config``, and ``remote``/``token``
(``environment.skyrl_gym.gym_sysmath.remote=http://HOST:8040``: every episode runs on that
``gym-sysmath serve`` server; a key without ``/``, so Hydra's override grammar parses it too); a
dataset with a prompt longer than ``trainer.max_prompt_length`` is refused (SkyRL's loader would
drop it with a log line); and ``SysmathGymGenerator`` grades a trajectory that SkyRL stops at
``generator.max_input_length`` with its episode still open (``close`` ends it with
``CLOSING_ACTION``): without that generator, ``close`` raises ``TrajectoryCutShort``, since SkyRL
would keep the ungraded 0.0 of the last tool turn.

SkyRL rewards are floats with no way to drop a sample, so a scoring error is replayed on a
fresh container and, if the harness still fails, raised as ``ScoringError`` (the step stops with
the cause named) instead of a 0.0.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
from skyrl_gym.envs.registration import register, registry

from gym_sysmath.answers import strip_end_tokens
from gym_sysmath.integrations.episodes import (
    CLOSING_ACTION,
    Episode,
    TaskRef,
    chat_prompt,
    offered_turns,
    require_prompts_fit,
)

# Also, built on first use (they subclass SkyRL's trainer): SysmathTrainConfig, SysmathGymGenerator, SysmathPPOExp.
__all__ = ["CUT_SHORT_KEY", "ENV_CLASS", "ENV_CLASS_PREFIX", "SETTINGS", "CutShortGrade", "SysmathTextEnv",
           "TrajectoryCutShort", "env_class", "env_settings", "load_config", "main", "offered_turns", "register_envs",
           "require_dataset_fits", "run_experiment", "skyrl_rows"]

#: The ``env_class`` of every gym-sysmath row, and its settings' key under ``environment.skyrl_gym``.
ENV_CLASS = "gym_sysmath"
#: ``gym_sysmath/<id>``: the env classes of rows exported before ``ENV_CLASS`` (still registered).
ENV_CLASS_PREFIX = "gym_sysmath/"
#: The settings an env takes from its ``env_config`` (``environment.skyrl_gym.gym_sysmath``), with defaults.
#: ``max_turns`` here (what the README documented before SkyRL's ``generator.max_turns`` reached
#: the env) caps the episode too: the smallest of it, the generator's and the prompt's turns wins.
#: ``remote``/``token``: a ``gym-sysmath serve`` URL where every episode runs, and its token
#: (default ``GYM_SYSMATH_SERVE_TOKEN``).
SETTINGS: Mapping[str, Any] = {"env_kwargs": {}, "retries": 1, "max_turns": None, "remote": None, "token": None}
#: The ``extras`` key through which ``SysmathGymGenerator`` takes the grade of a trajectory cut short.
CUT_SHORT_KEY = "gym_sysmath_cut_short"


def env_class(env_id: str) -> str:
    """The per-id SkyRL ``env_class`` of a gym-sysmath id (rows use ``ENV_CLASS``)."""
    return ENV_CLASS_PREFIX + env_id


def is_sysmath_class(name: str) -> bool:
    return name == ENV_CLASS or name.startswith(ENV_CLASS_PREFIX)


def env_settings(config: Any) -> dict[str, Any]:
    """An env's settings from SkyRL's ``env_config``: ``None`` or ``{}`` (SkyRL's default), a
    mapping, an OmegaConf node or the ``environment.skyrl_gym.gym_sysmath`` config. An unknown
    setting is refused, not ignored."""
    if config is None:
        values: dict[str, Any] = {}
    elif dataclasses.is_dataclass(config):
        values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    elif isinstance(config, Mapping):
        values = dict(config)
    else:
        raise TypeError(f"a gym_sysmath env_config is a mapping, got {type(config).__name__}")
    unknown = sorted(set(values) - set(SETTINGS))
    if unknown:
        raise ValueError(f"unknown gym_sysmath env setting(s) {unknown}: it takes {', '.join(SETTINGS)} (the turns "
                         f"are SkyRL's generator.max_turns)")
    settings = {name: default if values.get(name) is None else values[name] for name, default in SETTINGS.items()}
    settings["env_kwargs"] = dict(settings["env_kwargs"])
    if "max_turns" in settings["env_kwargs"]:
        raise ValueError("env_kwargs.max_turns is not a setting: the turns are SkyRL's generator.max_turns, capped by "
                         "the turns the prompt offers (`gym-sysmath export --max-turns`)")
    settings["retries"] = int(settings["retries"])
    if settings["max_turns"] is not None and int(settings["max_turns"]) < 1:
        raise ValueError(f"max_turns must be at least 1, got {settings['max_turns']}")
    return settings


class TrajectoryCutShort(RuntimeError):
    """SkyRL stopped stepping an open episode and keeps its last step's ungraded reward."""


@dataclasses.dataclass
class CutShortGrade:
    """Filled by the env when SkyRL stopped stepping it before the episode ended: its grade."""

    reward: float | None = None
    verdict: str | None = None


class SysmathTextEnv(BaseTextEnv):
    """One trajectory of a gym-sysmath task, in SkyRL's text-env protocol."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None):
        super().__init__()
        extras = extras or {}
        if "reward_spec" not in extras or "ground_truth" not in extras["reward_spec"]:
            raise ValueError("a gym-sysmath SkyRL row needs reward_spec.ground_truth (a task reference): make the "
                             "dataset with `gym-sysmath export --format skyrl`")
        ref = TaskRef.parse(extras["reward_spec"]["ground_truth"])
        settings = env_settings(env_config)
        self.offered_turns = offered_turns(ref)
        caps = [int(cap) for cap in (extras.get("max_turns"), settings["max_turns"]) if cap is not None]
        self.max_turns = min([self.offered_turns, *caps])  # extras["max_turns"]: SkyRL's generator.max_turns
        self.episode = Episode(ref, env_kwargs=settings["env_kwargs"], max_turns=self.max_turns,
                               retries=settings["retries"], own_env=True, remote=settings["remote"],
                               token=settings["token"])
        self.cut_short: CutShortGrade | None = extras.get(CUT_SHORT_KEY)
        self._ungraded_close: str | None = None

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """The row's prompt and the task's id. Its user turn is the env's own text for the task;
        when SkyRL gives fewer turns than the row's text offers, the env's text for those turns
        (the same reset) takes its place, so the model is told what will be graded."""
        observation, _ = self.episode.reset()
        if self.max_turns != self.offered_turns and prompt and prompt[-1].get("role") == "user":
            prompt = [*prompt[:-1], {**prompt[-1], "content": observation}]
        return prompt, {"task_id": self.episode.ref.task_id}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        observation, reward, terminated, truncated, info = self.episode.step(strip_end_tokens(action))
        self.turns = int(info["turn"])  # the env's (a served episode's core env is on the server)
        done = terminated or truncated
        metadata = {"task_id": info["task_id"], "turn": info["turn"], "verdict": info["verdict"]}
        return BaseTextEnvStepOutput(observations=[] if done else [{"role": "user", "content": observation}],
                                     reward=reward, done=done, metadata=metadata)

    def _grade_if_cut_short(self) -> None:
        """SkyRL asks for metrics or closes the env with the episode open (it stopped at
        ``generator.max_input_length``): end the episode with ``CLOSING_ACTION``, graded from
        what it left, and hand the grade to ``SysmathGymGenerator`` (or keep it for ``close``)."""
        episode = self.episode
        if episode.done or not episode.actions:
            return
        replies = len(episode.actions)
        _, reward, _, _, info = episode.step(CLOSING_ACTION)
        if self.cut_short is not None:
            self.cut_short.reward, self.cut_short.verdict = reward, info["verdict"]
            return
        self._ungraded_close = (
            f"{episode.ref.env_id} task {episode.ref.task_id!r}: SkyRL stopped this trajectory after {replies} of "
            f"{self.max_turns} turn(s) with the episode open (generator.max_input_length reached, or batched "
            f"generation with generator.max_turns > 1) and keeps its last step's ungraded 0.0; the episode grades "
            f"{reward} ({info['verdict']}). Run SkyRL with trainer.override_entrypoint=gym_sysmath.integrations.skyrl, "
            f"whose generator takes that grade")

    def get_metrics(self) -> dict[str, Any]:
        self._grade_if_cut_short()
        return {"correct": float(bool(self.episode.info.get("correct"))), "turns": float(self.turns)}

    def close(self) -> None:
        try:
            self._grade_if_cut_short()
        finally:
            self.episode.close()
        problem, self._ungraded_close = self._ungraded_close, None
        if problem:
            raise TrajectoryCutShort(problem)


def register_envs() -> list[str]:
    """Register ``gym_sysmath`` and every ``gym_sysmath/<id>`` with ``skyrl_gym`` (idempotent):
    the ``env_class`` names."""
    from gym_sysmath import env_ids

    names = [ENV_CLASS, *(env_class(env_id) for env_id in env_ids())]
    for name in names:
        if name not in registry:
            register(id=name, entry_point=SysmathTextEnv)
    return names


def skyrl_rows(rows: Sequence[Mapping[str, Any]], *, max_turns: int | None = None,
               system_prompt: str | None = None) -> list[dict[str, Any]]:
    """``build_dataset`` rows (made with this ``max_turns``) in SkyRL's schema: ``data_source``
    (``gym_sysmath/<id>``), chat ``prompt``, ``env_class`` (``gym_sysmath``),
    ``reward_spec{method, ground_truth}``, ``extra_info``."""
    out = []
    for index, row in enumerate(rows):
        ref = TaskRef.parse({**row, "max_turns": max_turns})
        out.append({
            "data_source": ENV_CLASS_PREFIX + ref.env_id,
            "prompt": chat_prompt(row["prompt"], system_prompt),
            "env_class": ENV_CLASS,
            "reward_spec": {"method": "rule", "ground_truth": ref.to_json()},
            "extra_info": {"index": index, "env_id": ref.env_id, "task_id": ref.task_id, "split": ref.split,
                           "seed": ref.seed},
        })
    return out


def _column(sources: Sequence[str], name: str) -> list[Any]:
    """A column of SkyRL dataset files (parquet or JSON), read as SkyRL's ``PromptDataset`` reads them."""
    import datasets

    values: list[Any] = []
    for source in sources:
        kind = "parquet" if source.lower().endswith(".parquet") else "json"
        values += datasets.load_dataset(kind, data_files=source, keep_in_memory=True)["train"][name]
    return values


def require_dataset_fits(sources: Sequence[str], tokenizer: Any, max_prompt_length: int) -> int:
    """The longest prompt of SkyRL dataset files, measured as SkyRL's ``PromptDataset`` measures
    it; ``PromptTooLong`` naming ``trainer.max_prompt_length`` when any is longer (``PromptDataset``
    would drop it with a log line)."""
    return require_prompts_fit(_column(sources, "prompt"), tokenizer, max_prompt_length,
                               setting="trainer.max_prompt_length")


def _warn_if_turns_cut(sources: Sequence[str], max_turns: int) -> None:
    """Say so when prompts offer more replies than ``generator.max_turns`` gives them."""
    offered: Counter[tuple[str, int]] = Counter()
    for spec in _column(sources, "reward_spec"):
        ref = TaskRef.parse(spec["ground_truth"])
        if offered_turns(ref) > max_turns:
            offered[ref.env_id, offered_turns(ref)] += 1
    for (env_id, turns), count in sorted(offered.items()):
        warnings.warn(f"{count} {env_id} prompt(s) offer {turns} replies but generator.max_turns={max_turns}: the "
                      f"env gives them its prompt for {max_turns} and grades the last reply as final. For tool turns "
                      f"set generator.max_turns={turns} (and generator.max_input_length to hold them)", stacklevel=2)


# ---------------------------------------------------------------------------------------- trainer
#
# SkyRL's trainer classes import torch, Ray and (on Python 3.11) a module pydantic refuses, so the
# classes below subclass them on first use; the module's __getattr__ hands them out by name, which
# is also how pickle (and so Ray) finds them in another process.

_TRAINER_CLASSES = ("SysmathEnvSettings", "SysmathSkyRLGymConfig", "SysmathEnvironmentConfig", "SysmathTrainConfig",
                    "SysmathGymGenerator", "SysmathPPOExp")


def _import_skyrl_trainer() -> None:
    """Import ``skyrl.tinker.types`` so the trainer's modules load. skyrl 0.3.0 (Python >= 3.11)
    puts a ``typing.TypedDict`` in a pydantic model there, which pydantic refuses before Python
    3.12; it is imported with ``typing_extensions.TypedDict`` (3.12's ``typing.TypedDict``) in its place."""
    if sys.version_info >= (3, 12) or "skyrl.tinker.types" in sys.modules:
        return
    import typing

    import typing_extensions

    saved = typing.TypedDict
    typing.TypedDict = typing_extensions.TypedDict
    try:
        import skyrl.tinker.types  # noqa: F401
    finally:
        typing.TypedDict = saved


def _set_last_reward(output: Any, reward: float) -> None:
    """Put ``reward`` where SkyRL put the last step's: the float, or the last reply's final token."""
    if hasattr(output, "step_outputs"):  # step-wise trajectories: one output per step
        last = output.step_outputs[-1]
        index = max((i for i, mask in enumerate(last.loss_mask) if mask), default=len(last.reward) - 1)
        last.reward[index] = reward
    elif isinstance(output.reward, list):
        output.reward[-1] = reward
    else:
        output.reward = reward


@functools.cache
def _trainer() -> dict[str, Any]:
    _import_skyrl_trainer()
    from skyrl.backends.skyrl_train.inference_servers.utils import resolve_policy_model_name
    from skyrl.train.config import BaseConfig, EnvironmentConfig, SkyRLGymConfig, SkyRLTrainConfig
    from skyrl.train.entrypoints.main_base import BasePPOExp
    from skyrl.train.generators.skyrl_gym_generator import SkyRLGymGenerator

    field = dataclasses.field
    settings_cls = dataclasses.make_dataclass(
        "SysmathEnvSettings", [("env_kwargs", dict, field(default_factory=dict)), ("retries", int, 1),
                               ("remote", Optional[str], None), ("token", Optional[str], None)],  # noqa: UP045
        bases=(BaseConfig,))

    def settings_of_prefixed_class(self: Any, name: str) -> Any:
        """``getattr(skyrl_gym_cfg, "gym_sysmath/<id>")``, as SkyRL's generator asks for a row's
        ``env_config``: the same settings as ``gym_sysmath``."""
        if name.startswith(ENV_CLASS_PREFIX):
            return self.gym_sysmath
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    gym_cls = dataclasses.make_dataclass(
        "SysmathSkyRLGymConfig", [(ENV_CLASS, settings_cls, field(default_factory=settings_cls))],
        bases=(SkyRLGymConfig,), namespace={"__getattr__": settings_of_prefixed_class})
    environment_cls = dataclasses.make_dataclass(
        "SysmathEnvironmentConfig",
        [("env_class", str, ENV_CLASS), ("skyrl_gym", gym_cls, field(default_factory=gym_cls))],
        bases=(EnvironmentConfig,))
    config_cls = dataclasses.make_dataclass(
        "SysmathTrainConfig", [("environment", environment_cls, field(default_factory=environment_cls))],
        bases=(SkyRLTrainConfig,))

    class SysmathGymGenerator(SkyRLGymGenerator):
        """SkyRL's generator, taking the env's grade of a trajectory it stopped at
        ``generator.max_input_length`` (SkyRL keeps the last tool turn's 0.0), and refusing
        batched generation with more than one turn (it steps each env once)."""

        def __init__(self, generator_cfg: Any, skyrl_gym_cfg: Any, inference_engine_client: Any, tokenizer: Any,
                     policy_model_name: str | None = None):
            if generator_cfg.batched and generator_cfg.max_turns != 1:
                raise ValueError(f"generator.batched=true steps each env once, so generator.max_turns="
                                 f"{generator_cfg.max_turns} turns cannot run: set generator.max_turns=1 (each reply "
                                 f"graded as the final action) or generator.batched=false for tool turns")
            super().__init__(generator_cfg, skyrl_gym_cfg, inference_engine_client, tokenizer, policy_model_name)

        def _setup_env_extras(self, env_class: str, env_extras: dict[str, Any], sampling_params: Any,
                              trajectory_id: Any) -> dict[str, Any]:
            env_extras = super()._setup_env_extras(env_class, env_extras, sampling_params, trajectory_id)
            if is_sysmath_class(env_class):  # a copy: SkyRL may share one extras dict between repetitions
                env_extras = {**env_extras, CUT_SHORT_KEY: CutShortGrade()}
            return env_extras

        def _post_process_agent_loop_output(self, agent_loop_output: Any, env_extras: dict[str, Any],
                                            trajectory_id: Any) -> Any:
            grade = env_extras.get(CUT_SHORT_KEY)
            if grade is not None and grade.reward is not None:
                _set_last_reward(agent_loop_output, grade.reward)
            return super()._post_process_agent_loop_output(agent_loop_output, env_extras, trajectory_id)

    class SysmathPPOExp(BasePPOExp):
        """SkyRL's PPO experiment with gym-sysmath's checks and ``SysmathGymGenerator``."""

        def get_train_dataset(self) -> Any:
            require_dataset_fits(self.cfg.data.train_data, self.tokenizer, self.cfg.trainer.max_prompt_length)
            _warn_if_turns_cut(self.cfg.data.train_data, self.cfg.generator.max_turns)
            return super().get_train_dataset()

        def get_eval_dataset(self) -> Any:
            if self.cfg.trainer.eval_interval > 0 and self.cfg.data.val_data:
                require_dataset_fits(self.cfg.data.val_data, self.tokenizer, self.cfg.trainer.max_prompt_length)
            return super().get_eval_dataset()

        def get_generator(self, cfg: Any, tokenizer: Any, inference_engine_client: Any) -> Any:
            return SysmathGymGenerator(generator_cfg=cfg.generator, skyrl_gym_cfg=cfg.environment.skyrl_gym,
                                       inference_engine_client=inference_engine_client, tokenizer=tokenizer,
                                       policy_model_name=resolve_policy_model_name(cfg))

    classes: dict[str, Any] = {"SysmathEnvSettings": settings_cls, "SysmathSkyRLGymConfig": gym_cls,
                                "SysmathEnvironmentConfig": environment_cls, "SysmathTrainConfig": config_cls,
                                "SysmathGymGenerator": SysmathGymGenerator, "SysmathPPOExp": SysmathPPOExp}
    for name, cls in classes.items():
        cls.__module__, cls.__qualname__ = __name__, name
    return classes


def __getattr__(name: str) -> Any:
    if name in _TRAINER_CLASSES:
        return _trainer()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_config(overrides: Sequence[str]) -> Any:
    """SkyRL's config from command-line overrides, as its entry point parses and validates them,
    with ``environment.skyrl_gym.gym_sysmath`` added (``trainer.override_entrypoint`` is dropped)."""
    overrides = [arg for arg in overrides if not arg.startswith("trainer.override_entrypoint=")]
    from skyrl.train.utils import validate_cfg

    cfg = _trainer()["SysmathTrainConfig"].from_cli_overrides(overrides)
    validate_cfg(cfg)
    env_settings(cfg.environment.skyrl_gym.gym_sysmath)  # refuse a bad setting before Ray starts
    if cfg.generator.batched and cfg.generator.max_turns != 1:
        raise ValueError(f"generator.batched=true steps each env once: set generator.max_turns=1, not "
                         f"{cfg.generator.max_turns}, or generator.batched=false for tool turns")
    return cfg


def run_experiment(cfg: Any) -> None:
    """SkyRL's PPO run (``BasePPOExp.run``) with ``SysmathPPOExp``; what ``main`` runs on Ray."""
    _trainer()["SysmathPPOExp"](cfg).run()


def main(argv: Sequence[str] | None = None) -> None:
    """SkyRL's training entry point for gym-sysmath: ``python -m skyrl.train.entrypoints.main_base
    trainer.override_entrypoint=gym_sysmath.integrations.skyrl ...`` calls it (Python 3.12+: SkyRL
    0.3.0's entry point does not import on 3.11), as ``python -m gym_sysmath.integrations.skyrl ...`` does."""
    import ray
    from skyrl.train.utils.utils import initialize_ray

    cfg = load_config(sys.argv[1:] if argv is None else argv)
    initialize_ray(cfg)
    ray.get(ray.remote(num_cpus=1)(run_experiment).remote(cfg))


if __name__ == "__main__":  # python -m gym_sysmath.integrations.skyrl: main from the module by its name (Ray
    from gym_sysmath.integrations.skyrl import main as named_main  # finds its classes by that name)

    named_main()
else:
    register_envs()

"""TRL's ``GRPOTrainer`` on SmolLM2-135M-Instruct with the env's reward: the README's Quickstart 3, run.

Rows from ``build_dataset`` (fresh train draws), ``SysmathReward()`` as the one reward function,
and ``trl.GRPOTrainer`` given the model's path, as TRL's own entry point takes it. TRL's defaults
stay, except what a CPU run of a few minutes needs: ``cpu_training_args()`` (without a GPU TRL's
defaults refuse to start, and its ``bf16`` and gradient checkpointing made one step on a CPU
without native bf16 769 s against 36 s), a small batch, a short completion
budget, ``--steps`` steps, a log line per step, and no checkpoints (TRL's last one adds a 1 GB
optimizer state). It prints each step's mean reward and the env's verdicts, then where it saved
the trained model and ``trainer_state.json`` (every step's logged metrics).

It shows the wiring; it measures no learning: the untrained 135M model rarely writes an
``ANSWER:`` line, so most rewards are 0. ``examples/smollm2_grpo.py`` is the study: the
project's own GRPO loop with a curriculum, held-out evals before and after, the reward-hacking
watch and the recorded run of docs/learning.md.

    make real-model                                 # SmolLM2-135M-Instruct into .venv, once
    .venv/bin/python examples/trl_grpo.py           # 2 steps on two CPU cores: about a minute
    .venv/bin/python examples/trl_grpo.py --steps 20 --env-id CsappExact-v0 --sandbox process
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

#: where `make real-model` saves the fp32 copy (tests/real_model/smollm2.py)
DEFAULT_MODEL = Path(sys.prefix) / "share" / "gym-sysmath" / "smollm2" / "fp32"


def at_least(minimum: int):
    """An argparse type: a whole number no smaller than ``minimum``."""

    def parse(text: str) -> int:
        if not text.isdigit() or int(text) < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least {minimum}")
        return int(text)

    return parse


positive = at_least(1)


class OneLineParser(argparse.ArgumentParser):
    """A refused argument in one line, without the usage dump."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message}\n")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL,
                        help="a save_pretrained directory (default: the copy `make real-model` installs)")
    parser.add_argument("--env-id", default="LinearAlgebra-v0")
    parser.add_argument("--steps", type=positive, default=2, help="GRPO steps (default: 2)")
    parser.add_argument("--generations", type=at_least(2), default=4,
                        help="completions per prompt, one prompt a step (GRPO compares at least 2)")
    parser.add_argument("--max-completion-length", type=positive, default=64, help="new tokens per completion")
    parser.add_argument("--sandbox", choices=("docker", "process"), default="docker",
                        help="where the reward's envs run code (process: no Docker, no isolation)")
    parser.add_argument("--out", type=Path, default=Path("runs/trl-grpo"), help="the trainer's output_dir")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import gym_sysmath
    from gym_sysmath.filters import unknown_name

    if args.env_id not in gym_sysmath.env_ids():
        print(f"trl_grpo.py: {unknown_name('env id', args.env_id, gym_sysmath.env_ids(), where='--env-id')}",
              file=sys.stderr)
        return 2
    if not (args.model / "config.json").is_file():
        print(f"trl_grpo.py: no model at {args.model}: run `make real-model` (SmolLM2-135M-Instruct, "
              "about 100 MB, into .venv) and this script with .venv/bin/python, or pass --model DIR", file=sys.stderr)
        return 2
    writable = next((path for path in (args.out, *args.out.parents) if path.exists()), Path("."))
    if not writable.is_dir() or not os.access(writable, os.W_OK) or writable.resolve().is_relative_to("/proc"):
        print(f"trl_grpo.py: cannot write --out {args.out}: {writable} is not a directory this user can write",
              file=sys.stderr)
        return 2
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from datasets import Dataset
        from tqdm.auto import tqdm
        from transformers import TrainerCallback
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as missing:
        print(f"trl_grpo.py: {missing}: install TRL with `pip install -e '.[trl]'`", file=sys.stderr)
        return 2
    from gym_sysmath.integrations.trl import SysmathReward, build_dataset, cpu_training_args

    rows = build_dataset(args.env_id, split="train", n=args.steps, conversational=True)  # one prompt a step
    reward = SysmathReward(env_kwargs={"sandbox": args.sandbox})

    class PrintRewards(TrainerCallback):
        """One line a step: the trainer's logged mean reward and the env's verdicts behind it."""

        def on_log(self, _args, state, control, logs=None, **kwargs):
            key = f"rewards/{reward.__name__}/mean"
            if logs and key in logs:
                verdicts = Counter(graded.verdict for graded in reward.last_results)
                tqdm.write(f"step {state.global_step}: mean reward {logs[key]:.3f} over {len(reward.last_results)} "
                           f"completions ({', '.join(f'{v} {n}' for v, n in sorted(verdicts.items()))})")  # not mid-bar

    config = GRPOConfig(output_dir=str(args.out), max_steps=args.steps, num_generations=args.generations,
                        per_device_train_batch_size=args.generations,
                        max_completion_length=args.max_completion_length, logging_steps=1,
                        save_strategy="no", **cpu_training_args())
    trainer = GRPOTrainer(model=str(args.model), reward_funcs=[reward], args=config,
                          train_dataset=Dataset.from_list(rows), callbacks=[PrintRewards()])
    try:
        trainer.train()
    finally:
        reward.close()
    trainer.save_model()
    trainer.save_state()
    print(f"the trained model and trainer_state.json (every logged step): {args.out.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""PPO (Stable-Baselines3) on CsappExact-v0 through the multiple-choice adapter.

SB3 cannot consume text, so each episode is a choice among the task's executed candidate
answers (the key and the answers of its tempting wrong readings), described by numeric
features; see ``gym_sysmath.integrations.sb3``. The reward is still the env's exact verdict on
the submitted ``ANSWER:`` line. Training uses the train split, an unlimited stream of fresh
template draws; evaluation replays the same seeded episodes for the trained policy and for a
uniformly random one, so the two numbers are comparable.

    python examples/ppo_sb3.py                          # docker sandbox (answers never run code)
    python examples/ppo_sb3.py --sandbox process --total-timesteps 60000

Needs ``pip install -e '.[train]'`` (stable-baselines3 and a CPU torch).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from dataclasses import dataclass

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from gym_sysmath.integrations.sb3 import CandidateChoiceEnv, make_choice_env


@dataclass
class Args:
    env_id: str = "CsappExact-v0"
    """the family (the adapter supports CsappExact-v0)"""
    seed: int = 0
    """seed of the training envs, the policy and the evaluation RNG"""
    total_timesteps: int = 30_000
    """environment steps (one step = one task answered)"""
    num_envs: int = 8
    """parallel envs in the DummyVecEnv"""
    num_steps: int = 128
    """steps per env per rollout"""
    learning_rate: float = 1e-3
    batch_size: int = 256
    update_epochs: int = 4
    hidden: int = 64
    """width of the two hidden layers of policy and value nets"""
    eval_episodes: int = 500
    """seeded episodes both policies are scored on"""
    eval_seed: int = 1_000_000
    """first evaluation seed (far from the training seeds)"""
    sandbox: str = "docker"
    """sandbox backend of the wrapped env; answer steps never run code"""
    categories: str = "integers,floats,bits,memory,cache"
    """CsappExact categories, comma-separated: the data-representation ones, whose answers are
    numbers the adapter's features describe (orderings and outputs of the newer ones are not)"""
    threads: int = 1
    """torch CPU threads"""


def parse_args() -> Args:
    """Command-line flags from the dataclass fields (``--total-timesteps 60000``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field in dataclasses.fields(Args):
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=type(field.default), default=field.default)
    return Args(**vars(parser.parse_args()))


class RolloutLog(BaseCallback):
    """Print the mean episode reward after every rollout, CleanRL-style."""

    def __init__(self) -> None:
        super().__init__()
        self.started = time.perf_counter()

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        rewards = [episode["r"] for episode in self.model.ep_info_buffer]
        if rewards:
            rate = self.num_timesteps / (time.perf_counter() - self.started)
            print(f"step={self.num_timesteps:>7d}  mean_reward(last {len(rewards)})={np.mean(rewards):.3f}  "
                  f"SPS={rate:.0f}")


def make_env(args: Args) -> CandidateChoiceEnv:
    return make_choice_env(args.env_id, split="train", sandbox=args.sandbox,
                           categories=[name for name in args.categories.split(",") if name])


def train(args: Args) -> PPO:
    torch.set_num_threads(args.threads)
    envs = make_vec_env(lambda: make_env(args), n_envs=args.num_envs, seed=args.seed)
    model = PPO(
        "MlpPolicy", envs, n_steps=args.num_steps, batch_size=args.batch_size, n_epochs=args.update_epochs,
        learning_rate=args.learning_rate,
        gamma=1.0, gae_lambda=1.0,  # one-step episodes: the return is the reward
        policy_kwargs={"net_arch": [args.hidden, args.hidden]}, seed=args.seed, device="cpu", verbose=0,
    )
    model.learn(total_timesteps=args.total_timesteps, callback=RolloutLog())
    envs.close()
    return model


def evaluate(model: PPO, args: Args) -> dict[str, float]:
    """Mean reward of the trained (greedy) and a uniformly random policy on the same seeded tasks."""
    env = make_env(args)
    rng = np.random.default_rng(args.seed)
    totals = {"trained": 0.0, "random": 0.0, "scoring_errors": 0.0}
    try:
        for episode in range(args.eval_episodes):
            seed = args.eval_seed + episode
            for name in ("trained", "random"):
                observation, _ = env.reset(seed=seed)
                if name == "trained":
                    action = int(model.predict(observation, deterministic=True)[0])
                else:
                    action = int(rng.integers(env.n_choices))
                _, reward, _, _, info = env.step(action)
                totals[name] += reward
                totals["scoring_errors"] += bool(info.get("scoring_error"))
    finally:
        env.close()
    return {"trained": totals["trained"] / args.eval_episodes, "random": totals["random"] / args.eval_episodes,
            "scoring_errors": totals["scoring_errors"]}


def main(args: Args) -> dict[str, float]:
    started = time.perf_counter()
    model = train(args)
    result = evaluate(model, args)
    print(f"\n{args.env_id} (train split), {args.eval_episodes} seeded tasks: "
          f"trained PPO {result['trained']:.3f}  vs  random {result['random']:.3f}  "
          f"(scoring errors: {int(result['scoring_errors'])}; {time.perf_counter() - started:.1f} s)")
    return result


if __name__ == "__main__":
    main(parse_args())

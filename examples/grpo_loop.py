"""A plain GRPO-style loop against the batched vector env, with a stub policy instead of an LLM.

Each iteration resets all ``group_size`` envs of ``gym.make_vec(..., "vector_entry_point")``
with one seed, so the whole group sees the same task (GRPO compares completions of one
prompt). The policy samples one completion per env, the envs grade them concurrently, and the
group-relative advantage ``(r - mean(r)) / (std(r) + eps)`` weights a REINFORCE update. A
completion whose grading hit a scoring error is masked: it is left out of the group's mean and
std and gets advantage 0, so a broken harness never reads as a wrong answer.

No model can be downloaded here, so the policy is a placeholder: it answers CsappExact tasks by
choosing one of the task's executed candidate answers (the key or a tempting wrong reading,
shuffled) with a softmax over a linear score of numeric features of the candidate (sign, C
widths it fits, float32 exactness, ...), per question template (as an LLM reads the prompt):
no field of the train split is answered by a constant, so features alone, blind to the
question, learn next to nothing. Swap ``StubPolicy`` for an LLM's ``generate`` and
``log_prob`` gradient and the loop is unchanged: it only ever sees text in and rewards out.

    python examples/grpo_loop.py                      # docker sandbox
    python examples/grpo_loop.py --sandbox process    # no Docker: answers never run code
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.integrations.sb3 import ELEMENT_FEATURES, TEMPLATE_NAMES, csapp_record, element_features


@dataclass
class Args:
    env_id: str = "CsappExact-v0"
    """the family (the stub policy reads CsappExact's candidate answers)"""
    seed: int = 0
    group_size: int = 8
    """completions per task (and envs in the vector env)"""
    iterations: int = 600
    """tasks (groups) to train on"""
    learning_rate: float = 0.5
    eval_tasks: int = 200
    """held-out seeded tasks scored before and after training"""
    sandbox: str = "docker"
    """sandbox backend; answer-only completions never run code"""


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field in dataclasses.fields(Args):
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=type(field.default), default=field.default)
    return Args(**vars(parser.parse_args()))


class StubPolicy:
    """Softmax over candidate answers with logits ``w . phi(candidate)``: an LLM stand-in."""

    def __init__(self, rng: np.random.Generator):
        self.weights = np.zeros(ELEMENT_FEATURES * (1 + len(TEMPLATE_NAMES)))  # shared, then one block a template
        self.rng = rng

    @staticmethod
    def features(candidate: list, template: str) -> np.ndarray:
        phi = np.mean([element_features(value) for value in candidate], axis=0)
        out = np.zeros(ELEMENT_FEATURES * (1 + len(TEMPLATE_NAMES)))
        block = 1 + TEMPLATE_NAMES.index(template)
        out[:ELEMENT_FEATURES] = out[block * ELEMENT_FEATURES:(block + 1) * ELEMENT_FEATURES] = phi
        return out

    def probabilities(self, candidates: list[list], template: str) -> tuple[np.ndarray, np.ndarray]:
        phi = np.stack([self.features(c, template) for c in candidates])
        logits = phi @ self.weights
        p = np.exp(logits - logits.max())
        return p / p.sum(), phi

    def sample(self, question: tuple[str, list[list]], n: int,
               greedy: bool = False) -> tuple[list[str], list[np.ndarray]]:
        """``n`` completions (text) and the score-function gradient of each one's log-probability."""
        template, candidates = question
        p, phi = self.probabilities(candidates, template)
        picks = [int(np.argmax(p))] * n if greedy else list(self.rng.choice(len(candidates), size=n, p=p))
        expected = p @ phi
        texts = [f"Reading the C semantics carefully.\nANSWER: {json.dumps(candidates[i])}" for i in picks]
        return texts, [phi[i] - expected for i in picks]


def candidates_of(envs: gym.vector.VectorEnv, rng: np.random.Generator) -> tuple[str, list[list]]:
    """The current task's template, and its executed key and distractors, shuffled (the group
    shares one task)."""
    record = csapp_record(envs.unwrapped.envs[0])
    candidates = [record.answer, *record.distractors]
    return record.template, [candidates[i] for i in rng.permutation(len(candidates))]


def group_advantages(rewards: np.ndarray, valid: np.ndarray, eps: float = 1e-4) -> np.ndarray:
    """GRPO's advantage: each reward against its group's mean and std, scoring errors masked out."""
    advantages = np.zeros_like(rewards)
    if valid.sum() >= 2:
        scored = rewards[valid]
        advantages[valid] = (scored - scored.mean()) / (scored.std() + eps)
    return advantages


def evaluate(envs: gym.vector.VectorEnv, policy: StubPolicy, args: Args, greedy: bool) -> float:
    """Mean reward of one completion per held-out task (seeds far from the training ones)."""
    rng = np.random.default_rng(args.seed + 1)
    total = 0.0
    for task in range(args.eval_tasks):
        envs.reset(seed=[10_000_000 + task] * envs.num_envs)
        texts, _ = policy.sample(candidates_of(envs, rng), envs.num_envs, greedy=greedy)
        _, rewards, *_ = envs.step(texts)
        total += rewards[0]
    return total / args.eval_tasks


def main(args: Args) -> dict[str, float]:
    started = time.perf_counter()
    envs = gym.make_vec(args.env_id, num_envs=args.group_size, vectorization_mode="vector_entry_point",
                        split="train", sandbox=args.sandbox)
    rng = np.random.default_rng(args.seed)
    policy = StubPolicy(rng)
    before = evaluate(envs, policy, args, greedy=False)
    scoring_errors = 0
    running = []
    for iteration in range(args.iterations):
        envs.reset(seed=[args.seed * 1_000_003 + iteration] * args.group_size)  # one task per group
        texts, grads = policy.sample(candidates_of(envs, rng), args.group_size)
        _, rewards, _, _, infos = envs.step(texts)
        valid = np.array([not error for error in infos["scoring_error"]], dtype=bool)
        scoring_errors += int((~valid).sum())
        advantages = group_advantages(rewards, valid)
        policy.weights += args.learning_rate * np.mean([a * g for a, g in zip(advantages, grads, strict=True)], axis=0)
        running.append(rewards[valid].mean() if valid.any() else np.nan)
        if (iteration + 1) % 50 == 0:
            print(f"iter={iteration + 1:>4d}  group_reward(last 50)={np.nanmean(running[-50:]):.3f}  "
                  f"scoring_errors={scoring_errors}")
    after = evaluate(envs, policy, args, greedy=True)
    envs.close()
    print(f"\nheld-out tasks: stub policy before training {before:.3f} (samples uniformly), after {after:.3f} "
          f"(greedy); {time.perf_counter() - started:.1f} s")
    return {"before": before, "after": after, "scoring_errors": float(scoring_errors)}


if __name__ == "__main__":
    main(parse_args())

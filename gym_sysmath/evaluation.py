"""Offline evaluation: run an agent over an env's fixed tasks and tally verdicts.

Scoring errors are counted apart and excluded from accuracy, never folded in as wrong.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import gymnasium as gym

Agent = Callable[[gym.Env, str], str]


def reference_agent(env: gym.Env, observation: str) -> str:
    return env.unwrapped.reference_action()


def random_agent(env: gym.Env, observation: str) -> str:
    return env.action_space.sample()


AGENTS: dict[str, Agent] = {"reference": reference_agent, "random": random_agent}


@dataclass
class Scoreboard:
    env_id: str
    agent: str
    verdicts: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def scored(self) -> int:
        return sum(count for verdict, count in self.verdicts.items() if verdict != "scoring_error")

    @property
    def accuracy(self) -> float:
        return self.verdicts["correct"] / self.scored if self.scored else 0.0


def evaluate(env_id: str, agent_name: str = "reference", limit: int | None = None, seed: int = 0,
             **make_kwargs) -> Scoreboard:
    agent = AGENTS[agent_name]
    board = Scoreboard(env_id, agent_name)
    started = time.perf_counter()
    env = gym.make(env_id, **make_kwargs)
    env.action_space.seed(seed)
    try:
        task_ids = env.unwrapped.task_ids[:limit] if limit else env.unwrapped.task_ids
        for index, task_id in enumerate(task_ids):
            observation, _ = env.reset(seed=seed + index, options={"task_id": task_id})
            while True:
                observation, _, terminated, truncated, info = env.step(agent(env, observation))
                if terminated or truncated:
                    break
            board.verdicts[info["verdict"]] += 1
    finally:
        env.close()
    board.seconds = time.perf_counter() - started
    return board


def format_scoreboards(boards: list[Scoreboard]) -> str:
    header = f"{'env':<22} {'agent':<10} {'tasks':>5} {'correct':>7} {'scoring_err':>11} {'accuracy':>8} {'time':>7}"
    lines = [header, "-" * len(header)]
    for board in boards:
        total = sum(board.verdicts.values())
        lines.append(f"{board.env_id:<22} {board.agent:<10} {total:>5} {board.verdicts['correct']:>7} "
                     f"{board.verdicts['scoring_error']:>11} {board.accuracy:>8.1%} {board.seconds:>6.1f}s")
    return "\n".join(lines)

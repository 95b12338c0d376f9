"""Rollouts against a running ``gym-sysmath serve``, from one event loop: the shape of an async
trainer's rollout worker on a machine without Docker.

    .venv-serve/bin/gym-sysmath serve --warm 8          # on the env machine (make serve-venv)
    python examples/remote_rollouts.py --url http://127.0.0.1:8040 --episodes 16

Each episode runs one Python tool turn on the server, then answers. The "policy" here is a fixed
reply (replace ``policy`` with your model); what matters is the loop: ``await reset``, ``await
step`` until the episode ends, and a scoring error dropped rather than counted as a wrong answer.
"""

from __future__ import annotations

import argparse
import asyncio
import collections

from gym_sysmath.serving.client import AsyncRemoteSysmathEnv


def policy(observation: str, turn: int) -> str:
    """A stand-in for a model: look something up with a tool turn, then answer."""
    if turn == 0:
        return "```python\nprint(hex(-1 & 0xFFFFFFFF))\n```"
    return "ANSWER: [0]"


async def episode(url: str, env_id: str, seed: int, token: str | None) -> tuple[float, str]:
    async with AsyncRemoteSysmathEnv(url, env_id, token=token, max_turns=2) as env:
        observation, info = await env.reset(seed=seed)
        for turn in range(2):
            observation, reward, terminated, truncated, info = await env.step(policy(observation, turn))
            if terminated or truncated:
                break
        return reward, "scoring_error" if info.get("scoring_error") else str(info.get("verdict"))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8040")
    parser.add_argument("--env-id", default="CsappExact-v0")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--token", help="the server's --token (default: $GYM_SYSMATH_SERVE_TOKEN)")
    args = parser.parse_args()
    results = await asyncio.gather(*(episode(args.url, args.env_id, seed, args.token)
                                     for seed in range(args.episodes)))
    verdicts = collections.Counter(verdict for _, verdict in results)
    scored = [reward for reward, verdict in results if verdict != "scoring_error"]
    print(f"{len(results)} episodes: {dict(verdicts)}; mean reward over scored episodes "
          f"{sum(scored) / max(1, len(scored)):.3f}")


if __name__ == "__main__":
    asyncio.run(main())

"""Episodes on a Ray cluster through the per-node service: one actor per CPU node owns that node's
envs and warm containers; the router keeps each episode on its node and replays it elsewhere if
the node is lost. The shape of a Ray-native trainer's rollout worker (verl, OpenRLHF, SkyRL).

    ray start --head                                    # or an existing cluster; every env node
    python examples/ray_service.py --address auto       # needs gym-sysmath and its sandbox image

Without ``--address`` it starts a one-node Ray here. The "policy" is a fixed tool turn and answer
(replace ``policy`` with your model).
"""

from __future__ import annotations

import argparse
import collections
import json

from gym_sysmath.serving.ray_service import SysmathRayService


def policy(observation: str, turn: int) -> str:
    """A stand-in for a model: a tool turn, then an answer."""
    return "```python\nprint(2**10)\n```" if turn == 0 else "ANSWER: [0]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", help="a Ray cluster (default: start one here)")
    parser.add_argument("--env-id", default="CsappExact-v0")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--sandbox", default="docker", choices=["docker", "process"])
    args = parser.parse_args()
    with SysmathRayService.start(address=args.address) as service:
        verdicts: collections.Counter[str] = collections.Counter()
        for seed in range(args.episodes):
            env = service.make_env(args.env_id, sandbox=args.sandbox, max_turns=2)
            observation, info = env.reset(seed=seed)
            for turn in range(2):
                observation, _reward, terminated, truncated, info = env.step(policy(observation, turn))
                if terminated or truncated:
                    break
            verdicts["scoring_error" if info.get("scoring_error") else str(info["verdict"])] += 1
            env.close()
        print(f"{args.episodes} episodes on {len(service.nodes())} node(s): {dict(verdicts)}")
        print(json.dumps({"replays": [replay.outcome for replay in service.replays]}))


if __name__ == "__main__":
    main()

"""The ``gym-sysmath`` command: sandbox management, task verification, and evaluation."""

from __future__ import annotations

import argparse
import importlib
import sys

VERIFIERS = {
    "csapp": "gym_sysmath.tasks.csapp.build",
    "linalg": "gym_sysmath.tasks.linalg.build",
}


def _sandbox(args: argparse.Namespace) -> int:
    from gym_sysmath.sandbox import image

    client = image.docker_client()
    if args.action == "build":
        image.build_image(client, bootstrap=args.bootstrap, force=args.force, mirror=args.mirror)
    elif args.action == "status":
        print(f"daemon: reachable ({client.version().get('Version', '?')})")
        print(f"image:  {image.image_status(client).describe()}")
        containers = image.our_containers(client)
        print(f"containers: {len(containers)}")
        for container in containers:
            print(f"  {container.short_id} {container.status} owner={container.labels.get(image.LABEL_OWNER)}")
    elif args.action == "prune":
        removed = image.prune(client, everything=args.all)
        print(f"removed {removed} container(s)")
    return 0


def _verify(args: argparse.Namespace) -> int:
    module = importlib.import_module(VERIFIERS[args.family])
    return module.main(["--verify"])


def _list(args: argparse.Namespace) -> int:
    import gymnasium as gym

    from gym_sysmath import env_ids

    for env_id in env_ids():
        env = gym.make(env_id)
        try:
            print(f"{env_id:<22} {env.unwrapped.family:<8} {len(env.unwrapped.task_ids):>4} eval tasks")
        finally:
            env.close()
    return 0


def _eval(args: argparse.Namespace) -> int:
    from gym_sysmath import env_ids
    from gym_sysmath.evaluation import evaluate, format_scoreboards

    ids = list(env_ids()) if args.all or not args.env_ids else args.env_ids
    boards = [evaluate(env_id, agent, limit=args.n, seed=args.seed, sandbox=args.sandbox)
              for env_id in ids for agent in args.agent]
    print(format_scoreboards(boards))
    failed = [b for b in boards if b.agent == "reference" and (b.accuracy < 1.0 or b.verdicts["scoring_error"])]
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gym-sysmath", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    sandbox = commands.add_parser("sandbox", help="build, inspect or clean the Docker sandbox")
    sandbox.add_argument("action", choices=["build", "status", "prune"])
    sandbox.add_argument("--bootstrap", action="store_true",
                         help="build the base image with debootstrap + docker import (no registry needed)")
    sandbox.add_argument("--force", action="store_true", help="rebuild even when the image is current")
    sandbox.add_argument("--mirror", help="Debian mirror (default: the one this host's apt uses)")
    sandbox.add_argument("--all", action="store_true", help="prune: remove every container of ours, not only orphans")
    sandbox.set_defaults(func=_sandbox)

    verify = commands.add_parser("verify", help="re-check a family's task keys independently")
    verify.add_argument("family", choices=sorted(VERIFIERS))
    verify.set_defaults(func=_verify)

    listing = commands.add_parser("list", help="registered ids and their task counts")
    listing.set_defaults(func=_list)

    evaluation = commands.add_parser("eval", help="evaluate an agent on registered envs and print a scoreboard")
    evaluation.add_argument("env_ids", nargs="*")
    evaluation.add_argument("--all", action="store_true")
    evaluation.add_argument("--agent", action="append", choices=["reference", "random"])
    evaluation.add_argument("-n", type=int, default=None, help="tasks per env (default: all)")
    evaluation.add_argument("--seed", type=int, default=0)
    evaluation.add_argument("--sandbox", default="docker", choices=["docker", "process"])
    evaluation.set_defaults(func=_eval)
    return parser


def main(argv: list[str] | None = None) -> int:
    from gym_sysmath.sandbox import SandboxUnavailableError

    args = build_parser().parse_args(argv)
    if getattr(args, "agent", "unset") is None:
        args.agent = ["reference"]
    try:
        return int(args.func(args) or 0)
    except SandboxUnavailableError as exc:
        print(f"gym-sysmath: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

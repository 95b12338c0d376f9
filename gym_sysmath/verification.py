"""What ``gym-sysmath verify <family>`` runs for the built-in families: each re-checks its task
keys independently of how they were built. A family's registry row names its function here (or
anywhere); each takes the ``verify`` command's namespace (``sandbox``, ``primitive``) and returns
the exit code."""

from __future__ import annotations

import argparse
import importlib
import os


def build_main(module: str, args: argparse.Namespace) -> int:
    """A family whose ``build`` module's ``--verify`` is its whole check."""
    if args.primitive:
        raise SystemExit(f"--primitive applies to compgeom only, not {args.family}")
    return int(importlib.import_module(module).main(["--verify"]))


def csapp(args: argparse.Namespace) -> int:
    return build_main("gym_sysmath.tasks.csapp.build", args)


def linalg(args: argparse.Namespace) -> int:
    return build_main("gym_sysmath.tasks.linalg.build", args)


def compgeom(args: argparse.Namespace) -> int:
    """Every fixture compiled and run where candidates are (``--sandbox``; ``local``: the host's
    own g++ and rustc): good ones pass, bad ones fail."""
    from gym_sysmath.tasks import compgeom as tasks

    primitives = args.primitive or tasks.PRIMITIVES
    if args.sandbox == "local":
        from gym_sysmath.tasks.compgeom.runner import run_local

        if not args.primitive:
            return int(importlib.import_module("gym_sysmath.tasks.compgeom.build").main(["--verify"]))
        report = tasks.verify(run_local, primitives=primitives, max_workers=os.cpu_count() or 1)
    else:
        from gym_sysmath.envs.compgeom import sandbox_runner
        from gym_sysmath.sandbox import Sandbox
        from gym_sysmath.sandbox.pool import default_pool_size

        sandbox = Sandbox(args.sandbox)
        try:
            report = tasks.verify(sandbox_runner(sandbox), primitives=primitives,
                                  max_workers=sandbox.pool_size or default_pool_size())
        finally:
            sandbox.close()
    print("\n".join(report.lines()))
    return 0 if report.ok else 1

"""What ``gym-sysmath verify <family>`` runs: each re-checks a family's task keys independently of
how they were built. A registry row's ``verifier`` is ``build_verify`` unless it names another
function (here or anywhere); each takes the ``verify`` command's namespace (``family``,
``sandbox``, ``primitive``) and returns the exit code."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys


def build_verify(args: argparse.Namespace) -> int:
    """The default verifier: the family's task folder's ``build.py --verify``
    (``gym_sysmath.tasks.<family>.build``), which rebuilds every key by an independent route."""
    if args.primitive:
        print(f"gym-sysmath verify: --primitive applies to compgeom only, not {args.family}", file=sys.stderr)
        return 2
    module = f"gym_sysmath.tasks.{args.family}.build"
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # no gym_sysmath.tasks.<family> package at all
        found = False
    if not found:
        raise SystemExit(f"family {args.family!r} has no {module} (tasks/{args.family}/build.py with main(argv)); "
                         "give its registry row a verifier='module:function'")
    return int(importlib.import_module(module).main(["--verify"]))


def compgeom(args: argparse.Namespace) -> int:
    """Every fixture compiled and run where candidates are (``--sandbox``; ``local``: the host's
    own g++ and rustc): good ones pass, bad ones fail."""
    from gym_sysmath.tasks import compgeom as tasks

    primitives = args.primitive or tasks.PRIMITIVES
    if args.sandbox == "local":
        from gym_sysmath.tasks.compgeom.runner import run_local

        if not args.primitive:
            return int(importlib.import_module("gym_sysmath.tasks.compgeom.build").main(["--verify"]))
        report = tasks.check_fixtures(run_local, primitives=primitives, max_workers=os.cpu_count() or 1)
    else:
        from gym_sysmath.envs.compgeom import sandbox_runner
        from gym_sysmath.sandbox import Sandbox
        from gym_sysmath.sandbox.pool import default_pool_size

        sandbox = Sandbox(args.sandbox)
        try:
            report = tasks.check_fixtures(sandbox_runner(sandbox), primitives=primitives,
                                  max_workers=sandbox.pool_size or default_pool_size())
        finally:
            sandbox.close()
    print("\n".join(report.lines()))
    return 0 if report.ok else 1

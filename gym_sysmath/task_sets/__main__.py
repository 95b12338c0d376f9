"""``python -m gym_sysmath.task_sets --check | --record | --bump FAMILY``: see ``task_sets.lock``."""

from __future__ import annotations

import argparse
import sys

from gym_sysmath.families import family
from gym_sysmath.task_sets.digest import DigestError
from gym_sysmath.task_sets.lock import bump, check, record, selected_families


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gym_sysmath.task_sets",
                                     description="check or record the families' versioned task sets "
                                                 "(tasks/<family>/task_set.json; rule: docs/task-sets.md)")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="fail when a recorded task set is not current")
    action.add_argument("--record", action="store_true",
                        help="re-record the current version's hash (a first version, or DIGEST_FORMAT changed); "
                             "a new hash under the same format is refused (bump) unless --unshipped")
    action.add_argument("--bump", action="store_true", help="record a new version (a task, key, case or rule changed)")
    parser.add_argument("families", nargs="*", help="family names (default: every family with a task folder)")
    parser.add_argument("--unseen", action="store_true",
                        help="with --bump: the change is one the digest cannot see (only a sandbox run shows it)")
    parser.add_argument("--unshipped", action="store_true",
                        help="with --record: the current version never shipped, so its hash may change")
    parser.add_argument("--why", help="what changed (kept in the version history); needed by --record and --bump")
    args = parser.parse_args(argv)
    try:
        if args.check:
            problems = check(args.families)
            for line in problems:
                print(f"task sets: {line}", file=sys.stderr)
            if not problems:
                print("task sets: every recorded task set is current")
            return 1 if problems else 0
        if not args.why:
            parser.error("--record and --bump need --why '<what changed>' (it goes in the version history)")
        if args.unshipped and not args.record:
            parser.error("--unshipped goes with --record")
        if args.bump and len(args.families) != 1:
            parser.error("--bump takes exactly one family")
        for row in [family(args.families[0])] if args.bump else selected_families(args.families):
            print(bump(row, args.why, unseen=args.unseen) if args.bump
                  else record(row, args.why, unshipped=args.unshipped))
        return 0
    except (DigestError, KeyError, ValueError) as exc:
        print(f"task sets: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a generator or grader that raised while measuring: one line, no traceback
        print(f"task sets: the digest could not be measured: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

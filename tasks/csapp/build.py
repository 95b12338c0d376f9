"""Build, check and verify the CsappExact-v0 task file.

    python -m gym_sysmath.tasks.csapp.build            # write tasks/csapp/tasks.json
    python -m gym_sysmath.tasks.csapp.build --check    # exit 1 if the shipped file is not current
    python -m gym_sysmath.tasks.csapp.build --verify   # re-check every task (C in the sandbox), 50 train
                                                       # draws per template, the guessability table; N/N

Every key in the file is executed here from the eval set's parameters; the build fails if any
trap, distractor, category count or machine anchor does not hold. Machine and linking keys are
read from ``compiled.json``, which ``python -m gym_sysmath.tasks.csapp.compiled`` writes by
running the real toolchain in the sandbox; rebuild that first when their templates change.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

from ..generated import check_current
from . import guessability
from .catalog import EVAL_SET, TEMPLATES
from .runs import check_runs
from .task import CsappTask
from .taskfile import TASK_FILE, render_task_file
from .template import BuildError, instantiate
from .verify import machine_anchors, verify

#: ``--verify``'s fresh train draws per template (each faces the same oracles as the eval tasks).
VERIFY_TRAIN_DRAWS = 50
CATEGORY_COUNTS = {"integers": 12, "floats": 10, "bits": 6, "memory": 6, "cache": 6, "machine": 10, "linking": 8,
                   "processes": 8, "vm": 8, "concurrency": 7}
SOURCE_FILE = Path(__file__).with_name(TASK_FILE)


def build_tasks() -> tuple[CsappTask, ...]:
    """The eval tasks, every key and distractor executed and every trap asserted."""
    anchors = machine_anchors()
    if anchors:
        raise BuildError("machine model fails its anchors: " + "; ".join(anchors))
    tasks = tuple(instantiate(TEMPLATES[name], params, task_id) for task_id, name, params in EVAL_SET)
    ids = [t.task_id for t in tasks]
    if len(set(ids)) != len(ids):
        raise BuildError(f"duplicate task ids: {sorted(i for i, n in Counter(ids).items() if n > 1)}")
    counts = dict(Counter(t.category for t in tasks))
    if counts != CATEGORY_COUNTS:
        raise BuildError(f"category counts {counts} are not {CATEGORY_COUNTS}")
    return tasks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gym_sysmath.tasks.csapp.build", description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if the task file differs from a fresh build")
    mode.add_argument("--verify", action="store_true", help="re-check every task in the task file independently")
    parser.add_argument("--output", type=Path, default=SOURCE_FILE, help="task file to write or check")
    parser.add_argument("--train-draws", type=int, default=VERIFY_TRAIN_DRAWS, metavar="N",
                        help=f"--verify: fresh train draws per template, same oracles (default {VERIFY_TRAIN_DRAWS})")
    parser.add_argument("--guess-draws", type=int, default=guessability.DRAWS, metavar="N",
                        help=f"train draws per template in the guessability audit (default {guessability.DRAWS})")
    args = parser.parse_args(argv)

    if args.verify:
        verification = verify(None if args.output == SOURCE_FILE else args.output, train=args.train_draws,
                              guess_draws=args.guess_draws)
        print("\n".join(verification.lines()))
        return 0 if verification.ok else 1

    tasks = build_tasks()
    text = render_task_file(tasks)
    if args.check:
        return check_current(args.output, text, "python -m gym_sysmath.tasks.csapp.build")
    guesses = guessability.audit(args.guess_draws, jobs=min(4, os.cpu_count() or 1))
    if guessability.offenders(guesses):
        print("\n".join(guessability.lines(guesses)), file=sys.stderr)
        return 1
    reports = check_runs(tasks)  # the C of every model-keyed program, both ways, in the sandbox
    for report in reports:
        for problem in report.problems:
            print(f"FAIL {report.task_id}: {problem}", file=sys.stderr)
    if any(report.problems for report in reports):
        return 1
    print(f"ran {len(reports)} programs {sum(r.runs for r in reports)} times in the sandbox: every output allowed; "
          f"forced {sum(r.forced for r in reports)} allowed outputs, all printed; "
          f"{sum(r.refuted for r in reports)} impossible ones could not be forced")
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {len(EVAL_SET)} tasks to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Build the fixed eval set: 13 topics x 3 difficulties x 2 variants = 78 problems, then the
starter level's 10 topics x 6 variants = 60 (after them, so they renumber none of the 78).

Item ``index`` is generated from ``numpy.random.default_rng([BASE_SEED, index])`` alone, so any
item can be rebuilt without the others and adding one never reshuffles the rest.

    python -m gym_sysmath.tasks.linalg.build            # write tasks/linalg/problems.json
    python -m gym_sysmath.tasks.linalg.build --check    # exit 1 if the shipped file is stale
    python -m gym_sysmath.tasks.linalg.build --verify   # re-derive every key; prints 78/78
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..generated import check_current
from .audit import verify
from .generators import GENERATORS, input_key, is_symmetric
from .problem import DIFFICULTIES, STARTER_TOPICS, TOPICS, LinalgProblem
from .problemfile import STARTER_VARIANTS, VARIANTS

BASE_SEED = 1729
COMMAND = "python -m gym_sysmath.tasks.linalg.build"
DEFAULT_PATH = Path(__file__).with_name("problems.json")

SLOTS: tuple[tuple[str, str, int], ...] = (
    *((topic, difficulty, variant) for topic in TOPICS for difficulty in DIFFICULTIES for variant in range(VARIANTS)),
    *((topic, "starter", variant) for topic in STARTER_TOPICS for variant in range(STARTER_VARIANTS)),
)


def build_item(index: int, attempt: int = 0) -> LinalgProblem:
    """The eval problem at ``index`` of :data:`SLOTS`, from its own seed (``attempt`` > 0: the
    seed of a redraw, for a slot whose first draw repeats an earlier slot's inputs)."""
    topic, difficulty, variant = SLOTS[index]
    rng = np.random.default_rng([BASE_SEED, index] + ([attempt] if attempt else []))
    if topic == "is_symmetric":  # a coin could leave a yes/no pair all yes: balance it instead
        problem = is_symmetric(rng, difficulty, symmetric=variant % 2 == 0)
    else:
        problem = GENERATORS[topic](rng, difficulty)
    return replace(problem, problem_id=f"eval/{topic}/{difficulty}/{variant}")


def build_problems() -> list[LinalgProblem]:
    """Every slot's problem; a slot whose inputs repeat an earlier one's is redrawn (the starter
    level's 1x1 cases have a few dozen values, so six variants would often share one)."""
    problems: list[LinalgProblem] = []
    seen: set[str] = set()
    for index in range(len(SLOTS)):
        for attempt in range(100):
            problem = build_item(index, attempt)
            if input_key(problem) not in seen:
                break
        else:
            raise RuntimeError(f"slot {SLOTS[index]}: 100 draws repeated earlier inputs")
        seen.add(input_key(problem))
        problems.append(problem)
    return problems


def render_file(problems: Sequence[LinalgProblem]) -> str:
    """The file text: a header, then one problem per line so diffs stay readable."""
    header = {
        "generated_by": COMMAND,
        "note": "Do not edit: regenerate with the command above; --check proves it is current.",
        "base_seed": BASE_SEED,
        "count": len(problems),
    }
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in header.items()]
    items = ",\n".join(f"    {json.dumps(p.to_dict())}" for p in problems)
    return "{\n" + "\n".join(lines) + '\n  "problems": [\n' + items + "\n  ]\n}\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if the file differs from a fresh build")
    mode.add_argument("--verify", action="store_true", help="re-derive every key with numpy and sympy")
    parser.add_argument("--path", type=Path, default=DEFAULT_PATH, help="problem file (default: shipped one)")
    args = parser.parse_args(argv)

    if args.verify:
        report = verify(args.path)
        for failure in report.failures:
            print(f"FAIL {failure}", file=sys.stderr)
        print(report.summary())
        return 0 if report.ok else 1

    text = render_file(build_problems())
    if args.check:
        return check_current(args.path, text, COMMAND)
    args.path.write_text(text, encoding="utf-8")
    print(f"wrote {len(SLOTS)} problems to {args.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

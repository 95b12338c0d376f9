"""Host CPU of one step on adversarial replies at the action cap (32,768 characters).

Every reader, parser and comparator a step runs on the host is meant to be linear in the reply's
length (see `gym_sysmath.answers`, `gym_sysmath.fences`, `envs/csapp.py`). This builds each
adversarial shape at n = cap/4 and at the cap, steps every family's env with it (answer-only
paths: no sandbox is started; CompGeom only as far as a reply without code goes), and prints the
CPU seconds (best of `--repeat`) and the ratio t(cap)/t(cap/4): about 4 for linear work, 16 for
quadratic. Speed is measured here and never asserted by a timed test; tests/test_reply_fuzz.py
checks the growth ratio with a generous bound.

    python benchmarks/reply_parsing.py [--repeat 3] [--shape NAME]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import gymnasium as gym

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.actions import MAX_ACTION_CHARS, read_reply
from gym_sysmath.answers import strip_end_tokens

CAP = MAX_ACTION_CHARS


def fill(head: str, unit: str, tail: str, size: int) -> str:
    """``head + unit * k + tail``, with k as large as keeps it within ``size`` characters."""
    return head + unit * max(0, (size - len(head) - len(tail)) // len(unit)) + tail


#: name -> (head, repeated unit, tail)
SHAPES: dict[str, tuple[str, str, str]] = {
    "fence opening ANSWER: [ then short lines": ("```\nANSWER: [\n", "1,\n", "```\n"),
    "fence opening ANSWER: [ then open brackets": ("```\nANSWER: [\n", "[\n", "```\n"),
    "Python list display, one long value": ("ANSWER: [", "1,", "'a']\n"),
    "Python list display of 19,990 characters, then prose": ("ANSWER: [" + "1," * 9_990 + "'a']\n", "prose.\n", ""),
    "distinct unreadable values": ("", "ANSWER: [1, 'a\n", ""),
    "empty labels above labels": ("", "**Final Answer:**\n\n", "ANSWER: [1]\n"),
    "nested brackets": ("ANSWER: ", "[", "\n"),
    "LaTeX environments never closed": ("ANSWER: ", "\\begin{pmatrix}1&", "\n"),
    "expression chain with quotes": ("ANSWER: ", "(1) = '\"' = ", "5\n"),
    "think tags unclosed": ("", "<think>ANSWER: 1\n", ""),
    "fence openers, none closed": ("", "```python\nx\n~~~\n", ""),
    "end-of-turn tokens and spaces": ("ANSWER: 5", " <|im_end|> \n", ""),
    "zero-width, BOM and lone surrogates": ("", "\u200b\ufeffANSWER: \ud83d1\u2060\n", ""),
    "spaces, then a token far away": ("ANSWER: 5", " ", "x<|im_end|>"),
}

ENVS = {"CsappExact-v0": {}, "LinearAlgebra-v0": {}, "CompGeom-v0": {}}


def best_cpu(run: Callable[[str], object], text: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        run(text)
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shape", help="only the shapes whose name holds this text")
    args = parser.parse_args()
    envs = {env_id: gym.make(env_id, max_turns=1, render_mode="ansi") for env_id in ENVS}

    def step(env: gym.Env, text: str) -> None:
        core = env.unwrapped
        env.reset(seed=0)
        if read_reply(text, core._languages()).kind(core.reads_answers) == "code":
            return  # a one-turn code reply runs in the sandbox: not host work
        env.step(text)
        env.render()

    print(f"{'shape':44} {'target':18} {'cap/4 s':>8} {'cap s':>8} {'ratio':>6}")
    worst = 0.0
    for name, (head, unit, tail) in SHAPES.items():
        if args.shape and args.shape not in name:
            continue
        small, large = fill(head, unit, tail, CAP // 4), fill(head, unit, tail, CAP)
        targets: dict[str, Callable[[str], object]] = {
            env_id: (lambda text, env=env: step(env, text)) for env_id, env in envs.items()}
        targets["strip_end_tokens"] = strip_end_tokens
        for target, run in targets.items():
            t_small = best_cpu(run, small, args.repeat)
            t_large = best_cpu(run, large, args.repeat)
            worst = max(worst, t_large)
            ratio = t_large / t_small if t_small > 1e-4 else float("nan")
            print(f"{name[:44]:44} {target:18} {t_small:8.4f} {t_large:8.4f} {ratio:6.1f}")
    print(f"worst CPU of one step at the cap ({CAP} characters): {worst:.3f} s")
    for env in envs.values():
        env.close()


if __name__ == "__main__":
    main()

"""GRPO on SmolLM2-135M-Instruct with the env's own binary reward, on a laptop CPU.

The project's own GRPO loop (TRL's ``GRPOTrainer`` adds nothing this needs and costs a CPU run
its generation overheads; ``examples/trl_grpo.py`` is TRL's loop on the same model, a page long,
a few steps that show the wiring and measure no learning): each step draws ``--tasks-per-step``
train tasks at the curriculum's level, samples ``--group-size`` completions of each, grades
every one in the real env, and takes one policy-gradient step on the group-relative advantages
``r - mean(r)`` of the groups whose rewards differ (a scoring error is left out of its group
and gets no advantage). Every step is logged (reward, format-error share, scoring errors,
curriculum level, the reward-hacking watch) to ``steps.jsonl``, every rollout to ``rollouts.jsonl``.

Before and after training the policy answers the held-out eval tasks of the level
(``--eval-rollouts`` samples each, one sampling seed per rollout); the project's own ``eval``
(``gym-sysmath eval --agent responses``) scores those replies, and ``result.json`` holds both
means with 95% bootstrap intervals over tasks. The train split never serves an eval task.

The reward-hacking watch: every rollout the env rewards 1.0 is read again by the family's
independent check (``tasks.linalg.audit.confirms``, ``tasks.csapp.verify.confirms``); a
disagreement is logged with its text and counted.

    make real-model                                               # SmolLM2 into the venv
    python examples/smollm2_grpo.py run --out runs/smollm2-grpo   # the recorded run (docs/learning.md)
    python examples/smollm2_grpo.py baseline --out runs/baseline  # reward per family, level and topic
    python examples/smollm2_grpo.py table --out runs/baseline     # its baseline.md again, from baseline.json

Every random choice comes from ``--seed``; the same seed on the same machine and thread count
replays the run (torch's CPU kernels may differ across machines in the last bits).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.curriculum import Curriculum
from gym_sysmath.tasks.csapp.verify import confirms as csapp_confirms  # imported now: a long run
from gym_sysmath.tasks.linalg.audit import confirms as linalg_confirms  # never imports code edited since

#: The recipe's framing of every prompt, before and after training alike: one worked exchange,
#: so the 135M model sees the ANSWER line once (with none it writes one in no reply: 0 of 64).
DEMONSTRATION = (
    {"role": "user", "content": "Compute the determinant of the 1x1 matrix\n\nA = [[6]]\n\n"
                                "End your response with a final line of the form\nANSWER: <value>"},
    {"role": "assistant", "content": "The determinant of a 1x1 matrix is its only entry.\nANSWER: 6"},
)
LADDERS = {"LinearAlgebra-v0": ("starter", "easy", "medium", "hard"),
           "CsappExact-v0": ("starter", "easy", "medium", "hard"), "CompGeom-v0": (None,)}
TRAIN_SEED_BASE = 1_000_000  #: train seeds: step * tasks_per_step + i, offset by run seed * this


@dataclass
class Args:
    out: str = "runs/smollm2-grpo"
    env_id: str = "LinearAlgebra-v0"
    seed: int = 0
    steps: int = 60
    tasks_per_step: int = 2
    group_size: int = 16
    temperature: float = 0.7
    max_new_tokens: int = 64
    learning_rate: float = 1e-5
    max_grad_norm: float = 1.0
    threshold: float = 0.6
    """the curriculum climbs when the mean reward of its last ``window`` episodes reaches this"""
    window: int = 96
    start_level: str = "starter"
    eval_level: str = ""
    """the level of the held-out eval tasks (default: the starting level; CsappExact's starter
    level has none, so a CsappExact run names a standard one)"""
    eval_rollouts: int = 4
    eval_tasks: int = 0
    """held-out tasks (0: every eval task of the starting level)"""
    batch_size: int = 32
    """sequences per generation and per backward pass"""
    threads: int = 2
    sandbox: str = "docker"
    model_dir: str = ""
    """a save_pretrained directory (default: the one `make real-model` installs)"""
    samples: int = 256
    """baseline: samples per family and level"""
    families: str = ",".join(LADDERS)
    """baseline: the env ids to measure, comma-separated"""


# ---------------------------------------------------------------------------------------- policy


class Policy:
    """SmolLM2 (fp32, CPU) that samples completions in batches and takes policy-gradient steps."""

    def __init__(self, args: Args):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(args.threads)
        self.torch = torch
        model_dir = args.model_dir or str(default_model_dir())
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        self.model.generation_config.pad_token_id = self.tokenizer.pad_token_id
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.learning_rate, weight_decay=0.0)
        self.args = args

    def encode(self, prompt: str) -> list[int]:
        messages = [*DEMONSTRATION, {"role": "user", "content": prompt}]
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self.tokenizer(text, add_special_tokens=False).input_ids

    def sample(self, prompts: Sequence[list[int]], seed: int) -> list[list[int]]:
        """One completion (token ids, through its end-of-turn token if it wrote one) per prompt."""
        torch, eos = self.torch, self.tokenizer.eos_token_id
        self.model.eval()
        out: list[list[int]] = []
        for start in range(0, len(prompts), self.args.batch_size):
            chunk = prompts[start:start + self.args.batch_size]
            width = max(map(len, chunk))
            ids = torch.tensor([[self.tokenizer.pad_token_id] * (width - len(p)) + p for p in chunk])
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk])
            torch.manual_seed(seed * 1009 + start)
            with torch.no_grad():
                generated = self.model.generate(input_ids=ids, attention_mask=mask, do_sample=True,
                                                temperature=self.args.temperature, top_p=1.0, top_k=0,
                                                max_new_tokens=self.args.max_new_tokens)
            for row in generated[:, width:].tolist():
                out.append(row[:row.index(eos) + 1] if eos in row else row)
        return out

    def text(self, completion: list[int]) -> str:
        return self.tokenizer.decode(completion, skip_special_tokens=True)

    def update(self, prompts: Sequence[list[int]], completions: Sequence[list[int]],
               advantages: Sequence[float]) -> float:
        """One step on ``-sum_i A_i * sum_t log p(token_it) / (n * max_new_tokens)`` (a constant
        normaliser, so a long completion weighs no less per token), at the sampling temperature."""
        torch = self.torch
        self.model.train()
        self.optimizer.zero_grad()
        norm = len(completions) * self.args.max_new_tokens
        total = 0.0
        chosen = [i for i, a in enumerate(advantages) if a != 0.0]
        for start in range(0, len(chosen), self.args.batch_size):
            part = chosen[start:start + self.args.batch_size]
            seqs = [prompts[i] + completions[i] for i in part]
            width = max(map(len, seqs))
            ids = torch.tensor([s + [self.tokenizer.pad_token_id] * (width - len(s)) for s in seqs])
            mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
            logits = self.model(input_ids=ids, attention_mask=mask).logits[:, :-1] / self.args.temperature
            logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
            weight = torch.zeros_like(logp)
            for row, i in enumerate(part):
                first = len(prompts[i]) - 1  # the logit at position t predicts token t + 1
                weight[row, first:first + len(completions[i])] = advantages[i]
            loss = -(logp * weight).sum() / norm
            loss.backward()
            total += float(loss)
        if chosen:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)
            self.optimizer.step()
        return total


def default_model_dir() -> Path:
    return Path(sys.prefix) / "share" / "gym-sysmath" / "smollm2" / "fp32"


# ------------------------------------------------------------------------------------- grading


@dataclass
class Graded:
    reward: float
    verdict: str
    scoring_error: bool
    task_id: str
    level: str | None
    topic: str
    watch: bool | None  #: the independent check on a reward of 1.0 (None: not run, or no opinion)


def independent_check(env: gym.Env, text: str) -> bool | None:
    """The family's second opinion on a reply its grader passed (None where it has none)."""
    task = env.unwrapped.current_task
    family = env.unwrapped.family
    if family == "linalg":
        return linalg_confirms(task, text)
    if family == "csapp":
        return csapp_confirms(task, text)
    return None


def grade(env: gym.Env, seed: int, options: dict[str, Any], text: str) -> Graded:
    """Reset ``env`` to the train task of ``seed`` and ``options`` and grade one completion."""
    _, info = env.reset(seed=seed, options=options)
    _, reward, _, _, step_info = env.step(text)
    watch = independent_check(env, text) if reward == 1.0 else None
    topic = info.get("topic") or info.get("category") or info.get("primitive") or ""
    return Graded(float(reward), str(step_info["verdict"]), step_info["scoring_error"] is not None,
                  info["task_id"], info.get("difficulty"), str(topic), watch)


def group_advantages(rewards: Sequence[float], valid: Sequence[bool]) -> list[float]:
    """``r - mean(r)`` over a group's scored completions; 0 for a scoring error or a flat group
    (Dr. GRPO's advantage: no division by the std, which would blow up near-flat groups)."""
    scored = [r for r, ok in zip(rewards, valid, strict=True) if ok]
    if len(scored) < 2:
        return [0.0] * len(rewards)
    mean = sum(scored) / len(scored)
    return [r - mean if ok else 0.0 for r, ok in zip(rewards, valid, strict=True)]


# ---------------------------------------------------------------------------------- evaluation


def bootstrap_interval(per_task: Sequence[float], seed: int, draws: int = 4000) -> tuple[float, float]:
    """95% percentile interval of the mean over tasks, resampling tasks (their rollouts stay together)."""
    values = np.asarray(per_task, dtype=float)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(draws, len(values)))].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def held_out(policy: Policy, args: Args, tag: str) -> dict[str, Any]:
    """The policy's replies to the level's eval tasks, scored by ``gym-sysmath eval``."""
    folder = Path(args.out) / tag
    folder.mkdir(parents=True, exist_ok=True)
    level = args.eval_level or args.start_level
    env = gym.make(args.env_id, difficulty=level, sandbox=args.sandbox)
    task_ids = list(env.unwrapped.task_ids)
    if args.eval_tasks and args.eval_tasks < len(task_ids):  # spread over the topics, not the first few
        picks = np.linspace(0, len(task_ids) - 1, args.eval_tasks).round().astype(int)
        task_ids = [task_ids[i] for i in picks]
    prompts = []
    for task_id in task_ids:
        obs, _ = env.reset(options={"task_id": task_id})
        prompts.append(policy.encode(obs))
    env.close()
    lines = []
    # one sampling seed per rollout, the same before and after (torch's seed for the sampling noise
    # only: a training step that happens to use the same number samples other prompts)
    for rollout in range(args.eval_rollouts):
        for task_id, completion in zip(task_ids, policy.sample(prompts, seed=args.seed * 7919 + rollout), strict=True):
            lines.append({"env_id": args.env_id, "task_id": task_id, "rollout": rollout,
                          "response": policy.text(completion)})
    responses = folder / "responses.jsonl"
    responses.write_text("".join(json.dumps(line) + "\n" for line in lines))
    cli = Path(sys.executable).with_name("gym-sysmath")
    subprocess.run([str(cli), "eval", args.env_id, "--agent", "responses", str(responses), "--env-arg",
                    f"difficulty={json.dumps(level)}", "--out", str(folder / "eval"), "--overwrite", "--quiet",
                    "--sandbox", args.sandbox], check=True)
    rows = [json.loads(line) for line in (folder / "eval" / "results.jsonl").read_text().splitlines()]
    per_task: dict[str, list[float]] = defaultdict(list)
    per_rollout: dict[int, list[float]] = defaultdict(list)
    for row in rows:
        per_task[row["task_id"]].append(float(row["reward"]))
        per_rollout[int(row["rollout"])].append(float(row["reward"]))
    task_means = [sum(v) / len(v) for v in per_task.values()]
    low, high = bootstrap_interval(task_means, seed=args.seed)
    verdicts = Counter(row["verdict"] for row in rows)
    return {"level": level, "tasks": len(per_task), "samples": len(rows), "reward": sum(task_means) / len(task_means),
            "ci95": [low, high], "per_seed": [sum(v) / len(v) for _, v in sorted(per_rollout.items())],
            "format_errors": verdicts.get("format_error", 0) / len(rows), "verdicts": dict(verdicts)}


# ------------------------------------------------------------------------------------ training


def check_settings(args: Args) -> None:
    """Refuse a run that cannot work before the model loads, saying what to pass instead."""
    ladder = [level for level in LADDERS.get(args.env_id, (None,)) if level is not None]
    if not ladder:
        raise SystemExit(f"{args.env_id}: the recipe trains a family with difficulty levels "
                         f"({', '.join(k for k, v in LADDERS.items() if v != (None,))})")
    if args.start_level not in ladder:
        raise SystemExit(f"--start-level {args.start_level!r}: {args.env_id}'s levels are {', '.join(ladder)}")
    level = args.eval_level or args.start_level
    try:
        gym.make(args.env_id, difficulty=level, sandbox="process").close()
    except ValueError:
        raise SystemExit(f"{args.env_id} has no held-out eval tasks at {level!r}: pass --eval-level with one of "
                         f"{', '.join(v for v in ladder if v != level)}") from None


def train(args: Args) -> dict[str, Any]:
    check_settings(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(asdict(args), indent=2) + "\n")
    policy = Policy(args)
    before = held_out(policy, args, "before")
    print(f"before: {before['reward']:.3f} [{before['ci95'][0]:.3f}, {before['ci95'][1]:.3f}]", flush=True)
    ladder = [level for level in LADDERS[args.env_id] if level is not None]
    curriculum = Curriculum(threshold=args.threshold, window=args.window, levels=ladder, start=args.start_level)
    env = gym.make(args.env_id, split="train", max_turns=1, sandbox=args.sandbox)
    totals = Counter()
    with (out / "steps.jsonl").open("w") as steps_log, (out / "rollouts.jsonl").open("w") as rollouts_log:
        for step in range(args.steps):
            started = time.perf_counter()
            options = curriculum.options()
            seeds = [args.seed * TRAIN_SEED_BASE + step * args.tasks_per_step + i for i in range(args.tasks_per_step)]
            prompts, owners = [], []
            for i, seed in enumerate(seeds):
                obs, _ = env.reset(seed=seed, options=options)
                prompts += [policy.encode(obs)] * args.group_size
                owners += [i] * args.group_size
            completions = policy.sample(prompts, seed=args.seed * TRAIN_SEED_BASE + step)
            texts = [policy.text(c) for c in completions]
            graded = [grade(env, seeds[i], options, text) for i, text in zip(owners, texts, strict=True)]
            advantages: list[float] = []
            for i in range(args.tasks_per_step):
                group = [g for g, owner in zip(graded, owners, strict=True) if owner == i]
                advantages += group_advantages([g.reward for g in group], [not g.scoring_error for g in group])
            loss = policy.update(prompts, completions, advantages)
            for g, text in zip(graded, texts, strict=True):
                if not g.scoring_error:
                    curriculum.record(g.reward)
                rollouts_log.write(json.dumps({"step": step, **asdict(g), "text": text}) + "\n")
            n = len(graded)
            disagreements = sum(g.watch is False for g in graded)
            totals.update(rollouts=n, scoring_errors=sum(g.scoring_error for g in graded),
                          rewarded=sum(g.reward == 1.0 for g in graded), watch_disagreements=disagreements,
                          watch_unread=sum(g.reward == 1.0 and g.watch is None for g in graded))
            record = {"step": step, "level": options["difficulty"], "reward": sum(g.reward for g in graded) / n,
                      "format_errors": sum(g.verdict == "format_error" for g in graded) / n,
                      "scoring_errors": sum(g.scoring_error for g in graded) / n,
                      "watch_disagreements": disagreements, "groups_with_signal": sum(
                          len({g.reward for g, o in zip(graded, owners, strict=True) if o == i}) > 1
                          for i in range(args.tasks_per_step)),
                      "mean_tokens": sum(map(len, completions)) / n, "loss": loss,
                      "next_level": curriculum.level, "seconds": time.perf_counter() - started}
            steps_log.write(json.dumps(record) + "\n")
            steps_log.flush()
            rollouts_log.flush()
            print(f"step {step + 1}/{args.steps} level={record['level']} reward={record['reward']:.3f} "
                  f"format_errors={record['format_errors']:.2f} signal={record['groups_with_signal']} "
                  f"{record['seconds']:.0f}s", flush=True)
    env.close()
    after = held_out(policy, args, "after")
    print(f"after: {after['reward']:.3f} [{after['ci95'][0]:.3f}, {after['ci95'][1]:.3f}]", flush=True)
    result = {"before": before, "after": after, "totals": dict(totals), "final_level": curriculum.level,
              "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])}
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(out)
    return result


def plot(out: Path, window: int = 10) -> None:
    """``curve.png``: reward and format-error share per step (and their running means), the level."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    result = json.loads((out / "result.json").read_text())
    x = [s["step"] + 1 for s in steps]
    figure, axis = plt.subplots(figsize=(8, 4.5))
    series = (("reward", "tab:blue", "train reward"), ("format_errors", "tab:red", "format-error share"))
    for key, colour, label in series:
        values = np.array([s[key] for s in steps])
        axis.plot(x, values, color=colour, alpha=0.25)
        running = np.convolve(values, np.ones(window) / window, mode="valid") if len(values) >= window else values
        axis.plot(x[len(x) - len(running):], running, color=colour, label=f"{label} (mean of {window} steps)")
    for tag, style in (("before", ":"), ("after", "--")):
        axis.axhline(result[tag]["reward"], color="black", linestyle=style,
                     label=f"held-out reward {tag}: {result[tag]['reward']:.3f}")
    levels = sorted({s["level"] for s in steps}, key=[s["level"] for s in steps].index)
    axis.set(xlabel="GRPO step", ylabel="share of rollouts", ylim=(0, 1),
             title=f"SmolLM2-135M on {result['before']['level']} ({', '.join(levels)})")
    axis.legend(loc="upper right", fontsize=8)
    figure.tight_layout()
    figure.savefig(out / "curve.png", dpi=110)


# ------------------------------------------------------------------------------------ baseline


def baseline(args: Args) -> list[dict[str, Any]]:
    """The untrained policy's reward and format errors per family, level and topic on the train
    split (``--samples`` per family and level, the run's framing and temperature)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    policy = Policy(args)
    cells: list[dict[str, Any]] = []
    with (out / "baseline.jsonl").open("a") as log:
        for env_id in args.families.split(","):
            ladder = LADDERS[env_id]
            env = gym.make(env_id, split="train", max_turns=1, sandbox=args.sandbox)
            for level in ladder:
                options = {"difficulty": level} if level else {}
                seeds = [args.seed * TRAIN_SEED_BASE + i for i in range(args.samples)]
                prompts = [policy.encode(env.reset(seed=seed, options=options)[0]) for seed in seeds]
                started = time.perf_counter()
                texts = [policy.text(c) for c in policy.sample(prompts, seed=args.seed)]
                graded = [grade(env, seed, options, text) for seed, text in zip(seeds, texts, strict=True)]
                for g, text in zip(graded, texts, strict=True):
                    log.write(json.dumps({"env_id": env_id, **asdict(g), "text": text}) + "\n")
                by_topic: dict[str, list[float]] = defaultdict(list)
                for g in graded:
                    by_topic[g.topic].append(g.reward)
                cell = {"env_id": env_id, "level": level or "all", "samples": len(graded),
                        "reward": sum(g.reward for g in graded) / len(graded),
                        "ci95": wilson(sum(g.reward for g in graded), len(graded)),
                        "format_errors": sum(g.verdict == "format_error" for g in graded) / len(graded),
                        "scoring_errors": sum(g.scoring_error for g in graded),
                        "topics": {t: [sum(v), len(v)] for t, v in sorted(by_topic.items())},
                        "seconds": round(time.perf_counter() - started, 1)}
                cells.append(cell)
                print(json.dumps(cell), flush=True)
            env.close()
    earlier = json.loads((out / "baseline.json").read_text()) if (out / "baseline.json").exists() else []
    kept = [cell for cell in earlier if cell["env_id"] not in args.families.split(",")]
    (out / "baseline.json").write_text(json.dumps(kept + cells, indent=2) + "\n")
    (out / "baseline.md").write_text(baseline_table(kept + cells))
    return cells


def baseline_table(cells: Sequence[dict[str, Any]]) -> str:
    """The baseline as markdown: one row per family and level, then the topics of each cell."""
    lines = ["| env | level | samples | reward [95% CI] | format errors |", "| --- | --- | ---: | --- | ---: |"]
    for cell in cells:
        low, high = cell["ci95"]
        lines.append(f"| {cell['env_id']} | {cell['level']} | {cell['samples']} | {cell['reward']:.1%} "
                     f"[{low:.1%}, {high:.1%}] | {cell['format_errors']:.0%} |")
    lines += ["", "| env | level | correct / samples per topic or category |", "| --- | --- | --- |"]
    for cell in cells:
        topics = ", ".join(f"{topic} {int(hits)}/{n}" for topic, (hits, n) in cell["topics"].items())
        lines.append(f"| {cell['env_id']} | {cell['level']} | {topics} |")
    return "\n".join(lines) + "\n"


def wilson(successes: float, n: int) -> tuple[float, float]:
    """95% Wilson interval of a share (sensible at 0 successes, unlike the normal one)."""
    if n == 0:
        return 0.0, 1.0
    p, z = successes / n, 1.96
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def parse_args(argv: Sequence[str] | None = None) -> tuple[str, Args]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("run", "baseline", "table"))
    defaults = Args()
    for name, value in asdict(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    namespace = vars(parser.parse_args(argv))
    command = namespace.pop("command")
    return command, Args(**namespace)


def main(argv: Sequence[str] | None = None) -> int:
    command, args = parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if command == "baseline":
        baseline(args)
    elif command == "table":  # baseline.md again from --out's baseline.json
        cells = json.loads((Path(args.out) / "baseline.json").read_text())
        (Path(args.out) / "baseline.md").write_text(baseline_table(cells))
    else:
        train(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

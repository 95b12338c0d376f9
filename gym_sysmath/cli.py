"""The ``gym-sysmath`` command: sandbox management, task verification, and evaluation.

Exit codes: 0 done; 2 a user's mistake, found before any work (an argument, a path, a name, an
endpoint or daemon that is not there: one line on stderr saying what was wrong and what to do,
never a usage dump or a traceback); 1 the work ran and something in it failed (failed or
unscored samples, a reference below 100%, a failed doctor check, an unexpected error: one line
naming it and the file holding its traceback); 130 Ctrl-C; 141 a closed pipe.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import math
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from gym_sysmath.filters import unknown_name
from gym_sysmath.terminal import escape_controls

if TYPE_CHECKING:  # the CLI imports them lazily, when a command needs them
    from gym_sysmath.agents import Agent
    from gym_sysmath.evaluation import EvalRun

#: Set to 1 to see an unexpected error's traceback on stderr instead of one line naming its file.
DEBUG_ENV = "GYM_SYSMATH_DEBUG"


class UsageError(Exception):
    """A user's mistake a command found itself: ``main`` prints its one line and exits 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, with a refusal on one line (no usage dump) and a mistyped choice answered with
    the project's did-you-mean wording."""

    def error(self, message: str) -> NoReturn:
        hint = "" if "(choose from" in message else f" (see {self.prog} --help)"  # the choices say it already
        self.exit(2, f"{self.prog}: {one_line(message)}{hint}\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:  # argparse's hook for every choice
        choices = action.choices
        if choices is None or value in choices:
            return
        noun = "command" if isinstance(action, argparse._SubParsersAction) else action.dest.replace("_", " ")
        where = action.option_strings[-1] if action.option_strings else ""
        raise argparse.ArgumentError(None, str(unknown_name(noun, value, [str(name) for name in choices],
                                                            where=where)))


def one_line(text: str) -> str:
    """``text`` as one line of a terminal: control characters escaped, line breaks made spaces."""
    return re.sub(r"\s*\n\s*", " ", escape_controls(text)).strip()


def _at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer no smaller than ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"wants a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def _seconds(text: str) -> float:
    """An argparse ``type``: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"wants a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0, got {text}")
    return value


def _port(text: str) -> int:
    """An argparse ``type``: a TCP port number."""
    port = _at_least(1)(text)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"a port is 1 to 65535, got {port}")
    return port


def _sandbox(args: argparse.Namespace) -> int:
    from gym_sysmath.sandbox import daemon

    client = daemon.docker_client()
    if args.action == "build":
        def log(line: str) -> None:
            print(line, flush=True)

        variants = daemon.IMAGE_VARIANTS if args.with_performance else (daemon.DEFAULT_IMAGE,)
        for variant in variants:  # the default first: the variant reuses its layers
            daemon.build_image(client, variant=variant, bootstrap=args.bootstrap, force=args.force,
                               mirror=args.mirror, log=log)
    elif args.action == "status":
        print(f"daemon: reachable ({client.version().get('Version', '?')})")
        print(f"image:  {daemon.image_status(client).describe()}")
        print(f"        {daemon.image_status(client, daemon.PERFORMANCE_IMAGE).describe()} "
              "(the performance variant: `sandbox build --with-performance`)")
        containers = daemon.our_containers(client)
        print(f"containers: {len(containers)}")
        for container in containers:
            print(f"  {container.short_id} {container.status} owner={container.labels.get(daemon.LABEL_OWNER)}")
    elif args.action == "prune":
        removed = daemon.prune(client, everything=args.all)
        print(f"removed {removed} container(s)")
    return 0


def _doctor(args: argparse.Namespace) -> int:
    """Each check's line as it finishes; exit 1 when any failed."""
    from gym_sysmath.sandbox import doctor

    checks = doctor.run_checks(lambda check: print(check.line(), flush=True))
    failed = [check.name for check in checks if check.status == doctor.FAIL]
    print(f"doctor: {len(failed)} check(s) failed ({', '.join(failed)})" if failed
          else "doctor: ready to grade")
    return 1 if failed else 0


def _serve(args: argparse.Namespace) -> int:
    """``gym-sysmath serve``: one line for what it cannot run with, then serve until drained."""
    import importlib.util

    from gym_sysmath.serving.protocol import TOKEN_ENV
    from gym_sysmath.serving.server import ServeError, ServeSettings, serve

    if importlib.util.find_spec("openenv") is None:
        print("gym-sysmath: serve needs the serve extra (openenv), in an environment of its own: "
              "`make serve-venv`, or `pip install 'gym-sysmath[serve]'` in a venv without verifiers", file=sys.stderr)
        return 2
    from gym_sysmath.families import all_ids

    unknown = [env_id for env_id in args.env_ids if env_id not in all_ids()]
    if unknown:  # the server refuses them too, but without a did-you-mean
        print(f"gym-sysmath: serve: {unknown_name('env id', unknown[0], all_ids())}", file=sys.stderr)
        return 2
    token = os.environ.get(TOKEN_ENV) or None
    if args.token_file:
        try:
            token = Path(args.token_file).read_text().strip() or None
        except OSError as exc:
            print(f"gym-sysmath: cannot read --token-file {args.token_file}: {exc.strerror}", file=sys.stderr)
            return 2
        if token is None:
            print(f"gym-sysmath: --token-file {args.token_file} is empty", file=sys.stderr)
            return 2
    if args.token:
        print(f"gym-sysmath: warning: --token is visible to every user of this machine (ps, /proc); prefer "
              f"{TOKEN_ENV} or --token-file", file=sys.stderr)
        token = args.token
    settings = ServeSettings(env_ids=tuple(args.env_ids), host=args.host, port=args.port, token=token,
                             max_sessions=args.max_sessions, warm=args.warm, sandbox=args.sandbox,
                             idle_timeout_s=args.idle_timeout, drain_timeout_s=args.drain_timeout,
                             allow_origins=tuple(args.allow_origin or ()))

    def ready(url: str) -> None:
        served = ", ".join(settings.env_ids) if settings.env_ids else "every env id"
        print(f"serving {served} at {url} (OpenEnv WebSocket: {url.replace('http', 'ws', 1)}/ws; "
              f"health: {url}/health); Ctrl-C or SIGTERM drains", flush=True)

    try:
        return serve(settings, ready=ready)  # its settings.check() refuses before anything starts
    except ServeError as exc:
        print(f"gym-sysmath: {exc}", file=sys.stderr)
        return 2


def _verify(args: argparse.Namespace) -> int:
    """The family's own verifier, named by its registry row."""
    from gym_sysmath.families import family

    module, _, function = family(args.family).verifier.partition(":")
    return int(getattr(importlib.import_module(module), function)(args))


def _compgeom_primitives() -> tuple[str, ...]:
    from gym_sysmath.tasks.compgeom.primitives import PRIMITIVES  # the table alone: no cases are loaded

    return PRIMITIVES


def _list(args: argparse.Namespace) -> int:
    import gymnasium as gym

    from gym_sysmath import env_ids
    from gym_sysmath.env import core_env

    print(f"{'id':<22} {'family':<10} {'eval tasks':>10}")
    for env_id in env_ids():
        env = gym.make(env_id)  # envs take their sandbox on first use: listing needs no Docker
        try:
            core = core_env(env)
            print(f"{env_id:<22} {core.family:<10} {len(core.task_ids):>10}")
        finally:
            env.close()
    return 0


def _export(args: argparse.Namespace) -> int:
    """Prompts and metadata as JSONL for dataset tooling; keys only with --with-answers."""
    import json

    import gymnasium as gym

    from gym_sysmath import env_ids
    from gym_sysmath.env import core_env
    from gym_sysmath.evaluation.plan import choose_tasks, sample_seed
    from gym_sysmath.evaluation.run import BASE_INFO_KEYS
    from gym_sysmath.families import task_set
    from gym_sysmath.integrations.episodes import chat_prompt, task_kwargs

    if args.env_id not in env_ids():
        print(f"gym-sysmath: {unknown_name('env id', args.env_id, env_ids())}", file=sys.stderr)
        return 2
    if args.out != "-":
        _check_writable_file("export", args.out)
    if args.format != "jsonl":
        return _export_for_trainer(args)
    try:
        env_kwargs = _env_args(args.env_arg)
        if args.max_turns is not None:
            env_kwargs["max_turns"] = args.max_turns
        recorded = task_kwargs(env_kwargs)
        env = gym.make(args.env_id, **{**env_kwargs, "split": args.split})
    except (ValueError, TypeError) as exc:  # a split or argument the env does not take
        print(f"gym-sysmath: export {args.env_id} --split {args.split}: {_env_refusal(exc)}", file=sys.stderr)
        return 2
    try:
        core = core_env(env)
        plan: list[tuple[str | None, int]]
        if args.split == "eval":
            plan = [(task_id, sample_seed(args.seed, args.env_id, task_id, 0))
                    for task_id in choose_tasks(args.env_id, core.task_ids, args.n)]
        else:
            plan = [(None, args.seed + index) for index in range(args.n or 100)]
        try:
            stream = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"export: cannot write --out {args.out}: {exc.strerror}") from None
        try:
            for task_id, seed in plan:
                prompt, info = env.reset(seed=seed, options={"task_id": task_id} if task_id else None)
                record = {"env_id": args.env_id, "task_id": info["task_id"], "split": args.split, "seed": seed,
                          "max_turns": core.max_turns, "env_kwargs": json.dumps(recorded, sort_keys=True),
                          "task_set": task_set(core.family),
                          "prompt": chat_prompt(prompt, args.system_prompt) if args.system_prompt else prompt,
                          "metadata": {key: value for key, value in info.items() if key not in BASE_INFO_KEYS}}
                if args.with_answers:
                    assert core.task is not None  # reset() has just chosen it
                    record["answer"] = core.task.answer
                    record["reference_action"] = core.reference_action()
                stream.write(json.dumps(record, default=str) + "\n")
        finally:
            if stream is not sys.stdout:
                stream.close()
    finally:
        env.close()
    if args.out != "-":
        print(f"wrote {len(plan)} {args.split} task(s) of {args.env_id} to {args.out}"
              + (" (with answers)" if args.with_answers else ""), file=sys.stderr)
    return 0


#: ``export --format``: a trainer's name -> the function turning ``build_dataset`` rows into its rows.
TRAINER_FORMATS = {"verl": ("gym_sysmath.integrations.verl:verl_rows", 1),
                   "skyrl": ("gym_sysmath.integrations.skyrl:skyrl_rows", None),
                   "openrlhf": ("gym_sysmath.integrations.openrlhf:openrlhf_rows", 1)}


def _export_for_trainer(args: argparse.Namespace) -> int:
    """The rows a trainer reads (``build_dataset``'s, in its schema) as parquet."""
    import warnings

    from gym_sysmath.integrations.trl import build_dataset

    if args.with_answers or args.out == "-":
        print(f"gym-sysmath: export --format {args.format} writes a parquet file without answers: give --out FILE "
              f"and no --with-answers", file=sys.stderr)
        return 2
    path, default_turns = TRAINER_FORMATS[args.format]
    module, name = path.split(":")
    max_turns = default_turns if args.max_turns is None else args.max_turns
    try:
        refusal = _trainer_export_refusal(args.format, max_turns, _env_args(args.env_arg))
    except ValueError as exc:
        refusal = str(exc)
    if refusal:
        print(f"gym-sysmath: export {args.env_id} --format {args.format}: {refusal}", file=sys.stderr)
        return 2
    try:
        import pandas as pd
    except ImportError:
        print("gym-sysmath: export --format needs pandas and pyarrow: pip install 'gym-sysmath[frameworks]'",
              file=sys.stderr)
        return 2
    env_kwargs = {**_env_args(args.env_arg), "sandbox": "process"}  # prompts only: nothing runs
    n = args.n if args.n is not None or args.split == "eval" else 100
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="sandbox='process'", category=UserWarning)
            rows = build_dataset(args.env_id, split=args.split, n=n, seed=args.seed, max_turns=max_turns,
                                 env_kwargs=env_kwargs)
    except (ValueError, TypeError) as exc:
        print(f"gym-sysmath: export {args.env_id} --split {args.split}: {_env_refusal(exc)}", file=sys.stderr)
        return 2
    records = getattr(importlib.import_module(module), name)(rows, max_turns=max_turns,
                                                             system_prompt=args.system_prompt)
    try:
        pd.DataFrame(records).to_parquet(args.out, index=False)
    except OSError as exc:  # pandas says "Cannot save file into a non-existent directory" itself
        raise UsageError(f"export: cannot write --out {args.out}: {exc.strerror or exc}") from None
    print(f"wrote {len(rows)} {args.split} task(s) of {args.env_id} to {args.out} ({args.format} schema)",
          file=sys.stderr)
    return 0


def _env_refusal(exc: Exception) -> str:
    """An env's refusal of its arguments in its own words, without gymnasium's tail."""
    matched = _CREATOR_TAIL.match(str(exc))
    return one_line(matched["message"] if matched else str(exc))


def _trainer_export_refusal(fmt: str, max_turns: int | None, env_kwargs: dict) -> str | None:
    """Why rows in ``fmt`` would be graded against a protocol their prompts do not describe."""
    from gym_sysmath.integrations.episodes import tool_mode_refusal

    refusal = tool_mode_refusal(env_kwargs)
    if refusal:
        return f"rows {refusal} (TRL's rows come from build_dataset(..., env_kwargs={{'code_via': 'tool'}}))"
    if fmt == "verl" and max_turns != 1:
        return (f"verl grades one completion per prompt, so a prompt offering {max_turns} turns would promise tool "
                f"output that never comes back: export with --max-turns 1 (the default)")
    return None


def _env_args(pairs: list[str] | None) -> dict:
    """``--env-arg KEY=VALUE`` pairs as keyword arguments; VALUE is JSON when it parses, a list
    or dict in Python's spelling (``topics=['rank']``, as the envs' own errors write it) too,
    else the string itself."""
    import ast
    import json

    kwargs: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--env-arg wants KEY=VALUE, got {pair!r}")
        try:
            kwargs[key] = json.loads(value)
        except RecursionError:
            raise UsageError(f"--env-arg {key}: its value nests too deeply") from None
        except json.JSONDecodeError:
            kwargs[key] = value
            if value.lstrip().startswith(("[", "{")):
                try:
                    kwargs[key] = ast.literal_eval(value)
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                    pass  # not a literal either: the env refuses the string, saying what it takes
    return kwargs


class _AgentAction(argparse.Action):
    """``--agent KIND [ARG]``: ``python`` and ``responses`` take an argument (also written
    ``KIND:ARG``); words after it are env ids that followed the option."""

    def __call__(self, parser, namespace, values, option_string=None):
        from gym_sysmath.agents import KINDS, KINDS_WITH_ARGUMENT

        kind, _, inline = values[0].partition(":")
        if kind not in KINDS:
            raise argparse.ArgumentError(None, str(unknown_name("agent", kind, KINDS, where="--agent")))
        rest = list(values[1:])
        argument = inline or (rest.pop(0) if kind in KINDS_WITH_ARGUMENT and rest else None)
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest) or []), (kind, argument)])
        namespace.extra_env_ids = [*getattr(namespace, "extra_env_ids", []), *rest]


def _slug(name: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "agent"


def _disconnect(connected: bool) -> None:
    if connected:
        import ray

        ray.shutdown()


def _eval_ids(args: argparse.Namespace, registered: tuple[str, ...]
              ) -> tuple[list[str], Literal[True] | str | None]:
    """The env ids asked for and the ``--ray`` value: ``--ray CsappExact-v0`` is an id, not an address."""
    requested = [*args.env_ids, *args.extra_env_ids]
    ray = args.ray
    if isinstance(ray, str) and ray in registered:
        requested.append(ray)
        ray = True
    return requested, ray


def _openai_options(args: argparse.Namespace) -> dict:
    """The ``openai agent`` options as ``make_agent`` keywords (the other kinds ignore them)."""
    return {"model": args.model, "base_url": args.base_url, "api_key_env": args.api_key_env,
            "temperature": args.temperature, "max_tokens": args.max_tokens, "timeout_s": args.request_timeout,
            "system_prompt": args.system_prompt, "connect_timeout_s": args.connect_timeout,
            "retries": args.retries, "top_p": args.top_p,
            "stop": tuple(args.stop) if args.stop else None, "send_seed": not args.no_request_seed,
            "extra_body": _extra_body(args.extra_body),
            "max_concurrent_requests": args.model_concurrency, "requests_per_minute": args.rpm,
            "choices_per_request": args.choices_per_request}


def _agent_labels(args: argparse.Namespace, specs: list[tuple[str, str | None]]) -> list[str | None]:
    """Each agent's ``--name`` (``None``: its own name): one per ``--agent``, in order, or none."""
    names = args.name or []
    if not names:
        return [None] * len(specs)
    if len(names) != len(specs):
        raise UsageError(f"--name was given {len(names)} time(s) for {len(specs)} agent(s): give one --name per "
                         f"--agent, in the same order, or none")
    shared = next((name for name in names if names.count(name) > 1), None)
    if shared is not None:
        raise UsageError(f"--name {shared!r} was given twice: give each agent its own")
    return names


def _check_openai_endpoint(args: argparse.Namespace) -> None:
    """Without ``--base-url`` the openai agent calls OpenAI's own API: a user of a local server
    who left the URL out is told so, rather than asked for OpenAI's key."""
    if (args.model and args.base_url is None and args.api_key_env is None
            and not os.environ.get("OPENAI_API_KEY")):
        raise UsageError("--agent openai without --base-url calls OpenAI's API: for a local or other server give "
                         "its URL (e.g. --base-url http://localhost:8000/v1); for OpenAI's, set OPENAI_API_KEY")


def _eval_agents(args: argparse.Namespace) -> list[Agent]:
    """Each ``--agent`` made (the reference agent when none is named), after the notes their kinds need."""
    from gym_sysmath.agents import make_agent

    openai = _openai_options(args)
    specs = args.agent or [("reference", None)]
    labels = _agent_labels(args, specs)
    if any(kind == "openai" for kind, _ in specs):
        _warn_about_the_key(args)
        if args.model:
            _check_openai_endpoint(args)
    if any(kind == "python" for kind, _ in specs) and "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # `python my_agent:act` finds my_agent.py here, as `python -m` would
    agents = [make_agent(kind, argument, name=label, **openai)
              for (kind, argument), label in zip(specs, labels, strict=True)]
    _check_distinct(agents, args.out)
    return agents


def _check_distinct(agents: list[Agent], out: str | None) -> None:
    """With ``--out``, several agents need several subdirectories (named after each agent's own
    name: a ``--name`` label is display only)."""
    if out is not None and len(agents) > 1:
        slugs = [_slug(agent.name) for agent in agents]
        clash = next((slug for slug in slugs if slugs.count(slug) > 1), None)
        if clash is not None:
            raise UsageError(f"two agents would both write {Path(out) / clash}: evaluate them one at a time, each "
                             f"with its own --out")


def _evaluate_agents(args: argparse.Namespace, agents: list[Agent], requested: list[str], make_kwargs: dict,
                     ray: bool | str | None) -> list[EvalRun]:
    """One ``evaluate`` per agent, each in its own subdirectory of ``--out`` when there are several."""
    from gym_sysmath.evaluation import evaluate
    from gym_sysmath.families import primary_ids

    plans = [(agent, list(primary_ids()) if args.all else requested or list(agent.env_ids()) or list(primary_ids()))
             for agent in agents]
    _check_env_args(list(dict.fromkeys(env_id for _, ids in plans for env_id in ids)), make_kwargs)
    outs = [None if args.out is None else Path(args.out) / (_slug(agent.name) if len(agents) > 1 else "")
            for agent in agents]
    if len(agents) > 1:  # each agent's directory checked before the first one plays (which may take hours)
        from gym_sysmath.evaluation.log import check_can_open, run_fingerprint

        for (agent, ids), out in zip(plans, outs, strict=True):
            if out is not None:
                check_can_open(out, run_fingerprint(ids, agent, rollouts=args.r, seed=args.seed,
                                                    make_kwargs=make_kwargs), resume=args.resume,
                               overwrite=args.overwrite)
    runs: list[EvalRun] = []
    for (agent, ids), out in zip(plans, outs, strict=True):
        runs.append(evaluate(ids, agent, n=args.n, rollouts=args.r, seed=args.seed, concurrency=args.c,
                             out=out, resume=args.resume, overwrite=args.overwrite, make_kwargs=make_kwargs,
                             ray=ray, progress=not args.quiet))
    return runs


def _check_env_args(env_ids: list[str], make_kwargs: Mapping[str, Any]) -> None:
    """Make (and close) each env with the run's arguments before any is played: an argument one
    of them refuses is one line, before a sandbox starts for another (an env takes its sandbox
    on first use, so this needs no Docker)."""
    import gymnasium as gym

    for env_id in env_ids:
        try:
            gym.make(env_id, **make_kwargs).close()
        except TypeError as exc:  # gymnasium re-raises the constructor's TypeError with its kwargs
            refusal = _creator_refusal(exc, make_kwargs, several=len(env_ids) > 1)
            if refusal is None:
                raise
            raise UsageError(refusal) from None


def _print_written(run: EvalRun, out_dir: Path) -> None:
    """Say which files a run left in ``--out``, or why the log is missing or holds only failures."""
    written = [name for name in ("results.jsonl", "summary.json")
               if (out_dir / name).is_file() and (out_dir / name).stat().st_size]
    written += ["breakdowns.png"] if run.plot_path else []
    failed = run.summary["overall"].get("failed", 0)
    if "results.jsonl" not in written:
        print(f"no sample finished, so no results.jsonl was written to {out_dir}", file=sys.stderr)
    elif failed and failed == run.summary["overall"]["samples"]:
        print(f"every sample failed ({failed}); their errors are the failed rows of "
              f"{out_dir / 'results.jsonl'}, and --resume plays them again", file=sys.stderr)
    else:
        print(f"wrote {', '.join(written)} to {out_dir}"
              + (f" ({failed} failed sample(s) logged; --resume plays them again)" if failed else ""))


def _print_runs(runs: list[EvalRun]) -> None:
    """The scoreboard, then each run's breakdowns, notes, first failures and files written."""
    from gym_sysmath.evaluation.report import format_breakdowns, format_scoreboard

    print(format_scoreboard(runs))
    for run in runs:
        breakdowns = format_breakdowns(run.summary)
        if breakdowns:
            print(f"{run.label or run.agent}:\n{breakdowns}")
        for note in run.notes:
            print(f"note: {note}")
        for failure in run.failures[:5]:
            print(f"failed {failure.spec.key}: {escape_controls(str(failure.error))}", file=sys.stderr)
        if len(run.failures) > 5:
            print(f"... and {len(run.failures) - 5} more failures; --resume retries them", file=sys.stderr)
        if run.out_dir is not None:
            _print_written(run, run.out_dir)


def _eval(args: argparse.Namespace) -> int:
    """``gym-sysmath eval``: exit 2 with one line for a usage error, 130 on Ctrl-C, else ``exit_code``;
    with ``--out``, the last line says how to look at what it wrote."""
    import contextlib

    from gym_sysmath import env_ids
    from gym_sysmath.agents import AgentError
    from gym_sysmath.evaluation import EvalError, exit_code

    registered = env_ids()
    requested, ray = _eval_ids(args, registered)
    stack = contextlib.ExitStack()
    try:
        unknown = sorted(set(requested) - set(registered))
        if unknown:
            raise EvalError(str(unknown_name("env id", unknown[0], tuple(registered))))
        make_kwargs = {"sandbox": args.sandbox, **_env_args(args.env_arg)}
        if args.resume and args.overwrite:
            raise UsageError("--resume continues --out's results.jsonl and --overwrite replaces it: give one of them")
        if args.out is not None:
            _check_writable_dir(args.out)
        agents = _eval_agents(args)
        if ray is not None:  # one connection for every agent
            from gym_sysmath.integrations.ray_rollouts import connect

            try:
                stack.callback(_disconnect, connect(None if ray is True else ray))
            except (RuntimeError, ConnectionError) as exc:  # Ray's words for an address it cannot join
                raise UsageError(f"--ray {ray if ray is not True else ''}: cannot join the cluster "
                                 f"({one_line(str(exc))[:200]}); give a Ray address as host:port or ray://host:port,"
                                 f" or --ray alone for a local instance") from None
        runs = _evaluate_agents(args, agents, requested, make_kwargs, ray)
    except (AgentError, EvalError, ValueError, ImportError, UsageError) as exc:
        print(f"gym-sysmath: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:
        if not _under(exc.filename, args.out):
            raise
        print(f"gym-sysmath: cannot write --out {args.out}: {exc.strerror}; choose a directory you can write",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gym-sysmath: interrupted; finished samples are logged, rerun with --resume to continue",
              file=sys.stderr)
        return 130
    finally:
        stack.close()
    _print_runs(runs)
    _print_next_step(runs)
    return exit_code(runs)


#: How ``gymnasium.make`` re-raises a constructor's TypeError: the message, then this tail.
_CREATOR_TAIL = re.compile(r"^(?P<message>.*) was raised from the environment creator for (?P<env_id>\S+) "
                           r"with kwargs \(.*\)$", re.DOTALL)


def _creator_refusal(exc: TypeError, env_kwargs: Mapping[str, Any], *, several: bool) -> str | None:
    """The env's own words for an argument it refused, without gymnasium's tail; ``None`` for a
    TypeError that did not come from an env's constructor (a bug, not a user's mistake)."""
    matched = _CREATOR_TAIL.match(str(exc))
    if matched is None:
        return None
    message, env_id = matched["message"], matched["env_id"]
    given = {key: value for key, value in env_kwargs.items() if key != "sandbox"}
    if given and not any(key in message for key in given):  # e.g. a comparison failing inside the env
        message = f"{env_id} refused --env-arg {', '.join(f'{k}={v!r}' for k, v in given.items())}: {message}"
    if several and "unknown argument" in message:
        message += "; --env-arg goes to every env evaluated: name only the env ids that take it"
    return one_line(message)


def _under(filename: object, directory: str | None) -> bool:
    """Whether an OSError's ``filename`` is ``directory`` or inside it (``--out``'s own failure)."""
    if directory is None or not isinstance(filename, (str, os.PathLike)):
        return False
    path, root = Path(os.path.abspath(filename)), Path(os.path.abspath(directory))
    return path == root or root in path.parents


def _check_writable_file(command: str, out: str) -> None:
    """Refuse an ``--out`` file that cannot be written, before any work: its directory missing,
    a file, or not this user's to write; the file itself a directory."""
    path = Path(out)
    parent = path.parent
    if path.is_dir():
        why = "it is a directory: name a file"
    elif not parent.exists():
        why = f"there is no directory {parent}"
    elif not parent.is_dir():
        why = f"{parent} is a file, not a directory"
    elif not os.access(parent, os.W_OK | os.X_OK):
        why = f"{parent} is not writable by this user"
    else:
        return
    raise UsageError(f"{command}: cannot write --out {out}: {why}")


def _check_writable_dir(out: str) -> None:
    """Refuse an ``--out`` no run could write, before any env is made: under a file, or where
    this user may not create it (root may anywhere: its failures are caught when they happen);
    and ``''`` (an unset variable) or ``-`` (stdout, for ``export``), which name no directory."""
    if out.strip() in ("", "-"):
        raise UsageError(f"--out {out!r} names no directory: eval writes results.jsonl, summary.json and "
                         f"run.json into a directory, e.g. --out runs/first")
    path = Path(out)
    existing = next((candidate for candidate in (path, *path.parents) if candidate.exists()), Path("."))
    if existing == path and not path.is_dir():
        raise UsageError(f"cannot write --out {out}: it is a file, not a directory; choose a directory you can write")
    if not existing.is_dir():
        raise UsageError(f"cannot write --out {out}: {existing} is a file, not a directory; choose a directory "
                         f"you can write")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write --out {out}: {existing} is not writable by this user; choose a directory "
                         f"you can write")


def _print_next_step(runs: list[EvalRun]) -> None:
    """The last lines of an eval with ``--out``: the command that shows what it wrote."""
    import shlex

    for run in runs:
        if run.out_dir is not None and (run.out_dir / "results.jsonl").is_file():
            print(f"next: gym-sysmath report {shlex.quote(str(run.out_dir))}  (writes "
                  f"{run.out_dir / 'report.html'}: every transcript, pass@k, the breakdowns)")


def _extra_body(text: str | None) -> dict | None:
    """``--extra-body JSON``: an object merged into every request."""
    import json

    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--extra-body is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError("--extra-body must be a JSON object, e.g. '{\"top_k\": 20}'")
    return value


def _warn_about_the_key(args: argparse.Namespace) -> None:
    """OpenAI's key is read for OpenAI's URL only: say so when it is set and would otherwise
    have gone to another host."""
    from gym_sysmath.agents import OPENAI_DEFAULT_URL

    if (args.api_key_env is None and args.base_url and args.base_url.rstrip("/") != OPENAI_DEFAULT_URL
            and os.environ.get("OPENAI_API_KEY")):
        print(f"gym-sysmath: note: OPENAI_API_KEY is not sent to {args.base_url} (it is meant for OpenAI); "
              "pass --api-key-env OPENAI_API_KEY to send it there", file=sys.stderr)


def _report(args: argparse.Namespace) -> int:
    """``gym-sysmath report RUN_DIR``: the last line is the path of the page it wrote."""
    from gym_sysmath.evaluation.viewer import write_report

    if args.out is not None:
        _check_writable_file("report", args.out)
    run_dir = Path(args.run_dir)
    runs = sorted(str(log.parent) for log in run_dir.glob("*/results.jsonl")) if run_dir.is_dir() else []
    if runs and not (run_dir / "results.jsonl").exists():  # eval --out DIR with several agents
        shown = " ".join(runs[:4]) + (" ..." if len(runs) > 4 else "")
        print(f"gym-sysmath: report: {run_dir} holds one run per agent: report each, e.g. gym-sysmath report "
              f"{runs[0]} (runs: {shown})", file=sys.stderr)
        return 2
    try:
        path = write_report(args.run_dir, args.out)
    except OSError as exc:  # no results.jsonl there (its own message), or a file it could not read or write
        why = one_line(str(exc)) if exc.filename is None else f"{exc.filename}: {exc.strerror}"
        print(f"gym-sysmath: report: {why}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


LOG_LEVELS = ("debug", "info", "warning", "error")


class _CliLogHandler(logging.StreamHandler):
    """The CLI's one handler on the package logger (replaced, not stacked, by each ``main``).

    It writes to ``sys.stderr`` as it is when a record arrives, not as it was when ``main`` ran:
    a pool thread may log after a caller (a notebook cell, a test's capture) swapped it and
    closed the old one."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:  # StreamHandler.__init__ sets it
        pass


def configure_logging(level: str) -> None:
    """Show the package's log records at ``level`` and above on stderr; the root logger is left
    alone. At warning and above a record reads like the CLI's other messages."""
    package = logging.getLogger("gym_sysmath")
    for handler in [h for h in package.handlers if isinstance(h, _CliLogHandler)]:
        package.removeHandler(handler)
    handler = _CliLogHandler()
    verbose = logging.getLevelName(level.upper()) < logging.WARNING
    handler.setFormatter(logging.Formatter("%(asctime)s gym-sysmath %(levelname)s %(name)s: %(message)s"
                                           if verbose else "gym-sysmath: %(message)s"))
    package.addHandler(handler)
    package.setLevel(level.upper())


def build_parser() -> argparse.ArgumentParser:
    from gym_sysmath.families import families

    parser = _Parser(prog="gym-sysmath", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="warning",
                        help="pool and eval events shown on stderr (default warning: lost containers, "
                             "retries, interruptions; info: run start/resume/end, lease waits; debug: "
                             "every container started, purged, destroyed)")
    commands = parser.add_subparsers(dest="command")  # none named: main's one line lists them

    sandbox = commands.add_parser("sandbox", help="build, inspect or clean the Docker sandbox")
    sandbox.add_argument("action", choices=["build", "status", "prune"])
    sandbox.add_argument("--bootstrap", action="store_true",
                         help="build the base image with debootstrap + docker import (no registry needed)")
    sandbox.add_argument("--force", action="store_true", help="rebuild even when the image is current")
    sandbox.add_argument("--with-performance", action="store_true",
                         help="build: also the performance variant (a patched cachegrind for CompGeom's "
                              "measure_performance; compiles valgrind: about 8 min more on 2 cores)")
    sandbox.add_argument("--mirror", help="Debian mirror (default: the one this host's apt uses)")
    sandbox.add_argument("--all", action="store_true", help="prune: remove every container of ours, not only orphans")
    sandbox.set_defaults(func=_sandbox)

    doctor = commands.add_parser("doctor", help="check the daemon, image, seccomp profile and cgroup cap",
                                 description="Check that this host can grade: the Docker daemon (reachable, "
                                             "version, runtime), the sandbox image (current, protocol), one "
                                             "real container running a probe the seccomp profile must refuse, "
                                             "and the host memory cap. Each line says what to do; exit 1 if "
                                             "any check fails.")
    doctor.set_defaults(func=_doctor)

    serve = commands.add_parser(
        "serve", help="serve env ids to remote or async trainers (an OpenEnv server)",
        description="Every env id (or those named) behind one OpenEnv WebSocket server sharing one warm sandbox "
                    "pool. Clients: gym_sysmath.serving.client.RemoteSysmathEnv, the adapters' remote=, or "
                    "OpenEnv's EnvClient. A token is required unless bound to loopback. Needs the serve extra.")
    serve.add_argument("env_ids", nargs="*", metavar="ENV_ID", help="ids to serve (default: every registered id)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=_port, default=8040, help="port (default 8040)")
    serve.add_argument("--token-file", help="a file holding the shared secret clients send as `Authorization: "
                                            "Bearer` (default: $GYM_SYSMATH_SERVE_TOKEN; a token is required "
                                            "for a non-loopback --host)")
    serve.add_argument("--token", help="the secret itself (visible in `ps`: prefer the variable or --token-file)")
    serve.add_argument("--allow-origin", action="append", metavar="ORIGIN",
                       help="a browser origin a tokenless server accepts (default: none; repeatable)")
    serve.add_argument("--max-sessions", type=int, default=512, help="live sessions at most (default 512)")
    serve.add_argument("--warm", type=int, default=0, help="containers to pre-start and keep warm (default 0)")
    serve.add_argument("--sandbox", choices=["docker", "process"], default="docker",
                       help="how served envs run code (default docker; process is unisolated, for debugging)")
    serve.add_argument("--idle-timeout", type=float, default=1800.0,
                       help="close a session idle this many seconds between calls (default 1800)")
    serve.add_argument("--drain-timeout", type=float, default=900.0,
                       help="on SIGTERM, wait this long for live sessions to close (default 900)")
    serve.set_defaults(func=_serve)

    verify = commands.add_parser("verify", help="re-check a family's task keys independently")
    verify.add_argument("family", choices=sorted(row.name for row in families()))
    verify.add_argument("--sandbox", default="docker", choices=["docker", "process", "local"],
                        help="compgeom: where fixtures are compiled (local: the host's own g++ and rustc)")
    verify.add_argument("--primitive", action="append", choices=_compgeom_primitives(), metavar="NAME",
                        help="compgeom: verify only this primitive's fixtures (repeatable; default: all)")
    verify.set_defaults(func=_verify)

    listing = commands.add_parser("list", help="registered ids, families and eval task counts")
    listing.set_defaults(func=_list)

    export = commands.add_parser("export", help="write an env's prompts and metadata as JSONL")
    export.add_argument("env_id")
    export.add_argument("--split", choices=["eval", "train"], default="eval")
    export.add_argument("-n", type=_at_least(1), default=None,
                        help="tasks (eval: the ones eval -n picks; train: default 100)")
    export.add_argument("--seed", type=_at_least(0), default=0)
    export.add_argument("--out", required=True, help="the JSONL file to write ('-' for stdout)")
    export.add_argument("--with-answers", action="store_true",
                        help="include each task's key and reference action (off by default)")
    export.add_argument("--env-arg", action="append", metavar="KEY=VALUE", help="extra gym.make argument")
    export.add_argument("--format", choices=["jsonl", *TRAINER_FORMATS], default="jsonl",
                        help="jsonl (default), or a trainer's parquet schema: verl, skyrl, openrlhf (a task "
                             "reference as ground truth; never the key)")
    export.add_argument("--max-turns", type=int, default=None,
                        help="the turns the prompts offer (jsonl and skyrl: the family's default; verl and "
                             "openrlhf: 1)")
    export.add_argument("--system-prompt", default=None, metavar="TEXT",
                        help="a system turn before each prompt (the prompt becomes chat messages)")
    export.set_defaults(func=_export)

    evaluation = commands.add_parser(
        "eval", help="evaluate agents on registered envs: per-sample log, summary, plot, scoreboard",
        description="Evaluate agents on the eval split of registered envs. Agents: reference, random, "
                    "openai (--model ...), python MODULE:FUNCTION (a callable (observation, history, info) "
                    "-> str), responses FILE.jsonl (score already-generated outputs). Exits non-zero when "
                    "the reference agent is below 100%% or any sample failed to score.")
    evaluation.add_argument("env_ids", nargs="*", help="ids to evaluate (default: each family's primary id)")
    evaluation.add_argument("--all", action="store_true",
                            help="every family once, by its primary id (aliases such as CompGeomCpp-v0 are subsets)")
    evaluation.add_argument("--agent", action=_AgentAction, nargs="+", metavar="AGENT",
                            help="reference | random | openai | python MODULE:FUNCTION | responses FILE.jsonl; "
                                 "repeat to evaluate several (default: reference)")
    evaluation.add_argument("--name", action="append", metavar="LABEL",
                            help="the agent's label on the scoreboard and the progress line (display only: "
                                 "results.jsonl, --out's subdirectories and --resume go by the agent's own name); "
                                 "with several --agent, one --name each, in order")
    evaluation.set_defaults(extra_env_ids=[])
    evaluation.add_argument("-n", type=_at_least(1), default=None,
                            help="tasks per env: a subset fixed per env id (default: all)")
    evaluation.add_argument("-r", type=_at_least(1), default=1,
                            help="rollouts per task, pass@k for k = 1..r (a responses file sets its own)")
    evaluation.add_argument("-c", type=_at_least(1), default=None,
                            help="episodes in flight (default: the sandbox pool size, for --agent openai its "
                                 "--model-concurrency; with --ray, cluster CPUs)")
    evaluation.add_argument("--seed", type=_at_least(0), default=0)
    evaluation.add_argument("--out", help="directory for results.jsonl, summary.json and breakdowns.png "
                                          "(one subdirectory per agent when several)")
    evaluation.add_argument("--resume", action="store_true",
                            help="skip samples already in --out's results.jsonl (refused when they were played "
                                 "on another task set than this install's)")
    evaluation.add_argument("--overwrite", action="store_true", help="replace an existing results.jsonl")
    evaluation.add_argument("--sandbox", default="docker", choices=["docker", "process"])
    evaluation.add_argument("--env-arg", action="append", metavar="KEY=VALUE",
                            help="extra gym.make argument, VALUE as JSON (e.g. max_turns=3)")
    evaluation.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                            help="spread episodes over Ray actors (no ADDRESS: RAY_ADDRESS or a local instance)")
    evaluation.add_argument("--quiet", action="store_true", help="no progress bar")
    chat = evaluation.add_argument_group("openai agent")
    chat.add_argument("--model")
    chat.add_argument("--base-url", help="OpenAI-compatible API root (default https://api.openai.com/v1)")
    chat.add_argument("--api-key-env", default=None,
                      help="environment variable holding the key (default: OPENAI_API_KEY, sent to "
                           "api.openai.com only)")
    chat.add_argument("--temperature", type=float)
    chat.add_argument("--top-p", type=float)
    chat.add_argument("--max-tokens", type=int)
    chat.add_argument("--stop", action="append", metavar="TEXT", help="a stop sequence (repeat for several)")
    chat.add_argument("--no-request-seed", action="store_true",
                      help="do not send each sample's seed (derived from --seed) as the request's seed")
    chat.add_argument("--extra-body", metavar="JSON", help="a JSON object merged into every request (e.g. top_k)")
    chat.add_argument("--model-concurrency", type=int, default=1,
                      help="requests in flight at once (default 1: one local server slot); -c defaults to it")
    chat.add_argument("--rpm", type=float, help="at most this many requests started per minute")
    chat.add_argument("--choices-per-request", type=int, metavar="K",
                      help="the request's n: K rollouts of a task share their first turn's request (-r K; "
                           "a server that ignores n is asked once per rollout)")
    chat.add_argument("--request-timeout", type=_seconds, default=600.0,
                      help="seconds to wait for each attempt's reply (default 600); a retry is logged in the turn")
    chat.add_argument("--connect-timeout", type=_seconds, default=10.0,
                      help="seconds to wait for a connection; the endpoint is checked before any episode (default 10)")
    chat.add_argument("--retries", type=int, default=3,
                      help="extra attempts after a refused connection, a timeout, HTTP 408, 409, 429 or 5xx, "
                           "waiting what Retry-After asks or openai-python's backoff (default 3)")
    chat.add_argument("--system-prompt")
    evaluation.set_defaults(func=_eval)

    report = commands.add_parser("report", help="write a run directory's transcripts as one HTML page",
                                 description="Write RUN_DIR/report.html: every sample's turns, verdicts, tokens "
                                             "and timings, with filters; self-contained (no network).")
    report.add_argument("run_dir", help="a directory `gym-sysmath eval --out` wrote")
    report.add_argument("--out", help="the HTML file to write (default RUN_DIR/report.html)")
    report.set_defaults(func=_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    from gym_sysmath.sandbox import SandboxUnavailableError

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        named = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
        assert named.choices is not None
        parser.error(f"name a command (choose from {', '.join(named.choices)})")
    configure_logging(args.log_level)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a reader that went away shows here, not in the interpreter's exit
        return code
    except (SandboxUnavailableError, UsageError) as exc:
        print(f"gym-sysmath: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `... --out - | head`: the reader has all it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the exit's own flush of stdout stays quiet
        return 141  # 128 + SIGPIPE, as a tool killed by the closed pipe would end
    except Exception as exc:  # a bug, or a failure nobody foresaw: one line, the traceback kept in a file
        if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
            raise
        print(f"gym-sysmath {args.command}: {_unexpected(exc)}", file=sys.stderr)
        return 1


def _unexpected(exc: Exception) -> str:
    """One line for an unexpected error: what it was and where its traceback went."""
    import tempfile
    import traceback

    what = one_line(f"{type(exc).__name__}: {exc}")
    what = what if len(what) <= 300 else f"{what[:300]}..."
    try:
        with tempfile.NamedTemporaryFile("w", prefix="gym-sysmath-traceback-", suffix=".txt", delete=False,
                                         encoding="utf-8") as handle:
            handle.write("".join(traceback.format_exception(exc)))
        kept = f"traceback in {handle.name}"
    except OSError:
        kept = "no traceback file could be written"
    return (f"unexpected error: {what} ({kept}; {DEBUG_ENV}=1 prints it here); "
            f"please report it with the command line")


if __name__ == "__main__":
    sys.exit(main())

"""Process templates (fork, wait, exit, signals), keyed by exhaustive models of the schedules.

A program is a list of statements (JSON lists, so it lives in a task's params):
``["say", "A"]`` prints the line ``A``; ``["show", "A"]`` prints ``A`` and the process's x;
``["add", k]`` is ``x += k``; ``["fork"]`` is a bare ``fork();``; ``["child", [...]]`` is
``if (fork() == 0) { ...; exit(0); }``; ``["wait"]`` is ``wait(NULL);``.

Two models give the outputs a program can print, written apart: ``outputs`` interprets the
statements process by process (each with its own copy of x, the kernel's wait rule on sets of
children) and explores every schedule; ``unfolded_outputs`` first unfolds the program into each
process's fixed list of events and then interleaves the lists under counting rules. The C program
itself is compiled with the image's gcc and run in the sandbox, and every output it prints must
be one the models allow (``RunCheck``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .schedules import (
    GATE_C,
    GATED_SAY,
    PRODUCE_TIMEOUT_MS,
    REFUTE_TIMEOUT_MS,
    SAY_MACRO,
    Forcing,
    actor_schedule,
    line_schedule,
)
from .template import BuildError, Field, Params, RunCheck, Template, WrongReading, draw, draw_int, fixed, require

if TYPE_CHECKING:
    import numpy as np

Stmt = Sequence[Any]

C_PRELUDE = """#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* The question assumes fork succeeds. Should the machine refuse one (a process limit), the run
   is void: the process says so and stops, and the run is not counted. */
static pid_t fork_checked(void)
{
    pid_t pid = fork();
    if (pid < 0) {
        if (write(1, "fork failed\\n", 12) < 0) _exit(1);
        _exit(99);
    }
    return pid;
}
#define fork fork_checked

/* say() formats one line and writes it with a single write(2): no stdio buffer for fork to copy */
""" + SAY_MACRO + "\n"


VOID_LINE = "fork failed"

STATED = ("Every line is written by say(), which formats it and writes it with one write(2) call, "
          "so lines never mix and fork copies no unwritten output. fork, wait and write never fail. "
          "A process ends at its exit(0) or when main returns, whether or not its own children have "
          "ended (an orphan is adopted and reaped by another process). wait(NULL) reaps one child that "
          "has ended, blocking until there is one, and returns at once when no child is left to wait for. "
          "The output is every line any process prints, lines printed after "
          "main has returned included.")



def _freeze(code: Sequence[Stmt]) -> tuple:
    return tuple((s[0], _freeze(s[1])) if s[0] == "child" else tuple(s) for s in code)


def render_c(body: Sequence[Stmt], x0: int, *, gated: bool = False) -> str:
    """The C program for a statement list; ``gated``: its forced-run build, whose say() waits
    for its line's turn (``schedules``, line mode) and does nothing else differently."""
    lines: list[str] = []

    def emit(code: Sequence[Stmt], indent: str) -> None:
        for stmt in code:
            op = stmt[0]
            if op == "say":
                lines.append(f'{indent}say("{stmt[1]}\\n");')
            elif op == "show":
                lines.append(f'{indent}say("{stmt[1]} %d\\n", x);')
            elif op == "add":
                lines.append(f"{indent}x += {stmt[1]};" if stmt[1] >= 0 else f"{indent}x -= {-stmt[1]};")
            elif op == "fork":
                lines.append(f"{indent}fork();")
            elif op == "wait":
                lines.append(f"{indent}wait(NULL);")
            elif op == "child":
                lines.append(f"{indent}if (fork() == 0) {{")
                emit(stmt[1], indent + "    ")
                lines.append(f"{indent}    exit(0);")
                lines.append(f"{indent}}}")
            else:
                raise ValueError(f"unknown statement {stmt!r}")

    emit(body, "    ")
    prelude = _gated(C_PRELUDE) if gated else C_PRELUDE
    return f"{prelude}\nint x = {x0};\n\nint main(void)\n{{\n" + "\n".join(lines) + "\n    return 0;\n}\n"


# --- model 1: interpret every process, explore every schedule ---------------------------------


def outputs(body: Sequence[Stmt], x0: int, *, child_exits: bool = True) -> frozenset[tuple[str, ...]]:
    """Every output (a tuple of lines) some schedule of the program prints.

    A process is (code left, x, unreaped children, finished). ``wait`` reaps any finished
    child, returns at once when no child is left unreaped, and blocks otherwise.
    """
    exit_stmt = (("exit",),) if child_exits else ()
    start: tuple[tuple[tuple, int, frozenset[int], bool], ...] = ((_freeze(body), x0, frozenset(), False),)

    @functools.cache
    def explore(procs: tuple) -> frozenset[tuple[str, ...]]:
        if all(done for *_, done in procs):
            return frozenset({()})
        results: set[tuple[str, ...]] = set()
        for pid, (code, x, unreaped, done) in enumerate(procs):
            if done:
                continue
            for line, after in _steps(procs, pid, code, x, unreaped, exit_stmt):
                results |= {(line, *rest) if line is not None else rest for rest in explore(after)}
        return frozenset(results)

    return explore(start)


def _steps(procs: tuple, pid: int, code: tuple, x: int, unreaped: frozenset, exit_stmt: tuple):
    """The (line printed or None, next state) pairs of one step of process ``pid``."""
    def put(*changes: tuple[int, tuple]) -> tuple:
        out = list(procs)
        for index, proc in changes:
            if index == len(out):
                out.append(proc)
            else:
                out[index] = proc
        return tuple(out)

    if not code:
        return [(None, put((pid, ((), x, unreaped, True))))]
    stmt, rest = code[0], code[1:]
    op = stmt[0]
    if op == "say":
        return [(stmt[1], put((pid, (rest, x, unreaped, False))))]
    if op == "show":
        return [(f"{stmt[1]} {x}", put((pid, (rest, x, unreaped, False))))]
    if op == "add":
        return [(None, put((pid, (rest, x + stmt[1], unreaped, False))))]
    if op == "exit":
        return [(None, put((pid, ((), x, unreaped, True))))]
    if op in ("fork", "child"):
        new = len(procs)
        child_code = rest if op == "fork" else stmt[1] + exit_stmt + (rest if not exit_stmt else ())
        return [(None, put((pid, (rest, x, unreaped | {new}, False)), (new, (child_code, x, frozenset(), False))))]
    if op == "wait":
        if not unreaped:
            return [(None, put((pid, (rest, x, unreaped, False))))]
        return [(None, put((pid, (rest, x, unreaped - {c}, False)))) for c in sorted(unreaped) if procs[c][3]]
    raise ValueError(f"unknown statement {stmt!r}")


# --- model 2: unfold into per-process event lists, then interleave them -----------------------


def unfold(body: Sequence[Stmt], x0: int) -> list[list[tuple]]:
    """Each process's events in program order: ("out", line), ("spawn", child), ("wait",).

    Process 0 is main; a child's events are listed when its ``fork`` is unfolded, and its x
    starts as its parent's at that point.
    """
    procs: list[list[tuple]] = [[]]

    def run(code: list, x: int, me: int) -> None:
        for i, stmt in enumerate(code):
            op = stmt[0]
            if op == "say":
                procs[me].append(("out", stmt[1]))
            elif op == "show":
                procs[me].append(("out", f"{stmt[1]} {x}"))
            elif op == "add":
                x += stmt[1]
            elif op == "wait":
                procs[me].append(("wait",))
            elif op == "exit":
                return
            elif op in ("fork", "child"):
                procs.append([])
                child = len(procs) - 1
                procs[me].append(("spawn", child))
                run(list(code[i + 1:]) if op == "fork" else [*stmt[1], ["exit"]], x, child)

    run(list(body), x0, 0)
    return procs


def unfolded_outputs(body: Sequence[Stmt], x0: int) -> frozenset[tuple[str, ...]]:
    """The outputs of every interleaving of the unfolded event lists that the rules allow.

    A child starts after its spawn event. The k-th wait of a process that has spawned s
    children and reaped r returns at once if s == r, and otherwise needs a finished,
    unreaped child (more finished children than r).
    """
    events = unfold(body, x0)
    parent = {ev[1]: p for p, evs in enumerate(events) for ev in evs if ev[0] == "spawn"}

    @functools.cache
    def go(pos: tuple[int, ...], reaped: tuple[int, ...]) -> frozenset[tuple[str, ...]]:
        if all(pos[p] == len(events[p]) for p in range(len(events))):
            return frozenset({()})
        found: set[tuple[str, ...]] = set()
        for p, evs in enumerate(events):
            started = p == 0 or pos[parent[p]] > next(i for i, e in enumerate(events[parent[p]]) if e == ("spawn", p))
            if not started or pos[p] == len(evs):
                continue
            event = evs[pos[p]]
            moved = (*pos[:p], pos[p] + 1, *pos[p + 1:])
            if event[0] == "out":
                found |= {(event[1], *rest) for rest in go(moved, reaped)}
            elif event[0] == "spawn":
                found |= go(moved, reaped)
            else:
                spawned = [e[1] for e in evs[:pos[p]] if e[0] == "spawn"]
                finished = sum(pos[c] == len(events[c]) for c in spawned)
                if len(spawned) == reaped[p]:
                    found |= go(moved, reaped)
                elif finished > reaped[p]:
                    found |= go(moved, (*reaped[:p], reaped[p] + 1, *reaped[p + 1:]))
        return frozenset(found)

    return go((0,) * len(events), (0,) * len(events))


def _text(lines: tuple[str, ...]) -> str:
    return "".join(f"{line}\n" for line in lines)


def _gated(prelude: str, *, lines: bool = True) -> str:
    """A prelude with the schedule gate; ``lines``: say() through it (line mode)."""
    if SAY_MACRO not in prelude:
        raise BuildError("the prelude's say() is not the one the gate replaces")
    return prelude.replace(SAY_MACRO, f"{GATE_C}\n{GATED_SAY if lines else SAY_MACRO}")


#: Orders wait rules out, tried per task besides the candidates (each costs a refute timeout).
REFUTED_PERMUTATIONS = 6


def _forced_orderings(p: Params, allowed: frozenset[tuple[str, ...]]) -> Forcing:
    """Every allowed output forced; the impossible candidates and a few other orders of the same
    lines must not be. Line mode follows any output of distinct lines that some schedule prints,
    so an order it cannot follow is one the program cannot print."""
    lines = next(iter(allowed))
    if len(set(lines)) != len(lines):
        raise BuildError("forcing by lines needs distinct lines")
    wrong = [tuple(c) for c in p["candidates"] if tuple(c) not in allowed]
    # the orders only wait rules out (each process's lines in program order, a child's after its
    # fork): the ones a model that lets too little through would wrongly call impossible
    ruled_out = sorted(outputs(_strip_waits(p["body"]), p["x0"]) - allowed - set(wrong))
    step = max(1, len(ruled_out) // REFUTED_PERMUTATIONS)
    wrong += ruled_out[::step][:REFUTED_PERMUTATIONS]
    return Forcing(render_c(p["body"], p["x0"], gated=True),
                   produce=tuple(line_schedule(o, PRODUCE_TIMEOUT_MS) for o in sorted(allowed)),
                   refute=tuple(line_schedule(o, REFUTE_TIMEOUT_MS) for o in dict.fromkeys(wrong)))


def _first_schedule(body: Sequence[Stmt], x0: int, shared: bool = False,
                    child_exits: bool = True) -> tuple[str, ...]:
    """The output of one schedule: always run the lowest-numbered process that can run.

    Programs without wait print the same lines in every schedule, only in other orders, so this
    one schedule answers what is printed. With ``shared`` every process reads and writes one x:
    the misreading that fork shares memory.
    """
    procs: list[list[Any]] = [[list(_freeze(body)), frozenset(), False]]
    xs = [x0]
    out: list[str] = []
    while not all(p[2] for p in procs):
        for pid, (code, unreaped, done) in enumerate(procs):
            if done:
                continue
            mem = 0 if shared else pid
            if not code:
                procs[pid][2] = True
                break
            op = code[0][0]
            if op == "wait" and unreaped and not any(procs[c][2] for c in unreaped):
                continue
            stmt = code.pop(0)
            if op == "say":
                out.append(stmt[1])
            elif op == "show":
                out.append(f"{stmt[1]} {xs[mem]}")
            elif op == "add":
                xs[mem] += stmt[1]
            elif op == "exit":
                procs[pid][2] = True
            elif op == "wait" and unreaped:
                procs[pid][1] = unreaped - {min(c for c in unreaped if procs[c][2])}
            elif op in ("fork", "child"):
                child_code = (list(code) if op == "fork" else [*stmt[1], ("exit",)] if child_exits
                              else [*stmt[1], *code])
                procs[pid][1] = unreaped | {len(procs)}
                procs.append([child_code, frozenset(), False])
                xs.append(xs[mem])
            break
    return tuple(out)


def _runs(p: Params) -> RunCheck:
    """The program and every output it may print, in order, each forced."""
    every = outputs(p["body"], p["x0"])
    return RunCheck(render_c(p["body"], p["x0"]), frozenset(_text(o) for o in every), void=VOID_LINE,
                    forced=_forced_orderings(p, every), reaped=True)


def _sorted_runs(p: Params) -> RunCheck:
    """A program without wait: the one multiset of lines it prints, in whatever order (every
    schedule prints it, so plain runs produce it: nothing to force)."""
    lines = tuple(sorted(_first_schedule(p["body"], p["x0"])))
    return RunCheck(render_c(p["body"], p["x0"]), frozenset({_text(lines)}), compare="sorted lines", void=VOID_LINE,
                    reaped=True)


def _program_text(p: Params) -> str:
    return f"```c\n{render_c(p['body'], p['x0'])}```\n{STATED}"


# --- random programs ----------------------------------------------------------------------------


def _random_body(rng: np.random.Generator, labels: Sequence[str], forks: int, *, waits: bool,
                 adds: bool, shows: bool) -> list:
    """A short program: ``forks`` forks (bare or child blocks) among prints, adds and waits."""
    body: list = []
    names = iter(labels)
    for i in range(forks):
        if adds and draw_int(rng, 0, 1):
            body.append(["add", draw_int(rng, 1, 9)])
        if draw_int(rng, 0, 2) == 0 or i == 0:
            body.append(["show" if shows else "say", next(names)])
        if draw_int(rng, 0, 1):
            block: list = [["add", draw_int(rng, 1, 9)]] if adds else []
            block.append(["show" if shows else "say", next(names)])
            if draw_int(rng, 0, 2) == 0:
                block.append(["fork"])
            body.append(["child", block])
        else:
            body.append(["fork"])
        if waits and draw_int(rng, 0, 1):
            body.append(["wait"])
    if adds:
        body.append(["add", draw_int(rng, 1, 9)])
    body.append(["show" if shows else "say", next(names)])
    return body


LABELS = tuple("ABCDEFGHIJKLMNOP")  # the orderings sampler can use 14: one per say it may emit


def _process_count(p: Params) -> float:
    return float(len(unfold(p["body"], p["x0"])))


# --- how many lines ---------------------------------------------------------------------------


def _line_counts(p: Params, doubles_all: bool = False, child_continues: bool = False) -> list:
    if doubles_all:
        per = 2 ** sum(1 for _ in _all_forks(p["body"]))
        labels = _printed_labels(p["body"])
        return [len(labels) * per, labels.count(p["ask"]) * per]
    out = _first_schedule(p["body"], p["x0"], child_exits=not child_continues)
    return [len(out), out.count(p["ask"])]


def _all_forks(code: Sequence[Stmt]):
    for stmt in code:
        if stmt[0] in ("fork", "child"):
            yield stmt
        if stmt[0] == "child":
            yield from _all_forks(stmt[1])


def _printed_labels(code: Sequence[Stmt]) -> list[str]:
    """Every label a say statement in the program text prints, once each."""
    return [s[1] for s in code if s[0] == "say"] + [line for s in code if s[0] == "child" for line in
                                                     _printed_labels(s[1])]


def _count_trap(p: Params, key: list) -> None:
    require(not _has_wait(p["body"]), "without wait every schedule prints the same lines")
    require(key != _line_counts(p, doubles_all=True), "the count must differ from 2^forks times the prints")
    require(key != _line_counts(p, child_continues=True), "the child's exit(0) must matter")
    require(key[1] > 1, "the asked line must be printed more than once")


def _sample_count(rng: np.random.Generator) -> Params:
    body = _random_body(rng, LABELS, draw_int(rng, 2, 4), waits=False, adds=False, shows=False)
    return {"x0": 0, "body": body, "ask": draw(rng, _printed_labels(body))}


LINE_COUNT = Template(
    name="fork_line_count",
    category="processes",
    question=lambda p: f"{_program_text(p)}\nCount the lines the program prints, over all its processes.",
    fields=lambda p: (Field("the total number of lines printed", "int"),
                      Field(f"the number of lines that read {p['ask']}", "int")),
    reference=_line_counts,
    wrong=(WrongReading("each fork doubles every line, even those printed before it",
                        lambda p: _line_counts(p, doubles_all=True)),
           WrongReading("a child block runs on past its closing brace (exit ignored)",
                        lambda p: _line_counts(p, child_continues=True))),
    trap=_count_trap,
    sample=_sample_count,
    measure=_process_count,
    independent=lambda p: [len(o := [e[1] for evs in unfold(p["body"], p["x0"]) for e in evs if e[0] == "out"]),
                           o.count(p["ask"])],
    runs=lambda p: _sorted_runs(p),
)

# --- which orderings are possible -----------------------------------------------------------------


def _orderings(p: Params, model=outputs, no_wait: bool = False, parent_first: bool = False) -> list:
    body = p["body"]
    if no_wait:
        body = _strip_waits(body)
    possible = {_first_schedule(body, p["x0"])} if parent_first else model(body, p["x0"])
    return [tuple(c) in possible for c in p["candidates"]] + [len(possible)]


def _strip_waits(code: Sequence[Stmt]) -> list:
    return [["child", _strip_waits(s[1])] if s[0] == "child" else list(s) for s in code if s[0] != "wait"]


def _ordering_trap(p: Params, key: list) -> None:
    flags = key[:-1]
    require(any(flags) and not all(flags), "some candidates must be possible and some not")
    require(key != _orderings(p, no_wait=True), "wait must rule a candidate out")
    require(len(set(map(tuple, p["candidates"]))) == len(p["candidates"]), "candidates must differ")


def _sample_orderings(rng: np.random.Generator) -> Params:
    """Two or three children (child blocks only, one of them perhaps with a grandchild), waits
    between them, at most six lines: small enough to list every schedule."""
    names = iter(LABELS)
    body: list = [["say", next(names)]] if draw_int(rng, 0, 1) else []
    for _ in range(draw_int(rng, 2, 3)):
        block: list = [["say", next(names)]]
        if draw_int(rng, 0, 3) == 0:
            block += [["child", [["say", next(names)]]], ["wait"] if draw_int(rng, 0, 1) else ["say", next(names)]]
        body.append(["child", block])
        if draw_int(rng, 0, 1):
            body.append(["wait"])
        if draw_int(rng, 0, 1):
            body.append(["say", next(names)])
    if not _has_wait(body):
        body.append(["wait"])
    body.append(["say", next(names)])
    every = sorted(outputs(body, 0))
    possible = list(dict.fromkeys(every[int(i)] for i in rng.integers(len(every), size=2)))
    impossible: list[tuple[str, ...]] = []
    for _ in range(24):  # orders of the same lines the program cannot print
        order = tuple(possible[0][int(i)] for i in rng.permutation(len(possible[0])))
        if order not in every and order not in impossible:
            impossible.append(order)
        if len(impossible) == 2:
            break
    candidates = possible + impossible  # as many possible as not, in a drawn order: no position is a guess
    return {"x0": 0, "body": body, "candidates": [list(candidates[int(i)]) for i in rng.permutation(len(candidates))]}


def _ordering_question(p: Params) -> str:
    shown = "\n".join(f"  ({i}) {' '.join(c)}" for i, c in enumerate(p["candidates"], 1))
    return (f"{_program_text(p)}\nHere are candidate outputs, each written as its lines in order, separated "
            f"by spaces:\n{shown}")


ORDERINGS = Template(
    name="fork_wait_orderings",
    category="processes",
    question=_ordering_question,
    fields=lambda p: (*(Field(f"whether output ({i}) is possible", "bool") for i in range(1, len(p["candidates"]) + 1)),
                      Field("the number of different outputs the program can print", "int")),
    reference=_orderings,
    wrong=(WrongReading("wait does not order anything", lambda p: _orderings(p, no_wait=True)),
           WrongReading("the parent always runs first, until it blocks", lambda p: _orderings(p, parent_first=True))),
    trap=_ordering_trap,
    sample=_sample_orderings,
    measure=lambda p: float(len(unfold(p["body"], p["x0"])) + len(p["candidates"][0])),
    independent=lambda p: _orderings(p, model=unfolded_outputs),
    runs=_runs,
)

# --- each process's own copy of x ---------------------------------------------------------------


def _values(lines: tuple[str, ...]) -> list[int]:
    return [int(line.split()[1]) for line in lines]


def _memory(p: Params, shared: bool = False) -> list:
    out = _first_schedule(p["body"], p["x0"], shared=shared)
    values = _values(out)
    return [len(values), min(values), max(values), sum(values)]


def _has_wait(code: Sequence[Stmt]) -> bool:
    return any(s[0] == "wait" or (s[0] == "child" and _has_wait(s[1])) for s in code)


def _memory_trap(p: Params, key: list) -> None:
    require(not _has_wait(p["body"]), "without wait every schedule prints the same lines")
    require(key != _memory(p, shared=True), "a shared x must give different values")


def _memory_unfolded(p: Params) -> list:
    values = [int(ev[1].split()[1]) for evs in unfold(p["body"], p["x0"]) for ev in evs if ev[0] == "out"]
    return [len(values), min(values), max(values), sum(values)]


def _sample_memory(rng: np.random.Generator) -> Params:
    return {"x0": draw_int(rng, 0, 20),
            "body": _random_body(rng, LABELS, draw_int(rng, 2, 3), waits=False, adds=True, shows=True)}


FORK_MEMORY = Template(
    name="fork_private_memory",
    category="processes",
    question=lambda p: (f"{_program_text(p)}\nEvery line printed is a label and the value of x in the process "
                        "that printed it."),
    fields=fixed(Field("the number of lines printed", "int"), Field("the smallest value of x printed", "int"),
                 Field("the largest value of x printed", "int"), Field("the sum of all values of x printed", "int")),
    reference=_memory,
    wrong=(WrongReading("all processes share one x (run parent first)", lambda p: _memory(p, shared=True)),),
    trap=_memory_trap,
    sample=_sample_memory,
    measure=_process_count,
    independent=_memory_unfolded,
    runs=lambda p: _sorted_runs(p),
)

# --- signals are not queued ---------------------------------------------------------------------
#
# The parent installs a SIGUSR1 handler that prints "sig", forks a child that sends the parent
# SIGUSR1 ``kills`` times (printing its own lines between them), then waits and prints "done".
# A pending signal is one bit: kills that arrive before the handler has run merge into one.

SIGNAL_RULES = (
    "Delivery: a pending SIGUSR1 is delivered before the parent starts its next statement (while "
    "the parent is blocked in wait, during the wait, which then resumes: SA_RESTART). Delivery clears "
    "the pending signal and runs the handler, which writes its line before the parent does anything "
    "else; the child may run on meanwhile. A pending signal is one bit: a kill while one is already "
    "pending merges into it. While the handler runs, SIGUSR1 is blocked: a kill then leaves it pending, "
    "delivered as the handler returns. wait returns only once the child has exited and no signal is "
    "pending. Each say() and the handler's write is one indivisible step.")


def _signal_program(p: Params, *, gated: bool = False) -> str:
    """The program a question shows; ``gated``: its forced-run build (actor mode), where the
    parent keeps SIGUSR1 blocked except at a delivery its schedule names, and each step of
    either process waits for its turn."""
    def step(actor: int, line: str) -> str:
        return f"gate_turn({actor}, {int(actor == 0)}); {line.strip()} gate_done();" if gated else line.strip()

    child = []
    for i in range(p["kills"]):
        child.append("        " + step(1, "kill(getppid(), SIGUSR1);"))
        if i in p["child_says"]:
            child.append("        " + step(1, f'say("c{i}\\n");'))
    before = "    " + step(0, 'say("p\\n");') + "\n" if p["parent_says"] else ""
    write = 'if (write(1, "sig\\n", 4) < 0) _exit(1);'
    if gated:
        handler = ("static void on_usr1(int sig, siginfo_t *info, void *context)\n{\n    (void) sig;\n"
                   "    (void) info;\n    gate_delivered();\n    " + step(0, write).replace(", 1)", ", 0)", 1)
                   + "\n    sigaddset(&((ucontext_t *) context)->uc_sigmask, SIGUSR1); /* stays blocked */\n}\n")
        install = ("    sa.sa_sigaction = on_usr1;\n    sa.sa_flags = SA_RESTART | SA_SIGINFO;\n"
                   "    sigemptyset(&sa.sa_mask);\n    sigaction(SIGUSR1, &sa, NULL);\n"
                   "    sigset_t usr1;\n    sigemptyset(&usr1);\n    sigaddset(&usr1, SIGUSR1);\n"
                   "    sigprocmask(SIG_BLOCK, &usr1, NULL);\n")
        prelude = _gated(C_PRELUDE, lines=False).replace("#include <signal.h>",
                                                         "#include <signal.h>\n#include <ucontext.h>")
        done = "    " + step(0, 'say("done\\n");') + "\n"
        wait = "    " + step(0, "wait(NULL);") + "\n"
    else:
        handler = f"static void on_usr1(int sig)\n{{\n    (void) sig;\n    {write}\n}}\n"
        install = ("    sa.sa_handler = on_usr1;\n    sa.sa_flags = SA_RESTART;\n    sigemptyset(&sa.sa_mask);\n"
                   "    sigaction(SIGUSR1, &sa, NULL);\n")
        prelude = C_PRELUDE
        done = '    say("done\\n");\n'
        wait = "    wait(NULL);\n"
    return (f"{prelude}\n{handler}\nint main(void)\n{{\n    struct sigaction sa = {{0}};\n{install}"
            "    if (fork() == 0) {\n" + "\n".join(child) + "\n        exit(0);\n    }\n"
            f"{before}{wait}{done}    return 0;\n}}\n")


def _signal_events(p: Params) -> tuple[tuple[str, ...], tuple[str, ...]]:
    child = []
    for i in range(p["kills"]):
        child.append("kill")
        if i in p["child_says"]:
            child.append(f"c{i}")
    parent = (["p"] if p["parent_says"] else []) + ["wait", "done"]
    return tuple(parent), tuple(child)


#: A move of the signal model: the line written (or None), the schedule event (actor 0 the
#: parent, 1 the child; 'D' a delivery, 'S' a step), and the next state.
SignalState = tuple[int, int, int, bool]


def _signal_moves(parent: tuple[str, ...], child: tuple[str, ...], state: SignalState, queued: bool):
    """Every move from ``state`` = (parent's next statement, child's next step, pending, in the
    handler), under ``SIGNAL_RULES``: a pending signal is delivered before the parent's next
    statement, the handler's line comes before anything else the parent does."""
    i, j, pending, in_handler = state
    if j < len(child):
        if child[j] == "kill":
            yield None, (1, "S"), (i, j + 1, pending + 1 if queued else 1, in_handler)
        else:
            yield child[j], (1, "S"), (i, j + 1, pending, in_handler)
    if in_handler:
        yield "sig", (0, "S"), (i, j, pending, False)
    elif pending:
        yield None, (0, "D"), (i, j, pending - 1 if queued else 0, True)
    elif parent[i] == "wait":
        if j == len(child):
            yield None, (0, "S"), (i + 1, j, pending, False)
    else:
        yield parent[i], (0, "S"), (i + 1, j, pending, False)


def signal_outputs(p: Params, queued: bool = False) -> frozenset[tuple[str, ...]]:
    """Every output: each schedule of the moves ``_signal_moves`` allows, explored with memoised
    states. ``queued``: the misreading that every kill runs the handler once."""
    parent, child = _signal_events(p)

    @functools.cache
    def go(state: SignalState) -> frozenset[tuple[str, ...]]:
        if state[0] == len(parent):
            return frozenset({()})
        found: set[tuple[str, ...]] = set()
        for line, _, after in _signal_moves(parent, child, state, queued):
            found |= {(line, *r) if line is not None else r for r in go(after)}
        return frozenset(found)

    return go((0, 0, 0, False))


def signal_witness(p: Params, output: tuple[str, ...]) -> list[tuple[int, str]]:
    """The events of one schedule that prints ``output`` (a depth-first search of the same
    moves), for a forced run; ValueError when none does."""
    parent, child = _signal_events(p)

    @functools.cache
    def find(state: SignalState, printed: int) -> tuple[tuple[int, str], ...] | None:
        if state[0] == len(parent):
            return () if printed == len(output) else None
        for line, event, after in _signal_moves(parent, child, state, False):
            if line is not None and (printed == len(output) or output[printed] != line):
                continue
            rest = find(after, printed + (line is not None))
            if rest is not None:
                return (event, *rest)
        return None

    events = find((0, 0, 0, False), 0)
    if events is None:
        raise ValueError(f"no schedule prints {output!r}")
    return list(events)


def _merges(a: list, b: list):
    """Every interleaving of two sequences, each kept in order."""
    if not a or not b:
        yield a + b
        return
    for rest in _merges(a[1:], b):
        yield [a[0], *rest]
    for rest in _merges(a, b[1:]):
        yield [b[0], *rest]


def signal_outputs_by_merging(p: Params) -> frozenset[tuple[str, ...]]:
    """The second model, generate and test: for each number d of handler runs, place d
    (deliver, write "sig") pairs among the parent's own lines before its wait returns, merge the
    parent's sequence with the child's in every order, and keep the merges a replay accepts
    (a delivery needs a pending signal, which a kill sets and the delivery clears; the parent
    takes no statement of its own while a signal is pending, nor between a delivery and the
    handler's line; wait returns only once the child is done and nothing is pending)."""
    parent, child = _signal_events(p)
    own = [s for s in parent if s not in ("wait", "done")]
    found: set[tuple[str, ...]] = set()
    for runs in range(1, p["kills"] + 1):
        for mine in _merges(own, ["H"] * runs):
            steps = [x for s in mine for x in (("deliver", "sig") if s == "H" else (s,))] + ["return", "done"]
            for merged in _merges([("P", s) for s in steps], [("C", s) for s in child]):
                pending, left, out, ok = False, len(child), [], True
                for who, step in merged:
                    left -= who == "C"
                    if step == "kill":
                        pending = True
                    elif step == "deliver":
                        ok, pending = ok and pending, False
                    elif who == "P" and step != "sig" and pending:
                        ok = False  # a pending signal comes before the parent's next statement
                    if step == "return":
                        ok = ok and left == 0
                    elif step not in ("kill", "deliver", "return"):
                        out.append(step)
                    if not ok:
                        break
                if ok:
                    found.add(tuple(out))
    return frozenset(found)


def _signals(p: Params, model=signal_outputs, queued: bool = False) -> list:
    """[outputs with one "sig" line, the most "sig" lines, outputs]. The fewest is not asked:
    it is 1 in every instance (the child can send every kill before the first delivery)."""
    every = signal_outputs(p, queued=True) if queued else model(p)
    counts = [o.count("sig") for o in every]
    return [counts.count(1), max(counts), len(every)]


def _fewest_signals(p: Params) -> int:
    return min(o.count("sig") for o in signal_outputs(p))


def _signal_runs(p: Params) -> RunCheck:
    """The program, every output the model allows, and each of them forced from its witness."""
    every = signal_outputs(p)
    produce = tuple(actor_schedule(signal_witness(p, o), o, PRODUCE_TIMEOUT_MS) for o in sorted(every))
    return RunCheck(_signal_program(p), frozenset(_text(o) for o in every), void=VOID_LINE, reaped=True,
                    forced=Forcing(_signal_program(p, gated=True), produce))


def _sample_signals(rng: np.random.Generator) -> Params:
    kills = draw_int(rng, 2, 4)
    return {"kills": kills, "child_says": sorted({draw_int(rng, 0, kills - 1) for _ in range(draw_int(rng, 0, 2))}),
            "parent_says": draw_int(rng, 0, 1) == 1}


SIGNALS = Template(
    name="signals_not_queued",
    category="processes",
    question=lambda p: f"```c\n{_signal_program(p)}```\n{STATED} The handler writes its line with one write(2) "
                       f"too. {SIGNAL_RULES}",
    fields=fixed(Field('the number of different outputs with exactly one "sig" line', "int"),
                 Field('the largest number of "sig" lines the program can print', "int"),
                 Field("the number of different outputs the program can print", "int")),
    reference=_signals,
    wrong=(WrongReading("signals queue: every kill runs the handler once", lambda p: _signals(p, queued=True)),),
    trap=lambda p, key: require(_fewest_signals(p) < key[1] and key[0] > 0,
                                "merged signals must make fewer handler runs possible"),
    sample=_sample_signals,
    measure=lambda p: float(p["kills"] + len(p["child_says"]) + p["parent_says"]),
    independent=lambda p: _signals(p, model=signal_outputs_by_merging),
    runs=_signal_runs,
)

TEMPLATES: tuple[Template, ...] = (LINE_COUNT, ORDERINGS, FORK_MEMORY, SIGNALS)

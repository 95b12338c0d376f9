"""Concurrency templates (pthreads, a mutex, semaphores), keyed by exhaustive interleaving.

A thread is a list of atomic steps: ``["load", v]`` copies shared v into the thread's register,
``["store", v, k]`` writes register + k to v, ``["say", text]`` writes a line (one write(2)),
``["emit", label]`` writes ``label`` and the register (``say("A %d", x)`` is a load of x, then
that write: the value printed may be stale by the time it is written), ``["lock"]``/``["unlock"]`` take and give
the one mutex, ``["P", s]``/``["V", s]`` are sem_wait/sem_post. ``x++`` on a volatile int is
the load and the store: two steps, and another thread may run between them.

``outputs`` explores the schedules with memoised states; ``outputs_by_enumeration`` lists every
interleaving of the threads' step lists and replays each one, dropping those that would block.
The real C program runs in the sandbox and every output it prints must be allowed.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .schedules import GATE_C, PRODUCE_TIMEOUT_MS, SAY_MACRO, Forcing, actor_schedule
from .template import Field, Params, RunCheck, Template, WrongReading, draw_int, fixed, require

if TYPE_CHECKING:
    import numpy as np

Steps = Sequence[Sequence[Any]]


def _state_key(mem: dict[str, int]) -> tuple:
    return tuple(sorted(mem.items()))


def _apply(step: Sequence[Any], reg: int, mem: dict[str, int], lock: bool) -> tuple[bool, int, str | None, bool]:
    """(can run, new register, line written or None, lock held) for one step; ``mem`` is updated."""
    op = step[0]
    if op == "load":
        return True, mem[step[1]], None, lock
    if op == "store":
        mem[step[1]] = reg + step[2]
        return True, reg, None, lock
    if op == "say":
        return True, reg, step[1], lock
    if op == "emit":
        return True, reg, f"{step[1]} {reg}", lock
    if op == "lock":
        return (not lock), reg, None, True
    if op == "unlock":
        return True, reg, None, False
    if op == "P":
        if mem[step[1]] == 0:
            return False, reg, None, lock
        mem[step[1]] -= 1
        return True, reg, None, lock
    if op == "V":
        mem[step[1]] += 1
        return True, reg, None, lock
    raise ValueError(f"unknown step {step!r}")


def outputs(threads: Sequence[Steps], mem0: dict[str, int], final: str | None = None) -> frozenset[tuple[str, ...]]:
    """Every output of a complete schedule (main prints ``final``'s value after joining all)."""
    code = tuple(tuple(tuple(s) for s in t) for t in threads)

    @functools.cache
    def go(pcs: tuple[int, ...], regs: tuple[int, ...], mem: tuple, lock: bool) -> frozenset[tuple[str, ...]]:
        if all(pc == len(t) for pc, t in zip(pcs, code, strict=True)):
            return frozenset({(f"{final} {dict(mem)[final]}",) if final else ()})
        found: set[tuple[str, ...]] = set()
        for i, t in enumerate(code):
            if pcs[i] == len(t):
                continue
            m = dict(mem)
            ok, reg, line, held = _apply(t[pcs[i]], regs[i], m, lock)
            if not ok:
                continue
            rest = go((*pcs[:i], pcs[i] + 1, *pcs[i + 1:]), (*regs[:i], reg, *regs[i + 1:]), _state_key(m), held)
            found |= {(line, *r) if line is not None else r for r in rest}
        return frozenset(found)

    return go((0,) * len(code), (0,) * len(code), _state_key(mem0), False)


def witness(threads: Sequence[Steps], mem0: dict[str, int], final: str | None,
            output: tuple[str, ...]) -> list[int]:
    """The thread of each step of one schedule that prints ``output`` (a depth-first search
    of the moves ``outputs`` explores), for a forced run; ValueError when none does."""
    code = tuple(tuple(tuple(s) for s in t) for t in threads)
    body = output[:-1] if final else output

    @functools.cache
    def find(pcs: tuple[int, ...], regs: tuple[int, ...], mem: tuple, lock: bool, printed: int) -> tuple | None:
        if all(pc == len(t) for pc, t in zip(pcs, code, strict=True)):
            done = printed == len(body) and (not final or output[-1] == f"{final} {dict(mem)[final]}")
            return () if done else None
        for i, t in enumerate(code):
            if pcs[i] == len(t):
                continue
            m = dict(mem)
            ok, reg, line, held = _apply(t[pcs[i]], regs[i], m, lock)
            if not ok or (line is not None and (printed == len(body) or body[printed] != line)):
                continue
            rest = find((*pcs[:i], pcs[i] + 1, *pcs[i + 1:]), (*regs[:i], reg, *regs[i + 1:]), _state_key(m), held,
                        printed + (line is not None))
            if rest is not None:
                return (i, *rest)
        return None

    found = find((0,) * len(code), (0,) * len(code), _state_key(mem0), False, 0)
    if found is None:
        raise ValueError(f"no schedule prints {output!r}")
    return list(found)


def outputs_by_enumeration(threads: Sequence[Steps], mem0: dict[str, int],
                           final: str | None = None) -> frozenset[tuple[str, ...]]:
    """The second model: every interleaving of the step lists, replayed from scratch."""
    found: set[tuple[str, ...]] = set()
    for order in _interleavings(threads):
        mem, regs, pcs, lock, out, ok = dict(mem0), [0] * len(threads), [0] * len(threads), False, [], True
        for i in order:
            ok, regs[i], line, lock = _apply(threads[i][pcs[i]], regs[i], mem, lock)
            if not ok:
                break
            pcs[i] += 1
            if line is not None:
                out.append(line)
        if ok:
            found.add((*out, f"{final} {mem[final]}") if final else tuple(out))
    return frozenset(found)


def _interleavings(threads: Sequence[Steps]):
    """The distinct orders of thread ids with thread i appearing len(threads[i]) times."""
    counts = [len(t) for t in threads]

    def rec(left: list[int]):
        if not any(left):
            yield ()
            return
        for i, n in enumerate(left):
            if n:
                left[i] -= 1
                for rest in rec(left):
                    yield (i, *rest)
                left[i] += 1

    yield from rec(counts)


# --- C rendering ----------------------------------------------------------------------------------

C_PRELUDE = """#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <unistd.h>

/* say() formats one line and writes it with a single write(2), so lines never mix */
""" + SAY_MACRO + """

/* The question assumes a thread can always be created. Should the machine refuse one (a process
   limit), the run is void: it says so and stops, and the run is not counted. */
static void start(pthread_t *tid, void *(*body)(void *))
{
    if (pthread_create(tid, NULL, body, NULL) != 0) {
        if (write(1, "thread refused\\n", 15) < 0) _exit(1);
        _exit(99);
    }
}
"""

VOID_LINE = "thread refused"

STATED = ("say() writes each line with one write(2) call, so lines never mix. pthread and semaphore calls "
          "never fail. The threads may run in any interleaving, on one core or several.")


def render_c(body: Sequence[Sequence[Sequence[Any]]], mem0: dict[str, int], final: str | None,
             mutex: bool, sems: dict[str, int]) -> str:
    """``body[i]`` is thread i's statement list in C terms: ["inc", v, n] (a loop of n v++),
    ["add", v, k] (v = v + k, read then written), ["say", text], ["show", label, v], ["lock"],
    ["unlock"], ["P", s], ["V", s]."""
    lines = [C_PRELUDE]
    lines += [f"volatile int {v} = {k};" for v, k in mem0.items() if v not in sems]
    if mutex:
        lines.append("pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;")
    lines += [f"sem_t {s};" for s in sems]
    for i, stmts in enumerate(body):
        lines += ["", f"static void *thread{i}(void *arg)", "{", "    (void) arg;"]
        for st in stmts:
            op = st[0]
            if op == "inc":
                lines.append(f"    for (int i = 0; i < {st[2]}; i++)\n        {st[1]}++;")
            elif op == "add":
                lines.append(f"    {st[1]} = {st[1]} + {st[2]};")
            elif op == "say":
                lines.append(f'    say("{st[1]}\\n");')
            elif op == "show":
                lines.append(f'    say("{st[1]} %d\\n", {st[2]});')
            elif op == "lock":
                lines.append("    pthread_mutex_lock(&m);")
            elif op == "unlock":
                lines.append("    pthread_mutex_unlock(&m);")
            elif op == "P":
                lines.append(f"    sem_wait(&{st[1]});")
            elif op == "V":
                lines.append(f"    sem_post(&{st[1]});")
        lines += ["    return NULL;", "}"]
    n = len(body)
    lines += ["", "int main(void)", "{", f"    pthread_t tid[{n}];"]
    lines += [f"    sem_init(&{s}, 0, {k});" for s, k in sems.items()]
    lines += [f"    start(&tid[{i}], thread{i});" for i in range(n)]
    lines.append(f"    for (int i = 0; i < {n}; i++)\n        pthread_join(tid[i], NULL);")
    if final:
        lines.append(f'    say("{final} %d\\n", {final});')
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)


def render_forced_c(p: Params) -> str:
    """The program's forced-run build: each thread runs its steps (``steps_of``: a load into a
    register, a store of the register plus k, a line, a lock or semaphore call) one at a time,
    each when the schedule (``schedules``, actor mode) says it is that thread's turn; main is as
    shown. Only when a step runs is forced, never what it does."""
    shown = _program(p)
    cut = shown.index("\nvolatile int ") if "\nvolatile int " in shown else shown.index("\nsem_t ")
    head, tail = shown[:cut], shown[cut:]
    main_at = tail.index("\nint main(void)")
    declarations = tail[:tail.index("\nstatic void *thread0")]
    lines = [head, GATE_C, declarations]
    for i, stmts in enumerate(p["threads"]):
        lines += ["", f"static void *thread{i}(void *arg)", "{", "    int r = 0;", "    (void) arg;", "    (void) r;"]
        for step in steps_of(stmts):
            lines.append(f"    gate_turn({i}, 0); {_forced_step(step)} gate_done();")
        lines += ["    return NULL;", "}"]
    return "\n".join(lines) + tail[main_at:]


def _forced_step(step: Sequence[Any]) -> str:
    op = step[0]
    if op == "load":
        return f"r = {step[1]};"
    if op == "store":
        return f"{step[1]} = r + {step[2]};"
    if op == "say":
        return f'say("{step[1]}\\n");'
    if op == "emit":
        return f'say("{step[1]} %d\\n", r);'
    return {"lock": "pthread_mutex_lock(&m);", "unlock": "pthread_mutex_unlock(&m);"}.get(op) or (
        f"sem_wait(&{step[1]});" if op == "P" else f"sem_post(&{step[1]});")


def steps_of(stmts: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """A thread's atomic steps: ``v++`` and ``v = v + k`` are a load then a store, and printing v
    is a load then the write."""
    out: list[list[Any]] = []
    for st in stmts:
        if st[0] == "inc":
            out += [["load", st[1]], ["store", st[1], 1]] * st[2]
        elif st[0] == "add":
            out += [["load", st[1]], ["store", st[1], st[2]]]
        elif st[0] == "show":  # say() reads v, then formats and writes: another thread may run between
            out += [["load", st[2]], ["emit", st[1]]]
        else:
            out.append(list(st))
    return out


def _text(lines: tuple[str, ...]) -> str:
    return "".join(f"{line}\n" for line in lines)


def _program(p: Params) -> str:
    return render_c(p["threads"], p["mem"], p.get("final"), p.get("mutex", False), p.get("sems", {}))


SYNC = ("lock", "unlock", "P", "V")


def _allowed(p: Params, model=outputs, atomic: bool = False, ignore_sync: bool = False) -> frozenset:
    """The outputs ``model`` allows (with the misreadings as flags: ++ indivisible, no sync)."""
    threads = [_atomic(t) if atomic else steps_of(t) for t in p["threads"]]
    if ignore_sync:
        threads = [[s for s in t if s[0] not in SYNC] for t in threads]
    return model(threads, p["mem"], p.get("final"))


def _atomic(stmts: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Each increment as one step under a private lock: the misreading that ++ is indivisible."""
    out: list[list[Any]] = []
    for st in steps_of(stmts):
        if st[0] == "load":
            out.append(["lock"])
            out.append(st)
        elif st[0] == "store":
            out += [st, ["unlock"]]
        else:
            out.append(st)
    return out


def _runs(p: Params) -> RunCheck:
    """The program, every output the model allows, and each of them forced from its witness."""
    threads = [steps_of(t) for t in p["threads"]]
    allowed = outputs(threads, p["mem"], p.get("final"))
    produce = tuple(actor_schedule([(i, "S") for i in witness(threads, p["mem"], p.get("final"), o)], o,
                                   PRODUCE_TIMEOUT_MS) for o in sorted(allowed))
    return RunCheck(_program(p), frozenset(_text(o) for o in allowed), void=VOID_LINE,
                    forced=Forcing(render_forced_c(p), produce))


# --- lost updates -----------------------------------------------------------------------------------


def _final_values(every: frozenset) -> list[int]:
    return sorted({int(o[-1].split()[1]) for o in every})


def _lost(p: Params, model=outputs, atomic: bool = False, one_lost: bool = False) -> list:
    counts, start = [t[0][2] for t in p["threads"]], p["mem"]["count"]
    if one_lost:  # "at worst one thread's increments are all lost"
        return [start + max(counts), start + sum(counts), min(counts) + 1]
    values = _final_values(_allowed(p, model=model, atomic=atomic))
    return [values[0], values[-1], len(values)]


def _sample_lost(rng: np.random.Generator) -> Params:
    first = draw_int(rng, 2, 5)
    counts = [first, draw_int(rng, 2, 9 - first)]
    return {"threads": [[["inc", "count", n]] for n in counts], "mem": {"count": draw_int(rng, 0, 9)},
            "final": "count"}


LOST_UPDATE = Template(
    name="lost_updates",
    category="concurrency",
    question=lambda p: (f"```c\n{_program(p)}```\n{STATED} The increment count++ on the volatile int is "
                        "compiled to a load of count and a store of the loaded value plus one."),
    fields=fixed(Field("the smallest value the program can print", "int"),
                 Field("the largest value the program can print", "int"),
                 Field("how many different values it can print", "int")),
    reference=_lost,
    wrong=(WrongReading("count++ is atomic", lambda p: _lost(p, atomic=True)),
           WrongReading("at worst one thread's increments are all lost", lambda p: _lost(p, one_lost=True))),
    trap=lambda p, key: require(key[0] < p["mem"]["count"] + min(t[0][2] for t in p["threads"]),
                                "the minimum must be below what either thread adds alone"),
    sample=_sample_lost,
    measure=lambda p: float(sum(t[0][2] for t in p["threads"])),
    independent=lambda p: _lost(p, model=outputs_by_enumeration),
    runs=_runs,
)

# --- what can print, with and without the mutex ----------------------------------------------------


def _candidates(p: Params, model=outputs, ignore_sync: bool = False) -> list:
    every = _allowed(p, model=model, ignore_sync=ignore_sync)
    return [tuple(c) in every for c in p["candidates"]] + [len(every)]


def _toggled(p: Params) -> Params:
    """The same program with the mutex taken away, or put around each thread's body."""
    if p["mutex"]:
        return {**p, "mutex": False, "threads": [[s for s in t if s[0] not in SYNC] for t in p["threads"]]}
    return {**p, "mutex": True, "threads": [[["lock"], *t, ["unlock"]] for t in p["threads"]]}


def _sample_mutex(rng: np.random.Generator) -> Params:
    mutex = draw_int(rng, 0, 1) == 1
    threads = []
    for name in ("A", "B"):
        body = [["add", "x", draw_int(rng, 1, 9)], ["show", name, "x"]]
        if draw_int(rng, 0, 1):
            body.insert(0, ["add", "x", draw_int(rng, 1, 9)])
        threads.append([["lock"], *body, ["unlock"]] if mutex else body)
    p = {"threads": threads, "mem": {"x": draw_int(rng, 0, 5)}, "final": "x", "mutex": mutex}
    loose = sorted(_allowed(p, ignore_sync=True))
    tight = sorted(_allowed(_toggled(p) if not mutex else p))
    first = loose[draw_int(rng, 0, len(loose) - 1)]
    picks = {first, tight[draw_int(rng, 0, len(tight) - 1)]}
    lines = list(first)
    order = rng.permutation(len(lines))
    picks.add(tuple(lines[int(i)] for i in order))
    p["candidates"] = [list(c) for c in sorted(picks)]
    return p


def _candidate_question(p: Params) -> str:
    shown = "\n".join(f"  ({i}) {' / '.join(c)}" for i, c in enumerate(p["candidates"], 1))
    extra = (" Each x = x + k is compiled to a load of x and a store of the loaded value plus k; each say of x "
             "loads x, then writes the line.")
    return (f"```c\n{_program(p)}```\n{STATED}{extra}\nHere are candidate outputs, each written as its lines in "
            f"order, separated by slashes:\n{shown}")


def _candidate_trap(p: Params, key: list) -> None:
    flags = key[:-1]
    require(any(flags) and not all(flags), "some candidates must be possible and some not")
    loose = p if not p["mutex"] else _toggled(p)
    require(len({o[-1] for o in _allowed(loose)}) > 1, "without the mutex an update must be lost somewhere")


MUTEX_OUTPUTS = Template(
    name="mutex_outputs",
    category="concurrency",
    question=_candidate_question,
    fields=lambda p: (*(Field(f"whether output ({i}) is possible", "bool") for i in range(1, len(p["candidates"]) + 1)),
                      Field("the number of different outputs the program can print", "int")),
    reference=_candidates,
    wrong=(WrongReading("the mutex is there when it is not, or not there when it is (the other program)",
                        lambda p: _candidates(_toggled(p))),),
    trap=_candidate_trap,
    sample=_sample_mutex,
    measure=lambda p: float(sum(len(steps_of(t)) for t in p["threads"])),
    independent=lambda p: _candidates(p, model=outputs_by_enumeration),
    runs=_runs,
)

# --- semaphores order threads ----------------------------------------------------------------------


def _sample_semaphores(rng: np.random.Generator) -> Params:
    """Three threads that print two lines each; a semaphore s (initially 0) makes one thread's line
    wait for another's post; sometimes a second one, t."""
    names = iter("ABCDEF")
    threads: list[list] = [[["say", next(names)], ["say", next(names)]] for _ in range(3)]
    a, b = (int(v) for v in rng.permutation(3)[:2])
    threads[a].insert(draw_int(rng, 1, 2), ["V", "s"])  # after a line, so the order shows
    threads[b].insert(draw_int(rng, 0, 1), ["P", "s"])  # before a line
    sems = {"s": 0}
    if draw_int(rng, 0, 1):
        c, d = (int(v) for v in rng.permutation(3)[:2])
        threads[c].insert(draw_int(rng, 1, len(threads[c])), ["V", "t"])
        threads[d].insert(draw_int(rng, 0, len(threads[d]) - 1), ["P", "t"])
        sems["t"] = 0
    p = {"threads": threads, "mem": dict(sems), "sems": sems}
    every = sorted(_allowed(p)) or [()]
    first = every[draw_int(rng, 0, len(every) - 1)]
    picks = {first}
    for _ in range(10):
        picks.add(tuple(first[int(i)] for i in rng.permutation(len(first))))
        if len(picks) == 3:
            break
    p["candidates"] = [list(c) for c in sorted(picks)]
    return p


def _semaphore_trap(p: Params, key: list) -> None:
    require(len(_allowed(p)) > 0 and all(len(o) == 6 for o in _allowed(p)), "every schedule must finish")
    flags = key[:-1]
    require(any(flags) and not all(flags), "some candidates must be possible and some not")


SEMAPHORE_ORDER = Template(
    name="semaphore_order",
    category="concurrency",
    question=lambda p: (f"```c\n{_program(p)}```\n{STATED}\nHere are candidate outputs, each written as its "
                        "lines in order, separated by spaces:\n"
                        + "\n".join(f"  ({i}) {' '.join(c)}" for i, c in enumerate(p["candidates"], 1))),
    fields=lambda p: (*(Field(f"whether output ({i}) is possible", "bool") for i in range(1, len(p["candidates"]) + 1)),
                      Field("the number of different outputs the program can print", "int")),
    reference=_candidates,
    wrong=(WrongReading("the semaphores order nothing", lambda p: _candidates(p, ignore_sync=True)),),
    trap=_semaphore_trap,
    sample=_sample_semaphores,
    measure=lambda p: float(len(_allowed(p, ignore_sync=True)) - len(_allowed(p))),  # orders the semaphores rule out
    independent=lambda p: _candidates(p, model=outputs_by_enumeration),
    runs=_runs,
)

TEMPLATES: tuple[Template, ...] = (LOST_UPDATE, MUTEX_OUTPUTS, SEMAPHORE_ORDER)

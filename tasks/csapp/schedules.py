"""Forced schedules: the real program made to follow one chosen schedule, so a model is checked
in both directions.

Random runs show only that every output the program printed is one the model allows; a model
that allows too much passes them (it did: outputs a reaper made impossible were keyed as
possible). So every output a key calls possible is also *produced*: the program is compiled
with a gate (``GATE_C``) that holds each process or thread at each visible step until the chosen
schedule says it is its turn, and the run must print exactly that output. A gate never changes
what a step does, only when it may happen; a schedule that cannot be followed stalls, and after
``timeout_ms`` without progress the gate says so and the run fails.

Two gates, one header:

- **line mode** (fork programs): the schedule is the output itself, a line per event. A
  process writes a line only when it is the next one; ``fork``, ``wait`` and ``exit`` run
  freely. With distinct lines this follows every output that some schedule prints (a process
  blocked in ``wait`` needs only children whose lines all come earlier), so it also refutes:
  an output the gate cannot follow is one the program cannot print.
- **actor mode** (threads, signals): the schedule names the actor of each step of the model's
  own witness (a thread's load, store, lock, sem_wait, line; the child's kill; the parent's
  statement, or ``D``: the parent unblocks SIGUSR1 there so that the pending signal is
  delivered, by the kernel, at that point and no other).

The schedule travels on stdin: a header line ``lines|actors TIMEOUT_MS``, then one event a line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: The exit status and line of a run whose schedule could not be followed.
STUCK_STATUS = 97
STUCK_LINE = "gate: the schedule cannot be followed"

#: How long a gate waits without any progress before the schedule is declared unfollowable: a
#: schedule that must be followed (produce) gets long, one that must not (refute) short, since
#: only a completed run is evidence there.
PRODUCE_TIMEOUT_MS = 5000
REFUTE_TIMEOUT_MS = 100

GATE_C = r"""
/* --- the schedule gate (forced runs only; never part of the program a question shows) --- */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#define GATE_MAX 1024
#define GATE_LINE 48
struct gate_shared {
    volatile int pos;               /* the next event of the schedule */
    volatile int busy;              /* line mode: a process is writing the line at pos */
    volatile int stuck;             /* a process gave up: the others stop waiting too */
    int n, timeout_ms, line_mode;
    int actors[GATE_MAX];           /* actor mode: who takes event k */
    char kinds[GATE_MAX];           /* actor mode: 'D' a signal delivery, 'S' a step */
    char lines[GATE_MAX][GATE_LINE];/* line mode: the k-th line, without its newline */
};
static struct gate_shared *gate_;

static long gate_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

static void gate_stuck(void)
{
    static const char line[] = "GATE_STUCK_LINE\n";
    if (__atomic_exchange_n(&gate_->stuck, 1, __ATOMIC_ACQ_REL)) _exit(GATE_STUCK_STATUS);  /* said once */
    if (write(1, line, sizeof line - 1) < 0) _exit(GATE_STUCK_STATUS);
    _exit(GATE_STUCK_STATUS);
}

/* Wait a little; give up once the schedule has not moved for timeout_ms. */
static void gate_idle(int seen, int *last, long *since)
{
    if (__atomic_load_n(&gate_->stuck, __ATOMIC_ACQUIRE)) gate_stuck();
    if (seen != *last) {
        *last = seen;
        *since = gate_now_ms();
    } else if (gate_now_ms() - *since > gate_->timeout_ms) {
        gate_stuck();
    }
    struct timespec nap = {0, 20000};  /* 20 us: a waiting process leaves the cores to the one whose turn it is */
    nanosleep(&nap, NULL);
}

/* One schedule (its header line, then an event a line) into the shared state, reset first. */
static void gate_load(char *text)
{
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    memset(gate_, 0, sizeof *gate_);
    if (!line || !strchr(line, ' ')) _exit(GATE_STUCK_STATUS);
    gate_->line_mode = strncmp(line, "lines ", 6) == 0;
    gate_->timeout_ms = atoi(strchr(line, ' ') + 1);
    while ((line = strtok_r(NULL, "\n", &save)) && gate_->n < GATE_MAX) {
        if (gate_->line_mode) {
            strncpy(gate_->lines[gate_->n], line, GATE_LINE - 1);
        } else {
            gate_->actors[gate_->n] = atoi(line);
            gate_->kinds[gate_->n] = line[strlen(line) - 1];
        }
        gate_->n++;
    }
}

/* Before main: read the schedule. A batch ("batch", then schedules each ended by a line "=")
   runs main once per schedule, each in a fresh child forked before main has run (so from the
   program's initial state), and reaps that child's whole tree (a child subreaper) before it
   writes the run's separator, GATE_SEPARATOR and the status, and takes the next schedule. */
__attribute__((constructor)) static void gate_open(void)
{
    static char text[1 << 18];
    size_t got = 0;
    ssize_t r;
    gate_ = mmap(NULL, sizeof *gate_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (gate_ == MAP_FAILED) _exit(GATE_STUCK_STATUS);
    while (got < sizeof text - 1 && (r = read(0, text + got, sizeof text - 1 - got)) > 0) got += (size_t) r;
    text[got] = 0;
    if (strncmp(text, "batch\n", 6) != 0) {
        gate_load(text);
        return;
    }
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) _exit(GATE_STUCK_STATUS);
    for (char *next = text + 6; *next;) {
        char *end = strstr(next, "\n=\n");
        if (end) end[1] = 0;
        gate_load(next);
        pid_t child = fork();
        if (child == 0) return;  /* this schedule's run of main */
        int status, code = 126;
        pid_t pid;
        while ((pid = wait(&status)) > 0)
            if (pid == child) code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        char sep[32];
        if (write(1, sep, snprintf(sep, sizeof sep, "GATE_SEPARATOR%d\n", code)) < 0) _exit(1);
        if (!end) break;
        next = end + 3;
    }
    _exit(0);
}

/* line mode: write `text` (len bytes, ending in a newline) when it is the schedule's next line */
static void gate_line(const char *text, int len)
{
    int last = -1;
    long since = 0;
    for (;;) {
        int k = __atomic_load_n(&gate_->pos, __ATOMIC_ACQUIRE);
        if (k >= gate_->n) gate_stuck();  /* a line the schedule has no room for */
        if ((int) strlen(gate_->lines[k]) == len - 1 && strncmp(gate_->lines[k], text, len - 1) == 0
            && __atomic_exchange_n(&gate_->busy, 1, __ATOMIC_ACQ_REL) == 0) {
            if (__atomic_load_n(&gate_->pos, __ATOMIC_ACQUIRE) == k) {
                if (write(1, text, len) < 0) _exit(1);
                __atomic_store_n(&gate_->pos, k + 1, __ATOMIC_RELEASE);
                __atomic_store_n(&gate_->busy, 0, __ATOMIC_RELEASE);
                return;
            }
            __atomic_store_n(&gate_->busy, 0, __ATOMIC_RELEASE);
        }
        gate_idle(k, &last, &since);
    }
}

/* actor mode: the end of the step that event pos was */
static void gate_done(void) { __atomic_add_fetch(&gate_->pos, 1, __ATOMIC_ACQ_REL); }

static void gate_deliver(int k);

/* actor mode: wait until event pos is a step of `me`; a 'D' of `me` met on the way is taken
   (deliveries == 0 inside a handler, where the signal is blocked: a 'D' there is a stall) */
static void gate_turn(int me, int deliveries)
{
    int last = -1;
    long since = 0;
    for (;;) {
        int k = __atomic_load_n(&gate_->pos, __ATOMIC_ACQUIRE);
        if (k >= gate_->n) gate_stuck();
        if (gate_->actors[k] == me && gate_->kinds[k] == 'S') return;
        if (gate_->actors[k] == me && gate_->kinds[k] == 'D' && deliveries) {
            gate_deliver(k);
            continue;
        }
        gate_idle(k, &last, &since);
    }
}

/* Unblock SIGUSR1 for a moment: the kernel delivers the pending signal before sigprocmask
   returns, and the handler (which calls gate_delivered first) moves pos past k. Nothing
   pending means the schedule was wrong. */
static void gate_deliver(int k)
{
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_UNBLOCK, &usr1, NULL);
    sigprocmask(SIG_BLOCK, &usr1, NULL);
    if (__atomic_load_n(&gate_->pos, __ATOMIC_ACQUIRE) == k) gate_stuck();
}

static void gate_delivered(void) { gate_done(); }
/* --- end of the gate --- */
""".replace("GATE_STUCK_LINE", STUCK_LINE).replace("GATE_STUCK_STATUS", str(STUCK_STATUS)).replace(
    "GATE_SEPARATOR", "\\036gate-run ")

#: The say() every processes and concurrency question shows (one write(2) a line); the gated
#: builds keep it (actor mode) or replace it with ``GATED_SAY`` (line mode).
SAY_MACRO = """#define say(...) do { char line_[64]; \\
    if (write(1, line_, snprintf(line_, sizeof line_, __VA_ARGS__)) < 0) _exit(1); } while (0)"""

#: The gated say(): in line mode, the line waits for its turn (replaces the prelude's say).
GATED_SAY = ("#define say(...) do { char line_[64]; "
             "gate_line(line_, snprintf(line_, sizeof line_, __VA_ARGS__)); } while (0)")


@dataclass(frozen=True)
class Schedule:
    """One forced run: what goes on stdin, and the output the run must print to have followed it."""

    stdin: str
    output: str


def line_schedule(lines: Sequence[str], timeout_ms: int) -> Schedule:
    """Force an output of distinct lines (line mode)."""
    return Schedule(f"lines {timeout_ms}\n" + "".join(f"{line}\n" for line in lines),
                    "".join(f"{line}\n" for line in lines))


def actor_schedule(events: Sequence[tuple[int, str]], output: Sequence[str], timeout_ms: int) -> Schedule:
    """Force a model's witness (actor mode): ``events`` are (actor, 'S' or 'D') in order."""
    return Schedule(f"actors {timeout_ms}\n" + "".join(f"{actor} {kind}\n" for actor, kind in events),
                    "".join(f"{line}\n" for line in output))


#: Between the runs of a batch, with the run's exit status after it (an ASCII record separator
#: first: no say() line holds one).
GATE_RUN_MARK = "\x1egate-run "
#: Schedules per batch (one run of the gated binary), so that a batch stays well inside the
#: runner's 20 s per run: a schedule to produce takes milliseconds, one to refute its timeout.
PRODUCE_BATCH = 150
REFUTE_BATCH = 40


def batches(produce: Sequence[Schedule], refute: Sequence[Schedule]) -> list[str]:
    """The stdin texts of the batches that run ``produce`` then ``refute``, in order."""
    out = []
    for group, size in ((produce, PRODUCE_BATCH), (refute, REFUTE_BATCH)):
        for start in range(0, len(group), size):
            out.append("batch\n" + "=\n".join(s.stdin for s in group[start:start + size]) + "=\n")
    return out


def split_batches(stdouts: Sequence[str]) -> list[tuple[str, int]]:
    """Each run's (stdout, exit status), in schedule order, from the batches' stdouts; a batch
    cut short (killed, timed out) gives fewer runs, never a made-up one."""
    runs = []
    for rest in stdouts:
        while GATE_RUN_MARK in rest:
            out, _, rest = rest.partition(GATE_RUN_MARK)
            status, _, rest = rest.partition("\n")
            runs.append((out, int(status) if status.isdigit() else -1))
    return runs


@dataclass(frozen=True)
class Forcing:
    """The gated program and its schedules: each of ``produce`` must print exactly its output
    (an output the key calls possible); none of ``refute`` may (an output it calls impossible)."""

    source: str
    produce: tuple[Schedule, ...]
    refute: tuple[Schedule, ...] = ()
    #: Why some outputs are not forced, when a template cannot force them all (said in ``verify``).
    note: str = ""

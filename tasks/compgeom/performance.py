"""CompGeom's opt-in performance score: instructions counted, not time measured.

A correct candidate's harness run on the timing inputs (the task's hidden inputs, one run) is
counted by valgrind's cachegrind (``Job.count_instructions``), and so are the reference
solution's run on the same inputs and the task's starter given no cases at all. The starter's
count is the part neither solution's work is in: the interpreter's or runtime's start-up, the
harness's own set-up. Over it,

    performance_score = min(1, (reference - baseline) / (candidate - baseline))

within one language. An instruction count does not depend on the machine's load, so the same
submission gets the same score on an idle or a busy machine (``benchmarks/perf_score.py``). What
the candidate does anywhere in its process (at import, in a static initialiser, on reading its
input) is its own work and counts; the counted run cannot exec, gets no count if it forks or starts a thread, and
its output is graded like the hidden run's, so skipped work earns nothing. The counter is in the
sandbox image's performance variant only (``gym-sysmath sandbox build --with-performance``,
docs/sandbox-image.md); the score is reported, never rewarded (SECURITY.md).
"""

from __future__ import annotations

from .grading import stdin_for

#: The baseline's stdin: no cases, so the candidate function is never called.
EMPTY_INPUT = stdin_for(())


def performance_score(reference: int, candidate: int, baseline: int) -> float:
    """The reference's instructions over the candidate's, each over the baseline, capped at 1.
    A candidate counted at or below the baseline (the starter doing nothing) cannot have done
    its work: its count is not a real one, and scores 0."""
    if reference <= baseline:
        raise ValueError(f"the reference's count {reference} is not above the baseline's {baseline}")
    if candidate <= baseline:
        return 0.0
    return round(min(1.0, (reference - baseline) / (candidate - baseline)), 4)

"""In-sandbox supervisor: runs untrusted jobs and Python sessions on behalf of the host.

Standard library only: the image folder is copied into the sandbox image, where
``run_supervisor.py`` starts it (the process backend runs the same file as a host process), and
the host imports what it shares with it (``protocol``, ``values``, ``limits``, ``statuses``) as
``gym_sysmath.sandbox.image.supervisor.*``. The host speaks to it over its stdin/stdout with
framed JSON messages (``protocol``); nothing else ever writes there, because the protocol
descriptors are moved out of the way at start and every child closes them before running
untrusted code.

Per job: a fresh scratch dir, a fork, a new session (process group), an unprivileged uid,
rlimits, output streamed against byte caps while the job runs, the whole group killed at
the wall-clock limit, and everything left under the job's uid killed before the next job.
Anything the job does is reported as a verdict; only the supervisor's own failures
(a malformed request, an internal exception) are reported as errors, which the host
treats as harness failures.

One module per job: ``service`` (the request loop, ``main``), ``stages`` (running one stage of
a job), ``child`` (the forked child's side), ``zygote`` (the clean process Python forks from),
``sessions``, ``builds`` (the build cache), ``purge`` (cleaning up after jobs and rollouts),
``processes`` (``/proc``, kills, uids), ``counting`` (cachegrind counts and pid counters),
``runtime`` (what the supervisor knows of where it runs), and the shared ``protocol``,
``values``, ``limits`` and ``statuses``. The compilers are ``toolchains.COMPILERS``, beside this package.
"""

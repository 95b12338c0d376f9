"""What the supervisor knows of where it runs, set once at start (``service.main``) and read by
every part as ``runtime.NAME`` (never copied by ``from ... import``, so the setting is seen)."""

from __future__ import annotations

import os

#: Root in a container (or as root on a host): jobs get their own uids and RLIMIT_NPROC holds.
#: As an ordinary host user (the process backend) jobs run as that user, and nothing that
#: would reach the user's other processes (``kill(-1)``) is ever done.
IS_ROOT = os.geteuid() == 0
#: Set by ``--own-pid-namespace`` (the Docker backend): the supervisor's container is its pid
#: namespace, so ``ns_last_pid`` counts only this rollout's forks and every process not root's is a job's.
OWN_PID_NAMESPACE = False


class SetupError(RuntimeError):
    """The sandbox could not start a job (scratch full, exec failed): the harness's failure,
    reported to the host as an error so it retries on a fresh worker."""

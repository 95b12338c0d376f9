"""Host-side guards of the catalogue's attacks; no Docker needed."""

from __future__ import annotations

import json
import os
import subprocess
import warnings

import pytest

from gym_sysmath.sandbox import Job, Sandbox
from gym_sysmath.tasks import compgeom


def test_the_hidden_run_sends_no_expected_output_into_the_sandbox():
    # what crosses into the sandbox for grading: the harness, the candidate and the inputs
    for task in compgeom.load_tasks():
        job = Job(task.language, compgeom.job_files(task, task.starter), stdin=compgeom.stdin_for(task.hidden_cases))
        wire = json.dumps(job.to_wire())
        for case in task.hidden_cases:
            assert case.id not in wire
        assert '"expected"' not in wire and "hidden" not in job.stdin


def test_job_file_names_with_parent_references_are_refused():
    for name in ("../main.py", "/etc/main.py", "..", "sub/main.py", ""):
        with pytest.raises(ValueError, match="plain names"):
            Job("python", {name: "print(1)"})


@pytest.mark.skipif(os.geteuid() != 0, reason="the process backend purges by uid only as root")
def test_a_process_backend_purge_kills_no_process_but_its_own_jobs():
    # The process backend's supervisor sees the whole host: its purge between rollouts must
    # kill its own job uids only, never another user's process (nor another pool's containers).
    bystander = subprocess.Popen(["sleep", "60"], user=65534, group=65534)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            sandbox = Sandbox("process", pool_size=1)
        try:
            lease = sandbox.lease()
            assert lease.run(Job("python", {"main.py": "print(1)"})).stdout == "1\n"
            lease.release()
            sandbox.prestart(1)  # waits until the purge is done
        finally:
            sandbox.close()
        assert bystander.poll() is None, "the purge killed a process that was not its job's"
    finally:
        bystander.kill()
        bystander.wait()

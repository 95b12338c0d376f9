"""Host-side guards of the catalogue's attacks; no Docker needed."""

from __future__ import annotations

import json

import pytest

from gym_sysmath.sandbox import Job
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

"""Counted runs (``Job(count_instructions=True)``, CompGeom's performance score): what a program
does to lower or forge its instruction count. Each attack must end with no count (or its real
count), and the next counted run must still count."""

from __future__ import annotations

import signal

import pytest

from gym_sysmath.sandbox import Job, Limits, Sandbox

pytestmark = pytest.mark.docker
LIMITS = Limits(wall_s=60.0, cpu_s=40.0)
TRIES = 5  # as the env retries a counted run SIGKILLed by someone else (envs/compgeom.py)


@pytest.fixture(scope="module")
def lease(instruction_counter):
    sandbox = Sandbox(pool_size=1)
    rollout = sandbox.lease()
    yield rollout
    sandbox.close()


def counted(lease, code: str):
    for _ in range(TRIES):
        result = lease.run(Job("python", {"main.py": code}, limits=LIMITS, count_instructions=True))
        if not (result.status == "memory_limit" and result.signal == signal.SIGKILL):
            return result
    pytest.fail("every try was SIGKILLed")


PLAIN = "print(sum(range(1000)))\n"
PLANT = "open('.instructions', 'w').write('summary: 1\\n')\n"


@pytest.mark.parametrize("attack", [
    "fork_a_child_to_do_the_work",
    "start_a_thread",
    "exec_an_uncounted_program",
    "plant_a_read_only_count",
    "plant_a_count_behind_a_symlink",
    "plant_a_count_and_cap_the_file_size",
    "spawn_a_process_with_posix_spawn",
])
def test_attack_leaves_no_count(lease, attack):
    code = {
        "fork_a_child_to_do_the_work": "import os\nif os.fork() == 0:\n    print(sum(range(1000)))\n"
                                       "    os._exit(0)\nos.wait()\n",
        "start_a_thread": "import threading\nt = threading.Thread(target=print, args=(499500,))\n"
                          "t.start()\nt.join()\n",
        "exec_an_uncounted_program": "import os\nos.execv('/usr/bin/python3', ['python3', '-c', "
                                     f"{PLANT + PLAIN!r}])\n",
        "plant_a_read_only_count": PLANT + "import os\nos.chmod('.instructions', 0o400)\n" + PLAIN,
        "plant_a_count_behind_a_symlink": "import os\nopen('x', 'w').write('summary: 1\\n')\n"
                                          "os.symlink('x', '.instructions')\n" + PLAIN,
        "plant_a_count_and_cap_the_file_size": PLANT + "import resource\n"
                                               "resource.setrlimit(resource.RLIMIT_FSIZE, (12, 12))\n" + PLAIN,
        "spawn_a_process_with_posix_spawn": "import os\nos.posix_spawn('/usr/bin/python3', ['python3', '-c', "
                                            f"{PLAIN!r}], {{}})\n" + PLAIN,
    }[attack]
    result = counted(lease, code)
    assert result.instructions is None, (result.status, result.instructions, result.stderr[-500:])
    assert counted(lease, PLAIN).instructions > 1_000_000


def test_a_count_planted_where_the_counter_can_write_is_replaced_by_the_real_one(lease):
    planted = counted(lease, PLANT + PLAIN)
    assert planted.ok and planted.instructions > 1_000_000


def test_same_program_gets_the_same_count_to_the_instruction(lease):
    # A counted job's dir has one fixed name: CPython's string hashing sees the path.
    counts = {counted(lease, PLAIN).instructions for _ in range(3)}
    assert len(counts) == 1 and None not in counts, counts


@pytest.mark.parametrize("call", ["os.fork()", "os.posix_spawn('/bin/true', ['true'], {})"])
def test_a_counted_run_cannot_make_a_process_at_all(lease, call):
    # Refused outright, not only seen afterwards by the pid counter, which a host with a small
    # pid_max lets a program wrap back to where it was. No child was made, so the count stands.
    result = counted(lease, f"import os\ntry:\n    {call}\nexcept PermissionError:\n    print('refused')\n")
    assert (result.ok, result.stdout) == (True, "refused\n"), result
    assert result.instructions > 1_000_000


@pytest.mark.parametrize("limit", ["RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_RTTIME"])
def test_a_counted_run_cannot_set_the_limits_that_kill_it_or_cut_the_count_file(lease, limit):
    # RLIMIT_CPU's hard limit SIGKILLs (a masked scoring_error, not a 0); RLIMIT_FSIZE cuts
    # cachegrind's write so that a line the program planted (a symbol name) is left last.
    code = (f"import resource\nsoft, hard = resource.getrlimit(resource.{limit})\ntry:\n"
            f"    resource.setrlimit(resource.{limit}, (1, 1))\nexcept (PermissionError, ValueError):\n"
            f"    print('refused')\n")
    result = counted(lease, code)
    assert (result.ok, result.stdout) == (True, "refused\n"), result
    assert result.instructions > 1_000_000


def test_a_counted_run_that_sigkills_itself_is_not_taken_for_a_kill_from_outside(lease):
    # A SIGKILL from outside is retried and then a scoring_error; one the program sends itself
    # is refused (valgrind, unable to die of it, gives up: no count, and not a SIGKILL).
    result = lease.run(Job("python", {"main.py": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"},
                           limits=LIMITS, count_instructions=True))
    assert result.signal != signal.SIGKILL and result.instructions is None, result


def test_a_counted_run_may_start_a_thread_but_then_gets_no_count(lease):
    result = counted(lease, "import threading\nt = threading.Thread(target=print, args=('ran',))\n"
                            "t.start()\nt.join()\n")
    assert (result.ok, result.stdout, result.instructions) == (True, "ran\n", None), result

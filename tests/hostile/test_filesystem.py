"""Filesystem: only the job's own dir is writable, filling it hurts nobody after the job,
planted links cannot redirect the harness, and nothing a job leaves is seen by the next."""

from __future__ import annotations

import pytest

from gym_sysmath.sandbox import Job, SandboxError
from gym_sysmath.tasks import compgeom
from gym_sysmath.verdicts import Verdict
from tests.hostile.conftest import ALL_PATHS, CODE_LANGUAGES
from tests.hostile.payloads import PROBE_HIT

pytestmark = pytest.mark.docker

#: Places outside the job's dir; a successful write to any of them is a probe hit.
FORBIDDEN = ("/tmp/hostile", "/etc/hostile", "/usr/hostile", "/hostile", "/opt/gym-sysmath/hostile",
             "/scratch/hostile", "/scratch/.build-cache/hostile", "../hostile", "../../hostile", "/var/tmp/hostile",
             "/dev/hostile", "/proc/sys/kernel/hostname")
#: Names the harness and the supervisor use in a job's dir, and their neighbours'.
HARNESS_NAMES = ("main.py", "candidate.py", "main.cpp", "candidate.hpp", "main.rs", "candidate.rs", "prog",
                 "main", "a.out", "stdin", "stdout", "result.json", ".build-cache")
LINK_TARGETS = ("/opt/gym-sysmath/image/supervisor/service.py", "/etc/passwd", "/scratch", "/proc/1/root")


def cpp_list(values) -> str:
    return "{" + ", ".join(f'"{value}"' for value in values) + "}"


def rust_list(values) -> str:
    return "[" + ", ".join(f'"{value}"' for value in values) + "]"


@ALL_PATHS
def test_filling_scratch(attack, language):
    # writes 32 MB files until the scratch tmpfs is full; the purge after the job frees it. A
    # session's files would outlive the turn: past its disk budget the session is ended instead
    attack(language, Verdict.CORRECT, session_status="output_limit",
           python=("try:\n    for i in range(1000):\n        with open(f'fill{i}', 'wb') as handle:\n"
                   "            handle.write(bytes(32 << 20))\nexcept OSError:\n    pass"),
           cpp=("    std::string block(32 << 20, '\\0');\n    for (int i = 0; i < 1000; ++i) {\n"
                "        std::ofstream out(\"fill\" + std::to_string(i), std::ios::binary);\n"
                "        if (!out.write(block.data(), block.size()) || !out.flush()) break;\n    }"),
           rust=("    use std::io::Write;\n    let block = vec![0u8; 32 << 20];\n    for i in 0..1000 {\n"
                 "        let Ok(mut out) = std::fs::File::create(format!(\"fill{i}\")) else { break };\n"
                 "        if out.write_all(&block).is_err() { break; }\n    }"))


@ALL_PATHS
def test_writing_outside_the_job_dir(attack, language):
    attack(language, Verdict.CORRECT,
           python=("import os\n"
                   f"for path in {FORBIDDEN!r}:\n"
                   "    try:\n        with open(path, 'w') as handle:\n            handle.write('x')\n"
                   "    except OSError:\n        continue\n"
                   f"    os._exit({PROBE_HIT})"),
           cpp=(f"    for (const char* path : {cpp_list(FORBIDDEN)})\n"
                f"        if (open(path, O_WRONLY | O_CREAT, 0644) >= 0) _exit({PROBE_HIT});"),
           rust=(f"    for path in {rust_list(FORBIDDEN)} {{\n"
                 f"        if std::fs::write(path, \"x\").is_ok() {{ std::process::exit({PROBE_HIT}); }}\n    }}"))


@CODE_LANGUAGES
def test_links_planted_at_every_path_the_harness_writes(attack, language, compgeom_envs):
    # every harness name, here and in the parent dirs, replaced by symlinks to the supervisor,
    # /etc/passwd, the scratch root and pid 1's root, and by hard links to the supervisor
    attack(language, Verdict.CORRECT,
           python=("import os\n"
                   f"targets = {LINK_TARGETS!r}\n"
                   f"names = sorted(set(os.listdir('.')) | set({HARNESS_NAMES!r}))\n"
                   "for i, name in enumerate(names):\n"
                   "    for place in ('.', '..', '../..', '/scratch'):\n"
                   "        path = os.path.join(place, name)\n"
                   "        for plant in (lambda: os.remove(path), lambda: os.symlink(targets[i % 4], path),\n"
                   "                      lambda: os.link(targets[0], path + '.hard')):\n"
                   "            try:\n                plant()\n            except OSError:\n                pass"),
           cpp=(f"    const char* targets[] = {cpp_list(LINK_TARGETS)};\n    int i = 0;\n"
                f"    for (std::string name : {cpp_list(HARNESS_NAMES)}) {{\n"
                "        for (std::string place : {\".\", \"..\", \"../..\", \"/scratch\"}) {\n"
                "            std::string path = place + \"/\" + name;\n"
                "            unlink(path.c_str());\n            symlink(targets[i % 4], path.c_str());\n"
                "            link(targets[0], (path + \".hard\").c_str());\n        }\n        ++i;\n    }"),
           rust=(f"    let targets = {rust_list(LINK_TARGETS)};\n"
                 f"    for (i, name) in {rust_list(HARNESS_NAMES)}.iter().enumerate() {{\n"
                 "        for place in [\".\", \"..\", \"../..\", \"/scratch\"] {\n"
                 "            let path = format!(\"{place}/{name}\");\n"
                 "            let _ = std::fs::remove_file(&path);\n"
                 "            let _ = std::os::unix::fs::symlink(targets[i % 4], &path);\n"
                 "            let _ = std::fs::hard_link(targets[0], format!(\"{path}.hard\"));\n"
                 "        }\n    }"))
    # the next job's dir is empty (a Python job's code is not a file): nothing planted survived
    pool = compgeom_envs[language].unwrapped.sandbox
    assert pool.run(Job("python", {"main.py": "import os\nprint(os.listdir('.'))"})).stdout == "[]\n"


LEAVE_A_FILE = {
    "python": ("main.py", "import os\nopen('left-behind.txt', 'w').write('secret')\nprint(os.getcwd())"),
    "cpp": ("main.cpp", "#include <cstdio>\n#include <fstream>\n#include <unistd.h>\n"
                        "int main() { std::ofstream(\"left-behind.txt\") << \"secret\"; char here[4096];\n"
                        "  std::puts(getcwd(here, sizeof here)); }"),
    "rust": ("main.rs", "fn main() { std::fs::write(\"left-behind.txt\", \"secret\").unwrap();\n"
                        "  println!(\"{}\", std::env::current_dir().unwrap().display()); }"),
}


@CODE_LANGUAGES
def test_file_left_by_one_job_is_not_visible_to_the_next(compgeom_envs, language):
    pool = compgeom_envs[language].unwrapped.sandbox  # one worker: the next job runs where this one did
    name, source = LEAVE_A_FILE[language]
    first = pool.run(Job(language, {name: source}))
    assert first.status == "ok", first
    where = first.stdout.strip()
    look = (f"import os\nprint(os.path.exists({where + '/left-behind.txt'!r}))\n"
            "found = [os.path.join(d, f) for top in ('/scratch', os.getcwd(), '/tmp') for d, _, files in os.walk(top)\n"
            "         for f in files if f == 'left-behind.txt']\nprint(found)")
    assert pool.run(Job("python", {"main.py": look})).stdout == "False\n[]\n"


def test_parent_references_sent_to_the_supervisor_are_refused(compgeom_envs):
    # past the host's own check (test_host_side.py): the supervisor refuses such a name too
    pool = compgeom_envs["python"].unwrapped.sandbox
    job = Job("python", {"main.py": "print(1)"}).to_wire()
    job["files"]["../escaped.py"] = "print(2)"
    with pool.lease() as rollout:
        with pytest.raises(SandboxError, match="bad file name"):
            rollout.request({"op": "run", "job": job}, 30.0)
        # the refusal marked the container broken; look inside it before it is destroyed
        container = rollout.worker
        container.broken = False
        look = Job("python", {"main.py": "import os\nprint(os.path.exists('/scratch/escaped.py'))"})
        reply = container.request({"op": "run", "job": look.to_wire()}, 30.0)
        assert reply["result"]["stdout"] == "False\n"


@pytest.mark.parametrize("write", [
    "open(f'block{turn}', 'wb').write(bytes(40 << 20))",  # 40 MiB a turn: the second passes 64 MiB
    "for i in range(6000):\n    open(f'f{turn}-{i}', 'w').close()",  # 6,000 files a turn: past 10,000
], ids=["bytes", "files"])
def test_session_files_piling_up_across_turns(session_env, compgeom_envs, write):
    # a session's files outlive its turns: past its disk budget the session ends, so it cannot
    # leave the worker's next build (another rollout's, perhaps) without room
    pool = session_env.unwrapped.sandbox
    before = pool.stats()
    session_env.reset(seed=0)
    try:
        turns = [session_env.step(f"```python\nturn = {turn}\n{write}\n```") for turn in (1, 2)]
        assert [info["execution"] for *_, info in turns] == ["ok", "output_limit"]
        assert "the session was ended" in turns[1][0] and "restarted" in turns[1][0]
        observation, *_, info = session_env.step("```python\nimport os\nprint(len(os.listdir('.')))\n```")
        assert (info["execution"], observation.split("\n")[0]) == ("ok", "0"), "a fresh session, in an empty dir"
    finally:
        session_env.reset(seed=0)
    env = compgeom_envs["cpp"]
    env.reset(options={"task_id": "segment2_segment2/cpp"})
    source = compgeom.reference_solution(env.unwrapped.current_task).replace("namespace compgeom {",
                                                                               "namespace compgeom { // rebuilt", 1)
    _, reward, *_ = env.step(f"```cpp\n{source}\n```")
    assert reward == 1.0 and pool.stats().workers_lost == before.workers_lost

"""No toolchain in CsappExact's tool turns: a turn cannot compile, assemble or link.

CsappExact's machine and linking tasks are keyed by what gcc and ld did; a tool turn that could
run them would answer by building the prompt's files, with no reasoning. The image makes every
file of the compiler, assembler and linker packages 0750 ``root:gym-toolchain``
(``toolchains.TOOLCHAIN_GROUP``), and the supervisor gives that group only to a C++/Rust compile
stage and to a Python job whose host asked for it (``Job(toolchain=True)``, which no env sets for
an agent). Each attack below is a tool turn of a real CsappExact episode that prints what got
through (``GOT THROUGH [...]``); each must get nothing, and the session answers its next turn.
The last tests show the toolchain's rightful users still have it.
"""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from gym_sysmath.sandbox import Job, Limits
from gym_sysmath.sandbox.image.toolchains import TOOLCHAIN_GID
from tests.hostile.conftest import _pool

pytestmark = pytest.mark.docker

GCC_DIR = "/usr/lib/gcc/x86_64-linux-gnu/12"
#: The toolchain's programs by absolute path (the drivers, and what they run).
PROGRAMS = ("/usr/bin/x86_64-linux-gnu-gcc-12", "/usr/bin/x86_64-linux-gnu-g++-12", "/usr/bin/x86_64-linux-gnu-cpp-12",
            f"{GCC_DIR}/cc1", f"{GCC_DIR}/cc1plus", f"{GCC_DIR}/collect2", f"{GCC_DIR}/lto1",
            f"{GCC_DIR}/lto-wrapper", "/usr/bin/x86_64-linux-gnu-as", "/usr/bin/x86_64-linux-gnu-ld.bfd",
            "/usr/bin/x86_64-linux-gnu-ld.gold", "/usr/bin/x86_64-linux-gnu-objdump", "/usr/bin/rustc")
#: Names on PATH.
COMMANDS = ("gcc", "cc", "c++", "g++", "cpp", "as", "ld", "ld.bfd", "ld.gold", "rustc", "objdump", "gcc-12")
#: Shared objects that are a compiler or an assembler when loaded (with ctypes).
LIBRARIES = (f"{GCC_DIR}/liblto_plugin.so", "/usr/lib/x86_64-linux-gnu/libLLVM.so.22.1",
             "/usr/lib/x86_64-linux-gnu/libbfd-2.40-system.so", "/usr/lib/x86_64-linux-gnu/libopcodes-2.40-system.so")

C_SOURCE = "int main(void) { return 42; }\\n"

#: Defines ``got``, the list a turn fills with what got through, and ``report()``, which prints it.
PRELUDE = f"""\
import glob, json, os, shutil, subprocess, sys
got = []
open('t.c', 'w').write({C_SOURCE!r})
def report():
    print('GOT THROUGH', json.dumps(got))
def ran(argv, **kw):
    try:
        done = subprocess.run(argv, capture_output=True, timeout=20, **kw)
    except (OSError, subprocess.SubprocessError) as exc:
        return False
    return done.returncode == 0
"""


def tool_turn(env, code: str) -> str:
    """Run ``code`` as a tool turn (after ``PRELUDE``); return what got through. The session must
    answer its next turn, and the episode's correct answer still scores 1."""
    pool = _pool(env)
    before = pool.stats()
    observation, reward, terminated, truncated, info = env.step(f"```python\n{PRELUDE}{code}\nreport()\n```")
    assert info["scoring_error"] is None, info
    assert (reward, terminated, truncated, info["execution"]) == (0.0, False, False, "ok"), observation[-2000:]
    line = next(line for line in observation.splitlines() if line.startswith("GOT THROUGH "))
    after, *_, after_info = env.step("```python\nprint(6 * 7)\n```")
    assert after_info["execution"] == "ok" and "42" in after, after[-2000:]
    assert pool.stats().workers_lost == before.workers_lost
    return json.loads(line.removeprefix("GOT THROUGH "))


@pytest.fixture
def episode(session_env):
    """A fresh CsappExact episode (a linking task: the kind a built program answers), ended after."""
    session_env.reset(seed=0, options={"categories": ["linking"]})
    yield session_env
    _, reward, terminated, _, final = session_env.step(session_env.unwrapped.reference_action())
    assert (reward, terminated, final["scoring_error"]) == (1.0, True, None)
    session_env.reset(seed=0)


def test_subprocess_compiler_on_path(episode):
    got = tool_turn(episode, f"""
for name in {COMMANDS!r}:
    if ran([name, '--version']) or ran([name, '-o', 'prog', 't.c']):
        got.append(name)
if ran(['sh', '-c', 'gcc -o prog t.c && ./prog; test $? -eq 42']) or os.system('cc -o prog t.c') == 0:
    got.append('shell')
""")
    assert got == []


def test_compiler_by_absolute_path(episode):
    got = tool_turn(episode, f"""
for path in {PROGRAMS!r} + tuple(glob.glob('/usr/lib/gcc/*/*/*')) + tuple(glob.glob('/usr/bin/*-linux-gnu-*')):
    if os.access(path, os.X_OK) and not os.path.isdir(path) or ran([path, '--version']):
        got.append(path)
if ran(['{GCC_DIR}/cc1', 't.c', '-o', 't.s']) or ran(['/usr/bin/x86_64-linux-gnu-as', '-o', 't.o', 't.s']):
    got.append('cc1/as')
""")
    assert got == []


def test_copying_the_compiler_into_the_scratch_dir(episode):
    got = tool_turn(episode, f"""
for index, path in enumerate({PROGRAMS!r}):
    copy = f'copy{{index}}'
    for how in (shutil.copyfile, os.link, os.symlink):
        try:
            how(path, copy)
        except OSError:
            continue
        if how is not os.symlink:
            got.append(f'{{how.__name__}} {{path}}')
            os.chmod(copy, 0o700)
        if ran(['./' + copy, '--version']):
            got.append(f'ran a {{how.__name__}} of {{path}}')
        os.remove(copy)
""")
    assert got == []


def test_reading_the_compiler(episode):
    got = tool_turn(episode, f"""
import mmap
for path in {PROGRAMS!r} + {LIBRARIES!r}:
    try:
        with open(path, 'rb') as handle:
            got.append(f'read {{path}}: {{len(handle.read(64))}} bytes')
    except OSError:
        pass
    try:
        fd = os.open(path, os.O_RDONLY | os.O_PATH)
        try:
            os.read(os.open(f'/proc/self/fd/{{fd}}', os.O_RDONLY), 4)
            got.append(f'reopened {{path}}')
        except OSError:
            pass
    except OSError:
        pass
""")
    assert got == []


def test_ctypes_loading_the_toolchain(episode):
    got = tool_turn(episode, f"""
import ctypes, ctypes.util
for path in {PROGRAMS!r} + {LIBRARIES!r}:
    try:
        ctypes.CDLL(path)
        got.append(path)
    except OSError:
        pass
for name in ('LLVM', 'LLVM-22', 'bfd', 'opcodes', 'lto_plugin', 'cc1'):
    found = ctypes.util.find_library(name)
    if found:
        try:
            ctypes.CDLL(found)
            got.append(found)
        except OSError:
            pass
""")
    assert got == []


def test_os_exec_of_the_compiler(episode):
    got = tool_turn(episode, f"""
for path in {PROGRAMS!r}:
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(path, [path, '--version'])
        except OSError:
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 99:
        got.append(path)
""")
    assert got == []


def test_loaders_that_read_the_compiler_themselves(episode):
    # the dynamic loader and valgrind each run a program they only need to read
    got = tool_turn(episode, f"""
for path in {PROGRAMS!r}:
    for loader in (['/lib64/ld-linux-x86-64.so.2'], ['valgrind', '-q', '--tool=none']):
        if ran([*loader, path, '--version']):
            got.append(f'{{loader[0]}} {{path}}')
""")
    assert got == []


def test_python_c_with_a_compiler_module(episode):
    got = tool_turn(episode, """
import sysconfig
cc = (sysconfig.get_config_var('CC') or 'gcc').split()
if ran([*cc, '-c', 't.c', '-o', 't.o']):
    got.append('sysconfig CC')
script = ("import numpy.distutils.ccompiler as c, numpy.distutils.misc_util\\n"
          "k = c.new_compiler(); k.customize(None) if hasattr(k, 'customize') else None\\n"
          "print(k.compile(['t.c']))\\n")
if ran([sys.executable, '-c', script]) or os.path.exists('t.o'):
    got.append('numpy.distutils')
out = subprocess.run([sys.executable, '-c', 'import ctypes.util; print(ctypes.util._findLib_gcc("c"))'],
                     capture_output=True, text=True).stdout.strip()
if out not in ('', 'None'):
    got.append('ctypes.util via gcc: ' + out)
""")
    assert got == []


def test_no_compiler_anywhere_is_readable(episode):
    # a scan of the whole image from the turn's uid: no ELF file that is a compiler, assembler or
    # linker can be read (nor run) from a tool turn
    got = tool_turn(episode, """
MARKERS = (b'GNU assembler', b'collect2', b'cc1plus', b'-plugin-opt=', b'rustc_driver', b'LLVMCreateTargetMachine',
           b'bfd_link_hash_lookup')
for top in ('/usr/bin', '/usr/sbin', '/usr/lib', '/usr/libexec', '/usr/local', '/opt'):
    for root, dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(root, name)
            try:
                with open(path, 'rb') as handle:
                    if handle.read(4) != b'\\x7fELF':
                        continue
                    body = handle.read(64 << 20)
            except OSError:
                continue
            hits = [m.decode() for m in MARKERS if m in body]
            if hits and not name.startswith(('libc.so', 'libstdc++', 'ld-linux', 'libgcc_s', 'libpython',
                                             'python3', 'valgrind', 'vgpreload', 'cachegrind', 'libasan',
                                             'libtsan', 'liblsan', 'libubsan', 'libgfortran', 'libquadmath')):
                got.append(f'{path}: {hits}')
""")
    assert got == []


def test_mechanical_solver_building_the_prompts_files(episode):
    # what the toolchain would have made mechanical: write a C file, build it, run it, read the answer
    got = tool_turn(episode, """
open('a.c', 'w').write('int x = 3;\\n')
open('b.c', 'w').write('#include <stdio.h>\\nextern int x;\\nint main(void) { printf("%d\\\\n", x); return 0; }\\n')
for build in (['gcc', 'a.c', 'b.c', '-o', 'prog'], ['cc', '-c', 'a.c'], ['g++', '-x', 'c', 'a.c', 'b.c', '-o', 'prog']):
    if ran(build):
        got.append(' '.join(build))
if os.path.exists('prog') or os.path.exists('a.o'):
    got.append('a build product exists')
""")
    assert got == []


@pytest.mark.parametrize("max_turns", [1, 5])
def test_the_prompt_says_tool_turns_have_no_toolchain(docker_available, max_turns):
    env = gym.make("CsappExact-v0", max_turns=max_turns, pool_size=1)
    try:
        prompt, _ = env.reset(seed=0, options={"categories": ["linking"]})
    finally:
        env.close()
    assert "without a C compiler, assembler or linker" in prompt, prompt


# ---- the toolchain's rightful users keep it ----


def test_host_asked_python_job_has_the_toolchain_and_a_plain_one_not(sandbox):
    code = ("import os, subprocess\nopen('t.c', 'w').write('int main(void) { return 42; }\\n')\n"
            "print(os.getgroups())\ntry:\n    subprocess.run(['gcc', '-o', 'prog', 't.c'], check=True)\n"
            "    print('exit', subprocess.run(['./prog']).returncode)\nexcept (OSError, subprocess.SubprocessError) as exc:\n"
            "    print('denied', type(exc).__name__)\n")
    plain = sandbox.run(Job("python", {"main.py": code}, limits=Limits(wall_s=30.0)))
    granted = sandbox.run(Job("python", {"main.py": code}, limits=Limits(wall_s=30.0), toolchain=True))
    assert plain.ok and "denied" in plain.stdout and "exit" not in plain.stdout, plain
    assert granted.ok and granted.stdout.splitlines() == [f"[{TOOLCHAIN_GID}]", "exit 42"], granted


def test_built_program_cannot_run_the_compiler(sandbox):
    # the compile stage has the toolchain; the program it built does not
    source = ('#include <cstdio>\n#include <unistd.h>\n#include <fcntl.h>\nint main() {\n'
              '    std::printf("%d\\n", open("/usr/lib/gcc/x86_64-linux-gnu/12/cc1", O_RDONLY) >= 0);\n'
              '    std::fflush(stdout);\n    execl("/usr/bin/x86_64-linux-gnu-gcc-12", "gcc", "--version", (char*) 0);\n'
              '    std::printf("exec failed\\n");\n    return 0;\n}\n')
    result = sandbox.run(Job("cpp", {"main.cpp": source}))
    assert result.ok and result.stdout == "0\nexec failed\n", result


def test_csapp_toolchain_jobs_still_build_and_run(sandbox):
    from gym_sysmath.tasks.csapp import toolchain

    programs = [toolchain.single_file('#include <stdio.h>\nint main(void) { printf("%d\\n", -7 / 2); return 0; }\n'),
                toolchain.Program({"a.c": "int x = 5;\n", "b.c": "extern int x;\nint main(void) { return x; }\n"},
                                  (("gcc", "-c", "a.c"), ("gcc", "-c", "b.c"), ("ld", "--version"),
                                   ("gcc", "-o", "prog", "a.o", "b.o")))]
    lease = sandbox.lease()
    try:
        first, second = toolchain.run_programs(programs, lease)
    finally:
        lease.release()
    assert (first.built, first.outputs) == (True, ("-3\n",)), first
    assert (second.built, second.exit_codes) == (True, (5,)), second


@pytest.mark.parametrize("language", ["cpp", "rust"])
def test_compgeom_builds_still_work(compgeom_envs, language):
    from tests.hostile.payloads import task_id

    env = compgeom_envs[language]
    env.reset(options={"task_id": task_id(language)})
    _, reward, _, _, info = env.step(env.unwrapped.reference_action())
    assert (reward, info["verdict"], info["scoring_error"]) == (1.0, "correct", None), info

"""Memory: allocations past the limit are a `memory_limit` (or, for the stack, a crash) and the
worker survives them."""

from __future__ import annotations

import pytest

from gym_sysmath.verdicts import Verdict
from tests.hostile.conftest import ALL_PATHS
from tests.hostile.payloads import PROBE_HIT

pytestmark = pytest.mark.docker



@ALL_PATHS
def test_steady_growth(attack, language):
    attack(language, Verdict.MEMORY_LIMIT,
           python="chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))",
           cpp=("    std::vector<char*> chunks;\n"
                "    for (;;) { char* c = new char[16 << 20]; std::memset(c, 1, 16 << 20); chunks.push_back(c); }"),
           rust="    let mut chunks: Vec<Vec<u8>> = Vec::new();\n    loop { chunks.push(vec![1u8; 16 << 20]); }")


@ALL_PATHS
def test_one_huge_allocation(attack, language):
    attack(language, Verdict.MEMORY_LIMIT,
           python="block = bytearray(64 * 1024**3)",
           cpp="    static char* volatile block;\n    block = new char[1ull << 36];\n    block[0] = 1;",
           rust="    let block = vec![1u8; 1 << 36];\n    std::hint::black_box(&block);")


@ALL_PATHS
def test_filling_dev_shm(attack, language):
    # there is no /dev/shm to fill (ipc none, read-only root): the write must fail
    attack(language, Verdict.CORRECT,
           python=("import os\ntry:\n    with open('/dev/shm/fill', 'wb') as handle:\n"
                   "        handle.write(b'x' * (256 << 20))\nexcept OSError:\n    pass\n"
                   f"else:\n    os._exit({PROBE_HIT})"),
           cpp=(f'    if (FILE* shm = std::fopen("/dev/shm/fill", "wb")) {{ std::fclose(shm); _exit({PROBE_HIT}); }}\n'
                f'    if (open("/dev/shm/sem.fill", O_CREAT | O_RDWR, 0600) >= 0) _exit({PROBE_HIT});'),
           rust=(f'    if std::fs::write("/dev/shm/fill", vec![1u8; 256 << 20]).is_ok() {{ std::process::exit({PROBE_HIT}); }}'))


@ALL_PATHS
def test_deep_recursion(attack, language):
    attack(language, Verdict.RUNTIME_ERROR,
           # Python 3.11 calls between Python functions use no C stack: recurse in C (repr)
           python="import sys\nsys.setrecursionlimit(10**8)\nnested = []\nfor _ in range(10**6):\n"
                  "    nested = [nested]\nrepr(nested)",
           cpp=("    struct Deep { static int down(int n) { volatile char pad[256]; pad[0] = char(n);"
                " return down(n + 1) + pad[0]; } };\n    Deep::down(0);"),
           rust=("    fn down(n: u64) -> u64 { let pad = std::hint::black_box([n; 32]); down(n + 1) + pad[0] }\n"
                 "    std::hint::black_box(down(0));"),
           session_status="runtime_error")

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


#: /dev/shm is the container's own 64 MiB tmpfs (multiprocessing needs it): files of 16 MiB (under
#: RLIMIT_FSIZE) until it is full; holding more than its size is a probe hit. What a job leaves
#: there goes with it (``attack`` checks the next job on the same container).
SHM_LIMIT = 64 << 20


@ALL_PATHS
def test_filling_dev_shm(attack, language):
    attack(language, Verdict.CORRECT,
           python=("import os\nheld = 0\ntry:\n    for i in range(64):\n"
                   "        with open(f'/dev/shm/fill{i}', 'wb') as handle:\n"
                   "            for _ in range(16):\n"
                   "                handle.write(b'x' * (1 << 20))\n"
                   "                handle.flush()\n"
                   "                held += 1 << 20\n"
                   f"except OSError:\n    pass\nif held > {SHM_LIMIT}:\n    os._exit({PROBE_HIT})"),
           cpp=("    std::vector<char> mib(1 << 20, 'x');\n    long held = 0;\n"
                "    for (int i = 0; i < 64; ++i) {\n"
                "        int fd = open((\"/dev/shm/fill\" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY, 0600);\n"
                "        if (fd < 0) break;\n        bool full = false;\n"
                "        for (int j = 0; j < 16; ++j) {\n"
                "            if (write(fd, mib.data(), mib.size()) != (ssize_t)mib.size()) { full = true; break; }\n"
                "            held += 1 << 20;\n        }\n        close(fd);\n        if (full) break;\n    }\n"
                f"    if (held > {SHM_LIMIT}L) _exit({PROBE_HIT});"),
           rust=("    let mut held: u64 = 0;\n    let mib = vec![1u8; 1 << 20];\n    'files: for i in 0..64 {\n"
                 "        use std::io::Write;\n"
                 "        let Ok(mut file) = std::fs::File::create(format!(\"/dev/shm/fill{i}\")) else { break };\n"
                 "        for _ in 0..16 {\n            if file.write_all(&mib).is_err() { break 'files; }\n"
                 "            held += 1 << 20;\n        }\n    }\n"
                 f"    if held > {SHM_LIMIT} {{ std::process::exit({PROBE_HIT}); }}"))


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

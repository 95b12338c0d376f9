"""The languages the sandbox compiles and runs: one table that the host and the image both read.

Standard library only: it is copied into the sandbox image beside the supervisor, and the host
imports it as ``gym_sysmath.sandbox.image.toolchains``.
"""

from __future__ import annotations

#: Where the image keeps a precompiled <bits/stdc++.h> built with exactly the C++ flags below.
PCH_DIR = "/opt/gym-sysmath/pch"

#: language -> (the source file the build reads, the build command run in the job's dir).
COMPILERS = {
    "cpp": ("main.cpp", ["g++", "-std=c++20", "-O2", "-pipe", f"-I{PCH_DIR}", "-o", "prog", "main.cpp"]),
    "rust": ("main.rs", ["rustc", "--edition", "2021", "-O", "-o", "prog", "main.rs"]),
}

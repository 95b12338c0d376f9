"""Compilers: sources that make g++ or rustc read forever, allocate without end, explode, or
flood their output end as `compile_error` within the build limits, and the next build works."""

from __future__ import annotations

import pytest

from gym_sysmath.sandbox import Job
from gym_sysmath.verdicts import Verdict
from tests.hostile.conftest import COMPILED
from tests.hostile.payloads import append, job_files

pytestmark = pytest.mark.docker


def expect_compile_error(submit, language: str, source: str) -> None:
    outcome = submit(language, source, Verdict.COMPILE_ERROR)
    assert outcome.info["compile_success"] is False


@COMPILED
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/random"])
def test_including_an_endless_device(submit, language, device):
    text = f'#include "{device}"' if language == "cpp" else f'const HOSTILE: &[u8] = include_bytes!("{device}");'
    expect_compile_error(submit, language, append(language, text))


@COMPILED
def test_huge_static_array(submit, language):
    text = ("char hostile_big[1ull << 40];  // external linkage: the compiler must keep it\n"
            "inline const int hostile_touch = (hostile_big[12345] = 1);"
            if language == "cpp" else
            "static HOSTILE_BIG: [u8; 1 << 40] = [1; 1 << 40];\n"
            "pub fn hostile_touch() -> u8 { HOSTILE_BIG[12345] }")
    expect_compile_error(submit, language, append(language, text))


def test_template_explosion(submit):
    # each level instantiates two new ones: 2^40 types unless the compiler is stopped
    text = ("template <int N, long M> struct Blow {\n"
            "    static constexpr long value = Blow<N - 1, 2 * M>::value + Blow<N - 1, 2 * M + 1>::value;\n};\n"
            "template <long M> struct Blow<0, M> { static constexpr long value = M; };\n"
            "inline long hostile_blow() { return Blow<40, 1>::value; }")
    expect_compile_error(submit, "cpp", append("cpp", text))


@COMPILED
def test_macro_explosion(submit, language):
    if language == "cpp":  # 10^10 string tokens from ten nested macros
        lines = ['#define HOSTILE0 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"']
        lines += [f"#define HOSTILE{i} " + " ".join([f"HOSTILE{i - 1}"] * 10) for i in range(1, 11)]
        text = "\n".join(lines) + "\ninline const char* hostile_blob() { return HOSTILE10; }"
    else:  # each expansion doubles its input
        text = ("macro_rules! hostile_blow {\n    () => {};\n"
                "    (x $($rest:tt)*) => { hostile_blow!($($rest)* $($rest)* y); };\n"
                "    (y $($rest:tt)*) => { hostile_blow!($($rest)* x); };\n}\n"
                "hostile_blow!(x x x x);")
    expect_compile_error(submit, language, append(language, text))


@COMPILED
def test_build_output_flood(submit, language, compgeom_envs):
    # warnings only: the source builds unless the flood is cut at the compile output cap
    if language == "cpp":  # 10^6 warnings from six nested macros
        lines = ['#define HOSTILE0 _Pragma("GCC warning \\"flood flood flood flood flood flood\\"")']
        lines += [f"#define HOSTILE{i} " + " ".join([f"HOSTILE{i - 1}"] * 10) for i in range(1, 7)]
        text = "\n".join(lines) + "\nHOSTILE6"
    else:  # 800 deprecation warnings, each with its own source line
        text = ("#[deprecated]\nfn hostile_old() {}\n#[allow(dead_code)]\nfn hostile_flood() {\n"
                + "    hostile_old();\n" * 800 + "}")
    source = append(language, text)
    submit(language, source, Verdict.COMPILE_ERROR)
    build = compgeom_envs[language].unwrapped.sandbox.run(Job(language, job_files(language, source))).compile
    assert build is not None and build.status == "compile_error" and build.stderr_truncated
    assert build.wall_s < 30, "the flood must be cut at the cap, not at the compile time limit"

"""Output: floods are cut at the cap promptly, big outputs before exit never deadlock, and
bytes that are not text never break the harness or the observation space."""

from __future__ import annotations

import pytest

from gym_sysmath.sandbox import Job
from gym_sysmath.verdicts import Verdict
from tests.hostile.conftest import ALL_PATHS, CODE_LANGUAGES

pytestmark = pytest.mark.docker

KB, MB = 1000, 1000 * 1000


@ALL_PATHS
def test_endless_printing(attack, language):
    attack(language, Verdict.OUTPUT_LIMIT,
                     python="import sys\nwhile True:\n    sys.stdout.write('spam\\n' * 1000)",
                     cpp='    for (;;) std::fputs("spam spam spam spam\\n", stdout);',
                     rust="    use std::io::Write;\n    let mut out = std::io::stdout();\n"
                          "    loop { let _ = out.write_all(b\"spam spam spam spam\\n\"); }")


@ALL_PATHS
def test_10mb_on_stderr(attack, language):
    attack(language, Verdict.OUTPUT_LIMIT,
           python="import sys\nsys.stderr.write('e' * 10_000_000)\nsys.stderr.flush()",
           cpp="    std::string flood(10000000, 'e');\n    std::fwrite(flood.data(), 1, flood.size(), stderr);",
           rust='    eprint!("{}", "e".repeat(10_000_000));')


@pytest.mark.parametrize("stream, size, expect", [
    ("stderr", 150 * KB, Verdict.CORRECT),  # past the pipe buffer, under the stderr cap: no deadlock
    ("stderr", 10 * MB, Verdict.OUTPUT_LIMIT),
    ("stdout", 150 * KB, Verdict.WRONG_ANSWER),  # junk before the records, read whole and graded
    ("stdout", 10 * MB, Verdict.OUTPUT_LIMIT),
], ids=["stderr-150KB", "stderr-10MB", "stdout-150KB", "stdout-10MB"])
@CODE_LANGUAGES
def test_output_written_before_exit(attack, language, stream, size, expect):
    fd = 1 if stream == "stdout" else 2
    attack(language, expect,
                     python=f"import os\ndata = b'x' * {size}\nwhile data:\n    data = data[os.write({fd}, data):]",
                     cpp=f"    std::string data({size}, 'x');\n    std::fwrite(data.data(), 1, data.size(), {stream});\n"
                         f"    std::fflush({stream});",
                     rust=f"    use std::io::Write;\n    let _ = std::io::{stream}().write_all(&vec![b'x'; {size}]);")


@CODE_LANGUAGES
@pytest.mark.parametrize("stream, expect", [("stdout", Verdict.WRONG_ANSWER), ("stderr", Verdict.CORRECT)])
def test_invalid_utf8_nul_bytes_and_no_trailing_newline(attack, language, stream, expect):
    fd = 1 if stream == "stdout" else 2
    junk = "\\xff\\xfe\\xc3(\\x00\\x00nul\\x00\\xed\\xa0\\x80no newline"
    attack(language, expect,
           python=f"import os\nos.write({fd}, b'{junk}')",
           cpp=f'    static const char junk[] = "{junk}";\n    write({fd}, junk, sizeof junk - 1);',
           rust=f'    use std::io::Write;\n    let _ = std::io::{stream}().write_all(b"{junk}");')


def test_undecodable_tool_output_keeps_the_observation_in_its_space(session_env):
    session_env.reset(seed=0)
    code = "import os\nos.write(1, b'\\xff\\x00\\x1b[31m\\xed\\xa0\\x80')\nos.write(2, b'\\x00\\xfe no newline')"
    try:
        observation, _reward, terminated, truncated, info = session_env.step(f"```python\n{code}\n```")
    finally:
        session_env.reset(seed=0)  # ends the episode: its container goes back to the one-container pool
    assert (info["execution"], info["scoring_error"], terminated, truncated) == ("ok", None, False, False)
    assert session_env.observation_space.contains(observation)
    assert "no newline" in observation


RAW_BYTES = {  # stdout: invalid UTF-8, a NUL, an escape sequence, and no trailing newline
    "python": ("main.py", "import os\nos.write(1, b'ok\\xff\\x00\\x1b[0m\\xc3(end')"),
    "cpp": ("main.cpp", "#include <unistd.h>\nstatic const char out[] = \"ok\\xff\\0\\x1b[0m\\xc3(end\";\n"
                        "int main() { write(1, out, sizeof out - 1); }"),
    "rust": ("main.rs", "use std::io::Write;\n"
                        "fn main() { std::io::stdout().write_all(b\"ok\\xff\\x00\\x1b[0m\\xc3(end\").unwrap(); }"),
}


@CODE_LANGUAGES
def test_raw_bytes_come_back_exactly_with_only_invalid_utf8_escaped(compgeom_envs, language):
    name, source = RAW_BYTES[language]
    result = compgeom_envs[language].unwrapped.sandbox.run(Job(language, {name: source}))
    assert (result.status, result.stdout) == ("ok", "ok\\xff\x00\x1b[0m\\xc3(end")

"""The task statement: what to implement, how it is built and graded, the contract, the starter."""

from __future__ import annotations

from .languages import Language

_HARNESS = {
    "cpp": "`main.cpp` does `#include \"candidate.hpp\"`, so your file must stay header-only (define "
           "functions `inline`)",
    "rust": "`main.rs` declares `mod candidate;`, so your file is a module (no `main`)",
    "python": "`main.py` does `import candidate`",
}

PROMPT = """\
Implement the computational-geometry primitive `{function}` in {title}.

Your file is `{candidate_file}`. A test harness sits next to it: {harness}. It reads the test \
inputs and calls `{function}` once per case. {build}Keep every type, field and enumerator of the \
starter and the function's signature exactly as they are; add helper functions as you like. Use the \
standard library only. Never write to standard output: the harness owns it, and any stray output \
fails the whole run (write debugging output to standard error).

To test, reply with the complete `{candidate_file}` in one ```{fence} code block: it is built and \
run on the public cases, and you see any build errors and the failing cases. To submit, reply \
without a code block: your last code is graded on hidden cases, and the reward is 1 only when it \
builds and passes every one of them.

{contract}
## Starter: `{candidate_file}`

```{fence}
{starter}```
"""


def build_prompt(function: str, language: Language, contract: str, starter: str) -> str:
    build = f"It is built with `{language.build}` and run as `{language.run}`. " if language.build else \
        f"It is run as `{language.run}` (Python 3.11). "
    return PROMPT.format(function=function, title=language.title, candidate_file=language.candidate_file,
                         harness=_HARNESS[language.name], build=build, fence=language.fence,
                         contract=contract.rstrip("\n") + "\n", starter=starter)

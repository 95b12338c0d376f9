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

{protocol}

{contract}
## Starter: `{candidate_file}`

```{fence}
{starter}```
"""


MULTI_TURN = """\
To test, reply with the complete `{candidate_file}` in one ```{fence} code block: it is built and \
run on the public cases, and you see any build errors, the failing cases and your program's \
standard error. You have {max_turns} replies. To submit, reply without a code block: your last \
code is graded on hidden cases, and the reward is 1 only when it builds and passes every one of \
them. On your last reply, a code block is submitted as it is."""

MULTI_TURN_TOOL = """\
To test, call the `run_code` tool with the complete `{candidate_file}` as its `code`: it is built and \
run on the public cases, and it returns any build errors, the failing cases and your program's \
standard error. You may call it up to {calls} times. To submit, reply without a tool call: the last \
code you ran is graded on hidden cases (a ```{fence} code block in that reply is submitted instead), \
and the reward is 1 only when it builds and passes every one of them."""

SINGLE_TURN = """\
This is your only reply: nothing is run before grading. Reply with the complete `{candidate_file}` \
in one ```{fence} code block (if you show several, the last one counts); it is graded on hidden \
cases, and the reward is 1 only when it builds and passes every one of them."""


def protocol_paragraph(language: Language, max_turns: int, code_via: str = "fence") -> str:
    """How to test and submit, for an episode of ``max_turns`` replies whose tests run from a
    code block (``code_via="fence"``) or through the ``run_code`` tool (``"tool"``)."""
    template = SINGLE_TURN if max_turns == 1 else MULTI_TURN_TOOL if code_via == "tool" else MULTI_TURN
    return template.format(candidate_file=language.candidate_file, fence=language.fence, max_turns=max_turns,
                           calls=max_turns - 1)


def build_prompt(function: str, language: Language, contract: str, starter: str, max_turns: int = 8,
                 code_via: str = "fence") -> str:
    build = f"It is built with `{language.build}` and run as `{language.run}`. " if language.build else \
        f"It is run as `{language.run}` (Python 3.11). "
    protocol = protocol_paragraph(language, max_turns, code_via)
    return PROMPT.format(function=function, title=language.title, candidate_file=language.candidate_file,
                         harness=_HARNESS[language.name], build=build, fence=language.fence,
                         protocol=protocol, contract=contract.rstrip("\n") + "\n", starter=starter)

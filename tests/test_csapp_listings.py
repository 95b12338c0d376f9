"""What the machine and linking prompts show is faithful to what the toolchain did (issue 22).

Machine prompts show gcc's assembly with bookkeeping directives left out; the checks here read
the raw ``gcc -S`` text compiled.json recorded and the listing the prompt shows, apart from the
filter (``assembly.trim_assembly``), and require that every shown line sits in the section it
sits in the raw text (a jump table in .rodata, then ``.text`` where the code resumes), that
nothing that computes is dropped, and that the directives the prompt says are left out are. The
linking prompt of ``common_overwrite`` must state the layout its key depends on, and the build
must have confirmed it. No Docker: everything comes from compiled.json.
"""

from __future__ import annotations

import re

import pytest

from gym_sysmath.tasks.csapp import compiled, linking
from gym_sysmath.tasks.csapp.assembly import trim_assembly
from gym_sysmath.tasks.csapp.catalog import EVAL_SET, TEMPLATES
from gym_sysmath.tasks.csapp.template import BuildError, instantiate
from gym_sysmath.tasks.csapp.toolchain import Program

MACHINE = sorted(name for name, t in TEMPLATES.items() if t.category == "machine")


def _instances(name: str) -> list[tuple[str, dict]]:
    evals = [(task_id, params) for task_id, n, params in EVAL_SET if n == name]
    pool = [(f"pool/{name}/{i}", params) for i, params in enumerate(compiled.pool(name))]
    assert evals or pool, name
    return evals + pool


def _cases(names: list[str]) -> list[tuple[str, str, dict]]:
    return [(name, task_id, params) for name in names for task_id, params in _instances(name)]


def _shown_listing(instruction: str) -> list[str]:
    """The assembly the prompt shows: the block after the 'left out:' line."""
    after = instruction.split("left out:\n\n", 1)[1]
    return after.split("\n\n", 1)[0].split("\n")


# --- an independent reading of sections --------------------------------------------------------

_SWITCH = re.compile(r"^\s*\.(text|data|bss|section)\b\s*([^\s,]*)")
_STACKED = re.compile(r"^\s*\.(previous|pushsection|popsection)\b")


def _section_switch(line: str) -> str | None:
    """The section a plain section directive switches to (None for any other line)."""
    found = _SWITCH.match(line)
    if found is None:
        return None
    return "." + found.group(1) if found.group(1) != "section" else found.group(2)


def _is_code(line: str) -> bool:
    """An instruction: indented, not a directive."""
    return line.startswith("\t") and not line.strip().startswith(".")


def _dropped_as_bookkeeping(line: str) -> bool:
    s = line.strip()
    return s.startswith((".cfi_", ".file", ".ident", ".globl", ".type", ".size", ".p2align", ".align",
                         ".balign", ".LFB", ".LFE"))


def _check_listing(raw: str, shown: list[str], what: str) -> None:
    raw_lines = [line for line in raw.splitlines() if line.strip()]
    assert not any(_STACKED.match(line) for line in raw_lines), f"{what}: extend this test's section reader"
    # every shown line is a raw line, in order, and lies in the same section in both texts
    raw_section, shown_section, at = ".text", ".text", 0
    for line in shown:
        while at < len(raw_lines) and raw_lines[at] != line:
            raw_section = _section_switch(raw_lines[at]) or raw_section
            at += 1
        assert at < len(raw_lines), f"{what}: shown line {line!r} is not in gcc's output (in order)"
        raw_section = _section_switch(raw_lines[at]) or raw_section
        shown_section = _section_switch(line) or shown_section
        assert shown_section == raw_section, (
            f"{what}: {line!r} reads as in {shown_section} but gcc put it in {raw_section}")
        at += 1
    # nothing that computes is dropped: every instruction, label and data line of gcc's output is shown
    kept = set(shown)
    for line in raw_lines:
        if _section_switch(line) is None and not _dropped_as_bookkeeping(line):
            assert line in kept, f"{what}: gcc's line {line!r} is not shown"
    # what the prompt says is left out is
    assert not any(_dropped_as_bookkeeping(line) for line in shown), what
    # no shown line refers to a local label the listing dropped
    defined = {line[:-1] for line in shown if line.endswith(":")}
    for line in shown:
        for label in re.findall(r"\.L\w+", line):
            assert label in defined, f"{what}: {line!r} refers to {label}, which is not shown"


def _check_tables_return_to_text(shown: list[str], what: str) -> None:
    """After a table in another section, a .text line comes before the code resumes."""
    section = ".text"
    for line in shown:
        section = _section_switch(line) or section
        if _is_code(line):
            assert section == ".text", f"{what}: code line {line!r} reads as in {section}"


def _id(value: object) -> str | None:
    return value if isinstance(value, str) else None


@pytest.mark.parametrize(("name", "task_id", "params"), _cases(MACHINE), ids=_id)
def test_machine_listing_keeps_every_section_change(name, task_id, params):
    template = TEMPLATES[name]
    raw = compiled.outputs(compiled.FAMILIES[name].program(params)).shown
    assert raw, task_id
    shown = _shown_listing(instantiate(template, params, task_id).instruction)
    _check_listing(raw, shown, task_id)
    _check_tables_return_to_text(shown, task_id)


def test_the_switch_listing_shows_its_table_in_rodata_and_the_code_in_text():
    task_id, name, params = next(e for e in EVAL_SET if e[1] == "switch_fallthrough")
    shown = _shown_listing(instantiate(TEMPLATES[name], params, task_id).instruction)
    rodata = next(i for i, line in enumerate(shown) if line.split() == [".section", ".rodata"])
    back = next(i for i, line in enumerate(shown) if i > rodata and _section_switch(line) == ".text")
    assert all(not _is_code(line) for line in shown[rodata:back])
    assert shown[back + 1].endswith(":") and any(_is_code(line) for line in shown[back:])
    assert ".align" not in "\n".join(shown)


# --- the filter itself, on listings gcc may emit for other code ----------------------------------------


def test_trim_keeps_a_cold_section_and_its_return():
    raw = ("\t.file\t\"f.c\"\n\t.text\n\t.globl\tf\n\t.type\tf, @function\nf:\n.LFB0:\n\t.cfi_startproc\n"
           "\ttestl\t%edi, %edi\n\tjs\t.L5\n\tmovl\t$1, %eax\n\tret\n\t.cfi_endproc\n"
           "\t.section\t.text.unlikely\n\t.cfi_startproc\n.L5:\n\tcall\tabort\n\t.cfi_endproc\n"
           "\t.text\n\t.size\tf, .-f\n\t.section\t.rodata.cst8,\"aM\",@progbits,8\n\t.align 8\n.LC0:\n"
           "\t.long\t0\n\t.ident\t\"GCC\"\n\t.section\t.note.GNU-stack,\"\",@progbits\n")
    shown = trim_assembly(raw).split("\n")
    assert shown == ["f:", "\ttestl\t%edi, %edi", "\tjs\t.L5", "\tmovl\t$1, %eax", "\tret",
                     "\t.section\t.text.unlikely", ".L5:", "\tcall\tabort",
                     "\t.text", "\t.section\t.rodata.cst8,\"aM\",@progbits,8", ".LC0:", "\t.long\t0"]
    _check_listing(raw, shown, "synthetic")


def test_trim_keeps_previous_and_pushsection():
    raw = ("\t.text\nf:\n\tjmp\t*.L2(,%rdi,8)\n\t.pushsection\t.rodata\n.L2:\n\t.quad\t.L3\n\t.popsection\n"
           ".L3:\n\tret\n\t.section\t.data\n.LX:\n\t.long\t1\n\t.previous\n\tnop\n")
    assert trim_assembly(raw).split("\n") == [
        "f:", "\tjmp\t*.L2(,%rdi,8)", "\t.pushsection\t.rodata", ".L2:", "\t.quad\t.L3", "\t.popsection",
        ".L3:", "\tret", "\t.section\t.data", ".LX:", "\t.long\t1", "\t.previous", "\tnop"]


def test_trim_drops_only_section_directives_that_change_nothing():
    raw = "\t.text\n\t.text\nf:\n\tret\n\t.section\t.note.GNU-stack,\"\",@progbits\n"
    assert trim_assembly(raw) == "f:\n\tret"


# --- linking: the layout common_overwrite's key depends on is stated, and the build confirms it ---------


@pytest.mark.parametrize(("name", "task_id", "params"), _cases(["common_overwrite"]), ids=_id)
def test_common_overwrite_states_the_layout_its_key_depends_on(name, task_id, params):
    task = instantiate(TEMPLATES[name], params, task_id)
    assert "in prog, y's address is x's address plus 2" in task.instruction, task_id
    assert "source order" in task.instruction and ".data holds x and then y" in task.instruction
    # the prompt's a.c defines x, then y, both short: what "source order" refers to
    a_c = task.instruction.split("/* a.c */\n", 1)[1].split("/* b.c */", 1)[0]
    assert a_c.index(f"short x = {params['x']};") < a_c.index(f"short y = {params['y']};")
    # the build ran the unshown check of that layout after the link, and it held
    program = compiled.FAMILIES[name].program(params)
    assert program.steps[-1][:2] == ("sh", "-c") and "nm prog" in program.steps[-1][2]
    assert " ".join(program.steps[-1]) not in task.instruction
    ran = compiled.outputs(program)
    assert ran.built and ran.failed_step is None and ran.exit_codes == (0,), task_id
    # and the key is the one the stated layout gives: y holds the high half of the int store
    v = params["v"] & 0xFFFFFFFF
    assert task.answer[1] == ((v >> 16) ^ 0x8000) - 0x8000


def test_tentative_definitions_state_gcc_12s_default():
    for task_id, params in _instances("tentative_definitions"):
        instruction = instantiate(TEMPLATES["tentative_definitions"], params, task_id).instruction
        assert "gcc 12 compiles with -fno-common unless -fcommon is given." in instruction, task_id


def test_a_stated_fact_the_build_contradicts_refuses_the_instance():
    _, name, params = next(e for e in EVAL_SET if e[1] == "common_overwrite")
    program: Program = compiled.FAMILIES[name].program(params)
    record = {"built": False, "failed_step": len(program.steps) - 1, "shown": None, "outputs": [], "exit_codes": []}
    with compiled.recorded({program.key: record}), pytest.raises(BuildError, match="contradicts"):
        TEMPLATES[name].reference(params)


def test_a_step_before_the_link_failing_is_a_build_error_not_a_link_failure():
    _, name, params = next(e for e in EVAL_SET if e[1] == "tentative_definitions")
    program = compiled.FAMILIES[name].program(params)
    record = {"built": False, "failed_step": 0, "shown": None, "outputs": [], "exit_codes": []}
    with compiled.recorded({program.key: record}), pytest.raises(BuildError, match="before the link"):
        TEMPLATES[name].reference(params)
    link_failed = {**record, "failed_step": len(program.steps) - 1}
    with compiled.recorded({program.key: link_failed}):
        assert TEMPLATES[name].reference(params) == [False, 0]


def test_every_linking_template_shows_every_step_but_its_confirmations():
    for name, template in TEMPLATES.items():
        if template.category != "linking":
            continue
        for task_id, params in _instances(name)[:3]:
            instruction = instantiate(template, params, task_id).instruction
            for step in compiled.FAMILIES[name].program(params).steps:
                shown = "$ " + " ".join(step) in instruction
                assert shown == (step[0] != "sh"), (task_id, step)
    assert linking.LAYOUT_STATED.endswith("y's address is x's address plus 2.")

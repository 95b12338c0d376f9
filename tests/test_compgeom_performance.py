"""CompGeom's performance score is an instruction count: the same submission gets the same score,
a slower one a lower score, and a submission that games the counted run gets no bonus.

The counted runs need the sandbox image's performance variant (``gym-sysmath sandbox build
--with-performance``); without it those tests skip, saying so, and what still runs is the score's
arithmetic, the refusals (measure_performance on the default image, a counted job there) and
the Dockerfile's split into the two targets. CI builds the default image only
(docs/sandbox-image.md)."""

from __future__ import annotations

import re

import gymnasium as gym
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gym_sysmath  # noqa: F401  (registers the ids)
from gym_sysmath.envs.compgeom import _REFERENCE_COUNTS
from gym_sysmath.sandbox import Job, Limits, Sandbox, SandboxError, SandboxUnavailableError, daemon
from gym_sysmath.tasks import compgeom
from gym_sysmath.tasks.compgeom.performance import performance_score

PRIMITIVE = "line2_line2"  # the fewest hidden cases: the quickest counted runs


def slower(language: str, source: str, extra_calls: int) -> str:
    """``source`` whose primitive also computes its answer ``extra_calls`` more times per call
    (kept from being optimised away), so it does the same work and more of it."""
    name = PRIMITIVE
    if language == "python":
        return f"{source}\n_fast = {name}\ndef {name}(*args):\n    for _ in range({extra_calls}):\n" \
               f"        _fast(*args)\n    return _fast(*args)\n"
    fast = source.replace(f"{name}(", f"{name}_fast(", 1)
    if language == "cpp":
        return fast + (f"\nnamespace compgeom {{\ntemplate <class... A> auto {name}(const A&... args) {{\n"
                       f"    for (int i = 0; i < {extra_calls}; ++i) {{ auto r = {name}_fast(args...); "
                       f"asm volatile(\"\" : : \"r\"(&r) : \"memory\"); }}\n    return {name}_fast(args...);\n}}\n}}\n")
    params, returns = re.search(rf"pub fn {name}_fast\((.*?)\) -> (\w+)", fast).groups()
    names = ", ".join(p.split(":")[0].strip() for p in params.split(","))
    return fast + (f"\npub fn {name}({params}) -> {returns} {{\n    for _ in 0..{extra_calls} {{ "
                   f"std::hint::black_box({name}_fast({names})); }}\n    {name}_fast({names})\n}}\n")


@pytest.fixture(scope="module")
def env(instruction_counter):
    environment = gym.make("CompGeom-v0", primitives=[PRIMITIVE], max_turns=1, measure_performance=True)
    yield environment
    environment.close()


def submit(env, language: str, source: str) -> tuple[float, dict]:
    env.reset(options={"task_id": f"{PRIMITIVE}/{language}"})
    _, reward, _, _, info = env.step(f"```{language}\n{source}\n```")
    return reward, info


def reference(language: str) -> str:
    return compgeom.reference_solution(compgeom.load_tasks([PRIMITIVE], [language])[0])


def test_performance_score_is_the_reference_count_over_the_candidates_above_the_baseline():
    assert performance_score(reference=300, candidate=300, baseline=100) == 1.0
    assert performance_score(reference=300, candidate=500, baseline=100) == 0.5
    assert performance_score(reference=300, candidate=150, baseline=100) == 1.0  # capped
    with pytest.raises(ValueError):
        performance_score(reference=100, candidate=500, baseline=100)


COUNT = st.integers(min_value=0, max_value=10**12)


@given(baseline=COUNT, work=st.integers(1, 10**12), first=st.integers(1, 10**13), second=st.integers(1, 10**13),
       idle=COUNT)
def test_more_instructions_never_score_higher_and_at_most_the_references_score_one(baseline, work, first, second,
                                                                                  idle):
    # first and second: candidates' work above the baseline; idle: a count at or below it
    reference = baseline + work
    fewer, more = sorted((first, second))
    scores = [performance_score(reference, baseline + extra, baseline) for extra in (fewer, more)]
    assert 0.0 <= scores[1] <= scores[0] <= 1.0
    assert scores[0] == 1.0 if fewer <= work else scores[0] == round(work / fewer, 4)
    assert performance_score(reference, min(idle, baseline), baseline) == 0.0  # the starter doing nothing


@pytest.mark.parametrize("option", [{"measure_performance": True}])
def test_performance_on_the_process_backend_is_refused_up_front(option):
    # There every counted run is a SetupError: every correct answer would be a scoring_error.
    with pytest.raises(ValueError, match="sandbox='docker'"):
        gym.make("CompGeom-v0", sandbox="process", **option)


@pytest.mark.docker
@pytest.mark.parametrize("language", compgeom.LANGUAGES)
def test_same_submission_gets_the_same_score_twice_and_a_slower_one_less(env, language):
    candidate = slower(language, reference(language), extra_calls=10)
    (reward, first), (_, second) = submit(env, language, candidate), submit(env, language, candidate)
    assert (first["verdict"], first["scoring_error"]) == ("correct", None), first
    assert first["performance_score"] == second["performance_score"] < 0.9
    assert reward == 1.0  # reported, not rewarded (envs/compgeom.py PERFORMANCE_REWARD_REFUSED)
    _, own = submit(env, language, reference(language))
    assert own["performance_score"] == 1.0


@pytest.mark.docker
def test_a_python_candidates_comments_cost_it_nothing(env):
    # Its modules are compiled to bytecode before the counted run, as a C++ build is not counted.
    commented = reference("python") + "".join(f"\n# a long comment on the geometry, line {i}" for i in range(400))
    _, info = submit(env, "python", commented)
    assert (info["verdict"], info["performance_score"]) == ("correct", 1.0), info


#: Python, no machine code (the red team's probe): at exit, under the counter only, lower
#: cachegrind's own counters to TARGET. The tool is a static, non-PIE binary with its symbols:
#: its ELF symbol table gives ``CC_table``, an OSet (AVL tree, root at +64) of LineCCs whose Ir
#: count is at node + 48; ctypes reads and writes them in place.
LOWERS_THE_COUNTERS = """
import os as _os
if 'vgpreload' in _os.environ.get('LD_PRELOAD', ''):
    import atexit as _atexit, ctypes as _ctypes, struct as _struct, sys as _sys
    def _symbol(path, wanted):
        data = open(path, 'rb').read()
        shoff, = _struct.unpack_from('<Q', data, 0x28)
        shentsize, shnum = _struct.unpack_from('<HH', data, 0x3A)
        sections = [_struct.unpack_from('<IIQQQQIIQQ', data, shoff + i * shentsize) for i in range(shnum)]
        symtab = next(s for s in sections if s[1] == 2)
        strings = sections[symtab[6]][4]
        for at in range(symtab[4], symtab[4] + symtab[5], symtab[9]):
            name, _, _, _, value, _ = _struct.unpack_from('<IBBHQQ', data, at)
            if data[strings + name:data.index(b'\\0', strings + name)] == wanted:
                return value
    _TABLE = _symbol('/usr/libexec/valgrind/cachegrind-amd64-linux', b'CC_table')
    def _lower():
        _sys.stdout.flush()
        U64 = _ctypes.c_uint64
        stack, counters = [U64.from_address(U64.from_address(_TABLE).value + 64).value], []
        while stack:
            node = stack.pop()
            if node:
                counters.append(node + 48)
                stack += [U64.from_address(node).value, U64.from_address(node + 8).value]
        counts = [U64.from_address(a).value for a in counters]
        cut, plan = sum(counts) - TARGET, []
        for count, a in sorted(zip(counts, counters), reverse=True):  # planned first: writing is cheap
            if cut <= 0:
                break
            plan.append((a, count - min(count, cut)))
            cut -= count
        for a, value in plan:
            U64.from_address(a).value = value
        _os._exit(0)
    _atexit.register(_lower)
"""


@pytest.mark.docker
@pytest.mark.xfail(strict=True, reason="a counted program shares its process with valgrind and can lower "
                   "cachegrind's counters in memory (SECURITY.md, 'Valgrind is not a boundary'): the reason "
                   "performance_weight > 0 is refused; if this ever passes, the counter is out of reach")
def test_lowering_cachegrinds_own_counters_from_python_is_not_free(env):
    submit(env, "python", reference("python"))  # the reference's and the starter's counts, taken once
    reference_count, starter = _REFERENCE_COUNTS[(env.unwrapped.sandbox_backend, f"{PRIMITIVE}/python", "eval")]
    target = starter + (reference_count - starter) // 4
    source = slower("python", reference("python"), extra_calls=100) + LOWERS_THE_COUNTERS.replace("TARGET", str(target))
    _, info = submit(env, "python", source)
    assert (info["verdict"], info["scoring_error"]) == ("correct", None), info
    assert info["performance_score"] < 0.5  # 100 times the reference's work


def test_the_train_splits_counted_inputs_are_a_fixed_train_draw_never_the_eval_hidden_cases():
    # Graded eval inputs in a train step would tell which eval cases a candidate gets wrong.
    import json

    def inputs(cases):
        return {json.dumps(case.input, sort_keys=True) for case in cases}

    task = compgeom.load_tasks([PRIMITIVE], ["cpp"])[0]
    first, second = (gym.make("CompGeom-v0", split="train", primitives=[PRIMITIVE], languages=["cpp"],
                              measure_performance=True) for _ in range(2))
    try:
        timing = first.unwrapped._cases(task, "timing")
        assert timing and not inputs(timing) & inputs(task.hidden_cases)
        assert inputs(timing) == inputs(second.unwrapped._cases(task, "timing"))  # the same every episode
    finally:
        first.close()
        second.close()


def test_a_performance_weight_is_refused_while_the_count_can_be_forged():
    with pytest.raises(ValueError, match="can be forged"):
        gym.make("CompGeom-v0", performance_weight=0.5)


def test_only_a_sigkill_far_below_the_memory_limit_is_the_harness_failing():
    from gym_sysmath.envs.compgeom import PERF_LIMITS, _killed_by_someone_else
    from gym_sysmath.sandbox import ExecutionResult, ExecutionStatus

    def killed(peak: int) -> ExecutionResult:
        return ExecutionResult(ExecutionStatus.MEMORY_LIMIT, signal=9, peak_memory_bytes=peak)

    assert _killed_by_someone_else(killed(50 * 1024**2))
    assert not _killed_by_someone_else(killed(PERF_LIMITS.memory_bytes - 1))  # its own allocations
    assert not _killed_by_someone_else(ExecutionResult(ExecutionStatus.MEMORY_LIMIT, signal=None, peak_memory_bytes=0))
    assert not _killed_by_someone_else(ExecutionResult(ExecutionStatus.TIMEOUT, signal=9))


#: Python candidates (the reference with an attack at import) that pass the hidden run natively.
UNDER_COUNTER = "'vgpreload' in __import__('os').environ.get('LD_PRELOAD', '')"
GAMES = {
    # Skipped work: under the counter, answer every case "none" at once.
    "skips_work_under_the_counter": f"""
if {UNDER_COUNTER}:
    def {PRIMITIVE}(line0, line1):
        return Intersection(Kind.NONE, [], [], [])
""",
    # Detached work: a forked child would compute outside the counted process (fork is refused).
    "hands_work_to_a_forked_child": """
import os as _os
if _os.fork() == 0:
    _os._exit(0)
""",
    # Uncounted work: re-exec natively, then leave a forged count (exec is refused).
    "execs_an_uncounted_copy_that_forges_the_count": f"""
import os as _os, sys as _sys
if _os.environ.get("FORGE"):
    import atexit as _atexit
    _atexit.register(lambda: open(".instructions", "w").write("summary: 1\\n"))
elif {UNDER_COUNTER}:
    _os.execve(_sys.executable, [_sys.executable, "main.py"], {{**_os.environ, "FORGE": "1"}})
""",
    # A counted run that kills itself would be retried and then taken for the harness failing
    # (a scoring_error, so no low score): the counted process may not send SIGKILL at all.
    "sigkills_itself_under_the_counter": f"""
if {UNDER_COUNTER}:
    import os as _os, signal as _signal
    try:
        _os.kill(_os.getpid(), _signal.SIGKILL)
    except PermissionError:
        pass
    def {PRIMITIVE}(line0, line1):
        return Intersection(Kind.NONE, [], [], [])
""",
    # A forged count the counter cannot overwrite (the file is refused).
    "plants_a_read_only_count": """
import os as _os
open(".instructions", "w").write("summary: 1\\n")
_os.chmod(".instructions", 0o400)
""",
}


@pytest.mark.docker
@pytest.mark.parametrize("game", GAMES)
def test_gaming_the_counted_run_gets_no_bonus(env, game):
    reward, info = submit(env, "python", reference("python") + GAMES[game])
    assert (info["verdict"], info["scoring_error"]) == ("correct", None), info
    assert (info["performance_score"], reward) == (0.0, 1.0)


#: C++ whose primitive does its (correct) work 2,000 times over, in a function valgrind runs
#: natively through the client request VG_USERREQ__CLIENT_CALL1 (0x1102, behind the magic
#: instruction preamble), so outside the count. The native function touches no malloc (it runs
#: on valgrind's thread state): the work is on a plain struct.
CLIENT_CALL_CPP = r"""
namespace compgeom {
struct Pod { double in[8]; double t0, t1, x, y; int kind; };
inline void pod_kernel(Pod* p) {
    for (int rep = 0; rep < 2000; ++rep) {
        volatile double* v = p->in;
        double d0x = v[2], d0y = v[3], d1x = v[6], d1y = v[7];
        if ((d0x == 0 && d0y == 0) || (d1x == 0 && d1y == 0)) { p->kind = 0; continue; }
        double qx = v[4] - v[0], qy = v[5] - v[1];
        double den = d0x * d1y - d0y * d1x;
        if (den != 0) {
            p->t0 = (qx * d1y - qy * d1x) / den; p->t1 = (qx * d0y - qy * d0x) / den;
            p->x = v[0] + p->t0 * d0x; p->y = v[1] + p->t0 * d0y; p->kind = 2;
        } else p->kind = (qx * d0y - qy * d0x != 0) ? 1 : 3;
    }
}
inline unsigned long pod_native(unsigned long, unsigned long arg) { pod_kernel((Pod*)arg); return 1; }
inline Intersection line2_line2(const Line2& a, const Line2& b) {
    Pod p{{a.origin.x, a.origin.y, a.direction.x, a.direction.y, b.origin.x, b.origin.y, b.direction.x, b.direction.y}};
    volatile unsigned long request[6] = {0x1102, (unsigned long)&pod_native, (unsigned long)&p, 0, 0, 0};
    unsigned long done = 0;
    __asm__ volatile("rolq $3,%%rdi; rolq $13,%%rdi; rolq $61,%%rdi; rolq $51,%%rdi; xchgq %%rbx,%%rbx"
                     : "=d"(done) : "a"(&request[0]), "0"(0ul) : "cc", "memory");
    if (!done) pod_kernel(&p);
    switch (p.kind) {
        case 0: return {Kind::Invalid};
        case 1: return {Kind::None};
        case 2: return {Kind::Point, {p.t0}, {p.t1}, {Vec2{p.x, p.y}}};
        default: return {Kind::Line};
    }
}
}
"""


@pytest.mark.docker
def test_work_run_through_a_valgrind_client_call_is_not_free(env):
    # The image's cachegrind is built with cachegrind-refuses-client-requests.patch: the request
    # ends the counted run with no count, so the bonus is 0 (and the answer is still correct).
    source = reference("cpp").replace(f"{PRIMITIVE}(", f"{PRIMITIVE}_unused(", 1) + CLIENT_CALL_CPP
    _, info = submit(env, "cpp", source)
    assert (info["verdict"], info["scoring_error"]) == ("correct", None), info
    assert info["performance_score"] == 0.0  # 2,000 times the reference's work, run natively


# ---------------------------------------------------------------- the two images

def test_the_default_image_builds_nothing_of_valgrind_and_the_variant_adds_it():
    # the classic builder builds every stage up to its target: the default's must come first
    default = daemon.build_steps(daemon.DEFAULT_IMAGE)
    performance = daemon.build_steps(daemon.PERFORMANCE_IMAGE)
    assert performance[:len(default)] == default
    assert not any(word in step.instruction for step in default for word in ("valgrind", "cachegrind"))
    assert {"cachegrind", "performance"} <= {step.stage for step in performance[len(default):]}
    assert "FROM sandbox AS performance" in {step.instruction for step in performance}  # the default, and more
    assert sum(step.estimate_s for step in default) < sum(step.estimate_s for step in performance) / 2


def test_the_two_variants_never_share_a_tag_and_only_the_variants_tag_counts():
    default, performance = daemon.DEFAULT_IMAGE.tag(), daemon.PERFORMANCE_IMAGE.tag()
    assert default != performance and default == daemon.image_tag()
    assert daemon.counts_instructions(performance) and not daemon.counts_instructions(default)
    # an image under the variant's tag built as the default (or the reverse) is not current
    labelled = dict(tag=performance, expected_hash="h", present=True, actual_hash="h")
    assert daemon.ImageStatus(**labelled, variant=daemon.PERFORMANCE_IMAGE, actual_variant="performance").current
    assert not daemon.ImageStatus(**labelled, variant=daemon.PERFORMANCE_IMAGE, actual_variant="default").current
    assert not daemon.ImageStatus(**labelled, variant=daemon.PERFORMANCE_IMAGE).current


def test_each_steps_estimate_is_read_from_the_comment_above_it():
    text = ("ARG A=1\nFROM a AS one\n# estimate: 240 s\nRUN x \\\n# a comment inside\n  && y\n"
            "COPY f /f\nFROM one AS two\n# why\n# estimate: 60 s\nRUN z\n")
    steps = daemon.dockerfile_steps(text)
    assert [(s.number, s.stage, s.estimate_s) for s in steps] == [
        (1, "", 0), (2, "one", 0), (3, "one", 240), (4, "one", 0), (5, "two", 0), (6, "two", 60)]
    assert steps[2].instruction == "RUN x"


@pytest.mark.docker
def test_measure_performance_on_the_default_image_is_refused_before_a_turn_is_spent(docker_available):
    from gym_sysmath.sandbox.pool import acquire_shared, release_shared

    pool = acquire_shared("docker", pool_size=3)  # the env's own (no other test's), on the default image
    pool.image_tag = daemon.image_tag()
    environment = gym.make("CompGeom-v0", primitives=[PRIMITIVE], languages=["python"], max_turns=1,
                           measure_performance=True, pool_size=3)
    try:
        environment.reset(options={"task_id": f"{PRIMITIVE}/python"})
        with pytest.raises(SandboxUnavailableError, match="--with-performance"):
            environment.step(environment.unwrapped.reference_action())
    finally:
        environment.close()
        release_shared(pool)


@pytest.mark.docker
def test_a_counted_job_on_the_default_image_is_a_harness_error_naming_the_fix(docker_available):
    if not daemon.image_status(daemon.docker_client(timeout=10)).current:
        pytest.skip("the default image is not built (the pool runs the performance variant)")
    box = Sandbox("docker", pool_size=1)
    box.image_tag = daemon.image_tag()  # before its first container starts
    try:
        with box.lease() as lease, pytest.raises(SandboxError, match=r"no instruction counter.*--with-performance"):
            lease.run(Job("python", {"main.py": "print(1)\n"}, limits=Limits(wall_s=30.0, cpu_s=10.0),
                          count_instructions=True))
        with box.lease() as lease:  # and the next job of the pool still runs
            assert lease.run(Job("python", {"main.py": "print(1)\n"})).stdout == "1\n"
    finally:
        box.close()

"""One vocabulary (issue 27): a filter has one name, its ``gym.make`` argument, and the reset option of
that name takes the same values; a misspelt value or option is refused with one wording and one
"did you mean" wherever it is given; and no two public classes or constants of the package share a
name. The near misses are generated (every one-edit misspelling of every allowed value of every
declared filter of every registered id); the judge of "near" is written here, not the code's own.
No Docker: refusing a filter, and resetting, run nothing."""

from __future__ import annotations

import ast
import inspect
import os
import re
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import pytest
from gymnasium.envs.registration import load_env_creator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gym_sysmath
from gym_sysmath.env import SysmathEnv
from gym_sysmath.families import all_ids
from gym_sysmath.filters import TaskFilter, nearest, unknown_name

pytestmark = pytest.mark.filterwarnings("ignore:sandbox='process'")

ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"


def env_class(env_id: str) -> type[SysmathEnv]:
    entry_point = gym.spec(env_id).entry_point
    creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    assert isinstance(creator, type) and issubclass(creator, SysmathEnv), env_id
    return cast(type[SysmathEnv], creator)


FILTERS = [(env_id, entry) for env_id in all_ids() for entry in env_class(env_id).filters]
VALUES = [pytest.param(env_id, entry, choice, id=f"{env_id}-{entry.argument}-{choice}")
          for env_id, entry in FILTERS for choice in entry.choices]


def as_value(entry: TaskFilter, name: str) -> Any:
    """``name`` in the form the filter takes (a list of names, or one name)."""
    return [name] if entry.many else name


def one_edit_apart(first: str, second: str) -> bool:
    """Whether one deletion, insertion, substitution, swap of neighbours or change of case (or none)
    turns ``first`` into ``second``: the oracle of "near", independent of ``filters.nearest``."""
    a, b = first.casefold(), second.casefold()
    if a == b:
        return True
    if len(a) == len(b):
        diffs = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diffs) == 1 or (len(diffs) == 2 and diffs[1] == diffs[0] + 1
                                   and a[diffs[0]] == b[diffs[1]] and a[diffs[1]] == b[diffs[0]])
    short, long = sorted((a, b), key=len)
    return len(long) == len(short) + 1 and any(long[:i] + long[i + 1:] == short for i in range(len(long)))


@st.composite
def near_miss(draw: st.DrawFn, name: str) -> str:
    """``name`` with one typo: a letter dropped, added, changed, two neighbours swapped, or a case flip."""
    kind = draw(st.sampled_from(["drop", "add", "change", "swap", "case"] if len(name) > 1 else ["add", "change"]))
    i = draw(st.integers(0, len(name) - 1))
    char = draw(st.sampled_from(ALPHABET))
    if kind == "drop":
        return name[:i] + name[i + 1:]
    if kind == "add":
        return name[:i] + char + name[i:]
    if kind == "change":
        return name[:i] + char + name[i + 1:]
    if kind == "swap":
        i = min(i, len(name) - 2)
        return name[:i] + name[i + 1] + name[i] + name[i + 2:]
    return name[:i] + name[i].swapcase() + name[i + 1:]


_ENVS: dict[str, gym.Env] = {}


def unfiltered(env_id: str) -> gym.Env:
    """One env per id for the whole module (resets only: nothing runs)."""
    if env_id not in _ENVS:
        _ENVS[env_id] = gym.make(env_id, sandbox="process")
    return _ENVS[env_id]


@pytest.fixture(scope="module", autouse=True)
def _close_envs():
    yield
    for env in _ENVS.values():
        env.close()
    _ENVS.clear()


def refusal(call) -> str:
    with pytest.raises(ValueError) as refused:
        call()
    return str(refused.value)


# --------------------------------------------------------------------------- filter values


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_near_miss_of_any_filter_value_is_refused_alike_at_make_and_reset_with_a_did_you_mean(data):
    env_id, entry = data.draw(st.sampled_from(FILTERS), label="filter")
    meant = data.draw(st.sampled_from(entry.choices), label="meant")
    miss = data.draw(near_miss(meant).filter(lambda text: text not in entry.choices), label="miss")
    value = as_value(entry, miss)
    at_make = refusal(lambda: gym.make(env_id, sandbox="process", **{entry.argument: value}))
    at_reset = refusal(lambda: unfiltered(env_id).reset(seed=0, options={entry.argument: value}))
    assert at_make == at_reset  # one check, one wording, wherever the name is given
    match = re.fullmatch(rf"{entry.argument}: unknown {entry.key} {re.escape(repr(miss))}; did you mean '(\w+)'\? "
                         rf"\(choose from {re.escape(', '.join(entry.choices))}\)", at_make)
    assert match is not None, at_make
    assert match[1] in entry.choices and one_edit_apart(miss, match[1]), (miss, match[1])
    if entry.many:  # one bad name among good ones is refused the same way
        assert refusal(lambda: unfiltered(env_id).reset(seed=0, options={entry.argument: [meant, miss]})) == at_make


@pytest.mark.parametrize(("env_id", "entry", "choice"), VALUES)
def test_every_allowed_value_is_taken_at_make_and_as_a_reset_option(env_id, entry, choice):
    """Taken by name: the train split serves every value; on the eval split a reset option may still
    be outside what the id itself fixes (``CompGeomCpp-v0``'s language) or name an opt-in level with
    no eval task of its own, and then the refusal says so, never "unknown"."""
    gym.make(env_id, split="train", sandbox="process", **{entry.argument: as_value(entry, choice)}).close()
    try:
        _, info = unfiltered(env_id).reset(seed=0, options={entry.argument: as_value(entry, choice)})
    except ValueError as refused:
        assert "unknown" not in str(refused) and re.search(r"cannot widen|no \w+ eval task passes", str(refused))
    else:
        assert info[entry.key] == choice


# --------------------------------------------------------------------------- reset option keys


OPTIONS = [(env_id, option) for env_id in all_ids() for option in env_class(env_id).reset_options]


@pytest.mark.parametrize("env_id", all_ids())
def test_the_reset_options_are_task_id_and_the_filters_own_names(env_id):
    cls = env_class(env_id)
    assert cls.reset_options == ("task_id", *(entry.argument for entry in cls.filters))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_near_miss_of_a_reset_option_is_refused_with_a_did_you_mean(data):
    env_id, option = data.draw(st.sampled_from(OPTIONS), label="option")
    options = env_class(env_id).reset_options
    miss = data.draw(near_miss(option).filter(lambda text: text not in options), label="miss")
    message = refusal(lambda: unfiltered(env_id).reset(seed=0, options={miss: None}))
    match = re.fullmatch(rf"{env_class(env_id).__name__}: unknown reset option {re.escape(repr(miss))}; "
                         rf"did you mean '(\w+)'\? \(choose from {re.escape(', '.join(options))}\)", message)
    assert match is not None, message
    assert match[1] in options and one_edit_apart(miss, match[1])


ARGUMENTS = [(env_id, name) for env_id in all_ids() for name in inspect.signature(env_class(env_id)).parameters
             if len(name) > 3]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_near_miss_of_a_make_argument_is_refused_with_a_did_you_mean(data):
    """``gym.make(id, dificulty="easy")``: Python's TypeError, naming the argument it was close to."""
    env_id, argument = data.draw(st.sampled_from(ARGUMENTS), label="argument")
    accepted = inspect.signature(env_class(env_id)).parameters
    miss = data.draw(near_miss(argument).filter(lambda text: text not in accepted and text.isidentifier()),
                     label="miss")
    with pytest.raises(TypeError) as refused:
        gym.make(env_id, **{miss: None})
    match = re.search(rf"{env_class(env_id).__name__}: unknown argument {re.escape(repr(miss))}; "
                      rf"did you mean '(\w+)'\?", str(refused.value))
    assert match is not None, str(refused.value)
    assert match[1] in accepted and one_edit_apart(miss, match[1])


@pytest.mark.parametrize(("env_id", "entry"), [(env_id, entry) for env_id, entry in FILTERS
                                               if entry.key != entry.argument])
def test_the_info_field_name_as_a_reset_option_points_to_the_filter(env_id, entry):
    """``options={"primitive": ...}`` (the ``info`` field's singular name) is not a second spelling:
    it is refused, naming the one that is."""
    message = refusal(lambda: unfiltered(env_id).reset(seed=0, options={entry.key: entry.choices[0]}))
    assert f"unknown reset option {entry.key!r}; did you mean {entry.argument!r}?" in message


# --------------------------------------------------------------------------- the refusal itself


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(ALPHABET, min_size=1, max_size=12), min_size=1, max_size=8, unique=True),
       st.text(max_size=14))
def test_the_refusal_names_the_value_a_close_known_name_and_all_of_them(known, value):
    if value in known:
        return
    message = str(unknown_name("thing", value, known, where="things"))
    close = nearest(value, known)
    assert message.startswith(f"things: unknown thing {value!r}")
    assert message.endswith(f"(choose from {', '.join(known)})")
    assert ("did you mean" in message) == (close is not None)
    assert close is None or close in known
    near = [name for name in known if one_edit_apart(value, name)]
    if near:  # a one-edit typo always gets a suggestion, and it is one of the nearest
        assert close is not None and one_edit_apart(value, close), (value, near, close)


# --------------------------------------------------------------------------- one name, one thing


PACKAGE = Path(gym_sysmath.__file__).resolve().parent

#: Constants that several modules define on purpose, each the same role in its own module (a
#: module of a kind declares it, another collects it). A class is never here.
SAME_ROLE = {
    "TEMPLATES": "each csapp category module's templates; catalog.TEMPLATES, all of them by name",
    "LEVELS": "a family's difficulty levels (tasks.csapp, tasks.linalg)",
    "VARIANTS": "a family's eval variants per cell of its grid (tasks.compgeom.cases, tasks.linalg.problemfile)",
    "BASE_SEED": "the seed a family's generated corpus is drawn from",
    "COMMAND": "the command that regenerates a generated file (the header it writes)",
    "GENERATED_BY": "the header of one generated csapp data file",
    "FORMAT": "the format version of one generated csapp data file",
    "SOURCE_FILE": "the committed data file a csapp build module writes and checks",
    "C_PRELUDE": "a csapp program category's C prelude (processes, concurrency)",
    "STATED": "what a csapp program category's prompt states its programs guarantee",
    "VOID_LINE": "the line a csapp program category prints when a call it needs is refused",
    "LANGUAGES": "one list twice: the sandbox's toolchains and CompGeom's task languages, held equal by "
                 "tests/test_toolchains.py (the sandbox's is in the image's sources: renaming it rebuilds the image)",
}
def _is_alias(node: ast.Assign | ast.AnnAssign) -> bool:
    """``Q = Fraction``, ``T = TypeVar("T")``: a type's other name, not a constant."""
    value = node.value
    return isinstance(value, ast.Name) or (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                                           and value.func.id in ("TypeVar", "ParamSpec", "NewType"))


def public_definitions() -> dict[str, list[str]]:
    """Each public class and module-level constant (``UPPER_CASE``) the package's modules define
    (not import), by name, to the modules that define it. The walk follows the links to ``envs/``
    and ``tasks/`` and enters only packages (a CompGeom primitive's ``starter/`` and ``fixtures/``
    are the candidate's sources, not modules of the package)."""
    found: dict[str, list[str]] = {}
    for folder, subfolders, files in os.walk(PACKAGE, followlinks=True):
        subfolders[:] = sorted(name for name in subfolders if (Path(folder, name) / "__init__.py").exists())
        for file in sorted(name for name in files if name.endswith(".py")):
            path = Path(folder, file)
            module = ".".join(("gym_sysmath", *path.relative_to(PACKAGE).with_suffix("").parts))
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                names: list[str] = []
                if isinstance(node, ast.ClassDef):
                    names = [node.name]
                elif isinstance(node, ast.Assign | ast.AnnAssign) and not _is_alias(node):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names = [target.id for target in targets if isinstance(target, ast.Name)
                             and re.fullmatch(r"[A-Z][A-Z0-9_]+", target.id)]
                for name in names:
                    if not name.startswith("_"):
                        found.setdefault(name, []).append(module)
    return found


def test_no_two_public_classes_or_constants_share_a_name():
    shared = {name: modules for name, modules in public_definitions().items() if len(modules) > 1}
    unexplained = {name: modules for name, modules in shared.items()
                   if name not in SAME_ROLE}
    assert not unexplained, f"one name, two things: rename one of each {unexplained}"
    stale = sorted(set(SAME_ROLE) - set(shared))
    assert not stale, f"no longer defined twice, so no longer allowed: drop {stale} from SAME_ROLE"


def test_the_walk_sees_envs_tasks_and_the_image():
    modules = {module for modules in public_definitions().values() for module in modules}
    assert {"gym_sysmath.envs.csapp", "gym_sysmath.tasks.compgeom.primitives", "gym_sysmath.filters",
            "gym_sysmath.sandbox.image.toolchains"} <= modules


# --------------------------------------------------------------------------- hostile inputs


@pytest.mark.parametrize("env_id", all_ids())
def test_a_megabyte_task_id_from_a_remote_client_is_refused_without_echoing_it(env_id):
    """A served reset passes a client's options on: the refusal must not run a quadratic
    suggestion over a megabyte, nor repeat it back."""
    huge = "segment2_segment2" * 60_000
    message = refusal(lambda: unfiltered(env_id).reset(seed=0, options={"task_id": huge}))
    assert len(message) < 300 and "did you mean" not in message and f"{len(repr(huge)):,} characters" in message
    assert nearest(huge, [huge[:-1]]) is None


@pytest.mark.parametrize("env_id", all_ids())
@pytest.mark.parametrize("options", ["task_id", ["task_id"], 0])
def test_reset_options_that_are_not_a_dict_are_a_type_error_naming_the_form(env_id, options):
    with pytest.raises(TypeError, match="reset options must be a dict"):
        unfiltered(env_id).reset(seed=0, options=options)


@pytest.mark.parametrize(("env_id", "entry"), [(env_id, entry) for env_id, entry in FILTERS if entry.many])
def test_a_dict_is_no_list_of_names(env_id, entry):
    """``tuple({"vm": False})`` is ``("vm",)``: a mapping would silently mean its keys."""
    with pytest.raises(TypeError, match="must be a list of names, got dict"):
        gym.make(env_id, **{entry.argument: {entry.choices[0]: False}})

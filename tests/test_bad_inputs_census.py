"""The census of the bad-input matrix: nothing public is missing from it.

Every name in ``posembed.__all__`` (every public function, class and method)
and every command that ``posembed --help`` lists is a target of exactly one
family (``test_bad_inputs_<family>.py``), or listed here as taking no argument
that could be bad; each target has a case for every kind of bad input or says
why that kind cannot arise; its cases name real arguments, and their messages
name them; and its twin is called wherever ``posembed.reference`` has one.

A family file may hold more cases for a command of another family
(``COMMAND_CASES``: ``test_bad_inputs_samples.py`` for ``posembed samples``,
whose target is in ``test_bad_inputs_cli.py``): they are counted here with
that command's own, and the file runs them through that family's checks, so
a command that raises past its handler (a traceback, status 1) fails them.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import re
from pathlib import Path

import pytest

import posembed
from posembed import cli, reference

from . import (
    test_bad_inputs_batch_order,
    test_bad_inputs_batches,
    test_bad_inputs_blend,
    test_bad_inputs_checkpoint,
    test_bad_inputs_cli,
    test_bad_inputs_embed,
    test_bad_inputs_embedding,
    test_bad_inputs_gather,
    test_bad_inputs_gpt_batch,
    test_bad_inputs_gpt_blend,
    test_bad_inputs_indexed,
    test_bad_inputs_interpolate,
    test_bad_inputs_pack,
    test_bad_inputs_resample_grid,
    test_bad_inputs_runtime,
    test_bad_inputs_samples,
    test_bad_inputs_windows,
)
from .badinput_harness import EXTRA_KINDS, KINDS, OUT_KINDS, Family

FAMILY_MODULES = [
    test_bad_inputs_batch_order,
    test_bad_inputs_batches,
    test_bad_inputs_blend,
    test_bad_inputs_checkpoint,
    test_bad_inputs_cli,
    test_bad_inputs_embed,
    test_bad_inputs_embedding,
    test_bad_inputs_gather,
    test_bad_inputs_gpt_batch,
    test_bad_inputs_gpt_blend,
    test_bad_inputs_indexed,
    test_bad_inputs_interpolate,
    test_bad_inputs_pack,
    test_bad_inputs_resample_grid,
    test_bad_inputs_runtime,
    test_bad_inputs_samples,
    test_bad_inputs_windows,
]
FAMILIES: list[Family] = [m.FAMILY for m in FAMILY_MODULES]
TARGETS = {name: t for family in FAMILIES for name, t in family.targets.items()}
# Cases a family file holds for a command of another family (see the docstring).
COMMAND_CASES = {m: list(getattr(m, "COMMAND_CASES", [])) for m in FAMILY_MODULES}
CASES = [c for family in FAMILIES for c in family.cases] + [
    c for cases in COMMAND_CASES.values() for c in cases
]
NOT_APPLICABLE = {name: na for family in FAMILIES for name, na in family.not_applicable.items()}

# Public names that are no target: they take no argument that could be bad.
NO_ARGUMENTS = {
    "config": "takes no arguments",
    "get_num_threads": "takes no arguments",
    "last_seed": "takes no arguments",
    "Windows": "a frozen dataclass holding what windows() returns; its fields are "
    "checked where they are used (Windows.owner and stitch, which have cases for a "
    "Windows built by hand)",
    "GPTSamples": "a frozen dataclass holding what gpt_samples() returns; its fields are "
    "read where they are used (GPTSamples.sample and samples, whose cases use one that "
    "gpt_samples built)",
    "PackedRows": "a frozen dataclass holding what PackPlan.cut() returns",
    "GPTBlend": "a frozen dataclass holding what gpt_blend() returns (write_megatron_cache "
    "has cases for one)",
    "GPTBlendSplit": "a frozen dataclass holding one split of what gpt_blend() returns",
    "GPTBatch": "a frozen dataclass holding what gpt_batch() returns",
    "MicroBatch": "a frozen dataclass holding what iterating Batches gives",
    "WindowLayout": "a frozen dataclass holding what window_layout() returns; its fields "
    "are checked where they are used (WindowLayout.cut, which has cases for a layout "
    "built by hand)",
}
NOT_CALLABLE = {
    "reference": "the module of twins: every case whose target has a twin calls it",
    "__version__": "a string",
}


def test_every_family_file_is_in_the_census():
    here = Path(__file__).parent
    files = {p.stem for p in here.glob("test_bad_inputs_*.py")} - {Path(__file__).stem}
    assert files == {m.__name__.rsplit(".", 1)[-1] for m in FAMILY_MODULES}


def test_every_family_file_runs_the_checks():
    for module in FAMILY_MODULES:
        tests = {name for name in vars(module) if name.startswith("test_")}
        expected = {
            "test_bad_input_is_refused_and_nothing_is_modified",
            "test_valid_arguments_succeed_and_modify_no_input",
        }
        if module.FAMILY.twin_cases():
            expected.add("test_the_twin_raises_the_same_exception_type")
        if COMMAND_CASES[module]:
            expected.add("test_the_command_refuses_in_one_line_and_modifies_nothing")
        assert expected <= tests, (module.__name__, expected - tests)


def test_command_cases_are_cases_of_a_command_of_another_family():
    for module, cases in COMMAND_CASES.items():
        for case in cases:
            assert case.target.startswith("cli "), case
            assert case.target in TARGETS, case
            assert case.target not in module.FAMILY.targets, case  # its own: FAMILY.cases


def test_the_samples_command_meets_every_hostile_input():
    """posembed samples: each count option far too large, a corpus without
    tokens, a corrupt index, a missing file and a store URL that fails, each
    one line and status 2 (a ValueError past the handler once ended these
    with a traceback)."""
    cases = [c for c in CASES if c.target == "cli samples"]
    for option in ("--sequence-length", "--num-samples", "--epochs"):
        huge = [c for c in cases if c.arg == option and isinstance(c.bad, int) and c.bad >= 2**62]
        assert huge, f"{option}: no case of 2^62 or more"
    assert any(c.kind == "empty" and "no tokens" in c.match for c in cases)
    assert any(c.arg == "input" and "not a valid indexed dataset" in c.match for c in cases)
    assert any(c.arg == "input" and c.kind == "file" and "no such file" in c.match for c in cases)
    assert any(c.arg == "input" and "://" in str(c.bad) for c in cases)


def test_each_target_belongs_to_one_family():
    names = [name for family in FAMILIES for name in family.targets]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def public_targets() -> set[str]:
    """Every public function, class (its constructor) and public method."""
    names = set()
    for name in posembed.__all__:
        obj = getattr(posembed, name)
        if name in NOT_CALLABLE:
            assert not inspect.isfunction(obj)
            assert not inspect.isclass(obj)
            continue
        names.add(name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") and attr != "__call__":
                    continue
                if inspect.isfunction(member) or isinstance(member, (classmethod, staticmethod)):
                    names.add(f"{name}.{attr}")
    return names


def test_every_public_function_and_method_is_in_the_table():
    public = public_targets()
    for name in public - set(TARGETS):
        assert name in NO_ARGUMENTS, f"{name} is public but has no row in the bad-input table"
        obj = getattr(posembed, name)
        if inspect.isfunction(obj):
            assert not inspect.signature(obj).parameters, f"{name} takes arguments"
    python = {n for n in TARGETS if not n.startswith("cli ")}
    assert python <= public, python - public
    assert set(NO_ARGUMENTS) <= public
    assert set(NOT_CALLABLE) <= set(posembed.__all__)


def help_text(words: tuple[str, ...]) -> str:
    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
        cli.main([*words, "--help"])
    return text.getvalue()


def commands(words: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The commands `posembed --help` lists, and those of each command group."""
    usage = help_text(words).split("\n\n")[0]
    # a group's commands, not choices (a long usage wraps before the "...")
    found = re.search(r"\{([\w,]+)\}\s+\.\.\.", usage)
    if found is None:
        return [words]
    return [c for sub in found.group(1).split(",") for c in commands((*words, sub))]


def twin_exists(name: str) -> bool:
    cls, _, method = name.partition(".")
    if not method:
        return name in reference.__all__
    twin = getattr(reference, cls, None)
    return twin is not None and method in vars(twin)


@pytest.mark.parametrize("name", [n for n in TARGETS if not n.startswith("cli ")])
def test_twins_are_called_wherever_they_exist(name: str):
    assert TARGETS[name].twin == twin_exists(name)


def test_every_command_is_in_the_table():
    listed = {f"cli {' '.join(words)}" for words in commands()}
    assert listed == {n for n in TARGETS if n.startswith("cli ")}
    assert {"cli bench", "cli chunk", "cli resize", "cli plot similarity", "cli config"} <= listed
    for name, target in TARGETS.items():
        if name.startswith("cli "):
            assert target.command == tuple(name.split()[1:])


def test_every_target_says_which_kinds_cannot_arise():
    for family in FAMILIES:
        assert set(family.not_applicable) == set(family.targets)
        assert {c.target for c in family.cases} == set(family.targets)


@pytest.mark.parametrize("name", list(TARGETS))
def test_every_kind_is_covered_or_ruled_out(name: str, tmp_path: Path):
    covered = {c.kind for c in CASES if c.target == name}
    ruled_out = NOT_APPLICABLE[name]
    for kind in KINDS:
        assert (kind in covered) != (kind in ruled_out), (
            f"{name}: {kind} must have a case or a reason why it cannot arise, not both"
        )
    assert all(reason.strip() for reason in ruled_out.values())
    assert set(ruled_out) <= set(KINDS)
    assert covered <= set(KINDS) | set(EXTRA_KINDS)
    if "out" not in TARGETS[name].valid(tmp_path) or name.startswith("cli "):
        assert all(ruled_out.get(k) for k in OUT_KINDS), f"{name} takes no out="


@pytest.mark.parametrize("name", list(TARGETS))
def test_cases_name_real_arguments_and_their_messages_name_them(name: str, tmp_path: Path):
    target = TARGETS[name]
    valid = target.valid(tmp_path)
    if target.api is not None:
        params = inspect.signature(target.api).parameters
        any_keyword = any(p.kind is p.VAR_KEYWORD for p in params.values())
        for key in valid:
            ok = key in params or any_keyword or key == "self"  # self: a method's instance
            assert ok, f"{name}: {key} is no parameter"
    else:
        options = help_text(target.command)
        for key in valid:
            assert key in options, f"{name}: {key} is no option of the command"
    for case in (c for c in CASES if c.target == name):
        assert case.arg in valid or case.kind == "unknown", case
        names = {case.arg, case.arg.lstrip("-"), case.arg.lstrip("-").replace("-", "_")}
        if case.named is not None:
            names = {case.named}
        plain = case.match.replace("\\", "")
        assert any(n in plain for n in names), f"{case}: the pattern does not name {names}"
        assert case.kind in KINDS + EXTRA_KINDS


# What the twins may import of posembed: their own package and the safetensors
# file format (one reader and writer in posembed), nothing of the fast path.
TWINS_MAY_IMPORT = ("posembed.reference", "posembed.io._safetensors")


def test_the_twins_import_nothing_of_the_fast_path():
    """The twins' exception types are compared with posembed's: they must come
    from the twins' own checks (see posembed.reference's docstring)."""
    package = Path(reference.__file__).parent
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if isinstance(node, ast.ImportFrom) and node.level:
                continue  # relative: from inside the package
            for name in names:
                if name == "posembed" or name.startswith("posembed."):
                    allowed = any(name == a or name.startswith(f"{a}.") for a in TWINS_MAY_IMPORT)
                    assert allowed, f"{path.name} imports {name}"

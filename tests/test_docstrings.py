"""Every public callable has a NumPy-style docstring that matches its signature,
and the _core stub matches the signatures the bindings declare.

Public means: the callables in ``posembed.__all__`` (a new export is covered
as soon as it is added), the public methods and properties of the classes
there, and the public functions of ``posembed.reference``.
"""

from __future__ import annotations

import ast
import builtins
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import posembed
from posembed import _core, reference

# Public callables with parameters that check none of them, so that their
# docstrings need no Raises section; each with the reason.
NO_RAISES = {
    "posembed.show_config": "prints to `file` as it is; print's own errors are not its",
    "posembed.GPTSamples": "a dataclass: __init__ stores the fields as given; gpt_samples() "
    "builds it",
    "posembed.Windows": "a dataclass: __init__ stores the fields as given; windows() builds it",
    "posembed.WindowLayout": "a dataclass: __init__ stores the fields as given; "
    "window_layout() builds it",
    "posembed.PackedRows": "a dataclass: __init__ stores the fields as given; PackPlan.cut() "
    "builds it",
    "posembed.GPTBlend": "a dataclass: __init__ stores the fields as given; gpt_blend() builds it",
    "posembed.GPTBlendSplit": "a dataclass: __init__ stores the fields as given; gpt_blend() "
    "builds it",
    "posembed.GPTBatch": "a dataclass: __init__ stores the fields as given; gpt_batch() builds it",
    "posembed.MicroBatch": "a dataclass: __init__ stores the fields as given; iterating "
    "Batches builds it",
}


def _public_members(cls: type, prefix: str) -> Iterator[tuple[str, Any]]:
    """Public methods and properties defined by ``cls``; ``__call__`` counts as
    public (calling the object is its main use), other dunders do not."""
    for attr, member in vars(cls).items():
        if attr.startswith("_") and attr != "__call__":
            continue
        name = f"{prefix}.{attr}"
        if isinstance(member, property):
            yield name, member
        elif isinstance(member, (classmethod, staticmethod)):
            yield name, getattr(cls, attr)
        elif inspect.isfunction(member):
            yield name, member


def public_callables() -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for export in posembed.__all__:
        obj = getattr(posembed, export)
        if inspect.ismodule(obj) or not callable(obj):
            continue  # posembed.reference (covered below) and __version__
        name = f"posembed.{export}"
        found.append((name, obj))
        if inspect.isclass(obj):
            found.extend(_public_members(obj, name))
    for export in reference.__all__:
        obj = getattr(reference, export)
        if inspect.isfunction(obj):
            found.append((f"posembed.reference.{export}", obj))
    return found


PUBLIC = public_callables()


def sections(doc: str) -> dict[str, list[str]]:
    """The docstring's lines by NumPy-style section ("" for the text before the first)."""
    lines = inspect.cleandoc(doc).splitlines()
    heads = [
        i
        for i in range(1, len(lines) - 1)
        if lines[i].strip()
        and not lines[i].startswith(" ")
        and set(lines[i + 1]) == {"-"}
        and len(lines[i + 1]) == len(lines[i])
    ]
    found = {"": lines[: heads[0] if heads else len(lines)]}
    for k, i in enumerate(heads):
        title = lines[i].strip()
        assert title not in found, f"section {title!r} appears twice"
        found[title] = lines[i + 2 : heads[k + 1] if k + 1 < len(heads) else len(lines)]
    return found


def entries(lines: list[str]) -> list[str]:
    """The unindented lines of a section: its entries (descriptions are indented)."""
    return [line for line in lines if line.strip() and not line[0].isspace()]


def documented_names(lines: list[str]) -> list[str]:
    """The names of a Parameters or Attributes section: ``a : type``, ``a, b : type``,
    ``**kwargs``."""
    names = []
    for entry in entries(lines):
        head = entry.split(" : ")[0]
        names.extend(part.strip().lstrip("*") for part in head.split(","))
    return names


def signature_of(name: str, obj: Any) -> inspect.Signature | None:
    """The signature a reader calls (a class: its constructor's); None for a property."""
    if isinstance(obj, property):
        return None
    return inspect.signature(obj)


def parameters(sig: inspect.Signature) -> list[str]:
    return [p for p in sig.parameters if p not in ("self", "cls")]


def returns_something(obj: Any, sig: inspect.Signature) -> bool:
    if inspect.isclass(obj):
        return False
    return sig.return_annotation not in (None, "None", inspect.Signature.empty)


def test_the_census_finds_everything():
    names = {name for name, _ in PUBLIC}
    # the kinds of thing the walk must reach; new exports join automatically
    for expected in (
        "posembed.gather",
        "posembed.LearnedPositionEmbedding",
        "posembed.LearnedPositionEmbedding.from_table",
        "posembed.LearnedPositionEmbedding.max_seq_len",
        "posembed.LearnedPositionEmbedding.__call__",
        "posembed.Windows.owner",
        "posembed.Windows.mask",
        "posembed.window_layout",
        "posembed.WindowLayout.cut",
        "posembed.reference.uniform_bits",
    ):
        assert expected in names
    for name in NO_RAISES:
        assert name in names, f"NO_RAISES names {name}, which is not public any more"


@pytest.mark.parametrize(("name", "obj"), PUBLIC, ids=[name for name, _ in PUBLIC])
def test_docstring(name: str, obj: Any) -> None:
    doc = obj.__doc__
    assert doc, f"{name} has no docstring"
    assert doc.strip(), f"{name} has an empty docstring"
    found = sections(doc)
    summary = found[""]
    assert summary[0].strip(), f"{name}: the docstring must open with a one-line summary"
    assert len(summary) == 1 or not summary[1].strip(), (
        f"{name}: the summary must be one line, followed by a blank line"
    )
    sig = signature_of(name, obj)
    if sig is None:  # a property: read like an attribute, described in prose
        assert set(found) == {""}, f"{name}: a property's docstring has no sections"
        return

    params = parameters(sig)
    if inspect.isclass(obj) and "Parameters" not in found:
        # a dataclass documents its fields, which are its constructor's parameters
        assert documented_names(found.get("Attributes", [])) == params, (
            f"{name}: the Attributes section must name the fields {params} in order"
        )
    elif params:
        assert "Parameters" in found, f"{name} takes {params} but has no Parameters section"
        assert documented_names(found["Parameters"]) == params, (
            f"{name}: the Parameters section must name {params}, in order"
        )
    else:
        assert "Parameters" not in found, f"{name} takes no parameters"

    if returns_something(obj, sig):
        assert entries(found.get("Returns", [])), f"{name} returns a value: no Returns section"

    if params and name not in NO_RAISES:
        raised = [entry.strip() for entry in entries(found.get("Raises", []))]
        assert raised, f"{name} checks its arguments: it needs a Raises section"
        for exc in raised:
            cls = getattr(builtins, exc, None)
            assert isinstance(cls, type), f"{name}: Raises names {exc!r}, not a builtin exception"
            assert issubclass(cls, BaseException), f"{name}: Raises names {exc!r}"


# ------------------------------------------------------------ the _core stub
#
# stubtest (python -m mypy.stubtest posembed._core, run in CI) checks that the
# stub and the module hold the same names, but pybind11 functions carry no
# __text_signature__, so it cannot compare their signatures. pybind11 writes
# each function's signature as the first line of its __doc__ instead; these
# tests hold the stub to it.

STUBS = Path(posembed.__file__).with_name("_core")
STUB = STUBS / "__init__.pyi"
PROBES_STUB = STUBS / "_probes.pyi"
# The bound enums, as pybind11 writes their type and as the stub names them.
ENUMS = ("Align", "FloatKind", "GridMethod", "IndexMode", "OwnerRule", "Reduce", "Tail")
# the bound classes that are not enums (a file's read-only mapping, the
# reader of GPT batches and its read-ahead)
CLASSES = ("FileMap", "GPTBatchAhead", "GPTBatchReader", "PackCutReader")

# How pybind11 (2.13 and 3.x) writes an argument's C++ type -> what the stub
# says. A py::object argument is converted by the binding itself; the stub
# names what that conversion accepts.
ARGUMENT_TYPES = {
    "int": {"SupportsIndex"},
    "typing.SupportsInt | typing.SupportsIndex": {"SupportsIndex"},
    "float": {"SupportsFloat | SupportsIndex"},
    "typing.SupportsFloat | typing.SupportsIndex": {"SupportsFloat | SupportsIndex"},
    "bool": {"bool"},
    "str": {"str"},
    "bytes": {"bytes"},
    "tuple": {"tuple[Any, ...]"},
    "list": {"list[tuple[Any, ...]]"},
    "collections.abc.Sequence": {"Sequence[GPTBatchReader | None]"},  # readers, None: unread
    "numpy.ndarray": {"np.ndarray"},
    "numpy.dtype": {"np.dtype[Any]"},
    "numpy.ndarray[numpy.int64]": {"npt.ArrayLike"},
    "typing.Annotated[numpy.typing.ArrayLike, numpy.int64]": {"npt.ArrayLike"},
    "typing.Annotated[numpy.typing.ArrayLike, numpy.uint32]": {"npt.ArrayLike"},
    "typing.Annotated[numpy.typing.ArrayLike, numpy.uint64]": {"npt.ArrayLike"},
    "object": {
        "np.ndarray | None",
        "npt.ArrayLike | None",
        "SupportsFloat | SupportsIndex",
        "object",
        "FileMap | None",  # a mapping, or None: read with positional reads
        "tuple[int, int, int] | None",  # a file's (size, mtime, inode) to keep, or None
        # a blend's readers, dataset_index and dataset_sample_index, or None
        "tuple[Sequence[GPTBatchReader | None], np.ndarray, np.ndarray] | None",
    },
    **{f"posembed._core._native.{name}": {name} for name in ENUMS},
}
RETURN_TYPES = {
    "None": {"None"},
    "int": {"int"},
    "float": {"float"},
    "numpy.ndarray": {"np.ndarray", "npt.NDArray[np.bool_]"},
    "dict": {"_Config"},
    "list": {"list[int]"},
    "tuple[int, int]": {"tuple[int, int]"},
    "object": {"np.ndarray | None", "_BatchTuple"},
    "tuple": {
        "tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], "
        "npt.NDArray[np.int64]]",
        "tuple[np.ndarray, np.ndarray]",
        "tuple[np.ndarray, np.ndarray, np.ndarray]",
        "tuple[np.ndarray, np.ndarray, np.ndarray | None]",
        "tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]",
        "tuple[Any, Any, Any, Any, Any]",
        "tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, "
        "np.ndarray | None]",
    },
}


def stub_tree(path: Path = STUB) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def stub_functions() -> dict[str, ast.FunctionDef]:
    """Every function of both stubs, the probes' as ``_probes.<name>``."""
    found = {}
    for prefix, path in (("", STUB), ("_probes.", PROBES_STUB)):
        for node in stub_tree(path).body:
            if isinstance(node, ast.FunctionDef):
                found[prefix + node.name] = node
    return found


def bound_functions() -> dict[str, Callable[..., Any]]:
    """Every function of _core and its _probes submodule (not the enum classes)."""
    return {
        prefix + name: getattr(module, name)
        for prefix, module in (("", _core), ("_probes.", _core._probes))
        for name in dir(module)
        if not name.startswith("__") and inspect.isbuiltin(getattr(module, name))
    }


def test_stub_has_every_bound_enum_with_its_members():
    classes = {n.name: n for n in stub_tree().body if isinstance(n, ast.ClassDef)}
    bound = sorted(n for n in dir(_core) if isinstance(getattr(_core, n), type))
    assert sorted(ENUMS + CLASSES) == bound
    assert set(CLASSES) <= set(classes)
    for name in ENUMS:
        members = set(getattr(_core, name).__members__)
        declared = {
            node.target.id
            for node in classes[name].body
            if isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id != "__members__"
        }
        # a keyword ("raise") cannot be declared; every other member is
        assert declared == {m for m in members if m != "raise"}, name


def bound_signature(fn: Callable[..., Any]) -> ast.FunctionDef:
    """pybind11's signature line, ``name(a: type, b: type = default) -> type``, as a def."""
    line = (fn.__doc__ or "").splitlines()[0]
    node = ast.parse(f"def {line}: ...").body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


def test_stub_has_every_bound_function_and_no_other():
    assert sorted(stub_functions()) == sorted(bound_functions())


@pytest.mark.parametrize("name", sorted(bound_functions()))
def test_stub_signature_is_the_bound_one(name: str) -> None:
    bound = bound_signature(bound_functions()[name]).args
    stub = stub_functions()[name].args
    # pybind11 binds named arguments as positional-or-keyword, no *args or **kwargs
    for args in (bound, stub):
        assert not args.posonlyargs
        assert not args.kwonlyargs
        assert args.vararg is None
        assert args.kwarg is None
    assert [a.arg for a in stub.args] == [a.arg for a in bound.args]
    assert [ast.literal_eval(d) for d in stub.defaults] == [
        ast.literal_eval(d) for d in bound.defaults
    ]
    for b, s in zip(bound.args, stub.args, strict=True):
        assert b.annotation is not None
        assert s.annotation is not None
        bound_type, stub_type = ast.unparse(b.annotation), ast.unparse(s.annotation)
        assert stub_type in ARGUMENT_TYPES[bound_type], f"{name}({b.arg}): {bound_type}"
    bound_ret = bound_signature(bound_functions()[name]).returns
    stub_ret = stub_functions()[name].returns
    assert bound_ret is not None
    assert stub_ret is not None
    assert ast.unparse(stub_ret) in RETURN_TYPES[ast.unparse(bound_ret)]


def test_stub_config_keys_and_types():
    (cls,) = (n for n in stub_tree().body if isinstance(n, ast.ClassDef) and n.name == "_Config")
    declared = {
        node.target.id: ast.unparse(node.annotation)
        for node in cls.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }
    facts = _core.config()
    assert sorted(declared) == sorted(facts)
    kinds = {"str": str, "bool": bool, "int": int}
    for key, annotation in declared.items():
        value = facts[key]
        if annotation == "list[str]":
            assert isinstance(value, list)
            assert all(isinstance(x, str) for x in value)
        else:
            assert type(value) is kinds[annotation], f"{key}: {value!r} is not {annotation}"

"""The bad-input matrix's harness: the kinds of bad input, the case record, the
targets, the argument builders and the checks every case goes through.

The matrix holds every public function, method and command against every kind
of bad input. It is split by family, one file each (``test_bad_inputs_<family>.py``),
each with a :class:`Family`: its targets, the kinds that cannot arise for each
and why, and its cases. A case names a target (a public function, a method, or
a ``posembed`` command), the argument it breaks, the kind of bad input (KINDS),
the bad value, the exception it must raise and a pattern its message must
match: always the argument's name, and where it helps the bad value and what
is allowed. A target's other arguments come from its builder, which gives a
valid call. ``test_bad_inputs_census.py`` holds the families together to
``posembed.__all__``, the commands of ``posembed --help`` and the kinds, so that
nothing new goes unlisted.

Every case also shows that the failed call changed nothing: every array it was
given (``out=`` prefilled with a sentinel pattern included) is byte-identical
afterwards, and a failed command leaves its folder as it found it (no output,
no partial file). A valid call changes no input either. Where
``posembed.reference`` has a twin, the same bad call must raise the same
exception type there (the twins' messages are their own).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed
from posembed import cli, reference
from posembed.io import _safetensors

# -- the kinds of bad input ------------------------------------------------------------

KINDS = (
    "type",  # not the kind of object the argument takes (a str for a count, a ragged list)
    "dtype",  # an array (or dtype) of the wrong element type
    "rank",  # an array of the wrong number of dimensions
    "empty",  # no rows, no elements, no tensor, an empty file
    "nan",  # NaN or inf where a finite number is needed
    "size",  # a count or size that is negative, zero where >= 1 is needed, or overflows
    "range",  # a value outside what is allowed: indices, probabilities, choices
    "shape",  # shapes (or sizes) of arguments that do not fit together
    "out_type",  # out= that is not an array
    "out_dtype",  # out= of another dtype
    "out_shape",  # out= of another shape
    "out_readonly",  # out= that cannot be written
    "out_overlap",  # out= sharing memory with an input
    "out_layout",  # out= that is not C-contiguous, or misaligned
)
# Kinds some targets have besides: arguments that exclude or need each other,
# unknown or missing arguments, and files that are missing or in the way.
EXTRA_KINDS = ("combination", "unknown", "file")
OUT_KINDS = tuple(k for k in KINDS if k.startswith("out_"))


class UsageError(Exception):
    """A command stopped by argparse: status 2, usage and ``posembed ...: error: ...``."""


class CommandError(Exception):
    """A command that returned 2 after exactly one line ``posembed <cmd>: error: ...``."""


OMIT = object()  # a bad value: leave a required argument out

# A case that needs an allocation to fail with MemoryError: under AddressSanitizer
# (.ci/run preloads it for the whole suite) the allocator aborts the process instead.
UNSANITIZED = "an allocator that returns NULL"
SANITIZED = bool(posembed.config().get("sanitized", False))


@dataclass(frozen=True)
class From:
    """A bad value built from the valid arguments (it may adjust them too, say to
    make an input and out= share one buffer)."""

    build: Callable[[dict[str, Any]], Any]


@dataclass(frozen=True, eq=False)  # rows compare by identity (their values are arrays)
class Case:
    target: str
    arg: str
    kind: str
    bad: Any
    exc: type[BaseException]
    match: str
    also: dict[str, Any] = field(default_factory=dict)  # valid changes made first
    twin: bool = True  # also call posembed.reference's twin, where there is one
    named: str | None = None  # what in the message names the argument, if not its name
    needs: str | None = None  # an optional package the call needs, or UNSANITIZED


# -- building arguments ----------------------------------------------------------------

SENTINEL = 0xA5  # every byte of a prefilled out=
SEED = 20261129


def table(rows: int, cols: int, dtype: Any = np.float32) -> np.ndarray:
    """Finite, distinct values."""
    return (np.arange(rows * cols, dtype=np.float64).reshape(rows, cols) * 0.25 - 3).astype(dtype)


def sentinel(shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    a = np.empty(shape, dtype)
    a.reshape(-1).view(np.uint8)[...] = SENTINEL
    return a


def readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def strided(shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """Every other element of a wider buffer: not C-contiguous."""
    return sentinel((*shape[:-1], 2 * shape[-1]), dtype)[..., ::2]


def fortran(shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    return np.asfortranarray(sentinel(shape, dtype))


def misaligned(shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """C-contiguous and writeable, one byte off its dtype's alignment."""
    dt = np.dtype(dtype)
    buf = np.full(int(np.prod(shape)) * dt.itemsize + 1, SENTINEL, np.uint8)
    return buf[1:].view(dt).reshape(shape)


def sharing(**views: Callable[[np.ndarray], np.ndarray]) -> From:
    """out= and inputs cut from one buffer: ``views`` maps argument names to
    functions of the buffer; the case's own argument is one of them."""

    def build(args: dict[str, Any]) -> Any:
        buf = np.full(4096, SENTINEL, np.uint8)
        made = {name: cut(buf) for name, cut in views.items()}
        out = made.pop("out")
        args.update(made)
        return out

    return From(build)


def f32(buf: np.ndarray, start: int, shape: tuple[int, ...]) -> np.ndarray:
    """float32 values start .. start + prod(shape) of a byte buffer, filled with
    small integers (valid positions and values)."""
    n = int(np.prod(shape))
    v = buf[4 * start : 4 * (start + n)].view(np.float32)
    v[...] = np.arange(n) % 3
    return v.reshape(shape)


def i32(buf: np.ndarray, start: int, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    v = buf[4 * start : 4 * (start + n)].view(np.int32)
    v[...] = np.arange(n) % 3
    return v.reshape(shape)


def resolve(value: Any, args: dict[str, Any]) -> Any:
    return value.build(args) if isinstance(value, From) else value


# -- targets ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    valid: Callable[[Path], dict[str, Any]]  # a valid call's arguments, fresh, files in tmp
    call: Callable[[Any, dict[str, Any]], Any]  # (posembed or posembed.reference, arguments)
    api: Any = None  # whose parameters the arguments are (None: a command)
    twin: bool = False  # posembed.reference has it
    command: tuple[str, ...] = ()  # the words after `posembed`


def function(name: str, valid: Callable[[Path], dict[str, Any]], twin: bool = True) -> Target:
    return Target(valid, lambda m, a: getattr(m, name)(**a), getattr(posembed, name), twin)


def twin_of(obj: Any) -> Any:
    """posembed.reference's counterpart of a posembed object."""
    if isinstance(obj, posembed.LearnedPositionEmbedding):
        twin = reference.LearnedPositionEmbedding(
            obj.max_seq_len, obj.embed_dim, seed=SEED, dropout=obj.dropout
        )
        assert twin.embeddings.tobytes() == obj.embeddings.tobytes()  # built with seed=SEED
        return twin
    if isinstance(obj, posembed.Windows):
        fields = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
        return reference.Windows(*fields)
    if isinstance(obj, posembed.WindowLayout):
        fields = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
        return reference.WindowLayout(*fields)
    if isinstance(obj, posembed.GPTSamples):
        fields = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
        return reference.GPTSamples(*fields)
    if isinstance(obj, posembed.BatchOrder):
        names = ("global_batch_size", "micro_batch_size", "world_size", "rank", "seed")
        given = {name: getattr(obj, name) for name in names}
        given.update(shuffle=obj.shuffle, consumed_samples=obj.consumed_samples)
        return reference.BatchOrder(obj.source, **given)
    raise AssertionError(obj)


def method(cls: type, name: str, valid: Callable[[Path], dict[str, Any]], twin: bool) -> Target:
    def call(module: Any, args: dict[str, Any]) -> Any:
        rest = dict(args)
        obj = rest.pop("self")
        if module is reference:
            obj = twin_of(obj)
        return getattr(obj, name)(**rest)

    return Target(valid, call, getattr(cls, name), twin)


def argv_of(words: tuple[str, ...], args: dict[str, Any]) -> list[str]:
    """Positional arguments (keys without a dash) and options in dict order;
    None and False leave an option out, True is a flag."""
    argv = list(words)
    for key, value in args.items():
        if not key.startswith("-"):
            argv.append(str(value))
        elif value is True:
            argv.append(key)
        elif value is not None and value is not False:
            argv += [key, str(value)]
    return argv


def run_command(words: tuple[str, ...], args: dict[str, Any]) -> int:
    """cli.main in this process; a failure becomes UsageError or CommandError
    carrying the error line, after checking how it was reported."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            status = cli.main(argv_of(words, args))
        except SystemExit as exc:
            lines = err.getvalue().splitlines()
            assert exc.code == 2, (exc.code, lines)  # noqa: PT017 (a command's exit status)
            assert lines, "a usage error without a message"
            assert re.match(r"posembed( \w+)*: error: ", lines[-1]), lines
            raise UsageError(lines[-1]) from None
    lines = err.getvalue().splitlines()
    if status == 2:
        assert len(lines) == 1, lines  # one line, no traceback, no progress
        assert lines[0].startswith(f"posembed {words[0]}: error: "), lines
        assert out.getvalue() == ""
        raise CommandError(lines[0])
    assert status == 0, (status, lines)
    return status


def command(*words: str, valid: Callable[[Path], dict[str, Any]]) -> Target:
    return Target(valid, lambda m, a: run_command(words, a), command=words)


# A small safetensors writer (8-byte header length, JSON header, data), so that
# the checkpoint cases need no other test module.
def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> Path:
    _safetensors.write_file(path, tensors)
    return path


def checkpoint(tmp: Path) -> Path:
    """pos (14, 4) F32 (2 + 12 rows, or 5 + a 3x3 grid), ids (7,) I64, bias (4,) F32."""
    return write_safetensors(
        tmp / "model.safetensors",
        {"pos": table(14, 4), "ids": np.arange(7), "bias": np.ones(4, np.float32)},
    )


# -- values and patterns more than one family uses -------------------------------------

RAGGED = [[1.0], [2.0, 3.0]]
RANDOM = {"init": "random"}
SEED_IS = r"seed must be None, an integer >= 0, a sequence of them, or a numpy\.random\.Generator"
EMBED_SEED = r"seed must be an integer in 0\.\.2\*\*64-1 or None; got "
PAIR = r"must be a pair \(H, W\) of positive integers"

ALL_OUT = {k: "takes no out=" for k in OUT_KINDS}
SCALARS = "no array argument"


def out_cases(add: Callable[..., None], shape: tuple[int, ...], dtype: Any, twin: bool = True):
    """The out= cases every target with out= shares (besides its overlaps)."""
    dt = np.dtype(dtype)
    other = np.float64 if dt != np.float64 else np.float32
    add(
        "out", "out_type", [[0] * shape[-1]], TypeError, r"out must be a numpy\.ndarray or a DLPack"
    )
    add("out", "out_type", memoryview(bytearray(8)), TypeError, r"out must be a numpy\.ndarray")
    add("out", "out_dtype", sentinel(shape, other), TypeError, rf"out must have dtype {dt}; got")
    swapped = dt.newbyteorder("S")
    add(
        "out",
        "out_dtype",
        sentinel(shape, swapped),
        TypeError,
        rf"out must have dtype {dt}; got dtype {re.escape(swapped.str)}",
        twin=twin,
    )
    wrong = (shape[0] + 1, *shape[1:])
    add(
        "out",
        "out_shape",
        sentinel(wrong, dt),
        ValueError,
        re.escape(f"out must have shape {shape}; got shape {wrong}"),
    )
    add(
        "out", "out_shape", sentinel((int(np.prod(shape)),), dt), ValueError, r"out must have shape"
    )
    add(
        "out",
        "out_readonly",
        readonly(sentinel(shape, dt)),
        ValueError,
        r"out must be writeable; got a read-only array",
    )
    add(
        "out",
        "out_readonly",
        np.broadcast_to(sentinel((1,), dt), shape),
        ValueError,
        r"out must be writeable",
    )
    add("out", "out_layout", strided(shape, dt), ValueError, r"out must be C-contiguous; got a non")
    if len(shape) > 1:
        add("out", "out_layout", fortran(shape, dt), ValueError, r"out must be C-contiguous")
    add(
        "out",
        "out_layout",
        misaligned(shape, dt),
        ValueError,
        r"out must be aligned for its dtype; got a misaligned view",
    )


# -- checking a call ------------------------------------------------------------------


def arrays_in(value: Any) -> list[np.ndarray]:
    """The arrays an argument holds (a Windows' or a WindowLayout's fields, an
    embedding's table)."""
    if isinstance(value, np.ndarray):
        return [value]
    records = (
        posembed.Windows,
        reference.Windows,
        posembed.WindowLayout,
        reference.WindowLayout,
        posembed.GPTSamples,
        reference.GPTSamples,
    )
    if isinstance(value, records):
        return [v for v in vars(value).values() if isinstance(v, np.ndarray)]
    if isinstance(value, posembed.LearnedPositionEmbedding):
        return [value.embeddings]
    return []


def memory_of(a: np.ndarray) -> np.ndarray:
    """The array that owns a view's memory (its whole buffer, not only the view)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


class Snapshot:
    """Every byte of every array argument, and of every file under a folder."""

    def __init__(self, args: dict[str, Any], folder: Path, skip: tuple[str, ...] = ()):
        self.arrays: dict[int, tuple[np.ndarray, bytes]] = {}
        for key, value in args.items():
            for a in arrays_in(value) if key not in skip else []:
                root = memory_of(a)
                self.arrays[id(root)] = (root, root.tobytes())
        self.folder = folder
        self.files = self._files()

    def _files(self) -> dict[str, bytes | None]:
        return {
            str(p.relative_to(self.folder)): p.read_bytes() if p.is_file() else None
            for p in sorted(self.folder.rglob("*"))
        }

    def assert_unchanged(self, new_files: bool = False) -> None:
        for root, before in self.arrays.values():
            assert root.tobytes() == before, "an array argument changed"
        now = self._files()
        if new_files:  # a successful command writes its output: the rest stays
            now = {k: v for k, v in now.items() if k in self.files}
        assert now == self.files, "files changed"


def needs(case_or_target: Case | str) -> None:
    package = case_or_target.needs if isinstance(case_or_target, Case) else None
    if package == UNSANITIZED:
        if SANITIZED:  # see UNSANITIZED: the sanitizer run checks memory safety only
            pytest.skip("AddressSanitizer aborts on a failed allocation")
        return
    if isinstance(case_or_target, str) and case_or_target == "cli plot similarity":
        package = "matplotlib"
    if package is not None and importlib.util.find_spec(package) is None:
        # an optional dependency (the test extra installs it): without it the
        # command reports a different error, which tests/test_plot.py covers
        pytest.skip(f"needs {package}")


@dataclass
class Family:
    """One family's part of the matrix: its targets, for each target the kinds
    that cannot arise and why, and its cases (filed with :meth:`cases_for`)."""

    targets: dict[str, Target]
    not_applicable: dict[str, dict[str, str]]
    cases: list[Case] = field(default_factory=list)

    def cases_for(self, target: str) -> Callable[..., None]:
        """``add(arg, kind, bad, exc, match, **kw)``, which files a case for ``target``."""
        assert target in self.targets, f"{target} is no target of this family"

        def add(arg: str, kind: str, bad: Any, exc: type[BaseException], match: str, **kw: Any):
            self.cases.append(Case(target, arg, kind, bad, exc, match, **kw))

        return add

    def twin_cases(self) -> list[Case]:
        """The cases whose target has a twin, unless the case says otherwise."""
        return [c for c in self.cases if c.twin and self.targets[c.target].twin]

    def case_id(self, case: Case) -> str:
        return f"{case.target}:{case.arg}:{case.kind}:{self.cases.index(case)}"

    def build(self, case: Case, tmp: Path) -> dict[str, Any]:
        """The case's arguments: the target's valid ones with the bad one put in."""
        args = self.targets[case.target].valid(tmp)
        for key, value in case.also.items():
            args[key] = resolve(value, args)
        bad = resolve(case.bad, args)
        if bad is OMIT:
            del args[case.arg]
        else:
            args[case.arg] = bad
        return args

    def check_refused(self, case: Case, tmp: Path) -> None:
        """posembed raises the case's exception, its message matches, and nothing
        it was given changed."""
        needs(case)
        args = self.build(case, tmp)
        before = Snapshot(args, tmp)
        with pytest.raises(case.exc, match=case.match) as err:
            self.targets[case.target].call(posembed, args)
        assert type(err.value) is case.exc
        before.assert_unchanged()

    def check_twin(self, case: Case, tmp: Path) -> None:
        """The twin raises the same exception type and changes nothing either."""
        args = self.build(case, tmp)
        before = Snapshot(args, tmp)
        with pytest.raises(case.exc) as err:
            self.targets[case.target].call(reference, args)
        assert type(err.value) is case.exc
        before.assert_unchanged()

    def check_valid(self, name: str, tmp: Path) -> None:
        """The target's valid call succeeds (on the twin too) and changes no input;
        a given out= is written and returned."""
        needs(name)
        target = self.targets[name]
        modules = [posembed, reference] if target.twin else [posembed]
        for module in modules:
            folder = tmp / module.__name__
            folder.mkdir()
            args = target.valid(folder)
            before = Snapshot(args, folder, skip=("out",))
            out = args.get("out")
            result = target.call(module, args)
            before.assert_unchanged(new_files=True)
            if out is not None:  # the result is written into out=
                assert (result.tokens if hasattr(result, "tokens") else result) is out
                assert out.tobytes() != sentinel(out.shape, out.dtype).tobytes()


# -- two things wrong at once ----------------------------------------------------------
#
# posembed and its twin must name the same one (the arguments' kinds, shapes
# and dtypes, out= among them, before value ranges; Python ints past 64 bits
# and ids for an empty table as soon as they are read). Each family with such
# cases lists them as TWO_ERRORS: (name, call of a module, exception, text).


def small_table(rows: int = 3) -> np.ndarray:
    return np.zeros((rows, 2), np.float32)


def check_two_errors(call: Callable[[Any], Any], exc: type[Exception], text: str) -> None:
    for module in (posembed, reference):
        with pytest.raises(exc, match=text):
            call(module)

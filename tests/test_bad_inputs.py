"""The bad-input matrix: every public function, method and command against every kind of bad input.

CASES is one table. Each row names a target (a public function, a method, or a
``posembed`` command), the argument it breaks, the kind of bad input (KINDS),
the bad value, the exception it must raise and a pattern its message must
match: always the argument's name, and where it helps the bad value and what
is allowed. A target's other arguments come from its builder in TARGETS, which
gives a valid call. NOT_APPLICABLE says, per target, which kinds cannot arise
and why; the census tests hold the table to ``posembed.__all__``, the commands
of ``posembed --help`` and the kinds, so that nothing new goes unlisted.

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
import inspect
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed
from posembed import cli, reference

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


CASES: list[Case] = []


def cases_for(target: str) -> Callable[..., None]:
    def add(arg: str, kind: str, bad: Any, exc: type[BaseException], match: str, **kw: Any):
        CASES.append(Case(target, arg, kind, bad, exc, match, **kw))

    return add


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


def build(case: Case, tmp: Path) -> dict[str, Any]:
    args = TARGETS[case.target].valid(tmp)
    for key, value in case.also.items():
        args[key] = resolve(value, args)
    bad = resolve(case.bad, args)
    if bad is OMIT:
        del args[case.arg]
    else:
        args[case.arg] = bad
    return args


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
    names = {"float32": "F32", "int64": "I64"}
    header, at, data = {}, 0, b""
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
        entry = {"dtype": names[a.dtype.name], "shape": list(a.shape)}
        header[name] = {**entry, "data_offsets": [at, at + len(raw)]}
        at, data = at + len(raw), data + raw
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)
    return path


def checkpoint(tmp: Path) -> Path:
    """pos (14, 4) F32 (2 + 12 rows, or 5 + a 3x3 grid), ids (7,) I64, bias (4,) F32."""
    return write_safetensors(
        tmp / "model.safetensors",
        {"pos": table(14, 4), "ids": np.arange(7), "bias": np.ones(4, np.float32)},
    )


WINDOWS = posembed.windows(np.arange(20, dtype=np.int32), 4, step=2)  # 9 windows of 4


def lpe() -> posembed.LearnedPositionEmbedding:
    return posembed.LearnedPositionEmbedding(10, 4, seed=SEED)


LPE = posembed.LearnedPositionEmbedding


def _chunk_valid(tmp: Path) -> dict[str, Any]:
    np.save(tmp / "tokens.npy", np.arange(100, dtype=np.int32))
    (tmp / "tokens.bin").write_bytes(np.arange(100, dtype=np.uint16).tobytes())
    return {
        "input": tmp / "tokens.npy",
        "--output": tmp / "out",
        "--size": 8,
        "--step": None,
        "--overlap": None,
        "--tail": None,
        "--dtype": None,
        "--offsets": None,
        "--pad-value": None,
        "--threads": None,
        "--force": False,
        "--quiet": True,
    }


def _resize_valid(tmp: Path) -> dict[str, Any]:
    return {
        "src": checkpoint(tmp),
        "--key": "pos",
        "--length": 20,
        "--new-grid": None,
        "--grid": None,
        "--method": None,
        "--init": None,
        "--align": None,
        "--prefix": None,
        "--offset": None,
        "--seed": None,
        "--force": False,
        "--output": tmp / "out.safetensors",
    }


def _plot_valid(tmp: Path) -> dict[str, Any]:
    np.save(tmp / "table.npy", table(8, 4))
    return {
        "table": tmp / "table.npy",
        "--length": None,
        "--align": None,
        "--output": tmp / "f.png",
    }


TARGETS: dict[str, Target] = {
    "gather": function(
        "gather",
        lambda tmp: {
            "table": table(10, 4),
            "positions": np.array([[1, 2, 3], [4, 5, 9]]),
            "mode": "raise",
            "out": sentinel((2, 3, 4)),
        },
    ),
    "gather_backward": function(
        "gather_backward",
        lambda tmp: {
            "grad": table(6, 4).reshape(2, 3, 4),
            "positions": np.array([[0, 1, 4], [4, 1, 0]]),
            "length": 5,
            "out": sentinel((5, 4)),
        },
    ),
    "interpolate": function(
        "interpolate",
        lambda tmp: {
            "table": table(10, 4),
            "length": 15,
            "align": "scale",
            "out": sentinel((15, 4)),
        },
    ),
    "lerp": function(
        "lerp",
        lambda tmp: {
            "table": table(10, 4),
            "positions": np.array([[0.5, 2.0, 8.75]]),
            "out": sentinel((1, 3, 4)),
        },
    ),
    "extend": function(
        "extend",
        lambda tmp: {
            "table": table(10, 4),
            "length": 16,
            "init": "interpolate",
            "std": None,
            "seed": None,
            "align": None,
        },
    ),
    "resample_grid": function(
        "resample_grid",
        lambda tmp: {
            "table": table(1 + 9, 4),
            "grid": (3, 3),
            "new_grid": (4, 5),
            "prefix": 1,
            "method": "bicubic",
            "align": "half_pixel",
        },
    ),
    "embed": function(
        "embed",
        lambda tmp: {
            "token_table": table(20, 4),
            "token_ids": np.array([[1, 2, 3], [4, 5, 6]]),
            "pos_table": table(8, 4) * np.float32(0.5),
            "positions": None,
            "offset": 0,
            "dropout": 0.0,
            "seed": None,
            "out": sentinel((2, 3, 4)),
        },
    ),
    "dropout_mask": function("dropout_mask", lambda tmp: {"shape": (2, 3, 4), "p": 0.1, "seed": 7}),
    "windows": function(
        "windows",
        lambda tmp: {
            "tokens": np.arange(20, dtype=np.int32),
            "size": 4,
            "step": None,
            "overlap": None,
            "tail": "pad",
            "pad_value": 0,
            "offsets": None,
            "out": sentinel((5, 4), np.int32),
        },
    ),
    "stitch": function(
        "stitch",
        lambda tmp: {
            "values": table(9, 4),
            "windows": WINDOWS,
            "reduce": "mean",
            "fill": 0,
        },
    ),
    "similarity": function("similarity", lambda tmp: {"table": table(10, 4)}),
    "set_num_threads": function("set_num_threads", lambda tmp: {"n": None}, twin=False),
    "show_config": function("show_config", lambda tmp: {"file": io.StringIO()}, twin=False),
    "resize_checkpoint": function(
        "resize_checkpoint",
        lambda tmp: {
            "src": checkpoint(tmp),
            "dst": tmp / "out.safetensors",
            "key": "pos",
            "length": 20,
            "init": None,
            "align": None,
            "prefix": 0,
            "seed": None,
            "grid": None,
            "new_grid": None,
            "method": None,
            "overwrite": False,
        },
        twin=False,
    ),
    "LearnedPositionEmbedding": function(
        "LearnedPositionEmbedding",
        lambda tmp: {
            "max_seq_len": 10,
            "embed_dim": 4,
            "init_std": 0.02,
            "seed": SEED,
            "dtype": np.float32,
            "dropout": 0.1,
        },
    ),
    "LearnedPositionEmbedding.from_table": method(
        LPE,
        "from_table",
        lambda tmp: {"self": lpe(), "table": table(10, 4), "copy": True, "dropout": 0.1},
        twin=True,
    ),
    "LearnedPositionEmbedding.__call__": method(
        LPE,
        "__call__",
        lambda tmp: {
            "self": lpe(),
            "positions": np.array([[1, 2, 9]]),
            "mode": "raise",
            "out": sentinel((1, 3, 4)),
        },
        twin=True,
    ),
    "LearnedPositionEmbedding.interpolate": method(
        LPE, "interpolate", lambda tmp: {"self": lpe(), "length": 16, "align": "scale"}, twin=True
    ),
    "LearnedPositionEmbedding.extend": method(
        LPE,
        "extend",
        lambda tmp: {
            "self": lpe(),
            "length": 16,
            "init": "interpolate",
            "std": None,
            "seed": None,
            "align": None,
        },
        twin=True,
    ),
    "LearnedPositionEmbedding.embed": method(
        LPE,
        "embed",
        lambda tmp: {
            "self": lpe(),
            "token_table": table(20, 4),
            "token_ids": np.array([[1, 2, 3]]),
            "training": False,
            "seed": None,
            "offset": 0,
        },
        twin=True,
    ),
    "LearnedPositionEmbedding.windows": method(
        LPE,
        "windows",
        lambda tmp: {
            "self": lpe(),
            "tokens": np.arange(25, dtype=np.int32),
            "step": None,
            "out": sentinel((3, 10), np.int32),
        },
        twin=True,
    ),
    "Windows.owner": method(
        posembed.Windows, "owner", lambda tmp: {"self": WINDOWS, "rule": "first"}, twin=True
    ),
    "cli bench": command(
        "bench",
        valid=lambda tmp: {
            "--quick": True,
            "--repeat": 1,
            "--only": "extend",
            "--threads": None,
            "--json": tmp / "bench.json",
            "--plot": None,
            "--markdown": False,
        },
    ),
    "cli chunk": command("chunk", valid=_chunk_valid),
    "cli resize": command("resize", valid=_resize_valid),
    "cli plot similarity": command("plot", "similarity", valid=_plot_valid),
    "cli config": command("config", valid=lambda tmp: {}),
}

# Public names that are no target: they take no argument that could be bad.
NO_ARGUMENTS = {
    "config": "takes no arguments",
    "get_num_threads": "takes no arguments",
    "last_seed": "takes no arguments",
    "Windows": "a frozen dataclass holding what windows() returns; its fields are "
    "checked where they are used (Windows.owner and stitch, which have cases for a "
    "Windows built by hand)",
}
NOT_CALLABLE = {
    "reference": "the module of twins: every case whose target has a twin calls it",
    "__version__": "a string",
}

ALL_OUT = {k: "takes no out=" for k in OUT_KINDS}
# A command's output is a path: an output in the way, one that is the input (or
# holds it) and a missing folder are its cases of kind "file".
CLI_OUT = {k: "no out= array: the output is a path (kind file)" for k in OUT_KINDS}
SCALARS = "no array argument"
CHOICES_ONLY = "its only argument is a choice: any other value, whatever its type, is range"

# Per target: the kinds that cannot arise, and why.
NOT_APPLICABLE: dict[str, dict[str, str]] = {
    "gather": {
        "size": "no size argument: the result's shape is positions' shape plus d",
        "shape": "table and positions combine freely; only out= can mismatch (out_shape)",
    },
    "gather_backward": {
        "nan": "NaN and inf in grad are summed like any value, as numpy.add.at does",
    },
    "interpolate": {
        "nan": "NaN and inf in the table are values to blend (a row that copies one "
        "copies it exactly, as documented)",
        "shape": "one array in; out= can mismatch (out_shape)",
    },
    "lerp": {
        "size": "no size argument: the result's shape is positions' shape plus d",
        "shape": "table and positions combine freely; only out= can mismatch (out_shape)",
    },
    "extend": {**ALL_OUT, "shape": "one array in"},
    "resample_grid": {
        **ALL_OUT,
        "nan": "NaN and inf in the grid spread to their neighbours as in PyTorch (documented)",
    },
    "embed": {},
    "dropout_mask": {
        **ALL_OUT,
        "empty": "an empty shape is a 0-d mask and a size of 0 an empty one: both valid",
        "shape": "one shape",
    },
    "windows": {
        "shape": "one token array; offsets that do not fit it are range, out= is out_shape",
    },
    "stitch": {**ALL_OUT},
    "similarity": {
        **ALL_OUT,
        "empty": "a table of no rows has an empty (0, 0) similarity: valid",
        "nan": "NaN and inf rows give NaN similarities, as the arithmetic says",
        "size": "no size argument",
        "range": "no argument with a range",
        "shape": "one array in",
    },
    "set_num_threads": {
        **ALL_OUT,
        **{k: SCALARS for k in ("dtype", "rank", "empty", "shape")},
        "nan": "NaN is a float, refused as a type (type)",
        "range": "its range is the size check (size)",
    },
    "show_config": {
        **ALL_OUT,
        **{k: "its only argument is a stream" for k in KINDS[1:8]},
    },
    "resize_checkpoint": {
        **ALL_OUT,
        "nan": "no float argument; NaN in the table is resized like any value",
    },
    "LearnedPositionEmbedding": {
        **ALL_OUT,
        "rank": SCALARS,
        "shape": SCALARS,
    },
    "LearnedPositionEmbedding.from_table": {
        **ALL_OUT,
        "size": "every size comes from the table",
        "shape": "one array in",
    },
    "LearnedPositionEmbedding.__call__": {
        "rank": "positions may have any shape",
        "empty": "the instance has at least one row (its constructor says so); "
        "no positions is a valid, empty lookup",
        "size": "no size argument",
        "shape": "one array in besides out= (out_shape)",
    },
    "LearnedPositionEmbedding.interpolate": {
        **ALL_OUT,
        **{k: "one count and one choice; no array argument" for k in KINDS[1:5]},
        "shape": SCALARS,
    },
    "LearnedPositionEmbedding.extend": {
        **ALL_OUT,
        **{k: "counts, choices and numbers; no array argument" for k in ("dtype", "rank", "empty")},
        "shape": SCALARS,
    },
    "LearnedPositionEmbedding.embed": {
        **ALL_OUT,
        "nan": "the dropout rate is the instance's, checked by its constructor; "
        "no float argument here",
    },
    "LearnedPositionEmbedding.windows": {
        "empty": "no tokens is a valid call with no windows",
        "nan": "integers only: a NaN pad_value is a type error (posembed.windows' cases)",
        "shape": "one token array",
    },
    "Windows.owner": {
        **ALL_OUT,
        "type": CHOICES_ONLY + "; a Windows built with fields of the wrong type is dtype",
        "empty": "a Windows with no windows has an empty owner: valid",
        "nan": "integer fields only",
    },
    "cli bench": {
        **ALL_OUT,
        **{k: "no array or file input" for k in ("dtype", "rank", "shape")},
    },
    "cli chunk": {**CLI_OUT},
    "cli resize": {**CLI_OUT},
    "cli plot similarity": {
        **CLI_OUT,
        "shape": "one table; its shape is rank and empty",
    },
    "cli config": {k: "takes no arguments (an extra one is unknown)" for k in KINDS},
}


# == the table ==========================================================================

# ---- gather -----------------------------------------------------------------------------
add = cases_for("gather")
RAGGED = [[1.0], [2.0, 3.0]]
add("table", "type", RAGGED, TypeError, r"table must be an array NumPy can read .*got list")
add(
    "table",
    "type",
    np.ma.masked_array(table(10, 4)),
    TypeError,
    r"table must not be a masked array",
    twin=True,
)
add("positions", "type", [[1, None, 2]], TypeError, r"positions must be integers; got NoneType")
add("table", "dtype", np.array([[object()]] * 3), TypeError, r"table must have a fixed-size dtype")
add(
    "positions",
    "dtype",
    np.array([1.0, 2.0]),
    TypeError,
    r"positions must be integers \(int8\.\.int64, uint8\.\.uint64\); got dtype float64",
)
add(
    "positions",
    "dtype",
    np.array([True, False]),
    TypeError,
    r"positions must be integers; got a bool",
)
add("positions", "dtype", np.array([1j]), TypeError, r"positions must be integers .*complex128")
add("table", "rank", table(10, 4)[0], ValueError, r"table must be a 2-D array .*got shape \(4,\)")
add("table", "rank", table(8, 4).reshape(2, 4, 4), ValueError, r"table must be a 2-D .*\(2, 4, 4\)")
add(
    "table",
    "empty",
    np.zeros((0, 4), np.float32),
    IndexError,
    r"position 1 at positions\[0, 0\] is out of range for a table of 0 rows "
    r"\(it has no valid positions\)",
)
add(
    "table",
    "empty",
    np.zeros((0, 4), np.float32),
    IndexError,
    r"cannot gather in mode 'clip' from a table of 0 rows",
    also={"mode": "clip"},
)
add("positions", "nan", np.array([0.0, np.nan]), TypeError, r"positions must be integers")
add(
    "positions",
    "range",
    np.array([[1, 2, 3], [4, 5, 10]]),
    IndexError,
    r"position 10 at positions\[1, 2\] is out of range for a table of 10 rows "
    r"\(valid positions are 0\.\.9\)",
)
add("positions", "range", [[1, -1, 3], [1, 2, 3]], IndexError, r"position -1 at positions\[0, 1\]")
add(
    "positions",
    "range",
    [[0, 2**63, 1], [1, 2, 3]],
    IndexError,
    r"position 9223372036854775808 at positions\[0, 1\]",
)
add(
    "positions",
    "range",
    [[0, 1, 2], [2**64, 1, 3]],
    IndexError,
    r"position 18446744073709551616 at positions\[1, 0\]",
)
add(
    "positions",
    "range",
    2**64,
    IndexError,
    r"position 18446744073709551616 is out of range .*\(valid positions are 0\.\.9\)",
    also={"out": None},
)
add(
    "positions",
    "range",
    np.array([2**64 - 1], np.uint64),
    IndexError,
    r"position 18446744073709551615 at positions\[0\]",
    also={"out": None},
)
add("mode", "range", "nope", ValueError, r"mode must be 'raise', 'clip' or 'wrap'; got 'nope'")
add("mode", "range", None, ValueError, r"mode must be 'raise', 'clip' or 'wrap'; got None")


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


out_cases(add, (2, 3, 4), np.float32)
add(
    "out",
    "out_overlap",
    From(lambda a: a["table"][:6].reshape(2, 3, 4)),
    ValueError,
    r"out must not overlap table: they share memory",
)
add(
    "out",
    "out_overlap",
    sharing(
        positions=lambda b: i32(b, 0, (2, 3)),
        out=lambda b: b[:96].view(np.float32).reshape(2, 3, 4),
    ),
    ValueError,
    r"out must not overlap positions: they share memory",
)
add(
    "out",
    "out_overlap",
    # positions of another dtype: posembed converts them, and checks the caller's array too
    sharing(
        positions=lambda b: b[:6].view(np.uint8).reshape(2, 3),
        out=lambda b: b[:96].view(np.float32).reshape(2, 3, 4),
    ),
    ValueError,
    r"out must not overlap positions",
)

# ---- gather_backward --------------------------------------------------------------------
add = cases_for("gather_backward")
add("grad", "type", RAGGED, TypeError, r"grad must be an array NumPy can read")
add("positions", "type", [[0, None, 1], [1, 2, 3]], TypeError, r"positions must be integers")
add("length", "type", "5", TypeError, r"length must be an integer >= 0; got str '5'")
add("length", "type", 5.0, TypeError, r"length must be an integer >= 0; got float 5\.0")
add("length", "type", True, TypeError, r"length must be an integer >= 0; got bool True")
add("length", "type", None, TypeError, r"length must be an integer >= 0; got NoneType")
add(
    "grad",
    "dtype",
    np.ones((2, 3, 4), np.int32),
    TypeError,
    r"grad must have a float dtype \(float16, bfloat16, float32, float64\); got int32",
)
add("grad", "dtype", np.ones((2, 3, 4), np.complex64), TypeError, r"grad must have a float dtype")
add("positions", "dtype", np.zeros((2, 3)), TypeError, r"positions must be integers .*float64")
add(
    "grad",
    "rank",
    table(2, 3),
    ValueError,
    r"grad must have shape positions\.shape \+ \(d,\) = \(2, 3\) \+ \(d,\); got \(2, 3\)",
)
add("positions", "rank", np.zeros((2, 3, 1), int), ValueError, r"grad must have shape positions")
add(
    "length",
    "empty",
    0,
    IndexError,
    r"position 0 at positions\[0, 0\] is out of range for a table of 0 rows "
    r"\(length 0; it has no valid positions\)",
    also={"out": None},
)
add("length", "size", -1, ValueError, r"length must be an integer >= 0; got -1")
add(
    "length",
    "size",
    2**63,
    ValueError,
    r"length is too large: 9223372036854775808 x 4 x 4 reaches 2\^62",
)
add("length", "size", 2**64, ValueError, r"length is too large: 18446744073709551616 x 4")
add(
    "grad", "shape", table(6, 4).reshape(3, 2, 4), ValueError, r"grad must have shape .*\(3, 2, 4\)"
)
add(
    "positions",
    "range",
    [[0, 1, 5], [4, 1, 0]],
    IndexError,
    r"position 5 at positions\[0, 2\] is out of range for a table of 5 rows "
    r"\(length 5; valid positions are 0\.\.4\)",
)
add("positions", "range", [[0, 1, 2], [-1, 1, 0]], IndexError, r"position -1 at positions\[1, 0\]")
add(
    "positions",
    "range",
    [[0, 1, 2], [2**64, 1, 0]],
    IndexError,
    r"position 18446744073709551616 at positions\[1, 0\] .*\(length 5; valid positions",
)
out_cases(add, (5, 4), np.float32)
add(
    "out",
    "out_overlap",
    From(lambda a: a["grad"].reshape(-1)[:20].reshape(5, 4)),
    ValueError,
    r"out must not overlap grad: they share memory",
)
add(
    "out",
    "out_overlap",
    sharing(
        positions=lambda b: i32(b, 0, (2, 3)), out=lambda b: b[:80].view(np.float32).reshape(5, 4)
    ),
    ValueError,
    r"out must not overlap positions: they share memory",
)

# ---- interpolate ------------------------------------------------------------------------
add = cases_for("interpolate")
add("table", "type", RAGGED, TypeError, r"table must be an array NumPy can read")
add("length", "type", "15", TypeError, r"length must be a positive integer; got str '15'")
add("length", "type", 15.0, TypeError, r"length must be a positive integer; got float 15\.0")
add("length", "type", None, TypeError, r"length must be a positive integer; got NoneType None")
add("length", "type", True, TypeError, r"length must be a positive integer; got bool True")
add(
    "table",
    "dtype",
    np.ones((10, 4), np.int32),
    TypeError,
    r"table must have a float dtype \(float16, bfloat16, float32, float64\); got dtype int32",
)
add("table", "dtype", np.ones((10, 4), np.complex64), TypeError, r"table must have a float dtype")
add("table", "rank", table(10, 4)[0], ValueError, r"table must be a 2-D array of shape \(L, d\)")
add(
    "table",
    "empty",
    np.zeros((0, 4), np.float32),
    ValueError,
    r"table must have at least one row; got shape \(0, d\)",
)
add("length", "size", 0, ValueError, r"length must be a positive integer; got 0")
add("length", "size", -1, ValueError, r"length must be a positive integer; got -1")
add(
    "length",
    "size",
    2**63,
    ValueError,
    r"length is too large: 4 x 9223372036854775808 x 10 reaches 2\^62",
)
add("length", "size", 2**64, ValueError, r"length is too large: 4 x 18446744073709551616 x 10")
add(
    "align",
    "range",
    "nope",
    ValueError,
    r"align must be one of 'scale', 'half_pixel', 'corners'; got 'nope'",
)
add("align", "range", None, ValueError, r"align must be one of .*; got None")
out_cases(add, (15, 4), np.float32)


add(
    "out",
    "out_overlap",
    sharing(
        table=lambda b: f32(b, 0, (10, 4)),
        out=lambda b: b[80:320].view(np.float32).reshape(15, 4),
    ),
    ValueError,
    r"out must not overlap table: they share memory",
)
add(
    "out",
    "out_overlap",
    # a Fortran-ordered table is copied before the kernel reads it: the caller's
    # table is checked too (it was not, and out= overwrote it)
    sharing(
        table=lambda b: f32(b, 0, (4, 10)).T,
        out=lambda b: b[80:320].view(np.float32).reshape(15, 4),
    ),
    ValueError,
    r"out must not overlap table: they share memory",
)

# ---- lerp -------------------------------------------------------------------------------
add = cases_for("lerp")
add("table", "type", RAGGED, TypeError, r"table must be an array NumPy can read")
add("positions", "type", "1", TypeError, r"positions must be real numbers; got dtype <U1")
add("positions", "type", None, TypeError, r"positions must be real numbers; got dtype object")
add("positions", "type", [[0.5, "x"]], TypeError, r"positions must be real numbers")
add("table", "dtype", np.ones((10, 4), np.int64), TypeError, r"table must have a float dtype")
add(
    "positions",
    "dtype",
    np.array([True]),
    TypeError,
    r"positions must be real numbers; got dtype bool",
)
add(
    "positions",
    "dtype",
    np.array([1j]),
    TypeError,
    r"positions must be real numbers; got dtype complex",
)
add("table", "rank", np.ones(4, np.float32), ValueError, r"table must be a 2-D array")
add(
    "table",
    "empty",
    np.zeros((0, 4), np.float32),
    ValueError,
    r"position 0\.5 at positions\[0, 0\] cannot be looked up: the table has no rows",
)
for value in (np.nan, np.inf, -np.inf):
    add(
        "positions",
        "nan",
        np.array([[0.5, value, 1.0]]),
        ValueError,
        rf"position {value} at positions\[0, 1\] is not a finite number in \[0, 9\] "
        r"\(the table has 10 rows\)",
    )
add("positions", "range", np.array([[0.5, -0.5, 1.0]]), ValueError, r"position -0\.5 at positions")
add(
    "positions",
    "range",
    np.array([[0.5, 9.5, 1.0]]),
    ValueError,
    r"position 9\.5 at positions\[0, 1",
)
# a Python int past 64 bits: a real number, out of range
add(
    "positions",
    "range",
    [[0.5, 2**64, 1.0]],
    ValueError,
    r"position 1\.8446744073709552e\+19 at positions\[0, 1\] is not a finite number",
)
add("positions", "range", [[0.5, 10**400, 1.0]], ValueError, r"position inf at positions\[0, 1\]")
add(
    "positions",
    "range",
    np.array([[2**64 - 1]], np.uint64),
    ValueError,
    r"position 1\.8446744073709552e\+19 at positions\[0, 0\]",
    also={"out": None},
)
out_cases(add, (1, 3, 4), np.float32)
add(
    "out",
    "out_overlap",
    sharing(
        table=lambda b: f32(b, 0, (10, 4)),
        out=lambda b: b[140:188].view(np.float32).reshape(1, 3, 4),
    ),
    ValueError,
    r"out must not overlap table: they share memory",
)
add(
    "out",
    "out_overlap",
    # a table in another byte order is converted: the caller's table is checked too
    sharing(
        table=lambda b: f32(b, 0, (10, 4)).view(">f4"),
        out=lambda b: b[140:188].view(np.float32).reshape(1, 3, 4),
    ),
    ValueError,
    r"out must not overlap table: they share memory",
)
add(
    "out",
    "out_overlap",
    sharing(
        positions=lambda b: f32(b, 0, (1, 3)),
        out=lambda b: b[:48].view(np.float32).reshape(1, 3, 4),
    ),
    ValueError,
    r"out must not overlap positions: they share memory",
)

# ---- extend -----------------------------------------------------------------------------
add = cases_for("extend")
RANDOM = {"init": "random"}
add("table", "type", RAGGED, TypeError, r"table must be an array NumPy can read")
add("length", "type", "16", TypeError, r"length must be a positive integer; got str '16'")
add("length", "type", 16.0, TypeError, r"length must be a positive integer; got float")
add("std", "type", "0.1", TypeError, r"std must be a number >= 0; got str '0\.1'", also=RANDOM)
add("std", "type", True, TypeError, r"std must be a number >= 0; got bool True", also=RANDOM)
SEED_IS = r"seed must be None, an integer >= 0, a sequence of them, or a numpy\.random\.Generator"
add("seed", "type", "x", TypeError, SEED_IS + r"; got 'x' \(", also=RANDOM)
add("seed", "type", 1.5, TypeError, SEED_IS + r"; got 1\.5", also=RANDOM)
add("seed", "type", True, TypeError, SEED_IS + r"; got bool True", also=RANDOM)
add("table", "dtype", np.ones((10, 4), np.int32), TypeError, r"table must have a float dtype")
add("table", "rank", np.ones((2, 5, 4), np.float32), ValueError, r"table must be a 2-D array")
add("table", "empty", np.zeros((0, 4), np.float32), ValueError, r"table must have at least one row")
add("std", "nan", np.nan, ValueError, r"std must be a finite number >= 0; got nan", also=RANDOM)
add("std", "nan", np.inf, ValueError, r"std must be a finite number >= 0; got inf", also=RANDOM)
for rows in (16, 10):  # with new rows, and with none (the table is measured all the same)
    add(
        "table",
        "nan",
        np.full((10, 4), np.nan, np.float32),
        ValueError,
        r"the table's standard deviation is not finite \(it holds inf or NaN\); pass std=",
        also={**RANDOM, "length": rows},
    )
add("length", "size", 0, ValueError, r"length must be a positive integer; got 0")
add("length", "size", -1, ValueError, r"length must be a positive integer; got -1")
add("length", "size", 2**63, ValueError, r"length is too large: 4 x 9223372036854775808 x 10")
add("length", "size", 2**64, ValueError, r"length is too large: 4 x 18446744073709551616 x 10")
add(
    "length",
    "range",
    5,
    ValueError,
    r"length must be at least the table's 10 rows \(extend only grows; interpolate shrinks\); "
    r"got 5",
)
add("init", "range", "nope", ValueError, r"init must be one of 'interpolate', .*; got 'nope'")
add("init", "range", None, ValueError, r"init must be one of .*; got None")
add("align", "range", "nope", ValueError, r"align must be one of 'scale', .*; got 'nope'")
add("std", "range", -1.0, ValueError, r"std must be a finite number >= 0; got -1\.0", also=RANDOM)
add("seed", "range", -1, ValueError, SEED_IS + r"; got -1 \(", also=RANDOM)
add(
    "std",
    "combination",
    0.1,
    ValueError,
    r"std and seed apply to init='random' only; got init='tile'",
    also={"init": "tile"},
)
add("seed", "combination", 1, ValueError, r"std and seed apply to init='random' only")
add(
    "align",
    "combination",
    "corners",
    ValueError,
    r"align applies to init='interpolate' only; got init='zeros'",
    also={"init": "zeros"},
)

# ---- resample_grid ----------------------------------------------------------------------
add = cases_for("resample_grid")
PAIR = r"must be a pair \(H, W\) of positive integers"
add("table", "type", RAGGED, TypeError, r"table must be an array NumPy can read")
add("grid", "type", 9, TypeError, r"grid " + PAIR + r"; got 9")
add("grid", "type", None, TypeError, r"grid " + PAIR + r"; got None")
add("grid", "type", (3.0, 3), TypeError, r"grid\[0\] must be a positive integer; got float 3\.0")
add("grid", "type", (3, True), TypeError, r"grid\[1\] must be a positive integer; got bool True")
add("new_grid", "type", "45", TypeError, r"new_grid\[0\] must be a positive integer; got str '4'")
add("new_grid", "type", None, TypeError, r"new_grid " + PAIR + r"; got None")
add("prefix", "type", 1.0, TypeError, r"prefix must be an integer >= 0; got float 1\.0")
add("table", "dtype", np.ones((10, 4), np.int64), TypeError, r"table must have a float dtype")
add("table", "rank", np.ones((10,), np.float32), ValueError, r"table must be a 2-D array")
add("grid", "rank", (3, 3, 1), TypeError, r"grid " + PAIR + r"; got \(3, 3, 1\)")
add("new_grid", "rank", (20,), TypeError, r"new_grid " + PAIR)
add(
    "table",
    "empty",
    np.zeros((0, 4), np.float32),
    ValueError,
    r"table has 0 rows but prefix \+ H \* W = 1 \+ 3 \* 3 = 10 \(prefix 1, grid \(3, 3\)\)",
)
add("grid", "size", (0, 3), ValueError, r"grid\[0\] must be a positive integer; got 0")
add("new_grid", "size", (4, -1), ValueError, r"new_grid\[1\] must be a positive integer; got -1")
add("new_grid", "size", (2**63, 1), ValueError, r"new_grid is too large: 9223372036854775809 x 4")
add("new_grid", "size", (2**64, 1), ValueError, r"new_grid is too large: 18446744073709551617")
add("new_grid", "size", (2**31, 2**31), ValueError, r"new_grid is too large")
add(
    "grid",
    "size",
    (2**63, 1),
    ValueError,
    r"table has 10 rows but prefix \+ H \* W = .*\(prefix 1, grid \(9223372036854775808, 1\)\)",
)
add("prefix", "size", -1, ValueError, r"prefix must be an integer >= 0; got -1")
add("prefix", "size", 2**64, ValueError, r"prefix \+ H \* W = 18446744073709551616 \+ 3 \* 3")
add(
    "method",
    "range",
    "nearest",
    ValueError,
    r"method must be one of 'bilinear', 'bicubic'; got 'nearest'",
)
add("align", "range", "scale", ValueError, r"align must be one of 'half_pixel', 'corners'; got")
add(
    "prefix",
    "shape",
    2,
    ValueError,
    r"table has 10 rows but prefix \+ H \* W = 2 \+ 3 \* 3 = 11 \(prefix 2, grid \(3, 3\)\)",
)
add("grid", "shape", (2, 5), ValueError, r"prefix \+ H \* W = 1 \+ 2 \* 5 = 11 \(prefix 1, grid")

# ---- embed ------------------------------------------------------------------------------
add = cases_for("embed")
add("token_table", "type", RAGGED, TypeError, r"token_table must be an array NumPy can read")
add("token_ids", "type", [[1, None, 2]], TypeError, r"token_ids must be integers; got NoneType")
add("positions", "type", [0, "1", 2], TypeError, r"positions must be integers")
add("offset", "type", 1.0, TypeError, r"offset must be an integer >= 0; got float 1\.0")
add("offset", "type", None, TypeError, r"offset must be an integer >= 0; got NoneType None")
add("dropout", "type", "0.1", TypeError, r"dropout must be a number in \[0, 1\); got str '0\.1'")
add("dropout", "type", None, TypeError, r"dropout must be a number in \[0, 1\); got NoneType")
add("dropout", "type", True, TypeError, r"dropout must be a number in \[0, 1\); got bool True")
DROP = {"dropout": 0.1}
EMBED_SEED = r"seed must be an integer in 0\.\.2\*\*64-1 or None; got "
add("seed", "type", "1", TypeError, EMBED_SEED + r"'1'", also=DROP)
add("seed", "type", 1.5, TypeError, EMBED_SEED + r"1\.5", also=DROP)
add("seed", "type", True, TypeError, EMBED_SEED + r"True", also=DROP)
add(
    "token_table",
    "dtype",
    np.ones((20, 4), np.int32),
    TypeError,
    r"token_table must have a float dtype \(float16, bfloat16, float32, float64\); got dtype int32",
)
add(
    "pos_table",
    "dtype",
    table(8, 4, np.float64),
    TypeError,
    r"token_table and pos_table must share a dtype; got float32 and float64",
)
add("token_ids", "dtype", np.ones((2, 3)), TypeError, r"token_ids must be integers .*float64")
add("positions", "dtype", np.zeros(3), TypeError, r"positions must be integers .*float64")
add(
    "token_ids",
    "rank",
    np.ones((1, 2, 3), int),
    ValueError,
    r"token_ids must be \(T,\) or \(B, T\); got shape \(1, 2, 3\)",
)
add("token_ids", "rank", 3, ValueError, r"token_ids must be \(T,\) or \(B, T\); got shape \(\)")
add("token_table", "rank", np.ones(4, np.float32), ValueError, r"token_table must be a 2-D array")
add("pos_table", "rank", np.ones((2, 4, 4), np.float32), ValueError, r"pos_table must be a 2-D")
add("positions", "rank", np.zeros((1, 2, 3), int), ValueError, r"positions of shape \(1, 2, 3\) do")
add(
    "token_table",
    "empty",
    np.zeros((0, 4), np.float32),
    IndexError,
    r"token id 1 at token_ids\[0, 0\] is out of range for a table of 0 rows "
    r"\(token_table; it has no valid token ids\)",
)
add(
    "pos_table",
    "empty",
    np.zeros((0, 4), np.float32),
    IndexError,
    r"positions 0\.\.2 \(offset 0 \+ arange\(3\)\) go past pos_table's 0 rows \(it has no rows\)",
)
add(
    "pos_table",
    "empty",
    np.zeros((0, 4), np.float32),
    IndexError,
    r"position 0 at positions\[0\] is out of range for a table of 0 rows \(pos_table; it has",
    also={"positions": [0, 1, 2]},
)
# no ids: the positions are checked all the same
add(
    "positions",
    "empty",
    [0, 8],
    IndexError,
    r"position 8 at positions\[1\] is out of range for a table of 8 rows \(pos_table; valid",
    also={"token_ids": np.zeros((1, 0), int), "out": None},
)
add("dropout", "nan", np.nan, ValueError, r"dropout must be in \[0, 1\) .*; got nan")
add("dropout", "nan", np.inf, ValueError, r"dropout must be in \[0, 1\) .*; got inf")
add("offset", "size", -1, ValueError, r"offset must be an integer >= 0; got -1")
add(
    "offset",
    "size",
    2**63,
    IndexError,
    r"positions 9223372036854775808\.\.9223372036854775810 \(offset 9223372036854775808 "
    r"\+ arange\(3\)\) go past pos_table's 8 rows \(valid positions are 0\.\.7\)",
)
add("offset", "size", 2**64, IndexError, r"positions 18446744073709551616\.\..*offset 18446744")
add(
    "token_ids",
    "range",
    [[1, 2, 3], [4, 20, 6]],
    IndexError,
    r"token id 20 at token_ids\[1, 1\] is out of range for a table of 20 rows "
    r"\(token_table; valid token ids are 0\.\.19\)",
)
add("token_ids", "range", [[1, 2, 3], [4, -1, 6]], IndexError, r"token id -1 at token_ids\[1, 1\]")
add(
    "token_ids",
    "range",
    [[1, 2, 3], [4, 2**64, 6]],
    IndexError,
    r"token id 18446744073709551616 at token_ids\[1, 1\] .*\(token_table; valid token ids are 0",
)
add(
    "positions",
    "range",
    [0, 1, 8],
    IndexError,
    r"position 8 at positions\[2\] is out of range for a table of 8 rows "
    r"\(pos_table; valid positions are 0\.\.7\)",
)
add("positions", "range", [[0, 1, 2], [0, -1, 2]], IndexError, r"position -1 at positions\[1, 1\]")
add("offset", "range", 6, IndexError, r"positions 6\.\.8 \(offset 6 \+ arange\(3\)\) go past")
add(
    "dropout",
    "range",
    1.0,
    ValueError,
    r"dropout must be in \[0, 1\) \(a probability of dropping\)",
)
add("dropout", "range", -0.1, ValueError, r"dropout must be in \[0, 1\) .*; got -0\.1")
add("seed", "range", -1, ValueError, r"seed must be in 0\.\.2\*\*64-1; got -1", also=DROP)
add(
    "seed",
    "range",
    2**64,
    ValueError,
    r"seed must be in 0\.\.2\*\*64-1; got 18446744073709551616",
    also=DROP,
)
add(
    "pos_table",
    "shape",
    table(8, 5),
    ValueError,
    r"token_table and pos_table must share embed_dim; got 4 and 5 columns",
)
add(
    "positions",
    "shape",
    [0, 1],
    ValueError,
    r"positions of shape \(2,\) do not broadcast to token_ids' shape \(2, 3\)",
)
add(
    "offset",
    "combination",
    1,
    ValueError,
    r"give positions or offset, not both",
    also={"positions": [0, 1, 2]},
)
out_cases(add, (2, 3, 4), np.float32)
add(
    "out",
    "out_overlap",
    From(lambda a: a["token_table"][:6].reshape(2, 3, 4)),
    ValueError,
    r"out must not overlap tables: they share memory",
)
add(
    "out",
    "out_overlap",
    From(lambda a: a["pos_table"][:6].reshape(2, 3, 4)),
    ValueError,
    r"out must not overlap tables: they share memory",
)
add(
    "out",
    "out_overlap",
    # a Fortran-ordered token table is copied first: the caller's is checked too
    sharing(
        token_table=lambda b: f32(b, 0, (4, 20)).T,
        out=lambda b: b[200:296].view(np.float32).reshape(2, 3, 4),
    ),
    ValueError,
    r"out must not overlap tables: they share memory",
)
add(
    "out",
    "out_overlap",
    sharing(
        token_ids=lambda b: i32(b, 0, (2, 3)),
        out=lambda b: b[:96].view(np.float32).reshape(2, 3, 4),
    ),
    ValueError,
    r"out must not overlap indices: they share memory",
)
add(
    "out",
    "out_overlap",
    sharing(
        positions=lambda b: i32(b, 0, (3,)), out=lambda b: b[:96].view(np.float32).reshape(2, 3, 4)
    ),
    ValueError,
    r"out must not overlap indices: they share memory",
)

# ---- dropout_mask -----------------------------------------------------------------------
add = cases_for("dropout_mask")
SHAPE_IS = r"shape must be an integer or a sequence of integers; got "
add("shape", "type", 1.5, TypeError, SHAPE_IS + r"float 1\.5")
add("shape", "type", None, TypeError, SHAPE_IS + r"NoneType None")
add("shape", "type", (2.0, 3), TypeError, r"shape must be an integer >= 0; got float 2\.0")
add("shape", "type", True, TypeError, r"shape must be an integer >= 0; got bool True")
add("p", "type", "0.1", TypeError, r"p must be a number in \[0, 1\); got str '0\.1'")
add("p", "type", None, TypeError, r"p must be a number in \[0, 1\); got NoneType None")
add("seed", "type", None, TypeError, r"dropout_mask needs the seed whose mask you want")
add("seed", "type", 1.5, TypeError, EMBED_SEED + r"1\.5")
add("seed", "type", True, TypeError, EMBED_SEED + r"True")
add("shape", "dtype", np.array([2.0, 3.0]), TypeError, r"shape must be an integer >= 0; got float")
add("shape", "rank", [[2, 3]], TypeError, r"shape must be an integer >= 0; got list \[2, 3\]")
add("p", "nan", np.nan, ValueError, r"p must be in \[0, 1\) \(a probability of dropping\); got nan")
add("p", "nan", np.inf, ValueError, r"p must be in \[0, 1\) .*; got inf")
add("shape", "size", -1, ValueError, r"shape must be an integer >= 0; got -1")
add("shape", "size", (2, -1), ValueError, r"shape must be an integer >= 0; got -1")
add(
    "shape",
    "size",
    2**63,
    ValueError,
    r"shape \(9223372036854775808,\) is too large: 9223372036854775808 reaches 2\^62",
)
add("shape", "size", (2**64, 5), ValueError, r"shape \(18446744073709551616, 5\) is too large")
add("shape", "size", (5, 2**62), ValueError, r"shape \(5, 4611686018427387904\) is too large")
add("shape", "size", (2**32 + 1, 2**32), ValueError, r"shape \(4294967297, 4294967296\) is too")
add("p", "range", 1.0, ValueError, r"p must be in \[0, 1\) .*; got 1\.0")
add("p", "range", -0.1, ValueError, r"p must be in \[0, 1\) .*; got -0\.1")
add("seed", "range", -1, ValueError, r"seed must be in 0\.\.2\*\*64-1; got -1")
add("seed", "range", 2**64, ValueError, r"seed must be in 0\.\.2\*\*64-1; got 18446744073709551616")

# ---- windows ----------------------------------------------------------------------------
add = cases_for("windows")
add("tokens", "type", [[1], [2, 3]], TypeError, r"tokens must be an array NumPy can read")
add("size", "type", "4", TypeError, r"size must be a positive integer; got str '4'")
add("size", "type", 4.0, TypeError, r"size must be a positive integer; got float 4\.0")
add("size", "type", None, TypeError, r"size must be a positive integer; got NoneType None")
add("step", "type", 2.0, TypeError, r"step must be a positive integer; got float 2\.0")
add("overlap", "type", True, TypeError, r"overlap must be an integer >= 0; got bool True")
add("pad_value", "type", 1.5, TypeError, r"pad_value must be an integer; got 1\.5")
add("pad_value", "type", None, TypeError, r"pad_value must be an integer; got None")
add(
    "offsets", "type", "x", TypeError, r"offsets must be a 1-D integer array; got <U1 of shape \(\)"
)
add("tokens", "dtype", np.arange(20.0), TypeError, r"tokens must be integers; got dtype float64")
add("tokens", "dtype", np.ones(20, bool), TypeError, r"tokens must be integers; got dtype bool")
add("offsets", "dtype", [0.0, 20.0], TypeError, r"offsets must be a 1-D integer array; got float64")
add(
    "tokens",
    "rank",
    np.zeros((4, 5), np.int32),
    ValueError,
    r"tokens must be 1-D; got shape \(4, 5\)",
)
add("tokens", "rank", np.int32(3), ValueError, r"tokens must be 1-D; got shape \(\)")
add(
    "offsets",
    "rank",
    [[0, 20]],
    TypeError,
    r"offsets must be a 1-D integer array; got int64 of shape \(1, 2\)",
)
add(
    "offsets",
    "empty",
    np.zeros(0, np.int64),
    ValueError,
    r"offsets must start at 0 and end at len\(tokens\) = 20; got \[\]\.\.\[\]",
)
add("pad_value", "nan", np.nan, TypeError, r"pad_value must be an integer; got nan")
add("size", "size", 0, ValueError, r"size must be a positive integer; got 0")
add("size", "size", -1, ValueError, r"size must be a positive integer; got -1")
add("size", "size", 2**63, ValueError, r"size is too large: 9223372036854775808 x 4 reaches 2\^62")
add("size", "size", 2**64, ValueError, r"size is too large: 18446744073709551616 x 4")
add("size", "size", 2**62, ValueError, r"size is too large: 4611686018427387904 x 4")
add("step", "size", 0, ValueError, r"step must be a positive integer; got 0")
add("overlap", "size", -1, ValueError, r"overlap must be an integer >= 0; got -1")
add(
    "step",
    "size",
    2**63,
    ValueError,
    r"step must be in 1\.\.4 \(at most size, or tokens are skipped\)",
)
add("overlap", "size", 2**64, ValueError, r"overlap must be in 0\.\.3 \(less than size 4\)")
add("step", "range", 5, ValueError, r"step must be in 1\.\.4 .*; got 5")
add("overlap", "range", 4, ValueError, r"overlap must be in 0\.\.3 \(less than size 4\); got 4")
add("tail", "range", "nope", ValueError, r"tail must be one of 'pad', 'shift', 'drop'; got 'nope'")
add(
    "pad_value",
    "range",
    2**31,
    ValueError,
    r"pad_value 2147483648 does not fit int32 \(-2147483648\.\.2147483647\)",
)
add("pad_value", "range", -(2**31) - 1, ValueError, r"pad_value -2147483649 does not fit int32")
add(
    "pad_value",
    "range",
    -1,
    ValueError,
    r"pad_value -1 does not fit uint16 \(0\.\.65535\)",
    also={"tokens": np.arange(20, dtype=np.uint16), "out": None},
)
add(
    "offsets",
    "range",
    [0, 5, 3, 20],
    ValueError,
    r"offsets must not decrease; offsets\[2\] = 3 < 5",
)
add(
    "offsets",
    "range",
    np.array([0, 2**63, 20], np.uint64),
    ValueError,
    r"offsets must not decrease; offsets\[2\] = 20 < 9223372036854775808",
)
add(
    "offsets",
    "range",
    [0, 21],
    ValueError,
    r"offsets must start at 0 and end at len\(tokens\) = 20; got \[0\]\.\.\[21\]",
)
add("offsets", "range", [1, 20], ValueError, r"offsets must start at 0 and end at len\(tokens\)")
add(
    "overlap",
    "combination",
    2,
    ValueError,
    r"give step or overlap, not both \(overlap = size - step\)",
    also={"step": 2},
)
out_cases(add, (5, 4), np.int32)
add(
    "out",
    "out_overlap",
    sharing(
        tokens=lambda b: i32(b, 0, (20,)), out=lambda b: b[40:120].view(np.int32).reshape(5, 4)
    ),
    ValueError,
    r"out must not overlap tokens: they share memory",
)

# ---- stitch -----------------------------------------------------------------------------
add = cases_for("stitch")
FILLS = r"fill must be a number that fits "
INTS = {"values": np.ones((9, 4), np.int32), "reduce": "max"}
add("windows", "type", "w", TypeError, r"windows must be a posembed\.Windows; got str")
add(
    "windows",
    "type",
    # a twin's Windows: posembed takes its own only (the twin takes both, by design)
    From(lambda a: twin_of(WINDOWS)),
    TypeError,
    r"windows must be a posembed\.Windows; got Windows",
    twin=False,
)
add("values", "type", [[1.0], [2.0, 3.0]], TypeError, r"values must be an array NumPy can read")
add("fill", "type", "x", TypeError, FILLS + r"float32; got 'x'")
add("fill", "type", None, TypeError, FILLS + r"float32; got None")
add("fill", "type", [1, 2], TypeError, FILLS + r"float32; got \[1, 2\]")
# A Windows built by hand with fields that are wrong: posembed refuses it by name;
# the twin loops over whatever it is given (twin=False)
add(
    "windows",
    "dtype",
    dataclasses.replace(WINDOWS, starts=WINDOWS.starts.astype(float)),
    TypeError,
    r"windows\.starts must be a 1-D integer array; got float64 of shape \(9,\)",
    twin=False,
)
add(
    "values",
    "dtype",
    np.ones((9, 4), np.complex64),
    TypeError,
    r"values must be numbers \(bool, integer or float\); got dtype complex64",
)
add("values", "dtype", np.full((9, 4), "a"), TypeError, r"values must be numbers .*<U1")
add("values", "dtype", np.full((9, 4), None), TypeError, r"values must be numbers .*object")
add(
    "values",
    "rank",
    np.ones(9, np.float32),
    ValueError,
    r"values must have leading shape \(windows, size\) = \(9, 4\); got shape \(9,\)",
)
add(
    "windows",
    "rank",
    dataclasses.replace(WINDOWS, lengths=WINDOWS.lengths[:, None]),
    TypeError,
    r"windows\.lengths must be a 1-D integer array; got int64 of shape \(9, 1\)",
    twin=False,
)
add(
    "values",
    "empty",
    np.ones((0, 4), np.float32),
    ValueError,
    r"values must have leading shape .*\(0, 4\)",
)
add(
    "windows",
    "empty",
    dataclasses.replace(WINDOWS, doc_offsets=np.zeros(0, np.int64)),
    ValueError,
    r"windows\.doc_offsets must start at 0 and never decrease; got \[\]",
    twin=False,
)
add("fill", "nan", np.nan, TypeError, FILLS + r"int32; got nan", also=INTS)
add(
    "windows",
    "size",
    dataclasses.replace(WINDOWS, size=0),
    ValueError,
    r"windows\.size must be a positive integer; got 0",
)
add("fill", "range", 2**64, TypeError, FILLS + r"int32; got 18446744073709551616", also=INTS)
add("fill", "range", 1e300, TypeError, FILLS + r"float32; got 1e\+300")
add(
    "fill",
    "range",
    -1,
    TypeError,
    FILLS + r"uint8; got -1",
    also={"values": np.ones((9, 4), np.uint8), "reduce": "max"},
)
add(
    "reduce",
    "range",
    "nope",
    ValueError,
    r"reduce must be one of 'mean', 'sum', 'max', 'first', 'center'; got 'nope'",
)
add(
    "values",
    "shape",
    np.ones((10, 4)),
    ValueError,
    r"values must have leading shape \(windows, size\) = \(9, 4\); got shape \(10, 4\)",
)
add("values", "shape", np.ones((9, 5)), ValueError, r"values must have leading shape .*\(9, 5\)")
add(
    "windows",
    "shape",
    dataclasses.replace(WINDOWS, tokens=WINDOWS.tokens[:3]),
    ValueError,
    r"windows\.tokens has 3 rows but windows\.starts has 9 entries",
    twin=False,
)
add(
    "windows",
    "shape",
    dataclasses.replace(WINDOWS, starts=WINDOWS.starts + 100),
    ValueError,
    r"windows: window arrays do not describe these documents",
    twin=False,
)
add(
    "windows",
    "shape",
    dataclasses.replace(WINDOWS, doc_offsets=np.array([0, 14, 1])),
    ValueError,
    r"windows\.doc_offsets must start at 0 and never decrease; got \[0, 14, 1\]",
    twin=False,
)

# ---- similarity -------------------------------------------------------------------------
add = cases_for("similarity")
add("table", "type", RAGGED, TypeError, r"table must be an array NumPy can read")
add(
    "table", "type", np.ma.masked_array(table(3, 4)), TypeError, r"table must not be a masked array"
)
add(
    "table", "dtype", np.ones((3, 4), np.int32), TypeError, r"table must have a float dtype .*int32"
)
add("table", "dtype", np.array([[object()]]), TypeError, r"table must have a fixed-size dtype")
add("table", "rank", np.ones(3, np.float32), ValueError, r"table must be a 2-D array .*\(3,\)")
add("table", "rank", "x", ValueError, r"table must be a 2-D array .*got shape \(\)")

# ---- set_num_threads, show_config -------------------------------------------------------
add = cases_for("set_num_threads")
add("n", "type", "2", TypeError, r"n must be an integer or None; got str '2'")
add("n", "type", 1.5, TypeError, r"n must be an integer or None; got float 1\.5")
add("n", "type", True, TypeError, r"n must be an integer or None; got bool True")
add("n", "type", np.nan, TypeError, r"n must be an integer or None; got float nan")
THREADS = r"n must be in 1\.\.\d+ \(4 per CPU\), or None for the default; got "
for n in (0, -1, 2**63, 2**64, 10**6):
    add("n", "size", n, ValueError, THREADS + str(n))
add = cases_for("show_config")
add(
    "file",
    "type",
    3,
    TypeError,
    r"file must be a text stream \(with a write method\) or None; got int",
)
add("file", "type", "out.txt", TypeError, r"file must be a text stream .*; got str")

# ---- resize_checkpoint ------------------------------------------------------------------
add = cases_for("resize_checkpoint")
GRID = {"length": None, "new_grid": (4, 4), "prefix": 5}  # pos: 5 rows + a 3x3 grid
add("src", "type", 3, TypeError, r"src must be a path \(str or os\.PathLike\); got int")
add("dst", "type", None, TypeError, r"dst must be a path \(str or os\.PathLike\); got NoneType")
add("key", "type", 3, TypeError, r"key must be a str; got int 3")
add("key", "type", b"pos", TypeError, r"key must be a str; got bytes")
add("length", "type", "20", TypeError, r"length must be a positive integer; got str '20'")
add("prefix", "type", 1.0, TypeError, r"prefix must be an integer >= 0; got float 1\.0")
add("seed", "type", "x", TypeError, SEED_IS + r"; got 'x'", also=RANDOM)
add("new_grid", "type", 4, TypeError, r"new_grid " + PAIR + r"; got 4", also={"length": None})
add("grid", "type", 3, TypeError, r"grid " + PAIR + r"; got 3", also=GRID)
add(
    "key",
    "dtype",
    "ids",
    TypeError,
    r"'ids' has dtype I64; resizing supports F16, BF16, F32, F64",
    named="'ids'",
)
add(
    "key",
    "rank",
    "bias",
    ValueError,
    r"'bias' has shape \(4,\); a position table must be \(rows, d\)",
    named="'bias'",
)
add("key", "empty", "", ValueError, r"no tensor named '' in the checkpoint", named="tensor named")
add(
    "src",
    "empty",
    From(lambda a: (a["src"].write_bytes(b""), a["src"])[1]),
    ValueError,
    r"model\.safetensors: not a valid safetensors file: 0 bytes is too short",
    named="model.safetensors",
)
add("length", "size", 0, ValueError, r"length must be a positive integer; got 0")
add("length", "size", -1, ValueError, r"length must be a positive integer; got -1")
add("length", "size", 2**63, ValueError, r"length is too large: 4 x 9223372036854775808 x 14")
add("length", "size", 2**64, ValueError, r"length is too large: 4 x 18446744073709551616 x 14")
add("prefix", "size", -1, ValueError, r"prefix must be an integer >= 0; got -1")
add(
    "new_grid",
    "size",
    (0, 4),
    ValueError,
    r"new_grid\[0\] must be a positive integer; got 0",
    also=GRID,
)
add(
    "new_grid",
    "size",
    (2**63, 1),
    ValueError,
    r"new_grid is too large: 9223372036854775808 x",
    also=GRID,
)
add(
    "new_grid",
    "size",
    (2**64, 1),
    ValueError,
    r"new_grid is too large: 18446744073709551616",
    also=GRID,
)
add(
    "prefix",
    "range",
    14,
    ValueError,
    r"prefix must be less than the 14 rows of 'pos' \(shape \(14, 4\)\) so that position rows "
    r"remain; got 14",
)
add(
    "prefix",
    "range",
    2**64,
    ValueError,
    r"prefix must be less than the 14 rows .*18446744073709551616",
)
add("init", "range", "nope", ValueError, r"init must be one of 'interpolate', .*; got 'nope'")
add("align", "range", "nope", ValueError, r"align must be one of 'scale', .*; got 'nope'")
add(
    "method",
    "range",
    "nearest",
    ValueError,
    r"method must be one of 'bilinear', 'bicubic'",
    also=GRID,
)
add(
    "align",
    "range",
    "scale",
    ValueError,
    r"align for a grid must be 'half_pixel' or 'corners'",
    also=GRID,
)
add("seed", "range", -1, ValueError, SEED_IS + r"; got -1", also=RANDOM)
add(
    "key",
    "range",
    "nope",
    ValueError,
    r"no tensor named 'nope' in the checkpoint",
    named="tensor named",
)
add(
    "grid",
    "shape",
    (4, 4),
    ValueError,
    r"grid 4x4 has 16 cells but 'pos' has 9 position rows",
    also=GRID,
)
add(
    "new_grid",
    "shape",
    (4, 4),
    ValueError,
    r"'pos' has 12 position rows \(prefix 2 not counted\), not a square grid; give grid=",
    also={"length": None, "prefix": 2},
    named="grid=",
)
add(
    "length",
    "shape",
    10,
    ValueError,
    r"length 10 is shorter than the 14 position rows of 'pos' \(prefix 0 not counted\)",
    also={"init": "tile"},
)
add("new_grid", "combination", (4, 4), ValueError, r"give length or new_grid, not both")
add("seed", "combination", 1, ValueError, r"seed applies to init='random' only; got init=None")
add(
    "align",
    "combination",
    "corners",
    ValueError,
    r"align applies to interpolation only",
    also={"init": "zeros"},
)
add("grid", "combination", (3, 3), ValueError, r"grid and method apply to a grid resize only")
add(
    "init",
    "combination",
    "tile",
    ValueError,
    r"init and seed apply to a 1-D resize only",
    also=GRID,
)
add("length", "combination", None, TypeError, r"give length \(position rows\) or new_grid")
add(
    "src",
    "file",
    From(lambda a: a["src"].parent / "nope.safetensors"),
    FileNotFoundError,
    r"nope\.safetensors: no such file",
    named="nope.safetensors",
)
add(
    "src",
    "file",
    From(lambda a: a["src"].parent),
    FileNotFoundError,
    r": is a folder, not a file",
    named="folder",
)
add(
    "dst",
    "file",
    From(lambda a: (a["dst"].write_bytes(b"precious"), a["dst"])[1]),
    FileExistsError,
    r"out\.safetensors exists; pass overwrite=True to replace it",
    named="out.safetensors",
)
add(
    "dst",
    "file",
    From(lambda a: a["src"].parent),
    IsADirectoryError,
    r"output .* is a folder; give a file path",
    named="output",
)
add(
    "dst",
    "file",
    From(lambda a: a["src"].parent / "missing" / "out.safetensors"),
    FileNotFoundError,
    r"output folder .*missing does not exist",
    named="output",
)
add(
    "dst",
    "file",
    From(lambda a: a["src"]),
    ValueError,
    r"output .*model\.safetensors is the input file; write to a new path",
    also={"overwrite": True},
    named="output",
)

# ---- LearnedPositionEmbedding (the constructor) -----------------------------------------
add = cases_for("LearnedPositionEmbedding")
for name in ("max_seq_len", "embed_dim"):
    add(name, "type", "4", TypeError, rf"{name} must be a positive integer; got str '4'")
    add(name, "type", 4.0, TypeError, rf"{name} must be a positive integer; got float 4\.0")
    add(name, "type", None, TypeError, rf"{name} must be a positive integer; got NoneType None")
    add(name, "type", True, TypeError, rf"{name} must be a positive integer; got bool True")
    add(name, "empty", 0, ValueError, rf"{name} must be a positive integer; got 0")
    add(name, "size", -1, ValueError, rf"{name} must be a positive integer; got -1")
    for n in (2**63, 2**64):
        add(name, "size", n, ValueError, rf"max_seq_len x embed_dim = .*{n}.* is too large")
add(
    "max_seq_len",
    "size",
    2**31,
    ValueError,
    r"max_seq_len x embed_dim = 2147483648 x 2147483648",
    also={"embed_dim": 2**31},
)
add(
    "init_std", "type", None, TypeError, r"init_std must be a number >= 0 or 'scaled'; got NoneType"
)
add("init_std", "type", [0.02], TypeError, r"init_std must be a number >= 0 or 'scaled'; got list")
add("init_std", "type", True, TypeError, r"init_std must be a number >= 0 or 'scaled'; got bool")
add("dropout", "type", "x", TypeError, r"dropout must be a number in \[0, 1\); got str 'x'")
add("seed", "type", "x", TypeError, SEED_IS + r"; got 'x'")
add("seed", "type", 1.5, TypeError, SEED_IS + r"; got 1\.5")
add("seed", "type", True, TypeError, SEED_IS + r"; got bool True")
add(
    "dtype",
    "dtype",
    np.int32,
    TypeError,
    r"dtype must be one of float16, bfloat16, float32, float64; got int32",
)
add("dtype", "dtype", np.complex64, TypeError, r"dtype must be one of .*; got complex64")
add("dtype", "dtype", "nope", TypeError, r"dtype must be one of .*; got 'nope'")
add("dtype", "dtype", None, TypeError, r"dtype must be one of .*; got None")
add(
    "init_std",
    "nan",
    np.nan,
    ValueError,
    r"init_std must be a finite number >= 0 or 'scaled'; got nan",
)
add(
    "init_std",
    "nan",
    np.inf,
    ValueError,
    r"init_std must be a finite number >= 0 or 'scaled'; got inf",
)
add("dropout", "nan", np.nan, ValueError, r"dropout must be in \[0, 1\) .*; got nan")
add(
    "init_std",
    "range",
    -1.0,
    ValueError,
    r"init_std must be a finite number >= 0 or 'scaled'; got -1\.0",
)
add(
    "init_std",
    "range",
    "xavier",
    ValueError,
    r"init_std must be a number >= 0 or 'scaled'; got 'xavier'",
)
add(
    "init_std",
    "range",
    1e300,
    ValueError,
    r"init_std 1e\+300 is too large for float32: the table overflows",
)
add(
    "init_std",
    "range",
    1e6,
    ValueError,
    r"init_std 1000000\.0 is too large for float16",
    also={"dtype": np.float16},
)
add("dropout", "range", 1.0, ValueError, r"dropout must be in \[0, 1\) .*; got 1\.0")
add("seed", "range", -1, ValueError, SEED_IS + r"; got -1 \(")

# ---- LearnedPositionEmbedding.from_table ------------------------------------------------
add = cases_for("LearnedPositionEmbedding.from_table")
add("table", "type", RAGGED, TypeError, r"table must be an array NumPy can read")
add("dropout", "type", "x", TypeError, r"dropout must be a number in \[0, 1\); got str 'x'")
add(
    "table",
    "dtype",
    np.ones((10, 4), np.int32),
    TypeError,
    r"table must have a float dtype \(float16, bfloat16, float32, float64\); got dtype int32",
)
add("table", "dtype", np.array([[object()]]), TypeError, r"table must have a fixed-size dtype")
add("table", "rank", np.ones(4, np.float32), ValueError, r"table must be a 2-D array .*\(4,\)")
add(
    "table",
    "empty",
    np.zeros((0, 4), np.float32),
    ValueError,
    r"table must have at least one row and one column; got shape \(0, 4\)",
)
add(
    "table",
    "empty",
    np.zeros((4, 0), np.float32),
    ValueError,
    r"table must have at least one row and one column",
)
add("dropout", "nan", np.nan, ValueError, r"dropout must be in \[0, 1\) .*; got nan")
add("dropout", "range", 1.0, ValueError, r"dropout must be in \[0, 1\) .*; got 1\.0")

# ---- LearnedPositionEmbedding.__call__ --------------------------------------------------
add = cases_for("LearnedPositionEmbedding.__call__")
add("positions", "type", [[1, None, 2]], TypeError, r"positions must be integers; got NoneType")
add(
    "positions",
    "dtype",
    np.array([[1.0, 2.0, 3.0]]),
    TypeError,
    r"positions must be integers .*float64",
)
add("positions", "nan", np.array([[1.0, np.nan, 3.0]]), TypeError, r"positions must be integers")
add(
    "positions",
    "range",
    [[1, 2, 10]],
    IndexError,
    r"position 10 at positions\[0, 2\] is out of range for a table of 10 rows "
    r"\(valid positions are 0\.\.9\)",
)
add(
    "positions", "range", [[1, 2**64, 3]], IndexError, r"position 18446744073709551616 at positions"
)
add("mode", "range", "nope", ValueError, r"mode must be 'raise', 'clip' or 'wrap'; got 'nope'")
out_cases(add, (1, 3, 4), np.float32)
# (the twin's instance has a table of its own: twin=False)
add(
    "out",
    "out_overlap",
    From(lambda a: a["self"].embeddings[:3].reshape(1, 3, 4)),
    ValueError,
    r"out must not overlap table: they share memory",
    twin=False,
)

# ---- LearnedPositionEmbedding.interpolate, .extend --------------------------------------
add = cases_for("LearnedPositionEmbedding.interpolate")
add("length", "type", "16", TypeError, r"length must be a positive integer; got str '16'")
add("length", "size", 0, ValueError, r"length must be a positive integer; got 0")
add("length", "size", 2**63, ValueError, r"length is too large: 4 x 9223372036854775808 x 10")
add("length", "size", 2**64, ValueError, r"length is too large: 4 x 18446744073709551616 x 10")
add("align", "range", "nope", ValueError, r"align must be one of 'scale', .*; got 'nope'")
add = cases_for("LearnedPositionEmbedding.extend")
add("length", "type", 16.0, TypeError, r"length must be a positive integer; got float 16\.0")
add("std", "type", "1", TypeError, r"std must be a number >= 0; got str '1'", also=RANDOM)
add("seed", "type", "x", TypeError, SEED_IS + r"; got 'x'", also=RANDOM)
add("std", "nan", np.nan, ValueError, r"std must be a finite number >= 0; got nan", also=RANDOM)
add("length", "size", -1, ValueError, r"length must be a positive integer; got -1")
add("length", "size", 2**63, ValueError, r"length is too large: 4 x 9223372036854775808 x 10")
add("length", "range", 9, ValueError, r"length must be at least the table's 10 rows .*; got 9")
add("init", "range", "nope", ValueError, r"init must be one of .*; got 'nope'")
add("seed", "range", -1, ValueError, SEED_IS + r"; got -1", also=RANDOM)
add("std", "combination", 0.1, ValueError, r"std and seed apply to init='random' only")

# ---- LearnedPositionEmbedding.embed -----------------------------------------------------
add = cases_for("LearnedPositionEmbedding.embed")
TRAIN = {"training": True}
add("training", "type", "yes", TypeError, r"training must be True or False; got 'yes'")
add("training", "type", None, TypeError, r"training must be True or False; got None")
add("token_table", "type", RAGGED, TypeError, r"token_table must be an array NumPy can read")
add("token_ids", "type", [[1, None]], TypeError, r"token_ids must be integers; got NoneType")
add("offset", "type", 1.0, TypeError, r"offset must be an integer >= 0; got float 1\.0")
add("seed", "type", "1", TypeError, EMBED_SEED + r"'1'", also=TRAIN)
add(
    "token_table",
    "dtype",
    table(20, 4, np.float64),
    TypeError,
    r"token_table and pos_table must share a dtype; got float64 and float32",
)
add("token_ids", "dtype", np.ones((1, 3)), TypeError, r"token_ids must be integers .*float64")
add(
    "token_ids",
    "rank",
    np.ones((1, 1, 3), int),
    ValueError,
    r"token_ids must be \(T,\) or \(B, T\)",
)
add(
    "token_table",
    "empty",
    np.zeros((0, 4), np.float32),
    IndexError,
    r"token id 1 at token_ids\[0, 0\] is out of range for a table of 0 rows \(token_table;",
)
add("offset", "size", -1, ValueError, r"offset must be an integer >= 0; got -1")
add(
    "offset",
    "size",
    2**63,
    IndexError,
    r"positions 9223372036854775808\.\.9223372036854775810 \(offset",
)
add("token_ids", "range", [[1, 20, 3]], IndexError, r"token id 20 at token_ids\[0, 1\]")
add(
    "offset",
    "range",
    8,
    IndexError,
    r"positions 8\.\.10 \(offset 8 \+ arange\(3\)\) go past pos_table's 10 rows "
    r"\(valid positions are 0\.\.9\)",
)
add("seed", "range", -1, ValueError, r"seed must be in 0\.\.2\*\*64-1; got -1", also=TRAIN)
add(
    "token_table",
    "shape",
    table(20, 5),
    ValueError,
    r"token_table and pos_table must share embed_dim; got 5 and 4 columns",
)

# ---- LearnedPositionEmbedding.windows ---------------------------------------------------
add = cases_for("LearnedPositionEmbedding.windows")
add("tokens", "type", [[1], [2, 3]], TypeError, r"tokens must be an array NumPy can read")
add("step", "type", 2.5, TypeError, r"step must be a positive integer; got float 2\.5")
add("tokens", "dtype", np.arange(25.0), TypeError, r"tokens must be integers; got dtype float64")
add(
    "tokens",
    "rank",
    np.zeros((5, 5), np.int32),
    ValueError,
    r"tokens must be 1-D; got shape \(5, 5\)",
)
add("step", "size", 0, ValueError, r"step must be a positive integer; got 0")
add("step", "size", 2**64, ValueError, r"step must be in 1\.\.10 \(at most size")
add(
    "step",
    "range",
    11,
    ValueError,
    r"step must be in 1\.\.10 \(at most size, or tokens are skipped\); got 11",
)
add("stride", "unknown", 2, TypeError, r"windows\(\) got an unexpected keyword argument 'stride'")
out_cases(add, (3, 10), np.int32)
add(
    "out",
    "out_overlap",
    sharing(
        tokens=lambda b: i32(b, 0, (25,)), out=lambda b: b[40:160].view(np.int32).reshape(3, 10)
    ),
    ValueError,
    r"out must not overlap tokens: they share memory",
)

# ---- Windows.owner ----------------------------------------------------------------------
add = cases_for("Windows.owner")
RULES = r"rule must be one of 'first', 'center'; got "
add("rule", "range", "nope", ValueError, RULES + r"'nope'")
add("rule", "range", "mean", ValueError, RULES + r"'mean'")
add("rule", "range", None, ValueError, RULES + r"None")
add("rule", "range", 1, ValueError, RULES + r"1")
# A Windows built by hand (the twin loops over whatever it is given: no twin)
HAND = {"twin": False, "named": "windows"}
add(
    "self",
    "dtype",
    dataclasses.replace(WINDOWS, starts=WINDOWS.starts.astype(float)),
    TypeError,
    r"windows\.starts must be a 1-D integer array; got float64",
    **HAND,
)
add(
    "self",
    "dtype",
    dataclasses.replace(WINDOWS, documents=None),
    TypeError,
    r"windows\.documents must be a 1-D integer array; got object of shape \(\)",
    **HAND,
)
add(
    "self",
    "rank",
    dataclasses.replace(WINDOWS, starts=WINDOWS.starts[:, None]),
    TypeError,
    r"windows\.starts must be a 1-D integer array; got int64 of shape \(9, 1\)",
    **HAND,
)
add(
    "self",
    "size",
    dataclasses.replace(WINDOWS, size=0),
    ValueError,
    r"windows\.size must be a positive integer; got 0",
    **HAND,
)
add(
    "self",
    "size",
    dataclasses.replace(WINDOWS, size=4.0),
    TypeError,
    r"windows\.size must be a positive integer; got float 4\.0",
    **HAND,
)
add(
    "self",
    "range",
    dataclasses.replace(WINDOWS, starts=WINDOWS.starts + 100),
    ValueError,
    r"windows: window arrays do not describe these documents",
    **HAND,
)
add(
    "self",
    "range",
    dataclasses.replace(WINDOWS, doc_offsets=np.array([5, 20])),
    ValueError,
    r"windows\.doc_offsets must start at 0 and never decrease; got \[5, 20\]",
    **HAND,
)
add(
    "self",
    "shape",
    dataclasses.replace(WINDOWS, tokens=WINDOWS.tokens[:0]),
    ValueError,
    r"windows\.tokens has 0 rows but windows\.starts has 9 entries",
    **HAND,
)
add(
    "self",
    "shape",
    dataclasses.replace(WINDOWS, lengths=WINDOWS.lengths[:-1]),
    ValueError,
    r"windows: inconsistent window arrays",
    **HAND,
)

# ---- posembed bench ---------------------------------------------------------------------
add = cases_for("cli bench")
add("--repeat", "type", "x", UsageError, r"argument --repeat: invalid _repeat value: 'x'")
add("--threads", "type", "1,x", UsageError, r"argument --threads: must be a count or a comma list")
add("--repeat", "nan", "nan", UsageError, r"argument --repeat: invalid _repeat value: 'nan'")
add("--only", "empty", "", UsageError, r"--only: no kernel in ''; choose from gather,")
add("--only", "empty", ",", UsageError, r"--only: no kernel in ','")
add("--threads", "empty", "", UsageError, r"argument --threads: must be a count or a comma list")
add("--repeat", "size", 0, UsageError, r"argument --repeat: must be at least 1; got 0")
add("--repeat", "size", -1, UsageError, r"argument --repeat: must be at least 1; got -1")
add(
    "--repeat",
    "size",
    2**63,
    UsageError,
    r"argument --repeat: must be at most 1000; got 9223372036854775808",
)
add("--repeat", "size", 2**64, UsageError, r"argument --repeat: must be at most 1000")
add(
    "--threads",
    "size",
    "0,2",
    UsageError,
    r"argument --threads: counts must be at least 1; got '0,2'",
)
add(
    "--threads",
    "size",
    2**63,
    CommandError,
    r"--threads: n must be in 1\.\.\d+ .*; got 9223372036854775808",
)
add(
    "--threads",
    "size",
    f"1,{2**64}",
    CommandError,
    r"--threads: n must be in 1\.\.\d+ .*18446744073709551616",
)
add("--only", "range", "nope", UsageError, r"--only: unknown kernel 'nope'; choose from gather,")
add(
    "--json",
    "file",
    From(lambda a: a["--json"].parent / "no" / "bench.json"),
    CommandError,
    r"--json .*bench\.json: folder .*no does not exist",
)
add(
    "--json",
    "file",
    From(lambda a: a["--json"].parent),
    CommandError,
    r"--json .* is a folder; give a file path",
)
add(
    "--plot",
    "file",
    From(lambda a: a["--json"].parent / "no" / "bench.png"),
    CommandError,
    r"--plot .*bench\.png: folder .*no does not exist",
    needs="matplotlib",
)
add("--bogus", "unknown", True, UsageError, r"unrecognized arguments: --bogus")

# ---- posembed chunk ---------------------------------------------------------------------
add = cases_for("cli chunk")
RAW = {"input": From(lambda a: a["input"].parent / "tokens.bin")}


def saved(name: str, array: np.ndarray, key: str = "input") -> From:
    def build(args: dict[str, Any]) -> Path:
        path = args[key].parent / name
        np.save(path, array)
        return path

    return From(build)


add("--size", "type", "x", UsageError, r"argument --size: invalid int value: 'x'")
add("--size", "type", 1.5, UsageError, r"argument --size: invalid int value: '1\.5'")
add("--pad-value", "type", "x", UsageError, r"argument --pad-value: invalid int value: 'x'")
add("--threads", "type", "x", UsageError, r"argument --threads: invalid _positive value: 'x'")
add(
    "input",
    "dtype",
    saved("floats.npy", np.zeros(10)),
    CommandError,
    r"floats\.npy: tokens must be a 1-D integer array; got float64 of shape \(10,\)",
    named="floats.npy",
)
add(
    "--dtype",
    "dtype",
    "float32",
    CommandError,
    r"--dtype must be an integer type; got float32",
    also=RAW,
)
add(
    "--offsets",
    "dtype",
    saved("offsets.npy", np.array([0.0, 100.0])),
    CommandError,
    r"--offsets .*offsets\.npy: offsets must be a 1-D integer array; got float64",
)
add(
    "input",
    "rank",
    saved("square.npy", np.zeros((10, 10), np.int32)),
    CommandError,
    r"square\.npy: tokens must be a 1-D integer array; got int32 of shape \(10, 10\)",
    named="square.npy",
)
add(
    "input",
    "empty",
    From(lambda a: (a["input"].write_bytes(b""), a["input"])[1]),
    CommandError,
    r"tokens\.npy: not a readable \.npy file \(it is empty\)",
    named="tokens.npy",
)
add(
    "--offsets",
    "empty",
    From(
        lambda a: (
            a["input"].with_name("offsets.npy").write_bytes(b""),
            a["input"].with_name("offsets.npy"),
        )[1]
    ),
    CommandError,
    r"--offsets .*offsets\.npy: not a readable \.npy file \(it is empty\)",
)
add(
    "--offsets",
    "empty",
    saved("offsets.npy", np.zeros(0, np.int64)),
    CommandError,
    r"--offsets .*: offsets must start at 0 and end at len\(tokens\) = 100; got \[\]\.\.\[\]",
)
add("--size", "nan", "nan", UsageError, r"argument --size: invalid int value: 'nan'")
add("--size", "size", 0, CommandError, r"--size must be a positive integer; got 0")
add("--size", "size", -1, CommandError, r"--size must be a positive integer; got -1")
for n in (2**59, 2**62, 2**63, 2**64):
    add(
        "--size",
        "size",
        n,
        CommandError,
        rf"--size {n} is too large: a window must stay below 2\^59",
    )
add("--step", "size", 0, CommandError, r"step must be a positive integer; got 0")
add("--overlap", "size", -1, CommandError, r"overlap must be an integer >= 0; got -1")
add("--threads", "size", 0, UsageError, r"argument --threads: must be at least 1; got 0")
add(
    "--threads",
    "size",
    2**63,
    CommandError,
    r"--threads: n must be in 1\.\.\d+ .*; got 9223372036854775808",
)
add(
    "--threads",
    "size",
    2**64,
    CommandError,
    r"--threads: n must be in .*; got 18446744073709551616",
)
add(
    "--step",
    "range",
    9,
    CommandError,
    r"step must be in 1\.\.8 \(at most size, or tokens are skipped\); got 9",
)
add("--overlap", "range", 8, CommandError, r"overlap must be in 0\.\.7 \(less than size 8\); got 8")
add("--tail", "range", "nope", UsageError, r"argument --tail: invalid choice: 'nope'")
add("--pad-value", "range", 2**31, CommandError, r"--pad-value 2147483648 does not fit int32")
add(
    "--pad-value",
    "range",
    -1,
    CommandError,
    r"--pad-value -1 does not fit uint16",
    also=RAW | {"--dtype": "uint16"},
)
add("--dtype", "range", "nope", CommandError, r"--dtype 'nope' is not a NumPy dtype", also=RAW)
add(
    "--offsets",
    "range",
    saved("offsets.npy", np.array([0, 50, 40, 100])),
    CommandError,
    r"--offsets .*offsets must not decrease; offsets\[2\] = 40 < 50",
)
add(
    "--offsets",
    "shape",
    saved("offsets.npy", np.array([0, 50, 101])),
    CommandError,
    r"--offsets .*offsets must start at 0 and end at len\(tokens\) = 100; got \[0\]\.\.\[101\]",
)
add(
    "--dtype",
    "combination",
    "uint64",
    CommandError,
    r"--dtype applies to raw token files; a \.npy file names its own",
)
add(
    "--dtype",
    "dtype",
    "V3",
    CommandError,
    r"--dtype must be an integer type; got \|V3",
    also=RAW,
)
add(
    "input",
    "shape",
    From(
        lambda a: (
            a["input"].with_suffix(".bin").write_bytes(bytes(201)),
            a["input"].with_suffix(".bin"),
        )[1]
    ),
    CommandError,
    r"tokens\.bin: 201 bytes is not a whole number of uint16 tokens \(2 bytes each\)",
    also={"--dtype": "uint16"},
    named="tokens.bin",
)
add(
    "--overlap",
    "combination",
    2,
    UsageError,
    r"argument --overlap: not allowed with argument --step",
    also={"--step": 2},
)
add(
    "--dtype",
    "combination",
    None,
    CommandError,
    r"tokens\.bin: a raw token file needs --dtype \(e\.g\. uint16\)",
    also=RAW,
)
add(
    "input",
    "file",
    From(lambda a: a["input"].parent / "missing.npy"),
    CommandError,
    r"missing\.npy: no such file",
    named="missing.npy",
)
add(
    "--output",
    "file",
    From(lambda a: (a["--output"].mkdir(), a["--output"])[1]),
    CommandError,
    r"out exists; pass --force to replace it",
    named="out",
)
# --force would have replaced the input with the windows
add(
    "--output",
    "file",
    From(lambda a: a["input"]),
    CommandError,
    r"output .*tokens\.npy would replace the input .*tokens\.npy; write to a new path",
    also={"--force": True},
)
# a folder that holds the input
add(
    "--output",
    "file",
    From(lambda a: a["input"].parent),
    CommandError,
    r"output .* would replace the input .*tokens\.npy",
    also={"--force": True},
)
add(
    "--output",
    "file",
    saved("offsets.npy", np.array([0, 100])),
    CommandError,
    r"output .*offsets\.npy would replace the input .*offsets\.npy",
    also={"--force": True, "--offsets": From(lambda a: a["input"].parent / "offsets.npy")},
)
add("--size", "unknown", OMIT, UsageError, r"the following arguments are required: --size")
add("--bogus", "unknown", True, UsageError, r"unrecognized arguments: --bogus")

# ---- posembed resize --------------------------------------------------------------------
add = cases_for("cli resize")
CLI_GRID = {"--length": None, "--new-grid": "4x4", "--prefix": 5}
add("--length", "type", "x", UsageError, r"argument --length: invalid _positive value: 'x'")
add(
    "--seed",
    "type",
    "x",
    UsageError,
    r"argument --seed: invalid int value: 'x'",
    also={"--init": "random"},
)
add("--prefix", "type", 1.5, UsageError, r"argument --prefix: invalid _non_negative value: '1\.5'")
add(
    "--new-grid",
    "type",
    "x",
    UsageError,
    r"argument --new-grid: must be HEIGHTxWIDTH such as 24x24; got 'x'",
    also={"--length": None},
)
add(
    "--key",
    "dtype",
    "ids",
    CommandError,
    r"'ids' has dtype I64; resizing supports F16, BF16, F32, F64",
    named="'ids'",
)
add(
    "--key",
    "rank",
    "bias",
    CommandError,
    r"'bias' has shape \(4,\); a position table must be",
    named="'bias'",
)
add(
    "--key",
    "empty",
    "",
    CommandError,
    r"no tensor named '' in the checkpoint",
    named="tensor named",
)
add(
    "src",
    "empty",
    From(lambda a: (a["src"].write_bytes(b""), a["src"])[1]),
    CommandError,
    r"model\.safetensors: not a valid safetensors file: 0 bytes is too short",
    named="model.safetensors",
)
add("--length", "nan", "nan", UsageError, r"argument --length: invalid _positive value: 'nan'")
add("--length", "size", 0, UsageError, r"argument --length: must be at least 1; got 0")
add("--length", "size", -1, UsageError, r"argument --length: must be at least 1; got -1")
add("--length", "size", 2**63, CommandError, r"length is too large: 4 x 9223372036854775808 x 14")
add("--length", "size", 2**64, CommandError, r"length is too large: 4 x 18446744073709551616 x 14")
add("--prefix", "size", -1, UsageError, r"argument --prefix: must be at least 0; got -1")
add(
    "--new-grid",
    "size",
    "0x4",
    UsageError,
    r"argument --new-grid: height and width must be at least 1; got '0x4'",
    also=CLI_GRID,
)
add(
    "--new-grid",
    "size",
    f"{2**63}x1",
    CommandError,
    r"new_grid is too large: 9223372036854775808 x 4",
    also=CLI_GRID,
)
add(
    "--new-grid",
    "size",
    f"{2**64}x2",
    CommandError,
    r"new_grid is too large: 36893488147419103232 x 4",
    also=CLI_GRID,
)
add("--prefix", "range", 14, CommandError, r"prefix must be less than the 14 rows of 'pos'")
add(
    "--prefix",
    "range",
    2**64,
    CommandError,
    r"prefix must be less than the 14 rows .*18446744073709551616",
)
add("--init", "range", "nope", UsageError, r"argument --init: invalid choice: 'nope'")
add("--align", "range", "nope", UsageError, r"argument --align: invalid choice: 'nope'")
add(
    "--method",
    "range",
    "nearest",
    UsageError,
    r"argument --method: invalid choice: 'nearest'",
    also=CLI_GRID,
)
add(
    "--align",
    "range",
    "scale",
    CommandError,
    r"align for a grid must be 'half_pixel' or 'corners'",
    also=CLI_GRID,
)
add("--seed", "range", -1, CommandError, SEED_IS + r"; got -1", also={"--init": "random"})
add(
    "--key",
    "range",
    "nope",
    CommandError,
    r"no tensor named 'nope' in the checkpoint",
    named="tensor named",
)
add(
    "--grid",
    "shape",
    "4x4",
    CommandError,
    r"grid 4x4 has 16 cells but 'pos' has 9 position rows",
    also=CLI_GRID,
)
add(
    "--length",
    "shape",
    10,
    CommandError,
    r"length 10 is shorter than the 14 position rows",
    also={"--init": "tile"},
)
add(
    "--new-grid",
    "combination",
    "4x4",
    UsageError,
    r"give --length T \(position rows\) or --new-grid HxW",
)
add(
    "--length",
    "combination",
    None,
    UsageError,
    r"give --length T \(position rows\) or --new-grid HxW",
)
add(
    "--offset",
    "combination",
    2,
    UsageError,
    r"argument --offset: not allowed with argument --prefix",
    also={"--prefix": 2},
)
add("--seed", "combination", 1, CommandError, r"seed applies to init='random' only; got init=None")
add(
    "src",
    "file",
    From(lambda a: a["src"].parent / "nope.safetensors"),
    CommandError,
    r"nope\.safetensors: no such file",
    named="nope.safetensors",
)
add(
    "--output",
    "file",
    From(lambda a: (a["--output"].write_bytes(b"precious"), a["--output"])[1]),
    CommandError,
    r"out\.safetensors exists; pass --force to replace it",
    named="out.safetensors",
)
add(
    "--output",
    "file",
    From(lambda a: a["src"]),
    CommandError,
    r"output .*model\.safetensors is the input file; write to a new path",
    also={"--force": True},
)
add(
    "--output",
    "file",
    From(lambda a: a["src"].parent / "no" / "o.safetensors"),
    CommandError,
    r"output folder .*no does not exist",
)
add("--key", "unknown", OMIT, UsageError, r"the following arguments are required: --key")

# ---- posembed plot similarity -----------------------------------------------------------
# Its errors, also those found while running, stop through argparse (tests/test_plot.py).
add = cases_for("cli plot similarity")
MPL = {"needs": "matplotlib"}
add("--length", "type", "x", UsageError, r"argument --length: invalid _positive value: 'x'")
add(
    "table",
    "dtype",
    saved("ints.npy", np.zeros((4, 4), np.int32), "table"),
    UsageError,
    r"ints\.npy: table must have a float dtype .*got dtype int32",
    named="ints.npy",
)
add(
    "table",
    "dtype",
    From(lambda a: (np.save(a["table"], np.array([[None]]), allow_pickle=True), a["table"])[1]),
    UsageError,
    r"cannot read .*table\.npy: Object arrays cannot be loaded when allow_pickle=False",
)
add(
    "table",
    "rank",
    saved("flat.npy", np.zeros(5, np.float32), "table"),
    UsageError,
    r"flat\.npy: table must be a 2-D array",
    named="flat.npy",
)
add(
    "table",
    "empty",
    saved("none.npy", np.zeros((0, 4), np.float32), "table"),
    UsageError,
    r"none\.npy: table must have at least one row",
    named="none.npy",
)
add("--length", "nan", "nan", UsageError, r"argument --length: invalid _positive value: 'nan'")
add("--length", "size", 0, UsageError, r"argument --length: must be at least 1; got 0")
add(
    "--length",
    "size",
    2**63,
    UsageError,
    r"table\.npy: length is too large: 4 x 9223372036854775808 x 8",
)
add("--length", "size", 2**64, UsageError, r"length is too large: 4 x 18446744073709551616 x 8")
# 512 PiB of float32 rows: past the 2^62 check, and past any address space
add(
    "--length",
    "size",
    2**55,
    UsageError,
    r"table\.npy: not enough memory for --length 36028797018963968",
    needs=UNSANITIZED,
)
add("--align", "range", "nope", UsageError, r"argument --align: invalid choice: 'nope'")
add(
    "table",
    "file",
    From(lambda a: a["table"].parent / "nope.npy"),
    UsageError,
    r"cannot read .*nope\.npy",
    named="nope.npy",
)
add(
    "--output",
    "file",
    From(lambda a: a["table"].parent / "no" / "f.png"),
    UsageError,
    r"cannot write .*f\.png",
    named="f.png",
    **MPL,
)
add(
    "--output",
    "file",
    From(lambda a: a["table"].parent / "f.nope"),
    UsageError,
    r"table\.npy: Format 'nope' is not supported",
    named="Format",
    **MPL,
)
add("--output", "unknown", OMIT, UsageError, r"the following arguments are required: -o/--output")

# ---- posembed config --------------------------------------------------------------------
add = cases_for("cli config")
add("--bogus", "unknown", True, UsageError, r"posembed: error: unrecognized arguments: --bogus")
add("extra", "unknown", "extra", UsageError, r"unrecognized arguments: extra")
del add


# == the tests ==========================================================================


def arrays_in(value: Any) -> list[np.ndarray]:
    """The arrays an argument holds (a Windows' fields, an embedding's table)."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (posembed.Windows, reference.Windows)):
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


def case_id(case: Case) -> str:
    return f"{case.target}:{case.arg}:{case.kind}:{CASES.index(case)}"


@pytest.fixture(autouse=True)
def _thread_setting_restored():
    before = posembed.get_num_threads() if posembed.config()["num_threads_set"] else None
    yield
    posembed.set_num_threads(before)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_bad_input_is_refused_and_nothing_is_modified(case: Case, tmp_path: Path):
    needs(case)
    args = build(case, tmp_path)
    before = Snapshot(args, tmp_path)
    with pytest.raises(case.exc, match=case.match) as err:
        TARGETS[case.target].call(posembed, args)
    assert type(err.value) is case.exc
    before.assert_unchanged()


TWIN_CASES = [c for c in CASES if c.twin and TARGETS[c.target].twin]


@pytest.mark.parametrize("case", TWIN_CASES, ids=case_id)
def test_the_twin_raises_the_same_exception_type(case: Case, tmp_path: Path):
    args = build(case, tmp_path)
    before = Snapshot(args, tmp_path)
    with pytest.raises(case.exc) as err:
        TARGETS[case.target].call(reference, args)
    assert type(err.value) is case.exc
    before.assert_unchanged()


@pytest.mark.parametrize("name", list(TARGETS))
def test_valid_arguments_succeed_and_modify_no_input(name: str, tmp_path: Path):
    needs(name)
    target = TARGETS[name]
    modules = [posembed, reference] if target.twin else [posembed]
    for module in modules:
        folder = tmp_path / module.__name__
        folder.mkdir()
        args = target.valid(folder)
        before = Snapshot(args, folder, skip=("out",))
        out = args.get("out")
        result = target.call(module, args)
        before.assert_unchanged(new_files=True)
        if out is not None:  # the result is written into out=
            assert (result.tokens if hasattr(result, "tokens") else result) is out
            assert out.tobytes() != sentinel(out.shape, out.dtype).tobytes()


# -- the census: nothing public is missing from the table ------------------------------


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
    found = re.search(r"\{([\w,]+)\} \.\.\.", usage)  # a group's commands, not choices
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
    assert set(NOT_APPLICABLE) == set(TARGETS)
    assert {c.target for c in CASES} == set(TARGETS)


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


def _table(rows: int = 3) -> np.ndarray:
    return np.zeros((rows, 2), np.float32)


# Two things wrong at once: posembed and its twin must name the same one (the
# arguments' kinds, shapes and dtypes, out= among them, before value ranges;
# Python ints past 64 bits and ids for an empty table as soon as they are read).
TWO_ERRORS: list[tuple[str, Callable[[Any], Any], type[Exception], str]] = [
    ("embed", lambda m: m.embed(_table(), [[-2]], _table(), dropout=None), TypeError, "dropout"),
    (
        "embed",
        lambda m: m.embed(_table(), [9], _table(), out=np.zeros((1, 2))),
        TypeError,
        "out",
    ),
    ("embed", lambda m: m.embed(_table(0), np.array(0), _table()), ValueError, "token_ids"),
    ("embed", lambda m: m.embed(_table(0), [1], _table(), out=[]), IndexError, "token id"),
    ("embed", lambda m: m.embed(_table(), [0], _table(), offset=5, out=[]), IndexError, "past"),
    ("lerp", lambda m: m.lerp(_table(), [5.0], out=np.zeros((1, 2))), TypeError, "out"),
    (
        "gather_backward",
        lambda m: m.gather_backward(np.zeros((1, 2), np.float32), [9], 3, out=[]),
        TypeError,
        "out",
    ),
    ("gather", lambda m: m.gather(_table(), [9], out=np.zeros((1, 2))), TypeError, "out"),
    ("gather", lambda m: m.gather(_table(), [2**70], out=np.zeros((1, 2))), IndexError, "position"),
    (
        "gather_backward",
        lambda m: m.gather_backward(np.zeros((2, 2), np.float32), [2**70], 3),
        IndexError,
        "position",
    ),
]


@pytest.mark.parametrize(("name", "call", "exc", "text"), TWO_ERRORS)
def test_two_errors_at_once_give_the_same_exception_as_the_twin(name, call, exc, text):
    for module in (posembed, reference):
        with pytest.raises(exc, match=text):
            call(module)

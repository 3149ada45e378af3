#!/usr/bin/env python3
"""Fuzz every public posembed function against its NumPy twin.

Each input, a byte string, picks a public function (the file-writing ones
aside) and builds its arguments: arrays of every dtype (all integers, float16,
bfloat16, float32/64, bool, complex, object, strings, structured, non-native
byte order), of every rank from 0-d and empty up, in every layout (reversed,
stepped, transposed, Fortran, broadcast zero strides, unaligned views of byte
buffers, read-only, lists, scalars, memoryviews, DLPack producers), and
parameters from small valid values to 0, negatives, 2**31, 2**62, 2**63,
2**64, NaN, inf, strings, None and ``out=`` arrays good and bad. It then calls
posembed and ``posembed.reference`` on the same arguments (built twice, so
neither call can see what the other did) and requires:

* posembed returns what the twin returns: the same type, shape, dtype and
  bytes (as ``tests/conftest.py``'s ``assert_same``), except that NaNs may
  differ in their payload bits and ``similarity`` agrees to a tolerance
  (BLAS sums in its own order); or
* posembed raises TypeError, ValueError or IndexError, and the twin raises
  the same kind;

and in both cases posembed leaves its inputs unchanged, an ``out=`` it refused
untouched, and returns ``out`` itself when it accepted one. Anything else
(another exception type, a mismatch, a changed input) raises
:class:`FuzzFailure`; a crash or a hang ends the process (libFuzzer's
``-timeout=``, or ``faulthandler`` without atheris). Discrepancies already
reported are listed in ``KNOWN_BUGS`` and tolerated until fixed.

Sizes are small (arrays of a few KB) or reach 2**62: nothing in between, so
MemoryError is never an allowed outcome. A size of 2**62 or more must be
refused before any allocation (posembed's documented guard): with ValueError,
or with the error the twin gives for the other arguments once that size is
replaced by a small one; the twin never gets the huge size itself (its plain
loops would run for ever).

The decoding of bytes into a call is this file's own (:class:`Reader`), not
``atheris.FuzzedDataProvider``: so one input is the same call with or without
atheris, a crash file from either engine reproduces in the other, and the test
suite's fixed corpus means the same calls everywhere.

Two more modes take other inputs (``--mode``, default ``calls``, the above):
``--mode race`` runs the window kernels (windows with offsets, Windows.owner,
stitch with every reduce, window_layout, WindowLayout.cut with and without a
range, and posembed.dask's block functions) while a writer thread rewrites
their arrays with hostile values; each call must return or raise TypeError,
ValueError or IndexError, and the process survive. ``--mode files`` feeds
crafted safetensors headers, ``.npy`` headers, parted outputs, Hugging Face
model folders (config.json, shards and their index) and Arrow / Parquet
corpora (Parquet files and folders, IPC files and streams, save_to_disk
folders) to the public readers and commands; each must accept a valid file
(a resized folder loads, with the table's new shape and config.json's field;
Arrow windows equal those of the ``.npy`` path) and refuse a crafted one with
a documented exception (exit 2 and one line from the command), never read
outside its folder or block on a FIFO. Both end with the counts per
kernel or reader after the summary.

Usage::

    python fuzz/fuzz_posembed.py --seconds 60            # atheris if installed, else plain
    python fuzz/fuzz_posembed.py --seconds 60 --engine plain --seed 3
    python fuzz/fuzz_posembed.py crash-1a2b...           # rerun saved inputs
    python fuzz/fuzz_posembed.py -v --runs 20000         # and count the outcomes per call
    python fuzz/fuzz_posembed.py --mode race --seconds 30
    python fuzz/fuzz_posembed.py --mode files --seconds 30 --engine plain
    python fuzz/fuzz_posembed.py --engine atheris -- -max_len=1024 corpus/   # libFuzzer flags

Both engines end with one line, ``fuzz: N inputs in S s, no failures``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import faulthandler
import gc
import hashlib
import io
import itertools
import json
import math
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

try:
    import atheris
except ImportError:  # the plain driver needs only NumPy
    atheris = None

try:
    import ml_dtypes
except ImportError:  # bfloat16 cases are then left out
    ml_dtypes = None

import posembed
from posembed import _core, _safetensors, cli, reference
from posembed._windows import OWNER_RULES, REDUCES
from posembed.chunk import ChunkError, chunk_file

# the twin's PackPlan (posembed.reference.pack is also the name of its pack function)
reference_pack = sys.modules[reference.pack.__module__]

try:
    from posembed.dask import compute as dask_compute
    from posembed.dask import read_parts
except ImportError:  # the race and files modes then leave posembed.dask out
    dask_compute = None
    read_parts = None

safetensors_numpy: Any
try:
    import safetensors.numpy as safetensors_numpy
except ImportError:  # the files mode then leaves model folders out
    safetensors_numpy = None

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:  # the files mode then leaves Arrow and Parquet input out
    pa = None
    pq = None

try:
    import matplotlib  # noqa: F401

    plot_available = True
except ImportError:  # posembed plot is then left out of the files mode
    plot_available = False

ALLOWED = (TypeError, ValueError, IndexError)
NAN, INF = float("nan"), float("inf")
SMALL_RESULT = 1 << 20  # bytes: what a huge-size call may still return (an empty window set)
HUGE = 2**62  # sizes from here on must be refused (posembed's guard, _validate.MAX_PRODUCT)


class FuzzFailure(AssertionError):
    """The property failed: the message says which call and how."""


# ---------------------------------------------------------------- decoding


class Reader:
    """Turns fuzz bytes into choices; past the end every choice is its first option,
    so a shorter input is a simpler call (which libFuzzer's minimisation likes)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def int(self, lo: int, hi: int) -> int:
        """An integer in lo..hi (hi < lo gives lo)."""
        span = hi - lo
        if span <= 0:
            return lo
        raw = 0
        for _ in range((span.bit_length() + 7) // 8):
            raw = raw << 8 | self.byte()
        return lo + raw % (span + 1)

    def chance(self, n: int) -> bool:
        """True with probability 1/n."""
        return self.int(0, n - 1) == 0

    def pick(self, options: Any) -> Any:
        return options[self.int(0, len(options) - 1)]

    def rng(self) -> np.random.Generator:
        """A generator for bulk content (array values), seeded from 4 bytes."""
        return np.random.default_rng(self.int(0, 2**32 - 1))


# ---------------------------------------------------------------- value pools

INT_DTYPES = [np.dtype(c) for c in ("i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8")]
INT_DTYPES += [np.dtype(c) for c in (">i2", ">i4", ">u8")]
FLOAT_DTYPES = [np.dtype(c) for c in ("f2", "f4", "f8", ">f2", ">f4", ">f8")]
OTHER_DTYPES = [
    np.dtype(np.bool_),
    np.dtype(np.complex64),
    np.dtype(np.complex128),
    np.dtype(object),
    np.dtype("S3"),  # odd item size
    np.dtype([("a", "<i4"), ("b", "<f2")]),  # structured, 6 bytes
    np.dtype("M8[ns]"),
]
if ml_dtypes is not None:
    FLOAT_DTYPES.append(np.dtype(ml_dtypes.bfloat16))
    OTHER_DTYPES.append(np.dtype(ml_dtypes.float8_e4m3fn))
TABLE_FLOATS = [d for d in FLOAT_DTYPES if d.isnative]  # what the float kernels take as is
ALL_DTYPES = INT_DTYPES + FLOAT_DTYPES + OTHER_DTYPES

SPECIAL_FLOATS = [NAN, -NAN, INF, -INF, 0.0, -0.0, 5e-324, 1e-40, 6e4, 7e4, 3.4e38, 1e300, -1e300]
SPECIAL_OBJECTS = [0, 1, -1, 2**64, -(2**70), 1.5, NAN, "a", b"b", None, True, np.int64(3), [1]]

# Parameters besides the small valid values each builder draws.
ODD_INTS = [-1, -2, 2**31 - 1, 2**31, 2**32, HUGE, 2**63 - 1, 2**63, 2**64, -(2**63), -(2**63) - 1]
ODD_INTS += [np.int64(-1), np.uint64(2**64 - 1), np.int8(3), np.uint8(255), np.array(3)]
NOT_INTS = [True, False, np.bool_(True), 1.0, 2.5, NAN, INF, -INF, "1", b"1", None, [1], (1,)]
NOT_INTS += [1 + 0j, np.float32(1.0), Fraction(1, 2), np.array([3])]
# sizes: no 2**31 or 2**32 here, which would be honest requests for many GiB
ODD_SIZES = [-1, 0, HUGE, 2**63 - 1, 2**63, 2**64, np.int64(HUGE), np.uint64(2**64 - 1)]
ODD_SIZES += [-(2**63), np.int64(-3)]
ODD_RATES = [0, 0.0, -0.0, 1.0, 1 - 2**-53, -0.1, 1.5, NAN, INF, -INF, True, "0.1", None, 5e-324]
ODD_RATES += [np.float32(0.5), np.float16(0.25), np.int64(0), Fraction(1, 2), 0.5 + 0j]
ODD_SEEDS = [None, -1, 2**64 - 1, 2**64, 2**63, np.uint64(2**64 - 1), np.int64(-1), 1.5, "1"]
ODD_SEEDS += [True, [1, 2], np.int8(5)]
ODD_CHOICES = [None, "", 1, b"x", "RAISE", " pad", "mean ", ["first"], NAN, np.str_("zeros")]

LAYOUTS = ["c"] * 8 + ["reversed", "stepped", "transposed", "fortran", "broadcast", "unaligned"]
LAYOUTS += ["readonly", "list", "scalar", "masked", "memoryview", "dlpack"]


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _is_huge(x: Any) -> bool:
    return _is_int(x) and int(x) >= HUGE


def _dtype_text(dt: np.dtype[Any]) -> str:
    if dt.names is not None:
        return repr(dt.descr)
    if dt.kind == "V" or dt.isnative:
        return dt.name  # bfloat16, float8_e4m3fn, float32, ...
    return repr(dt.str)  # '>f4'


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------- arguments


@dataclass
class Context:
    """What an argument is built for: "fast" (posembed) or "slow" (the twin), the
    arguments built so far, and the (shape, dtype) an out= should have."""

    impl: str
    made: dict[str, Any]
    expected: tuple[tuple[int, ...], np.dtype[Any]] | None = None


class Arg:
    """A recipe for one argument, built afresh for each call."""

    def make(self, ctx: Context) -> Any:
        raise NotImplementedError

    def show(self) -> str:
        raise NotImplementedError


@dataclass
class Value(Arg):
    value: Any

    def make(self, ctx: Context) -> Any:
        return list(self.value) if isinstance(self.value, list) else self.value

    def show(self) -> str:
        return _short(repr(self.value))


@dataclass
class GeneratorArg(Arg):
    seed: int

    def make(self, ctx: Context) -> Any:
        return np.random.default_rng(self.seed)

    def show(self) -> str:
        return f"np.random.default_rng({self.seed})"


class DLPackBox:
    """A DLPack producer that is not an ndarray (as a torch tensor would be)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self.array.__dlpack_device__()


def _cast(values: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return values.astype(dtype)


def _content(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    dtype: np.dtype[Any],
    mode: str,
    lo: int,
    hi: int,
) -> np.ndarray:
    """C-ordered values of dtype: "ints" in lo..hi, "normal", "special" (normal
    with NaN, inf, -0.0, subnormals, overflows), "extreme" (ints with the dtype's
    limits) or "bits" (every bit pattern)."""
    n = math.prod(shape)
    if dtype.hasobject:
        pool: list[Any] = (
            [int(x) for x in rng.integers(lo, max(hi, lo) + 1, 8)] + [2**64, -(2**64)]
            if mode in ("ints", "extreme")
            else SPECIAL_OBJECTS
        )
        out = np.empty(n, dtype=object)
        for i in range(n):
            out[i] = pool[int(rng.integers(0, len(pool)))]
        return out.reshape(shape)
    ml_float = dtype.name == "bfloat16" or dtype.name.startswith("float8")
    raw_only = dtype.names is not None or (dtype.kind in "SV" and not ml_float)
    if mode == "bits" or raw_only:
        raw = np.frombuffer(rng.bytes(n * dtype.itemsize), dtype=np.uint8)
        if dtype.kind == "b":
            return (raw % 2).astype(bool).reshape(shape)
        return raw.view(dtype).reshape(shape).copy()
    if mode in ("ints", "extreme"):
        values: np.ndarray = rng.integers(lo, max(hi, lo) + 1, n, dtype=np.int64)
        if mode == "extreme" and dtype.kind in "iu" and n:
            info = np.iinfo(dtype)
            hit = rng.integers(0, 3, n) == 0
            limits = np.array([info.min, info.max, info.max - 1], dtype=object)
            mixed = values.astype(object)
            mixed[hit] = limits[rng.integers(0, 3, int(hit.sum()))]
            return np.array(mixed.tolist(), dtype=dtype).reshape(shape)
        if dtype.kind == "b":
            return (values != 0).reshape(shape)
        if dtype.kind == "M":
            return values.astype(dtype).reshape(shape)
        return _cast(values, dtype).reshape(shape)
    floats = rng.standard_normal(n) * float(rng.choice([1.0, 1e-3, 30.0]))
    if mode == "special" and n:
        hit = rng.integers(0, 4, n) == 0
        floats[hit] = np.array(SPECIAL_FLOATS)[rng.integers(0, len(SPECIAL_FLOATS), int(hit.sum()))]
    if dtype.kind == "b":
        return (floats > 0).reshape(shape)
    if dtype.kind == "M":
        return floats.astype(np.int64).astype(dtype).reshape(shape)
    return _cast(floats, dtype).reshape(shape)


@dataclass
class ArraySpec(Arg):
    """An array of known content (``base``, C order) presented in some layout."""

    base: np.ndarray
    layout: str = "c"

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.base.shape)

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.base.dtype

    def make(self, ctx: Context) -> Any:
        base, lay = self.base, self.layout
        if lay == "reversed":
            return base[::-1].copy()[::-1]
        if lay == "stepped":
            buf = np.empty((2 * base.shape[0], *base.shape[1:]), base.dtype)
            if not base.dtype.hasobject:
                buf.reshape(-1).view(np.uint8)[...] = 0xA5  # the gaps hold garbage
            buf[::2] = base
            return buf[::2]
        if lay == "transposed":
            return base.T.copy().T
        if lay == "fortran":
            return np.asfortranarray(base)
        if lay == "broadcast":
            return np.broadcast_to(base[:1].copy(), base.shape)
        if lay == "unaligned":
            raw = bytearray(base.nbytes + 1)
            view = np.frombuffer(raw, base.dtype, count=base.size, offset=1).reshape(base.shape)
            view[...] = base
            return view
        if lay == "readonly":
            copy = base.copy()
            copy.flags.writeable = False
            return copy
        if lay == "list":
            return base.tolist()
        if lay == "scalar":
            return base[()]
        if lay == "masked":
            return np.ma.masked_array(base.copy())
        if lay == "memoryview":
            return memoryview(base.copy())
        if lay == "dlpack":
            # the twins read NumPy's views only: DLPack is posembed's way in
            return DLPackBox(base.copy()) if ctx.impl == "fast" else base.copy()
        return base.copy()

    def show(self) -> str:
        with np.printoptions(threshold=40, edgeitems=3):
            text = np.array2string(self.base, separator=", ") if self.base.size else "[]"
        return _short(
            f"array({text}, dtype={_dtype_text(self.base.dtype)}, "
            f"shape={self.shape}, layout={self.layout})",
            600,
        )


def _layout_fits(base: np.ndarray, layout: str) -> bool:
    nd, obj = base.ndim, base.dtype.hasobject
    if layout in ("reversed", "stepped"):
        return nd >= 1
    if layout == "transposed":
        return nd >= 2
    if layout == "broadcast":
        return nd >= 1 and base.shape[0] > 1
    if layout == "unaligned":
        return not obj and base.dtype.itemsize > 1 and base.dtype.alignment > 1
    if layout == "scalar":
        return nd == 0
    if layout in ("memoryview", "dlpack"):
        try:
            view = memoryview(base) if layout == "memoryview" else np.from_dlpack(base)
        except (TypeError, ValueError, BufferError, RuntimeError):
            return False
        del view
        return not obj
    return True


@dataclass
class OutSpec(Arg):
    """An ``out=`` argument: a good one (of the shape and dtype the twin's result
    has) or one of the ways to get it wrong."""

    variant: str
    overlaps: str | None = None  # the input a variant "overlap" aliases

    def make(self, ctx: Context) -> Any:
        shape, dtype = ctx.expected or ((2,), np.dtype(np.float32))
        v = self.variant
        if v == "list":
            return []
        if v == "zero-d":
            return np.zeros((), dtype)
        if v == "dtype":
            dtype = np.dtype(np.float32 if dtype != np.float32 else np.float64)
        elif v == "byteorder":
            dtype = dtype.newbyteorder() if dtype.itemsize > 1 else np.dtype(np.int16)
        elif v == "shape":
            shape = (*shape, 1) if len(shape) < 3 else shape[:-1]
        if v == "unaligned" and dtype.alignment > 1:
            size = math.prod(shape) * dtype.itemsize
            return np.frombuffer(bytearray(size + 1), dtype, math.prod(shape), 1).reshape(shape)
        if v == "strided" and shape and shape[-1] > 1:
            return np.zeros((*shape[:-1], 2 * shape[-1]), dtype)[..., ::2]
        if v == "fortran":
            return np.asfortranarray(np.zeros(shape, dtype))
        if v == "overlap" and self.overlaps is not None:
            src = ctx.made.get(self.overlaps)
            if isinstance(src, DLPackBox):
                src = src.array  # the memory posembed sees through DLPack
            need = math.prod(shape) * dtype.itemsize
            if (
                isinstance(src, np.ndarray)
                and src.flags.c_contiguous
                and src.flags.writeable
                and not src.dtype.hasobject
                and src.nbytes >= need > 0
                and src.dtype.alignment >= dtype.alignment
            ):
                return src.reshape(-1).view(np.uint8)[:need].view(dtype).reshape(shape)
        good = np.empty(shape, dtype)
        if not dtype.hasobject:
            good.reshape(-1).view(np.uint8)[...] = 0xA5  # what a refused out= must still hold
        if v == "readonly":
            good.flags.writeable = False
        elif v == "broadcast":
            return np.broadcast_to(good, shape)
        elif v == "memoryview":
            try:
                return memoryview(good)
            except (TypeError, ValueError):  # no buffer format for bfloat16
                return memoryview(bytearray(good.tobytes()))
        elif v == "dlpack":
            return DLPackBox(good)
        return good

    def show(self) -> str:
        return f"out({self.variant}{', of ' + self.overlaps if self.overlaps else ''})"


OUT_VARIANTS = ["good"] * 6 + ["dtype", "byteorder", "shape", "readonly", "strided", "fortran"]
OUT_VARIANTS += ["unaligned", "overlap", "list", "memoryview", "broadcast", "dlpack", "zero-d"]


# ---------------------------------------------------------------- a call


@dataclass
class Call:
    """One fuzz case: the same arguments for posembed (``fast``) and its twin
    (``slow``; None where there is none)."""

    name: str
    fast: Callable[[list[Any], dict[str, Any]], Any]
    slow: Callable[[list[Any], dict[str, Any]], Any] | None
    args: list[tuple[str, Arg, bool]] = field(default_factory=list)  # (label, recipe, keyword)
    compare: Callable[[Any, Any], None] | None = None
    huge: dict[str, Arg] = field(default_factory=dict)  # size args >= 2^62 -> small stand-ins
    twin_errors: bool = True  # False: the twin does not validate (hand-built Windows)
    seed_label: str | None = None  # a seed=None the twin must get from last_seed()

    def add(self, label: str, arg: Arg, keyword: bool = False) -> None:
        self.args.append((label, arg, keyword))

    def describe(self) -> str:
        parts = [f"{label}={arg.show()}" for label, arg, _ in self.args]
        return f"{self.name}(" + ", ".join(parts) + ")"


def _build(call: Call, ctx: Context, replace: dict[str, Arg] | None = None) -> tuple[Any, Any]:
    """The positional list and keyword dict of a call, built for ctx.impl."""
    pos: list[Any] = []
    kw: dict[str, Any] = {}
    for label, arg, keyword in call.args:
        if replace and label in replace:
            arg = replace[label]
        obj = arg.make(ctx)
        ctx.made[label] = obj
        if keyword:
            kw[label] = obj
        else:
            pos.append(obj)
    return pos, kw


# ---------------------------------------------------------------- builders


class Builder:
    """Draws the arguments of one call from the fuzz bytes."""

    def __init__(self, r: Reader) -> None:
        self.r = r
        self.huge: dict[str, Arg] = {}

    # arrays

    def array(
        self,
        dtype: np.dtype[Any],
        shape: tuple[int, ...],
        mode: str,
        lo: int = 0,
        hi: int = 9,
        layout: str | None = None,
    ) -> ArraySpec:
        return self.spec(_content(self.r.rng(), shape, dtype, mode, lo, hi), layout)

    def spec(self, base: np.ndarray, layout: str | None = None) -> ArraySpec:
        """base in a layout drawn from LAYOUTS (or the given one), where it fits."""
        if layout is None:
            layout = self.r.pick(LAYOUTS)
        if not _layout_fits(base, layout):
            layout = "c"
        if layout == "broadcast":  # the content a zero stride can show
            base = np.broadcast_to(base[:1], base.shape).copy()
        return ArraySpec(base, layout)

    def dims(self, max_ndim: int, max_dim: int) -> tuple[int, ...]:
        return tuple(self.r.int(0, max_dim) for _ in range(self.r.int(0, max_ndim)))

    def table(self, floats: bool = True) -> ArraySpec:
        """A (rows, cols) table: float (or any dtype), sometimes of another rank."""
        r = self.r
        wild = r.chance(6)
        dtype = r.pick(ALL_DTYPES if wild or not floats else FLOAT_DTYPES)
        big = r.chance(6)  # enough bytes for the parallel paths under tiny thresholds
        shape = (r.int(0, 80 if big else 12), r.int(0, 24 if big else 6))
        if r.chance(10):
            shape = self.dims(3, 5)
        mode = r.pick(["normal", "normal", "normal", "special", "bits", "ints"])
        return self.array(dtype, shape, mode, -3, 9)

    def integers(self, lo: int, hi: int, shape: tuple[int, ...] | None = None) -> ArraySpec:
        """Integer-valued positions, ids or tokens, mostly in lo..hi."""
        r = self.r
        dtype = r.pick(INT_DTYPES) if not r.chance(8) else r.pick(ALL_DTYPES)
        if shape is None:
            shape = self.dims(3, 5)
        mode = r.pick(["ints"] * 4 + ["near", "extreme", "bits"])
        if mode == "near":
            mode, lo, hi = "ints", lo - 2, hi + 2
        return self.array(dtype, shape, mode, lo, hi)

    def out(self, overlaps: list[str]) -> OutSpec:
        variant = self.r.pick(OUT_VARIANTS)
        return OutSpec(variant, self.r.pick(overlaps) if variant == "overlap" else None)

    # parameters

    def count(self, lo: int, hi: int) -> Arg:
        """An integer parameter (not a size): small, or odd, or not an integer."""
        r = self.r
        if r.chance(5):
            return Value(r.pick(ODD_INTS + NOT_INTS))
        return Value(r.int(lo, hi))

    def size(self, label: str, lo: int, hi: int, standin: Any) -> Arg:
        """A size parameter; one reaching 2^62 is recorded with a small stand-in."""
        r = self.r
        if r.chance(6):
            value = r.pick(ODD_SIZES + NOT_INTS)
            if _is_huge(value):
                self.huge[label] = Value(standin)
            return Value(value)
        return Value(r.int(lo, hi))

    def choice(self, options: list[str]) -> Arg:
        return Value(self.r.pick(ODD_CHOICES) if self.r.chance(8) else self.r.pick(options))

    def rate(self) -> Arg:
        r = self.r
        if r.chance(6):
            return Value(r.pick(ODD_RATES))
        return Value(r.pick([0.0, 0.1, 0.5, 0.9, 0.0, 0.25]))

    def seed(self, none: bool = True) -> Arg:
        r = self.r
        if r.chance(6):
            return Value(r.pick(ODD_SEEDS))
        if none and r.chance(3):
            return Value(None)
        return Value(r.int(0, 2**64 - 1) if r.chance(4) else r.int(0, 99))

    def maybe(self, call: Call, label: str, arg: Callable[[], Arg], odds: int = 2) -> None:
        """Pass a keyword with probability 1/odds (else leave the default)."""
        if self.r.chance(odds):
            call.add(label, arg(), keyword=True)

    def finish(self, call: Call) -> Call:
        """Rarely, a keyword the function does not take (both must refuse it)."""
        if self.r.chance(40):
            call.add("bogus", Value(1), keyword=True)
        call.huge = self.huge
        return call


def _rows(spec: ArraySpec) -> int:
    return spec.shape[0] if spec.base.ndim >= 1 else 1


def _cols(spec: ArraySpec) -> int:
    return spec.shape[1] if spec.base.ndim >= 2 else 1


def _fn(module: Any, name: str) -> Callable[[list[Any], dict[str, Any]], Any]:
    """module.name(*pos, **kw), looked up at call time (so tests can patch it)."""

    def call(pos: list[Any], kw: dict[str, Any]) -> Any:
        return getattr(module, name)(*pos, **kw)

    return call


TARGETS: dict[str, Callable[[Builder], Call]] = {}


def target(name: str) -> Callable[[Callable[[Builder], Call]], Callable[[Builder], Call]]:
    def register(fn: Callable[[Builder], Call]) -> Callable[[Builder], Call]:
        TARGETS[name] = fn
        return fn

    return register


def _plain(name: str) -> Call:
    return Call(name, _fn(posembed, name), _fn(reference, name))


@target("gather")
def _gather(b: Builder) -> Call:
    call = _plain("gather")
    table = b.table(floats=not b.r.chance(2))
    call.add("table", table)
    call.add("positions", b.integers(0, _rows(table) - 1))
    b.maybe(call, "mode", lambda: b.choice(["raise", "clip", "wrap"]))
    b.maybe(call, "out", lambda: b.out(["table", "positions"]), odds=4)
    return b.finish(call)


@target("gather_backward")
def _gather_backward(b: Builder) -> Call:
    call = _plain("gather_backward")
    r = b.r
    length = r.int(0, 12)
    positions = b.integers(0, length - 1)
    d = r.int(0, 6)
    shape = (*positions.shape, d)
    if r.chance(8):
        shape = b.dims(3, 4)
    wild = r.chance(8)
    mode = r.pick(["normal", "normal", "special", "bits"])
    grad = b.array(r.pick(ALL_DTYPES if wild else FLOAT_DTYPES), shape, mode)
    call.add("grad", grad)
    call.add("positions", positions)
    call.add("length", b.size("length", length, length, standin=length))
    b.maybe(call, "out", lambda: b.out(["grad", "positions"]), odds=4)
    return b.finish(call)


@target("interpolate")
def _interpolate(b: Builder) -> Call:
    call = _plain("interpolate")
    call.add("table", b.table())
    call.add("length", b.size("length", 0, 40, standin=3))
    b.maybe(call, "align", lambda: b.choice(["scale", "half_pixel", "corners"]))
    b.maybe(call, "antialias", lambda: _antialias(b), odds=3)
    b.maybe(call, "out", lambda: b.out(["table"]), odds=4)
    return b.finish(call)


def _antialias(b: Builder) -> Arg:
    """antialias=: mostly True (the default is False), sometimes not a bool."""
    return Value(b.r.pick([True, True, True, False, np.bool_(True), 1, None, "yes"]))


@target("lerp")
def _lerp(b: Builder) -> Call:
    call = _plain("lerp")
    r = b.r
    table = b.table()
    top = _rows(table) - 1
    shape = b.dims(3, 5)
    if r.chance(4):
        positions = b.integers(0, top, shape)
    else:
        dtype = r.pick(FLOAT_DTYPES) if not r.chance(8) else r.pick(ALL_DTYPES)
        rng = r.rng()
        values = rng.uniform(-0.5 if r.chance(4) else 0.0, max(top, 0) + 0.5 * r.chance(4), shape)
        if r.chance(4) and values.size:
            values.flat[int(rng.integers(0, values.size))] = r.pick([NAN, INF, -INF, -0.0, 1e300])
        positions = b.spec(_cast(values, dtype) if not dtype.hasobject else values.astype(object))
    call.add("table", table)
    call.add("positions", positions)
    b.maybe(call, "out", lambda: b.out(["table", "positions"]), odds=4)
    return b.finish(call)


def _random_argument(b: Builder) -> Arg:
    """A seed argument for a numpy.random.default_rng: an int, a Generator, None, odd."""
    r = b.r
    if r.chance(4):
        return GeneratorArg(r.int(0, 99))
    return b.seed()


@target("extend")
def _extend(b: Builder) -> Call:
    r = b.r
    table = b.table()
    rows = _rows(table)
    init = b.choice(["interpolate", "tile", "edge", "random", "zeros"])
    call = _plain("extend")
    call.add("table", table)
    call.add("length", b.size("length", max(rows - 1, 0), rows + 20, standin=max(rows, 1)))
    if not r.chance(4):
        call.add("init", init, keyword=True)
    is_random = isinstance(init, Value) and init.value == "random"
    if is_random or r.chance(8):
        b.maybe(call, "std", lambda: Value(r.pick([0.0, 0.5, 2, np.float32(1), *ODD_RATES])))
        b.maybe(call, "seed", lambda: _random_argument(b), odds=1 if r.chance(2) else 3)
    if not is_random or r.chance(8):
        b.maybe(call, "align", lambda: b.choice(["scale", "half_pixel", "corners"]), odds=3)
    labels = {label: arg for label, arg, _ in call.args}
    seed = labels.get("seed")
    if is_random and (seed is None or (isinstance(seed, Value) and seed.value is None)):
        call.compare = _compare_fresh_draws(rows)  # a fresh seed: only the kept rows compare
    return b.finish(call)


@target("resample_grid")
def _resample_grid(b: Builder) -> Call:
    r = b.r
    h, w, prefix = r.int(1, 4), r.int(1, 4), r.int(0, 2)
    rows = prefix + h * w if not r.chance(8) else r.int(0, 20)
    dtype = r.pick(FLOAT_DTYPES) if not r.chance(8) else r.pick(ALL_DTYPES)
    mode = r.pick(["normal", "normal", "special", "bits"])
    table = b.array(dtype, (rows, r.int(0, 5)) if not r.chance(10) else b.dims(3, 4), mode)

    def grid(label: str, hh: int, ww: int) -> Arg:
        if r.chance(8):
            odd: list[Any] = [(hh,), (hh, ww, 1), [hh, ww], np.array([hh, ww]), 3, None, "ab"]
            odd += [(hh, float(ww)), (hh, -ww), (0, ww), (np.int64(hh), np.uint8(ww))]
            return Value(r.pick(odd))
        if label == "new_grid" and r.chance(10):
            big = (r.pick(ODD_SIZES), ww) if r.chance(2) else (hh, r.pick(ODD_SIZES))
            if any(_is_huge(x) for x in big):
                b.huge[label] = Value((2, 2))
            return Value(big)
        return Value((hh, ww))

    call = _plain("resample_grid")
    call.add("table", table)
    call.add("grid", grid("grid", h, w))
    call.add("new_grid", grid("new_grid", r.int(1, 6), r.int(1, 6)))
    b.maybe(call, "prefix", lambda: b.count(prefix, prefix))
    b.maybe(call, "method", lambda: b.choice(["bicubic", "bilinear"]))
    b.maybe(call, "align", lambda: b.choice(["half_pixel", "corners"]))
    b.maybe(call, "antialias", lambda: _antialias(b), odds=3)
    return b.finish(call)


@target("embed")
def _embed(b: Builder) -> Call:
    r = b.r
    call = _plain("embed")
    vocab, d = r.int(0, 12), r.int(0, 6)
    dtype = r.pick(TABLE_FLOATS) if not r.chance(6) else r.pick(ALL_DTYPES)
    mode = r.pick(["normal", "normal", "special", "bits"])
    call.add("token_table", b.array(dtype, (vocab, d) if not r.chance(12) else b.dims(3, 4), mode))
    batch, length = r.int(0, 4), r.int(0, 8)
    ids_shape: tuple[int, ...] = (batch, length) if r.chance(2) else (length,)
    call.add("token_ids", b.integers(0, vocab - 1, b.dims(3, 4) if r.chance(10) else ids_shape))
    rows = length + r.int(0, 4)
    pos_dtype = dtype if not r.chance(8) else r.pick(ALL_DTYPES)
    call.add("pos_table", b.array(pos_dtype, (rows, d if not r.chance(10) else r.int(0, 6)), mode))
    if r.chance(3):
        shape = r.pick([(length,), (1, length), ()]) if not r.chance(3) else b.dims(2, 4)
        call.add("positions", b.integers(0, rows - 1, shape), keyword=True)
        if r.chance(6):
            call.add("offset", b.count(0, 2), keyword=True)
    else:
        b.maybe(call, "offset", lambda: b.count(0, max(rows - length + 1, 0)))
    b.maybe(call, "dropout", b.rate)
    b.maybe(call, "seed", b.seed)
    b.maybe(call, "out", lambda: b.out(["token_table", "pos_table", "token_ids"]), odds=4)
    b.maybe(call, "first_row", lambda: _first_row(b, d), odds=3)
    call.seed_label = "seed"
    return b.finish(call)


def _first_row(b: Builder, d: int) -> Arg:
    """embed's first_row: small, far into the mask's counter, either side of the
    last row of d values below 2^62, or odd. No size: nothing is allocated for
    it, so the twin takes every value itself."""
    r = b.r
    last = 2**62 // max(d, 1)
    if r.chance(3):
        return Value(r.pick([2**40 + r.int(0, 9), last, last + 1, last - r.int(1, 9)]))
    return b.count(0, 20)


@target("dropout_mask")
def _dropout_mask(b: Builder) -> Call:
    r = b.r
    entries: list[Any] = []
    for _ in range(r.int(0, 3)):
        entries.append(r.pick(ODD_SIZES + NOT_INTS) if r.chance(8) else r.int(0, 9))
    kind = r.int(0, 5)  # an int, a list, an array or (mostly) a tuple
    passed = entries[:1] if kind == 0 and entries else entries  # the sizes the call gets
    small = [type(x)(1) if _is_huge(x) else x for x in passed]  # each size >= 2^62 made 1
    shape: Any = tuple(entries)
    stand_in: Any = tuple(small)
    if kind == 0 and entries:
        shape, stand_in = entries[0], small[0]
    elif kind == 1:
        shape, stand_in = list(entries), small
    elif kind == 2 and all(_is_int(x) and -(2**63) <= int(x) < 2**63 for x in entries):
        shape, stand_in = np.array(entries, dtype=np.int64), np.array(small, dtype=np.int64)
    huge = any(_is_huge(x) for x in passed)
    if r.chance(12):
        shape, huge = r.pick(["3", None, 2.0, {1: 2}, b"ab"]), False
    call = _plain("dropout_mask")
    call.add("shape", Value(shape))
    call.add("p", b.rate())
    call.add("seed", b.seed(none=False))
    if huge:
        # the stand-in has the form of the shape passed (int, list, array or tuple)
        b.huge["shape"] = Value(stand_in)
    return b.finish(call)


def _offsets(b: Builder, n: int) -> Arg:
    """CSR document offsets over n tokens: valid mostly, else broken."""
    r = b.r
    cuts = sorted(r.int(0, n) for _ in range(r.int(0, 5)))
    valid = np.array([0, *cuts, n], dtype=np.int64)
    if r.chance(4):
        return Value(r.pick([[0, n], [n, 0], [0], [], [0, n + 1], [1, n], [0.0, n], None, "x"]))
    dtype = r.pick(INT_DTYPES) if not r.chance(6) else r.pick(ALL_DTYPES)
    if r.chance(6) and valid.size > 2:
        valid[1], valid[-2] = valid[-2] + 1, valid[1]  # decreasing
    return b.spec(_cast(valid, dtype) if not dtype.hasobject else valid.astype(object))


def _windows_args(b: Builder, call: Call, strict: bool) -> None:
    """tokens, size, and the windows keywords; strict: valid ones only (for stitch)."""
    r = b.r
    n = r.int(0, 40)
    if strict:
        layout = r.pick(["c", "c", "reversed", "stepped", "readonly", "unaligned"])
        tokens: Arg = b.array(r.pick(INT_DTYPES), (n,), "ints", 0, 50, layout)
        size: Arg = Value(r.int(1, 9))
    else:
        tokens = b.integers(0, 50, (n,) if not r.chance(10) else b.dims(2, 5))
        size = b.size("size", 1, 9, standin=4)
    call.add("tokens", tokens)
    call.add("size", size)
    top = size.value if isinstance(size, Value) and _is_int(size.value) else 9
    top = min(max(int(top), 1), 9)
    if strict:
        if r.chance(2):
            call.add("step", Value(r.int(1, top)), keyword=True)
        call.add("tail", Value(r.pick(["pad", "shift", "drop"])), keyword=True)
        if r.chance(3):
            cuts = sorted(r.int(0, n) for _ in range(r.int(0, 4)))
            call.add("offsets", Value(np.array([0, *cuts, n])), keyword=True)
        return
    which = r.int(0, 3)
    if which == 1 or r.chance(20):
        call.add("step", b.count(1, top), keyword=True)
    if which == 2 or r.chance(20):
        call.add("overlap", b.count(0, top - 1), keyword=True)
    b.maybe(call, "tail", lambda: b.choice(["pad", "shift", "drop"]))
    b.maybe(call, "pad_value", lambda: b.count(-1, 99), odds=3)
    b.maybe(call, "offsets", lambda: _offsets(b, n), odds=3)
    b.maybe(call, "out", lambda: b.out(["tokens"]), odds=4)


@target("windows")
def _windows(b: Builder) -> Call:
    call = _plain("windows")
    _windows_args(b, call, strict=False)
    return b.finish(call)


@dataclass
class WindowsArg(Arg):
    """A Windows built by posembed.windows or its twin from the same arguments."""

    call: Call

    def make(self, ctx: Context) -> Any:
        inner = Context(ctx.impl, {})
        pos, kw = _build(self.call, inner)
        module = posembed if ctx.impl == "fast" else reference
        return module.windows(*pos, **kw)

    def show(self) -> str:
        return self.call.describe()


@target("stitch")
def _stitch(b: Builder) -> Call:
    r = b.r
    inner = Call("windows", _fn(posembed, "windows"), _fn(reference, "windows"))
    _windows_args(b, inner, strict=True)
    made = _build(inner, Context("slow", {}))
    w = reference.windows(*made[0], **made[1])
    call = _plain("stitch")
    rest = b.dims(2, 3)
    shape: tuple[int, ...] = (len(w), w.size, *rest)
    if r.chance(10):
        shape = (len(w) + r.pick([-1, 1]), w.size) if r.chance(2) else b.dims(3, 4)
    if r.chance(5) and shape == (len(w), w.size):
        values: Arg = ArraySpec(np.asarray(w.tokens), r.pick(["c", "reversed", "list"]))
    else:
        dtype = r.pick(ALL_DTYPES) if r.chance(3) else r.pick(FLOAT_DTYPES + INT_DTYPES)
        mode = r.pick(["normal", "special", "ints", "bits"])
        values = b.array(dtype, tuple(max(s, 0) for s in shape), mode, -5, 5)
    call.add("values", values)
    if r.chance(15):
        call.add("windows", Value(r.pick([None, (1, 2), "w", np.zeros((2, 2))])))
    else:
        call.add("windows", WindowsArg(inner))
    b.maybe(call, "reduce", lambda: b.choice(["mean", "sum", "max", "first", "center"]))
    b.maybe(call, "fill", lambda: Value(r.pick([0, 1, -1, 2.5, NAN, INF, 2**64, -(2**64), "x"])))
    return b.finish(call)


@dataclass
class TamperedWindows(Arg):
    """A Windows built by hand: a real one with one field changed."""

    fields: dict[str, Any]

    def make(self, ctx: Context) -> Any:
        cls = posembed.Windows if ctx.impl == "fast" else reference.Windows
        values = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in self.fields.items()}
        return cls(**values)

    def show(self) -> str:
        return _short("Windows(" + ", ".join(f"{k}={v!r}" for k, v in self.fields.items()) + ")")


@target("Windows(by hand)")
def _hand_built_windows(b: Builder) -> Call:
    """stitch and owner on a Windows whose arrays may not describe its documents:
    posembed must refuse it (ValueError) or, when it accepts, agree with the twin."""
    r = b.r
    inner = Call("windows", _fn(posembed, "windows"), _fn(reference, "windows"))
    _windows_args(b, inner, strict=True)
    pos, kw = _build(inner, Context("slow", {}))
    w = posembed.windows(*pos, **kw)
    fields: dict[str, Any] = {
        "tokens": w.tokens,
        "starts": w.starts,
        "lengths": w.lengths,
        "documents": w.documents,
        "doc_offsets": w.doc_offsets,
        "size": w.size,
        "step": w.step,
        "tail": w.tail,
    }
    name = r.pick(["starts", "lengths", "documents", "doc_offsets", "size", "tokens"])
    reshaped = False  # the twin reads a reshaped array differently: no comparison
    old = fields[name]
    if isinstance(old, np.ndarray):
        how = r.int(0, 5)
        if how == 0 and old.size:
            new = old.copy()
            k = r.int(0, old.size - 1)
            value = int(new.flat[k]) + r.pick([-3, -1, 1, 2, 40, 2**62, -(2**63)])
            info = np.iinfo(new.dtype)
            new.flat[k] = min(max(value, info.min), info.max)
        elif how == 1:
            new = old.astype(r.pick([np.int32, np.uint64, np.float64, ">i8"]))
        elif how == 2:
            new = old[:-1] if old.size else np.zeros(1, old.dtype)
        elif how == 3:
            new = old[::-1]
        elif how == 4:
            new = np.repeat(old, 2)[::2]  # a strided view of the same values
        else:
            new = old.reshape(1, -1) if old.ndim == 1 else old.reshape(-1)
            reshaped = True
    else:
        new = r.pick([old + 1, old - 1, 0, -1, "9", None])
    fields[name] = new
    tampered = TamperedWindows(fields)
    if r.chance(2):
        call = Call("Windows.owner", _method("owner"), _method("owner"), twin_errors=False)
        call.add("windows", tampered)
        call.add("rule", Value(r.pick(["first", "center"])))
    else:
        call = Call("stitch", _fn(posembed, "stitch"), _fn(reference, "stitch"), twin_errors=False)
        size = fields["size"] if _is_int(fields["size"]) else 1
        dims = (len(w), max(min(int(size), 12), 0), *b.dims(1, 2))
        call.add("values", b.array(r.pick(FLOAT_DTYPES + INT_DTYPES), dims, "ints", -5, 5, "c"))
        call.add("windows", tampered)
        call.add("reduce", Value(r.pick(["mean", "sum", "max", "first", "center"])), keyword=True)
    huge_values = (
        isinstance(new, np.ndarray) and new.size and np.abs(new.astype(float)).max() > 1000
    )
    if reshaped or huge_values:
        call.slow = None  # the twin loops over every token a document claims
    return b.finish(call)


@target("window_layout")
def _window_layout(b: Builder) -> Call:
    r = b.r
    call = _plain("window_layout")
    n = r.int(0, 40)
    which = r.int(0, 3)
    if which == 0:
        corpus = b.size("offsets_or_token_count", 0, 40, standin=n)
    elif which == 1 and r.chance(4):
        # past 2^62 tokens: refused by name from 2^63 on (the twin gets n
        # tokens, in the same dtype and layout; not a list, whose dtype
        # NumPy would choose by the values)
        big = r.pick([2**62, 2**63 - 1, 2**63, 2**64 - 1])
        dtype = np.uint64 if big > 2**63 - 1 else np.int64
        corpus = b.spec(np.array([0, big], dtype), r.pick([x for x in LAYOUTS if x != "list"]))
        b.huge["offsets_or_token_count"] = ArraySpec(np.array([0, n], dtype), corpus.layout)
    else:
        corpus = _offsets(b, n)
    call.add("offsets_or_token_count", corpus)
    call.add("size", b.size("size", 1, 9, standin=4))
    size = call.args[-1][1]
    top = size.value if isinstance(size, Value) and _is_int(size.value) else 9
    top = min(max(int(top), 1), 9)
    kind = r.int(0, 3)
    if kind == 1 or r.chance(20):
        call.add("step", b.count(1, top), keyword=True)
    if kind == 2 or r.chance(20):
        call.add("overlap", b.count(0, top - 1), keyword=True)
    b.maybe(call, "tail", lambda: b.choice(["pad", "shift", "drop"]))
    return b.finish(call)


@dataclass
class LayoutArg(Arg):
    """A WindowLayout made by posembed.window_layout or its twin from the same
    arguments, or built by hand from ``fields`` (a real one's, one changed)."""

    call: Call
    fields: dict[str, Any] | None = None

    def make(self, ctx: Context) -> Any:
        if self.fields is not None:
            cls = posembed.WindowLayout if ctx.impl == "fast" else reference.WindowLayout
            values = {
                k: v.copy() if isinstance(v, np.ndarray) else v for k, v in self.fields.items()
            }
            return cls(**values)
        inner = Context(ctx.impl, {})
        pos, kw = _build(self.call, inner)
        module = posembed if ctx.impl == "fast" else reference
        return module.window_layout(*pos, **kw)

    def show(self) -> str:
        if self.fields is None:
            return self.call.describe()
        fields = ", ".join(f"{k}={v!r}" for k, v in self.fields.items())
        return _short(f"WindowLayout({fields})")


LAYOUT_FIELDS = ("starts", "lengths", "documents", "window_offsets", "doc_offsets")


def _tampered_layout(b: Builder, layout: reference.WindowLayout) -> tuple[dict[str, Any], bool]:
    """A real layout's fields with one changed, and whether the twin can take
    them (values past int64, wrapped by posembed's int64 view, it reads as
    they are)."""
    r = b.r
    fields: dict[str, Any] = {name: getattr(layout, name) for name in LAYOUT_FIELDS}
    fields.update(size=layout.size, step=layout.step, tail=layout.tail)
    name = r.pick(["starts", "lengths", "documents", "doc_offsets", "window_offsets", "size"])
    old = fields[name]
    if not isinstance(old, np.ndarray):
        fields[name] = r.pick([old + 1, old - 1, 0, -1, "9", None, float(old), 2**62])
        return fields, True
    how = r.int(0, 5)
    new = old
    if how == 0 and old.size:
        new = old.copy()
        new.flat[r.int(0, old.size - 1)] += r.pick([-3, -1, 1, 2, 40, 2**62, -(2**62)])
    elif how == 1:
        new = old.astype(r.pick([np.int32, np.uint64, np.float64, ">i8"]))
    elif how == 2:
        new = old[:-1] if old.size else np.zeros(1, old.dtype)
    elif how == 3:
        new = old[::-1]
    elif how == 4:
        new = np.repeat(old, 2)[::2]  # a strided view of the same values
    else:
        new = old.reshape(1, -1)
    fields[name] = new
    wrapped = new.dtype.kind == "u" and bool((old < 0).any())
    return fields, not wrapped and not (new.size and np.abs(new.astype(float)).max() > 1000)


@target("WindowLayout.cut")
def _window_layout_cut(b: Builder) -> Call:
    """cut on a layout from window_layout (now and then one built by hand):
    all its windows, or a range of them from a slice of the corpus's tokens."""
    r = b.r
    inner = Call("window_layout", _fn(posembed, "window_layout"), _fn(reference, "window_layout"))
    n = r.int(0, 40)
    cuts = sorted(r.int(0, n) for _ in range(r.int(0, 4)))
    size = r.int(1, 9)
    inner.add("offsets_or_token_count", Value(np.array([0, *cuts, n]) if cuts else n))
    inner.add("size", Value(size))
    inner.add("step", Value(r.int(1, size)), keyword=True)
    inner.add("tail", Value(r.pick(["pad", "shift", "drop"])), keyword=True)
    pos, kw = _build(inner, Context("slow", {}))
    layout = reference.window_layout(*pos, **kw)
    call = Call("WindowLayout.cut", _method("cut"), _method("cut"))
    if r.chance(6):
        fields, twin_can = _tampered_layout(b, layout)
        call.add("layout", LayoutArg(inner, fields))
        if not twin_can:
            call.slow = None
    else:
        call.add("layout", LayoutArg(inner))
    windows = len(layout)
    a = r.int(0, windows)
    e = r.int(a, windows)
    firsts = layout.doc_offsets[layout.documents] + layout.starts
    lo, hi = 0, n
    if r.chance(2):  # a range of windows from the tokens it covers (and a few more)
        call.add("windows", Value(slice(a, e)), keyword=True)
        if a < e:
            lo = max(0, int(firsts[a]) - r.int(0, 2))
            hi = min(n, int(firsts[e - 1] + layout.lengths[e - 1]) + r.int(0, 2))
        else:
            lo = hi = r.int(0, n)
    elif r.chance(8):
        odd = [slice(a, e, 2), slice(None, None, -1), slice(0, 3, 0), [0, 1], "x", range(2)]
        odd += [slice("a", 2), slice(-2, None), slice(np.int64(1), None), slice(2**70, 3)]
        call.add("windows", Value(r.pick(odd)), keyword=True)
    rng = r.rng()
    if r.chance(8):
        tokens: Arg = b.integers(0, 50, b.dims(2, 5))
    else:
        dtype = r.pick(INT_DTYPES) if not r.chance(10) else r.pick(ALL_DTYPES)
        corpus = _content(rng, (n,), dtype, r.pick(["ints", "ints", "extreme"]), 0, 50)
        tokens = b.spec(corpus[lo:hi].copy())
    call.add("tokens", tokens)
    if lo or r.chance(6):
        start = b.count(lo, lo) if not r.chance(6) else Value(r.pick([lo - 1, lo + 1]))
        call.add("token_start", start, keyword=True)
    b.maybe(call, "pad_value", lambda: b.count(-1, 99), odds=3)
    b.maybe(call, "out", lambda: b.out(["tokens"]), odds=4)
    return b.finish(call)


def _method(name: str) -> Callable[[list[Any], dict[str, Any]], Any]:
    def call(pos: list[Any], kw: dict[str, Any]) -> Any:
        return getattr(pos[0], name)(*pos[1:], **kw)

    return call


@target("similarity")
def _similarity(b: Builder) -> Call:
    call = _plain("similarity")
    table = b.table()
    call.add("table", table)
    call.compare = _compare_similarity(_cols(table))
    return b.finish(call)


# ------------------------------------------------ LearnedPositionEmbedding


def _embedding_call(name: str, method: str | None) -> Call:
    """from_table(table, copy=, dropout=) then the method: pos[0] is the table,
    the "from_table.*" keywords go to from_table, the rest to the method."""

    def run(cls: Any) -> Callable[[list[Any], dict[str, Any]], Any]:
        def call(pos: list[Any], kw: dict[str, Any]) -> Any:
            kw = dict(kw)
            copy, rate = kw.pop("from_table.copy"), kw.pop("from_table.dropout")
            emb = cls().from_table(pos[0], copy=copy, dropout=rate)
            return emb if method is None else getattr(emb, method)(*pos[1:], **kw)

        return call

    return Call(
        name,
        run(lambda: posembed.LearnedPositionEmbedding),
        run(lambda: reference.LearnedPositionEmbedding),
    )


@target("LearnedPositionEmbedding")
def _embedding(b: Builder) -> Call:
    r = b.r

    def make(cls: Any) -> Callable[[list[Any], dict[str, Any]], Any]:
        return lambda pos, kw: cls()(*pos, **kw)

    call = Call(
        "LearnedPositionEmbedding",
        make(lambda: posembed.LearnedPositionEmbedding),
        make(lambda: reference.LearnedPositionEmbedding),
    )
    call.add("max_seq_len", b.size("max_seq_len", 0, 24, standin=2))
    call.add("embed_dim", b.size("embed_dim", 0, 8, standin=2))
    odd_std = [-0.1, NAN, INF, 1e308, 1e38, 7e4, "xavier", [0.1], True, np.float16(0.1), None]
    b.maybe(call, "init_std", lambda: Value(r.pick([0.02, "scaled", 1, 0.0, *odd_std])))
    seed = _random_argument(b) if r.chance(2) else Value(r.int(0, 99))
    call.add("seed", seed, keyword=True)
    dtypes: list[Any] = [np.float16, np.float32, np.float64, "float32", ">f8", "bfloat16"]
    dtypes += [np.int32, "nonsense", None, np.complex64, object, "f2"]
    if ml_dtypes is not None:
        dtypes.append(ml_dtypes.bfloat16)
    b.maybe(call, "dtype", lambda: Value(r.pick(dtypes)))
    b.maybe(call, "dropout", b.rate)
    if isinstance(seed, Value) and seed.value is None:
        # fresh draws on each side: whether init_std overflows the dtype is chance
        call.compare = _compare_embedding_shape
        call.twin_errors = False
    else:
        call.compare = _compare_embedding
    return b.finish(call)


@target("LearnedPositionEmbedding methods")
def _embedding_methods(b: Builder) -> Call:
    r = b.r
    method = r.pick([None, "__call__", "interpolate", "extend", "embed", "windows"])
    name = "LearnedPositionEmbedding.from_table" + (f"(...).{method}" if method else "")
    call = _embedding_call(name, method)
    table = b.table()
    rows = _rows(table)
    call.add("table", table)
    call.add("from_table.copy", Value(r.pick([True, False])), keyword=True)
    call.add("from_table.dropout", b.rate(), keyword=True)
    if method == "__call__":
        call.add("positions", b.integers(0, rows - 1))
        b.maybe(call, "mode", lambda: b.choice(["raise", "clip", "wrap"]))
        b.maybe(call, "out", lambda: b.out(["positions"]), odds=4)
    elif method == "interpolate":
        call.add("length", b.size("length", 0, 30, standin=3))
        b.maybe(call, "align", lambda: b.choice(["scale", "half_pixel", "corners"]))
    elif method == "extend":
        call.add("length", b.size("length", max(rows - 1, 0), rows + 10, standin=max(rows, 1)))
        init = b.choice(["interpolate", "tile", "edge", "zeros", "random"])
        call.add("init", init, keyword=True)
        if isinstance(init, Value) and init.value == "random":
            call.add("seed", Value(r.int(0, 99)), keyword=True)
            b.maybe(call, "std", lambda: Value(r.pick([0.0, 0.5, -1.0, NAN])))
    elif method == "embed":
        vocab, d = r.int(0, 10), _cols(table)
        dtype = table.dtype if not r.chance(6) else r.pick(FLOAT_DTYPES)
        call.add("token_table", b.array(dtype, (vocab, d), "normal"))
        length = r.int(0, rows + 1)
        ids_shape = (length,) if r.chance(2) else (r.int(0, 3), length)
        call.add("token_ids", b.integers(0, vocab - 1, ids_shape))
        b.maybe(call, "training", lambda: Value(r.pick([True, False, 1, None, np.bool_(True)])))
        b.maybe(call, "seed", b.seed)
        b.maybe(call, "offset", lambda: b.count(0, 3))
        call.seed_label = "seed"
    elif method == "windows":
        call.add("tokens", b.integers(0, 50, (r.int(0, 30),)))
        b.maybe(call, "step", lambda: b.count(1, max(rows, 1)))
        b.maybe(call, "tail", lambda: b.choice(["pad", "shift", "drop"]))
        b.maybe(call, "out", lambda: b.out(["tokens"]), odds=6)
    return b.finish(call)


@target("set_num_threads")
def _set_num_threads(b: Builder) -> Call:
    """Odd thread counts: an allowed error or a setting that kernels then run with."""

    def fast(pos: list[Any], kw: dict[str, Any]) -> Any:
        before = posembed.get_num_threads() if posembed.config()["num_threads_set"] else None
        try:
            posembed.set_num_threads(*pos)
            table = np.arange(12.0).reshape(6, 2)
            return posembed.gather(table, [5, 0, 3])
        finally:
            posembed.set_num_threads(before)

    call = Call("set_num_threads", fast, None)
    values: list[Any] = [None, 1, 2, 3, 0, -1, 2**31, 2**63, 2**64, 1.5, "2", True, np.int64(2)]
    call.add("n", Value(b.r.pick(values)))
    return call


# ---------------------------------------------------------------- comparing


def _is_float(dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def same_array(fast: Any, slow: Any, what: str = "result") -> None:
    """Same type, shape, dtype and bytes; NaNs may differ in their payload."""
    if not isinstance(fast, np.ndarray):
        raise FuzzFailure(f"{what}: posembed returned {type(fast).__name__}, not an ndarray")
    slow = np.asarray(slow)
    if fast.shape != slow.shape or fast.dtype != slow.dtype:
        raise FuzzFailure(
            f"{what}: posembed gave shape {fast.shape} dtype {fast.dtype}, "
            f"the twin shape {slow.shape} dtype {slow.dtype}"
        )
    a, b = np.ascontiguousarray(fast), np.ascontiguousarray(slow)
    if a.tobytes() == b.tobytes():
        return
    if _is_float(a.dtype):
        wide_a = a.astype(np.float64)
        wide_b = b.astype(np.float64)
        nan_a, nan_b = np.isnan(wide_a), np.isnan(wide_b)
        bits = np.dtype(f"u{a.dtype.itemsize}")
        same = (a.view(bits) == b.view(bits)) | (nan_a & nan_b)
        if same.all():
            return
        where = tuple(int(i) for i in np.argwhere(~same)[0])
        raise FuzzFailure(
            f"{what}: values differ at {where}: posembed {a[where]!r}, the twin {b[where]!r}"
        )
    diff = np.argwhere(a.reshape(a.shape or (1,)) != b.reshape(b.shape or (1,)))
    where_text = tuple(int(i) for i in diff[0]) if diff.size else "(bytes)"
    raise FuzzFailure(f"{what}: values differ at {where_text}")


def same_windows(fast: Any, slow: Any) -> None:
    if not isinstance(fast, posembed.Windows):
        raise FuzzFailure(f"windows returned {type(fast).__name__}, not a posembed.Windows")
    for name in ("tokens", "starts", "lengths", "documents", "doc_offsets"):
        same_array(getattr(fast, name), getattr(slow, name), f"Windows.{name}")
    got, want = (fast.size, fast.step, fast.tail), (slow.size, slow.step, slow.tail)
    if got != want:
        raise FuzzFailure(f"Windows (size, step, tail): posembed {got}, the twin {want}")
    if len(fast) != len(slow):
        raise FuzzFailure(f"len(Windows): posembed {len(fast)}, the twin {len(slow)}")
    same_array(fast.mask, slow.mask, "Windows.mask")
    for rule in ("first", "center"):
        same_array(fast.owner(rule), slow.owner(rule), f"Windows.owner({rule!r})")


def same_layout(fast: Any, slow: Any) -> None:
    if not isinstance(fast, posembed.WindowLayout):
        raise FuzzFailure(f"window_layout returned {type(fast).__name__}, not a WindowLayout")
    for name in LAYOUT_FIELDS:
        same_array(getattr(fast, name), getattr(slow, name), f"WindowLayout.{name}")
    got, want = (fast.size, fast.step, fast.tail), (slow.size, slow.step, slow.tail)
    if got != want:
        raise FuzzFailure(f"WindowLayout (size, step, tail): posembed {got}, the twin {want}")
    if len(fast) != len(slow):
        raise FuzzFailure(f"len(WindowLayout): posembed {len(fast)}, the twin {len(slow)}")


def same_embedding(fast: Any, slow: Any) -> None:
    if not isinstance(fast, posembed.LearnedPositionEmbedding):
        raise FuzzFailure(f"returned {type(fast).__name__}, not a LearnedPositionEmbedding")
    same_array(fast.embeddings, slow.embeddings, "embeddings")
    for name in ("max_seq_len", "embed_dim", "dtype", "dropout", "init_std"):
        got, want = getattr(fast, name), getattr(slow, name)
        if got != want and not (name == "init_std" and math.isnan(got) and math.isnan(want)):
            raise FuzzFailure(f"{name}: posembed {got!r}, the twin {want!r}")


def same_result(fast: Any, slow: Any) -> None:
    if isinstance(slow, reference.Windows):
        same_windows(fast, slow)
    elif isinstance(slow, reference.WindowLayout):
        same_layout(fast, slow)
    elif isinstance(slow, reference.LearnedPositionEmbedding):
        same_embedding(fast, slow)
    else:
        same_array(fast, slow)


def _compare_embedding(fast: Any, slow: Any) -> None:
    same_embedding(fast, slow)


def _compare_embedding_shape(fast: Any, slow: Any) -> None:
    """Tables drawn from fresh seeds: only what does not depend on the draws."""
    if not isinstance(fast, posembed.LearnedPositionEmbedding):
        raise FuzzFailure(f"returned {type(fast).__name__}, not a LearnedPositionEmbedding")
    got = (fast.embeddings.shape, fast.embeddings.dtype, fast.dropout)
    want = (slow.embeddings.shape, slow.embeddings.dtype, slow.dropout)
    if got != want:
        raise FuzzFailure(f"(shape, dtype, dropout): posembed {got}, the twin {want}")


def _compare_fresh_draws(rows: int) -> Callable[[Any, Any], None]:
    def compare(fast: Any, slow: Any) -> None:
        if not isinstance(fast, np.ndarray) or fast.shape != slow.shape or fast.dtype != slow.dtype:
            raise FuzzFailure(f"extend(init='random', seed=None): {fast!r} against {slow!r}")
        same_array(fast[:rows], slow[:rows], "the table's own rows")

    return compare


def _compare_similarity(d: int) -> Callable[[Any, Any], None]:
    def compare(fast: Any, slow: Any) -> None:
        if not isinstance(fast, np.ndarray) or fast.shape != slow.shape or fast.dtype != slow.dtype:
            raise FuzzFailure(f"similarity: {type(fast).__name__} against the twin's {slow.dtype}")
        # both sum d products in the compute type, in different orders (BLAS)
        tol = 8 * max(d, 1) * float(np.finfo(fast.dtype).eps)
        close = np.isclose(fast, slow, rtol=0, atol=tol, equal_nan=True)
        if not close.all():
            where = tuple(int(i) for i in np.argwhere(~close)[0])
            raise FuzzFailure(
                f"similarity differs at {where}: {fast[where]!r} against {slow[where]!r} "
                f"(tolerance {tol:.3g})"
            )

    return compare


# ---------------------------------------------------------------- known bugs


@dataclass
class Outcome:
    """How one call went, for the KNOWN_BUGS entries to recognise."""

    call: Call
    problem: str  # "exception", "mismatch", "type", "twin-raised", "twin-returned", ...
    fast_exc: BaseException | None = None
    slow_exc: BaseException | None = None
    fast_args: dict[str, Any] = field(default_factory=dict)
    fast_result: Any = None
    slow_result: Any = None
    planted: tuple[str, ...] = ()  # the files mode: the defects of the crafted input


@dataclass(frozen=True)
class KnownBug:
    """A discrepancy reported and not yet fixed, tolerated (and counted, see -v)
    so that fuzzing can go on past it. Remove the entry with the fix."""

    name: str
    reproducer: str
    matches: Callable[[Outcome], bool]


def _text(exc: BaseException | None) -> str:
    return "" if exc is None else str(exc)


KNOWN_BUGS: list[KnownBug] = []


# ---------------------------------------------------------------- running


@dataclass
class Stats:
    inputs: int = 0
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    known: collections.Counter[str] = field(default_factory=collections.Counter)


STATS = Stats()


def _kind(exc: BaseException | None) -> str:
    """ "ok", or which of TypeError / ValueError / IndexError the exception is."""
    if exc is None:
        return "ok"
    kinds = [c.__name__ for c in ALLOWED if isinstance(exc, c)]
    return "/".join(kinds) if kinds else f"other:{type(exc).__name__}"


def _fingerprint(obj: Any) -> Any:
    """Enough of an argument to see whether a call changed it."""
    if isinstance(obj, np.ndarray):
        return (obj.dtype.str, obj.shape, obj.tobytes())
    if isinstance(obj, memoryview):
        return obj.tobytes()
    if isinstance(obj, DLPackBox):
        return _fingerprint(obj.array)
    if isinstance(obj, (list, tuple)):
        return repr(obj)
    if isinstance(obj, (posembed.Windows, reference.Windows)):
        names = ("tokens", "starts", "lengths", "documents", "doc_offsets")
        return tuple(_fingerprint(getattr(obj, n)) for n in names)
    if isinstance(obj, (posembed.WindowLayout, reference.WindowLayout)):
        return tuple(_fingerprint(getattr(obj, n)) for n in LAYOUT_FIELDS)
    return None


def _run(fn: Callable[[list[Any], dict[str, Any]], Any], pos: list[Any], kw: dict[str, Any]):
    try:
        return fn(pos, kw), None
    except Exception as exc:  # judged by the caller
        return None, exc


def _failure(outcome: Outcome, message: str) -> None:
    """Raise FuzzFailure, unless a KNOWN_BUGS entry covers the outcome."""
    for bug in KNOWN_BUGS:
        if bug.matches(outcome):
            STATS.known[bug.name] += 1
            return
    lines = [f"{message}", f"call: {outcome.call.describe()}"]
    if outcome.fast_exc is not None:
        lines.append(f"posembed raised {type(outcome.fast_exc).__name__}: {outcome.fast_exc}")
    if outcome.slow_exc is not None:
        lines.append(f"the twin raised {type(outcome.slow_exc).__name__}: {outcome.slow_exc}")
    raise FuzzFailure(_short("\n".join(lines), 4000))


def _out_label(call: Call) -> str | None:
    return next((label for label, arg, _ in call.args if isinstance(arg, OutSpec)), None)


def _expected_out(call: Call) -> tuple[tuple[int, ...], np.dtype[Any]] | None:
    """The shape and dtype of the twin's result without out= (for a good out=)."""
    if call.slow is None or call.huge:
        return None
    args = [(label, arg, kw) for label, arg, kw in call.args if not isinstance(arg, OutSpec)]
    probe = Call(call.name, call.fast, call.slow, args)
    pos, kw = _build(probe, Context("slow", {}))
    if call.seed_label and kw.get(call.seed_label) is None:
        kw[call.seed_label] = 0  # the shape does not depend on the seed
    result, _ = _run(call.slow, pos, kw)
    if isinstance(result, reference.Windows):
        result = result.tokens
    if isinstance(result, np.ndarray):
        return result.shape, result.dtype
    return None


def execute(call: Call) -> str:
    """Run one call on posembed and its twin and check the property; returns the
    outcome's kind for the statistics."""
    out_label = _out_label(call)
    expected = _expected_out(call) if out_label else None

    # posembed
    fast_ctx = Context("fast", {}, expected)
    pos, kw = _build(call, fast_ctx)
    made = fast_ctx.made
    before = {k: _fingerprint(v) for k, v in made.items()}
    seed_before = posembed.last_seed()
    result, fast_exc = _run(call.fast, pos, kw)
    outcome = Outcome(call, "", fast_exc=fast_exc, fast_args=made)
    for label, obj in made.items():
        if label != out_label and before[label] is not None and _fingerprint(obj) != before[label]:
            outcome.problem = "input-modified"
            _failure(outcome, f"posembed changed its input {label!r}")
    if fast_exc is not None and not isinstance(fast_exc, ALLOWED):
        outcome.problem = "exception"
        _failure(outcome, f"posembed raised {type(fast_exc).__name__}")
        return "known"
    if out_label is not None:
        out = made[out_label]
        if fast_exc is not None and before[out_label] != _fingerprint(out):
            outcome.problem = "out-written"
            _failure(outcome, "posembed wrote to out= and then raised")
        if fast_exc is None and isinstance(out, np.ndarray) and not _returns_out(result, out):
            outcome.problem = "out-not-returned"
            _failure(outcome, "posembed accepted out= but did not return it")
    if fast_exc is None and call.huge:
        nbytes = getattr(getattr(result, "tokens", result), "nbytes", 0)
        if nbytes >= SMALL_RESULT:
            outcome.problem = "huge"
            _failure(outcome, f"posembed accepted a size >= 2^62 and returned {nbytes} bytes")
    if call.slow is None:
        return _kind(fast_exc)

    # the twin
    if call.huge and fast_exc is not None:
        # posembed refused a size >= 2^62: ValueError, or what the twin says
        # about the other arguments when that size is small
        ctx = Context("slow", {}, expected)
        spos, skw = _build(call, ctx, replace=call.huge)
        _, slow_exc = _run(call.slow, spos, skw)
        outcome.slow_exc = slow_exc
        allowed = {"ValueError", _kind(slow_exc)}
        if _kind(fast_exc) not in allowed:
            outcome.problem = "huge-type"
            _failure(
                outcome,
                f"posembed raised {_kind(fast_exc)} for a size >= 2^62; expected one of {allowed}",
            )
        return _kind(fast_exc)
    slow_ctx = Context("slow", {}, expected)
    spos, skw = _build(call, slow_ctx)
    if call.seed_label and skw.get(call.seed_label) is None:
        drawn = posembed.last_seed()
        if drawn is not None and drawn != seed_before:
            skw[call.seed_label] = drawn  # the seed posembed drew
    slow_result, slow_exc = _run(call.slow, spos, skw)
    outcome.slow_exc = slow_exc
    if fast_exc is not None:
        if not call.twin_errors:
            return _kind(fast_exc)  # a twin that does not validate cannot disagree
        if slow_exc is None:
            outcome.problem = "twin-returned"
            _failure(outcome, f"posembed raised {_kind(fast_exc)}, the twin returned a result")
        elif _kind(slow_exc) != _kind(fast_exc):
            outcome.problem = "type"
            _failure(outcome, f"posembed raised {_kind(fast_exc)}, the twin {_kind(slow_exc)}")
        elif "sum over windows" in _text(fast_exc) and _token(fast_exc) != _token(slow_exc):
            # stitch's integer sums past int64: both must name the same token
            outcome.problem = "mismatch"
            _failure(outcome, f"posembed refused {_token(fast_exc)}, the twin {_token(slow_exc)}")
        return _kind(fast_exc)
    if slow_exc is not None:
        if not call.twin_errors:
            return "ok"  # the twin does not validate: it may fail where posembed need not
        outcome.problem = "twin-raised"
        _failure(outcome, f"posembed returned a result, the twin raised {_kind(slow_exc)}")
        return "known"
    try:
        (call.compare or same_result)(result, slow_result)
        box = made.get(out_label or "")
        if isinstance(box, DLPackBox):  # posembed returns a view: the memory must hold it
            same_array(box.array, getattr(slow_result, "tokens", slow_result), "out= (DLPack)")
    except FuzzFailure as exc:
        outcome.problem = "mismatch"
        outcome.fast_result, outcome.slow_result = result, slow_result
        _failure(outcome, str(exc))
    return "ok"


def _token(exc: BaseException | None) -> str:
    """The token an error names ("token 12"), if any."""
    found = re.search(r"token \d+", _text(exc))
    return found.group() if found else "no token"


def _returns_out(result: Any, out: np.ndarray) -> bool:
    if isinstance(result, posembed.Windows):
        return result.tokens is out
    return result is out


@dataclass
class Settings:
    """Threads and work thresholds an input runs under (restored afterwards)."""

    threads: int | None
    tiny: bool

    def __enter__(self) -> Settings:
        if self.threads is not None:
            self._before = (
                posembed.get_num_threads() if posembed.config()["num_threads_set"] else None
            )
            posembed.set_num_threads(self.threads)
        if self.tiny:
            # the parallel and streaming paths on small arrays
            _core._probes.set_thresholds(1024, 4096)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.threads is not None:
            posembed.set_num_threads(self._before)
        if self.tiny:
            _core._probes.set_thresholds(-1, -1)


TARGET_NAMES = sorted(TARGETS)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """NumPy's warnings (casts of NaN, overflow in the twins) are no finding, and
    the test suite turns warnings into errors."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def decode(data: bytes) -> tuple[Call, Settings]:
    """The call and settings an input stands for. The first byte picks the
    function (see :func:`input_for`)."""
    r = Reader(data)
    name = r.pick(TARGET_NAMES)
    settings = Settings(r.pick([None, None, 1, 2, 3]), r.chance(3))
    with quiet():
        return TARGETS[name](Builder(r)), settings


def input_for(name: str, rest: bytes) -> bytes:
    """An input that calls the target ``name``, the rest of it drawn from ``rest``."""
    return bytes([TARGET_NAMES.index(name)]) + rest


# What each input stands for: "calls" (a public function against its twin),
# "race" (a window kernel raced by a writer thread) or "files" (a crafted file
# for a reader). Set by --mode.
MODE = "calls"
MODES = ("calls", "race", "files")


# A race or files input leaves reference cycles (its writer thread, tracebacks
# that hold the call's frames) keeping up to hundreds of MB of arrays until the
# collector gets to them, and glibc keeps freed heap memory. Whenever resident
# memory has grown this much since the last time, the cycles are collected and
# the heap handed back (gc.collect() alone took 780 MB to 328 MB once).
RSS_COLLECT = 512 << 20
HOSTILE_RSS_LIMIT_MB = 8192  # libFuzzer's limit in race and files modes (see run_atheris)
try:
    _malloc_trim: Any = ctypes.CDLL(None).malloc_trim
except (OSError, AttributeError):  # not glibc
    _malloc_trim = None
_rss_after_collect = 0


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _bound_memory() -> None:
    global _rss_after_collect
    if _resident_bytes() - _rss_after_collect > RSS_COLLECT:
        gc.collect()
        if _malloc_trim is not None:
            _malloc_trim(0)
        _rss_after_collect = _resident_bytes()


def TestOneInput(data: bytes) -> None:  # atheris' name for the function it calls
    STATS.inputs += 1
    if MODE != "calls":
        STATS.outcomes[race_input(data) if MODE == "race" else files_input(data)] += 1
        _bound_memory()
        return
    with quiet():
        call, settings = decode(data)
        with settings:
            kind = execute(call)
    STATS.outcomes[f"{call.name}: {kind}"] += 1


# ---------------------------------------------------------------- race mode
#
# --mode race: each input picks a window kernel, builds valid arguments large
# enough that the call runs for milliseconds, and starts a writer thread that
# rewrites the caller's arrays (offsets, starts, lengths, documents,
# doc_offsets, tokens, values) with hostile values while the call runs with
# the GIL released. The call must return or raise TypeError, ValueError or
# IndexError; its result is not looked at (it means nothing once the arrays
# changed). A crash or a hang ends the process, as in the calls mode.

# What the writer puts into an integer array: zero, negative, past every
# bound, near int64's ends (cast to the array's dtype, wrapping).
RACE_INTS = [0, -1, 1, 2**31 - 1, 1 << 40, -(1 << 40), HUGE, 2**63 - 1, -(2**63)]
RACE_FLOATS = [0.0, -0.0, NAN, INF, -INF, 3.4e38, -1e300, 1e-40]
# Offsets that size a result (window_layout's windows, stitch's tokens): a
# last offset rewritten to 2^31 - 1 or 2^40 leaves them valid, the layout of a
# real corpus that large (gigabytes to terabytes of output), which no race can
# tell from a request. Their writer uses values that are refused wherever they
# land, or that fit.
RACE_SIZING_INTS = [0, -1, 1, -(1 << 40), HUGE, 2**63 - 1, -(2**63)]
# The most one race call writes: enough for milliseconds of work, little memory.
RACE_BYTES = 16 << 20


@dataclass
class Scribble:
    """The writer's plan for one caller-owned array: (spot, value) writes made
    in turn, each put back afterwards when ``restore``; a value of None
    shuffles the spot's elements instead."""

    label: str
    array: np.ndarray
    writes: list[tuple[Any, Any]]
    restore: bool


class Writer(threading.Thread):
    """Rewrites arrays until stopped (each write a few bytecodes, so that the
    thread runs whenever the call it races has released the GIL)."""

    def __init__(self, plans: list[Scribble], delay: float, seed: int) -> None:
        super().__init__(daemon=True)
        self.plans, self.delay, self.seed = plans, delay, seed
        self.halt = threading.Event()
        self.writes = 0

    def run(self) -> None:
        rng = np.random.default_rng(self.seed)
        saved = [[plan.array[spot].copy() for spot, _ in plan.writes] for plan in self.plans]
        if self.delay:
            time.sleep(self.delay)
        with np.errstate(all="ignore"):  # (warnings' filters are not for threads to change)
            while not self.halt.is_set():
                for plan, goods in zip(self.plans, saved, strict=True):
                    for (spot, value), good in zip(plan.writes, goods, strict=True):
                        if value is None:
                            rng.shuffle(plan.array[spot])
                        else:
                            plan.array[spot] = value
                        if plan.restore:
                            plan.array[spot] = good
                        self.writes += 1
                if not self.plans:
                    return


def _scribble(
    r: Reader, label: str, array: np.ndarray, ints: list[int] = RACE_INTS
) -> Scribble | None:
    """A plan for ``array`` drawn from the input, writing ``ints`` into an
    integer array; None for an array no caller could write."""
    if not array.flags.writeable or array.size == 0 or array.ndim == 0:
        return None
    flat = array.reshape(-1) if array.flags.c_contiguous else None
    target = flat if flat is not None else array
    n = target.shape[0]
    pool = RACE_FLOATS if array.dtype.kind == "f" else ints
    writes: list[tuple[Any, Any]] = []
    for _ in range(r.int(1, 4)):
        where = r.pick(["one", "one", "first", "last", "run", "all"])
        if where == "one":
            spot: Any = r.int(0, n - 1)
        elif where == "first":
            spot = 0
        elif where == "last":
            spot = n - 1
        else:
            lo = 0 if where == "all" else r.int(0, n - 1)
            spot = slice(lo, n if where == "all" else min(n, lo + r.pick([2, 16, 256])))
        if r.chance(6) and isinstance(spot, slice):
            writes.append((spot, None))  # shuffled
        else:
            with quiet():
                value = np.array(r.pick(pool)).astype(array.dtype)
            writes.append((spot, value))
    return Scribble(label, target, writes, r.chance(2))


@dataclass
class RaceCase:
    """One race: the call, and the caller-owned arrays it reads (label, array)."""

    kernel: str
    run: Callable[[], Any]
    arrays: list[tuple[str, np.ndarray]]
    text: str
    sizing: tuple[str, ...] = ()  # labels of arrays written with RACE_SIZING_INTS, not RACE_INTS


def _race_corpus(r: Reader, bytes_per_window: int) -> tuple[int, int, str, np.ndarray]:
    """size, step, tail and document offsets of a corpus whose windows take
    about RACE_BYTES at ``bytes_per_window`` each."""
    size = r.pick([1, 2, 7, 16, 64, 256])
    step = r.pick([size, size, max(1, size // 2), 1, r.int(1, size)])
    tail = r.pick(["pad", "shift", "drop"])
    docs = r.pick([1, 2, 3, 17, 400, 20_000])
    windows = max(RACE_BYTES // max(bytes_per_window * size, 1) - docs, 1)
    n = min(windows * step, 1 << 23)
    n = r.int(n // 4, n)
    cuts = np.sort(r.rng().integers(0, n + 1, docs - 1))
    offsets = np.concatenate([[0], cuts, [n]]).astype(np.int64)
    return size, step, tail, offsets


def _race_tokens(r: Reader, n: int) -> np.ndarray:
    dtype = r.pick([np.int32, np.int64, np.uint16, np.int8])
    return (np.arange(n, dtype=np.int64) % 127).astype(dtype)


def _own_windows(r: Reader, w: posembed.Windows) -> posembed.Windows:
    """``w``, or a Windows built by hand from copies of its arrays (the caller's own)."""
    if r.chance(2):
        return w
    return posembed.Windows(
        w.tokens,
        w.starts.copy(),
        w.lengths.copy(),
        w.documents.copy(),
        w.doc_offsets.copy(),
        w.size,
        w.step,
        w.tail,
    )


def _own_layout(r: Reader, layout: posembed.WindowLayout) -> posembed.WindowLayout:
    if r.chance(2) and all(getattr(layout, f).flags.writeable for f in LAYOUT_FIELDS):
        return layout
    return posembed.WindowLayout(
        **{f: getattr(layout, f).copy() for f in LAYOUT_FIELDS},
        size=layout.size,
        step=layout.step,
        tail=layout.tail,
    )


WINDOW_FIELDS = ("starts", "lengths", "documents", "doc_offsets")


def _race_case(r: Reader, kernel: str) -> RaceCase:
    """The call ``kernel`` with arguments drawn from ``r``."""
    if kernel == "embed block":
        return _race_embed(r)
    if kernel == "PackPlan":
        return _race_plan(r)
    if kernel == "indexed pair":
        return _race_pair(r)
    values_d = r.pick([1, 1, 3])
    values_dtype = np.dtype(r.pick([np.float32, np.float64, np.int32, np.float16]))
    per_window = values_d * values_dtype.itemsize if "stitch" in kernel else 4
    size, step, tail, offsets = _race_corpus(r, per_window)
    n = int(offsets[-1])
    tokens = _race_tokens(r, n)
    text = f"{n} tokens ({tokens.dtype}), {offsets.size - 1} documents, size {size}, step {step}"
    text += f", tail {tail}"
    if kernel == "windows":
        pad = r.pick([0, -1, 7])

        def run() -> Any:
            return posembed.windows(
                tokens, size, step=step, tail=tail, offsets=offsets, pad_value=pad
            )

        return RaceCase(kernel, run, [("offsets", offsets), ("tokens", tokens)], text)
    if kernel == "window_layout":
        return RaceCase(
            kernel,
            lambda: posembed.window_layout(offsets, size, step=step, tail=tail),
            [("offsets", offsets)],
            text,
            sizing=("offsets",),
        )
    if kernel in ("Windows.owner", "stitch", "stitch block"):
        w = _own_windows(r, posembed.windows(tokens, size, step=step, tail=tail, offsets=offsets))
        arrays = [(f, getattr(w, f)) for f in WINDOW_FIELDS]
        if kernel == "Windows.owner":
            rule = r.pick(sorted(OWNER_RULES))
            return RaceCase(kernel, lambda: w.owner(rule), arrays, text + f", rule {rule}")
        shape = (len(w), size) if values_d == 1 and r.chance(2) else (len(w), size, values_d)
        values = r.rng().integers(-9, 9, shape).astype(values_dtype)
        reduce = r.pick(sorted(REDUCES))
        fill = r.pick([0, 1, -1, 2.5])
        text += f", values {values_dtype}{shape}, reduce {reduce}, fill {fill}"
        if kernel == "stitch":

            def run() -> Any:
                return posembed.stitch(values, w, reduce=reduce, fill=fill)

            return RaceCase(
                kernel, run, [("values", values), *arrays], text, sizing=("doc_offsets",)
            )
        return _race_stitch_block(r, w, values, reduce, fill, text)
    # WindowLayout.cut and the Dask block that calls it
    layout = _own_layout(r, posembed.window_layout(offsets, size, step=step, tail=tail))
    count = len(layout)
    first, end = sorted((r.int(0, count), r.int(0, count)))
    ranged = kernel == "window block" or r.chance(2)
    token_start = 0
    if ranged and first < end and r.chance(2):
        # the block holds the corpus from the first window's start on
        token_start = int(layout.doc_offsets[layout.documents[first]] + layout.starts[first])
    block = tokens[token_start:]
    pad = r.pick([0, 1, 99])
    arrays = [(f, getattr(layout, f)) for f in LAYOUT_FIELDS] + [("tokens", block)]
    text += f", windows [{first}, {end}) of {count}, token_start {token_start}"
    if kernel == "window block":
        return RaceCase(
            kernel,
            lambda: dask_compute._window_block(block, layout, first, end, token_start, pad),
            arrays,
            text,
        )
    span = slice(first, end) if ranged else None
    return RaceCase(
        kernel,
        lambda: layout.cut(block, windows=span, token_start=token_start, pad_value=pad),
        arrays,
        text + ("" if ranged else " (all)"),
    )


def _race_stitch_block(
    r: Reader, w: posembed.Windows, values: np.ndarray, reduce: str, fill: Any, text: str
) -> RaceCase:
    """posembed.dask's stitch of one block of tokens [a, b), with the windows
    holding any of them (as posembed.dask.stitch picks them)."""
    n = int(w.doc_offsets[-1])
    a, b = sorted((r.int(0, n), r.int(0, n)))
    b = max(b, min(a + 1, n))
    corpus_starts = w.doc_offsets[:-1][w.documents] + w.starts
    corpus_ends = corpus_starts + w.lengths
    first = int(np.searchsorted(corpus_ends, a, side="right"))
    end = int(np.searchsorted(corpus_starts, b, side="left"))
    first = min(first, end)
    starts, lengths = corpus_starts[first:end], w.lengths[first:end].copy()
    documents, part = w.documents[first:end].copy(), values[first:end]

    def run() -> Any:
        return dask_compute._stitch_block(
            part,
            a,
            b,
            starts,
            lengths,
            documents,
            w.doc_offsets,
            w.size,
            w.step,
            w.tail,
            reduce,
            fill,
        )

    arrays = [("values", part), ("corpus_starts", starts), ("lengths", lengths)]
    arrays += [("documents", documents), ("doc_offsets", w.doc_offsets)]
    return RaceCase("stitch block", run, arrays, text + f", tokens [{a}, {b})")


PLAN_FIELDS = ("document_lengths", "row_offsets", "documents", "starts", "lengths", "offsets")
PLAN_DEFECTS = ["short", "overlap", "gap", "past capacity", "duplicate", "row_offsets"]


def _race_plan(r: Reader) -> RaceCase:
    """A PackPlan built by hand from a real plan's arrays (the caller's own,
    with a defect or not) and used (unpack, cut, row) while a writer rewrites
    those arrays: a documented exception, or the results of the arrays the
    plan holds (its own copies), as the twin computes them."""
    rng = r.rng()
    n, capacity = r.int(0, 400), r.pick([1, 3, 16, 64, 1000])
    lengths = rng.integers(0, r.pick([2, 20, 200, 3000]), n)
    strategy, split = r.pick(["bfd", "ffd", "wrapped"]), r.pick(["pieces", "truncate"])
    real = posembed.pack(lengths, capacity, strategy=strategy, split=split)
    arrays = {f: np.array(getattr(real, f)) for f in PLAN_FIELDS}
    text = f"{n} documents, capacity {capacity}, {strategy}, {split}"
    if r.chance(2) and arrays["documents"].size:
        defect = r.pick(PLAN_DEFECTS)
        e = r.int(0, arrays["documents"].size - 1)
        if defect == "short":
            name = r.pick(PLAN_FIELDS[1:])
            arrays[name] = arrays[name][: r.int(0, max(0, arrays[name].size - 1))]
        elif defect == "overlap":
            arrays["offsets"][e] = max(0, arrays["offsets"][e] - r.int(1, 3))
        elif defect == "gap":
            arrays["offsets"][e] += r.int(1, 3)
        elif defect == "past capacity":
            arrays["lengths"][e] += capacity
        elif defect == "duplicate":
            arrays["documents"][e] = arrays["documents"][r.int(0, arrays["documents"].size - 1)]
        else:
            arrays["row_offsets"][r.int(0, arrays["row_offsets"].size - 1)] += r.pick([-1, 1, 2])
        text += f", defect {defect} at {e}"
    use = r.pick(["unpack", "cut", "row"])
    text += f", {use}"
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = (np.arange(int(offsets[-1])) % 50_000).astype(np.uint16)

    def run() -> Any:
        plan = posembed.PackPlan(
            arrays["document_lengths"], capacity, strategy, split,
            *(arrays[f] for f in PLAN_FIELDS[1:]),
        )  # fmt: skip
        own = {f: getattr(plan, f) for f in PLAN_FIELDS}
        twin = reference_pack.PackPlan(own["document_lengths"], capacity, strategy, split,
                                  *(own[f] for f in PLAN_FIELDS[1:]))  # fmt: skip
        if use == "unpack":
            values = np.arange(plan.rows * capacity, dtype=np.float32).reshape(plan.rows, -1)
            got, want = plan.unpack(values), twin.unpack(values)
            same = all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
        elif use == "cut":
            got, want = plan.cut(tokens, offsets), twin.cut(tokens, offsets)
            same = all(np.array_equal(getattr(got, k), v) for k, v in want.items() if v is not None)
        else:
            row = r.int(0, max(0, plan.rows - 1)) if plan.rows else 0
            got, want = plan.row(row), twin.row(row)
            same = all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
        if not same:
            raise AssertionError(f"PackPlan.{use} differs from its twin on the plan's own arrays")
        return got

    return RaceCase("PackPlan", run, [(f, a) for f, a in arrays.items()], text)


def _race_pair(r: Reader) -> RaceCase:
    """An indexed dataset opened and read while another thread replaces it,
    again and again, with a pair of the same sizes and other tokens: every
    read is the old corpus or the new one whole, or a documented error."""
    root = Path(tempfile.mkdtemp(prefix="posembed-fuzz-pair-"))
    rng = r.rng()
    lengths = rng.integers(0, r.pick([3, 50, 5000]), r.int(1, 40))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    versions = [
        (rng.integers(0, 1000, int(offsets[-1])) + 1000 * k).astype(np.int32) for k in range(2)
    ]
    prefix = root / "pair"
    posembed.write_indexed(prefix, versions[0], offsets, dtype=np.int32)
    opens = r.int(1, 8)

    def run() -> Any:
        stop = threading.Event()

        def replace() -> None:
            k = 1
            while not stop.is_set():
                posembed.write_indexed(prefix, versions[k], offsets, dtype=np.int32, force=True)
                k ^= 1

        writer = threading.Thread(target=replace, daemon=True)
        writer.start()
        try:
            for _ in range(opens):
                try:
                    corpus = posembed.IndexedCorpus(prefix)
                    tokens, _ = corpus.to_arrays()
                except (ValueError, OSError):  # a pair being replaced: refused, not mixed
                    continue
                if not any(np.array_equal(tokens, v) for v in versions):
                    raise AssertionError("an .idx read with another pair's .bin: tokens mixed")
        finally:
            stop.set()
            writer.join()
            shutil.rmtree(root, ignore_errors=True)

    return RaceCase("indexed pair", run, [], f"{lengths.size} documents, {opens} opens")


def _race_embed(r: Reader) -> RaceCase:
    """posembed.dask's embed of one block: ids, positions and tables rewritten."""
    d = r.pick([1, 8, 64])
    vocab, rows = r.pick([1, 50, 5000]), r.pick([1, 64, 4096])
    batch = max(RACE_BYTES // (4 * d * 256), 1)
    length = r.int(1, 256)
    rng = r.rng()
    ids = rng.integers(0, vocab, (batch, length))
    token_table = rng.standard_normal((vocab, d), dtype=np.float32)
    pos_table = rng.standard_normal((max(rows, length), d), dtype=np.float32)
    positions = None if r.chance(2) else rng.integers(0, pos_table.shape[0], (batch, length))
    dropout = r.pick([0.0, 0.0, 0.1])
    seed = r.pick([None, 3])
    first_row = r.pick([0, 5])
    arrays = [("ids", ids), ("token_table", token_table), ("pos_table", pos_table)]
    if positions is not None:
        arrays.append(("positions", positions))

    def run() -> Any:
        return dask_compute._embed_block(
            ids, token_table, pos_table, positions, 0, dropout, seed, first_row
        )

    text = f"ids {ids.shape}, d {d}, tables {vocab}/{pos_table.shape[0]} rows, dropout {dropout}"
    return RaceCase("embed block", run, arrays, text)


RACE_KERNELS = ["windows", "Windows.owner", "stitch", "window_layout", "WindowLayout.cut"]
RACE_KERNELS += ["PackPlan", "indexed pair"]
if dask_compute is not None:  # the Dask block functions, where the dask extra is installed
    RACE_KERNELS += ["window block", "stitch block", "embed block"]


LAST_WRITER: Writer | None = None  # the latest race's writer (for the tests)


def race_input(data: bytes) -> str:
    """Run one race input; returns the kernel and outcome for the statistics."""
    r = Reader(data)
    kernel = r.pick(RACE_KERNELS)
    with quiet():
        case = _race_case(r, kernel)
    plans = [
        p
        for label, a in case.arrays
        if (p := _scribble(r, label, a, RACE_SIZING_INTS if label in case.sizing else RACE_INTS))
        is not None
    ]
    delay = r.pick([0.0, 0.0, 0.0005, 0.002, 0.005])
    global LAST_WRITER
    writer = LAST_WRITER = Writer(plans, delay, r.int(0, 2**32 - 1))
    writer.start()
    try:
        with quiet():
            _, exc = _run(lambda pos, kw: case.run(), [], {})
    finally:
        writer.halt.set()
        writer.join()
    if exc is not None and not isinstance(exc, ALLOWED):
        call = Call(f"race {kernel}", lambda pos, kw: None, None)
        call.add("case", Value(case.text))
        call.add("writer", Value([(p.label, [(s, v) for s, v in p.writes]) for p in plans]))
        _failure(Outcome(call, "exception", fast_exc=exc), f"{kernel} raised {type(exc).__name__}")
        return f"race {kernel}: known"
    return f"race {kernel}: {_kind(exc)}"


# ---------------------------------------------------------------- files mode
#
# --mode files: each input builds a small file or folder and hands it to a
# public reader: a safetensors checkpoint to resize_checkpoint and
# `posembed resize`, a .npy file to chunk_file and `posembed chunk` (as the
# tokens or as --offsets) and to `posembed plot similarity`, a parted output
# to posembed.dask.read_parts; a model folder to resize_checkpoint and
# `posembed resize`, an Arrow or Parquet corpus and a folder posembed chunk
# wrote to chunk_file and `posembed chunk` (their sections below). Each is a
# valid file with 0 to 3 crafted defects ("planted"). The reader must return (a valid input must be
# accepted) or raise one of its documented exceptions; the command must exit
# 0, or 2 with one line on stderr, never with a traceback; read_parts must not
# read outside its folder, block on a FIFO, or serve rows that disagree with
# its index.


class Raw(str):
    """JSON text put into a crafted document as it is."""


@dataclass
class Obj:
    """A JSON object as (key, value) pairs, so that a key may come twice."""

    pairs: list[tuple[str, Any]]

    def get(self, key: str) -> Any:
        return next(v for k, v in self.pairs if k == key)

    def set(self, key: str, value: Any) -> None:
        self.pairs = [(k, value if k == key else v) for k, v in self.pairs]

    def drop(self, key: str) -> None:
        self.pairs = [(k, v) for k, v in self.pairs if k != key]


def _json(x: Any) -> str:
    if isinstance(x, Raw):
        return str(x)
    if isinstance(x, Obj):
        return "{" + ", ".join(f"{json.dumps(k)}: {_json(v)}" for k, v in x.pairs) + "}"
    if isinstance(x, list):
        return "[" + ", ".join(_json(v) for v in x) + "]"
    return json.dumps(x)


def _deep(r: Reader) -> str:
    depth = r.pick([64, 1000, 20_000, 200_000])
    if r.chance(2):
        return "[" * depth + "]" * depth if r.chance(3) else "[" * depth + "1" + "]" * depth
    return '{"a": ' * depth + "1" + "}" * depth


NONFINITE = ["NaN", "Infinity", "-Infinity"]
BAD_UTF8 = [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xfe\xfe", b"\x80"]

ST_DEFECTS = ["nest", "nonfinite", "duplicate", "length", "offsets", "shape", "dtype", "utf8"]
ST_DEFECTS += ["surrogate", "metadata", "data", "not-object", "bom", "numbers"]
ST_DTYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64}


@dataclass
class Crafted:
    """A crafted input on disk: what the reader gets, and the defects planted."""

    kind: str
    path: Path
    planted: list[str]
    fifos: list[Path] = field(default_factory=list)
    escapes: bool = False  # a part that lies outside the folder
    note: str = ""


def _safetensors_file(r: Reader, folder: Path) -> Crafted:
    rows, d = r.int(1, 12), r.int(1, 5)
    dt = r.pick(sorted(ST_DTYPES))
    table = r.rng().standard_normal((rows, d)).astype(ST_DTYPES[dt])
    data = bytearray(table.astype(table.dtype.newbyteorder("<")).tobytes())
    entry = Obj([("dtype", dt), ("shape", [rows, d]), ("data_offsets", [0, len(data)])])
    top = Obj([("pos", entry)])
    other: Obj | None = None
    if r.chance(2):
        k = r.int(0, 6)
        other = Obj(
            [("dtype", "I32"), ("shape", [k]), ("data_offsets", [len(data), len(data) + 4 * k])]
        )
        data += np.arange(k, dtype="<i4").tobytes()
        top.pairs.insert(r.int(0, 1), ("other", other))
    meta: Obj | None = Obj([("format", "pt")]) if r.chance(2) else None
    if meta is not None:
        top.pairs.insert(0, ("__metadata__", meta))
    whole: str | None = None
    hlen: int | None = None
    byte_edits: list[tuple[bytes, bytes]] = []
    planted = []
    for _ in range(r.pick([0, 1, 1, 1, 2, 3])):
        defect = r.pick(ST_DEFECTS)
        where = ""
        if defect == "nest":
            where = r.pick(["whole", "field", "shape", "metadata"])
            text = Raw(_deep(r))
            if where == "whole":
                whole = text
            elif where == "field":
                entry.pairs.append(("extra", text))
            elif where == "shape":
                entry.set("shape", text)
            else:
                top.pairs.insert(0, ("__metadata__", text))
        elif defect == "nonfinite":
            lit = Raw(r.pick(NONFINITE))
            where = r.pick(["field", "shape", "offsets", "metadata", "other"])
            if where == "field":
                entry.pairs.append(("scale", lit))
            elif where == "shape":
                entry.set("shape", [lit, d])
            elif where == "offsets":
                entry.set("data_offsets", [0, lit])
            elif where == "metadata":
                top.pairs.insert(0, ("__metadata__", Obj([("x", lit)])))
            elif other is not None:
                other.pairs.append(("scale", Obj([("v", [lit])])))
        elif defect == "duplicate":
            where = r.pick(["tensor", "field", "metadata", "metadata key"])
            if where == "tensor":
                top.pairs.append(("pos", entry))
            elif where == "field":
                entry.pairs.append(("dtype", dt))
            elif where == "metadata":
                top.pairs.append(("__metadata__", Obj([("format", "np")])))
            elif meta is not None:
                meta.pairs.append(("format", "pt"))
        elif defect == "length":
            hlen = r.pick([0, 1, 7, -1, 2**63, 2**64 - 1, 100_000_001, "end+1", "short"])
            where = str(hlen)
        elif defect == "offsets":
            n = len(data)
            where = r.pick(["overlap", "outside", "reversed", "negative", "float", "three", "text"])
            where = r.pick([where, "bool", "huge", "gap"])
            bad: Any = {
                "overlap": [0, n + 4],
                "outside": [0, n + 1000],
                "reversed": [n, 0],
                "negative": [-4, n],
                "float": [0.0, float(n)],
                "three": [0, n, n],
                "text": ["0", str(n)],
                "bool": [False, n],
                "huge": [0, 2**64],
                "gap": [4, n + 4],
            }[where]
            entry.set("data_offsets", bad)
        elif defect == "shape":
            where = r.pick(["2^64 elements", "2^63", "negative", "float", "bool", "empty", "text"])
            where = r.pick([where, "more", "nested", "null", "zero"])
            entry.set(
                "shape",
                {
                    "2^64 elements": [2**32, 2**32],
                    "2^63": [2**63],
                    "negative": [-rows, -d],
                    "float": [float(rows), d],
                    "bool": [True, d],
                    "empty": [],
                    "text": "rows",
                    "more": [rows, d, 2**40, 2**40],
                    "nested": [[rows], d],
                    "null": None,
                    "zero": [0, d],
                }[where],
            )
        elif defect == "dtype":
            value = r.pick(["Q8", "", "f32", "F8_E4M3", "I64", 5, None, ["F32"], "F32 ", "BOOL"])
            entry.set("dtype", value)
            where = repr(value)
        elif defect == "utf8":
            bad_bytes = r.pick(BAD_UTF8)
            where = r.pick(["name", "metadata", "other"])
            target = {"name": b'"pos"', "metadata": b'"pt"', "other": b'"other"'}[where]
            byte_edits.append((target, target[:-1] + bad_bytes + b'"'))
            where += f" {bad_bytes!r}"
        elif defect == "surrogate":
            where = r.pick(["other", "metadata"])
            if where == "other" and other is not None:
                top.pairs.append(("x\\ud800", Raw(_json(other))))
            else:
                top.pairs.insert(0, ("__metadata__", Obj([("k", Raw('"\\udfff"'))])))
        elif defect == "metadata":
            value = r.pick(['{"a": 1}', "[]", "null", '{"a": {"b": "c"}}', '"str"', '{"a": null}'])
            top.pairs.insert(0, ("__metadata__", Raw(value)))
            where = value
        elif defect == "data":
            where = r.pick(["short", "long"])
            if where == "short":
                del data[-r.int(1, max(len(data), 1)) :]
            else:
                data += b"\0" * r.int(1, 9)
        elif defect == "not-object":
            whole = Raw(r.pick(["[]", "1", "null", '"x"', "", " ", "{", "{}x", "[{}]"]))
            where = repr(str(whole))
        elif defect == "bom":
            byte_edits.append((b"", "\ufeff".encode()))
        elif defect == "numbers":
            lit = r.pick(["1e2", "0x10", "01", "-0", "1.0", "+1", "1_0"])
            entry.set("shape", [Raw(lit), d])
            where = lit
        planted.append(f"safetensors:{defect}" + (f" ({where})" if where else ""))
    header = (whole if whole is not None else _json(top)).encode("utf-8", "surrogatepass")
    for old, new in byte_edits:
        header = new + header if old == b"" else header.replace(old, new, 1)
    header += b" " * (-len(header) % 8)
    if hlen == "end+1":
        hlen = len(header) + len(data) + 1
    elif hlen == "short":
        hlen = max(len(header) - 3, 0)
    length = len(header) if hlen is None else int(hlen) % 2**64
    path = folder / "model.safetensors"
    path.write_bytes(length.to_bytes(8, "little") + header + bytes(data))
    return Crafted("safetensors", path, planted, note=f"table {dt} ({rows}, {d})")


NPY_SHAPES = ["(4611686018427387904,)", "(9223372036854775807,)", "(1099511627776,)", "(-1,)"]
NPY_SHAPES += ["(-4611686018427387904,)", "()", "(3, 4)", "(1.5,)", "'x'", "(0,)", "None"]
NPY_SHAPES += ["(4294967296, 4294967296)", "(2305843009213693952,)"]
NPY_DEFECTS = ["shape", "descr", "fortran", "length", "version", "magic", "dict", "data", "bytes"]


def _npy_file(r: Reader, path: Path, values: np.ndarray) -> Crafted:
    """``values`` (little-endian) saved as a .npy file, by hand, with defects."""
    descr, fortran, shape = repr(values.dtype.str), "False", repr(values.shape)
    version, magic = (1, 0), b"\x93NUMPY"
    body = values.tobytes()
    hlen: int | None = None
    text: str | None = None
    planted = []
    for _ in range(r.pick([0, 1, 1, 1, 2, 3])):
        defect = r.pick(NPY_DEFECTS)
        if defect == "shape":
            shape = r.pick([*NPY_SHAPES, f"({values.size}, 1)", f"({values.size + 1},)"])
            planted.append(f"npy:shape {shape}")
        elif defect == "descr":
            descr = r.pick(["'|O'", "'<f8'", "'>i8'", "'<U3'", "'|V8'", "'nonsense'", "5"])
            descr = r.pick([descr, "[('a', '<i8')]", "None", "'<i16'", "'<M8[ns]'", "'|b1'"])
            descr = r.pick([descr, "'<u2'", "'|i1'", "'O'", "('<i8', (2,))"])
            planted.append(f"npy:descr {descr}")
        elif defect == "fortran":
            fortran = r.pick(["True", "'garbage'", "1", "None", "[]"])
            planted.append(f"npy:fortran_order {fortran}")
        elif defect == "length":
            hlen = r.pick([0, 1, 0xFFFF, 2**31, 2**32 - 1, -64, 64])
            planted.append(
                f"npy:header length {hlen:+d}" if hlen in (-64, 64) else f"npy:header length {hlen}"
            )
        elif defect == "version":
            version = r.pick([(2, 0), (3, 0), (9, 9), (0, 0), (1, 1)])
            planted.append(f"npy:version {version}")
        elif defect == "magic":
            magic = r.pick([b"\x93NUMPZ", b"", b"\x93NUM"])
            planted.append(f"npy:magic {magic!r}")
        elif defect == "dict":
            text = r.pick(
                [
                    "[1, 2]",
                    "{'descr': '<i8'}",
                    "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), 'x': 1}",
                    "__import__('os').getcwd()",
                    "{" * 300,
                    "(" * 300 + ")" * 300,
                    "",
                    "{'descr': '<i8', 'fortran_order': False, 'shape': (1,) * 100}",
                ]
            )
            planted.append(f"npy:header {_short(text, 40)!r}")
        elif defect == "data":
            if r.chance(2) and body:
                body = body[: -r.int(1, len(body))]
                planted.append("npy:data short")
            else:
                body += b"\1" * r.int(1, 15)
                planted.append("npy:data long")
        elif defect == "bytes":
            planted.append("npy:header bytes")
            text = f"{{'descr': {descr}, 'fortran_order': False, 'shape': {shape}, }}\xff\x00"
    if text is None:
        text = f"{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}"
    raw = text.encode("latin-1", "replace")
    wide = version[0] >= 2
    prefix = len(magic) + 2 + (4 if wide else 2)
    raw += b" " * (-(prefix + len(raw) + 1) % 64) + b"\n"
    size = len(raw) if hlen is None else (len(raw) + hlen if hlen in (-64, 64) else hlen)
    size %= 2 ** (32 if wide else 16)
    blob = magic + bytes(version) + size.to_bytes(4 if wide else 2, "little") + raw + body
    path.write_bytes(blob)
    return Crafted("npy", path, planted)


PART_DEFECTS = ["index text", "version", "parts", "file", "windows", "size", "dtype", "symlink"]
PART_DEFECTS += ["symlinked parts", "fifo", "folder", "part dtype", "part shape", "part cut"]
PART_DEFECTS += ["meta", "layout file", "part object"]
ESCAPES = ("../x.npy", "ABSOLUTE", "parts/../../x.npy", "parts/../index.json", "/dev/zero")


def _parts_folder(r: Reader, root: Path) -> Crafted:
    """A parted output as posembed chunk --dask writes it, with defects."""
    rng = r.rng()
    n, size = r.int(0, 60), r.int(1, 6)
    step, tail = r.int(1, size), r.pick(["pad", "shift", "drop"])
    dtype = np.dtype(r.pick(["<i4", "<i8", "<u2", "|u1"]))
    tokens = (np.arange(n) % 100).astype(dtype)
    offsets = np.array([0, *sorted(rng.integers(0, n + 1, r.int(0, 3))), n])
    w = posembed.windows(tokens, size, step=step, tail=tail, offsets=offsets)
    count = len(w)
    bounds = [0, *sorted(int(x) for x in rng.integers(0, count + 1, r.int(0, 3))), count]
    folder = root / "out"
    (folder / "parts").mkdir(parents=True)
    parts = []
    # each part's tokens run from its first window's start in the corpus to the next part's
    corpus = [int(w.doc_offsets[w.documents[i]] + w.starts[i]) for i in range(count)]
    token_bounds = [0, *(corpus[a] if a < count else n for a in bounds[1:-1]), n]
    for c in range(len(bounds) - 1):
        a, b = bounds[c], bounds[c + 1]
        np.save(folder / "parts" / f"part-{c:05d}.npy", w.tokens[a:b])
        spans = [("windows", [a, b]), ("tokens", [token_bounds[c], token_bounds[c + 1]])]
        parts.append(Obj([("file", f"parts/part-{c:05d}.npy"), *spans]))
    for name in ("starts", "lengths", "documents", "doc_offsets"):
        np.save(folder / f"{name}.npy", getattr(w, name))
    meta = Obj([("input", "tokens.npy"), ("tokens", n), ("documents", len(offsets) - 1)])
    meta.pairs += [("windows", count), ("size", size), ("step", step), ("tail", tail)]
    meta.pairs += [("dtype", dtype.name), ("pad_value", 0), ("parts", len(parts))]
    index = Obj([("version", 1), ("dtype", dtype.str), ("size", size), ("parts", parts)])
    # what an escaping entry would serve: rows of the right shape, all 77
    np.save(root / "x.npy", np.full((max(bounds[1] - bounds[0], 1), size), 77, dtype))
    crafted = Crafted("parts", folder, [])
    index_text: str | None = None
    meta_text: str | None = None
    k = r.int(0, len(parts) - 1)
    part = parts[k]
    part_path = folder / "parts" / f"part-{k:05d}.npy"
    for _ in range(r.pick([0, 1, 1, 1, 2])):
        defect = r.pick(PART_DEFECTS)
        where = ""
        if defect == "index text":
            where = r.pick(
                ["", "{", "[]", "null", "1", '"x"', "deep", "nonfinite", "twice", "utf8"]
            )
            if where == "deep":
                index_text = _deep(r)
            elif where == "nonfinite":
                index.set("size", Raw(r.pick(NONFINITE)))
            elif where == "twice":
                index.pairs.append(("parts", []))
            elif where == "utf8":
                index_text = _json(index).replace('"parts"', '"par\udcfftsx"', 1)
            else:
                index_text = where
        elif defect in ("version", "parts", "size", "dtype"):
            choices = {
                "version": [None, 2, "1", 0, [1], Raw("NaN")],
                "parts": [None, Obj([]), "parts", 5, [1], ["x"], [[0]], [Obj([])], Raw("null")],
                "size": [None, "3", 0, -1, 2**64, 1.5, Raw("null"), size + 1],
                "dtype": [None, "nonsense", 5, Raw("null"), "<f8", ">i4", "|O", "<U3", "<i2"],
            }[defect]
            value = r.pick(choices)
            if value is None:
                index.drop(defect)
            else:
                index.set(defect, value)
            where = "missing" if value is None else _short(_json(value), 30)
        elif defect == "file":
            value = r.pick([None, 5, Raw("null"), ["a"], "", "parts", "parts/", "parts/nope.npy"])
            value = r.pick([value, "parts/a\u0000.npy", "parts/part-00000.npy", *ESCAPES])
            if value == "ABSOLUTE":
                value = str(root / "x.npy")
            if value is None:
                part.drop("file")
            else:
                part.set("file", value)
            where = "missing" if value is None else _short(_json(value), 40)
        elif defect == "windows":
            a, b = bounds[k], bounds[k + 1]
            value = r.pick([None, 5, [a], [a, b, b], [str(a), str(b)], [float(a), float(b)]])
            value = r.pick([value, [Raw("NaN"), b], [b, a], [-1, b], [a, 2**64], Raw("null")])
            if value is None:
                part.drop("windows")
            else:
                part.set("windows", value)
            where = "missing" if value is None else _short(_json(value), 30)
        elif defect == "symlink":
            _clear(part_path)
            part_path.symlink_to(r.pick([root / "x.npy", Path("../../x.npy"), Path("/dev/zero")]))
        elif defect == "symlinked parts" and not (folder / "parts").is_symlink():
            shutil.move(folder / "parts", root / "elsewhere")
            (folder / "parts").symlink_to(root / "elsewhere")
        elif defect == "fifo":
            where = r.pick(["part", "starts.npy", "index.json", "meta.json"])
            victim = part_path if where == "part" else folder / where
            _clear(victim)
            os.mkfifo(victim)
            crafted.fifos.append(victim)
        elif defect == "folder":
            _clear(part_path)
            part_path.mkdir()
        elif defect in ("part dtype", "part shape", "part object"):
            rows = w.tokens[bounds[k] : bounds[k + 1]]
            _clear(part_path)  # (never np.save into a FIFO: that blocks)
            if defect == "part dtype":
                other = r.pick([np.int64, np.int16, np.float64, np.uint8, ">i4"])
                np.save(part_path, rows.astype(other))
                where = np.dtype(other).str
            elif defect == "part shape":
                shaped = r.pick(["more columns", "1-D", "fortran", "3-D"])
                np.save(
                    part_path,
                    {
                        "more columns": np.zeros((rows.shape[0], size + 1), dtype),
                        "1-D": rows.reshape(-1),
                        "fortran": np.asfortranarray(rows),
                        "3-D": rows[:, :, None],
                    }[shaped],
                )
                where = shaped
            else:
                np.save(part_path, np.empty(rows.shape, object), allow_pickle=True)
        elif defect == "part cut":
            saved = io.BytesIO()
            np.save(saved, w.tokens[bounds[k] : bounds[k + 1]])
            blob = saved.getvalue()
            _clear(part_path)
            part_path.write_bytes(blob[: r.int(0, max(len(blob) - 1, 0))])
        elif defect == "meta":
            where = r.pick(["", "{}", "size", "tail", "step", "deep"])
            if where == "deep":
                meta_text = _deep(r)
            elif where in ("size", "tail", "step"):
                meta.set(where, r.pick(["x", Raw("null"), -1, 2**64, Raw("NaN")]))
            else:
                meta_text = where
        elif defect == "layout file":
            name = r.pick(["starts", "lengths", "documents", "doc_offsets"])
            how = r.pick(["missing", "empty", "float", "2-D", "short"])
            target = folder / f"{name}.npy"
            _clear(target)
            if how == "empty":
                target.write_bytes(b"")
            elif how != "missing":
                good = getattr(w, name)
                np.save(
                    target,
                    {
                        "float": good.astype(np.float64),
                        "2-D": good[:, None],
                        "short": good[:-1],
                    }[how],
                )
            where = f"{name} {how}"
        crafted.planted.append(f"parts:{defect}" + (f" ({where})" if where else ""))
    if not any(p.startswith("parts:fifo") and "index.json" in p for p in crafted.planted):
        text = index_text if index_text is not None else _json(index)
        (folder / "index.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    if not any(p.startswith("parts:fifo") and "meta.json" in p for p in crafted.planted):
        (folder / "meta.json").write_text(meta_text if meta_text is not None else _json(meta))
    # what read_parts must still refuse after the later defects undid some:
    # a part outside the folder or a FIFO, where index.json still lists it
    listed = index_text is None and any(key == "parts" and v is parts for key, v in index.pairs)
    named = next((v for key, v in part.pairs if key == "file"), None)
    own = named == f"parts/part-{k:05d}.npy"
    outside = named in ESCAPES or named == str(root / "x.npy")
    crafted.escapes = listed and (
        (folder / "parts").is_symlink() or outside or (own and part_path.is_symlink())
    )
    crafted.fifos = [
        f
        for f in crafted.fifos
        if (f != part_path or (listed and own)) and f.is_fifo() and not f.is_symlink()
    ]
    crafted.note = f"{count} windows of {size} ({dtype.str}) in {len(parts)} parts"
    return crafted


def _clear(path: Path) -> None:
    """Remove whatever is at ``path`` (file, link, FIFO or folder)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _cli(argv: list[str]) -> tuple[int, str, BaseException | None]:
    """``posembed ARGV`` in this process: exit status, stderr, and the exception
    that would have ended the command with a traceback (else None)."""
    err = io.StringIO()
    code, exc = 0, None
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main(argv)
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        except Exception as raised:  # a traceback, for the caller to judge
            exc = raised
    return code, err.getvalue(), exc


def _files_failure(crafted: Crafted, reader: str, problem: str, message: str, exc=None) -> str:
    call = Call(f"files {crafted.kind}: {reader}", lambda pos, kw: None, None)
    call.add("planted", Value(crafted.planted))
    if crafted.note:
        call.add("file", Value(crafted.note))
    outcome = Outcome(call, problem, fast_exc=exc, planted=tuple(crafted.planted))
    _failure(outcome, message)
    return "known"


def _judge(
    crafted: Crafted, reader: str, exc: BaseException | None, allowed: tuple[type, ...]
) -> str:
    """A reader's outcome: its result or a documented exception; a valid input accepted."""
    if exc is not None and not isinstance(exc, allowed):
        return _files_failure(
            crafted,
            reader,
            "exception",
            f"{reader} raised {type(exc).__name__}: {_short(str(exc))}",
            exc,
        )
    if exc is not None and not crafted.planted:
        return _files_failure(
            crafted, reader, "refused", f"{reader} refused a valid input: {_short(str(exc))}", exc
        )
    return _kind(exc)


def _judge_cli(
    crafted: Crafted,
    argv: list[str],
    how: str = "one line",
    done: tuple[int, str, BaseException | None] | None = None,
) -> str:
    """``posembed ARGV``: exit 0, or 2 with one error line on stderr (after
    argparse's usage for ``how="usage"``); never a traceback. ``done``: what
    :func:`_cli` gave, where the caller ran it."""
    reader = "posembed " + " ".join(argv[:2] if argv[0] == "plot" else argv[:1])
    code, err, exc = _cli(argv) if done is None else done
    if exc is not None:
        return _files_failure(
            crafted,
            reader,
            "traceback",
            f"{reader} ended with a traceback: {type(exc).__name__}: {_short(str(exc))}",
            exc,
        )
    lines = err.splitlines()
    if code == 0:
        return "ok"
    if code != 2:
        return _files_failure(crafted, reader, "exit", f"{reader} exited {code}: {_short(err)}")
    errors = [line for line in lines if line.startswith(f"{reader}: error: ")]
    shape_ok = len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in err
    if how == "one line":
        shape_ok = shape_ok and len(lines) == 1
    if not shape_ok:
        return _files_failure(crafted, reader, "stderr", f"{reader} exited 2 with stderr {err!r}")
    if not crafted.planted:
        return _files_failure(
            crafted, reader, "refused", f"{reader} refused a valid input: {err!r}"
        )
    return "exit 2"


def _strict_header(path: Path) -> str | None:
    """Why the safetensors file at ``path`` is not one the official reader takes, or None."""

    def refuse(literal: str) -> None:
        raise ValueError(f"the literal {literal}")

    def once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError(f"a key twice in {keys}")
        return dict(pairs)

    blob = path.read_bytes()
    n = int.from_bytes(blob[:8], "little")
    try:
        json.loads(blob[8 : 8 + n].decode("utf-8"), parse_constant=refuse, object_pairs_hook=once)
        with open(path, "rb") as f:
            _safetensors.read_header(f, path)
    except (ValueError, RecursionError) as exc:
        return str(exc)
    return None


def _files_safetensors(r: Reader, root: Path) -> str:
    crafted = _safetensors_file(r, root)
    length = r.int(1, 20)
    dst = root / "resized.safetensors"
    if r.chance(2):
        reader = "resize_checkpoint"
        _, exc = _run(
            lambda pos, kw: posembed.resize_checkpoint(crafted.path, dst, "pos", length), [], {}
        )
        kind = _judge(crafted, reader, exc, (ValueError, TypeError))
    else:
        argv = [
            "resize",
            str(crafted.path),
            "--key",
            "pos",
            "--length",
            str(length),
            "-o",
            str(dst),
        ]
        reader = "posembed resize"
        kind = _judge_cli(crafted, argv)
    if dst.exists():
        problem = _strict_header(dst)
        if problem is not None:
            _files_failure(
                crafted, reader, "output", f"{reader} wrote a header the format refuses: {problem}"
            )
            kind = "known"
    return f"files safetensors {reader}: {kind}"


def _files_npy(r: Reader, root: Path) -> str:
    targets = ["chunk_file", "chunk_file offsets", "posembed chunk", "posembed chunk --offsets"]
    if plot_available:
        targets.append("posembed plot similarity")
    target = r.pick(targets)
    size, n = r.int(1, 8), r.int(0, 40)
    rng = r.rng()
    offsets_path: Path | None = None
    if target == "posembed plot similarity":
        table = rng.standard_normal((r.int(1, 6), r.int(1, 4)))
        crafted = _npy_file(r, root / "table.npy", table)
        argv = ["plot", "similarity", str(crafted.path), "-o", str(root / "sim.png")]
        kind = _judge_cli(crafted, [*argv, "--length", str(r.int(1, 8))], how="usage")
        return f"files npy {target}: {kind}"
    if "offsets" in target:
        tokens_path = root / "tokens.npy"
        np.save(tokens_path, np.arange(n, dtype=np.int32))
        values = np.array([0, *sorted(rng.integers(0, n + 1, r.int(0, 3))), n], np.int64)
        crafted = _npy_file(r, root / "offsets.npy", values)
        input_path, offsets_path = tokens_path, crafted.path
    else:
        values = (np.arange(n) % 50).astype(r.pick(["<i8", "<i4", "<u2", "|u1"]))
        crafted = _npy_file(r, root / "tokens.npy", values)
        input_path = crafted.path
    out = root / "out"
    if target.startswith("chunk_file"):
        _, exc = _run(
            lambda pos, kw: chunk_file(
                input_path, out, size=size, offsets_path=offsets_path, quiet=True
            ),
            [],
            {},
        )
        kind = _judge(crafted, target, exc, (ValueError, TypeError))
    else:
        argv = ["chunk", str(input_path), "-o", str(out), "--size", str(size), "--quiet"]
        kind = _judge_cli(
            crafted, argv + (["--offsets", str(offsets_path)] if offsets_path else [])
        )
    left = [p.name for p in root.iterdir() if "partial" in p.name]
    if left:
        kind = _files_failure(crafted, target, "partial", f"{target} left {left} behind")
    return f"files npy {target}: {kind}"


# ------------------------------------------- files mode: chunk outputs as input
#
# A folder posembed chunk wrote (windows.npy, lengths.npy and meta.json), read
# back by chunk_file and `posembed chunk` as one document per window, given
# defects: its .npy headers and data, lengths out of range or of another
# count, meta.json, a link, a FIFO, a file missing. A valid folder must give
# the windows of its windows cut to their lengths; a crafted one a documented
# exception (exit 2 and one line), never a read through a link or a wait.

WF_DEFECTS = ["windows npy", "lengths npy", "lengths values", "meta", "link", "fifo", "missing"]


def _files_windows(r: Reader, root: Path) -> str:
    rng = r.rng()
    n, size = r.int(0, 50), r.int(1, 6)
    dtype = np.dtype(r.pick(["<i4", "<i8", "<u2", "|u1"]))
    tokens = (np.arange(n) % 100).astype(dtype)
    offsets = np.array([0, *sorted(rng.integers(0, n + 1, r.int(0, 3))), n], np.int64)
    w = posembed.windows(tokens, size, step=r.int(1, size), offsets=offsets)
    folder = root / "w"
    folder.mkdir()
    np.save(folder / "windows.npy", w.tokens)
    np.save(folder / "lengths.npy", w.lengths)
    (folder / "meta.json").write_text('{"format": "npy"}')
    crafted = Crafted("windows folder", folder, [])
    defects = [r.pick(WF_DEFECTS) for _ in range(r.pick([0, 1, 1, 2]))]
    # a FIFO last: writing another defect into it would wait for a reader
    for defect in sorted(defects, key=lambda d: d == "fifo"):
        if defect in ("windows npy", "lengths npy"):
            name = defect.split()[0] + ".npy"
            values = w.tokens if name == "windows.npy" else w.lengths
            made = _npy_file(r, folder / name, values)
            crafted.planted += [f"{name} {p}" for p in made.planted]
        elif defect == "lengths values":
            bad = w.lengths.copy()
            if bad.size:
                bad[r.int(0, bad.size - 1)] = r.pick([-1, size + 1, 2**62, -(2**63)])
            else:
                bad = np.array([1], np.int64)
            np.save(folder / "lengths.npy", bad)
            crafted.planted.append("lengths out of range or of another count")
        elif defect == "meta":
            (folder / "meta.json").write_bytes(r.pick([b"[", b"[]", b"{" * 3000, b"", b"\xff{"]))
            crafted.planted.append("meta.json")
        elif defect == "link":
            np.save(root / "outside.npy", w.lengths)
            (folder / "lengths.npy").unlink(missing_ok=True)
            (folder / "lengths.npy").symlink_to(root / "outside.npy")
            crafted.planted.append("lengths.npy a link")
        elif defect == "fifo" and hasattr(os, "mkfifo"):
            name = r.pick(["windows.npy", "lengths.npy", "meta.json"])
            (folder / name).unlink(missing_ok=True)
            if (folder / name).exists():  # a FIFO already
                continue
            os.mkfifo(folder / name)
            crafted.fifos.append(folder / name)
            crafted.planted.append(f"{name} a FIFO")
        elif defect == "missing":
            (folder / r.pick(["lengths.npy", "meta.json"])).unlink(missing_ok=True)
            crafted.planted.append("a file missing")
    out, size2 = root / "out", r.int(1, 8)
    target = r.pick(["chunk_file", "posembed chunk"])
    if target == "chunk_file":
        call = lambda: _run(lambda pos, kw: chunk_file(folder, out, size=size2, quiet=True), [], {})  # noqa: E731
        (_, exc), blocked = _watched(crafted, call)
        kind = _judge(crafted, target, exc, (ValueError, TypeError))
    else:
        argv = ["chunk", str(folder), "-o", str(out), "--size", str(size2), "--quiet"]
        done, blocked = _watched(crafted, lambda: _cli(argv))
        kind = _judge_cli(crafted, argv, done=done)
    if blocked:
        return f"files windows: {_files_failure(crafted, target, 'blocked', 'blocked on a FIFO')}"
    if kind == "ok" and not crafted.planted:
        # the windows of the windows, each cut to its length
        docs = [row[:k] for row, k in zip(w.tokens, w.lengths, strict=True)]
        flat = np.concatenate([np.zeros(0, dtype), *docs])
        ends = np.cumsum([0, *(d.shape[0] for d in docs)])
        want = posembed.windows(flat, size2, offsets=ends)
        got = np.load(out / "windows.npy")
        if not np.array_equal(got, want.tokens) or not np.array_equal(
            np.load(out / "lengths.npy"), want.lengths
        ):
            kind = _files_failure(crafted, target, "windows", "the windows read back differ")
    return f"files windows {target}: {kind}"


# How long read_parts may take when the folder holds a FIFO, before the
# harness looks for a read blocked on one.
FIFO_WAIT = 0.5


def _read_parts_watched(crafted: Crafted) -> tuple[Any, BaseException | None, bool]:
    """read_parts of the folder: its result, its exception, and whether it
    blocked on one of the folder's FIFOs (opened by the harness for writing,
    and closed, to let it go on)."""
    call = lambda pos, kw: read_parts(crafted.path)  # noqa: E731
    if not crafted.fifos:
        return (*_run(call, [], {}), False)
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(done=_run(call, [], {})), daemon=True)
    thread.start()
    thread.join(FIFO_WAIT)
    blocked = False
    while thread.is_alive():
        for fifo in crafted.fifos:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: nobody waits to read it
                continue
            blocked = True
            os.close(fd)
        thread.join(0.05)
    result, exc = box["done"]
    return result, exc, blocked


def _served_rows_agree(w: Any, size: int) -> str | None:
    """Why the rows read_parts serves disagree with one another, or None."""
    view = w.tokens
    count = len(view)
    for i in sorted({0, count // 2, count - 1}):
        if count == 0:
            break
        one = np.asarray(view[i])
        gathered = np.asarray(view[[i]])[0]
        if one.dtype != view.dtype or gathered.dtype != view.dtype:
            return f"row {i} has dtype {one.dtype} / {gathered.dtype}, the view says {view.dtype}"
        if one.shape != (size,):
            return f"tokens[{i}] has shape {one.shape} but the windows' size is {size}"
        if not np.array_equal(one, gathered):
            return f"tokens[{i}] = {one} but tokens[[{i}]][0] = {gathered}"
    whole = np.asarray(view)
    if whole.shape != view.shape:
        return f"the rows have shape {whole.shape}, the view says {view.shape}"
    return None


def _files_parts(r: Reader, root: Path) -> str:
    crafted = _parts_folder(r, root)
    reader = "read_parts"
    result, exc, blocked = _read_parts_watched(crafted)
    if blocked:
        kind = _files_failure(crafted, reader, "blocked", "read_parts blocked on a FIFO")
        return f"files parts: {kind}"
    kind = _judge(crafted, reader, exc, (ValueError,))
    if exc is None:
        if crafted.escapes:
            kind = _files_failure(
                crafted, reader, "outside", "read_parts served a part outside OUT/parts"
            )
        elif crafted.fifos:
            kind = _files_failure(crafted, reader, "fifo", "read_parts accepted a FIFO")
        else:
            try:
                problem = _served_rows_agree(result, result.size)
            except Exception as raised:  # reading what it accepted must work
                problem = f"reading the rows raised {type(raised).__name__}: {_short(str(raised))}"
            if problem is not None:
                kind = _files_failure(
                    crafted, reader, "rows", f"read_parts serves rows that disagree: {problem}"
                )
    return f"files parts: {kind}"


# ------------------------------------------------ files mode: model folders
#
# A Hugging Face model folder (config.json, model.safetensors or shards and
# model.safetensors.index.json, a tokenizer file) for resize_checkpoint and
# `posembed resize SRC_DIR`, of a known model_type, written with the
# safetensors package's NumPy writer, then given defects. A valid folder must
# be accepted, and its output load with safetensors, with the table at the new
# shape, config.json's size field set, the index's total_size right and every
# other tensor equal; a crafted one refused with a documented exception (exit
# 2 and one line from the command), never read through a link out of the
# folder or blocked on a FIFO.

HF_TYPES = ["gpt2", "bert", "roberta", "opt", "vit", "bart", "clip"]
MF_DEFECTS = ["config text", "config field", "model_type", "index text", "weight_map"]
MF_DEFECTS += ["metadata", "symlink out", "fifo", "missing shard", "shard mismatch", "both"]
MF_DEFECTS += ["shard bytes", "set_config", "key", "escape"]
MF_ESCAPES = ["../outside.safetensors", "ABSOLUTE", "sub/x.safetensors", "", ".", "..", "a\\b"]
MF_ESCAPES += ["config.json", "model.safetensors.index.json", "nope.safetensors"]


@dataclass
class ModelFolder:
    """A crafted model folder and what a resize of it must give."""

    crafted: Crafted
    key: str  # the table's full name
    tensors: dict[str, np.ndarray]
    table_shape: tuple[int, ...]  # expected after the resize
    fields: dict[str, Any]  # config.json fields expected after the resize
    sharded: bool
    length: int | None
    new_grid: tuple[int, int] | None
    give_key: bool
    set_config: dict[str, Any] | None
    cli_set_config: list[str]
    more: tuple[str, ...] = ()  # other tables resized alike (BART's decoder's)


def _json_text_defect(r: Reader, obj: Obj) -> tuple[str | None, str]:
    """A JSON document's text made bad (None: keep ``obj``, changed in place), and how."""
    how = r.pick(["", "{", "[]", "null", '"x"', "deep", "nonfinite", "duplicate", "utf8"])
    how = r.pick([how, "bigint", "1e999", "bom", "trailing"])
    if how == "deep":
        return _deep(r), how
    if how == "nonfinite":
        obj.pairs.append(("x", Raw(r.pick(NONFINITE))))
        return None, how
    if how == "duplicate":
        k, v = obj.pairs[r.int(0, len(obj.pairs) - 1)]
        obj.pairs.append((k, v))
        return None, how
    if how == "utf8":
        return _json(obj)[:-1] + ', "k": "\udcff"}', how
    if how == "bigint":
        obj.pairs.append(("x", Raw("9" * 5000)))
        return None, how
    if how == "1e999":
        obj.pairs.append(("x", Raw("1e999")))
        return None, how
    if how == "bom":
        return "\ufeff" + _json(obj), how
    if how == "trailing":
        return _json(obj) + " x", how
    return how, repr(how)


def _model_folder(r: Reader, root: Path) -> ModelFolder:
    rng = r.rng()
    model_type = r.pick(HF_TYPES)
    d = r.int(1, 4)
    dtype = r.pick([np.float32, np.float16, np.float64])
    tensors: dict[str, np.ndarray] = {}
    config = Obj([("model_type", model_type)])
    n = r.int(1, 9)
    length: int | None = n
    new_grid: tuple[int, int] | None = None
    fields: dict[str, Any] = {}
    more: tuple[str, ...] = ()
    if model_type == "gpt2":
        p = r.int(1, 8)
        key = r.pick(["wpe.weight", "transformer.wpe.weight"])
        shape: tuple[int, ...] = (p, d)
        config.pairs += [("n_positions", p), ("n_embd", d)]
        if r.chance(2):
            config.pairs.append(("n_ctx", p))
            fields["n_ctx"] = n
        fields["n_positions"] = n
        table_shape: tuple[int, ...] = (n, d)
    elif model_type in ("bert", "roberta"):
        key = r.pick(["", "bert.", "roberta."]) + "embeddings.position_embeddings.weight"
        pre = 2 if model_type == "roberta" else 0
        p = r.int(1, 8)
        shape = (pre + p, d)
        config.pairs.append(("max_position_embeddings", pre + p))
        if model_type == "roberta":
            config.pairs.append(("pad_token_id", 1))
        fields["max_position_embeddings"] = pre + n
        table_shape = (pre + n, d)
    elif model_type == "opt":
        key = r.pick(["", "model."]) + "decoder.embed_positions.weight"
        p = r.int(1, 8)
        shape = (2 + p, d)
        config.pairs.append(("max_position_embeddings", p))
        fields["max_position_embeddings"] = n
        table_shape = (2 + n, d)
    elif model_type == "bart":  # two tables, the encoder's and the decoder's
        model = r.pick(["", "model."])
        key = model + "encoder.embed_positions.weight"
        more = (model + "decoder.embed_positions.weight",)
        p = r.int(1, 8)
        shape = (2 + p, d)
        config.pairs.append(("max_position_embeddings", p))
        fields["max_position_embeddings"] = n
        table_shape = (2 + n, d)
    elif model_type == "clip":  # the vision tower's grid, its size in vision_config
        key = "vision_model.embeddings.position_embedding.weight"
        g, ps = r.int(1, 4), r.int(1, 4)
        shape = (1 + g * g, d)
        config.pairs.append(("vision_config", Obj([("image_size", g * ps), ("patch_size", ps)])))
        k = r.int(1, 5)
        length, new_grid = None, (k, k)  # CLIP takes square images only
        fields["vision_config"] = {"image_size": k * ps, "patch_size": ps}
        table_shape = (1 + k * k, d)
    else:
        key = r.pick(["", "vit."]) + "embeddings.position_embeddings"
        g, ps = r.int(1, 4), r.int(1, 4)
        shape = (1, 1 + g * g, d)
        config.pairs += [("image_size", g * ps), ("patch_size", ps)]
        length, new_grid = None, (r.int(1, 5), r.int(1, 5))
        h, w = new_grid[0] * ps, new_grid[1] * ps
        fields["image_size"] = h if h == w else [h, w]
        table_shape = (1, 1 + new_grid[0] * new_grid[1], d)
    config.pairs.append(("hidden_size", d))
    tensors[key] = rng.standard_normal(shape).astype(dtype)
    for name in more:
        tensors[name] = rng.standard_normal(shape).astype(dtype)
    for i in range(r.int(0, 4)):
        kind = r.pick(["<f4", "<i8", "<f2", "|u1"])
        rows = r.int(0, 5)
        tensors[f"layer.{i}.w"] = (rng.standard_normal((rows, d)) * 9).astype(kind)
    folder = root / "model"
    folder.mkdir()
    crafted = Crafted("model folder", folder, [])
    names = list(tensors)
    rng.shuffle(names)
    sharded = r.chance(2)
    shard_of: dict[str, str] = {}
    if sharded:
        count = r.int(1, min(3, len(names)))
        cuts = sorted(rng.choice(range(1, len(names)), count - 1, replace=False).tolist())
        groups = np.split(np.array(names, dtype=object), cuts)
        for k, group in enumerate(groups):
            shard = f"model-{k + 1:05d}-of-{count:05d}.safetensors"
            for name in group:
                shard_of[str(name)] = shard
    else:
        shard_of = dict.fromkeys(names, "model.safetensors")
    shard_names = list(dict.fromkeys(shard_of.values()))
    for shard in shard_names:
        part = {n: tensors[n] for n in names if shard_of[n] == shard}
        safetensors_numpy.save_file(part, str(folder / shard), metadata={"format": "pt"})
    total = sum(t.nbytes for t in tensors.values())
    metadata = Obj([("total_size", total)])
    index = Obj([("metadata", metadata), ("weight_map", Obj(list(shard_of.items())))])
    (folder / "tokenizer.json").write_text('{"version": "1.0"}')
    # the first shard as written: what copies of it hold, whatever the defects did to it
    first_shard = (folder / shard_names[0]).read_bytes()
    (root / "outside.safetensors").write_bytes(first_shard)
    give_key = r.chance(4)
    set_config: dict[str, Any] | None = None
    cli_set_config: list[str] = []
    config_text: str | None = None
    index_text: str | None = None
    for _ in range(r.pick([0, 0, 1, 1, 1, 2, 3])):
        defect = r.pick(MF_DEFECTS)
        where = ""
        if defect == "config text":
            config_text, where = _json_text_defect(r, config)
        elif defect == "config field":
            name = r.pick(["image_size", "patch_size", "pad_token_id", "n_positions", "n_ctx"])
            value = r.pick([None, "x", -1, 0, 2**64, 1.5, [1], [1, 2, 3], [0, 2], True])
            value = r.pick([value, Raw("1e999"), Obj([]), [Raw("NaN"), 1]])
            if value is None:
                config.drop(name)
            elif any(k == name for k, _ in config.pairs):
                config.set(name, value)
            else:
                config.pairs.append((name, value))
            where = f"{name} {'missing' if value is None else _short(_json(value), 20)}"
        elif defect == "model_type":
            value = r.pick([None, "llama", "", 5, Raw("null"), "GPT2", ["gpt2"], "gpt2 "])
            value = r.pick([value, r.pick([t for t in HF_TYPES if t != model_type])])
            if value is None:
                config.drop("model_type")
            else:
                config.set("model_type", value)
            where = "missing" if value is None else _json(value)
        elif defect == "index text" and sharded:
            index_text, where = _json_text_defect(r, index)
        elif defect == "weight_map" and sharded:
            weights: Any = next((v for k, v in index.pairs if k == "weight_map"), None)
            how = r.pick(["missing", "empty", "list", "null", "value", "extra", "drop"])
            if how in ("value", "extra", "drop") and not isinstance(weights, Obj):
                continue
            if how == "missing":
                index.drop("weight_map")
            elif how in ("empty", "list", "null"):
                index.set("weight_map", {"empty": Obj([]), "list": [], "null": None}[how])
            elif how == "value":
                victim = r.pick(names)
                weights.set(victim, r.pick([5, None, [shard_of[victim]], Obj([])]))
            elif how == "extra":
                weights.pairs.append(("ghost", shard_names[0]))
            else:
                weights.drop(r.pick(names))
            where = how
        elif defect == "escape" and sharded:
            weights = next((v for k, v in index.pairs if k == "weight_map"), None)
            if not isinstance(weights, Obj):
                continue
            value = r.pick(MF_ESCAPES)
            if value == "ABSOLUTE":
                value = str(root / "outside.safetensors")
            if value == "sub/x.safetensors":
                (folder / "sub").mkdir(exist_ok=True)
                (folder / "sub" / "x.safetensors").write_bytes(first_shard)
            weights.set(r.pick(names), value)
            crafted.escapes = True
            where = repr(value)
        elif defect == "metadata" and sharded:
            how = r.pick(["total_size lie", "not object", "total_parameters", "extra"])
            if how == "total_size lie":
                metadata.set("total_size", r.pick([0, -1, 2**70, "x", 1.5, total + 8]))
            elif how == "not object":
                index.set("metadata", r.pick([[], "x", 5]))
            elif how == "total_parameters":
                metadata.pairs.append(("total_parameters", r.pick([1, -5, "x", 2**70])))
            else:
                metadata.pairs.append(("format", "pt"))
            where = how
        elif defect == "symlink out":
            victim = folder / r.pick(shard_names)
            if not victim.is_symlink() and victim.is_file():
                shutil.copy(victim, root / "outside.safetensors")
                victim.unlink()
                victim.symlink_to(
                    r.pick([root / "outside.safetensors", Path("../outside.safetensors")])
                )
                crafted.escapes = True
        elif defect == "fifo":
            victim = folder / r.pick([*shard_names, "config.json", "tokenizer.json", "index"])
            if victim.name == "index":
                victim = folder / "model.safetensors.index.json"
                if not sharded:
                    continue
            where = victim.name
            _clear(victim)
            os.mkfifo(victim)
            crafted.fifos.append(victim)
        elif defect == "missing shard":
            victim = folder / r.pick(shard_names)
            where = victim.name
            _clear(victim)
        elif defect == "shard mismatch" and sharded and len(shard_names) > 1:
            victim = r.pick(shard_names)
            held = {n: tensors[n] for n in names if shard_of[n] == victim}
            how = r.pick(["extra", "missing", "renamed"])
            if how == "extra":
                held["ghost"] = np.zeros(2, np.float32)
            elif how == "missing":
                held.pop(next(iter(held)))
            else:
                first = next(iter(held))
                held["x" + first] = held.pop(first)
            if (folder / victim).is_file() and not (folder / victim).is_symlink():
                safetensors_numpy.save_file(held, str(folder / victim))
            where = f"{victim} {how}"
        elif defect == "both":
            if (folder / "model.safetensors").exists():
                index_text = _json(Obj([("weight_map", Obj([(key, "model.safetensors")]))]))
                sharded = True
            elif sharded:
                (folder / "model.safetensors").write_bytes(first_shard)
            else:
                index_text = _json(Obj([("weight_map", Obj([(key, "model.safetensors")]))]))
                sharded = True
        elif defect == "shard bytes":
            victim = folder / r.pick(shard_names)
            if victim.is_file() and not victim.is_symlink() and victim.stat().st_size:
                blob = bytearray(victim.read_bytes())
                how = r.pick(["cut", "flip", "garbage", "empty"])
                if how == "cut":
                    blob = blob[: r.int(0, len(blob) - 1)]
                elif how == "flip":
                    for _ in range(r.int(1, 3)):
                        blob[r.int(0, len(blob) - 1)] ^= 1 << r.int(0, 7)
                elif how == "garbage":
                    blob = bytearray(rng.bytes(r.int(0, 64)))
                else:
                    blob = bytearray()
                victim.write_bytes(bytes(blob))
                where = f"{victim.name} {how}"
        elif defect == "set_config":
            how = r.pick(["nan", "object", "not str", "dotted", "empty part", "not mapping"])
            how = r.pick([how, "big", "text", "nested ok", "1e999"])
            cli_value = {
                "nan": "x=NaN",
                "object": "x=1",
                "not str": "=1",
                "dotted": "hidden_size.x=1",
                "empty part": "a..b=1",
                "not mapping": "x",
                "big": "x=" + "9" * 5000,
                "text": "x=[1, ",
                "nested ok": "model_type=gpt2",
                "1e999": "x=1e999",
            }[how]
            cli_set_config.append(cli_value)
            api_value: Any = {
                "nan": {"x": NAN},
                "object": {"x": object()},
                "not str": {5: 1},
                "dotted": {"hidden_size.x": 1},
                "empty part": {"a..b": 1},
                "not mapping": [("x", 1)],
                "big": {"x": 10**5000},
                "text": {"x": "[1, "},
                "nested ok": {"model_type": "gpt2"},
                "1e999": {"x": INF},
            }[how]
            set_config = api_value
            where = how
        elif defect == "key":
            give_key = True
            key = r.pick(["nope", "", "layer.0.w", key + " ", key.upper()])
            where = repr(key)
        else:
            continue
        crafted.planted.append(f"folder:{defect}" + (f" ({where})" if where else ""))
    if not (folder / "config.json").is_fifo():
        text = config_text if config_text is not None else _json(config)
        (folder / "config.json").write_bytes(text.encode("utf-8", "surrogatepass"))
    index_path = folder / "model.safetensors.index.json"
    if sharded and not index_path.is_fifo():
        text = index_text if index_text is not None else _json(index)
        index_path.write_bytes(text.encode("utf-8", "surrogatepass"))
    if r.chance(4):  # as the Hugging Face cache keeps it: links to ../../blobs
        crafted.path = _as_cached(folder, root)
        crafted.fifos = [crafted.path / f.name for f in crafted.fifos]
        crafted.note = "cached "
    crafted.fifos = [f for f in crafted.fifos if f.is_fifo()]
    crafted.note += f"{model_type} {shape} {np.dtype(dtype).name} in {len(shard_names)} file(s)"
    return ModelFolder(
        crafted,
        key,
        tensors,
        table_shape,
        fields,
        sharded,
        length,
        new_grid,
        give_key,
        set_config,
        cli_set_config,
        more,
    )


def _as_cached(folder: Path, root: Path) -> Path:
    """The folder moved to models--m/snapshots/rev of a Hugging Face cache, each
    regular file a relative link to its blob (links and FIFOs kept as they are)."""
    repo = root / "models--m"
    snapshot = repo / "snapshots" / "rev"
    (repo / "blobs").mkdir(parents=True)
    snapshot.parent.mkdir()
    shutil.move(folder, snapshot)
    for path in sorted(snapshot.iterdir()):
        if path.is_file() and not path.is_symlink():
            blob = hashlib.sha1(path.name.encode()).hexdigest()
            shutil.move(path, repo / "blobs" / blob)
            path.symlink_to(Path("../../blobs") / blob)
    return snapshot


def _watched(crafted: Crafted, fn: Callable[[], Any]) -> tuple[Any, bool]:
    """fn() on a thread: its result, and whether it blocked on one of the
    crafted input's FIFOs (opened by the harness for writing, and closed, to
    let it go on)."""
    if not crafted.fifos:
        return fn(), False
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(done=fn()), daemon=True)
    thread.start()
    thread.join(FIFO_WAIT)
    blocked = False
    while thread.is_alive():
        for fifo in crafted.fifos:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: nobody waits to read it
                continue
            blocked = True
            os.close(fd)
        thread.join(0.05)
    return box["done"], blocked


# What resize_checkpoint documents for a model folder: a bad folder is a
# ValueError, a missing config.json or weights FileNotFoundError, a bad
# argument TypeError.
MF_ALLOWED = (ValueError, TypeError, FileNotFoundError)


def _resized_folder_problem(m: ModelFolder, dst: Path) -> str | None:
    """Why the output folder of an accepted resize is wrong, or None."""
    loaded: dict[str, np.ndarray] = {}
    for path in sorted(dst.glob("*.safetensors")):
        problem = _strict_header(path)
        if problem is not None:
            return f"{path.name}: a header the format refuses: {problem}"
        loaded.update(safetensors_numpy.load_file(str(path)))
    if m.crafted.planted:
        return None  # what a crafted folder that was accepted gives is not known here
    for key in (m.key, *m.more):
        if key not in loaded:
            return f"the table {key!r} is not in the output"
        if loaded[key].shape != m.table_shape:
            return f"the table {key!r} has shape {loaded[key].shape}, expected {m.table_shape}"
    for name, tensor in m.tensors.items():
        if name in (m.key, *m.more):
            continue
        if name not in loaded or loaded[name].tobytes() != tensor.tobytes():
            return f"tensor {name!r} differs from the input's"
    config = json.loads((dst / "config.json").read_text())
    for name, value in m.fields.items():
        if config.get(name) != value:
            return f"config.json {name} is {config.get(name)!r}, expected {value!r}"
    if m.sharded:
        index = json.loads((dst / "model.safetensors.index.json").read_text())
        total = sum(t.nbytes for t in loaded.values())
        if index["metadata"]["total_size"] != total:
            return f"total_size {index['metadata']['total_size']}, the tensors hold {total}"
        for name, shard in index["weight_map"].items():
            if name not in safetensors_numpy.load_file(str(dst / shard)):
                return f"the index maps {name!r} to {shard}, which does not hold it"
    if (dst / "tokenizer.json").read_text() != '{"version": "1.0"}':
        return "tokenizer.json was not copied"
    return None


def _files_model_folder(r: Reader, root: Path) -> str:
    m = _model_folder(r, root)
    crafted = m.crafted
    dst = root / "out"
    key = m.key if m.give_key else None
    # a link that escapes must still be refused after the move into a cache
    if crafted.path.name == "rev":  # a link that escapes is still refused in a cache
        blobs = root / "models--m" / "blobs"
        crafted.escapes = crafted.escapes or any(
            p.is_symlink() and not p.resolve().is_relative_to(blobs) for p in crafted.path.iterdir()
        )
    if r.chance(2):
        reader = "resize_checkpoint"
        kw: dict[str, Any] = {"new_grid": m.new_grid}
        if m.set_config is not None:
            kw["set_config"] = m.set_config
        (_, exc), blocked = _watched(
            crafted,
            lambda: _run(
                lambda pos, k: posembed.resize_checkpoint(crafted.path, dst, key, m.length, **k),
                [],
                kw,
            ),
        )
        if blocked:
            return f"files folder {reader}: " + _files_failure(
                crafted, reader, "blocked", f"{reader} blocked on a FIFO"
            )
        kind = _judge(crafted, reader, exc, MF_ALLOWED)
        accepted = exc is None
    else:
        reader = "posembed resize"
        argv = ["resize", str(crafted.path), "-o", str(dst)]
        argv += ["--length", str(m.length)] if m.new_grid is None else []
        argv += [] if m.new_grid is None else ["--new-grid", "{}x{}".format(*m.new_grid)]
        argv += [] if key is None else ["--key", key]
        for value in m.cli_set_config:
            argv += ["--set-config", value]
        how = "usage" if any(v.startswith("=") or "=" not in v for v in m.cli_set_config) else ""
        done, blocked = _watched(crafted, lambda: _cli(argv))
        if blocked:
            return f"files folder {reader}: " + _files_failure(
                crafted, reader, "blocked", f"{reader} blocked on a FIFO"
            )
        kind = _judge_cli(crafted, argv, how or "one line", done=done)
        accepted = done[0] == 0 and done[2] is None
    if accepted:
        if crafted.escapes:
            kind = _files_failure(crafted, reader, "outside", f"{reader} read a shard outside")
        elif crafted.fifos:
            kind = _files_failure(crafted, reader, "fifo", f"{reader} accepted a FIFO")
        else:
            try:
                problem = _resized_folder_problem(m, dst)
            except Exception as raised:  # reading what it wrote must work
                problem = f"reading the output raised {type(raised).__name__}: {raised}"
            if problem is not None:
                kind = _files_failure(crafted, reader, "output", f"{reader}: {problem}")
    elif dst.exists():
        kind = _files_failure(crafted, reader, "partial", f"{reader} refused but wrote {dst}")
    left = [p.name for p in root.iterdir() if p.name.startswith(".posembed-")]
    if left:
        kind = _files_failure(crafted, reader, "partial", f"{reader} left {left} behind")
    return f"files folder {reader}: {kind}"


# ------------------------------------------------ files mode: Arrow corpora
#
# Arrow and Parquet input for chunk_file and `posembed chunk`: a Parquet file
# or folder of them, an Arrow IPC file or stream, a save_to_disk folder
# (state.json and IPC streams), written with pyarrow, then given defects. An
# accepted input must give the windows of the .npy path (chunk_file on its
# tokens and offsets): for a valid input, of the documents written; for a
# crafted one that was accepted, of the column as pyarrow itself reads it. A
# refused one: ChunkError (exit 2 and one line from the command), never a
# read out of the folder or a wait on a FIFO.

AR_FORMS = ["parquet", "parquet folder", "ipc file", "ipc stream", "saved"]
AR_DEFECTS = ["cut", "flip", "column type", "null row", "null token", "no column"]
AR_DEFECTS += ["state text", "state files", "fifo", "mixed dtype", "dataset_dict", "empty file"]
AR_TYPES = {"<i4": "int32", "<i8": "int64", "<u2": "uint16", "|u1": "uint8", "<i2": "int16"}
SAVED_ESCAPES = ["../x.arrow", "ABSOLUTE", "sub/x.arrow", "", ".", "..", "a\\b", "nope.arrow"]


def _arrow_write(path: Path, table: Any, form: str, rows_per_group: int) -> None:
    if form.startswith("parquet"):
        pq.write_table(table, path, row_group_size=rows_per_group)
        return
    maker = pa.ipc.new_file if form == "ipc file" else pa.ipc.new_stream
    with maker(str(path), table.schema) as writer:
        for batch in table.to_batches(max_chunksize=rows_per_group):
            writer.write_batch(batch)


def _arrow_corpus(r: Reader, root: Path) -> tuple[Crafted, str, list[np.ndarray]]:
    """The crafted input, its column's name, and the documents written."""
    rng = r.rng()
    form = r.pick(AR_FORMS)
    dtype = np.dtype(r.pick(sorted(AR_TYPES)))
    docs = [(rng.integers(0, 50, r.int(0, 12))).astype(dtype) for _ in range(r.int(0, 6))]
    column = r.pick(["input_ids", "input_ids", "tokens", "a b"])
    value_type = getattr(pa, AR_TYPES[dtype.str])()
    list_type = pa.large_list(value_type) if r.chance(4) else pa.list_(value_type)
    values: Any = [d.tolist() for d in docs]
    columns = {column: pa.array(values, list_type)}
    if r.chance(2):
        columns["text"] = pa.array([f"doc {i}" for i in range(len(docs))])
        if r.chance(2):
            columns = dict(reversed(list(columns.items())))
    pieces = 1 if form in ("parquet", "ipc file", "ipc stream") else r.int(1, 3)
    rows_per_group = r.int(1, 4)
    planted: list[str] = []
    fifos: list[Path] = []
    escapes = False
    defects = [r.pick(AR_DEFECTS) for _ in range(r.pick([0, 0, 1, 1, 1, 2]))]
    for defect in defects:
        where = ""
        if defect == "column type":
            how = r.pick(["float", "string", "list of lists", "int", "list of float", "bool"])
            bad: Callable[[Any], Any] = {
                "float": lambda v: pa.array([float(len(x or ())) for x in v]),
                "string": lambda v: pa.array([str(x) for x in v]),
                "list of lists": lambda v: pa.array([[x] for x in v]),
                "int": lambda v: pa.array([len(x or ()) for x in v], pa.int64()),
                "list of float": lambda v: pa.array(v, pa.list_(pa.float32())),
                "bool": lambda v: pa.array(
                    [None if x is None else [t is not None and t > 9 for t in x] for x in v],
                    pa.list_(pa.bool_()),
                ),
            }[how]
            columns[column] = bad(values)
            where = how
        elif defect == "null row" and docs:
            values = list(values)
            values[r.int(0, len(values) - 1)] = None
            columns[column] = pa.array(values, list_type)
        elif defect == "null token" and any(values):
            values = [list(v) if v is not None else None for v in values]
            row = next(i for i, v in enumerate(values) if v)
            values[row][r.int(0, len(values[row]) - 1)] = None
            columns[column] = pa.array(values, list_type)
        elif defect == "no column" and column in columns:
            columns["other"] = columns.pop(column)
        else:
            continue
        planted.append(f"arrow:{defect}" + (f" ({where})" if where else ""))
    table = pa.table(columns)
    suffix = ".parquet" if form.startswith("parquet") else ".arrow"
    rows = table.num_rows
    cuts = sorted(rng.integers(0, rows + 1, pieces - 1).tolist()) if pieces > 1 else []
    bounds = [0, *cuts, rows]
    if form == "parquet folder" or form == "saved":
        folder = root / "corpus"
        folder.mkdir()
        files = []
        for k in range(pieces):
            name = (
                f"part-{k}.parquet"
                if form == "parquet folder"
                else f"data-{k:05d}-of-{pieces:05d}.arrow"
            )
            piece = table.slice(bounds[k], bounds[k + 1] - bounds[k])
            _arrow_write(
                folder / name,
                piece,
                "parquet" if suffix == ".parquet" else "ipc stream",
                rows_per_group,
            )
            files.append(folder / name)
        target = folder
    else:
        files = [root / f"corpus{suffix}"]
        _arrow_write(files[0], table, form, rows_per_group)
        target = files[0]
    state = Obj([("_data_files", [Obj([("filename", f.name)]) for f in files])])
    state.pairs += [("_fingerprint", "abc"), ("_format_type", None), ("_split", None)]
    state_text: str | None = None
    np.save(root / "x.npy", np.arange(5))
    shutil.copy(files[0], root / "x.arrow")
    for defect in [r.pick(AR_DEFECTS) for _ in range(r.pick([0, 0, 1, 1]))]:
        where = ""
        victim = r.pick(files)
        if defect in ("cut", "flip", "empty file") and victim.is_file() and victim.stat().st_size:
            blob = bytearray(victim.read_bytes())
            if defect == "cut":
                blob = blob[: r.int(0, max(len(blob) - 1, 0))]
                where = f"{len(blob)} bytes"
            elif defect == "flip":
                for _ in range(r.int(1, 4)):
                    at = r.int(0, len(blob) - 1)
                    blob[at] ^= 1 << r.int(0, 7)
                    where += f" {at}"
            else:
                blob = bytearray()
            victim.write_bytes(bytes(blob))
        elif defect == "state text" and form == "saved":
            state_text, where = _json_text_defect(r, state)
        elif defect == "state files" and form == "saved":
            how = r.pick(["missing", "empty", "not list", "entry", "escape", "link out", "fifo"])
            entries = next((v for k, v in state.pairs if k == "_data_files"), None)
            entries = entries if isinstance(entries, list) else []
            if how == "missing":
                state.drop("_data_files")
            elif how == "empty":
                state.set("_data_files", [])
            elif how == "not list":
                state.set("_data_files", r.pick(["x", 5, Obj([]), None]))
            elif how == "entry":
                entries.append(r.pick(["x", 5, Obj([]), Obj([("filename", 5)]), None, []]))
            elif how == "escape":
                name = r.pick(SAVED_ESCAPES)
                name = str(root / "x.arrow") if name == "ABSOLUTE" else name
                if name == "sub/x.arrow":
                    (target / "sub").mkdir(exist_ok=True)
                    shutil.copy(root / "x.arrow", target / "sub" / "x.arrow")
                entries.append(Obj([("filename", name)]))
                escapes = name not in ("", ".", "..", "a\\b", "nope.arrow")
                where = repr(name)
            elif how == "link out":
                (target / "link.arrow").symlink_to(r.pick([root / "x.arrow", Path("../x.arrow")]))
                entries.append(Obj([("filename", "link.arrow")]))
                escapes = True
            else:
                os.mkfifo(target / "pipe.arrow")
                fifos.append(target / "pipe.arrow")
                entries.insert(0, Obj([("filename", "pipe.arrow")]))
            where = how + (f" {where}" if where else "")
        elif defect == "fifo":
            how = r.pick(["data", "state.json", "extra parquet"])
            if how == "data" or (how == "state.json" and form != "saved"):
                victim = files[0]
            elif how == "state.json":
                victim = target / "state.json"
            else:
                if form != "parquet folder":
                    continue
                victim = target / "zz.parquet"
            _clear(victim)
            os.mkfifo(victim)
            fifos.append(victim)
            where = victim.name
        elif defect == "mixed dtype" and len(files) > 1:
            other = np.dtype("<i8" if dtype.str != "<i8" else "<i4")
            other_type = pa.list_(getattr(pa, AR_TYPES[other.str])())
            piece = pa.table({column: pa.array([[1, 2]], other_type)})
            form_one = "parquet" if suffix == ".parquet" else "ipc stream"
            _clear(files[-1])
            _arrow_write(files[-1], piece, form_one, 1)
        elif defect == "dataset_dict" and form == "saved":
            (target / "dataset_dict.json").write_text('{"splits": ["train"]}')
            target = target  # a split's folder with a stray dataset_dict.json: still a split
        else:
            continue
        planted.append(f"arrow:{defect}" + (f" ({where})" if where else ""))
    if form == "saved" and not (target / "state.json").is_fifo():
        text = state_text if state_text is not None else _json(state)
        (target / "state.json").write_bytes(text.encode("utf-8", "surrogatepass"))
        (target / "dataset_info.json").write_text("{}")
    crafted = Crafted("arrow", target, planted, fifos=[f for f in fifos if f.is_fifo()])
    crafted.escapes = escapes
    crafted.note = f"{form}, {len(docs)} documents of {dtype.str}, column {column!r}"
    return crafted, column, docs


def _column_as_read(crafted: Crafted, column: str) -> list[np.ndarray] | None:
    """The documents pyarrow itself reads from the input's column, or None if it cannot."""
    path = crafted.path
    try:
        if path.is_dir() and (path / "state.json").is_file():
            state = json.loads((path / "state.json").read_text())
            files = [path / e["filename"] for e in state["_data_files"]]
        elif path.is_dir():
            files = sorted(p for p in path.iterdir() if p.name.lower().endswith(".parquet"))
        else:
            files = [path]
        docs: list[np.ndarray] = []
        for f in files:
            if not f.is_file():
                return None
            if f.suffix == ".parquet":
                table = pq.read_table(f, columns=[column])
            else:
                with pa.OSFile(str(f), "rb") as handle:
                    head = handle.read(6)
                    handle.seek(0)
                    if head == b"ARROW1":
                        table = pa.ipc.open_file(handle).read_all()
                    else:
                        table = pa.ipc.open_stream(handle).read_all()
            table.validate(full=True)
            col = table.column(column)
            if col.null_count:
                return None
            docs += [
                np.asarray(x, dtype=col.type.value_type.to_pandas_dtype()) for x in col.to_pylist()
            ]
        return docs
    except Exception:  # pyarrow refuses it too: nothing to compare with
        return None


def _npy_windows(
    root: Path, docs: list[np.ndarray], dtype: np.dtype[Any], size: int, step: int, tail: str
) -> dict[str, bytes]:
    """The outputs of chunk_file for the documents as a .npy file and offsets."""
    flat = np.concatenate([np.asarray(d, dtype) for d in docs]) if docs else np.empty(0, dtype)
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
    base = root / "npy-path"
    base.mkdir(exist_ok=True)
    np.save(base / "tokens.npy", flat)
    np.save(base / "offsets.npy", offsets)
    chunk_file(
        base / "tokens.npy",
        base / "out",
        size=size,
        step=step,
        tail=tail,
        offsets_path=base / "offsets.npy",
        quiet=True,
    )
    return {n: (base / "out" / n).read_bytes() for n in CHUNK_OUTPUTS}


CHUNK_OUTPUTS = ("windows.npy", "starts.npy", "lengths.npy", "documents.npy")


def _chunked_outputs(out: Path, fmt: str) -> dict[str, bytes]:
    """The outputs of a chunk run, as .npy bytes (a Parquet output read back)."""
    if fmt == "npy":
        return {n: (out / n).read_bytes() for n in CHUNK_OUTPUTS}
    table = pq.read_table(out / "windows.parquet")
    ids = table.column("input_ids").combine_chunks()
    size = ids.type.list_size
    rows = np.asarray(ids.values).reshape(-1, size)
    arrays = {"windows.npy": rows}
    for name in ("start", "length", "document"):
        arrays[f"{name}s.npy"] = np.asarray(table.column(name)).astype(np.int64)
    saved = {}
    for name, array in arrays.items():
        buf = io.BytesIO()
        np.save(buf, array)
        saved[name] = buf.getvalue()
    return saved


def _files_arrow(r: Reader, root: Path) -> str:
    crafted, column, docs = _arrow_corpus(r, root)
    size = r.int(1, 6)
    step = r.int(1, size)
    tail = r.pick(["pad", "shift", "drop"])
    fmt = r.pick(["npy", "npy", "parquet"])
    out = root / "out"
    col = None if column == "input_ids" and r.chance(2) else column
    if r.chance(2):
        reader = "chunk_file"
        (_, exc), blocked = _watched(
            crafted,
            lambda: _run(
                lambda pos, kw: chunk_file(
                    crafted.path,
                    out,
                    size=size,
                    step=step,
                    tail=tail,
                    column=col,
                    format=fmt,
                    quiet=True,
                ),
                [],
                {},
            ),
        )
        if blocked:
            return f"files arrow {reader}: " + _files_failure(
                crafted, reader, "blocked", f"{reader} blocked on a FIFO"
            )
        kind = _judge(crafted, reader, exc, (ChunkError,))
        accepted = exc is None
    else:
        reader = "posembed chunk"
        argv = ["chunk", str(crafted.path), "-o", str(out), "--size", str(size)]
        argv += ["--step", str(step), "--tail", tail, "--format", fmt, "--quiet"]
        argv += [] if col is None else ["--column", col]
        done, blocked = _watched(crafted, lambda: _cli(argv))
        if blocked:
            return f"files arrow {reader}: " + _files_failure(
                crafted, reader, "blocked", f"{reader} blocked on a FIFO"
            )
        kind = _judge_cli(crafted, argv, done=done)
        accepted = done[0] == 0 and done[2] is None
    if accepted:
        if crafted.escapes:
            return f"files arrow {reader}: " + _files_failure(
                crafted, reader, "outside", f"{reader} read a file outside the folder"
            )
        if crafted.fifos:
            return f"files arrow {reader}: " + _files_failure(
                crafted, reader, "fifo", f"{reader} accepted a FIFO"
            )
        expected_docs = _column_as_read(crafted, column) if crafted.planted else docs
        if expected_docs is not None:
            dtype = np.dtype(json.loads((out / "meta.json").read_text())["dtype"])
            want = _npy_windows(root, expected_docs, dtype, size, step, tail)
            got = _chunked_outputs(out, fmt)
            differ = [n for n in CHUNK_OUTPUTS if want[n] != got[n]]
            if differ:
                kind = _files_failure(
                    crafted,
                    reader,
                    "windows",
                    f"{reader}: {', '.join(differ)} differ from the .npy path's",
                )
    elif out.exists():
        kind = _files_failure(crafted, reader, "partial", f"{reader} refused but wrote {out}")
    left = [p.name for p in root.iterdir() if p.name.startswith(".posembed-")]
    if left:
        kind = _files_failure(crafted, reader, "partial", f"{reader} left {left} behind")
    return f"files arrow {reader}: {kind}"


# ---------------------------------------------------------------- store outputs
#
# An output in an object store (a moto S3 server on the loopback address,
# started once per fuzzing process, where moto and s3fs are installed): a
# prefix already holding some of posembed's output, a crafted manifest, a
# crafted or live marker of another run, objects posembed did not write, and
# the input itself, then `posembed chunk` or `convert` to it, with --force or
# not. Exit 0 or 2 with one line; whatever posembed did not write and the
# input are never changed; an exit 0 leaves the complete output, its manifest
# and no marker.

STORE_DEFECTS = ["output", "manifest", "marker", "live marker", "foreign", "input inside"]
STORE_BUCKET = "fuzz"
_STORE: dict[str, Any] = {}


def _store_fs() -> Any:
    """The fuzzing process's S3 server and its file system (started on first use)."""
    if "fs" not in _STORE:
        import atexit

        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from bench.store_server import s3_server

        from posembed import _store

        _store.SETTLE_SECONDS = 0.01  # one run at a time here: no need to wait out another
        stack = contextlib.ExitStack()
        _STORE["fs"] = stack.enter_context(s3_server(STORE_BUCKET))
        atexit.register(stack.close)
    _STORE["n"] = _STORE.get("n", 0) + 1
    return _STORE["fs"]


def _store_listing(fs: Any, prefix: str) -> dict[str, bytes]:
    fs.invalidate_cache()
    try:
        return {p: fs.cat_file(p) for p in fs.find(prefix)}
    except FileNotFoundError:
        return {}


def _files_store(r: Reader, root: Path) -> str:
    fs = _store_fs()
    prefix = f"{STORE_BUCKET}/p{_STORE['n']}"
    pair = r.chance(3)
    out_key = f"{prefix}/x" if pair else f"{prefix}/o"
    url = f"s3://{out_key}"
    tokens = (np.arange(r.int(0, 300)) % 1000).astype(np.uint16)
    np.save(root / "tokens.npy", tokens)
    source, planted = str(root / "tokens.npy"), []
    defects = sorted({r.pick(STORE_DEFECTS) for _ in range(r.pick([0, 1, 1, 2, 3]))})
    crafted = Crafted("store output", root, planted)
    for defect in defects:
        if defect == "output":  # a complete output of posembed's
            if pair:
                posembed.write_indexed(root / "old", tokens, [0, tokens.size])
                fs.put(str(root / "old.bin"), out_key + ".bin")
                fs.put(str(root / "old.idx"), out_key + ".idx")
            else:
                chunk_file(root / "tokens.npy", root / "old", size=4, quiet=True)
                for f in (root / "old").iterdir():
                    fs.put(str(f), f"{out_key}/{f.name}")
            planted.append("an output there")
        elif defect == "manifest" and not pair:
            fs.pipe(f"{out_key}/meta.json", r.pick([b"{", b"[]", b'{"format": 1}', b"\xff", b""]))
            planted.append("a crafted manifest")
        elif defect in ("marker", "live marker"):
            marker = out_key + (".posembed-writing.json" if pair else "/.posembed-writing.json")
            if defect == "live marker":
                body = {"writing": "posembed", "run": "other", "host": "elsewhere", "pid": 1}
                body |= {"renewed": time.time(), "ended": False}
                fs.pipe(marker, json.dumps(body).encode())
            else:
                fs.pipe(marker, r.pick([b"", b"{", b"[1]", b'{"renewed": "x"}', b"\x00" * 9,
                                        b'{"run": 5, "renewed": 1e300, "pid": -1}']))  # fmt: skip
            planted.append(defect)
        elif defect == "foreign":
            fs.pipe(f"{prefix}/o/data.bin" if not pair else out_key + ".bin", b"precious")
            planted.append("objects posembed did not write")
        elif defect == "input inside":
            key = f"{out_key}/tokens.npy" if not pair else out_key + ".idx"
            fs.put(str(root / "tokens.npy"), key)
            source = f"s3://{key}"
            planted.append("the input inside the output")
    before = _store_listing(fs, prefix)
    force = r.chance(2)
    if pair:
        argv = ["convert", source, "-o", url]
        argv += ["--offsets", str(root / "offsets.npy")] if source.endswith(".npy") else []
        np.save(root / "offsets.npy", np.array([0, tokens.size], np.int64))
    else:
        argv = ["chunk", source, "-o", url, "--size", str(r.int(1, 8))]
    argv += ["--quiet"] + (["--force"] if force else [])
    if not force and before:
        planted.append("no --force")
    done = _cli(argv)
    kind = _judge_cli(crafted, argv, done=done)
    after = _store_listing(fs, prefix)
    # posembed may replace an output of its own (--force), never the input,
    # nor objects in a prefix it has no manifest or marker in
    ours = {"output", "manifest", "marker", "live marker"} & set(defects)
    kept = {
        k: v for k, v in before.items() if f"s3://{k}" == source or (v == b"precious" and not ours)
    }
    for key, value in kept.items():
        if after.get(key) != value:
            return f"files store: {_files_failure(crafted, argv[0], 'lost', f'{key} changed')}"
    if done[0] == 0:
        marker = out_key + (".posembed-writing.json" if pair else "/.posembed-writing.json")
        done_key = out_key + ".idx" if pair else f"{out_key}/meta.json"
        if marker in after or done_key not in after:
            why = "an exit 0 left a marker or no manifest"
            return f"files store: {_files_failure(crafted, argv[0], 'unfinished', why)}"
    elif done[0] == 2 and before != after:
        return f"files store: {_files_failure(crafted, argv[0], 'changed', 'exit 2 changed it')}"
    return f"files store {argv[0]}: {kind}"


def _store_available() -> bool:
    try:
        import moto.server  # noqa: F401
        import s3fs  # noqa: F401
    except ImportError:
        return False
    return True


FILE_KINDS = ["safetensors", "npy", "windows"] + (["parts"] if read_parts is not None else [])
FILE_KINDS += ["folder"] if safetensors_numpy is not None else []
FILE_KINDS += ["arrow"] if pa is not None else []
FILE_READERS = {"safetensors": _files_safetensors, "npy": _files_npy, "parts": _files_parts}
FILE_READERS |= {"folder": _files_model_folder, "arrow": _files_arrow, "windows": _files_windows}
FILE_KINDS += ["store"] if _store_available() else []
FILE_READERS["store"] = _files_store


def files_input(data: bytes) -> str:
    """Run one crafted-file input; returns the reader and outcome for the statistics."""
    r = Reader(data)
    kind = r.pick(FILE_KINDS)
    root = Path(tempfile.mkdtemp(prefix="posembed-fuzz-files-"))
    try:
        with quiet():
            return FILE_READERS[kind](r, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------- drivers


def summary(elapsed: float) -> str:
    line = f"fuzz: {STATS.inputs} inputs in {elapsed:.1f} s, no failures"
    if MODE == "calls":
        return line
    # the inputs per kernel (race) or per reader (files)
    per: collections.Counter[str] = collections.Counter()
    for key, n in STATS.outcomes.items():
        per[key.rsplit(": ", 1)[0].split(" ", 1)[1]] += n
    counts = ", ".join(f"{name} {n}" for name, n in sorted(per.items()))
    line += f" ({MODE}: {counts})"
    if STATS.known:
        line += f"; {sum(STATS.known.values())} tolerated as known bugs"
    return line


def _print_details() -> None:
    for key, n in sorted(STATS.outcomes.items()):
        print(f"  {n:7d}  {key}")
    for key, n in sorted(STATS.known.items()):
        print(f"  {n:7d}  tolerated known bug: {key}")


def plain_inputs(seed: int, start: int = 0) -> Iterator[tuple[int, bytes]]:
    """Random inputs (index, bytes); input i is the same for a seed on any machine."""
    i = start
    while True:
        rng = np.random.default_rng([seed, i])
        yield i, rng.bytes(int(rng.integers(0, 400)))
        i += 1


def run_plain(args: argparse.Namespace) -> int:
    """The driver without atheris: random bytes for --seconds (or --runs), or the
    given files; hangs end the process through faulthandler."""
    faulthandler.enable()
    start = time.monotonic()
    if args.files:
        for path in args.files:
            with open(path, "rb") as f:
                data = f.read()
            print(f"running {path} ({len(data)} bytes)")
            TestOneInput(data)
        print(summary(time.monotonic() - start))
        return 0
    # the input being run is kept on disk, so a crash leaves it behind
    fd, current = tempfile.mkstemp(prefix="posembed-fuzz-input-")
    print(f"fuzz: seed {args.seed}; a crash leaves its input in {current}", flush=True)
    deadline = start + args.seconds
    try:
        for i, data in plain_inputs(args.seed, args.start):
            if (args.runs and i - args.start >= args.runs) or (
                not args.runs and time.monotonic() >= deadline
            ):
                break
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            faulthandler.dump_traceback_later(args.timeout, exit=True)
            try:
                TestOneInput(data)
            except BaseException:
                name = os.path.join(args.artifact_prefix, "crash-" + hashlib.sha1(data).hexdigest())
                with open(name, "wb") as f:
                    f.write(data)
                print(f"fuzz: input {i} of seed {args.seed} failed; saved as {name}", flush=True)
                raise
    finally:
        faulthandler.cancel_dump_traceback_later()
        os.close(fd)
        os.unlink(current)
    if args.verbose:
        _print_details()
    print(summary(time.monotonic() - start))
    return 0


_ON_EXIT: Any = None  # keeps the C callback alive


def instrument() -> int:
    """Coverage feedback for libFuzzer from posembed's Python layer, its twins and
    this harness's own choices; returns the number of functions instrumented.

    ``atheris.instrument_imports()`` around ``import posembed`` instruments
    nothing in an editable install (scikit-build-core's loader hides the
    source: libFuzzer saw 1 edge), so the functions are instrumented after
    import, which works for editable and wheel installs alike."""
    count = 0
    for obj in gc.get_objects():
        module = getattr(obj, "__module__", None) or ""
        if isinstance(obj, types.FunctionType) and module.split(".")[0] in ("posembed", __name__):
            try:
                atheris.instrument_func(obj)
                count += 1
            except Exception:  # a function atheris cannot patch keeps running uninstrumented
                pass
    return count


def libfuzzer_flags(args: argparse.Namespace, libfuzzer_args: list[str]) -> list[str]:
    """The flags run_atheris gives libFuzzer before the caller's own."""
    flags = [f"-timeout={args.timeout}", f"-artifact_prefix={args.artifact_prefix}"]
    if args.seconds and not any(a.startswith("-max_total_time=") for a in libfuzzer_args):
        flags.append(f"-max_total_time={args.seconds}")
    if args.runs:
        flags.append(f"-runs={args.runs}")
    if args.seed:
        flags.append(f"-seed={args.seed}")
    if MODE != "calls" and not any(a.startswith("-rss_limit_mb=") for a in libfuzzer_args):
        # atheris 3.0 keeps a reference to every array that a comparison in
        # an instrumented function returns: each mask that `starts > ...` or
        # `lengths < 0` makes in posembed's checks stays alive. A race
        # input's checks compare arrays of up to a few MB, so resident memory
        # grows by about 1.5 MB an input (2.1 GB, libFuzzer's default limit,
        # after 60-90 s here), while a plain run stays under 400 MB.
        flags.append(f"-rss_limit_mb={HOSTILE_RSS_LIMIT_MB}")
    return flags


def run_atheris(args: argparse.Namespace, libfuzzer_args: list[str]) -> int:
    """libFuzzer through atheris; the summary comes from a C on_exit hook, since
    libFuzzer ends the process with exit() and Python's atexit never runs."""
    global _ON_EXIT
    start = time.monotonic()
    corpus: list[str] = []
    if not args.files:
        # a start from the plain driver's inputs (up to 400 bytes), not from
        # libFuzzer's one byte, so a short run already tries rich calls
        corpus = [tempfile.mkdtemp(prefix="posembed-fuzz-corpus-")]
        for i, data in itertools.islice(plain_inputs(args.seed), 256):
            with open(os.path.join(corpus[0], f"seed-{i}"), "wb") as f:
                f.write(data)

    @ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p)
    def at_exit(status: int, _arg: Any) -> None:
        for folder in corpus:
            shutil.rmtree(folder, ignore_errors=True)
        if args.verbose:
            _print_details()
        if status == 0:
            print(summary(time.monotonic() - start), flush=True)
        else:
            print(f"fuzz: {STATS.inputs} inputs, stopped with status {status}", flush=True)

    _ON_EXIT = at_exit
    ctypes.CDLL(None).on_exit(at_exit, None)
    print(f"fuzz: {instrument()} functions instrumented", file=sys.stderr)
    flags = libfuzzer_flags(args, libfuzzer_args)
    atheris.Setup([sys.argv[0], *flags, *libfuzzer_args, *args.files, *corpus], TestOneInput)
    atheris.Fuzz()
    return 0  # not reached: libFuzzer exits


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=0, help="fuzz for this long")
    parser.add_argument("--runs", type=int, default=0, help="or for this many inputs")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--start", type=int, default=0, help="first input index (plain)")
    parser.add_argument(
        "--timeout", type=int, default=60, help="seconds one input may take (a hang)"
    )
    parser.add_argument("--engine", choices=["atheris", "plain"], default=None)
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="calls",
        help="calls: functions against their twins; race: window kernels against a writer "
        "thread; files: crafted files for the readers",
    )
    parser.add_argument("--artifact-prefix", default="./", help="where failing inputs go")
    parser.add_argument("-v", "--verbose", action="store_true", help="outcome counts per call")
    parser.add_argument("files", nargs="*", help="inputs to rerun (or, for atheris, corpus dirs)")
    ours, libfuzzer_args = [], []
    rest = argv
    if "--" in argv:
        k = argv.index("--")
        rest, libfuzzer_args = argv[:k], argv[k + 1 :]
    for arg in rest:  # libFuzzer's own flags have one dash: -max_len=, -jobs=
        (
            libfuzzer_args
            if arg.startswith("-") and not arg.startswith("--") and len(arg) > 2
            else ours
        ).append(arg)
    args = parser.parse_args(ours)
    global MODE
    MODE = args.mode
    engine = args.engine or ("atheris" if atheris is not None else "plain")
    if engine == "atheris" and atheris is None:
        parser.error("atheris is not installed (pip install atheris), use --engine plain")
    if engine == "plain":
        if libfuzzer_args:
            parser.error(f"libFuzzer flags need --engine atheris: {libfuzzer_args}")
        if not args.seconds and not args.runs and not args.files:
            args.seconds = 60
        return run_plain(args)
    return run_atheris(args, libfuzzer_args)


if __name__ == "__main__":
    sys.exit(main())

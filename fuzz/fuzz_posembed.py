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

Usage::

    python fuzz/fuzz_posembed.py --seconds 60            # atheris if installed, else plain
    python fuzz/fuzz_posembed.py --seconds 60 --engine plain --seed 3
    python fuzz/fuzz_posembed.py crash-1a2b...           # rerun saved inputs
    python fuzz/fuzz_posembed.py -v --runs 20000         # and count the outcomes per call
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
import itertools
import math
import os
import re
import shutil
import sys
import tempfile
import time
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
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
from posembed import _core, reference

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
    b.maybe(call, "out", lambda: b.out(["table"]), odds=4)
    return b.finish(call)


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
    huge = False
    for _ in range(r.int(0, 3)):
        if r.chance(8):
            value = r.pick(ODD_SIZES + NOT_INTS)
            huge = huge or _is_huge(value)
            entries.append(value)
        else:
            entries.append(r.int(0, 9))
    kind = r.int(0, 5)  # an int, a list, an array or (mostly) a tuple
    shape: Any = tuple(entries)
    if kind == 0 and entries:
        shape = entries[0]
    elif kind == 1:
        shape = list(entries)
    elif kind == 2 and all(_is_int(x) and -(2**63) <= int(x) < 2**63 for x in entries):
        shape = np.array(entries, dtype=np.int64)
    if r.chance(12):
        shape, huge = r.pick(["3", None, 2.0, {1: 2}, b"ab"]), False
    call = _plain("dropout_mask")
    call.add("shape", Value(shape))
    call.add("p", b.rate())
    call.add("seed", b.seed(none=False))
    if huge:
        b.huge["shape"] = Value(tuple(1 if _is_huge(x) else x for x in entries))
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


@dataclass(frozen=True)
class KnownBug:
    """A discrepancy reported and not yet fixed, tolerated (and counted, see -v)
    so that fuzzing can go on past it. Remove the entry with the fix."""

    name: str
    reproducer: str
    matches: Callable[[Outcome], bool]


def _text(exc: BaseException | None) -> str:
    return "" if exc is None else str(exc)


KNOWN_BUGS: list[KnownBug] = []  # none at present


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


def TestOneInput(data: bytes) -> None:  # atheris' name for the function it calls
    STATS.inputs += 1
    with quiet():
        call, settings = decode(data)
        with settings:
            kind = execute(call)
    STATS.outcomes[f"{call.name}: {kind}"] += 1


# ---------------------------------------------------------------- drivers


def summary(elapsed: float) -> str:
    return f"fuzz: {STATS.inputs} inputs in {elapsed:.1f} s, no failures"


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
    flags = [f"-timeout={args.timeout}", f"-artifact_prefix={args.artifact_prefix}"]
    if args.seconds and not any(a.startswith("-max_total_time=") for a in libfuzzer_args):
        flags.append(f"-max_total_time={args.seconds}")
    if args.runs:
        flags.append(f"-runs={args.runs}")
    if args.seed:
        flags.append(f"-seed={args.seed}")
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

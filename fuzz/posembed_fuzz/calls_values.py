"""The calls mode's value pools and argument recipes: arrays of every dtype
(all integers, float16, bfloat16, float32/64, bool, complex, object, strings,
structured, non-native byte order) and every rank from 0-d and empty up, in
every layout (reversed, stepped, transposed, Fortran, broadcast zero strides,
unaligned views of byte buffers, read-only, lists, scalars, memoryviews,
DLPack producers); parameters from small valid values to 0, negatives,
2**31, 2**62, 2**63, 2**64, NaN, inf, strings and None; ``out=`` arrays good
and bad. Each recipe is built afresh for each call, so that posembed and its
twin never see what the other did.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

try:
    import ml_dtypes
except ImportError:  # bfloat16 cases are then left out
    ml_dtypes = None

from .common import HUGE, INF, NAN, Arg, Context, _short

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


def _dtype_text(dt: np.dtype[Any]) -> str:
    if dt.names is not None:
        return repr(dt.descr)
    if dt.kind == "V" or dt.isnative:
        return dt.name  # bfloat16, float8_e4m3fn, float32, ...
    return repr(dt.str)  # '>f4'


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

"""Plain NumPy twins of posembed's kernels.

Each function here has the same signature, the same results and the same
exception types as its fast counterpart, and is written to be read, not to
be fast. The tests hold the kernels to these. This module imports nothing
from the rest of posembed.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from typing import Any

import numpy as np

__all__ = [
    "LearnedPositionEmbedding",
    "dropout_mask",
    "embed",
    "extend",
    "gather",
    "gather_backward",
    "interpolate",
    "lerp",
    "resample_grid",
    "similarity",
    "stitch",
    "uniform_bits",
    "windows",
]


def _array(obj: Any, name: str) -> np.ndarray:
    if isinstance(obj, np.ma.MaskedArray):
        raise TypeError(f"{name}: masked arrays are not accepted")
    try:
        return np.asarray(obj)
    except (BufferError, RuntimeError, TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be array-like: {exc}") from None


def _int_positions(positions: Any) -> np.ndarray:
    """Positions as int64, or uint64 (kept, so huge values compare correctly),
    or an object array of Python ints when they do not fit 64 bits."""
    p = _array(positions, "positions")
    if p.dtype.kind == "f" and isinstance(positions, (list, tuple)):
        # a list: empty, or of ints too large for one NumPy integer type
        p = np.asarray(positions, dtype=object) if p.size else p.astype(np.int64)
    if p.dtype.kind == "O":
        ok = (isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in p.flat)
        if not all(ok):
            raise TypeError("positions must be integers")
        return np.array([int(x) for x in p.flat], dtype=object).reshape(p.shape)
    if p.dtype.kind not in "iu":
        raise TypeError(f"positions must be integers; got dtype {p.dtype}")
    if p.dtype.kind == "u" and p.dtype.itemsize == 8:
        return p.astype(np.uint64)  # any byte order; huge values stay positive
    return p.astype(np.int64)


def gather(
    table: Any, positions: Any, *, mode: str = "raise", out: np.ndarray | None = None
) -> np.ndarray:
    """``table[positions]`` with numpy.take's clip / wrap modes and a strict raise mode.

    The twin of :func:`posembed.gather`.

    Parameters
    ----------
    table : array_like, shape (L, d)
        Any fixed-size dtype.
    positions : int or array_like of int, any shape
        Integer positions (Python ints of any size too).
    mode : {"raise", "clip", "wrap"}
        ``"raise"``: positions must be in 0..L-1; ``"clip"``, ``"wrap"``: as
        :func:`numpy.take`.
    out : ndarray, optional
        Destination of shape ``positions.shape + (d,)`` and ``table``'s dtype.

    Returns
    -------
    ndarray, shape ``positions.shape + (d,)``
        ``table``'s dtype (``out`` if given).

    Raises
    ------
    IndexError
        In mode "raise", a position outside 0..L-1; in "clip" and "wrap",
        positions for a table of 0 rows.
    TypeError
        An input NumPy cannot read (or a masked array), an object-dtype table,
        non-integer positions, or ``out`` that is not an ndarray or of another
        dtype.
    ValueError
        A table that is not 2-D, an unknown mode, or ``out`` of the wrong
        shape, read-only, non-contiguous, misaligned or overlapping an input.
    """
    table = _array(table, "table")
    if table.ndim != 2:
        raise ValueError(f"table must be 2-D; got shape {table.shape}")
    if table.dtype.hasobject or table.dtype.itemsize == 0:
        raise TypeError("table must have a fixed-size dtype")
    if mode not in ("raise", "clip", "wrap"):
        raise ValueError(f"mode must be 'raise', 'clip' or 'wrap'; got {mode!r}")
    p = _int_positions(positions)
    rows = table.shape[0]
    if mode == "raise" and p.dtype == object:  # Python ints past 64 bits: refused as read
        _checked_ids(p, rows, "position")
    if out is not None:
        out = _writable_out(out)
        if out.dtype != table.dtype:
            raise TypeError(f"out must have dtype {table.dtype}")
        if out.shape != (*p.shape, table.shape[1]):
            raise ValueError("out must have shape positions.shape + (d,)")
        if not (out.flags.writeable and out.flags.c_contiguous and out.flags.aligned):
            raise ValueError("out must be writeable, C-contiguous and aligned")
        if np.shares_memory(out, table) or np.shares_memory(out, _memory(positions)):
            raise ValueError("out must not overlap table or positions")

    if mode == "raise":
        bad = (p < 0) | (p >= rows)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise IndexError(
                f"position {p[where]} at positions{list(where)} is out of range "
                f"for a table of {rows} rows"
            )
        rows_taken = p
    elif p.size > 0 and rows == 0:
        raise IndexError("cannot clip or wrap into a table of 0 rows")
    elif mode == "clip":
        rows_taken = np.where(p < 0, 0, np.where(p >= rows, rows - 1, p))
    elif p.dtype == np.uint64:
        rows_taken = p % np.uint64(max(rows, 1))
    else:
        rows_taken = p % max(rows, 1)  # floor modulo: -1 -> rows - 1
    result: np.ndarray = table[np.asarray(rows_taken).astype(np.int64)]
    if out is not None:
        out[...] = result
        return out
    return result


# ------------------------------------------------------------ interpolation


def _float_table(table: Any) -> np.ndarray:
    """A 2-D float table in native byte order (results come out native too)."""
    t = _array(table, "table")
    if t.ndim != 2:
        raise ValueError(f"table must be 2-D; got shape {t.shape}")
    if t.dtype.name not in ("float16", "bfloat16", "float32", "float64"):
        raise TypeError(f"table must have a float dtype; got {t.dtype}")
    return t.astype(t.dtype.newbyteorder("="), copy=False)


def _compute_dtype(t: np.ndarray) -> type[np.floating[Any]]:
    """float64 tables compute in float64, every other float in float32."""
    return np.float64 if t.dtype.name == "float64" else np.float32  # any byte order


def _count(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer") from None
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}")
    return int(value)


def _check_size(what: str, *factors: int) -> None:
    """ValueError when a result or index range would reach 2^62 (as the kernels refuse)."""
    if math.prod(max(int(f), 1) for f in factors) >= 2**62:
        raise ValueError(f"{what} is too large")


def _check_seed(seed: Any) -> None:
    if isinstance(seed, (bool, np.bool_)):
        raise TypeError("seed must not be a bool")


def _source(i: int, in_size: int, out_size: int, align: str) -> tuple[int, float]:
    """Source coordinate of output index i as (floor, fraction), from exact
    integer arithmetic."""
    if align == "scale":
        num, den = i * in_size, out_size
    elif align == "half_pixel":
        num, den = (2 * i + 1) * in_size - out_size, 2 * out_size
    elif align == "corners":
        if out_size == 1:
            return 0, 0.0
        num, den = i * (in_size - 1), out_size - 1
    else:
        raise ValueError(f"unknown align {align!r}")
    q = num // den
    return q, (num - q * den) / den


def _linear_taps(in_size: int, out_size: int, align: str) -> list[tuple[int, int, float]]:
    taps = []
    for i in range(out_size):
        q, frac = _source(i, in_size, out_size, align)
        if q < 0:  # half_pixel clamps the source at 0
            q, frac = 0, 0.0
        lo = min(q, in_size - 1)
        taps.append((lo, min(lo + 1, in_size - 1), frac if lo == q else 0.0))
    return taps


def _blend(table: np.ndarray, lo: np.ndarray, hi: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(1 - w) * table[lo] + w * table[hi], weights rounded to the compute type;
    rows with w == 0 or lo == hi are exact copies of table[lo]."""
    c = _compute_dtype(table)
    x = table.astype(c)
    wa = (1.0 - w).astype(c)[..., None]
    wb = w.astype(c)[..., None]
    out: np.ndarray = (wa * x[lo] + wb * x[hi]).astype(table.dtype)
    copy = (w == 0) | (lo == hi)
    out[copy] = table[lo[copy]]
    return out


def _writable_out(out: Any) -> np.ndarray:
    """out= as an ndarray: itself, or a view of a DLPack producer's memory."""
    if isinstance(out, np.ndarray):
        return out
    if not hasattr(type(out), "__dlpack__"):
        raise TypeError("out must be a numpy.ndarray or a DLPack producer")
    try:
        view: np.ndarray = np.from_dlpack(out)
    except (BufferError, RuntimeError, TypeError, ValueError) as exc:
        raise TypeError(f"out must be memory NumPy can write: {exc}") from None
    return view


def _memory(x: Any) -> np.ndarray:
    """An input's memory: a DLPack producer's viewed in place, else NumPy's view
    (a list or a number: a fresh array, sharing nothing)."""
    if x is None or isinstance(x, np.ndarray):
        return np.asarray(x)
    if hasattr(type(x), "__dlpack__"):
        try:
            return np.from_dlpack(x)
        except (BufferError, RuntimeError, TypeError, ValueError):
            pass
    try:
        return np.asarray(x)
    except (BufferError, RuntimeError, TypeError, ValueError):
        return np.asarray(None)


def _check_out(out: Any, dtype: np.dtype[Any], shape: tuple[int, ...], *inputs: Any) -> None:
    """The checks of out= alone, before any value is checked (posembed's order:
    every argument's kind, shape and dtype, out= among them, then ranges)."""
    if out is None:
        return
    dest = _writable_out(out)
    if dest.dtype != dtype:
        raise TypeError(f"out must have dtype {dtype}")
    if dest.shape != shape:
        raise ValueError(f"out must have shape {shape}")
    if not (dest.flags.writeable and dest.flags.c_contiguous and dest.flags.aligned):
        raise ValueError("out must be writeable, C-contiguous and aligned")
    if any(np.shares_memory(dest, _memory(x)) for x in inputs):
        raise ValueError("out must not overlap an input")


def _into(out: Any, result: np.ndarray, *inputs: Any) -> np.ndarray:
    """result, or result written into out after the same checks as the kernels."""
    if out is None:
        return result
    if isinstance(out, np.ndarray):
        dest: np.ndarray = out
    else:
        dest = _writable_out(out)
    out = dest
    if out.dtype != result.dtype:
        raise TypeError(f"out must have dtype {result.dtype}")
    if out.shape != result.shape:
        raise ValueError(f"out must have shape {result.shape}")
    if not (out.flags.writeable and out.flags.c_contiguous and out.flags.aligned):
        raise ValueError("out must be writeable, C-contiguous and aligned")
    if any(np.shares_memory(out, _memory(x)) for x in inputs):
        raise ValueError("out must not overlap an input")
    out[...] = result
    return dest


def interpolate(
    table: Any, length: int, *, align: str = "scale", out: np.ndarray | None = None
) -> np.ndarray:
    """Linear interpolation of the table's rows to ``length`` rows.

    The twin of :func:`posembed.interpolate`: source positions from exact
    integer arithmetic, blended in float32 (float64 for float64 tables).

    Parameters
    ----------
    table : array_like, shape (L, d)
        float16, bfloat16, float32 or float64, L >= 1.
    length : int
        T >= 1 rows in the result.
    align : {"scale", "half_pixel", "corners"}
        As for :func:`posembed.interpolate`.
    out : ndarray, optional
        Destination of shape (T, d) and the table's dtype.

    Returns
    -------
    ndarray, shape (T, d)
        The table's dtype (``out`` if given).

    Raises
    ------
    TypeError
        A table NumPy cannot read or not of a float dtype above, a ``length``
        that is not an integer, or ``out`` that is not an ndarray or of another
        dtype.
    ValueError
        A table that is not 2-D or has no rows, ``length`` < 1, an unknown
        ``align``, or ``out`` of the wrong shape, read-only, non-contiguous,
        misaligned or overlapping an input.
    """
    t = _float_table(table)
    if t.shape[0] == 0:
        raise ValueError("table must have at least one row")
    n = _count(length, "length", 1)
    if align not in ("scale", "half_pixel", "corners"):
        raise ValueError(f"align must be 'scale', 'half_pixel' or 'corners'; got {align!r}")
    _check_size("length", 4, n, t.shape[0])
    _check_size("the result", n, t.shape[1], t.itemsize)
    taps = _linear_taps(t.shape[0], n, align)
    lo = np.array([k[0] for k in taps], dtype=np.int64)
    hi = np.array([k[1] for k in taps], dtype=np.int64)
    w = np.array([k[2] for k in taps], dtype=np.float64)
    return _into(out, _blend(t, lo, hi, w), t, table)


def lerp(table: Any, positions: Any, *, out: np.ndarray | None = None) -> np.ndarray:
    """Rows at fractional positions in [0, L - 1], linear between floor and ceil.

    The twin of :func:`posembed.lerp`.

    Parameters
    ----------
    table : array_like, shape (L, d)
        float16, bfloat16, float32 or float64.
    positions : float or array_like of float, any shape
        Real numbers, each finite and in [0, L - 1].
    out : ndarray, optional
        Destination of shape ``positions.shape + (d,)`` and the table's dtype.

    Returns
    -------
    ndarray, shape ``positions.shape + (d,)``
        The table's dtype (``out`` if given).

    Raises
    ------
    TypeError
        A table NumPy cannot read or not of a float dtype above, positions
        that are not real numbers, or ``out`` that is not an ndarray or of
        another dtype.
    ValueError
        A table that is not 2-D, a position that is NaN, infinite or out of
        range, or ``out`` of the wrong shape, read-only, non-contiguous,
        misaligned or overlapping an input.
    """
    t = _float_table(table)
    p = _array(positions, "positions")
    if p.dtype.kind == "O" and not isinstance(positions, np.ndarray):
        # Python ints past 64 bits are real numbers (and out of range)
        ok = (isinstance(x, (int, float)) and not isinstance(x, bool) for x in p.flat)
        if all(ok):
            p = np.array([_float(x) for x in p.flat], dtype=np.float64).reshape(p.shape)
    if p.dtype.kind not in "fiu":
        raise TypeError(f"positions must be real numbers; got dtype {p.dtype}")
    p = p.astype(np.float64)
    _check_out(out, t.dtype, (*p.shape, t.shape[1]), t, table, positions)
    bad = ~((p >= 0) & (p <= t.shape[0] - 1))
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"position {p[where]} at positions{list(where)} is out of range")
    lo = np.floor(p).astype(np.int64)
    result = _blend(t, lo, np.minimum(lo + 1, t.shape[0] - 1), p - np.floor(p))
    return _into(out, result, t, table, positions)


def _float(x: float) -> float:
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def extend(
    table: Any,
    length: int,
    *,
    init: str = "interpolate",
    std: float | None = None,
    seed: int | np.random.Generator | None = None,
    align: str | None = None,
) -> np.ndarray:
    """The table followed by ``length - L`` new rows initialised by ``init``.

    The twin of :func:`posembed.extend`.

    Parameters
    ----------
    table : array_like, shape (L, d)
        float16, bfloat16, float32 or float64, L >= 1.
    length : int
        T >= L rows in the result.
    init : {"interpolate", "tile", "edge", "random", "zeros"}
        As for :func:`posembed.extend`.
    std : float, optional
        Standard deviation of ``init="random"`` only; default the table's.
    seed : int or numpy.random.Generator, optional
        Seed of ``init="random"`` only.
    align : {"scale", "half_pixel", "corners"}, optional
        Convention of ``init="interpolate"`` only; default ``"scale"``.

    Returns
    -------
    ndarray, shape (T, d)
        The table's dtype.

    Raises
    ------
    TypeError
        A table NumPy cannot read or not of a float dtype above, a ``length``
        that is not an integer, a ``std`` that is not a number, or a ``seed``
        that ``numpy.random.default_rng`` refuses as a TypeError.
    ValueError
        A table that is not 2-D or has no rows; ``length`` < L; an unknown
        ``init`` or ``align``; ``std`` or ``seed`` without ``init="random"``,
        ``align`` without ``init="interpolate"``; a negative or non-finite
        ``std``; ``init="random"`` without ``std`` on a table holding inf or
        NaN; a negative ``seed``.
    """
    t = _float_table(table)
    rows = t.shape[0]
    if rows == 0:
        raise ValueError("table must have at least one row")
    n = _count(length, "length", 1)
    if n < rows:
        raise ValueError("length must be at least the table's row count")
    _check_size("length", 4, n, rows)
    _check_size("the result", n, t.shape[1], t.itemsize)
    if init not in ("interpolate", "tile", "edge", "random", "zeros"):
        raise ValueError(f"unknown init {init!r}")
    if init != "random" and (std is not None or seed is not None):
        raise ValueError("std and seed apply to init='random' only")
    if init != "interpolate" and align is not None:
        raise ValueError("align applies to init='interpolate' only")
    align = "scale" if align is None else align
    if align not in ("scale", "half_pixel", "corners"):
        raise ValueError(f"unknown align {align!r}")
    if std is not None:
        if isinstance(std, bool) or not isinstance(std, (int, float, np.number)):
            raise TypeError("std must be a number")
        if not math.isfinite(std) or std < 0:
            raise ValueError("std must be finite and >= 0")
    _check_seed(seed)
    gen = np.random.default_rng(seed) if init == "random" else None
    new_rows = np.arange(rows, n)
    if init == "interpolate":
        new = interpolate(t, n, align=align)[rows:]
    elif init == "tile":
        new = t[new_rows % rows]
    elif init == "edge":
        new = t[np.full(n - rows, rows - 1)]
    elif init == "zeros":
        new = np.zeros((n - rows, t.shape[1]), t.dtype)
    else:
        if std is not None:
            scale = float(std)
        elif t.size == 0:
            scale = 0.0  # no values to measure or draw
        else:
            with np.errstate(invalid="ignore", over="ignore"):
                scale = float(np.std(np.ascontiguousarray(t, dtype=np.float64)))
        if not math.isfinite(scale):
            raise ValueError("the table's standard deviation is not finite; pass std=")
        assert gen is not None
        draws = gen.standard_normal((n - rows, t.shape[1]))
        new = (draws * scale).astype(t.dtype)
    return np.concatenate([t, new]).astype(t.dtype)


def _cubic_weights(t: float) -> list[float]:
    a = -0.75
    x0, x3, u = t + 1.0, 2.0 - t, 1.0 - t
    return [
        ((a * x0 - 5.0 * a) * x0 + 8.0 * a) * x0 - 4.0 * a,
        ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0,
        ((a + 2.0) * u - (a + 3.0)) * u * u + 1.0,
        ((a * x3 - 5.0 * a) * x3 + 8.0 * a) * x3 - 4.0 * a,
    ]


def _axis_taps(
    in_size: int, out_size: int, method: str, align: str
) -> tuple[list[list[int]], list[list[float]]]:
    idx, wts = [], []
    for i in range(out_size):
        q, frac = _source(i, in_size, out_size, align)
        if method == "bilinear":
            if q < 0:
                q, frac = 0, 0.0
            lo = min(q, in_size - 1)
            idx.append([lo, min(lo + 1, in_size - 1)])
            wts.append([1.0 - frac, frac])
        else:
            idx.append([min(max(q - 1 + k, 0), in_size - 1) for k in range(4)])
            wts.append(_cubic_weights(frac))
    return idx, wts


def resample_grid(
    table: Any,
    grid: tuple[int, int],
    new_grid: tuple[int, int],
    *,
    prefix: int = 0,
    method: str = "bicubic",
    align: str = "half_pixel",
) -> np.ndarray:
    """Separable 2-D resampling of the (H, W) grid after ``prefix`` rows.

    The twin of :func:`posembed.resample_grid`: along x, then along y, summing
    the taps left to right in float32 (float64 for float64 tables).

    Parameters
    ----------
    table : array_like, shape (prefix + H * W, d)
        float16, bfloat16, float32 or float64.
    grid : (int, int)
        (H, W), both >= 1.
    new_grid : (int, int)
        (H', W'), both >= 1.
    prefix : int
        Leading rows (>= 0) copied to the result.
    method : {"bicubic", "bilinear"}
        Keys' cubic with A = -0.75, or linear.
    align : {"half_pixel", "corners"}
        As PyTorch ``align_corners=False`` / ``True``.

    Returns
    -------
    ndarray, shape (prefix + H' * W', d)
        The table's dtype.

    Raises
    ------
    TypeError
        A table NumPy cannot read or not of a float dtype above; ``grid`` or
        ``new_grid`` that is not a pair or holds a non-integer; a ``prefix``
        that is not an integer.
    ValueError
        A table that is not 2-D; a grid side < 1; a negative ``prefix``; table
        rows other than ``prefix + H * W``; an unknown ``method`` or ``align``.
    """
    t = _float_table(table)
    sides = []
    for name, pair in (("grid", grid), ("new_grid", new_grid)):
        try:
            _, _ = pair
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be a pair (H, W)") from None
        sides += [_count(x, name, 1) for x in pair]
    h, w, h2, w2 = sides
    p = _count(prefix, "prefix", 0)
    if p + h * w != t.shape[0]:
        raise ValueError("table rows do not match prefix + H * W")
    _check_size("new_grid", p + h2 * w2, t.shape[1], t.itemsize)
    _check_size("new_grid", 4, h2 * w2, h * w)
    if method not in ("bilinear", "bicubic"):
        raise ValueError(f"unknown method {method!r}")
    if align not in ("half_pixel", "corners"):
        raise ValueError(f"unknown align {align!r}")
    c = _compute_dtype(t)
    g = t[p:].reshape(h, w, -1).astype(c)
    ix, wx = _axis_taps(w, w2, method, align)
    iy, wy = _axis_taps(h, h2, method, align)
    taps = len(ix[0])
    # along x, then along y, summing taps left to right
    tmp = np.asarray(wx, np.float64)[:, 0].astype(c)[None, :, None] * g[:, [k[0] for k in ix]]
    for b in range(1, taps):
        wb = np.asarray(wx, np.float64)[:, b].astype(c)[None, :, None]
        tmp = tmp + wb * g[:, [k[b] for k in ix]]
    out = np.asarray(wy, np.float64)[:, 0].astype(c)[:, None, None] * tmp[[k[0] for k in iy]]
    for a in range(1, taps):
        wa = np.asarray(wy, np.float64)[:, a].astype(c)[:, None, None]
        out = out + wa * tmp[[k[a] for k in iy]]
    grid_rows = out.reshape(h2 * w2, -1).astype(t.dtype)
    return np.concatenate([t[:p], grid_rows]).astype(t.dtype)


def similarity(table: Any) -> np.ndarray:
    """Cosine similarity of every pair of rows; a zero row scores 0.

    The twin of :func:`posembed.similarity`.

    Parameters
    ----------
    table : array_like, shape (L, d)
        float16, bfloat16, float32 or float64.

    Returns
    -------
    ndarray, shape (L, L)
        float64 for float64 tables, float32 for the others.

    Raises
    ------
    TypeError
        A table NumPy cannot read or not of a float dtype above.
    ValueError
        A table that is not 2-D.
    """
    t = _float_table(table)
    x = t.astype(_compute_dtype(t))
    if x.size:  # rows scaled to a largest magnitude of 1: no overflow, no underflow
        peak = np.abs(x).max(axis=1, keepdims=True)
        x = x / np.where(peak == 0, 1, peak).astype(x.dtype)
    norms = np.sqrt((x * x).sum(axis=1))
    denom = np.outer(norms, norms)
    dots = x @ x.T
    result: np.ndarray = np.where(denom == 0, 0, dots / np.where(denom == 0, 1, denom))
    return result.astype(x.dtype)


# ------------------------------------------------------------ windows


class Windows:
    """Twin of posembed.Windows: the same attributes, built by plain loops."""

    def __init__(
        self,
        tokens: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
        documents: np.ndarray,
        doc_offsets: np.ndarray,
        size: int,
        step: int,
        tail: str,
    ) -> None:
        self.tokens, self.starts, self.lengths, self.documents = tokens, starts, lengths, documents
        self.doc_offsets, self.size, self.step, self.tail = doc_offsets, size, step, tail

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def mask(self) -> np.ndarray:
        rows = [[j < n for j in range(self.size)] for n in self.lengths]
        return np.array(rows, dtype=bool).reshape(len(rows), self.size)

    def owner(self, rule: str = "first") -> np.ndarray:
        """For each token, the first window containing it, or BERT's max-context window."""
        if rule not in ("first", "center"):
            raise ValueError(f"unknown rule {rule!r}")
        own = np.zeros((len(self), self.size), dtype=bool)
        for doc in range(len(self.doc_offsets) - 1):
            mine = [w for w in range(len(self)) if self.documents[w] == doc]
            n = int(self.doc_offsets[doc + 1] - self.doc_offsets[doc])
            for p in range(n):
                containing = [
                    w for w in mine if self.starts[w] <= p < self.starts[w] + self.lengths[w]
                ]
                if not containing:
                    continue
                if rule == "first":
                    best = containing[0]
                else:
                    best, best_score = -1, -1
                    for w in containing:
                        left = p - int(self.starts[w])
                        right = int(self.starts[w] + self.lengths[w]) - 1 - p
                        # min(left, right) + 0.01 * length, times 100: exact integers
                        score = 100 * min(left, right) + int(self.lengths[w])
                        if score > best_score:  # strictly better: the first max wins
                            best, best_score = w, score
                own[best, p - self.starts[best]] = True
        return own


def windows(
    tokens: Any,
    size: int,
    *,
    step: int | None = None,
    overlap: int | None = None,
    tail: str = "pad",
    pad_value: int = 0,
    offsets: Any = None,
    out: np.ndarray | None = None,
) -> Windows:
    """Windows of ``size`` tokens, document by document, by the formulas in the docs.

    The twin of :func:`posembed.windows`.

    Parameters
    ----------
    tokens : array_like of int, shape (N,)
        Integer tokens; the windows keep their dtype (in native byte order).
    size : int
        Window length, >= 1.
    step : int, optional
        Distance between window starts, 1..size; default ``size``.
    overlap : int, optional
        ``size - step``, 0..size-1; at most one of ``step`` and ``overlap``.
    tail : {"pad", "shift", "drop"}
        As for :func:`posembed.windows`.
    pad_value : int
        Fills unused slots; must fit the tokens' dtype.
    offsets : array_like of int, shape (documents + 1,), optional
        CSR document offsets from 0 to N, never decreasing.
    out : ndarray, optional
        Destination of shape (number of windows, size) and the tokens' dtype.

    Returns
    -------
    Windows
        This module's :class:`Windows`, with the same attributes as
        :class:`posembed.Windows`.

    Raises
    ------
    TypeError
        ``tokens`` NumPy cannot read or not of an integer dtype; a ``size``,
        ``step``, ``overlap`` or ``pad_value`` that is not an integer;
        ``offsets`` that is not a 1-D integer array; ``out`` that is not an
        ndarray or of another dtype.
    ValueError
        ``tokens`` that is not 1-D; ``size`` < 1; both ``step`` and
        ``overlap``; ``step`` outside 1..size or ``overlap`` outside
        0..size-1; an unknown ``tail``; a ``pad_value`` that does not fit;
        ``offsets`` that do not run from 0 to N or decrease; ``out`` of the
        wrong shape, read-only, non-contiguous, misaligned or overlapping an input.
    """
    t = _array(tokens, "tokens")
    if t.ndim != 1:
        raise ValueError("tokens must be 1-D")
    if t.dtype.kind not in "iu":
        raise TypeError("tokens must be integers")
    size = _count(size, "size", 1)
    if step is not None and overlap is not None:
        raise ValueError("give step or overlap, not both")
    if overlap is not None:
        overlap = _count(overlap, "overlap", 0)
        if overlap >= size:
            raise ValueError("overlap must be less than size")
        step = size - overlap
    step = size if step is None else _count(step, "step", 1)
    if step > size:
        raise ValueError("step must be at most size")
    if tail not in ("pad", "shift", "drop"):
        raise ValueError(f"unknown tail {tail!r}")
    if isinstance(pad_value, (bool, np.bool_)) or not isinstance(pad_value, (int, np.integer)):
        raise TypeError("pad_value must be an integer")
    info = np.iinfo(t.dtype)
    if not info.min <= int(pad_value) <= info.max:
        raise ValueError("pad_value does not fit the tokens' dtype")
    if offsets is None:
        bounds = [0, len(t)]
    else:
        o = _array(offsets, "offsets")
        if o.ndim != 1 or o.dtype.kind not in "iu":
            raise TypeError("offsets must be a 1-D integer array")
        bounds = [int(x) for x in o]
        if not bounds or bounds[0] != 0 or bounds[-1] != len(t):
            raise ValueError("offsets must run from 0 to len(tokens)")
        if any(b < a for a, b in itertools.pairwise(bounds)):
            raise ValueError("offsets must not decrease")
    rows, starts, lengths, documents = [], [], [], []
    for doc in range(len(bounds) - 1):
        text = t[bounds[doc] : bounds[doc + 1]]
        n = len(text)
        if n == 0:
            continue
        if tail == "drop":
            count = 0 if n < size else (n - size) // step + 1
        else:
            count = 1 if n <= size else -(-(n - size) // step) + 1
        for k in range(count):
            start = k * step
            if tail == "shift" and k == count - 1 and n >= size:
                start = n - size
            piece = text[start : start + size]
            rows.append(np.concatenate([piece, np.full(size - len(piece), pad_value, t.dtype)]))
            starts.append(start)
            lengths.append(len(piece))
            documents.append(doc)
    native = t.dtype.newbyteorder("=")
    table = _into(out, np.array(rows, dtype=native).reshape(len(rows), size), t)
    return Windows(
        table,
        np.array(starts, dtype=np.int64),
        np.array(lengths, dtype=np.int64),
        np.array(documents, dtype=np.int64),
        np.array(bounds, dtype=np.int64),
        size,
        step,
        tail,
    )


def stitch(values: Any, windows: Windows, *, reduce: str = "mean", fill: Any = 0) -> np.ndarray:
    """Per-token values from per-window values, token by token in window order.

    The twin of :func:`posembed.stitch`.

    Parameters
    ----------
    values : array_like, shape (n, size, ...)
        Bool, integer or float values aligned with ``windows.tokens``.
    windows : Windows
        This module's or :class:`posembed.Windows`.
    reduce : {"mean", "sum", "max", "first", "center"}
        As for :func:`posembed.stitch`.
    fill : scalar
        Value for tokens no window holds.

    Returns
    -------
    ndarray, shape (N, ...)
        Floats keep their dtype; integer sums are int64 or uint64, integer
        means float64.

    Raises
    ------
    TypeError
        ``windows`` without an ``owner`` method; ``values`` NumPy cannot read
        or not numbers; a ``fill`` the result's type cannot hold.
    ValueError
        An unknown ``reduce``; ``values`` whose leading shape is not
        (n, size).
        Also an integer sum (``reduce="sum"``) outside int64's or uint64's
        range.
    """
    if not hasattr(windows, "owner"):
        raise TypeError("windows must be a Windows object")
    if reduce not in ("mean", "sum", "max", "first", "center"):
        raise ValueError(f"unknown reduce {reduce!r}")
    vals = _array(values, "values")
    if vals.shape[:2] != (len(windows), windows.size):
        raise ValueError("values must have leading shape (windows, size)")
    dt = vals.dtype
    compute: Any
    if dt.kind == "f" or dt.name == "bfloat16":
        compute = np.float64 if dt.name == "float64" else np.float32  # any byte order
        result = dt
    elif dt.kind in "biu":
        wide = np.uint64 if dt.kind == "u" else np.int64
        compute = np.float64 if reduce == "mean" else wide
        result = np.dtype(compute) if reduce in ("mean", "sum") else dt
    else:
        raise TypeError("values must be numbers")
    if isinstance(fill, np.ndarray) and fill.ndim == 0:
        fill = fill[()]
    if not isinstance(fill, (int, float, np.integer, np.floating, np.bool_)):
        raise TypeError("fill must be a number that fits the result")
    try:
        with np.errstate(over="raise", invalid="raise"):
            fill_value = compute(fill)
    except (TypeError, ValueError, OverflowError, FloatingPointError):
        raise TypeError("fill must be a number that fits the result") from None
    exact = reduce == "sum" and dt.kind in "biu"  # Python ints: no wrap-around
    work = object if exact else compute
    x = vals.astype(compute).astype(work)
    total = int(windows.doc_offsets[-1])
    acc = np.zeros((total, *vals.shape[2:]), dtype=work)
    count = np.zeros(total, dtype=np.int64)
    own = windows.owner(reduce) if reduce in ("first", "center") else None
    for w in range(len(windows)):
        base = int(windows.doc_offsets[windows.documents[w]] + windows.starts[w])
        for j in range(int(windows.lengths[w])):
            if own is not None and not own[w, j]:
                continue
            t = base + j
            if count[t] == 0 or own is not None:
                acc[t] = x[w, j]
            elif reduce == "max":
                # NaN wins; of two zeros, -0.0 only if both are (their IEEE sum)
                zeros = (acc[t] == 0) & (x[w, j] == 0)
                acc[t] = np.where(zeros, acc[t] + x[w, j], np.maximum(acc[t], x[w, j]))
            else:
                acc[t] = acc[t] + x[w, j]
            count[t] += 1
    for t in range(total):
        if count[t] == 0:
            acc[t] = fill_value
        elif reduce == "mean":
            acc[t] = acc[t] / compute(count[t])
        elif exact:
            info = np.iinfo(compute)
            if any(not info.min <= int(s) <= info.max for s in np.ravel(acc[t])):
                raise ValueError(
                    f"values: the sum over windows of token {t} lies outside {info.dtype}'s range"
                )
    return acc.astype(result)


# ------------------------------------------------------------ embed, dropout, backward

_GAMMA = 0x9E3779B97F4A7C15
_M64 = (1 << 64) - 1


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 arrays (arithmetic wraps mod 2^64)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    mixed: np.ndarray = z ^ (z >> np.uint64(31))
    return mixed


def _seed_value(seed: Any) -> int:
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError("seed must be an integer")
    if not 0 <= int(seed) <= _M64:
        raise ValueError("seed must be in 0..2**64-1")
    return int(seed)


def _gf_mul(a: int, b: int) -> int:
    p = 0
    for _ in range(8):
        if b & 1:
            p ^= a
        a = ((a << 1) ^ (0x1B if a & 0x80 else 0)) & 0xFF
        b >>= 1
    return p


@functools.cache
def _sbox() -> np.ndarray:
    """The AES S-box from its definition: inverse in GF(2^8), then the affine map
    (built on first use, not at import)."""
    box = np.zeros(256, dtype=np.uint8)
    for x in range(256):
        inv = 0
        if x:
            inv, base, e = 1, x, 254
            while e:
                if e & 1:
                    inv = _gf_mul(inv, base)
                base = _gf_mul(base, base)
                e >>= 1
        value = inv
        for s in range(1, 5):
            value ^= ((inv << s) | (inv >> (8 - s))) & 0xFF
        box[x] = value ^ 0x63
    return box


_SHIFT_ROWS = np.array([0, 5, 10, 15, 4, 9, 14, 3, 8, 13, 2, 7, 12, 1, 6, 11])


def _xtime(a: np.ndarray) -> np.ndarray:
    doubled: np.ndarray = (a << np.uint8(1)) ^ np.where(a & 0x80, np.uint8(0x1B), np.uint8(0))
    return doubled


def _aes_round(state: np.ndarray, key: np.ndarray, last: bool) -> np.ndarray:
    """x86 AESENC (AESENCLAST when last) on (N, 16) uint8 states, byte 0 lowest."""
    t = _sbox()[state[:, _SHIFT_ROWS]]  # ShiftRows, then SubBytes
    if not last:  # MixColumns, column by column
        a = t.reshape(-1, 4, 4)
        a0, a1, a2, a3 = a[:, :, 0], a[:, :, 1], a[:, :, 2], a[:, :, 3]
        x = a0 ^ a1 ^ a2 ^ a3
        t = np.stack(
            [
                a0 ^ x ^ _xtime(a0 ^ a1),
                a1 ^ x ^ _xtime(a1 ^ a2),
                a2 ^ x ^ _xtime(a2 ^ a3),
                a3 ^ x ^ _xtime(a3 ^ a0),
            ],
            axis=2,
        ).reshape(-1, 16)
    out: np.ndarray = t ^ key
    return out


def _le_bytes(lo: int, hi: int) -> np.ndarray:
    return np.frombuffer(lo.to_bytes(8, "little") + hi.to_bytes(8, "little"), dtype=np.uint8)


def uniform_bits(seed: int, n: int) -> np.ndarray:
    """The 32 random bits of elements 0..n-1 for ``seed`` (the ARS construction).

    k0 = (mix(seed), mix(seed + G)), round keys k_i = k0 + i * W per 64-bit half,
    block j = AESENCLAST(AESENC^4(j ^ k0, k1..k4), k5) for the 128-bit
    little-endian counter j, element e = little-endian word e % 4 of block e // 4
    (mix: SplitMix64's finaliser; G = W_lo = 0x9E3779B97F4A7C15,
    W_hi = 0xBB67AE8584CAA73B).

    Parameters
    ----------
    seed : int
        The dropout seed, 0..2**64-1.
    n : int
        Number of elements, >= 0.

    Returns
    -------
    ndarray of uint32, shape (n,)
        The bits of each element; :func:`dropout_mask` keeps those at least
        floor(p * 2^32).

    Raises
    ------
    TypeError
        A ``seed`` that is not an integer.
    ValueError
        A ``seed`` outside 0..2**64-1.
    """
    s = _seed_value(seed)
    lo = int(_mix(np.array([s], dtype=np.uint64))[0])
    hi = int(_mix(np.array([(s + _GAMMA) & _M64], dtype=np.uint64))[0])
    keys = [
        _le_bytes((lo + i * _GAMMA) & _M64, (hi + i * 0xBB67AE8584CAA73B) & _M64) for i in range(6)
    ]
    blocks = (n + 3) // 4
    state = np.zeros((blocks, 16), dtype=np.uint8)
    state[:, :8] = np.arange(blocks, dtype="<u8").view(np.uint8).reshape(blocks, 8)
    state ^= keys[0]
    for r in range(1, 6):
        state = _aes_round(state, keys[r], last=r == 5)
    bits: np.ndarray = np.ascontiguousarray(state).view("<u4").reshape(-1)[:n]
    return bits.astype(np.uint32)


def _rate(p: Any, name: str) -> float:
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.number)):
        raise TypeError(f"{name} must be a number")
    if not 0.0 <= float(p) < 1.0:
        raise ValueError(f"{name} must be in [0, 1)")
    return float(p)


def dropout_mask(shape: Any, p: float, seed: int) -> np.ndarray:
    """True where an element of an output of ``shape`` is kept.

    The twin of :func:`posembed.dropout_mask`: an element is kept when its
    :func:`uniform_bits` are at least floor(p * 2^32).

    Parameters
    ----------
    shape : int or sequence of int
        The output's shape, each size >= 0.
    p : float
        Dropout rate in [0, 1).
    seed : int
        The mask's seed, 0..2**64-1.

    Returns
    -------
    ndarray of bool, shape ``shape``
        True where the element is kept.

    Raises
    ------
    TypeError
        A ``shape`` that is not an integer or a sequence of integers, a ``p``
        that is not a number, or a ``seed`` that is None or not an integer.
    ValueError
        A negative size in ``shape``, ``p`` outside [0, 1), or ``seed`` outside
        0..2**64-1.
    """
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    sizes = [_count(k, "shape", 0) for k in dims]
    _check_size("shape", *sizes)
    rate = _rate(p, "p")
    if seed is None:
        raise TypeError("dropout_mask needs a seed")
    n = math.prod(sizes)
    keep: np.ndarray = (uniform_bits(seed, n) >= int(rate * 2**32)).reshape(dims)
    return keep


def _checked_ids(ids: Any, rows: int, name: str) -> np.ndarray:
    p = _int_positions(ids)
    if p.size and ((p < 0) | (p >= rows)).any():
        raise IndexError(f"{name} out of range for a table of {rows} rows")
    return p.astype(np.int64)


def embed(
    token_table: Any,
    token_ids: Any,
    pos_table: Any,
    *,
    positions: Any = None,
    offset: int = 0,
    dropout: float = 0.0,
    seed: int | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``token_table[ids] + pos_table[positions]`` with inverted dropout.

    The twin of :func:`posembed.embed`: the sum in the compute type (float32,
    or float64 for float64 tables), then kept values times 1 / (1 - p) and
    dropped ones 0, rounded once. Unlike :func:`posembed.embed` it draws no
    seed: ``dropout > 0`` needs one.

    Parameters
    ----------
    token_table : array_like, shape (V, d)
        float16, bfloat16, float32 or float64.
    token_ids : array_like of int, shape (T,) or (B, T)
        Token ids in 0..V-1.
    pos_table : array_like, shape (L, d)
        Position table of ``token_table``'s dtype.
    positions : array_like of int, optional
        Positions in 0..L-1 broadcastable to ``token_ids``; default
        ``offset + arange(T)``.
    offset : int
        First position (>= 0) when ``positions`` is not given; 0 otherwise.
    dropout : float
        Rate in [0, 1).
    seed : int, optional
        The mask's seed, 0..2**64-1; required when ``dropout > 0``.
    out : ndarray, optional
        Destination of shape ``token_ids.shape + (d,)`` and the tables' dtype.

    Returns
    -------
    ndarray, shape ``token_ids.shape + (d,)``
        The tables' dtype (``out`` if given).

    Raises
    ------
    IndexError
        A token id outside 0..V-1, a position outside 0..L-1, or
        ``offset + T`` past L.
    TypeError
        A table NumPy cannot read or not of a float dtype above; tables of
        different dtypes; non-integer ids or positions; a ``dropout`` or
        ``offset`` of the wrong type; ``dropout > 0`` with no ``seed`` or a
        non-integer one; ``out`` that is not an ndarray or of another dtype.
    ValueError
        A table that is not 2-D; tables with different ``d``; ids that are not
        1-D or 2-D; ``dropout`` outside [0, 1); a negative ``offset``, or
        ``positions`` with a non-zero ``offset``; positions that do not
        broadcast to the ids' shape; ``seed`` outside 0..2**64-1; ``out`` of
        the wrong shape, read-only, non-contiguous, misaligned or overlapping an input.
    """
    tok = _float_table(token_table)
    pos = _float_table(pos_table)
    if tok.dtype != pos.dtype:
        raise TypeError("token_table and pos_table must share a dtype")
    if tok.shape[1] != pos.shape[1]:
        raise ValueError("token_table and pos_table must share embed_dim")
    # posembed's order: each argument's kind, shape and dtype (out= last),
    # then the ranges of ids and positions; Python ints past 64 bits, empty
    # tables and positions past the table's end are refused as they are met.
    ids = _int_positions(token_ids)
    if ids.dtype == object:
        _checked_ids(ids, tok.shape[0], "token id")
    if ids.ndim not in (1, 2):
        raise ValueError("token_ids must be (T,) or (B, T)")
    if tok.shape[0] == 0:
        _checked_ids(ids, 0, "token id")
    rate = _rate(dropout, "dropout")
    t = ids.shape[-1]
    given = None
    if positions is None:
        start = _count(offset, "offset", 0)
        if ids.size and start + t > pos.shape[0]:
            raise IndexError("positions go past the position table")
    else:
        if offset != 0:
            raise ValueError("give positions or offset, not both")
        given = _int_positions(positions)
        if given.dtype == object or pos.shape[0] == 0 or ids.size == 0:
            _checked_ids(given, pos.shape[0], "position")
        try:
            np.broadcast_to(given, ids.shape)
        except ValueError:
            raise ValueError("positions do not broadcast to token_ids' shape") from None
    if rate > 0:
        if seed is None:
            raise TypeError("the reference needs an explicit seed")
        _seed_value(seed)
    _check_out(
        out,
        tok.dtype,
        (*ids.shape, tok.shape[1]),
        tok,
        pos,
        token_table,
        pos_table,
        token_ids,
        positions,
    )
    ids = _checked_ids(ids, tok.shape[0], "token id")
    if given is None:
        if ids.size:
            where = np.broadcast_to(start + np.arange(t), ids.shape)
        else:  # no rows taken: the offset need not fit int64
            where = np.zeros(ids.shape, np.int64)
    else:
        where = np.broadcast_to(_checked_ids(given, pos.shape[0], "position"), ids.shape)
    compute = _compute_dtype(tok)
    total = tok[ids].astype(compute) + pos[where].astype(compute)
    if rate > 0:
        keep = dropout_mask(total.shape, rate, _seed_value(seed))
        total = np.where(keep, total * compute(1.0 / (1.0 - rate)), compute(0))
    return _into(
        out, total.astype(tok.dtype), tok, pos, token_table, pos_table, token_ids, positions
    )


def gather_backward(
    grad: Any, positions: Any, length: int, *, out: np.ndarray | None = None
) -> np.ndarray:
    """``numpy.add.at(zeros((length, d)), positions, grad)``.

    The twin of :func:`posembed.gather_backward`; float16 and bfloat16 sum in
    float32.

    Parameters
    ----------
    grad : array_like, shape ``positions.shape + (d,)``
        float16, bfloat16, float32 or float64.
    positions : int or array_like of int, any shape
        Positions in 0..length-1.
    length : int
        Rows of the table, >= 0.
    out : ndarray, optional
        Destination of shape (length, d) and ``grad``'s dtype.

    Returns
    -------
    ndarray, shape (length, d)
        ``grad``'s dtype in native byte order (``out`` if given).

    Raises
    ------
    IndexError
        A position outside 0..length-1.
    TypeError
        ``grad`` NumPy cannot read or not of a float dtype above, a ``length``
        that is not an integer, non-integer positions, or ``out`` that is not
        an ndarray or of another dtype.
    ValueError
        A negative ``length``, ``grad`` not of shape ``positions.shape + (d,)``,
        or ``out`` of the wrong shape, read-only, non-contiguous, misaligned or
        overlapping an input.
    """
    g = _array(grad, "grad")
    if g.dtype.name not in ("float16", "bfloat16", "float32", "float64"):
        raise TypeError("grad must have a float dtype")
    rows = _count(length, "length", 0)
    p = _int_positions(positions)
    if p.dtype == object:  # Python ints past 64 bits: refused as read, as posembed does
        _checked_ids(p, rows, "position")
    if g.ndim != p.ndim + 1 or g.shape[:-1] != p.shape:
        raise ValueError("grad must have shape positions.shape + (d,)")
    _check_out(out, g.dtype.newbyteorder("="), (rows, g.shape[-1]), g, grad, positions)
    p = _checked_ids(p, rows, "position")
    compute = np.float64 if g.dtype.name == "float64" else np.float32  # any byte order
    total = np.zeros((rows, g.shape[-1]), dtype=compute)
    np.add.at(total, p.reshape(-1), g.reshape(p.size, g.shape[-1]).astype(compute))
    return _into(out, total.astype(g.dtype.newbyteorder("=")), g, positions)


class LearnedPositionEmbedding:
    """Twin of posembed.LearnedPositionEmbedding: the same table for the same seed."""

    def __init__(
        self,
        max_seq_len: int,
        embed_dim: int,
        *,
        init_std: float | str = 0.02,
        seed: int | np.random.Generator | None = None,
        dtype: Any = np.float32,
        dropout: float = 0.1,
    ) -> None:
        self.dropout = _rate(dropout, "dropout")
        for name, n in (("max_seq_len", max_seq_len), ("embed_dim", embed_dim)):
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
                raise TypeError(f"{name} must be an integer")
            if n <= 0:
                raise ValueError(f"{name} must be positive")
        if init_std == "scaled":
            std = 1.0 / math.sqrt(embed_dim)
        elif isinstance(init_std, str):
            raise ValueError("init_std must be a number or 'scaled'")
        elif isinstance(init_std, bool) or not isinstance(init_std, (int, float, np.number)):
            raise TypeError("init_std must be a number or 'scaled'")
        elif not math.isfinite(init_std) or init_std < 0:
            raise ValueError("init_std must be finite and >= 0")
        else:
            std = float(init_std)
        if isinstance(dtype, str) and dtype == "bfloat16":
            import ml_dtypes

            dtype = ml_dtypes.bfloat16
        if dtype is None:
            raise TypeError("dtype must be a float dtype")
        dt = np.dtype(dtype)
        if dt.name not in ("float16", "bfloat16", "float32", "float64"):
            raise TypeError("dtype must be a float dtype")
        _check_seed(seed)
        draws = np.random.default_rng(seed).standard_normal((int(max_seq_len), int(embed_dim)))
        with np.errstate(over="ignore"):
            self.embeddings = (draws * std).astype(dt)
        if not np.isfinite(self.embeddings.astype(np.float64)).all():
            raise ValueError("init_std is too large for the dtype")
        self.max_seq_len = int(max_seq_len)
        self.embed_dim = int(embed_dim)

    def __call__(
        self, positions: Any, *, mode: str = "raise", out: np.ndarray | None = None
    ) -> np.ndarray:
        return gather(self.embeddings, positions, mode=mode, out=out)

    def embed(
        self,
        token_table: Any,
        token_ids: Any,
        *,
        training: bool = False,
        seed: int | None = None,
        offset: int = 0,
    ) -> np.ndarray:
        if not isinstance(training, (bool, np.bool_)):
            raise TypeError("training must be True or False")
        rate = self.dropout if training else 0.0
        return embed(
            token_table, token_ids, self.embeddings, offset=offset, dropout=rate, seed=seed
        )


def resize_checkpoint(
    src: Any,
    dst: Any,
    key: str,
    length: int | None = None,
    *,
    init: str | None = None,
    align: str | None = None,
    prefix: int = 0,
    seed: int | None = None,
    grid: tuple[int, int] | None = None,
    new_grid: tuple[int, int] | None = None,
    method: str | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Twin of :func:`posembed.resize_checkpoint`: the whole file read into
    memory, the table resized by the twins above, the whole file written.

    Parameters
    ----------
    src, dst : path
        The safetensors file to read and the one to write.
    key : str
        The table's name; shape (rows, d) or (1, ..., 1, rows, d).
    length : int, optional
        Position rows after the ``prefix`` rows (or ``new_grid``).
    init, align, prefix, seed, grid, new_grid, method, overwrite
        As :func:`posembed.resize_checkpoint`.

    Returns
    -------
    dict
        ``old_shape`` and ``new_shape`` of the table.

    Raises
    ------
    FileExistsError
        ``dst`` exists and ``overwrite`` is false.
    TypeError
        A table dtype other than F16, BF16, F32, F64; an ``overwrite`` that
        is not a bool.
    ValueError
        ``key`` is not in the file; a shape, prefix, length or grid the resize
        cannot use.
    """
    import json
    import os

    if not isinstance(overwrite, (bool, np.bool_)):
        raise TypeError("overwrite must be True or False")
    if os.path.exists(dst) and not overwrite:
        raise FileExistsError(f"{dst} exists")
    with open(src, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + n])
    data = blob[8 + n :]
    if key not in header or key == "__metadata__":
        raise ValueError(f"no tensor named {key!r} in the checkpoint")
    entry = header[key]
    dtypes = {"F16": np.dtype("<f2"), "F32": np.dtype("<f4"), "F64": np.dtype("<f8")}
    if entry["dtype"] == "BF16":
        import ml_dtypes

        dt = np.dtype(ml_dtypes.bfloat16)
    elif entry["dtype"] in dtypes:
        dt = dtypes[entry["dtype"]]
    else:
        raise TypeError(f"unsupported dtype {entry['dtype']}")
    shape = tuple(entry["shape"])
    if len(shape) < 2 or any(s != 1 for s in shape[:-2]):
        raise ValueError(f"shape {shape} is not a table")
    rows, d = shape[-2:]
    if not 0 <= prefix < rows:
        raise ValueError("prefix must leave position rows")
    begin, end = entry["data_offsets"]
    table = np.frombuffer(data[begin:end], dtype=dt).reshape(rows, d)
    positions = table[prefix:]
    if new_grid is not None:
        if grid is None:
            side = math.isqrt(rows - prefix)
            grid = (side, side)
        new = resample_grid(
            positions, grid, new_grid, method=method or "bicubic", align=align or "half_pixel"
        )
    elif init is None:
        if length is None:
            raise ValueError("give length or new_grid")
        new = interpolate(positions, length, align=align or "scale")
    else:
        if length is None:
            raise ValueError("give length or new_grid")
        new = extend(positions, length, init=init, align=align, seed=seed)
    resized = np.concatenate([table[:prefix], new]).astype(dt)
    new_shape = (*shape[:-2], *resized.shape)
    pieces = []
    at = 0
    names = sorted(
        (h["data_offsets"][0], h["data_offsets"][1], name)
        for name, h in header.items()
        if name != "__metadata__"
    )
    for b, e, name in names:
        raw = resized.tobytes() if name == key else data[b:e]
        header[name] = dict(header[name], data_offsets=[at, at + len(raw)])
        pieces.append(raw)
        at += len(raw)
    header[key]["shape"] = list(new_shape)
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    with open(dst, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(pieces))
    return {"old_shape": shape, "new_shape": new_shape}

"""Twins of interpolate (a table stretched to a new length) and lerp (rows at
fractional positions): linear blends of neighbouring rows."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from posembed.reference._antialias import _antialias_taps, _sum_taps
from posembed.reference._common import (
    _array,
    _check_out,
    _check_size,
    _compute_dtype,
    _count,
    _float_table,
    _into,
)


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


def interpolate(
    table: Any,
    length: int,
    *,
    align: str = "scale",
    antialias: bool = False,
    out: np.ndarray | None = None,
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
    antialias : bool
        PyTorch's antialiased bilinear filter (``"half_pixel"`` only): every
        tap summed left to right, weights from float64 rounded once.
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
        that is not an integer, ``antialias`` that is not a bool, or ``out``
        that is not an ndarray or of another dtype.
    ValueError
        A table that is not 2-D or has no rows, ``length`` < 1, an unknown
        ``align``, ``antialias=True`` with another ``align`` than
        ``"half_pixel"``, or ``out`` of the wrong shape, read-only, non-contiguous,
        misaligned or overlapping an input.
    """
    t = _float_table(table)
    if t.shape[0] == 0:
        raise ValueError("table must have at least one row")
    n = _count(length, "length", 1)
    if align not in ("scale", "half_pixel", "corners"):
        raise ValueError(f"align must be 'scale', 'half_pixel' or 'corners'; got {align!r}")
    if not isinstance(antialias, (bool, np.bool_)):
        raise TypeError(f"antialias must be a bool; got {antialias!r}")
    if antialias and align != "half_pixel":
        raise ValueError(f"antialias needs align 'half_pixel'; got {align!r}")
    _check_size("length", 4, n, t.shape[0])
    _check_size("the result", n, t.shape[1], t.itemsize)
    if antialias:
        return _into(out, _antialiased(t, n), t, table)
    taps = _linear_taps(t.shape[0], n, align)
    lo = np.array([k[0] for k in taps], dtype=np.int64)
    hi = np.array([k[1] for k in taps], dtype=np.int64)
    w = np.array([k[2] for k in taps], dtype=np.float64)
    return _into(out, _blend(t, lo, hi, w), t, table)


def _antialiased(table: np.ndarray, length: int) -> np.ndarray:
    """Antialiased bilinear resampling of the rows; the same length is a copy."""
    if length == table.shape[0]:
        return table.copy()
    idx, wts = _antialias_taps(table.shape[0], length, "bilinear")
    out = _sum_taps(table.astype(_compute_dtype(table)), idx, wts, 0)
    return out.astype(table.dtype)


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
    """A Python number as a float; ints too large for one are infinite."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf

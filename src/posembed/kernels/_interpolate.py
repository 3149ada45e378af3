"""Rows of a position table at new positions, linear between neighbours: interpolate, lerp."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from posembed import _core
from posembed.kernels import _validate as v


def interpolate(
    table: Any,
    length: int,
    *,
    align: str = "scale",
    antialias: bool = False,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Stretch or shrink a position table to ``length`` rows by linear interpolation.

    Output row i is ``(1 - w) * table[lo] + w * table[hi]`` at the source
    position s of row i; a row whose weight on ``hi`` is 0 is a bit-exact copy
    of ``table[lo]`` (so NaN or inf in a neighbour never leaks in).

    Parameters
    ----------
    table : array_like, shape (L, d)
        float16, bfloat16 (ml_dtypes), float32 or float64, L >= 1; any row strides.
    length : int
        T >= 1 rows in the result: larger grows, smaller shrinks, equal copies.
    align : {"scale", "half_pixel", "corners"}
        ``"scale"`` (position interpolation): ``s = i * L / T``, lo =
        floor(s), hi = min(lo + 1, L - 1); for T = k * L every k-th row is an
        exact copy. ``"half_pixel"``: ``s = max((i + 0.5) * L / T - 0.5, 0)``, as
        PyTorch ``F.interpolate(mode="linear", align_corners=False)``.
        ``"corners"``: ``s = i * (L - 1) / (T - 1)``, as ``align_corners=True``;
        the first and last rows are the table's.
    antialias : bool
        With ``align="half_pixel"`` only: PyTorch's antialiased bilinear
        filter, ``F.interpolate`` of the (1, d, 1, L) image with
        ``mode="bilinear", antialias=True, align_corners=False``. When
        shrinking, the triangle is stretched by L / T so that every row
        contributes (no aliasing); its weights are normalised to sum to 1
        and every tap is summed. When growing, it gives the plain
        ``"half_pixel"`` result.
    out : ndarray, optional
        Destination (T, d) of the table's dtype, writeable, C-contiguous and
        not overlapping the table; untouched if the call fails.

    Returns
    -------
    ndarray, shape (T, d)
        The table's dtype (``out`` if given). Source positions and weights are
        exact rationals computed in float64; the blend runs in float32 for
        float16 / bfloat16 / float32 tables and float64 for float64 tables.

    Raises
    ------
    TypeError
        A table NumPy cannot read as an array or not of a float dtype above, a
        ``length`` that is not an integer, ``antialias`` that is not a bool,
        or ``out`` that is not an ndarray or of another dtype.
    ValueError
        A table that is not 2-D or has no rows, ``length`` < 1, an unknown
        ``align``, ``antialias=True`` with an ``align`` other than
        ``"half_pixel"``, a result too large to index (2^62), or ``out`` of the wrong
        shape, read-only, misaligned, non-contiguous or overlapping the table.
    """
    t, kind = v.float_table(table)
    v.check_has_rows(t)
    n = v.positive_int(length, "length")
    a = v.ALIGNS[v.choice(align, "align", v.ALIGNS)]
    aa = v.antialias_flag(antialias, align)
    v.check_sizes("length", 4, n, t.shape[0])
    v.check_sizes("the result", n, t.shape[1], t.itemsize)
    if out is not None:
        # against the caller's table too: t may be a converted copy
        out = v.check_out(out, (n, t.shape[1]), t.dtype, table=(t, table))
    return _core.interpolate(t, kind, n, a, 0, out, antialias=aa)


def lerp(table: Any, positions: Any, *, out: np.ndarray | None = None) -> np.ndarray:
    """Rows at fractional positions, linear between floor and ceil.

    A whole-number position returns that row exactly. This is an interpolated
    lookup without materialising a stretched table: ``lerp(table, i * L / T)``
    is row i of ``interpolate(table, T)``.

    Parameters
    ----------
    table : array_like, shape (L, d)
        float16, bfloat16 (ml_dtypes), float32 or float64; any row strides.
    positions : float or array_like of float, any shape
        Real numbers (float or integer dtype), every one finite and in
        ``[0, L - 1]``; computed on as float64.
    out : ndarray, optional
        Destination of shape ``positions.shape + (d,)`` and the table's dtype,
        as for :func:`interpolate`; untouched if the call fails.

    Returns
    -------
    ndarray, shape ``positions.shape + (d,)``
        The table's dtype (``out`` if given); blended in float32, or float64
        for float64 tables.

    Raises
    ------
    TypeError
        A table NumPy cannot read as an array or not of a float dtype above,
        positions that are not real numbers (bool, complex or object dtype), or
        ``out`` that is not an ndarray or of another dtype.
    ValueError
        A table that is not 2-D; the first position that is NaN, infinite or
        out of range, named with its index (nothing is computed or written to
        ``out``); ``out`` of the wrong shape, read-only, misaligned,
        non-contiguous or overlapping an input.
    """
    t, kind = v.float_table(table)
    p = positions if type(positions) is np.ndarray else v.as_array(positions, "positions")
    if p.dtype.kind == "O" and not isinstance(positions, np.ndarray):
        p = _real_objects(p)  # Python ints past 64 bits: real, and out of range (below)
    if p.dtype.kind not in "fiu":
        raise TypeError(f"positions must be real numbers; got dtype {p.dtype}")
    if p.dtype != np.float64 or not (p.flags.c_contiguous and p.flags.aligned):
        p = v.kernel_array(p, np.float64)
    if out is not None:
        out = v.check_out(
            out, (*p.shape, t.shape[1]), t.dtype, table=(t, table), positions=(p, positions)
        )
    return _core.lerp(t, kind, p, out)


def _real_objects(positions: np.ndarray) -> np.ndarray:
    """An object array of Python numbers as float64; anything else unchanged."""
    real = all(
        isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
        for value in positions.flat
    )
    if not real:
        return positions
    values = [_float(value) for value in positions.flat]
    return np.array(values, np.float64).reshape(positions.shape)


def _float(value: Any) -> float:
    try:
        return float(value)
    except OverflowError:  # an int past float64's range: out of range all the same
        return math.inf if value > 0 else -math.inf

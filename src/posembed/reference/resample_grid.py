"""Twin of resample_grid: a 2-D grid of position rows resampled separably."""

from __future__ import annotations

from typing import Any

import numpy as np

from posembed.reference._antialias import _antialias_taps, _sum_taps
from posembed.reference._common import _check_size, _compute_dtype, _count, _float_table
from posembed.reference.interpolate import _source


def _cubic_weights(t: float) -> list[float]:
    """Keys' cubic convolution weights (A = -0.75) of the four taps around t."""
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
    """Per output index along one axis: the source indices and their weights."""
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
    antialias: bool = False,
) -> np.ndarray:
    """Separable 2-D resampling of the (H, W) grid after ``prefix`` rows.

    The twin of :func:`posembed.resample_grid`: along x, then along y, summing
    the taps left to right in float32 (float64 for float64 tables), the
    weights computed in float64 and rounded once to that type.

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
    antialias : bool
        PyTorch's antialiased filters (``"half_pixel"`` only); an axis that
        keeps its size is left alone.

    Returns
    -------
    ndarray, shape (prefix + H' * W', d)
        The table's dtype.

    Raises
    ------
    TypeError
        A table NumPy cannot read or not of a float dtype above; ``grid`` or
        ``new_grid`` that is not a pair or holds a non-integer; a ``prefix``
        that is not an integer; ``antialias`` that is not a bool.
    ValueError
        A table that is not 2-D; a grid side < 1; a negative ``prefix``; table
        rows other than ``prefix + H * W``; an unknown ``method`` or ``align``;
        ``antialias=True`` with ``align="corners"``.
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
    if not isinstance(antialias, (bool, np.bool_)):
        raise TypeError(f"antialias must be a bool; got {antialias!r}")
    if antialias and align != "half_pixel":
        raise ValueError("antialias needs align 'half_pixel'")
    if antialias:
        if (h, w) == (h2, w2):
            return t.copy()
        ix, wx = _antialias_taps(w, w2, method)
        iy, wy = _antialias_taps(h, h2, method)
    else:
        ix, wx = _axis_taps(w, w2, method, align)
        iy, wy = _axis_taps(h, h2, method, align)
    c = _compute_dtype(t)
    g = t[p:].reshape(h, w, -1).astype(c)
    # along x, then along y (an antialiased axis that keeps its size is skipped)
    tmp = g if antialias and w == w2 else _sum_taps(g, ix, wx, 1)
    out = tmp if antialias and h == h2 else _sum_taps(tmp, iy, wy, 0)
    grid_rows = out.reshape(h2 * w2, -1).astype(t.dtype)
    return np.concatenate([t[:p], grid_rows]).astype(t.dtype)

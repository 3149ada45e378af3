"""Twin of extend: a table grown to a new length, its own rows kept."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from posembed.reference._common import _check_seed, _check_size, _count, _float_table
from posembed.reference.interpolate import interpolate


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

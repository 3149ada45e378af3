"""extend: a position table grown to more rows for fine-tuning on longer sequences."""

from __future__ import annotations

from typing import Any

import numpy as np

from posembed import _core
from posembed.kernels import _validate as v

INITS = ("interpolate", "tile", "edge", "random", "zeros")
RAISE = v.INDEX_MODES["raise"]  # the rows extend copies are in range by construction


def extend(
    table: Any,
    length: int,
    *,
    init: str = "interpolate",
    std: float | None = None,
    seed: int | np.random.Generator | None = None,
    align: str | None = None,
) -> np.ndarray:
    """Grow a position table to ``length`` rows for fine-tuning on longer sequences.

    The first L rows are bit-identical to ``table``; rows L..T-1 are new,
    initialised by ``init``.

    Parameters
    ----------
    table : array_like, shape (L, d)
        float16, bfloat16 (ml_dtypes), float32 or float64, L >= 1; any row strides.
    length : int
        T >= L rows in the result (use :func:`interpolate` to shrink).
    init : {"interpolate", "tile", "edge", "random", "zeros"}
        ``"interpolate"``: row i is row i of ``interpolate(table, T,
        align=align)``, i.e. the trained embedding at the same relative
        position i / T. ``"tile"``: ``table[i % L]`` (Longformer's copy of the
        trained rows). ``"edge"``: ``table[L - 1]`` (repeat the last row).
        ``"random"``: N(0, std^2) from ``numpy.random.default_rng(seed)``,
        drawn in float64 and rounded. ``"zeros"``.
    std : float, optional
        Standard deviation (finite, >= 0) of ``init="random"`` only; default
        the standard deviation of all the table's values (``numpy.std`` of
        the table as native float64 in C order, so the same for any layout
        or byte order).
    seed : int or numpy.random.Generator, optional
        Seed of ``init="random"`` only, anything ``numpy.random.default_rng``
        accepts but a bool; default a fresh one.
    align : {"scale", "half_pixel", "corners"}, optional
        Convention of ``init="interpolate"`` only (see :func:`interpolate`);
        default ``"scale"``.

    Returns
    -------
    ndarray, shape (T, d)
        A new C-contiguous array of the table's dtype.

    Raises
    ------
    TypeError
        A table NumPy cannot read as an array or not of a float dtype above, a
        ``length`` that is not an integer, a ``std`` that is not a number, or a
        ``seed`` that is a bool or that ``numpy.random.default_rng`` refuses as
        a TypeError.
    ValueError
        A table that is not 2-D or has no rows; ``length`` < L; an unknown
        ``init`` or ``align``; ``std`` or ``seed`` with an ``init`` other than
        ``"random"``, or ``align`` with one other than ``"interpolate"`` (rather
        than being ignored); a negative or non-finite ``std``; ``init="random"``
        without ``std`` on a table holding inf or NaN; a result too large to
        index (2^62); a negative ``seed`` (from ``numpy.random.default_rng``).
    """
    t, kind = v.float_table(table)
    v.check_has_rows(t)
    rows, d = t.shape
    n = v.positive_int(length, "length")
    if n < rows:
        raise ValueError(
            f"length must be at least the table's {rows} rows (extend only grows; "
            f"interpolate shrinks); got {n}"
        )
    init = v.choice(init, "init", INITS)
    v.check_sizes("length", 4, n, rows)
    v.check_sizes("the result", n, d, t.itemsize)
    if init != "random" and (std is not None or seed is not None):
        raise ValueError(f"std and seed apply to init='random' only; got init={init!r}")
    if init != "interpolate" and align is not None:
        raise ValueError(f"align applies to init='interpolate' only; got init={init!r}")
    a = v.ALIGNS[v.choice("scale" if align is None else align, "align", v.ALIGNS)]
    if std is not None:
        std = _std_value(std)
    gen = v.rng(seed) if init == "random" else None  # a bad seed fails before any work
    if init == "random" and std is None:
        if t.size == 0:
            std = 0.0  # rows of no values: nothing to measure, nothing to draw
        else:
            with np.errstate(invalid="ignore", over="ignore"):  # reported just below
                # in float64, C order, native: the same sum whatever the layout
                std = float(np.std(np.ascontiguousarray(t, dtype=np.float64)))
            if not np.isfinite(std):
                raise ValueError(
                    "the table's standard deviation is not finite (it holds inf or NaN); "
                    "pass std= for init='random'"
                )

    out = np.empty((n, d), t.dtype)
    _core.gather(t, np.arange(rows), RAISE, out[:rows], out_just_allocated=True)
    new = out[rows:]
    if n == rows:
        return out
    if init == "interpolate":
        _core.interpolate(t, kind, n, a, rows, new, out_just_allocated=True)
    elif init == "tile":
        _core.gather(t, np.arange(rows, n) % rows, RAISE, new, out_just_allocated=True)
    elif init == "edge":
        _core.gather(t, np.full(n - rows, rows - 1), RAISE, new, out_just_allocated=True)
    elif init == "zeros":
        new.fill(0)
    else:
        assert gen is not None
        assert std is not None
        draws = gen.standard_normal((n - rows, d))
        new[...] = (draws * std).astype(t.dtype)
    return out


def _std_value(std: Any) -> float:
    if isinstance(std, (bool, np.bool_)) or not isinstance(std, (int, float, np.number)):
        raise TypeError(f"std must be a number >= 0; got {type(std).__name__} {std!r}")
    s = float(std)
    if not np.isfinite(s) or s < 0:
        raise ValueError(f"std must be a finite number >= 0; got {std!r}")
    return s

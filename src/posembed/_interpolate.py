"""Going past max_seq_len: interpolate, lerp, extend, and the similarity analysis."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from posembed import _core
from posembed import _validate as v

INITS = ("interpolate", "tile", "edge", "random", "zeros")
RAISE = v.INDEX_MODES["raise"]  # the rows extend copies are in range by construction


def _non_empty(t: np.ndarray) -> None:
    if t.shape[0] == 0:
        raise ValueError("table must have at least one row; got shape (0, d)")


def interpolate(
    table: Any, length: int, *, align: str = "scale", out: np.ndarray | None = None
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
        ``"scale"`` (the seed's position interpolation): ``s = i * L / T``, lo =
        floor(s), hi = min(lo + 1, L - 1); for T = k * L every k-th row is an
        exact copy. ``"half_pixel"``: ``s = max((i + 0.5) * L / T - 0.5, 0)``, as
        PyTorch ``F.interpolate(mode="linear", align_corners=False)``.
        ``"corners"``: ``s = i * (L - 1) / (T - 1)``, as ``align_corners=True``;
        the first and last rows are the table's.
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
        ``length`` that is not an integer, or ``out`` that is not an ndarray or
        of another dtype.
    ValueError
        A table that is not 2-D or has no rows, ``length`` < 1, an unknown
        ``align``, a result too large to index (2^62), or ``out`` of the wrong
        shape, read-only, misaligned, non-contiguous or overlapping the table.
    """
    t, kind = v.float_table(table)
    _non_empty(t)
    n = v.positive_int(length, "length")
    a = v.ALIGNS[v.choice(align, "align", v.ALIGNS)]
    v.check_sizes("length", 4, n, t.shape[0])
    v.check_sizes("the result", n, t.shape[1], t.itemsize)
    if out is not None:
        # against the caller's table too: t may be a converted copy
        out = v.check_out(out, (n, t.shape[1]), t.dtype, table=(t, table))
    return _core.interpolate(t, kind, n, a, 0, out)


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


def _real_objects(p: np.ndarray) -> np.ndarray:
    """An object array of Python numbers as float64; anything else unchanged."""
    real = all(
        isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)
        for x in p.flat
    )
    if not real:
        return p
    return np.array([_float(x) for x in p.flat], np.float64).reshape(p.shape)


def _float(x: Any) -> float:
    try:
        return float(x)
    except OverflowError:  # an int past float64's range: out of range all the same
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
    _non_empty(t)
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


def similarity(table: Any) -> np.ndarray:
    """Cosine similarity of every pair of rows.

    A row of zeros has similarity 0 with every row (itself included). Rows are
    first divided by their largest magnitude, so tiny or huge rows neither
    underflow nor overflow. The Gram product runs in NumPy's BLAS, which is
    faster than anything hand-written here would be.

    Parameters
    ----------
    table : array_like, shape (L, d)
        float16, bfloat16 (ml_dtypes), float32 or float64.

    Returns
    -------
    ndarray, shape (L, L)
        float64 for float64 tables, float32 for the others.

    Raises
    ------
    TypeError
        A table NumPy cannot read as an array or not of a float dtype above.
    ValueError
        A table that is not 2-D.
    """
    t, _ = v.float_table(table)
    x: np.ndarray[Any, np.dtype[np.floating[Any]]] = t.astype(
        np.float64 if t.dtype == np.float64 else np.float32
    )
    peak = np.abs(x).max(axis=1, keepdims=True) if x.size else np.ones((x.shape[0], 1), x.dtype)
    x = x / np.where(peak == 0, 1, peak).astype(x.dtype)
    norms = np.sqrt(np.einsum("ij,ij->i", x, x))
    x = x / np.where(norms == 0, 1, norms)[:, None].astype(x.dtype)
    result: np.ndarray = x @ x.T
    return result

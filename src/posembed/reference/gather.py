"""Twins of gather (rows at integer positions) and its adjoint, gather_backward."""

from __future__ import annotations

from typing import Any

import numpy as np

from posembed.reference._common import (
    FLOAT_NAMES,
    _array,
    _check_out,
    _checked_ids,
    _count,
    _int_positions,
    _into,
)


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
    t = _array(table, "table")
    if t.ndim != 2:
        raise ValueError(f"table must be 2-D; got shape {t.shape}")
    if t.dtype.hasobject or t.dtype.itemsize == 0:
        raise TypeError("table must have a fixed-size dtype")
    if mode not in ("raise", "clip", "wrap"):
        raise ValueError(f"mode must be 'raise', 'clip' or 'wrap'; got {mode!r}")
    p = _int_positions(positions)
    rows = t.shape[0]
    if mode == "raise" and p.dtype == object:  # Python ints past 64 bits: refused as read
        _checked_ids(p, rows, "position")
    _check_out(out, t.dtype, (*p.shape, t.shape[1]), t, positions)

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
    result: np.ndarray = t[np.asarray(rows_taken).astype(np.int64)]
    return _into(out, result, t, positions)


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
    if g.dtype.name not in FLOAT_NAMES:
        raise TypeError("grad must have a float dtype")
    rows = _count(length, "length", 0)
    p = _int_positions(positions)
    if p.dtype == object:  # Python ints past 64 bits: refused as read, as posembed does
        _checked_ids(p, rows, "position")
    if g.ndim != p.ndim + 1 or g.shape[:-1] != p.shape:
        raise ValueError("grad must have shape positions.shape + (d,)")
    native = g.dtype.newbyteorder("=")
    _check_out(out, native, (rows, g.shape[-1]), g, grad, positions)
    p = _checked_ids(p, rows, "position")
    compute = np.float64 if g.dtype.name == "float64" else np.float32  # any byte order
    total = np.zeros((rows, g.shape[-1]), dtype=compute)
    np.add.at(total, p.reshape(-1), g.reshape(p.size, g.shape[-1]).astype(compute))
    return _into(out, total.astype(native), g, positions)

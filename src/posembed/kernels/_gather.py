"""gather: rows of a table by position; gather_backward: its gradient."""

from __future__ import annotations

from typing import Any

import numpy as np

from posembed import _core
from posembed.kernels import _validate as v


def gather(
    table: Any,
    positions: Any,
    *,
    mode: str = "raise",
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Rows of ``table`` at ``positions``: ``out[..., :] = table[positions[...], :]``.

    Parameters
    ----------
    table : array_like, shape (L, d)
        Any fixed-size dtype (floats, integers, bfloat16, ...); any strides.
        Rows are copied as bytes, so the result is bit-identical to the table.
    positions : int or array_like of int, any shape
        int8..int64 or uint8..uint64 (Python ints of any size too).
    mode : {"raise", "clip", "wrap"}
        ``"raise"``: a position < 0 or >= L raises IndexError (negative
        positions do not wrap). ``"clip"`` and ``"wrap"`` map every position
        into 0..L-1 as :func:`numpy.take` does.
    out : ndarray, optional
        Destination of shape ``positions.shape + (d,)`` and ``table``'s dtype,
        writeable, C-contiguous and not overlapping ``table`` or ``positions``.
        On any error it is left untouched.

    Returns
    -------
    ndarray, shape ``positions.shape + (d,)``
        ``table``'s dtype (``out`` if given).

    Raises
    ------
    IndexError
        In mode "raise", naming the first out-of-range position, its index and
        the valid range; in every mode when positions are given for an empty table.
    TypeError
        ``table`` or ``positions`` that NumPy cannot read as an array (or a
        masked array), non-integer positions (floats, bools), an object-dtype
        table, or ``out`` that is not an ndarray or of another dtype.
    ValueError
        A table that is not 2-D, an unknown mode, or ``out`` of the wrong
        shape, read-only, misaligned, non-contiguous or overlapping an input.
    """
    if type(mode) is str and mode == "raise":
        # the common calls, their few checks compiled (None: anything else,
        # which the full checks below take and report)
        plain: np.ndarray | None = _core.gather_plain(table, positions, out)
        if plain is not None:
            return plain
    t = v.as_table(table)
    code = v.index_mode(mode)
    p = v.as_positions(positions, t.shape[0], mode)
    if out is not None:
        # against the caller's objects too: t and p may be converted copies
        out = v.check_out(
            out, (*p.shape, t.shape[1]), t.dtype, table=(t, table), positions=(p, positions)
        )
    return _core.gather(t, p, code, out)


def gather_backward(
    grad: Any, positions: Any, length: int, *, out: np.ndarray | None = None
) -> np.ndarray:
    """The gradient of :func:`gather` with respect to its table.

    Row r of the result is the sum of the ``grad`` rows whose position is r
    (``numpy.add.at(zeros, positions, grad)``), zero for rows no position
    names. Each row is summed in the order its positions appear, by one
    thread: the same bits for any thread count, no atomics. With a fresh
    result only the rows that are named are written (the rest are the zero
    pages of ``numpy.zeros``).

    Parameters
    ----------
    grad : array_like, shape ``positions.shape + (d,)``
        float16, bfloat16, float32 or float64; float16 and bfloat16 sum in
        float32 and round once.
    positions : int or array_like of int, any shape
        Integer positions in 0..length-1 (position or token ids).
    length : int
        Rows of the table, >= 0 (max_seq_len, or the vocabulary size).
    out : ndarray, optional
        Destination of shape (length, d) and ``grad``'s dtype, writeable,
        C-contiguous and not overlapping ``grad`` or ``positions``; it is
        overwritten (rows no position names become zero).

    Returns
    -------
    ndarray, shape (length, d)
        ``grad``'s dtype (``out`` if given).

    Raises
    ------
    IndexError
        A position outside 0..length-1, named with its index and the valid
        range; nothing is written in that case.
    TypeError
        ``grad`` or ``positions`` that NumPy cannot read as an array, a
        ``grad`` that is not float16, bfloat16, float32 or float64, non-integer
        positions, a ``length`` that is not an integer, or ``out`` that is not
        an ndarray or of another dtype.
    ValueError
        A negative ``length``, ``grad`` not of shape ``positions.shape + (d,)``,
        a result too large to index (2^62 bytes), or ``out`` of the wrong shape,
        read-only, misaligned, non-contiguous or overlapping an input.
    """
    if out is None and type(length) is int and length >= 0 and v.plain_ints(positions):
        # the common call, checked cheaply (anything else: the full checks)
        kind = v.plain_float_rows(grad)
        if kind is not None and grad.shape[:-1] == positions.shape:
            d = grad.shape[-1]
            if length * max(d, 1) * grad.itemsize < v.MAX_PRODUCT:
                result: np.ndarray = _core.gather_backward(
                    grad.reshape(positions.size, d), kind, positions, length, None
                )
                return result
    g = v.as_array(grad, "grad")
    kind = v.float_kind(g.dtype)
    if kind is None:
        raise TypeError(
            f"grad must have a float dtype (float16, bfloat16, float32, float64); got {g.dtype}"
        )
    rows = v.non_negative_int(length, "length")
    # the result, (length, d): checked before positions are checked against it in int64
    v.check_sizes("length", rows, g.shape[-1] if g.ndim else 1, g.itemsize)
    p = v.as_positions(positions, rows, "raise", "positions", "position", f"length {rows}")
    if g.ndim != p.ndim + 1 or g.shape[:-1] != p.shape:
        raise ValueError(
            f"grad must have shape positions.shape + (d,) = {p.shape} + (d,); got {g.shape}"
        )
    d = g.shape[-1]
    dtype = g.dtype.newbyteorder("=")  # the kernel reads and writes native floats
    if out is not None:
        out = v.check_out(out, (rows, d), dtype, grad=(g, grad), positions=(p, positions))
    # the kernel checks every position before it writes anything
    full: np.ndarray = _core.gather_backward(
        v.kernel_array(g.reshape(p.size, d), dtype), kind, p, rows, out
    )
    return full

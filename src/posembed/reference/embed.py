"""Twin of embed: token rows plus position rows, with inverted dropout."""

from __future__ import annotations

from typing import Any

import numpy as np

from posembed.reference._common import (
    _check_out,
    _checked_ids,
    _compute_dtype,
    _count,
    _float_table,
    _int_positions,
    _into,
    _rate,
    _seed_value,
)
from posembed.reference.random import _bits


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
    first_row: int = 0,
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
    first_row : int
        The row (of d values) of a larger batch's output that this output's
        row 0 is: its dropout mask is that batch's from there on.

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
        different dtypes; non-integer ids or positions; a ``dropout``,
        ``offset`` or ``first_row`` of the wrong type; ``dropout > 0`` with no
        ``seed`` or a non-integer one; ``out`` that is not an ndarray or of
        another dtype.
    ValueError
        A table that is not 2-D; tables with different ``d``; ids that are not
        1-D or 2-D; ``dropout`` outside [0, 1); a negative ``offset``, or
        ``positions`` with a non-zero ``offset``; positions that do not
        broadcast to the ids' shape; ``seed`` outside 0..2**64-1; a negative
        ``first_row``, or one whose rows reach 2^62 values; ``out`` of the
        wrong shape, read-only, non-contiguous, misaligned or overlapping an input.
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
    row = _count(first_row, "first_row", 0)
    if row * max(tok.shape[1], 1) > 2**62:
        raise ValueError("first_row is too large: its rows reach 2^62 values")
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
        # element e of this output is element row * d + e of the larger batch's
        bits = _bits(_seed_value(seed), row * tok.shape[1], total.size)
        keep = (bits >= int(rate * 2**32)).reshape(total.shape)
        total = np.where(keep, total * compute(1.0 / (1.0 - rate)), compute(0))
    return _into(
        out, total.astype(tok.dtype), tok, pos, token_table, pos_table, token_ids, positions
    )

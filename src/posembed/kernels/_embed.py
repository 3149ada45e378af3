"""embed: token + position rows with inverted dropout, in one pass; dropout_mask: its mask."""

from __future__ import annotations

import math
import secrets
import threading
from typing import Any

import numpy as np

from posembed import _core
from posembed.kernels import _validate as v

_last = threading.local()
_MASK_ELEMENTS = 1 << 62


def last_seed() -> int | None:
    """The dropout seed of this thread's latest call with dropout.

    Returns
    -------
    int or None
        The seed (0..2**64-1) of this thread's latest :func:`embed` or
        :func:`dropout_mask` call with dropout (drawn afresh when it was given
        ``seed=None``), or None if there was none.
    """
    seed: int | None = getattr(_last, "seed", None)
    return seed


def _seed(seed: Any) -> int:
    if seed is None:
        value = secrets.randbits(64)
    else:
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"seed must be an integer in 0..2**64-1 or None; got {seed!r}")
        value = int(seed)
        if not 0 <= value < 2**64:
            raise ValueError(f"seed must be in 0..2**64-1; got {value}")
    _last.seed = value
    return value


def _dropout_args(rate: float) -> tuple[int, float]:
    """(threshold, scale): an element is kept when its 32 random bits are >=
    floor(rate * 2^32); kept values are multiplied by 1 / (1 - rate)."""
    return int(rate * 2**32), 1.0 / (1.0 - rate)


def dropout_mask(shape: Any, p: float, seed: int) -> np.ndarray:
    """The dropout mask (True = kept) that :func:`embed` applies.

    The same for any thread count or SIMD level. Element e (flat, C order) of
    an output of ``shape`` is kept when its 32 random bits are at least
    floor(p * 2^32) (see :func:`posembed.reference.uniform_bits`).

    Parameters
    ----------
    shape : int or sequence of int
        Shape of the embed output the mask is for, each size >= 0.
    p : float
        Dropout rate in [0, 1).
    seed : int
        The seed given to (or drawn by, see :func:`last_seed`) :func:`embed`,
        in 0..2**64-1.

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
        A negative size in ``shape``, a ``shape`` of 2^62 elements or more,
        ``p`` outside [0, 1), or ``seed`` outside 0..2**64-1.
    """
    if isinstance(shape, (int, np.integer)):
        dims: tuple[Any, ...] = (shape,)
    else:
        try:
            dims = tuple(shape)
        except TypeError:
            raise TypeError(
                "shape must be an integer or a sequence of integers; "
                f"got {type(shape).__name__} {shape!r}"
            ) from None
    sizes = [v.non_negative_int(k, "shape") for k in dims]
    v.check_sizes(f"shape {tuple(sizes)}", *sizes)  # the element count must fit int64
    rate = v.probability(p, "p")
    if seed is None:
        raise TypeError("dropout_mask needs the seed whose mask you want (an integer)")
    seed_value = _seed(seed)
    threshold, _ = _dropout_args(rate)
    mask: np.ndarray = _core.dropout_mask(math.prod(sizes), seed_value, threshold).reshape(dims)
    return mask


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
    """``dropout(token_table[token_ids] + pos_table[positions])`` in one pass.

    float16 and bfloat16 add and scale in float32 and round once. Every id and
    position is checked before anything is written.

    Parameters
    ----------
    token_table : array_like, shape (V, d)
        float16, bfloat16, float32 or float64.
    token_ids : array_like of int, shape (T,) or (B, T)
        Token ids in 0..V-1.
    pos_table : array_like, shape (L, d)
        A learned position table of ``token_table``'s dtype.
    positions : array_like of int, optional
        Positions in 0..L-1, broadcastable to ``token_ids``' shape; default
        ``offset + arange(T)`` for every row.
    offset : int
        First position (>= 0) when ``positions`` is not given (say, the length
        of a cached prefix); must stay 0 when it is.
    dropout : float
        Rate p in [0, 1): each value is zeroed with probability p and the kept
        ones scaled by 1 / (1 - p) (inverted dropout). 0 is exact addition.
    seed : int, optional
        The mask's seed (0..2**64-1): the same seed gives the same mask for any
        thread count and SIMD level, and :func:`dropout_mask` returns it. None
        draws a fresh one; :func:`last_seed` tells which. Unused (and not
        checked) when ``dropout`` is 0.
    out : ndarray, optional
        Destination of shape ``token_ids.shape + (d,)`` and the tables' dtype,
        writeable, C-contiguous and not overlapping an input.
    first_row : int
        Where this batch sits in a larger one, >= 0: its output's row 0 (of
        the output seen as rows of d) is row ``first_row`` of the larger
        batch's, and gets that row's dropout mask. A batch embedded piece by
        piece (as ``posembed.dask.embed`` does) then gets the mask one call
        gives it. Default 0, the batch on its own.

    Returns
    -------
    ndarray, shape ``token_ids.shape + (d,)``
        The tables' dtype (``out`` if given).

    Raises
    ------
    IndexError
        A token id outside 0..V-1 or a position outside 0..L-1 (the first bad
        one, with its index), or ``offset + T`` past L.
    TypeError
        A table NumPy cannot read or not of a float dtype above; tables of
        different dtypes; non-integer ids or positions; a ``dropout``, ``offset``,
        ``seed`` or ``first_row`` of the wrong type; ``out`` that is not an
        ndarray or of another dtype.
    ValueError
        A table that is not 2-D; tables with different ``d``; ids that are not
        1-D or 2-D; ``dropout`` outside [0, 1); a negative ``offset``, or
        ``positions`` with a non-zero ``offset``; positions that do not
        broadcast to the ids' shape; ``seed`` outside 0..2**64-1; a negative
        ``first_row``, or one whose rows of d values reach 2^62; ``out`` of the
        wrong shape, read-only, misaligned, non-contiguous or overlapping an input.
    """
    if (
        positions is None
        and out is None
        and type(dropout) is float
        and dropout == 0.0
        and type(offset) is int
        and offset == 0
        and type(first_row) is int
        and first_row == 0
    ):
        # the common call, its few checks compiled (None: anything else,
        # which the full checks below take and report)
        plain: np.ndarray | None = _core.embed_plain(token_table, token_ids, pos_table)
        if plain is not None:
            return plain
    tt, kind = v.float_table(token_table, "token_table")
    pt, _ = v.float_table(pos_table, "pos_table")
    if tt.dtype != pt.dtype:
        raise TypeError(
            f"token_table and pos_table must share a dtype; got {tt.dtype} and {pt.dtype}"
        )
    if tt.shape[1] != pt.shape[1]:
        raise ValueError(
            "token_table and pos_table must share embed_dim; "
            f"got {tt.shape[1]} and {pt.shape[1]} columns"
        )
    ids = v.as_positions(token_ids, tt.shape[0], "raise", "token_ids", "token id", "token_table")
    if ids.ndim not in (1, 2):
        raise ValueError(f"token_ids must be (T,) or (B, T); got shape {ids.shape}")
    if tt.shape[0] == 0:  # no row for any id
        _core.check_in_range(ids, 0, "token_ids", "token id", "token_table")
    rate = v.probability(dropout, "dropout")
    row = v.non_negative_int(first_row, "first_row")
    if row > _MASK_ELEMENTS // max(tt.shape[1], 1):  # the mask counts elements in int64
        raise ValueError(
            f"first_row must be in 0..{_MASK_ELEMENTS // max(tt.shape[1], 1)} (rows of "
            f"{tt.shape[1]} values below 2^62); got {row}"
        )
    length = pt.shape[0]
    tokens = ids.shape[-1]
    given: np.ndarray | None = None
    start = 0
    if positions is None:
        start = v.non_negative_int(offset, "offset")
        if ids.size and start + tokens > length:
            valid = f"valid positions are 0..{length - 1}" if length else "it has no rows"
            raise IndexError(
                f"positions {start}..{start + tokens - 1} (offset {start} + arange({tokens})) "
                f"go past pos_table's {length} rows ({valid})"
            )
    else:
        if not (isinstance(offset, (int, np.integer)) and offset == 0):
            raise ValueError("give positions or offset, not both")
        given = v.as_positions(positions, length, "raise", "positions", "position", "pos_table")
        if length == 0 or ids.size == 0:
            # no row for any position, or no kernel call to check them: every
            # position is checked all the same
            _core.check_in_range(given, length, "positions", "position", "pos_table")
        if given.shape != ids.shape and given.shape != ids.shape[-1:]:
            # the kernel broadcasts the positions (without a copy); checked here
            # for NumPy's rules and message
            try:
                np.broadcast_to(given, ids.shape)
            except ValueError:
                raise ValueError(
                    f"positions of shape {given.shape} do not broadcast to token_ids' shape "
                    f"{ids.shape}"
                ) from None
    seed_value = _seed(seed) if rate > 0 else 0
    if out is not None:
        # against the caller's arrays too: tt, pt and ids may be converted copies
        out = v.check_out(
            out,
            (*ids.shape, tt.shape[1]),
            tt.dtype,
            tables=(tt, pt, token_table, pos_table),
            indices=(ids, token_ids, positions),
        )
    threshold, scale = _dropout_args(rate) if rate > 0 else (0, 1.0)
    if ids.size == 0:
        start = 0  # nothing is read: any offset >= 0 will do, even one past int64
    # the kernel checks every id and position before it writes anything
    result: np.ndarray = _core.embed(
        tt, pt, kind, ids, given, start, rate > 0, seed_value, threshold, scale, out, row
    )
    return result

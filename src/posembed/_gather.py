"""gather: the lookup of position rows."""

from __future__ import annotations

from typing import Any

import numpy as np

from posembed import _core
from posembed import _validate as v


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
    positions : int or array_like of integers, any shape
        int8..int64 or uint8..uint64.
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
    ndarray of shape ``positions.shape + (d,)`` and ``table``'s dtype (``out`` if given).

    Raises
    ------
    IndexError
        In mode "raise", naming the first out-of-range position, its index and
        the valid range; in every mode when positions are given for an empty table.
    TypeError
        Non-integer positions, an object-dtype table, or ``out`` of another dtype.
    ValueError
        A table that is not 2-D, an unknown mode, or ``out`` of the wrong
        shape, read-only, non-contiguous or overlapping an input.
    """
    t = v.as_table(table)
    code = v.index_mode(mode)
    p = v.as_positions(positions, t.shape[0], mode)
    if out is not None:
        # against the caller's positions too: p may be a converted copy
        both = (p, positions) if isinstance(positions, np.ndarray) else p
        v.check_out(out, (*p.shape, t.shape[1]), t.dtype, table=t, positions=both)
    return _core.gather(t, p, code, out)

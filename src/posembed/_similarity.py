"""similarity: the cosine similarity of every pair of rows of a position table."""

from __future__ import annotations

from typing import Any

import numpy as np

from posembed import _core
from posembed import _validate as v


def similarity(table: Any) -> np.ndarray:
    """Cosine similarity of every pair of rows.

    A row of zeros has similarity 0 with every row (itself included). Rows are
    first divided by their largest magnitude, so tiny or huge rows neither
    underflow nor overflow, then by their length (one compiled pass). The
    Gram product runs in NumPy's BLAS, only its lower triangle (row blocks
    against the columns up to their own), which is then mirrored onto the
    upper one: the result is exactly symmetric.

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
    x = v.kernel_array(t, np.float64 if t.dtype == np.float64 else np.float32)
    # This pass and the mirror run on the calling thread: NumPy's BLAS keeps
    # its worker threads spinning on the other cores for a while after each
    # product, and a team of ours beside them ran these passes 3-4 times
    # slower than one thread did.
    peak, norm = _core.row_scales(x, threads=1)
    low, high = SAFE_PEAKS[x.dtype.type]
    if x.shape[1] <= SAFE_WIDTH and bool(np.all((peak == 0) | ((peak >= low) & (peak <= high)))):
        # no product of the table's own values can overflow or underflow: the
        # Gram product of the table itself, each entry then divided by the
        # two rows' lengths (1 / 0 for a zero row: it scores 0)
        length = peak * norm
        inv = np.divide(1, length, out=np.zeros_like(length), where=length != 0)
        gram, scales = x, inv
    else:  # rows scaled to unit length first (peaks far from 1, inf, NaN)
        gram, scales = _core.unit_rows(x), None
    rows = x.shape[0]
    result: np.ndarray = np.empty((rows, rows), x.dtype)
    # Row blocks against the columns up to their own end: about half the
    # product's work once the blocks are small beside the table (the last
    # block is the whole width; each block stays large enough for BLAS).
    # Each block is scaled and mirrored as soon as it is made, while it is in
    # cache; later blocks write only rows below it.
    step = max(TRIANGLE_BLOCK, -(-rows // TRIANGLE_BLOCKS))
    for a in range(0, rows, step):
        b = min(rows, a + step)
        np.matmul(gram[a:b], gram[:b].T, out=result[a:b, :b])
        _core.mirror_lower(result, scales, a, b, threads=1)
    return result


# Row peaks whose products, d of them summed, can neither overflow nor fall
# into the subnormals (where precision goes): with them the table's own
# Gram product is taken, without a scaled copy.
SAFE_PEAKS = {np.float32: (2.0**-30, 2.0**30), np.float64: (2.0**-250, 2.0**250)}
SAFE_WIDTH = 1 << 24
# How the lower triangle of the Gram product is cut: into this many row
# blocks, each at least this many rows.
TRIANGLE_BLOCKS = 8
TRIANGLE_BLOCK = 256

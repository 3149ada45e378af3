"""similarity: the cosine similarity of every pair of rows of a position table."""

from __future__ import annotations

from typing import Any

import numpy as np

from posembed import _core
from posembed.kernels import _validate as v


def similarity(table: Any) -> np.ndarray:
    """Cosine similarity of every pair of rows.

    A row of zeros has similarity 0 with every row (itself included). Rows are
    first divided by their largest magnitude, so tiny or huge rows neither
    underflow nor overflow, then by their length (one compiled pass). The
    Gram product runs in NumPy's BLAS, only its lower triangle (halved
    until the diagonal blocks are small), which is then mirrored onto the
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
    for r0, r1, c0, c1 in triangle_blocks(rows):
        np.matmul(gram[r0:r1], gram[c0:c1].T, out=result[r0:r1, c0:c1])
        if c1 == r1:
            # a diagonal block: its rows are whole (the blocks left of it came
            # first), scaled and mirrored now, while in cache; later blocks
            # write only rows below it
            _core.mirror_lower(result, scales, r0, r1, threads=1)
    return result


def triangle_blocks(rows: int) -> list[tuple[int, int, int, int]]:
    """The Gram product's lower triangle as the blocks (rows [r0, r1)
    against columns [c0, c1)) that BLAS computes, in order: the rows halved
    until a diagonal block has at most ``max(TRIANGLE_BLOCK, rows /
    TRIANGLE_BLOCKS)`` rows, the lower half against the upper one as one
    product (about half the full product's work, in products large enough
    for BLAS). Every block left of a diagonal block comes before it."""
    leaf = max(TRIANGLE_BLOCK, -(-rows // TRIANGLE_BLOCKS))
    blocks: list[tuple[int, int, int, int]] = []

    def halve(a: int, b: int) -> None:
        if b - a <= leaf:
            blocks.append((a, b, a, b))
            return
        m = (a + b) // 2
        halve(a, m)
        blocks.append((m, b, a, m))
        halve(m, b)

    if rows:
        halve(0, rows)
    return blocks


# Row peaks whose products, d of them summed, can neither overflow nor fall
# into the subnormals (where precision goes): with them the table's own
# Gram product is taken, without a scaled copy.
SAFE_PEAKS = {np.float32: (2.0**-30, 2.0**30), np.float64: (2.0**-250, 2.0**250)}
SAFE_WIDTH = 1 << 24
# How the lower triangle of the Gram product is cut: into at most about
# this many diagonal blocks, each of at least this many rows.
TRIANGLE_BLOCKS = 16
TRIANGLE_BLOCK = 128

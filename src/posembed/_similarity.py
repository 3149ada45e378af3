"""similarity: the cosine similarity of every pair of rows of a position table."""

from __future__ import annotations

from typing import Any

import numpy as np

from posembed import _validate as v


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

"""Twin of similarity: the cosine similarity of every pair of a table's rows."""

from __future__ import annotations

from typing import Any

import numpy as np

from posembed.reference._common import _compute_dtype, _float_table


def similarity(table: Any) -> np.ndarray:
    """Cosine similarity of every pair of rows; a zero row scores 0.

    The twin of :func:`posembed.similarity`.

    Parameters
    ----------
    table : array_like, shape (L, d)
        float16, bfloat16, float32 or float64.

    Returns
    -------
    ndarray, shape (L, L)
        float64 for float64 tables, float32 for the others.

    Raises
    ------
    TypeError
        A table NumPy cannot read or not of a float dtype above.
    ValueError
        A table that is not 2-D.
    """
    t = _float_table(table)
    x = t.astype(_compute_dtype(t))
    if x.size:  # rows scaled to a largest magnitude of 1: no overflow, no underflow
        peak = np.abs(x).max(axis=1, keepdims=True)
        x = x / np.where(peak == 0, 1, peak).astype(x.dtype)
    norms = np.sqrt((x * x).sum(axis=1))
    denom = np.outer(norms, norms)
    dots = x @ x.T
    result: np.ndarray = np.where(denom == 0, 0, dots / np.where(denom == 0, 1, denom))
    return result.astype(x.dtype)

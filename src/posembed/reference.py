"""Plain NumPy twins of posembed's kernels.

Each function here has the same signature, the same results and the same
exception types as its fast counterpart, and is written to be read, not to
be fast. The tests hold the kernels to these. This module imports nothing
from the rest of posembed.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["LearnedPositionEmbedding", "gather"]


def _int_positions(positions: Any) -> np.ndarray:
    """Positions as int64, or uint64 (kept, so huge values compare correctly),
    or an object array of Python ints when they do not fit 64 bits."""
    p = np.asarray(positions)
    if p.dtype.kind == "O":
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in p.flat):
            raise TypeError("positions must be integers")
        return p
    if p.size == 0 and p.dtype.kind == "f" and not isinstance(positions, np.ndarray):
        return p.astype(np.int64)  # an empty list
    if p.dtype.kind not in "iu":
        raise TypeError(f"positions must be integers; got dtype {p.dtype}")
    if p.dtype == np.uint64:
        return p
    return p.astype(np.int64)


def gather(
    table: Any, positions: Any, *, mode: str = "raise", out: np.ndarray | None = None
) -> np.ndarray:
    """``table[positions]`` with numpy.take's clip / wrap modes and a strict raise mode."""
    if isinstance(table, np.ma.MaskedArray) or isinstance(positions, np.ma.MaskedArray):
        raise TypeError("masked arrays are not accepted")
    table = np.asarray(table)
    if table.ndim != 2:
        raise ValueError(f"table must be 2-D; got shape {table.shape}")
    if table.dtype.hasobject:
        raise TypeError("table must have a fixed-size dtype")
    if mode not in ("raise", "clip", "wrap"):
        raise ValueError(f"mode must be 'raise', 'clip' or 'wrap'; got {mode!r}")
    p = _int_positions(positions)
    rows = table.shape[0]

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
    result: np.ndarray = table[np.asarray(rows_taken).astype(np.int64)]

    if out is not None:
        if not isinstance(out, np.ndarray):
            raise TypeError("out must be a numpy.ndarray")
        if out.dtype != table.dtype:
            raise TypeError(f"out must have dtype {table.dtype}")
        if out.shape != result.shape:
            raise ValueError(f"out must have shape {result.shape}")
        if not out.flags.writeable or not out.flags.c_contiguous:
            raise ValueError("out must be writeable and C-contiguous")
        if np.shares_memory(out, table) or np.shares_memory(out, p):
            raise ValueError("out must not overlap table or positions")
        out[...] = result
        return out
    return result


class LearnedPositionEmbedding:
    """Twin of posembed.LearnedPositionEmbedding: the same table for the same seed."""

    def __init__(
        self,
        max_seq_len: int,
        embed_dim: int,
        *,
        init_std: float | str = 0.02,
        seed: int | np.random.Generator | None = None,
        dtype: Any = np.float32,
    ) -> None:
        for name, n in (("max_seq_len", max_seq_len), ("embed_dim", embed_dim)):
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
                raise TypeError(f"{name} must be an integer")
            if n <= 0:
                raise ValueError(f"{name} must be positive")
        if init_std == "scaled":
            std = 1.0 / math.sqrt(embed_dim)
        elif isinstance(init_std, str):
            raise ValueError("init_std must be a number or 'scaled'")
        elif isinstance(init_std, bool) or not isinstance(init_std, (int, float, np.number)):
            raise TypeError("init_std must be a number or 'scaled'")
        elif not math.isfinite(init_std) or init_std < 0:
            raise ValueError("init_std must be finite and >= 0")
        else:
            std = float(init_std)
        if isinstance(dtype, str) and dtype == "bfloat16":
            import ml_dtypes

            dtype = ml_dtypes.bfloat16
        dt = np.dtype(dtype)
        if dt.name not in ("float16", "bfloat16", "float32", "float64"):
            raise TypeError("dtype must be a float dtype")
        draws = np.random.default_rng(seed).standard_normal((int(max_seq_len), int(embed_dim)))
        self.embeddings = (draws * std).astype(dt)
        self.max_seq_len = int(max_seq_len)
        self.embed_dim = int(embed_dim)

    def __call__(self, positions: Any, *, mode: str = "raise") -> np.ndarray:
        return gather(self.embeddings, positions, mode=mode)

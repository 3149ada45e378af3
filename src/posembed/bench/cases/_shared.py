"""What several kernels' cases use: PyTorch when installed, and NumPy's
interpolation as a user writes it."""

from __future__ import annotations

from typing import Any

import numpy as np

import posembed


def optional_torch() -> Any:
    """PyTorch on posembed's thread count, or None where it is not installed
    (its column is then left empty)."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(posembed.get_num_threads())
    return torch


def numpy_interpolate(table: np.ndarray, length: int) -> np.ndarray:
    """What a NumPy user writes: half-pixel linear interpolation, vectorised."""
    rows = table.shape[0]
    s = np.maximum((np.arange(length) + 0.5) * rows / length - 0.5, 0)
    lo = np.minimum(np.floor(s).astype(np.int64), rows - 1)
    hi = np.minimum(lo + 1, rows - 1)
    w = (s - lo).astype(table.dtype)[:, None]
    out: np.ndarray = (1 - w) * table[lo] + w * table[hi]
    return out

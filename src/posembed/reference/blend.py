"""Twin of posembed's blending indices: Megatron-LM BlendedDataset's draw, in plain NumPy.

It restates ``helpers.cpp``'s ``build_blending_indices`` and
``build_exhaustive_blending_indices`` one sample at a time: every dataset's
error ``weight * max(i, 1) - drawn`` (a float64 product, then a difference),
the first largest wins.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from posembed.reference._common import _array, _count

MAX_DATASETS = 32766
MAX_SAMPLES = 2**53


def blending_indices(weights: Any, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Megatron's blending indices for ``size`` samples, as helpers.cpp's build_blending_indices.

    The twin of :func:`posembed.blending_indices`.

    Parameters
    ----------
    weights : array_like of float, shape (n,)
        Each dataset's share: finite, > 0, summing to 1; 1 to 32766 of them.
    size : int
        How many samples, >= 0.

    Returns
    -------
    dataset_index : ndarray of int16, shape (size,)
        The dataset of each sample.
    dataset_sample_index : ndarray of int64, shape (size,)
        Which sample of that dataset.

    Raises
    ------
    TypeError
        Weights that are not floats, or a size that is not an integer.
    ValueError
        Weights that are not 1-D, empty, too many, not finite, not > 0 or
        not summing to 1; a negative size.
    """
    w = _weights(weights)
    size = _count(size, "size", 0)
    if size >= MAX_SAMPLES:
        raise ValueError("size must be below 2^53")
    drawn = np.zeros(w.size, dtype=np.int64)
    dataset_index = np.zeros(size, dtype=np.int16)
    dataset_sample_index = np.zeros(size, dtype=np.int64)
    for i in range(size):
        x = max(float(i), 1.0)
        errors = w * x - drawn.astype(np.float64)
        d = int(np.argmax(errors))  # the first largest
        dataset_index[i] = d
        dataset_sample_index[i] = drawn[d]
        drawn[d] += 1
    return dataset_index, dataset_sample_index


def exhaustive_blending_indices(sizes: Any) -> tuple[np.ndarray, np.ndarray]:
    """Every sample of each dataset, as helpers.cpp's build_exhaustive_blending_indices.

    The twin of :func:`posembed.exhaustive_blending_indices` (a dataset of
    size 0 gives no sample).

    Parameters
    ----------
    sizes : array_like of int, shape (n,)
        Each dataset's samples, >= 0; 1 to 32766 of them, summing below 2^53.

    Returns
    -------
    dataset_index : ndarray of int16, shape (sum(sizes),)
        The dataset of each sample.
    dataset_sample_index : ndarray of int64, shape (sum(sizes),)
        Which sample of that dataset.

    Raises
    ------
    TypeError
        Sizes that are not integers.
    ValueError
        Sizes that are not 1-D, empty, too many, negative, or summing to
        2^53 or more.
    """
    s = _sizes(sizes)
    total = int(s.sum())
    w = s.astype(np.float64) / float(total) if total else np.zeros(s.size)
    drawn = np.zeros(s.size, dtype=np.int64)
    dataset_index = np.zeros(total, dtype=np.int16)
    dataset_sample_index = np.zeros(total, dtype=np.int64)
    for i in range(total):
        x = max(float(i), 1.0)
        errors = w * x - drawn.astype(np.float64)
        errors[drawn == s] = -np.inf  # spent (or empty) datasets are not drawn
        d = int(np.argmax(errors))
        dataset_index[i] = d
        dataset_sample_index[i] = drawn[d]
        drawn[d] += 1
    return dataset_index, dataset_sample_index


def _vector(given: Any, name: str) -> np.ndarray:
    a = _array(given, name)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D")
    if not 1 <= a.size <= MAX_DATASETS:
        raise ValueError(f"{name} must hold 1 to {MAX_DATASETS} datasets")
    return a


def _weights(weights: Any) -> np.ndarray:
    a = _vector(weights, "weights")
    if a.dtype.kind != "f":
        raise TypeError("weights must be floats")
    w = a.astype(np.float64)
    if not np.all(np.isfinite(w) & (w > 0)):
        raise ValueError("weights must be finite and > 0")
    if not np.isclose(w.sum(), 1.0):
        raise ValueError("weights must sum to 1")
    return w


def _sizes(sizes: Any) -> np.ndarray:
    a = _vector(sizes, "sizes")
    if a.dtype.kind not in "iu":
        raise TypeError("sizes must be integers")
    values = [int(x) for x in a]
    if min(values) < 0:
        raise ValueError("sizes must be >= 0")
    if sum(values) >= MAX_SAMPLES:
        raise ValueError("sizes must sum to less than 2^53")
    return np.array(values, dtype=np.int64)

"""blend: Megatron-LM's blending indices, which dataset of a blend gives each sample."""

from __future__ import annotations

from typing import Any

import numpy as np

from posembed import _core
from posembed.kernels import _validate as v

# Dataset ids are int16 (BlendedDataset asserts fewer than 32767 datasets).
MAX_DATASETS = 32766
# Every count is subtracted as a double: exact below 2^53.
MAX_SAMPLES = 2**53


def blending_indices(weights: Any, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Which dataset each of ``size`` samples comes from, drawn by weight as Megatron-LM blends.

    Equal element for element to what ``megatron.core.datasets.helpers.
    build_blending_indices(dataset_index, dataset_sample_index, weights,
    len(weights), size, verbose)`` writes, as ``BlendedDataset`` calls it
    when it is given a size. Sample ``i`` goes to the dataset that lags its
    share the most: the largest ``weights[d] * max(i, 1) - drawn[d]``
    (computed in float64, a product then a difference, each rounded), the
    lowest ``d`` among equal largest.

    Parameters
    ----------
    weights : array_like of float, shape (n,)
        Each dataset's share of the samples, ``1 <= n <= 32766``: finite,
        > 0 and summing to 1, as ``BlendedDataset`` hands them to Megatron's
        helper (it normalises its weights first: ``w / w.sum()`` in float64).
        They are used as given, never normalised again here: renormalising
        can move a weight by one unit in the last place, which can change
        the draw. A weight of 0 is refused, as ``BlendedDataset`` refuses it
        (Megatron's helper would still draw from such a dataset): leave that
        dataset out of the blend instead.
    size : int
        How many samples to draw, >= 0.

    Returns
    -------
    dataset_index : ndarray of int16, shape (size,)
        The dataset of each sample.
    dataset_sample_index : ndarray of int64, shape (size,)
        Which sample of that dataset: how many it had given before.

    Raises
    ------
    TypeError
        ``weights`` that are not floats, or a ``size`` that is not an integer.
    ValueError
        ``weights`` that are not 1-D, empty, more than 32766 of them, NaN,
        infinite, 0 or negative, or whose sum is not 1 (within
        ``numpy.isclose``, as Megatron's blend builder checks it); a negative
        ``size``.

    See Also
    --------
    exhaustive_blending_indices : every sample of each dataset, none repeated.
    """
    w = _weights(weights)
    n = v.non_negative_int(size, "size")
    if n >= MAX_SAMPLES:
        raise ValueError(f"size must be below 2^53 (counts are exact doubles); got {n}")
    dataset_index, sample_index = _core.blending_indices(w, n)
    return dataset_index, sample_index


def exhaustive_blending_indices(sizes: Any) -> tuple[np.ndarray, np.ndarray]:
    """Every sample of each dataset once, interleaved in proportion to the datasets' sizes.

    Equal element for element to what ``megatron.core.datasets.helpers.
    build_exhaustive_blending_indices(dataset_index, dataset_sample_index,
    sizes, len(sizes))`` writes for sizes > 0, as ``BlendedDataset`` calls it
    when it is given no size: the weights are ``sizes / sizes.sum()`` (in
    float64), the draw is :func:`blending_indices`'s, and a dataset that has
    given all its samples is drawn no more, until every one has.

    Parameters
    ----------
    sizes : array_like of int, shape (n,)
        How many samples each dataset gives, each >= 0, ``1 <= n <= 32766``,
        their sum below 2^53. A dataset of size 0 gives none and leaves the
        others' draw as it is without it (Megatron's helper cannot take a
        size of 0: it draws from that dataset anyway and writes past the end
        of its arrays; ``BlendedDataset`` refuses one).

    Returns
    -------
    dataset_index : ndarray of int16, shape (sum(sizes),)
        The dataset of each sample.
    dataset_sample_index : ndarray of int64, shape (sum(sizes),)
        Which sample of that dataset, each of ``0..sizes[d]-1`` exactly once.

    Raises
    ------
    TypeError
        ``sizes`` that are not integers.
    ValueError
        ``sizes`` that are not 1-D, empty, more than 32766 of them, negative,
        or summing to 2^53 or more.

    See Also
    --------
    blending_indices : a given number of samples, drawn by weight.
    """
    s = _sizes(sizes)
    dataset_index, sample_index = _core.exhaustive_blending_indices(s)
    return dataset_index, sample_index


def _vector(given: Any, name: str, what: str) -> np.ndarray:
    """``given`` as a 1-D array of 1 to MAX_DATASETS entries (not yet copied)."""
    a = v.as_array(given, name)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D ({what}, one per dataset); got shape {a.shape}")
    if a.shape[0] == 0:
        raise ValueError(f"{name} must hold at least one dataset; got none")
    if a.shape[0] > MAX_DATASETS:
        raise ValueError(
            f"{name} holds {a.shape[0]} datasets; a blend holds at most {MAX_DATASETS} "
            "(dataset ids are int16)"
        )
    return a


def _weights(weights: Any) -> np.ndarray:
    """The weights as a private float64 copy, checked (the kernel reads the copy)."""
    a = _vector(weights, "weights", "floats")
    if a.dtype.kind != "f":
        raise TypeError(f"weights must be floats; got dtype {a.dtype}")
    w = np.array(a, dtype=np.float64, order="C", copy=True)
    bad = np.flatnonzero(~np.isfinite(w) | (w <= 0))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"weights must be finite and > 0; got weights[{i}] = {float(w[i])!r} "
            f"({bad.size} of {w.size} are not)"
        )
    total = float(np.sum(w))
    if not np.isclose(total, 1.0):
        raise ValueError(
            f"weights must sum to 1 (normalise them first: weights / weights.sum()); "
            f"got a sum of {total!r}"
        )
    return w


def _sizes(sizes: Any) -> np.ndarray:
    """The sizes as a private int64 copy, checked (the kernel reads the copy)."""
    a = _vector(sizes, "sizes", "integers")
    if a.dtype.kind not in "iu":
        raise TypeError(f"sizes must be integers; got dtype {a.dtype}")
    if a.dtype.kind == "u" and a.dtype.itemsize == 8:
        big = np.flatnonzero(a > np.uint64(MAX_SAMPLES))
        if big.size:
            i = int(big[0])
            raise ValueError(f"sizes must sum to less than 2^53; got sizes[{i}] = {int(a[i])}")
    s = np.array(a, dtype=np.int64, order="C", copy=True)
    negative = np.flatnonzero(s < 0)
    if negative.size:
        i = int(negative[0])
        raise ValueError(f"sizes must be >= 0; got sizes[{i}] = {int(s[i])}")
    total = sum(s.tolist())  # Python ints: 32766 sizes near 2^63 would wrap int64
    if total >= MAX_SAMPLES:
        raise ValueError(f"sizes must sum to less than 2^53; got a sum of {total}")
    return s

"""Taps along one axis, shared by the resample_grid and interpolate twins:
PyTorch's antialiased taps (for each output index, the input rows it reads
and their weights, as Python floats) and their sum over an array."""

from __future__ import annotations

import math

import numpy as np


def _filter(x: float, method: str) -> float:
    """The triangle (bilinear) or the cubic convolution kernel with A = -0.5."""
    x = abs(x)
    if method == "bilinear":
        return 1.0 - x if x < 1.0 else 0.0
    a = -0.5
    if x < 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    if x < 2.0:
        return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    return 0.0


def _antialias_taps(
    in_size: int, out_size: int, method: str
) -> tuple[list[list[int]], list[list[float]]]:
    """Output i is centred at scale * (i + 0.5), scale = in / out; its support
    is 1 (bilinear) or 2 (bicubic), times the scale when shrinking, and its
    taps are the rows whose centres the support reaches, cut at the borders,
    weighted by the filter at their distance (over the scale when shrinking)
    and normalised to sum to 1. An axis that keeps its size is left alone."""
    if in_size == out_size:
        return [[i] for i in range(out_size)], [[1.0] for _ in range(out_size)]
    scale = in_size / out_size
    half = 2.0 if method == "bicubic" else 1.0
    support = half * scale if scale >= 1.0 else half
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    most = math.ceil(support) * 2 + 1
    idx, wts = [], []
    for i in range(out_size):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), in_size)
        n = min(max(hi - lo, 0), most)
        w = [_filter((j + lo - center + 0.5) * invscale, method) for j in range(n)]
        total = 0.0
        for x in w:  # left to right (sum() may compensate)
            total += x
        idx.append([lo + j for j in range(n)])
        wts.append([x / total for x in w] if total != 0.0 else w)
    return idx, wts


def _sum_taps(
    values: np.ndarray, idx: list[list[int]], wts: list[list[float]], axis: int
) -> np.ndarray:
    """Resampled along ``axis``: output i sums weight * slice over its taps,
    left to right, each weight rounded to the values' dtype."""
    c = values.dtype.type
    moved = np.moveaxis(values, axis, 0)
    out = np.empty((len(idx), *moved.shape[1:]), values.dtype)
    for i, (rows, weights) in enumerate(zip(idx, wts, strict=True)):
        acc = c(weights[0]) * moved[rows[0]]
        for r, w in zip(rows[1:], weights[1:], strict=True):
            acc = acc + c(w) * moved[r]
        out[i] = acc
    return np.moveaxis(out, 0, axis)

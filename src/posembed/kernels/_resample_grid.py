"""resample_grid: 2-D resampling of vision-transformer position tables."""

from __future__ import annotations

from typing import Any

import numpy as np

from posembed import _core
from posembed.kernels import _validate as v

METHODS = _core.GridMethod.__members__
GRID_ALIGNS = {name: v.ALIGNS[name] for name in ("half_pixel", "corners")}


def resample_grid(
    table: Any,
    grid: tuple[int, int],
    new_grid: tuple[int, int],
    *,
    prefix: int = 0,
    method: str = "bicubic",
    align: str = "half_pixel",
    antialias: bool = False,
) -> np.ndarray:
    """Resample a ViT position table from an (H, W) grid to (H', W').

    Parameters
    ----------
    table : array_like, shape (prefix + H * W, d)
        ``prefix`` leading rows (CLS, distillation tokens) followed by the grid
        in row-major order; float16, bfloat16, float32 or float64.
    grid : (int, int)
        (H, W), both >= 1; non-square grids are fine.
    new_grid : (int, int)
        (H', W'), both >= 1.
    prefix : int
        Leading rows (>= 0) copied bit-identically to the result.
    method : {"bicubic", "bilinear"}
        Bicubic is the Keys kernel with A = -0.75, as PyTorch; border taps
        repeat the edge rows. No antialiasing by default (PyTorch's default).
    align : {"half_pixel", "corners"}
        As PyTorch ``align_corners=False`` / ``True``.
    antialias : bool
        PyTorch's ``antialias=True`` (what timm's ``resample_abs_pos_embed``
        uses): the filter is stretched by in / out along an axis that shrinks,
        so that every input row contributes, and cut at the borders, its
        weights normalised to sum to 1; bicubic then uses A = -0.5. An axis
        whose size does not change is kept as it is. ``"half_pixel"`` only.

    Returns
    -------
    ndarray, shape (prefix + H' * W', d)
        The table's dtype; matches PyTorch ``F.interpolate`` on the (1, d, H, W)
        grid to float32 round-off (PyTorch computes the weights in float32,
        posembed in float64, rounded once to the compute type). Every tap is
        summed, also those of weight 0, so an inf or NaN in the grid spreads
        to the neighbouring outputs (0 * inf is NaN), as in PyTorch's general
        path.

    Raises
    ------
    TypeError
        A table NumPy cannot read as an array or not of a float dtype above;
        ``grid`` or ``new_grid`` that is not a pair, or holds a non-integer;
        a ``prefix`` that is not an integer; ``antialias`` that is not a bool.
    ValueError
        A table that is not 2-D; a grid side < 1; a negative ``prefix``; a
        table whose rows are not ``prefix + H * W``; an unknown ``method`` or
        ``align``; ``antialias=True`` with ``align="corners"``; a result too
        large to index (2^62).
    """
    t, kind = v.float_table(table)
    h, w = v.grid_shape(grid, "grid")
    h2, w2 = v.grid_shape(new_grid, "new_grid")
    p = v.non_negative_int(prefix, "prefix")
    if p + h * w != t.shape[0]:
        raise ValueError(
            f"table has {t.shape[0]} rows but prefix + H * W = {p} + {h} * {w} = {p + h * w} "
            f"(prefix {p}, grid ({h}, {w}))"
        )
    v.check_sizes("new_grid", p + h2 * w2, t.shape[1], t.itemsize)
    v.check_sizes("new_grid", 4, h2 * w2, h * w)
    v.check_sizes("the resampling buffer", h, w2, t.shape[1], 8)
    m = METHODS[v.choice(method, "method", METHODS)]
    a = GRID_ALIGNS[v.choice(align, "align", GRID_ALIGNS)]
    aa = v.antialias_flag(antialias, align)
    return _core.resample_grid(t, kind, p, h, w, h2, w2, m, a, aa)

"""interpolate: a table stretched to an output that streams through memory; lerp at
fractional positions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import posembed
from posembed import reference
from posembed.bench.case import Case
from posembed.bench.cases._shared import numpy_interpolate, optional_torch
from posembed.bench.sizes import at_least, at_most, sizes

ROW_BYTES = 1024 * 4  # one float32 row of d=1024


def _lerp_impls(table: np.ndarray, pos: np.ndarray, torch: Any) -> dict[str, Callable[[], object]]:
    """lerp four ways: the twin, NumPy's gather-and-blend, posembed, torch.lerp."""
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, table.shape[0] - 1)
    w = (pos - lo).astype(table.dtype)[:, None]
    impls: dict[str, Callable[[], object]] = {
        "reference": lambda: reference.lerp(table, pos),
        "numpy": lambda: (1 - w) * table[lo] + w * table[hi],
        "posembed": lambda: posembed.lerp(table, pos),
    }
    if torch is not None:
        tt, tlo, thi, tw = (torch.from_numpy(x) for x in (table, lo, hi, w))
        impls["torch"] = lambda: torch.lerp(tt[tlo], tt[thi], tw)
    return impls


def build(quick: bool = False) -> list[Case]:
    rng = np.random.default_rng(1)
    torch = optional_torch()
    # A stretch whose table stays in cache (half the in-cache size) and whose
    # output streams through memory (sizes.py): the write roofline is then
    # the ceiling on any host (a 32x stretch where both follow the last-level
    # cache).
    size = sizes(quick)
    rows = at_most(size.in_cache // 2, ROW_BYTES)
    n = at_least(size.in_memory, ROW_BYTES)
    table = rng.standard_normal((rows, 1024), dtype=np.float32)
    stretch = f"{rows} -> {n} rows, d=1024 f32, half_pixel"
    impls: dict[str, Callable[[], object]] = {
        "reference": lambda: reference.interpolate(table, n, align="half_pixel"),
        "numpy": lambda: numpy_interpolate(table, n),
        "posembed": lambda: posembed.interpolate(table, n, align="half_pixel"),
    }
    if torch is not None:
        tt = torch.from_numpy(table)
        fi = torch.nn.functional.interpolate
        impls["torch"] = lambda: fi(tt.T[None], size=n, mode="linear")[0].T.contiguous()
    out_bytes = n * ROW_BYTES
    # each output element a blend of two rows: two products and a sum (the
    # two rows at each border, copied, counted too)
    flops = 3 * n * 1024
    cases = [
        Case(
            "interpolate",
            "fresh output",
            stretch,
            out_bytes,
            impls,
            "write fresh",
            lambda: bool(
                np.array_equal(
                    posembed.interpolate(table, n, align="half_pixel"),
                    reference.interpolate(table, n, align="half_pixel"),
                )
            ),
            flops=flops,
        )
    ]
    # Into an existing buffer: PyTorch's own out= kernel, in its (1, d, T) layout.
    out = np.empty((n, 1024), np.float32)
    ref_out = np.empty_like(out)
    impls = {
        "reference": lambda: reference.interpolate(table, n, align="half_pixel", out=ref_out),
        "posembed": lambda: posembed.interpolate(table, n, align="half_pixel", out=out),
    }
    if torch is not None:
        src = torch.from_numpy(np.ascontiguousarray(table.T))[None]
        t_out = torch.empty((1, 1024, n))
        up = torch.ops.aten.upsample_linear1d.out
        impls["torch"] = lambda: up(src, [n], False, None, out=t_out)
    cases.append(
        Case(
            "interpolate",
            "out= given",
            stretch,
            out_bytes,
            impls,
            "write warm",
            lambda: bool(
                np.array_equal(
                    posembed.interpolate(table, n, align="half_pixel", out=out),
                    reference.interpolate(table, n, align="half_pixel"),
                )
            ),
            flops=flops,
        )
    )
    # lerp reads rows at random from a table that stays in cache, into an
    # output that streams through memory.
    lerp_rows = 512 if quick else 2048
    lerp_table = rng.standard_normal((lerp_rows, 1024), dtype=np.float32)
    npos = n  # as many rows as the stretch writes
    pos = rng.uniform(0, lerp_rows - 1, npos)
    cases.append(
        Case(
            "interpolate",
            "lerp",
            f"{npos} positions, {lerp_rows}x1024 f32",
            npos * ROW_BYTES,
            _lerp_impls(lerp_table, pos, torch),
            "write fresh",
            lambda: bool(
                np.array_equal(posembed.lerp(lerp_table, pos), reference.lerp(lerp_table, pos))
            ),
            flops=3 * npos * 1024,
        )
    )
    # Call overhead: a handful of positions in a small table.
    small = rng.standard_normal((128, 64), dtype=np.float32)
    few = np.array([1.5, 2.25, 7.0, 100.5])
    cases.append(
        Case(
            "interpolate",
            "lerp 4 positions",
            "4 positions, 128x64 f32",
            4 * 64 * 4,
            _lerp_impls(small, few, torch),
            None,
            lambda: bool(np.array_equal(posembed.lerp(small, few), reference.lerp(small, few))),
        )
    )
    return cases

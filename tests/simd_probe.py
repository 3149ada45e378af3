"""Every dispatched kernel on fixed inputs, saved for a comparison of SIMD levels.

Run as ``python -m tests.simd_probe OUT.npz`` in a process whose POSEMBED_SIMD
names the level; ``test_simd`` compares the files of all levels byte for byte
and with the NumPy twins. The inputs cover every float dtype, row lengths
that leave heads and tails around whole vectors, unaligned outputs, the
streamed (non-temporal) paths (thresholds lowered) and one and two threads.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

import posembed
from posembed import _core

DTYPES = (np.float16, ml_dtypes.bfloat16, np.float32, np.float64)
WIDTHS = (1, 7, 16, 33, 100)


def table(rng: np.random.Generator, rows: int, d: int, dtype: Any) -> np.ndarray:
    return rng.standard_normal((rows, d)).astype(dtype)


def unaligned(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An output whose rows start off any vector boundary."""
    n = int(np.prod(shape))
    return np.empty(n + 1, dtype)[1:].reshape(shape)


def cases(lib: Any = posembed) -> dict[str, Callable[[], np.ndarray]]:
    """name -> a call that returns the kernel's output (same inputs every time).

    ``lib`` is posembed, or ``posembed.reference`` for the twins' results.
    """
    found: dict[str, Callable[[], np.ndarray]] = {}
    rng = np.random.default_rng(6)
    for dtype in DTYPES:
        name = np.dtype(dtype).name
        for d in WIDTHS:
            t = table(rng, 37, d, dtype)
            key = f"{name}-d{d}"
            pos = rng.uniform(0, 36, 50)
            found[f"interpolate-{key}"] = lambda t=t: lib.interpolate(t, 91, align="half_pixel")
            found[f"interpolate-out-{key}"] = lambda t=t: lib.interpolate(
                t, 91, out=unaligned((91, t.shape[1]), t.dtype)
            )
            found[f"lerp-{key}"] = lambda t=t, p=pos: lib.lerp(t, p)
            grid = table(rng, 1 + 5 * 6, d, dtype)
            for method in ("bilinear", "bicubic"):
                found[f"resample-{method}-{key}"] = lambda g=grid, m=method: lib.resample_grid(
                    g, (5, 6), (9, 7), prefix=1, method=m
                )
                found[f"resample-antialias-{method}-{key}"] = lambda g=grid, m=method: (
                    lib.resample_grid(g, (5, 6), (3, 11), prefix=1, method=m, antialias=True)
                )
            found[f"interpolate-antialias-{key}"] = lambda t=t: lib.interpolate(
                t, 15, align="half_pixel", antialias=True
            )
            tok = table(rng, 300, d, dtype)
            ids = rng.integers(0, 300, (3, 29))
            found[f"embed-{key}"] = lambda a=tok, t=t, i=ids: lib.embed(a, i, t)
            found[f"embed-dropout-{key}"] = lambda a=tok, t=t, i=ids: lib.embed(
                a, i, t, dropout=0.3, seed=8
            )
            found[f"embed-dropout-out-{key}"] = lambda a=tok, t=t, i=ids: lib.embed(
                a, i, t, dropout=0.3, seed=8, out=unaligned((3, 29, t.shape[1]), t.dtype)
            )
            grad = table(rng, 200, d, dtype)
            rows = rng.integers(0, 37, 200)
            found[f"gather_backward-{key}"] = lambda g=grad, r=rows: lib.gather_backward(g, r, 40)
            found[f"gather-{key}"] = lambda t=t, r=rows: lib.gather(t, r[:50] % 37)
    found["dropout_mask"] = lambda: lib.dropout_mask((1000, 33), 0.25, 5)
    tokens = rng.integers(0, 50_000, 5000).astype(np.uint32)
    offsets = np.array([0, 1, 700, 2222, 2223, 5000])
    win = posembed.windows(tokens, 64, step=40, offsets=offsets)
    found["windows"] = lambda: lib.windows(tokens, 64, step=40, offsets=offsets).tokens
    for vdtype in (np.float32, np.float64, np.int64, np.uint64):
        for f in (1, 3, 16):
            values = rng.standard_normal((win.tokens.shape[0], 64, f)) * 100
            if vdtype == np.uint64:  # negatives would wrap to ~2^64, whose sums do not fit
                values = np.abs(values)
            values = values.astype(vdtype)
            for reduce in ("sum", "mean", "max", "first", "center"):
                name = f"stitch-{reduce}-{np.dtype(vdtype).name}-f{f}"
                found[name] = lambda v=values, r=reduce: lib.stitch(v, win, reduce=r)
    for n in (5, 100_003, 2**20):  # the shuffle's rounds, walks and blocks
        found[f"batch_order-{n}"] = lambda n=n: lib.BatchOrder(
            n,
            global_batch_size=64,
            micro_batch_size=8,
            world_size=2,
            seed=n,
            consumed_samples=16 * n,
        ).micro_batches(0, 3000)
    if lib is posembed:  # similarity's row pass (no twin of its own: the level check only)
        for dtype in (np.float32, np.float64):
            for d in (*WIDTHS, 1031):
                x = table(rng, 9, d, dtype) * np.logspace(-20, 20, 9)[:, None].astype(dtype)
                x[1, d // 2], x[2, 0], x[3] = np.nan, -np.inf, -0.0
                x[4] = np.finfo(dtype).smallest_subnormal * np.arange(d) % 5
                found[f"row_scales-{np.dtype(dtype).name}-d{d}"] = lambda x=x: np.concatenate(
                    _core.row_scales(x, threads=0)
                )
    return found


def main(path: str) -> None:
    results: dict[str, np.ndarray] = {}
    for threads in (1, 2):
        posembed.set_num_threads(threads)
        for streamed in (False, True):
            # Lowered thresholds put even these small calls on the parallel
            # and streamed paths.
            _core._probes.set_thresholds(1024 if streamed else -1, 4096 if streamed else -1)
            for name, call in cases().items():
                out = np.ascontiguousarray(call())
                results[f"{name}-t{threads}-s{int(streamed)}"] = out.view(np.uint8).reshape(-1)
    np.savez(path, simd=np.array(posembed.config()["simd"]), **results)


if __name__ == "__main__":
    main(sys.argv[1])

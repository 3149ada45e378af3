"""similarity: the cosine similarity of every pair of positions."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import posembed
from posembed import reference
from posembed.bench.case import Case
from posembed.bench.cases._shared import optional_torch


def build(quick: bool = False) -> list[Case]:
    rows = 1024 if quick else 2048
    table = np.random.default_rng(4).standard_normal((rows, 1024), dtype=np.float32)

    def numpy_cosine() -> object:
        x = table / np.linalg.norm(table, axis=1, keepdims=True)
        return x @ x.T

    impls: dict[str, Callable[[], object]] = {
        "reference": lambda: reference.similarity(table),
        "numpy": numpy_cosine,
        "posembed": lambda: posembed.similarity(table),
    }
    torch = optional_torch()
    if torch is not None:
        tt = torch.from_numpy(table)

        def torch_cosine() -> object:
            x = torch.nn.functional.normalize(tt, dim=1)
            return x @ x.T

        impls["torch"] = torch_cosine
    return [
        Case(
            "similarity",
            "all pairs",
            f"{rows} rows, d=1024 f32",
            rows * rows * 4,
            impls,
            "write fresh",
            lambda: bool(
                np.allclose(
                    posembed.similarity(table), reference.similarity(table), rtol=0, atol=1e-4
                )
            ),
            flops=_triangle_flops(rows, 1024),
            fused=True,
        )
    ]


def _triangle_flops(rows: int, d: int) -> int:
    """The float operations of similarity's lower-triangle products (BLAS's
    fused multiply-adds, two each), as ``posembed.similarity`` cuts them."""
    from posembed.kernels import _similarity

    return sum(
        2 * d * (r1 - r0) * (c1 - c0) for r0, r1, c0, c1 in _similarity.triangle_blocks(rows)
    )

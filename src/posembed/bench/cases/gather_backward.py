"""gather_backward: gradient rows summed into the rows they were gathered from."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import posembed
from posembed import reference
from posembed.bench.case import Case
from posembed.bench.cases._shared import optional_torch


def build(quick: bool = False) -> list[Case]:
    rng = np.random.default_rng(12)
    vocab, length, d, b, t = 50_257, 1024, 768, 1 if quick else 8, 1024
    grad = rng.standard_normal((b, t, d), dtype=np.float32)
    torch = optional_torch()
    cases = []
    for name, rows, where in (
        ("positions", length, np.broadcast_to(np.arange(t), (b, t)).copy()),
        ("token ids", vocab, rng.integers(0, vocab, (b, t))),
    ):

        def add_at(rows: int = rows, where: np.ndarray = where) -> np.ndarray:
            acc = np.zeros((rows, d), np.float32)
            np.add.at(acc, where, grad)
            return acc

        impls: dict[str, Callable[[], object]] = {
            "reference": partial(reference.gather_backward, grad, where, rows),
            "numpy": add_at,
            "posembed": partial(posembed.gather_backward, grad, where, rows),
        }
        if torch is not None:
            g2 = torch.from_numpy(grad.reshape(-1, d))
            w1 = torch.from_numpy(where.reshape(-1))

            def torch_way(rows: int = rows, g2: Any = g2, w1: Any = w1) -> object:
                return torch.zeros((rows, d)).index_add_(0, w1, g2)  # embedding's backward

            impls["torch"] = torch_way

        def check(rows: int = rows, where: np.ndarray = where) -> bool:
            return bool(
                np.array_equal(posembed.gather_backward(grad, where, rows), add_at(rows, where))
            )

        cases.append(
            Case(
                "gather_backward",
                name,
                f"grad {b}x{t}x{d} f32 -> {rows} rows",
                rows * d * 4,
                impls,
                None,
                check,
            )
        )
    # Call overhead: four gradient rows into a 128-row table.
    small = rng.standard_normal((4, 64), dtype=np.float32)
    at = np.array([1, 5, 5, 100])

    def add_at_small() -> np.ndarray:
        acc = np.zeros((128, 64), np.float32)
        np.add.at(acc, at, small)
        return acc

    impls = {
        "reference": partial(reference.gather_backward, small, at, 128),
        "numpy": add_at_small,
        "posembed": partial(posembed.gather_backward, small, at, 128),
    }
    if torch is not None:
        t_small, t_at = torch.from_numpy(small), torch.from_numpy(at)
        impls["torch"] = lambda: torch.zeros((128, 64)).index_add_(0, t_at, t_small)
    cases.append(
        Case(
            "gather_backward",
            "4 rows",
            "grad 4x64 f32 -> 128 rows",
            128 * 64 * 4,
            impls,
            None,
            lambda: bool(np.array_equal(posembed.gather_backward(small, at, 128), add_at_small())),
        )
    )
    return cases

"""extend: a table grown to 4x its rows, the new rows tiled."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import posembed
from posembed import reference
from posembed.bench.case import Case
from posembed.bench.cases._shared import optional_torch


def build(quick: bool = False) -> list[Case]:
    rows = 512 if quick else 2048
    table = np.random.default_rng(2).standard_normal((rows, 1024), dtype=np.float32)
    n = 4 * rows
    idx = np.arange(rows, n) % rows
    impls: dict[str, Callable[[], object]] = {
        "reference": lambda: reference.extend(table, n, init="tile"),
        "numpy": lambda: np.concatenate([table, table[idx]]),
        "posembed": lambda: posembed.extend(table, n, init="tile"),
    }
    torch = optional_torch()
    if torch is not None:
        tt, tidx = torch.from_numpy(table), torch.from_numpy(idx)
        impls["torch"] = lambda: torch.cat([tt, tt[tidx]])
    return [
        Case(
            "extend",
            "tile",
            f"{rows} -> {n} rows, d=1024 f32",
            n * 1024 * 4,
            impls,
            "write fresh",
            lambda: bool(
                np.array_equal(
                    posembed.extend(table, n, init="tile"), np.concatenate([table, table[idx]])
                )
            ),
        )
    ]

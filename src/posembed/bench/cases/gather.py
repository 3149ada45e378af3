"""gather: rows of a float32 table at int64 positions."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import posembed
from posembed import reference
from posembed.bench.case import Case
from posembed.bench.cases._shared import optional_torch
from posembed.bench.sizes import at_most, sizes

ROW = 1024 * 4  # bytes of a row of d=1024 float32


def build(quick: bool = False) -> list[Case]:
    rng = np.random.default_rng(0)
    torch = optional_torch()
    cases = []

    # The headline: 32x1024 int64 positions into a 2048x1024 table, out= given.
    b = 8 if quick else 32
    table = rng.standard_normal((2048, 1024), dtype=np.float32)
    pos = rng.integers(0, 2048, (b, 1024), dtype=np.int64)
    out = np.empty((b, 1024, 1024), np.float32)
    ref_out = np.empty_like(out)
    np_out = np.empty_like(out)
    impls: dict[str, Callable[[], object]] = {
        "reference": lambda: reference.gather(table, pos, out=ref_out),
        "numpy": lambda: np.take(table, pos, axis=0, out=np_out),
        "posembed": lambda: posembed.gather(table, pos, out=out),
    }
    if torch is not None:
        t_table, t_pos = torch.from_numpy(table), torch.from_numpy(pos.ravel())
        t_out = torch.empty((pos.size, 1024))
        impls["torch"] = lambda: torch.index_select(t_table, 0, t_pos, out=t_out)
    shape = f"{b}x1024 pos, 2048x1024 f32"
    cases.append(
        Case(
            "gather",
            "out= given",
            shape,
            out.nbytes,
            impls,
            "write warm",
            lambda: bool(
                np.array_equal(posembed.gather(table, pos, out=out), np.take(table, pos, axis=0))
            ),
        )
    )

    # Same work, a new output each call (page faults included).
    impls = {
        "reference": lambda: reference.gather(table, pos),
        "numpy": lambda: table[pos],
        "posembed": lambda: posembed.gather(table, pos),
    }
    if torch is not None:
        t_pos2 = torch.from_numpy(pos)
        impls["torch"] = lambda: torch.nn.functional.embedding(t_pos2, t_table)
    cases.append(
        Case(
            "gather",
            "fresh output",
            shape,
            out.nbytes,
            impls,
            "write fresh",
            lambda: bool(np.array_equal(posembed.gather(table, pos), table[pos])),
        )
    )

    # An output that stays in cache, out= given: the table takes half the
    # machine's in-cache size (sizes.py), the output a quarter.
    budget = sizes(quick).in_cache
    rows_c, n_c = at_most(budget // 2, ROW), at_most(budget // 4, ROW)
    table_c = rng.standard_normal((rows_c, 1024), dtype=np.float32)
    pos_c = rng.integers(0, rows_c, n_c, dtype=np.int64)
    out_c = np.empty((n_c, 1024), np.float32)
    ref_c, np_c = np.empty_like(out_c), np.empty_like(out_c)
    impls = {
        "reference": lambda: reference.gather(table_c, pos_c, out=ref_c),
        "numpy": lambda: np.take(table_c, pos_c, axis=0, out=np_c),
        "posembed": lambda: posembed.gather(table_c, pos_c, out=out_c),
    }
    if torch is not None:
        t_table_c, t_pos_c = torch.from_numpy(table_c), torch.from_numpy(pos_c)
        t_out_c = torch.empty((n_c, 1024))
        impls["torch"] = lambda: torch.index_select(t_table_c, 0, t_pos_c, out=t_out_c)
    # Output and table both live in cache, so the binding limit is a cached
    # copy of the output bytes (read + write), not a write alone.
    cases.append(
        Case(
            "gather",
            "in cache, out=",
            f"{n_c} pos, {rows_c}x1024 f32",
            out_c.nbytes,
            impls,
            "copy warm",
            lambda: bool(
                np.array_equal(posembed.gather(table_c, pos_c, out=out_c), table_c[pos_c])
            ),
        )
    )

    # Call overhead: one row of a small table.
    small = rng.standard_normal((128, 64), dtype=np.float32)
    impls = {
        "reference": lambda: reference.gather(small, 3),
        "numpy": lambda: np.take(small, 3, axis=0),
        "posembed": lambda: posembed.gather(small, 3),
    }
    if torch is not None:
        t_small = torch.from_numpy(small)
        impls["torch"] = lambda: t_small[3]
    cases.append(
        Case(
            "gather",
            "one row",
            "1 pos, 128x64 f32",
            small.shape[1] * 4,
            impls,
            None,
            lambda: bool(np.array_equal(posembed.gather(small, 3), small[3])),
        )
    )
    return cases

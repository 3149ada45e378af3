"""pytest-benchmark suite for resample_grid, grouped by problem (see bench/common.py)."""

from __future__ import annotations

import pytest

from posembed import bench

from .common import run_case


@pytest.mark.parametrize("impl", [*bench.COLUMNS, "roofline"])
@pytest.mark.parametrize("case", bench.CASE_NAMES["resample_grid"])
def bench_resample_grid(benchmark, case: str, impl: str) -> None:
    run_case(benchmark, "resample_grid", case, impl)

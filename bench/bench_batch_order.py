"""pytest-benchmark suite for batch_order, grouped by problem (see bench/common.py)."""

from __future__ import annotations

import pytest

from posembed import bench

from .common import run_case


@pytest.mark.parametrize("impl", [*bench.COLUMNS, "roofline"])
@pytest.mark.parametrize("case", bench.CASE_NAMES["batch_order"])
def bench_batch_order(benchmark, case: str, impl: str) -> None:
    run_case(benchmark, "batch_order", case, impl)

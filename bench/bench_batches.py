"""pytest-benchmark suite for batches, grouped by problem (see bench/common.py)."""

from __future__ import annotations

import pytest

from posembed import bench

from .common import run_case


@pytest.mark.parametrize("impl", [*bench.COLUMNS, "roofline"])
@pytest.mark.parametrize("case", bench.CASE_NAMES["batches"])
def bench_batches(benchmark, case: str, impl: str) -> None:
    run_case(benchmark, "batches", case, impl)

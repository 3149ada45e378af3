"""pytest-benchmark suite for gather_backward, grouped by problem (see bench/common.py)."""

from __future__ import annotations

import pytest

from posembed import bench

from .common import run_case


@pytest.mark.parametrize("impl", [*bench.COLUMNS, "roofline"])
@pytest.mark.parametrize("case", bench.CASE_NAMES["gather_backward"])
def bench_gather_backward(benchmark, case: str, impl: str) -> None:
    run_case(benchmark, "gather_backward", case, impl)

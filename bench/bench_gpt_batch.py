"""pytest-benchmark suite for gpt_batch, grouped by problem (see bench/common.py)."""

from __future__ import annotations

import pytest

from posembed import bench

from .common import run_case


@pytest.mark.parametrize("impl", [*bench.COLUMNS, "roofline"])
@pytest.mark.parametrize("case", bench.CASE_NAMES["gpt_batch"])
def bench_gpt_batch(benchmark, case: str, impl: str) -> None:
    run_case(benchmark, "gpt_batch", case, impl)

"""pytest-benchmark suite for the chunk command's pipeline (see bench/common.py)."""

from __future__ import annotations

import pytest

from posembed import bench

from .common import run_case


@pytest.mark.parametrize("impl", [*bench.COLUMNS, "roofline"])
@pytest.mark.parametrize("case", bench.CASE_NAMES["chunk"])
def bench_chunk(benchmark, case: str, impl: str) -> None:
    run_case(benchmark, "chunk", case, impl)

"""pytest-benchmark suite for posembed merge (see bench/common.py)."""

from __future__ import annotations

import pytest

from posembed import bench

from .common import run_case


@pytest.mark.parametrize("impl", [*bench.COLUMNS, "roofline"])
@pytest.mark.parametrize("case", bench.CASE_NAMES["merge"])
def bench_merge(benchmark, case: str, impl: str) -> None:
    run_case(benchmark, "merge", case, impl)

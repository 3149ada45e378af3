"""pytest-benchmark suite for blend, grouped by problem (see bench/common.py)."""

from __future__ import annotations

import pytest

from posembed import bench

from .common import run_case


@pytest.mark.parametrize("impl", [*bench.COLUMNS, "roofline"])
@pytest.mark.parametrize("case", bench.CASE_NAMES["blend"])
def bench_blend(benchmark, case: str, impl: str) -> None:
    run_case(benchmark, "blend", case, impl)

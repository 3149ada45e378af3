"""Shared driver of the pytest-benchmark suite.

    pytest bench --benchmark-group-by=group --benchmark-columns=median,iqr,ops
    BENCH_QUICK=1 pytest bench --benchmark-disable    # a smoke run: --quick's sizes

Each group times posembed, its reference twin, NumPy, PyTorch (when
installed) and the memory roofline of the same output bytes on one problem;
``posembed bench`` prints the same comparisons as ratios.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import pytest

from posembed import bench

QUICK = os.environ.get("BENCH_QUICK", "") not in ("", "0")


@lru_cache(maxsize=1)  # one kernel's arrays at a time: the files run kernel by kernel
def _cases(kernel: str) -> dict[str, bench.Case]:
    return {c.name: c for c in bench.cases_of(kernel, QUICK)}


def run_case(benchmark: Any, kernel: str, case: str, impl: str) -> None:
    c = _cases(kernel)[case]
    fn: Callable[[], object]
    if impl == "roofline":
        if c.roofline is None:
            pytest.skip("this case has no memory roofline (latency or compute bound)")
        fn = bench.roofline(c.roofline, c.out_bytes, c.source)
    elif impl in c.impls:
        fn = c.impls[impl]
    else:
        pytest.skip(f"no {impl} entry for this case (not installed, or no equivalent)")
    if impl == "posembed" and c.check is not None:
        assert c.check()
    benchmark.group = f"{kernel}: {case} ({c.shape})"
    benchmark.extra_info["out_bytes"] = c.out_bytes
    benchmark(fn)

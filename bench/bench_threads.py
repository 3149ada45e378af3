"""pytest-benchmark suite for thread scaling: each kernel in cache and in memory
at 1 and 2 threads (``posembed bench --threads 1,2`` prints the same as speed-ups).

    pytest bench/bench_threads.py --benchmark-group-by=group
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

import posembed
from posembed import bench


@cache
def _cases() -> dict[str, bench.ScalingCase]:
    return {f"{c.kernel}: {c.problem} ({c.size})": c for c in bench.scaling_cases()}


def _names() -> list[str]:
    # the names without building the arrays
    return [f"{k}: {name}" for k, names in bench.SCALING_NAMES.items() for name in names]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", _names())
def bench_threads(benchmark: Any, name: str, threads: int) -> None:
    case = _cases()[name]
    before = posembed.get_num_threads() if posembed.config()["num_threads_set"] else None
    posembed.set_num_threads(threads)
    try:
        benchmark.group = f"threads: {name}"
        benchmark.extra_info["bytes"] = case.nbytes
        benchmark(case.fn)
    finally:
        posembed.set_num_threads(before)

"""pytest-benchmark suite for thread scaling: each kernel in cache and in memory
(sized from this machine's caches) at 1 and 2 threads (``posembed bench
--threads 1,2`` prints the same as speed-ups).

    pytest bench/bench_threads.py --benchmark-group-by=group
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, lru_cache
from typing import Any

import pytest

import posembed
from posembed import bench

from .common import QUICK


@cache
def _cases() -> dict[str, bench.ScalingCase]:
    # listed without their arrays
    return {f"{c.kernel}: {c.problem} ({c.size})": c for c in bench.scaling_cases(QUICK)}


@lru_cache(maxsize=1)  # one problem's arrays at a time: in memory, each is 4x the cache
def _call(name: str) -> Callable[[], object]:
    return _cases()[name].make()


def _names() -> list[str]:
    # the names without building the cases
    return [f"{k}: {name}" for k, names in bench.SCALING_NAMES.items() for name in names]


# threads varies fastest, so each problem is built once for both counts
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", _names())
def bench_threads(benchmark: Any, name: str, threads: int) -> None:
    fn = _call(name)
    before = posembed.get_num_threads() if posembed.config()["num_threads_set"] else None
    posembed.set_num_threads(threads)
    try:
        benchmark.group = f"threads: {name}"
        benchmark.extra_info["bytes"] = _cases()[name].nbytes
        benchmark(fn)
    finally:
        posembed.set_num_threads(before)

"""pytest-benchmark suite for gather, grouped by problem.

    pytest bench --benchmark-group-by=group --benchmark-columns=median,iqr,ops

Each group times posembed, its reference twin, NumPy, PyTorch (when
installed) and the memory roofline of the same output bytes on the same
problem; ``posembed bench`` prints the same comparisons as ratios.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import pytest

from posembed import bench

IMPLS = ("posembed", "reference", "numpy", "torch", "roofline")


@cache
def _cases() -> dict[str, bench.Case]:
    return {c.name: c for c in bench.gather_cases()}


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", bench.GATHER_CASES)
def bench_gather(benchmark, case: str, impl: str) -> None:
    c = _cases()[case]
    fn: Callable[[], object]
    if impl == "roofline":
        if c.roofline is None:
            pytest.skip("a latency case has no roofline")
        fn = bench.roofline(c.roofline, c.out_bytes)
    elif impl in c.impls:
        fn = c.impls[impl]
    else:
        pytest.skip(f"no {impl} entry for this case (not installed, or no equivalent)")
    if impl == "posembed" and c.check is not None:
        assert c.check()
    benchmark.group = f"gather: {case} ({c.shape})"
    benchmark.extra_info["out_bytes"] = c.out_bytes
    benchmark(fn)

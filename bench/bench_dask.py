"""Throughput of ``posembed chunk`` on Dask with 1 and 2 workers, against the
one-process pipeline (``chunk_file``) in the same run.

    pytest bench/bench_dask.py --benchmark-group-by=group --benchmark-columns=median,ops

The input is a raw uint16 token file of BENCH_DASK_TOKENS tokens (default
2^26, 128 MiB) in 64 documents; windows of 1024 with step 768. Each worker is
a process with one thread (a LocalCluster on loopback), so ``workers=2`` is
two processes on two cores; the ratio of the medians is the scaling. Tokens
per second = BENCH_DASK_TOKENS / median.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("dask.array")  # the dask extra
distributed = pytest.importorskip("distributed")

from posembed.corpus._chunk import chunk_file  # noqa: E402
from posembed.dask import chunk_parts  # noqa: E402

TOKENS = int(os.environ.get("BENCH_DASK_TOKENS", 1 << 26))
SIZE, STEP = 1024, 768
PART = 1 << 23  # 8 partitions of the default input
GROUP = f"chunk {TOKENS} uint16 tokens, size {SIZE} step {STEP}"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("dask-bench")
    rng = np.random.default_rng(0)
    rng.integers(0, 50_257, TOKENS, dtype=np.uint16).tofile(folder / "train.bin")
    cuts = np.sort(rng.integers(0, TOKENS, 63))
    np.save(folder / "offsets.npy", np.concatenate([[0], cuts, [TOKENS]]).astype(np.int64))
    return folder / "train.bin", folder / "offsets.npy"


@pytest.fixture(scope="module", params=[1, 2], ids=lambda n: f"{n}-workers")
def cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    with distributed.LocalCluster(
        n_workers=request.param,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    ) as c:
        yield c


def _time(benchmark: Any, fn: Any, corpus: tuple[Path, Path], out: Path, **kw: Any) -> None:
    raw, offsets = corpus
    benchmark.group = GROUP
    common = {"size": SIZE, "step": STEP, "dtype": "uint16", "offsets_path": offsets}
    benchmark.pedantic(
        fn, args=(raw, out), kwargs={**common, "force": True, **kw}, rounds=3, warmup_rounds=1
    )


def bench_chunk_one_process(benchmark: Any, corpus: tuple[Path, Path], tmp_path: Path) -> None:
    _time(benchmark, chunk_file, corpus, tmp_path / "out", quiet=True)


def bench_chunk_dask(
    benchmark: Any, corpus: tuple[Path, Path], cluster: Any, tmp_path: Path
) -> None:
    with distributed.Client(cluster) as client:
        _time(benchmark, chunk_parts, corpus, tmp_path / "out", part_tokens=PART, scheduler=client)

"""Throughput of ``posembed chunk`` from an object store (a moto S3 server on
the loopback address, read through s3fs) against the same file on local
disk, and the store's own read of those bytes in the same run: the batches
the pipeline reads (ranged GETs) and one whole-object GET.

    pytest bench/bench_store.py --benchmark-group-by=group --benchmark-columns=median,ops

The input is a 1-D uint16 ``.npy`` file of BENCH_STORE_TOKENS tokens
(default 2^26, 128 MiB); windows of 1024. The ratio of the medians "store /
disk" is what reading from the store costs; "store / ranged GETs" is the
pipeline's own overhead over the store's reads (moto serves ranges slower
than whole objects).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("moto.server")
pytest.importorskip("s3fs")

from posembed.corpus._chunk import chunk_file

from .store_server import s3_server

TOKENS = int(os.environ.get("BENCH_STORE_TOKENS", 1 << 26))
SIZE = 1024
GROUP = f"chunk {TOKENS} uint16 tokens from a store, size {SIZE}"
RANGE_BYTES = 8 << 20


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Path]]:
    folder = tmp_path_factory.mktemp("store-bench")
    rng = np.random.default_rng(0)
    np.save(folder / "train.npy", rng.integers(0, 50_257, TOKENS, dtype=np.uint16))
    with s3_server("bench") as fs:
        fs.put(str(folder / "train.npy"), "bench/train.npy")
        yield fs, folder


def _chunk(src: str, out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    chunk_file(src, out, size=SIZE, quiet=True)


@pytest.mark.benchmark(group=GROUP)
def bench_chunk_from_disk(benchmark: Any, corpus: tuple[Any, Path]) -> None:
    _, folder = corpus
    benchmark.pedantic(_chunk, (str(folder / "train.npy"), folder / "out"), rounds=5)


@pytest.mark.benchmark(group=GROUP)
def bench_chunk_from_store(benchmark: Any, corpus: tuple[Any, Path]) -> None:
    _, folder = corpus
    benchmark.pedantic(_chunk, ("s3://bench/train.npy", folder / "out"), rounds=5)


@pytest.mark.benchmark(group=GROUP)
def bench_store_ranged_gets(benchmark: Any, corpus: tuple[Any, Path]) -> None:
    fs, _ = corpus
    size = fs.info("bench/train.npy")["size"]

    def read() -> None:
        for start in range(0, size, RANGE_BYTES):
            fs.cat_file("bench/train.npy", start=start, end=min(size, start + RANGE_BYTES))

    benchmark.pedantic(read, rounds=5)


@pytest.mark.benchmark(group=GROUP)
def bench_store_whole_get(benchmark: Any, corpus: tuple[Any, Path]) -> None:
    fs, _ = corpus
    benchmark.pedantic(fs.cat_file, ("bench/train.npy",), rounds=5)

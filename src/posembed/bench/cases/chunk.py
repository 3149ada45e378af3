"""chunk: the ``posembed chunk`` pipeline, a token file to windows on disk."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

import posembed
from posembed import reference
from posembed.bench.case import Case, unmeasured
from posembed.bench.cases._shared import absent, corpus, write_parquet
from posembed.bench.scratch import scratch_dir


def build(quick: bool = False) -> list[Case]:
    from posembed.corpus._chunk import chunk_file

    # A nanoGPT-style raw uint16 token file cut into blocks of 1024 (a whole
    # number of them, so every tail mode gives the same windows as NumPy's).
    size, count = 1024, 1 << (13 if quick else 17)
    work = scratch_dir()
    src = work / "train.bin"
    rng = np.random.default_rng(9)
    rng.integers(0, 50_257, count * size, dtype=np.uint16).tofile(src)
    out_bytes = count * size * 2 + 3 * count * 8

    def output_dir(impl: str) -> Path:
        out = work / impl
        shutil.rmtree(out, ignore_errors=True)
        return out

    def ours() -> object:
        return chunk_file(src, output_dir("posembed"), size=size, dtype="uint16", quiet=True)

    def save_all(impl: str, **arrays: np.ndarray) -> None:
        out = output_dir(impl)
        out.mkdir()
        for name, array in arrays.items():
            np.save(out / f"{name}.npy", array)

    def numpy_way() -> None:  # load it all, cut with sliding_window_view, save
        tokens = np.fromfile(src, np.uint16)
        rows = np.ascontiguousarray(np.lib.stride_tricks.sliding_window_view(tokens, size)[::size])
        n = len(rows)
        save_all(
            "numpy",
            windows=rows,
            starts=np.arange(n, dtype=np.int64) * size,
            lengths=np.full(n, size, np.int64),
            documents=np.zeros(n, np.int64),
        )

    def reference_way() -> None:
        w = reference.windows(np.fromfile(src, np.uint16), size)
        save_all(
            "reference",
            windows=w.tokens,
            starts=w.starts,
            lengths=w.lengths,
            documents=w.documents,
        )

    def check() -> bool:
        ours()
        want = posembed.windows(np.fromfile(src, np.uint16), size)
        got = np.load(work / "posembed" / "windows.npy", mmap_mode="r")
        starts = np.load(work / "posembed" / "starts.npy")
        return bool(np.array_equal(got, want.tokens) and np.array_equal(starts, want.starts))

    impls: dict[str, Callable[[], object]] = {
        "reference": reference_way,
        "numpy": numpy_way,
        "posembed": ours,
    }
    return [
        Case(
            "chunk",
            "token file",
            f"{count * size * 2 >> 20} MB raw uint16 file, size 1024, on disk",
            out_bytes,
            impls,
            "file write",
            check,
            in_bytes=count * size * 2,
        ),
        *_parquet_cases(quick),
        _indexed_case(quick),
    ]


def _indexed_case(quick: bool) -> Case:
    """From a Megatron indexed dataset (uint16, one sequence a document, as
    Megatron's preprocessing writes GPT-2 tokens), windows of 1024 written as
    ``.npy`` files; against NumPy reading the ``.bin`` and ``.idx`` whole and
    cutting each document with ``sliding_window_view``."""
    from posembed.corpus._chunk import chunk_file

    size = 1024
    data = corpus(4_000 if quick else 64_000, np.uint16, seed=11)
    work = scratch_dir()
    prefix = work / "corpus_text_document"
    posembed.write_indexed(prefix, data.tokens, data.offsets, force=True)
    windows = int(np.sum(-(-data.lengths // size)))
    out_bytes = windows * size * 2 + 3 * windows * 8

    def ours() -> object:
        out = work / "from-indexed"
        shutil.rmtree(out, ignore_errors=True)
        return chunk_file(prefix, out, size=size, quiet=True)

    def reference_way() -> None:
        corpus_ = reference.IndexedCorpus(prefix)
        tokens, offsets = corpus_.to_arrays()
        w = reference.windows(tokens, size, offsets=offsets)
        out = work / "reference-indexed"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        for name in ("tokens", "starts", "lengths", "documents"):
            np.save(out / f"{name}.npy", getattr(w, name))

    def check() -> bool:
        ours()
        want = posembed.windows(data.tokens, size, offsets=data.offsets)
        got = np.load(work / "from-indexed" / "windows.npy", mmap_mode="r")
        return bool(np.array_equal(got, want.tokens))

    return Case(
        "chunk",
        "indexed dataset",
        f"{data.tokens.nbytes >> 20} MB .bin/.idx of uint16 in {len(data.lengths)} documents, "
        "size 1024, on disk",
        out_bytes,
        {"reference": reference_way, "posembed": ours},
        "file write",
        check,
        in_bytes=data.tokens.nbytes,
    )


def _parquet_cases(quick: bool) -> list[Case]:
    """From Parquet: a tokenized corpus (int32 id lists, one document a row,
    snappy) in row groups of 1000 rows, and the same corpus in one row group
    (pyarrow's default layout for it), windowed by ``chunk_file`` in-process.
    Throughput counts the tokens (4 bytes each), not the file's compressed
    bytes; the roofline is pyarrow's own decoding of the column on the same
    threads."""
    try:
        import pyarrow.parquet as pq
    except ImportError:  # the arrow extra: without it there is no such case
        return [
            unmeasured("chunk", name, absent("pyarrow"))
            for name in ("Parquet file", "Parquet, one row group")
        ]
    from posembed.corpus._chunk import chunk_file

    size = 1024
    data = corpus(2_000 if quick else 32_000, np.int32, seed=10)
    tokens, offsets, lengths = data
    windows = int(np.sum(-(-lengths // size)))
    out_bytes = windows * size * 4 + 3 * windows * 8
    work = scratch_dir()

    def case(name: str, group_rows: int, layout: str) -> Case:
        src = work / f"corpus-{group_rows}.parquet"
        write_parquet(src, data, group_rows)
        out = work / f"from-parquet-{group_rows}"

        def ours() -> object:
            shutil.rmtree(out, ignore_errors=True)
            return chunk_file(src, out, size=size, quiet=True)

        def reference_way() -> None:  # the whole column read, cut by the NumPy twin, saved
            column = pq.read_table(src, columns=["input_ids"]).column(0).combine_chunks()
            flat = column.values.to_numpy()
            w = reference.windows(flat, size, offsets=column.offsets.to_numpy())
            there = work / "reference-parquet"
            shutil.rmtree(there, ignore_errors=True)
            there.mkdir()
            for part in ("tokens", "starts", "lengths", "documents"):
                np.save(there / f"{part}.npy", getattr(w, part))

        def check() -> bool:
            ours()
            want = posembed.windows(tokens, size, offsets=offsets)
            got = np.load(out / "windows.npy", mmap_mode="r")
            documents = np.load(out / "documents.npy")
            return bool(
                np.array_equal(got, want.tokens) and np.array_equal(documents, want.documents)
            )

        return Case(
            "chunk",
            name,
            f"{tokens.nbytes >> 20} MB of int32 tokens in {len(lengths)} documents, "
            f"{layout}, size 1024, Parquet on disk",
            out_bytes,
            {"reference": reference_way, "posembed": ours},
            "parquet decode",
            check,
            in_bytes=tokens.nbytes,
            source=src,
        )

    return [
        case("Parquet file", 1000, "row groups of 1000 rows"),
        case("Parquet, one row group", len(lengths), "one row group"),
    ]

"""posembed chunk with Megatron indexed datasets: read as input (the windows of
its documents or sequences equal those of the same tokens and offsets as a
.npy file, byte for byte), written as output (--format megatron, which
megatron-core reads back), on Dask, and in windows()."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed
import posembed.corpus._chunk as chunk_module
from posembed.corpus._chunk import chunk_file
from posembed.io._indexed_write import IndexedWriter
from posembed.io._tokens import ChunkError

from .conftest import megatron_or_skip

OUTPUTS = ("windows.npy", "starts.npy", "lengths.npy", "documents.npy")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, np.ndarray]:
    """An indexed dataset of 60 documents of 1 to 3 sequences (some empty) and
    its tokens; returns (prefix, tokens, sequence lengths, document indices)."""
    folder = tmp_path_factory.mktemp("indexed")
    rng = np.random.default_rng(12)
    per_doc = rng.integers(1, 4, 60)
    lengths = rng.integers(0, 300, int(per_doc.sum())).astype(np.int32)
    tokens = rng.integers(0, 60_000, int(lengths.sum())).astype(np.uint16)
    with IndexedWriter(folder / "d.bin", folder / "d.idx", np.uint16) as writer:
        writer.write(tokens, lengths, np.cumsum(per_doc))
        writer.finish()
    return folder / "d", tokens, lengths, np.concatenate([[0], np.cumsum(per_doc)])


def offsets_of(lengths: np.ndarray, indices: np.ndarray, unit: str) -> np.ndarray:
    ends = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    return ends[indices] if unit == "documents" else ends


def same_outputs(a: Path, b: Path) -> None:
    for name in OUTPUTS:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.mark.parametrize("unit", ["documents", "sequences"])
@pytest.mark.parametrize(
    ("size", "step", "tail"), [(64, 48, "pad"), (100, 100, "shift"), (50, 7, "drop")]
)
def test_windows_of_an_indexed_dataset_equal_those_of_its_tokens(
    dataset, tmp_path, monkeypatch, unit, size, step, tail
):
    prefix, tokens, lengths, indices = dataset
    monkeypatch.setattr(chunk_module, "MEMORY_BYTES", 60_000)  # many batches
    np.save(tmp_path / "t.npy", tokens)
    np.save(tmp_path / "o.npy", offsets_of(lengths, indices, unit))
    want = chunk_file(
        tmp_path / "t.npy",
        tmp_path / "want",
        size=size,
        step=step,
        tail=tail,
        offsets_path=tmp_path / "o.npy",
        quiet=True,
    )
    for given in (prefix, Path(f"{prefix}.idx"), Path(f"{prefix}.bin")):
        out = tmp_path / given.name
        meta = chunk_file(
            given,
            out,
            size=size,
            step=step,
            tail=tail,
            quiet=True,
            documents=None if unit == "documents" else unit,
        )
        same_outputs(tmp_path / "want", out)
        assert meta["documents_are"] == unit
        assert {k: meta[k] for k in ("tokens", "documents", "windows")} == {
            k: want[k] for k in ("tokens", "documents", "windows")
        }


def test_windows_and_dask_take_an_indexed_dataset(dataset, tmp_path):
    prefix, tokens, lengths, indices = dataset
    offsets = offsets_of(lengths, indices, "sequences")
    corpus = posembed.IndexedCorpus(prefix, documents="sequences")
    got = posembed.windows(corpus, 32, step=20)
    want = posembed.windows(tokens, 32, step=20, offsets=offsets)
    assert got.tokens.tobytes() == want.tokens.tobytes()
    assert np.array_equal(got.documents, want.documents)
    with pytest.raises(ValueError, match=r"offsets must not be given with an IndexedCorpus"):
        posembed.windows(corpus, 32, offsets=offsets)
    dask = pytest.importorskip("dask")
    from posembed.dask import chunk_parts, read_parts

    with dask.config.set(scheduler="sync"):
        chunk_parts(
            prefix, tmp_path / "parts", size=32, step=20, part_tokens=5000, documents="sequences"
        )
    parted = read_parts(tmp_path / "parts")
    assert np.asarray(parted.tokens[: len(parted.tokens)]).tobytes() == want.tokens.tobytes()


@pytest.mark.parametrize("tail", ["pad", "shift"])
def test_windows_written_as_an_indexed_dataset(dataset, tmp_path, tail):
    prefix, *_ = dataset
    chunk_file(prefix, tmp_path / "npy", size=64, step=48, tail=tail, quiet=True)
    meta = chunk_file(
        prefix, tmp_path / "m", size=64, step=48, tail=tail, quiet=True, format="megatron"
    )
    assert meta["format"] == "megatron"
    rows = np.load(tmp_path / "npy" / "windows.npy")
    lengths = np.load(tmp_path / "npy" / "lengths.npy")
    documents = np.load(tmp_path / "npy" / "documents.npy")
    got = posembed.IndexedCorpus(tmp_path / "m", documents="sequences")
    assert got.dtype == np.uint16
    assert np.array_equal(got.sequence_lengths, lengths)  # no padding written
    for i in range(len(got)):
        assert got[i].tobytes() == rows[i, : lengths[i]].tobytes()
    # one Megatron document per input document that has windows
    runs = np.concatenate([[0], np.flatnonzero(np.diff(documents)) + 1, [len(documents)]])
    assert got.document_indices.tolist() == runs.tolist()


def test_uint32_windows_are_written_as_int32_and_must_fit(tmp_path):
    tokens = np.arange(1000, dtype=np.uint32)
    np.save(tmp_path / "t.npy", tokens)
    chunk_file(tmp_path / "t.npy", tmp_path / "m", size=100, quiet=True, format="megatron")
    got = posembed.IndexedCorpus(tmp_path / "m")
    assert got.dtype == np.int32
    assert got.to_arrays()[0].tolist() == tokens.tolist()
    tokens[500] = 2**31
    np.save(tmp_path / "t.npy", tokens)
    with pytest.raises(ChunkError, match=r"--format megatron: .*2147483648"):
        chunk_file(tmp_path / "t.npy", tmp_path / "n", size=100, quiet=True, format="megatron")
    assert not list(tmp_path.glob("n.*"))


def test_the_indexed_output_is_replaced_only_with_force_and_never_mismatched(dataset, tmp_path):
    prefix, *_ = dataset
    out = tmp_path / "m"
    chunk_file(prefix, out, size=64, quiet=True, format="megatron")
    first = Path(f"{out}.idx").read_bytes()
    with pytest.raises(ChunkError, match=r"m\.idx exists; pass --force"):
        chunk_file(prefix, out, size=32, quiet=True, format="megatron")
    chunk_file(prefix, out, size=32, quiet=True, format="megatron", force=True)
    assert Path(f"{out}.idx").read_bytes() != first
    posembed.IndexedCorpus(out)  # a consistent pair
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.bin", "m.idx"]
    with pytest.raises(ChunkError, match=r"would replace the input"):
        chunk_file(prefix, prefix, size=32, quiet=True, format="megatron", force=True)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dtype": "uint16"}, r"--dtype applies to raw token files; an indexed dataset"),
        ({"offsets_path": "o.npy"}, r"--offsets applies to token files; an indexed dataset"),
        ({"column": "input_ids"}, r"--column applies to Arrow and Parquet input; .* indexed"),
        ({"documents": "pages"}, r"--documents must be one of documents, sequences; got 'pages'"),
    ],
)
def test_options_an_indexed_dataset_does_not_take(dataset, tmp_path, options, message):
    prefix, *_ = dataset
    with pytest.raises(ChunkError, match=message):
        chunk_file(prefix, tmp_path / "out", size=8, **options)


def test_a_crafted_index_is_one_line_and_exit_2(dataset, tmp_path):
    prefix, *_ = dataset
    for ext in ("idx", "bin"):
        (tmp_path / f"c.{ext}").write_bytes(Path(f"{prefix}.{ext}").read_bytes())
    raw = bytearray((tmp_path / "c.idx").read_bytes())
    raw[9] = 2  # version 2
    (tmp_path / "c.idx").write_bytes(bytes(raw))
    run = [sys.executable, "-c", "import sys; from posembed.cli import main; sys.exit(main())"]
    done = subprocess.run(
        [*run, "chunk", str(tmp_path / "c"), "-o", str(tmp_path / "out"), "--size", "8"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert "version is 2" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_bin_that_shrinks_while_chunked_stops_the_run(dataset, tmp_path, monkeypatch):
    prefix, *_ = dataset
    for ext in ("idx", "bin"):
        (tmp_path / f"c.{ext}").write_bytes(Path(f"{prefix}.{ext}").read_bytes())
    monkeypatch.setattr(chunk_module, "MEMORY_BYTES", 60_000)
    from posembed.corpus._sink_npy import NpySink

    real_read, real_cut = posembed.io._tokens.TokenFile.read_into, NpySink.cut_from

    def read_then_shrink(self, start, stop, buffer):
        out = real_read(self, start, stop, buffer)
        os.truncate(self.path, 100)
        return out

    def cut_then_shrink(self, begin, tokens, *args):
        real_cut(self, begin, tokens, *args)
        os.truncate(tokens.path, 100)

    monkeypatch.setattr(posembed.io._tokens.TokenFile, "read_into", read_then_shrink)
    monkeypatch.setattr(NpySink, "cut_from", cut_then_shrink)
    for fmt in ("npy", "megatron"):  # cut straight from the file, and beside threads
        with pytest.raises(ChunkError, match=r"c\.bin: input changed while reading"):
            chunk_file(tmp_path / "c", tmp_path / "out", size=64, quiet=True, format=fmt)
        assert not (tmp_path / "out").exists()
        (tmp_path / "c.bin").write_bytes(Path(f"{prefix}.bin").read_bytes())


@pytest.fixture(scope="module")
def megatron() -> Any:
    megatron_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module("megatron.core.datasets.indexed_dataset")


def test_megatron_reads_the_windows_written_for_it(dataset, tmp_path, megatron):
    prefix, *_ = dataset
    chunk_file(prefix, tmp_path / "npy", size=64, step=48, quiet=True)
    chunk_file(prefix, tmp_path / "m", size=64, step=48, quiet=True, format="megatron")
    rows = np.load(tmp_path / "npy" / "windows.npy")
    lengths = np.load(tmp_path / "npy" / "lengths.npy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = megatron.IndexedDataset(str(tmp_path / "m"))
    assert len(ds) == len(rows)
    for i in range(len(ds)):
        assert ds[i].tobytes() == rows[i, : lengths[i]].tobytes()

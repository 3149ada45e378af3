"""posembed convert: any corpus to a Megatron indexed dataset, streaming, byte
for byte what the in-memory writer and its NumPy twin write, and what
megatron-core's own builder writes and its reader reads."""

from __future__ import annotations

import importlib
import itertools
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed
from posembed import reference
from posembed.corpus import _convert
from posembed.corpus._convert import convert_file
from posembed.io._indexed_write import IndexedWriter
from posembed.io._tokens import ChunkError

from .conftest import megatron_or_skip, run_peak_rss, skip_if_sanitized


def corpus(seed: int, documents: int = 40, high: int = 50_000) -> tuple[np.ndarray, np.ndarray]:
    """Tokens (int32) and CSR offsets with empty documents among them."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 400, documents)
    lengths[rng.integers(0, documents, 3)] = 0
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return rng.integers(0, high, int(offsets[-1])).astype(np.int32), offsets


def files(prefix: Path) -> tuple[bytes, bytes]:
    return Path(f"{prefix}.idx").read_bytes(), Path(f"{prefix}.bin").read_bytes()


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    # small batches and blocks: documents span many, EODs land at their edges
    monkeypatch.setattr(_convert, "COPY_CALL_BYTES", 4096)
    monkeypatch.setattr(posembed.io._indexed, "COPY_BLOCK_BYTES", 512)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("block", [1, 300, 1 << 20], ids=["a token a block", "blocks", "default"])
def test_the_threads_write_what_the_twin_writes(tmp_path, monkeypatch, threads, block):
    # blocks of a call read, checked and written on several threads, an EOD at
    # any block edge; byte-swapped, narrowed and widened input alike
    monkeypatch.setattr(_convert, "COPY_CALL_BYTES", 8 * block)
    monkeypatch.setattr(posembed.io._indexed, "COPY_BLOCK_BYTES", block)
    tokens, offsets = corpus(11, documents=60)
    np.save(tmp_path / "o.npy", offsets)
    wide = tokens.copy()
    wide[len(wide) // 2] = 70_000  # past uint16: what was written is widened mid-run
    cases = [
        (tokens.astype(">u2"), ">u2", {}),
        (tokens.astype("<i8"), "<i8", {"vocab_size": 50_000}),
        ((tokens % 200).astype("<u1"), "<u1", {}),
        (wide, "<i4", {}),
        (wide.astype("<u8"), "<u8", {"output_dtype": np.int64}),  # converted on write
    ]
    posembed.set_num_threads(threads)
    try:
        for k, (data, dtype, options) in enumerate(cases):
            data.tofile(tmp_path / f"t{k}.raw")
            convert_file(
                tmp_path / f"t{k}.raw",
                tmp_path / f"c{k}",
                dtype=dtype,
                offsets_path=tmp_path / "o.npy",
                append_eod=7,
                quiet=True,
                **options,
            )
            twin = {"dtype" if key == "output_dtype" else key: v for key, v in options.items()}
            native = data.astype(data.dtype.newbyteorder("="))
            reference.write_indexed(tmp_path / f"r{k}", native, offsets, append_eod=7, **twin)
            assert files(tmp_path / f"c{k}") == files(tmp_path / f"r{k}"), dtype
    finally:
        posembed.set_num_threads(None)


@pytest.mark.parametrize("eod", [None, 0, 50_256])
@pytest.mark.parametrize("vocab", [None, 50_257, 100_000])
def test_a_token_file_converts_as_the_writers_write_it(tmp_path, small_batches, eod, vocab):
    tokens, offsets = corpus(1)
    np.save(tmp_path / "t.npy", tokens)
    np.save(tmp_path / "o.npy", offsets)
    meta = convert_file(
        tmp_path / "t.npy",
        tmp_path / "c",
        offsets_path=tmp_path / "o.npy",
        append_eod=eod,
        vocab_size=vocab,
        quiet=True,
    )
    posembed.write_indexed(tmp_path / "w", tokens, offsets, append_eod=eod, vocab_size=vocab)
    reference.write_indexed(tmp_path / "r", tokens, offsets, append_eod=eod, vocab_size=vocab)
    assert files(tmp_path / "c") == files(tmp_path / "w") == files(tmp_path / "r")
    assert meta["dtype"] == ("int32" if vocab == 100_000 else "uint16")
    assert meta["documents"] == len(offsets) - 1
    assert meta["sequences"] == int((np.diff(offsets) > 0).sum())


def test_every_source_converts_alike(tmp_path, small_batches):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    tokens, offsets = corpus(2)
    np.save(tmp_path / "t.npy", tokens)
    np.save(tmp_path / "o.npy", offsets)
    tokens.astype(np.uint16).tofile(tmp_path / "t.raw")
    docs = [tokens[a:b].tolist() for a, b in itertools.pairwise(offsets)]
    pq.write_table(
        pa.table({"input_ids": pa.array(docs, pa.list_(pa.int32()))}),
        tmp_path / "t.parquet",
        row_group_size=7,
    )
    convert_file(tmp_path / "t.npy", tmp_path / "a", offsets_path=tmp_path / "o.npy", quiet=True)
    convert_file(
        tmp_path / "t.raw",
        tmp_path / "b",
        dtype="uint16",
        offsets_path=tmp_path / "o.npy",
        quiet=True,
    )
    convert_file(tmp_path / "t.parquet", tmp_path / "c", quiet=True)
    convert_file(tmp_path / "a", tmp_path / "d", quiet=True)  # an indexed dataset itself
    assert files(tmp_path / "a") == files(tmp_path / "b") == files(tmp_path / "c")
    assert files(tmp_path / "a") == files(tmp_path / "d")


def test_an_indexed_dataset_converts_by_documents_or_sequences(tmp_path):
    # three documents of 2, 1 and 0 sequences
    lengths = np.array([3, 4, 5], np.int32)
    with IndexedWriter(tmp_path / "m.bin", tmp_path / "m.idx", "uint16") as w:
        w.write(np.arange(12, dtype=np.uint16), lengths, [2, 3, 3])
        w.finish()
    convert_file(tmp_path / "m", tmp_path / "d", quiet=True, append_eod=99)
    convert_file(tmp_path / "m", tmp_path / "s", quiet=True, documents="sequences")
    by_doc = posembed.IndexedCorpus(tmp_path / "d")
    assert by_doc.sequence_lengths.tolist() == [8, 6]  # the sequences of a document joined
    assert by_doc.document_indices.tolist() == [0, 1, 2, 2]  # the third: no sequence
    assert by_doc[0].tolist() == [*range(7), 99]
    by_seq = posembed.IndexedCorpus(tmp_path / "s")
    assert by_seq.sequence_lengths.tolist() == [3, 4, 5]
    assert by_seq.document_indices.tolist() == [0, 1, 2, 3]


def test_a_document_larger_than_the_budget_streams(tmp_path, small_batches):
    tokens = np.random.default_rng(3).integers(0, 60_000, 100_003).astype(np.uint16)
    np.save(tmp_path / "t.npy", tokens)
    meta = convert_file(tmp_path / "t.npy", tmp_path / "c", append_eod=7, quiet=True)
    got = posembed.IndexedCorpus(tmp_path / "c")
    assert (meta["documents"], meta["sequences"], meta["tokens"]) == (1, 1, 100_004)
    assert got.to_arrays()[0].tobytes() == np.append(tokens, np.uint16(7)).tobytes()


@pytest.mark.parametrize("where", ["first range", "middle", "eod"])
def test_an_id_past_uint16s_widens_what_was_written(tmp_path, small_batches, where):
    tokens, offsets = corpus(4, high=60_000)
    eod = None
    if where == "eod":
        eod = 65_499
    else:
        tokens[5 if where == "first range" else len(tokens) // 2] = 65_499
    np.save(tmp_path / "t.npy", tokens)
    np.save(tmp_path / "o.npy", offsets)
    meta = convert_file(
        tmp_path / "t.npy",
        tmp_path / "c",
        offsets_path=tmp_path / "o.npy",
        append_eod=eod,
        quiet=True,
    )
    reference.write_indexed(tmp_path / "r", tokens, offsets, append_eod=eod)
    assert meta["dtype"] == "int32"
    assert files(tmp_path / "c") == files(tmp_path / "r")


def test_ids_that_do_not_fit_name_their_document(tmp_path):
    tokens, offsets = corpus(5)
    tokens[int(offsets[9]) + 2] = -4  # document 9 (non-empty: see below)
    assert offsets[10] > offsets[9] + 2
    np.save(tmp_path / "t.npy", tokens)
    np.save(tmp_path / "o.npy", offsets)
    with pytest.raises(ChunkError, match=r"token id -4 in document 9: token ids are >= 0"):
        convert_file(tmp_path / "t.npy", tmp_path / "c", offsets_path=tmp_path / "o.npy")
    tokens[int(offsets[9]) + 2] = 3
    np.save(tmp_path / "t.npy", tokens)
    with pytest.raises(ChunkError, match=r"--output-dtype int8 holds at most 127"):
        convert_file(
            tmp_path / "t.npy",
            tmp_path / "c",
            offsets_path=tmp_path / "o.npy",
            output_dtype="int8",
        )
    assert not any(p.name.startswith("c.") for p in tmp_path.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.npy", "t.npy"]  # no temporaries


def test_force_replaces_an_indexed_dataset_and_nothing_else(tmp_path):
    tokens, _offsets = corpus(6)
    np.save(tmp_path / "t.npy", tokens)
    posembed.write_indexed(tmp_path / "c", tokens[:10], [0, 10])
    with pytest.raises(ChunkError, match=r"c\.idx exists; pass --force"):
        convert_file(tmp_path / "t.npy", tmp_path / "c")
    convert_file(tmp_path / "t.npy", tmp_path / "c", force=True, quiet=True)
    assert posembed.IndexedCorpus(tmp_path / "c").token_count == len(tokens)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.bin", "c.idx", "t.npy"]
    Path(f"{tmp_path / 'x'}.bin").write_bytes(b"precious")
    with pytest.raises(ChunkError, match=r"not part of an indexed dataset"):
        convert_file(tmp_path / "t.npy", tmp_path / "x", force=True)
    assert Path(f"{tmp_path / 'x'}.bin").read_bytes() == b"precious"


def test_an_input_that_shrinks_while_converted_leaves_no_output(tmp_path, monkeypatch):
    tokens, _offsets = corpus(7)
    np.save(tmp_path / "t.npy", tokens)
    # many calls of many blocks: the file shrinks after the first call
    monkeypatch.setattr(_convert, "COPY_CALL_BYTES", 4096)
    monkeypatch.setattr(posembed.io._indexed, "COPY_BLOCK_BYTES", 512)
    real = IndexedWriter.copy_from

    def copy_then_shrink(self, tokens, *args, **kwargs):
        out = real(self, tokens, *args, **kwargs)
        os.truncate(tokens.path, 1000)
        return out

    monkeypatch.setattr(IndexedWriter, "copy_from", copy_then_shrink)
    with pytest.raises(ChunkError, match=r"t\.npy: input changed while reading"):
        convert_file(tmp_path / "t.npy", tmp_path / "c", quiet=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.npy"]


def test_a_prefix_that_names_a_folder_is_refused_writing_nothing(tmp_path):
    # DIR/ (or DIR, a folder) would write DIR.bin and DIR.idx beside the folder:
    # refused as write_indexed refuses it, by convert and by chunk and pack's
    # --format megatron, which share the output's checks
    from posembed.corpus._chunk import chunk_file
    from posembed.corpus._pack_output import pack_file

    tokens, offsets = corpus(10)
    np.save(tmp_path / "t.npy", tokens)
    np.save(tmp_path / "o.npy", offsets)
    (tmp_path / "d").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    folder = r"output .*d is a folder; give PREFIX for PREFIX\.bin and PREFIX\.idx"
    for out, match in (
        (f"{tmp_path / 'd'}{os.sep}", r"output .*d/ names no file prefix"),
        (f"{tmp_path / 'new'}{os.sep}", r"output .*new/ names no file prefix"),
        (tmp_path / "d", folder),
    ):
        with pytest.raises(ChunkError, match=match):
            convert_file(tmp_path / "t.npy", out, offsets_path=tmp_path / "o.npy", quiet=True)
    with pytest.raises(ChunkError, match=folder):
        chunk_file(tmp_path / "t.npy", tmp_path / "d", size=64, quiet=True, format="megatron")
    with pytest.raises(ChunkError, match=folder):
        pack_file(tmp_path / "t.npy", tmp_path / "d", size=64, quiet=True, format="megatron")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert list((tmp_path / "d").iterdir()) == []
    run = [sys.executable, "-c", "import sys; from posembed.cli import main; sys.exit(main())"]
    done = subprocess.run(
        [*run, "convert", str(tmp_path / "t.npy"), "-o", f"{tmp_path / 'd'}{os.sep}"],
        capture_output=True,
        text=True,
        env={**os.environ, "SKBUILD_EDITABLE_VERBOSE": "0"},
    )
    assert (done.returncode, done.stderr.count("\n"), done.stdout) == (2, 1, ""), done.stderr
    assert "names no file prefix" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_failed_run_leaves_no_folder_it_made(tmp_path):
    # the folders above PREFIX that are missing are made for the run, and
    # removed again when it fails: nothing appears unless the run completes
    tokens, _offsets = corpus(11)
    tokens[-1] = -1  # met at the end, after the folders were made
    np.save(tmp_path / "bad.npy", tokens)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "kept").write_bytes(b"")
    with pytest.raises(ChunkError, match=r"token id -1 in document 0: token ids are >= 0"):
        convert_file(tmp_path / "bad.npy", tmp_path / "out" / "a" / "b" / "c", quiet=True)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["kept"]
    tokens[-1] = 1
    np.save(tmp_path / "good.npy", tokens)
    convert_file(tmp_path / "good.npy", tmp_path / "out" / "a" / "b" / "c", quiet=True)
    assert sorted(p.name for p in (tmp_path / "out" / "a" / "b").iterdir()) == ["c.bin", "c.idx"]


def test_the_command_prints_one_line_and_exits_2_on_bad_input(tmp_path):
    tokens, _offsets = corpus(8)
    np.save(tmp_path / "t.npy", tokens)
    run = [sys.executable, "-c", "import sys; from posembed.cli import main; sys.exit(main())"]
    done = subprocess.run(
        [*run, "convert", str(tmp_path / "t.npy"), "-o", str(tmp_path / "c"), "--append-eod", "3"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(f"-> {tmp_path / 'c'}.bin, {tmp_path / 'c'}.idx")
    done = subprocess.run(
        [*run, "convert", str(tmp_path / "t.npy"), "-o", str(tmp_path / "c")],
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr


# ---- megatron-core ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def megatron() -> Any:
    megatron_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module("megatron.core.datasets.indexed_dataset")


@pytest.mark.parametrize("dtype", [np.uint16, np.int32])
def test_convert_writes_what_megatrons_builder_writes(tmp_path, megatron, dtype):
    import torch

    tokens, offsets = corpus(9)
    eod = 50_256
    np.save(tmp_path / "t.npy", tokens)
    np.save(tmp_path / "o.npy", offsets)
    convert_file(
        tmp_path / "t.npy",
        tmp_path / "c",
        offsets_path=tmp_path / "o.npy",
        append_eod=eod,
        output_dtype=dtype,
        quiet=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the documents as preprocess_data.py adds them: EOD after each non-empty one,
        # an empty one a document without sequences
        builder = megatron.IndexedDatasetBuilder(str(tmp_path / "m.bin"), dtype=dtype)
        for a, b in itertools.pairwise(offsets):
            doc = tokens[a:b].astype(np.int64)
            if b > a:
                doc = np.append(doc, eod)
                builder.add_document(torch.from_numpy(doc), [len(doc)])
            else:
                builder.add_document(torch.from_numpy(doc), [])
        builder.finalize(str(tmp_path / "m.idx"))
        ds = megatron.IndexedDataset(str(tmp_path / "c"))
    assert files(tmp_path / "c") == files(tmp_path / "m")
    assert len(ds) == int((np.diff(offsets) > 0).sum())


# ---- bounded memory --------------------------------------------------------------------

PEAK_CHILD = textwrap.dedent(
    """
    import sys
    import numpy
    import posembed, posembed.corpus._convert
    from posembed.cli import main
    sys.exit(main(sys.argv[1:]) if len(sys.argv) > 1 else 0)
    """
)
# Beyond MEMORY_BYTES: the threads' stacks, the interpreter's and the allocator's own.
ALLOWANCE = 16 << 20


def _peak(*args: object) -> int:
    # measured from a fresh parent (see conftest): a child forked from this
    # test process would start from its memory
    done, peak_kib = run_peak_rss([sys.executable, "-c", PEAK_CHILD, *map(str, args)])
    assert done.returncode == 0, done.stderr
    return peak_kib << 10


@skip_if_sanitized
def test_memory_is_bounded_whatever_the_corpus_size(tmp_path):
    # 96 Mi tokens (192 MB) in 3 documents, the last widened past uint16 near
    # its end: the run holds its buffers, never the corpus
    n = 96 << 20
    tokens = np.arange(n, dtype=np.uint32) % 60_000
    tokens[-5] = 70_000
    tokens.tofile(tmp_path / "t.raw")
    del tokens
    np.save(tmp_path / "o.npy", np.array([0, 1000, n // 2, n]))
    idle = _peak()
    args = ["convert", tmp_path / "t.raw", "--dtype", "uint32", "--offsets", tmp_path / "o.npy"]
    extra = _peak(*args, "-o", tmp_path / "c", "--append-eod", 7, "--quiet") - idle
    assert extra < posembed.corpus._source.MEMORY_BYTES + ALLOWANCE, extra >> 20
    got = posembed.IndexedCorpus(tmp_path / "c")
    assert got.dtype == np.int32
    assert got.sequence_lengths.tolist() == [1001, n // 2 - 999, n // 2 + 1]
    tail = (np.arange(n - 6, n) % 60_000).tolist()
    tail[1] = 70_000
    assert got.read(got.token_count - 7, got.token_count).tolist() == [*tail, 7]


def test_the_copy_kernel_refuses_bad_cuts_and_reports_a_short_file(tmp_path):
    # the binding under IndexedWriter.copy_from: cuts out of order or outside
    # (first, last] are a ValueError before anything is written; a file that
    # ends early comes back as the byte it ended at, never a crash
    from posembed import _core

    src = tmp_path / "t.raw"
    np.arange(100, dtype=np.uint16).tofile(src)
    dst = tmp_path / "o.bin"
    u2, mark = np.dtype(np.uint16), np.array([7], np.uint16)
    with open(src, "rb") as f, open(dst, "wb") as g:
        args = (f.fileno(), 0, u2, False, 0, 100, 16)
        for cuts in ([5, 5], [9, 3], [0], [101]):
            with pytest.raises(ValueError, match="cuts must rise"):
                _core.copy_marked(*args, np.array(cuts), g.fileno(), u2, mark, 0, 0, 65535)
        assert dst.stat().st_size == 0
        assert _core.copy_marked(*args, np.array([50, 100]), g.fileno(), u2, mark, 0, 0, 65535) == (
            -1,
            -1,
        )
        got = np.fromfile(dst, np.uint16)
        assert got.tolist() == [*range(50), 7, *range(50, 100), 7]
        # ids above `high`: the first such block stops the copy
        stopped, ended = _core.copy_marked(
            *args, np.zeros(0, np.int64), g.fileno(), u2, mark, 0, 0, 40
        )
        assert (stopped, ended) == (2, -1)  # block 2 holds 32..47
        # a range past the file's end: the byte it ended at
        long = (f.fileno(), 0, u2, False, 0, 150, 16)
        assert (
            _core.copy_marked(*long, np.zeros(0, np.int64), g.fileno(), u2, mark, 0, 0, 65535)[1]
            == 200
        )

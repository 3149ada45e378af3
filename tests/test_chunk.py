"""`posembed chunk`: the installed command on real files, in bounded memory."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import posembed
import posembed.corpus._chunk as chunk_module
import posembed.corpus._pipeline as pipeline_module
from posembed.corpus._chunk import ChunkError, chunk_file

from .conftest import run_peak_rss, skip_if_sanitized

SCRIPT = str(Path(sys.executable).parent / "posembed")


def run(*args):
    return subprocess.run(
        [SCRIPT, "chunk", *map(str, args)], capture_output=True, text=True, check=False
    )


def load(out: Path):
    return {
        name: np.load(out / f"{name}.npy", mmap_mode="r")
        for name in ("windows", "starts", "lengths", "documents")
    }


def assert_matches(out: Path, w: posembed.Windows):
    got = load(out)
    assert np.array_equal(got["windows"], w.tokens)
    assert got["windows"].dtype == w.tokens.dtype
    for name in ("starts", "lengths", "documents"):
        assert np.array_equal(got[name], getattr(w, name))


@pytest.fixture
def corpus(tmp_path):
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 700, 200)
    lengths[[0, 7]] = 0
    lengths[9] = 6000
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = rng.integers(0, 50_000, offsets[-1]).astype(np.uint16)
    np.save(tmp_path / "tokens.npy", tokens)
    np.save(tmp_path / "offsets.npy", offsets)
    tokens.tofile(tmp_path / "train.bin")
    return tmp_path, tokens, offsets


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("block", [1, 100, 1 << 20], ids=["a row a block", "blocks", "default"])
def test_the_threads_cut_from_the_file_what_windows_cuts(tmp_path, monkeypatch, threads, block):
    # .npy output is cut by the kernels' threads straight from the file, a
    # block of rows each; runs of short documents that tail="drop" leaves out
    # put gaps between the rows of a block wider than one read takes
    from posembed.corpus import _sink_npy

    monkeypatch.setattr(_sink_npy, "CUT_BLOCK_BYTES", block)
    rng = np.random.default_rng(4)
    lengths = rng.choice([0, 3, 7, 7, 7, 7, 40, 300], 400)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = rng.integers(0, 1 << 15, offsets[-1])
    np.save(tmp_path / "o.npy", offsets)
    posembed.set_num_threads(threads)
    try:
        for dtype in ("<u2", ">u2", "<i8", "<u1"):
            data = (tokens % 250 if dtype == "<u1" else tokens).astype(dtype)
            data.tofile(tmp_path / "t.raw")
            native = data.astype(data.dtype.newbyteorder("="))
            for tail, step in (("pad", 8), ("drop", 3), ("shift", 5)):
                out = tmp_path / f"out-{dtype}-{tail}"
                chunk_file(
                    tmp_path / "t.raw",
                    out,
                    size=8,
                    step=step,
                    tail=tail,
                    dtype=dtype,
                    offsets_path=tmp_path / "o.npy",
                    pad_value=9,
                    quiet=True,
                )
                want = posembed.windows(
                    native, 8, step=step, tail=tail, offsets=offsets, pad_value=9
                )
                assert_matches(out, want)
    finally:
        posembed.set_num_threads(None)


def test_the_command_cuts_on_every_thread_where_the_kernels_read_and_write(tmp_path):
    assert chunk_module.runs_direct(tmp_path / "t.npy", "npy")
    assert chunk_module.runs_direct(tmp_path / "corpus", "npy")  # a raw file or a prefix
    assert not chunk_module.runs_direct(tmp_path / "t.npy", "parquet")
    assert not chunk_module.runs_direct(tmp_path / "t.npy", "megatron")
    assert not chunk_module.runs_direct(tmp_path / "t.parquet", "npy")
    assert not chunk_module.runs_direct(tmp_path / "t.npy", "csv")


@pytest.mark.parametrize("tail", ["pad", "shift", "drop"])
def test_command_on_npy_and_raw_files(corpus, tail):
    path, tokens, offsets = corpus
    done = run(
        path / "tokens.npy",
        "-o",
        path / "a",
        "--size",
        128,
        "--overlap",
        32,
        "--tail",
        tail,
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    assert_matches(path / "a", posembed.windows(tokens, 128, overlap=32, tail=tail))
    done = run(
        path / "train.bin",
        "--dtype",
        "uint16",
        "--offsets",
        path / "offsets.npy",
        "-o",
        path / "b",
        "--threads",
        2,
        "--size",
        64,
        "--step",
        50,
        "--tail",
        tail,
    )
    assert done.returncode == 0, done.stderr
    assert "windows of 64" in done.stdout
    assert_matches(path / "b", posembed.windows(tokens, 64, step=50, tail=tail, offsets=offsets))


@pytest.mark.parametrize("tail", ["pad", "shift", "drop"])
def test_small_batches_split_long_documents(corpus, monkeypatch, tail):
    path, tokens, offsets = corpus
    monkeypatch.setattr(chunk_module, "MEMORY_BYTES", 20_000)  # a few windows per batch
    for offs in (None, path / "offsets.npy"):
        out = path / f"out-{offs is None}"
        chunk_file(
            path / "tokens.npy", out, size=40, step=13, tail=tail, offsets_path=offs, quiet=True
        )
        want = posembed.windows(
            tokens, 40, step=13, tail=tail, offsets=None if offs is None else offsets
        )
        assert_matches(out, want)


@pytest.mark.parametrize("tail", ["pad", "shift", "drop"])
@pytest.mark.parametrize("order", ["<", ">"])
def test_batches_of_whole_blocks_are_written_as_read(tmp_path, monkeypatch, tail, order):
    # Windows of step == size tile a document's tokens: such batches are
    # written from the tokens read, uncut. Documents of whole blocks and of
    # ragged ends alternate, so tiled and cut batches (and padded or shifted
    # last windows) meet in one run; the other byte order is converted first.
    size = 8
    lengths = [5 * size, 3 * size + 3, 0, 7 * size, 2, 4 * size]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = np.arange(int(offsets[-1]), dtype=np.uint16) * 7
    tokens.astype(order + "u2").tofile(tmp_path / "raw.bin")
    np.save(tmp_path / "docs.npy", offsets)
    monkeypatch.setattr(chunk_module, "MEMORY_BYTES", 6 * (size * 2 * 6 + 24 * 12))
    for offs in (None, tmp_path / "docs.npy"):
        out = tmp_path / f"out-{offs is None}"
        chunk_file(
            tmp_path / "raw.bin",
            out,
            size=size,
            tail=tail,
            dtype=order + "u2",
            offsets_path=offs,
            quiet=True,
        )
        want = posembed.windows(tokens, size, tail=tail, offsets=None if offs is None else offsets)
        assert_matches(out, want)


def test_force_replaces_and_nothing_partial_is_left(corpus):
    path, _, _ = corpus
    assert run(path / "tokens.npy", "-o", path / "o", "--size", 100, "--quiet").returncode == 0
    again = run(path / "tokens.npy", "-o", path / "o", "--size", 100)
    assert again.returncode == 2
    assert "exists" in again.stderr
    assert (
        run(path / "tokens.npy", "-o", path / "o", "--size", 50, "--force", "--quiet").returncode
        == 0
    )
    assert load(path / "o")["windows"].shape[1] == 50
    assert not [p for p in path.iterdir() if p.name.startswith(".")]  # no temporary left


def test_error_paths_give_one_line_and_exit_2(corpus):
    path, _, _ = corpus
    (path / "odd.bin").write_bytes(b"\x00" * 5)
    np.save(path / "floats.npy", np.zeros(10))
    np.save(path / "bad_offsets.npy", np.array([0, 5, 3]))
    cases = [
        ((path / "missing.npy", "--size", 8), "no such file"),
        ((path / "train.bin", "--size", 8), "needs --dtype"),
        ((path / "train.bin", "--dtype", "float32", "--size", 8), "integer"),
        ((path / "odd.bin", "--dtype", "uint16", "--size", 8), "whole number"),
        ((path / "floats.npy", "--size", 8), "integer"),
        ((path / "tokens.npy", "--size", 0), "--size"),
        ((path / "tokens.npy", "--size", 8, "--step", 9), "step"),
        ((path / "tokens.npy", "--size", 8, "--offsets", path / "bad_offsets.npy"), "offsets"),
        ((path / "tokens.npy", "--size", 8, "--pad-value", -1), "pad-value"),
        ((path / "tokens.npy", "--size", 8, "--threads", 100_000), "--threads"),
    ]
    for args, text in cases:
        out = path / "never"
        done = run(*args, "-o", out)
        assert done.returncode == 2, (args, done.stderr)
        # one line (an editable install may print its rebuild log before it)
        errors = [ln for ln in done.stderr.splitlines() if ln.startswith("posembed chunk: error")]
        assert len(errors) == 1, done.stderr
        assert text in errors[0], (args, done.stderr)
        assert "Traceback" not in done.stderr
        assert not out.exists()
    both = run(path / "tokens.npy", "-o", path / "x", "--size", 8, "--step", 2, "--overlap", 2)
    assert both.returncode == 2
    assert "not allowed with" in both.stderr
    assert not [p for p in path.iterdir() if p.name.startswith(".")]  # no temporary left


def test_chunk_file_errors_are_chunk_errors(tmp_path):
    with pytest.raises(ChunkError, match="no such file"):
        chunk_file(tmp_path / "nope.bin", tmp_path / "out", size=4, dtype="uint16")


def test_chunk_file_refuses_an_empty_npy_file(tmp_path):
    # numpy.load of an empty file raises EOFError; chunk_file names the file instead
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"empty\.npy: not a readable \.npy file \(it is empty\)"):
        chunk_file(empty, out, size=4)
    with pytest.raises(ChunkError, match=r"the input must be a 1-D integer \.npy file"):
        chunk_file(empty, out, size=4)
    np.save(tmp_path / "tokens.npy", np.arange(10, dtype=np.int32))
    with pytest.raises(ValueError, match=r"--offsets .*empty\.npy: not a readable \.npy file"):
        chunk_file(tmp_path / "tokens.npy", out, size=4, offsets_path=empty)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.npy", "tokens.npy"]


@pytest.mark.parametrize("flag", ["force", "quiet"])
@pytest.mark.parametrize("bad", [1, 0, "no", "", [], None], ids=repr)
def test_chunk_file_flags_must_be_bools(tmp_path, flag, bad):
    np.save(tmp_path / "tokens.npy", np.arange(10, dtype=np.int32))
    out = tmp_path / "out"
    with pytest.raises(
        TypeError, match=rf"^{flag} must be True or False; got {re.escape(repr(bad))}$"
    ):
        chunk_file(tmp_path / "tokens.npy", out, size=4, **{flag: bad})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokens.npy"]
    chunk_file(tmp_path / "tokens.npy", out, size=4, **{flag: np.True_})
    assert load(out)["windows"].shape == (3, 4)


@pytest.mark.parametrize("bad", ["2", 2.0, True, np.bool_(True), [2]], ids=repr)
def test_chunk_file_threads_must_be_an_integer(tmp_path, bad):
    np.save(tmp_path / "tokens.npy", np.arange(10, dtype=np.int32))
    with pytest.raises(TypeError, match=r"^threads must be an integer or None; got "):
        chunk_file(tmp_path / "tokens.npy", tmp_path / "out", size=4, threads=bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokens.npy"]


def test_chunk_file_threads_must_be_in_range(tmp_path):
    np.save(tmp_path / "tokens.npy", np.arange(10, dtype=np.int32))
    top = posembed.config()["max_num_threads"]
    for bad in (0, -1, top + 1):
        with pytest.raises(ChunkError, match=rf"^threads must be in 1\.\.{top} .*; got {bad}$"):
            chunk_file(tmp_path / "tokens.npy", tmp_path / "out", size=4, threads=bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokens.npy"]
    chunk_file(tmp_path / "tokens.npy", tmp_path / "out", size=4, threads=np.int64(top))
    assert load(tmp_path / "out")["windows"].shape == (3, 4)


@pytest.mark.parametrize("format", ["npy", "megatron"])
def test_chunk_file_cuts_on_the_threads_of_this_call_only(corpus, thread_counts, format):
    # to .npy from a token file the kernels' threads read, cut and write (the
    # global count by default); every other run reads and writes on threads
    # of its own and cuts on one by default; either way the count holds for
    # this call's threads alone, and the files are the same for every count
    from posembed import _core

    path, _, _ = corpus
    seen = thread_counts.seen
    thread_counts.watch(pipeline_module, "_cut", "cut")
    thread_counts.watch(_core, "fill_windows_to_file", "cut")
    thread_counts.watch(chunk_module.SINKS[format], "write", "write")
    direct = format == "npy"
    posembed.set_num_threads(3)
    try:
        files = {}
        for threads in (None, 1, 2):
            seen.clear()
            out = path / f"out-{format}-{threads}"
            chunk_file(
                path / "tokens.npy",
                out,
                size=64,
                step=48,
                offsets_path=path / "offsets.npy",
                format=format,
                threads=threads,
                quiet=True,
            )
            want = threads if threads is not None else (3 if direct else 1)
            assert {where for where, _ in seen} == ({"cut"} if direct else {"cut", "write"})
            assert {count for _, count in seen} == {want}
            assert posembed.get_num_threads() == 3
            written = out.iterdir() if direct else out.parent.glob(f"{out.name}.*")
            files[threads] = {p.name.removeprefix(out.name): p.read_bytes() for p in written}
            assert set(files[threads]) >= ({"windows.npy"} if direct else {".bin", ".idx"})
        assert files[None] == files[1] == files[2]
    finally:
        posembed.set_num_threads(None)


def test_chunk_file_takes_an_empty_raw_file_as_no_tokens(tmp_path):
    # a raw file has no header: empty is zero tokens, one empty document
    (tmp_path / "empty.bin").write_bytes(b"")
    meta = chunk_file(tmp_path / "empty.bin", tmp_path / "out", size=4, dtype="uint16")
    assert (meta["tokens"], meta["windows"], meta["documents"]) == (0, 0, 1)
    assert load(tmp_path / "out")["windows"].shape == (0, 4)


@skip_if_sanitized
def test_a_large_corpus_in_bounded_memory(tmp_path):
    # 320 MB of uint16 tokens, memory-mapped in and written out batch by batch:
    # the child's peak memory stays far below the corpus.
    n = 160_000_000
    src = tmp_path / "big.bin"
    block = np.arange(1 << 22, dtype=np.uint16)
    with open(src, "wb") as f:
        for _ in range(n // block.size):
            block.tofile(f)
        block[: n % block.size].tofile(f)
    args = [
        SCRIPT,
        "chunk",
        str(src),
        "--dtype",
        "uint16",
        "-o",
        str(tmp_path / "out"),
        "--size",
        "2048",
        "--step",
        "2048",
        "--quiet",
    ]
    done, peak_kb = run_peak_rss(args)  # the command's own peak (see conftest)
    assert done.returncode == 0, done.stderr
    assert peak_kb / 1024 < 150, f"peak {peak_kb / 1024:.0f} MB for a 320 MB corpus"
    out = load(tmp_path / "out")
    assert out["windows"].shape == (-(-n // 2048), 2048)
    assert np.array_equal(out["windows"][5], np.fromfile(src, np.uint16, 2048, offset=5 * 4096))
    assert out["lengths"][-1] == n - (out["windows"].shape[0] - 1) * 2048


def test_the_chunk_module_is_the_pipeline_s_public_face(corpus):
    """posembed.chunk: the checks and the token file that chunk_file and
    posembed.dask.chunk_parts start from, for pipelines of one's own."""
    from posembed import chunk

    assert chunk.chunk_file is chunk_file
    assert chunk.ChunkError is ChunkError
    path, tokens, offsets = corpus
    job = chunk.prepare_chunk(
        path / "train.bin",
        path / "x",
        size=64,
        overlap=16,
        dtype="uint16",
        offsets_path=path / "offsets.npy",
    )
    assert isinstance(job, chunk.ChunkJob)
    assert (job.size, job.step, job.tail) == (64, 48, "pad")
    assert (job.source, job.output) == (path / "train.bin", path / "x")
    assert np.array_equal(job.doc_offsets, offsets)
    assert job.doc_offsets.dtype == np.int64
    assert isinstance(job.tokens, chunk.TokenFile)
    assert (job.tokens.count, job.tokens.dtype, job.tokens.offset) == (len(tokens), np.uint16, 0)
    assert not (path / "x").exists()  # nothing written yet
    layout = posembed.window_layout(job.doc_offsets, job.size, step=job.step, tail=job.tail)
    job.tokens.open()
    try:
        part = job.tokens.read(100, 5000)
        assert np.array_equal(part, tokens[100:5000])
        first = int(np.searchsorted(offsets[layout.documents] + layout.starts, 100))
        last = int(
            np.searchsorted(
                offsets[layout.documents] + layout.starts + layout.lengths, 5000, side="right"
            )
        )
        rows = layout.cut(part, windows=slice(first, last), token_start=100)
    finally:
        job.tokens.close()
    want = posembed.windows(tokens, 64, overlap=16, offsets=offsets)
    assert np.array_equal(rows, want.tokens[first:last])
    with pytest.raises(TypeError, match=r"^pad_value must be an integer; got 1\.5$"):
        chunk.prepare_chunk(path / "tokens.npy", path / "x", size=8, pad_value=1.5)
    with pytest.raises(ChunkError, match=r"--pad-value 70000 does not fit uint16"):
        chunk.prepare_chunk(path / "tokens.npy", path / "x", size=8, pad_value=70_000)


def test_tokens_in_the_other_byte_order_are_converted_while_read(corpus):
    path, tokens, offsets = corpus
    other = tokens.dtype.newbyteorder()  # ">u2" on a little-endian machine
    tokens.astype(other).tofile(path / "swapped.bin")
    np.save(path / "swapped.npy", tokens.astype(other))
    want = posembed.windows(tokens, 40, step=13, offsets=offsets)
    for src, dtype in (("swapped.bin", other.str), ("swapped.npy", None)):
        out = path / f"out-{src}"
        meta = chunk_file(
            path / src, out, size=40, step=13, dtype=dtype, offsets_path=path / "offsets.npy"
        )
        assert meta["dtype"] == "uint16"
        assert load(out)["windows"].dtype.isnative
        assert_matches(out, want)


def test_the_file_cut_refuses_windows_outside_the_file(tmp_path):
    # the binding under NpySink.cut_from: every window is checked against its
    # document and the file's token count before anything is written
    from posembed import _core

    src = tmp_path / "t.raw"
    np.arange(40, dtype=np.uint16).tofile(src)
    offsets = np.array([0, 20, 40])
    pad = np.array([0], np.uint16)
    with open(src, "rb") as f, open(tmp_path / "o.bin", "wb") as g:
        for starts, lengths, docs in (([15], [8], [0]), ([0], [4], [2]), ([-1], [4], [1])):
            with pytest.raises(ValueError, match="does not lie inside"):
                _core.fill_windows_to_file(
                    f.fileno(),
                    0,
                    2,
                    False,
                    40,
                    offsets,
                    np.array(starts),
                    np.array(lengths),
                    np.array(docs),
                    8,
                    pad,
                    g.fileno(),
                    0,
                    1 << 20,
                )
        assert (tmp_path / "o.bin").stat().st_size == 0
        # a file shorter than the count it was said to hold: the byte it ended at
        ended = _core.fill_windows_to_file(
            f.fileno(),
            0,
            2,
            False,
            60,
            np.array([0, 60]),
            np.array([48]),
            np.array([8]),
            np.array([0]),
            8,
            pad,
            g.fileno(),
            0,
            1 << 20,
        )
        assert ended == 96  # its read of tokens 48..55 starts past the 80 bytes

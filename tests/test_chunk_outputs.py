"""What `posembed chunk` writes, posembed reads: each output (a folder of .npy
files, Parquet, the parts of --dask, a Megatron indexed dataset) is a corpus
of one document per window, its padding left out; chunked again it gives
the same windows, and convert and pack take it as they take any corpus.
Fixed-size list columns (any Arrow or Parquet file's) are documents of that
size. A crafted folder is one line and exit 2, never a wrong corpus."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from posembed.cli import main  # noqa: E402
from posembed.corpus._chunk import ChunkError, chunk_file, prepare_chunk  # noqa: E402

from .conftest import assert_convert_and_pack_agree  # noqa: E402

NAMES = ("windows", "starts", "lengths", "documents")
SIZE, STEP = 32, 24


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A corpus, and posembed chunk's outputs of it in every format."""
    folder = tmp_path_factory.mktemp("outputs")
    rng = np.random.default_rng(11)
    lengths = rng.integers(0, 150, 60)
    lengths[[0, 7]] = 0
    tokens = rng.integers(0, 40_000, int(lengths.sum())).astype(np.uint16)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    np.save(folder / "tokens.npy", tokens)
    np.save(folder / "offsets.npy", offsets)
    kw = {"size": SIZE, "step": STEP, "offsets_path": folder / "offsets.npy", "quiet": True}
    outputs = {}
    for fmt in ("npy", "parquet", "megatron"):
        out = folder / (fmt if fmt != "megatron" else "mg")
        chunk_file(folder / "tokens.npy", out, format=fmt, **kw)
        outputs[fmt] = out
    import dask

    from posembed.dask import chunk_parts

    with dask.config.set(scheduler="sync"):
        chunk_parts(
            folder / "tokens.npy",
            folder / "parts",
            size=SIZE,
            step=STEP,
            offsets_path=folder / "offsets.npy",
            part_tokens=1000,  # several parts
        )
    outputs["parts"] = folder / "parts"
    return folder, outputs


def _arrays(folder: Path) -> dict[str, np.ndarray]:
    return {name: np.load(folder / f"{name}.npy") for name in NAMES}


def _as_documents(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """The windows of an npy output as documents: each cut to its length."""
    a = _arrays(folder)
    docs = [row[:n] for row, n in zip(a["windows"], a["lengths"], strict=True)]
    lengths = np.array([d.shape[0] for d in docs], np.int64)
    return np.concatenate(docs), np.concatenate([[0], np.cumsum(lengths)])


@pytest.mark.parametrize("fmt", ["npy", "parquet", "parts", "megatron"])
def test_an_output_chunked_again_gives_its_windows(written, tmp_path, fmt):
    _, outputs = written
    src = outputs[fmt]
    extra = {}
    if fmt == "megatron":  # one sequence per window: Megatron's sequences are the windows
        src, extra = src.with_suffix(".idx"), {"documents": "sequences"}
    meta = chunk_file(src, tmp_path / "again", size=SIZE, step=SIZE, quiet=True, **extra)
    first, again = _arrays(outputs["npy"]), _arrays(tmp_path / "again")
    n = first["windows"].shape[0]
    assert meta["documents"] == meta["windows"] == n
    assert meta["tokens"] == int(first["lengths"].sum())
    np.testing.assert_array_equal(again["windows"], first["windows"])
    np.testing.assert_array_equal(again["lengths"], first["lengths"])
    np.testing.assert_array_equal(again["documents"], np.arange(n))  # a window, a document
    assert again["windows"].dtype == first["windows"].dtype
    # as any corpus: smaller windows of the windows are those of the documents
    # they are (a token file with the windows' offsets)
    tokens, offsets = _as_documents(outputs["npy"])
    np.save(tmp_path / "t.npy", tokens)
    np.save(tmp_path / "o.npy", offsets)
    kw = {"size": 10, "step": 7, "tail": "shift", "quiet": True}
    chunk_file(src, tmp_path / "small", **kw, **extra)
    chunk_file(tmp_path / "t.npy", tmp_path / "want", offsets_path=tmp_path / "o.npy", **kw)
    for name, want in _arrays(tmp_path / "want").items():
        np.testing.assert_array_equal(_arrays(tmp_path / "small")[name], want)


@pytest.mark.parametrize("fmt", ["npy", "parquet", "parts"])
def test_convert_and_pack_read_an_output(written, tmp_path, fmt):
    _, outputs = written
    tokens, offsets = _as_documents(outputs["npy"])
    np.save(tmp_path / "t.npy", tokens)
    np.save(tmp_path / "o.npy", offsets)
    assert_convert_and_pack_agree(
        outputs[fmt], tmp_path / "t.npy", tmp_path / "o.npy", tmp_path, size=64
    )


def test_the_command_reads_an_output_and_says_so(written, tmp_path, capsys):
    _, outputs = written
    out = tmp_path / "again"
    assert main(["chunk", str(outputs["npy"]), "-o", str(out), "--size", str(SIZE)]) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["input_format"] == "posembed chunk output (npy), one document per window"
    # the options of other inputs do not apply
    for option, value in (("--column", "x"), ("--dtype", "int32"), ("--documents", "sequences")):
        argv = ["chunk", str(outputs["npy"]), "-o", str(tmp_path / "x"), "--size", "8"]
        assert main([*argv, option, value]) == 2
        err = capsys.readouterr().err
        assert f"{option} does not apply to {outputs['npy']}, a folder of windows" in err
        assert err.count("\n") == 1
    with pytest.raises(
        ChunkError, match="Arrow, Parquet and folders of windows are read in one process"
    ):
        prepare_chunk(outputs["parquet"], tmp_path / "d", size=8)
    assert not (tmp_path / "x").exists()
    assert not (tmp_path / "d").exists()


def test_a_fixed_size_list_column_is_documents_of_its_size(tmp_path):
    rng = np.random.default_rng(3)
    rows = rng.integers(0, 500, (40, 12)).astype(np.int64)
    column = pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), 12)
    table = pa.table({"input_ids": column, "text": pa.array(["x"] * 40)})
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=7)
    with pa.OSFile(str(tmp_path / "f.arrow"), "wb") as f, pa.ipc.new_stream(f, table.schema) as w:
        w.write_table(table.slice(3), max_chunksize=9)  # a sliced table: its offset applied
    for name, first in (("f.parquet", 0), ("f.arrow", 3)):
        chunk_file(tmp_path / name, tmp_path / name.replace(".", "-"), size=5, quiet=True)
        got = _arrays(tmp_path / name.replace(".", "-"))
        np.save(tmp_path / "t.npy", rows[first:].reshape(-1))
        offsets = np.arange(40 - first + 1, dtype=np.int64) * 12
        np.save(tmp_path / "o.npy", offsets)
        chunk_file(
            tmp_path / "t.npy",
            tmp_path / "want",
            size=5,
            quiet=True,
            offsets_path=tmp_path / "o.npy",
            force=True,
        )
        for key, want in _arrays(tmp_path / "want").items():
            np.testing.assert_array_equal(got[key], want)
    nulls = pa.FixedSizeListArray.from_arrays(pa.array([1, 2, None, 4]), 2)
    pq.write_table(pa.table({"input_ids": nulls}), tmp_path / "n.parquet")
    with pytest.raises(ChunkError, match=r"row 1 of column 'input_ids' holds a null token id"):
        chunk_file(tmp_path / "n.parquet", tmp_path / "n", size=4, quiet=True)


def _copy_npy_output(written, tmp_path: Path) -> Path:
    _, outputs = written
    src = tmp_path / "copy"
    src.mkdir()
    for path in outputs["npy"].iterdir():
        (src / path.name).write_bytes(path.read_bytes())
    return src


@pytest.mark.parametrize(
    ("spoil", "text"),
    [
        (
            lambda src: np.save(src / "lengths.npy", np.load(src / "lengths.npy")[:-1]),
            "lengths for the",
        ),
        (
            lambda src: np.save(src / "lengths.npy", np.load(src / "lengths.npy") + SIZE),
            f"; a window of {SIZE} holds 0..{SIZE} tokens",
        ),
        (
            lambda src: np.save(src / "lengths.npy", -np.load(src / "lengths.npy")),
            "window 0 has length -",
        ),
        (
            lambda src: np.save(src / "windows.npy", np.zeros(5, np.int32)),
            "must be a 2-D integer array in C order",
        ),
        (
            lambda src: np.save(src / "windows.npy", np.zeros((3, 4), np.float32)),
            "must be a 2-D integer array in C order",
        ),
        (lambda src: (src / "windows.npy").write_bytes(b"\x93NUMPY\x01\x00"), "not a valid .npy"),
        (lambda src: (src / "meta.json").write_text("[1]"), "not the JSON object posembed"),
        (lambda src: (src / "meta.json").write_text("{" * 3000), "deep"),
        (
            lambda src: [
                (src / "lengths.npy").unlink(),
                (src / "lengths.npy").symlink_to(src / "starts.npy"),
            ],
            "a link is never followed",
        ),
        (lambda src: (src / "lengths.npy").unlink(), "lengths.npy: cannot be opened"),
    ],
)
def test_a_crafted_output_folder_is_one_line(written, tmp_path, capsys, spoil, text):
    src = _copy_npy_output(written, tmp_path)
    spoil(src)
    assert main(["chunk", str(src), "-o", str(tmp_path / "out"), "--size", "8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("posembed chunk: error: ")
    assert text in err, err
    assert not (tmp_path / "out").exists()


def test_an_output_that_changes_while_read_is_refused(written, tmp_path, monkeypatch):
    import posembed.corpus._source as shared
    import posembed.corpus._source_windows as windows_source

    src = _copy_npy_output(written, tmp_path)
    monkeypatch.setattr(windows_source, "BLOCK_BYTES", 64)  # a block of one or two windows
    real = shared.window_documents
    calls = []

    def rewriting(*args):
        calls.append(1)
        if len(calls) == 2:  # between two blocks, the windows file is rewritten in place
            data = (src / "windows.npy").read_bytes()
            with open(src / "windows.npy", "r+b") as f:
                f.write(data[:-1])
                f.truncate()
        return real(*args)

    monkeypatch.setattr(shared, "window_documents", rewriting)
    with pytest.raises(ChunkError, match="input changed while reading"):
        chunk_file(src, tmp_path / "out", size=8, quiet=True)
    assert not (tmp_path / "out").exists()
    assert os.listdir(tmp_path) == ["copy"]

"""Corpora in an object store, read through fsspec: a real S3 server (moto's,
started on the loopback address), s3fs as its client. Token files with their
offsets, raw token files, Parquet and Arrow IPC give the windows, Megatron
files and packed rows of the same files on local disk, byte for byte; a
missing object, an object replaced or deleted while it is read and a URL
output are one-line errors, with nothing written."""

from __future__ import annotations

import gc
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import posembed.io._store as store  # noqa: E402
from posembed.cli import main  # noqa: E402
from posembed.corpus._chunk import ChunkError, chunk_file, prepare_chunk  # noqa: E402
from posembed.corpus._convert import convert_file  # noqa: E402
from posembed.corpus._pack_output import pack_file  # noqa: E402

from .conftest import assert_convert_and_pack_agree  # noqa: E402

NAMES = ("windows", "starts", "lengths", "documents")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server on 127.0.0.1 and a bucket holding a corpus in every
    form, with the same files on local disk: (s3fs file system, local folder)."""
    if os.environ.get("POSEMBED_REQUIRE_STORE") != "1":
        pytest.importorskip("moto.server")
        pytest.importorskip("s3fs")
    from bench.store_server import s3_server

    with s3_server("corpus") as fs:
        local = tmp_path_factory.mktemp("store")
        rng = np.random.default_rng(4)
        lengths = rng.integers(0, 2500, 30)
        lengths[[2, 9]] = 0
        tokens = rng.integers(0, 50_000, int(lengths.sum())).astype(np.uint16)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        np.save(local / "tokens.npy", tokens)
        np.save(local / "offsets.npy", offsets)
        tokens.astype(">u2").tofile(local / "tokens.bin")  # raw, the other byte order
        column = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(tokens))
        table = pa.table({"text": pa.array(["x"] * len(lengths)), "input_ids": column})
        pq.write_table(table, local / "corpus.parquet", row_group_size=7)
        with (
            pa.OSFile(str(local / "corpus.arrow"), "wb") as f,
            pa.ipc.new_file(f, table.schema) as writer,
        ):
            writer.write_table(table, max_chunksize=8)
        for path in local.iterdir():
            fs.put(str(path), f"corpus/{path.name}")
        yield fs, local


def _same(got: Path, want: Path) -> None:
    for name in NAMES:
        np.testing.assert_array_equal(np.load(got / f"{name}.npy"), np.load(want / f"{name}.npy"))


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("tokens.npy", {"offsets_path": "s3://corpus/offsets.npy"}),
        ("tokens.npy", {"offsets_path": "LOCAL/offsets.npy"}),  # the offsets on local disk
        ("tokens.bin", {"dtype": ">u2", "offsets_path": "s3://corpus/offsets.npy"}),
        ("corpus.parquet", {}),
        ("corpus.arrow", {}),
    ],
)
def test_a_corpus_in_the_store_gives_the_local_windows(s3, tmp_path, name, options):
    _, local = s3
    options = {k: str(v).replace("LOCAL", str(local)) for k, v in options.items()}
    kw = {"size": 256, "step": 200, "quiet": True}
    want = tmp_path / "want"
    chunk_file(local / "tokens.npy", want, offsets_path=local / "offsets.npy", **kw)
    meta = chunk_file(f"s3://corpus/{name}", tmp_path / "got", **options, **kw)
    _same(tmp_path / "got", want)
    assert meta["input"] == f"s3://corpus/{name}"
    assert meta["windows"] == len(np.load(want / "lengths.npy"))


@pytest.mark.parametrize("name", ["tokens.npy", "corpus.parquet"])
def test_convert_and_pack_read_the_store(s3, tmp_path, name):
    _, local = s3
    extra = {"offsets_path": "s3://corpus/offsets.npy"} if name == "tokens.npy" else {}
    src, tokens, offsets = f"s3://corpus/{name}", local / "tokens.npy", local / "offsets.npy"
    assert_convert_and_pack_agree(src, tokens, offsets, tmp_path, size=1024, **extra)


def test_the_command_reads_the_store_and_writes_locally(s3, tmp_path, capsys):
    _, local = s3
    out = tmp_path / "out"
    argv = ["chunk", "s3://corpus/corpus.parquet", "-o", str(out), "--size", "256"]
    assert main([*argv, "--quiet"]) == 0
    want = tmp_path / "want"
    chunk_file(local / "tokens.npy", want, size=256, offsets_path=local / "offsets.npy")
    _same(out, want)
    capsys.readouterr()
    # --dask still reads and writes local files
    argv = ["chunk", "s3://corpus/corpus.parquet", "-o", str(tmp_path / "d"), "--size", "8"]
    assert main([*argv, "--dask", "tcp://127.0.0.1:1"]) == 2
    assert "Arrow, Parquet and folders of windows are read in one process" in (
        capsys.readouterr().err
    )


def test_the_endpoint_and_credentials_from_fsspecs_environment(s3, tmp_path):
    # the chunking guide: endpoints and credentials are fsspec's, environment
    # variables such as FSSPEC_S3_ENDPOINT_URL and AWS_ACCESS_KEY_ID included;
    # a fresh process with only those finds the server
    fs, local = s3
    from bench.store_server import CREDENTIALS

    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSSPEC_", "AWS_"))}
    env.update(CREDENTIALS, FSSPEC_S3_ENDPOINT_URL=f"http://127.0.0.1:{fs.server.port}")
    out = tmp_path / "out"
    argv = ["chunk", "s3://corpus/tokens.npy", "--offsets", "s3://corpus/offsets.npy"]
    done = subprocess.run(
        [sys.executable, "-m", "posembed.cli", *argv, "-o", str(out), "--size", "256", "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    want = tmp_path / "want"
    chunk_file(local / "tokens.npy", want, size=256, offsets_path=local / "offsets.npy")
    _same(out, want)


def _listing(fs, prefix: str) -> dict[str, bytes]:
    fs.invalidate_cache()
    return {p.split("/", 2)[-1]: fs.cat_file(p) for p in fs.find(prefix)}


@pytest.mark.parametrize("fmt", ["npy", "parquet"])
def test_an_output_in_the_store_is_the_local_one_its_manifest_last(s3, tmp_path, monkeypatch, fmt):
    fs, _ = s3
    url = f"s3://corpus/out-{fmt}"
    kw = {"size": 300, "overlap": 20, "offsets_path": "s3://corpus/offsets.npy", "quiet": True}
    meta = chunk_file("s3://corpus/tokens.npy", url, format=fmt, **kw)
    chunk_file("s3://corpus/tokens.npy", tmp_path / "want", format=fmt, **kw)
    want = {p.name: p.read_bytes() for p in (tmp_path / "want").iterdir()}
    assert _listing(fs, f"corpus/out-{fmt}") == want  # every file, byte for byte
    assert meta["format"] == fmt
    # its files, in the order they were written: the manifest last
    order = []
    real = store._put
    monkeypatch.setattr(store, "_put", lambda fs_, a, key: (order.append(key), real(fs_, a, key)))
    with pytest.raises(ChunkError, match="holds an output; pass --force to replace it"):
        chunk_file("s3://corpus/tokens.npy", url, format=fmt, **kw)
    chunk_file("s3://corpus/tokens.npy", url, format=fmt, force=True, **kw)
    assert order[-1] == f"corpus/out-{fmt}/meta.json"
    assert sorted(k.rsplit("/", 1)[-1] for k in order) == sorted(want)
    assert _listing(fs, f"corpus/out-{fmt}") == want


@pytest.mark.parametrize("fmt", ["npy", "parquet"])
def test_an_output_in_the_store_reads_back(s3, tmp_path, fmt):
    # chunked from the store into the store, then read back from it: one
    # document per window, as a local output reads
    kw = {"size": 200, "step": 150, "offsets_path": "s3://corpus/offsets.npy", "quiet": True}
    chunk_file("s3://corpus/tokens.npy", f"s3://corpus/round-{fmt}", format=fmt, **kw)
    chunk_file("s3://corpus/tokens.npy", tmp_path / "local", **kw)
    url = f"s3://corpus/round-{fmt}"
    meta = chunk_file(url, tmp_path / "again", size=200, step=200, quiet=True)
    assert meta["input_format"] == f"posembed chunk output ({fmt}), one document per window"
    local = {n: np.load(tmp_path / "local" / f"{n}.npy") for n in ("windows", "lengths")}
    np.testing.assert_array_equal(np.load(tmp_path / "again" / "windows.npy"), local["windows"])
    np.testing.assert_array_equal(np.load(tmp_path / "again" / "lengths.npy"), local["lengths"])
    chunk_file(f"{url}/", tmp_path / "slash", size=200, step=200, quiet=True)
    _same(tmp_path / "slash", tmp_path / "again")
    with pytest.raises(ChunkError, match=f"--offsets does not apply to {url}"):
        chunk_file(url, tmp_path / "x", size=8, offsets_path="o.npy", quiet=True)


def test_a_failed_upload_leaves_no_manifest_and_a_rerun_completes(s3, tmp_path, monkeypatch):
    fs, _ = s3
    url = "s3://corpus/out-failing"
    kw = {"size": 256, "offsets_path": "s3://corpus/offsets.npy", "quiet": True}
    real = store._put
    calls = []

    def refused(fs_, local_path, key):
        calls.append(key)
        if len(calls) == 2:  # the store refuses the second file
            raise PermissionError("Access Denied")
        return real(fs_, local_path, key)

    monkeypatch.setattr(store, "_put", refused)
    with pytest.raises(ChunkError) as raised:
        chunk_file("s3://corpus/tokens.npy", url, **kw)
    assert "writing to the store failed (PermissionError: Access Denied)" in str(raised.value)
    assert "unfinished (no meta.json): run again with --force" in str(raised.value)
    left = _listing(fs, "corpus/out-failing")
    assert "meta.json" not in left  # never taken for a complete output
    assert ".posembed-writing.json" in left
    with pytest.raises(
        ChunkError, match=r"holds an unfinished run's objects \(no meta\.json\); pass --force"
    ):
        chunk_file("s3://corpus/tokens.npy", url, **kw)
    # what is there is never read as an output
    with pytest.raises(ChunkError, match=r"holds an unfinished run's output \(no meta\.json"):
        chunk_file(url, tmp_path / "read", size=8, quiet=True)
    monkeypatch.setattr(store, "_put", real)
    chunk_file("s3://corpus/tokens.npy", url, force=True, **kw)
    chunk_file("s3://corpus/tokens.npy", tmp_path / "want", **kw)
    want = {p.name: p.read_bytes() for p in (tmp_path / "want").iterdir()}
    assert _listing(fs, "corpus/out-failing") == want  # the marker gone, the manifest there


def test_force_replaces_only_posembed_s_objects(s3, tmp_path, capsys):
    fs, _ = s3
    fs.pipe("corpus/theirs/data.bin", b"precious")
    fs.pipe("corpus/theirs/meta.json", b'{"not": "ours"}')  # no "format": not posembed's
    for force in ((), ("--force",)):
        argv = ["chunk", "s3://corpus/tokens.npy", "-o", "s3://corpus/theirs", "--size", "8"]
        assert main([*argv, *force]) == 2
        err = capsys.readouterr().err
        assert "holds objects posembed did not write" in err
        assert err.count("\n") == 1
    assert _listing(fs, "corpus/theirs") == {
        "data.bin": b"precious",
        "meta.json": b'{"not": "ours"}',
    }
    argv = ["chunk", "s3://corpus/corpus.arrow", "-o", "s3://corpus/tokens.npy", "--size", "8"]
    assert main(argv) == 2
    assert "is a file in the store, not a folder of outputs" in capsys.readouterr().err


def test_a_crafted_indexed_dataset_in_the_store_is_one_error(s3, tmp_path):
    fs, _ = s3
    tokens = np.arange(50, dtype=np.uint16)
    from posembed import write_indexed

    write_indexed(tmp_path / "ok", tokens, np.array([0, 20, 50]))
    idx, bin_ = (tmp_path / "ok.idx").read_bytes(), (tmp_path / "ok.bin").read_bytes()
    cases = {
        "magic": (b"XXIDIDX\x00\x00" + idx[9:], bin_, "magic is"),
        "short": (idx[:-3], bin_, "need"),
        "bin": (idx, bin_[:-2], "it holds 98 bytes, but"),
        "header": (idx[:10], bin_, "shorter than the"),
    }
    for name, (i, b, text) in cases.items():
        fs.pipe(f"corpus/bad-{name}.idx", i)
        fs.pipe(f"corpus/bad-{name}.bin", b)
        with pytest.raises(ChunkError, match=text):
            chunk_file(f"s3://corpus/bad-{name}.idx", tmp_path / "out", size=8, quiet=True)
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("url", "options", "text"),
    [
        ("s3://corpus/nothing.npy", {}, "s3://corpus/nothing.npy: no such file in the store"),
        ("s3://nobucket/t.npy", {}, "s3://nobucket/t.npy: no such file in the store"),
        ("s3://corpus/tokens.bin", {}, "a raw token file needs --dtype"),
        ("s3://corpus/corpus.parquet", {"column": "text"}, "column 'text' is string, not a list"),
        ("s3://corpus/corpus.parquet", {"column": "nope"}, "no column 'nope' (its columns:"),
        ("s3://corpus/offsets.npy", {"offsets_path": "s3://corpus/tokens.npy"}, "--offsets"),
        ("s3://corpus/corpus.parquet", {"dtype": "u2"}, "--dtype applies to raw token files"),
        ("s3://corpus/tokens.npy", {"documents": "documents"}, "--documents applies to indexed"),
        ("nosuchprotocol://x/t.npy", {}, "not a URL fsspec reads"),
    ],
)
def test_a_bad_store_input_is_one_error(s3, tmp_path, url, options, text):
    with pytest.raises(ChunkError) as raised:
        chunk_file(url, tmp_path / "out", size=8, quiet=True, **options)
    assert text in str(raised.value)
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "out").exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("change", ["replace", "delete"])
def test_an_object_changed_while_read_is_refused(s3, tmp_path, monkeypatch, change):
    fs, local = s3
    fs.put(str(local / "tokens.npy"), "corpus/moving.npy")
    real = store.read_range
    reads = []

    def changing(*args):
        reads.append(args)
        if len(reads) == 3:  # the header and the first batch read: the object changes
            if change == "replace":
                fs.pipe("corpus/moving.npy", (local / "tokens.npy").read_bytes()[:-2])
            else:
                fs.rm("corpus/moving.npy")
        return real(*args)

    monkeypatch.setattr(store, "read_range", changing)
    monkeypatch.setattr("posembed.corpus._source_store.read_range", changing)
    monkeypatch.setattr("posembed.corpus._chunk.MEMORY_BYTES", 1 << 16)  # many small batches
    with pytest.raises(ChunkError, match=r"s3://corpus/moving\.npy: ") as raised:
        chunk_file(
            "s3://corpus/moving.npy",
            tmp_path / "out",
            size=64,
            offsets_path=local / "offsets.npy",
            quiet=True,
        )
    message = str(raised.value)
    assert "input changed while reading" in message or "no such file in the store" in message
    assert list(tmp_path.iterdir()) == []  # no output, no temporary folder
    # the object as it was again: the run completes
    fs.put(str(local / "tokens.npy"), "corpus/moving.npy")
    monkeypatch.setattr(store, "read_range", real)
    monkeypatch.setattr("posembed.corpus._source_store.read_range", real)
    chunk_file(
        "s3://corpus/moving.npy",
        tmp_path / "out",
        size=64,
        offsets_path=local / "offsets.npy",
        quiet=True,
    )
    chunk_file(local / "tokens.npy", tmp_path / "want", size=64, offsets_path=local / "offsets.npy")
    _same(tmp_path / "out", tmp_path / "want")


def test_dask_and_a_missing_fsspec_are_named(s3, tmp_path, monkeypatch):
    with pytest.raises(ChunkError, match="Arrow, Parquet and folders of windows are read in one"):
        prepare_chunk("s3://corpus/corpus.parquet", tmp_path / "d", size=8)
    monkeypatch.setitem(sys.modules, "fsspec", None)
    with pytest.raises(
        ChunkError, match=r"reading a URL needs fsspec: pip install 'posembed\[store\]'"
    ):
        chunk_file("s3://corpus/tokens.npy", tmp_path / "out", size=8, quiet=True)
    assert list(tmp_path.iterdir()) == []


def test_dask_workers_put_their_parts_straight_in_the_store(s3, tmp_path):
    # a 2-worker cluster on loopback: each task reads its range of the token
    # file from the store and puts its part there; the client adds the small
    # files and the manifest last. Byte for byte the parts of a local run.
    import dask
    import distributed

    from posembed.dask import chunk_parts

    from .conftest import SANITIZED

    if SANITIZED:  # worker processes would need the sanitizer runtime preloaded
        pytest.skip("worker processes of an AddressSanitizer build")
    fs, local = s3
    kw = {"size": 256, "step": 200, "part_tokens": 6000}
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=":0"
    )
    with distributed.Client(cluster) as client:
        meta = chunk_parts(
            "s3://corpus/tokens.npy",
            "s3://corpus/parted",
            offsets_path="s3://corpus/offsets.npy",
            scheduler=client,
            **kw,
        )
        workers = client.run(os.getpid)
    cluster.close()
    assert len(workers) == 2
    with dask.config.set(scheduler="sync"):
        want = chunk_parts(
            local / "tokens.npy", tmp_path / "want", offsets_path=local / "offsets.npy", **kw
        )
    assert meta["parts"] == want["parts"] > 2
    assert {k: v for k, v in meta.items() if k != "input"} == {
        k: v for k, v in want.items() if k != "input"
    }
    got = _listing(fs, "corpus/parted")
    files = {
        p.relative_to(tmp_path / "want").as_posix(): p.read_bytes()
        for p in (tmp_path / "want").rglob("*")
        if p.is_file()
    }
    assert sorted(got) == sorted(files)
    for name, data in files.items():
        if name != "meta.json":  # which records the input's path
            assert got[name] == data, name
    # a second run must be told to replace it, and then leaves no stale part
    with pytest.raises(ChunkError, match="holds an output; pass --force"):
        chunk_parts("s3://corpus/tokens.npy", "s3://corpus/parted", scheduler="sync", size=256)
    with dask.config.set(scheduler="sync"):
        chunk_parts(
            "s3://corpus/tokens.npy",
            "s3://corpus/parted",
            part_tokens=1 << 20,
            force=True,
            size=256,
        )
    names = sorted(_listing(fs, "corpus/parted"))
    assert [n for n in names if n.startswith("parts/")] == ["parts/part-00000.npy"]
    assert "meta.json" in names
    assert ".posembed-writing.json" not in names


def test_convert_and_pack_write_to_the_store(s3, tmp_path, capsys):
    fs, _ = s3
    src = ("s3://corpus/tokens.npy",)
    kw = {"offsets_path": "s3://corpus/offsets.npy", "quiet": True}
    convert_file(*src, "s3://corpus/megatron/data", **kw)
    convert_file(*src, tmp_path / "data", **kw)
    for suffix in (".bin", ".idx"):
        assert (
            fs.cat_file(f"corpus/megatron/data{suffix}")
            == (tmp_path / f"data{suffix}").read_bytes()
        )
    assert not fs.exists("corpus/megatron/data.posembed-writing.json")
    with pytest.raises(ChunkError, match=r"\.idx or \.bin exists; pass --force"):
        convert_file(*src, "s3://corpus/megatron/data", **kw)
    convert_file(*src, "s3://corpus/megatron/data", force=True, **kw)
    fs.pipe("corpus/megatron/other.idx", b"not an index")
    with pytest.raises(ChunkError, match="is no indexed dataset"):
        convert_file(*src, "s3://corpus/megatron/other", force=True, **kw)
    assert fs.cat_file("corpus/megatron/other.idx") == b"not an index"
    # the indexed dataset in the store reads as the local one does
    for unit in ("documents", "sequences"):
        kw2 = {"size": 300, "step": 250, "documents": unit, "quiet": True}
        chunk_file("s3://corpus/megatron/data.idx", tmp_path / f"w-{unit}", **kw2)
        chunk_file(tmp_path / "data", tmp_path / f"want-{unit}", **kw2)
        _same(tmp_path / f"w-{unit}", tmp_path / f"want-{unit}")
    import dask

    from posembed.dask import chunk_parts

    with dask.config.set(scheduler="sync"):  # a Megatron corpus in a store, cut by tasks
        meta = chunk_parts(
            "s3://corpus/megatron/data.idx", tmp_path / "p", size=300, part_tokens=7000
        )
    assert meta["parts"] > 2
    from posembed.dask import read_parts

    chunk_file(tmp_path / "data", tmp_path / "want-p", size=300, quiet=True)
    parted = read_parts(tmp_path / "p")
    np.testing.assert_array_equal(
        np.asarray(parted.tokens), np.load(tmp_path / "want-p" / "windows.npy")
    )
    np.testing.assert_array_equal(parted.lengths, np.load(tmp_path / "want-p" / "lengths.npy"))
    argv = ["chunk", "s3://corpus/megatron/data.idx", "-o", str(tmp_path / "x"), "--size", "8"]
    assert main([*argv, "--dtype", "u2"]) == 2
    assert "--dtype does not apply to s3://corpus/megatron/data.idx, an indexed dataset" in (
        capsys.readouterr().err
    )
    pack_file(*src, "s3://corpus/packed", size=1024, **kw)
    pack_file(*src, tmp_path / "packed", size=1024, **kw)
    want = {p.name: p.read_bytes() for p in (tmp_path / "packed").iterdir()}
    assert _listing(fs, "corpus/packed") == want
    # --format megatron of chunk and pack: PREFIX.bin, then PREFIX.idx, in the store
    for make, name in ((chunk_file, "chunk"), (pack_file, "pack")):
        make(*src, f"s3://corpus/mg-{name}", size=64, format="megatron", **kw)
        make(*src, tmp_path / f"mg-{name}", size=64, format="megatron", **kw)
        for suffix in (".bin", ".idx"):
            got = fs.cat_file(f"corpus/mg-{name}{suffix}")
            assert got == (tmp_path / f"mg-{name}{suffix}").read_bytes()
        with pytest.raises(ChunkError, match=r"\.idx or \.bin exists; pass --force"):
            make(*src, f"s3://corpus/mg-{name}", size=64, format="megatron", **kw)


def test_parts_in_the_store_read_back(s3, tmp_path):
    import dask

    from posembed.dask import chunk_parts, read_parts

    _, local = s3
    kw = {"size": 128, "step": 100, "part_tokens": 9000}
    with dask.config.set(scheduler="sync"):
        chunk_parts(
            "s3://corpus/tokens.npy", "s3://corpus/rp", offsets_path="s3://corpus/offsets.npy", **kw
        )
        chunk_parts(
            local / "tokens.npy", tmp_path / "want", offsets_path=local / "offsets.npy", **kw
        )
    got, want = read_parts("s3://corpus/rp"), read_parts(tmp_path / "want")
    assert got.tokens.shape == want.tokens.shape
    np.testing.assert_array_equal(np.asarray(got.tokens), np.asarray(want.tokens))
    np.testing.assert_array_equal(got.tokens[[5, 0, 77, 5]], want.tokens[[5, 0, 77, 5]])
    for name in ("starts", "lengths", "documents", "doc_offsets"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    with dask.config.set(scheduler="sync"):  # one chunk a part, each read where it runs
        np.testing.assert_array_equal(got.tokens.to_dask().compute(), np.asarray(want.tokens))
    # as a corpus: one document per window
    chunk_file("s3://corpus/rp", tmp_path / "again", size=128, step=128, quiet=True)
    np.testing.assert_array_equal(
        np.load(tmp_path / "again" / "windows.npy"), np.asarray(want.tokens)
    )
    with pytest.raises(ValueError, match=r"not a finished parted chunk output \(no meta\.json"):
        read_parts("s3://corpus/nothing-here")


def test_a_store_that_stops_mid_run_leaves_an_error_and_a_rerun_completes(
    tmp_path, monkeypatch, caplog
):
    # a server of its own, stopped in the middle of a read and of an upload
    # (requests fail at once: one attempt, a 1 s connect timeout), then
    # started again on its port with what it held
    if os.environ.get("POSEMBED_REQUIRE_STORE") != "1":
        pytest.importorskip("moto.server")
        pytest.importorskip("s3fs")
    from bench.store_server import s3_server

    np.save(tmp_path / "t.npy", np.arange(1 << 20, dtype=np.uint16))
    with s3_server("halting", quick_failure=True) as fs:
        fs.put(str(tmp_path / "t.npy"), "halting/t.npy")
        reads = []
        real_read, real_put = store.read_range, store._put

        def stopping_read(*args):
            reads.append(args)
            if len(reads) == 3:
                fs.server.stop()
            return real_read(*args)

        monkeypatch.setattr(store, "read_range", stopping_read)
        monkeypatch.setattr("posembed.corpus._source_store.read_range", stopping_read)
        monkeypatch.setattr("posembed.corpus._chunk.MEMORY_BYTES", 1 << 16)
        with pytest.raises(ChunkError, match=r"s3://halting/t\.npy: the store failed"):
            chunk_file("s3://halting/t.npy", tmp_path / "out", size=64, quiet=True)
        assert not (tmp_path / "out").exists()
        fs.server.start()
        monkeypatch.setattr(store, "read_range", real_read)
        monkeypatch.setattr("posembed.corpus._source_store.read_range", real_read)
        chunk_file("s3://halting/t.npy", tmp_path / "out", size=64, quiet=True)
        # the upload: the server goes after the first file
        puts = []

        def stopping_put(fs_, local_path, key):
            puts.append(key)
            if len(puts) == 2:
                fs.server.stop()
            return real_put(fs_, local_path, key)

        monkeypatch.setattr(store, "_put", stopping_put)
        with caplog.at_level(logging.DEBUG, logger="asyncio"):
            with pytest.raises(ChunkError, match="writing to the store failed"):
                chunk_file("s3://halting/t.npy", "s3://halting/w", size=64, quiet=True)
            gc.collect()  # an orphaned task reports its failure when it is collected
        # the one error, no asyncio traceback beside it
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
        fs.server.start()
        monkeypatch.setattr(store, "_put", real_put)
        left = _listing(fs, "halting/w")
        assert "meta.json" not in left
        assert ".posembed-writing.json" in left
        chunk_file("s3://halting/t.npy", "s3://halting/w", size=64, quiet=True, force=True)
        want = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
        assert _listing(fs, "halting/w") == want


def test_indexed_corpus_reads_a_dataset_in_the_store(s3, tmp_path):
    import posembed

    fs, _ = s3
    rng = np.random.default_rng(8)
    tokens = rng.integers(0, 60_000, 5000).astype(np.uint16)
    posembed.write_indexed(tmp_path / "d", tokens, np.array([0, 10, 10, 4000, 5000]))
    for suffix in (".bin", ".idx"):
        fs.put(str(tmp_path / f"d{suffix}"), f"corpus/ic/d{suffix}")
    for prefix in ("s3://corpus/ic/d", "s3://corpus/ic/d.idx", "s3://corpus/ic/d.bin"):
        got, want = posembed.IndexedCorpus(prefix), posembed.IndexedCorpus(tmp_path / "d")
        assert str(got.prefix) == "s3://corpus/ic/d"
        assert len(got) == len(want) == 4
        np.testing.assert_array_equal(got.offsets, want.offsets)
        np.testing.assert_array_equal(got[3], want[3])
        np.testing.assert_array_equal(got.read(5, 4100), want.read(5, 4100))
        np.testing.assert_array_equal(got.to_arrays()[0], tokens)
    # windows of it, as of the local one
    w = posembed.windows(posembed.IndexedCorpus("s3://corpus/ic/d"), 64, step=48)
    v = posembed.windows(posembed.IndexedCorpus(tmp_path / "d"), 64, step=48)
    np.testing.assert_array_equal(w.tokens, v.tokens)
    with pytest.raises(ValueError, match=r"s3://corpus/ic/nothing\.idx: no such file in the store"):
        posembed.IndexedCorpus("s3://corpus/ic/nothing")


# ---- outputs that meet inputs, other runs, or no prefix ---------------------------------


def _env(fs) -> dict[str, str]:
    """A fresh process's environment that reaches this test's server."""
    from bench.store_server import CREDENTIALS

    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSSPEC_", "AWS_"))}
    env.update(CREDENTIALS, FSSPEC_S3_ENDPOINT_URL=f"http://127.0.0.1:{fs.server.port}")
    return env


def test_an_output_never_replaces_or_deletes_its_input_in_the_store(s3, tmp_path, capsys):
    # the store's prefix is compared with every input before anything is
    # written, --force or not, as a local output is
    fs, local = s3
    convert_file(
        local / "tokens.npy", "s3://corpus/in/x", offsets_path=local / "offsets.npy", quiet=True
    )
    chunk_file(local / "tokens.npy", "s3://corpus/in/win", size=64, quiet=True)
    fs.put(str(local / "tokens.npy"), "corpus/in/dir/tokens.npy")
    before = _listing(fs, "corpus/in")
    runs = [
        [
            "pack",
            "s3://corpus/in/x.idx",
            "-o",
            "s3://corpus/in/x",
            "--format=megatron",
            "--size=64",
        ],
        ["convert", "s3://corpus/in/x.idx", "-o", "s3://corpus/in/x"],
        ["convert", "s3://corpus/in/x.bin", "-o", "s3://corpus/in/x"],
        ["chunk", "s3://corpus/in/win", "-o", "s3://corpus/in/win", "--size", "8"],
        ["chunk", "s3://corpus/in/win/", "-o", "s3://corpus/in/win/", "--size", "8"],
        ["chunk", "s3://corpus/in/dir/tokens.npy", "-o", "s3://corpus/in/dir", "--size", "8"],
        ["chunk", "s3://corpus/in/x.idx", "-o", "s3://corpus/in/x.idx", "--size", "8"],
        [
            "chunk",
            "s3://corpus/tokens.npy",
            "--offsets=s3://corpus/in/dir/tokens.npy",
            "-o=s3://corpus/in",
            "--size=8",
        ],
    ]
    for argv in runs:
        for force in ([], ["--force"]):
            assert main([*argv, *force, "--quiet"]) == 2, argv
            err = capsys.readouterr().err
            assert "would replace the input s3://corpus/in/" in err, (argv, err)
            assert err.count("\n") == 1
    # the Dask path checks its store output the same way before any task runs
    with pytest.raises(ChunkError, match="would replace the input"):
        prepare_chunk("s3://corpus/in/dir/tokens.npy", "s3://corpus/in/dir", size=8, force=True)
    assert _listing(fs, "corpus/in") == before


@pytest.mark.parametrize("command", ["chunk", "convert", "pack"])
def test_a_whole_bucket_is_no_output(s3, capsys, command):
    fs, _ = s3
    before = _listing(fs, "corpus")
    argv = [command, "s3://corpus/tokens.npy", "--offsets", "s3://corpus/offsets.npy"]
    extra = {"chunk": ["--size", "8"], "convert": [], "pack": ["--size", "64"]}[command]
    for out in ("s3://corpus", "s3://corpus/"):
        assert main([*argv, "-o", out, *extra, "--force", "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "output s3://corpus names a whole bucket, not a prefix in it" in err
        assert err.count("\n") == 1
    assert _listing(fs, "corpus") == before


def _marker(fs, key: str, **fields) -> None:
    import json
    import time

    marker = {"writing": "posembed", "run": "other", "host": "elsewhere", "pid": 1}
    marker.update({"renewed": time.time(), "ended": False}, **fields)
    fs.pipe(key, json.dumps(marker).encode())


@pytest.mark.parametrize("pair", [False, True])
def test_a_live_run_s_output_is_never_replaced_a_stale_or_ended_one_is(s3, tmp_path, pair):
    import time

    fs, local = s3
    out = f"s3://corpus/live-{int(pair)}/o"
    marker = f"corpus/live-{int(pair)}/o" + (
        ".posembed-writing.json" if pair else "/.posembed-writing.json"
    )
    kw = {"offsets_path": local / "offsets.npy", "quiet": True, "force": True}

    def run() -> object:
        if pair:
            return convert_file(local / "tokens.npy", out, **kw)
        return chunk_file(local / "tokens.npy", out, size=64, **kw)

    _marker(fs, marker)  # another host's run, renewed just now
    with pytest.raises(ChunkError, match="another posembed run is writing this output now"):
        run()
    assert fs.cat_file(marker).startswith(b'{"writing": "posembed", "run": "other"')
    _marker(fs, marker, renewed=time.time() - store.STALE_SECONDS - 5)  # gone quiet
    run()
    assert not fs.exists(marker)
    _marker(fs, marker, ended=True)  # a run that failed and said so
    run()
    _marker(fs, marker, host=__import__("socket").gethostname(), pid=2**22 + 7)  # ended here
    run()
    assert not fs.exists(marker)


def test_concurrent_runs_leave_one_run_s_output(s3, tmp_path):
    # four processes write the same prefix with --force, each with its own
    # window size: each ends with 0 or 2, one of them with 0, and the prefix
    # holds exactly the output of a run that ended with 0, never a mix
    fs, local = s3
    sizes = (8, 16, 32, 64)
    procs = [
        subprocess.Popen(
            [
                *(sys.executable, "-m", "posembed.cli", "chunk", "s3://corpus/tokens.npy"),
                *("--offsets", "s3://corpus/offsets.npy", "-o", "s3://corpus/same"),
                *("--size", str(size), "--force", "--quiet"),
            ],
            env=_env(fs),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for size in sizes
    ]
    done = {
        size: (p.wait(timeout=300), p.stderr.read()) for size, p in zip(sizes, procs, strict=True)
    }
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    finished = [size for size, (rc, _) in done.items() if rc == 0]
    assert finished, done
    for rc, err in done.values():
        assert rc in (0, 2)
        if rc == 2:  # one line (an editable install's rebuild may speak first)
            lines = [line for line in err.splitlines() if line.startswith("posembed")]
            assert len(lines) == 1, err
            assert "another posembed run" in lines[0], err
    got = _listing(fs, "corpus/same")
    import json

    size = json.loads(got["meta.json"])["size"]
    assert size in finished
    want = tmp_path / "want"
    chunk_file("s3://corpus/tokens.npy", want, size=size, offsets_path=local / "offsets.npy")
    assert got == {p.name: p.read_bytes() for p in want.iterdir()}


def test_two_runs_claiming_one_output_at_once_leave_one_going_on(s3, monkeypatch):
    # both write their marker at the same moment; each reads it again after
    # the settling pause, and only the run whose marker stayed goes on
    import threading

    fs, _ = s3
    monkeypatch.setattr(store, "SETTLE_SECONDS", 1.0)  # longer than any claim here takes
    leases = [store._Lease(fs, "corpus/race/m.json", "s3://corpus/race/m.json") for _ in range(3)]
    monkeypatch.setattr(store._Lease, "live_other", lambda self: None)  # all look at once
    barrier, outcome = threading.Barrier(len(leases)), {}

    def claim(k: int) -> None:
        barrier.wait()
        try:
            leases[k].claim()
            outcome[k] = "claimed"
        except ChunkError as exc:
            outcome[k] = str(exc)

    threads = [threading.Thread(target=claim, args=(k,)) for k in range(len(leases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claimed = [k for k, v in outcome.items() if v == "claimed"]
    assert len(claimed) == 1, outcome
    assert all("at the same moment" in v for k, v in outcome.items() if k not in claimed)
    leases[claimed[0]].check()
    leases[claimed[0]].release(remove=True)
    assert not fs.exists("corpus/race/m.json")


def test_a_run_whose_marker_is_taken_stops_before_its_manifest(s3, tmp_path, monkeypatch):
    fs, local = s3
    real_put = store._put

    def taken(fs_, local_path, key):
        if key.endswith("starts.npy"):
            _marker(fs, "corpus/taken/.posembed-writing.json")
        return real_put(fs_, local_path, key)

    monkeypatch.setattr(store, "_put", taken)
    with pytest.raises(ChunkError, match="another posembed run took over this output"):
        chunk_file(local / "tokens.npy", "s3://corpus/taken", size=64, quiet=True,
                   offsets_path=local / "offsets.npy")  # fmt: skip
    assert "meta.json" not in _listing(fs, "corpus/taken")


def test_failures_of_orphaned_store_tasks_are_not_printed(s3, caplog):
    # an async store client's tasks that fail with nobody awaiting them (a
    # server gone mid-upload) would print asyncio's traceback beside the
    # command's one error line; posembed drops those reports, and only those
    import asyncio

    from fsspec.asyn import get_loop

    store.filesystem("s3://corpus/x")
    loop = get_loop()

    async def fails() -> None:
        raise OSError("the server went away")

    with caplog.at_level(logging.DEBUG, logger="asyncio"):
        future = asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop)
        future.result(timeout=10)
        task_made = asyncio.run_coroutine_threadsafe(_orphan(fails), loop)
        task_made.result(timeout=10)
        gc.collect()
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0.05), loop).result(timeout=10)
        gc.collect()
        loop.call_soon_threadsafe(
            loop.call_exception_handler, {"message": "something else went wrong"}
        )
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0.05), loop).result(timeout=10)
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [m for m in messages if "never retrieved" in m], messages
    assert any("something else went wrong" in m for m in messages), messages


async def _orphan(make) -> None:
    """Start a task that fails, and drop it unawaited."""
    import asyncio

    task = asyncio.ensure_future(make())
    await asyncio.sleep(0.01)
    assert task.done()
    del task  # dropped unawaited: its failure is reported when it is collected

"""posembed.dask: windows and stitch over Dask arrays equal posembed's on one machine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed

da = pytest.importorskip("dask.array")  # the test extra installs dask; posembed does not need it
distributed = pytest.importorskip("distributed")
import dask  # noqa: E402  (after the skip: dask is an optional extra)

import posembed.dask as pdask  # noqa: E402

from .conftest import SANITIZED, assert_same  # noqa: E402

FIELDS = ("tokens", "starts", "lengths", "documents", "doc_offsets", "size", "step", "tail")
REDUCES = ["mean", "sum", "max", "first", "center"]


def assert_same_windows(got: posembed.Windows, want: posembed.Windows) -> None:
    for name in FIELDS:
        a, b = getattr(got, name), getattr(want, name)
        if isinstance(b, np.ndarray):
            assert_same(a, b)
        else:
            assert a == b, name


def random_case(rng: np.random.Generator) -> dict[str, Any]:
    n = int(rng.integers(0, 120))
    dtype = rng.choice(np.array(["int32", "uint16", "int64", ">i4", "uint8"], dtype=object))
    info = np.iinfo(np.dtype(dtype))
    tokens = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    size = int(rng.integers(1, 24))
    kw: dict[str, Any] = {
        "size": size,
        "step": int(rng.integers(1, size + 1)),
        "tail": str(rng.choice(["pad", "drop", "shift"])),
        "pad_value": int(info.max),
    }
    if n and rng.random() < 0.6:
        cuts = np.sort(rng.integers(0, n + 1, int(rng.integers(0, 8))))
        kw["offsets"] = np.concatenate([[0], cuts, [n]])
    return {"tokens": tokens, **kw}


@pytest.mark.parametrize("seed", range(60))
def test_layout_is_the_windows_layout(seed):
    # the layout posembed.dask cuts its blocks by: posembed.window_layout's
    case = random_case(np.random.default_rng(seed))
    w = posembed.windows(**case)
    layout = posembed.window_layout(w.doc_offsets, w.size, step=w.step, tail=w.tail)
    assert_same(layout.starts, w.starts)
    assert_same(layout.lengths, w.lengths)
    assert_same(layout.documents, w.documents)


@pytest.mark.parametrize("seed", range(40))
def test_windows_and_stitch_match_one_machine_for_any_chunking(seed):
    """Chunks from 1 token (smaller than any window) to the whole array, one
    document or many, every tail and dtype: the same windows, byte for byte,
    and the same stitched values for every reduce."""
    rng = np.random.default_rng(1000 + seed)
    case = random_case(rng)
    tokens = case.pop("tokens")
    want = posembed.windows(tokens, **case)
    chunk = int(rng.choice([1, 2, 3, case["size"] - 1 or 1, case["size"], 17, 10_000]))
    with dask.config.set(scheduler="sync"):
        lazy = pdask.windows(da.from_array(tokens, chunks=chunk), **case)
        assert len(lazy) == len(want)
        assert_same_windows(lazy.compute(), want)
        values = rng.standard_normal((len(want), want.size, 2)).astype(np.float32)
        ints = rng.integers(-50, 50, (len(want), want.size))
        vchunk = max(1, int(rng.integers(1, 9)))
        for reduce in REDUCES:
            for v in (values, ints):
                got = pdask.stitch(da.from_array(v, chunks=vchunk), lazy, reduce=reduce, fill=-3)
                assert_same(got.compute(), posembed.stitch(v, want, reduce=reduce, fill=-3))


def test_inputs_numpy_offsets_as_dask_and_the_round_trip():
    tokens = np.arange(1000, dtype=np.uint32)
    offsets = np.array([0, 10, 10, 400, 1000])
    with dask.config.set(scheduler="threads"):
        lazy = pdask.windows(tokens, 64, overlap=16, offsets=da.from_array(offsets, chunks=2))
        assert_same_windows(
            lazy.compute(), posembed.windows(tokens, 64, overlap=16, offsets=offsets)
        )
        back = pdask.stitch(lazy.tokens[:, :, None], lazy, reduce="first")[:, 0]
        assert_same(back.compute(), tokens)


def test_bad_input_is_refused_as_posembed_refuses_it():
    t = da.arange(10, chunks=3)
    cases = [
        (lambda: pdask.windows(da.zeros((2, 2), dtype=int), 4), ValueError, "1-D"),
        (lambda: pdask.windows(da.zeros(5), 4), TypeError, "integers"),
        (lambda: pdask.windows(t, 0), ValueError, "size"),
        (lambda: pdask.windows(t, 4, step=5), ValueError, "step"),
        (lambda: pdask.windows(t, 4, tail="wrap"), ValueError, "tail"),
        (lambda: pdask.windows(t, 4, pad_value=1.5), TypeError, "pad_value"),
        (lambda: pdask.windows(t, 4, offsets=[0, 5]), ValueError, "offsets"),
        (
            lambda: pdask.stitch(np.zeros((3, 4)), posembed.windows(np.arange(10), 4)),
            TypeError,
            "DaskWindows",
        ),
        (lambda: pdask.stitch(np.zeros((2, 4)), pdask.windows(t, 4)), ValueError, "leading shape"),
        (
            lambda: pdask.stitch(np.zeros((3, 4)), pdask.windows(t, 4), reduce="median"),
            ValueError,
            "reduce",
        ),
    ]
    for call, exc, text in cases:
        with pytest.raises(exc, match=text):
            call()


# ---------------------------------------------------------------- a real cluster


@pytest.fixture(scope="module")
def client():
    if SANITIZED:
        # worker processes would need the sanitizer runtime preloaded; the
        # single-process tests above run the same code under the sanitizers
        pytest.skip("worker processes of an AddressSanitizer build")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=":0"
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


@pytest.mark.parametrize("chunk", [5, 63, 64, 1000, 4096])
def test_a_local_cluster_gives_the_one_machine_result(client, chunk):
    rng = np.random.default_rng(chunk)
    lengths = rng.integers(0, 400, 10)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = rng.integers(0, 50_000, offsets[-1]).astype(np.int32)
    for tail in ("pad", "drop", "shift"):
        want = posembed.windows(tokens, 64, step=48, tail=tail, offsets=offsets)
        lazy = pdask.windows(
            da.from_array(tokens, chunks=chunk), 64, step=48, tail=tail, offsets=offsets
        )
        values = rng.standard_normal((len(want), 64, 3))
        stitched = pdask.stitch(da.from_array(values, chunks=(50, 64, 3)), lazy, reduce="mean")
        rows, back = dask.compute(lazy.tokens, stitched)  # the client is the default scheduler
        assert_same(rows, want.tokens)
        assert_same(back, posembed.stitch(values, want, reduce="mean"))


class KillFirstTask(distributed.WorkerPlugin):
    """Kills the worker process running the first task to start (once,
    marked by a file), as a machine lost mid-run would be."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
        if finish == "executing":  # the first task of the run to start
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.close(fd)
            os._exit(1)


def test_a_worker_killed_mid_run_changes_nothing(client, tmp_path: Path):
    import cloudpickle

    cloudpickle.register_pickle_by_value(__import__(__name__, fromlist=["_"]))
    marker = tmp_path / "killed"
    rng = np.random.default_rng(5)
    offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 3000, 30))])
    tokens = rng.integers(0, 2**31, offsets[-1], dtype=np.int64).astype(np.uint32)
    want = posembed.windows(tokens, 128, overlap=32, offsets=offsets)
    before = set(client.scheduler_info()["workers"])
    client.register_plugin(KillFirstTask(str(marker)), name="kill-first-task")
    try:
        lazy = pdask.windows(da.from_array(tokens, chunks=2000), 128, overlap=32, offsets=offsets)
        got = lazy.compute()
    finally:
        client.unregister_worker_plugin("kill-first-task")
    assert marker.exists()  # a worker did die, running one of the blocks
    client.wait_for_workers(2, timeout=60)
    assert set(client.scheduler_info()["workers"]) != before  # the nanny started a new one
    assert_same_windows(got, want)  # nothing lost, nothing twice


# ---------------------------------------------------------------- posembed chunk --dask


def corpus(tmp_path: Path, n_docs: int = 25, seed: int = 3) -> tuple[Path, Path, np.ndarray]:
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 900, n_docs))]).astype(np.int64)
    tokens = rng.integers(0, 65_535, offsets[-1]).astype(np.uint16)
    raw = tmp_path / "train.bin"
    tokens.tofile(raw)
    np.save(tmp_path / "offsets.npy", offsets)
    return raw, tmp_path / "offsets.npy", tokens


@pytest.mark.parametrize("part_tokens", [37, 1000, 10**9])  # 37: parts smaller than a window
@pytest.mark.parametrize("tail", ["pad", "drop", "shift"])
def test_chunk_parts_reads_back_as_the_one_machine_windows(tmp_path, part_tokens, tail):
    raw, offs, tokens = corpus(tmp_path)
    offsets = np.load(offs)
    want = posembed.windows(tokens, 128, overlap=32, tail=tail, offsets=offsets, pad_value=9)
    out = tmp_path / "out"
    with dask.config.set(scheduler="threads"):
        meta = pdask.chunk_parts(
            raw,
            out,
            size=128,
            overlap=32,
            tail=tail,
            dtype="uint16",
            offsets_path=offs,
            pad_value=9,
            part_tokens=part_tokens,
        )
    assert meta["windows"] == len(want)
    assert meta["parts"] == max(1, -(-len(tokens) // part_tokens))
    got = pdask.read_parts(out)
    assert_same(np.asarray(got.tokens), want.tokens)
    for name in ("starts", "lengths", "documents", "doc_offsets"):
        assert_same(np.asarray(getattr(got, name)), getattr(want, name))
    assert (got.size, got.step, got.tail) == (want.size, want.step, want.tail)
    # the view: rows, slices (within one part a memory map, across parts a copy), gathers
    view = got.tokens
    assert len(view) == len(want)
    assert view.shape == want.tokens.shape
    rng = np.random.default_rng(part_tokens)
    if len(want):
        rows = rng.integers(0, len(want), 50)
        assert_same(view[rows], want.tokens[rows])
        assert_same(view[int(rows[0])], want.tokens[rows[0]])
        assert_same(view[-1], want.tokens[-1])
        assert_same(view[3:40], want.tokens[3:40])
        assert_same(view[::7, 5], want.tokens[::7, 5])
        assert_same(view.to_dask().compute(), want.tokens)
    with pytest.raises(IndexError, match="out of range"):
        view[len(want)]
    with pytest.raises(IndexError, match="out of range"):
        view[np.array([0, len(want)])]
    assert not list(tmp_path.glob(".*"))  # no temporary folder left behind
    assert not list((out / "parts").glob("*.partial*"))


def test_chunk_dask_command_on_a_local_cluster(client, tmp_path):
    """`posembed chunk --dask ADDRESS` on real worker processes; a worker
    killed mid-run (the plugin above) changes nothing: its part is written again."""
    import cloudpickle

    from posembed import cli

    cloudpickle.register_pickle_by_value(__import__(__name__, fromlist=["_"]))
    raw, offs, tokens = corpus(tmp_path, n_docs=60)
    want = posembed.windows(tokens, 256, step=200, offsets=np.load(offs))
    marker = tmp_path / "killed"
    client.register_plugin(KillFirstTask(str(marker)), name="kill-first-task")
    try:
        code = cli.main(
            [
                "chunk",
                str(raw),
                "-o",
                str(tmp_path / "out"),
                "--size",
                "256",
                "--step",
                "200",
                "--dtype",
                "uint16",
                "--offsets",
                str(offs),
                "--dask",
                client.scheduler.address,
                "--part-tokens",
                "3000",
                "--quiet",
            ]
        )
    finally:
        client.unregister_worker_plugin("kill-first-task")
    assert code == 0
    assert marker.exists()
    got = pdask.read_parts(tmp_path / "out")
    assert len(got.tokens.parts) == -(-len(tokens) // 3000)
    assert_same(np.asarray(got.tokens), want.tokens)
    assert_same(np.asarray(got.starts), want.starts)
    client.wait_for_workers(2, timeout=60)


def test_chunk_parts_refuses_bad_input(tmp_path):
    raw, _offs, _ = corpus(tmp_path, n_docs=3)
    with pytest.raises(ValueError, match="part_tokens"):
        pdask.chunk_parts(raw, tmp_path / "o", size=8, dtype="uint16", part_tokens=0)
    with pytest.raises(ValueError, match="needs --dtype"):
        pdask.chunk_parts(raw, tmp_path / "o", size=8)
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "meta.json").write_text("{}")  # as if posembed wrote it
    with pytest.raises(ValueError, match="exists; pass --force"):
        pdask.chunk_parts(raw, tmp_path / "o", size=8, dtype="uint16")
    with pytest.raises(ValueError, match="not a parted chunk output"):
        pdask.read_parts(tmp_path / "o")


# ---------------------------------------------------------------- embed


EMBED_CASES = [
    ((37, 50), 5, {}),
    ((37, 50), 1, {"dropout": 0.3, "seed": 9}),
    ((37, 50), 37, {"offset": 3, "dropout": 0.5, "seed": 1}),
    ((300,), 7, {"dropout": 0.2, "seed": 4}),
    ((300,), 300, {"offset": 17}),
    ((10, 64), 3, {"positions": "row", "dropout": 0.1, "seed": 2}),
    ((120,), 11, {"positions": "row", "dropout": 0.25, "seed": 3}),
]


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "bfloat16"])
@pytest.mark.parametrize(("shape", "chunk", "kw"), EMBED_CASES)
def test_embed_matches_one_machine_mask_included(dtype, shape, chunk, kw):
    """Each block gets the dropout mask the whole batch gives its rows."""
    import ml_dtypes

    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(len(shape) * 100 + chunk)
    tok = rng.standard_normal((500, 24)).astype(dt)
    pos = rng.standard_normal((400, 24)).astype(dt)
    ids = rng.integers(0, 500, shape)
    kw = dict(kw)
    if kw.get("positions") == "row":
        kw["positions"] = rng.integers(0, 400, shape[-1])
    want = posembed.embed(tok, ids, pos, **kw)
    with dask.config.set(scheduler="threads"):
        got = pdask.embed(tok, da.from_array(ids, chunks=chunk), pos, **kw)
        assert got.shape == want.shape
        assert_same(got.compute(), want)


def test_embed_draws_one_seed_and_checks_up_front():
    tok = np.zeros((5, 4), np.float32)
    ids = da.from_array(np.arange(20).reshape(4, 5) % 5, chunks=1)
    lazy = pdask.embed(tok, ids, tok, dropout=0.5)
    seed = posembed.last_seed()
    assert_same(lazy.compute(), posembed.embed(tok, np.asarray(ids), tok, dropout=0.5, seed=seed))
    with pytest.raises(TypeError, match="share a dtype"):
        pdask.embed(tok, ids, tok.astype(np.float64))
    with pytest.raises(TypeError, match="integers"):
        pdask.embed(tok, da.zeros((2, 2)), tok)
    with pytest.raises(ValueError, match=r"\(T,\) or \(B, T\)"):
        pdask.embed(tok, da.zeros((2, 2, 2), dtype=int), tok)
    with pytest.raises(ValueError, match="dropout"):
        pdask.embed(tok, ids, tok, dropout=1.5)
    with pytest.raises(IndexError, match="go past"):
        pdask.embed(tok, ids, tok, offset=1)
    with pytest.raises(ValueError, match="broadcast"):
        pdask.embed(tok, ids, tok, positions=np.zeros(3, int))
    bad = pdask.embed(tok, da.from_array(np.array([[0, 1, 9, 2, 3]]), chunks=1), tok)
    with pytest.raises(IndexError, match="token id 9"):  # found when the block computes
        bad.compute(scheduler="sync")


def test_embed_on_a_local_cluster(client):
    rng = np.random.default_rng(8)
    tok = rng.standard_normal((1000, 32)).astype(np.float32)
    pos = rng.standard_normal((128, 32)).astype(np.float32)
    ids = rng.integers(0, 1000, (64, 128))
    want = posembed.embed(tok, ids, pos, dropout=0.1, seed=77)
    got = pdask.embed(tok, da.from_array(ids, chunks=(9, 128)), pos, dropout=0.1, seed=77)
    assert_same(got.compute(), want)

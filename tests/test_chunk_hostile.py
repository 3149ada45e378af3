"""`posembed chunk` against hostile inputs: files that change while they are
read, crafted ``.npy`` headers, every ``--dtype`` spelling, and memory bounded
by bytes whatever the window size."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posembed
import posembed.corpus._chunk as chunk_module
from posembed.cli import main
from posembed.corpus._chunk import ChunkError, chunk_file
from posembed.io._tokens import TokenFile

from .conftest import run_peak_rss, skip_if_sanitized

SCRIPT = str(Path(sys.executable).parent / "posembed")
CHANGED = "input changed while reading"


def one_error_line(stderr: str) -> str:
    errors = [ln for ln in stderr.splitlines() if ln.startswith("posembed chunk: error")]
    assert len(errors) == 1, stderr
    assert "Traceback" not in stderr
    return errors[0]


def leftovers(folder: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


# ---- a file that changes while it is read ---------------------------------------------


def _disturb(path: Path, original: bytes, stop: threading.Event, seed: int) -> None:
    """Truncate the file (to 0, to half, by a few bytes) and write it back, over and over."""
    rng = random.Random(seed)
    n = len(original)
    while not stop.is_set():
        cut = rng.choice([0, n // 2, n - 3, n - 1])
        with open(path, "r+b") as f:
            f.truncate(cut)
            time.sleep(rng.uniform(0, 0.002))
            f.seek(cut)
            f.write(original[cut:])
        time.sleep(rng.uniform(0, 0.004))


STEP_48 = ["--size", "64", "--step", "48", "--quiet", "--force"]


def test_cli_survives_an_input_truncated_and_rewritten_while_it_runs(tmp_path):
    # Each round races a thread that truncates and restores the input against
    # the command: exit 0 with the right windows, or exit 2 with one line
    # saying so; never a signal (a memory map died of SIGBUS), no leftovers.
    tokens = np.random.default_rng(1).integers(0, 50_000, 1 << 21, dtype=np.uint16)
    src = tmp_path / "train.bin"
    original = tokens.tobytes()
    outcomes = []
    for round_ in range(6):
        src.write_bytes(original)
        out = tmp_path / "out"
        # what an earlier round left (--force replaces it only on success)
        earlier = {p.name: p.read_bytes() for p in out.iterdir()} if out.exists() else None
        stop = threading.Event()
        racer = threading.Thread(target=_disturb, args=(src, original, stop, round_))
        racer.start()
        try:
            done = subprocess.run(
                [SCRIPT, "chunk", src, "--dtype", "uint16", "-o", out, *STEP_48],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        finally:
            stop.set()
            racer.join()
        assert done.returncode in (0, 2), (done.returncode, done.stderr)
        if done.returncode == 2:
            # or the command started on a truncated file, an odd number of bytes
            line = one_error_line(done.stderr)
            assert CHANGED in line or "is not a whole number of uint16 tokens" in line, line
            now = {p.name: p.read_bytes() for p in out.iterdir()} if out.exists() else None
            assert now == earlier  # the output of an earlier round, or none, untouched
        else:
            # the whole file, or a truncated one that stayed so while it was read
            seen = json.loads((out / "meta.json").read_text())["tokens"]
            assert seen in (len(tokens), len(tokens) // 2, 0)
            want = posembed.windows(tokens[:seen], 64, step=48)
            assert np.array_equal(np.load(out / "windows.npy", mmap_mode="r"), want.tokens)
        assert leftovers(tmp_path, {"train.bin", "out"}) == []
        outcomes.append(done.returncode)
    assert 2 in outcomes  # the races did change the file under the command


RACE_CHILD = textwrap.dedent(
    """
    import json, os, random, sys, threading, time
    from pathlib import Path
    import numpy as np
    import posembed, posembed.corpus._chunk as m, posembed.corpus._pipeline as p

    folder, rounds = Path(sys.argv[1]), int(sys.argv[2])
    m.MEMORY_BYTES = 1 << 18  # many batches: many chances to meet the change
    tokens = np.random.default_rng(2).integers(0, 1 << 30, 1 << 19, dtype=np.int32)
    original = tokens.tobytes()
    want = posembed.windows(tokens, 16, step=5, tail="shift").tokens
    src = folder / "tokens.bin"
    seen = {"ok": 0, "changed": 0}
    from posembed.corpus._sink_npy import NpySink

    # a batch is cut by _cut (beside reading and writing threads) or by the
    # sink straight from the file (cut_from): the file shrinks before either
    real_cut, real_cut_from = p._cut, NpySink.cut_from
    for r in range(rounds):
        src.write_bytes(original)
        rng = random.Random(r)
        cut = rng.choice([0, len(original) // 2, len(original) - 4])
        calls = []

        def shrinking(real):
            def call(*args, **kw):
                calls.append(1)
                if len(calls) == 1 + r % 3:  # the file shrinks between two batches
                    os.truncate(src, cut)
                return real(*args, **kw)
            return call

        p._cut, NpySink.cut_from = shrinking(real_cut), shrinking(real_cut_from)
        try:
            m.chunk_file(src, folder / "out", size=16, step=5, tail="shift", dtype="int32",
                         force=True)
            got = np.load(folder / "out" / "windows.npy")
            assert np.array_equal(got, want), "wrong windows"
            seen["ok"] += 1
        except m.ChunkError as exc:
            assert "input changed while reading" in str(exc), str(exc)
            seen["changed"] += 1
        finally:
            p._cut, NpySink.cut_from = real_cut, real_cut_from
        left = sorted(p.name for p in folder.iterdir() if p.name not in ("tokens.bin", "out"))
        assert not left, left
    print(json.dumps(seen))
    """
)


def test_chunk_file_never_maps_a_file_that_shrinks_between_batches(tmp_path):
    # The file is truncated between two batches, in a child process (a memory
    # map dies of SIGBUS there): every round must end in a ChunkError.
    done = subprocess.run(
        [sys.executable, "-c", RACE_CHILD, str(tmp_path), "12"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (done.returncode, signal_name(done.returncode), done.stderr)
    assert json.loads(done.stdout.splitlines()[-1]) == {"ok": 0, "changed": 12}


def before_each_batch(monkeypatch, hook):
    """Calls hook() before each batch is read, whichever way the run reads it:
    by TokenFile.read_into (beside reading and writing threads) or by the
    sink straight from the file (NpySink.cut_from)."""
    from posembed.corpus._sink_npy import NpySink

    for owner, name in ((TokenFile, "read_into"), (NpySink, "cut_from")):
        real = getattr(owner, name)

        def call(*args, _real=real, **kwargs):
            hook()
            return _real(*args, **kwargs)

        monkeypatch.setattr(owner, name, call)


def signal_name(rc: int) -> str:
    return signal.Signals(-rc).name if rc < 0 else ""


@pytest.mark.parametrize("step", [32, 16], ids=["blocks read as rows", "windows cut"])
def test_a_file_rewritten_in_place_is_refused_and_the_old_output_kept(tmp_path, monkeypatch, step):
    # Same size, other tokens, written between two batches: old and new tokens
    # would mix. The earlier output, which force=True would replace, stays.
    tokens = np.arange(1 << 16, dtype=np.uint16)
    src = tmp_path / "tokens.npy"
    np.save(src, tokens)
    out = tmp_path / "out"
    chunk_file(src, out, size=32, step=step, quiet=True)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setattr(chunk_module, "MEMORY_BYTES", 1 << 16)
    calls = []

    def rewrite_on_second_batch():
        calls.append(1)
        if len(calls) == 2:
            time.sleep(0.05)  # the file's clock moves on
            np.save(src, tokens[::-1].copy())

    before_each_batch(monkeypatch, rewrite_on_second_batch)
    with pytest.raises(ChunkError, match=rf"tokens\.npy: {CHANGED} \(it was modified"):
        chunk_file(src, out, size=32, step=step, force=True, quiet=True)
    assert len(calls) > 2
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert leftovers(tmp_path, {"tokens.npy", "out"}) == []


def test_an_input_replaced_between_the_checks_and_the_run_is_refused(tmp_path):
    tokens = np.arange(1000, dtype=np.int64)
    src = tmp_path / "tokens.npy"
    np.save(src, tokens)
    job = chunk_module.prepare_chunk(src, tmp_path / "out", size=8)
    np.save(tmp_path / "other.npy", tokens + 1)
    os.replace(tmp_path / "other.npy", src)  # another file of the same size
    with pytest.raises(ChunkError, match=rf"{CHANGED} \(it was modified or replaced\)"):
        job.tokens.open()
    assert job.tokens.fd == -1


# ---- crafted .npy headers ---------------------------------------------------------------


def npy_bytes(header: str, data: bytes = b"", version: tuple[int, int] = (1, 0)) -> bytes:
    text = header.encode("latin1")
    pad = (-(10 + len(text) + 1)) % 64
    text += b" " * pad + b"\n"
    return b"\x93NUMPY" + bytes(version) + len(text).to_bytes(2, "little") + text + data


def header(descr: str = "'<u2'", fortran: str = "False", shape: str = "(4,)") -> str:
    return f"{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}"


DATA = np.arange(4, dtype=np.uint16).tobytes()
CRAFTED = {
    "huge shape": (npy_bytes(header(shape="(2**62,)"), DATA), r"not a valid \.npy file"),
    "2^62 literal": (npy_bytes(header(shape=f"({2**62},)"), DATA), r"2\^62 bytes or more"),
    "negative dim": (npy_bytes(header(shape="(-4,)"), DATA), r"non-negative integers"),
    "bool dim": (npy_bytes(header(shape="(True,)"), DATA), r"non-negative integers"),
    "huge header length": (
        b"\x93NUMPY\x02\x00" + (1 << 30).to_bytes(4, "little") + b"{}",
        r"runs past the file",
    ),
    "header past EOF": (npy_bytes(header())[:30], r"runs past the file"),
    "object dtype": (npy_bytes(header(descr="'|O'"), bytes(32)), r"Python objects"),
    "nonsense descr": (npy_bytes(header(descr="'<q7'"), DATA), r"is not a NumPy dtype"),
    "descr a list": (npy_bytes(header(descr="[1, 2]"), DATA), r"is not a NumPy dtype"),
    "fortran_order not a bool": (npy_bytes(header(fortran="1"), DATA), r"not True or False"),
    "2-D": (npy_bytes(header(shape="(2, 2)"), DATA), r"1-D integer array; got uint16 of shape"),
    "short data": (npy_bytes(header(shape="(400,)"), DATA), r"needs 800 data bytes"),
    "not a literal": (npy_bytes("{'descr': __import__('os')}"), r"not a Python literal"),
    "no magic": (b"NUMPY" + bytes(200), r"magic string"),
    "version 9": (b"\x93NUMPY\x09\x00" + bytes(200), r"format version 9\.0"),
}


def _place(tmp_path: Path, kind: str) -> Path:
    """A crafted file, or a FIFO or folder, named like a .npy file."""
    path = tmp_path / "crafted.npy"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.write_bytes(CRAFTED[kind][0])
    return path


KINDS = [*CRAFTED, "fifo", "folder"]


def _expected(kind: str) -> str:
    if kind == "fifo":
        return r"not a regular file; give a regular file"
    if kind == "folder":
        return r"a folder; give a regular file"
    return CRAFTED[kind][1]


@pytest.mark.parametrize("kind", KINDS)
def test_a_crafted_input_is_a_chunk_error_naming_it(tmp_path, kind):
    src = _place(tmp_path, kind)
    out = tmp_path / "out"
    with pytest.raises(ChunkError, match=r"crafted\.npy: .*" + _expected(kind)):
        chunk_file(src, out, size=4)
    assert leftovers(tmp_path, {"crafted.npy"}) == []


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "2-D"])
def test_crafted_offsets_are_a_chunk_error_naming_them(tmp_path, kind):
    np.save(tmp_path / "tokens.npy", np.arange(4, dtype=np.uint16))
    offsets = _place(tmp_path, kind)
    with pytest.raises(ChunkError, match=r"^--offsets .*crafted\.npy: .*" + _expected(kind)):
        chunk_file(tmp_path / "tokens.npy", tmp_path / "out", size=4, offsets_path=offsets)
    assert leftovers(tmp_path, {"crafted.npy", "tokens.npy"}) == []


def test_two_dimensional_offsets_are_a_chunk_error(tmp_path):
    np.save(tmp_path / "tokens.npy", np.arange(4, dtype=np.uint16))
    np.save(tmp_path / "offsets.npy", np.array([[0, 4]]))
    with pytest.raises(ChunkError, match=r"^--offsets .*offsets\.npy: offsets must be a 1-D"):
        chunk_file(
            tmp_path / "tokens.npy", tmp_path / "out", size=4, offsets_path=tmp_path / "offsets.npy"
        )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("role", ["input", "--offsets"])
def test_the_command_answers_crafted_files_in_one_line(tmp_path, capsys, kind, role):
    np.save(tmp_path / "tokens.npy", np.arange(4, dtype=np.uint16))
    crafted = _place(tmp_path, kind)
    args = ["chunk", str(tmp_path / "tokens.npy"), "-o", str(tmp_path / "out"), "--size", "4"]
    if role == "input":
        args[1] = str(crafted)
    else:
        args += ["--offsets", str(crafted)]
    assert main(args) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "crafted.npy" in line
    assert leftovers(tmp_path, {"crafted.npy", "tokens.npy"}) == []


@pytest.mark.parametrize("role", ["input", "--offsets"])
def test_a_fifo_never_blocks_the_command(tmp_path, role):
    # in a child with a time limit: a reader that waits on the FIFO would hang
    np.save(tmp_path / "tokens.npy", np.arange(4, dtype=np.uint16))
    fifo = _place(tmp_path, "fifo")
    args = [SCRIPT, "chunk", tmp_path / "tokens.npy", "-o", tmp_path / "out", "--size", 4]
    if role == "input":
        args[2] = fifo
    else:
        args += ["--offsets", fifo]
    done = subprocess.run(
        list(map(str, args)), capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "crafted.npy: not a regular file" in one_error_line(done.stderr)


# ---- --dtype ------------------------------------------------------------------------------

SPELLINGS = [
    "u2", "<u2", ">u2", "=u2", "|u1", "uint16", "H", "i8", "int64", "b", "B", ">i8", "<i4",
    "?", "bool", "f4", "float16", "O", "V8", "S4", "U1", "M8[s]", "m8", "c8", "(2,)u2",
    "u2,u2", "u2,", "()u2", "", "xyz", "u3", "i16", "object", "float", "(-1,)u2",
    "(99999999999,99999999999)u1", "V99999999999999999999999", "a4", "int0", "uint",
]  # fmt: skip


def _integer(spelling: str) -> np.dtype | None:
    try:
        dt = np.dtype(spelling)
    except Exception:
        return None
    return dt if dt.kind in "iu" and not dt.shape and dt.names is None else None


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_dtype_spelling_runs_or_is_refused_in_one_line(tmp_path, capsys, spelling):
    raw = np.random.default_rng(4).integers(0, 256, 96, dtype=np.uint8).tobytes()
    (tmp_path / "raw.bin").write_bytes(raw)
    out = tmp_path / "out"
    args = ["chunk", str(tmp_path / "raw.bin"), "--dtype", spelling, "-o", str(out)]
    code = main([*args, "--size", "3", "--quiet"])
    dt = _integer(spelling)
    if dt is None:
        assert code == 2
        assert "--dtype" in one_error_line(capsys.readouterr().err)
        assert not out.exists()
        with pytest.raises(ChunkError, match=r"^--dtype "):
            chunk_file(tmp_path / "raw.bin", out, size=3, dtype=spelling)
    else:
        assert code == 0, capsys.readouterr().err
        tokens = np.frombuffer(raw, dt).astype(dt.newbyteorder("="))
        got = np.load(out / "windows.npy")
        assert got.dtype == tokens.dtype
        assert np.array_equal(got, posembed.windows(tokens, 3).tokens)
    assert leftovers(tmp_path, {"raw.bin", "out"}) == []


@settings(max_examples=150, deadline=None)
@given(spelling=st.text(max_size=12))
def test_any_dtype_text_runs_or_is_a_chunk_error(tmp_path_factory, spelling):
    folder = tmp_path_factory.mktemp("dtype")
    (folder / "raw.bin").write_bytes(bytes(range(48)))
    dt = _integer(spelling)
    if dt is None:
        with pytest.raises(ChunkError, match=r"^--dtype "):
            chunk_file(folder / "raw.bin", folder / "out", size=3, dtype=spelling)
    else:
        meta = chunk_file(folder / "raw.bin", folder / "out", size=3, dtype=spelling, quiet=True)
        assert meta["windows"] == -(-(48 // dt.itemsize) // 3)


# ---- memory bounded by bytes ---------------------------------------------------------------

PEAK_CHILD = textwrap.dedent(
    """
    import sys
    import numpy
    import posembed, posembed.corpus._chunk
    from posembed.cli import main
    sys.exit(main(sys.argv[1:]) if len(sys.argv) > 1 else 0)
    """
)
# Beyond MEMORY_BYTES, a run may touch: its two threads' stacks, the
# interpreter's and the allocator's own memory for a few thousand batches.
ALLOWANCE = 16 << 20


def _peak(*args: object) -> int:
    # measured from a fresh parent (see conftest): a child forked from this
    # test process would start from its memory, and the test could not fail
    done, peak_kib = run_peak_rss([sys.executable, "-c", PEAK_CHILD, *map(str, args)])
    assert done.returncode == 0, done.stderr
    return peak_kib << 10


@skip_if_sanitized
def test_memory_is_bounded_by_bytes_whatever_the_size(tmp_path):
    # 8 Mi tokens: batches sized by windows alone would hold 8 Mi windows at
    # --size 1 (their layouts alone, 24 bytes a window, 192 MiB); batches
    # sized by bytes hold MEMORY_BYTES whatever the size.
    n = 8 << 20
    np.arange(n, dtype=np.uint16).tofile(tmp_path / "t.bin")
    idle = _peak()
    for size, step in ((1, 1), (64, 64), (2048, 2048)):
        out = tmp_path / f"out{size}"
        args = ["chunk", tmp_path / "t.bin", "--dtype", "uint16", "-o", out]
        extra = _peak(*args, "--size", size, "--step", step, "--quiet") - idle
        assert extra < chunk_module.MEMORY_BYTES + ALLOWANCE, (size, extra >> 20)
        windows = np.load(out / "windows.npy", mmap_mode="r")
        assert windows.shape == (-(-n // step), size)
        assert windows[-1, 0] == ((windows.shape[0] - 1) * step) % 65536
        for name in ("windows", "starts", "lengths", "documents"):
            (out / f"{name}.npy").unlink()  # keep the disk in use small


def test_the_budget_is_stated_where_users_read(capsys):
    mib = chunk_module.MEMORY_BYTES >> 20
    assert f"about ``MEMORY_BYTES`` ({mib} MiB)" in chunk_file.__doc__
    with pytest.raises(SystemExit):
        main(["chunk", "--help"])
    assert f"about {mib} MiB at a time" in " ".join(capsys.readouterr().out.split())


def test_batches_follow_the_plan_across_gaps_and_many_documents(tmp_path, monkeypatch):
    # tail="drop" leaves tokens no window takes (short documents, tails):
    # a batch never reads more tokens, nor spans more documents, than planned
    rng = np.random.default_rng(5)
    lengths = rng.choice([0, 3, 7, 9, 40, 300], 3000)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = rng.integers(0, 1000, offsets[-1]).astype(np.uint16)
    np.save(tmp_path / "tokens.npy", tokens)
    np.save(tmp_path / "offsets.npy", offsets)
    monkeypatch.setattr(chunk_module, "MEMORY_BYTES", 50_000)
    seen = []
    real = chunk_module._batches

    def spy(job, window_offsets, plan):
        for b in real(job, window_offsets, plan):
            spans = int(b.layout.documents[-1] - b.layout.documents[0]) + 1
            seen.append((b.end_token - b.first_token, spans, len(b.layout.starts), plan))
            yield b

    monkeypatch.setattr(chunk_module, "_batches", spy)
    # .npy: cut straight from the file; megatron: beside reading and writing threads
    for tail, fmt in [("drop", "npy"), ("pad", "npy"), ("shift", "npy"), ("drop", "megatron")]:
        out = tmp_path / f"out-{tail}-{fmt}"
        offs = tmp_path / "offsets.npy"
        chunk_file(
            tmp_path / "tokens.npy", out, size=8, step=3, tail=tail, offsets_path=offs, format=fmt
        )
        want = posembed.windows(tokens, 8, step=3, tail=tail, offsets=offsets)
        if fmt == "npy":
            assert np.array_equal(np.load(out / "windows.npy"), want.tokens)
            assert np.array_equal(np.load(out / "starts.npy"), want.starts)
        else:
            got = posembed.IndexedCorpus(out)
            assert np.array_equal(got.sequence_lengths, want.lengths)
    assert len(seen) > 10
    for read, spans, count, plan in seen:
        assert read <= plan.tokens
        assert spans <= plan.documents
        assert count <= plan.windows


def test_dask_parts_read_the_same_way(tmp_path):
    # each task reads with a TokenFile copy of its own: the byte order is
    # converted there too, and a file changed since the checks is refused
    dask = pytest.importorskip("dask")
    from posembed.dask import chunk_parts, read_parts

    tokens = np.arange(3000, dtype=np.uint16) * 7
    tokens.astype(">u2").tofile(tmp_path / "big.bin")
    kw = {"size": 16, "step": 12, "dtype": ">u2", "part_tokens": 700}
    with dask.config.set(scheduler="sync"):
        chunk_parts(tmp_path / "big.bin", tmp_path / "out", **kw)
    got = read_parts(tmp_path / "out")
    assert np.array_equal(np.asarray(got.tokens), posembed.windows(tokens, 16, step=12).tokens)
    real_prepare = chunk_module.prepare_chunk

    def prepare_then_rewrite(*args, **kwargs):
        job = real_prepare(*args, **kwargs)
        time.sleep(0.05)  # the file's clock moves on
        (tmp_path / "big.bin").write_bytes(tokens[::-1].astype(">u2").tobytes())
        return job

    import posembed.dask.parts as parts

    with pytest.MonkeyPatch.context() as mp, dask.config.set(scheduler="sync"):
        mp.setattr(parts, "prepare_chunk", prepare_then_rewrite)
        with pytest.raises(ChunkError, match=rf"big\.bin: {CHANGED}"):
            chunk_parts(tmp_path / "big.bin", tmp_path / "again", **kw)
    assert leftovers(tmp_path, {"big.bin", "out"}) == []

"""Megatron indexed datasets (PREFIX.bin + PREFIX.idx): the reader against its
twin and against files crafted byte by byte, the writers' round trips, files
that change while they are read, and both directions against megatron-core."""

from __future__ import annotations

import errno
import importlib
import itertools
import json
import os
import pickle
import re
import struct
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posembed
from posembed import _core, reference
from posembed.io import _indexed
from posembed.io._indexed_write import IndexedWriter
from posembed.io._tokens import TokenFile

from .conftest import megatron_or_skip

DTYPES = [np.uint8, np.int8, np.int16, np.int32, np.int64, np.uint16]
CODES = {np.uint8: 1, np.int8: 2, np.int16: 3, np.int32: 4, np.int64: 5, np.uint16: 8}
MAGIC = b"MMIDIDX\x00\x00"


# ---- files written byte by byte, by the format's description alone --------------------


def craft(
    prefix: Path,
    lengths: list[int],
    document_indices: list[int],
    dtype: Any = np.uint16,
    *,
    tokens: np.ndarray | None = None,
    pointers: list[int] | None = None,
    modes: bool = False,
    magic: bytes = MAGIC,
    version: int = 1,
    code: int | None = None,
    n: int | None = None,
    d: int | None = None,
    extra: bytes = b"",
    bin_bytes: bytes | None = None,
) -> Path:
    """PREFIX.idx and PREFIX.bin as the format describes them; each keyword
    overrides one field (to craft a bad file)."""
    dt = np.dtype(dtype)
    if pointers is None:
        pointers = [int(sum(lengths[:i])) * dt.itemsize for i in range(len(lengths))]
    if tokens is None and bin_bytes is None:
        tokens = (np.arange(sum(max(x, 0) for x in lengths)) % 100).astype(dt)
    header = struct.pack(
        "<9sQBQQ",
        magic,
        version,
        CODES[dt.type] if code is None else code,
        len(lengths) if n is None else n,
        len(document_indices) if d is None else d,
    )
    body = (
        np.array(lengths, "<i4").tobytes()
        + np.array(pointers, "<i8").tobytes()
        + np.array(document_indices, "<i8").tobytes()
        + ((np.arange(len(lengths)) % 7 - 3).astype(np.int8).tobytes() if modes else b"")
    )
    Path(f"{prefix}.idx").write_bytes(header + body + extra)
    data = bin_bytes if tokens is None else tokens.astype(dt.newbyteorder("<")).tobytes()
    Path(f"{prefix}.bin").write_bytes(data)
    return prefix


def random_corpus(rng: np.random.Generator, dtype: Any, documents: int, most: int = 4):
    """(tokens, lengths, document_indices): documents of 0..most sequences of
    0..9 tokens, so that empty documents and empty sequences both occur."""
    per_doc = rng.integers(0, most + 1, documents)
    lengths = rng.integers(0, 10, int(per_doc.sum()))
    info = np.iinfo(dtype)
    tokens = rng.integers(info.min, int(info.max) + 1, int(lengths.sum()), dtype=dtype)
    indices = np.concatenate([[0], np.cumsum(per_doc)])
    return tokens, lengths, indices


def expected_offsets(lengths: np.ndarray, indices: np.ndarray, unit: str) -> np.ndarray:
    ends = np.concatenate([[0], np.cumsum(lengths)])
    return ends[indices] if unit == "documents" else ends


def assert_reads(corpus: Any, tokens: np.ndarray, offsets: np.ndarray) -> None:
    """The corpus (posembed's or the twin) holds these units."""
    assert np.array_equal(corpus.offsets, offsets)
    assert corpus.offsets.dtype == np.int64
    assert len(corpus) == len(offsets) - 1
    assert corpus.token_count == len(tokens)
    for i in range(len(corpus)):
        got = corpus[i]
        assert got.dtype == tokens.dtype
        assert got.tobytes() == tokens[offsets[i] : offsets[i + 1]].tobytes()
    every, offs = corpus.to_arrays()
    assert every.dtype == tokens.dtype
    assert every.tobytes() == tokens.tobytes()
    assert np.array_equal(offs, offsets)


def twin_refuses(prefix: Path) -> None:
    """The twin raises ValueError too (its messages are its own)."""
    with pytest.raises(ValueError, match=r"\w") as err:
        reference.IndexedCorpus(prefix)
    assert type(err.value) is ValueError


# ---- the reader against the twin ------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("unit", ["documents", "sequences"])
def test_reader_and_twin_read_generated_corpora_alike(tmp_path, rng, dtype, unit):
    for k, documents in enumerate([0, 1, 5, 40]):
        tokens, lengths, indices = random_corpus(rng, dtype, documents)
        prefix = craft(tmp_path / f"c{k}", list(lengths), list(indices), dtype, tokens=tokens)
        fast = posembed.IndexedCorpus(prefix, documents=unit)
        twin = reference.IndexedCorpus(prefix, documents=unit)
        offsets = expected_offsets(lengths, indices, unit)
        for corpus in (fast, twin):
            assert corpus.dtype == np.dtype(dtype)
            assert corpus.sequence_lengths.dtype == np.int32
            assert np.array_equal(corpus.sequence_lengths, lengths)
            assert corpus.sequence_pointers.dtype == np.int64
            assert np.array_equal(corpus.document_indices, indices)
            assert_reads(corpus, tokens, offsets)
        assert np.array_equal(fast.sequence_pointers, twin.sequence_pointers)
        for start, stop in [(0, 0), (0, len(tokens)), (len(tokens) // 3, len(tokens) // 2)]:
            assert fast.read(start, stop).tobytes() == twin.read(start, stop).tobytes()
            assert fast.read(start, stop).tobytes() == tokens[start:stop].tobytes()


@given(
    docs=st.lists(st.lists(st.integers(0, 6), max_size=3), max_size=8),
    unit=st.sampled_from(["documents", "sequences"]),
    modes=st.booleans(),
)
@settings(max_examples=25, deadline=None)
def test_reader_matches_the_twin_on_any_layout(tmp_path_factory, docs, unit, modes):
    lengths = [x for doc in docs for x in doc]
    indices = [0, *np.cumsum([len(doc) for doc in docs]).tolist()]
    prefix = craft(tmp_path_factory.mktemp("h") / "c", lengths, indices, np.int32, modes=modes)
    fast, twin = (
        posembed.IndexedCorpus(prefix, documents=unit, multimodal=modes),
        reference.IndexedCorpus(prefix, documents=unit, multimodal=modes),
    )
    if modes:
        assert fast.modes is not None
        assert fast.modes.dtype == np.int8
        assert (
            fast.modes.tolist() == twin.modes.tolist() == [i % 7 - 3 for i in range(len(lengths))]
        )
    else:
        assert fast.modes is None
        assert twin.modes is None
    tokens, offsets = twin.to_arrays()
    assert np.array_equal(
        offsets, expected_offsets(np.array(lengths, int), np.array(indices), unit)
    )
    assert_reads(fast, tokens, offsets)


def test_the_empty_corpus_is_valid(tmp_path):
    prefix = craft(tmp_path / "e", [], [0])
    for unit in ("documents", "sequences"):
        for corpus in (
            posembed.IndexedCorpus(prefix, documents=unit),
            reference.IndexedCorpus(prefix, documents=unit),
        ):
            assert len(corpus) == 0
            assert corpus.token_count == 0
            assert list(corpus.offsets) == [0]
            tokens, _ = corpus.to_arrays()
            assert tokens.shape == (0,)
            assert tokens.dtype == np.uint16
            assert corpus.read(0, 0).shape == (0,)


def test_the_prefix_may_name_either_file_and_hold_dots(tmp_path):
    prefix = craft(tmp_path / "data.v1_text_document", [2, 3], [0, 1, 2])
    for given_ in (prefix, str(prefix), f"{prefix}.idx", Path(f"{prefix}.bin")):
        corpus = posembed.IndexedCorpus(given_)
        assert corpus.prefix == prefix
        assert corpus.idx_path == Path(f"{prefix}.idx")
        assert corpus.bin_path == Path(f"{prefix}.bin")
        assert reference.IndexedCorpus(given_).prefix == prefix


def test_tokens_is_a_stamped_token_file_over_the_bin(tmp_path):
    prefix = craft(tmp_path / "c", [2, 3, 0, 4], [0, 2, 4], np.int16)
    corpus = posembed.IndexedCorpus(prefix)
    f = corpus.tokens
    assert isinstance(f, TokenFile)
    assert (f.path, f.dtype, f.offset, f.count, f.swap) == (corpus.bin_path, np.int16, 0, 9, False)
    info = os.stat(corpus.bin_path)
    assert f.stamp == (info.st_size, info.st_mtime_ns, info.st_ino)
    assert f.fd == -1  # closed: a worker opens its own
    f.open()
    try:
        assert f.read(2, 9).tobytes() == corpus.read(2, 9).tobytes()
    finally:
        f.close()


def test_a_corpus_is_windowed_from_its_token_file_as_a_raw_one_is(tmp_path, rng):
    # what posembed chunk and the Dask parts do with a TokenFile and offsets:
    # the layout from the offsets alone, the tokens read a range at a time by
    # a pickled copy (a worker's), checked against the stamp afterwards
    tokens, lengths, indices = random_corpus(rng, np.uint16, 30)
    corpus = posembed.IndexedCorpus(
        craft(tmp_path / "c", list(lengths), list(indices), tokens=tokens)
    )
    layout = posembed.window_layout(corpus.offsets, 5, step=3, tail="shift")
    worker = pickle.loads(pickle.dumps(corpus.tokens))
    worker.open()
    try:
        rows = layout.cut(worker.read(0, worker.count))
        worker.check()
    finally:
        worker.close()
    whole = posembed.windows(tokens, 5, step=3, tail="shift", offsets=corpus.offsets)
    assert rows.tobytes() == whole.tokens.tobytes()


def test_indexing(tmp_path):
    prefix = craft(tmp_path / "c", [2, 3], [0, 1, 2])
    corpus = posembed.IndexedCorpus(prefix)
    assert corpus[-1].tobytes() == corpus[1].tobytes()
    assert corpus[np.int64(0)].tolist() == [0, 1]
    for bad in (2, -3):
        with pytest.raises(IndexError, match=rf"index {bad} is out of range for 2 documents"):
            corpus[bad]
    for bad in (1.0, True, slice(0, 1), "0"):
        with pytest.raises(TypeError, match="indexed by an integer"):
            corpus[bad]
    assert "2 documents, 5 tokens of uint16" in repr(corpus)


# ---- crafted files: every field checked -----------------------------------------------

GOOD = {"lengths": [2, 3, 1], "document_indices": [0, 2, 3]}
BAD_HEADERS = [
    # (what the crafting changes, the field the message names)
    ({"magic": b"MMIDIDX\x00\x01"}, r"magic is b'MMIDIDX\\x00\\x01', not"),
    ({"version": 2}, r"version is 2; only version 1"),
    ({"version": 0}, r"version is 0"),
    ({"code": 0}, r"dtype code 0 is unknown"),
    ({"code": 9}, r"dtype code 9 is unknown"),
    ({"code": 255}, r"dtype code 255 is unknown"),
    ({"code": 6}, r"dtype code 6 is float64, which holds no token ids"),
    ({"code": 7}, r"dtype code 7 is float32, which holds no token ids"),
    ({"d": 0, "document_indices": []}, r"document count is 0"),
    ({"n": 4}, r"sequence count 4 and document count 3 need 106 bytes \(110 with"),
    ({"n": 2}, r"sequence count 2 and document count 3 need"),
    ({"d": 4}, r"sequence count 3 and document count 4 need"),
    ({"n": 2**63}, r"sequence count 9223372036854775808 and document count 3 need"),
    ({"d": 2**64 - 1}, r"document count 18446744073709551615 need"),
    ({"extra": b"\x00"}, r"need 94 bytes \(97 with sequence modes\); the file has 95"),
    ({"extra": b"\x00" * 8}, r"the file has 102"),
    (
        {"lengths": [2, -3, 1], "bin_bytes": b"\x00" * 6},
        r"sequence_lengths\[1\] is -3; lengths are >= 0",
    ),
    ({"pointers": [2, 6, 10]}, r"sequence_pointers\[0\] is 2; they must start at 0"),
    (
        {"pointers": [0, 4, 2]},
        r"sequence_pointers go back \(out of order\): sequence_pointers\[2\] is 2",
    ),
    (
        {"pointers": [0, 2, 10]},
        r"sequence_pointers\[1\] is 2: it overlaps the previous sequence, which ends at byte 4",
    ),
    (
        {"pointers": [0, 6, 12]},
        r"sequence_pointers\[1\] is 6: it leaves a gap after the previous sequence",
    ),
    ({"pointers": [0, 4, 11]}, r"sequence_pointers\[2\] is 11: it leaves a gap"),
    ({"document_indices": [1, 2, 3]}, r"document_indices\[0\] is 1; they must start at 0"),
    (
        {"document_indices": [0, 2, 1, 3], "d": None},
        r"document_indices decrease: document_indices\[2\] is 1, after 2",
    ),
    ({"document_indices": [0, 4, 3]}, r"document_indices\[1\] is 4, past the sequence count 3"),
    ({"document_indices": [0, 2, 2]}, r"document_indices end at 2, not at the sequence count 3"),
    (
        {"lengths": [2**31 - 1] * 3, "bin_bytes": b""},
        r"\.bin: not a valid indexed dataset: it holds 0 bytes, "
        r"but c\.idx describes 6442450941 tokens",
    ),
    (
        {"bin_bytes": b"\x00" * 11},
        r"c\.bin: not a valid indexed dataset: it holds 11 bytes, "
        r"but c\.idx describes 6 tokens of uint16 \(12 bytes\)",
    ),
    ({"bin_bytes": b"\x00" * 14}, r"it holds 14 bytes"),
]


@pytest.mark.parametrize(("change", "message"), BAD_HEADERS, ids=[m for _, m in BAD_HEADERS])
def test_every_crafted_field_is_refused_naming_it(tmp_path, change, message):
    fields = {**GOOD, **change}
    prefix = craft(tmp_path / "c", fields.pop("lengths"), fields.pop("document_indices"), **fields)
    with pytest.raises(ValueError, match=message) as err:
        posembed.IndexedCorpus(prefix)
    assert type(err.value) is ValueError
    assert str(err.value).startswith(str(tmp_path / "c"))  # the file is named
    twin_refuses(prefix)


def test_sequence_modes_are_read_with_multimodal_true(tmp_path):
    prefix = craft(tmp_path / "c", [2, 3, 1], [0, 2, 3], modes=True)
    plain = craft(tmp_path / "p", [2, 3, 1], [0, 2, 3])
    a, b = posembed.IndexedCorpus(prefix, multimodal=True), posembed.IndexedCorpus(plain)
    assert a.modes is not None
    assert a.modes.tolist() == [-3, -2, -1]
    assert b.modes is None
    assert a.to_arrays()[0].tobytes() == b.to_arrays()[0].tobytes()
    assert np.array_equal(a.offsets, b.offsets)
    # None: as the file is
    assert posembed.IndexedCorpus(prefix, multimodal=None).modes.tolist() == [-3, -2, -1]
    assert posembed.IndexedCorpus(plain, multimodal=None).modes is None


def test_a_file_of_the_other_kind_is_refused_naming_the_option(tmp_path):
    modes = craft(tmp_path / "m", [2, 3, 1], [0, 2, 3], modes=True)
    plain = craft(tmp_path / "p", [2, 3, 1], [0, 2, 3])
    with pytest.raises(ValueError, match=r"m\.idx: a multimodal .* with multimodal=True"):
        posembed.IndexedCorpus(modes)
    with pytest.raises(ValueError, match=r"p\.idx: multimodal=True, but the file holds no"):
        posembed.IndexedCorpus(plain, multimodal=True)
    for prefix, flag in ((modes, False), (plain, True)):
        with pytest.raises(ValueError, match="multimodal"):
            reference.IndexedCorpus(prefix, multimodal=flag)
    with pytest.raises(TypeError, match="multimodal must be True, False or None; got int 1"):
        posembed.IndexedCorpus(plain, multimodal=1)  # type: ignore[arg-type]
    # no sequences: no modes to tell, either way is the same file
    empty = craft(tmp_path / "e", [], [0])
    assert posembed.IndexedCorpus(empty, multimodal=True).modes.tolist() == []
    assert posembed.IndexedCorpus(empty).modes is None
    # a damaged multimodal file is refused by the same checks as a plain one
    bad = craft(tmp_path / "b", [2, 3, 1], [0, 3, 2], modes=True)
    with pytest.raises(ValueError, match=r"document_indices decrease"):
        posembed.IndexedCorpus(bad, multimodal=True)


def test_the_commands_still_read_a_multimodal_dataset(tmp_path):
    from posembed.corpus._convert import convert_file

    prefix = craft(tmp_path / "m", [2, 3, 1], [0, 2, 3], modes=True)
    convert_file(prefix, tmp_path / "plain", quiet=True)  # its tokens, without the modes
    plain = posembed.IndexedCorpus(tmp_path / "plain")
    tokens = posembed.IndexedCorpus(prefix, multimodal=True).to_arrays()[0]
    assert plain.to_arrays()[0].tobytes() == tokens.tobytes()
    assert plain.offsets.tolist() == [0, 5, 6]


def test_write_indexed_writes_modes_for_the_non_empty_documents(tmp_path):
    posembed.write_indexed(tmp_path / "w", np.arange(6), [0, 2, 2, 6], modes=[5, 6, -7])
    corpus = posembed.IndexedCorpus(tmp_path / "w", multimodal=True)
    assert corpus.modes.tolist() == [5, -7]  # the empty document has no sequence
    assert corpus.document_indices.tolist() == [0, 1, 1, 2]
    with pytest.raises(ValueError, match=r"modes holds 2 values; one for each of the 3"):
        posembed.write_indexed(tmp_path / "x", np.arange(6), [0, 2, 2, 6], modes=[1, 2])
    with pytest.raises(ValueError, match=r"modes\[1\] is 200, which does not fit int8"):
        posembed.write_indexed(tmp_path / "x", np.arange(6), [0, 2, 2, 6], modes=[1, 200, 0])
    assert not list(tmp_path.glob("x*"))


@pytest.mark.parametrize("size", [0, 1, 9, 33])
def test_a_file_shorter_than_the_header(tmp_path, size):
    prefix = craft(tmp_path / "c", **GOOD)
    Path(f"{prefix}.idx").write_bytes(struct.pack("<9sQBQQ", MAGIC, 1, 8, 3, 3)[:size])
    with pytest.raises(
        ValueError,
        match=rf"c\.idx: not a valid indexed dataset: it is {size} bytes, "
        r"shorter than the 34-byte header",
    ):
        posembed.IndexedCorpus(prefix)
    twin_refuses(prefix)


@pytest.mark.parametrize("which", ["idx", "bin"])
def test_missing_files_folders_fifos_and_devices_are_refused_without_blocking(tmp_path, which):
    prefix = craft(tmp_path / "c", **GOOD)
    path = Path(f"{prefix}.{which}")
    path.unlink()
    with pytest.raises(
        ValueError, match=rf"c\.{which} \(the .* of an indexed dataset\): no such file"
    ):
        posembed.IndexedCorpus(prefix)
    twin_refuses(prefix)
    path.mkdir()
    with pytest.raises(ValueError, match=rf"c\.{which} \(the .*\): a folder; give a regular file"):
        posembed.IndexedCorpus(prefix)
    path.rmdir()
    os.mkfifo(path)  # no writer: an open that waited would never return
    with pytest.raises(ValueError, match=rf"c\.{which} \(the .*\): not a regular file"):
        posembed.IndexedCorpus(prefix)
    twin_refuses(prefix)
    path.unlink()
    path.symlink_to("/dev/zero")
    with pytest.raises(ValueError, match=rf"c\.{which} \(the .*\): not a regular file"):
        posembed.IndexedCorpus(prefix)
    twin_refuses(prefix)


def test_the_reader_raises_only_value_error_on_random_bytes(tmp_path):
    rng = np.random.default_rng(5)
    prefix = craft(tmp_path / "c", **GOOD)
    idx = Path(f"{prefix}.idx")
    good = bytearray(idx.read_bytes())
    messages = []
    for _ in range(300):
        data = bytearray(good)
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
        idx.write_bytes(bytes(data[: int(rng.integers(len(data) - 8, len(data) + 1))]))
        try:
            posembed.IndexedCorpus(prefix)
        except ValueError as exc:
            messages.append(str(exc))
    assert messages
    assert all(m.startswith(str(tmp_path)) for m in messages)


# ---- a .bin that changes after it was opened ------------------------------------------


def test_a_bin_truncated_rewritten_replaced_or_removed_is_refused(tmp_path):
    prefix = craft(tmp_path / "c", **GOOD)
    path = Path(f"{prefix}.bin")
    original = path.read_bytes()
    corpus = posembed.IndexedCorpus(prefix)

    def refused(match: str) -> None:
        for call in (lambda: corpus[1], lambda: corpus.read(0, 6), corpus.to_arrays):
            with pytest.raises(ValueError, match=rf"c\.bin: input changed while reading \({match}"):
                call()

    with open(path, "r+b") as f:
        f.truncate(5)
    refused("12 bytes became 5")
    path.write_bytes(original[::-1])  # the same size, other tokens
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    refused("it was modified or replaced")
    new = tmp_path / "new.bin"
    new.write_bytes(original)
    os.replace(new, path)
    refused("it was modified or replaced")
    path.unlink()
    refused("it was removed")
    os.mkfifo(path)
    refused("it is no longer a regular file")


def test_a_truncated_bin_read_past_its_end_is_refused_not_mapped(tmp_path, monkeypatch):
    # The stamp hides nothing: even a corpus whose stamp is not checked reads
    # with positional reads, and a short file ends in an error, never SIGBUS.
    prefix = craft(tmp_path / "c", **GOOD)
    corpus = posembed.IndexedCorpus(prefix)
    corpus.tokens.stamp = None
    with open(corpus.bin_path, "r+b") as f:
        f.truncate(3)
    with pytest.raises(
        ValueError, match=r"c\.bin: input changed while reading \(it ended at byte 3"
    ):
        corpus.to_arrays()


CHANGE_CHILD = textwrap.dedent(
    """
    import json, os, sys, threading, time
    import numpy as np
    import posembed

    prefix, rounds = sys.argv[1], int(sys.argv[2])
    tokens = np.arange(1 << 18, dtype=np.int32)
    lengths = [1 << 16] * 4
    posembed.write_indexed(prefix, tokens, [0, *np.cumsum(lengths).tolist()])
    path = prefix + ".bin"
    original = open(path, "rb").read()
    seen = {"ok": 0, "changed": 0}
    for r in range(rounds):
        corpus = posembed.IndexedCorpus(prefix)
        with open(path, "r+b") as f:  # shrinks after the corpus was opened
            f.truncate([0, 4, len(original) // 2, len(original) - 1][r % 4])
        for call in (lambda: corpus[3], corpus.to_arrays, lambda: corpus.read(0, 1 << 18)):
            try:
                call()
                seen["ok"] += 1
            except ValueError as exc:
                assert "input changed while reading" in str(exc), exc
                seen["changed"] += 1
        open(path, "wb").write(original)
    # and a racer that truncates and restores the file while it is read
    stop = threading.Event()
    def race():
        while not stop.is_set():
            with open(path, "r+b") as f:
                f.truncate(len(original) // 3)
                f.seek(len(original) // 3)
                f.write(original[len(original) // 3:])
    racer = threading.Thread(target=race)
    racer.start()
    try:
        for _ in range(40):
            try:
                corpus = posembed.IndexedCorpus(prefix)
                got = corpus.to_arrays()[0]
                assert got.tobytes() == original
            except ValueError as exc:
                assert "indexed dataset" in str(exc) or "changed" in str(exc), exc
    finally:
        stop.set()
        racer.join()
    print(json.dumps(seen))
    """
)


def test_a_shrinking_bin_never_kills_the_process(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", CHANGE_CHILD, str(tmp_path / "c"), "8"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (done.returncode, done.stderr)  # a signal: negative
    assert json.loads(done.stdout.splitlines()[-1]) == {"ok": 0, "changed": 24}


# ---- a pair replaced while it is opened ----------------------------------------------

# Two pairs of the same sizes (.idx and .bin) that tell each other apart: the
# pair's number is in its lengths and in every token. Old lengths with new
# tokens are what a reader that trusts an old .idx beside a new .bin gives.
PAIRS = {1: ([1] * 8, [0, 3, 8]), 2: ([2] * 8, [0, 5, 8])}
# (5 tries, or more where the .idx was first seen missing beside the same .bin)
REPLACED = r"the indexed dataset was replaced while it was opened, \d+ times in a row"
# What an open or a read may say while a writer replaces the pair in a loop.
WHILE_REPLACED = rf"{REPLACED}|input changed while reading"


def pair_of(corpus: Any) -> int:
    """The pair a corpus holds, from its index and from its tokens: never a mix."""
    tokens, offsets = corpus.to_arrays()
    by_index = 1 if offsets.tolist() == PAIRS[1][1] else 2
    assert offsets.tolist() == PAIRS[by_index][1]
    assert tokens.tolist() == PAIRS[by_index][0], "an .idx read with the other pair's .bin"
    return by_index


def read_while_replaced(open_corpus: Any, replace: Any, opens: int) -> dict[Any, int]:
    """Open and read the pair up to ``opens`` times (for two seconds at most)
    while a thread replaces it in a loop (``replace(k)`` writes pair k):
    each open gives one whole pair or a clear error. Returns the counts."""
    stop, failed = threading.Event(), []

    def writer() -> None:
        k = 1
        try:
            while not stop.is_set():
                k = 3 - k
                replace(k)
        except BaseException as exc:
            failed.append(exc)

    seen: dict[Any, int] = {1: 0, 2: 0, "refused": 0}
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        end = time.monotonic() + 2  # a bound on the test, not a measurement
        for _ in range(opens):
            if time.monotonic() > end:
                break
            try:
                pair = pair_of(open_corpus())
            except ValueError as exc:
                message = str(exc)
            else:
                seen[pair] += 1
                continue
            assert re.search(WHILE_REPLACED, message), (message, failed)
            seen["refused"] += 1
    finally:
        stop.set()
        thread.join()
    assert not failed, failed
    return seen


def test_a_pair_replaced_while_opened_is_read_whole_or_refused(tmp_path):
    # write_indexed(force=True) in a loop: the old .idx aside, the new .bin in,
    # then the new .idx; each open must give one pair, never the old .idx with
    # the new .bin (about half the opens did, before the reader checked)
    prefix = tmp_path / "c"
    posembed.write_indexed(prefix, *PAIRS[1], dtype=np.uint16)

    def replace(k: int) -> None:
        posembed.write_indexed(prefix, *PAIRS[k], dtype=np.uint16, force=True)

    read_while_replaced(lambda: posembed.IndexedCorpus(prefix), replace, 3000)
    # (how many opens got through depends on the machine's speed: not asserted)
    assert pair_of(posembed.IndexedCorpus(prefix)) in (1, 2)  # the writer done: a whole pair
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.bin", "c.idx"]


def test_a_pair_replaced_between_the_idx_and_the_bin_is_opened_again(tmp_path, monkeypatch):
    # the race made certain: the writer replaces the pair just after the
    # reader read the .idx, before it opens the .bin
    prefix = tmp_path / "c"
    posembed.write_indexed(prefix, *PAIRS[1], dtype=np.uint16)
    real, replaced = _indexed._open, []

    def open_then_replace(path: Path, what: str) -> Any:
        if path.suffix == ".bin" and len(replaced) < times:
            replaced.append(path)
            posembed.write_indexed(
                prefix, *PAIRS[1 + len(replaced) % 2], dtype=np.uint16, force=True
            )
        return real(path, what)

    monkeypatch.setattr(_indexed, "_open", open_then_replace)
    times = 1
    corpus = posembed.IndexedCorpus(prefix)
    assert (pair_of(corpus), len(replaced)) == (2, 1)  # the new pair, opened again
    times = 10**9  # replaced at every try (by the other pair): a clear error, not a mix
    with pytest.raises(ValueError, match=rf"c\.idx: {REPLACED} \(a writer is replacing"):
        posembed.IndexedCorpus(prefix)
    assert len(replaced) == 1 + _indexed.PAIR_TRIES


def test_a_bin_without_its_idx_is_reported_missing_after_the_tries(tmp_path):
    # what a writer killed between its renames leaves: the .idx missing at
    # every try, the .bin never replaced, is a missing .idx, not a writer
    prefix = tmp_path / "c"
    posembed.write_indexed(prefix, *PAIRS[1], dtype=np.uint16)
    Path(f"{prefix}.idx").unlink()
    with pytest.raises(
        ValueError, match=r"c\.idx \(the index \(\.idx\) of an indexed dataset\): no such"
    ):
        posembed.IndexedCorpus(prefix)


def test_a_writer_held_off_between_its_renames_is_waited_for(tmp_path):
    # the .idx moved aside and the .bin not yet replaced, for longer than the
    # quick tries take (a writer's thread held off on a loaded machine): the
    # open waits for the new .idx instead of calling it missing
    prefix = tmp_path / "c"
    posembed.write_indexed(prefix, *PAIRS[1], dtype=np.uint16)
    idx, aside = Path(f"{prefix}.idx"), tmp_path / "aside.idx"
    idx.rename(aside)
    back = threading.Timer(0.06, aside.rename, args=(idx,))  # 60 ms > 1 + 2 + 4 + 8 ms
    back.start()
    try:
        assert pair_of(posembed.IndexedCorpus(prefix)) == 1
    finally:
        back.join()


@pytest.fixture(scope="module")
def s3_store(tmp_path_factory):
    """A moto S3 server (s3fs its client) with the bucket pair-race, and both
    pairs' bytes: (file system, {k: (idx bytes, bin bytes)})."""
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    from bench.store_server import s3_server

    folder, pairs = tmp_path_factory.mktemp("pairs"), {}
    for k, (tokens, offsets) in PAIRS.items():
        posembed.write_indexed(folder / f"p{k}", tokens, offsets, dtype=np.uint16)
        pairs[k] = tuple(Path(f"{folder / f'p{k}'}{s}").read_bytes() for s in (".idx", ".bin"))
    with s3_server("pair-race") as fs:
        yield fs, pairs


@pytest.fixture
def s3_pair(s3_store):
    """Pair 1 at s3://pair-race/c."""
    fs, pairs = s3_store
    fs.pipe("pair-race/c.bin", pairs[1][1])
    fs.pipe("pair-race/c.idx", pairs[1][0])
    return fs, pairs


def replace_in_store(fs: Any, pairs: dict[int, tuple[bytes, bytes]], k: int) -> None:
    """A store writer's order: the old .idx removed, the new .bin, then the new .idx."""
    fs.rm("pair-race/c.idx")
    fs.pipe("pair-race/c.bin", pairs[k][1])
    fs.pipe("pair-race/c.idx", pairs[k][0])


def test_a_pair_in_a_store_replaced_while_opened_is_read_whole_or_refused(s3_pair):
    # a store writer's three requests against the reader's five (the .idx's
    # size, its header and body, the .bin's size, the .idx's version again):
    # a pause between replacements lets opens through (a loop without one
    # replaces the pair under every try), and any of them may meet a writer
    fs, pairs = s3_pair

    def replace(k: int) -> None:
        replace_in_store(fs, pairs, k)
        time.sleep(0.05)

    read_while_replaced(lambda: posembed.IndexedCorpus("s3://pair-race/c"), replace, 300)
    # (how many opens got through depends on the machine's speed: not asserted)
    assert pair_of(posembed.IndexedCorpus("s3://pair-race/c")) in (1, 2)


def test_a_pair_in_a_store_replaced_after_its_idx_was_read_is_opened_again(s3_pair, monkeypatch):
    fs, pairs = s3_pair
    real, replaced = _indexed.info, []

    def info_then_replace(store: Any, key: str, url: str) -> Any:
        if key.endswith(".bin") and len(replaced) < times:  # the .idx read, the .bin next
            replaced.append(key)
            replace_in_store(fs, pairs, 1 + len(replaced) % 2)
        return real(store, key, url)

    monkeypatch.setattr(_indexed, "info", info_then_replace)
    times = 1
    corpus = posembed.IndexedCorpus("s3://pair-race/c")
    assert (pair_of(corpus), len(replaced)) == (2, 1)  # the new pair, opened again
    times = 10**9  # replaced at every try (by the other pair): a clear error, not a mix
    with pytest.raises(ValueError, match=rf"s3://pair-race/c\.idx: {REPLACED}"):
        posembed.IndexedCorpus("s3://pair-race/c")
    assert len(replaced) == 1 + _indexed.PAIR_TRIES


# ---- the streaming writer ---------------------------------------------------------------


def split_batches(rng, lengths, indices, batches, late):
    """The corpus cut into batches at random sequence boundaries, with each
    batch's document ends counted in its own sequences; a document that ends
    at a cut ends in the earlier batch, or (``late``) as the later one's 0."""
    n = len(lengths)
    cuts = np.unique(np.concatenate([[0, n], rng.integers(0, n + 1, batches)]))
    if len(cuts) == 1:
        cuts = np.array([0, 0])
    ends = np.asarray(indices[1:])
    pairs = list(itertools.pairwise(cuts))
    for k, (lo, hi) in enumerate(pairs):
        if late:
            mine = ends[((ends >= lo) & (ends < hi)) | ((ends == hi) & (k == len(pairs) - 1))]
        else:
            mine = ends[((ends > lo) & (ends <= hi)) | ((ends == lo) & (k == 0))]
        yield lo, hi, mine - lo


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_writer_round_trip_in_batches(tmp_path, rng, dtype):
    for k, documents in enumerate([0, 3, 30]):
        tokens, lengths, indices = random_corpus(rng, dtype, documents)
        if k == 1:  # empty documents first and last
            indices = np.concatenate([[0, 0], indices, [indices[-1]]])
        starts = np.concatenate([[0], np.cumsum(lengths)])
        bin_path, idx_path = tmp_path / f"w{k}.bin", tmp_path / f"w{k}.idx"
        with IndexedWriter(bin_path, idx_path, dtype) as writer:
            for lo, hi, ends in split_batches(rng, lengths, indices, 3, late=k % 2 == 1):
                writer.write(tokens[starts[lo] : starts[hi]], lengths[lo:hi], ends)
            writer.finish()
        craft(tmp_path / f"x{k}", list(lengths), list(indices), dtype, tokens=tokens)
        assert idx_path.read_bytes() == (tmp_path / f"x{k}.idx").read_bytes()
        assert bin_path.read_bytes() == (tmp_path / f"x{k}.bin").read_bytes()
        assert_reads(posembed.IndexedCorpus(tmp_path / f"w{k}"), tokens, starts[indices])


@pytest.mark.parametrize(
    ("old", "new"),
    [(np.uint16, np.int32), (np.uint8, np.int64), (np.int8, np.int16), (np.uint16, np.uint16)],
)
def test_widening_rewrites_what_was_written_in_bounded_chunks(tmp_path, monkeypatch, rng, old, new):
    monkeypatch.setattr(_indexed, "WIDEN_CHUNK", 7)  # many chunks, one partial
    info = np.iinfo(old)
    first = rng.integers(info.min, int(info.max) + 1, 100, dtype=old)
    second = np.array([np.iinfo(new).max, 0, 5], new)
    with IndexedWriter(tmp_path / "w.bin", tmp_path / "w.idx", old) as writer:
        writer.write(first, [60, 0, 40], [1, 3])
        writer.widen(new)
        assert writer.dtype == np.dtype(new)
        writer.write(second, [3], [1])
        writer.finish()
    corpus = posembed.IndexedCorpus(tmp_path / "w")
    assert corpus.dtype == np.dtype(new)
    assert np.array_equal(corpus.to_arrays()[0], np.concatenate([first.astype(new), second]))
    assert list(corpus.sequence_pointers) == [
        0,
        60 * corpus.dtype.itemsize,
        60 * corpus.dtype.itemsize,
        100 * corpus.dtype.itemsize,
    ]


def test_a_refused_batch_writes_nothing_so_it_can_be_widened_and_written_again(tmp_path):
    batch = (np.array([7, 65536, 8]), [2, 1], [1, 2])
    with IndexedWriter(tmp_path / "w.bin", tmp_path / "w.idx", np.uint16) as writer:
        writer.write([1, 2], [2], [])  # its document ends in the next batch
        with pytest.raises(ValueError, match=r"tokens\[1\] is 65536, which does not fit uint16"):
            writer.write(*batch)
        writer.widen(_indexed.optimal_dtype(65536 + 1))
        writer.write(*batch)
        writer.finish()
    corpus = posembed.IndexedCorpus(tmp_path / "w")
    assert corpus.dtype == np.int32
    assert [corpus[i].tolist() for i in range(2)] == [[1, 2, 7, 65536], [8]]
    assert corpus.sequence_lengths.tolist() == [2, 2, 1]


def test_the_writer_refuses_what_does_not_fit(tmp_path):
    writer = IndexedWriter(tmp_path / "w.bin", tmp_path / "w.idx", np.uint16)
    with pytest.raises(
        ValueError, match=r"tokens\[1\] is 65536, which does not fit uint16 \(0\.\.65535\)"
    ):
        writer.write(np.array([1, 65536]), [2], [1])
    with pytest.raises(ValueError, match=r"tokens\[0\] is -1, which does not fit uint16"):
        writer.write(np.array([-1]), [1], [1])
    with pytest.raises(
        ValueError, match=r"sequence 0 has 2147483648 tokens; the format's lengths are int32"
    ):
        writer.write(np.zeros(0, np.int64), [2**31], [1])
    with pytest.raises(ValueError, match=r"lengths\[1\] is -1 \(sequence 1\)"):
        writer.write([1], [2, -1], [1])
    with pytest.raises(ValueError, match=r"lengths add up to 3, but tokens holds 2"):
        writer.write([1, 2], [1, 2], [2])
    with pytest.raises(ValueError, match=r"document_ends must be in 0\.\.2"):
        writer.write([1, 2], [1, 1], [3])
    with pytest.raises(
        ValueError, match=r"document_ends must not decrease; document_ends\[1\] is 1 after 2"
    ):
        writer.write([1, 2], [1, 1], [2, 1])
    with pytest.raises(TypeError, match=r"tokens must be an array of integers; got dtype float64"):
        writer.write([1.5], [1], [1])
    # uint64 values past int64 are named as given, never as the negatives they wrap to
    with pytest.raises(ValueError, match=r"lengths\[0\] is 18446744073709551615; lengths are in"):
        writer.write([1], np.array([2**64 - 1], np.uint64), [1])
    with pytest.raises(ValueError, match=r"document_ends\[0\] is 9223372036854775808; document"):
        writer.write([1], [1], np.array([2**63], np.uint64))
    with pytest.raises(ValueError, match=r"lengths must be 1-D"):
        writer.write([1], [[1]], [1])
    with pytest.raises(ValueError, match=r"dtype int8 cannot hold every value of uint16"):
        writer.widen(np.int8)
    with pytest.raises(TypeError, match=r"dtype must be one of the indexed dataset's token dtypes"):
        writer.widen(np.float32)
    writer.write([1, 2, 3], [1, 2], [1])  # the second sequence's document is still open
    with pytest.raises(ValueError, match=r"1 sequence\(s\) after the last document end"):
        writer.finish()
    writer.write([], [], [0])
    writer.finish()
    with pytest.raises(ValueError, match="finished or closed"):
        writer.write([], [], [])
    writer.close()
    assert posembed.IndexedCorpus(tmp_path / "w").document_indices.tolist() == [0, 1, 2]
    with pytest.raises(FileExistsError):
        IndexedWriter(tmp_path / "w.bin", tmp_path / "v.idx", np.uint16)
    with pytest.raises(TypeError, match=r"dtype must be one of"):
        IndexedWriter(tmp_path / "v.bin", tmp_path / "v.idx", np.uint32)


# ---- write_indexed ----------------------------------------------------------------------


def test_write_indexed_writes_what_its_twin_writes(tmp_path, rng):
    for k in range(12):
        documents = int(rng.integers(0, 8))
        sizes = rng.integers(0, 6, documents)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        top = [9, 300, 65498, 65499, 70000, 2**31 - 2][k % 6]
        tokens = rng.integers(0, top + 1, int(offsets[-1]))
        kwargs: dict[str, Any] = [
            {},
            {"append_eod": int(rng.integers(0, top + 1))},
            {"dtype": np.int64},
            {"vocab_size": top + 1},
        ][k % 4]
        posembed.write_indexed(tmp_path / f"f{k}", tokens, offsets, **kwargs)
        reference.write_indexed(tmp_path / f"r{k}", tokens, offsets, **kwargs)
        for suffix in (".idx", ".bin"):
            assert (tmp_path / f"f{k}{suffix}").read_bytes() == (
                tmp_path / f"r{k}{suffix}"
            ).read_bytes(), (k, kwargs)
    assert (
        sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    )  # no temporaries


def test_write_indexed_follows_megatrons_dtype_rule_and_eod(tmp_path):
    def dtype_of(tokens, **kw):
        posembed.write_indexed(tmp_path / "d", tokens, [0, len(tokens)], force=True, **kw)
        return posembed.IndexedCorpus(tmp_path / "d").dtype

    assert dtype_of([65498]) == np.uint16  # 65499 ids: under 65500
    assert dtype_of([65499]) == np.int32
    assert dtype_of([1], append_eod=65499) == np.int32  # the EOD counts
    assert dtype_of([1], vocab_size=65499) == np.uint16
    assert dtype_of([1], vocab_size=65500) == np.int32
    assert dtype_of([]) == np.uint16
    assert dtype_of([5], dtype=np.uint8) == np.uint8
    assert dtype_of([5], dtype=">i4") == np.int32
    # the EOD goes after each non-empty document; an empty one stays a document
    # without a sequence, as preprocess_data.py --append-eod writes it
    posembed.write_indexed(tmp_path / "e", [1, 2, 3], [0, 0, 2, 2, 3], append_eod=0)
    corpus = posembed.IndexedCorpus(tmp_path / "e")
    assert corpus.sequence_lengths.tolist() == [3, 2]
    assert corpus.document_indices.tolist() == [0, 0, 1, 1, 2]
    assert [corpus[i].tolist() for i in range(4)] == [[], [1, 2, 0], [], [3, 0]]


def test_the_dtype_rule_is_megatrons_own(tmp_path):
    # the README and the Megatron guide call it Megatron's rule: its DType.optimal_dtype
    megatron_or_skip()
    from megatron.core.datasets.indexed_dataset import DType

    for vocab in (1, 255, 256, 65_499, 65_500, 65_536, 2**20):
        posembed.write_indexed(tmp_path / "v", [0], [0, 1], vocab_size=vocab, force=True)
        assert posembed.IndexedCorpus(tmp_path / "v").dtype == DType.optimal_dtype(vocab)


def test_write_indexed_refuses_to_replace_without_force_and_leaves_nothing(tmp_path):
    posembed.write_indexed(tmp_path / "c", [1, 2], [0, 2])
    (tmp_path / "a.bin").write_bytes(b"")
    (tmp_path / "b.idx").write_bytes(b"")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for prefix, existing in (("c", "c.bin"), ("a", "a.bin"), ("b.idx", "b.idx")):
        with pytest.raises(FileExistsError, match=rf"{existing} exists; pass force=True"):
            posembed.write_indexed(tmp_path / prefix, [3], [0, 1])
    with pytest.raises(ValueError, match=r"tokens\[0\] is 70000, which does not fit uint16"):
        posembed.write_indexed(tmp_path / "c", [70000], [0, 1], dtype=np.uint16, force=True)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    posembed.write_indexed(tmp_path / "c", [3], [0, 1], force=True)
    assert posembed.IndexedCorpus(tmp_path / "c").to_arrays()[0].tolist() == [3]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "b.idx", "c.bin", "c.idx"]
    (tmp_path / "d.idx").mkdir()
    with pytest.raises(IsADirectoryError, match=r"d\.idx is a folder"):
        posembed.write_indexed(tmp_path / "d", [3], [0, 1], force=True)
    assert not (tmp_path / "d.bin").exists()


def test_write_indexed_refuses_negative_ids_and_a_folder_whatever_the_options(tmp_path):
    # a signed dtype holds -5, but -5 is no token id; offsets past int64 are
    # named as given; a prefix naming a folder would write DIR.bin beside it
    for dtype in (np.int8, np.int16, np.int32, np.int64, None):
        with pytest.raises(ValueError, match=r"tokens\[0\] is -5; token ids are >= 0"):
            posembed.write_indexed(tmp_path / "c", [-5, 3], [0, 2], dtype=dtype)
    with pytest.raises(ValueError, match=r"tokens\[1\] is -1; token ids are >= 0"):
        posembed.write_indexed(tmp_path / "c", np.array([3, -1], np.int64), [0, 2], append_eod=0)
    with pytest.raises(
        ValueError,
        match=r"offsets\[1\] is 18446744073709551615; offsets run from 0 to the token count 3",
    ):
        posembed.write_indexed(tmp_path / "c", [1, 2, 3], np.array([0, 2**64 - 1, 3], np.uint64))
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError, match=r"output .*d is a folder; give PREFIX"):
        posembed.write_indexed(tmp_path / "d", [1], [0, 1])
    for prefix in (f"{tmp_path / 'd'}{os.sep}", f"{tmp_path / 'e'}{os.sep}"):
        with pytest.raises(ValueError, match=r"prefix must name the files PREFIX\.idx"):
            posembed.write_indexed(prefix, [1], [0, 1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
    posembed.write_indexed(
        tmp_path / "c", np.array([0, 2**63 - 1], np.uint64), [0, 2], dtype=np.int64
    )
    assert posembed.IndexedCorpus(tmp_path / "c").to_arrays()[0].tolist() == [0, 2**63 - 1]


def test_write_indexed_leaves_nothing_when_the_write_fails(tmp_path, monkeypatch):
    def fail(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(IndexedWriter, "finish", fail)
    with pytest.raises(OSError, match="No space left"):
        posembed.write_indexed(tmp_path / "c", [1, 2], [0, 2])
    assert list(tmp_path.iterdir()) == []


# ---- the token writes: tokens with end-of-document ids, in vectored writes ------------


def marked(tokens: np.ndarray, cuts: np.ndarray, mark: int) -> bytes:
    """What write_marked must write: ``mark`` before each of ``cuts``."""
    return np.insert(tokens, cuts, mark).astype(tokens.dtype).tobytes()


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int32, np.int64])
@pytest.mark.parametrize("count", [0, 1, 7, 5000])
def test_write_marked_writes_the_tokens_with_a_mark_before_each_cut(tmp_path, rng, dtype, count):
    tokens = rng.integers(0, 100, count).astype(dtype)
    # duplicates, both ends and, with 5000 tokens, far more pieces than one
    # vectored write takes (1024)
    cuts = np.sort(rng.integers(0, count + 1, 3 * count + 2))
    path = tmp_path / "t.bin"
    path.write_bytes(b"head")
    with open(path, "r+b") as f:
        _core.write_marked(f.fileno(), tokens, cuts, np.array([101], dtype), 4)
    assert path.read_bytes() == b"head" + marked(tokens, cuts, 101)


@pytest.mark.parametrize("cuts", [[3, 2], [-1], [8]], ids=["backwards", "negative", "past"])
def test_write_marked_refuses_bad_cuts_and_writes_nothing(tmp_path, cuts):
    path = tmp_path / "t.bin"
    with open(path, "wb") as f, pytest.raises(ValueError, match=r"cuts\[\d\] is out of order"):
        _core.write_marked(
            f.fileno(), np.arange(7, dtype=np.uint16), cuts, np.zeros(1, np.uint16), 0
        )
    assert path.read_bytes() == b""


def test_write_marked_raises_the_systems_error(tmp_path):
    fd = os.open(tmp_path / "t.bin", os.O_RDONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError, match="Bad file descriptor") as caught:
            _core.write_marked(fd, np.arange(3, dtype=np.uint16), [1], np.zeros(1, np.uint16), 0)
        assert caught.value.errno == errno.EBADF
    finally:
        os.close(fd)


def test_write_marked_resumes_a_short_write_and_reports_the_limit(tmp_path):
    # A file-size limit makes the kernel write part of a request, then refuse
    # the rest: the part written must be exactly the first bytes, the rest an
    # OSError (EFBIG), never a signal.
    script = textwrap.dedent(
        f"""
        import errno, os, resource, signal
        import numpy as np
        from posembed import _core
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1001, 1001))
        fd = os.open({str(tmp_path / "t.bin")!r}, os.O_WRONLY | os.O_CREAT)
        try:
            _core.write_marked(fd, np.arange(1000, dtype=np.uint16), [10, 500],
                               np.array([7], np.uint16), 0)
        except OSError as exc:
            print("errno", exc.errno == errno.EFBIG)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["errno", "True"]
    expected = marked(np.arange(1000, dtype=np.uint16), np.array([10, 500]), 7)
    assert (tmp_path / "t.bin").read_bytes() == expected[:1001]


# ---- megatron-core: its files read here, ours read there -------------------------------


@pytest.fixture(scope="module")
def megatron() -> Any:
    megatron_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module("megatron.core.datasets.indexed_dataset")


def megatron_reads(megatron: Any, prefix: Path, **kw: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return megatron.IndexedDataset(str(prefix), **kw)


def assert_same_as_megatron(ds: Any, corpus: posembed.IndexedCorpus) -> None:
    assert ds.index.dtype == corpus.dtype.type
    assert np.array_equal(ds.sequence_lengths, corpus.sequence_lengths)
    assert np.array_equal(ds.index.sequence_pointers, corpus.sequence_pointers)
    assert np.array_equal(ds.document_indices, corpus.document_indices)
    sequences = posembed.IndexedCorpus(corpus.prefix, documents="sequences")
    assert len(ds) == len(sequences)
    for i in range(len(ds)):
        theirs = ds[i]
        assert theirs.dtype == sequences[i].dtype
        assert theirs.tobytes() == sequences[i].tobytes()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_megatrons_builder_writes_what_indexed_corpus_reads(tmp_path, rng, megatron, dtype):
    import torch

    tokens, lengths, indices = random_corpus(rng, dtype, 20)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    with warnings.catch_warnings():  # its NumPy calls warn under NumPy 2
        warnings.simplefilter("ignore")
        builder = megatron.IndexedDatasetBuilder(str(tmp_path / "m.bin"), dtype=dtype)
        for d in range(len(indices) - 1):
            lo, hi = indices[d], indices[d + 1]
            doc = tokens[starts[lo] : starts[hi]]
            if d % 2:  # both of its ways to add a document
                builder.add_document(
                    torch.from_numpy(doc.astype(np.int64)), lengths[lo:hi].tolist()
                )
            else:
                for s in range(lo, hi):
                    builder.add_item(
                        torch.from_numpy(tokens[starts[s] : starts[s + 1]].astype(np.int64))
                    )
                builder.end_document()
        builder.finalize(str(tmp_path / "m.idx"))
    corpus = posembed.IndexedCorpus(tmp_path / "m")
    assert np.array_equal(corpus.sequence_lengths, lengths)
    assert np.array_equal(corpus.document_indices, indices)
    assert_reads(corpus, tokens, starts[indices])
    assert_same_as_megatron(megatron_reads(megatron, tmp_path / "m"), corpus)
    # and our writer writes the very same bytes
    with IndexedWriter(tmp_path / "w.bin", tmp_path / "w.idx", dtype) as writer:
        writer.write(tokens, lengths, indices[1:])
        writer.finish()
    for suffix in (".idx", ".bin"):
        assert (tmp_path / f"w{suffix}").read_bytes() == (tmp_path / f"m{suffix}").read_bytes()


def test_megatrons_multimodal_files_are_read_with_their_modes(tmp_path, megatron):
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        builder = megatron.IndexedDatasetBuilder(
            str(tmp_path / "m.bin"), dtype=np.int32, multimodal=True
        )
        builder.add_item(torch.tensor([1, 2, 3]), mode=1)
        builder.add_item(torch.tensor([4]), mode=-2)
        builder.end_document()
        builder.add_document(torch.tensor([5, 6]), [2], modes=[7])
        builder.finalize(str(tmp_path / "m.idx"))
    corpus = posembed.IndexedCorpus(tmp_path / "m", multimodal=True)
    assert corpus.offsets.tolist() == [0, 4, 6]
    assert corpus[0].tolist() == [1, 2, 3, 4]
    theirs = megatron_reads(megatron, tmp_path / "m", multimodal=True)
    assert theirs.index.sequence_modes.tolist() == corpus.modes.tolist() == [1, -2, 7]
    assert np.array_equal(theirs.document_indices, corpus.document_indices)
    with pytest.raises(ValueError, match="multimodal=True"):
        posembed.IndexedCorpus(tmp_path / "m")
    # write_indexed's modes: the very bytes of Megatron's builder
    posembed.write_indexed(
        tmp_path / "w", [1, 2, 3, 4, 5, 6], [0, 4, 6], dtype=np.int32, modes=[1, 7]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        builder = megatron.IndexedDatasetBuilder(
            str(tmp_path / "b.bin"), dtype=np.int32, multimodal=True
        )
        builder.add_document(torch.tensor([1, 2, 3, 4]), [4], modes=[1])
        builder.add_document(torch.tensor([5, 6]), [2], modes=[7])
        builder.finalize(str(tmp_path / "b.idx"))
    for suffix in (".idx", ".bin"):
        assert (tmp_path / f"w{suffix}").read_bytes() == (tmp_path / f"b{suffix}").read_bytes()


@pytest.mark.parametrize("mmap", [True, False])
def test_write_indexed_writes_what_megatron_reads(tmp_path, rng, megatron, mmap):
    for k, kwargs in enumerate([{}, {"append_eod": 3}, {"vocab_size": 70000}, {"dtype": np.int64}]):
        sizes = rng.integers(0, 7, 25)
        sizes[:2] = 0  # empty documents
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        tokens = rng.integers(0, 60000, int(offsets[-1]))
        posembed.write_indexed(tmp_path / f"c{k}", tokens, offsets, **kwargs)
        corpus = posembed.IndexedCorpus(tmp_path / f"c{k}")
        ds = megatron_reads(megatron, tmp_path / f"c{k}", mmap=mmap)
        assert_same_as_megatron(ds, corpus)
        eod = kwargs.get("append_eod")
        documents = [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(25)]
        if eod is not None:
            documents = [[*doc, eod] if doc else doc for doc in documents]
        assert [ds[i].tolist() for i in range(len(ds))] == [doc for doc in documents if doc]
        assert ds.document_indices.tolist() == [
            0,
            *np.cumsum([bool(doc) for doc in documents]).tolist(),
        ]


def test_the_streaming_writer_widened_writes_what_megatron_reads(tmp_path, megatron, monkeypatch):
    monkeypatch.setattr(_indexed, "WIDEN_CHUNK", 5)
    with IndexedWriter(tmp_path / "w.bin", tmp_path / "w.idx", np.uint16) as writer:
        writer.write(np.arange(30), [10, 10, 10], [0, 2])  # an empty document first
        writer.widen(np.int32)
        writer.write(np.array([65499, 100000]), [1, 1], [1, 2])  # ends the third's document
        writer.finish()
    ds = megatron_reads(megatron, tmp_path / "w", mmap=False)
    assert ds.index.dtype == np.int32
    assert ds.document_indices.tolist() == [0, 0, 2, 4, 5]
    assert [ds[i].tolist() for i in range(5)] == [
        list(range(10)),
        list(range(10, 20)),
        list(range(20, 30)),
        [65499],
        [100000],
    ]
    assert_same_as_megatron(ds, posembed.IndexedCorpus(tmp_path / "w"))

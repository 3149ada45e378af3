"""Packing on the fly: PackPlan.cut of any rows (a shuffled order's batch)
from an indexed dataset, with per-token columns carried into the rows, and
positions and separators as transformers' DataCollatorWithFlattening sets
them."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed
from posembed import _core, reference

from .conftest import transformers_or_skip

FIELDS = ("input_ids", "position_ids", "labels", "seq_lengths", "row_segments", "cu_seqlens")
FIELDS += ("documents", "starts")


def corpus(lengths: Any, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = np.random.default_rng(seed).integers(1, 50_000, int(offsets[-1])).astype(np.uint16)
    return tokens, offsets


def saved(tmp_path: Path, lengths: np.ndarray) -> tuple[Any, Any, np.ndarray, np.ndarray]:
    """The tokens and a 0/1 mask of the same documents as two indexed datasets."""
    tokens, offsets = corpus(lengths)
    mask = (np.random.default_rng(1).random(tokens.shape[0]) < 0.7).astype(np.uint8)
    posembed.write_indexed(tmp_path / "tokens", tokens, offsets, dtype=np.uint16)
    posembed.write_indexed(tmp_path / "mask", mask, offsets, dtype=np.uint8)
    return (
        posembed.IndexedCorpus(tmp_path / "tokens"),
        posembed.IndexedCorpus(tmp_path / "mask"),
        tokens,
        mask,
    )


def same(got: posembed.PackedRows, want: dict[str, Any]) -> None:
    for field in FIELDS:
        value = want[field]
        if value is None:
            assert getattr(got, field) is None, field
            continue
        assert np.array_equal(getattr(got, field), value), field
        assert getattr(got, field).dtype == value.dtype, field
    assert set(got.columns) == set(want.get("columns", {}))
    for name, value in want.get("columns", {}).items():
        assert np.array_equal(got.columns[name], value), name
        assert got.columns[name].dtype == value.dtype, name


def test_rows_in_any_order_with_repeats_are_those_rows_of_the_whole(rng):
    lengths = rng.integers(1, 150, 300)
    tokens, offsets = corpus(lengths)
    plan = posembed.pack(lengths, 128)
    whole = plan.cut(tokens, offsets, labels=True)
    wanted = rng.integers(0, plan.rows, 40)
    wanted[5] = wanted[9]  # a repeat
    for given in (wanted, wanted.astype(np.int32), wanted.tolist(), wanted.astype(np.uint64)):
        part = plan.cut(tokens, offsets, rows=given, labels=True)
        assert np.array_equal(part.input_ids, whole.input_ids[wanted])
        assert np.array_equal(part.position_ids, whole.position_ids[wanted])
        assert np.array_equal(part.labels, whole.labels[wanted])
        seqs = [
            whole.seq_lengths[whole.row_segments[r] : whole.row_segments[r + 1]] for r in wanted
        ]
        assert np.array_equal(part.seq_lengths, np.concatenate(seqs))
        assert part.cu_seqlens[-1] == 40 * 128
    empty = plan.cut(tokens, offsets, rows=np.zeros(0, np.int64))
    assert empty.input_ids.shape == (0, 128)
    assert empty.cu_seqlens.tolist() == [0]


def test_on_the_fly_rows_of_a_corpus_with_columns_equal_the_twin_on_any_thread_count(tmp_path, rng):
    pa = pytest.importorskip("pyarrow")
    lengths = rng.integers(1, 700, 400)
    tokens_c, mask_c, tokens, mask = saved(tmp_path, lengths)
    offsets = tokens_c.offsets
    weights = rng.random(tokens.shape[0]).astype(np.float32)
    arrow = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(weights))
    plan = posembed.pack(lengths, 512)
    twin = reference.pack(lengths, 512)
    wanted = rng.permutation(plan.rows)[:24]
    options: dict[str, Any] = dict(
        rows=wanted,
        labels=True,
        position_dtype=np.int32,
        position_start=2,
        separator_id=-1,
        pad_value=3,
        column_pad={"mask": 0, "weight": -1.0, "flat": 9},
    )
    columns = {"mask": mask_c, "weight": arrow, "flat": mask.astype(np.int16)}
    want = twin.cut(tokens, offsets, columns=columns, **options)
    before = posembed.get_num_threads()
    try:
        for threads in (1, max(2, before)):
            posembed.set_num_threads(threads)
            same(plan.cut(tokens_c, columns=columns, **options), want)
    finally:
        posembed.set_num_threads(before)
    got = plan.cut(tokens, offsets, columns=columns, **options)  # the same from arrays
    same(got, want)
    assert got.position_ids.min() == 2
    assert got.position_ids.max() == 2 + 511
    firsts = got.cu_seqlens[:-1][got.documents >= 0]  # every sequence's first token
    assert np.all(got.labels.reshape(-1)[firsts] == -1)
    pads = np.repeat(got.documents < 0, got.seq_lengths)
    assert np.all(got.labels.reshape(-1)[pads] == -100)
    assert np.all(got.columns["weight"].reshape(-1)[pads] == -1.0)


def test_a_row_equals_data_collator_with_flattening_with_its_start_and_separator(rng):
    transformers = transformers_or_skip()
    lengths = rng.integers(1, 200, 80)
    tokens, offsets = corpus(lengths)
    plan = posembed.pack(lengths, 256)
    wanted = rng.permutation(plan.rows)[:6]
    cut = plan.cut(tokens, offsets, rows=wanted, labels=True, position_start=2, separator_id=-7)
    collate = transformers.DataCollatorWithFlattening(
        return_flash_attn_kwargs=True, return_tensors="np", position_ids_start=2, separator_id=-7
    )
    for k, r in enumerate(wanted.tolist()):
        docs, starts, lens = plan.row(r)
        features = [
            {"input_ids": tokens[offsets[d] + s : offsets[d] + s + n].tolist()}
            for d, s, n in zip(docs.tolist(), starts.tolist(), lens.tolist(), strict=True)
        ]
        batch = collate(features)
        used = int(lens.sum())
        assert np.array_equal(batch["input_ids"][0], cut.input_ids[k, :used])
        assert np.array_equal(batch["position_ids"][0], cut.position_ids[k, :used])
        assert np.array_equal(batch["labels"][0], cut.labels[k, :used])
        a, b = cut.row_segments[k], cut.row_segments[k + 1]
        row_cu = cut.cu_seqlens[a : b + 1] - k * 256
        assert np.array_equal(np.asarray(batch["cu_seq_lens_q"]), row_cu[: len(docs) + 1])
        assert batch["max_length_q"] == int(lens.max())


def test_bad_rows_columns_and_positions_are_refused_naming_them(tmp_path, rng):
    lengths = rng.integers(1, 100, 50)
    tokens_c, _, tokens, mask = saved(tmp_path, lengths)
    offsets = tokens_c.offsets
    plan = posembed.pack(lengths, 128)
    kept = tokens.copy(), mask.copy()
    with pytest.raises(IndexError, match=rf"rows\[1\] = {plan.rows} .*0\.\.{plan.rows - 1}"):
        plan.cut(tokens_c, rows=[0, plan.rows])
    with pytest.raises(IndexError, match=r"rows\[0\] = -1"):
        plan.cut(tokens_c, rows=np.array([-1]))
    with pytest.raises(TypeError, match="rows must be integers"):
        plan.cut(tokens_c, rows=np.array([0.5]))
    with pytest.raises(ValueError, match="rows must be 1-D"):
        plan.cut(tokens_c, rows=np.zeros((2, 2), np.int64))
    plan.cut(tokens_c, rows=[0])  # its offsets checked whole, once
    d = int(plan.row(0)[0][0])
    tokens_c.offsets[d + 1] -= 1  # then changed: each document read is checked again
    try:
        with pytest.raises(ValueError, match=rf"tokens: document {d} has {lengths[d] - 1} tokens"):
            plan.cut(tokens_c, rows=[0])
    finally:
        tokens_c.offsets[d + 1] += 1
    other = lengths.copy()
    other[[4, 7]] += 1
    other_offsets = np.concatenate([[0], np.cumsum(other)])
    bad = np.zeros(int(other_offsets[-1]), np.uint8)
    posembed.write_indexed(tmp_path / "other", bad, other_offsets, dtype=np.uint8)
    with pytest.raises(ValueError, match=r"columns\['mask'\]: document 4 has"):
        plan.cut(tokens_c, columns={"mask": posembed.IndexedCorpus(tmp_path / "other")})
    with pytest.raises(ValueError, match=r"columns\['m'\] has 3 values; the tokens have"):
        plan.cut(tokens, offsets, columns={"m": mask[:3]})
    with pytest.raises(TypeError, match=r"columns\['m'\] must hold numbers"):
        plan.cut(tokens, offsets, columns={"m": mask.astype(str)})
    with pytest.raises(TypeError, match="columns must be a dict"):
        plan.cut(tokens, offsets, columns=[mask])
    with pytest.raises(ValueError, match="column_pad for column 'm' = 300 does not fit uint8"):
        plan.cut(tokens, offsets, columns={"m": mask}, column_pad=300)
    with pytest.raises(ValueError, match="column_pad names 'x'"):
        plan.cut(tokens, offsets, columns={"m": mask}, column_pad={"x": 1})
    with pytest.raises(ValueError, match="position_start must be >= 0"):
        plan.cut(tokens, offsets, position_start=-1)
    with pytest.raises(ValueError, match="position_start 2147483521 \\+ capacity 128"):
        plan.cut(tokens, offsets, position_start=2**31 - 127, position_dtype=np.int32)
    with pytest.raises(ValueError, match="separator_id 2147483648 does not fit"):
        plan.cut(tokens, offsets, separator_id=2**31, position_dtype=np.int32)
    with pytest.raises(TypeError, match="separator_id must be an integer"):
        plan.cut(tokens, offsets, separator_id=1.5)
    assert np.array_equal(tokens, kept[0])
    assert np.array_equal(mask, kept[1])


def test_a_corpus_that_shrinks_while_read_is_refused(tmp_path, rng, monkeypatch):
    from posembed.io._tokens import TokenFile

    lengths = rng.integers(50, 100, 60)
    tokens_c, mask_c, _, _ = saved(tmp_path, lengths)
    plan = posembed.pack(lengths, 128)
    wanted = np.array([plan.rows - 1, 0, plan.rows - 1])
    want = plan.cut(tokens_c, rows=wanted, columns={"mask": mask_c})
    assert len(tokens_c.tokens._maps) == 1  # (the file's identity, its mapping), kept
    # a worker's pickled copy carries no mapping and no descriptor
    worker = pickle.loads(pickle.dumps(tokens_c.tokens))
    assert (worker.fd, worker._maps) == (-1, [])
    real_open = TokenFile.open

    for path in (tokens_c.bin_path, mask_c.bin_path):
        kept = Path(path).read_bytes()
        tokens_c = posembed.IndexedCorpus(tmp_path / "tokens")  # as the files are now
        mask_c = posembed.IndexedCorpus(tmp_path / "mask")

        def open_then_shrink(self: Any, path: Any = path) -> None:
            real_open(self)
            if Path(self.path) == Path(path):
                os.truncate(path, 8)  # after the open's checks: the reads meet the end

        monkeypatch.setattr(TokenFile, "open", open_then_shrink)
        try:
            # a read past the new end says so; one inside the last page left
            # (copied out of the mapping: zeros) is caught by the size checked after
            with pytest.raises(
                ValueError, match=r"input changed while reading \((it ended at|\d+ bytes became 8)"
            ):
                plan.cut(tokens_c, rows=wanted, columns={"mask": mask_c})
        finally:
            monkeypatch.setattr(TokenFile, "open", real_open)
        with pytest.raises(ValueError, match="changed"):  # shrunk before: the open refuses it
            plan.cut(tokens_c, rows=wanted, columns={"mask": mask_c})
        Path(path).write_bytes(kept)
    with pytest.raises(ValueError, match="changed"):  # rewritten since it was opened
        plan.cut(tokens_c, rows=wanted, columns={"mask": mask_c})
    again = posembed.IndexedCorpus(tmp_path / "tokens"), posembed.IndexedCorpus(tmp_path / "mask")
    got = plan.cut(again[0], rows=wanted, columns={"mask": again[1]})
    assert np.array_equal(got.input_ids, want.input_ids)
    assert np.array_equal(got.columns["mask"], want.columns["mask"])


def test_wide_token_ids_that_narrow_labels_cannot_hold_are_refused_from_a_corpus(tmp_path):
    lengths = np.array([3, 4])
    tokens = np.array([1, 2, 3, 4, 5, 2**31 + 5, 6], np.int64)
    posembed.write_indexed(tmp_path / "w", tokens, np.array([0, 3, 7]), dtype=np.int64)
    plan = posembed.pack(lengths, 8)
    source = posembed.IndexedCorpus(tmp_path / "w")
    with pytest.raises(ValueError, match=f"token id {2**31 + 5} does not fit position_dtype int32"):
        plan.cut(source, labels=True, position_dtype=np.int32)
    got = plan.cut(source, labels=True)
    assert got.labels[0].tolist() == [-100, 5, 2**31 + 5, 6, -100, 2, 3, -100]


def fields(rows: posembed.PackedRows) -> dict[str, Any]:
    return {name: getattr(rows, name) for name in (*FIELDS, "columns")}


def kept_readers(plan: posembed.PackPlan) -> int:
    """How many readers of batches of this plan's rows are kept."""
    from posembed.kernels import _pack

    return sum(reader.plan() is plan for reader in _pack._READERS.values())


CUT_OPTIONS = [
    {},
    {"labels": True, "position_dtype": np.int32, "position_start": 2, "separator_id": 7},
    {"labels": True, "pad_value": 9, "column_pad": {"mask": 3}},
    {"position_dtype": np.int64, "column_pad": 1, "separator_id": -1},
]


@pytest.mark.parametrize("options", CUT_OPTIONS)
def test_batch_after_batch_of_a_corpus_equals_a_fresh_cut_for_every_option(
    tmp_path, rng, options, restore_threads
):
    """The first batch of an array of rows leaves a reader of the corpora
    behind; the batches after it (other rows, the same objects) are cut by
    it and equal what a cut of the same rows as a list gives, and the twin's,
    on any thread count."""
    lengths = rng.integers(1, 300, 200)
    tokens_c, mask_c, tokens, mask = saved(tmp_path, lengths)
    plan = posembed.pack(lengths, 256)
    twin = reference.pack(lengths, 256)
    columns = {"mask": mask_c}
    first = rng.permutation(plan.rows)[:8]
    plan.cut(tokens_c, rows=first, columns=columns, **options)
    assert kept_readers(plan) == 1
    for threads in (1, 2):
        posembed.set_num_threads(threads)
        for wanted in (rng.permutation(plan.rows)[:16], np.array([], np.int64), first[::-1]):
            got = plan.cut(tokens_c, rows=wanted, columns=columns, **options)
            fresh = plan.cut(tokens_c, rows=wanted.tolist(), columns=columns, **options)
            twins = twin.cut(
                tokens, tokens_c.offsets, rows=wanted, columns={"mask": mask}, **options
            )
            same(got, fields(fresh))
            same(got, twins)
    assert kept_readers(plan) == 1
    # other options, or the same values of other types, are not served by it
    with pytest.raises(ValueError, match="column_pad for column 'mask' = 300 does not fit uint8"):
        plan.cut(tokens_c, rows=first, columns=columns, **(options | {"column_pad": 300}))
    with pytest.raises(TypeError, match="separator_id must be an integer"):
        plan.cut(tokens_c, rows=first, columns=columns, **(options | {"separator_id": 7.0}))


def test_rows_a_kept_reader_cannot_take_get_the_cuts_own_errors(tmp_path, rng):
    lengths = rng.integers(1, 100, 50)
    tokens_c, mask_c, _, _ = saved(tmp_path, lengths)
    plan = posembed.pack(lengths, 128)
    plan.cut(tokens_c, rows=np.array([0, 1]), columns={"mask": mask_c})
    assert kept_readers(plan) == 1
    with pytest.raises(IndexError, match=rf"rows\[1\] = {plan.rows} .*0\.\.{plan.rows - 1}"):
        plan.cut(tokens_c, rows=np.array([0, plan.rows]), columns={"mask": mask_c})
    with pytest.raises(IndexError, match=r"rows\[0\] = -1"):
        plan.cut(tokens_c, rows=np.array([-1, 0], np.int8), columns={"mask": mask_c})
    with pytest.raises(IndexError, match=r"rows\[0\] = 18446744073709551615"):
        plan.cut(tokens_c, rows=np.array([2**64 - 1], np.uint64), columns={"mask": mask_c})
    with pytest.raises(TypeError, match="rows must be integers"):
        plan.cut(tokens_c, rows=np.array([0.5]), columns={"mask": mask_c})
    with pytest.raises(ValueError, match="rows must be 1-D"):
        plan.cut(tokens_c, rows=np.zeros((2, 2), np.int64), columns={"mask": mask_c})
    d = int(plan.row(0)[0][0])
    tokens_c.offsets[d + 1] -= 1  # the corpus's own offsets changed: each read is checked
    try:
        with pytest.raises(ValueError, match=rf"tokens: document {d} has {lengths[d] - 1} tokens"):
            plan.cut(tokens_c, rows=np.array([1, 0]), columns={"mask": mask_c})
    finally:
        tokens_c.offsets[d + 1] += 1
    strided = np.arange(2 * plan.rows)[::2] // 2  # a view of another dtype, strided
    got = plan.cut(tokens_c, rows=strided.astype(np.uint16)[::-1], columns={"mask": mask_c})
    want = plan.cut(tokens_c, rows=strided[::-1].tolist(), columns={"mask": mask_c})
    same(got, fields(want))


def _rewrite(path: Path) -> None:  # the same size, other bytes, in place
    data = path.read_bytes()
    path.write_bytes(data[::-1])
    os.utime(path, ns=(0, 0))


def _replace(path: Path) -> None:  # another file of the same size renamed over it
    other = path.with_suffix(".new")
    other.write_bytes(path.read_bytes()[::-1])
    os.replace(other, path)


CHANGES = {
    "rewritten": (_rewrite, r"it was modified or replaced"),
    "replaced": (_replace, r"it was modified or replaced"),
    "shrunk": (lambda p: os.truncate(p, 8), r"\d+ bytes became 8"),
    "removed": (Path.unlink, r"it was removed"),
    "a fifo": (lambda p: (p.unlink(), os.mkfifo(p)), r"it is no longer a regular file"),
}


@pytest.mark.parametrize("which", ["tokens", "mask"])
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_kept_reader_sees_a_file_changed_between_batches(tmp_path, rng, which, change):
    lengths = rng.integers(50, 100, 60)
    tokens_c, mask_c, _, _ = saved(tmp_path, lengths)
    plan = posembed.pack(lengths, 128)
    wanted = np.array([plan.rows - 1, 0, plan.rows - 1])
    plan.cut(tokens_c, rows=wanted, columns={"mask": mask_c})
    assert kept_readers(plan) == 1
    path = tokens_c.bin_path if which == "tokens" else mask_c.bin_path
    make, said = CHANGES[change]
    if change == "a fifo" and not hasattr(os, "mkfifo"):
        # Windows has no os.mkfifo; every POSIX host (CI's included) runs this case.
        pytest.skip("no FIFOs on this platform")
    make(Path(path))
    with pytest.raises(ValueError, match=rf"{which}\.bin: input changed while reading \({said}\)"):
        plan.cut(tokens_c, rows=wanted[:2], columns={"mask": mask_c})


@pytest.mark.parametrize("which", ["tokens", "mask"])
def test_a_file_cut_short_during_a_kept_readers_reads_is_an_error(tmp_path, rng, which):
    """The file shrinks after the call's checks: the copies out of the kept
    mapping meet pages that are gone and read them again with positional
    reads, which report the end (or the size checked after says so)."""
    lengths = rng.integers(2000, 4000, 100)
    tokens_c, mask_c, _, _ = saved(tmp_path, lengths)
    plan = posembed.pack(lengths, 4096)
    wanted = np.arange(plan.rows)[::-1].copy()
    plan.cut(tokens_c, rows=wanted, columns={"mask": mask_c})
    path = tokens_c.bin_path if which == "tokens" else mask_c.bin_path
    _core._probes.truncate_after_open(str(path), 4096)
    faults = _core._probes.mapped_faults()
    with pytest.raises(
        ValueError, match=rf"{which}\.bin: input changed while reading \(it ended at byte"
    ):
        plan.cut(tokens_c, rows=wanted, columns={"mask": mask_c})
    assert _core._probes.mapped_faults() > faults  # the lost pages met in the mapping
    assert Path(path).stat().st_size == 4096


def test_kept_readers_keep_neither_the_plan_nor_the_corpora_alive(tmp_path, rng):
    import gc
    import weakref

    from posembed.kernels import _pack

    lengths = rng.integers(1, 100, 50)
    tokens_c, mask_c, _, _ = saved(tmp_path, lengths)
    plan = posembed.pack(lengths, 128)
    plan.cut(tokens_c, rows=np.array([0]), columns={"mask": mask_c})
    (reader,) = [r for r in _pack._READERS.values() if r.plan() is plan]
    gone = [weakref.ref(o) for o in (plan, tokens_c, mask_c, reader)]
    del plan, tokens_c, mask_c, reader
    gc.collect()
    assert [ref() for ref in gone] == [None, None, None, None]  # the reader let go too

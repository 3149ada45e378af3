"""Sequence packing: plans against their twin and against the properties that
define them, the cut against the twin, transformers' DataCollatorWithFlattening
and TRL's pack_dataset, the positions through embed, and bad input."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posembed
from posembed import reference
from posembed.corpus._pack_output import NPY_ARRAYS, pack_file, shard_fill
from posembed.corpus._source import MEMORY_BYTES
from posembed.io._tokens import ChunkError
from posembed.reference.pack import PackPlan as TwinPlan

from .conftest import run_peak_rss, skip_if_sanitized, transformers_or_skip, trl_or_skip

STRATEGIES = ["bfd", "ffd", "wrapped"]
SPLITS = ["pieces", "truncate"]
PLAN_FIELDS = ("row_offsets", "documents", "starts", "lengths", "offsets")


def corpus(lengths: Any, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = np.random.default_rng(seed).integers(0, 50_000, int(offsets[-1])).astype(np.int32)
    return tokens, offsets


@given(
    lengths=st.lists(st.integers(0, 90), max_size=60),
    capacity=st.integers(1, 40),
    strategy=st.sampled_from(STRATEGIES),
    split=st.sampled_from(SPLITS),
)
@settings(max_examples=60, deadline=None)
def test_plan_and_cut_equal_the_twins(lengths, capacity, strategy, split):
    ours = posembed.pack(lengths, capacity, strategy=strategy, split=split)
    twin = reference.pack(lengths, capacity, strategy=strategy, split=split)
    for field in PLAN_FIELDS:
        assert np.array_equal(getattr(ours, field), getattr(twin, field)), field
    tokens, offsets = corpus(lengths)
    got = ours.cut(tokens, offsets, labels=True, pad_value=7)
    want = twin.cut(tokens, offsets, labels=True, pad_value=7)
    for field, value in want.items():
        assert np.array_equal(getattr(got, field), value), field
        assert getattr(got, field).dtype == value.dtype, field


@pytest.mark.parametrize("capacity", [64, 65, 4097, 300_000, 2**21 + 3])
def test_plans_equal_the_twins_at_every_capacity_scale(rng, capacity):
    # one word of rooms, two levels, three levels, and the sorted and mapped
    # plan beyond 2^20
    lengths = rng.integers(1, capacity + capacity // 3, 400)
    for strategy in ("bfd", "ffd"):
        ours = posembed.pack(lengths, capacity, strategy=strategy)
        twin = reference.pack(lengths, capacity, strategy=strategy)
        for field in PLAN_FIELDS:
            assert np.array_equal(getattr(ours, field), getattr(twin, field)), (strategy, field)


def test_huge_lengths_and_capacities_are_refused_or_planned_in_memory_that_follows_the_input():
    with pytest.raises(ValueError, match=r"would hold \d+ entries, more than"):
        posembed.pack([2**50], 1024)
    with pytest.raises(ValueError, match=r"lengths\[1\] = 4611686018427387905 passes 2\^62"):
        posembed.pack(np.array([1, 2**62 + 1]), 8)
    with pytest.raises(ValueError, match="the documents hold 2\\^62 tokens or more"):
        posembed.pack(np.array([2**62] * 3), 2**31 - 1, split="truncate")
    for strategy in STRATEGIES:  # a capacity of 2^31 - 1 needs no array of that size
        plan = posembed.pack([1, 5, 0, 7], 2**31 - 1, strategy=strategy)
        assert plan.rows == 1
        assert plan.tokens == 13


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_token_is_placed_once_within_capacity_positions_restarting(rng, strategy):
    lengths = rng.integers(0, 300, 400)
    plan = posembed.pack(lengths, 128, strategy=strategy)
    # every document's tokens exactly once: its pieces tile 0..n
    order = np.lexsort((plan.starts, plan.documents))
    docs, starts, lens = plan.documents[order], plan.starts[order], plan.lengths[order]
    ends = np.zeros(lengths.shape[0], np.int64)
    for d, s, n in zip(docs.tolist(), starts.tolist(), lens.tolist(), strict=True):
        assert s == ends[d]
        ends[d] += n
    assert np.array_equal(ends, lengths)
    assert plan.tokens == int(lengths.sum())
    assert plan.truncated_tokens == 0
    used = np.add.reduceat(plan.lengths, plan.row_offsets[:-1])
    assert (used <= 128).all()
    assert (used >= 1).all()
    tokens, offsets = corpus(lengths)
    cut = plan.cut(tokens, offsets)
    # positions restart at 0 at each sequence's start, padding included
    flat_pos = cut.position_ids.reshape(-1)
    firsts = np.zeros(flat_pos.shape[0], bool)
    firsts[cut.cu_seqlens[:-1]] = True
    assert np.array_equal(flat_pos == 0, firsts)
    assert cut.cu_seqlens[-1] == plan.rows * 128
    # every placed token is the document's own
    for r in (0, plan.rows // 2, plan.rows - 1):
        for d, s, n, at in zip(*plan.row(r), plan.offsets[plan.row_offsets[r] :], strict=False):
            piece = tokens[offsets[d] + s : offsets[d] + s + n]
            assert np.array_equal(cut.input_ids[r, at : at + n], piece)


def test_the_plan_and_the_cut_are_the_same_on_any_thread_count(rng):
    lengths = rng.integers(1, 5000, 3000)
    tokens, offsets = corpus(lengths)
    before = posembed.get_num_threads()
    results = []
    try:
        for threads in (1, max(2, before)):
            posembed.set_num_threads(threads)
            plan = posembed.pack(lengths, 1024)
            results.append((plan, plan.cut(tokens, offsets, labels=True)))
    finally:
        posembed.set_num_threads(before)
    (p1, c1), (p2, c2) = results
    for field in PLAN_FIELDS:
        assert np.array_equal(getattr(p1, field), getattr(p2, field))
    for field in ("input_ids", "position_ids", "labels", "cu_seqlens"):
        assert np.array_equal(getattr(c1, field), getattr(c2, field))


def test_best_fit_fills_at_least_as_well_as_first_fit_on_a_corpus_like_shape():
    rng = np.random.default_rng(3)
    lengths = np.maximum(1, rng.lognormal(np.log(600) - 0.5, 1.0, 50_000)).astype(np.int64)
    bfd = posembed.pack(lengths, 4096)
    ffd = posembed.pack(lengths, 4096, strategy="ffd")
    assert bfd.fill >= ffd.fill
    assert bfd.fill > 0.99
    assert bfd.split_documents == int(np.count_nonzero(lengths > 4096))


def test_split_choices_say_what_they_cost():
    lengths = [10, 3, 0, 25]
    pieces = posembed.pack(lengths, 8)
    assert pieces.split_documents == 2
    assert pieces.truncated_tokens == 0
    assert pieces.empty_documents == 1
    cut = posembed.pack(lengths, 8, split="truncate")
    assert cut.truncated_tokens == (10 - 8) + (25 - 8)
    assert cut.split_documents == 0
    with pytest.raises(ValueError, match=r"document 0 has 10 tokens, more than the capacity of 8"):
        posembed.pack(lengths, 8, split="refuse")
    summary = pieces.summary
    assert summary["rows"] == pieces.rows
    assert summary["padding"] == pieces.padding


def test_a_batch_of_rows_is_the_same_as_those_rows_of_the_whole(rng):
    lengths = rng.integers(1, 100, 200)
    tokens, offsets = corpus(lengths)
    plan = posembed.pack(lengths, 64)
    whole = plan.cut(tokens, offsets, labels=True)
    part = plan.cut(tokens, offsets, rows=slice(3, 9), labels=True, position_dtype=np.int32)
    assert np.array_equal(part.input_ids, whole.input_ids[3:9])
    assert np.array_equal(part.position_ids, whole.position_ids[3:9])
    assert part.position_ids.dtype == np.int32
    assert part.labels is not None
    a, b = whole.row_segments[3], whole.row_segments[9]
    assert np.array_equal(part.seq_lengths, whole.seq_lengths[a:b])
    assert np.array_equal(part.cu_seqlens, whole.cu_seqlens[a : b + 1] - 3 * 64)


def test_an_indexed_corpus_is_cut_as_its_arrays_are(tmp_path, rng):
    lengths = rng.integers(1, 300, 120)
    tokens, offsets = corpus(lengths)
    posembed.write_indexed(tmp_path / "c", tokens.astype(np.uint16), offsets)
    source = posembed.IndexedCorpus(tmp_path / "c")
    plan = posembed.pack(lengths, 256)
    got = plan.cut(source, rows=slice(2, 7))
    want = plan.cut(tokens.astype(np.uint16), offsets, rows=slice(2, 7))
    assert np.array_equal(got.input_ids, want.input_ids)
    assert np.array_equal(got.documents, want.documents)


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_unpack_gives_each_document_its_tokens_values_back(rng, strategy, split):
    lengths = rng.integers(0, 200, 60)
    tokens, offsets = corpus(lengths)
    plan = posembed.pack(lengths, 64, strategy=strategy, split=split)
    cut = plan.cut(tokens, offsets)
    features = rng.standard_normal((plan.rows, 64, 3)).astype(np.float32)
    ids, placed = plan.unpack(cut.input_ids)
    kept = np.minimum(lengths, 64) if split == "truncate" else lengths
    assert np.array_equal(np.diff(placed), kept)
    for d in range(len(lengths)):
        assert np.array_equal(
            ids[placed[d] : placed[d + 1]], tokens[offsets[d] : offsets[d] + kept[d]]
        )
    got = plan.unpack(features)
    want = reference.pack(lengths, 64, strategy=strategy, split=split).unpack(features)
    assert np.array_equal(got[0], want[0])
    assert np.array_equal(got[1], want[1])
    with pytest.raises(ValueError, match=r"values must have shape \(\d+, 64, \.\.\.\)"):
        plan.unpack(features[:, :10])


def test_packed_positions_feed_embed_as_each_document_alone(rng):
    lengths = rng.integers(1, 40, 30)
    tokens, offsets = corpus(lengths)
    tokens %= 100
    tok_table = rng.standard_normal((100, 8)).astype(np.float32)
    pos_table = rng.standard_normal((64, 8)).astype(np.float32)
    plan = posembed.pack(lengths, 64)
    cut = plan.cut(tokens, offsets)
    packed = posembed.embed(tok_table, cut.input_ids, pos_table, positions=cut.position_ids)
    assert np.array_equal(
        posembed.gather(pos_table, cut.position_ids)[0], pos_table[cut.position_ids[0]]
    )
    for r in range(plan.rows):
        for d, s, n, at in zip(*plan.row(r), plan.offsets[plan.row_offsets[r] :], strict=False):
            alone = posembed.embed(
                tok_table, tokens[offsets[d] + s : offsets[d] + s + n][None], pos_table
            )
            assert np.array_equal(packed[r, at : at + n], alone[0])


# ---- the real libraries ----------------------------------------------------------------


def test_position_ids_labels_and_cu_seqlens_equal_data_collator_with_flattening(rng):
    transformers = transformers_or_skip()
    lengths = rng.integers(1, 200, 80)
    tokens, offsets = corpus(lengths)
    plan = posembed.pack(lengths, 256)
    cut = plan.cut(tokens, offsets, labels=True)
    collate = transformers.DataCollatorWithFlattening(
        return_flash_attn_kwargs=True, return_tensors="np"
    )
    for r in range(plan.rows):
        docs, starts, lens = plan.row(r)
        features = [
            {"input_ids": tokens[offsets[d] + s : offsets[d] + s + n].tolist()}
            for d, s, n in zip(docs.tolist(), starts.tolist(), lens.tolist(), strict=True)
        ]
        batch = collate(features)
        used = int(lens.sum())
        assert np.array_equal(batch["input_ids"][0], cut.input_ids[r, :used])
        assert np.array_equal(batch["position_ids"][0], cut.position_ids[r, :used])
        assert np.array_equal(batch["labels"][0], cut.labels[r, :used])
        a, b = cut.row_segments[r], cut.row_segments[r + 1]
        row_cu = cut.cu_seqlens[a : b + 1] - r * 256
        assert np.array_equal(np.asarray(batch["cu_seq_lens_q"]), row_cu[: len(docs) + 1])


def _trl_corpus(lengths: np.ndarray) -> tuple[Any, Any, np.ndarray, np.ndarray]:
    """TRL's pack_dataset, and the documents of ``lengths`` as a Dataset and CSR arrays."""
    pack_dataset = trl_or_skip()
    datasets = pytest.importorskip("datasets")
    tokens, offsets = corpus(lengths)
    docs = [tokens[offsets[d] : offsets[d + 1]].tolist() for d in range(len(lengths))]
    return pack_dataset, datasets.Dataset.from_dict({"input_ids": docs}), tokens, offsets


def _same_rows(plan: posembed.PackPlan, tokens: Any, offsets: Any, theirs: Any) -> None:
    """The plan's rows, cut from the tokens, are TRL's packed rows, in order."""
    cut = plan.cut(tokens, offsets)
    assert plan.rows == len(theirs)
    for r in range(plan.rows):
        _, _, lens = plan.row(r)
        assert cut.input_ids[r, : int(lens.sum())].tolist() == theirs[r]["input_ids"]
        assert lens.tolist() == theirs[r]["seq_lengths"]


@pytest.mark.parametrize(("trl_strategy", "split"), [("bfd_split", "pieces"), ("bfd", "truncate")])
def test_the_rows_equal_trls_pack_dataset(rng, trl_strategy, split):
    lengths = rng.integers(1, 150, 300)
    pack_dataset, ds, tokens, offsets = _trl_corpus(lengths)
    theirs = pack_dataset(ds, 64, strategy=trl_strategy)
    _same_rows(posembed.pack(lengths, 64, split=split), tokens, offsets, theirs)


@pytest.mark.parametrize(("trl_strategy", "split"), [("bfd_split", "pieces"), ("bfd", "truncate")])
def test_trl_packs_each_batch_of_1000_rows_apart_and_so_makes_more_rows(rng, trl_strategy, split):
    # What the packing guide says of TRL: its pack_dataset packs through
    # Dataset.map(batched=True), 1,000 rows at a time; in one batch its rows
    # are posembed's plan of the whole corpus, and its default call makes the
    # rows of posembed's plan of each batch of 1,000, more of them.
    lengths = rng.integers(1, 200, 2_500)
    pack_dataset, ds, tokens, offsets = _trl_corpus(lengths)
    whole = posembed.pack(lengths, 128, split=split)
    one_batch = pack_dataset(ds, 128, strategy=trl_strategy, map_kwargs={"batch_size": None})
    _same_rows(whole, tokens, offsets, one_batch)
    by_default = pack_dataset(ds, 128, strategy=trl_strategy)
    per_batch = [posembed.pack(lengths[b : b + 1000], 128, split=split) for b in (0, 1000, 2000)]
    assert len(by_default) == sum(plan.rows for plan in per_batch) > whole.rows
    first_rows = by_default.select(range(per_batch[0].rows))
    _same_rows(per_batch[0], tokens[: offsets[1000]], offsets[:1001], first_rows)


# ---- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"lengths": [3, -1]}, ValueError, r"lengths\[1\] = -1 is negative"),
        ({"lengths": [1.5]}, TypeError, "lengths must be integers"),
        ({"lengths": [[1]]}, ValueError, "lengths must be 1-D"),
        ({"capacity": 0}, ValueError, "capacity must be a positive integer; got 0"),
        ({"capacity": True}, TypeError, "capacity must be a positive integer; got bool"),
        ({"capacity": 2**31}, ValueError, "capacity must be at most 2"),
        ({"strategy": "best"}, ValueError, "strategy must be one of 'bfd', 'ffd', 'wrapped'"),
        ({"split": "drop"}, ValueError, "split must be one of"),
    ],
)
def test_bad_plan_arguments_are_refused_naming_them(kwargs, error, message):
    args: dict[str, Any] = {"lengths": [3, 4], "capacity": 8, **kwargs}
    lengths, capacity = args.pop("lengths"), args.pop("capacity")
    with pytest.raises(error, match=message):
        posembed.pack(lengths, capacity, **args)
    with pytest.raises(error):
        reference.pack(lengths, capacity, **args)


def test_bad_cut_arguments_are_refused_and_the_inputs_kept():
    plan = posembed.pack([3, 4], 8)
    tokens, offsets = corpus([3, 4])
    kept = tokens.copy(), offsets.copy()
    with pytest.raises(
        ValueError, match="offsets give document 0 2 tokens; the plan was made with 3"
    ):
        plan.cut(tokens, [0, 2, 7])
    with pytest.raises(ValueError, match=r"offsets must have shape \(3,\)"):
        plan.cut(tokens, [0, 3])
    with pytest.raises(ValueError, match=r"offsets must lie in 0\.\.6"):
        plan.cut(tokens[:6], offsets)
    with pytest.raises(ValueError, match="pad_value 300 does not fit the tokens' dtype uint8"):
        plan.cut(tokens.astype(np.uint8), offsets, pad_value=300)
    with pytest.raises(TypeError, match="offsets is required"):
        plan.cut(tokens)
    with pytest.raises(TypeError, match="position_dtype must be int64 or int32"):
        plan.cut(tokens, offsets, position_dtype=np.float32)
    with pytest.raises(ValueError, match="rows must be consecutive"):
        plan.cut(tokens, offsets, rows=slice(0, 1, 2))
    with pytest.raises(IndexError, match="row 5 is out of range for a plan of 1 rows"):
        plan.row(5)
    assert np.array_equal(tokens, kept[0])
    assert np.array_equal(offsets, kept[1])


def test_labels_that_would_wrap_are_refused_and_any_pad_value_of_the_dtype_is_taken():
    plan = posembed.pack([3, 2], 8)
    offsets = np.array([0, 3, 5])
    wide = np.array([1, 2**31 + 5, 3, 4, 5], np.int64)
    with pytest.raises(
        ValueError, match="labels: token id 2147483653 does not fit position_dtype int32"
    ):
        plan.cut(wide, offsets, labels=True, position_dtype=np.int32)
    assert plan.cut(wide, offsets, labels=True).labels[0, 1] == 2**31 + 5
    top = np.iinfo(np.uint64).max
    cut = plan.cut(np.arange(5, dtype=np.uint64), offsets, pad_value=top)
    assert cut.input_ids[0, 5:].tolist() == [top] * 3
    with pytest.raises(ValueError, match="labels: token id 18446744073709551615 does not fit"):
        plan.cut(np.full(5, top, np.uint64), offsets, labels=True)


# ---- a plan built by hand -------------------------------------------------------------

PLAN_ARGS = ("document_lengths", "capacity", "strategy", "split", *PLAN_FIELDS)


def plan_args(plan: Any) -> dict[str, Any]:
    """A plan's arguments, its arrays as writeable copies (a plan built by hand)."""
    return {
        name: np.array(value) if isinstance(value, np.ndarray) else value
        for name in PLAN_ARGS
        for value in [getattr(plan, name)]
    }


def twin_error(args: dict[str, Any]) -> type[Exception] | None:
    """The exception type the twin's plan raises for these arguments (its
    messages are its own), or None."""
    try:
        TwinPlan(**args)
    except (TypeError, ValueError) as exc:
        return type(exc)
    return None


# one plan of every kind of entry: rows 0 and 1 hold a whole piece of
# capacity, row 2 a document, then a last piece of another; row 3 a last piece
SMALL = posembed.pack([5, 9, 0, 12], 8)
assert SMALL.row_offsets.tolist() == [0, 1, 2, 4, 5]
assert SMALL.documents.tolist() == [1, 3, 0, 1, 3]
assert SMALL.starts.tolist() == [0, 0, 0, 8, 8]
assert SMALL.lengths.tolist() == [8, 8, 5, 1, 4]
assert SMALL.offsets.tolist() == [0, 0, 0, 5, 0]

# (what is changed, the message): each a plan the kernels would have read out
# of bounds (an array shorter than the entries), or returned uninitialised
# memory from (slots that no entry writes), or placed tokens wrongly from
BAD_PLANS = [
    (
        {"offsets": [0, 0, 0, 5]},
        r"offsets must have shape \(5,\), one value per entry as documents, starts and lengths "
        r"have; got \(4,\)",
    ),
    ({"starts": [0, 0, 0, 8]}, r"starts must have shape \(5,\), one value per entry as"),
    ({"lengths": [8, 8, 5, 1]}, r"lengths must have shape \(5,\), one value per entry as"),
    (
        {"documents": [1, 3, 0, 1]},
        r"documents must have shape \(5,\), one value per entry as starts, lengths and offsets",
    ),
    (
        {"row_offsets": [0, 1, 2, 4]},
        r"row_offsets\[3\] = 4; row_offsets must end at 5, the number of entries",
    ),
    ({"row_offsets": [0, 1, 2, 4, 6]}, r"row_offsets\[4\] = 6; row_offsets must end at 5"),
    ({"row_offsets": [1, 2, 4, 5]}, r"row_offsets\[0\] = 1; row_offsets must start at 0"),
    (
        {"row_offsets": []},
        r"row_offsets must have shape \(rows \+ 1,\), from 0 to the 5 entries; got \(0,\)",
    ),
    (
        {"row_offsets": [0, 2, 1, 4, 5]},
        r"row_offsets\[2\] = 1 after row_offsets\[1\] = 2; row_offsets must rise",
    ),
    (
        {"row_offsets": [0, 1, 1, 2, 4, 5]},
        r"row_offsets\[2\] = 1 after row_offsets\[1\] = 1; row_offsets must rise \(every row",
    ),
    # entries overlapping in their row, or apart: the slots between them unwritten
    (
        {"offsets": [0, 0, 0, 3, 0]},
        r"offsets\[3\] = 3; entry 3 must start at 5, where entry 2 ends \(row 2's entries sit "
        r"back to back from 0\)",
    ),
    ({"offsets": [0, 0, 0, 6, 0]}, r"offsets\[3\] = 6; entry 3 must start at 5, where entry 2"),
    ({"offsets": [0, 0, 2, 7, 0]}, r"offsets\[2\] = 2; entry 2 must start at 0, its row's start"),
    # past the capacity
    (
        {"capacity": 7},
        r"lengths\[0\] = 8; an entry's length must be in 1\.\.7 \(the capacity\)",
    ),
    (
        {"lengths": [8, 8, 5, 4, 4], "starts": [0, 0, 0, 5, 8], "document_lengths": [5, 9, 0, 12]},
        r"lengths: row 2 holds 9 tokens \(entries 2\.\.3\), more than the capacity of 8",
    ),
    ({"lengths": [8, 8, 0, 1, 4]}, r"lengths\[2\] = 0; an entry's length must be in 1\.\.8"),
    ({"lengths": [8, 8, -5, 1, 4]}, r"lengths\[2\] = -5; an entry's length must be in 1\.\.8"),
    # documents: permuted, duplicated, out of range
    (
        {"documents": [1, 3, 0, 3, 1]},
        r"starts\[4\] = 8, lengths\[4\] = 4: entry 4 runs past the end of document 1, of which "
        r"the plan places 9 tokens; an entry must lie within them",
    ),
    (
        {"documents": [1, 1, 0, 1, 3]},
        r"starts\[1\] = 0, lengths\[1\] = 8: entries 0 and 1 both hold token 0 of document 1; "
        r"a document's entries must not overlap",
    ),
    (
        {"documents": [1, 3, 0, 1, 4]},
        r"documents\[4\] = 4; documents must be in 0\.\.3, the documents' numbers",
    ),
    ({"documents": [1, 3, -1, 1, 3]}, r"documents\[2\] = -1; documents must be in 0\.\.3"),
    (
        {"document_lengths": []},
        r"documents\[0\] = 1; documents must be in nothing: document_lengths is empty",
    ),
    # the pieces of a document: overlapping, past its end, missing, negative
    (
        {"starts": [0, 0, 0, 7, 8], "lengths": [8, 8, 5, 1, 4]},
        r"starts\[3\] = 7, lengths\[3\] = 1: entries 0 and 3 both hold token 7 of document 1; "
        r"a document's entries must not overlap",
    ),
    ({"starts": [0, 0, 0, 9, 8]}, r"starts\[3\] = 9, lengths\[3\] = 1: entry 3 runs past the end"),
    ({"starts": [0, 0, 0, -8, 8]}, r"starts\[3\] = -8 is negative; starts must be >= 0"),
    (
        {"document_lengths": [5, 9, 0, 13]},
        r"documents: document 3 gets 12 tokens from its entries; the plan places 13 of it "
        r"\(document_lengths\[3\] = 13\)",
    ),
    ({"document_lengths": [5, 9, 1, 12]}, r"documents: document 2 gets 0 tokens from its"),
    ({"document_lengths": [5, 9, 0, 11]}, r"entry 4 runs past the end of document 3, of which"),
    ({"document_lengths": [5, 9, -1, 12]}, r"document_lengths\[2\] = -1 is negative"),
    (
        {"split": "truncate"},
        r"entry 3 runs past the end of document 1, of which the plan places 8 tokens \(its "
        r"first 8, split='truncate'\)",
    ),
    (
        {"split": "refuse"},
        r"document_lengths\[1\] = 9 is more than the capacity of 8, which split='refuse' does "
        "not place",
    ),
]


BAD_PLAN_IDS = [
    "short-offsets",
    "short-starts",
    "short-lengths",
    "short-documents",
    "row-offsets-short",
    "row-offsets-past-entries",
    "row-offsets-not-from-0",
    "row-offsets-empty",
    "row-offsets-falling",
    "empty-row",
    "overlap-in-row",
    "gap-in-row",
    "row-not-from-0",
    "capacity-smaller",
    "row-past-capacity",
    "zero-length",
    "negative-length",
    "permuted-documents",
    "duplicated-document",
    "document-out-of-range",
    "negative-document",
    "no-documents",
    "overlapping-pieces",
    "piece-past-document",
    "negative-start",
    "document-longer",
    "empty-document-longer",
    "document-shorter",
    "negative-document-length",
    "split-truncate",
    "split-refuse",
]
assert len(BAD_PLAN_IDS) == len(BAD_PLANS)


@pytest.mark.parametrize(("changes", "message"), BAD_PLANS, ids=BAD_PLAN_IDS)
def test_a_plan_whose_entries_do_not_tile_is_refused_before_any_kernel_reads_it(changes, message):
    args = {**plan_args(SMALL), **changes}
    given = {
        k: np.asarray(v, np.int64) for k, v in args.items() if isinstance(v, (np.ndarray, list))
    }
    args.update(given)
    kept = {k: v.copy() for k, v in given.items()}
    tokens, offsets = corpus(SMALL.document_lengths)
    values = np.zeros((SMALL.rows, 8, 2), np.float32)
    # the plan is checked once, when made: no cut, unpack or row ever reads
    # a plan that fails it, so each refuses it with the same message
    with pytest.raises(ValueError, match=message):
        posembed.PackPlan(**args).unpack(values)
    with pytest.raises(ValueError, match=message):
        posembed.PackPlan(**args).cut(tokens, offsets, labels=True)
    with pytest.raises(ValueError, match=message):
        posembed.PackPlan(**args).row(0)
    assert twin_error(args) is ValueError
    for name, array in given.items():  # the arrays given: unchanged and still writeable
        assert np.array_equal(array, kept[name])
        assert array.flags.writeable


def test_a_ten_million_entry_wrapped_plan_with_a_short_array_is_refused_not_read_past():
    # unpack read documents' length of offsets, starts and lengths: a SIGSEGV
    # with a short one (a plan of 10M one-token documents in rows of 8)
    n, capacity = 10_000_000, 8
    full = {
        "document_lengths": np.ones(n, np.int64),
        "capacity": capacity,
        "strategy": "wrapped",
        "split": "pieces",
        "row_offsets": np.arange(0, n + 1, capacity),
        "documents": np.arange(n),
        "starts": np.zeros(n, np.int64),
        "lengths": np.ones(n, np.int64),
        "offsets": np.arange(n) % capacity,
    }
    values = np.zeros((n // capacity, capacity), np.float32)
    for name in ("offsets", "starts", "lengths", "documents"):
        short = {**full, name: full[name][:1000].copy()}
        with pytest.raises(ValueError, match=rf"{name} must have shape \(10000000,\), one value"):
            posembed.PackPlan(**short).unpack(values)


@pytest.mark.parametrize("split", ["pieces", "truncate", "refuse"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_hand_built_copy_of_a_plan_works_as_the_plan(rng, strategy, split):
    lengths = rng.integers(0, 200 if split != "refuse" else 64, 80)
    plan = posembed.pack(lengths, 64, strategy=strategy, split=split)
    args = plan_args(plan)
    copy = posembed.PackPlan(**args)
    for name in PLAN_ARGS:
        assert np.array_equal(getattr(copy, name), getattr(plan, name)), name
    assert copy.summary == plan.summary
    tokens, offsets = corpus(lengths)
    got, want = copy.cut(tokens, offsets, labels=True), plan.cut(tokens, offsets, labels=True)
    for field in ("input_ids", "position_ids", "labels", "cu_seqlens", "documents", "starts"):
        assert np.array_equal(getattr(got, field), getattr(want, field)), field
    features = rng.standard_normal((plan.rows, 64, 3)).astype(np.float32)
    for a, b in zip(copy.unpack(features), plan.unpack(features), strict=True):
        assert np.array_equal(a, b)
    for r in (0, -1):
        for a, b in zip(copy.row(r), plan.row(r), strict=True):
            assert np.array_equal(a, b)
    twin = TwinPlan(**plan_args(plan))  # the twin takes it too
    assert np.array_equal(twin.unpack(features)[0], plan.unpack(features)[0])
    for a, b in zip(twin.row(-1), plan.row(-1), strict=True):
        assert np.array_equal(a, b)
    # lists, and pieces in another valid order and cut, are taken as well
    as_lists = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in args.items()}
    assert posembed.PackPlan(**as_lists).rows == plan.rows


def test_pieces_cut_anywhere_and_in_any_order_are_a_plan_if_they_tile():
    values = np.arange(8.0).reshape(2, 4)
    # document 0 (5 tokens) in rows of 4: tokens 3..4 in row 0, 0..2 in row 1
    plan = posembed.PackPlan([5], 4, "bfd", "pieces", [0, 1, 2], [0, 0], [3, 0], [2, 3], [0, 0])
    assert plan.unpack(values)[0].tolist() == [4.0, 5.0, 6.0, 0.0, 1.0]
    assert TwinPlan([5], 4, "bfd", "pieces", [0, 1, 2], [0, 0], [3, 0], [2, 3], [0, 0])
    with pytest.raises(ValueError, match="entries 0 and 1 both hold token 1 of document 0"):
        posembed.PackPlan([5], 4, "bfd", "pieces", [0, 1, 2], [0, 0], [1, 0], [3, 2], [0, 0])
    overlapping = [[5], 4, "bfd", "pieces", [0, 1, 2], [0, 0], [1, 0], [3, 2], [0, 0]]
    assert twin_error(dict(zip(PLAN_ARGS, overlapping, strict=True))) is ValueError
    # no entries: a plan of no rows, if no document has a token
    assert posembed.PackPlan([0, 0], 4, "ffd", "pieces", [0], [], [], [], []).rows == 0
    with pytest.raises(ValueError, match="documents: document 1 gets 0 tokens from its entries"):
        posembed.PackPlan([0, 3], 4, "ffd", "pieces", [0], [], [], [], [])


def test_a_plan_keeps_read_only_copies_of_its_own_and_changes_no_input():
    args = plan_args(SMALL)
    given = {k: v for k, v in args.items() if isinstance(v, np.ndarray)}
    kept = {k: v.copy() for k, v in given.items()}
    plan = posembed.PackPlan(**args)
    for name, array in given.items():
        assert array.flags.writeable, name  # the caller's arrays: as they were
        assert np.array_equal(array, kept[name]), name
        assert not np.shares_memory(array, getattr(plan, name)), name
        array[...] = 0  # and theirs to change: the plan keeps its own
    lengths = np.array([5, 9, 0, 12])
    made = posembed.pack(lengths, 8)
    assert lengths.flags.writeable
    for p in (plan, made):
        for name in PLAN_ARGS[:1] + PLAN_FIELDS:
            array = getattr(p, name)
            assert np.array_equal(array, getattr(SMALL, name)), name
            with pytest.raises(ValueError, match="read-only"):
                array[0] = 1
            # no base that could be set writeable again: no one can change
            # them while a kernel reads them without the GIL
            with pytest.raises(ValueError, match="cannot set WRITEABLE flag"):
                array.setflags(write=True)
    with pytest.raises(AttributeError):
        plan.lengths = plan.lengths  # type: ignore[misc]


# ---- posembed pack: the corpus on disk, shard by shard -----------------------------------


def saved_corpus(
    tmp_path: Path, lengths: Any, dtype: Any = np.uint16
) -> tuple[np.ndarray, np.ndarray]:
    tokens, offsets = corpus(lengths)
    tokens = tokens.astype(dtype)
    np.save(tmp_path / "t.npy", tokens)
    np.save(tmp_path / "o.npy", offsets)
    return tokens, offsets


def read_npy_output(folder: Path) -> dict[str, np.ndarray]:
    return {name: np.load(folder / f"{name}.npy") for name in NPY_ARRAYS}


def placed_tokens(
    out: dict[str, np.ndarray], tokens: np.ndarray, offsets: np.ndarray
) -> np.ndarray:
    """Each document's tokens as the output places them (asserting each piece is its own)."""
    flat, at = out["input_ids"].reshape(-1), 0
    seen = np.zeros(offsets.shape[0] - 1, np.int64)
    for n, d, s in zip(
        out["seq_lengths"].tolist(), out["documents"].tolist(), out["starts"].tolist(), strict=True
    ):
        if d >= 0:
            assert np.array_equal(flat[at : at + n], tokens[offsets[d] + s : offsets[d] + s + n])
            seen[d] += n
        at += n
    return seen


def test_the_command_writes_what_the_plan_of_the_whole_corpus_cuts(tmp_path, rng):
    lengths = rng.integers(0, 700, 300)
    tokens, offsets = saved_corpus(tmp_path, lengths)
    meta = pack_file(
        tmp_path / "t.npy", tmp_path / "out", size=512, offsets_path=tmp_path / "o.npy", quiet=True
    )
    plan = posembed.pack(lengths, 512)
    want = plan.cut(tokens, offsets, position_dtype=np.int32)
    got = read_npy_output(tmp_path / "out")
    for name in ("input_ids", "position_ids", "seq_lengths", "row_segments", "documents", "starts"):
        assert np.array_equal(got[name], getattr(want, name)), name
    assert got["position_ids"].dtype == np.int32
    assert got["input_ids"].dtype == np.uint16
    assert meta["rows"] == plan.rows
    assert meta["fill"] == plan.fill
    assert meta["split_documents"] == plan.split_documents
    assert json.loads((tmp_path / "out" / "meta.json").read_text()) == meta


@pytest.mark.parametrize("split", ["pieces", "truncate"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_shards_place_every_token_once_long_documents_included(tmp_path, rng, split, strategy):
    lengths = rng.integers(0, 900, 200)
    lengths[[3, 50, 51, 199]] = [5000, 3 * 256, 4321, 2600]  # longer than a shard of 2000
    tokens, offsets = saved_corpus(tmp_path, lengths)
    meta = pack_file(
        tmp_path / "t.npy",
        tmp_path / "out",
        size=256,
        strategy=strategy,
        split=split,
        shard_tokens=2000,
        offsets_path=tmp_path / "o.npy",
        quiet=True,
    )
    out = read_npy_output(tmp_path / "out")
    seen = placed_tokens(out, tokens, offsets)
    kept = lengths if split == "pieces" else np.minimum(lengths, 256)
    assert np.array_equal(seen, kept)
    assert meta["truncated_tokens"] == int(lengths.sum() - kept.sum())
    split_documents = int(np.count_nonzero(lengths > 256)) if split == "pieces" else 0
    if strategy != "wrapped":  # wrapping cuts documents wherever rows end
        assert meta["split_documents"] == split_documents
    assert out["input_ids"].shape == (meta["rows"], 256)
    assert meta["fill"] == pytest.approx(
        shard_fill(lengths, 256, 2000, strategy=strategy, split=split)
    )
    firsts = np.zeros(out["input_ids"].size, bool)
    firsts[np.concatenate([[0], np.cumsum(out["seq_lengths"])[:-1]])] = True
    assert np.array_equal(out["position_ids"].reshape(-1) == 0, firsts)


def test_parquet_output_loads_with_datasets_and_megatron_output_reads_back(tmp_path, rng):
    datasets = pytest.importorskip("datasets")
    lengths = rng.integers(1, 400, 100)
    tokens, offsets = saved_corpus(tmp_path, lengths)
    common = {"size": 256, "offsets_path": tmp_path / "o.npy", "quiet": True, "shard_tokens": 5000}
    pack_file(tmp_path / "t.npy", tmp_path / "npy", **common)
    pack_file(tmp_path / "t.npy", tmp_path / "pq", format="parquet", **common)
    pack_file(tmp_path / "t.npy", tmp_path / "mg", format="megatron", **common)
    out = read_npy_output(tmp_path / "npy")
    loaded = datasets.load_dataset(
        "parquet", data_files=str(tmp_path / "pq" / "packed.parquet"), split="train"
    )
    assert np.array_equal(np.array(loaded["input_ids"]), out["input_ids"])
    assert np.array_equal(np.array(loaded["position_ids"]), out["position_ids"])
    segments = out["row_segments"]
    for r in (0, len(loaded) - 1):
        assert (
            loaded[r]["seq_lengths"] == out["seq_lengths"][segments[r] : segments[r + 1]].tolist()
        )
    assert np.array_equal(placed_tokens(out, tokens, offsets), lengths)
    mg = posembed.IndexedCorpus(tmp_path / "mg")
    real = out["documents"] >= 0
    assert np.array_equal(mg.sequence_lengths, out["seq_lengths"][real])
    assert mg.offsets.shape[0] - 1 == out["input_ids"].shape[0]  # one document per row
    for r in (0, 7, len(loaded) - 1):
        seq = slice(segments[r], segments[r + 1])
        used = int(out["seq_lengths"][seq][real[seq]].sum())
        assert np.array_equal(mg[r], out["input_ids"][r, :used])


def test_an_indexed_dataset_is_packed_as_its_arrays_are(tmp_path, rng):
    lengths = rng.integers(1, 400, 80)
    tokens, offsets = saved_corpus(tmp_path, lengths)
    posembed.write_indexed(tmp_path / "ds", tokens, offsets)
    pack_file(tmp_path / "ds", tmp_path / "a", size=128, quiet=True)
    pack_file(
        tmp_path / "t.npy", tmp_path / "b", size=128, offsets_path=tmp_path / "o.npy", quiet=True
    )
    a, b = read_npy_output(tmp_path / "a"), read_npy_output(tmp_path / "b")
    for name in NPY_ARRAYS:
        assert np.array_equal(a[name], b[name]), name


@pytest.mark.parametrize("layout", ["parquet", "save_to_disk"])
def test_arrow_and_parquet_corpora_are_packed_as_token_files_are(tmp_path, rng, layout):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    lengths = rng.integers(0, 500, 150)
    tokens, offsets = saved_corpus(tmp_path, lengths, np.int32)
    column = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(tokens))
    table = pa.table({"input_ids": column})
    if layout == "parquet":
        pq.write_table(table, tmp_path / "c.parquet", row_group_size=20)
        src = tmp_path / "c.parquet"
    else:
        datasets = pytest.importorskip("datasets")
        datasets.Dataset(table).save_to_disk(str(tmp_path / "ds"))
        src = tmp_path / "ds"
    # one shard: the plan of the whole corpus, as from the token file
    whole = {"size": 256, "quiet": True, "shard_tokens": 10**9}
    pack_file(src, tmp_path / "a", **whole)
    pack_file(tmp_path / "t.npy", tmp_path / "b", offsets_path=tmp_path / "o.npy", **whole)
    a, b = read_npy_output(tmp_path / "a"), read_npy_output(tmp_path / "b")
    for name in NPY_ARRAYS:
        assert np.array_equal(a[name], b[name]), name
    # small shards: batches held together, every token still placed once
    meta = pack_file(src, tmp_path / "c", size=256, quiet=True, shard_tokens=3000)
    assert np.array_equal(placed_tokens(read_npy_output(tmp_path / "c"), tokens, offsets), lengths)
    assert meta["tokens"] == int(lengths.sum())
    assert meta["documents"] == 150
    column_meta = json.loads((tmp_path / "c" / "meta.json").read_text())
    assert column_meta["column"] == "input_ids"
    with pytest.raises(ChunkError, match=r"document \d+ has \d+ tokens, more than --size 8"):
        pack_file(src, tmp_path / "d", size=8, split="refuse", quiet=True)
    assert not (tmp_path / "d").exists()


def test_a_plan_cuts_an_arrow_column_as_its_arrays():
    pa = pytest.importorskip("pyarrow")
    lengths = [5, 0, 9, 3]
    tokens, offsets = corpus(lengths)
    column = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(tokens))
    plan = posembed.pack(lengths, 8)
    want = plan.cut(tokens, offsets)
    chunked = pa.chunked_array([column.slice(0, 2), column.slice(2, 2)])
    for arrow in (column, chunked):
        assert np.array_equal(plan.cut(arrow).input_ids, want.input_ids)
    with pytest.raises(ValueError, match="offsets must not be given with an Arrow list column"):
        plan.cut(column, offsets)


def test_force_replaces_only_its_own_output_and_errors_leave_nothing(tmp_path, rng):
    lengths = rng.integers(1, 400, 30)
    saved_corpus(tmp_path, lengths)
    args = {"size": 128, "offsets_path": tmp_path / "o.npy", "quiet": True}
    pack_file(tmp_path / "t.npy", tmp_path / "out", **args)
    with pytest.raises(ChunkError, match="exists; pass --force"):
        pack_file(tmp_path / "t.npy", tmp_path / "out", **args)
    pack_file(tmp_path / "t.npy", tmp_path / "out", force=True, **args)
    (tmp_path / "mine").mkdir()
    with pytest.raises(ChunkError, match="is a folder posembed did not write"):
        pack_file(tmp_path / "t.npy", tmp_path / "mine", force=True, **args)
    with pytest.raises(ChunkError, match="more than --size 8"):
        pack_file(tmp_path / "t.npy", tmp_path / "new", split="refuse", **{**args, "size": 8})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "o.npy", "out", "t.npy"]


def test_a_token_file_that_shrinks_while_packed_is_refused(tmp_path, rng, monkeypatch):
    lengths = rng.integers(1, 400, 200)
    saved_corpus(tmp_path, lengths)
    from posembed.corpus import _pack_output

    real = _pack_output.pack

    def shrink_then_plan(*args: Any, **kwargs: Any) -> Any:
        os.truncate(tmp_path / "t.npy", 1000)
        return real(*args, **kwargs)

    monkeypatch.setattr(_pack_output, "pack", shrink_then_plan)
    with pytest.raises(ChunkError, match=r"changed|shorter|truncated|shrank"):
        pack_file(
            tmp_path / "t.npy",
            tmp_path / "out",
            size=128,
            offsets_path=tmp_path / "o.npy",
            quiet=True,
            shard_tokens=3000,
        )
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.npy", "t.npy"]


PEAK_CHILD = textwrap.dedent(
    """
    import sys
    import numpy
    import posembed, posembed.corpus._pack_output
    from posembed.cli import main
    sys.exit(main(sys.argv[1:]) if len(sys.argv) > 1 else 0)
    """
)


@skip_if_sanitized
def test_memory_is_bounded_whatever_the_corpus_size(tmp_path):
    # 64 Mi uint16 tokens (128 MB) in documents of up to 8000 tokens and one
    # of 20 M: the run holds a shard, never the corpus
    rng = np.random.default_rng(9)
    lengths = rng.integers(1, 8000, 6000)
    lengths[100] = 20_000_000
    n = int(lengths.sum())
    (np.arange(n, dtype=np.uint16) % 50_000).tofile(tmp_path / "t.raw")
    np.save(tmp_path / "o.npy", np.concatenate([[0], np.cumsum(lengths)]))
    _, idle = run_peak_rss([sys.executable, "-c", PEAK_CHILD])
    args = ["pack", tmp_path / "t.raw", "--dtype", "uint16", "--offsets", tmp_path / "o.npy"]
    done, peak = run_peak_rss(
        [
            sys.executable,
            "-c",
            PEAK_CHILD,
            *map(str, args),
            "--size",
            "4096",
            "-o",
            str(tmp_path / "out"),
            "--quiet",
        ]
    )
    assert done.returncode == 0, done.stderr
    extra = (peak - idle) << 10
    assert extra < MEMORY_BYTES + (16 << 20), extra >> 20
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["tokens"] == n

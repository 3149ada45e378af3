"""gpt_samples and gpt_sample_index against their twin and against megatron-core itself.

The twin (posembed.reference.samples) restates Megatron's algorithm in NumPy;
the megatron tests run megatron-core's own code: ``helpers.build_sample_idx``
directly, and ``GPTDataset`` built over an indexed dataset written with its
``IndexedDatasetBuilder``, whose three index arrays and samples posembed must
equal element for element.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import posembed
from posembed import reference

from .conftest import megatron_or_skip


def same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_array_equal(a, b)


def same_samples(ours: Any, theirs: Any) -> None:
    same(ours.document_index, theirs.document_index)
    same(ours.sample_index, theirs.sample_index)
    same(ours.shuffle_index, theirs.shuffle_index)
    assert len(ours) == len(theirs)
    if hasattr(theirs, "num_epochs"):  # the twin's (GPTDataset keeps no count)
        assert ours.num_epochs == theirs.num_epochs


def corpus_of(lengths: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    tokens = np.random.default_rng(seed).integers(0, 50_000, int(lengths.sum()), dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return tokens, offsets


# -- against the twin, on generated inputs -------------------------------------------


@st.composite
def problems(draw: Any) -> dict[str, Any]:
    lengths = draw(st.lists(st.integers(0, 40), min_size=1, max_size=30))
    if sum(lengths) == 0:
        lengths[0] = 1
    count = draw(st.sampled_from(["samples", "epochs", "none"]))
    args: dict[str, Any] = {
        "seed": draw(st.integers(0, 2**32 - 1)),
        "add_extra_token_to_sequence": draw(st.booleans()),
        "drop_last_partial_sequence": draw(st.booleans()),
        "separate_final_epoch": draw(st.sampled_from([None, True, False])),
    }
    if count == "samples":
        args["num_samples"] = draw(st.integers(0, 60))
    elif count == "epochs":
        args["num_epochs"] = draw(st.integers(1, 4))
    if draw(st.booleans()):
        n = len(lengths)
        args["documents"] = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=2 * n))
    return {"lengths": np.array(lengths), "sequence_length": draw(st.integers(1, 50)), **args}


# The fixtures set thread counts and thresholds that every example keeps.
FIXTURES_KEPT = [HealthCheck.function_scoped_fixture]


@settings(max_examples=150, deadline=None, suppress_health_check=FIXTURES_KEPT)
@given(problem=problems(), threads=st.sampled_from([1, 2]))
def test_gpt_samples_equal_the_twin(problem: dict[str, Any], threads: int, restore_threads):
    lengths = problem["lengths"]
    docs = lengths if "documents" not in problem else lengths[problem["documents"]]
    if docs.sum() == 0:
        with pytest.raises(ValueError, match="hold no tokens"):
            posembed.gpt_samples(**problem)
        with pytest.raises(ValueError, match="hold no tokens"):
            reference.gpt_samples(**problem)
        return
    before = lengths.copy()
    posembed.set_num_threads(threads)
    ours = posembed.gpt_samples(**problem)
    same_samples(ours, reference.gpt_samples(**problem))
    same(lengths, before)
    tokens, offsets = corpus_of(lengths)
    twin = reference.GPTSamples(
        ours.document_index,
        ours.sample_index,
        ours.shuffle_index,
        ours.num_epochs,
        ours.sequence_length,
        ours.add_extra_token_to_sequence,
    )
    every = np.arange(len(ours))
    same(ours.samples(every, (tokens, offsets)), twin.samples(every, (tokens, offsets)))


@settings(max_examples=150, deadline=None, suppress_health_check=FIXTURES_KEPT)
@given(
    lengths=st.lists(st.integers(0, 60), min_size=1, max_size=40),
    data=st.data(),
    extra=st.booleans(),
    drop_last=st.booleans(),
)
def test_gpt_sample_index_equals_the_twin(lengths, data, extra, drop_last, tiny_thresholds):
    sizes = np.array(lengths, dtype=data.draw(st.sampled_from([np.int32, np.int64, np.uint16])))
    doc_index = np.array(
        data.draw(st.lists(st.integers(0, len(lengths) - 1), min_size=1, max_size=80)),
        dtype=data.draw(st.sampled_from([np.int32, np.int64, np.uint8])),
    )
    epochs = data.draw(st.integers(1, 3))
    per_epoch = data.draw(st.integers(1, 200))  # need not match: Megatron takes it as given
    args = {
        "drop_last_partial_sequence": drop_last,
        "add_extra_token_to_sequence": extra,
    }
    seq = data.draw(st.integers(1, 30))
    ours = posembed.gpt_sample_index(sizes, doc_index, seq, epochs, per_epoch, **args)
    same(ours, reference.gpt_sample_index(sizes, doc_index, seq, epochs, per_epoch, **args))


@pytest.mark.parametrize("threads", [1, 2])
def test_many_documents_across_chunks_equal_the_twin(
    threads: int, restore_threads, tiny_thresholds
):
    """Enough sequences for the kernel's two passes to take many chunks each."""
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 40, 200_000).astype(np.int32)
    lengths[rng.integers(0, lengths.size, 5000)] = 0
    posembed.set_num_threads(threads)
    for seq, extra, drop_last in ((1024, True, True), (97, False, False), (13, True, True)):
        args = {
            "num_samples": 3 * int(lengths.sum()) // seq // 2,  # 1.5 epochs: the final separate
            "add_extra_token_to_sequence": extra,
            "drop_last_partial_sequence": drop_last,
            "seed": 99,
        }
        ours = posembed.gpt_samples(lengths, seq, **args)
        same_samples(ours, reference.gpt_samples(lengths, seq, **args))
        assert ours.num_epochs == 2
        index = posembed.gpt_sample_index(
            lengths,
            ours.document_index,
            seq,
            2,
            int(lengths.sum()),
            drop_last_partial_sequence=drop_last,
            add_extra_token_to_sequence=extra,
        )
        same(index, ours.sample_index)


def test_the_result_does_not_depend_on_the_thread_count(restore_threads, tiny_thresholds):
    lengths = np.random.default_rng(3).integers(1, 100, 80_000)
    results = []
    for threads in (1, 2, 3):
        posembed.set_num_threads(threads)
        results.append(posembed.gpt_samples(lengths, 128, num_samples=70_000, seed=5))
    for other in results[1:]:
        same_samples(other, results[0])


def test_the_shuffles_draw_as_randomstate_does_past_2_32():
    """The kernels' shuffles draw NumPy's random_interval: 32-bit masked draws up
    to 2^32 - 1, 64-bit ones (first draw high) above, which only a shuffle of
    more than 2^32 elements reaches; RandomState.randint draws the same way."""
    from posembed._core import _probes

    for seed in (0, 7, 2**32 - 1):
        state = np.random.RandomState(seed)
        key, pos = state.get_state()[1:3]
        maxes = [2**40 - 1, 5, 2**33 + 7, 2**63 - 2, 1000, 2**32 - 1, 2**32, 1, 0] * 7
        got = _probes.legacy_intervals(key, pos, np.array(maxes, dtype=np.uint64))
        want = [state.randint(0, m + 1, dtype=np.uint64) if m else 0 for m in maxes]
        same(got, np.array(want, dtype=np.uint64))


# -- counts and dtypes -----------------------------------------------------------------


def test_epochs_come_from_num_samples_as_megatron_counts_them():
    lengths = np.full(10, 100)  # 1000 tokens an epoch
    assert posembed.gpt_samples(lengths, 10, num_samples=99).num_epochs == 1  # 991 tokens
    assert posembed.gpt_samples(lengths, 10, num_samples=100).num_epochs == 2  # 1001 > 1000
    extra_free = posembed.gpt_samples(
        lengths, 10, num_samples=100, add_extra_token_to_sequence=False
    )
    assert extra_free.num_epochs == 1
    one = posembed.gpt_samples(lengths, 10)
    assert one.num_epochs == 1
    assert len(one) == 99
    assert len(posembed.gpt_samples(lengths, 10, num_epochs=3)) == 299
    kept = posembed.gpt_samples(lengths, 10, drop_last_partial_sequence=False)
    assert len(kept) == 100  # ceil(999 / 10)


def test_the_final_epoch_is_separate_under_80_percent():
    lengths = np.full(10, 100)  # 99 samples an epoch; int(0.8 * 99) = 79
    for wanted, separate in ((99 + 78, True), (99 + 79, False), (99 + 99, False)):
        s = posembed.gpt_samples(lengths, 10, num_samples=wanted, seed=1)
        assert s.num_epochs == 2
        first = s.shuffle_index[: 199 if not separate else 99]
        # separate: the first 99 shuffled samples are the first epoch's (Megatron's split)
        assert (first.max() < 99) == separate
        same_samples(s, reference.gpt_samples(lengths, 10, num_samples=wanted, seed=1))


def test_the_kept_last_sample_is_counted_in_single_precision():
    """build_sample_idx counts a kept partial sample as ceil(float(tokens - 1) / L)
    in C++ floats: past 2^24 tokens that is not the exact ceiling."""
    lengths = np.array([2**24 + 1, 2**24 + 5], dtype=np.int64)  # float32(2^25 + 5) = 2^25 + 4
    tokens = int(lengths.sum())
    s = posembed.gpt_sample_index(
        lengths, np.array([0, 1]), 2, 1, tokens, drop_last_partial_sequence=False
    )
    single = int(np.ceil(np.float32(np.float32(tokens - 1) / np.float32(2))))
    assert single != -(-(tokens - 1) // 2)
    assert s.shape == (single + 1, 2)


def test_dtypes_widen_only_where_megatron_widens():
    small = posembed.gpt_samples(np.arange(1, 50), 8, seed=2)
    assert small.document_index.dtype == np.int32
    assert small.sample_index.dtype == np.int32
    assert small.shuffle_index.dtype == np.uint32
    long_sequence = np.array([5, 2**31, 7], dtype=np.int64)  # a length past int32
    wide = posembed.gpt_samples(long_sequence, 2**28, seed=2)
    assert wide.sample_index.dtype == np.int64
    assert wide.document_index.dtype == np.int32
    same_samples(wide, reference.gpt_samples(long_sequence, 2**28, seed=2))


def test_a_corpus_of_more_than_2_31_tokens_from_its_lengths_only():
    megatron_or_skip()
    from megatron.core.datasets import helpers

    lengths = np.array([2**30 + 17, 3, 2**30 - 5, 0, 2**30 + 1_000_001, 12], dtype=np.int32)
    tokens = int(lengths.sum())
    assert tokens > 2**31
    seq = 2**20 + 3
    for seed in (0, 1234):
        ours = posembed.gpt_samples(lengths, seq, num_samples=5000, seed=seed)
        same_samples(ours, reference.gpt_samples(lengths, seq, num_samples=5000, seed=seed))
        assert ours.num_epochs == 2
        theirs = helpers.build_sample_idx(
            lengths, ours.document_index, seq, ours.num_epochs, tokens, True, True
        )
        same(ours.sample_index, theirs)


def test_inputs_are_not_modified_and_results_are_fresh():
    lengths = np.array([5, 9, 0, 12], dtype=np.int32)
    docs = np.array([3, 1, 1, 0])
    before = lengths.copy(), docs.copy()
    s = posembed.gpt_samples(lengths, 4, num_samples=10, documents=docs)
    same(lengths, before[0])
    same(docs, before[1])
    assert not np.shares_memory(s.document_index, docs)


# -- reading samples -------------------------------------------------------------------


class Reader:
    """A corpus as an indexed-dataset reader gives it: .offsets and .read(start, stop)."""

    def __init__(self, tokens: np.ndarray, offsets: np.ndarray) -> None:
        self.tokens = tokens
        self.offsets = offsets
        self.reads: list[tuple[int, int]] = []

    def read(self, start: int, stop: int) -> np.ndarray:
        self.reads.append((start, stop))
        return self.tokens[start:stop]


def test_samples_read_across_sequences_in_shuffled_order():
    lengths = np.array([3, 0, 5, 2, 7])
    tokens = np.arange(100, 117, dtype=np.uint16)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    s = posembed.gpt_samples(lengths, 4, num_samples=3, seed=8)
    reader = Reader(tokens, offsets)
    rows = s.samples(range(len(s)), reader)
    assert rows.dtype == np.int64
    assert rows.shape == (len(s), 5)
    stream = np.concatenate([tokens[offsets[d] : offsets[d + 1]] for d in s.document_index])
    for i in range(len(s)):
        k = int(s.shuffle_index[i])
        expected = stream[4 * k : 4 * k + 5]  # sample k: tokens 4k .. 4k + 4 of the stream
        same(s.sample(i, (tokens, offsets)), expected.astype(np.int64))
        same(s.sample(i, reader), expected.astype(np.int64))
        same(rows[i], expected.astype(np.int64))
    assert all(0 <= a <= b <= tokens.size for a, b in reader.reads)


def test_the_kept_last_sample_is_padded():
    lengths = np.array([4, 4])
    tokens, offsets = corpus_of(lengths)
    s = posembed.gpt_samples(lengths, 3, drop_last_partial_sequence=False, seed=0)
    assert len(s) == 3  # ceil((8 - 1) / 3): the last reads tokens 6..9 of 8
    same(s.sample_index[-1], np.array([1, 3], np.int32))  # Megatron's end: 1 token before it
    last = int(np.flatnonzero(s.shuffle_index == 2)[0])
    row = s.sample(last, (tokens, offsets), pad_value=-7)
    same(row[2:], np.array([-7, -7]))
    twin = reference.GPTSamples(*(getattr(s, f) for f in s.__dataclass_fields__))
    same(row, twin.sample(last, (tokens, offsets), pad_value=-7))


def test_a_corpus_that_is_not_the_lengths_one_is_refused():
    lengths = np.array([6, 6, 6])
    s = posembed.gpt_samples(lengths, 4, seed=0)
    tokens, offsets = corpus_of(np.array([6, 2, 6]))
    with pytest.raises(ValueError, match="corpus: sequence 1 holds 2 tokens"):
        s.samples(range(len(s)), (tokens, offsets))
    with pytest.raises(ValueError, match=r"corpus: it holds 2 sequences \(3 offsets\)"):
        s.samples(range(len(s)), corpus_of(np.array([6, 6])))


def twin_of(s: Any) -> Any:
    return reference.GPTSamples(*(getattr(s, f.name) for f in dataclasses.fields(s)))


def snapshot(*arrays: np.ndarray) -> list[bytes]:
    return [a.tobytes() for a in arrays]


def first_disagreeing(s: Any, i: int, corpus_lengths: np.ndarray) -> int:
    """The first sequence sample ``i`` reads whose length in the corpus is not the built one."""
    k = int(s.shuffle_index[i])
    first, last = int(s.sample_index[k, 0]), int(s.sample_index[k + 1, 0])
    for sequence in s.document_index[first : last + 1].tolist():
        if corpus_lengths[sequence] != s.lengths[sequence]:
            return int(sequence)
    raise AssertionError("the sample reads no sequence whose length differs")


# The twin's messages (its own words; the types are posembed's)
TWIN_LENGTHS = "corpus sequence lengths are not the ones these samples built"
TWIN_COUNT = "corpus must hold the sequences whose lengths built these samples"
TWIN_FILL = "corpus sequences (do not fill the sample|are shorter than these samples read)"
TWIN_IDS = "corpus token ids must fit int64"

# Corpora of 10 sequences, 2 tokens each when built: each sequence shorter, each
# longer, and the same 20 tokens in sequences of other lengths.
OTHER_LENGTHS = {
    "shorter": np.full(10, 1),
    "longer": np.full(10, 3),
    "same total": np.array([1, 3, 2, 2, 3, 1, 2, 2, 1, 3]),
}


@pytest.mark.parametrize("name", list(OTHER_LENGTHS))
def test_sequences_of_other_lengths_are_refused_naming_the_sequence(name: str):
    """Once padded silently (shorter) or NumPy's "could not broadcast" (longer):
    the ValueError names the sequence, its length and the built one, in
    sample() and samples(), and in the twin."""
    s = posembed.gpt_samples(np.full(10, 2), 4)
    other = OTHER_LENGTHS[name]
    tokens, offsets = corpus_of(other)
    before = snapshot(tokens, offsets, s.document_index, s.sample_index, s.shuffle_index)
    for i in range(len(s)):
        sequence = first_disagreeing(s, i, other)
        text = (
            rf"corpus: sequence {sequence} holds {other[sequence]} tokens, but these samples were "
            rf"built from lengths where it holds 2: read them only from the corpus whose lengths "
            r"built them"
        )
        with pytest.raises(ValueError, match=text):
            s.sample(i, (tokens, offsets))
        with pytest.raises(ValueError, match=text):
            s.samples([i], Reader(tokens, offsets))
        with pytest.raises(ValueError, match=TWIN_LENGTHS):
            twin_of(s).sample(i, (tokens, offsets))
    with pytest.raises(ValueError, match=r"corpus: sequence \d holds [13] tokens"):
        s.samples(np.arange(len(s)), (tokens, offsets))
    with pytest.raises(ValueError, match=TWIN_LENGTHS):
        twin_of(s).samples(np.arange(len(s)), (tokens, offsets))
    assert snapshot(tokens, offsets, s.document_index, s.sample_index, s.shuffle_index) == before
    # the corpus of the built lengths reads as before, as the twin reads it
    right = corpus_of(np.full(10, 2))
    every = np.arange(len(s))
    same(s.samples(every, right), twin_of(s).samples(every, right))
    same(s.sample(1, right), twin_of(s).sample(1, right))


def test_a_corpus_of_another_number_of_sequences_is_refused_up_front():
    s = posembed.gpt_samples(np.full(10, 2), 4)
    for count in (9, 11):
        tokens, offsets = corpus_of(np.full(count, 2))
        before = snapshot(tokens, offsets)
        text = (
            rf"corpus: it holds {count} sequences \({count + 1} offsets\), but these samples "
            r"were built from the lengths of 10: read them only from the corpus whose lengths "
            r"built them \(an IndexedCorpus opened with the unit the lengths counted"
        )
        with pytest.raises(ValueError, match=text):
            s.sample(0, (tokens, offsets))
        with pytest.raises(ValueError, match=text):
            s.samples([], (tokens, offsets))
        with pytest.raises(ValueError, match=TWIN_COUNT):
            twin_of(s).sample(0, (tokens, offsets))
        with pytest.raises(ValueError, match=TWIN_COUNT):
            twin_of(s).samples([], (tokens, offsets))
        assert snapshot(tokens, offsets) == before


def write_documents_of_two_sequences(prefix: Path, lengths: np.ndarray) -> np.ndarray:
    """An indexed dataset of len(lengths) sequences, two to a document; its tokens."""
    tokens = np.random.default_rng(5).integers(0, 50_000, int(lengths.sum())).astype(np.int32)
    from posembed.io._indexed_write import IndexedWriter

    with IndexedWriter(f"{prefix}.bin", f"{prefix}.idx", np.int32) as writer:
        writer.write(tokens, lengths, np.arange(2, len(lengths) + 1, 2))
        writer.finish()
    return tokens


def test_an_indexed_corpus_of_documents_is_refused_for_samples_of_its_sequences(tmp_path: Path):
    """Samples built from sequence_lengths read an IndexedCorpus opened with
    documents="sequences"; the default, "documents", once gave NumPy's "could
    not broadcast"."""
    lengths = np.array([7, 3, 0, 9, 4, 6, 5, 8], dtype=np.int32)
    tokens = write_documents_of_two_sequences(tmp_path / "ds", lengths)
    by_document = posembed.IndexedCorpus(tmp_path / "ds")
    by_sequence = posembed.IndexedCorpus(tmp_path / "ds", documents="sequences")
    same(by_sequence.sequence_lengths, lengths)
    s = posembed.gpt_samples(by_sequence.sequence_lengths, 5, seed=2)
    text = (
        r"corpus: it holds 4 sequences \(5 offsets\), but these samples were built from the "
        r"lengths of 8"
    )
    for i in range(len(s)):
        with pytest.raises(ValueError, match=text):
            s.sample(i, by_document)
        with pytest.raises(ValueError, match=TWIN_COUNT):
            twin_of(s).sample(i, by_document)
    with pytest.raises(ValueError, match=text):
        s.samples(np.arange(len(s)), by_document)
    every = np.arange(len(s))
    rows = s.samples(every, by_sequence)
    same(rows, twin_of(s).samples(every, by_sequence))
    same(rows, s.samples(every, (tokens, np.concatenate([[0], np.cumsum(lengths)]))))


def test_the_lengths_are_the_samples_own_read_only_copy():
    given = np.array([5, 9, 0, 12], dtype=np.int32)
    for lengths in (given, given.astype(np.uint16), list(given), given.astype(">i4")):
        s = posembed.gpt_samples(lengths, 4, seed=3)
        assert not s.lengths.flags.writeable
        same(s.lengths.astype(np.int64), given.astype(np.int64))
        if isinstance(lengths, np.ndarray):
            assert not np.shares_memory(s.lengths, lengths)
    kept = posembed.gpt_samples(given, 4, seed=3)
    corpus = corpus_of(given)
    first = kept.samples(np.arange(len(kept)), corpus)
    given[3] = 11  # the caller's array changes: the samples' lengths do not
    same(kept.lengths, np.array([5, 9, 0, 12], np.int32))
    same(kept.samples(np.arange(len(kept)), corpus), first)
    with pytest.raises(ValueError, match="read-only"):
        kept.lengths[0] = 1
    same(reference.gpt_samples(given, 4, seed=3).lengths, given.astype(np.int64))


def test_samples_built_by_hand_check_that_the_tokens_fill_each_sample():
    """Without lengths (the three arrays alone) a corpus is checked as read:
    the tokens must fill each sample exactly, or end the document index."""
    s = posembed.gpt_samples(np.full(10, 2), 4)
    bare = dataclasses.replace(s, lengths=None)
    twin = dataclasses.replace(twin_of(s), lengths=None)
    right = corpus_of(np.full(10, 2))
    every = np.arange(len(s))
    same(bare.samples(every, right), s.samples(every, right))
    same(twin.samples(every, right), s.samples(every, right))
    shorter = corpus_of(np.full(10, 1))
    text = r"corpus: sample \d reads 3 tokens, not 5, ending in sequence \d of 1 tokens"
    with pytest.raises(ValueError, match=text):
        bare.sample(0, shorter)
    with pytest.raises(ValueError, match=TWIN_FILL):
        twin.sample(0, shorter)
    longer = corpus_of(np.full(10, 3))
    text = r"corpus: sequence \d holds 3 tokens, and sample \d would read 6 tokens or more"
    with pytest.raises(ValueError, match=text):
        bare.sample(0, longer)
    with pytest.raises(ValueError, match=TWIN_FILL):
        twin.sample(0, longer)
    # the kept last sample is still padded: it ends the document index
    lengths = np.array([4, 4])
    kept = posembed.gpt_samples(lengths, 3, drop_last_partial_sequence=False, seed=0)
    last = int(np.flatnonzero(kept.shuffle_index == 2)[0])
    corpus = corpus_of(lengths)
    row = dataclasses.replace(kept, lengths=None).sample(last, corpus, pad_value=-7)
    same(row, kept.sample(last, corpus, pad_value=-7))
    same(row[2:], np.array([-7, -7]))


def test_uint64_token_ids_past_int64_are_refused_not_wrapped():
    """A uint64 id >= 2^63 once came back as -1, Megatron's pad value. Samples
    stay int64 (Megatron's dtype): such an id is refused, naming the sequence,
    the id and the range; ids up to 2^63 - 1 are read exactly."""
    lengths = np.full(10, 2)
    s = posembed.gpt_samples(lengths, 4)
    top = np.uint64(2**63 - 1)
    fits = top - np.arange(20, dtype=np.uint64)
    offsets = np.arange(0, 21, 2)
    every = np.arange(len(s))
    rows = s.samples(every, (fits, offsets))
    same(rows, twin_of(s).samples(every, (fits, offsets)))
    assert rows.dtype == np.int64
    assert rows.min() >= 2**63 - 20  # read exactly: none wrapped
    stream = np.concatenate([fits[offsets[d] : offsets[d + 1]] for d in s.document_index])
    k = int(s.shuffle_index[0])
    same(rows[0], stream[4 * k : 4 * k + 5].astype(np.int64))
    sequence = int(s.document_index[1])  # the stream's second sequence
    past = fits.copy()
    past[2 * sequence + 1] = np.uint64(2**63)  # its token 1
    before = past.tobytes()
    at = 3  # where the stream holds it
    readers = [i for i in range(len(s)) if 0 <= at - 4 * int(s.shuffle_index[i]) <= 4]
    assert readers
    for i in range(len(s)):
        if i not in readers:  # the other samples read as before
            same(s.sample(i, (past, offsets)), rows[i])
            continue
        with pytest.raises(
            ValueError,
            match=rf"corpus: sequence {sequence} holds token id 9223372036854775808 \(its "
            r"token 1\), which int64 cannot hold: samples are int64, as Megatron's, so token "
            r"ids must be in 0\.\.2\^63-1",
        ):
            s.sample(i, (past, offsets))
        with pytest.raises(ValueError, match=TWIN_IDS):
            twin_of(s).sample(i, (past, offsets))
    with pytest.raises(ValueError, match=r"token id 9223372036854775808"):
        s.samples(every, Reader(past, offsets))
    with pytest.raises(ValueError, match=TWIN_IDS):
        twin_of(s).samples(every, (past, offsets))
    assert past.tobytes() == before


def test_the_command_reads_an_indexed_dataset_in_a_store(tmp_path: Path):
    """posembed samples takes a URL (it was folded into a local path, "s3:/..."):
    the arrays equal those of the same files on disk."""
    fsspec = pytest.importorskip("fsspec")
    from posembed import cli

    posembed.write_indexed(tmp_path / "ds", np.arange(100) % 7, [0, 30, 30, 100])
    url = f"memory://posembed-tests-samples-{tmp_path.name}/ds"
    fs = fsspec.filesystem("memory")
    for suffix in (".idx", ".bin"):
        fs.pipe(url + suffix, (tmp_path / f"ds{suffix}").read_bytes())
    try:
        for given, out in ((str(tmp_path / "ds"), "local"), (url, "store")):
            argv = ["samples", given, "-o", str(tmp_path / out), "--sequence-length", "8"]
            assert cli.main([*argv, "--num-samples", "20"]) == 0
    finally:
        fs.rm(url.rsplit("/", 1)[0], recursive=True)
    for name in ("document_index", "sample_index", "shuffle_index"):
        store, local = (np.load(tmp_path / where / f"{name}.npy") for where in ("store", "local"))
        same(store, local)
    lengths = posembed.IndexedCorpus(tmp_path / "ds", documents="sequences").sequence_lengths
    s = posembed.gpt_samples(lengths, 8, num_samples=20)
    same(np.load(tmp_path / "store" / "sample_index.npy"), s.sample_index)


# -- against megatron-core itself -------------------------------------------------------


def megatron_modules() -> types.SimpleNamespace:
    megatron_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets import helpers
        from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
        from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder
        from megatron.core.datasets.utils import Split
    logging.getLogger("megatron").setLevel(logging.ERROR)
    return types.SimpleNamespace(
        helpers=helpers,
        GPTDataset=GPTDataset,
        GPTDatasetConfig=GPTDatasetConfig,
        IndexedDataset=IndexedDataset,
        IndexedDatasetBuilder=IndexedDatasetBuilder,
        Split=Split,
    )


def test_sample_index_equals_megatrons_build_sample_idx():
    m = megatron_modules()
    rng = np.random.default_rng(2026)
    cases = 0
    for _ in range(400):
        n = int(rng.integers(1, 60))
        sizes = rng.integers(0, int(rng.choice([3, 30, 300])), n).astype(np.int32)
        if sizes.sum() < 2:
            continue
        epochs = int(rng.integers(1, 5))
        seq = int(rng.integers(2, 64))
        extra = bool(rng.integers(0, 2))
        drop_last = bool(rng.integers(0, 2))
        doc_index = np.tile(np.arange(n, dtype=np.int32), epochs)
        np.random.RandomState(int(rng.integers(0, 2**32))).shuffle(doc_index)
        per_epoch = int(sizes.sum())
        if not drop_last and sizes[doc_index[-1]] < int(extra):
            continue  # Megatron's wrapper asserts on the offset -1 its C++ gives there
        theirs = m.helpers.build_sample_idx(
            sizes, doc_index, seq, epochs, per_epoch, drop_last, extra
        )
        ours = posembed.gpt_sample_index(
            sizes,
            doc_index,
            seq,
            epochs,
            per_epoch,
            drop_last_partial_sequence=drop_last,
            add_extra_token_to_sequence=extra,
        )
        same(ours, theirs)
        cases += 1
    assert cases > 300


def write_corpus(m: Any, folder: Path, lengths: np.ndarray, seed: int) -> tuple[Any, Any, str]:
    prefix = str(folder / "corpus")
    tokens, offsets = corpus_of(lengths, seed)
    builder = m.IndexedDatasetBuilder(prefix + ".bin", dtype=np.int32)
    for a, b in itertools.pairwise(offsets.tolist()):
        builder.add_document(tokens[a:b], [b - a])  # add_document takes any array
    builder.finalize(prefix + ".idx")
    return m.IndexedDataset(prefix), (tokens, offsets), prefix


def gpt_dataset(m: Any, dataset: Any, prefix: str, folder: Path, **kw: Any) -> Any:
    split = kw.pop("split", m.Split.train)
    documents = kw.pop("documents")
    num_samples = kw.pop("num_samples")
    tokenizer = types.SimpleNamespace(vocab_size=None, eod=0, unique_identifiers={"class": "t"})
    config = m.GPTDatasetConfig(
        tokenizer=tokenizer,
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
        path_to_cache=str(folder / "cache"),
        **kw,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return m.GPTDataset(dataset, prefix, documents, num_samples, split, config)


def test_the_indices_and_samples_equal_megatrons_gpt_dataset(tmp_path: Path):
    m = megatron_modules()
    rng = np.random.default_rng(11)
    epochs_seen = {True: 0, False: 0}  # multi-epoch cases with a separate final epoch or not
    for case in range(40):
        folder = tmp_path / str(case)
        folder.mkdir()
        n = int(rng.integers(2, 40))
        lengths = rng.integers(0, int(rng.choice([5, 40, 200])), n)
        lengths[0] += 2
        dataset, corpus, prefix = write_corpus(m, folder, lengths, case)
        first = int(rng.integers(0, n // 2 + 1))
        documents = np.arange(first, n, dtype=np.int32)  # a split: a range of sequences
        seq = int(rng.integers(2, 40))
        extra = bool(rng.integers(0, 2))
        seed = int(rng.integers(0, 2**32))
        tokens = int(lengths[documents].sum())
        per_epoch = max((tokens - int(extra)) // seq, 1)
        # up to 4 epochs, the last anywhere from nearly empty to full
        num_samples = int(rng.integers(0, 4 * per_epoch + 1))
        validation = case % 4 == 3
        kw: dict[str, Any] = {
            "random_seed": seed,
            "sequence_length": seq,
            "add_extra_token_to_sequence": extra,
        }
        theirs = gpt_dataset(
            m,
            dataset,
            prefix,
            folder,
            documents=documents,
            num_samples=num_samples,
            split=m.Split.valid if validation else m.Split.train,
            drop_last_partial_validation_sequence=not validation,
            **kw,
        )
        args = {
            "num_samples": num_samples,
            "seed": seed,
            "documents": documents,
            "add_extra_token_to_sequence": extra,
            "drop_last_partial_sequence": not validation,
        }
        ours = posembed.gpt_samples(dataset.sequence_lengths, seq, **args)
        same_samples(ours, theirs)
        same_samples(reference.gpt_samples(dataset.sequence_lengths, seq, **args), theirs)
        if ours.num_epochs > 1:
            # GPTDataset's own rule, restated: which of the two kinds this case was
            before_final = ((ours.num_epochs - 1) * tokens - int(extra)) // seq
            separate = num_samples - before_final < int(0.8 * per_epoch)
            epochs_seen[separate] += 1
        if ours.shuffle_index.size and ours.sample_index[-1, 1] < 0:
            continue  # a zero-length last sequence kept: Megatron reads offset -1
        every = np.arange(len(theirs))
        rows = ours.samples(every, corpus)
        for i in every:
            text, _ = theirs._query_document_sample_shuffle_indices(int(i))
            same(rows[i], text)
    assert min(epochs_seen.values()) >= 2, epochs_seen


@pytest.mark.parametrize("seed", [0, 1234, 2**32 - 1])
def test_the_separate_final_epoch_equals_megatrons(tmp_path: Path, seed: int):
    m = megatron_modules()
    lengths = np.random.default_rng(seed % 97).integers(1, 60, 50)
    dataset, _, prefix = write_corpus(m, tmp_path, lengths, 0)
    documents = np.arange(50, dtype=np.int32)
    seq = 16
    per_epoch = (int(lengths.sum()) - 1) // seq
    for wanted in (2 * per_epoch + 1, 2 * per_epoch + int(0.8 * per_epoch) - 1, 3 * per_epoch):
        kw = {"random_seed": seed, "sequence_length": seq}
        folder = tmp_path / f"{wanted}"
        folder.mkdir()
        theirs = gpt_dataset(
            m, dataset, prefix, folder, documents=documents, num_samples=wanted, **kw
        )
        ours = posembed.gpt_samples(lengths, seq, num_samples=wanted, seed=seed)
        same_samples(ours, theirs)


def test_arrays_rewritten_during_the_call_never_crash_it(restore_threads, tiny_thresholds):
    """Another thread rewrites the lengths and the document index while the
    kernel runs without the GIL: each value is read once and checked, so the
    call returns (what it read) or refuses a bad value, and never reads
    outside the arrays."""
    rng = np.random.default_rng(4)
    lengths = rng.integers(1, 50, 300_000).astype(np.int32)
    doc_index = rng.permutation(300_000).astype(np.int32)
    tokens = int(lengths.sum())
    stop = threading.Event()

    def scribble() -> None:
        bad = np.array([-5, 2**31 - 1, 0, 7], dtype=np.int32)
        while not stop.is_set():
            at = rng.integers(0, 300_000, 64)
            lengths[at] = bad[at % 4]
            doc_index[at] = np.where(at % 3 == 0, -1, at).astype(np.int32)

    writer = threading.Thread(target=scribble)
    writer.start()
    try:
        for threads in (1, 2):
            posembed.set_num_threads(threads)
            for _ in range(20):
                try:
                    index = posembed.gpt_sample_index(lengths, doc_index, 64, 1, tokens)
                except ValueError as exc:
                    assert "is not a sequence of lengths" in str(exc) or "negative" in str(exc)  # noqa: PT017 (either refusal may come first)
                else:
                    assert index.shape[1] == 2
    finally:
        stop.set()
        writer.join()

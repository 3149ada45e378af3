"""gpt_batch against its twin and against megatron-core's GPTDataset.__getitem__.

The megatron test builds ``GPTDataset`` over an indexed dataset that posembed
wrote, for every combination of reset_position_ids, reset_attention_mask and
eod_mask_loss, with and without the extra token, on a validation split that
keeps (and pads) its last partial sample; each row of posembed's batch must
equal ``GPTDataset[i]`` element for element. The document boundaries
(cu_seqlens) are checked against hand-written values on the cases that break
variable-length attention kernels.
"""

from __future__ import annotations

import itertools
import logging
import os
import subprocess
import sys
import textwrap
import threading
import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed
from posembed import _core, reference

from .conftest import SANITIZED, megatron_or_skip

EOD = 0
FIELDS = ("tokens", "labels", "loss_mask", "position_ids", "cu_seqlens", "cu_seqlens_padded")
SWITCHES = list(itertools.product([False, True], repeat=3))


def same_batch(ours: Any, theirs: Any) -> None:
    for name in FIELDS:
        a, b = getattr(ours, name), getattr(theirs, name)
        assert a.dtype == b.dtype, (name, a.dtype, b.dtype)
        assert a.shape == b.shape, (name, a.shape, b.shape)
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert ours.max_seqlen == theirs.max_seqlen
    if theirs.attention_mask is None:
        assert ours.attention_mask is None
    else:
        assert ours.attention_mask.dtype == np.bool_
        np.testing.assert_array_equal(ours.attention_mask, theirs.attention_mask)


def switches(rp: bool, ra: bool, em: bool) -> dict[str, bool]:
    return {"reset_position_ids": rp, "reset_attention_mask": ra, "eod_mask_loss": em}


def eod_corpus(seed: int, n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Documents of 1 to 11 tokens that end with EOD, some EODs inside (runs of them)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 12, n)
    tokens = rng.integers(1, 9, int(lengths.sum())).astype(np.int32)
    tokens[rng.random(tokens.shape[0]) < 0.15] = EOD
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens[offsets[1:] - 1] = EOD
    return tokens, offsets


# -- against megatron-core's GPTDataset --------------------------------------------------


def megatron() -> types.SimpleNamespace:
    megatron_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
        from megatron.core.datasets.indexed_dataset import IndexedDataset
        from megatron.core.datasets.utils import Split
    logging.getLogger("megatron").setLevel(logging.ERROR)
    return types.SimpleNamespace(
        GPTDataset=GPTDataset,
        GPTDatasetConfig=GPTDatasetConfig,
        IndexedDataset=IndexedDataset,
        Split=Split,
    )


@pytest.mark.parametrize("extra", [True, False])
def test_every_switch_equals_megatrons_getitem(tmp_path: Path, extra: bool):
    m = megatron()
    tokens, offsets = eod_corpus(5)
    prefix = str(tmp_path / "corpus")
    posembed.write_indexed(prefix, tokens, offsets, dtype=np.int32)
    dataset = m.IndexedDataset(prefix)
    indexed = posembed.IndexedCorpus(prefix, documents="sequences")
    reader = types.SimpleNamespace(offsets=indexed.offsets, read=indexed.read)  # a plain reader
    seq, wanted = 9, 50
    split = np.arange(len(dataset.sequence_lengths), dtype=np.int32)
    samples = posembed.gpt_samples(
        dataset.sequence_lengths,
        seq,
        num_samples=wanted,
        seed=3,
        documents=split,
        add_extra_token_to_sequence=extra,
        drop_last_partial_sequence=False,
    )
    every = np.arange(len(samples))
    padded = 0
    for rp, ra, em in SWITCHES:
        tokenizer = types.SimpleNamespace(vocab_size=None, eod=EOD, unique_identifiers={})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = m.GPTDatasetConfig(
                tokenizer=tokenizer,
                random_seed=3,
                sequence_length=seq,
                add_extra_token_to_sequence=extra,
                create_attention_mask=True,
                drop_last_partial_validation_sequence=False,
                path_to_cache=str(tmp_path / f"cache-{rp}-{ra}-{em}"),
                **switches(rp, ra, em),
            )
            theirs = m.GPTDataset(dataset, prefix, split, wanted, m.Split.valid, config)
        assert len(theirs) == len(samples)
        batch = samples.batch(every, indexed, eod=EOD, attention_mask=True, **switches(rp, ra, em))
        twin = reference.gpt_batch(
            samples, every, indexed, eod=EOD, attention_mask=True, **switches(rp, ra, em)
        )
        same_batch(batch, twin)
        for corpus in ((tokens, offsets), reader):
            same_batch(
                posembed.gpt_batch(
                    samples, every, corpus, eod=EOD, attention_mask=True, **switches(rp, ra, em)
                ),
                batch,
            )
        for i in every.tolist():
            row = theirs[i]
            for name in ("tokens", "labels", "loss_mask", "position_ids", "attention_mask"):
                got = getattr(batch, name)[i]
                want = row[name].numpy()
                assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
                np.testing.assert_array_equal(got, want, err_msg=f"{name} of sample {i}")
        # the kept last sample is padded: its pad tokens are 0 and carry no loss
        last = int(np.flatnonzero(samples.shuffle_index == len(samples) - 1)[0])
        text = samples.sample(last, (tokens, offsets))
        padded += int((text == -1).sum())
    assert padded > 0, "no case padded its last sample"
    # without the attention mask, nothing of it is built
    assert samples.batch(every[:3], indexed, eod=EOD).attention_mask is None


# -- document boundaries, by hand ---------------------------------------------------------

# One stream of 17 tokens (two samples of 8 and the extra token), as sequences:
# an EOD first, an empty sequence, runs of EODs, a document of one EOD, and an
# EOD as a sample's last token.
STREAM = [0, 3, 0, 0, 4, 5, 0, 6, 7, 1, 2, 0, 3, 0, 4, 0, 9]
SEQUENCES = [[0], [], [3, 0], [0], [4, 5, 0], [6, 7, 1, 2, 0], [3, 0], [], [4, 0], [9]]


def hand_made() -> tuple[posembed.GPTSamples, tuple[np.ndarray, np.ndarray]]:
    lengths = np.array([len(s) for s in SEQUENCES])
    tokens = np.array([t for s in SEQUENCES for t in s], dtype=np.uint16)
    assert tokens.tolist() == STREAM
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    documents = np.arange(len(SEQUENCES), dtype=np.int32)
    sample_index = posembed.gpt_sample_index(lengths, documents, 8, 1, len(STREAM))
    assert sample_index.shape == (3, 2)
    samples = posembed.GPTSamples(
        documents, sample_index, np.arange(2, dtype=np.uint32), 1, 8, True, lengths
    )
    return samples, (tokens, offsets)


def test_cu_seqlens_mark_documents_where_varlen_kernels_break():
    samples, corpus = hand_made()
    batch = posembed.gpt_batch(
        samples, [0, 1], corpus, eod=EOD, reset_position_ids=True, reset_attention_mask=True
    )
    # sample 0: 0 | 3 0 | 0 | 4 5 0 | 6   sample 1: 7 1 2 0 | 3 0 | 4 0 (EOD last: no empty piece)
    assert batch.cu_seqlens.tolist() == [0, 1, 3, 4, 7, 8, 12, 14, 16]
    assert batch.cu_seqlens.dtype == np.int32
    assert batch.cu_seqlens_padded.tolist() == [
        [0, 1, 3, 4, 7, 8, 8, 8, 8],
        [0, 4, 6, 8, 8, 8, 8, 8, 8],
    ]
    assert batch.max_seqlen == 4
    assert batch.position_ids.tolist() == [[0, 0, 1, 0, 0, 1, 2, 0], [0, 1, 2, 3, 0, 1, 0, 1]]
    assert batch.tokens.tolist() == [STREAM[0:8], STREAM[8:16]]
    assert batch.labels.tolist() == [STREAM[1:9], STREAM[9:17]]
    same_batch(
        batch,
        reference.gpt_batch(
            samples, [0, 1], corpus, eod=EOD, reset_position_ids=True, reset_attention_mask=True
        ),
    )
    # without reset_attention_mask, a sample is one document, as its causal mask is
    whole = posembed.gpt_batch(samples, [1, 0], corpus, eod=EOD, reset_position_ids=True)
    assert whole.cu_seqlens.tolist() == [0, 8, 16]
    assert whole.cu_seqlens_padded.tolist() == [[0] + [8] * 8] * 2
    assert whole.max_seqlen == 8
    assert whole.position_ids.tolist() == [[0, 1, 2, 3, 0, 1, 0, 1], [0, 0, 1, 0, 0, 1, 2, 0]]
    # no batch at all
    empty = posembed.gpt_batch(samples, [], corpus, eod=EOD, reset_attention_mask=True)
    assert empty.tokens.shape == (0, 8)
    assert empty.cu_seqlens.tolist() == [0]


def test_the_attention_mask_follows_the_documents():
    samples, corpus = hand_made()
    batch = posembed.gpt_batch(
        samples, [0], corpus, eod=EOD, reset_attention_mask=True, attention_mask=True
    )
    assert batch.attention_mask is not None
    assert batch.attention_mask.shape == (1, 1, 8, 8)
    allowed = ~batch.attention_mask[0, 0]  # True where a query may attend a key
    starts = np.repeat(batch.cu_seqlens[:-1], np.diff(batch.cu_seqlens))
    for q in range(8):
        assert np.flatnonzero(allowed[q]).tolist() == list(range(starts[q], q + 1))


def test_position_ids_feed_gather():
    samples, corpus = hand_made()
    batch = samples.batch([0, 1], corpus, eod=EOD, reset_position_ids=True)
    table = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
    np.testing.assert_array_equal(
        posembed.gather(table, batch.position_ids), table[batch.position_ids]
    )


@pytest.mark.usefixtures("restore_threads")
def test_results_are_the_same_for_any_thread_count(tmp_path: Path):
    tokens, offsets = eod_corpus(9, n=600)
    prefix = tmp_path / "c"
    posembed.write_indexed(prefix, tokens, offsets, dtype=np.uint16)
    indexed = posembed.IndexedCorpus(prefix, documents="sequences")
    samples = posembed.gpt_samples(indexed.sequence_lengths, 31, num_epochs=2, seed=1)
    every = np.arange(len(samples))
    results = []
    for threads in (1, 3, 8):
        posembed.set_num_threads(threads)
        for corpus in ((tokens, offsets), indexed):
            results.append(
                posembed.gpt_batch(
                    samples,
                    every,
                    corpus,
                    eod=EOD,
                    reset_attention_mask=True,
                    reset_position_ids=True,
                    eod_mask_loss=True,
                    attention_mask=True,
                )
            )
    for other in results[1:]:
        same_batch(other, results[0])
    same_batch(
        results[0],
        reference.gpt_batch(
            samples,
            every,
            indexed,
            eod=EOD,
            reset_attention_mask=True,
            reset_position_ids=True,
            eod_mask_loss=True,
            attention_mask=True,
        ),
    )


# -- bad inputs -----------------------------------------------------------------------------


def test_bad_inputs_are_refused_with_their_names(tmp_path: Path):
    samples, corpus = hand_made()
    with pytest.raises(IndexError, match=r"indices\[1\] = 2 is out of range for 2 samples"):
        posembed.gpt_batch(samples, [0, 2], corpus, eod=EOD)
    with pytest.raises(ValueError, match=r"eod = 70000 is not a token id of the corpus's uint16"):
        posembed.gpt_batch(samples, [0], corpus, eod=70_000)
    with pytest.raises(ValueError, match=r"eod must fit int64"):
        posembed.gpt_batch(samples, [0], (corpus[0].astype(np.int64), corpus[1]), eod=2**63)
    with pytest.raises(TypeError, match=r"eod must be an integer"):
        posembed.gpt_batch(samples, [0], corpus, eod=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"samples must be the GPTSamples"):
        posembed.gpt_batch(samples.document_index, [0], corpus, eod=EOD)  # type: ignore[arg-type]
    # a corpus whose sequences are not the ones that built the samples
    tokens, offsets = corpus
    longer = offsets.copy()
    longer[5:] += 1
    with pytest.raises(ValueError, match=r"corpus: sequence 4 holds 4 tokens, but these samples"):
        posembed.gpt_batch(samples, [0], (np.append(tokens, 1), longer), eod=EOD)
    with pytest.raises(ValueError, match=r"corpus: it holds 9 sequences"):
        posembed.gpt_batch(samples, [0], (tokens[:-1], offsets[:-1]), eod=EOD)


def test_a_bin_that_shrinks_is_an_error_not_a_crash(tmp_path: Path):
    _, (tokens, offsets) = hand_made()
    prefix = tmp_path / "c"
    posembed.write_indexed(prefix, tokens, offsets, dtype=np.uint16)
    indexed = posembed.IndexedCorpus(prefix, documents="sequences")
    samples = posembed.gpt_samples(indexed.sequence_lengths, 8, num_epochs=1, seed=0)
    whole = posembed.gpt_batch(samples, [0, 1], indexed, eod=EOD)
    same_batch(whole, posembed.gpt_batch(samples, [0, 1], indexed.to_arrays(), eod=EOD))
    with open(indexed.bin_path, "r+b") as f:
        f.truncate(10)
    with pytest.raises(ValueError, match=r"c\.bin: input changed while reading"):
        posembed.gpt_batch(samples, [0, 1], indexed, eod=EOD)


def test_a_bin_cut_short_during_the_reads_is_an_error_not_a_crash(tmp_path: Path):
    """The .bin shrinks after it was opened and checked: the kernel's copies
    out of its mapping (kept from the call before) meet pages that are gone
    (a SIGBUS, caught) and read them again with positional reads, which
    report the end."""
    rng = np.random.default_rng(3)
    lengths = rng.integers(100, 400, 400)
    tokens = rng.integers(1, 1000, int(lengths.sum())).astype(np.uint16)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens[offsets[1:] - 1] = EOD
    prefix = tmp_path / "c"
    posembed.write_indexed(prefix, tokens, offsets, dtype=np.uint16)
    corpus = posembed.IndexedCorpus(prefix)
    samples = posembed.gpt_samples(lengths, 128, num_epochs=1, seed=0)
    wanted = np.arange(len(samples))
    options = {"eod": EOD, **switches(True, True, True)}
    whole = posembed.gpt_batch(samples, wanted, corpus, **options)  # the mapping made, kept
    same_batch(whole, posembed.gpt_batch(samples, wanted, (tokens, offsets), **options))
    _core._probes.truncate_after_open(str(corpus.bin_path), 8192)  # after the open's checks
    faults = _core._probes.mapped_faults()
    with pytest.raises(ValueError, match=r"c\.bin: input changed while reading \(it ended at byte"):
        posembed.gpt_batch(samples, wanted, corpus, **options)
    assert _core._probes.mapped_faults() > faults  # the lost pages met in the mapping
    assert corpus.bin_path.stat().st_size == 8192
    with pytest.raises(ValueError, match=r"c\.bin: input changed while reading"):
        posembed.gpt_batch(samples, wanted[:1], corpus, **options)


# A bus error that is not a guarded copy's still ends the process as it would
# without posembed (its handler passes it on), here with faulthandler's report:
# faulthandler, enabled after posembed's handler, passes it to posembed's, and
# a posembed call after that must not install its handler again over
# faulthandler's (the two would pass the signal to each other without end).
FOREIGN_SIGBUS = textwrap.dedent(
    """
    import faulthandler, mmap, os, sys
    import numpy as np
    import posembed
    prefix = sys.argv[1]
    corpus = posembed.IndexedCorpus(prefix)
    samples = posembed.gpt_samples(corpus.sequence_lengths, 16, num_epochs=1, seed=0)
    posembed.gpt_batch(samples, [0, 1], corpus, eod=0)  # posembed's handler armed
    path = prefix + ".scratch"
    with open(path, "wb") as f:
        f.write(bytes(3 * mmap.PAGESIZE))
    faulthandler.enable()
    posembed.gpt_batch(samples, [1, 0], corpus, eod=0)
    with open(path, "r+b") as f:
        m = mmap.mmap(f.fileno(), 3 * mmap.PAGESIZE)
        os.truncate(path, 0)
        print("touching", flush=True)
        m[2 * mmap.PAGESIZE]  # a page past the end: SIGBUS, not posembed's
    print("survived", flush=True)
    """
)


@pytest.mark.skipif(
    SANITIZED,
    reason="AddressSanitizer handles every fatal signal itself (the handler passed on to) "
    "and reports it as a failure of the run",
)
def test_a_bus_error_of_someone_else_is_not_swallowed(tmp_path: Path):
    rng = np.random.default_rng(4)
    lengths = rng.integers(20, 60, 40)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    posembed.write_indexed(
        tmp_path / "c", rng.integers(1, 100, int(offsets[-1])), offsets, dtype=np.uint16
    )
    done = subprocess.run(
        [sys.executable, "-c", FOREIGN_SIGBUS, str(tmp_path / "c")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "touching" in done.stdout, done.stdout
    assert "survived" not in done.stdout
    assert done.returncode == -7, (done.returncode, done.stderr)  # SIGBUS
    assert "Bus error" in done.stderr


def test_indices_changed_meanwhile_cannot_reach_the_kernel():
    """The kernel reads a private copy of the indices: the caller's array is
    never read again once it was checked."""
    samples, corpus = hand_made()
    indices = np.array([1, 0])
    batch = posembed.gpt_batch(samples, indices, corpus, eod=EOD)
    assert batch.tokens.tolist() == [STREAM[8:16], STREAM[0:8]]
    assert indices.tolist() == [1, 0]  # not modified


def test_arrays_rewritten_during_the_call_give_an_error_or_a_batch_never_a_crash():
    """Another thread scribbles wild values over the samples' indices and the
    corpus offsets while batches are built without the GIL: each call
    returns or raises ValueError, and nothing is read out of bounds."""
    tokens, offsets = eod_corpus(3, n=400)
    samples = posembed.gpt_samples(np.diff(offsets), 64, num_epochs=2, seed=5)
    victims = [samples.document_index, samples.sample_index.reshape(-1), offsets]
    kept = [v.copy() for v in victims]
    stop = threading.Event()

    def scribble() -> None:
        rng = np.random.default_rng(0)
        wild = np.array([-(2**31), -1, 2**31 - 1, 10**6], dtype=np.int64)
        while not stop.is_set():
            for victim in victims:
                at = rng.integers(0, victim.shape[0], 8)
                victim[at] = wild[rng.integers(0, 4, 8)].astype(victim.dtype)
            for victim, original in zip(victims, kept, strict=True):
                victim[:] = original

    thread = threading.Thread(target=scribble)
    thread.start()
    outcomes = set()
    try:
        for _ in range(150):
            try:
                posembed.gpt_batch(
                    samples,
                    np.arange(len(samples)),
                    (tokens, offsets),
                    eod=EOD,
                    reset_attention_mask=True,
                )
                outcomes.add("batch")
            except ValueError:
                outcomes.add("error")
    finally:
        stop.set()
        thread.join()
    # a crash, an IndexError or any other exception fails the test before this
    assert outcomes <= {"batch", "error"}, outcomes
    assert outcomes, "no call returned"


# -- every token type, padding id and SIMD level -------------------------------------------

# The inputs of the probe below, built the same way in this process: token ids
# 0..8 in every integer type, samples that keep (and pad) their last partial
# sample, with and without the extra token, under every switch alone, all of
# them and none.
SETUP = """
import numpy as np
import posembed

def inputs():
    rng = np.random.default_rng(11)
    lengths = rng.integers(1, 40, 300)
    tokens = rng.integers(1, 9, int(lengths.sum()))
    tokens[rng.random(tokens.shape[0]) < 0.05] = 0
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens[offsets[1:] - 1] = 0
    cases = {}
    for extra in (True, False):
        samples = posembed.gpt_samples(
            lengths, 77, num_epochs=1, seed=2, add_extra_token_to_sequence=extra,
            drop_last_partial_sequence=False,
        )
        for dtype in ("i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8"):
            # -1: outside unsigned types; 3: a real token; 0: the end-of-document id
            for pad in (-1, 3, 0):
                for on in SWITCHED:
                    switches = {name: name in on for name in SWITCHED[0]}
                    cases[f"{extra}-{dtype}-{pad}-{'+'.join(on)}"] = (
                        samples, (tokens.astype(dtype), offsets), pad, switches
                    )
    return cases

SWITCHED = (
    ("reset_position_ids", "reset_attention_mask", "eod_mask_loss"),
    ("reset_position_ids",),
    ("reset_attention_mask",),
    ("eod_mask_loss",),
    (),
)
"""

PROBE = (
    SETUP
    + """
import sys
found = {"simd": np.array(posembed.config()["simd"])}
for name, (samples, corpus, pad, switches) in inputs().items():
    every = np.arange(len(samples))
    batch = posembed.gpt_batch(
        samples, every, corpus, eod=0, pad_value=pad, attention_mask=True, **switches
    )
    for field in ("tokens", "labels", "loss_mask", "position_ids", "cu_seqlens",
                  "cu_seqlens_padded", "attention_mask"):
        found[f"{name}/{field}"] = getattr(batch, field)
    found[f"{name}/max_seqlen"] = np.array(batch.max_seqlen)
np.savez(sys.argv[1], **found)
"""
)


def test_every_token_type_padding_id_and_simd_level_gives_the_twins_batch(tmp_path: Path):
    import subprocess
    import sys

    space: dict[str, Any] = {}
    exec(SETUP, space)
    cases = space["inputs"]()
    twins = {
        name: reference.gpt_batch(
            samples,
            np.arange(len(samples)),
            corpus,
            eod=0,
            pad_value=pad,
            attention_mask=True,
            **switches,
        )
        for name, (samples, corpus, pad, switches) in cases.items()
    }
    assert any((t.loss_mask[-1] == 0).sum() > 1 for t in twins.values())  # padding was met
    root = Path(__file__).resolve().parent.parent
    for level in posembed.config()["simd_levels"]:
        path = tmp_path / f"{level}.npz"
        done = subprocess.run(
            [sys.executable, "-c", PROBE, str(path)],
            env=dict(os.environ, POSEMBED_SIMD=level),
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        with np.load(path) as data:
            assert str(data["simd"]) == level
            for name, twin in twins.items():
                for field in (*FIELDS, "attention_mask"):
                    np.testing.assert_array_equal(
                        data[f"{name}/{field}"], getattr(twin, field), err_msg=f"{level} {name}"
                    )
                assert int(data[f"{name}/max_seqlen"]) == twin.max_seqlen


# -- a maker of many batches of the same samples ------------------------------------------


def test_a_batch_maker_gives_gpt_batchs_batches_call_after_call(tmp_path: Path):
    from posembed.kernels._gpt_batch import _BatchMaker

    tokens, offsets = eod_corpus(4, n=300)
    prefix = tmp_path / "c"
    posembed.write_indexed(prefix, tokens, offsets, dtype=np.uint16)
    indexed = posembed.IndexedCorpus(prefix, documents="sequences")
    reader = types.SimpleNamespace(offsets=indexed.offsets, read=indexed.read)
    samples = posembed.gpt_samples(indexed.sequence_lengths, 16, num_epochs=2, seed=4)
    options = {"eod": EOD, **switches(True, True, True)}
    rng = np.random.default_rng(0)
    for corpus in ((tokens, offsets), indexed, reader):
        maker = _BatchMaker(samples, corpus, **options)
        for _ in range(3):
            wanted = rng.integers(0, len(samples), 7)
            same_batch(maker(wanted), posembed.gpt_batch(samples, wanted, corpus, **options))
        with pytest.raises(IndexError, match=r"indices\[0\] = -1 is out of range"):
            maker([-1])
    with pytest.raises(ValueError, match=r"eod = 70000 is not a token id"):
        _BatchMaker(samples, indexed, eod=70_000)
    with open(indexed.bin_path, "r+b") as f:
        f.truncate(10)
    with pytest.raises(ValueError, match=r"c\.bin: input changed while reading"):
        _BatchMaker(samples, indexed, **options)(np.arange(len(samples)))


def test_batches_of_the_same_samples_and_bin_reuse_their_checks_but_keep_nothing_alive(
    tmp_path: Path,
):
    import gc
    import weakref

    tokens, offsets = eod_corpus(6, n=200)
    prefix = tmp_path / "c"
    posembed.write_indexed(prefix, tokens, offsets, dtype=np.uint16)
    indexed = posembed.IndexedCorpus(prefix, documents="sequences")
    samples = posembed.gpt_samples(indexed.sequence_lengths, 16, num_epochs=1, seed=6)
    options = {"eod": EOD, **switches(True, True, True)}
    for wanted in ([3, 1], [0, 2, 4], [3, 1]):
        same_batch(
            posembed.gpt_batch(samples, wanted, indexed, **options),
            reference.gpt_batch(samples, wanted, indexed, **options),
        )
    gone = [weakref.ref(samples), weakref.ref(indexed)]
    del samples, indexed
    gc.collect()
    assert [ref() for ref in gone] == [None, None]


def test_a_freed_batchs_memory_serves_the_next_batch_of_its_shape():
    """A loop that drops each batch before asking for the next gets the memory
    of the one it dropped, also after the kept blocks were all of another
    shape (the newest freed block is kept, the oldest let go)."""
    tokens, offsets = eod_corpus(9, n=400)
    samples = posembed.gpt_samples(np.diff(offsets), 16, num_epochs=1, seed=2)
    corpus = (tokens, offsets)
    kept = _core._probes.kept_output_blocks

    others = [posembed.gpt_batch(samples, np.arange(1), corpus, eod=EOD) for _ in range(12)]
    del others  # more freed blocks of one shape than are kept
    small = kept()[-1]
    assert kept() == [small] * 8
    first = posembed.gpt_batch(samples, np.arange(3), corpus, eod=EOD)
    want, where = np.array(first.tokens), first.tokens.__array_interface__["data"][0]
    del first
    assert kept()[-1] > small  # the newest kept, an old one let go
    assert len(kept()) <= 8
    second = posembed.gpt_batch(samples, np.arange(3), corpus, eod=EOD)
    assert second.tokens.__array_interface__["data"][0] == where
    assert np.array_equal(second.tokens, want)


def test_the_block_freed_last_serves_first():
    """Of several kept blocks of a batch's size, the next batch takes the one
    freed last (the likeliest still in cache): a loop that keeps k batches
    alive then writes k + 1 blocks in turn, not every kept block in turn."""
    tokens, offsets = eod_corpus(9, n=400)
    samples = posembed.gpt_samples(np.diff(offsets), 16, num_epochs=1, seed=2)
    corpus = (tokens, offsets)

    def made() -> posembed.GPTBatch:
        return posembed.gpt_batch(samples, np.arange(5), corpus, eod=EOD)

    def where(batch: posembed.GPTBatch) -> int:
        return int(batch.tokens.__array_interface__["data"][0])

    batches = [made() for _ in range(4)]
    blocks = [where(b) for b in batches]
    while batches:
        batches.pop(0)  # freed in the order made: blocks[-1] last
    again = [made() for _ in range(4)]
    assert [where(b) for b in again] == blocks[::-1]

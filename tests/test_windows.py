"""windows against its reference twin, HF's window formula and NumPy's sliding windows."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posembed
from posembed import reference

from .conftest import assert_same, ml_dtypes

TAILS = ["pad", "shift", "drop"]
TOKEN_DTYPES = [np.uint16, np.uint32, np.int32, np.int64, np.int8, np.uint64]


def assert_same_windows(fast, slow):
    for name in ("tokens", "starts", "lengths", "documents", "doc_offsets"):
        assert_same(getattr(fast, name), getattr(slow, name))
    assert (fast.size, fast.step, fast.tail) == (slow.size, slow.step, slow.tail)
    assert_same(fast.mask, slow.mask)


@pytest.mark.parametrize("dtype", TOKEN_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("tail", TAILS)
@pytest.mark.parametrize(("size", "step"), [(8, 1), (8, 8), (8, 3), (8, 7), (1, 1), (5, 2)])
@pytest.mark.parametrize("n", [0, 1, 4, 5, 8, 9, 23, 64])
def test_matches_reference(dtype, tail, size, step, n):
    tokens = (np.arange(n) * 7 % 100).astype(dtype)
    fast = posembed.windows(tokens, size, step=step, tail=tail, pad_value=99)
    assert_same_windows(fast, reference.windows(tokens, size, step=step, tail=tail, pad_value=99))


@pytest.mark.parametrize("tail", TAILS)
def test_corpus_of_many_documents(rng, tail):
    lengths = rng.integers(0, 40, 300)
    lengths[[0, 5, 6, -1]] = 0  # empty documents, also at both ends
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = rng.integers(0, 50_000, offsets[-1]).astype(np.uint32)
    fast = posembed.windows(tokens, 16, overlap=5, tail=tail, offsets=offsets)
    slow = reference.windows(tokens, 16, overlap=5, tail=tail, offsets=offsets)
    assert_same_windows(fast, slow)
    # no window crosses its document's end
    ends = fast.doc_offsets[fast.documents] + fast.starts + fast.lengths
    assert (ends <= fast.doc_offsets[fast.documents + 1]).all()


def test_pad_follows_the_hf_overflow_formula():
    # HF tokenizers' overflowing windows: starts k * step, stop once a window
    # reaches the end: 1 if N <= size else ceil((N - size) / step) + 1 windows;
    # none for N == 0 (see the empty-document test below).
    for n in range(0, 60):
        for size, step in ((10, 10), (10, 4), (10, 1), (7, 5)):
            w = posembed.windows(np.arange(n), size, step=step)
            count = 0 if n == 0 else 1 if n <= size else -(-(n - size) // step) + 1
            assert len(w) == count
            assert_same(w.starts, np.arange(count, dtype=np.int64) * step)
            for k in range(count):
                piece = np.arange(n)[k * step : k * step + size]
                assert_same(w.tokens[k, : len(piece)], piece)


def _hf_overflow_windows(ids, size, overlap, pad):
    """The windows HF tokenizers itself cuts (truncation with stride, the
    overflowing encodings), right-padded to size with pad."""
    from tokenizers import Tokenizer, models

    vocab = {f"t{k}": k for k in range(max(ids, default=0) + 1)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tok.enable_truncation(max_length=size, stride=overlap)
    tok.enable_padding(length=size, pad_id=pad, pad_token="t0")
    enc = tok.encode([f"t{k}" for k in ids], is_pretokenized=True)
    parts = [enc, *enc.overflowing]
    return (
        np.array([p.ids for p in parts]),
        np.array([p.attention_mask for p in parts], dtype=bool),
    )


def test_pad_equals_hf_tokenizers_overflowing_windows(rng):
    # The real package, not just its formula: same windows, same padding, and
    # the attention mask is Windows.mask.
    for n in (1, 9, 10, 11, 37, 64):
        ids = rng.integers(1, 50, n)
        for size, overlap in ((10, 0), (10, 6), (10, 9), (7, 2)):
            want_ids, want_mask = _hf_overflow_windows(ids.tolist(), size, overlap, pad=0)
            w = posembed.windows(ids, size, overlap=overlap, pad_value=0)
            assert_same(w.tokens, want_ids.astype(ids.dtype))
            assert_same(w.mask, want_mask)
            assert_same(w.starts, np.arange(len(w), dtype=np.int64) * (size - overlap))


def test_an_empty_document_has_no_window_where_tokenizers_give_one_of_padding(rng):
    # What the documentation says of both: HF tokenizers give an empty text one
    # window of padding alone (no token under its mask); posembed gives none,
    # in every mode, and its documents skip that index. Around the empty ones
    # the windows are tokenizers' own, each document's in turn.
    for size, overlap in ((10, 0), (10, 6), (7, 2)):
        want_ids, want_mask = _hf_overflow_windows([], size, overlap, pad=0)
        assert want_ids.shape == (1, size)
        assert not want_mask.any()
        for tail in TAILS:
            assert len(posembed.windows(np.array([], np.int64), size, tail=tail)) == 0
        lengths = [0, 9, 0, 0, 23, 1, 0]
        docs = [rng.integers(1, 50, n) for n in lengths]
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        w = posembed.windows(np.concatenate(docs), size, overlap=overlap, offsets=offsets)
        hf = [_hf_overflow_windows(d.tolist(), size, overlap, pad=0) for d in docs]
        kept = [k for k, n in enumerate(lengths) if n > 0]
        assert_same(w.tokens, np.concatenate([hf[k][0] for k in kept]).astype(np.int64))
        assert_same(w.mask, np.concatenate([hf[k][1] for k in kept]))
        assert_same(w.documents, np.repeat(kept, [len(hf[k][0]) for k in kept]))
        # tokenizers' own count per text is one more for each empty text
        assert sum(len(ids) for ids, _ in hf) == len(w) + lengths.count(0)


def test_drop_equals_numpy_sliding_window_view():
    tokens = np.arange(1000, dtype=np.uint32) * 3
    for size, step in ((64, 64), (64, 48), (64, 1), (100, 7)):
        w = posembed.windows(tokens, size, step=step, tail="drop")
        want = np.lib.stride_tricks.sliding_window_view(tokens, size)[::step]
        assert_same(w.tokens, np.ascontiguousarray(want))
        assert (w.lengths == size).all()


def test_shift_ends_full_at_the_end():
    tokens = np.arange(23, dtype=np.int64)
    w = posembed.windows(tokens, 8, step=5, tail="shift")
    assert w.starts[-1] == 23 - 8
    assert (w.lengths == 8).all()
    assert_same(w.tokens[-1], tokens[-8:])
    short = posembed.windows(tokens[:5], 8, tail="shift")  # N < size: one padded window
    assert_same(short.lengths, np.array([5], np.int64))


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 30), min_size=1, max_size=12),
    size=st.integers(1, 12),
    data=st.data(),
    tail=st.sampled_from(TAILS),
)
def test_hypothesis_coverage_and_boundaries(lengths, size, data, tail):
    step = data.draw(st.integers(1, size))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = np.arange(offsets[-1], dtype=np.int64)  # token value = its global index
    w = posembed.windows(tokens, size, step=step, tail=tail, offsets=offsets, pad_value=-1)
    assert_same_windows(
        w, reference.windows(tokens, size, step=step, tail=tail, offsets=offsets, pad_value=-1)
    )
    covered = np.zeros(len(tokens), bool)
    for k in range(len(w)):
        valid = w.tokens[k, : w.lengths[k]]
        doc = w.documents[k]
        assert (valid >= offsets[doc]).all()
        assert (valid < offsets[doc + 1]).all()  # never crosses a document
        assert (w.tokens[k, w.lengths[k] :] == -1).all()
        covered[valid] = True
    if tail != "drop":
        assert covered.all()  # every token is in some window


def test_thread_count_does_not_change_bytes(rng, restore_threads, tiny_thresholds):
    lengths = rng.integers(0, 500, 200)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = rng.integers(0, 2**16, offsets[-1]).astype(np.uint16)
    want = reference.windows(tokens, 64, step=48, offsets=offsets)
    for threads in (1, 2, 3):
        posembed.set_num_threads(threads)
        assert_same_windows(posembed.windows(tokens, 64, step=48, offsets=offsets), want)


def test_embedding_windows_use_max_seq_len():
    emb = posembed.LearnedPositionEmbedding(16, 4, seed=0)
    w = emb.windows(np.arange(40), overlap=4)
    assert w.size == 16
    assert w.step == 12


BAD = [
    ("float tokens", np.zeros(5), 4, {}, TypeError, "integers"),
    ("2-D tokens", np.zeros((2, 5), np.int64), 4, {}, ValueError, "1-D"),
    ("zero size", np.zeros(5, np.int64), 0, {}, ValueError, "size"),
    ("step too big", np.zeros(5, np.int64), 4, {"step": 5}, ValueError, r"1\.\.4"),
    ("step zero", np.zeros(5, np.int64), 4, {"step": 0}, ValueError, "step"),
    ("both", np.zeros(5, np.int64), 4, {"step": 2, "overlap": 2}, ValueError, "not both"),
    ("overlap too big", np.zeros(5, np.int64), 4, {"overlap": 4}, ValueError, r"0\.\.3"),
    ("bad tail", np.zeros(5, np.int64), 4, {"tail": "wrap"}, ValueError, "'pad', 'shift', 'drop'"),
    ("pad too big", np.zeros(5, np.uint16), 4, {"pad_value": 70000}, ValueError, "fit"),
    ("negative pad", np.zeros(5, np.uint32), 4, {"pad_value": -1}, ValueError, "fit"),
    ("offsets not from 0", np.zeros(5, np.int64), 4, {"offsets": [1, 5]}, ValueError, "start at 0"),
    ("offsets short", np.zeros(5, np.int64), 4, {"offsets": [0, 3]}, ValueError, "end at"),
    (
        "offsets decrease",
        np.zeros(5, np.int64),
        4,
        {"offsets": [0, 3, 2, 5]},
        ValueError,
        "decrease",
    ),
    ("float offsets", np.zeros(5, np.int64), 4, {"offsets": [0.0, 5.0]}, TypeError, "offsets"),
]


@pytest.mark.parametrize(
    ("tokens", "size", "kw", "exc", "text"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_input(tokens, size, kw, exc, text):
    with pytest.raises(exc, match=text):
        posembed.windows(tokens, size, **kw)
    with pytest.raises(exc):
        reference.windows(tokens, size, **kw)


@pytest.mark.parametrize("tail", TAILS)
def test_out_is_filled_and_returned(rng, tail, restore_threads, tiny_thresholds):
    offsets = np.array([0, 0, 1, 8, 9, 300, 300, 470])
    tokens = rng.integers(0, 60_000, 470, dtype=np.uint16)
    want = reference.windows(tokens, 8, step=3, tail=tail, offsets=offsets)
    for threads in (1, 2):
        posembed.set_num_threads(threads)
        out = np.full_like(want.tokens, 7)
        got = posembed.windows(tokens, 8, step=3, tail=tail, offsets=offsets, out=out)
        assert got.tokens is out
        assert_same_windows(got, want)
    twin_out = np.empty_like(want.tokens)
    assert reference.windows(
        tokens, 8, step=3, tail=tail, offsets=offsets, out=twin_out
    ).tokens is (twin_out)
    assert_same(twin_out, want.tokens)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int32, np.int64])
def test_a_large_out_is_written_with_streaming_stores_the_same(
    rng, dtype, restore_threads, tiny_thresholds
):
    # an out= past the (lowered) streaming threshold: rows of 300 elements,
    # so that windows start anywhere in a cache line and end part-way through
    # one, short windows padded after their tokens; the twin's bytes on any
    # thread count
    lengths = rng.integers(0, 900, 40)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = rng.integers(0, 120, offsets[-1]).astype(dtype)
    want = reference.windows(tokens, 300, step=113, tail="pad", offsets=offsets, pad_value=5)
    assert want.tokens.nbytes >= 4096
    for threads in (1, 2, 3):
        posembed.set_num_threads(threads)
        out = np.full_like(want.tokens, 7)
        got = posembed.windows(
            tokens, 300, step=113, tail="pad", offsets=offsets, pad_value=5, out=out
        )
        assert got.tokens is out
        assert_same_windows(got, want)


def test_bad_out_is_refused_and_left_untouched():
    tokens = np.arange(20, dtype=np.int32)  # 5 windows of 4
    good = np.zeros((5, 4), np.int32)
    cases = [
        ([1, 2], TypeError, "numpy.ndarray"),
        (np.zeros((5, 4), np.int64), TypeError, "dtype int32"),
        (np.zeros((6, 4), np.int32), ValueError, r"shape \(5, 4\)"),
        (np.zeros((5, 8), np.int32)[:, ::2], ValueError, "C-contiguous"),
        (np.zeros((5, 4), np.int32).view(), ValueError, "writeable"),
        (tokens.reshape(5, 4), ValueError, "overlap tokens"),
    ]
    cases[4][0].flags.writeable = False
    for out, exc, text in cases:
        before = np.array(out, copy=True)
        with pytest.raises(exc, match=text):
            posembed.windows(tokens, 4, out=out)
        with pytest.raises(exc):
            reference.windows(tokens, 4, out=out)
        assert_same(np.asarray(out), before)
    assert_same(tokens, np.arange(20, dtype=np.int32))
    assert posembed.windows(tokens, 4, out=good).tokens is good


@pytest.mark.parametrize("rule", ["first", "center"])
@pytest.mark.parametrize("tail", TAILS)
@pytest.mark.parametrize(("size", "step"), [(8, 1), (8, 3), (8, 8), (5, 4)])
def test_owner_matches_reference(rule, tail, size, step):
    offsets = np.array([0, 0, 1, 8, 9, 30, 30, 47])
    tokens = np.arange(47)
    fast = posembed.windows(tokens, size, step=step, tail=tail, offsets=offsets)
    slow = reference.windows(tokens, size, step=step, tail=tail, offsets=offsets)
    assert_same(fast.owner(rule), slow.owner(rule))


@settings(max_examples=150, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 40), min_size=1, max_size=8),
    size=st.integers(1, 10),
    data=st.data(),
    tail=st.sampled_from(TAILS),
    rule=st.sampled_from(["first", "center"]),
)
def test_owner_marks_every_covered_token_exactly_once(lengths, size, data, tail, rule):
    step = data.draw(st.integers(1, size))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = np.arange(offsets[-1], dtype=np.int64)
    w = posembed.windows(tokens, size, step=step, tail=tail, offsets=offsets, pad_value=-1)
    own = w.owner(rule)
    assert not (own & ~w.mask).any()  # only real tokens are owned
    owned = w.tokens[own]
    assert len(owned) == len(np.unique(owned))  # at most once
    covered = np.unique(w.tokens[w.mask])
    assert_same(np.sort(owned), covered)  # every covered token once
    assert_same(
        own,
        reference.windows(tokens, size, step=step, tail=tail, offsets=offsets, pad_value=-1).owner(
            rule
        ),
    )


def hand_built_windows(rng, module, docs=4, size=6):
    """A Windows built by hand that passes the checks but is unlike any layout
    windows() makes: repeated starts, short windows mid-document, ends that
    stand still, empty windows, uncovered stretches."""
    lengths = rng.integers(0, 25, docs)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    starts, lens, documents = [], [], []
    for doc, n in enumerate(lengths):
        k = int(rng.integers(0, 3 * n // size + 3))
        s = np.sort(rng.integers(0, n + 1, k))
        for i in range(1, k):
            if rng.random() < 0.3:
                s[i] = s[i - 1]  # a repeated start
        end = 0
        for start in s:
            end = max(min(int(start) + int(rng.integers(0, size + 1)), int(n)), end)
            starts.append(int(start))
            lens.append(end - int(start))
            documents.append(doc)
    starts_a = np.array(starts, np.int64)
    lens_a = np.array(lens, np.int64)
    tokens = np.zeros((len(starts), size), np.int64)
    for w, (s0, m, doc) in enumerate(zip(starts, lens, documents, strict=True)):
        tokens[w, :m] = offsets[doc] + s0 + np.arange(m)
    return module.Windows(
        tokens, starts_a, lens_a, np.array(documents, np.int64), offsets, size, 1, "pad"
    )


@pytest.mark.parametrize("seed", range(40))
def test_owner_and_stitch_on_hand_built_windows_match_reference(seed, restore_threads):
    rng = np.random.default_rng(seed)
    fast = hand_built_windows(rng, posembed)
    slow = reference.Windows(**{f.name: getattr(fast, f.name) for f in dataclasses.fields(fast)})
    values = rng.integers(-9, 9, (len(fast), fast.size, 2))
    for threads in (1, 2):
        posembed.set_num_threads(threads)
        for rule in ("first", "center"):
            own = fast.owner(rule)
            assert_same(own, slow.owner(rule))
            held = fast.tokens[own]  # each covered token once
            assert len(held) == len(np.unique(held))
        for reduce in REDUCES:
            want = reference.stitch(values, slow, reduce=reduce, fill=-100)
            assert_same(posembed.stitch(values, fast, reduce=reduce, fill=-100), want)


def test_owner_rules_on_a_worked_example():
    # size 6, step 2 over 10 tokens: windows start 0, 2, 4 (the last reaches the end).
    w = posembed.windows(np.arange(10), 6, step=2)
    first = w.owner("first")
    # HF perplexity: the first window scores 0..5, later ones only what is new
    assert_same(w.tokens[first], np.arange(10))
    assert first[0].all()
    assert_same(first[1], np.array([0, 0, 0, 0, 1, 1], bool))
    center = w.owner("center")
    # BERT: token 3 sits 3|2 in window 0, 1|4 in window 1 -> window 0 (min 2 > 1);
    # token 4 sits 4|1, 2|3, 0|5 -> window 1 (min 2)
    assert center[0, 3]
    assert center[1, 2]
    assert_same(np.sort(w.tokens[center]), np.arange(10))


def _perplexity_guide_scored(n, size, step):
    """The HF perplexity guide's strided loop: for each window, the slots
    whose labels are kept (the tokens no earlier window scored)."""
    scored, prev_end = [], 0
    for begin in range(0, n, step):
        end = min(begin + size, n)
        target = end - prev_end  # only the last `target` tokens keep their labels
        scored.append([end - begin - target <= j < end - begin for j in range(size)])
        prev_end = end
        if end == n:
            break
    return np.array(scored, bool)


def _bert_max_context(n, size, step):
    """BERT's SQuAD doc spans and its max-context rule: a token belongs to the
    span where min(left, right) context + 0.01 * span length is largest, the
    first such span on a tie."""
    spans, start = [], 0
    while start < n:
        length = min(n - start, size)
        spans.append((start, length))
        if start + length == n:
            break
        start += min(length, step)
    owner = np.zeros((len(spans), size), bool)
    for position in range(n):
        best, best_score = None, None
        for k, (begin, length) in enumerate(spans):
            if not begin <= position < begin + length:
                continue
            left, right = position - begin, begin + length - 1 - position
            score = min(left, right) + 0.01 * length
            if best_score is None or score > best_score:
                best, best_score = k, score
        assert best is not None
        owner[best, position - spans[best][0]] = True
    return owner


def test_owner_rules_are_the_perplexity_guide_and_berts_max_context():
    # What the chunking guide says: "first" scores each token as the HF
    # perplexity guide's strided loop does, "center" is BERT's max context.
    for n in range(1, 40):
        for size in (1, 2, 5, 8, 13):
            steps = {max(1, min(k, size)) for k in (1, 2, 3, size // 2, size - 1, size)}
            for step in sorted(steps):
                w = posembed.windows(np.arange(n), size, step=step)
                assert_same(w.owner("first"), _perplexity_guide_scored(n, size, step))
                assert_same(w.owner("center"), _bert_max_context(n, size, step))


def test_owner_rejects_unknown_rules():
    w = posembed.windows(np.arange(10), 4)
    with pytest.raises(ValueError, match="'first', 'center'"):
        w.owner("middle")


REDUCES = ["mean", "sum", "max", "first", "center"]
VALUE_DTYPES: list[Any] = [np.float32, np.float64, np.float16, np.int32, np.uint8, np.bool_]
if ml_dtypes is not None:  # the test extra installs it
    VALUE_DTYPES.append(ml_dtypes.bfloat16)


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("tail", TAILS)
@pytest.mark.parametrize("dtype", VALUE_DTYPES, ids=lambda d: np.dtype(d).name)
def test_stitch_matches_reference(rng, reduce, tail, dtype):
    offsets = np.array([0, 13, 13, 14, 40])
    w = posembed.windows(np.arange(40), 6, step=4, tail=tail, offsets=offsets)
    rw = reference.windows(np.arange(40), 6, step=4, tail=tail, offsets=offsets)
    values = (rng.standard_normal((len(w), 6, 2)) * 50).astype(dtype)
    got = posembed.stitch(values, w, reduce=reduce, fill=3)
    want = reference.stitch(values, rw, reduce=reduce, fill=3)
    assert got.shape == (40, 2)
    assert_same(got, want)


@pytest.mark.parametrize("dtype", TOKEN_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("tail", ["pad", "shift"])
@pytest.mark.parametrize("reduce", ["first", "center", "max"])
def test_stitch_round_trip_is_exact(rng, dtype, tail, reduce):
    info = np.iinfo(dtype)
    lengths = rng.integers(0, 30, 20)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = rng.integers(info.min, info.max, offsets[-1], endpoint=True, dtype=dtype)
    w = posembed.windows(tokens, 7, overlap=3, tail=tail, offsets=offsets)
    assert_same(posembed.stitch(w.tokens, w, reduce=reduce), tokens)


def test_stitch_mean_and_sum_of_ones_count_the_windows():
    w = posembed.windows(np.arange(10), 4, step=2)  # starts 0, 2, 4, 6
    ones = np.ones((len(w), 4))
    counts = posembed.stitch(ones, w, reduce="sum")
    assert_same(counts, np.array([1, 1, 2, 2, 2, 2, 2, 2, 1, 1], np.float64))
    assert_same(posembed.stitch(ones, w, reduce="mean"), np.ones(10))
    dropped = posembed.windows(np.arange(11), 4, step=3, tail="drop")  # starts 0, 3, 6
    filled = posembed.stitch(np.ones((len(dropped), 4)), dropped, reduce="sum", fill=-1)
    assert_same(filled, np.array([1, 1, 1, 2, 1, 1, 2, 1, 1, 1, -1], np.float64))


def test_stitch_thread_count_does_not_change_bytes(rng, restore_threads):
    from posembed import _core

    lengths = rng.integers(0, 300, 100)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    # Many documents, and one long one that the threads split between them.
    cases = [(offsets, "pad"), (None, "pad"), (None, "drop")]
    for offs, tail in cases:
        tokens = np.arange(offsets[-1] if offs is not None else 3001)
        w = posembed.windows(tokens, 32, step=20, offsets=offs, tail=tail)
        rw = reference.windows(tokens, 32, step=20, offsets=offs, tail=tail)
        values = rng.standard_normal((len(w), 32, 4)).astype(np.float32)
        want = {r: reference.stitch(values, rw, reduce=r, fill=7) for r in REDUCES}
        _core._probes.set_thresholds(1024, 4096)
        try:
            for threads in (1, 2, 3):
                posembed.set_num_threads(threads)
                for r in REDUCES:
                    assert_same(posembed.stitch(values, w, reduce=r, fill=7), want[r])
        finally:
            _core._probes.set_thresholds(-1, -1)


def test_stitch_shapes_its_result_from_the_checked_offsets(monkeypatch):
    # Another thread rewrites the caller's doc_offsets once the kernel has
    # copied them: the result still has the rows the kernel wrote.
    from posembed import _core

    w = posembed.windows(np.arange(10), 4, step=2)
    values = np.arange(len(w) * 4 * 3, dtype=np.float64).reshape(len(w), 4, 3)
    want = reference.stitch(values, reference.windows(np.arange(10), 4, step=2), reduce="max")
    real = _core.stitch

    def then_rewrite(*args: Any) -> Any:
        out = real(*args)
        w.doc_offsets[-1] = 2**31 - 1
        return out

    monkeypatch.setattr(_core, "stitch", then_rewrite)
    assert_same(posembed.stitch(values, w, reduce="max"), want)


def test_stitch_refuses_windows_out_of_order():
    w = posembed.windows(np.arange(10), 4, step=2)  # starts 0, 2, 4, 6
    values = np.ones((len(w), 4))
    swapped = dataclasses.replace(w, starts=w.starts[[0, 2, 1, 3]].copy())
    with pytest.raises(ValueError, match="do not describe"):
        posembed.stitch(values, swapped)
    shrunk = dataclasses.replace(w, lengths=np.array([4, 4, 1, 4]))  # an end moves back
    with pytest.raises(ValueError, match="do not describe"):
        posembed.stitch(values, shrunk)
    assert_same(posembed.stitch(values, w), np.ones(10))  # the real ones still work


def test_stitch_bad_input():
    w = posembed.windows(np.arange(10), 4)
    rw = reference.windows(np.arange(10), 4)
    cases = [
        ((np.zeros((2, 4)), w), {}, ValueError, "leading shape"),
        ((np.zeros((3, 5)), w), {}, ValueError, "leading shape"),
        ((np.zeros((3, 4)), w), {"reduce": "median"}, ValueError, "'mean', 'sum', 'max'"),
        ((np.zeros((3, 4)), "w"), {}, TypeError, "Windows"),
        ((np.full((3, 4), "a"), w), {}, TypeError, "numbers"),
    ]
    for (values, win), kw, exc, text in cases:
        with pytest.raises(exc, match=text):
            posembed.stitch(values, win, **kw)
        with pytest.raises(exc):
            reference.stitch(values, rw if win is w else win, **kw)


@pytest.mark.parametrize("dtype", [">i2", ">u4", ">i8"])
def test_non_native_tokens_give_native_windows(dtype):
    tokens = np.arange(50).astype(dtype)
    got = posembed.windows(tokens, 8, step=5)
    assert_same(got.tokens, reference.windows(tokens, 8, step=5).tokens)
    assert got.tokens.dtype == np.dtype(dtype).newbyteorder("=")
    assert_same(got.tokens, posembed.windows(tokens.astype(got.tokens.dtype), 8, step=5).tokens)
    out = np.empty_like(got.tokens)
    assert_same(posembed.windows(tokens, 8, step=5, out=out).tokens, got.tokens)
    with pytest.raises(TypeError, match="out must have dtype"):
        posembed.windows(tokens, 8, step=5, out=np.empty(got.tokens.shape, dtype))


def test_stitch_non_native_float64_computes_in_float64():
    w = posembed.windows(np.arange(30), 8, step=3)
    values = (np.random.default_rng(4).standard_normal((len(w), 8)) * 1e3).astype(">f8")
    got = posembed.stitch(values, w, reduce="mean")
    assert_same(got, reference.stitch(values, w, reduce="mean"))
    native = posembed.stitch(values.astype("<f8"), w, reduce="mean")
    assert np.array_equal(got, native)  # equal values: float64 arithmetic in both


@pytest.mark.parametrize("fill", ["abc", None, 2**70])
@pytest.mark.parametrize("module", [posembed, reference])
def test_stitch_unusable_fill_is_a_type_error(module, fill):
    w = module.windows(np.arange(10), 4, step=4, tail="drop")  # tokens 8, 9 uncovered
    with pytest.raises(TypeError, match="fill must be a number that fits"):
        module.stitch(np.zeros((len(w), 4), np.int32), w, reduce="sum", fill=fill)
    full = module.windows(np.arange(8), 4, step=4)  # every token covered: still refused
    with pytest.raises(TypeError, match="fill must be a number that fits"):
        module.stitch(np.zeros((len(full), 4), np.int32), full, reduce="sum", fill=fill)


@pytest.mark.parametrize("module", [posembed, reference])
@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_stitch_integer_sum_is_exact_or_refused(module, dtype, restore_threads):
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    w = module.windows(np.arange(300), 4, step=1)  # token p in windows p-3..p, slot p - window

    def put(values, token, column, addends):
        last = min(token, len(w) - 1)
        for k, a in enumerate(addends):
            values[last - k, token - last + k, column] = a

    values = np.zeros((len(w), 4, 2), dtype)
    put(values, 6, 1, [hi - 5, 5])  # exactly the largest value
    if dtype == np.int64:
        put(values, 3, 0, [hi, 1, -2])  # the partial sum wraps up, the whole fits
        put(values, 4, 1, [lo, -1, 3, 0])  # wraps down, then back
    want = {(6, 1): hi, (3, 0): hi - 1 if lo else 0, (4, 1): lo + 2 if lo else 0}
    got = module.stitch(values, w, reduce="sum")
    assert got.dtype == dtype
    assert {key: int(got[key]) for key in want} == want
    # A sum past the range is refused, naming the first such token whatever
    # the thread count (token 280 overflows too, in the other thread's part).
    over = values.copy()
    put(over, 7, 0, [hi, 1])
    put(over, 280, 1, [hi, hi])
    kept = over.copy()
    if module is posembed:
        from posembed import _core

        _core._probes.set_thresholds(64, -1)
        try:
            for n in (1, 2):
                posembed.set_num_threads(n)
                with pytest.raises(ValueError, match=rf"values: .*token 7 .*{info.dtype}"):
                    module.stitch(over, w, reduce="sum")
                assert _core._probes.last_team_size() == n
        finally:
            _core._probes.set_thresholds(-1, -1)
    else:
        with pytest.raises(ValueError, match=rf"values: .*token 7 .*{info.dtype}"):
            module.stitch(over, w, reduce="sum")
    assert_same(over, kept)  # input untouched
    if dtype == np.int64:
        under = values.copy()
        put(under, 5, 0, [lo, -1, 0, 0])
        with pytest.raises(ValueError, match="token 5 "):
            module.stitch(under, w, reduce="sum")
    # mean sums in float64; max never overflows
    assert module.stitch(over, w, reduce="mean").dtype == np.float64
    assert int(module.stitch(over, w, reduce="max")[280, 1]) == hi


def test_stitch_integer_overflow_matches_reference_on_generated_inputs(rng):
    info = np.iinfo(np.int64)
    w = posembed.windows(np.arange(60), 8, step=3)
    for _ in range(30):
        values = rng.choice([info.min, info.max, -1, 0, 1, 2**62], size=(len(w), 8, 3))
        values = values.astype(np.int64)
        try:
            want = reference.stitch(values, w, reduce="sum")
        except ValueError as exc:
            token = str(exc).split("token ")[1].split()[0]
            with pytest.raises(ValueError, match=f"token {token} "):
                posembed.stitch(values, w, reduce="sum")
        else:
            assert_same(posembed.stitch(values, w, reduce="sum"), want)


@pytest.mark.parametrize("module", [posembed, reference])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_stitch_max_counts_negative_zero_below_zero(module, dtype):
    w = module.windows(np.arange(3), 2, step=1)  # token 1 in both windows
    for a, b, want in [(-0.0, 0.0, 0.0), (0.0, -0.0, 0.0), (-0.0, -0.0, -0.0), (0.0, 0.0, 0.0)]:
        values = np.array([[5, a], [b, 5]], dtype)
        got = module.stitch(values, w, reduce="max")[1]
        assert got == 0
        assert bool(np.signbit(got)) == bool(np.signbit(want)), (a, b, got)


class _CorpusOfArrays:
    """A corpus by the two names windows() takes from one: offsets and read."""

    def __init__(self, tokens: np.ndarray, offsets: np.ndarray) -> None:
        self.tokens, self.offsets = tokens, offsets
        self.reads: list[tuple[int, int]] = []

    def read(self, start: int, stop: int) -> np.ndarray:
        self.reads.append((start, stop))
        return self.tokens[start:stop].copy()


def test_windows_takes_any_corpus_with_offsets_and_read():
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, 50_000, 1_000).astype(np.uint16)
    offsets = np.array([0, 10, 10, 333, 999, 1_000], np.int64)
    corpus = _CorpusOfArrays(tokens, offsets)
    got = posembed.windows(corpus, 64, step=48, tail="shift")
    want = posembed.windows(tokens, 64, step=48, tail="shift", offsets=offsets)
    twin = reference.windows(tokens, 64, step=48, tail="shift", offsets=offsets)
    for name in ("tokens", "starts", "lengths", "documents", "doc_offsets"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
        np.testing.assert_array_equal(getattr(got, name), getattr(twin, name))
    assert corpus.reads == [(0, 1_000)]
    np.testing.assert_array_equal(corpus.offsets, [0, 10, 10, 333, 999, 1_000])
    with pytest.raises(ValueError, match="offsets must not be given with an IndexedCorpus"):
        posembed.windows(corpus, 64, offsets=offsets)
    for bad in ([0, 10.5, 1_000], [0, 500, 400]):  # a float is refused, never truncated
        with pytest.raises((TypeError, ValueError), match="offsets"):
            posembed.windows(_CorpusOfArrays(tokens, np.array(bad)), 64)

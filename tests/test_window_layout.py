"""window_layout (where windows lie, before any token is cut) and WindowLayout.cut,
against windows(), its twin and the owner slots stitch takes."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np
import pytest

import posembed
from posembed import reference

from .conftest import assert_same

TAILS = ["pad", "shift", "drop"]
LAYOUT = ("starts", "lengths", "documents")


def generated_case(rng: np.random.Generator) -> dict[str, Any]:
    """A corpus (empty documents, also at both ends, short and long ones) and
    window parameters: size 1, step 1, step == size and others."""
    docs = int(rng.integers(1, 12))
    lengths = rng.integers(0, 40, docs)
    lengths[rng.random(docs) < 0.25] = 0
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    size = int(rng.choice([1, 2, 5, 8, 16]))
    step = int(rng.choice([1, size, int(rng.integers(1, size + 1))]))
    return {"offsets": offsets, "size": size, "step": step}


@pytest.mark.parametrize("tail", TAILS)
@pytest.mark.parametrize("seed", range(40))
def test_layout_is_the_layout_windows_and_the_twin_cut(seed, tail):
    rng = np.random.default_rng(seed)
    case = generated_case(rng)
    offsets, size, step = case["offsets"], case["size"], case["step"]
    tokens = rng.integers(0, 60_000, offsets[-1]).astype(np.uint16)
    layout = posembed.window_layout(offsets, size, step=step, tail=tail)
    fast = posembed.windows(tokens, size, step=step, tail=tail, offsets=offsets, pad_value=7)
    slow = reference.windows(tokens, size, step=step, tail=tail, offsets=offsets, pad_value=7)
    assert len(layout) == len(fast) == len(slow)
    for name in LAYOUT:
        assert_same(getattr(layout, name), getattr(fast, name))
        assert_same(getattr(layout, name), getattr(slow, name))
    assert_same(layout.doc_offsets, fast.doc_offsets)
    assert (layout.size, layout.step, layout.tail) == (size, step, tail)
    # document k's windows are rows window_offsets[k] .. window_offsets[k + 1] - 1
    ndocs = offsets.size - 1
    first = np.searchsorted(slow.documents, np.arange(ndocs + 1), side="left").astype(np.int64)
    assert_same(layout.window_offsets, first)
    # the same tokens as windows() cuts, into a fresh array or out=
    assert_same(layout.cut(tokens, pad_value=7), fast.tokens)
    buffer = np.full((len(layout), size), 1, np.uint16)
    assert layout.cut(tokens, pad_value=7, out=buffer) is buffer
    assert_same(buffer, slow.tokens)
    # overlap= is size - step, as for windows()
    shared = posembed.window_layout(offsets, size, overlap=size - step, tail=tail)
    for name in (*LAYOUT, "window_offsets"):
        assert_same(getattr(shared, name), getattr(layout, name))


@pytest.mark.parametrize("tail", TAILS)
@pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 100])
def test_a_token_count_is_one_stream(tail, count):
    layout = posembed.window_layout(count, 8, step=3, tail=tail)
    whole = posembed.window_layout(np.array([0, count]), 8, step=3, tail=tail)
    stream = reference.windows(np.arange(count), 8, step=3, tail=tail)
    for name in LAYOUT:
        assert_same(getattr(layout, name), getattr(stream, name))
        assert_same(getattr(whole, name), getattr(stream, name))
    assert_same(layout.doc_offsets, np.array([0, count], np.int64))
    assert_same(layout.window_offsets, np.array([0, len(stream)], np.int64))
    assert_same(
        posembed.window_layout(np.uint64(count), 8, step=3, tail=tail).starts, stream.starts
    )


@pytest.mark.parametrize("seed", range(30))
def test_ranges_cut_from_slices_of_the_corpus_equal_the_whole(seed):
    """What a stream or a Dask block does: windows [a, b) cut from just the
    tokens they cover (or a little more), batch after batch."""
    rng = np.random.default_rng(100 + seed)
    case = generated_case(rng)
    offsets, size, step = case["offsets"], case["size"], case["step"]
    tail = str(rng.choice(TAILS))
    tokens = rng.integers(-(2**31), 2**31, offsets[-1]).astype(np.int32)
    layout = posembed.window_layout(offsets, size, step=step, tail=tail)
    whole = posembed.windows(tokens, size, step=step, tail=tail, offsets=offsets, pad_value=-1)
    n = len(layout)
    cuts = np.unique(np.concatenate([[0, n], rng.integers(0, n + 1, 4)]))
    firsts = offsets[layout.documents] + layout.starts  # each window's first corpus token
    for a, b in itertools.pairwise(cuts):
        lo = int(firsts[a])
        hi = int(firsts[b - 1] + layout.lengths[b - 1])
        spare = int(rng.integers(0, 3))  # tokens held past what the windows need
        lo, hi = max(0, lo - spare), min(tokens.size, hi + spare)
        part = tokens[lo:hi].copy()
        rows = layout.cut(part, windows=slice(a, b), token_start=lo, pad_value=-1)
        assert_same(rows, whole.tokens[a:b])
        assert_same(part, tokens[lo:hi])  # input untouched
    empty = layout.cut(tokens[:0], windows=slice(n, n), token_start=0)
    assert empty.shape == (0, size)
    assert empty.dtype == np.int32


def test_cut_refuses_tokens_that_miss_the_windows():
    tokens = np.arange(100, dtype=np.uint32)
    layout = posembed.window_layout(100, 10, step=5)  # window 4: tokens 20..29
    out = np.full((1, 10), 3, np.uint32)
    cases = [
        (tokens[21:40], 21, r"tokens 20\.\.29 that these windows cover; they hold 21\.\.39"),
        (tokens[20:29], 20, r"tokens 20\.\.29 .* they hold 20\.\.28 \(token_start=20, 9 tokens\)"),
        (tokens[:0], 20, r"they hold none"),
    ]
    for part, start, message in cases:
        with pytest.raises(ValueError, match=message):
            layout.cut(part, windows=slice(4, 5), token_start=start, out=out)
        assert (out == 3).all()
    assert_same(layout.cut(tokens[20:30], windows=slice(4, 5), token_start=20), tokens[None, 20:30])


@pytest.mark.parametrize(
    ("kw", "exc", "text"),
    [
        ({"windows": slice(0, 4, 2)}, ValueError, r"windows must be a slice with step 1"),
        ({"windows": [0, 1]}, TypeError, r"windows must be a slice of window indices"),
        ({"windows": slice("a", 2)}, TypeError, r"windows must be a slice of integers"),
        ({"token_start": -1}, ValueError, r"token_start must be an integer >= 0; got -1"),
        ({"token_start": 1.0}, TypeError, r"token_start must be an integer >= 0"),
        ({"token_start": 2**64}, ValueError, r"token_start is too large: 18446744073709551616"),
        ({"pad_value": 1.5}, TypeError, r"pad_value must be an integer; got 1\.5"),
        ({"pad_value": 70_000}, ValueError, r"pad_value 70000 does not fit uint16"),
        ({"out": np.zeros((3, 4), np.int64)}, TypeError, r"out must have dtype uint16"),
        ({"out": np.zeros((2, 4), np.uint16)}, ValueError, r"out"),
        ({"tokens": np.zeros(10)}, TypeError, r"tokens must be integers; got dtype float64"),
        ({"tokens": np.zeros((2, 5), int)}, ValueError, r"tokens must be 1-D; got shape \(2, 5\)"),
    ],
)
def test_cut_bad_input(kw, exc, text):
    layout = posembed.window_layout(10, 4, step=3)  # 3 windows
    args: dict[str, Any] = {"tokens": np.arange(10, dtype=np.uint16), **kw}
    with pytest.raises(exc, match=text):
        layout.cut(**args)


@pytest.mark.parametrize(
    ("corpus", "kw", "exc", "text"),
    [
        (10, {"size": 0}, ValueError, r"size must be a positive integer; got 0"),
        (10, {"size": 4.0}, TypeError, r"size must be a positive integer"),
        (10, {"size": 2**63}, ValueError, r"size is too large: 9223372036854775808 reaches 2\^62"),
        (10, {"size": 4, "step": 2**63}, ValueError, r"step must be in 1\.\.4"),
        (10, {"size": 4, "overlap": 2**64}, ValueError, r"overlap must be in 0\.\.3"),
        (10, {"size": 4, "step": 5}, ValueError, r"step must be in 1\.\.4"),
        (10, {"size": 4, "overlap": 4}, ValueError, r"overlap must be in 0\.\.3"),
        (10, {"size": 4, "step": 2, "overlap": 2}, ValueError, r"give step or overlap, not both"),
        (10, {"size": 4, "tail": "wrap"}, ValueError, r"tail"),
        (-1, {"size": 4}, ValueError, r"offsets_or_token_count must be an integer >= 0; got -1"),
        (True, {"size": 4}, TypeError, r"offsets_or_token_count must be an integer >= 0; got bool"),
        (2**63, {"size": 4}, ValueError, r"offsets_or_token_count must stay below 2\^63"),
        ([1, 5], {"size": 4}, ValueError, r"offsets must start at 0; got \[1\]\.\.\[5\]"),
        (np.array([], int), {"size": 4}, ValueError, r"offsets must start at 0; got \[\]\.\.\[\]"),
        ([0, 5, 3], {"size": 4}, ValueError, r"offsets must not decrease; offsets\[2\] = 3 < 5"),
        ([0.0, 5.0], {"size": 4}, TypeError, r"offsets must be a 1-D integer array; got float64"),
        (
            np.array([0, 2**63 + 1], np.uint64),
            {"size": 4},
            ValueError,
            r"offsets must stay below 2\^63",
        ),
        ("x", {"size": 4}, TypeError, r"offsets must be a 1-D integer array; got <U1"),
    ],
)
def test_window_layout_bad_input(corpus, kw, exc, text):
    with pytest.raises(exc, match=text):
        posembed.window_layout(corpus, **kw)


def test_a_layout_built_by_hand_is_checked_before_anything_is_written():
    tokens = np.arange(40, dtype=np.int64)
    layout = posembed.window_layout(np.array([0, 15, 40]), 8, step=6)
    out = np.full((len(layout), 8), -5, np.int64)

    def changed(name: str, at: int, by: int) -> posembed.WindowLayout:
        field = getattr(layout, name).copy()
        field[at] += by
        return dataclasses.replace(layout, **{name: field})

    bad_layouts = [
        changed("starts", 1, 5),  # past its document's end (15), inside the tokens
        changed("documents", 2, 5),  # no such document
        changed("lengths", 1, 1),  # longer than size
        changed("starts", 3, -1),  # a negative start
    ]
    for bad in bad_layouts:
        with pytest.raises(ValueError, match=r"layout: window \d+ \(document -?\d+, start"):
            bad.cut(tokens, out=out)
        assert (out == -5).all()
    with pytest.raises(TypeError, match=r"layout\.starts must be a 1-D integer array; got float64"):
        dataclasses.replace(layout, starts=layout.starts.astype(float)).cut(tokens)
    with pytest.raises(ValueError, match=r"one entry per window; got 4, 7 and 7"):
        dataclasses.replace(layout, starts=layout.starts[:4]).cut(tokens)
    with pytest.raises(ValueError, match=r"layout\.size must be a positive integer; got 0"):
        dataclasses.replace(layout, size=0).cut(tokens)


def test_streamed_ranges_check_the_window_offsets_they_are_given():
    """The streaming entry (posembed chunk's batches): windows [a, b) from
    window offsets counted once, checked on the documents the range touches."""
    from posembed.kernels import _windows

    offsets = np.array([0, 30, 30, 31, 100, 150], np.int64)
    whole = posembed.window_layout(offsets, 10, step=4, tail="shift")
    counted = whole.window_offsets
    for a, b in [(0, 0), (0, 3), (3, 9), (5, len(whole)), (0, len(whole))]:
        part = _windows._layout_part(offsets, 10, 4, "shift", counted, a, b)
        for name in LAYOUT:
            assert_same(getattr(part, name), getattr(whole, name)[a:b])
    wrong = counted.copy()
    wrong[2:] += 1  # one window too many in document 1
    with pytest.raises(ValueError, match="window offsets do not match the documents"):
        _windows._layout_part(offsets, 10, 4, "shift", wrong, 0, 9)
    for a, b in [(-1, 2), (3, 2), (0, len(whole) + 1)]:
        with pytest.raises(ValueError, match=r"windows \[begin, end\) out of range"):
            _windows._layout_part(offsets, 10, 4, "shift", counted, a, b)


def test_thread_count_does_not_change_the_layout(rng, restore_threads, tiny_thresholds):
    lengths = rng.integers(0, 3000, 200)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = rng.integers(0, 50_000, offsets[-1]).astype(np.uint32)
    results = []
    for threads in (1, 2, 3):
        posembed.set_num_threads(threads)
        layout = posembed.window_layout(offsets, 16, step=5, tail="shift")
        results.append((layout, layout.cut(tokens)))
    for layout, rows in results[1:]:
        for name in (*LAYOUT, "window_offsets"):
            assert_same(getattr(layout, name), getattr(results[0][0], name))
        assert_same(rows, results[0][1])


# ------------------------------------------------------------ stitch's owners


def stitched_before(values: np.ndarray, w: posembed.Windows, rule: str, fill: Any) -> np.ndarray:
    """What stitch first/center gave when Python passed it Windows.owner's
    mask: each token's value from the slot that owns it, fill elsewhere."""
    own = w.owner(rule)
    flat = (w.doc_offsets[w.documents] + w.starts)[:, None] + np.arange(w.size)
    out = np.full((int(w.doc_offsets[-1]), *values.shape[2:]), fill, values.dtype)
    out[flat[own]] = values[own]
    return out


@pytest.mark.parametrize("tail", TAILS)
@pytest.mark.parametrize("seed", range(25))
def test_stitch_first_and_center_take_the_owner_slot(seed, tail, restore_threads):
    rng = np.random.default_rng(500 + seed)
    case = generated_case(rng)
    offsets, size, step = case["offsets"], case["size"], case["step"]
    tokens = np.arange(offsets[-1], dtype=np.int64)
    fast = posembed.windows(tokens, size, step=step, tail=tail, offsets=offsets)
    slow = reference.windows(tokens, size, step=step, tail=tail, offsets=offsets)
    floats = rng.standard_normal((len(fast), size, 3)).astype(np.float32)
    floats[rng.random(floats.shape) < 0.05] = np.nan
    ints = rng.integers(-(2**62), 2**62, (len(fast), size, 2))
    for threads in (1, 2):
        posembed.set_num_threads(threads)
        for rule in ("first", "center"):
            for values, fill in ((floats, -2.5), (ints, -7)):
                got = posembed.stitch(values, fast, reduce=rule, fill=fill)
                assert_same(got, reference.stitch(values, slow, reduce=rule, fill=fill))
                assert_same(got, stitched_before(values, fast, rule, fill))
            if tail != "drop":  # every token is in a window, and its owner gives it back
                assert_same(posembed.stitch(fast.tokens, fast, reduce=rule), tokens)


# ------------------------------------------------------------ against the twin

TOKEN_DTYPES = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", ">i4", ">u2"]
LAYOUT_FIELDS = (*LAYOUT, "window_offsets", "doc_offsets")


def assert_same_layout(fast: posembed.WindowLayout, slow: reference.WindowLayout) -> None:
    assert isinstance(fast, posembed.WindowLayout)
    assert isinstance(slow, reference.WindowLayout)
    assert len(fast) == len(slow)
    for name in LAYOUT_FIELDS:
        assert_same(getattr(fast, name), getattr(slow, name))
    assert (fast.size, fast.step, fast.tail) == (slow.size, slow.step, slow.tail)


def corpus_of(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    """The case's offsets, or now and then another way to say the same corpus:
    a token count (one document), no document at all, offsets as a list or of
    another integer dtype."""
    offsets = case["offsets"]
    form = int(rng.integers(0, 6))
    if form == 0:
        return int(offsets[-1])
    if form == 1:
        return np.zeros(1, np.int64)  # no documents: no windows
    if form == 2:
        return offsets.tolist()
    if form == 3:
        return offsets.astype(rng.choice(["u4", ">i8", "u8"]))
    return offsets


@pytest.mark.parametrize("tail", TAILS)
@pytest.mark.parametrize("seed", range(40))
def test_the_twin_lays_out_and_cuts_what_posembed_does(seed, tail):
    rng = np.random.default_rng(900 + seed)
    case = generated_case(rng)
    size, step = case["size"], case["step"]
    corpus = corpus_of(rng, case)
    kw: dict[str, Any] = {"step": step} if rng.random() < 0.5 else {"overlap": size - step}
    fast = posembed.window_layout(corpus, size, tail=tail, **kw)
    slow = reference.window_layout(corpus, size, tail=tail, **kw)
    assert_same_layout(fast, slow)
    total = int(fast.doc_offsets[-1])
    dtype = np.dtype(str(rng.choice(TOKEN_DTYPES)))
    info = np.iinfo(dtype)
    native = dtype.newbyteorder("=")
    tokens = rng.integers(info.min, info.max, total, dtype=native, endpoint=True)
    tokens = tokens.astype(dtype)[::-1].copy()[::-1]  # a reversed view: not C-contiguous
    kept = tokens.copy()
    pad = int(rng.integers(info.min, info.max, dtype=native, endpoint=True))
    rows = fast.cut(tokens, pad_value=pad)
    assert_same(rows, slow.cut(tokens, pad_value=pad))
    assert rows.dtype == native
    assert_same(tokens, kept)  # input untouched
    out = np.full(rows.shape, 5, rows.dtype)
    assert slow.cut(tokens, pad_value=pad, out=out) is out
    assert_same(out, rows)


@pytest.mark.parametrize("seed", range(40))
def test_the_twin_cuts_ranges_from_slices_of_the_corpus_as_posembed(seed):
    rng = np.random.default_rng(1300 + seed)
    case = generated_case(rng)
    offsets, size, step = case["offsets"], case["size"], case["step"]
    tail = str(rng.choice(TAILS))
    fast = posembed.window_layout(offsets, size, step=step, tail=tail)
    slow = reference.window_layout(offsets, size, step=step, tail=tail)
    tokens = rng.integers(0, 2**40, offsets[-1]).astype(np.int64)
    n = len(fast)
    firsts = offsets[fast.documents] + fast.starts
    for _ in range(6):
        a = int(rng.integers(0, n + 1))
        b = int(rng.integers(a, n + 1))
        # the range as slice(a, b), or as list() would read another slice: a
        # negative start, an end past the last window, no start
        which = rng.choice([slice(a, b), slice(a - n, b), slice(a, n + 3), slice(None, b)])
        picked = range(n)[which]
        a, b = picked.start, picked.stop
        if a < b:
            lo, hi = int(firsts[a]), int(firsts[b - 1] + fast.lengths[b - 1])
        else:  # an empty range needs no token
            lo = hi = int(rng.integers(0, tokens.size + 1))
        spare = int(rng.integers(0, 3))
        lo, hi = max(0, lo - spare), min(tokens.size, hi + spare)
        part = tokens[lo:hi]
        got = fast.cut(part, windows=which, token_start=lo, pad_value=-1)
        want = slow.cut(part, windows=which, token_start=lo, pad_value=-1)
        assert_same(got, want)
        assert_same(got, fast.cut(tokens, pad_value=-1)[which])


def hand_built(layout: posembed.WindowLayout, name: str, at: int, by: int) -> Any:
    field = getattr(layout, name).copy()
    field[at] += by
    return dataclasses.replace(layout, **{name: field})


def twin_of(layout: posembed.WindowLayout) -> reference.WindowLayout:
    return reference.WindowLayout(*(getattr(layout, f.name) for f in dataclasses.fields(layout)))


LAYOUT_40 = posembed.window_layout(np.array([0, 15, 40]), 8, step=6)  # 7 windows
REFUSED_CUTS = [
    # (the layout, cut's arguments): refused by posembed and its twin alike
    (hand_built(LAYOUT_40, "starts", 1, 5), {}),  # past its document's end
    (hand_built(LAYOUT_40, "documents", 2, 5), {}),  # no such document
    (hand_built(LAYOUT_40, "lengths", 1, 1), {}),  # longer than size
    (hand_built(LAYOUT_40, "starts", 3, -1), {}),  # a negative start
    (hand_built(LAYOUT_40, "starts", 0, -1), {}),  # before the tokens held
    (hand_built(LAYOUT_40, "documents", 6, -9), {}),  # the last window in no document
    (dataclasses.replace(LAYOUT_40, doc_offsets=np.zeros(0, np.int64)), {}),
    (dataclasses.replace(LAYOUT_40, doc_offsets=LAYOUT_40.doc_offsets[::-1].copy()), {}),
    (dataclasses.replace(LAYOUT_40, starts=LAYOUT_40.starts.astype(np.float32)), {}),
    (dataclasses.replace(LAYOUT_40, documents=None), {}),
    (dataclasses.replace(LAYOUT_40, lengths=LAYOUT_40.lengths[:-1]), {}),
    (dataclasses.replace(LAYOUT_40, size=8.0), {}),
    (dataclasses.replace(LAYOUT_40, size=2**61), {}),  # 2^61 int64 slots: 2^64 bytes
    (LAYOUT_40, {"tokens": np.arange(39)}),
    (LAYOUT_40, {"windows": slice(2, 4), "token_start": 13}),  # window 2: tokens 12..14
    (LAYOUT_40, {"windows": slice(0, 7, 0)}),
    (LAYOUT_40, {"windows": slice(np.float64(1), 3)}),
    (LAYOUT_40, {"windows": range(3)}),
    (LAYOUT_40, {"token_start": np.int64(-1)}),
    (LAYOUT_40, {"token_start": True}),
    (LAYOUT_40, {"pad_value": 2**63}),
    (LAYOUT_40, {"pad_value": np.bool_(False)}),
    (LAYOUT_40, {"tokens": np.arange(40).astype(">f8")}),
    (LAYOUT_40, {"out": np.zeros((7, 8), ">i8")}),
    (LAYOUT_40, {"out": np.zeros((8, 8), np.int64)}),
    # an out= of the wrong dtype and tokens that miss the windows: the tokens are named first
    (LAYOUT_40, {"tokens": np.arange(39), "out": np.zeros((7, 8), np.float32)}),
]


@pytest.mark.parametrize(("layout", "kw"), REFUSED_CUTS)
def test_the_twin_refuses_the_cuts_posembed_refuses_with_the_same_exception(layout, kw):
    args: dict[str, Any] = {"tokens": np.arange(40, dtype=np.int64), **kw}
    out = args.get("out")
    before = None if out is None else out.tobytes()
    with pytest.raises((TypeError, ValueError)) as fast:
        layout.cut(**args)
    with pytest.raises((TypeError, ValueError)) as slow:
        twin_of(layout).cut(**args)
    assert type(slow.value) is type(fast.value), (fast.value, slow.value)
    if out is not None:
        assert out.tobytes() == before


REFUSED_LAYOUTS = [
    (np.array([0, 5, 3]), {}),
    (np.array([0, 2**63], np.uint64), {}),
    (np.array([[0, 5]]), {}),
    (np.array(5), {}),
    (np.bool_(True), {}),
    (np.uint64(2**63), {}),
    (np.int8(-1), {}),
    ([0, 2**64], {}),
    (5, {"size": np.int64(0)}),
    (5, {"size": 2**62}),
    (5, {"step": np.int64(5)}),
    (5, {"overlap": -1}),
    (5, {"tail": np.str_("Pad")}),
    (5, {"tail": None}),
    (5, {"step": 1, "overlap": 0}),
]


@pytest.mark.parametrize(("corpus", "kw"), REFUSED_LAYOUTS)
def test_the_twin_refuses_the_layouts_posembed_refuses_with_the_same_exception(corpus, kw):
    args: dict[str, Any] = {"size": 4, **kw}
    with pytest.raises((TypeError, ValueError)) as fast:
        posembed.window_layout(corpus, **args)
    with pytest.raises((TypeError, ValueError)) as slow:
        reference.window_layout(corpus, **args)
    assert type(slow.value) is type(fast.value), (fast.value, slow.value)

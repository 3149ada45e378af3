"""LearnedPositionEmbedding: the learned table, its lookup and its ways past max_seq_len."""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import posembed
from posembed import reference

from .conftest import FLOAT_TABLE_DTYPES, assert_same

FLOAT_DTYPES = ["float16", "float32", "float64", "bfloat16"]


def test_seed_example_positions_beyond_the_table_do_not_exist():
    emb = posembed.LearnedPositionEmbedding(128, 64, seed=42)
    assert emb.max_seq_len == 128
    assert emb.embeddings.shape == (128, 64)
    for p in (0, 50, 127):
        assert_same(emb(np.array([p])), emb.embeddings[[p]])
        assert_same(emb(p), emb.embeddings[p])
    for p in (128, 200):
        with pytest.raises(IndexError, match=rf"position {p} .* 128 rows .*0\.\.127"):
            emb(np.array([p]))


def test_defaults_and_attributes():
    emb = posembed.LearnedPositionEmbedding(512, 768, seed=0)
    assert (emb.max_seq_len, emb.embed_dim, emb.dtype) == (512, 768, np.float32)
    assert emb.init_std == 0.02
    assert repr(emb) == (
        "LearnedPositionEmbedding(max_seq_len=512, embed_dim=768, dtype=float32, dropout=0.1)"
    )


@pytest.mark.parametrize(
    ("init_std", "expected"), [(0.02, 0.02), ("scaled", 1 / math.sqrt(256)), (1, 1.0)]
)
def test_initial_scale(init_std, expected):
    emb = posembed.LearnedPositionEmbedding(1024, 256, init_std=init_std, seed=1)
    table = emb.embeddings.astype(np.float64)
    n = table.size
    # sample std has standard error std / sqrt(2n); the mean std / sqrt(n)
    assert abs(table.std() - expected) < 5 * expected / math.sqrt(2 * n)
    assert abs(table.mean()) < 5 * expected / math.sqrt(n)
    assert emb.init_std == pytest.approx(expected)


def test_zero_std_gives_zeros():
    emb = posembed.LearnedPositionEmbedding(4, 3, init_std=0.0, seed=1)
    assert not emb.embeddings.any()


def test_seed_reproducible_and_distinct():
    a = posembed.LearnedPositionEmbedding(16, 8, seed=7).embeddings
    b = posembed.LearnedPositionEmbedding(16, 8, seed=7).embeddings
    c = posembed.LearnedPositionEmbedding(16, 8, seed=8).embeddings
    d = posembed.LearnedPositionEmbedding(16, 8, seed=np.random.default_rng(7)).embeddings
    assert_same(a, b)
    assert_same(a, d)
    assert not np.array_equal(a, c)
    fresh = [posembed.LearnedPositionEmbedding(16, 8).embeddings for _ in range(2)]
    assert not np.array_equal(*fresh)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_every_dtype_is_the_float64_table_rounded(dtype):
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    wide = posembed.LearnedPositionEmbedding(32, 16, seed=3, dtype=np.float64).embeddings
    emb = posembed.LearnedPositionEmbedding(32, 16, seed=3, dtype=dtype)
    assert emb.dtype.name == dtype
    assert_same(emb.embeddings, wide.astype(emb.dtype))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_matches_reference_twin(dtype):
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    fast = posembed.LearnedPositionEmbedding(64, 24, init_std="scaled", seed=5, dtype=dtype)
    slow = reference.LearnedPositionEmbedding(64, 24, init_std="scaled", seed=5, dtype=dtype)
    assert_same(fast.embeddings, slow.embeddings)
    pos = np.arange(64).reshape(8, 8)[::-1]
    assert_same(fast(pos), slow(pos))
    assert_same(fast(pos * 3, mode="wrap"), slow(pos * 3, mode="wrap"))


BAD_ARGS = [
    ("zero length", (0, 8), {}, ValueError, "max_seq_len"),
    ("negative length", (-1, 8), {}, ValueError, "max_seq_len"),
    ("float length", (2.5, 8), {}, TypeError, "max_seq_len"),
    ("bool length", (True, 8), {}, TypeError, "max_seq_len"),
    ("string dim", (8, "8"), {}, TypeError, "embed_dim"),
    ("zero dim", (8, 0), {}, ValueError, "embed_dim"),
    ("negative std", (8, 8), {"init_std": -0.1}, ValueError, "init_std"),
    ("nan std", (8, 8), {"init_std": float("nan")}, ValueError, "init_std"),
    ("inf std", (8, 8), {"init_std": float("inf")}, ValueError, "init_std"),
    ("unknown std name", (8, 8), {"init_std": "xavier"}, ValueError, "init_std"),
    ("list std", (8, 8), {"init_std": [0.1]}, TypeError, "init_std"),
    ("int dtype", (8, 8), {"dtype": np.int32}, TypeError, "dtype"),
    ("unknown dtype", (8, 8), {"dtype": "nonsense"}, TypeError, "dtype"),
    ("complex dtype", (8, 8), {"dtype": np.complex64}, TypeError, "dtype"),
    ("None dtype", (8, 8), {"dtype": None}, TypeError, "dtype"),
    ("overflowing std", (8, 8), {"init_std": 1e308}, ValueError, "init_std"),
]


@pytest.mark.parametrize(
    ("args", "kw", "exc", "name"), [b[1:] for b in BAD_ARGS], ids=[b[0] for b in BAD_ARGS]
)
def test_invalid_constructor_arguments(args, kw, exc, name):
    with pytest.raises(exc, match=name):
        posembed.LearnedPositionEmbedding(*args, **kw)
    with pytest.raises(exc):
        reference.LearnedPositionEmbedding(*args, **kw)


def test_numpy_integers_are_accepted():
    emb = posembed.LearnedPositionEmbedding(np.int64(10), np.uint8(4), init_std=np.float32(0.1))
    assert (emb.max_seq_len, emb.embed_dim) == (10, 4)


def test_from_table_copies_unless_asked_not_to():
    trained = np.random.default_rng(0).standard_normal((20, 6)).astype(np.float32)
    emb = posembed.LearnedPositionEmbedding.from_table(trained)
    assert_same(emb.embeddings, trained)
    assert not np.shares_memory(emb.embeddings, trained)
    shared = posembed.LearnedPositionEmbedding.from_table(trained, copy=False)
    assert shared.embeddings is trained
    assert (emb.max_seq_len, emb.embed_dim) == (20, 6)
    with pytest.raises(TypeError, match="dtype"):
        posembed.LearnedPositionEmbedding.from_table(np.zeros((4, 4), np.int32))
    with pytest.raises(ValueError, match="2-D"):
        posembed.LearnedPositionEmbedding.from_table(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="at least one row"):
        posembed.LearnedPositionEmbedding.from_table(np.zeros((0, 4), np.float32))


# Truthy and falsy stand-ins for a bool: each would switch the flag silently.
NOT_BOOLS = [1, 0, 1.0, "no", "", [], None, np.int64(1)]


@pytest.mark.parametrize("bad", NOT_BOOLS, ids=repr)
def test_from_table_copy_must_be_a_bool(bad):
    trained = np.zeros((4, 3), np.float32)
    with pytest.raises(
        TypeError, match=rf"^copy must be True or False; got {re.escape(repr(bad))}$"
    ):
        posembed.LearnedPositionEmbedding.from_table(trained, copy=bad)


def test_from_table_copy_takes_numpy_bools():
    trained = np.zeros((4, 3), np.float32)
    assert (
        posembed.LearnedPositionEmbedding.from_table(trained, copy=np.False_).embeddings is trained
    )
    copied = posembed.LearnedPositionEmbedding.from_table(trained, copy=np.True_).embeddings
    assert not np.shares_memory(copied, trained)


@pytest.mark.parametrize("bad", NOT_BOOLS, ids=repr)
def test_embed_training_must_be_a_bool(bad):
    emb = posembed.LearnedPositionEmbedding(8, 3, seed=0)
    tokens, ids = np.ones((5, 3), np.float32), np.array([1, 2])
    with pytest.raises(
        TypeError, match=rf"^training must be True or False; got {re.escape(repr(bad))}$"
    ):
        emb.embed(tokens, ids, training=bad)
    with pytest.raises(TypeError, match="training must be True or False"):
        reference.LearnedPositionEmbedding(8, 3, seed=0).embed(tokens, ids, training=bad)
    assert_same(emb.embed(tokens, ids, training=np.False_), tokens[ids] + emb.embeddings[:2])


def test_call_with_out():
    emb = posembed.LearnedPositionEmbedding(16, 4, seed=2)
    out = np.empty((3, 4), np.float32)
    assert emb([1, 2, 3], out=out) is out
    assert_same(out, emb.embeddings[[1, 2, 3]])


# ------------------------------------------------ the twin, method by method
#
# reference.LearnedPositionEmbedding against the class on generated arguments,
# valid and not: the same exception type, or the same embedding (or array, or
# windows) to the byte.

REAL, TWIN = posembed.LearnedPositionEmbedding, reference.LearnedPositionEmbedding
ERRORS = (TypeError, ValueError, IndexError)


def _members(cls: type) -> dict[str, Any]:
    """Public methods, properties and classmethods, the constructor and __call__."""
    return {
        name: member
        for name, member in vars(cls).items()
        if not name.startswith("_") or name in ("__init__", "__call__", "__repr__")
    }


def test_the_twin_has_every_member_with_the_same_parameters():
    real, twin = _members(REAL), _members(TWIN)
    assert set(real) <= set(twin), set(real) - set(twin)
    for name, member in real.items():
        assert type(twin[name]) is type(member), name  # property, classmethod, function
        if isinstance(member, property):
            continue

        def shape(cls: type, attr: str = name) -> list[tuple[str, Any, Any]]:
            sig = inspect.signature(getattr(cls, attr))
            return [(p.name, p.kind, p.default) for p in sig.parameters.values()]

        assert shape(REAL) == shape(TWIN), name


def outcome(call: Callable[[], Any]) -> tuple[Any, type[BaseException] | None]:
    try:
        return call(), None
    except ERRORS as exc:
        return None, type(exc)


def same_outcome(fast_call: Callable[[], Any], slow_call: Callable[[], Any]) -> tuple[Any, Any]:
    """Both results, after checking that both raised the same type or neither did."""
    fast, fast_exc = outcome(fast_call)
    slow, slow_exc = outcome(slow_call)
    assert fast_exc is slow_exc
    return fast, slow


def same_embedding(fast: Any, slow: Any) -> None:
    assert isinstance(fast, REAL)
    assert isinstance(slow, TWIN)
    assert_same(fast.embeddings, slow.embeddings)
    for name in ("max_seq_len", "embed_dim", "dtype", "dropout"):
        assert getattr(fast, name) == getattr(slow, name), name
    assert fast.init_std == slow.init_std or (
        math.isnan(fast.init_std) and math.isnan(slow.init_std)
    )
    assert repr(fast) == repr(slow)


def same_windows(fast: Any, slow: Any) -> None:
    for name in ("tokens", "starts", "lengths", "documents", "doc_offsets"):
        assert_same(getattr(fast, name), getattr(slow, name))
    assert (fast.size, fast.step, fast.tail) == (slow.size, slow.step, slow.tail)
    assert_same(fast.mask, slow.mask)


TABLE_DTYPES: list[Any] = [*FLOAT_TABLE_DTYPES, np.dtype(">f4"), np.int32]


@st.composite
def tables(draw: st.DrawFn, min_rows: int = 0) -> np.ndarray:
    """Float tables of every float dtype (sometimes an int one, or empty),
    sometimes reversed or Fortran-ordered."""
    dtype = draw(st.sampled_from(TABLE_DTYPES))
    rows, cols = draw(st.integers(min_rows, 12)), draw(st.integers(0, 5))
    values = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).standard_normal((rows, cols))
    table = values.astype(dtype)
    layout = draw(st.sampled_from(["c", "reversed", "fortran"]))
    if layout == "reversed":
        return table[::-1]
    return np.asfortranarray(table) if layout == "fortran" else table


@st.composite
def embeddings(draw: st.DrawFn) -> tuple[Any, Any]:
    """One valid table wrapped by the class and by the twin."""
    table = draw(tables(min_rows=1).filter(lambda t: t.dtype.kind == "f" and t.size))
    rate = draw(st.sampled_from([0.0, 0.1, 0.5]))
    return REAL.from_table(table, dropout=rate), TWIN.from_table(table, dropout=rate)


RATES = [0.0, 0.1, 0.5, 1.0, -0.1, float("nan"), "0.1", None, True, np.float32(0.25)]
SETTINGS = settings(max_examples=100, deadline=None)


@SETTINGS
@given(
    max_seq_len=st.sampled_from([1, 2, 7, 20, 0, -1, 2.0, True, np.int64(5)]),
    embed_dim=st.sampled_from([1, 3, 6, 0, "4"]),
    init_std=st.sampled_from([0.02, "scaled", 0, 1.5, -1.0, float("inf"), 1e300, "xavier", None]),
    seed=st.sampled_from([0, 7, 99, -1, True, "x"]),
    dtype=st.sampled_from(["float16", "float32", "float64", "bfloat16", np.int32, None]),
    dropout=st.sampled_from(RATES),
)
def test_constructor_matches_the_twin(max_seq_len, embed_dim, init_std, seed, dtype, dropout):
    kw = {"init_std": init_std, "seed": seed, "dtype": dtype, "dropout": dropout}
    fast, slow = same_outcome(
        lambda: REAL(max_seq_len, embed_dim, **kw), lambda: TWIN(max_seq_len, embed_dim, **kw)
    )
    if fast is not None:
        same_embedding(fast, slow)


@SETTINGS
@given(
    table=tables(),
    copy=st.sampled_from([True, False, np.True_, 1, None]),
    dropout=st.sampled_from(RATES),
)
def test_from_table_matches_the_twin(table, copy, dropout):
    before = table.tobytes()
    fast, slow = same_outcome(
        lambda: REAL.from_table(table, copy=copy, dropout=dropout),
        lambda: TWIN.from_table(table, copy=copy, dropout=dropout),
    )
    assert table.tobytes() == before
    if fast is not None:
        same_embedding(fast, slow)
        kept = fast.embeddings is table
        assert kept == (not copy)
        assert (slow.embeddings is table) == kept


@SETTINGS
@given(
    pair=embeddings(),
    data=st.data(),
    mode=st.sampled_from(["raise", "clip", "wrap", "nope"]),
    dtype=st.sampled_from([np.int64, np.uint8, np.int16, np.float64]),
    with_out=st.booleans(),
)
def test_call_matches_the_twin(pair, data, mode, dtype, with_out):
    fast_emb, slow_emb = pair
    rows = fast_emb.max_seq_len
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
    drawn = data.draw(hnp.arrays(np.int64, shape, elements=st.integers(-2, rows + 2)))
    positions = drawn.astype(dtype)  # -1 wraps to 255 in uint8: out of range all the same
    outs: list[Any] = [None, None]
    if with_out:
        outs = [np.empty((*shape, fast_emb.embed_dim), fast_emb.dtype) for _ in range(2)]
    fast, slow = same_outcome(
        lambda: fast_emb(positions, mode=mode, out=outs[0]),
        lambda: slow_emb(positions, mode=mode, out=outs[1]),
    )
    if fast is not None:
        assert_same(fast, slow)
        if with_out:
            assert fast is outs[0]


@SETTINGS
@given(
    pair=embeddings(),
    length=st.sampled_from([1, 2, 5, 13, 30, 0, -1, 2**63, "5", 5.0]),
    align=st.sampled_from(["scale", "half_pixel", "corners", "nope"]),
)
def test_interpolate_matches_the_twin(pair, length, align):
    fast_emb, slow_emb = pair
    fast, slow = same_outcome(
        lambda: fast_emb.interpolate(length, align=align),
        lambda: slow_emb.interpolate(length, align=align),
    )
    if fast is not None:
        same_embedding(fast, slow)


@SETTINGS
@given(
    pair=embeddings(),
    grow=st.integers(-2, 10),
    init=st.sampled_from(["interpolate", "tile", "edge", "random", "zeros", "nope"]),
    std=st.sampled_from([None, 0.0, 0.5, -1.0, float("nan")]),
    seed=st.sampled_from([None, 0, 42, -1]),
    align=st.sampled_from([None, "scale", "corners"]),
)
def test_extend_matches_the_twin(pair, grow, init, std, seed, align):
    fast_emb, slow_emb = pair
    kw = {"init": init, "std": std, "seed": seed, "align": align}
    if init == "random" and seed is None:
        kw["seed"] = 3  # a fresh seed would draw different rows on each side
    length = fast_emb.max_seq_len + grow
    fast, slow = same_outcome(
        lambda: fast_emb.extend(length, **kw), lambda: slow_emb.extend(length, **kw)
    )
    if fast is not None:
        same_embedding(fast, slow)


@SETTINGS
@given(
    pair=embeddings(),
    data=st.data(),
    vocab=st.integers(0, 8),
    other_dtype=st.booleans(),
    training=st.sampled_from([False, True, np.True_, 1, None]),
    seed=st.sampled_from([0, 2**64 - 1, -1, "1"]),
    offset=st.sampled_from([0, 1, 3, -1, 1.0]),
)
def test_embed_matches_the_twin(pair, data, vocab, other_dtype, training, seed, offset):
    fast_emb, slow_emb = pair
    dtype = np.float64 if other_dtype and fast_emb.dtype != np.float64 else fast_emb.dtype
    token_table = np.random.default_rng(vocab).standard_normal((vocab, fast_emb.embed_dim))
    token_table = token_table.astype(dtype)
    length = data.draw(st.integers(0, fast_emb.max_seq_len + 1))
    shape = data.draw(st.sampled_from([(length,), (2, length)]))
    ids = data.draw(hnp.arrays(np.int64, shape, elements=st.integers(-1, vocab)))
    # the twin draws no seed: training always passes one (posembed would draw it)
    fast, slow = same_outcome(
        lambda: fast_emb.embed(token_table, ids, training=training, seed=seed, offset=offset),
        lambda: slow_emb.embed(token_table, ids, training=training, seed=seed, offset=offset),
    )
    if fast is not None:
        assert_same(fast, slow)


@SETTINGS
@given(
    pair=embeddings(),
    count=st.integers(0, 40),
    step=st.sampled_from([None, 1, 2, 5, 13, 0, 2.0]),
    tail=st.sampled_from(["pad", "shift", "drop", "nope"]),
)
def test_windows_matches_the_twin(pair, count, step, tail):
    fast_emb, slow_emb = pair
    tokens = np.arange(count, dtype=np.int32) * 7
    fast, slow = same_outcome(
        lambda: fast_emb.windows(tokens, step=step, tail=tail),
        lambda: slow_emb.windows(tokens, step=step, tail=tail),
    )
    if fast is not None:
        same_windows(fast, slow)

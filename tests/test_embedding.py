"""LearnedPositionEmbedding: the object the seeds describe."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import posembed
from posembed import reference

from .conftest import assert_same

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

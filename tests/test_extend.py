"""extend: extend-and-fine-tune's first step, growing a table while keeping the trained rows."""

from __future__ import annotations

import numpy as np
import pytest

import posembed
from posembed import reference

from .conftest import FLOAT_TABLE_DTYPES, assert_same, normal_table

INITS = ["interpolate", "tile", "edge", "random", "zeros"]


@pytest.mark.parametrize("dtype", FLOAT_TABLE_DTYPES, ids=str)
@pytest.mark.parametrize("init", INITS)
@pytest.mark.parametrize("length", [50, 51, 100, 173])
def test_matches_reference_and_keeps_trained_rows(rng, dtype, init, length):
    table = normal_table(rng, 50, 6, dtype)
    kw = {"seed": 3} if init == "random" else {}
    got = posembed.extend(table, length, init=init, **kw)
    assert_same(got, reference.extend(table, length, init=init, **kw))
    assert_same(got[:50], table)


def test_each_init_scheme(rng):
    table = normal_table(rng, 4, 3, np.float32)
    assert_same(posembed.extend(table, 10, init="tile")[4:], table[[0, 1, 2, 3, 0, 1]])
    assert_same(posembed.extend(table, 7, init="edge")[4:], table[[3, 3, 3]])
    assert not posembed.extend(table, 7, init="zeros")[4:].any()
    assert_same(
        posembed.extend(table, 8, init="interpolate")[4:], posembed.interpolate(table, 8)[4:]
    )
    assert_same(
        posembed.extend(table, 8, init="interpolate", align="corners")[4:],
        posembed.interpolate(table, 8, align="corners")[4:],
    )


def test_random_init_scale_and_seed():
    table = np.random.default_rng(0).normal(0, 0.5, (256, 64)).astype(np.float32)
    big = posembed.extend(table, 256 + 4096, init="random", seed=1)[256:]
    n = big.size
    assert abs(big.std() - table.std()) < 5 * 0.5 / np.sqrt(2 * n) + 0.02
    assert_same(big, posembed.extend(table, 256 + 4096, init="random", seed=1)[256:])
    custom = posembed.extend(table, 256 + 4096, init="random", std=0.01, seed=1)[256:]
    assert abs(custom.std() - 0.01) < 5 * 0.01 / np.sqrt(2 * n)


@pytest.mark.parametrize("layout", ["C", "F", "strided", ">f8", ">f4"])
@pytest.mark.parametrize("module", [posembed, reference])
def test_random_init_std_does_not_depend_on_layout(module, layout):
    """The measured std is one number for one table's values: a Fortran,
    strided or big-endian copy gives the same drawn rows to the last bit."""
    # (values for which numpy.std of the Fortran layout differs in the last bit)
    base = np.random.default_rng(0).standard_normal((300, 48))
    if layout == ">f4":
        base = base.astype(np.float32)
    table = {
        "C": base,
        "F": np.asfortranarray(base),
        "strided": np.repeat(base, 2, axis=1)[:, ::2],
        ">f8": base.astype(">f8"),
        ">f4": base.astype(">f4"),
    }[layout]
    want = posembed.extend(np.ascontiguousarray(base), 400, init="random", seed=1)
    got = module.extend(table, 400, init="random", seed=1)
    assert_same(got, want)


def test_random_init_needs_a_finite_std():
    table = np.array([[1.0, np.inf], [0.0, 1.0]], np.float32)
    with pytest.raises(ValueError, match="not finite"):
        posembed.extend(table, 4, init="random")
    with pytest.raises(ValueError, match="not finite"):
        reference.extend(table, 4, init="random")
    assert np.isfinite(posembed.extend(table, 4, init="random", std=0.1, seed=0)[2:]).all()


def test_strided_tables(rng):
    table = normal_table(rng, 30, 12, np.float32)[::-1, ::2]
    for init in INITS:
        kw = {"seed": 0} if init == "random" else {}
        assert_same(
            posembed.extend(table, 70, init=init, **kw),
            reference.extend(np.ascontiguousarray(table), 70, init=init, **kw),
        )


BAD = [
    ("shorter", 9, {}, ValueError, "at least the table's 10 rows"),
    ("zero", 0, {}, ValueError, "length"),
    (
        "bad init",
        20,
        {"init": "copy"},
        ValueError,
        "'interpolate', 'tile', 'edge', 'random', 'zeros'",
    ),
    ("std without random", 20, {"init": "tile", "std": 0.1}, ValueError, "init='random'"),
    ("seed without random", 20, {"seed": 1}, ValueError, "init='random'"),
    ("negative std", 20, {"init": "random", "std": -1.0}, ValueError, "std"),
    ("nan std", 20, {"init": "random", "std": float("nan")}, ValueError, "std"),
    ("string std", 20, {"init": "random", "std": "0.1"}, TypeError, "std"),
    ("bad align", 20, {"align": "left"}, ValueError, "align"),
    (
        "align without interpolate",
        20,
        {"init": "tile", "align": "corners"},
        ValueError,
        "init='interpolate'",
    ),
]


@pytest.mark.parametrize(
    ("length", "kw", "exc", "text"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_input(length, kw, exc, text):
    table = np.zeros((10, 3), np.float32)
    with pytest.raises(exc, match=text):
        posembed.extend(table, length, **kw)
    with pytest.raises(exc):
        reference.extend(table, length, **kw)


def test_embedding_methods_return_new_instances():
    emb = posembed.LearnedPositionEmbedding(128, 16, seed=4)
    longer = emb.interpolate(256)
    assert isinstance(longer, posembed.LearnedPositionEmbedding)
    assert (longer.max_seq_len, longer.embed_dim) == (256, 16)
    assert_same(longer.embeddings, posembed.interpolate(emb.embeddings, 256))
    assert_same(longer(255), emb.embeddings[127])
    ext = emb.extend(200, init="tile")
    assert ext.max_seq_len == 200
    assert_same(ext.embeddings[:128], emb.embeddings)
    assert emb.max_seq_len == 128  # unchanged
    corner = emb.interpolate(64, align="corners")
    assert_same(corner.embeddings[[0, -1]], emb.embeddings[[0, -1]])


@pytest.mark.parametrize("module", [posembed, reference])
def test_random_init_of_rows_with_no_columns(module):
    table = np.zeros((4, 0), np.float32)
    got = module.extend(table, 9, init="random", seed=1)
    assert got.shape == (9, 0)
    assert got.dtype == np.float32

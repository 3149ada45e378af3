"""embed and dropout_mask against their NumPy twins, PyTorch and their own promises."""

from __future__ import annotations

import re

import numpy as np
import pytest

import posembed
from posembed import _core, reference

from .conftest import assert_same, torch_or_skip

FLOAT_DTYPES = ["float16", "bfloat16", "float32", "float64"]


def _dtype(name):
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def tables(rng, dtype="float32", vocab=50, length=16, d=12):
    dt = _dtype(dtype)
    tok = rng.standard_normal((vocab, d)).astype(dt)
    pos = rng.standard_normal((length, d)).astype(dt)
    return tok, pos


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.999])
@pytest.mark.parametrize("shape", [(10,), (3, 10), (4, 1), (2, 0)])
def test_matches_reference(rng, dtype, p, shape):
    tok, pos = tables(rng, dtype)
    ids = rng.integers(0, len(tok), shape)
    for offset in (0, 6):
        got = posembed.embed(tok, ids, pos, offset=offset, dropout=p, seed=7)
        want = reference.embed(tok, ids, pos, offset=offset, dropout=p, seed=7)
        assert got.shape == (*shape, tok.shape[1])
        assert got.dtype == tok.dtype
        assert_same(got, want)


@pytest.mark.parametrize("positions_shape", [(10,), (1, 10), (3, 1), (3, 10), ()])
def test_positions_broadcast(rng, positions_shape):
    tok, pos = tables(rng)
    ids = rng.integers(0, len(tok), (3, 10))
    where = rng.integers(0, len(pos), positions_shape)
    got = posembed.embed(tok, ids, pos, positions=where, dropout=0.2, seed=3)
    assert_same(got, reference.embed(tok, ids, pos, positions=where, dropout=0.2, seed=3))
    plain = posembed.embed(tok, ids, pos, positions=where)
    spread = np.broadcast_to(where, ids.shape)
    assert_same(plain, tok[ids] + pos[spread])


def test_dropout_zero_is_exact_addition(rng):
    tok, pos = tables(rng, vocab=300, length=64, d=40)
    ids = rng.integers(0, 300, (5, 64))
    assert_same(posembed.embed(tok, ids, pos), tok[ids] + pos[np.arange(64)])
    assert_same(posembed.embed(tok, ids[0, :20], pos, offset=44), tok[ids[0, :20]] + pos[44:])


def test_mask_is_the_one_applied_and_scaled(rng):
    tok, pos = tables(rng, vocab=100, length=32, d=24)
    ids = rng.integers(0, 100, (4, 32))
    for p in (0.1, 0.5, 0.9):
        out = posembed.embed(tok, ids, pos, dropout=p, seed=11)
        keep = posembed.dropout_mask(out.shape, p, 11)
        assert_same(keep, reference.dropout_mask(out.shape, p, 11))
        total = tok[ids] + pos[np.arange(32)]
        assert_same(out, np.where(keep, total * np.float32(1 / (1 - p)), np.float32(0)))
        assert not out[~keep].any()


def test_same_seed_same_mask_other_seed_other_mask(rng):
    tok, pos = tables(rng)
    ids = rng.integers(0, len(tok), (3, 16))
    a = posembed.embed(tok, ids, pos, dropout=0.5, seed=1)
    assert_same(posembed.embed(tok, ids, pos, dropout=0.5, seed=1), a)
    b = posembed.embed(tok, ids, pos, dropout=0.5, seed=2)
    assert not np.array_equal(a, b)
    # the seed drawn for seed=None is reported, and reproduces the mask
    c = posembed.embed(tok, ids, pos, dropout=0.5)
    drawn = posembed.last_seed()
    assert isinstance(drawn, int)
    assert_same(posembed.embed(tok, ids, pos, dropout=0.5, seed=drawn), c)
    assert_same(
        posembed.dropout_mask(c.shape, 0.5, drawn), reference.dropout_mask(c.shape, 0.5, drawn)
    )


def test_every_random_bits_path_gives_the_reference_bits():
    # Block counts that leave each remainder of the 8-block VAES loop and the
    # 4-block AES-NI loop, with heads and tails inside a block.
    whole = reference.uniform_bits(2**63 + 5, 4 * 64 + 3)
    for n in range(4 * 64 + 3):
        assert_same(posembed.dropout_mask(n, 0.5, 2**63 + 5), whole[:n] >= 2**31)


def test_mask_does_not_depend_on_how_the_batch_is_split():
    # element e's bits depend on (seed, e) only: any window of them is the
    # same slice of the whole, whatever its parity or length
    whole = reference.uniform_bits(99, 5000)
    for first, n in ((0, 1), (1, 1), (3, 4), (7, 1025), (1000, 3001)):
        mask = posembed.dropout_mask(first + n, 0.3, 99)[first:]
        assert_same(mask, whole[first : first + n] >= int(0.3 * 2**32))


def test_kept_fraction_within_four_sigma():
    n = 1 << 22
    for p in (0.1, 0.5, 0.97):
        kept = posembed.dropout_mask(n, p, 2024).sum()
        sigma = np.sqrt(n * p * (1 - p))
        assert abs(kept - n * (1 - p)) < 4 * sigma, (p, kept)


@pytest.mark.parametrize("d", [1, 3, 8, 13, 777])
def test_dropout_rows_of_any_width_match_the_reference(rng, d, restore_threads, tiny_thresholds):
    # a row's random bits are drawn in pieces, the next row's reads asked for
    # between them: pieces of no element, of part of an AES block, and rows
    # whose bits start inside a block
    tok, pos = tables(rng, vocab=300, length=40, d=d)
    ids = rng.integers(0, 300, (5, 40))
    want = reference.embed(tok, ids, pos, dropout=0.3, seed=77)
    for threads in (1, 2, 3):
        posembed.set_num_threads(threads)
        assert_same(posembed.embed(tok, ids, pos, dropout=0.3, seed=77), want)


def test_thread_counts_give_identical_bytes(rng, restore_threads, tiny_thresholds):
    tok, pos = tables(rng, vocab=500, length=128, d=96)
    ids = rng.integers(0, 500, (6, 128))
    want = reference.embed(tok, ids, pos, dropout=0.1, seed=5)
    mask = reference.dropout_mask((1000, 33), 0.25, 5)
    for threads in (1, 2, 3):
        posembed.set_num_threads(threads)
        assert_same(posembed.embed(tok, ids, pos, dropout=0.1, seed=5), want)
        assert_same(posembed.dropout_mask((1000, 33), 0.25, 5), mask)


def test_out_is_filled_and_checked(rng):
    tok, pos = tables(rng)
    ids = rng.integers(0, len(tok), (2, 8))
    out = np.full((2, 8, tok.shape[1]), 5, np.float32)
    got = posembed.embed(tok, ids, pos, dropout=0.3, seed=4, out=out)
    assert got is out
    assert_same(out, reference.embed(tok, ids, pos, dropout=0.3, seed=4))
    bad = [
        (np.zeros((2, 8, tok.shape[1]), np.float64), TypeError, "dtype float32"),
        (np.zeros((2, 9, tok.shape[1]), np.float32), ValueError, "shape"),
        (np.zeros((2, 8, 2 * tok.shape[1]), np.float32)[..., ::2], ValueError, "C-contiguous"),
        (tok[:16].reshape(2, 8, -1), ValueError, "overlap"),
    ]
    for o, exc, text in bad:
        before = o.copy()
        with pytest.raises(exc, match=text):
            posembed.embed(tok, ids, pos, out=o)
        assert_same(o, before)


def test_bad_ids_and_positions_raise_before_writing(rng):
    tok, pos = tables(rng, vocab=50, length=16)
    ids = rng.integers(0, 50, (2, 8))
    ids[1, 3] = 50
    out = np.full((2, 8, tok.shape[1]), 9, np.float32)
    with pytest.raises(IndexError, match=r"token id 50 at token_ids\[1, 3\].*50 rows.*0\.\.49"):
        posembed.embed(tok, ids, pos, out=out)
    assert (out == 9).all()
    with pytest.raises(IndexError):
        reference.embed(tok, ids, pos)
    ok = ids % 50
    with pytest.raises(IndexError, match=r"positions 10\.\.17 .*16 rows"):
        posembed.embed(tok, ok, pos, offset=10)
    with pytest.raises(IndexError, match=r"position -1 at positions\[2\]"):
        posembed.embed(tok, ok, pos, positions=np.array([0, 1, -1, 3, 4, 5, 6, 7]))
    with pytest.raises(IndexError):
        reference.embed(tok, ok, pos, offset=10)


@pytest.mark.parametrize("threads", [1, 2])
def test_the_first_bad_id_and_position_are_named_with_their_count(
    rng, restore_threads, tiny_thresholds, threads
):
    # 8192 ids: under tiny thresholds the range scan runs on `threads` threads,
    # each of which may meet a bad value; the message names the first in the array
    posembed.set_num_threads(threads)
    tok, pos = tables(rng, vocab=50, length=16)
    ids = rng.integers(0, 50, (128, 64))
    where = rng.integers(0, 16, (128, 64))
    out = np.full((128, 64, tok.shape[1]), 9, np.float32)
    ids[37, 5], ids[100, 0], ids[127, 63] = 50, -1, 1000
    where[3, 60], where[90, 1] = 16, -2
    with pytest.raises(IndexError) as exc:
        posembed.embed(tok, ids, pos, positions=where, out=out)
    assert str(exc.value) == (
        "token id 50 at token_ids[37, 5] is out of range for a table of 50 rows "
        "(token_table; valid token ids are 0..49); 3 of 8192 token ids are out of range"
    )
    if threads > 1:
        assert _core._probes.last_team_size() == threads  # the scan ran on the team
    ids %= 50
    with pytest.raises(IndexError) as exc:
        posembed.embed(tok, ids, pos, positions=where, out=out)
    assert str(exc.value) == (
        "position 16 at positions[3, 60] is out of range for a table of 16 rows "
        "(pos_table; valid positions are 0..15); 2 of 8192 positions are out of range"
    )
    assert (out == 9).all()


def test_bad_values_are_named_as_the_caller_wrote_them(rng):
    tok, pos = tables(rng, vocab=50, length=16)
    ids = np.array([[1, 2**64 - 1, 3]], np.uint64)  # past int64: the value, not its wrap
    with pytest.raises(IndexError, match=r"^token id 18446744073709551615 at token_ids\[0, 1\] "):
        posembed.embed(tok, ids, pos)
    # broadcast positions: the place in the caller's array, the count of its values
    where = np.arange(4).reshape(4, 1)
    where[2, 0] = 99
    with pytest.raises(IndexError) as exc:
        posembed.embed(tok, np.zeros((4, 8), np.int32), pos, positions=where)
    assert str(exc.value) == (
        "position 99 at positions[2, 0] is out of range for a table of 16 rows "
        "(pos_table; valid positions are 0..15)"
    )
    with pytest.raises(IndexError, match=re.escape("position 16 is out of range for a table")):
        posembed.embed(tok, np.zeros((4, 8), np.int32), pos, positions=np.int8(16))


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.uint64])
def test_ids_and_positions_of_any_integer_dtype(rng, dtype):
    tok, pos = tables(rng, vocab=100, length=16)
    ids = rng.integers(0, 100, (3, 16))
    where = rng.integers(0, 16, (3, 16))
    want = posembed.embed(tok, ids, pos, positions=where, dropout=0.3, seed=1)
    got = posembed.embed(
        tok, ids.astype(dtype), pos, positions=where.astype(dtype), dropout=0.3, seed=1
    )
    assert_same(got, want)


BAD = [
    ("p one", {"dropout": 1.0}, ValueError, r"\[0, 1\)"),
    ("p negative", {"dropout": -0.1}, ValueError, r"\[0, 1\)"),
    ("p nan", {"dropout": float("nan")}, ValueError, r"\[0, 1\)"),
    ("p text", {"dropout": "0.1"}, TypeError, "number"),
    ("seed negative", {"dropout": 0.1, "seed": -1}, ValueError, "seed"),
    ("seed huge", {"dropout": 0.1, "seed": 2**64}, ValueError, "seed"),
    ("seed float", {"dropout": 0.1, "seed": 1.5}, TypeError, "seed"),
    ("negative offset", {"offset": -1}, ValueError, "offset"),
    ("positions and offset", {"positions": np.arange(8), "offset": 1}, ValueError, "not both"),
    ("positions shape", {"positions": np.arange(5)}, ValueError, "broadcast"),
]


@pytest.mark.parametrize(("kw", "exc", "text"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_arguments(rng, kw, exc, text):
    tok, pos = tables(rng)
    ids = rng.integers(0, len(tok), (2, 8))
    with pytest.raises(exc, match=text):
        posembed.embed(tok, ids, pos, **kw)
    with pytest.raises(exc):
        reference.embed(tok, ids, pos, **{"seed": 0, **kw})


def test_bad_tables_and_ids(rng):
    tok, pos = tables(rng)
    with pytest.raises(TypeError, match="share a dtype"):
        posembed.embed(tok, [1, 2], pos.astype(np.float64))
    with pytest.raises(ValueError, match="share embed_dim"):
        posembed.embed(tok, [1, 2], pos[:, :5])
    with pytest.raises(ValueError, match=r"\(T,\) or \(B, T\)"):
        posembed.embed(tok, np.zeros((2, 2, 2), int), pos)
    with pytest.raises(TypeError, match="integers"):
        posembed.embed(tok, np.zeros(3), pos)
    with pytest.raises(TypeError, match="float dtype"):
        posembed.embed(tok.astype(np.int32), [1], pos.astype(np.int32))
    with pytest.raises(TypeError, match="seed"):
        posembed.dropout_mask((3,), 0.1, None)


def test_inputs_are_not_modified(rng):
    tok, pos = tables(rng)
    ids = rng.integers(0, len(tok), (2, 8)).astype(np.uint16)
    copies = [x.copy() for x in (tok, pos, ids)]
    posembed.embed(tok, ids, pos, dropout=0.5, seed=1)
    for x, c in zip((tok, pos, ids), copies, strict=True):
        assert_same(x, c)


def test_learned_position_embedding_applies_its_dropout_when_training(rng):
    emb = posembed.LearnedPositionEmbedding(32, 8, seed=0)
    twin = reference.LearnedPositionEmbedding(32, 8, seed=0)
    assert emb.dropout == 0.1
    tok = rng.standard_normal((20, 8)).astype(np.float32)
    ids = rng.integers(0, 20, (2, 10))
    assert_same(emb.embed(tok, ids), tok[ids] + emb.embeddings[:10])
    assert_same(emb.embed(tok, ids, offset=5), twin.embed(tok, ids, offset=5))
    trained = emb.embed(tok, ids, training=True, seed=9)
    assert_same(trained, twin.embed(tok, ids, training=True, seed=9))
    assert_same(trained, posembed.embed(tok, ids, emb.embeddings, dropout=0.1, seed=9))
    assert emb.extend(64).dropout == 0.1
    quiet = posembed.LearnedPositionEmbedding(32, 8, seed=0, dropout=0.0)
    assert_same(quiet.embed(tok, ids, training=True), tok[ids] + emb.embeddings[:10])
    with pytest.raises(ValueError, match="dropout"):
        posembed.LearnedPositionEmbedding(32, 8, dropout=1.0)
    with pytest.raises(TypeError, match="training"):
        emb.embed(tok, ids, training="yes")


def test_pytorch_embedding_plus_position_is_the_same(rng):
    torch = torch_or_skip()
    tok, pos = tables(rng, vocab=1000, length=128, d=64)
    ids = rng.integers(0, 1000, (4, 128))
    t_out = torch.nn.functional.embedding(torch.from_numpy(ids), torch.from_numpy(tok))
    t_out = t_out + torch.from_numpy(pos)[torch.arange(128)]
    assert_same(posembed.embed(tok, ids, pos), t_out.numpy())
    # inverted dropout: kept values scaled by 1 / (1 - p), as F.dropout
    x = torch.ones(10_000)
    kept = torch.nn.functional.dropout(x, 0.25, training=True)
    scale = kept[kept != 0].unique()
    ours = posembed.embed(
        np.ones((1, 1), np.float32),
        np.zeros(10_000, int),
        np.zeros((10_000, 1), np.float32),
        dropout=0.25,
        seed=1,
    )
    assert np.unique(ours[ours != 0]).tolist() == scale.tolist()


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_first_row_gives_a_piece_the_mask_of_the_whole_batch(rng, dtype):
    """A batch embedded piece by piece, each piece told where it sits, is the
    batch embedded at once: the dropout mask included."""
    tok, pos = tables(rng, dtype, vocab=50, length=16, d=12)
    ids = rng.integers(0, 50, (7, 16))
    whole = posembed.embed(tok, ids, pos, dropout=0.4, seed=11)
    for a, b in [(0, 2), (2, 3), (3, 7)]:
        piece = posembed.embed(tok, ids[a:b], pos, dropout=0.4, seed=11, first_row=a * 16)
        assert_same(piece, whole[a:b])
    # pieces of one sequence: positions go on, rows count tokens
    row = ids[0]
    whole = posembed.embed(tok, row, pos, dropout=0.4, seed=3)
    for a, b in [(0, 5), (5, 6), (6, 16)]:
        piece = posembed.embed(tok, row[a:b], pos, offset=a, dropout=0.4, seed=3, first_row=a)
        assert_same(piece, whole[a:b])
    assert_same(posembed.embed(tok, ids, pos, first_row=5), posembed.embed(tok, ids, pos))


def test_first_row_bad_input():
    tok = np.zeros((5, 4), np.float32)
    with pytest.raises(ValueError, match=r"first_row must be an integer >= 0; got -1"):
        posembed.embed(tok, [0, 1], tok, first_row=-1)
    with pytest.raises(TypeError, match=r"first_row must be an integer >= 0; got float 1\.0"):
        posembed.embed(tok, [0, 1], tok, first_row=1.0)
    with pytest.raises(ValueError, match=r"first_row must be in 0\.\.1152921504606846976 "):
        posembed.embed(tok, [0, 1], tok, first_row=2**60 + 1)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("first_row", [0, 1, 3, 7, 2**40 + 3, 2**62 // 12])
def test_first_row_gives_the_twins_bytes(rng, dtype, first_row):
    """The mask from any row of a larger batch on (up to the last one whose
    elements the mask's counter still reaches) is the twin's."""
    tok, pos = tables(rng, dtype, vocab=50, length=16, d=12)
    for shape in [(3, 10), (10,), (2, 0)]:
        ids = rng.integers(0, 50, shape)
        for p in (0.0, 0.1, 0.5):
            got = posembed.embed(tok, ids, pos, dropout=p, seed=9, first_row=first_row)
            want = reference.embed(tok, ids, pos, dropout=p, seed=9, first_row=first_row)
            assert_same(got, want)
        out = np.full((*shape, 12), 3, tok.dtype)
        reference.embed(tok, ids, pos, dropout=0.3, seed=2, first_row=first_row, out=out)
        assert_same(out, posembed.embed(tok, ids, pos, dropout=0.3, seed=2, first_row=first_row))


def test_the_twins_pieces_are_its_whole_batch(rng):
    """The twin's first_row, checked on its own: pieces of a batch told where
    they sit (at any element, not only at a multiple of the generator's 4
    words per block) are the batch embedded at once."""
    tok, pos = tables(rng, "float32", vocab=20, length=9, d=3)
    ids = rng.integers(0, 20, (5, 9))
    whole = reference.embed(tok, ids, pos, dropout=0.5, seed=2**64 - 1)
    for a, b in [(0, 1), (1, 2), (2, 5)]:
        piece = reference.embed(tok, ids[a:b], pos, dropout=0.5, seed=2**64 - 1, first_row=a * 9)
        assert_same(piece, whole[a:b])
    row = ids[1]
    whole = reference.embed(tok, row, pos, dropout=0.5, seed=4)
    for a in range(9):
        piece = reference.embed(tok, row[a:], pos, offset=a, dropout=0.5, seed=4, first_row=a)
        assert_same(piece, whole[a:])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("id_dtype", [np.uint8, np.int32, np.int64])
def test_the_common_call_takes_its_short_path_and_equals_the_full_one(rng, dtype, id_dtype):
    # plain arrays, no dropout, positions 0..T-1: checked in a few compiled
    # steps; the same call with anything else goes through the full checks
    tok = rng.standard_normal((200, 16)).astype(dtype)
    pos = rng.standard_normal((9, 16)).astype(dtype)
    for ids in (rng.integers(0, 200, 7), rng.integers(0, 200, (3, 9))):
        ids = ids.astype(id_dtype)
        assert _core.embed_plain(tok, ids, pos) is not None
        got = posembed.embed(tok, ids, pos)
        full = posembed.embed(tok, ids, pos, positions=np.arange(ids.shape[-1]))
        assert_same(got, full)
        assert_same(got, reference.embed(tok, ids, pos))
    # not the common call: a list, a subclass, a swapped table, too few positions
    ids = np.array([1, 2, 3], id_dtype)
    for args in (
        (tok, [1, 2, 3], pos),
        (tok, np.ma.array(ids), pos),
        (tok.astype(tok.dtype.newbyteorder()), ids, pos),
        (tok, np.arange(10).astype(id_dtype), pos),
        (tok, ids, pos.astype(np.float64 if dtype != np.float64 else np.float32)),
    ):
        assert _core.embed_plain(*args) is None
    with pytest.raises(IndexError, match=r"token_ids\[1\].*200"):
        posembed.embed(tok, np.array([1, 200], id_dtype), pos)

"""gather_backward against numpy.add.at, its twin, PyTorch, and the gradient of gather."""

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


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(7,), (3, 40), (2, 3, 5), ()])
def test_equals_numpy_add_at(rng, dtype, shape):
    length, d = 12, 9
    positions = rng.integers(0, length, shape)
    grad = rng.standard_normal((*shape, d)).astype(dtype)
    want = np.zeros((length, d), dtype)
    np.add.at(want, positions, grad)
    assert_same(posembed.gather_backward(grad, positions, length), want)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_matches_reference(rng, dtype):
    dt = _dtype(dtype)
    positions = rng.integers(0, 30, (4, 50))
    grad = rng.standard_normal((4, 50, 17)).astype(dt)
    got = posembed.gather_backward(grad, positions, 30)
    assert got.dtype == dt
    assert_same(got, reference.gather_backward(grad, positions, 30))


def test_rows_never_named_are_zero_and_out_is_overwritten(rng):
    positions = np.array([[3, 3, 0], [3, 5, 0]])
    grad = rng.standard_normal((2, 3, 4)).astype(np.float32)
    out = np.full((8, 4), 7, np.float32)
    got = posembed.gather_backward(grad, positions, 8, out=out)
    assert got is out
    for r in (1, 2, 4, 6, 7):
        assert not out[r].any()
    assert_same(out[5], grad[1, 1])
    assert_same(out[3], (np.float32(0) + grad[0, 0] + grad[0, 1]) + grad[1, 0])
    empty = posembed.gather_backward(np.zeros((0, 4), np.float32), np.zeros(0, int), 3, out=out[:3])
    assert not empty.any()


def test_thread_counts_give_identical_bytes(rng, restore_threads, tiny_thresholds):
    # Zipf-like ids: a few rows take most of the work
    positions = np.minimum(rng.zipf(1.3, (8, 512)) - 1, 999)
    grad = rng.standard_normal((8, 512, 48)).astype(np.float32)
    want = reference.gather_backward(grad, positions, 1000)
    for threads in (1, 2, 3):
        posembed.set_num_threads(threads)
        assert_same(posembed.gather_backward(grad, positions, 1000), want)
        out = np.full((1000, 48), 3, np.float32)
        assert_same(posembed.gather_backward(grad, positions, 1000, out=out), want)


def test_is_the_gradient_of_gather(rng):
    # loss(table) = sum(gather(table, positions) * upstream); its gradient is
    # gather_backward(upstream, positions, L). Central differences in float64.
    length, d = 10, 6
    table = rng.standard_normal((length, d))
    positions = rng.integers(0, length, (3, 7))
    upstream = rng.standard_normal((3, 7, d))

    def loss(t):
        return float((posembed.gather(t, positions) * upstream).sum())

    analytic = posembed.gather_backward(upstream, positions, length)
    eps = 1e-6
    numeric = np.zeros_like(table)
    for r in range(length):
        for c in range(d):
            up, down = table.copy(), table.copy()
            up[r, c] += eps
            down[r, c] -= eps
            numeric[r, c] = (loss(up) - loss(down)) / (2 * eps)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)


def test_serves_the_token_table(rng):
    vocab, d = 500, 16
    ids = rng.integers(0, vocab, (4, 64))
    grad = rng.standard_normal((4, 64, d)).astype(np.float32)
    want = np.zeros((vocab, d), np.float32)
    np.add.at(want, ids, grad)
    assert_same(posembed.gather_backward(grad, ids.astype(np.uint16), vocab), want)


def test_bad_input(rng):
    grad = np.zeros((2, 3, 4), np.float32)
    positions = np.zeros((2, 3), int)
    bad = positions.copy()
    bad[1, 2] = 5
    with pytest.raises(IndexError, match=r"position 5 at positions\[1, 2\].*5 rows.*0\.\.4"):
        posembed.gather_backward(grad, bad, 5)
    with pytest.raises(ValueError, match=r"positions.shape \+ \(d,\)"):
        posembed.gather_backward(grad[:, :2], positions, 5)
    with pytest.raises(TypeError, match="float dtype"):
        posembed.gather_backward(grad.astype(np.int32), positions, 5)
    with pytest.raises(TypeError, match="integers"):
        posembed.gather_backward(grad, positions.astype(float), 5)
    with pytest.raises(ValueError, match="length"):
        posembed.gather_backward(grad, positions, -1)
    out = np.full((5, 4), 2, np.float32)
    for o, exc in (
        (np.zeros((5, 4), np.float64), TypeError),
        (np.zeros((6, 4), np.float32), ValueError),
        (out[:, :2], ValueError),
    ):
        with pytest.raises(exc):
            posembed.gather_backward(grad, positions, 5, out=o)
    bad[0, 0] = -1
    with pytest.raises(IndexError):
        posembed.gather_backward(grad, bad, 5, out=out)
    assert (out == 2).all()
    for args in (
        (grad, bad, 5),
        (grad[:, :2], positions, 5),
        (grad.astype(np.int32), positions, 5),
    ):
        with pytest.raises((IndexError, ValueError, TypeError)):
            reference.gather_backward(*args)


@pytest.mark.parametrize("threads", [1, 2])
def test_the_first_bad_position_is_named_with_the_count(
    rng, restore_threads, tiny_thresholds, threads
):
    # 8192 positions: under tiny thresholds the range scan runs on `threads`
    # threads; the message names the first bad one in the array
    posembed.set_num_threads(threads)
    positions = rng.integers(0, 100, (64, 128))
    positions[20, 7], positions[50, 3], positions[63, 127] = 100, -5, 2**40
    grad = np.zeros((64, 128, 4), np.float32)
    out = np.full((100, 4), 3, np.float32)
    message = (
        "position 100 at positions[20, 7] is out of range for a table of 100 rows "
        "(length 100; valid positions are 0..99); 3 of 8192 positions are out of range"
    )
    with pytest.raises(IndexError, match=f"^{re.escape(message)}$"):
        posembed.gather_backward(grad, positions, 100, out=out)
    if threads > 1:
        assert _core._probes.last_team_size() == threads  # the scan ran on the team
    assert (out == 3).all()
    # no columns: nothing to sum, every position checked all the same
    with pytest.raises(IndexError, match=f"^{re.escape(message)}$"):
        posembed.gather_backward(grad[..., :0], positions, 100)


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.uint64])
def test_positions_of_any_integer_dtype(rng, dtype):
    positions = rng.integers(0, 100, (4, 30))
    grad = rng.standard_normal((4, 30, 6)).astype(np.float32)
    want = posembed.gather_backward(grad, positions, 100)
    assert_same(posembed.gather_backward(grad, positions.astype(dtype), 100), want)
    with pytest.raises(IndexError, match=r"^position 18446744073709551615 at positions\[1\] "):
        posembed.gather_backward(grad[0, :2], np.array([0, 2**64 - 1], np.uint64), 100)


def test_pytorch_embedding_backward_is_the_same(rng):
    torch = torch_or_skip()
    vocab, d = 300, 32
    ids = rng.integers(0, vocab, (4, 100))
    # integer-valued grads: every summation order gives the same exact sums
    upstream = rng.integers(-50, 50, (4, 100, d)).astype(np.float32)
    weight = torch.zeros((vocab, d), requires_grad=True)
    out = torch.nn.functional.embedding(torch.from_numpy(ids), weight)
    out.backward(torch.from_numpy(upstream))
    assert_same(posembed.gather_backward(upstream, ids, vocab), weight.grad.numpy())


@pytest.mark.parametrize("dtype", [">f2", ">f4", ">f8"])
def test_non_native_grad_gives_native_result(rng, dtype):
    # the result is native (the kernel writes native floats), with the values
    # of the native grad; out= must be native too
    grad = rng.standard_normal((5, 7, 3)).astype(dtype)
    positions = rng.integers(0, 9, (5, 7))
    got = posembed.gather_backward(grad, positions, 9)
    native = grad.astype(np.dtype(dtype).newbyteorder("="))
    assert_same(got, posembed.gather_backward(native, positions, 9))
    assert_same(got, reference.gather_backward(grad, positions, 9))
    with pytest.raises(TypeError, match="out must have dtype"):
        posembed.gather_backward(grad, positions, 9, out=np.zeros((9, 3), dtype))


@pytest.mark.parametrize("length", [2**62, 2**63, 2**64 + 5])
def test_a_length_past_int64_is_refused_before_positions_beyond_64_bits(length):
    # positions NumPy can only hold as Python ints are checked against the
    # length in int64: a length that int64 cannot hold must be refused first
    grad = np.ones((2, 3), np.float32)
    positions = [2**64 - 1, 1]
    with pytest.raises(ValueError, match=rf"length is too large: {length} x 3 x 4 reaches 2\^62"):
        posembed.gather_backward(grad, positions, length)


@pytest.mark.parametrize("d", [64, 100])
def test_rows_of_many_gradients_sum_in_order_from_zero(rng, d):
    """float32 sums of up to 32 gradient rows are held in registers, later ones
    added to them: the twin's bits either way, and -0.0 rows sum to +0.0 as a
    sum into zeros does."""
    grad = rng.standard_normal((100, d)).astype(np.float32)
    grad[:3] = -0.0
    positions = np.r_[np.zeros(40, np.int64), rng.integers(1, 6, 57), [6, 6, 6]]
    grad[97:] = -0.0  # row 6: only negative zeros
    got = posembed.gather_backward(grad, positions, 8)
    assert_same(got, reference.gather_backward(grad, positions, 8))
    assert not np.signbit(got[6]).any()

"""similarity: cosine similarity of position rows (the classic analysis of a learned table)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import posembed
from posembed import _core, reference

from .conftest import FLOAT_TABLE_DTYPES, normal_table


@pytest.mark.parametrize("dtype", FLOAT_TABLE_DTYPES, ids=str)
def test_matches_reference(rng, dtype):
    table = normal_table(rng, 40, 33, dtype)
    table[5] = 0  # a zero row scores 0
    got = posembed.similarity(table)
    want = reference.similarity(table)
    assert got.shape == (40, 40)
    assert got.dtype == (np.float64 if dtype == np.float64 else np.float32)
    # Both sum 33 products in the compute type in different orders: the
    # classic bound is d * eps per dot product, relative to 1 here.
    eps = np.finfo(got.dtype).eps
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * 33 * eps)
    assert (got[5] == 0).all()
    assert (got[:, 5] == 0).all()
    diag = np.delete(np.diag(got), 5)
    np.testing.assert_allclose(diag, 1, rtol=0, atol=4 * 33 * eps)


def test_interpolation_preserves_the_similarity_structure():
    # The classic picture: a smooth table keeps its banded similarity when stretched.
    pos = np.arange(128)[:, None]
    freqs = np.arange(1, 33)[None, :] / 128
    table = np.concatenate([np.sin(pos * freqs), np.cos(pos * freqs)], axis=1)
    before = posembed.similarity(table)
    after = posembed.similarity(posembed.interpolate(table, 256))
    np.testing.assert_allclose(after[::2, ::2], before, rtol=0, atol=1e-12)


def test_huge_and_tiny_rows_neither_overflow_nor_underflow():
    for dtype in (np.float32, np.float64):
        table = np.array([[1e20, 1e20], [1e-30, 1e-30], [1.0, 1.0], [0.0, 0.0]]).astype(dtype)
        for fn in (posembed.similarity, reference.similarity):
            sim = fn(table)
            np.testing.assert_allclose(sim[:3, :3], 1, rtol=1e-6)
            assert (sim[3] == 0).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [1, 129, 255, 257, 700, 2100])
@pytest.mark.parametrize("scale", [1.0, 1e35], ids=["the table's own product", "rows scaled first"])
def test_the_lower_triangle_mirrored_is_the_whole_product(rng, rows, scale, dtype):
    # The lower triangle's blocks (rows halved down to diagonal blocks of at
    # least 128 rows), scaled and mirrored through tiles of 256-byte rows:
    # exactly symmetric, as the twin within its bound, the same bits on any
    # thread count. A row of huge values takes the path that scales rows to
    # unit length before the product.
    table = rng.standard_normal((rows, 24)).astype(dtype)
    table[rows // 2] = 0
    table[rows // 3] *= scale
    want = reference.similarity(table)
    got = {}
    for threads in (1, 3):
        posembed.set_num_threads(threads)
        try:
            got[threads] = posembed.similarity(table)
        finally:
            posembed.set_num_threads(None)
    assert got[1].tobytes() == got[3].tobytes()
    sim = got[1]
    assert sim.dtype == dtype
    assert (sim == sim.T).all()
    np.testing.assert_allclose(sim, want, rtol=0, atol=4 * 24 * np.finfo(dtype).eps)
    assert (sim[rows // 2] == 0).all()


def test_nan_and_inf_rows_spread_as_the_twin_spreads_them():
    table = np.array([[1.0, 2.0], [np.nan, 1.0], [np.inf, 1.0], [3.0, 4.0]], np.float32)
    got = posembed.similarity(table)
    with np.errstate(invalid="ignore"):  # inf / inf, as the twin computes it
        want = reference.similarity(table)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=0, atol=1e-6)


@pytest.mark.parametrize("n", [1, 31, 33, 100])
def test_the_mirror_of_row_ranges_is_the_mirror_of_the_whole(n):
    """similarity scales and mirrors each block of rows as it is made: any cut
    into row ranges, on any thread count, gives the whole matrix's bytes."""
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, n), dtype=np.float32)
    inv = rng.uniform(0.5, 2, n).astype(np.float32)
    whole = a.copy()
    _core.mirror_lower(whole, inv)
    assert np.array_equal(whole, whole.T)
    for cuts in ([0, n], [0, n // 3, n // 2, n], [0, 7, n] if n > 7 else [0, n]):
        for threads in (1, 3):
            got = a.copy()
            for b, e in itertools.pairwise(cuts):
                _core.mirror_lower(got, inv, b, e, threads=threads)
            assert np.array_equal(got, whole)
    peak, norm = _core.row_scales(a, threads=1)
    for threads in (0, 3):
        p3, n3 = _core.row_scales(a, threads=threads)
        assert np.array_equal(p3, peak)
        assert np.array_equal(n3, norm)


def row_scales_model(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The row pass's definition: each row's largest magnitude (NaN for a row
    holding one), and the length of the row divided by it (1 for a zero peak)
    whose squares are summed in eight partial sums, element j into sum j % 8,
    added in order at the end."""
    peak = np.abs(x).max(axis=1, initial=0)
    with np.errstate(invalid="ignore", over="ignore"):  # inf / inf, NaN rows
        y = x / np.where(peak == 0, 1, peak).astype(x.dtype)[:, None]
        squares = y * y
    lanes = np.zeros((x.shape[0], 8), x.dtype)
    for c in range(0, x.shape[1], 8):  # sequentially, as the kernel adds them
        part = squares[:, c : c + 8]
        lanes[:, : part.shape[1]] += part
    total = lanes[:, 0]
    for k in range(1, 8):
        total = total + lanes[:, k]
    return peak, np.sqrt(total)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cols", [1, 7, 8, 15, 16, 33, 64, 100, 1031])
def test_row_scales_are_their_definition(rng, dtype, cols):
    x = (rng.standard_normal((12, cols)) * np.logspace(-30, 30, 12)[:, None]).astype(dtype)
    assert x.dtype == dtype  # float32 rows reach the float32 kernel
    x[0] = 0
    x[1] = -0.0
    x[2, cols // 2] = np.nan
    x[3, cols - 1] = -np.inf
    x[4] = np.finfo(dtype).smallest_subnormal * rng.integers(-3, 4, cols)
    x[5] = -np.finfo(dtype).max
    x[6, 0] = np.inf
    x[6, -1] = np.nan  # a NaN after an infinity is still a NaN
    want_peak, want_norm = row_scales_model(x)
    for threads in (1, 3):
        peak, norm = _core.row_scales(x, threads=threads)
        assert peak.dtype == norm.dtype == dtype
        assert peak.tobytes() == want_peak.tobytes()  # NaNs and the zeros' signs too
        assert norm.tobytes() == want_norm.tobytes()
    assert np.isnan(peak[[2, 6]]).all()
    assert peak[3] == np.inf
    assert peak[4] > 0  # subnormal magnitudes compare as themselves
    assert peak[0] == peak[1] == 0
    assert not np.signbit(peak[1])
    # the pass that scales rows to unit length first: the same peaks and
    # lengths, the row divided by the one and then by the other
    with np.errstate(invalid="ignore", over="ignore"):
        by_peak = np.where(want_peak == 0, 1, want_peak).astype(dtype)[:, None]
        by_norm = np.where(want_norm == 0, 1, want_norm).astype(dtype)[:, None]
        want_unit = (x / by_peak) / by_norm
    assert _core.unit_rows(x).tobytes() == want_unit.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [5, 64, 129, 200, 300])
def test_the_mirror_is_the_scaled_lower_triangle_and_its_transpose(dtype, n):
    """Tiles wholly below the diagonal are transposed in registers; the
    others (the diagonal's, a ragged edge) one element at a time. Both give
    entry (i, j), i >= j, as a[i, j] * inv[i] * inv[j], and its mirror, for
    row ranges that start anywhere (as similarity's blocks do), on any
    thread count."""
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, n)).astype(dtype)
    a[n - 1, 0], a[n // 2, 1], a[n - 1, n // 3] = -0.0, np.inf, np.nan
    inv = rng.uniform(0.5, 2, n).astype(dtype)
    lower = np.tri(n, dtype=bool)
    for scales in (inv, None):
        low = a if scales is None else a * scales[:, None] * scales[None, :]
        want = np.where(lower, low, low.T)
        for cuts in ([0, n], [c for c in (0, 70, 200) if c < n] + [n]):
            for threads in (1, 3):
                got = a.copy()
                for b, e in itertools.pairwise(cuts):
                    _core.mirror_lower(got, scales, b, e, threads=threads)
                assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize(
    ("begin", "end", "threads"), [(-1, 4, 0), (3, 2, 0), (0, 9, 0), (0, 4, -1)]
)
def test_the_mirror_refuses_rows_outside_the_matrix(begin, end, threads):
    a = np.zeros((4, 4), np.float32)
    with pytest.raises(ValueError, match=r"rows \[begin, end\)"):
        _core.mirror_lower(a, None, begin, end, threads=threads)
    assert not a.any()

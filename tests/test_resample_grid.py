"""resample_grid against its reference twin and PyTorch F.interpolate."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posembed
from posembed import reference

from .conftest import FLOAT_TABLE_DTYPES, assert_same, normal_table, torch_or_skip

METHODS = ["bicubic", "bilinear"]
ALIGNS = ["half_pixel", "corners"]
GRIDS = [
    ((24, 24), (48, 48)),
    ((24, 24), (12, 12)),
    ((7, 5), (3, 11)),
    ((1, 1), (4, 2)),
    ((6, 6), (6, 6)),
    ((3, 8), (1, 1)),
    ((14, 14), (37, 23)),
]


@pytest.mark.parametrize("dtype", FLOAT_TABLE_DTYPES, ids=str)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("align", ALIGNS)
@pytest.mark.parametrize(("grid", "new_grid"), GRIDS, ids=str)
@pytest.mark.parametrize("prefix", [0, 1, 2])
def test_matches_reference(rng, dtype, method, align, grid, new_grid, prefix):
    table = normal_table(rng, prefix + grid[0] * grid[1], 12, dtype)
    got = posembed.resample_grid(table, grid, new_grid, prefix=prefix, method=method, align=align)
    want = reference.resample_grid(table, grid, new_grid, prefix=prefix, method=method, align=align)
    assert_same(got, want)
    assert got.shape == (prefix + new_grid[0] * new_grid[1], 12)
    assert_same(got[:prefix], table[:prefix])  # prefix rows are bit-identical


@pytest.mark.parametrize("method", METHODS)
def test_same_grid_is_the_identity(rng, method):
    table = normal_table(rng, 1 + 9 * 7, 5, np.float32)
    got = posembed.resample_grid(table, (9, 7), (9, 7), prefix=1, method=method)
    np.testing.assert_array_equal(got, table)


def test_non_contiguous_and_d1(rng):
    base = normal_table(rng, 2 + 5 * 6, 8, np.float64)
    for view in (base[:, ::3], base[:, :1], np.asfortranarray(base)):
        got = posembed.resample_grid(view, (5, 6), (9, 4), prefix=2)
        want = reference.resample_grid(np.ascontiguousarray(view), (5, 6), (9, 4), prefix=2)
        assert_same(got, want)


def test_thread_count_does_not_change_bytes(rng, restore_threads):
    table = normal_table(rng, 1 + 32 * 32, 64, np.float32)
    want = reference.resample_grid(table, (32, 32), (64, 48), prefix=1)
    for threads in (1, 2, 3):
        posembed.set_num_threads(threads)
        assert_same(posembed.resample_grid(table, (32, 32), (64, 48), prefix=1), want)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("align", ALIGNS)
@pytest.mark.parametrize(("grid", "new_grid"), GRIDS, ids=str)
def test_matches_pytorch(rng, method, align, grid, new_grid):
    torch = torch_or_skip()
    d = 16
    table = normal_table(rng, 1 + grid[0] * grid[1], d, np.float32)
    got = posembed.resample_grid(table, grid, new_grid, prefix=1, method=method, align=align)
    src = torch.from_numpy(table[1:]).reshape(*grid, d).permute(2, 0, 1)[None]
    want = (
        torch.nn.functional.interpolate(
            src, size=new_grid, mode=method, align_corners=align == "corners"
        )[0]
        .permute(1, 2, 0)
        .reshape(-1, d)
    )
    # PyTorch computes source coordinates and weights in float32: per axis an
    # error of ~2 eps * size in the coordinate, times the weights' slope
    # (at most 1.5 per unit for Keys' kernel) over 4 taps, plus the sum's rounding.
    eps = np.finfo(np.float32).eps
    size = max(*grid, *new_grid)
    bound = eps * np.abs(table).max() * 16 * (2 * size + 4)
    np.testing.assert_allclose(got[1:], want.numpy(), rtol=0, atol=bound)
    assert_same(got[:1], table[:1])


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("align", ALIGNS)
@pytest.mark.parametrize("special", [np.inf, -np.inf, np.nan, -0.0])
def test_every_tap_is_summed_even_at_weight_zero(rng, method, align, special):
    """A source clamped at the edge still reads its neighbour with weight 0, as
    PyTorch does: an infinity or NaN there gives NaN (0 * inf), and a -0.0
    edge row plus 0 * neighbour gives 0.0, not -0.0."""
    grid, new_grid = (3, 4), (5, 7)
    table = np.zeros((grid[0] * grid[1], 2), np.float32)
    table[[1, 4, rng.integers(12)]] = special  # rows 1 and 4: neighbours of the corner
    if special == 0:
        table[:] = -0.0
        table[[1, 4, 7]] = rng.standard_normal((3, 2))
    got = posembed.resample_grid(table, grid, new_grid, method=method, align=align)
    with np.errstate(invalid="ignore"):  # NumPy warns of 0 * inf; the result is the point
        want = reference.resample_grid(table, grid, new_grid, method=method, align=align)
    assert_same(got, want)
    torch = pytest.importorskip("torch")  # PyTorch is optional; the twin is checked above
    src = torch.from_numpy(table).reshape(*grid, 2).permute(2, 0, 1)[None]
    ref = (
        torch.nn.functional.interpolate(
            src, size=new_grid, mode=method, align_corners=align == "corners"
        )[0]
        .permute(1, 2, 0)
        .reshape(-1, 2)
        .numpy()
    )
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    exact = (got == 0) & (ref == 0)  # PyTorch's weights differ in the last bits elsewhere
    np.testing.assert_array_equal(np.signbit(got[exact]), np.signbit(ref[exact]))


# -- antialias ------------------------------------------------------------------------

# Shrinking, growing, by a non-integer factor, non-square, to and from one row,
# and one axis unchanged.
AA_GRIDS = [
    ((24, 24), (16, 16)),
    ((24, 24), (48, 48)),
    ((24, 24), (37, 37)),
    ((14, 20), (7, 9)),
    ((16, 16), (64, 64)),
    ((7, 7), (3, 3)),
    ((1, 1), (5, 5)),
    ((5, 5), (1, 1)),
    ((14, 20), (14, 9)),
    ((6, 4), (13, 4)),
]


@pytest.mark.parametrize("dtype", FLOAT_TABLE_DTYPES, ids=str)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(("grid", "new_grid"), AA_GRIDS, ids=str)
@pytest.mark.parametrize("prefix", [0, 1, 2])
def test_antialias_matches_reference(rng, dtype, method, grid, new_grid, prefix):
    table = normal_table(rng, prefix + grid[0] * grid[1], 6, dtype)
    kw = {"prefix": prefix, "method": method, "antialias": True}
    got = posembed.resample_grid(table, grid, new_grid, **kw)
    assert_same(got, reference.resample_grid(table, grid, new_grid, **kw))
    assert_same(got[:prefix], table[:prefix])


@settings(max_examples=120, deadline=None)
@given(
    grid=st.tuples(st.integers(1, 12), st.integers(1, 12)),
    new_grid=st.tuples(st.integers(1, 30), st.integers(1, 30)),
    prefix=st.integers(0, 2),
    cols=st.integers(1, 9),
    method=st.sampled_from(METHODS),
    dtype=st.sampled_from(FLOAT_TABLE_DTYPES),
    seed=st.integers(0, 2**32 - 1),
)
def test_antialias_hypothesis_matches_reference(grid, new_grid, prefix, cols, method, dtype, seed):
    table = normal_table(np.random.default_rng(seed), prefix + grid[0] * grid[1], cols, dtype)
    kw = {"prefix": prefix, "method": method, "antialias": True}
    got = posembed.resample_grid(table, grid, new_grid, **kw)
    assert_same(got, reference.resample_grid(table, grid, new_grid, **kw))


def _aa_taps(size: int, new_size: int, method: str) -> int:
    """The most taps an antialiased output reads along an axis (PyTorch's bound)."""
    scale = size / new_size
    half = 2 if method == "bicubic" else 1
    return 2 * math.ceil(half * max(scale, 1.0)) + 1


def _timm_resample(torch, table, prefix, grid, new_grid, method):
    """timm's resample_abs_pos_embed with its defaults, on a (1, N, d) pos_embed."""
    pos = torch.from_numpy(table)[None]
    d = pos.shape[-1]
    head, grid_rows = pos[:, :prefix], pos[:, prefix:]
    g = grid_rows.reshape(1, *grid, d).permute(0, 3, 1, 2)
    g = torch.nn.functional.interpolate(
        g, size=new_grid, mode=method, antialias=True, align_corners=False
    )
    g = g.permute(0, 2, 3, 1).reshape(1, -1, d)
    return torch.cat([head, g], dim=1)[0].numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(("grid", "new_grid"), AA_GRIDS, ids=str)
@pytest.mark.parametrize("prefix", [0, 1, 2])
def test_antialias_matches_pytorch(rng, dtype, method, grid, new_grid, prefix):
    torch = torch_or_skip()
    table = normal_table(rng, prefix + grid[0] * grid[1], 16, dtype)
    got = posembed.resample_grid(
        table, grid, new_grid, prefix=prefix, method=method, antialias=True
    )
    want = _timm_resample(torch, table, prefix, grid, new_grid, method)
    # PyTorch computes the centres, the filter's arguments and the normalised
    # weights in the table's type: an error of ~2 eps * size in a coordinate,
    # times the filters' slope (at most 1.5 per unit for either), summed over the
    # taps over their total (at most 2 * half + 1 = 5 with the support's
    # stretch), doubled by the normalisation; per axis, two axes. Plus the
    # rounding of each pass's sum of up to `taps` terms (weights' |sum| < 1.5).
    eps = np.finfo(dtype).eps
    size = max(*grid, *new_grid)
    taps = max(_aa_taps(grid[0], new_grid[0], method), _aa_taps(grid[1], new_grid[1], method))
    slope = 2 * 1.5 * 5 * 2 * size
    bound = eps * np.abs(table).max() * 2 * (slope + 1.5 * taps)
    np.testing.assert_allclose(got, want, rtol=0, atol=bound)
    assert_same(got[:prefix], table[:prefix])


@pytest.mark.parametrize("method", METHODS)
def test_antialias_differs_from_the_plain_filter(rng, method):
    """Not the plain filter under another name: shrinking, the support widens;
    even growing 24 -> 48, bicubic's A = -0.5 differs from -0.75 (somewhere
    by more than 0.05 on N(0, 1) values)."""
    table = normal_table(rng, 24 * 24, 8, np.float32)
    for new_grid in ((16, 16), (48, 48)):
        aa = posembed.resample_grid(table, (24, 24), new_grid, method=method, antialias=True)
        plain = posembed.resample_grid(table, (24, 24), new_grid, method=method)
        if method == "bilinear" and new_grid == (48, 48):
            # growing, the triangle reaches the plain filter's two rows with its
            # weights (quarters here, exact in any type), so the bytes agree
            assert_same(aa, plain)
        else:
            assert np.abs(aa - plain).max() > 0.05


@pytest.mark.parametrize("method", METHODS)
def test_antialias_same_grid_is_the_identity(rng, method):
    table = normal_table(rng, 1 + 9 * 7, 5, np.float32)
    table[5] = np.inf  # kept as it is: an unchanged axis is not filtered
    got = posembed.resample_grid(table, (9, 7), (9, 7), prefix=1, method=method, antialias=True)
    assert_same(got, table)


@pytest.mark.parametrize("method", METHODS)
def test_antialias_leaves_an_unchanged_axis_alone(rng, method):
    """A (4, 6) -> (4, 3) resample filters along x only, as PyTorch skips an
    axis whose size does not change: an infinity reaches its own grid row and
    no other, where a filter along y would spread NaN (0 * inf) to the rest."""
    grid, new_grid = (4, 6), (4, 3)
    table = normal_table(rng, grid[0] * grid[1], 2, np.float32)
    table[1 * 6 + 2] = np.inf  # grid row 1
    got = posembed.resample_grid(table, grid, new_grid, method=method, antialias=True)
    rows = got.reshape(*new_grid, 2)
    assert np.isfinite(rows[[0, 2, 3]]).all()
    assert not np.isfinite(rows[1]).all()
    torch = pytest.importorskip("torch")  # PyTorch is optional; the twin is checked above
    want = _timm_resample(torch, table, 0, grid, new_grid, method)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))


def test_antialias_thread_count_does_not_change_bytes(rng, restore_threads):
    table = normal_table(rng, 1 + 24 * 24, 32, np.float32)
    want = reference.resample_grid(table, (24, 24), (16, 37), prefix=1, antialias=True)
    for threads in (1, 2, 3):
        posembed.set_num_threads(threads)
        got = posembed.resample_grid(table, (24, 24), (16, 37), prefix=1, antialias=True)
        assert_same(got, want)


def test_antialias_non_contiguous_tables(rng):
    base = normal_table(rng, 2 + 5 * 6, 8, np.float64)
    for view in (base[:, ::3], base[::-1], np.asfortranarray(base)):
        got = posembed.resample_grid(view, (5, 6), (3, 11), prefix=2, antialias=True)
        want = reference.resample_grid(
            np.ascontiguousarray(view), (5, 6), (3, 11), prefix=2, antialias=True
        )
        assert_same(got, want)


BAD = [
    (
        "rows do not match",
        np.zeros((10, 2), np.float32),
        (3, 3),
        (4, 4),
        {},
        ValueError,
        r"10 rows but prefix \+ H \* W = 0 \+ 3 \* 3 = 9",
    ),
    (
        "prefix mismatch",
        np.zeros((10, 2), np.float32),
        (3, 3),
        (4, 4),
        {"prefix": 2},
        ValueError,
        "11",
    ),
    (
        "negative prefix",
        np.zeros((9, 2), np.float32),
        (3, 3),
        (4, 4),
        {"prefix": -1},
        ValueError,
        "prefix",
    ),
    ("bad grid", np.zeros((9, 2), np.float32), (3,), (4, 4), {}, TypeError, "grid"),
    ("zero new grid", np.zeros((9, 2), np.float32), (3, 3), (0, 4), {}, ValueError, "new_grid"),
    (
        "bad method",
        np.zeros((9, 2), np.float32),
        (3, 3),
        (4, 4),
        {"method": "nearest"},
        ValueError,
        "'bilinear', 'bicubic'",
    ),
    (
        "bad align",
        np.zeros((9, 2), np.float32),
        (3, 3),
        (4, 4),
        {"align": "scale"},
        ValueError,
        "'half_pixel', 'corners'",
    ),
    ("int table", np.zeros((9, 2), np.int64), (3, 3), (4, 4), {}, TypeError, "float dtype"),
    (
        "antialias not a bool",
        np.zeros((9, 2), np.float32),
        (3, 3),
        (4, 4),
        {"antialias": 1},
        TypeError,
        "antialias must be True or False; got 1",
    ),
    (
        "antialias with corners",
        np.zeros((9, 2), np.float32),
        (3, 3),
        (4, 4),
        {"antialias": True, "align": "corners"},
        ValueError,
        "antialias=True needs align='half_pixel'.*got align='corners'",
    ),
    ("3-D table", np.zeros((3, 3, 2), np.float32), (3, 3), (4, 4), {}, ValueError, "2-D"),
]


@pytest.mark.parametrize(
    ("table", "grid", "new_grid", "kw", "exc", "text"),
    [b[1:] for b in BAD],
    ids=[b[0] for b in BAD],
)
def test_bad_input(table, grid, new_grid, kw, exc, text):
    with pytest.raises(exc, match=text):
        posembed.resample_grid(table, grid, new_grid, **kw)
    with pytest.raises(exc):
        reference.resample_grid(table, grid, new_grid, **kw)


def test_overflowing_grids_are_refused():
    table = np.zeros((5, 3), np.float32)
    with pytest.raises(ValueError, match="too large"):
        posembed.resample_grid(table, (2, 2), (2**32, 2**32), prefix=1)


def test_broadcast_table(rng):
    row = normal_table(rng, 1, 4, np.float32)
    table = np.broadcast_to(row, (1 + 6 * 5, 4))
    got = posembed.resample_grid(table, (6, 5), (9, 9), prefix=1)
    assert_same(got, reference.resample_grid(np.ascontiguousarray(table), (6, 5), (9, 9), prefix=1))


@pytest.mark.parametrize("d", [64, 100, 130])
@pytest.mark.parametrize(
    ("grid", "new_grid", "antialias"),
    [
        ((6, 7), (13, 11), False),
        ((24, 24), (16, 16), True),  # a few taps an output
        ((40, 40), (3, 3), True),  # more taps than a register sum takes at once
    ],
    ids=str,
)
def test_wide_float_rows_match_reference(rng, d, grid, new_grid, antialias):
    """Rows of whole vectors and a tail, summed in registers tap after tap: the
    same bits as the twin's one tap at a time."""
    table = normal_table(rng, 1 + grid[0] * grid[1], d, np.float32)
    kw = {"prefix": 1, "method": "bicubic", "antialias": antialias}
    got = posembed.resample_grid(table, grid, new_grid, **kw)
    assert_same(got, reference.resample_grid(table, grid, new_grid, **kw))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64], ids=str)
@pytest.mark.parametrize(
    ("grid", "new_grid", "align"),
    [
        ((24, 9), (48, 17), "half_pixel"),  # long rows cut in chunks
        ((5, 24), (23, 48), "corners"),
        ((10, 6), (11, 6), "half_pixel"),  # an axis of the same size: a step every output
    ],
    ids=str,
)
@pytest.mark.parametrize("d", [769, 1031])
def test_four_outputs_at_once_and_rows_in_chunks_keep_the_bytes(
    rng, dtype, grid, new_grid, align, d, tiny_thresholds, restore_threads
):
    """Upsampled axes make four outputs in one pass over the rows they share
    (these grids meet every pattern of steps between them, the borders'
    repeated rows included), and long rows are resampled a chunk at a time:
    the twin's bytes, infinities, NaN and -0.0 included, on any thread count."""
    table = normal_table(rng, 1 + grid[0] * grid[1], d, dtype)
    table[3, ::7] = np.inf
    table[8, 5::11] = -np.inf
    table[11, ::5] = -0.0
    table[-2, 3::13] = np.nan
    for method in METHODS:
        kw = {"prefix": 1, "method": method, "align": align}
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, as posembed computes
            want = reference.resample_grid(table, grid, new_grid, **kw)
        for threads in (1, 2, 5):
            posembed.set_num_threads(threads)
            assert_same(posembed.resample_grid(table, grid, new_grid, **kw), want)


@pytest.mark.parametrize("dtype", [np.float16, np.float32], ids=str)
@pytest.mark.parametrize("new_grid", [(9, 1), (5, 3), (11, 7), (4, 16)], ids=str)
def test_column_and_two_pass_orders_give_the_same_bytes(
    rng, dtype, new_grid, tiny_thresholds, restore_threads
):
    """A new grid of columns enough for every thread is resampled a column at a
    time, a narrower one in two passes over the whole grid: the bytes are the
    twin's on any thread count, through either order."""
    table = normal_table(rng, 1 + 6 * 5, 100, dtype)
    want = reference.resample_grid(table, (6, 5), new_grid, prefix=1)
    for threads in (1, 2, 3, 8):
        posembed.set_num_threads(threads)
        assert_same(posembed.resample_grid(table, (6, 5), new_grid, prefix=1), want)


@pytest.mark.parametrize(("height", "width"), [(384, 384), (256, 448), (160, 160)])
def test_hf_vits_interpolate_pos_encoding_is_the_default_pytorch_bicubic(height, width):
    # The ViT guide: the default (bicubic, no antialiasing) is the resampling
    # HF ViT's interpolate_pos_encoding performs; antialiasing is another one.
    torch = torch_or_skip()
    vit = pytest.importorskip("transformers.models.vit.modeling_vit")
    config = vit.ViTConfig(hidden_size=32, image_size=224, patch_size=16)
    embeddings = vit.ViTEmbeddings(config)
    table = np.random.default_rng(8).standard_normal((1, 1 + 14 * 14, 32)).astype(np.float32)
    with torch.no_grad():
        embeddings.position_embeddings.copy_(torch.from_numpy(table))
        grid = (height // 16, width // 16)
        tokens = torch.zeros(1, 1 + grid[0] * grid[1], 32)
        theirs = embeddings.interpolate_pos_encoding(tokens, height, width).numpy()[0]
    ours = posembed.resample_grid(table[0], (14, 14), grid, prefix=1)
    # PyTorch computes the weights in float32, posembed in float64
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-5)
    smooth = posembed.resample_grid(table[0], (14, 14), grid, prefix=1, antialias=True)
    assert np.abs(smooth - theirs).max() > 1e-2

"""interpolate and lerp against their reference twins and PyTorch."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posembed
from posembed import reference

from .conftest import FLOAT_TABLE_DTYPES, assert_same, normal_table, torch_or_skip

ALIGNS = ["scale", "half_pixel", "corners"]
LENGTHS = [1, 2, 7, 64, 100, 128, 129, 256, 384, 1000]


@pytest.mark.parametrize("dtype", FLOAT_TABLE_DTYPES, ids=str)
@pytest.mark.parametrize("align", ALIGNS)
@pytest.mark.parametrize("length", LENGTHS)
def test_matches_reference(rng, dtype, align, length):
    table = normal_table(rng, 128, 24, dtype)
    got = posembed.interpolate(table, length, align=align)
    assert_same(got, reference.interpolate(table, length, align=align))


@pytest.mark.parametrize("align", ALIGNS)
@pytest.mark.parametrize(("rows", "cols"), [(1, 5), (5, 1), (1, 1), (2, 3), (3, 0)])
def test_tiny_tables(rng, align, rows, cols):
    table = normal_table(rng, rows, cols, np.float32)
    for length in (1, 2, 3, 10):
        got = posembed.interpolate(table, length, align=align)
        assert_same(got, reference.interpolate(table, length, align=align))
    if rows == 1:  # one row: every output row is that row
        assert_same(posembed.interpolate(table, 9, align=align), np.repeat(table, 9, axis=0))


@pytest.mark.parametrize("align", ALIGNS)
def test_same_length_copies_exactly(rng, align):
    table = normal_table(rng, 50, 8, np.float32)
    table[3, 2] = np.nan
    table[4, 1] = np.inf
    assert_same(posembed.interpolate(table, 50, align=align), table)


def test_scale_multiples_land_on_rows(rng):
    table = normal_table(rng, 96, 16, np.float32)
    for k in (2, 3, 7):
        got = posembed.interpolate(table, 96 * k)
        assert_same(got[::k], table)


def test_seed_example_scale_half():
    # L = 128 -> 256: new positions 0, 64, 128, 192, 255 map to 0.0, 32.0, 64.0,
    # 96.0, 127.5 (scale 0.50); 127.5 clamps its ceiling to row 127.
    rows = np.arange(128, dtype=np.float64)[:, None] * np.ones((1, 3))
    got = posembed.interpolate(rows, 256)
    np.testing.assert_array_equal(got[[0, 64, 128, 192, 255], 0], [0.0, 32.0, 64.0, 96.0, 127.0])
    np.testing.assert_array_equal(got[[1, 3, 253], 0], [0.5, 1.5, 126.5])
    # position interpolation's textbook loop, written out
    table = np.random.default_rng(42).standard_normal((128, 64))
    seed = np.zeros((256, 64))
    for i in range(256):
        orig = i * (128 / 256)
        lo, hi = int(np.floor(orig)), min(int(np.ceil(orig)), 127)
        w = orig - lo
        seed[i] = table[lo] if lo == hi else (1 - w) * table[lo] + w * table[hi]
    assert_same(posembed.interpolate(table, 256), seed)


@pytest.mark.parametrize("align", ALIGNS)
def test_non_contiguous_tables(rng, align):
    base = normal_table(rng, 60, 20, np.float32)
    for view in (base[::-1], base[::2], base[:, ::2], np.asfortranarray(base), base[:, 3:11]):
        got = posembed.interpolate(view, 77, align=align)
        assert_same(got, reference.interpolate(np.ascontiguousarray(view), 77, align=align))


def test_big_endian_and_float64_positions(rng):
    table = normal_table(rng, 30, 6, np.float32).astype(">f4")
    assert_same(posembed.interpolate(table, 45), reference.interpolate(table.astype("<f4"), 45))


@pytest.mark.parametrize("length", [300_000, 3])  # parallel + streaming, and tiny
def test_thread_count_does_not_change_bytes(rng, restore_threads, length):
    table = normal_table(rng, 1000, 16, np.float32)
    expected = reference.interpolate(table, length, align="half_pixel")
    for threads in (1, 2, 3):
        posembed.set_num_threads(threads)
        assert_same(posembed.interpolate(table, length, align="half_pixel"), expected)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.integers(1, 40),
    cols=st.integers(0, 9),
    length=st.integers(1, 120),
    align=st.sampled_from(ALIGNS),
    dtype=st.sampled_from([np.float16, np.float32, np.float64]),
    seed=st.integers(0, 2**32 - 1),
)
def test_hypothesis_matches_reference(rows, cols, length, align, dtype, seed):
    table = normal_table(np.random.default_rng(seed), rows, cols, dtype)
    got = posembed.interpolate(table, length, align=align)
    assert_same(got, reference.interpolate(table, length, align=align))


@pytest.mark.parametrize("align", ["half_pixel", "corners"])
@pytest.mark.parametrize(("rows", "length"), [(128, 256), (128, 100), (2048, 8192), (7, 3), (5, 1)])
def test_matches_pytorch_linear(rng, align, rows, length):
    torch = torch_or_skip()
    table = normal_table(rng, rows, 16, np.float32)
    got = posembed.interpolate(table, length, align=align)
    src = torch.from_numpy(table).T[None]
    want = torch.nn.functional.interpolate(
        src, size=length, mode="linear", align_corners=align == "corners"
    )[0].T.numpy()
    # PyTorch computes source positions in float32: an error of ~2 eps * L in
    # s, times the largest difference of neighbouring rows, plus the blend's
    # own rounding.
    eps = np.finfo(np.float32).eps
    bound = eps * np.abs(table).max() * (4 * max(rows, length) + 8)
    np.testing.assert_allclose(got, want, rtol=0, atol=bound)


# ---------------------------------------------------------------- antialias

AA_LENGTHS = [(24, 16), (24, 48), (24, 37), (16, 64), (7, 3), (1, 5), (5, 1), (300, 77), (9, 9)]


@pytest.mark.parametrize("dtype", FLOAT_TABLE_DTYPES, ids=str)
@pytest.mark.parametrize(("rows", "length"), AA_LENGTHS)
def test_antialias_matches_reference(rng, dtype, rows, length):
    table = normal_table(rng, rows, 12, dtype)
    out = np.zeros((length, 12), dtype)
    got = posembed.interpolate(table, length, align="half_pixel", antialias=True, out=out)
    assert got is out
    assert_same(got, reference.interpolate(table, length, align="half_pixel", antialias=True))


@settings(max_examples=150, deadline=None)
@given(
    rows=st.integers(1, 60),
    cols=st.integers(0, 9),
    length=st.integers(1, 90),
    dtype=st.sampled_from(FLOAT_TABLE_DTYPES),
    seed=st.integers(0, 2**32 - 1),
)
def test_antialias_hypothesis_matches_reference(rows, cols, length, dtype, seed):
    table = normal_table(np.random.default_rng(seed), rows, cols, dtype)
    kw = {"align": "half_pixel", "antialias": True}
    assert_same(
        posembed.interpolate(table, length, **kw), reference.interpolate(table, length, **kw)
    )


def test_antialias_non_contiguous_tables(rng):
    base = normal_table(rng, 60, 20, np.float32)
    kw = {"align": "half_pixel", "antialias": True}
    for view in (base[::-1], base[::2], base[:, ::2], np.asfortranarray(base)):
        for length in (17, 77):
            got = posembed.interpolate(view, length, **kw)
            assert_same(got, reference.interpolate(np.ascontiguousarray(view), length, **kw))


def _antialias_pytorch(torch, table, length, antialias=True):
    """PyTorch's antialiased bilinear on the (1, d, 1, L) image."""
    src = torch.from_numpy(table).T[None, :, None, :]
    return torch.nn.functional.interpolate(
        src, size=(1, length), mode="bilinear", antialias=antialias, align_corners=False
    )[0, :, 0].T.numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
@pytest.mark.parametrize(("rows", "length"), AA_LENGTHS)
def test_antialias_matches_pytorch(rng, dtype, rows, length):
    torch = torch_or_skip()
    table = normal_table(rng, rows, 16, dtype)
    got = posembed.interpolate(table, length, align="half_pixel", antialias=True)
    want = _antialias_pytorch(torch, table, length)
    # PyTorch computes centres, filter arguments and normalised weights in the
    # table's type: ~2 eps * size in a coordinate, times the triangle's slope 1,
    # over the taps over their total (at most 3), doubled by the normalisation;
    # plus the rounding of a sum of up to `taps` terms.
    eps = np.finfo(dtype).eps
    size = max(rows, length)
    taps = 2 * math.ceil(max(rows / length, 1.0)) + 1
    bound = eps * np.abs(table).max() * (2 * 3 * 2 * size + taps)
    np.testing.assert_allclose(got, want, rtol=0, atol=bound)


@pytest.mark.parametrize(("rows", "length"), [(4096, 1000), (2000, 1999), (30_000, 7001)])
def test_antialias_against_pytorch_as_the_timm_guide_states(rng, rows, length):
    # docs/timm.md: PyTorch's antialiased bilinear on a one-row image (its
    # linear mode refuses antialias); float32 tables of up to 30,000 rows
    # within about 1e-3 on N(0, 1) values, float64 ones within about 1e-12.
    torch = torch_or_skip()
    with pytest.raises(ValueError, match="Anti-alias"):
        torch.nn.functional.interpolate(
            torch.zeros(1, 1, rows), size=length, mode="linear", antialias=True
        )
    table = rng.standard_normal((rows, 8))
    for dtype, bound in ((np.float32, 2e-3), (np.float64, 1e-12)):
        t = table.astype(dtype)
        got = posembed.interpolate(t, length, align="half_pixel", antialias=True)
        assert np.abs(got - _antialias_pytorch(torch, t, length)).max() <= bound


@pytest.mark.parametrize(("rows", "length"), [(24, 48), (24, 37), (16, 64), (1, 5), (5, 7)])
def test_antialias_growing_is_plain_half_pixel(rng, rows, length):
    """Growing, the triangle is not stretched: the plain half_pixel blend,
    in PyTorch as here (to round-off: the weights are normalised)."""
    table = normal_table(rng, rows, 8, np.float32)
    aa = posembed.interpolate(table, length, align="half_pixel", antialias=True)
    plain = posembed.interpolate(table, length, align="half_pixel")
    eps = np.finfo(np.float32).eps
    bound = eps * np.abs(table).max() * 4  # one rounding of each of two weights, and the sum
    np.testing.assert_allclose(aa, plain, rtol=0, atol=bound)
    torch = pytest.importorskip("torch")  # PyTorch is optional; the twin is checked above
    want = _antialias_pytorch(torch, table, length, antialias=False)
    np.testing.assert_allclose(_antialias_pytorch(torch, table, length), want, rtol=0, atol=bound)


def test_antialias_shrinking_averages_the_rows_between(rng):
    """Shrinking 24 -> 8, the plain half_pixel blend lands exactly on every
    third row and sees only those (aliasing); the antialiased triangle,
    stretched to 3 rows each side, weighs them 1 against 2 * (2/3 + 1/3) for
    their neighbours: 1/3 inside, 1 / (8/3) at the cut borders."""
    table = np.zeros((24, 1), np.float32)
    table[1::3] = 1.0
    aa = posembed.interpolate(table, 8, align="half_pixel", antialias=True)
    plain = posembed.interpolate(table, 8, align="half_pixel")
    assert (plain == 1.0).all()
    np.testing.assert_allclose(aa[1:-1], 1 / 3, rtol=4 * np.finfo(np.float32).eps)
    np.testing.assert_allclose(aa[[0, -1]], 3 / 8, rtol=4 * np.finfo(np.float32).eps)


# ---------------------------------------------------------------- lerp


@pytest.mark.parametrize("dtype", FLOAT_TABLE_DTYPES, ids=str)
def test_lerp_matches_reference(rng, dtype):
    table = normal_table(rng, 50, 12, dtype)
    pos = rng.uniform(0, 49, (3, 4, 5))
    pos[0, 0, :3] = [0.0, 49.0, 17.0]
    assert_same(posembed.lerp(table, pos), reference.lerp(table, pos))


def test_lerp_is_interpolate_without_the_table(rng):
    # T = 4 L keeps the positions i * L / T = i / 4 exact in binary; the last
    # three rows of interpolate lie past L - 1 (clamped there), outside lerp's range.
    table = normal_table(rng, 64, 10, np.float32)
    got = posembed.lerp(table, np.arange(253) * 64 / 256)
    assert_same(got, posembed.interpolate(table, 256)[:253])


@pytest.mark.parametrize(
    "positions", [3, 3.25, [], [[1.5, 2]], np.float32([0.5, 9]), np.arange(10, dtype=np.int8)]
)
def test_lerp_position_kinds(rng, positions):
    table = normal_table(rng, 10, 4, np.float64)
    got = posembed.lerp(table, positions)
    assert got.shape == (*np.shape(positions), 4)
    assert_same(got, reference.lerp(table, positions))


@pytest.mark.parametrize(
    ("value", "text"), [(np.nan, "nan"), (np.inf, "inf"), (-0.5, "-0.5"), (9.001, "9.001")]
)
def test_lerp_rejects_bad_positions_by_value_and_index(value, text):
    table = np.zeros((10, 3), np.float32)
    pos = np.array([[1.0, 2.0], [3.0, value]])
    with pytest.raises(ValueError, match=rf"position {text} at positions\[1, 1\].*\[0, 9\]"):
        posembed.lerp(table, pos)
    with pytest.raises(ValueError, match="position"):
        reference.lerp(table, pos)


def test_float16_and_bfloat16_round_trip_every_value():
    # (x + x) / 2 is exact in float32, so every stored value must come back.
    all_halves = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    dtypes = [(np.float16, all_halves)]
    ml_dtypes = pytest.importorskip("ml_dtypes")
    all_bf16 = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(ml_dtypes.bfloat16)
    dtypes.append((ml_dtypes.bfloat16, all_bf16))
    for dtype, values in dtypes:
        table = np.stack([values, values]).astype(dtype)
        got = posembed.lerp(table, [0.5])[0]
        finite = np.isfinite(values.astype(np.float32))
        assert got.view(np.uint16)[finite].tobytes() == values.view(np.uint16)[finite].tobytes()
        assert np.isinf(got.astype(np.float32)[np.isinf(values.astype(np.float32))]).all()
        assert np.isnan(got.astype(np.float32)[np.isnan(values.astype(np.float32))]).all()


# ---------------------------------------------------------------- errors

BAD = [
    ("1-D table", np.zeros(4, np.float32), 8, {}, ValueError, "2-D"),
    ("int table", np.zeros((4, 2), np.int32), 8, {}, TypeError, "float dtype"),
    ("empty table", np.zeros((0, 2), np.float32), 8, {}, ValueError, "at least one row"),
    ("zero length", np.zeros((4, 2), np.float32), 0, {}, ValueError, "length"),
    ("negative length", np.zeros((4, 2), np.float32), -3, {}, ValueError, "length"),
    ("float length", np.zeros((4, 2), np.float32), 8.0, {}, TypeError, "length"),
    (
        "bad align",
        np.zeros((4, 2), np.float32),
        8,
        {"align": "edges"},
        ValueError,
        "'scale', 'half_pixel', 'corners'",
    ),
    (
        "antialias not a bool",
        np.zeros((4, 2), np.float32),
        8,
        {"antialias": "yes", "align": "half_pixel"},
        TypeError,
        "antialias must be True or False; got 'yes'",
    ),
    (
        "antialias with scale",
        np.zeros((4, 2), np.float32),
        8,
        {"antialias": True},
        ValueError,
        "antialias=True needs align='half_pixel'.*got align='scale'",
    ),
    (
        "antialias with corners",
        np.zeros((4, 2), np.float32),
        8,
        {"antialias": True, "align": "corners"},
        ValueError,
        "antialias=True needs align='half_pixel'.*got align='corners'",
    ),
]


@pytest.mark.parametrize(
    ("table", "length", "kw", "exc", "text"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_interpolate_bad_input(table, length, kw, exc, text):
    with pytest.raises(exc, match=text):
        posembed.interpolate(table, length, **kw)
    with pytest.raises(exc):
        reference.interpolate(table, length, **kw)


def test_inputs_never_modified(rng):
    table = normal_table(rng, 20, 5, np.float32)
    pos = rng.uniform(0, 19, 30)
    before, pos_before = table.copy(), pos.copy()
    posembed.interpolate(table, 33)
    posembed.lerp(table, pos)
    assert_same(table, before)
    assert_same(pos, pos_before)


@pytest.mark.parametrize("dtype", FLOAT_TABLE_DTYPES, ids=str)
def test_out_given_plain_and_streaming(rng, restore_threads, dtype, tiny_thresholds):
    table = normal_table(rng, 40, 33, dtype)
    want = reference.interpolate(table, 150, align="corners")
    pos = rng.uniform(0, 39, 70)
    for threads in (1, 2):
        posembed.set_num_threads(threads)
        out = np.empty((150, 33), dtype)
        assert posembed.interpolate(table, 150, align="corners", out=out) is out
        assert_same(out, want)
        lout = np.empty((70, 33), dtype)
        assert posembed.lerp(table, pos, out=lout) is lout
        assert_same(lout, reference.lerp(table, pos))
        # a fresh result of lerp streams too (its reads are at random)
        assert_same(posembed.lerp(table, pos), reference.lerp(table, pos))


def test_out_errors_leave_out_untouched(rng):
    table = normal_table(rng, 10, 4, np.float32)
    out = np.full((5, 4), 7.0, np.float32)
    with pytest.raises(ValueError, match=r"position 9.5 at positions\[4\]"):
        posembed.lerp(table, [1.0, 2.0, 3.0, 4.0, 9.5], out=out)
    assert (out == 7).all()
    with pytest.raises(ValueError, match="shape"):
        posembed.interpolate(table, 6, out=out)
    with pytest.raises(TypeError, match="dtype"):
        posembed.interpolate(table, 5, out=out.astype(np.float64))
    with pytest.raises(ValueError, match="overlap table"):
        posembed.interpolate(table, 10, out=table)
    with pytest.raises(ValueError, match="out"):
        reference.interpolate(table, 10, out=table)
    assert (out == 7).all()


def test_sizes_that_would_overflow_are_refused():
    table = np.zeros((4, 3), np.float32)
    for length in (2**62, 2**63):
        with pytest.raises(ValueError, match="too large"):
            posembed.interpolate(table, length)
    with pytest.raises(ValueError, match="too large"):
        posembed.extend(table, 2**62)


def test_broadcast_and_empty_tables(rng):
    row = normal_table(rng, 1, 5, np.float32)
    table = np.broadcast_to(row, (30, 5))  # zero row stride
    assert_same(posembed.interpolate(table, 70), reference.interpolate(table, 70))
    empty = np.zeros((0, 3), np.float32)
    assert posembed.lerp(empty, []).shape == (0, 3)
    assert_same(posembed.lerp(empty, []), reference.lerp(empty, []))
    with pytest.raises(ValueError, match="no rows"):
        posembed.lerp(empty, [0.0])


def test_misaligned_out_is_refused():
    table = np.zeros((4, 3), np.float32)
    raw = np.zeros(4 * 6 * 3 + 1, np.uint8)
    out = raw[1:].view(np.float32).reshape(6, 3)
    assert not out.flags.aligned
    with pytest.raises(ValueError, match="aligned"):
        posembed.interpolate(table, 6, out=out)

"""gather against its reference twin, numpy.take, and its error contract."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import posembed
from posembed import _core, reference

from .conftest import POSITION_DTYPES, TABLE_DTYPES, assert_same, random_table

MODES = ["raise", "clip", "wrap"]


def both(table: Any, positions: Any, **kw: Any) -> np.ndarray:
    """posembed.gather, after checking that the reference gives the same bytes."""
    fast = posembed.gather(table, positions, **kw)
    kw.pop("out", None)
    assert_same(fast, reference.gather(table, positions, **kw))
    return fast


# ---------------------------------------------------------------- values


@pytest.mark.parametrize("pos_dtype", POSITION_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("table_dtype", TABLE_DTYPES, ids=str)
def test_every_table_and_position_dtype(rng, table_dtype, pos_dtype):
    table = random_table(rng, 100, 9, table_dtype)
    pos = rng.integers(0, 100, (3, 17)).astype(pos_dtype)
    got = both(table, pos)
    assert_same(got, np.take(table, pos.astype(np.int64), axis=0))


@pytest.mark.parametrize("mode", ["clip", "wrap"])
@pytest.mark.parametrize("pos_dtype", POSITION_DTYPES, ids=lambda d: np.dtype(d).name)
def test_clip_and_wrap_match_numpy_take(rng, mode, pos_dtype):
    info = np.iinfo(pos_dtype)
    table = random_table(rng, 37, 5, np.float32)
    values = [0, 1, 36, 37, 38, 100, info.max, info.min, info.max - 1]
    if info.min < 0:
        values += [-1, -36, -37, -38, -100]
    pos = np.array(values, dtype=pos_dtype)
    got = both(table, pos, mode=mode)
    # numpy.take casts uint64 to intp, which wraps huge values; and its wrap
    # mode adds L in a loop until a value is non-negative, which takes hours
    # for int64's minimum. Compare with it where it is usable.
    usable = np.abs(pos.astype(np.float64)) < 2**20 if mode == "wrap" else slice(None)
    if pos_dtype != np.uint64:
        expected = np.take(table, pos[usable].astype(np.int64), axis=0, mode=mode)
        assert_same(got[usable], expected)


def test_numpy_documents_take_buffering_out_in_raise_mode():
    # the README's reason for numpy.take's speed with out=, in NumPy's own words
    assert "`out` is always buffered if `mode='raise'`" in " ".join(np.take.__doc__.split())


def test_uint64_beyond_int64_is_reduced_exactly(rng):
    table = random_table(rng, 10, 3, np.float64)
    big = np.array([2**64 - 1, 2**63, 2**63 + 5], dtype=np.uint64)
    assert_same(posembed.gather(table, big, mode="clip"), table[[9, 9, 9]])
    expected_rows = [(2**64 - 1) % 10, 2**63 % 10, (2**63 + 5) % 10]
    assert_same(posembed.gather(table, big, mode="wrap"), table[expected_rows])
    with pytest.raises(IndexError, match="18446744073709551615"):
        posembed.gather(table, big)


@pytest.mark.parametrize(
    "positions",
    [
        5,
        np.int16(7),
        np.uint64(3),
        [],
        [[]],
        [1, 2, 3],
        [[0, 1], [2, 3]],
        np.array(4),
        np.zeros((0,), np.int64),
        np.array(5, dtype=">i8"),
        np.zeros((2, 0, 3), np.uint8),
        np.arange(24).reshape(2, 3, 4) % 11,
    ],
    ids=repr,
)
def test_position_shapes_and_kinds(rng, positions):
    table = random_table(rng, 11, 6, np.float32)
    got = both(table, positions)
    assert got.shape == (*np.shape(positions), 6)


@pytest.mark.parametrize(
    "view",
    [
        lambda t: t[::-1],
        lambda t: t[:, ::-1],
        lambda t: t[::2, ::3],
        lambda t: np.asfortranarray(t),
        lambda t: t.T.copy().T,
        lambda t: np.stack([t, t], axis=1)[:, 1, :],
        lambda t: t[3:7],
        lambda t: t[:, :0],
    ],
    ids=[
        "rows reversed",
        "cols reversed",
        "both strided",
        "fortran",
        "transposed copy",
        "3-D slice",
        "row slice",
        "zero columns",
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.dtype("S7")], ids=str)
def test_non_contiguous_tables(rng, view, dtype):
    table = view(random_table(rng, 12, 10, dtype))
    pos = rng.integers(0, table.shape[0], 40)
    assert_same(both(table, pos), table[pos])


@pytest.mark.parametrize(
    "view",
    [
        lambda p: p[::-1],
        lambda p: p[::3],
        lambda p: p.reshape(6, 5).T,
        lambda p: p.astype(">i4"),
        lambda p: p.astype(">u8")[::-2],
    ],
    ids=["reversed", "strided", "transposed", "big-endian", "big-endian strided"],
)
def test_non_contiguous_positions(rng, view):
    table = random_table(rng, 30, 4, np.float64)
    pos = view(rng.integers(0, 30, 30))
    assert_same(both(table, pos), table[np.asarray(pos, np.int64)])


@pytest.mark.parametrize("mode", MODES)
def test_out_is_filled_and_returned(rng, mode):
    table = random_table(rng, 50, 8, np.float32)
    pos = rng.integers(-60, 60, (4, 5)) if mode != "raise" else rng.integers(0, 50, (4, 5))
    out = np.empty((4, 5, 8), np.float32)
    got = posembed.gather(table, pos, mode=mode, out=out)
    assert got is out
    assert_same(out, reference.gather(table, pos, mode=mode))


def test_out_may_be_a_view_of_a_larger_buffer(rng):
    table = random_table(rng, 20, 8, np.int32)
    buf = np.zeros((3, 10, 8), np.int32)
    pos = rng.integers(0, 20, 10)
    posembed.gather(table, pos, out=buf[1])
    assert_same(buf[1], table[pos])
    assert not buf[0].any()
    assert not buf[2].any()


# Sizes that take the parallel path (output >= 256 KiB) and the streaming
# path (output >= 8 MiB), with rows that do and do not fill cache lines.
BIG = [(2048, 1024, np.float32, 3000), (700, 33, np.float64, 40000), (512, 3, np.int8, 300000)]


@pytest.mark.parametrize(("rows", "cols", "dtype", "n"), BIG)
@pytest.mark.parametrize("mode", MODES)
def test_large_results_identical_for_any_thread_count(
    rng, restore_threads, rows, cols, dtype, n, mode
):
    table = random_table(rng, rows, cols, dtype)
    pos = rng.integers(
        -rows // 2 if mode != "raise" else 0, rows + (rows // 2) * (mode != "raise"), n
    )
    expected = reference.gather(table, pos, mode=mode)
    for threads in (1, 2, 3):
        posembed.set_num_threads(threads)
        assert_same(posembed.gather(table, pos, mode=mode), expected)
        out = np.empty_like(expected)
        posembed.gather(table, pos, mode=mode, out=out)
        assert_same(out, expected)


def test_streaming_path_with_unaligned_rows_and_output(rng):
    table = random_table(rng, 300, 1001, np.uint8)  # 1001-byte rows split cache lines
    pos = rng.integers(0, 300, 20000)  # 20 MB of output
    buf = np.empty(pos.size * 1001 + 5, np.uint8)
    out = buf[5:].reshape(pos.size, 1001)  # misaligned by 5 bytes
    posembed.gather(table, pos, out=out)
    assert_same(out, table[pos])


def test_strided_table_on_the_parallel_path(rng, restore_threads):
    table = random_table(rng, 400, 600, np.float32)[:, ::2]
    pos = rng.integers(0, 400, 5000)
    for threads in (1, 2):
        posembed.set_num_threads(threads)
        assert_same(posembed.gather(table, pos), table[pos])


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    rows=st.integers(0, 40),
    cols=st.integers(0, 12),
    dtype=st.sampled_from([np.float32, np.float64, np.int16, np.uint8, np.complex64]),
    pos_dtype=st.sampled_from(POSITION_DTYPES),
    mode=st.sampled_from(MODES),
    pos_shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6),
    reverse=st.booleans(),
)
def test_hypothesis_matches_reference(data, rows, cols, dtype, pos_dtype, mode, pos_shape, reverse):
    table = np.arange(rows * cols).astype(dtype).reshape(rows, cols)
    if reverse:
        table = table[::-1]
    info = np.iinfo(pos_dtype)
    pos = data.draw(
        hnp.arrays(
            pos_dtype, pos_shape, elements=st.integers(max(info.min, -100), min(info.max, 100))
        )
    )
    try:
        expected = reference.gather(table, pos, mode=mode)
    except IndexError:
        with pytest.raises(IndexError):
            posembed.gather(table, pos, mode=mode)
        return
    assert_same(posembed.gather(table, pos, mode=mode), expected)


def test_bfloat16_rows_are_bit_identical(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    table = random_table(rng, 64, 16, ml_dtypes.bfloat16)
    pos = rng.integers(0, 64, 100)
    got = posembed.gather(table, pos)
    assert got.dtype == ml_dtypes.bfloat16
    assert got.view(np.uint16).tobytes() == table.view(np.uint16)[pos].tobytes()


# ---------------------------------------------------------------- errors


def test_out_of_range_message_names_value_index_and_range():
    table = np.zeros((128, 4), np.float32)
    pos = np.array([0, 50, 127, 3, 4, 128, 200])
    with pytest.raises(IndexError) as exc:
        posembed.gather(table, pos)
    msg = str(exc.value)
    assert "position 128 at positions[5]" in msg
    assert "128 rows" in msg
    assert "0..127" in msg
    assert "2 of 7 positions are out of range" in msg


def test_out_of_range_message_for_nd_negative_and_scalar():
    table = np.zeros((10, 2))
    pos = np.zeros((3, 4), np.int8)
    pos[2, 1] = -1
    with pytest.raises(IndexError, match=r"position -1 at positions\[2, 1\] .* 10 rows"):
        posembed.gather(table, pos)
    with pytest.raises(IndexError, match=r"^position 10 is out of range .*0\.\.9"):
        posembed.gather(table, 10)
    with pytest.raises(IndexError, match=r"position 1180591620717411303424 at positions\[1\]"):
        posembed.gather(table, [1, 2**70])


def test_object_arrays_of_python_ints_are_positions():
    table = np.arange(20.0).reshape(10, 2)
    assert_same(both(table, np.array([np.int64(1), 3], dtype=object)), table[[1, 3]])
    pos = np.array([1, 2**70, 3], dtype=object)
    assert_same(both(table, pos, mode="clip"), table[[1, 9, 3]])
    assert_same(both(table, pos[[0, 2]]), table[[1, 3]])
    for bad in (np.array([1, None], dtype=object), np.array([1, 2.0], dtype=object)):
        with pytest.raises(TypeError, match="positions must be integers"):
            posembed.gather(table, bad)
        with pytest.raises(TypeError):
            reference.gather(table, bad)


def test_huge_python_ints_report_the_first_bad_position():
    table = np.zeros((10, 2))
    with pytest.raises(IndexError, match=r"position 50 at positions\[0\].*2 of 2 positions"):
        posembed.gather(table, [50, 2**70])
    with pytest.raises(IndexError, match=r"position 18446744073709551615 at positions\[0\]"):
        posembed.gather(table, [2**64 - 1, -1])
    with pytest.raises(IndexError, match="no row to clip or wrap to"):
        posembed.gather(np.zeros((0, 2)), [2**70], mode="wrap")


def test_out_must_not_overlap_the_callers_positions():
    # strided positions are copied before the kernel; out may still alias the original
    buf = np.arange(32, dtype=np.int64) % 4
    pos = buf[::4]
    before = pos.copy()
    with pytest.raises(ValueError, match="overlap positions"):
        posembed.gather(np.full((4, 2), 7, np.int64), pos, out=buf[:16].reshape(8, 2))
    assert_same(pos, before)


def test_unaligned_positions(rng):
    table = random_table(rng, 50, 3, np.float32)
    raw = np.zeros(8 * 20 + 1, np.uint8)
    pos = raw[1:].view(np.int64)
    pos[:] = rng.integers(0, 50, 20)
    assert not pos.flags.aligned
    assert_same(both(table, pos), table[pos])


def test_huge_python_ints_clip_and_wrap_exactly():
    table = np.arange(20.0).reshape(10, 2)
    assert_same(posembed.gather(table, [2**70, -(2**70)], mode="clip"), table[[9, 0]])
    assert_same(posembed.gather(table, [2**70 + 3], mode="wrap"), table[[(2**70 + 3) % 10]])
    assert_same(reference.gather(table, [2**70, -(2**70)], mode="clip"), table[[9, 0]])


@pytest.mark.parametrize("mode", MODES)
def test_empty_table(mode):
    table = np.zeros((0, 3), np.float32)
    assert posembed.gather(table, [], mode=mode).shape == (0, 3)
    with pytest.raises(IndexError, match="0 rows"):
        posembed.gather(table, [0], mode=mode)
    with pytest.raises(IndexError):
        reference.gather(table, [0], mode=mode)


BAD_CALLS = [
    # (description, table, positions, kwargs, exception, words the message must contain)
    ("1-D table", np.zeros(5), [0], {}, ValueError, ["table", "2-D", "(5,)"]),
    ("3-D table", np.zeros((2, 2, 2)), [0], {}, ValueError, ["table", "2-D"]),
    ("object table", np.array([[object()]]), [0], {}, TypeError, ["table", "object"]),
    ("float positions", np.zeros((4, 2)), np.array([1.0]), {}, TypeError, ["positions", "float64"]),
    ("bool positions", np.zeros((4, 2)), np.array([True]), {}, TypeError, ["positions", "bool"]),
    ("string positions", np.zeros((4, 2)), ["a"], {}, TypeError, ["positions"]),
    ("None positions", np.zeros((4, 2)), None, {}, TypeError, ["positions"]),
    ("bad mode", np.zeros((4, 2)), [0], {"mode": "nearest"}, ValueError, ["mode", "'nearest'"]),
    ("unhashable mode", np.zeros((4, 2)), [0], {"mode": []}, ValueError, ["mode"]),
    ("out not an array", np.zeros((4, 2)), [0], {"out": [[0.0, 0.0]]}, TypeError, ["out", "list"]),
    (
        "out wrong dtype",
        np.zeros((4, 2)),
        [0],
        {"out": np.zeros((1, 2), np.float32)},
        TypeError,
        ["out", "float64", "float32"],
    ),
    (
        "out wrong shape",
        np.zeros((4, 2)),
        [0],
        {"out": np.zeros((2, 2))},
        ValueError,
        ["out", "(1, 2)", "(2, 2)"],
    ),
    (
        "out read-only",
        np.zeros((4, 2)),
        [0],
        {"out": np.broadcast_to(np.zeros(2), (1, 2))},
        ValueError,
        ["out", "read-only"],
    ),
    (
        "out non-contiguous",
        np.zeros((4, 2)),
        [0, 1],
        {"out": np.zeros((2, 4))[:, ::2]},
        ValueError,
        ["out", "C-contiguous"],
    ),
    ("masked table", np.ma.zeros((4, 2)), [0], {}, TypeError, ["table", "masked"]),
    ("ragged positions", np.zeros((4, 2)), [[1, 2], [3]], {}, TypeError, ["positions"]),
    ("ragged table", [[1.0, 2.0], [3.0]], [0], {}, TypeError, ["table"]),
    ("empty structured table", np.zeros((3, 2), dtype=[]), [0], {}, TypeError, ["table"]),
    (
        "out dtype before range",
        np.zeros((4, 2)),
        [9],
        {"out": np.zeros((1, 2), np.float32)},
        TypeError,
        ["out", "dtype"],
    ),
    (
        "masked positions",
        np.zeros((4, 2)),
        np.ma.array([0]),
        {},
        TypeError,
        ["positions", "masked"],
    ),
]


@pytest.mark.parametrize(
    ("table", "positions", "kw", "exc", "words"),
    [c[1:] for c in BAD_CALLS],
    ids=[c[0] for c in BAD_CALLS],
)
def test_bad_input_raises_clear_errors_like_the_reference(table, positions, kw, exc, words):
    with pytest.raises(exc) as info:
        posembed.gather(table, positions, **kw)
    for word in words:
        assert word in str(info.value)
    with pytest.raises(exc):
        reference.gather(table, positions, **kw)


def test_out_overlapping_an_input_is_refused():
    buf = np.zeros((8, 4), np.float32)
    table = buf[:4]
    with pytest.raises(ValueError, match="overlap table"):
        posembed.gather(table, [0, 1], out=buf[2:4])
    with pytest.raises(ValueError, match="overlap"):
        reference.gather(table, [0, 1], out=buf[2:4])
    # disjoint views of one buffer are fine
    assert_same(posembed.gather(table, [0, 1], out=buf[4:6]), table[[0, 1]])
    ibuf = np.zeros(16, np.int64)
    with pytest.raises(ValueError, match="overlap positions"):
        posembed.gather(np.zeros((4, 2), np.int64), ibuf[:8], out=ibuf.reshape(8, 2))
    with pytest.raises(ValueError, match="overlap"):
        reference.gather(np.zeros((4, 2), np.int64), ibuf[:8], out=ibuf.reshape(8, 2))


@pytest.mark.parametrize("n", [10, 300_000])  # serial and parallel range checks
def test_out_untouched_and_inputs_unmodified_after_an_error(rng, n):
    table = random_table(rng, 64, 32, np.float32)
    pos = rng.integers(0, 64, n)
    pos[-1] = 64  # only the very last position is bad
    out = np.full((n, 32), 7.0, np.float32)
    table_before, pos_before = table.copy(), pos.copy()
    with pytest.raises(IndexError, match=f"positions\\[{n - 1}\\]"):
        posembed.gather(table, pos, out=out)
    assert (out == 7.0).all()
    assert_same(table, table_before)
    assert_same(pos, pos_before)


@pytest.mark.parametrize("mode", MODES)
def test_inputs_never_modified(rng, mode):
    table = random_table(rng, 40, 6, np.float64)[::-1]
    pos = rng.integers(-50, 50, (7, 9)).astype(np.int32)
    if mode == "raise":
        pos %= 40
    table_before, pos_before = table.copy(), pos.copy()
    posembed.gather(table, pos, mode=mode)
    posembed.gather(table, pos[:, ::2], mode=mode, out=np.empty((7, 5, 6)))
    assert_same(table, table_before)
    assert_same(pos, pos_before)


def test_streaming_and_parallel_paths_on_small_data(rng, restore_threads):
    from posembed import _core

    table = random_table(rng, 50, 37, np.float32)
    pos = rng.integers(0, 50, 300)
    _core._probes.set_thresholds(1024, 4096)
    try:
        for threads in (1, 2, 3):
            posembed.set_num_threads(threads)
            out = np.empty((300, 37), np.float32)
            posembed.gather(table, pos, out=out)  # streaming: out was given
            assert_same(out, table[pos])
            assert_same(posembed.gather(table, pos), table[pos])  # fresh: plain stores
    finally:
        _core._probes.set_thresholds(-1, -1)
    assert posembed.config()["stream_min_bytes"] == 8 << 20


def test_the_common_call_takes_its_short_path_and_equals_the_full_one():
    # plain arrays in mode "raise": checked in a few compiled steps; anything
    # else goes through the full checks, with the same results and errors
    rng = np.random.default_rng(3)
    table = rng.standard_normal((50, 8)).astype(np.float32)
    for positions in (
        np.array(7),
        rng.integers(0, 50, 5),
        rng.integers(0, 50, (2, 3)).astype(np.uint16),
    ):
        assert _core.gather_plain(table, positions) is not None
        assert_same(posembed.gather(table, positions), reference.gather(table, positions))
        assert_same(posembed.gather(table[::-1], positions), table[::-1][positions])  # any strides
    for table_, positions in (
        (table, [1, 2]),
        (table, np.ma.array([1, 2])),
        (table, np.array([1.0])),
        (np.zeros((3, 2), object), np.array([1])),
        (table, np.array([1, 2], ">i8")),
    ):
        assert _core.gather_plain(table_, positions) is None
    with pytest.raises(IndexError, match=r"positions\[1\].*50"):
        posembed.gather(table, np.array([3, 50]))
    # one row by a Python int: copied straight; any other int goes the full way
    assert_same(posembed.gather(table, 7), reference.gather(table, 7))
    assert_same(posembed.gather(table[:, ::-3], 49), table[:, ::-3][49])
    for bad in (50, -1, 2**70, True):
        assert _core.gather_plain(table, bad) is None
        with pytest.raises((IndexError, TypeError)) as err:
            posembed.gather(table, bad)
        with pytest.raises(err.type):
            reference.gather(table, bad)


def test_a_plain_out_takes_the_compiled_checks_and_anything_else_the_full_ones(rng):
    # the common out= call is checked in C++ and written there; every other
    # out (the full checks then report or accept it) is left to Python
    table = rng.standard_normal((50, 8)).astype(np.float32)
    pos = rng.integers(0, 50, (3, 4))
    out = np.full((3, 4, 8), 7, np.float32)
    assert _core.gather_plain(table, pos, out) is out
    assert_same(out, reference.gather(table, pos))
    buffer = np.zeros(50 * 8 + 3 * 4 * 8, np.float32)
    shared_table = buffer[: 50 * 8].reshape(50, 8)
    shared_table[:] = table
    beside = buffer[50 * 8 :].reshape(3, 4, 8)  # same buffer, other bytes: no overlap
    assert _core.gather_plain(shared_table, pos, beside) is beside
    assert_same(beside, reference.gather(table, pos))
    read_only = np.zeros((3, 4, 8), np.float32)
    read_only.flags.writeable = False
    pos_bytes = np.zeros(3 * 4 * 8 * 2, np.float32)
    positions_in_out = pos_bytes.view(np.int64)[:12].reshape(3, 4)
    positions_in_out[:] = pos
    others = [
        np.zeros((3, 4, 8), np.float64),  # another dtype
        np.zeros((3, 4, 9), np.float32),  # another shape
        np.zeros((12, 8), np.float32),  # the rows, not the positions' shape
        read_only,
        np.zeros((3, 4, 16), np.float32)[..., ::2],  # not contiguous
        np.zeros((3, 4, 8), np.dtype(">f4")),  # not the machine's byte order
        table[:12].reshape(3, 4, 8),  # the table's own memory
    ]
    for other in others:
        before = other.copy()
        assert _core.gather_plain(table, pos, other) is None
        assert_same(other, before)
    aliased = pos_bytes[: 3 * 4 * 8].reshape(3, 4, 8)  # out over the positions' bytes
    assert _core.gather_plain(table, positions_in_out, aliased) is None
    assert_same(positions_in_out, pos)

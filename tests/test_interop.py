"""Array arguments from elsewhere: DLPack producers, PyTorch tensors, buffers and
memory-maps are read where they lie (no copy), give the same bytes as NumPy
inputs, and every result is a plain NumPy array that PyTorch can wrap without
a copy."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import posembed
from posembed import reference
from posembed.kernels import _validate

from .conftest import assert_same, torch_or_skip

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)]


class Producer:
    """A minimal DLPack producer that is not a NumPy array (nor a subclass of one):
    it hands out the memory of the array it wraps, as any library's tensor would."""

    def __init__(self, array: np.ndarray) -> None:
        self._array = array

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._array.__dlpack_device__()


def data_ptr(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def _table(rows: int = 24, d: int = 12, dtype: np.dtype[Any] = FLOATS[2]) -> np.ndarray:
    rng = np.random.default_rng(rows * 31 + d)
    return rng.standard_normal((rows, d)).astype(dtype)


# Every public function that reads arrays, as (name, call): the call takes a
# converter applied to each array argument, so one definition runs with NumPy
# inputs and with the foreign ones.
def _calls(dtype: np.dtype[Any]) -> list[tuple[str, Callable[[Callable[[np.ndarray], Any]], Any]]]:
    table = _table(24, 12, dtype)
    grid = _table(1 + 4 * 6, 8, dtype)
    tok = _table(50, 12, dtype)
    pos = np.array([[0, 5, 23], [7, 7, 1]])
    frac = np.array([0.0, 2.5, 22.75, 23.0])
    grad = _table(6, 12, dtype).reshape(2, 3, 12)
    ids = np.array([[3, 49, 0], [12, 12, 7]])
    tokens = np.arange(100, dtype=np.int32)
    offsets = np.array([0, 40, 100])
    wins = posembed.windows(tokens, 16, step=8)
    values = np.linspace(0, 1, wins.tokens.size, dtype=np.float32).reshape(wins.tokens.shape)
    return [
        ("gather", lambda c: posembed.gather(c(table), c(pos))),
        ("gather_backward", lambda c: posembed.gather_backward(c(grad), c(pos), 24)),
        ("interpolate", lambda c: posembed.interpolate(c(table), 40)),
        ("lerp", lambda c: posembed.lerp(c(table), c(frac))),
        ("extend", lambda c: posembed.extend(c(table), 30, init="interpolate")),
        ("resample_grid", lambda c: posembed.resample_grid(c(grid), (4, 6), (6, 9), prefix=1)),
        ("embed", lambda c: posembed.embed(c(tok), c(ids), c(table))),
        (
            "embed_dropout",
            lambda c: posembed.embed(c(tok), c(ids), c(table), dropout=0.25, seed=5),
        ),
        ("similarity", lambda c: posembed.similarity(c(table))),
        ("windows", lambda c: posembed.windows(c(tokens), 16, step=8, offsets=c(offsets)).tokens),
        ("stitch", lambda c: posembed.stitch(c(values), wins, reduce="mean")),
    ]


CALL_NAMES = [name for name, _ in _calls(FLOATS[2])]


def _same(a: np.ndarray, b: np.ndarray) -> None:
    assert type(a) is np.ndarray
    assert a.dtype == b.dtype
    assert a.shape == b.shape
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", CALL_NAMES)
def test_dlpack_producer_inputs_match_numpy(name, dtype):
    if dtype == BF16:
        # NumPy's DLPack import has no bfloat16: such producers are read through
        # numpy.asarray, covered by test_buffer_inputs_match_numpy; torch's
        # bfloat16 tensors are viewed directly (test_pytorch_inputs_match_numpy).
        dtype = np.dtype(np.float16)
    call = dict(_calls(dtype))[name]
    _same(call(Producer), call(lambda a: a))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", CALL_NAMES)
def test_buffer_inputs_match_numpy(name, dtype):
    """Objects with only ``__array_interface__`` (no DLPack), and memoryviews."""

    class Interface:
        def __init__(self, a: np.ndarray) -> None:
            self.__array_interface__ = a.__array_interface__
            self._keep = a

    if dtype == BF16:
        # Neither the array interface nor the buffer protocol can say
        # "bfloat16" (both give 2-byte void): such objects arrive as raw bytes,
        # which float kernels refuse (tests/test_interpolate.py checks that).
        dtype = np.dtype(np.float16)
    call = dict(_calls(dtype))[name]
    _same(call(Interface), call(lambda a: a))
    _same(call(memoryview), call(lambda a: a))


@pytest.mark.parametrize("name", CALL_NAMES)
def test_memmap_inputs_match_numpy(name, tmp_path):
    def mapped(a: np.ndarray) -> np.ndarray:
        path = tmp_path / f"{len(list(tmp_path.iterdir()))}.npy"
        np.save(path, a)
        m = np.load(path, mmap_mode="r")
        assert isinstance(m, np.memmap)
        return m

    call = dict(_calls(FLOATS[2]))[name]
    _same(call(mapped), call(lambda a: a))


def test_dlpack_view_is_the_same_memory():
    table = _table()
    viewed = _validate.as_array(Producer(table), "table")
    assert data_ptr(viewed) == data_ptr(table)
    assert np.shares_memory(viewed, table)


def test_dlpack_input_is_not_copied():
    # The kernel sees the producer's own memory: giving the same memory as out=
    # is refused as an overlap, which a copied input could not be.
    table = _table(24, 12)
    with pytest.raises(ValueError, match="out must not overlap table: they share memory"):
        posembed.interpolate(Producer(table), 24, out=table)
    assert np.array_equal(table, _table(24, 12))  # and nothing was written


def test_large_dlpack_input_allocates_only_the_result():
    # 64 MiB table, 8 rows gathered: NumPy's allocations (which tracemalloc
    # sees) stay far below the table's size, so nothing copied it.
    table = np.ones((1 << 16, 256), np.float32)
    positions = np.arange(8) * 1000
    tracemalloc.start()
    try:
        out = posembed.gather(Producer(table), Producer(positions))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.shape == (8, 256)
    assert peak < table.nbytes // 64


def test_unreadable_input_names_the_argument():
    class Broken:
        def __dlpack__(self, **kwargs: Any) -> Any:
            raise BufferError("device memory is not readable here")

        def __dlpack_device__(self) -> tuple[int, int]:
            return (2, 0)

    with pytest.raises(TypeError, match=r"^table must be an array NumPy can read .*Broken"):
        posembed.interpolate(Broken(), 5)


# ---- PyTorch ---------------------------------------------------------------


@pytest.fixture(scope="module")
def torch() -> Any:
    # PyTorch is optional (the test extra does not install it); CI reruns the
    # tests named *pytorch* with the CPU build and POSEMBED_REQUIRE_TORCH=1, so
    # there a missing torch fails instead of skipping.
    return torch_or_skip()


def _to_torch(torch: Any, a: np.ndarray) -> Any:
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", CALL_NAMES)
def test_pytorch_inputs_match_numpy(torch, name, dtype):
    call = dict(_calls(dtype))[name]
    _same(call(lambda a: _to_torch(torch, a)), call(lambda a: a))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_pytorch_input_is_the_same_memory(torch, dtype):
    table = _table(24, 12, dtype)
    tensor = _to_torch(torch, table)
    viewed = _validate.as_array(tensor, "table")
    assert viewed.dtype == dtype
    assert data_ptr(viewed) == tensor.data_ptr()
    # end to end: the kernel reads the tensor's memory, so the same memory as
    # out= overlaps it
    with pytest.raises(ValueError, match="out must not overlap table"):
        posembed.interpolate(tensor, 24, out=table)


def test_pytorch_strided_views(torch):
    base = torch.arange(40 * 16, dtype=torch.float32).reshape(40, 16)
    for view in (base.t(), base[::3], base[5:30, 2:14], base.flip(0)):
        expected = view.numpy() if view.stride(-1) >= 0 else view.contiguous().numpy()
        _same(posembed.interpolate(view, 17), posembed.interpolate(expected, 17))
        _same(posembed.gather(view, [0, 3, 1]), expected[[0, 3, 1]])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_pytorch_tensor_requiring_grad_is_refused(torch, dtype):
    param = torch.nn.Parameter(torch.zeros(8, 4, dtype=getattr(torch, dtype)))
    with pytest.raises(TypeError, match=r"^table must be an array .*detach\(\)"):
        posembed.interpolate(param, 16)
    with pytest.raises(RuntimeError, match=r"detach\(\)"):  # as the PyTorch guide says
        param.numpy()
    out = posembed.interpolate(param.detach(), 16)
    assert out.shape == (16, 4)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("name", CALL_NAMES)
def test_pytorch_wraps_results_without_copy(torch, name, dtype):
    result = dict(_calls(np.dtype(dtype)))[name](lambda a: a)
    assert type(result) is np.ndarray
    wrapped = torch.from_numpy(result)
    assert wrapped.data_ptr() == data_ptr(result)
    assert torch.equal(wrapped, torch.from_numpy(result.copy()))


def test_pytorch_wraps_bfloat16_results_without_copy(torch):
    result = posembed.interpolate(_table(24, 12, BF16), 40)
    wrapped = torch.from_numpy(result.view(np.int16)).view(torch.bfloat16)
    assert wrapped.data_ptr() == data_ptr(result)
    assert np.array_equal(wrapped.float().numpy(), result.astype(np.float32))


# ---- out= in memory another library owns -------------------------------------


def _out_calls() -> list[tuple[str, Callable[[Any], Any], tuple[int, ...], np.dtype[Any]]]:
    """(name, call(out), out shape, out dtype) for every function with out=."""
    table = _table(24, 12)
    tok = _table(50, 12)
    pos = np.array([[0, 5, 23], [7, 7, 1]])
    grad = _table(6, 12).reshape(2, 3, 12)
    ids = np.array([[3, 49, 0], [12, 12, 7]])
    tokens = np.arange(100, dtype=np.int64)
    f32 = np.dtype(np.float32)
    return [
        ("gather", lambda o: posembed.gather(table, pos, out=o), (2, 3, 12), f32),
        (
            "gather_backward",
            lambda o: posembed.gather_backward(grad, pos, 24, out=o),
            (24, 12),
            f32,
        ),
        ("interpolate", lambda o: posembed.interpolate(table, 40, out=o), (40, 12), f32),
        ("lerp", lambda o: posembed.lerp(table, [0.5, 3.25], out=o), (2, 12), f32),
        ("embed", lambda o: posembed.embed(tok, ids, table, out=o), (2, 3, 12), f32),
        (
            "windows",
            lambda o: posembed.windows(tokens, 16, step=8, out=o).tokens,
            (12, 16),
            np.dtype(np.int64),
        ),
    ]


OUT_NAMES = [name for name, *_ in _out_calls()]


@pytest.mark.parametrize("name", OUT_NAMES)
def test_out_may_be_a_dlpack_producer(name):
    _, call, shape, dtype = next(c for c in _out_calls() if c[0] == name)
    want = call(None)
    buffer = np.full(shape, 7, dtype)
    got = call(Producer(buffer))
    _same(got, want)
    assert data_ptr(got) == data_ptr(buffer)  # written in place
    _same(buffer, want)


def test_out_read_only_producer_is_refused_untouched():
    buffer = np.full((40, 12), 7, np.float32)
    buffer.flags.writeable = False
    with pytest.raises(ValueError, match="out must be writeable"):
        posembed.interpolate(_table(24, 12), 40, out=Producer(buffer))
    assert (buffer == 7).all()


def test_out_of_another_kind_is_refused():
    with pytest.raises(TypeError, match=r"out must be a numpy\.ndarray or a DLPack producer.*list"):
        posembed.gather(_table(), [1, 2], out=[[0.0] * 12] * 2)


@pytest.mark.parametrize("name", OUT_NAMES)
def test_pytorch_tensor_as_out(torch, name):
    _, call, shape, dtype = next(c for c in _out_calls() if c[0] == name)
    want = call(None)
    tensor = torch.full(shape, 7, dtype=getattr(torch, dtype.name))
    got = call(tensor)
    assert data_ptr(got) == tensor.data_ptr()
    _same(tensor.numpy(), want)


def test_pytorch_bfloat16_tensor_as_out(torch):
    table = _table(24, 12, BF16)
    tensor = torch.zeros(40, 12, dtype=torch.bfloat16)
    posembed.interpolate(table, 40, out=tensor)
    _same(tensor.view(torch.int16).numpy().view(BF16), posembed.interpolate(table, 40))


def test_pytorch_out_untouched_on_error(torch):
    tensor = torch.full((2, 3, 12), 7.0)
    with pytest.raises(IndexError, match="position 24 at positions"):
        posembed.gather(_table(), [[0, 1, 24], [2, 3, 4]], out=tensor)
    assert bool((tensor == 7).all())
    with pytest.raises(ValueError, match="out must be C-contiguous"):
        posembed.gather(
            _table(), [[0, 1, 2], [2, 3, 4]], out=torch.zeros(12, 3, 2).permute(2, 1, 0)
        )
    param = torch.nn.Parameter(torch.zeros(2, 3, 12))
    with pytest.raises(TypeError, match=r"out must be memory NumPy can write.*detach"):
        posembed.gather(_table(), [[0, 1, 2], [2, 3, 4]], out=param)


def test_an_empty_float_buffer_is_not_positions():
    # only lists and tuples follow the rule for Python ints (an empty list is
    # no positions); an array of floats, empty or not, is refused
    table = _table()
    for positions in (memoryview(np.zeros(0)), Producer(np.zeros(0)), np.zeros(0)):
        with pytest.raises(TypeError, match="positions must be integers"):
            posembed.gather(table, positions)
    assert posembed.gather(table, []).shape == (0, 12)


def _aliases(buf: np.ndarray) -> list[Any]:
    """The ways a caller may hand over buf's memory without it being an ndarray."""
    return [Producer(buf), memoryview(buf)]


@pytest.mark.parametrize("wrap", [0, 1], ids=["dlpack", "memoryview"])
def test_out_aliasing_an_input_that_is_converted_first_is_refused(wrap):
    """Inputs posembed converts before the kernel (int positions for lerp, a
    float32 table for interpolate at another dtype, ...) are still checked for
    overlap with out= through the caller's own memory, whatever kind of object
    handed it over; nothing is written (found by the fuzzer under ASan)."""
    table = _table(7, 1, np.dtype(np.float64))
    # the twins read positions with numpy.asarray: a memoryview, not a producer
    for module in (posembed, reference) if wrap else (posembed,):
        buf = np.arange(24, dtype=np.int64).reshape(2, 4, 3) % 7
        before = buf.copy()
        out = buf.view(np.float64).reshape(2, 4, 3, 1)  # the same bytes
        with pytest.raises(ValueError, match="overlap"):
            module.lerp(table, _aliases(buf)[wrap], out=out)
        assert_same(buf, before)
        ids = np.zeros(6, np.int32)
        before = ids.copy()
        out32 = ids.view(np.float32).reshape(6, 1)
        small = table.astype(np.float32)
        with pytest.raises(ValueError, match="overlap"):
            module.embed(small, _aliases(ids)[wrap], small, out=out32)
        assert_same(ids, before)
        offsets_buf = np.array([0, 4, 8, 12], np.int64)
        kept = offsets_buf.copy()
        with pytest.raises(ValueError, match="overlap"):
            module.gather_backward(
                np.ones((4, 1)),
                _aliases(offsets_buf)[wrap],
                4,
                out=offsets_buf.view(np.float64)[:, None],
            )
        assert_same(offsets_buf, kept)

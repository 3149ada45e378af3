"""posembed.io._safetensors, the format's one reader and one streaming writer,
checked against the safetensors package (in the test extra): each reads what
the other writes. resize_checkpoint's use of it is in tests/test_checkpoint.py.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posembed.io._safetensors as sft

from .conftest import torch_or_skip

try:
    import ml_dtypes
except ImportError:  # the test extra installs it
    ml_dtypes = None

# NumPy dtype name -> safetensors name, written out here rather than taken from the module
NAMES = {
    "bool": "BOOL",
    "uint8": "U8",
    "int8": "I8",
    "uint16": "U16",
    "int16": "I16",
    "float16": "F16",
    "uint32": "U32",
    "int32": "I32",
    "float32": "F32",
    "uint64": "U64",
    "int64": "I64",
    "float64": "F64",
}


def values(dtype: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Every bit pattern is fair game except for floats, kept finite for ==."""
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.startswith("float"):
        return (100 * rng.standard_normal(shape)).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def raw_header(path: Path) -> tuple[dict[str, Any], int]:
    """The JSON object and the data start, parsed here without the module."""
    blob = path.read_bytes()
    n = int.from_bytes(blob[:8], "little")
    return json.loads(blob[8 : 8 + n]), 8 + n


# -- against the safetensors package ----------------------------------------------------------


@pytest.mark.parametrize("dtype", sorted(NAMES))
def test_write_file_loads_with_safetensors(tmp_path, rng, dtype):
    pytest.importorskip("safetensors")
    from safetensors import safe_open
    from safetensors.numpy import load_file

    a = values(dtype, (5, 6), rng)
    tensors = {
        "plain": a,
        "scalar": a[0, 0].reshape(()),
        "empty": a[:0],
        "strided": a[::2, ::-3],  # neither contiguous nor forwards
        "swapped": a.astype(a.dtype.newbyteorder(">")),  # big-endian values, stored little
        "ünï": a[1],
    }
    before = {name: t.copy() for name, t in tensors.items()}
    path = tmp_path / "a.safetensors"
    sft.write_file(path, tensors, {"format": "np", "note": "✓"})
    loaded = load_file(path)
    assert set(loaded) == set(tensors)
    for name, t in tensors.items():
        assert loaded[name].dtype == np.dtype(dtype), name
        assert loaded[name].shape == t.shape, name
        assert np.array_equal(loaded[name], t), name
        assert t.dtype == before[name].dtype  # the inputs are not modified
        assert np.array_equal(t, before[name])
    with safe_open(path, framework="numpy") as f:
        assert f.metadata() == {"format": "np", "note": "✓"}
    header, start = raw_header(path)
    assert start % 8 == 0
    assert list(header) == ["__metadata__", *tensors]  # metadata first, then the given order
    assert {header[n]["dtype"] for n in tensors} == {NAMES[dtype]}


@pytest.mark.parametrize("metadata", [None, {}, {"format": "pt", "ünï": "✓"}])
def test_reads_what_safetensors_writes(tmp_path, rng, metadata):
    pytest.importorskip("safetensors")
    from safetensors.numpy import save_file

    tensors = {f"t.{dtype}": values(dtype, (3, 4), rng) for dtype in NAMES}
    tensors["empty"] = np.zeros((0, 2), np.float32)
    tensors["scalar"] = np.array(7, np.int64)
    path = tmp_path / "a.safetensors"
    save_file(tensors, path, metadata=metadata)
    got = sft.read_file(path)
    assert set(got) == set(tensors)
    for name, t in tensors.items():
        assert got[name].dtype == t.dtype, name
        assert got[name].shape == t.shape, name
        assert np.array_equal(got[name], t), name
    with open(path, "rb") as f:
        header = sft.read_header(f, path)
    raw, start = raw_header(path)
    assert header.data_start == start
    assert header.file_size == path.stat().st_size
    assert header.key_order == tuple(raw)
    assert header.metadata == raw.get("__metadata__")  # None where absent
    if metadata:
        assert header.metadata == metadata
    for name, entry in header.entries.items():
        assert (entry.dtype, list(entry.shape)) == (raw[name]["dtype"], raw[name]["shape"])
        assert [entry.begin, entry.end] == raw[name]["data_offsets"]
    ends = [header.entries[n].end for n in header.data_order]
    assert ends == sorted(ends)
    assert ends[-1] == header.data_bytes


@settings(max_examples=60, deadline=None)
@given(
    arrays=st.lists(
        st.tuples(st.sampled_from(sorted(NAMES)), st.lists(st.integers(0, 3), max_size=3)),
        max_size=6,
    ),
    metadata=st.none() | st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
    seed=st.integers(0, 2**32 - 1),
)
def test_hypothesis_round_trips(arrays, metadata, seed):
    import tempfile

    pytest.importorskip("safetensors")
    from safetensors import safe_open
    from safetensors.numpy import load_file

    rng = np.random.default_rng(seed)
    tensors = {f"t{i}": values(dtype, tuple(shape), rng) for i, (dtype, shape) in enumerate(arrays)}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "a.safetensors"
        sft.write_file(path, tensors, metadata)
        theirs, ours = load_file(path), sft.read_file(path)
        with safe_open(path, framework="numpy") as f:
            their_metadata = f.metadata()
        with open(path, "rb") as f:
            header = sft.read_header(f, path)
    for name, t in tensors.items():
        for got in (theirs[name], ours[name]):
            assert got.dtype == t.dtype
            assert got.shape == t.shape
            assert np.array_equal(got, t)
    assert set(theirs) == set(ours) == set(tensors)
    assert header.data_order == tuple(tensors)
    assert header.data_start % 8 == 0
    assert header.metadata == metadata
    assert their_metadata == metadata


@pytest.mark.skipif(ml_dtypes is None, reason="BF16 arrays need ml_dtypes (in the test extra)")
def test_bf16_round_trips_through_safetensors_torch(tmp_path, rng):
    torch = torch_or_skip()
    pytest.importorskip("safetensors")
    from safetensors.torch import load_file, save_file

    a = rng.standard_normal((4, 5)).astype(ml_dtypes.bfloat16)
    ours = tmp_path / "ours.safetensors"
    sft.write_file(ours, {"a": a})
    loaded = load_file(ours)["a"]
    assert loaded.dtype == torch.bfloat16
    assert np.array_equal(loaded.view(torch.int16).numpy(), a.view(np.int16))
    theirs = tmp_path / "theirs.safetensors"
    save_file({"a": loaded}, theirs)
    back = sft.read_file(theirs)["a"]
    assert back.dtype == a.dtype
    assert np.array_equal(back.view(np.uint16), a.view(np.uint16))


# -- the reader --------------------------------------------------------------------------------


def test_unknown_fields_and_their_order_survive_a_rewrite(tmp_path):
    # another writer's entry: keys in another order, one more key; the metadata last
    entry = {"data_offsets": [0, 8], "note": [1, {"x": None}], "shape": [2], "dtype": "F32"}
    text = json.dumps({"t": entry, "__metadata__": {"k": "v"}}).encode()
    src = tmp_path / "a.safetensors"
    src.write_bytes(len(text).to_bytes(8, "little") + text + bytes(8))
    with open(src, "rb") as f:
        header = sft.read_header(f, src)
    t = header.entries["t"]
    assert (t.dtype, t.shape, t.begin, t.end, t.nbytes) == ("F32", (2,), 0, 8, 8)
    out = tmp_path / "b.safetensors"
    specs = [t.as_spec(shape=(3,), nbytes=12)]
    with sft.create(out, specs, header.metadata, header_order=header.key_order) as writer:
        writer.write(bytes(12))
    raw, _ = raw_header(out)
    assert raw == {
        "t": {"data_offsets": [0, 12], "note": [1, {"x": None}], "shape": [3], "dtype": "F32"},
        "__metadata__": {"k": "v"},
    }
    assert list(raw["t"]) == ["data_offsets", "note", "shape", "dtype"]
    assert list(raw) == ["t", "__metadata__"]


def test_read_tensor_of_a_dtype_numpy_lacks(tmp_path):
    path = tmp_path / "a.safetensors"
    with sft.create(path, [sft.TensorSpec("f8", "F8_E4M3", (3,), 3)]) as writer:
        writer.write(b"abc")
    with open(path, "rb") as f:
        header = sft.read_header(f, path)
        assert sft.read_bytes(f, header, "f8") == b"abc"
        with pytest.raises(TypeError, match=r"'f8' has dtype F8_E4M3, which NumPy does not hold"):
            sft.read_tensor(f, header, "f8")


def test_a_file_cut_short_after_its_header_was_read(tmp_path, rng):
    path = tmp_path / "a.safetensors"
    sft.write_file(path, {"a": values("float32", (1 << 16,), rng)})  # more than a read buffers
    with open(path, "rb") as f:
        header = sft.read_header(f, path)
        os.truncate(path, path.stat().st_size - 1)
        with pytest.raises(ValueError, match=r"a\.safetensors: the file ended inside 'a'"):
            sft.read_tensor(f, header, "a")


# -- the writer --------------------------------------------------------------------------------


F32x2 = sft.TensorSpec("t", "F32", (2,), 8)
NAN_FIELD = sft.TensorSpec("t", "F32", (2,), 8, {"scale": float("nan")})


@pytest.mark.parametrize(
    ("data", "text"),
    [
        ([bytes(4)], "4 bytes of the tensors' data were not written"),
        ([bytes(4), bytes(5)], "5 more bytes exceed the 4 left"),
    ],
)
def test_too_few_or_too_many_bytes_leave_no_file(tmp_path, data, text):
    path = tmp_path / "a.safetensors"

    def write() -> None:
        with sft.create(path, [F32x2]) as writer:
            for part in data:
                writer.write(part)

    with pytest.raises(ValueError, match=text):
        write()
    assert list(tmp_path.iterdir()) == []


def test_an_error_while_writing_keeps_the_old_file(tmp_path):
    path = tmp_path / "a.safetensors"
    path.write_bytes(b"keep me")

    def write() -> None:
        with sft.create(path, [F32x2]) as writer:
            writer.write(bytes(8))  # every byte, then the caller fails before the end
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        write()
    assert path.read_bytes() == b"keep me"
    assert [p.name for p in tmp_path.iterdir()] == ["a.safetensors"]


@pytest.mark.parametrize(
    ("tensors", "metadata", "order", "exc", "text"),
    [
        ([F32x2, F32x2], None, None, ValueError, "tensor name 't' is __metadata__ or given twice"),
        ([sft.TensorSpec("__metadata__", "U8", (), 1)], None, None, ValueError, "__metadata__"),
        ([sft.TensorSpec("t", "F32", (3,), 8)], None, None, ValueError, r"F32 \(3,\) needs 12"),
        ([sft.TensorSpec("t", "F32", (-1,), 0)], None, None, ValueError, "must be >= 0"),
        ([F32x2], {"a": 1}, None, TypeError, "metadata must map strings to strings"),
        ([F32x2], {"a": "b"}, ["t"], ValueError, "header_order must list each of"),
        ([F32x2], None, ["t", "t"], ValueError, "header_order must list each of"),
        # what the reference reader would refuse is never written
        ([sft.TensorSpec("t", "Q3_K", (2,), 3)], None, None, ValueError, "dtype 'Q3_K'"),
        (
            [sft.TensorSpec("t", "U8", (0, 2**62, 2**62), 0)],
            None,
            None,
            ValueError,
            "holds 2\\^64 bits or more",
        ),
        ([NAN_FIELD], None, None, ValueError, "cannot be written: a field holds NaN or Infinity"),
        (
            [F32x2],
            {"\ud800": "x"},
            None,
            ValueError,
            "cannot be written: a string holds a lone UTF-16",
        ),
        ([F32x2], {"a": ["b"]}, None, TypeError, "metadata must map strings to strings"),
    ],
)
def test_the_writer_refuses_a_header_it_could_not_read_back(
    tmp_path, tensors, metadata, order, exc, text
):
    with (
        pytest.raises(exc, match=text),
        sft.create(tmp_path / "a.safetensors", tensors, metadata, header_order=order),
    ):
        pass
    assert list(tmp_path.iterdir()) == []


def test_the_writer_refuses_a_header_past_the_format_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(sft, "MAX_HEADER_BYTES", 64)
    specs = [sft.TensorSpec(f"tensor.{k}", "U8", (0,), 0) for k in range(3)]
    with (
        pytest.raises(ValueError, match=r"the header is \d+ bytes; the format allows 64"),
        sft.create(tmp_path / "a.safetensors", specs),
    ):
        pass
    assert list(tmp_path.iterdir()) == []


def test_write_file_refuses_a_dtype_the_format_lacks(tmp_path):
    with pytest.raises(TypeError, match=r"'c' has dtype complex128; safetensors files hold bool"):
        sft.write_file(tmp_path / "a.safetensors", {"c": np.zeros(2, complex)})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("page_match", "start"),
    [
        (None, None),  # 8-byte aligned, no more
        ((0, 4096 + 1000), 1000),  # data byte 0 at offset 1000 within a page
        ((24, 3 * 4096 + 64), 40),  # data byte 24 at offset 64
        ((0, 1001), None),  # 1001 is not 8-aligned: plain 8-byte alignment
    ],
)
def test_page_match_places_a_data_byte_within_a_page(tmp_path, page_match, start):
    path = tmp_path / "a.safetensors"
    specs = [sft.TensorSpec("a", "U8", (24,), 24), sft.TensorSpec("b", "U8", (8,), 8)]
    with sft.create(path, specs, page_match=page_match) as writer:
        writer.write(bytes(range(32)))
    with open(path, "rb") as f:
        header = sft.read_header(f, path)
        assert sft.read_bytes(f, header, "b") == bytes(range(24, 32))
    assert header.data_start % 8 == 0
    if start is None:
        text = path.read_bytes()[8 : header.data_start]
        assert len(text) - len(text.rstrip(b" ")) < 8  # padded to 8 only
    else:
        assert header.data_start % 4096 == start


@pytest.mark.parametrize(
    "failure", [errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL, errno.EPERM, None]
)
def test_a_whole_file_is_copied_in_the_kernel_or_by_reads_and_writes(
    tmp_path, monkeypatch, failure
):
    # copy_file_range refused (another file system, an old kernel, a sandbox)
    # or absent: the same bytes by reads and writes, in small pieces; refused
    # once, it is not asked again
    source = tmp_path / "source.bin"
    data = bytes(range(256)) * 5
    source.write_bytes(data)
    calls = []

    def refused(*args: Any) -> int:
        calls.append(args)
        raise OSError(failure, os.strerror(failure))

    if failure is None:
        monkeypatch.delattr(os, "copy_file_range", raising=False)
    else:
        monkeypatch.setattr(os, "copy_file_range", refused)
    monkeypatch.setattr(sft, "COPY_BYTES", 7)
    out_path = tmp_path / "out.bin"
    with open(source, "rb") as src, open(out_path, "xb", buffering=0) as out:
        sft.copy_file(src.fileno(), out, source, len(data))
    assert out_path.read_bytes() == data
    assert len(calls) == (0 if failure is None else 1)


def test_a_whole_file_copy_in_the_kernel(tmp_path, monkeypatch):
    source = tmp_path / "source.bin"
    data = bytes(range(256)) * 5
    source.write_bytes(data)
    calls = []
    real = os.copy_file_range
    monkeypatch.setattr(os, "copy_file_range", lambda *args: calls.append(args) or real(*args))
    monkeypatch.setattr(os, "preadv", lambda *args: pytest.fail("read instead"))
    out_path = tmp_path / "out.bin"
    with open(source, "rb") as src, open(out_path, "xb", buffering=0) as out:
        sft.copy_file(src.fileno(), out, source, len(data))
    assert out_path.read_bytes() == data
    assert calls


@pytest.mark.parametrize("way", ["copy_file_range", "preadv"])
def test_a_whole_file_that_shrinks_while_copied_is_an_error(tmp_path, monkeypatch, way):
    source = tmp_path / "source.bin"
    source.write_bytes(b"x" * 100)
    if way == "preadv":
        monkeypatch.delattr(os, "copy_file_range", raising=False)
    monkeypatch.setattr(os, way, lambda *args: 0)  # end of file
    early = r"the file ended early \(changed while reading\?\)"
    with (
        open(source, "rb") as src,
        open(tmp_path / "out.bin", "xb", buffering=0) as out,
        pytest.raises(ValueError, match=early),
    ):
        sft.copy_file(src.fileno(), out, source, 100)


def test_another_copy_file_range_error_is_raised(tmp_path, monkeypatch):
    source = tmp_path / "source.bin"
    source.write_bytes(b"x" * 100)

    def failing(*args: Any) -> int:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "copy_file_range", failing)
    with (
        open(source, "rb") as src,
        open(tmp_path / "out.bin", "xb", buffering=0) as out,
        pytest.raises(OSError, match="I/O error"),
    ):
        sft.copy_file(src.fileno(), out, source, 100)


def test_copy_appends_a_range_of_another_file_after_a_header(tmp_path, monkeypatch):
    source = tmp_path / "source.bin"
    source.write_bytes(bytes(range(256)) * 4)
    specs = [sft.TensorSpec("a", "U8", (100,), 100), sft.TensorSpec("b", "U8", (3,), 3)]
    want = (bytes(range(256)) * 4)[500:600] + b"xyz"
    for way in ("kernel", "refused", "absent"):
        if way == "refused":

            def refused(*args: Any) -> int:
                raise OSError(errno.EXDEV, "cross-device")

            monkeypatch.setattr(os, "copy_file_range", refused)
        if way == "absent":
            monkeypatch.delattr(os, "copy_file_range", raising=False)
        monkeypatch.setattr(sft, "COPY_BYTES", 7)
        path = tmp_path / f"{way}.safetensors"
        with open(source, "rb") as src, sft.create(path, specs) as writer:
            writer.copy(src.fileno(), 500, 100, source)
            writer.write(b"xyz")
        with open(path, "rb") as f:
            header = sft.read_header(f, path)
            got = sft.read_bytes(f, header, "a") + sft.read_bytes(f, header, "b")
        assert got == want, way


# -- crafted headers ---------------------------------------------------------------------------
# Each is refused with ValueError "<path>: not a valid safetensors file: <problem>" by the
# reader, and by `posembed resize` with exit status 2 and one line. REFERENCE_TOO marks
# those the safetensors package refuses as well (the others it lets through: posembed
# is stricter there).

F = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
REFERENCE_TOO = True


def _file(raw: bytes, data: bytes = b"", n: int | None = None) -> bytes:
    return (len(raw) if n is None else n).to_bytes(8, "little") + raw + data


def _json_file(obj: Any, data: bytes = b"") -> bytes:
    return _file(json.dumps(obj).encode(), data)


def _entry(**fields: Any) -> bytes:
    return _json_file({"t": {**F, **fields}}, bytes(8))


CRAFTED = {
    "length 0": (_file(b"", bytes(8)), r"header: not valid JSON", REFERENCE_TOO),
    "length past the end": (_file(b"{}", n=100), r"header length 100 exceeds the 2 bytes", True),
    "length 2^64-1": (_file(b"{}", n=2**64 - 1), r"header length 18446744073709551615", True),
    "a list": (_file(b"[]"), r"header must be a JSON object; got list", True),
    "a number": (_file(b"1e5"), r"header must be a JSON object; got float", True),
    "a string": (_file(b'"x"'), r"header must be a JSON object; got str", True),
    "null": (_file(b"null"), r"header must be a JSON object; got NoneType", True),
    "metadata of an int": (_json_file({"__metadata__": {"a": 1}}), r"__metadata__ must map", True),
    "metadata nested": (
        _json_file({"__metadata__": {"a": {"b": "c"}}}),
        r"__metadata__ must map names to strings",
        True,
    ),
    "metadata null": (_json_file({"__metadata__": None}), r"__metadata__ must map", False),
    "NaN in metadata": (
        _file(b'{"__metadata__": {"a": NaN}}'),
        r"header: not valid JSON \(NaN is not JSON",
        True,
    ),
    "Infinity in metadata": (
        _file(b'{"__metadata__": {"a": Infinity}}'),
        r"header: not valid JSON \(Infinity is not JSON",
        True,
    ),
    "-Infinity in an entry": (
        _file(b'{"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": -Infinity}}'),
        r"header: not valid JSON \(-Infinity is not JSON",
        True,
    ),
    "no dtype": (
        _json_file({"t": {"shape": [2], "data_offsets": [0, 8]}}),
        r"'t' has no dtype;",
        1,
    ),
    "no shape": (
        _json_file({"t": {"dtype": "F32", "data_offsets": [0, 8]}}),
        r"'t' has no shape;",
        1,
    ),
    "no data_offsets": (
        _json_file({"t": {"dtype": "F32", "shape": [2]}}),
        r"'t' has no data_offsets;",
        1,
    ),
    "an entry that is a list": (_json_file({"t": [1]}), r"'t' must be an object", True),
    "an unknown dtype": (_entry(dtype="Q3_K"), r"'t' has dtype 'Q3_K'; the format's dtypes", True),
    "a lower-case dtype": (_entry(dtype="f32"), r"'t' has dtype 'f32'", True),
    "a dtype that is an int": (_entry(dtype=4), r"'t' has no dtype string; got 4", True),
    "a negative dimension": (
        _entry(shape=[-2]),
        r"'t' shape must be a list of integers >= 0; got \[-2\]",
        True,
    ),
    "a bool dimension": (
        _entry(shape=[True, 2]),
        r"'t' shape must be a list of integers >= 0; got \[True, 2\]",
        True,
    ),
    "a float dimension": (
        _entry(shape=[2.0]),
        r"'t' shape must be a list of integers >= 0; got \[2\.0\]",
        True,
    ),
    "a shape that is a string": (
        _entry(shape="2"),
        r"'t' shape must be a list of integers >= 0; got '2'",
        True,
    ),
    "2 x (2^63 - 1) elements": (
        _json_file({"t": {**F, "shape": [2, 2**63 - 1], "data_offsets": [0, 16]}}, bytes(16)),
        r"'t' shape \[2, 9223372036854775807\] of F32 holds 2\^64 bits or more",
        True,
    ),
    "a shape whose int64 bytes wrap to 8": (
        _json_file({"t": {**F, "shape": [2, 2**62 + 1], "data_offsets": [0, 8]}}, bytes(8)),
        r"'t' shape \[2, 4611686018427387905\] of F32 holds 2\^64 bits or more",
        True,
    ),
    "a dimension of 2^64": (
        _entry(shape=[2**64], data_offsets=[0, 0]),
        r"'t' shape \[18446744073709551616\] of F32 holds 2\^64 bits or more",
        True,
    ),
    "huge dimensions beside a 0": (
        _entry(shape=[2**40, 2**40, 0], data_offsets=[0, 0]),
        r"'t' shape \[1099511627776, 1099511627776, 0\] of F32 holds 2\^64 bits or more",
        True,
    ),
    "data_offsets reversed": (
        _entry(data_offsets=[8, 0]),
        r"'t' data_offsets \[8, 0\] end before they begin",
        1,
    ),
    "negative data_offsets": (
        _entry(data_offsets=[-8, 0]),
        r"'t' data_offsets must be \[begin, end\]; got \[-8, 0\]",
        True,
    ),
    "float data_offsets": (
        _entry(data_offsets=[0.0, 8.0]),
        r"'t' data_offsets must be \[begin, end\]; got \[0\.0, 8\.0\]",
        True,
    ),
    "bool data_offsets": (
        _entry(data_offsets=[False, 8]),
        r"'t' data_offsets must be \[begin, end\]; got \[False, 8\]",
        True,
    ),
    "three data_offsets": (
        _entry(data_offsets=[0, 8, 8]),
        r"'t' data_offsets must be \[begin, end\]; got \[0, 8, 8\]",
        True,
    ),
    "data_offsets past the buffer": (
        _entry(data_offsets=[8, 16]),
        r"'t' data_offsets \[8, 16\] leaves a gap at 0",
        True,
    ),
    "data_offsets past 2^64": (
        _entry(data_offsets=[2**64, 2**64 + 8]),
        r"'t' data_offsets \[18446744073709551616, 18446744073709551624\] leaves a gap",
        True,
    ),
    "a 5000-digit offset": (
        _file(b'{"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, ' + b"9" * 5000 + b"]}}"),
        r"header: not valid JSON \(Exceeds the limit",
        True,
    ),
    "overlapping tensors": (
        _json_file({"t": F, "u": {**F, "data_offsets": [4, 12]}}, bytes(12)),
        r"'u' data_offsets \[4, 12\] overlaps the tensor before it",
        True,
    ),
    "a gap between tensors": (
        _json_file({"t": F, "u": {**F, "data_offsets": [12, 20]}}, bytes(20)),
        r"'u' data_offsets \[12, 20\] leaves a gap at 8",
        True,
    ),
    "20,000 nested [": (_file(b"[" * 20000), r"header: nests 20000 levels deep; at most 64", True),
    "20,000 nested [ ]": (
        _file(b"[" * 20000 + b"]" * 20000),
        r"header: nests 20000 levels deep",
        True,
    ),
    "deep nesting in an extra field": (
        _file(b'{"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": ' + b"[" * 100),
        r"header: nests 102 levels deep; at most 64",
        True,  # unterminated: refused by both
    ),
    "a tensor name twice": (
        _file(
            b'{"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "t": '
            b'{"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}',
            bytes(8),
        ),
        r"header: not valid JSON \(duplicate key 't'",
        False,
    ),
    "a field twice": (
        _file(b'{"t": {"dtype": "F32", "dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'),
        r"header: not valid JSON \(duplicate key 'dtype'",
        True,
    ),
    "a metadata key twice": (
        _file(b'{"__metadata__": {"a": "1", "a": "2"}}'),
        r"header: not valid JSON \(duplicate key 'a'",
        False,
    ),
    "a lone surrogate in a name": (
        _file(b'{"\\ud800": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}', bytes(8)),
        r"header holds a lone UTF-16 surrogate in '\\ud800'",
        True,
    ),
    "a lone surrogate in metadata": (
        _file(b'{"__metadata__": {"a": "\\udfff"}}'),
        r"header holds a lone UTF-16 surrogate in '\\udfff'",
        True,
    ),
    "not UTF-8": (_file(b'{"\xff": 1}'), r"header: not UTF-8", True),
    "text after the object": (_file(b"{}x"), r"header: not valid JSON \(Extra data", True),
}


@pytest.fixture(params=list(CRAFTED), ids=list(CRAFTED))
def crafted(request, tmp_path):
    blob, text, reference_too = CRAFTED[request.param]
    path = tmp_path / "crafted.safetensors"
    path.write_bytes(blob)
    return path, text, reference_too


def test_a_crafted_header_is_refused(crafted):
    path, text, _ = crafted
    with pytest.raises(
        ValueError, match=rf"crafted\.safetensors: not a valid safetensors file: {text}"
    ):
        sft.read_file(path)
    from posembed.reference import checkpoint as twin

    with pytest.raises(ValueError, match=r"crafted\.safetensors: not a valid safetensors file"):
        twin.resize_checkpoint(path, path.parent / "out.safetensors", "t", 4)


def test_resize_of_a_crafted_header_exits_2_with_one_line(crafted, capsys):
    from posembed import cli

    path, text, _ = crafted
    out = path.parent / "out.safetensors"
    assert cli.main(["resize", str(path), "--key", "t", "--length", "4", "-o", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("posembed resize: error: ")
    assert re.search(rf"not a valid safetensors file: {text}", captured.err), captured.err
    assert sorted(p.name for p in path.parent.iterdir()) == ["crafted.safetensors"]


def test_the_safetensors_package_refuses_the_crafted_headers_it_is_marked_for(crafted):
    pytest.importorskip("safetensors")
    from safetensors import SafetensorError
    from safetensors.numpy import load

    path, _, reference_too = crafted
    if reference_too:
        with pytest.raises(SafetensorError, match="Error while deserializing"):
            load(path.read_bytes())
    else:  # posembed is the stricter one here: the package reads it
        load(path.read_bytes())


@pytest.mark.parametrize(
    "raw",
    [
        b"\t\n{}\r ",
        b"{}    ",
        b'{"__metadata__": {}, "e": {"dtype": "BOOL", "shape": [0, 5], "data_offsets": [0, 0]}}',
    ],
)
def test_headers_the_format_allows_are_read(tmp_path, raw):
    path = tmp_path / "a.safetensors"
    path.write_bytes(_file(raw))
    got = sft.read_file(path)
    assert all(a.size == 0 for a in got.values())


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_fifo_or_a_folder_is_refused_without_waiting(tmp_path, kind):
    path = tmp_path / "model.safetensors"
    if kind == "fifo":
        if not hasattr(os, "mkfifo"):
            # Windows has no os.mkfifo; every POSIX host (CI's included) runs this case.
            pytest.skip("no FIFOs on this platform")
        os.mkfifo(path)
    else:
        path.mkdir()
    # In a child: a read that waits for a FIFO's writer would hang this process.
    code = (
        "import sys, posembed.io._safetensors as s\n"
        "try:\n"
        "    s.read_file(sys.argv[1])\n"
        "except ValueError as e:\n"
        "    print(e)\n"
        "from posembed import cli\n"
        "sys.exit(cli.main(['resize', sys.argv[1], '--key', 't', '--length', '4', '-o', "
        "sys.argv[1] + '.out']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60
    )
    what = "a FIFO" if kind == "fifo" else "a folder"
    assert done.stdout == (
        f"{path}: not a valid safetensors file: it is {what}, not a regular file\n"
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("posembed resize: error: ")
    assert what.split()[-1] in done.stderr


def test_a_checkpoint_replaced_by_a_fifo_after_its_check_is_refused(tmp_path, monkeypatch):
    from posembed.checkpoint import _resize as _checkpoint

    if not hasattr(os, "mkfifo"):
        # Windows has no os.mkfifo; every POSIX host (CI's included) runs this case.
        pytest.skip("no FIFOs on this platform")
    path = tmp_path / "model.safetensors"
    path.write_bytes(_file(b"{}"))
    checked = _checkpoint._check_paths

    def swap(src, dst, overwrite):  # the file checked, then a FIFO in its place
        checked(src, dst, overwrite)
        path.unlink()
        os.mkfifo(path)

    monkeypatch.setattr(_checkpoint, "_check_paths", swap)
    with pytest.raises(ValueError, match=r"it is a FIFO, not a regular file"):
        _checkpoint.resize_checkpoint(path, tmp_path / "out.safetensors", "t", 4)

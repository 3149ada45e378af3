"""posembed._safetensors, the format's one reader and one streaming writer,
checked against the safetensors package (in the test extra): each reads what
the other writes. resize_checkpoint's use of it is in tests/test_checkpoint.py.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posembed._safetensors as sft

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


def test_copy_appends_a_range_of_another_file_in_the_kernel_or_not(tmp_path, monkeypatch):
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

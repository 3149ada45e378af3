"""posembed.io._json and posembed.io._npy, the strict readers of the JSON and .npy
headers posembed takes from files a caller may have crafted: what they
accept round-trips with json and numpy.save; everything else is a ValueError
that names the file, whatever the bytes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posembed.io import _json, _npy

# -- JSON ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {"a": [1, 2.5, None, True, "x"], "b": {"c": []}},
        [],
        "[[{]}]",  # brackets inside strings are no nesting
        {"k": 'quote " and [ brace {'},
        [[[[[[[[1]]]]]]]],
    ],
)
def test_json_round_trips(value: object) -> None:
    assert _json.loads(json.dumps(value), "h") == value
    assert _json.loads(json.dumps(value).encode(), "h") == value


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )
)
@settings(max_examples=200, deadline=None)
def test_json_agrees_with_json_on_what_it_writes(value: object) -> None:
    text = json.dumps(value, allow_nan=False)
    assert _json.loads(text, "h") == json.loads(text)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[NaN]", "NaN is not JSON"),
        ('{"a": Infinity}', "Infinity is not JSON"),
        ("[-Infinity]", "-Infinity is not JSON"),
        ('{"a": 1, "a": 2}', "duplicate key 'a'"),
        ('{"o": {"k": 1, "k": 1}}', "duplicate key 'k'"),
        ("[" * 20_000, "nests 20000 levels deep; at most 64"),
        ('{"a": ' * 65 + "1" + "}" * 65, "nests 65 levels deep"),
        ("[1,", "not valid JSON"),
        ("", "not valid JSON"),
    ],
)
def test_json_refuses(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=r"^hdr: ") as info:
        _json.loads(text, "hdr")
    assert problem in str(info.value)


def test_json_refuses_bytes_that_are_not_utf8() -> None:
    with pytest.raises(ValueError, match=r"^hdr: not UTF-8"):
        _json.loads(b'{"a": "\xff"}', "hdr")


def test_json_depth_is_64_by_default_and_settable() -> None:
    assert _json.loads("[" * 64 + "]" * 64, "h") is not None
    with pytest.raises(ValueError, match="nests 3 levels deep; at most 2"):
        _json.loads("[[[]]]", "h", max_depth=2)


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_json_raises_only_value_error(data: bytes) -> None:
    try:
        _json.loads(data, "h")
    except ValueError as exc:
        message = str(exc)
    else:
        return
    assert message.startswith("h: ")


# -- .npy ----------------------------------------------------------------------------------

ARRAYS = [
    np.arange(10, dtype=np.uint16),
    np.arange(12.0).reshape(3, 4).copy(order="F"),
    np.zeros(0, np.int64),
    np.zeros((0, 5), np.int32),
    np.array(3.0),
    np.arange(6, dtype=">i4"),
    np.zeros((2, 3), dtype=[("a", "<i4"), ("b", ">f8")]),
]


@pytest.mark.parametrize("index", range(len(ARRAYS)))
def test_npy_reads_what_numpy_saves(tmp_path: Path, index: int) -> None:
    want = ARRAYS[index]
    np.save(tmp_path / "a.npy", want)
    got = _npy.load(tmp_path / "a.npy", "a.npy")
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    assert got.flags.f_contiguous == want.flags.f_contiguous or want.ndim < 2
    assert got.tobytes("A") == want.tobytes("A")


def test_npy_reads_format_versions_2_and_3(tmp_path: Path) -> None:
    want = np.arange(5, dtype=np.int64)
    for version in ((2, 0), (3, 0)):
        with open(tmp_path / "a.npy", "wb") as f:
            np.lib.format.write_array(f, want, version=version)
        assert np.array_equal(_npy.load(tmp_path / "a.npy", "a"), want)


def _crafted(header: str, data: bytes = b"\0" * 16, version: int = 1) -> bytes:
    text = header.encode("latin1")
    text += b" " * (63 - (len(text) + 10) % 64) + b"\n"
    width = 2 if version == 1 else 4
    return b"\x93NUMPY" + bytes([version, 0]) + len(text).to_bytes(width, "little") + text + data


GOOD = "{'descr': '<u2', 'fortran_order': False, 'shape': (8,), }"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (_crafted(GOOD), None),
        (b"", "does not start with the .npy magic"),
        (b"PK\x03\x04" + b"\0" * 20, "does not start with the .npy magic"),
        (_crafted(GOOD)[:6] + b"\x09\x00" + _crafted(GOOD)[8:], "format version 9.0"),
        (_crafted(GOOD)[:9], "ends inside the header length"),
        (_crafted(GOOD)[:40], "runs past the file"),
        (_crafted(GOOD.replace("(8,)", "(4611686018427387904,)")), "2^62 bytes or more"),
        (_crafted(GOOD.replace("(8,)", "(2**62,)")), "not a Python literal"),
        (_crafted(GOOD.replace("(8,)", "(-1,)")), "not a tuple of non-negative integers"),
        (_crafted(GOOD.replace("(8,)", "(True,)")), "not a tuple of non-negative integers"),
        (_crafted(GOOD.replace("(8,)", "(8.0,)")), "not a tuple of non-negative integers"),
        (_crafted(GOOD.replace("(8,)", "[8]")), "not a tuple of non-negative integers"),
        (_crafted(GOOD.replace("(8,)", "(9,)")), "needs 18 data bytes; the file has 16"),
        (_crafted(GOOD.replace("False", "0")), "fortran_order 0 is not True or False"),
        (_crafted(GOOD.replace("'<u2'", "'|O'")), "holds Python objects"),
        (_crafted(GOOD.replace("'<u2'", "'<q7'")), "is not a NumPy dtype"),
        (_crafted(GOOD.replace("'<u2'", "[('a', 3)]")), "is not a NumPy dtype"),
        (_crafted("{'descr': '<u2', 'shape': (8,)}"), "must be a dict of"),
        (_crafted(GOOD[:-1] + "'x': 1}"), "must be a dict of"),
        (_crafted("[" * 3000 + "]" * 3000), "not a Python literal"),
        (_crafted("x" * 20_000, version=2), "at most 10000"),
    ],
)
def test_npy_refuses_crafted_headers(tmp_path: Path, content: bytes, problem: str | None) -> None:
    path = tmp_path / "c.npy"
    path.write_bytes(content)
    if problem is None:
        assert _npy.load(path, "c.npy").shape == (8,)
        return
    with pytest.raises(ValueError, match=r"^c\.npy: not a valid \.npy file: ") as info:
        _npy.load(path, "c.npy")
    assert problem in str(info.value)


def test_npy_refuses_what_is_no_regular_file_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ValueError, match=r"^fifo: not a regular file"):
        _npy.load(tmp_path / "fifo", "fifo")
    with pytest.raises(ValueError, match=r"^dir: not a regular file"):
        _npy.load(tmp_path, "dir")


@given(st.binary(max_size=300))
@settings(max_examples=300, deadline=None)
def test_npy_raises_only_value_error(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("npy") / "x.npy"
    path.write_bytes(_crafted(GOOD)[:10] + data)
    try:
        _npy.load(path, "x")
    except ValueError as exc:
        message = str(exc)
    else:
        return
    assert message.startswith("x: ")

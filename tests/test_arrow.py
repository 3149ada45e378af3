"""Arrow in and out: windows of an Arrow list column (pyarrow, polars, any
PyCapsule producer, a tokenized datasets.Dataset) equal the CSR path byte for
byte; Windows.to_arrow is a table over the token buffer that datasets loads."""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import sys
from typing import Any

import numpy as np
import pytest

import posembed
from posembed.kernels import _arrow

from .conftest import torch_or_skip

pa = pytest.importorskip("pyarrow")  # the test extra installs it; posembed does not need it

FIELDS = ("tokens", "starts", "lengths", "documents", "doc_offsets", "size", "step", "tail")
INTEGERS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
PARAMS = [
    {"size": 4},
    {"size": 5, "overlap": 2, "tail": "shift"},
    {"size": 3, "step": 2, "tail": "drop"},
    {"size": 1},
]


def documents(rng: np.random.Generator, count: int, dtype: Any = np.int32) -> list[np.ndarray]:
    """``count`` documents of 0..12 tokens (empty ones among them)."""
    info = np.iinfo(dtype)
    return [
        rng.integers(info.min, info.max, int(rng.integers(0, 13)), endpoint=True, dtype=dtype)
        for _ in range(count)
    ]


def csr(docs: list[np.ndarray], dtype: Any = np.int32) -> tuple[np.ndarray, np.ndarray]:
    flat = np.concatenate(docs).astype(dtype) if docs else np.empty(0, dtype)
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
    return flat, offsets


def list_array(docs: list[np.ndarray], dtype: Any = np.int32, large: bool = False) -> Any:
    kind = (pa.large_list if large else pa.list_)(pa.from_numpy_dtype(np.dtype(dtype)))
    return pa.array([d.tolist() for d in docs], type=kind)


def assert_same_windows(got: posembed.Windows, want: posembed.Windows) -> None:
    for name in FIELDS:
        a, b = getattr(got, name), getattr(want, name)
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype, name
            assert a.shape == b.shape, name
            assert a.tobytes() == b.tobytes(), name
        else:
            assert a == b, name


def check_column(column: Any, docs: list[np.ndarray], dtype: Any = np.int32) -> None:
    """Windows of ``column`` equal the CSR path's on its documents, for several parameters."""
    flat, offsets = csr(docs, dtype)
    for params in PARAMS:
        want = posembed.windows(flat, offsets=offsets, **params)
        assert_same_windows(posembed.windows(column, **params), want)


class StreamOnly:
    """An Arrow producer with the stream capsule only (a foreign library's column)."""

    def __init__(self, column: Any):
        self._column = column

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self._column.__arrow_c_stream__(requested_schema)


class ArrayOnly:
    """An Arrow producer with the array capsule only."""

    def __init__(self, array: Any):
        self._array = array

    def __arrow_c_array__(self, requested_schema: object = None) -> object:
        return self._array.__arrow_c_array__(requested_schema)


@pytest.mark.parametrize("large", [False, True], ids=["list", "large_list"])
def test_list_array_equals_csr(rng, large):
    docs = documents(rng, 40)
    docs[3] = docs[7] = np.empty(0, np.int32)  # empty lists: empty documents
    check_column(list_array(docs, large=large), docs)


@pytest.mark.parametrize("large", [False, True], ids=["list", "large_list"])
def test_sliced_arrays_are_rebased(rng, large):
    docs = documents(rng, 30)
    whole = list_array(docs, large=large)
    for start, stop in [(0, 30), (5, 30), (5, 17), (29, 30), (12, 12)]:
        part = whole.slice(start, stop - start)
        assert part.offset == start
        check_column(part, docs[start:stop])


def test_offsets_from_anywhere_in_the_values(rng):
    values = pa.array(rng.integers(0, 1000, 20).astype(np.int32))
    # offsets that start past 0, over a child that is itself a slice
    column = pa.ListArray.from_arrays(pa.array([5, 7, 7, 10], pa.int32()), values.slice(3))
    flat = values.to_numpy()[3:]
    check_column(column, [flat[5:7], flat[7:7], flat[7:10]])


def test_a_list_array_with_broken_offsets_is_refused():
    values = pa.array(np.arange(10, dtype=np.int32))
    down = pa.ListArray.from_arrays(pa.array([0, 6, 4, 10], pa.int32()), values)
    with pytest.raises(ValueError, match=r"the offsets of row 1 decrease \(6 to 4\)"):
        posembed.windows(down, 2)


def test_fixed_size_list_is_a_corpus_of_equal_documents(rng):
    flat = rng.integers(0, 1000, 60).astype(np.int64)
    column = pa.FixedSizeListArray.from_arrays(pa.array(flat), 6)
    docs = [flat[k : k + 6] for k in range(0, 60, 6)]
    check_column(column, docs, np.int64)
    check_column(column.slice(3, 4), docs[3:7], np.int64)


def test_chunked_array_joins_chunks_in_order(rng):
    docs = documents(rng, 25)
    kind = pa.list_(pa.int32())
    chunks = [
        list_array(docs[:10]),
        pa.array([], type=kind),  # an empty chunk
        list_array(docs[10:11]),
        pa.array([], type=kind),
        list_array(docs[11:]).slice(0),
    ]
    column = pa.chunked_array(chunks, type=kind)
    check_column(column, docs)
    # a slice of a chunked array: chunks that start inside a list array
    check_column(column.slice(4, 15), docs[4:19])
    # no chunk at all, and only empty chunks: no documents, no windows
    for empty in (pa.chunked_array([], type=kind), pa.chunked_array([chunks[1], chunks[3]])):
        w = posembed.windows(empty, 4)
        assert len(w) == 0
        assert w.doc_offsets.tolist() == [0]
        assert w.tokens.dtype == np.int32


@pytest.mark.parametrize("dtype", INTEGERS)
def test_every_integer_value_type(rng, dtype):
    docs = documents(rng, 12, dtype)
    check_column(list_array(docs, dtype), docs, dtype)
    check_column(
        pa.chunked_array([list_array(docs[:5], dtype), list_array(docs[5:], dtype)]), docs, dtype
    )


def test_polars_series(rng):
    pl = pytest.importorskip("polars")
    docs = documents(rng, 20)
    first = pl.Series("input_ids", [d.tolist() for d in docs[:8]], dtype=pl.List(pl.Int32))
    second = pl.Series("input_ids", [d.tolist() for d in docs[8:]], dtype=pl.List(pl.Int32))
    check_column(first, docs[:8])
    series = first.append(second)  # two chunks, as polars keeps them
    assert series.n_chunks() == 2
    check_column(series, docs)


def test_capsule_only_producers(rng):
    docs = documents(rng, 20)
    array = list_array(docs)
    check_column(ArrayOnly(array), docs)
    check_column(StreamOnly(pa.chunked_array([array.slice(0, 9), array.slice(9)])), docs)


def test_single_chunk_values_are_read_in_place(rng):
    docs = documents(rng, 30)
    whole = list_array(docs)
    part = whole.slice(4, 20)
    values, offsets = _arrow.list_column(part)
    # the values buffer of the child, from the first token of row 4 on
    buffer = whole.values.buffers()[1]
    first = int(whole.offsets[4].as_py())
    assert values.ctypes.data == buffer.address + first * values.itemsize
    assert offsets[0] == 0
    assert offsets[-1] == values.shape[0]
    assert offsets.dtype == np.int64
    # a stream of one chunk too
    values, _ = _arrow.list_column(StreamOnly(pa.chunked_array([part])))
    assert values.ctypes.data == buffer.address + first * values.itemsize
    # several chunks take one copy, into memory of their own
    column = pa.chunked_array([whole.slice(0, 10), whole.slice(10)])
    values, _ = _arrow.list_column(column)
    assert not np.shares_memory(values, whole.values.to_numpy())


def test_a_producer_pyarrow_cannot_read_is_refused():
    class Broken:
        def __arrow_c_stream__(self, requested_schema: object = None) -> object:
            return "not a capsule"

    with pytest.raises(TypeError, match=r"tokens must be an Arrow column pyarrow can read; got"):
        posembed.windows(Broken(), 2)


def test_flat_arrow_arrays_are_tokens_as_before():
    # a flat integer column is one stream, read by NumPy as it always was
    flat = pa.array(np.arange(10, dtype=np.int32))
    assert _arrow.list_column(flat) is None
    want = posembed.windows(np.arange(10, dtype=np.int32), 4, offsets=[0, 3, 10])
    assert_same_windows(posembed.windows(flat, 4, offsets=[0, 3, 10]), want)


def test_plain_numpy_never_imports_pyarrow(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    w = posembed.windows(np.arange(10, dtype=np.int32), 4)
    assert len(w) == 3
    assert _arrow.is_arrow(np.arange(3)) is False
    assert _arrow.is_arrow([1, 2]) is False


def test_null_list_is_refused_by_its_row():
    kind = pa.list_(pa.int32())
    column = pa.chunked_array(
        [pa.array([[1, 2], [3]], type=kind), pa.array([[4], [5], None, [6]], type=kind)]
    )
    with pytest.raises(ValueError, match=r"tokens must hold a list at every row .*; row 4 is null"):
        posembed.windows(column, 2)
    # the row counts from the start of the slice the caller holds
    with pytest.raises(ValueError, match=r"row 2 is null"):
        posembed.windows(pa.array([[1], [2], [3], None], type=kind).slice(1), 2)


def test_null_token_is_refused_by_its_row():
    column = pa.chunked_array([pa.array([[1, 2], [3]]), pa.array([[4, 5, None]])])
    with pytest.raises(
        ValueError, match=r"tokens must hold no null token; row 2 has one at position 2"
    ):
        posembed.windows(column, 2)


@pytest.mark.parametrize(
    ("column", "kind"),
    [
        (pa.array([[1.0, 2.0], [3.0]]), r"list<item: double>"),
        (pa.array([[True], [False]]), r"list<item: bool>"),
        (pa.array([["a"], ["b"]]), r"list<item: string>"),
    ],
    ids=["float", "bool", "string"],
)
def test_values_must_be_integers(column, kind):
    with pytest.raises(TypeError, match=r"tokens must be a list column of integers .*" + kind):
        posembed.windows(column, 2)


def test_offsets_with_an_arrow_column_is_refused():
    with pytest.raises(ValueError, match=r"offsets must not be given with an Arrow list column"):
        posembed.windows(pa.array([[1, 2], [3]]), 2, offsets=[0, 2, 3])


def test_without_pyarrow_an_arrow_column_names_the_extra(monkeypatch):
    column = list_array([np.arange(3, dtype=np.int32)])
    producer = StreamOnly(pa.chunked_array([column]))
    w = posembed.windows(np.arange(4, dtype=np.int32), 2)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    for given in (column, producer):
        with pytest.raises(ImportError, match=r"needs pyarrow.*pip install 'posembed\[arrow\]'"):
            posembed.windows(given, 2)
    with pytest.raises(ImportError, match=r"Windows\.to_arrow needs pyarrow.*posembed\[arrow\]"):
        w.to_arrow()


# ---- Arrow out ----------------------------------------------------------------------------


def test_to_arrow_is_over_the_token_buffer(rng):
    flat, offsets = csr(documents(rng, 15, np.uint16), np.uint16)
    w = posembed.windows(flat, 4, offsets=offsets, overlap=1)
    table = w.to_arrow()
    assert table.schema == pa.schema(
        [
            ("input_ids", pa.list_(pa.uint16(), 4)),
            ("attention_mask", pa.list_(pa.int8(), 4)),
            ("document", pa.int64()),
            ("start", pa.int64()),
            ("length", pa.int64()),
        ]
    )
    (ids,) = table.column("input_ids").chunks
    assert ids.values.buffers()[1].address == w.tokens.ctypes.data  # no copy
    assert ids.values.to_numpy().reshape(-1, 4).tobytes() == w.tokens.tobytes()
    mask = table.column("attention_mask").chunks[0].values.to_numpy().reshape(-1, 4)
    assert np.array_equal(mask, w.mask.astype(np.int8))
    for name, field in [("document", "documents"), ("start", "starts"), ("length", "lengths")]:
        assert table.column(name).to_numpy().tolist() == getattr(w, field).tolist()


def test_to_arrow_refuses_a_windows_built_wrong():
    w = posembed.windows(np.arange(10, dtype=np.int32), 4)
    with pytest.raises(TypeError, match=r"windows\.tokens must be a 2-D integer ndarray"):
        dataclasses.replace(w, tokens=w.tokens.astype(np.float32)).to_arrow()
    with pytest.raises(ValueError, match=r"windows\.tokens .*rows but windows\.starts"):
        dataclasses.replace(w, tokens=w.tokens[:2]).to_arrow()


@pytest.fixture
def hf_offline(tmp_path, monkeypatch):
    """datasets, kept off the network and out of $HOME."""
    for name in ("HF_HOME", "HF_DATASETS_CACHE"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    return pytest.importorskip("datasets")


def test_to_arrow_round_trips_through_datasets(rng, hf_offline):
    datasets = hf_offline
    docs = documents(rng, 20, np.int32)
    w = posembed.windows(list_array(docs), 6, overlap=2)
    ds = datasets.Dataset(w.to_arrow())
    assert repr(ds.features["input_ids"]) == "List(Value('int32'), length=6)"
    assert repr(ds.features["attention_mask"]) == "List(Value('int8'), length=6)"
    assert len(ds) == len(w)
    got = ds.with_format("numpy")[:]  # every row, each column one array
    assert np.array_equal(got["input_ids"], w.tokens)  # (datasets' numpy format widens ints)
    ids = ds.with_format("arrow")[:]["input_ids"]
    assert ids.type == pa.list_(pa.int32(), 6)
    assert ids.combine_chunks().values.to_numpy().tobytes() == w.tokens.tobytes()
    assert np.array_equal(got["attention_mask"], w.mask.astype(np.int8))
    assert np.array_equal(got["document"], w.documents)
    assert np.array_equal(got["start"], w.starts)
    assert np.array_equal(got["length"], w.lengths)


# ---- a tokenized datasets.Dataset ---------------------------------------------------------


def word_level_tokenizer(words: list[str]) -> Any:
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, **{word: k + 1 for k, word in enumerate(words)}}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    return tok


@pytest.fixture
def tokenized(rng, hf_offline):
    """A tokenized dataset, built here: generated words and texts, a WordLevel
    tokenizer, and ``Dataset.map(batched=True)`` giving ``input_ids``."""
    datasets = hf_offline
    letters = np.array(list("abcdefghij"))
    words = sorted({"".join(rng.choice(letters, int(rng.integers(2, 6)))) for _ in range(300)})
    tok = word_level_tokenizer(words)
    texts = [" ".join(rng.choice(words, int(rng.integers(0, 40)))) for _ in range(257)]
    ds = datasets.Dataset.from_dict({"text": texts})

    def encode(batch: dict[str, list[str]]) -> dict[str, list[list[int]]]:
        return {"input_ids": [e.ids for e in tok.encode_batch(batch["text"])]}

    ds = ds.map(encode, batched=True, batch_size=64, remove_columns=["text"])
    ids = [np.array(e.ids, np.int32) for e in tok.encode_batch(texts)]
    return ds, ids


def test_tokenized_dataset_column_equals_csr(tokenized):
    ds, ids = tokenized
    assert sum(len(d) == 0 for d in ids) > 0  # empty texts: empty documents
    column = ds.with_format("arrow")["input_ids"]
    check_column(column, ids)
    check_column(ds.data.column("input_ids"), ids)
    # a selection (an indices mapping) is honoured through the arrow format
    picked = [200, 3, 3, 100]
    check_column(ds.select(picked).with_format("arrow")["input_ids"], [ids[k] for k in picked])
    # and a contiguous selection, a slice of the table
    check_column(ds.select(range(10, 90)).with_format("arrow")["input_ids"], ids[10:90])


def test_what_the_datasets_guide_says_of_datasets(tokenized, tmp_path):
    # The arrow format follows select, shuffle and train_test_split; the table
    # underneath (ds.data) is kept whole by each, but for a contiguous select.
    ds, ids = tokenized
    split = ds.train_test_split(test_size=0.25, seed=3)
    shuffled = ds.shuffle(seed=4)
    for view in (ds.select([200, 3, 3, 100]), shuffled, split["train"], split["test"]):
        rows = view["input_ids"]  # the rows in the view's order, as Python lists
        check_column(view.with_format("arrow")["input_ids"], [np.array(r, np.int32) for r in rows])
        check_column(view.data.column("input_ids"), ids)  # the whole table, in its order
    check_column(ds.select(range(10, 90)).data.column("input_ids"), ids[10:90])
    # Dataset.map's batches are 1,000 rows unless told, and save_to_disk writes
    # its Arrow file in record batches of 1,000 rows
    datasets = sys.modules["datasets"]
    assert inspect.signature(datasets.Dataset.map).parameters["batch_size"].default == 1000
    big = datasets.Dataset.from_dict({"input_ids": [[k] * 3 for k in range(2_500)]})
    big.save_to_disk(tmp_path / "saved")
    (shard,) = sorted((tmp_path / "saved").glob("*.arrow"))
    with pa.ipc.open_stream(shard) as reader:
        assert [b.num_rows for b in reader] == [1000, 1000, 500]


def test_a_datasets_torch_format_gives_pytorch_tensors(rng, hf_offline):
    # the datasets guide: train.with_format("torch") gives tensors, of the windows
    torch = torch_or_skip()
    w = posembed.windows(list_array(documents(rng, 12, np.int32)), 6, overlap=2)
    batch = hf_offline.Dataset(w.to_arrow()).with_format("torch")[:4]
    assert isinstance(batch["input_ids"], torch.Tensor)
    assert np.array_equal(batch["input_ids"].numpy(), w.tokens[:4])


def group_texts(examples: dict[str, list[list[int]]], block_size: int) -> dict[str, Any]:
    """The HF language-modeling examples' grouping: concatenate the batch,
    drop the remainder, cut into blocks of ``block_size``."""
    joined = list(itertools.chain.from_iterable(examples["input_ids"]))
    total = len(joined) // block_size * block_size
    return {"input_ids": [joined[i : i + block_size] for i in range(0, total, block_size)]}


@pytest.mark.parametrize("batch_size", [None, 50])
def test_group_texts_equals_windows_of_the_concatenated_stream(tokenized, batch_size):
    ds, ids = tokenized
    block = 16
    grouped = ds.map(
        group_texts, batched=True, batch_size=batch_size, fn_kwargs={"block_size": block}
    )
    want = np.array(grouped["input_ids"], np.int64).reshape(-1, block)
    # group_texts joins each batch into one stream: the batches are the documents,
    # a list column over the same values with one row per batch
    column = ds.with_format("arrow")["input_ids"].combine_chunks()
    rows = len(ids) if batch_size is None else batch_size
    ends = column.offsets.to_numpy()
    batches = pa.ListArray.from_arrays(
        pa.array(np.unique(np.append(ends[::rows], ends[-1]))), column.values
    )
    w = posembed.windows(batches, block, step=block, tail="drop")
    assert np.array_equal(w.tokens, want)
    if batch_size is None:  # one batch: the whole stream, no offsets
        flat = column.values.to_numpy()
        plain = posembed.windows(flat, block, step=block, tail="drop")
        assert np.array_equal(plain.tokens, want)


def test_dask_windows_take_an_arrow_column(rng):
    pytest.importorskip("dask.array")
    import posembed.dask as pdask

    docs = documents(rng, 40)
    column = pa.chunked_array([list_array(docs[:15]), list_array(docs[15:]).slice(2)])
    for params in PARAMS:
        want = posembed.windows(column, **params)
        assert_same_windows(pdask.windows(column, **params).compute(), want)
    with pytest.raises(ValueError, match=r"offsets must not be given with an Arrow list column"):
        pdask.windows(column, 2, offsets=[0, 1])


def test_a_datasets_column_is_read_in_the_datasets_row_order(hf_offline):
    # ds["input_ids"] has no Arrow interface of its own: posembed reads the
    # dataset's Arrow data, following select (an indices mapping)
    ds = hf_offline.Dataset.from_dict({"input_ids": [[1, 2, 3], [4], [5, 6, 7, 8, 9]]})
    picked = ds.select([2, 0])
    got = posembed.windows(picked["input_ids"], 2)
    flat = np.array([5, 6, 7, 8, 9, 1, 2, 3], got.tokens.dtype)  # the type datasets chose
    assert_same_windows(got, posembed.windows(flat, 2, offsets=np.array([0, 5, 8])))


def test_a_table_is_refused_naming_its_columns():
    table = pa.table({"input_ids": [[1, 2]], "text": ["a"]})
    with pytest.raises(TypeError, match=r"got a table of columns \(input_ids, text\)"):
        posembed.windows(table, 2)

"""What the sources, the pipeline and the sinks of ``posembed chunk`` share:
the memory budget, the one-line error, regular files opened without
waiting, :class:`TokenFile` (a token file read a slice at a time with
positional reads, never mapped, so that a file that shrinks gives an error,
not a crash), and the two shapes of input a source module gives the
pipeline: :class:`RangeInput` (read by token range) and :class:`StreamInput`
(whole documents in one pass)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from posembed.io._parts import read_parts
from posembed.io._tokens import ChunkError, TokenFile
from posembed.kernels._arrow import require

# Everything a running chunk holds at a time, in bytes, whatever the window
# size, step and tail: the token buffers read ahead, the rows cut and written
# behind, and the batches' layouts (beyond it: the document offsets, 16 bytes
# per document). Batches are sized to fit; only a window of more than a sixth
# of it (size x itemsize > MEMORY_BYTES / 6) makes a batch of one go past it.
MEMORY_BYTES = 64 << 20


# What a source module of ``posembed chunk`` offers (``_source_tokens``,
# ``_source_arrow``, ``_source_indexed``; the pipeline, ``_chunk``, takes the
# first whose ``matches`` holds):
#   matches(path) -> bool             whether it reads this input
#   check(path, options) -> None      ChunkError for an option it does not take
#   inputs(path, options) -> tuple    the files it reads (no output may replace them)
#   open_input(path, options) -> RangeInput or StreamInput


class SourceOptions(NamedTuple):
    """A run's input options, each None where not given."""

    dtype: Any = None  # the tokens' dtype of a raw token file
    offsets: Any = None  # a .npy file of CSR document offsets for a token file
    column: Any = None  # the list column of Arrow and Parquet input
    documents: Any = None  # indexed datasets: "documents" or "sequences"


class RangeInput(NamedTuple):
    """A corpus read by token range: every document's offsets known up front
    (documents larger than memory are cut a batch of windows at a time).

    Attributes
    ----------
    tokens : TokenFile
        The tokens, back to back, not yet opened.
    doc_offsets : ndarray of int64, shape (documents + 1,)
        The documents' offsets, from 0 to the token count.
    meta : dict of str to Any
        What meta.json records of the input beyond the common fields.
    """

    tokens: TokenFile
    doc_offsets: np.ndarray
    meta: dict[str, Any]


class Documents(NamedTuple):
    """A batch of whole documents as CSR: the tokens and their offsets (from 0),
    and ``done``: how much of the whole input has been read once this batch
    has, from 0 to 1, where the source can tell (for a progress bar's total)."""

    tokens: np.ndarray
    offsets: np.ndarray
    path: Path
    first_row: int
    done: float | None = None


class StreamInput(NamedTuple):
    """A corpus read in one pass, a bounded batch of whole documents at a time
    (the document offsets are never all held).

    Attributes
    ----------
    dtype : numpy.dtype
        The tokens' dtype.
    documents : callable
        Starts the pass: a generator of :class:`Documents` in corpus order
        (closing it closes the files).
    meta : dict of str to Any
        What meta.json records of the input beyond the common fields.
    """

    dtype: np.dtype[Any]
    documents: Callable[[], Generator[Documents, None, None]]
    meta: dict[str, Any]


# column names listed in an error message; a file may hold thousands
_NAMES_SHOWN = 20


def _column_type(pa: Any, schema: Any, path: Path, column: str) -> np.dtype[Any]:
    """The tokens' dtype of ``column``, a list of integers, in ``schema``."""
    index = schema.get_field_index(column)
    if index < 0:
        shown = [repr(name) for name in schema.names[:_NAMES_SHOWN]]
        if len(schema.names) > _NAMES_SHOWN:
            shown.append(f"and {len(schema.names) - _NAMES_SHOWN} more")
        names = ", ".join(shown) or "none"
        raise ChunkError(
            f"{path}: no column {column!r} (its columns: {names}); choose one with --column"
        )
    kind = schema.field(index).type
    lists = (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list)
    if not any(is_list(kind) for is_list in lists):
        raise ChunkError(
            f"{path}: column {column!r} is {kind}, not a list of token ids per row (document)"
        )
    values = kind.value_type
    if not pa.types.is_integer(values):
        raise ChunkError(
            f"{path}: column {column!r} holds {values}, not integer token ids; "
            "give a list column of integers"
        )
    dtype: np.dtype[Any] = np.dtype(values.to_pandas_dtype())
    return dtype


def _view(array: Any) -> np.ndarray:
    """A read-only NumPy view of a flat integer Arrow array without nulls: over
    its data buffer, not by ``to_numpy``, which imports pandas (tens of MiB)."""
    dtype = np.dtype(array.type.to_pandas_dtype())
    if len(array) == 0:
        return np.empty(0, dtype)
    data = array.buffers()[1]
    return np.frombuffer(data, dtype, len(array), array.offset * dtype.itemsize)


def _csr(array: Any, path: Path, first_row: int, column: str, dtype: np.dtype[Any]) -> Documents:
    where = f"{path}: row {{}} of column {column!r}"
    pa = require("posembed chunk on Arrow or Parquet input")
    try:
        array.validate()  # buffers as long as the lengths say (a crafted IPC file)
    except pa.ArrowException as exc:
        raise ChunkError(f"{path}: column {column!r} is not a valid list column ({exc})") from None
    if array.null_count:
        nulls = np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))
        raise ChunkError(
            where.format(first_row + int(nulls[0])) + " is null; every row must be a list of "
            "token ids (an empty list is an empty document)"
        )
    if pa.types.is_fixed_size_list(array.type):
        # every row a document of the list's size (padding included: rows of
        # posembed's own windows are read without it, see _source_windows)
        width = array.type.list_size
        values = array.flatten()  # the rows' values, the array's offset applied
        if values.null_count:
            at = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
            row = first_row + at // max(1, width)
            raise ChunkError(where.format(row) + " holds a null token id")
        local = np.arange(len(array) + 1, dtype=np.int64) * width
        return Documents(_view(values), local, path, first_row)
    offsets = _view(array.offsets).astype(np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    values = array.values
    if first < 0 or last < first or last > len(values):
        raise ChunkError(f"{path}: list offsets of column {column!r} out of range")
    values = values.slice(first, last - first)
    if values.null_count:
        at = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        row = int(np.searchsorted(offsets - first, at, side="right")) - 1
        raise ChunkError(where.format(first_row + row) + " holds a null token id")
    tokens = _view(values)
    from posembed.kernels._windows import _offsets  # here: _windows imports this module's users

    try:
        local = _offsets(offsets - first, tokens.shape[0])
    except ValueError as exc:
        raise ChunkError(f"{path}: list offsets of column {column!r}: {exc}") from None
    return Documents(tokens, local, path, first_row)


def _token_dtype(spelling: Any) -> np.dtype[Any]:
    """The integer dtype ``--dtype`` names, in the byte order it names."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a deprecated alias is judged by what it means
        try:
            dt: np.dtype[Any] = np.dtype(spelling)
        # NumPy refuses odd spellings with TypeError, ValueError or others
        # ("(-1,)u2", "(99999999999,)u1"); all of them mean the same here.
        except Exception:
            raise ChunkError(
                f"--dtype {spelling!r} is not a NumPy dtype; give an integer type such as "
                "uint16 or int32"
            ) from None
    if dt.kind not in "iu" or dt.shape or dt.names is not None:
        raise ChunkError(f"--dtype must be an integer type; got {dt}")
    return dt


def window_documents(
    rows: np.ndarray, lengths: np.ndarray, where: Any, first: int, total: int
) -> Documents:
    """Windows ``first..`` of ``total`` of a folder posembed chunk wrote, as
    documents: each row cut to its length (one checked to be in 0..size)."""
    size = rows.shape[1]
    lengths = lengths.astype(np.int64, copy=False)
    bad = np.flatnonzero((lengths < 0) | (lengths > size))
    if bad.size:
        i = int(bad[0])
        raise ChunkError(
            f"{where}: window {first + i} has length {int(lengths[i])}; a window of {size} "
            f"holds 0..{size} tokens"
        )
    tokens = rows[np.arange(size)[None, :] < lengths[:, None]]
    offsets = np.zeros(lengths.shape[0] + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    done = (first + lengths.shape[0]) / total if total else 1.0
    return Documents(tokens, offsets, where, first, done)


def window_blocks(
    windows: Any, lengths: Any, n: int, width: int, where: Any, rows_per_block: int
) -> Generator[Documents, None, None]:
    """The ``n`` windows of a folder posembed chunk wrote, as documents, read
    ``rows_per_block`` at a time from its windows and lengths (each a flat
    :class:`TokenFile`, on disk or in a store), both checked after the last
    block to be the files first seen."""
    windows.open()
    try:
        lengths.open()
        try:
            for first in range(0, n, rows_per_block):
                last = min(n, first + rows_per_block)
                rows = windows.read(first * width, last * width).reshape(-1, width)
                yield window_documents(rows, lengths.read(first, last), where, first, n)
            windows.check()
            lengths.check()
        finally:
            lengths.close()
    finally:
        windows.close()


def check_column_options(options: SourceOptions) -> None:
    """The options an Arrow or Parquet input refuses, refused."""
    if options.dtype is not None:
        raise ChunkError("--dtype applies to raw token files; Arrow and Parquet name their type")
    if options.offsets is not None:
        raise ChunkError(
            "--offsets applies to token files; in Arrow and Parquet input each row of the "
            "column is a document"
        )
    if options.column is not None and not isinstance(options.column, str):
        raise ChunkError(f"--column must be a column name; got {options.column!r}")


def token_layout(
    where: Any, header: Any, dtype: Any, nbytes: int
) -> tuple[np.dtype[Any], int, int]:
    """(dtype, bytes before the first token, token count) of a token file:
    a 1-D integer ``.npy`` file's (``header``), or a raw one of ``nbytes``
    bytes of ``--dtype`` tokens (``header`` None)."""
    if header is not None:
        if dtype is not None:
            raise ChunkError("--dtype applies to raw token files; a .npy file names its own")
        if len(header.shape) != 1 or header.dtype.kind not in "iu":
            raise ChunkError(
                f"{where}: tokens must be a 1-D integer array; got {header.dtype} "
                f"of shape {header.shape}"
            )
        return header.dtype, header.offset, header.shape[0]
    if dtype is None:
        raise ChunkError(f"{where}: a raw token file needs --dtype (e.g. uint16)")
    dt = _token_dtype(dtype)
    if nbytes % dt.itemsize:
        raise ChunkError(
            f"{where}: {nbytes} bytes is not a whole number of {dt} tokens "
            f"({dt.itemsize} bytes each)"
        )
    return dt, 0, nbytes // dt.itemsize


def parts_input(where: Any, meta: dict[str, Any], block_bytes: int) -> StreamInput:
    """The windows ``posembed chunk --dask`` wrote at ``where`` (a folder, or
    a URL of a store) as a corpus of one document per window, read
    ``block_bytes`` of windows at a time."""
    try:
        whole = read_parts(where)
    except ValueError as exc:
        raise ChunkError(str(exc)) from None
    view: Any = whole.tokens  # a PartsView: rows read from the parts when sliced
    lengths = whole.lengths
    n, width = view.shape

    def documents() -> Generator[Documents, None, None]:
        step = max(1, block_bytes // max(1, width * view.dtype.itemsize))
        try:
            for first in range(0, n, step):
                last = min(n, first + step)
                try:
                    rows = view[first:last]
                except ValueError as exc:  # a part that changed since it was checked
                    raise ChunkError(str(exc)) from None
                yield window_documents(rows, lengths[first:last], where, first, n)
        finally:
            for part in view.parts:
                part.close()

    return StreamInput(np.dtype(view.dtype), documents, meta)


def parquet_windows_type(pa: Any, schema: Any, where: Any) -> tuple[int, np.dtype[Any]]:
    """(window size, token dtype) of the windows posembed chunk writes as
    Parquet (``input_ids`` a fixed-size list of integers, ``length`` an integer)."""
    ids = schema.field("input_ids").type if "input_ids" in schema.names else None
    length = schema.field("length").type if "length" in schema.names else None
    if (
        ids is None
        or not pa.types.is_fixed_size_list(ids)
        or not pa.types.is_integer(ids.value_type)
        or length is None
        or not pa.types.is_integer(length)
    ):
        raise ChunkError(
            f"{where}: not the windows posembed chunk writes (a fixed-size list column "
            "'input_ids' of integers and an integer column 'length')"
        )
    return int(ids.list_size), np.dtype(ids.value_type.to_pandas_dtype())


def parquet_window_documents(
    reader: Any, where: Any, n: int, size: int, dtype: np.dtype[Any], block_rows: int
) -> Generator[Documents, None, None]:
    """The windows of a Parquet file posembed chunk wrote (an open
    ``pyarrow.parquet.ParquetFile``) as documents, ``block_rows`` at a time."""
    first = 0
    for batch in reader.iter_batches(batch_size=block_rows, columns=["input_ids", "length"]):
        ids, lengths = batch.column(0), batch.column(1)
        if ids.null_count or lengths.null_count:
            raise ChunkError(f"{where}: a null window or length near row {first}")
        values = ids.flatten().to_numpy(zero_copy_only=False)
        rows = values.astype(dtype, copy=False).reshape(-1, size)
        got = lengths.to_numpy(zero_copy_only=False)
        yield window_documents(rows, got, where, first, n)
        first += len(batch)

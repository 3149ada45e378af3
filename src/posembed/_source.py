"""What the sources, the pipeline and the sinks of ``posembed chunk`` share:
the memory budget, the one-line error, regular files opened without
waiting, :class:`TokenFile` (a token file read a slice at a time with
positional reads, never mapped, so that a file that shrinks gives an error,
not a crash), and the two shapes of input a source module gives the
pipeline: :class:`RangeInput` (read by token range) and :class:`StreamInput`
(whole documents in one pass)."""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from posembed._arrow import require

# Everything a running chunk holds at a time, in bytes, whatever the window
# size, step and tail: the token buffers read ahead, the rows cut and written
# behind, and the batches' layouts (beyond it: the document offsets, 16 bytes
# per document). Batches are sized to fit; only a window of more than a sixth
# of it (size x itemsize > MEMORY_BYTES / 6) makes a batch of one go past it.
MEMORY_BYTES = 64 << 20


class ChunkError(ValueError):
    """A problem with the command's input or parameters: reported in one line.

    A ValueError, so that callers of :func:`chunk_file` can catch it as one.
    """


def option_int(value: Any, option: str, low: int, high: int | None = None) -> int | None:
    """``value`` (None: not given) as an int in ``low..high``, or ChunkError
    naming ``option``, the value and what is allowed."""
    if value is None:
        return None
    allowed = f">= {low}" if high is None else f"in {low}..{high}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ChunkError(f"{option} must be an integer {allowed}; got {value!r}")
    if value < low or (high is not None and value > high):
        raise ChunkError(f"{option} must be an integer {allowed}; got {value}")
    return int(value)


def _changed(path: Path, how: str) -> ChunkError:
    return ChunkError(f"{path}: input changed while reading ({how}); run again on a stable file")


class TokenFile:
    """A 1-D token file on disk, read a slice at a time.

    Slices are read with positional reads into arrays, never memory-
    mapped: a file that shrinks while it is read gives a :class:`ChunkError`,
    not a crash. The file's size, modification time and inode, as
    :func:`prepare_chunk` saw them, are checked when it is opened and by
    :meth:`check`, so that a file rewritten in place (old and new tokens
    mixed) is refused too. A closed ``TokenFile`` pickles small (a path and a
    few numbers), so workers of a cluster can each open and read their own
    slices.

    Attributes
    ----------
    path : Path
        The file.
    dtype : numpy.dtype
        The tokens' integer dtype as :meth:`read` returns them (native byte
        order; a file in the other order is converted while it is read).
    offset : int
        Bytes before the first token (a ``.npy`` header; 0 for a raw file).
    count : int
        Number of tokens.
    swap : bool
        The file holds the tokens in the other byte order.
    stamp : tuple of int, optional
        (size, modification time in ns, inode) the file must keep; None: not checked.
    """

    def __init__(
        self,
        path: Path,
        dtype: np.dtype[Any],
        offset: int,
        count: int,
        *,
        swap: bool = False,
        stamp: tuple[int, int, int] | None = None,
    ) -> None:
        self.path, self.dtype, self.offset, self.count = path, np.dtype(dtype), offset, count
        self.swap, self.stamp = swap, stamp
        self.fd = -1

    @property
    def shape(self) -> tuple[int]:
        """(count,), as for an array of the tokens."""
        return (self.count,)

    def copy(self, path: Path | None = None) -> TokenFile:
        """A closed twin (the same file unless ``path`` names it anew), for a
        thread or worker that must read with a descriptor of its own."""
        return TokenFile(
            self.path if path is None else path,
            self.dtype,
            self.offset,
            self.count,
            swap=self.swap,
            stamp=self.stamp,
        )

    def open(self) -> None:
        """Open the file for :meth:`read` (:meth:`close` closes it).

        Raises
        ------
        ChunkError
            The file is no longer the one described (see :meth:`check`).
        OSError
            It cannot be opened.
        """
        # O_NONBLOCK: a FIFO put in the file's place is refused, never waited on
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        self.fd = os.open(self.path, flags)
        try:
            self.check()
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(self.fd, self.offset, 0, os.POSIX_FADV_SEQUENTIAL)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the file (arrays already read stay valid)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def check(self) -> None:
        """Raise :class:`ChunkError` unless the open file is still a regular
        file of the size, modification time and inode first seen (a file
        rewritten in place would mix old and new tokens)."""
        info = os.fstat(self.fd)
        if not stat.S_ISREG(info.st_mode):
            raise _changed(self.path, "it is no longer a regular file")
        if self.stamp is not None:
            size, mtime, inode = self.stamp
            if info.st_size != size:
                raise _changed(self.path, f"{size} bytes became {info.st_size}")
            if info.st_mtime_ns != mtime or info.st_ino != inode:
                raise _changed(self.path, "it was modified or replaced")

    def ended(self, at: int) -> ChunkError:
        """The error for a read that met the file's end at byte ``at``,
        before the token range's last token (the file shrank)."""
        return _changed(self.path, f"it ended at byte {at}, before its last token")

    def read(self, start: int, stop: int) -> np.ndarray:
        """Tokens [start, stop), read into a new array.

        Parameters
        ----------
        start, stop : int
            The token range, 0 <= start and stop <= count (stop <= start: no
            tokens).

        Returns
        -------
        ndarray, shape (stop - start,)
            Of :attr:`dtype`.

        Raises
        ------
        ChunkError
            The file is shorter than the range (it changed while being read).
        OSError
            The file is not open, or cannot be read.
        """
        return self.read_into(start, stop, np.empty(max(0, stop - start), self.dtype))

    def read_into(self, start: int, stop: int, buffer: np.ndarray) -> np.ndarray:
        """Tokens [start, stop) read into the front of ``buffer`` (1-D,
        contiguous, of :attr:`dtype`, long enough), which is returned, cut to
        length. As :meth:`read` otherwise."""
        n = max(0, stop - start)
        out = buffer[:n]
        view = out.view(np.uint8).data if n else memoryview(b"")
        pos = self.offset + start * self.dtype.itemsize
        got = 0
        while got < len(view):
            read = os.preadv(self.fd, [view[got:]], pos + got)  # the GIL is released
            if read == 0:
                raise self.ended(pos + got)
            got += read
        if n and hasattr(os, "posix_fadvise"):  # the next batch, while this one is cut
            os.posix_fadvise(self.fd, pos + got, got, os.POSIX_FADV_WILLNEED)
        if self.swap:
            out.byteswap(inplace=True)
        return out


def _open_regular(path: Path, what: str) -> tuple[int, os.stat_result]:
    """An open descriptor of ``path`` and its status: a regular file, opened
    without waiting (a FIFO is refused, never blocked on)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ChunkError(f"{what}: no such file") from None
    except OSError as exc:
        raise ChunkError(f"{what}: cannot be opened ({exc.strerror})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise ChunkError(f"{what}: {kind}; give a regular file")
    return fd, info


def _stamp(info: os.stat_result) -> tuple[int, int, int]:
    return (info.st_size, info.st_mtime_ns, info.st_ino)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _check_stamp(path: Path, fd: int, stamp: tuple[int, int, int]) -> None:
    info = os.fstat(fd)
    if _stamp(info) != stamp:
        if info.st_size != stamp[0]:
            raise _changed(path, f"{stamp[0]} bytes became {info.st_size}")
        raise _changed(path, "it was modified or replaced")


def _native_file(pa: Any, fd: int) -> Any:
    """An Arrow readable file over the open descriptor ``fd`` (a regular file,
    checked): reopened through /proc where there is one, so that Arrow reads
    it natively; through Python's file object elsewhere."""
    proc = f"/proc/self/fd/{fd}"
    if os.path.exists(proc):
        return pa.OSFile(proc, "rb")
    return pa.PythonFile(os.fdopen(os.dup(fd), "rb"), mode="r")


def _readable(path: Path, kind: str, exc: BaseException) -> ChunkError:
    what = "Parquet" if kind == "parquet" else f"Arrow IPC {kind[4:]}"
    return ChunkError(f"{path}: not a readable {what} file ({_one_line(exc)})")


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
    from posembed._windows import _offsets  # here: _windows imports this module's users

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
    ``block_bytes`` of windows at a time (needs the dask extra)."""
    try:
        from posembed.dask.parts import read_parts
    except ImportError:
        raise ChunkError(
            f"{where}: reading the parts posembed chunk --dask wrote needs Dask: "
            "pip install 'posembed[dask]'"
        ) from None
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

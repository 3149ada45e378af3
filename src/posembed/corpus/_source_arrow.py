"""Arrow and Parquet input of ``posembed chunk``: a list column, one document per row.

The input is a ``.parquet`` file or a folder of them, an Arrow IPC file or
stream (``.arrow``), or a folder that ``datasets.Dataset.save_to_disk``
wrote. Each row of the column is a list of token ids: one document, its
boundaries kept as ``--offsets`` keeps them for a token file.

It is read in one pass, a bounded batch of rows at a time (Parquet row
groups cut into batches of about ``BATCH_BYTES``, DECODERS row groups
decoded at a time; IPC record batches as stored), each batch checked and
handed to the pipeline as whole documents (a :class:`StreamInput`): a
document's windows depend on its own length alone, so the outputs equal
those of the token file with its offsets, byte for byte, without the
corpus' offsets ever being held.
"""

from __future__ import annotations

import contextlib
import os
import queue
import stat
import threading
from collections.abc import Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from posembed import _core
from posembed.corpus._source import (
    MEMORY_BYTES,
    Documents,
    SourceOptions,
    StreamInput,
    _column_type,
    _csr,
    check_column_options,
)
from posembed.io import _json
from posembed.io._tokens import (
    ChunkError,
    _check_stamp,
    _native_file,
    _open_regular,
    _readable,
    _stamp,
)
from posembed.kernels._arrow import require

DEFAULT_COLUMN = "input_ids"
# Token bytes of a batch of rows read from Parquet. The rows being cut and
# written take half the run's budget, reading the other half: the batches
# read ahead, and Parquet's decoding, which holds several times the batch it
# returns (levels, buffers, its allocator's arenas).
BATCH_BYTES = MEMORY_BYTES // 64
# Column chunks of Parquet are read through a buffer of this many bytes, not whole.
PARQUET_BUFFER = 1 << 20
# Parquet's decoding of a column runs on one thread: a file's row groups
# (`datasets` writes one per 1000 rows) are decoded DECODERS at a time on
# threads of their own, each into a queue of at most QUEUED batches, so that
# the next batches are decoded while these are cut (one row group too).
DECODERS = 2
QUEUED = 4
# state.json of a saved dataset lists its files: a few hundred bytes a file.
STATE_BYTES = 16 << 20
# The IPC file format begins with this magic; a stream does not.
IPC_FILE_MAGIC = b"ARROW1"


class _Source(NamedTuple):
    """One file of the input: its path, how to read it, and the size,
    modification time and inode it must keep."""

    path: Path
    kind: str  # "parquet", "ipc file", "ipc stream"
    stamp: tuple[int, int, int]
    rows: int = 0  # a Parquet file's rows, as its footer says (for the progress bar only)


class Corpus(NamedTuple):
    """An Arrow or Parquet input, checked: its files in order, the column and
    the tokens' dtype."""

    source: Path
    column: str
    files: list[_Source]
    dtype: np.dtype[Any]


def is_arrow_input(path: Path) -> bool:
    """Whether ``path`` names Arrow or Parquet input (by suffix, or a folder
    holding ``.parquet`` files or a saved dataset)."""
    if path.suffix.lower() in (".parquet", ".arrow"):
        return True
    try:
        if not stat.S_ISDIR(os.stat(path).st_mode):
            return False
        if any((path / name).exists() for name in ("state.json", "dataset_dict.json")):
            return True
        with os.scandir(path) as entries:
            return any(e.name.lower().endswith(".parquet") for e in entries)
    except OSError:
        return False


def _files(src: Path) -> list[tuple[Path, str]]:
    """The input's files in order, each with the way to read it."""
    suffix = src.suffix.lower()
    if suffix == ".parquet" and not src.is_dir():
        return [(src, "parquet")]
    if suffix == ".arrow" and not src.is_dir():
        return [(src, _ipc_kind(src))]
    if (src / "state.json").exists():
        return [(p, _ipc_kind(p)) for p in _saved_files(src)]
    if (src / "dataset_dict.json").exists():
        raise ChunkError(
            f"{src}: a saved DatasetDict (one folder per split); give one split's folder, "
            f"e.g. {src / 'train'}"
        )
    with os.scandir(src) as entries:
        names = sorted(e.name for e in entries if e.name.lower().endswith(".parquet"))
    return [(src / name, "parquet") for name in names]


def _ipc_kind(path: Path) -> str:
    fd, _ = _open_regular(path, str(path))
    try:
        head = os.pread(fd, len(IPC_FILE_MAGIC), 0)
    finally:
        os.close(fd)
    return "ipc file" if head == IPC_FILE_MAGIC else "ipc stream"


def _saved_files(folder: Path) -> list[Path]:
    """The data files that state.json of a ``save_to_disk`` folder lists, in
    order; each must be a file of the folder itself."""
    what = f"{folder / 'state.json'}"
    fd, info = _open_regular(folder / "state.json", what)
    with os.fdopen(fd, "rb") as f:
        if info.st_size > STATE_BYTES:
            raise ChunkError(f"{what}: {info.st_size} bytes; a saved dataset's is far smaller")
        try:
            state = _json.loads(f.read(STATE_BYTES + 1), what)
        except ValueError as exc:
            raise ChunkError(str(exc)) from None
    listed = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(listed, list) or not listed:
        raise ChunkError(
            f'{what}: no "_data_files" list of data files; not a folder that '
            "datasets' save_to_disk wrote"
        )
    real_folder = os.path.realpath(folder)
    paths = []
    for entry in listed:
        name = entry.get("filename") if isinstance(entry, dict) else None
        if not isinstance(name, str):
            raise ChunkError(f'{what}: a data file entry without a "filename" string: {entry!r}')
        # a plain name in the folder: no absolute path, no "..", no separator,
        # no link out of the folder
        if name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
            raise ChunkError(f"{what}: data file {name!r} is not a file name inside the folder")
        path = folder / name
        if os.path.dirname(os.path.realpath(path)) != real_folder:
            raise ChunkError(f"{what}: data file {name!r} is a link out of the folder")
        paths.append(path)
    return paths


def open_corpus(src: Path, column: str) -> Corpus:
    """List and check the input's files (each one's schema, before any work)."""
    pa = require("posembed chunk on Arrow or Parquet input")
    import pyarrow.parquet as pq

    listed = _files(src)
    if not listed:
        raise ChunkError(f"{src}: a folder without .parquet files or a saved dataset")
    files, dtype = [], None
    for path, kind in listed:
        fd, info = _open_regular(path, str(path))
        try:
            handle = _native_file(pa, fd)
            try:
                rows = 0
                if kind == "parquet":
                    meta = pq.ParquetFile(handle).metadata
                    schema = meta.schema.to_arrow_schema()
                    rows = max(0, int(meta.num_rows))
                elif kind == "ipc file":
                    schema = pa.ipc.open_file(handle).schema
                else:
                    schema = pa.ipc.open_stream(handle).schema
            except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:  # a name not UTF-8
                raise _readable(path, kind, exc) from None
            finally:
                handle.close()
        finally:
            os.close(fd)
        try:
            found = _column_type(pa, schema, path, column)
        except UnicodeDecodeError:  # a crafted schema: names are UTF-8 in both formats
            raise ChunkError(f"{path}: a field name is not UTF-8 text; not a valid file") from None
        if dtype is not None and found != dtype:
            raise ChunkError(
                f"{path}: column {column!r} holds {found} tokens, {files[0].path} {dtype}; "
                "every file must hold the same type"
            )
        dtype = found
        files.append(_Source(path, kind, _stamp(info), rows))
    assert dtype is not None
    # The token count is in Parquet's column chunk metadata, but pyarrow's
    # accessor of it aborts the process on a crafted file (an exception its
    # binding does not catch): the bar's total is estimated as the file is
    # read (see _documents).
    return Corpus(src, column, files, dtype)


def _arrays(corpus: Corpus, source: _Source) -> Iterator[Any]:
    """The column of one file, a bounded batch of rows at a time: Parquet's
    as :class:`Documents`, Arrow IPC's as (array, position in the file) pairs."""
    pa = require("posembed chunk on Arrow or Parquet input")
    import pyarrow.parquet as pq

    fd, _ = _open_regular(source.path, str(source.path))
    try:
        _check_stamp(source.path, fd, source.stamp)
        handle = _native_file(pa, fd)
        try:
            if source.kind == "parquet":
                with _system_pool(pa):
                    reader = pq.ParquetFile(handle, buffer_size=PARQUET_BUFFER, pre_buffer=False)
                meta = reader.metadata
                rows = []
                for i in range(meta.num_row_groups):
                    # the row group's size over all columns (a column chunk's
                    # own metadata is not read: see open_corpus)
                    group = meta.row_group(i)
                    nbytes = group.total_byte_size
                    per_row = max(1, nbytes // max(1, group.num_rows))
                    rows.append(max(1, min(group.num_rows, BATCH_BYTES // per_row)))
                # even one row group is decoded on its own thread, so that
                # its next batch is decoded while this one is cut
                yield from _parallel_groups(pa, fd, meta, corpus, source.path, rows)
            else:
                index = _field_index(pa, handle, source.kind, corpus.column)
                handle.seek(0)
                options = pa.ipc.IpcReadOptions(included_fields=[index])
                if source.kind == "ipc file":
                    ipc = pa.ipc.open_file(handle, options=options)
                    count = ipc.num_record_batches
                    for i in range(count):
                        # read at offsets: the position says nothing, the batches do
                        column = ipc.get_batch(i).column(0)
                        yield column, source.stamp[0] * (i + 1) // count
                else:
                    for batch in pa.ipc.open_stream(handle, options=options):
                        yield batch.column(0), handle.tell()
        except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:  # a name not UTF-8
            _check_stamp(source.path, fd, source.stamp)
            raise _readable(source.path, source.kind, exc) from None
        finally:
            handle.close()
        # every batch read: the file must still be the one first seen
        _check_stamp(source.path, fd, source.stamp)
    finally:
        os.close(fd)


# Parquet readers allocate from the system allocator, not pyarrow's default
# (mimalloc): with row groups decoded on several threads and freed on
# another, mimalloc's per-thread heaps held about twice the memory. A
# reader takes the default pool when it is made, so the default is switched
# only while readers are made (and back, whoever else made one meanwhile).
_POOL_LOCK = threading.Lock()
_POOL_STATE: dict[str, Any] = {"users": 0, "saved": None}  # the caller's pool while switched


@contextlib.contextmanager
def _system_pool(pa: Any) -> Iterator[None]:
    with _POOL_LOCK:
        if _POOL_STATE["users"] == 0:
            _POOL_STATE["saved"] = pa.default_memory_pool()
            pa.set_memory_pool(pa.system_memory_pool())
        _POOL_STATE["users"] += 1
    try:
        yield
    finally:
        with _POOL_LOCK:
            _POOL_STATE["users"] -= 1
            if _POOL_STATE["users"] == 0:
                pa.set_memory_pool(_POOL_STATE["saved"])
                _POOL_STATE["saved"] = None


def _parallel_groups(
    pa: Any, fd: int, meta: Any, corpus: Corpus, path: Path, rows: list[int]
) -> Iterator[Documents]:
    """Every row group of a Parquet file as documents, in order, ``rows[i]``
    rows at a time: DECODERS threads each decode one row group (through its
    own Arrow file, so no two share a position) and check its batches into
    its own queue of at most QUEUED batches; at most DECODERS row groups
    are decoded or waiting to be read at a time."""
    import pyarrow.parquet as pq

    stop = threading.Event()
    queues: list[queue.Queue[Any]] = [queue.Queue(QUEUED) for _ in rows]
    starts = np.cumsum([0] + [meta.row_group(i).num_rows for i in range(len(rows))])

    def put(q: queue.Queue[Any], item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def decode(i: int) -> None:
        q = queues[i]
        if stop.is_set():  # the reading stopped before this row group's turn
            return
        try:
            handle = _native_file(pa, fd)
            try:
                with _system_pool(pa):
                    reader = pq.ParquetFile(
                        handle, metadata=meta, buffer_size=PARQUET_BUFFER, pre_buffer=False
                    )
                row = int(starts[i])
                for batch in reader.iter_batches(
                    rows[i], row_groups=[i], columns=[corpus.column], use_threads=False
                ):
                    docs = _csr(batch.column(0), path, row, corpus.column, corpus.dtype)
                    row += batch.num_rows
                    if not put(q, docs):
                        return
            finally:
                handle.close()
        except BaseException as exc:  # handed to the reading thread, raised there
            put(q, _Failed(exc))
            return
        put(q, None)

    # the decoders take the reading thread's kernel thread count (they run
    # no kernel of posembed's today; none may start a spinning team later)
    count = _core.calling_thread_threads()
    with ThreadPoolExecutor(
        DECODERS, initializer=_core.set_calling_thread_threads, initargs=(count,)
    ) as pool:
        try:
            # a row group is handed to a decoder only when the reading has
            # reached the one DECODERS - 1 before it: a row group of fewer
            # than QUEUED batches fits its queue whole, and decoders free to
            # run on would fill every queue while the cutting falls behind
            for i in range(min(DECODERS, len(rows))):
                pool.submit(decode, i)
            for at, q in enumerate(queues):
                if at and at + DECODERS - 1 < len(rows):
                    pool.submit(decode, at + DECODERS - 1)
                while (item := q.get()) is not None:
                    if isinstance(item, _Failed):
                        raise item.exc
                    yield item
        finally:
            stop.set()


class _Failed(NamedTuple):
    """An exception of a decoding thread, raised by the reading one."""

    exc: BaseException


def _field_index(pa: Any, handle: Any, kind: str, column: str) -> int:
    if kind == "ipc file":
        schema = pa.ipc.open_file(handle).schema
    else:
        schema = pa.ipc.open_stream(handle).schema
    return int(schema.get_field_index(column))


def _documents(corpus: Corpus) -> Generator[Documents, None, None]:
    # How much has been read: the files before this one by their sizes, and
    # this one by its rows (Parquet: the footer's count) or by the position
    # in it (Arrow IPC). Only an estimate for the progress bar: a crafted
    # count is clamped, and it never decides what is read.
    total = sum(source.stamp[0] for source in corpus.files) or 1
    before = 0
    for source in corpus.files:
        row = 0
        size = source.stamp[0]
        for item in _arrays(corpus, source):
            if isinstance(item, Documents):  # decoded and checked on another thread
                docs = item
                row = docs.first_row + docs.offsets.shape[0] - 1
                part = row / source.rows if source.rows > 0 else 0.0
            else:
                array, position = item
                docs = _csr(array, source.path, row, corpus.column, corpus.dtype)
                row = docs.first_row + docs.offsets.shape[0] - 1
                part = position / size if size > 0 else 0.0
            done = (before + size * min(1.0, max(0.0, part))) / total
            yield docs._replace(done=done)
        before += size


def matches(path: Path) -> bool:
    return is_arrow_input(path)


def check(path: Path, options: SourceOptions) -> None:
    check_column_options(options)
    if options.documents is not None:
        raise ChunkError(
            "--documents applies to indexed datasets; in Arrow and Parquet input each row of "
            "the column is a document"
        )


def inputs(path: Path, options: SourceOptions) -> tuple[Any, ...]:
    return (path,)


def open_input(path: Path, options: SourceOptions) -> StreamInput:
    column = DEFAULT_COLUMN if options.column is None else options.column
    corpus = open_corpus(path, column)
    return StreamInput(corpus.dtype, lambda: _documents(corpus), {"column": column})

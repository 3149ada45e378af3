"""Inputs named by a URL (``s3://``, ``gs://``, ``az://``, ``hf://``, ...,
through fsspec): a token file (a 1-D integer ``.npy`` file, or a raw file
with ``--dtype``) with ``--offsets``, read by range as a local one is; a
Parquet file or an Arrow IPC file or stream, read a bounded batch of rows at
a time. Every object's size and version (its ETag) are checked when it is
opened and after the last read, so that one replaced while it is read is
refused rather than mixed."""

from __future__ import annotations

import io
import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

import numpy as np

from posembed.corpus._source import (
    MEMORY_BYTES,
    Documents,
    RangeInput,
    SourceOptions,
    StreamInput,
    _column_type,
    _csr,
    check_column_options,
    parquet_window_documents,
    parquet_windows_type,
    parts_input,
    token_layout,
    window_blocks,
)
from posembed.io import _json, _npy
from posembed.io._store import (
    MANIFEST,
    MANIFEST_BYTES,
    WRITING,
    StoreTokenFile,
    StoreUrl,
    _failed,
    filesystem,
    info,
    read_range,
)
from posembed.io._tokens import ChunkError, _open_regular
from posembed.kernels._windows import _offsets

DEFAULT_COLUMN = "input_ids"
# Token bytes of a batch of rows read from Parquet or Arrow.
BATCH_BYTES = MEMORY_BYTES // 8
# Enough of a .npy file's start for its header (NumPy's own limit and more).
NPY_PREFIX = 16 + _npy.MAX_HEADER_BYTES + 64
# An --offsets file is read whole: 8 bytes a document.
OFFSETS_BYTES = 1 << 34


def matches(path: Any) -> bool:
    return isinstance(path, StoreUrl)


def _kind(url: str) -> str:
    suffix = StoreUrl(url).suffix.lower()
    kind = {".parquet": "parquet", ".arrow": "arrow", ".idx": "indexed"}.get(suffix, "tokens")
    if kind == "tokens" and not suffix and _holds_manifest(url):
        return "windows"  # a folder posembed chunk wrote there
    return kind


def _unfinished(url: str) -> bool:
    fs, key = filesystem(url)
    try:
        return bool(fs.isfile(f"{key.rstrip('/')}/{WRITING}"))
    except Exception:
        return False


def _holds_manifest(url: str) -> bool:
    fs, key = filesystem(url)
    try:
        fs.invalidate_cache(key)
        return bool(fs.isfile(f"{key.rstrip('/')}/{MANIFEST}"))
    except Exception:  # no such prefix, or no access: judged as a file where it is read
        return False


def check(path: Any, options: SourceOptions) -> None:
    kind = _kind(path)
    if options.documents is not None and kind != "indexed":
        raise ChunkError(
            f"--documents applies to indexed datasets (PREFIX.idx and PREFIX.bin); {path} is "
            "not one"
        )
    if kind == "indexed":
        given = [o for o, x in (("--dtype", options.dtype), ("--offsets", options.offsets)) if x]
        given += ["--column"] if options.column is not None else []
        if given:
            raise ChunkError(
                f"{given[0]} does not apply to {path}, an indexed dataset (its .idx names its "
                "type and documents; --documents chooses documents or sequences)"
            )
        return
    if kind == "windows":
        given = [o for o, x in (("--dtype", options.dtype), ("--offsets", options.offsets)) if x]
        given += ["--column"] if options.column is not None else []
        if given:
            raise ChunkError(
                f"{given[0]} does not apply to {path}, a folder of windows posembed chunk "
                "wrote: it is read as one document per window, without its padding"
            )
        return
    if kind == "tokens" and not StoreUrl(path).suffix and _unfinished(str(path)):
        raise ChunkError(
            f"{path} holds an unfinished run's output (no {MANIFEST}, which is uploaded "
            "last): it is not read; run that chunk again"
        )
    if kind == "tokens":
        if options.column is not None:
            raise ChunkError(f"--column applies to Arrow and Parquet input; {path} is a token file")
        return
    check_column_options(options)


def inputs(path: Any, options: SourceOptions) -> tuple[Any, ...]:
    # what the output must not replace: only a local --offsets file can be one
    return (
        ()
        if options.offsets is None or isinstance(options.offsets, StoreUrl)
        else (options.offsets,)
    )


def open_input(path: Any, options: SourceOptions) -> RangeInput | StreamInput:
    url = str(path)
    kind = _kind(url)
    if kind == "windows":
        return _open_windows(url.rstrip("/"))
    if kind == "indexed":
        return _open_indexed(url, options.documents or "documents")
    if kind == "tokens":
        return _open_tokens(url, options)
    return _open_columns(url, DEFAULT_COLUMN if options.column is None else options.column)


def _open_tokens(url: str, options: SourceOptions) -> RangeInput:
    fs, key = filesystem(url)
    size, version = info(fs, key, url)
    header = None
    if StoreUrl(url).suffix.lower() == ".npy":
        start = read_range(fs, key, url, 0, min(size, NPY_PREFIX))
        try:
            header = _npy.read_header(io.BytesIO(start), url, size)
        except ValueError as exc:
            raise ChunkError(str(exc)) from None
    dtype, offset, count = token_layout(url, header, options.dtype, size)
    tokens = StoreTokenFile(
        url,
        dtype.newbyteorder("="),
        offset,
        count,
        swap=not dtype.isnative,
        version=(size, version),
        store=(fs, key),
    )
    if options.offsets is None:
        offsets = np.array([0, count], dtype=np.int64)
    else:
        offsets = _load_offsets(options.offsets, count)
    return RangeInput(tokens, offsets, {})


def _load_offsets(given: Any, n_tokens: int) -> np.ndarray:
    what = f"--offsets {given}"
    if isinstance(given, StoreUrl) or (isinstance(given, str) and "://" in given):
        fs, key = filesystem(str(given))
        size, _ = info(fs, key, str(given))
        if size > OFFSETS_BYTES:
            raise ChunkError(f"{what}: {size} bytes; offsets of 8 bytes a document are far fewer")
        data = read_range(fs, key, str(given), 0, size)
    else:
        fd, status = _open_regular(Path(given), what)
        with os.fdopen(fd, "rb") as f:
            data = f.read(min(status.st_size, OFFSETS_BYTES) + 1)
    if not data:
        raise ChunkError(f"{what}: not a readable .npy file (it is empty)")
    try:
        header = _npy.read_header(io.BytesIO(data), what, len(data))
        count = int(np.prod(header.shape, dtype=np.int64))
        loaded = np.frombuffer(data, header.dtype, count, header.offset).reshape(
            header.shape, order="F" if header.fortran_order else "C"
        )
        return _offsets(loaded, n_tokens)
    except (TypeError, ValueError) as exc:
        raise ChunkError(f"{what}: {exc}") from None


def _open_columns(url: str, column: str) -> StreamInput:
    from posembed.kernels._arrow import require

    pa = require("posembed chunk on Arrow or Parquet input")
    import pyarrow.parquet as pq

    fs, key = filesystem(url)
    version = info(fs, key, url)
    parquet = _kind(url) == "parquet"

    def opened() -> Any:
        try:
            return fs.open(key, "rb")
        except Exception as exc:
            raise _failed(url, exc) from None

    with opened() as f:
        try:
            schema = pq.ParquetFile(f).schema_arrow if parquet else _ipc(pa, f).schema
        except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
            raise ChunkError(
                f"{url}: not a readable {'Parquet' if parquet else 'Arrow IPC'} "
                f"file ({' '.join(str(exc).split())})"
            ) from None
    dtype = _column_type(pa, schema, url, column)  # type: ignore[arg-type]

    def documents() -> Generator[Documents, None, None]:
        if info(fs, key, url) != version:
            raise ChunkError(f"{url}: input changed while reading (it was replaced)")
        row = 0
        with opened() as f:
            try:
                if parquet:
                    reader = pq.ParquetFile(f)
                    # rows a batch: the footer's bytes a row over all columns, at most
                    meta = reader.metadata
                    rows = max(1, meta.num_rows)
                    groups = range(meta.num_row_groups)
                    nbytes = sum(meta.row_group(i).total_byte_size for i in groups)
                    batch = max(1, BATCH_BYTES // max(1, nbytes // rows))
                    arrays = (b.column(0) for b in reader.iter_batches(batch, columns=[column]))
                else:
                    stream = _ipc(pa, f)
                    index = stream.schema.get_field_index(column)
                    arrays = (b.column(index) for b in _batches(stream))
                    rows = 0
                for array in arrays:
                    docs = _csr(array, url, row, column, dtype)  # type: ignore[arg-type]
                    row += len(array)
                    yield docs._replace(done=min(1.0, row / rows) if rows else None)
            except (pa.ArrowException, OSError) as exc:
                raise ChunkError(
                    f"{url}: not a readable file ({' '.join(str(exc).split())})"
                ) from None
        if info(fs, key, url) != version:
            raise ChunkError(f"{url}: input changed while reading (it was replaced)")

    return StreamInput(dtype, documents, {"column": column})


def _npy_file(url: str, ndim: int) -> tuple[StoreTokenFile, tuple[int, ...]]:
    """A ``.npy`` file in the store as a flat :class:`StoreTokenFile`, and its shape."""
    fs, key = filesystem(url)
    size, version = info(fs, key, url)
    start = read_range(fs, key, url, 0, min(size, NPY_PREFIX))
    try:
        header = _npy.read_header(io.BytesIO(start), url, size)
    except ValueError as exc:
        raise ChunkError(str(exc)) from None
    if len(header.shape) != ndim or header.dtype.kind not in "iu" or header.fortran_order:
        raise ChunkError(
            f"{url}: must be a {ndim}-D integer array in C order, as posembed chunk writes; got "
            f"{header.dtype} of shape {header.shape}"
        )
    count = int(np.prod(header.shape, dtype=np.int64))
    native = header.dtype.newbyteorder("=")
    swap = not header.dtype.isnative
    tokens = StoreTokenFile(url, native, header.offset, count, swap=swap, version=(size, version))
    return tokens, header.shape


def _open_windows(url: str) -> StreamInput:
    """A folder of windows posembed chunk wrote to the store: complete only
    with its manifest (meta.json, uploaded last), read from its .npy files."""
    fs, key = filesystem(url)
    where = f"{url}/{MANIFEST}"
    size, _ = info(fs, f"{key}/{MANIFEST}", where)
    if size > MANIFEST_BYTES:
        raise ChunkError(f"{where}: {size} bytes; posembed writes far fewer")
    try:
        meta = _json.loads(read_range(fs, f"{key}/{MANIFEST}", where, 0, size), where)
    except ValueError as exc:
        raise ChunkError(str(exc)) from None
    if isinstance(meta, dict) and "parts" in meta and "format" not in meta:
        return _open_parts(url)
    if not isinstance(meta, dict) or meta.get("format") not in ("npy", "parquet"):
        raise ChunkError(f"{where}: not the manifest posembed chunk writes")
    if meta["format"] == "parquet":
        return _open_parquet_windows(url)
    windows, shape = _npy_file(f"{url}/windows.npy", 2)
    lengths, count = _npy_file(f"{url}/lengths.npy", 1)
    n, width = shape
    if count != (n,):
        raise ChunkError(f"{url}/lengths.npy: {count[0]} lengths for the {n} windows")

    def documents() -> Generator[Documents, None, None]:
        step = max(1, BATCH_BYTES // max(1, width * windows.dtype.itemsize))
        return window_blocks(windows, lengths, n, width, url, step)

    meta_in = {"input_format": "posembed chunk output (npy), one document per window"}
    return StreamInput(windows.dtype, documents, meta_in)


def _open_parquet_windows(url: str) -> StreamInput:
    """A --format parquet output in the store: its windows.parquet read a
    batch of rows at a time, each window cut to its length."""
    from posembed.kernels._arrow import require

    pa = require("posembed chunk on a Parquet output")
    import pyarrow.parquet as pq

    where = f"{url}/windows.parquet"
    fs, key = filesystem(where)
    version = info(fs, key, where)
    try:
        with fs.open(key, "rb") as f:
            parquet = pq.ParquetFile(f)
            schema, n = parquet.schema_arrow, max(0, int(parquet.metadata.num_rows))
    except (pa.ArrowException, OSError) as exc:
        why = " ".join(str(exc).split())
        raise ChunkError(f"{where}: not a readable Parquet file ({why})") from None
    size, dtype = parquet_windows_type(pa, schema, where)

    def documents() -> Generator[Documents, None, None]:
        if info(fs, key, where) != version:
            raise ChunkError(f"{where}: input changed while reading (it was replaced)")
        step = max(1, BATCH_BYTES // max(1, size * dtype.itemsize))
        try:
            with fs.open(key, "rb") as f:
                yield from parquet_window_documents(pq.ParquetFile(f), where, n, size, dtype, step)
        except (pa.ArrowException, OSError) as exc:
            raise ChunkError(
                f"{where}: not a readable Parquet file ({' '.join(str(exc).split())})"
            ) from None
        if info(fs, key, where) != version:
            raise ChunkError(f"{where}: input changed while reading (it was replaced)")

    meta = {"input_format": "posembed chunk output (parquet), one document per window"}
    return StreamInput(dtype, documents, meta)


def _open_parts(url: str) -> StreamInput:
    """The parts posembed chunk --dask put in the store, read a block of windows at a time."""
    meta = {"input_format": "posembed chunk output (parts), one document per window"}
    return parts_input(url, meta, BATCH_BYTES)


def _open_indexed(url: str, unit: Any) -> RangeInput:
    """A Megatron indexed dataset in the store, as IndexedCorpus reads one."""
    from posembed.io._indexed import UNITS, IndexedCorpus

    if unit not in UNITS:
        raise ChunkError(f"--documents must be documents or sequences; got {unit!r}")
    try:
        # plain or multimodal: the modes change neither the tokens nor the lengths
        corpus = IndexedCorpus(url, documents=unit, multimodal=None)
    except ValueError as exc:  # ChunkError included
        raise ChunkError(str(exc)) from None
    return RangeInput(corpus.tokens, corpus.offsets, {"documents_are": unit})


def _ipc(pa: Any, f: Any) -> Any:
    """An Arrow IPC file's reader, or a stream's (the file format starts with ARROW1)."""
    head = f.read(6)
    f.seek(0)
    return pa.ipc.open_file(f) if head == b"ARROW1" else pa.ipc.open_stream(f)


def _batches(reader: Any) -> Generator[Any, None, None]:
    if hasattr(reader, "num_record_batches"):
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)
    else:
        yield from reader

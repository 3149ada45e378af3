"""``posembed chunk``'s own outputs as input: a folder of windows (``.npy``
files, Parquet, or the parts ``--dask`` writes) read back as a corpus of one
document per window, the window's tokens without its padding (its
``lengths`` entry). Read in one pass, a bounded block of windows at a time;
files are opened inside the folder without following a link, and the counts
are checked against each other, never trusted."""

from __future__ import annotations

import os
import stat
from collections.abc import Generator
from pathlib import Path
from typing import Any

import numpy as np

from posembed.corpus._source import (
    MEMORY_BYTES,
    Documents,
    SourceOptions,
    StreamInput,
    parquet_window_documents,
    parquet_windows_type,
    parts_input,
    window_blocks,
)
from posembed.io import _json, _npy
from posembed.io._tokens import ChunkError, TokenFile, _check_stamp, _native_file, _readable, _stamp

NPY, PARQUET, PARTS = "npy", "parquet", "parts"
META, WINDOWS, LENGTHS = "meta.json", "windows.npy", "lengths.npy"
PARQUET_FILE = "windows.parquet"
# A block of windows read at a time: a quarter of the budget (the pipeline
# holds the block, its documents and the windows cut from them).
BLOCK_BYTES = MEMORY_BYTES // 4
META_BYTES = 1 << 20
_OPEN = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _kind(path: Path) -> str | None:
    """Which of posembed chunk's outputs the folder ``path`` holds, or None."""
    try:
        if not stat.S_ISDIR(os.stat(path).st_mode):
            return None
    except OSError:
        return None
    if _is_file(path / "index.json") and os.path.isdir(path / "parts"):
        return PARTS
    if _is_file(path / META):
        if _is_file(path / WINDOWS):
            return NPY
        if _is_file(path / PARQUET_FILE):
            return PARQUET
    return None


def matches(path: Path) -> bool:
    return _kind(path) is not None


def check(path: Path, options: SourceOptions) -> None:
    given = [
        option
        for option, value in (
            ("--dtype", options.dtype),
            ("--offsets", options.offsets),
            ("--column", options.column),
            ("--documents", options.documents),
        )
        if value is not None
    ]
    if given:
        raise ChunkError(
            f"{given[0]} does not apply to {path}, a folder of windows posembed chunk wrote: "
            "it is read as one document per window, without its padding"
        )


def inputs(path: Path, options: SourceOptions) -> tuple[Any, ...]:
    return (path,)


def open_input(path: Path, options: SourceOptions) -> StreamInput:
    kind = _kind(path)
    meta = {"input_format": f"posembed chunk output ({kind}), one document per window"}
    if kind == PARTS:
        return _open_parts(path, meta)
    _read_meta(path)
    if kind == PARQUET:
        return _open_parquet(path, meta)
    return _open_npy(path, meta)


def _open_inside(folder: Path, name: str) -> tuple[int, os.stat_result]:
    """A regular file of the folder, opened without following a link or waiting."""
    where = folder / name
    try:
        fd = os.open(where, _OPEN)
    except OSError as exc:
        raise ChunkError(
            f"{where}: cannot be opened ({exc.strerror}; a link is never followed)"
        ) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ChunkError(f"{where}: not a regular file")
    return fd, info


def _read_meta(folder: Path) -> dict[str, Any]:
    fd, info = _open_inside(folder, META)
    with os.fdopen(fd, "rb") as f:
        if info.st_size > META_BYTES:
            raise ChunkError(f"{folder / META}: {info.st_size} bytes; posembed writes far fewer")
        try:
            meta = _json.loads(f.read(META_BYTES + 1), str(folder / META))
        except ValueError as exc:
            raise ChunkError(str(exc)) from None
    if not isinstance(meta, dict):
        raise ChunkError(f"{folder / META}: not the JSON object posembed chunk writes")
    return meta


def _token_file(folder: Path, name: str, ndim: int) -> tuple[TokenFile, tuple[int, ...]]:
    """A ``.npy`` file of the folder as a flat :class:`TokenFile`, and its shape."""
    fd, info = _open_inside(folder, name)
    where = folder / name
    with os.fdopen(fd, "rb") as f:
        try:
            header = _npy.read_header(f, str(where), info.st_size)
        except ValueError as exc:
            raise ChunkError(str(exc)) from None
        except OSError as exc:
            raise ChunkError(f"{where}: cannot be read ({exc.strerror})") from None
    if len(header.shape) != ndim or header.dtype.kind not in "iu" or header.fortran_order:
        raise ChunkError(
            f"{where}: must be a {ndim}-D integer array in C order, as posembed chunk writes; "
            f"got {header.dtype} of shape {header.shape}"
        )
    count = int(np.prod(header.shape, dtype=np.int64))
    tokens = TokenFile(
        where,
        header.dtype.newbyteorder("="),
        header.offset,
        count,
        swap=not header.dtype.isnative,
        stamp=_stamp(info),
    )
    return tokens, header.shape


def _block_rows(size: int, itemsize: int) -> int:
    return max(1, BLOCK_BYTES // max(1, size * itemsize))


def _open_npy(folder: Path, meta: dict[str, Any]) -> StreamInput:
    windows, shape = _token_file(folder, WINDOWS, 2)
    lengths, count = _token_file(folder, LENGTHS, 1)
    n, size = shape
    if count != (n,):
        raise ChunkError(
            f"{folder / LENGTHS}: {count[0]} lengths for the {n} windows of {folder / WINDOWS}"
        )

    def documents() -> Generator[Documents, None, None]:
        step = _block_rows(size, windows.dtype.itemsize)
        return window_blocks(windows, lengths, n, size, folder, step)

    return StreamInput(windows.dtype, documents, meta)


def _open_parquet(folder: Path, meta: dict[str, Any]) -> StreamInput:
    from posembed.kernels._arrow import require

    pa = require("posembed chunk on a Parquet output")
    import pyarrow.parquet as pq

    where = folder / PARQUET_FILE
    fd, info = _open_inside(folder, PARQUET_FILE)
    try:
        handle = _native_file(pa, fd)
        try:
            parquet = pq.ParquetFile(handle)
            schema, n = parquet.schema_arrow, max(0, int(parquet.metadata.num_rows))
        except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
            raise _readable(where, "parquet", exc) from None
        finally:
            handle.close()
    finally:
        os.close(fd)
    size, dtype = parquet_windows_type(pa, schema, where)
    stamp = _stamp(info)

    def documents() -> Generator[Documents, None, None]:
        fd, _ = _open_inside(folder, PARQUET_FILE)
        try:
            _check_stamp(where, fd, stamp)
            handle = _native_file(pa, fd)
            try:
                reader = pq.ParquetFile(handle)
                step = _block_rows(size, dtype.itemsize)
                yield from parquet_window_documents(reader, where, n, size, dtype, step)
            except (pa.ArrowException, OSError) as exc:
                _check_stamp(where, fd, stamp)
                raise _readable(where, "parquet", exc) from None
            finally:
                handle.close()
            _check_stamp(where, fd, stamp)
        finally:
            os.close(fd)

    return StreamInput(dtype, documents, meta)


def _open_parts(folder: Path, meta: dict[str, Any]) -> StreamInput:
    return parts_input(folder, meta, BLOCK_BYTES)

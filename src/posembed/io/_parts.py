"""The parted output of ``posembed chunk --dask`` (one ``.npy`` file of windows
per partition, with ``index.json`` and ``meta.json``), read back:
:func:`read_parts` checks the folder or store prefix (every file inside it,
every field of its index and headers) and gives the result back as one
:class:`posembed.Windows` whose tokens are a :class:`PartsView` reading the
parts on demand. ``posembed.dask.chunk_parts`` writes it."""

from __future__ import annotations

import errno
import io
import os
import re
import stat
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from posembed.io import _json, _npy
from posembed.io._store import filesystem, info, is_url, read_range
from posembed.io._tokens import ChunkError
from posembed.kernels._gather import gather
from posembed.kernels._windows import Windows

INDEX_VERSION = 1


class _Part:
    """One part file's rows, read on demand by positional reads from a
    descriptor kept open (never mapped: a part that shrinks later is a
    ValueError, not SIGBUS)."""

    def __init__(self, fd: int, what: str, offset: int, rows: int, size: int, dtype: Any) -> None:
        self.what = what
        self.dtype = np.dtype(dtype)
        self.shape = (rows, size)
        self.ndim = 2
        self._fd = fd
        self._offset = offset
        self._row_bytes = size * self.dtype.itemsize
        self._closer = weakref.finalize(self, os.close, fd)

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<part {self.what}: {self.shape[0]} rows of {self.shape[1]} {self.dtype}>"

    def close(self) -> None:
        self._closer()

    def read_into(self, out: np.ndarray, first: int) -> None:
        """Rows [first, first + len(out)) into ``out`` (C-contiguous, this part's dtype)."""
        if not out.size:
            return
        buffer = out.data.cast("B")  # (refuses an out that is not contiguous)
        start = self._offset + first * self._row_bytes
        got = 0
        while got < buffer.nbytes:  # os.preadv releases the GIL
            n = os.preadv(self._fd, [buffer[got:]], start + got)
            if not n:
                raise ValueError(f"{self.what}: changed while reading (the file is shorter)")
            got += n

    def read(self, first: int, end: int) -> np.ndarray:
        out = np.empty((end - first, self.shape[1]), self.dtype)
        self.read_into(out, first)
        return out

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The rows ``rows`` (int64, in range, any shape): one read per run of
        consecutive rows asked for, duplicates read once."""
        wanted, where = np.unique(rows, return_inverse=True)
        got = np.empty((wanted.size, self.shape[1]), self.dtype)
        cuts = np.flatnonzero(np.diff(wanted) != 1) + 1
        for a, b in zip(
            np.concatenate([[0], cuts]).tolist(),
            np.concatenate([cuts, [wanted.size]]).tolist(),
            strict=True,
        ):
            self.read_into(got[a:b], int(wanted[a]))
        out: np.ndarray = gather(got, where.reshape(rows.shape))
        return out

    def __getitem__(self, key: Any) -> Any:
        # as a view of one part (Dask's from_array reads its chunk this way)
        return PartsView([self], self.shape[1], self.dtype)[key]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self.read(0, self.shape[0])
        return whole.astype(dtype, copy=False) if dtype is not None else whole

    def __dask_tokenize__(self) -> Any:
        info = os.fstat(self._fd)
        return (self.what, info.st_dev, info.st_ino, info.st_mtime_ns, self.shape, self.dtype.str)

    def __reduce__(self) -> Any:
        # a part sent to another process (a Dask worker) travels as its rows
        return (_LoadedPart, (self.what, self.read(0, self.shape[0])))


class _StorePart(_Part):
    """One part in a store: its rows read by range through fsspec when asked
    for, its size and version (ETag) checked first."""

    def __init__(
        self, store: Any, key: str, what: str, offset: int, rows: int, size: int, dtype: Any
    ) -> None:
        self.what, self.store, self.key = what, store, key
        self.dtype = np.dtype(dtype)
        self.shape = (rows, size)
        self.ndim = 2
        self._offset = offset
        self._row_bytes = size * self.dtype.itemsize
        self.version = _store_info(store, key, what)

    def close(self) -> None:
        pass

    def read_into(self, out: np.ndarray, first: int) -> None:
        if not out.size:
            return
        start = self._offset + first * self._row_bytes
        if _store_info(self.store, self.key, self.what) != self.version:
            raise ValueError(f"{self.what}: changed while reading (it was replaced)")
        data = _store_read(self.store, self.key, self.what, start, start + out.nbytes)
        if len(data) < out.nbytes:
            raise ValueError(f"{self.what}: changed while reading (the object is shorter)")
        out.reshape(-1)[:] = np.frombuffer(data, self.dtype, out.size)

    def __dask_tokenize__(self) -> Any:
        return (self.what, self.version, self.shape, self.dtype.str)

    def __reduce__(self) -> Any:
        # the store's file system pickles with its options: a worker reads the part itself
        return (
            _store_part,
            (self.store, self.key, self.what, self._offset, self.shape, self.dtype.str),
        )


def _store_part(store: Any, key: str, what: str, offset: int, shape: Any, dtype: str) -> _StorePart:
    return _StorePart(store, key, what, offset, shape[0], shape[1], dtype)


def _store_info(store: Any, key: str, what: str) -> tuple[int, str]:
    try:
        return info(store, key, what)
    except ChunkError as exc:
        raise ValueError(str(exc)) from None


def _store_read(store: Any, key: str, what: str, start: int, stop: int) -> bytes:
    try:
        return read_range(store, key, what, start, stop)
    except ChunkError as exc:
        raise ValueError(str(exc)) from None


def _store_npy(store: Any, key: str, what: str) -> tuple[Any, bytes]:
    """A small .npy object of the store, whole: (its checked header, its bytes)."""
    size, _ = _store_info(store, key, what)
    if size > MAX_SMALL_BYTES:
        raise ValueError(f"{what}: {size} bytes; posembed writes this file far smaller")
    data = _store_read(store, key, what, 0, size)
    return _npy.read_header(io.BytesIO(data), what, len(data)), data


# index.json, meta.json and the layout arrays of an output in a store are read
# whole: this bounds them (the layout arrays hold 8 bytes a window).
MAX_SMALL_BYTES = 1 << 36


def _read_parts_in_store(url: str) -> Windows:
    """read_parts of an output in a store: complete only with its meta.json
    (uploaded last), every field and header checked as on disk."""
    try:
        fs, key = filesystem(url)
    except ChunkError as exc:
        raise ValueError(str(exc)) from None
    key = key.rstrip("/")
    url = url.rstrip("/")

    def small(name: str) -> bytes:
        what = f"{url}/{name}"
        size, _ = _store_info(fs, f"{key}/{name}", what)
        if size > MAX_SMALL_BYTES:
            raise ValueError(f"{what}: {size} bytes; posembed writes this file far smaller")
        return _store_read(fs, f"{key}/{name}", what, 0, size)

    try:
        meta_text = small("meta.json")
    except ValueError as exc:
        raise ValueError(
            f"{url}: not a finished parted chunk output (no meta.json, which is uploaded last: "
            f"{exc})"
        ) from None
    index = _json.loads(small("index.json"), f"{url}/index.json")
    dtype, size, entries = _check_index(index, f"{url}/index.json")
    meta = _check_meta(
        _json.loads(meta_text, f"{url}/meta.json"), f"{url}/meta.json", size, entries
    )
    parts: list[_Part] = []
    for part in entries:
        what = f"{url}/{part['file']}"
        part_key = f"{key}/{part['file']}"
        head = _store_read(fs, part_key, what, 0, 16 + _npy.MAX_HEADER_BYTES + 64)
        total, _ = _store_info(fs, part_key, what)
        header = _npy.read_header(io.BytesIO(head), what, total)
        rows = part["windows"][1] - part["windows"][0]
        if header.dtype != dtype or header.shape != (rows, size) or header.fortran_order:
            raise ValueError(
                f"{what}: holds {header.shape} of {header.dtype.str}; index.json says "
                f"({rows}, {size}) of {dtype.str}"
            )
        parts.append(_StorePart(fs, part_key, what, header.offset, rows, size, dtype))
    counts = {"doc_offsets": meta["documents"] + 1}
    layout = {}
    for name in _LAYOUT:
        what = f"{url}/{name}.npy"
        header, data = _store_npy(fs, f"{key}/{name}.npy", what)
        count = counts.get(name, meta["windows"])
        _check_layout(header, what, count)
        layout[name] = np.frombuffer(data, np.int64, count, header.offset).copy()
    return _windows(PartsView(parts, size, dtype), layout, size, meta)


def _windows(
    view: PartsView, layout: dict[str, np.ndarray], size: int, meta: dict[str, Any]
) -> Windows:
    return Windows(
        view,  # type: ignore[arg-type]
        layout["starts"],
        layout["lengths"],
        layout["documents"],
        layout["doc_offsets"],
        size,
        meta["step"],
        meta["tail"],
    )


class _LoadedPart(_Part):
    """A part whose rows were read (a :class:`_Part` after pickling)."""

    def __init__(self, what: str, rows: np.ndarray) -> None:
        self.what = what
        self.dtype = rows.dtype
        self.shape = (int(rows.shape[0]), int(rows.shape[1]))
        self.ndim = 2
        self._rows = rows

    def close(self) -> None:
        pass

    def read_into(self, out: np.ndarray, first: int) -> None:
        out[...] = self._rows[first : first + out.shape[0]]

    def __dask_tokenize__(self) -> Any:
        return (self.what, self._rows)

    def __reduce__(self) -> Any:
        return (_LoadedPart, (self.what, self._rows))


def _row_array(key: Any, n: int) -> np.ndarray:
    rows = np.asarray(key)
    if rows.dtype.kind not in "iu":
        raise TypeError(f"windows are indexed by ints, slices or int arrays; got {key!r}")
    rows = rows.astype(np.int64)
    bad = (rows < -n) | (rows >= n)
    if bad.any():
        raise IndexError(f"row {rows[bad].ravel()[0]} is out of range for {n} windows")
    out: np.ndarray = rows % max(n, 1)
    return out


class PartsView:
    """The windows of a parted output as one read-only array over its part
    files (no part is read until its rows are).

    Every access reads the rows asked for from the part files with positional
    reads (``os.preadv``, the GIL released) into a new array: an int or a
    slice of step 1 reads one contiguous run per part it spans; other slices
    and integer arrays read each run of consecutive rows once and gather
    them. ``numpy.asarray(view)`` reads everything; :meth:`to_dask` reads
    one part per chunk. A part file that shrank since :func:`read_parts`
    checked it is a ValueError.
    """

    def __init__(self, parts: list[_Part], size: int, dtype: np.dtype[Any]) -> None:
        self.parts = parts
        self._first = np.concatenate([[0], np.cumsum([p.shape[0] for p in parts])]).astype(np.int64)
        self.dtype = np.dtype(dtype)
        self.shape = (int(self._first[-1]), size)
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"PartsView(shape={self.shape}, dtype={self.dtype}, parts={len(self.parts)})"

    def _read_span(self, lo: int, hi: int) -> np.ndarray:
        """Rows [lo, hi) (in range), one read per part they fall in."""
        out = np.empty((hi - lo, self.shape[1]), self.dtype)
        k = int(np.searchsorted(self._first, lo, side="right")) - 1
        at = lo
        while at < hi:
            part_end = int(self._first[k + 1])
            end = min(hi, part_end)
            self.parts[k].read_into(out[at - lo : end - lo], at - int(self._first[k]))
            at, k = end, k + 1
        return out

    def __getitem__(self, key: Any) -> Any:
        rest: tuple[Any, ...] = ()
        if isinstance(key, tuple):
            key, rest = (key[0] if key else slice(None)), key[1:]
        n = self.shape[0]
        if isinstance(key, (int, np.integer)):
            if not -n <= key < n:
                raise IndexError(f"row {key} is out of range for {n} windows")
            row = int(key) % n
            return self._read_span(row, row + 1)[(0, *rest)]
        if isinstance(key, slice):
            lo, hi, step = key.indices(n)
            if step == 1:
                return self._read_span(lo, max(lo, hi))[(slice(None), *rest)]
            rows = np.arange(lo, hi, step, dtype=np.int64)
        else:
            rows = _row_array(key, n)
        out = np.empty((*rows.shape, self.shape[1]), self.dtype)
        flat = out.reshape(-1, self.shape[1])
        flat_rows = rows.ravel()
        part_of = np.searchsorted(self._first, flat_rows, side="right") - 1
        for k in np.unique(part_of).tolist():  # one take per part the rows fall in
            mine = part_of == k
            flat[mine] = self.parts[k].take(flat_rows[mine] - self._first[k])
        return out[(Ellipsis, *rest)] if rest else out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self._read_span(0, self.shape[0])
        return whole.astype(dtype, copy=False) if dtype is not None else whole

    def to_dask(self) -> Any:
        """The same rows as a Dask array, one chunk per part (read when computed)."""
        try:
            import dask.array as da
        except ImportError:
            raise ImportError(
                "PartsView.to_dask needs Dask: pip install 'posembed[dask]'"
            ) from None
        if not self.parts:
            return da.zeros(self.shape, dtype=self.dtype)
        return da.concatenate([da.from_array(p, chunks=p.shape, asarray=False) for p in self.parts])


# Opening a file inside the output: never through a symlink, never waiting
# on a FIFO; the caller then requires a regular file (fstat).
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
# What chunk_parts writes as a part's file: one plain name in parts/.
_PART_FILE = re.compile(r"parts/([A-Za-z0-9_][A-Za-z0-9_.-]*\.npy)")
_LAYOUT = ("starts", "lengths", "documents", "doc_offsets")
_TAILS = ("pad", "shift", "drop")


def _open_in(dir_fd: int, name: str, what: str) -> int:
    """A descriptor of the regular file ``name`` directly in ``dir_fd``."""
    try:
        fd = os.open(name, _OPEN_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM):
            raise  # the process's limits, not the folder
        if exc.errno == errno.ELOOP:
            raise ValueError(f"{what}: a symbolic link; only regular files are read") from None
        raise ValueError(f"{what}: cannot be opened ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{what}: not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_json(dir_fd: int, name: str, what: str) -> Any:
    fd = _open_in(dir_fd, name, what)
    with os.fdopen(fd, "rb") as f:
        return _json.loads(f.read(), what)


def _pair(value: Any, what: str) -> tuple[int, int]:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(type(v) is int for v in value)  # bool is no count
        or not 0 <= value[0] <= value[1]
    ):
        raise ValueError(
            f"{what} must be [start, end], integers with 0 <= start <= end; got {value!r:.80}"
        )
    return value[0], value[1]


def _count(value: Any, what: str, least: int) -> int:
    if type(value) is not int or value < least:
        raise ValueError(f"{what} must be an integer >= {least}; got {value!r:.80}")
    return value


def _check_index(index: Any, what: str) -> tuple[np.dtype[Any], int, list[dict[str, Any]]]:
    """The index's dtype, size and parts, each field checked; the parts' files unique."""
    if not isinstance(index, dict):
        raise ValueError(f"{what}: must be a JSON object; got {type(index).__name__}")
    if type(index.get("version")) is not int or index["version"] != INDEX_VERSION:
        raise ValueError(f"{what}: version {index.get('version')!r} is not {INDEX_VERSION}")
    spelled = index.get("dtype")
    try:
        dtype = np.dtype(spelled) if isinstance(spelled, str) else None
    except Exception:  # NumPy raises TypeError, ValueError, ... for odd spellings
        dtype = None
    if dtype is None or dtype.kind not in "iu":
        raise ValueError(f"{what}: dtype must name an integer NumPy dtype; got {spelled!r:.80}")
    size = _count(index.get("size"), f"{what}: size", 1)
    parts = index.get("parts")
    if not isinstance(parts, list):
        raise ValueError(f"{what}: parts must be a list; got {parts!r:.80}")
    names: set[str] = set()
    windows = tokens = 0
    for i, part in enumerate(parts):
        entry = f"{what}: parts[{i}]"
        if not isinstance(part, dict):
            raise ValueError(f"{entry} must be an object; got {part!r:.80}")
        file = part.get("file")
        if not isinstance(file, str) or not _PART_FILE.fullmatch(file) or ".." in file:
            raise ValueError(
                f"{entry}.file must be 'parts/<name>.npy', a plain file name in the "
                f"folder's parts/; got {file!r:.200}"
            )
        if file in names:
            raise ValueError(f"{entry}.file {file!r} is named by an earlier part too")
        names.add(file)
        w0, w1 = _pair(part.get("windows"), f"{entry}.windows")
        t0, t1 = _pair(part.get("tokens"), f"{entry}.tokens")
        if w0 != windows or t0 != tokens:
            raise ValueError(
                f"{entry} starts at window {w0} and token {t0}; the parts before it end "
                f"at window {windows} and token {tokens}"
            )
        windows, tokens = w1, t1
    return dtype, size, parts


def _check_meta(meta: Any, what: str, size: int, parts: list[dict[str, Any]]) -> dict[str, Any]:
    if not isinstance(meta, dict):
        raise ValueError(f"{what}: must be a JSON object; got {type(meta).__name__}")
    windows = parts[-1]["windows"][1] if parts else 0
    tokens = parts[-1]["tokens"][1] if parts else 0
    agree = {"size": size, "windows": windows, "tokens": tokens, "parts": len(parts)}
    for key, want in agree.items():
        if type(meta.get(key)) is not int or meta[key] != want:
            raise ValueError(f"{what}: {key} is {meta.get(key)!r:.80}; index.json says {want}")
    _count(meta.get("step"), f"{what}: step", 1)
    _count(meta.get("documents"), f"{what}: documents", 0)
    if meta.get("tail") not in _TAILS:
        raise ValueError(f"{what}: tail must be one of {_TAILS}; got {meta.get('tail')!r:.80}")
    return meta


def _open_part(
    parts_fd: int, folder: Path, part: dict[str, Any], size: int, dtype: np.dtype[Any]
) -> _Part:
    file = part["file"]
    what = f"{folder}/{file}"
    fd = _open_in(parts_fd, file.split("/", 1)[1], what)
    try:
        with os.fdopen(fd, "rb", closefd=False) as f:
            header = _npy.read_header(f, what, os.fstat(fd).st_size)
        rows = part["windows"][1] - part["windows"][0]
        if header.dtype != dtype or header.shape != (rows, size) or header.fortran_order:
            order = ", Fortran order" if header.fortran_order else ""
            raise ValueError(
                f"{what}: holds {header.shape} of {header.dtype.str}{order}; index.json says "
                f"({rows}, {size}) of {dtype.str}"
            )
        return _Part(fd, what, header.offset, rows, size, dtype)
    except BaseException:
        os.close(fd)
        raise


def _load_layout(dir_fd: int, folder: Path, name: str, count: int) -> np.ndarray:
    what = f"{folder}/{name}.npy"
    fd = _open_in(dir_fd, f"{name}.npy", what)
    with os.fdopen(fd, "rb") as f:
        _check_layout(_npy.read_header(f, what, os.fstat(fd).st_size), what, count)
        return _npy.load_open(f, what)


def _check_layout(header: Any, what: str, count: int) -> None:
    """A layout array's header: ``count`` int64 values, as the index and meta.json say."""
    if header.dtype != np.dtype(np.int64) or header.shape != (count,):
        raise ValueError(
            f"{what}: holds {header.shape} of {header.dtype.str}; the index and meta.json "
            f"say ({count},) of {np.dtype(np.int64).str}"
        )


def read_parts(output_dir: str | os.PathLike[str]) -> Windows:
    """The windows ``chunk_parts`` (``posembed chunk --dask``) wrote.

    ``output_dir`` may be a URL of a store (``s3://...``, through fsspec):
    the output is read only once its ``meta.json`` (uploaded last) is there,
    and the parts by range when indexed, each object's ETag checked first.
    On disk, every file is opened inside ``output_dir`` without following symbolic
    links, and must be a regular file: ``index.json``, ``meta.json``, the
    layout arrays and each part, which ``index.json`` must name as
    ``parts/<name>.npy``. Every field of ``index.json`` and ``meta.json`` and
    every ``.npy`` header is checked before any row is served. The parts stay
    open and are read when indexed (never memory-mapped).

    Parameters
    ----------
    output_dir : path
        The folder ``chunk_parts`` wrote.

    Returns
    -------
    Windows
        Its ``tokens`` a :class:`PartsView` over the parts (read only when
        indexed), the layout arrays (starts, lengths, documents,
        doc_offsets) read into memory: equal to :func:`posembed.windows` on
        the whole input once read.

    Raises
    ------
    ValueError
        A folder without a readable ``index.json`` of this version, a
        malformed ``index.json`` or ``meta.json`` (the message names the
        entry), a file that is a symbolic link, not a regular file, not a
        valid ``.npy`` file or not of the dtype and shape the index gives.
    OSError
        The process may open no more files.
    """
    if is_url(output_dir):
        return _read_parts_in_store(str(output_dir))
    folder = Path(output_dir)
    try:
        out_fd = os.open(folder, _DIR_FLAGS)
    except OSError as exc:
        raise ValueError(f"{folder}: not a parted chunk output ({exc.strerror})") from None
    opened: list[_Part] = []
    try:
        try:
            index = _read_json(out_fd, "index.json", f"{folder}/index.json")
        except ValueError as exc:
            raise ValueError(f"{folder}: not a parted chunk output ({exc})") from None
        dtype, size, entries = _check_index(index, f"{folder}/index.json")
        meta = _check_meta(
            _read_json(out_fd, "meta.json", f"{folder}/meta.json"),
            f"{folder}/meta.json",
            size,
            entries,
        )
        if entries:
            try:
                parts_fd = os.open("parts", _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=out_fd)
            except OSError as exc:
                raise ValueError(
                    f"{folder}/parts: not a folder of parts ({exc.strerror}; a symbolic "
                    "link is never followed)"
                ) from None
            try:
                for part in entries:
                    opened.append(_open_part(parts_fd, folder, part, size, dtype))
            finally:
                os.close(parts_fd)
        counts = {"doc_offsets": meta["documents"] + 1}
        layout = {
            name: _load_layout(out_fd, folder, name, counts.get(name, meta["windows"]))
            for name in _LAYOUT
        }
    except BaseException:
        for done in opened:
            done.close()
        raise
    finally:
        os.close(out_fd)
    return _windows(PartsView(opened, size, dtype), layout, size, meta)

"""The `posembed chunk` pipeline: a token file on disk to windows on disk, in bounded memory."""

from __future__ import annotations

import bisect
import json
import os
import sys
import warnings
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from posembed import _npy, _outdir
from posembed import _validate as v
from posembed._arrow import require, windows_table
from posembed._source import ChunkError, TokenFile, _open_regular, _stamp
from posembed._windows import (
    TAILS,
    _check_pad_value,
    _cut,
    _layout_part,
    _LayoutPart,
    _offsets,
    _step,
)

# Everything a running chunk holds at a time, in bytes, whatever the window
# size, step and tail: the token buffers read ahead, the rows cut and written
# behind, and the batches' layouts (beyond it: the document offsets, 16 bytes
# per document). Batches are sized to fit; only a window of more than a sixth
# of it (size x itemsize > MEMORY_BYTES / 6) makes a batch of one go past it.
MEMORY_BYTES = 64 << 20
# Batches read ahead of and written behind the one being cut: the reads (a
# thread of positional reads) and the writes (one of positional writes, both
# with the GIL released) overlap the kernel.
READ_AHEAD, WRITE_BEHIND = 2, 2
_READ_BUFFERS = READ_AHEAD + 1  # those read ahead, and the one being cut
_ROW_BUFFERS = WRITE_BEHIND + 1  # those being written, and the one being cut into
# Layouts (starts, lengths, documents: 24 bytes a window) alive at once: one per
# token buffer, the one being planned, and one per row buffer; plus the copies
# the kernels take of one, and of the offsets of the documents it spans.
_LAYOUTS = _READ_BUFFERS + 1 + _ROW_BUFFERS + 2


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


def _open_tokens(path: Path, dtype: Any) -> TokenFile:
    fd, info = _open_regular(path, str(path))
    with os.fdopen(fd, "rb") as f:
        if path.suffix == ".npy":
            if dtype is not None:
                raise ChunkError("--dtype applies to raw token files; a .npy file names its own")
            if info.st_size == 0:
                raise ChunkError(
                    f"{path}: not a readable .npy file (it is empty); the input must be a 1-D "
                    "integer .npy file, header included (numpy.save writes one even for no "
                    "tokens)"
                )
            try:
                header = _npy.read_header(f, str(path), info.st_size)
            except ValueError as exc:
                raise ChunkError(str(exc)) from None
            except OSError as exc:
                raise ChunkError(f"{path}: cannot be read ({exc.strerror})") from None
            if len(header.shape) != 1 or header.dtype.kind not in "iu":
                raise ChunkError(
                    f"{path}: tokens must be a 1-D integer array; got {header.dtype} "
                    f"of shape {header.shape}"
                )
            dt, offset, count = header.dtype, header.offset, header.shape[0]
        else:
            if dtype is None:
                raise ChunkError(f"{path}: a raw token file needs --dtype (e.g. uint16)")
            dt, offset = _token_dtype(dtype), 0
            if info.st_size % dt.itemsize:
                raise ChunkError(
                    f"{path}: {info.st_size} bytes is not a whole number of {dt} tokens "
                    f"({dt.itemsize} bytes each)"
                )
            count = info.st_size // dt.itemsize
        return TokenFile(
            path,
            dt.newbyteorder("="),
            offset,
            count,
            swap=not dt.isnative,
            stamp=_stamp(info),
        )


def _load_offsets(path: str | os.PathLike[str], n_tokens: int) -> np.ndarray:
    what = f"--offsets {path}"
    fd, info = _open_regular(Path(path), what)
    with os.fdopen(fd, "rb") as f:
        if info.st_size == 0:
            raise ChunkError(
                f"{what}: not a readable .npy file (it is empty); offsets must be a 1-D integer "
                ".npy file, from 0 to the token count"
            )
        try:
            given = _npy.load_open(f, what)
        except ValueError as exc:
            raise ChunkError(str(exc)) from None
        except OSError as exc:
            raise ChunkError(f"{what}: cannot be read ({exc.strerror})") from None
    try:
        return _offsets(given, n_tokens)
    except (TypeError, ValueError) as exc:
        raise ChunkError(f"{what}: {exc}") from None


def chunk_file(
    input_path: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    *,
    size: int,
    step: int | None = None,
    overlap: int | None = None,
    tail: str = "pad",
    dtype: str | None = None,
    offsets_path: str | os.PathLike[str] | None = None,
    pad_value: int = 0,
    force: bool = False,
    quiet: bool = False,
    column: str | None = None,
    format: str = "npy",
) -> dict[str, Any]:
    """Window a token file into ``output_dir``, streaming: the engine of ``posembed chunk``.

    The input is read and the outputs are written batch by batch, so
    files larger than memory work. The outputs appear only when complete
    (written to a temporary folder next to ``output_dir``, then renamed; an
    old output is swapped with the new one in one step where the system can,
    so that a run killed at any moment leaves one or the other).

    The run holds about ``MEMORY_BYTES`` (64 MiB) at a time, whatever the
    window size, step and tail, beyond the document offsets (16 bytes per
    document); only windows so long that six of them exceed it take more (a
    batch of one window). The input is read with positional reads, never
    mapped: a file that shrinks, grows or is rewritten while it is read
    gives a ChunkError, and the outputs are not written. A raw file or
    ``.npy`` file in the other byte order is converted while it is read.

    Arrow and Parquet input (``pyarrow``, the ``arrow`` extra) is a list
    column, one document per row: each batch of rows (a Parquet row group
    read about ``MEMORY_BYTES / 64`` bytes of tokens at a time, an IPC record
    batch as stored) is cut as it arrives, so the document offsets are never all held;
    the outputs equal those of the token file with its offsets, byte for
    byte. A single row larger than the budget is read whole.

    Parameters
    ----------
    input_path : path
        A 1-D integer ``.npy`` file, a raw file of ``dtype`` tokens, a
        ``.parquet`` file or a folder of them (read in name order), an Arrow
        IPC file or stream (``.arrow``), or a folder that
        ``datasets.Dataset.save_to_disk`` wrote (its ``state.json`` lists its
        files, which must lie in the folder).
    output_dir : path
        Folder to create, holding windows.npy, starts.npy, lengths.npy,
        documents.npy (the arrays of :class:`posembed.Windows`), or
        windows.parquet with ``format="parquet"``, and meta.json.
    size : int
        Window length, >= 1.
    step : int, optional
        Distance between window starts, 1..size; default ``size``.
    overlap : int, optional
        ``size - step``, 0..size-1; at most one of ``step`` and ``overlap``.
    tail : {"pad", "shift", "drop"}
        As for :func:`posembed.windows`.
    dtype : str, optional
        The integer dtype of a raw token file (required for one, refused for
        a ``.npy`` file).
    offsets_path : path, optional
        A ``.npy`` file of CSR document offsets, from 0 to the token count.
    pad_value : int
        Fills unused slots; must fit the tokens' dtype.
    force : bool
        Replace ``output_dir`` if it is a folder that posembed wrote (one
        holding its ``meta.json`` or ``index.json``). Anything else there is
        refused, with or without ``force``: a file, a device, a FIFO, a
        symbolic link, another folder, or a folder holding the input or the
        offsets.
    quiet : bool
        No progress bar.
    column : str, optional
        Arrow and Parquet input: the column of token id lists (default
        ``input_ids``); refused for a token file.
    format : {"npy", "parquet"}
        ``"parquet"``: the windows as one Parquet file, windows.parquet, a
        row group per batch, with the columns of
        :meth:`posembed.Windows.to_arrow` (``input_ids``,
        ``attention_mask``, ``document``, ``start``, ``length``), which
        ``datasets.load_dataset("parquet", data_files=...)`` loads.

    Returns
    -------
    dict of str to Any
        What meta.json holds: ``input``, ``tokens``, ``documents``,
        ``windows``, ``size``, ``step``, ``tail``, ``dtype``, ``pad_value``
        and ``format`` (and ``column`` for Arrow input).

    Raises
    ------
    ChunkError
        Any problem with the input or the parameters, in one line: a bad
        ``size``, ``step``, ``overlap`` or ``tail``; ``output_dir`` exists
        without ``force``, or is anything but a folder posembed wrote (see
        ``force``); a missing, empty or unreadable ``.npy`` input, one
        that is not 1-D integers, a raw file without
        ``dtype`` (or not a whole number of its tokens), a ``dtype`` that is
        not an integer type, ``dtype`` with a ``.npy``
        file; a ``pad_value`` that does not fit; empty, unreadable or invalid
        offsets; an input that changes while it is read. For Arrow input: a
        missing column (the error lists those present), one that is not a
        list of integers, a null row or token (the error names the row), a
        file that is not Parquet or Arrow IPC, a state.json that is not a
        saved dataset's or names a file outside its folder, ``dtype`` or
        ``offsets_path`` given. A ChunkError is a ValueError.
    ImportError
        Arrow input or ``format="parquet"`` without pyarrow (the error names
        the ``arrow`` extra).
    TypeError
        A ``pad_value`` that is not an integer; a ``force`` or ``quiet`` that
        is not a bool.
    OSError
        Writing the outputs fails (the temporary folder is removed, an old
        output left as it was); FileExistsError (an OSError) when something
        other than posembed's output took ``output_dir`` while the run wrote.
    """
    quiet = v.flag(quiet, "quiet")
    if format not in FORMATS:
        raise ChunkError(f"--format must be one of {', '.join(FORMATS)}; got {format!r}")
    if format == "parquet":
        require("posembed chunk --format parquet")
    from posembed import _chunk_arrow  # it builds on this module

    if _chunk_arrow.is_arrow_input(Path(input_path)):
        return _chunk_arrow.chunk_arrow(
            input_path,
            output_dir,
            size=size,
            step=step,
            overlap=overlap,
            tail=tail,
            dtype=dtype,
            offsets_path=offsets_path,
            column=column,
            pad_value=pad_value,
            force=force,
            quiet=quiet,
            format=format,
        )
    if column is not None:
        raise ChunkError(
            f"--column applies to Arrow and Parquet input; {input_path} is a token file"
        )
    job = prepare_chunk(
        input_path,
        output_dir,
        size=size,
        step=step,
        overlap=overlap,
        tail=tail,
        dtype=dtype,
        offsets_path=offsets_path,
        pad_value=pad_value,
        force=force,
    )
    tokens, out = job.tokens, job.output
    # Every document's windows are counted once, here; each batch then takes
    # its range of the layout (memory holds a batch's windows, never all).
    window_offsets = _layout_part(
        job.doc_offsets, job.size, job.step, job.tail, end=0
    ).window_offsets
    total = int(window_offsets[-1])
    plan = _plan(job.size, tokens.dtype.itemsize, MEMORY_BYTES)

    tmp = _outdir.new_temp(out)
    sink: Any = None
    try:
        sink = _sink(format, tmp, tokens.dtype, job.size, total)
        tokens.open()
        batches = _batches(job, window_offsets, plan)
        bar = _progress(tokens.count, quiet)
        _run_pipeline(batches, job, sink, pad_value, plan, bar)
        sink.finish(total)
        meta = {
            "input": str(job.source),
            "tokens": int(tokens.shape[0]),
            "documents": int(job.doc_offsets.shape[0] - 1),
            "windows": total,
            "size": job.size,
            "step": job.step,
            "tail": job.tail,
            "dtype": tokens.dtype.name,
            "pad_value": pad_value,
            "format": format,
        }
        write_meta(tmp, meta)
        _outdir.commit(tmp, out, force)
    except BaseException as exc:
        if sink is not None:
            sink.close()
        _outdir.discard(tmp, exc)
        raise
    finally:
        tokens.close()
    return meta


def write_meta(folder: Path, meta: dict[str, Any]) -> None:
    """meta.json: what the run wrote, and the mark of a folder posembed wrote."""
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


class ChunkJob(NamedTuple):
    """A checked ``posembed chunk`` run, as :func:`prepare_chunk` returns it.

    Attributes
    ----------
    source : Path
        The token file.
    output : Path
        The folder to write.
    size : int
        Window length.
    step : int
        Distance between window starts.
    tail : {"pad", "shift", "drop"}
        How the last window of each document is placed.
    tokens : TokenFile
        The input, not yet opened.
    doc_offsets : ndarray of int64, shape (documents + 1,)
        The documents' offsets, from 0 to the token count.
    """

    source: Path
    output: Path
    size: int
    step: int
    tail: str
    tokens: TokenFile
    doc_offsets: np.ndarray


def checked_windows(size: Any, step: Any, overlap: Any, tail: Any) -> tuple[int, int]:
    """``--size`` and the step (from ``--step`` or ``--overlap``), with
    ``--tail`` checked: ChunkError naming the option otherwise."""
    try:
        size = v.positive_int(size, "--size")
        step = _step(size, step, overlap)
        v.choice(tail, "--tail", TAILS)
    except (TypeError, ValueError) as exc:
        raise ChunkError(str(exc)) from None
    return size, step


def check_output(out: Path, inputs: tuple[Any, ...], force: bool) -> None:
    """ChunkError unless ``out`` may be written (see ``_outdir.problem``)."""
    problem = _outdir.problem(out, inputs, force)
    if problem:
        raise ChunkError(problem)


def check_pad_value(pad_value: Any, dtype: np.dtype[Any]) -> None:
    """ChunkError unless ``--pad-value`` fits the tokens' dtype (TypeError
    unless it is an integer)."""
    try:
        _check_pad_value(pad_value, dtype)
    except ValueError:
        raise ChunkError(f"--pad-value {pad_value} does not fit {dtype}") from None


def prepare_chunk(
    input_path: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    *,
    size: int,
    step: int | None = None,
    overlap: int | None = None,
    tail: str = "pad",
    dtype: str | None = None,
    offsets_path: str | os.PathLike[str] | None = None,
    pad_value: int = 0,
    force: bool = False,
) -> ChunkJob:
    """Check a ``posembed chunk`` run's arguments and open its input.

    What :func:`chunk_file` and ``posembed.dask.chunk_parts`` do first; a
    pipeline of one's own can start from it too.

    Parameters
    ----------
    input_path, output_dir, size, step, overlap, tail, dtype, offsets_path, pad_value, force
        As for :func:`chunk_file`.

    Returns
    -------
    ChunkJob
        The paths, the window parameters, the token file (not yet opened)
        and the document offsets.

    Raises
    ------
    ChunkError
        As for :func:`chunk_file` (a ValueError).
    TypeError
        A ``force`` that is not a bool.
    """
    from posembed._chunk_arrow import is_arrow_input

    src, out = Path(input_path), Path(output_dir)
    force = v.flag(force, "force")
    if is_arrow_input(src):
        raise ChunkError(
            f"{src}: Arrow and Parquet input is read in one process (posembed chunk without "
            "--dask, or chunk_file); --dask reads .npy and raw token files"
        )
    size, step = checked_windows(size, step, overlap, tail)
    check_output(out, (input_path, offsets_path), force)
    tokens = _open_tokens(src, dtype)
    check_pad_value(pad_value, tokens.dtype)
    if offsets_path is None:
        offsets = np.array([0, tokens.shape[0]], dtype=np.int64)
    else:
        offsets = _load_offsets(offsets_path, tokens.count)
    return ChunkJob(src, out, size, step, tail, tokens, offsets)


class _Plan(NamedTuple):
    """How large a batch may be: windows, tokens read, documents spanned."""

    windows: int
    tokens: int
    documents: int


def _plan(size: int, itemsize: int, budget: int) -> _Plan:
    """Batches whose buffers and layouts, all in flight together, fit ``budget`` bytes."""
    # A window costs a row in each row buffer, up to `size` tokens in each
    # token buffer (windows that do not overlap read as many tokens as they
    # hold), its layout entries, and the offsets of a document it may span.
    per_window = (_ROW_BUFFERS + _READ_BUFFERS) * size * itemsize + 24 * _LAYOUTS + 24
    windows = max(1, budget // per_window)
    return _Plan(windows, windows * size, windows)


class _Batch(NamedTuple):
    """Windows [begin, begin + len(layout)) of a run: their layout and the
    corpus tokens [first_token, end_token) they cover."""

    begin: int
    layout: _LayoutPart
    first_token: int
    end_token: int


def _batches(job: ChunkJob, window_offsets: np.ndarray, plan: _Plan) -> Iterator[_Batch]:
    offsets = job.doc_offsets
    ndocs = offsets.shape[0] - 1
    total = int(window_offsets[-1])
    begin = 0
    while begin < total:
        # the windows of at most plan.documents documents, so that the offsets
        # the kernels copy for a batch stay within the plan
        doc = int(np.searchsorted(window_offsets, begin, side="right")) - 1
        last_doc = min(ndocs, doc + plan.documents)
        end = min(total, begin + plan.windows, int(window_offsets[last_doc]))
        layout = _layout_part(offsets, job.size, job.step, job.tail, window_offsets, begin, end)

        def stop(k: int, layout: _LayoutPart = layout) -> int:
            return int(offsets[layout.documents[k]] + layout.starts[k] + layout.lengths[k])

        # windows lie in corpus order: the first starts first, the last ends last
        first = int(offsets[layout.documents[0]] + layout.starts[0])
        count = layout.starts.shape[0]
        if stop(count - 1) - first > plan.tokens:
            # tokens no window takes (tails and documents that tail="drop"
            # drops) lie between them: only the windows whose tokens fit
            count = bisect.bisect_right(range(count), first + plan.tokens, key=stop)
            layout = _LayoutPart(
                layout.window_offsets,
                layout.starts[:count],
                layout.lengths[:count],
                layout.documents[:count],
            )
        yield _Batch(begin, layout, first, stop(count - 1))
        begin += count


def _run_pipeline(
    batches: Iterator[_Batch],
    job: ChunkJob,
    sink: Any,
    pad_value: int,
    plan: _Plan,
    bar: Any,
) -> None:
    tokens, size = job.tokens, job.size
    # Tokens are read into, and windows cut into, rings of buffers, each free
    # again by the time it comes round (at most READ_AHEAD reads ahead of the
    # cut, at most WRITE_BEHIND writes in flight): the memory is allocated
    # once, and no batch pays for the page faults of new arrays.
    reads = [np.empty(plan.tokens, tokens.dtype) for _ in range(_READ_BUFFERS)]
    ring = [np.empty((plan.windows, size), tokens.dtype) for _ in range(_ROW_BUFFERS)]

    def write(batch: _Batch, rows: np.ndarray) -> None:
        layout = batch.layout
        sink.write(batch.begin, rows, layout.starts, layout.lengths, layout.documents)

    def tiles(batch: _Batch) -> bool:
        """Whether the batch's windows are its tokens back to back, unpadded
        (blocks of a flat token file): then the tokens read are the rows,
        written as they are, with no cut."""
        layout, count = batch.layout, batch.layout.starts.shape[0]
        if batch.end_token - batch.first_token != count * size:
            return False
        if not (layout.lengths == size).all():
            return False
        corpus = job.doc_offsets[layout.documents] + layout.starts
        return bool((corpus == batch.first_token + size * np.arange(count)).all())

    ahead: deque[tuple[_Batch, Future[np.ndarray], bool]] = deque()
    writes: deque[Future[None]] = deque()
    # the write, if any, still taking its rows from each read buffer
    writing: list[Future[None] | None] = [None] * len(reads)
    issued = 0

    with ThreadPoolExecutor(1) as reader, ThreadPoolExecutor(1) as writer:

        def read_ahead() -> None:
            nonlocal issued
            while len(ahead) < READ_AHEAD:
                batch = next(batches, None)
                if batch is None:
                    return
                k = issued % len(reads)  # its last batch is cut by now
                issued += 1
                pending = writing[k]
                if pending is not None:  # ... and written, when it was its own rows
                    pending.result()
                    writing[k] = None
                read = reader.submit(tokens.read_into, batch.first_token, batch.end_token, reads[k])
                ahead.append((batch, read, tiles(batch)))

        try:
            read_ahead()
            turn = turn_read = 0
            while ahead:
                batch, pending, tiled = ahead.popleft()
                block = pending.result()
                layout = batch.layout
                if tiled:
                    rows = block.reshape(layout.starts.shape[0], size)
                    writes.append(writer.submit(write, batch, rows))
                    writing[turn_read % len(reads)] = writes[-1]
                    turn_read += 1
                    del block, rows
                    read_ahead()
                    while len(writes) > WRITE_BEHIND:
                        writes.popleft().result()
                    bar.update(max(0, batch.end_token - bar.n))
                    continue
                turn_read += 1
                read_ahead()
                rows = _cut(
                    block,
                    batch.first_token,
                    job.doc_offsets,
                    layout.starts,
                    layout.lengths,
                    layout.documents,
                    size,
                    pad_value,
                    ring[turn % len(ring)][: layout.starts.shape[0]],
                )
                del block
                writes.append(writer.submit(write, batch, rows))
                while len(writes) > WRITE_BEHIND:
                    writes.popleft().result()
                bar.update(max(0, batch.end_token - bar.n))  # each token cut at least once
                turn += 1
            while writes:
                writes.popleft().result()
            # every token is read: the file must still be the one first seen
            tokens.check()
            bar.update(max(0, tokens.count - bar.n))
        except BaseException:
            for f in writes:
                f.cancel()
            for _, read, _ in ahead:
                read.cancel()
            raise
        finally:
            bar.close()


class _NpyWriter:
    """A .npy file filled row range by row range with positional writes (safe
    from several threads; the GIL is released while the kernel copies). Of
    known shape, or of rows counted as they come: then :meth:`finish` writes
    the count into the header (NumPy leaves room for any count)."""

    def __init__(self, path: Path, dtype: np.dtype[Any], shape: tuple[int, ...]) -> None:
        self.path, self.dtype, self.shape = path, dtype, shape
        with open(path, "wb") as f:
            self.header = self._write_header(f, shape)
        self.row_bytes = dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64))
        self.fd = os.open(path, os.O_WRONLY)
        os.truncate(self.fd, self.header + self.row_bytes * shape[0])

    def _write_header(self, f: Any, shape: tuple[int, ...]) -> int:
        header = {
            "descr": np.lib.format.dtype_to_descr(self.dtype),
            "fortran_order": False,
            "shape": shape,
        }
        np.lib.format.write_array_header_1_0(f, header)
        return int(f.tell())

    def write(self, row: int, data: np.ndarray) -> None:
        view = np.ascontiguousarray(data).data.cast("B")
        pos, at = self.header + row * self.row_bytes, 0
        while at < len(view):
            at += os.pwrite(self.fd, view[at:], pos + at)

    def finish(self, rows: int) -> None:
        """Set the header's row count to ``rows`` (written since)."""
        if rows != self.shape[0]:
            with open(self.path, "r+b") as f:
                if self._write_header(f, (rows, *self.shape[1:])) != self.header:
                    raise OSError(f"{self.path}: the header of {rows} rows does not fit")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


FORMATS = ("npy", "parquet")
# The Parquet output's file: one file, in row groups of at most
# ROW_GROUP_BYTES of tokens (or one window), each held encoded by the writer
# until it is complete.
PARQUET_NAME = "windows.parquet"
ROW_GROUP_BYTES = MEMORY_BYTES // 32


class _NpySink:
    """The .npy output: windows.npy, starts.npy, lengths.npy and documents.npy,
    of ``total`` windows, or of windows counted as they come (None)."""

    def __init__(self, folder: Path, dtype: np.dtype[Any], size: int, total: int | None) -> None:
        rows = 0 if total is None else total
        self.files: dict[str, _NpyWriter] = {}
        try:
            self.files["windows"] = _NpyWriter(folder / "windows.npy", dtype, (rows, size))
            for name in ("starts", "lengths", "documents"):
                self.files[name] = _NpyWriter(folder / f"{name}.npy", np.dtype(np.int64), (rows,))
        except BaseException:
            self.close()
            raise

    def write(
        self,
        begin: int,
        rows: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
        documents: np.ndarray,
    ) -> None:
        self.files["windows"].write(begin, rows)
        self.files["starts"].write(begin, starts)
        self.files["lengths"].write(begin, lengths)
        self.files["documents"].write(begin, documents)

    def finish(self, total: int) -> None:
        for writer in self.files.values():
            writer.finish(total)
        self.close()

    def close(self) -> None:
        for writer in self.files.values():
            writer.close()


class _ParquetSink:
    """The Parquet output: one file of the columns of ``Windows.to_arrow()``,
    in row groups of ROW_GROUP_BYTES, written in order (one writer thread)."""

    def __init__(self, folder: Path, dtype: np.dtype[Any], size: int, total: int | None) -> None:
        require("posembed chunk --format parquet")
        import pyarrow.parquet as pq

        self.size = size
        empty = np.empty((0, size), dtype)
        zero = np.empty(0, np.int64)
        schema = windows_table(empty, zero, zero, zero).schema
        # no dictionary: token ids are many and varied
        self.writer: Any = pq.ParquetWriter(folder / PARQUET_NAME, schema, use_dictionary=False)

    def write(
        self,
        begin: int,
        rows: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
        documents: np.ndarray,
    ) -> None:
        # row groups of a bounded size: the writer holds one encoded whole
        step = max(1, ROW_GROUP_BYTES // max(1, rows[:1].nbytes))
        for at in range(0, rows.shape[0], step):
            part = slice(at, at + step)
            table = windows_table(rows[part], lengths[part], documents[part], starts[part])
            self.writer.write_table(table)

    def finish(self, total: int) -> None:
        self.close()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _sink(
    output_format: str, folder: Path, dtype: np.dtype[Any], size: int, total: int | None
) -> Any:
    if output_format == "parquet":
        return _ParquetSink(folder, dtype, size, total)
    return _NpySink(folder, dtype, size, total)


class _Quiet:
    n = 0

    def update(self, k: int) -> None:
        self.n += k

    def close(self) -> None:
        pass


def _progress(total: int | None, quiet: bool) -> Any:
    """A tqdm bar of tokens (total None: unknown, a count and a rate), or one that shows nothing."""
    if quiet or not sys.stderr.isatty():
        return _Quiet()
    try:
        from tqdm import tqdm
    except ImportError:
        return _Quiet()
    return tqdm(total=total, unit="tok", unit_scale=True, desc="posembed chunk")

"""The `posembed chunk` pipeline: a token file on disk to windows on disk, in bounded memory."""

from __future__ import annotations

import json
import mmap
import os
import sys
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from posembed import _outdir
from posembed import _validate as v
from posembed._windows import (
    TAILS,
    _check_pad_value,
    _cut,
    _layout_part,
    _LayoutPart,
    _offsets,
    _step,
)

# Output bytes built per kernel call: large enough to keep the threads busy,
# small enough that the command needs about 2 x this much memory, whatever the file.
BATCH_BYTES = 16 << 20


class ChunkError(ValueError):
    """A problem with the command's input or parameters: reported in one line.

    A ValueError, so that callers of :func:`chunk_file` can catch it as one.
    """


class TokenFile:
    """A 1-D token file on disk, memory-mapped a slice at a time.

    Memory holds the slices in use, never the whole file; a closed
    ``TokenFile`` pickles small (a path and four numbers), so workers of a
    cluster can each open and read their own slices.

    Attributes
    ----------
    path : Path
        The file.
    dtype : numpy.dtype
        The tokens' integer dtype (native byte order).
    offset : int
        Bytes before the first token (a ``.npy`` header; 0 for a raw file).
    count : int
        Number of tokens.
    """

    def __init__(self, path: Path, dtype: np.dtype[Any], offset: int, count: int) -> None:
        self.path, self.dtype, self.offset, self.count = path, dtype, offset, count
        self.fd = -1

    @property
    def shape(self) -> tuple[int]:
        """(count,), as for an array of the tokens."""
        return (self.count,)

    def open(self) -> None:
        """Open the file for :meth:`read` (:meth:`close` closes it)."""
        self.fd = os.open(self.path, os.O_RDONLY)

    def close(self) -> None:
        """Close the file (mapped slices stay readable until they are dropped)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def read(self, start: int, stop: int) -> np.ndarray:
        """Tokens [start, stop), memory-mapped and asked for ahead of use.

        The array holds the page cache's own pages, not a copy; the mapping
        goes when the array does. As with any memory map, the file must not
        shrink while it is read.

        Parameters
        ----------
        start, stop : int
            The token range, 0 <= start and stop <= count (stop <= start: no
            tokens).

        Returns
        -------
        ndarray, shape (stop - start,)
            Read-only, of :attr:`dtype`.

        Raises
        ------
        ChunkError
            The file is shorter than the range (it changed while being read).
        OSError
            The file is not open, or cannot be mapped.
        """
        n = max(0, stop - start)
        if n == 0:
            return np.empty(0, self.dtype)
        pos = self.offset + start * self.dtype.itemsize
        base = pos - pos % mmap.ALLOCATIONGRANULARITY
        length = pos - base + n * self.dtype.itemsize
        if os.fstat(self.fd).st_size < base + length:
            raise ChunkError(f"{self.path}: the file ended early (changed while reading?)")
        mapped = mmap.mmap(self.fd, length, offset=base, access=mmap.ACCESS_READ)
        mapped.madvise(mmap.MADV_SEQUENTIAL)
        mapped.madvise(mmap.MADV_WILLNEED)
        return np.frombuffer(mapped, self.dtype, count=n, offset=pos - base)


def _open_tokens(path: Path, dtype: str | None) -> TokenFile:
    if not path.is_file():
        raise ChunkError(f"{path}: no such file")
    if path.suffix == ".npy":
        if dtype is not None:
            raise ChunkError("--dtype applies to raw token files; a .npy file names its own")
        if path.stat().st_size == 0:
            raise ChunkError(
                f"{path}: not a readable .npy file (it is empty); the input must be a 1-D "
                "integer .npy file, header included (numpy.save writes one even for no tokens)"
            )
        try:
            mapped = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ChunkError(f"{path}: not a readable .npy file ({exc})") from None
        if mapped.ndim != 1 or mapped.dtype.kind not in "iu":
            raise ChunkError(
                f"{path}: tokens must be a 1-D integer array; got {mapped.dtype} "
                f"of shape {mapped.shape}"
            )
        if not mapped.dtype.isnative:
            raise ChunkError(f"{path}: tokens must be in native byte order; got {mapped.dtype}")
        header = int(mapped.offset)
        result = TokenFile(path, mapped.dtype, header, int(mapped.shape[0]))
        del mapped
        return result
    else:
        if dtype is None:
            raise ChunkError(f"{path}: a raw token file needs --dtype (e.g. uint16)")
        try:
            dt = np.dtype(dtype)
        except TypeError:
            raise ChunkError(f"--dtype {dtype!r} is not a NumPy dtype") from None
        if dt.kind not in "iu":
            raise ChunkError(f"--dtype must be an integer type; got {dt}")
        if not dt.isnative:
            raise ChunkError(f"--dtype must be in native byte order; got {dt.str}")
        nbytes = path.stat().st_size
        if nbytes % dt.itemsize:
            raise ChunkError(
                f"{path}: {nbytes} bytes is not a whole number of {dt} tokens "
                f"({dt.itemsize} bytes each)"
            )
        return TokenFile(path, dt, 0, nbytes // dt.itemsize)


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
) -> dict[str, Any]:
    """Window a token file into ``output_dir``, streaming: the engine of ``posembed chunk``.

    The input is memory-mapped and the outputs are written batch by batch, so
    files larger than memory work. The outputs appear only when complete
    (written to a temporary folder next to ``output_dir``, then renamed; an
    old output is swapped with the new one in one step where the system can,
    so that a run killed at any moment leaves one or the other).

    Parameters
    ----------
    input_path : path
        A 1-D integer ``.npy`` file, or a raw file of ``dtype`` tokens.
    output_dir : path
        Folder to create, holding windows.npy, starts.npy, lengths.npy,
        documents.npy and meta.json (the arrays of :class:`posembed.Windows`).
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

    Returns
    -------
    dict of str to Any
        What meta.json holds: ``input``, ``tokens``, ``documents``,
        ``windows``, ``size``, ``step``, ``tail``, ``dtype`` and ``pad_value``.

    Raises
    ------
    ChunkError
        Any problem with the input or the parameters, in one line: a bad
        ``size``, ``step``, ``overlap`` or ``tail``; ``output_dir`` exists
        without ``force``, or is anything but a folder posembed wrote (see
        ``force``); a missing, empty or unreadable ``.npy`` input, one
        that is not 1-D integers in native byte order, a raw file without
        ``dtype`` (or not a whole number of its tokens), a ``dtype`` that is
        not an integer type in native byte order, ``dtype`` with a ``.npy``
        file; a ``pad_value`` that does not fit; empty, unreadable or invalid
        offsets; an input that shrinks while it is read. A ChunkError is a
        ValueError.
    TypeError
        A ``pad_value`` that is not an integer; a ``force`` or ``quiet`` that
        is not a bool.
    OSError
        Writing the outputs fails (the temporary folder is removed, an old
        output left as it was); FileExistsError (an OSError) when something
        other than posembed's output took ``output_dir`` while the run wrote.
    """
    quiet = v.flag(quiet, "quiet")
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
    per_batch = max(1, BATCH_BYTES // (job.size * tokens.dtype.itemsize))

    tmp = _outdir.new_temp(out)
    outputs: dict[str, _NpyWriter] = {}
    try:
        outputs["windows"] = _NpyWriter(tmp / "windows.npy", tokens.dtype, (total, job.size))
        for name in ("starts", "lengths", "documents"):
            outputs[name] = _NpyWriter(tmp / f"{name}.npy", np.dtype(np.int64), (total,))
        tokens.open()
        batches = (
            _batch(job, window_offsets, begin, min(total, begin + per_batch))
            for begin in range(0, total, per_batch)
        )
        bar = _progress(tokens.count, quiet)
        _run_pipeline(batches, job, outputs, pad_value, per_batch, bar)
        for writer in outputs.values():
            writer.close()
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
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
        _outdir.commit(tmp, out, force)
    except BaseException as exc:
        for writer in outputs.values():
            writer.close()
        _outdir.discard(tmp, exc)
        raise
    finally:
        tokens.close()
    return meta


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
    src, out = Path(input_path), Path(output_dir)
    force = v.flag(force, "force")
    try:
        size = v.positive_int(size, "--size")
        step = _step(size, step, overlap)
        v.choice(tail, "--tail", TAILS)
    except (TypeError, ValueError) as exc:
        raise ChunkError(str(exc)) from None
    problem = _outdir.problem(out, (input_path, offsets_path), force)
    if problem:
        raise ChunkError(problem)
    tokens = _open_tokens(src, dtype)
    try:
        _check_pad_value(pad_value, tokens.dtype)  # TypeError unless an integer
    except ValueError:
        raise ChunkError(f"--pad-value {pad_value} does not fit {tokens.dtype}") from None
    if offsets_path is None:
        offsets = np.array([0, tokens.shape[0]], dtype=np.int64)
    else:
        try:
            offsets = _offsets(np.load(offsets_path, allow_pickle=False), tokens.shape[0])
        except EOFError:  # numpy.load of an empty file
            raise ChunkError(
                f"--offsets {offsets_path}: not a readable .npy file (it is empty); offsets "
                "must be a 1-D integer .npy file, from 0 to the token count"
            ) from None
        except (OSError, TypeError, ValueError) as exc:
            raise ChunkError(f"--offsets {offsets_path}: {exc}") from None
    return ChunkJob(src, out, size, step, tail, tokens, offsets)


class _Batch(NamedTuple):
    """Windows [begin, begin + len(layout)) of a run: their layout and the
    corpus tokens [first_token, end_token) they cover."""

    begin: int
    layout: _LayoutPart
    first_token: int
    end_token: int


def _batch(job: ChunkJob, window_offsets: np.ndarray, begin: int, end: int) -> _Batch:
    layout = _layout_part(job.doc_offsets, job.size, job.step, job.tail, window_offsets, begin, end)
    offsets = job.doc_offsets
    # windows lie in corpus order: the first starts first, the last ends last
    first_token = int(offsets[layout.documents[0]] + layout.starts[0])
    end_token = int(offsets[layout.documents[-1]] + layout.starts[-1] + layout.lengths[-1])
    return _Batch(begin, layout, first_token, end_token)


# Batches mapped ahead of and written behind the one being cut: the reads and
# the writes (a thread of positional writes, GIL released) overlap the kernel.
READ_AHEAD, WRITE_BEHIND = 2, 2


def _run_pipeline(
    batches: Iterator[_Batch],
    job: ChunkJob,
    outputs: dict[str, _NpyWriter],
    pad_value: int,
    per_batch: int,
    bar: Any,
) -> None:
    tokens, size = job.tokens, job.size
    # Windows are cut into a ring of buffers, each free again by the time it
    # comes round (at most WRITE_BEHIND writes are in flight): no batch pays
    # for the page faults of a new array.
    ring = [np.empty((per_batch, size), tokens.dtype) for _ in range(WRITE_BEHIND + 1)]

    def write(batch: _Batch, rows: np.ndarray) -> None:
        outputs["windows"].write(batch.begin, rows)
        outputs["starts"].write(batch.begin, batch.layout.starts)
        outputs["lengths"].write(batch.begin, batch.layout.lengths)
        outputs["documents"].write(batch.begin, batch.layout.documents)

    # Batches are mapped READ_AHEAD ahead of the one being cut: mapping is
    # cheap, and MADV_WILLNEED has the kernel read them in meanwhile.
    ahead: deque[tuple[_Batch, np.ndarray]] = deque()
    writes: deque[Future[None]] = deque()

    def map_ahead() -> None:
        while len(ahead) < READ_AHEAD:
            batch = next(batches, None)
            if batch is None:
                return
            ahead.append((batch, tokens.read(batch.first_token, batch.end_token)))

    with ThreadPoolExecutor(1) as writer:
        try:
            map_ahead()
            turn = 0
            while ahead:
                batch, mapped = ahead.popleft()
                map_ahead()
                layout = batch.layout
                rows = _cut(
                    v.kernel_array(mapped),
                    batch.first_token,
                    job.doc_offsets,
                    layout.starts,
                    layout.lengths,
                    layout.documents,
                    size,
                    pad_value,
                    ring[turn % len(ring)][: layout.starts.shape[0]],
                )
                del mapped  # its mapping goes with it
                writes.append(writer.submit(write, batch, rows))
                while len(writes) > WRITE_BEHIND:
                    writes.popleft().result()
                bar.update(max(0, batch.end_token - bar.n))  # each token cut at least once
                turn += 1
            while writes:
                writes.popleft().result()
            bar.update(max(0, tokens.count - bar.n))
        except BaseException:
            for f in writes:
                f.cancel()
            raise
        finally:
            bar.close()


class _NpyWriter:
    """A .npy file of known shape, filled row range by row range with positional
    writes (safe from several threads; the GIL is released while the kernel copies)."""

    def __init__(self, path: Path, dtype: np.dtype[Any], shape: tuple[int, ...]) -> None:
        with open(path, "wb") as f:
            header = {
                "descr": np.lib.format.dtype_to_descr(dtype),
                "fortran_order": False,
                "shape": shape,
            }
            np.lib.format.write_array_header_1_0(f, header)
            self.header = f.tell()
        self.row_bytes = dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64))
        self.fd = os.open(path, os.O_WRONLY)
        os.truncate(self.fd, self.header + self.row_bytes * shape[0])

    def write(self, row: int, data: np.ndarray) -> None:
        view = np.ascontiguousarray(data).data.cast("B")
        pos, at = self.header + row * self.row_bytes, 0
        while at < len(view):
            at += os.pwrite(self.fd, view[at:], pos + at)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class _Quiet:
    n = 0

    def update(self, k: int) -> None:
        self.n += k

    def close(self) -> None:
        pass


def _progress(total: int, quiet: bool) -> Any:
    if quiet or not sys.stderr.isatty():
        return _Quiet()
    try:
        from tqdm import tqdm
    except ImportError:
        return _Quiet()
    return tqdm(total=total, unit="tok", unit_scale=True, desc="posembed chunk")

"""The `posembed chunk` pipeline: a token file on disk to windows on disk, in bounded memory."""

from __future__ import annotations

import json
import mmap
import os
import shutil
import sys
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from posembed import _validate as v
from posembed._windows import TAILS, Windows, _offsets, _step, window_counts, windows

# Output bytes built per kernel call: large enough to keep the threads busy,
# small enough that the command needs about 2 x this much memory, whatever the file.
BATCH_BYTES = 16 << 20


class ChunkError(ValueError):
    """A problem with the command's input or parameters: reported in one line.

    A ValueError, so that callers of :func:`chunk_file` can catch it as one.
    """


class _TokenFile:
    """Tokens on disk, mapped a slice at a time (so memory holds a few batches, not the file)."""

    def __init__(self, path: Path, dtype: np.dtype[Any], offset: int, count: int) -> None:
        self.path, self.dtype, self.offset, self.count = path, dtype, offset, count
        self.fd = -1

    @property
    def shape(self) -> tuple[int]:
        return (self.count,)

    def open(self) -> None:
        self.fd = os.open(self.path, os.O_RDONLY)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def read(self, start: int, stop: int) -> np.ndarray:
        """Tokens [start, stop), memory-mapped (the page cache's own pages, not
        a copy) and asked for ahead of use; the mapping goes when the array does.
        As with any memory map, the file must not shrink while it is read."""
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


def _open_tokens(path: Path, dtype: str | None) -> _TokenFile:
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
        result = _TokenFile(path, mapped.dtype, header, int(mapped.shape[0]))
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
        nbytes = path.stat().st_size
        if nbytes % dt.itemsize:
            raise ChunkError(
                f"{path}: {nbytes} bytes is not a whole number of {dt} tokens "
                f"({dt.itemsize} bytes each)"
            )
        return _TokenFile(path, dt, 0, nbytes // dt.itemsize)


def _pieces(counts: np.ndarray, per_batch: int) -> Iterator[tuple[int, int, int, int]]:
    """(first document, end document, first window in the first document, windows)
    pieces of at most `per_batch` windows; a document with more is cut into
    window ranges."""
    ndocs = len(counts)
    d = 0
    while d < ndocs:
        if counts[d] > per_batch:
            # The last part keeps at least two windows: with tail="shift" its
            # last window starts before the part's pad start.
            total, k0 = int(counts[d]), 0
            while k0 < total:
                take = min(per_batch, total - k0)
                if total - k0 - take == 1:
                    take += 1
                yield d, d + 1, k0, take
                k0 += take
            d += 1
            continue
        e, total = d, 0
        while e < ndocs and counts[e] <= per_batch and total + counts[e] <= per_batch:
            total += int(counts[e])
            e += 1
        yield d, e, 0, total
        d = e


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
    (written to a temporary folder, then renamed).

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
        Replace ``output_dir`` if it exists.
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
        without ``force``; a missing, empty or unreadable ``.npy`` input, one
        that is not 1-D integers in native byte order, a raw file without ``dtype`` (or not a
        whole number of its tokens), ``dtype`` with a ``.npy`` file; a
        ``pad_value`` that does not fit; empty, unreadable or invalid offsets;
        an input that shrinks while it is read. A ChunkError is a ValueError.
    TypeError
        A ``pad_value`` that is not an integer; a ``force`` or ``quiet`` that
        is not a bool.
    OSError
        Writing the outputs fails (the temporary folder is removed).
    """
    quiet = v.flag(quiet, "quiet")
    src, out, n, s, tokens, offsets = _prepare(
        input_path, output_dir, size, step, overlap, tail, dtype, offsets_path, pad_value, force
    )
    counts = window_counts(np.diff(offsets), n, s, tail)
    first = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    total = int(first[-1])
    per_batch = max(1, BATCH_BYTES // (n * tokens.dtype.itemsize))

    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    outputs: dict[str, _NpyWriter] = {}
    try:
        outputs["windows"] = _NpyWriter(tmp / "windows.npy", tokens.dtype, (total, n))
        for name in ("starts", "lengths", "documents"):
            outputs[name] = _NpyWriter(tmp / f"{name}.npy", np.dtype(np.int64), (total,))
        tokens.open()
        plans = (
            _plan(piece, counts, offsets, first, n, s, tail) for piece in _pieces(counts, per_batch)
        )
        bar = _progress(tokens.count, quiet)
        _run_pipeline(plans, tokens, outputs, n, s, pad_value, per_batch, bar)
        for writer in outputs.values():
            writer.close()
        meta = {
            "input": str(src),
            "tokens": int(tokens.shape[0]),
            "documents": len(counts),
            "windows": total,
            "size": n,
            "step": s,
            "tail": tail,
            "dtype": tokens.dtype.name,
            "pad_value": pad_value,
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        tmp.rename(out)
    except BaseException:
        for writer in outputs.values():
            writer.close()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        tokens.close()
    return meta


def _prepare(
    input_path: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    size: int,
    step: int | None,
    overlap: int | None,
    tail: str,
    dtype: str | None,
    offsets_path: str | os.PathLike[str] | None,
    pad_value: int,
    force: bool,
) -> tuple[Path, Path, int, int, _TokenFile, np.ndarray]:
    """The checks of chunk_file (and of posembed.dask.chunk_parts): the paths,
    size, step, the token file (opened lazily) and the document offsets."""
    src, out = Path(input_path), Path(output_dir)
    force = v.flag(force, "force")
    try:
        n = v.positive_int(size, "--size")
        s = _step(n, step, overlap)
        v.choice(tail, "--tail", TAILS)
    except (TypeError, ValueError) as exc:
        raise ChunkError(str(exc)) from None
    if out.exists() and not force:
        raise ChunkError(f"{out} exists; pass --force to replace it")
    tokens = _open_tokens(src, dtype)
    info = np.iinfo(tokens.dtype)
    if not info.min <= pad_value <= info.max:
        raise ChunkError(f"--pad-value {pad_value} does not fit {tokens.dtype}")
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
    return src, out, n, s, tokens, offsets


@dataclass(frozen=True)
class _Plan:
    """One batch: tokens [lo, hi) cut with these windows() arguments, written
    from output row w0; document and start numbers shift by d and k0 * step."""

    lo: int
    hi: int
    tail: str
    offsets: np.ndarray | None
    w0: int
    d: int
    k0: int
    count: int  # windows in this batch
    done: int  # input tokens fully handled once this batch is written


def _plan(
    piece: tuple[int, int, int, int],
    counts: np.ndarray,
    offsets: np.ndarray,
    first: np.ndarray,
    size: int,
    step: int,
    tail: str,
) -> _Plan | None:
    d, e, k0, count = piece
    if count == 0:
        return None
    lo = int(offsets[d]) + k0 * step
    w0 = int(first[d]) + k0
    if e == d + 1 and k0 + count < counts[d]:  # a middle part of one long document
        hi = lo + (count - 1) * step + size
        return _Plan(lo, hi, "pad", None, w0, d, k0, count, lo + count * step)
    offs = offsets[d : e + 1] - lo if k0 == 0 else None
    return _Plan(lo, int(offsets[e]), tail, offs, w0, d, k0, count, int(offsets[e]))


# Batches mapped ahead of and written behind the one being cut: the reads and
# the writes (a thread of positional writes, GIL released) overlap the kernel.
READ_AHEAD, WRITE_BEHIND = 2, 2


def _run_pipeline(
    plans: Iterator[_Plan | None],
    tokens: _TokenFile,
    outputs: dict[str, _NpyWriter],
    size: int,
    step: int,
    pad_value: int,
    per_batch: int,
    bar: Any,
) -> None:
    # Windows are cut into a ring of buffers, each free again by the time it
    # comes round (at most WRITE_BEHIND writes are in flight): no batch pays
    # for the page faults of a new array.
    # (_pieces may give a batch one window more than per_batch.)
    ring = [np.empty((per_batch + 1, size), tokens.dtype) for _ in range(WRITE_BEHIND + 1)]

    def write(plan: _Plan, part: Windows) -> None:
        outputs["windows"].write(plan.w0, part.tokens)
        outputs["starts"].write(plan.w0, part.starts + (plan.k0 * step))
        outputs["lengths"].write(plan.w0, part.lengths)
        outputs["documents"].write(plan.w0, part.documents + plan.d)

    # Batches are mapped READ_AHEAD ahead of the one being cut: mapping is
    # cheap, and MADV_WILLNEED has the kernel read them in meanwhile.
    todo = (p for p in plans if p is not None)
    ahead: deque[tuple[_Plan, np.ndarray]] = deque()
    writes: deque[Future[None]] = deque()

    def map_ahead() -> None:
        while len(ahead) < READ_AHEAD:
            plan = next(todo, None)
            if plan is None:
                return
            ahead.append((plan, tokens.read(plan.lo, plan.hi)))

    with ThreadPoolExecutor(1) as writer:
        try:
            map_ahead()
            turn = 0
            while ahead:
                plan, batch = ahead.popleft()
                map_ahead()
                part = windows(
                    batch,
                    size,
                    step=step,
                    tail=plan.tail,
                    pad_value=pad_value,
                    offsets=plan.offsets,
                    out=ring[turn % len(ring)][: plan.count],
                )
                del batch  # its mapping goes with it
                writes.append(writer.submit(write, plan, part))
                while len(writes) > WRITE_BEHIND:
                    writes.popleft().result()
                bar.update(max(0, plan.done - bar.n))
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

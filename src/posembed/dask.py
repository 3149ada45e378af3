"""Windows and stitch over Dask arrays: corpora larger than one machine.

``posembed.dask.windows`` cuts a Dask array of tokens (1-D, any chunking), or
a corpus given as tokens plus document offsets, into the same windows as
:func:`posembed.windows` on the whole input, byte for byte, windows that
straddle chunk boundaries included; :func:`stitch` takes per-window values
back to per-token values as :func:`posembed.stitch` does. The work inside each
block is posembed's own kernels; Dask schedules the blocks (threads,
processes, or a ``distributed`` cluster) and retries them when a worker dies.

How the blocks are cut: the window layout (starts, lengths, documents) is
computed up front from the document lengths alone, one int64 triple per
window. Each token chunk then yields the windows that *start* in it; a window
may run up to ``size - 1`` tokens past its chunk's end, so every chunk reads a
right halo of ``size - 1`` tokens from the chunks after it, through Dask's
overlap machinery (``dask.array.overlap.overlap``, chunks smaller than the halo
first merged by ``ensure_minimum_chunksize``). For ``stitch``, each token
chunk takes the windows that hold any of its tokens, at most
``ceil((size - 1) / step)`` windows before its first own window.

Needs the ``dask`` extra: ``pip install "posembed[dask]"``.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

try:
    import dask
    import dask.array as da
    from dask.array.overlap import ensure_minimum_chunksize
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'posembed.dask needs Dask: pip install "posembed[dask]" (dask[array] and distributed)'
    ) from exc

from posembed import _validate as v
from posembed._gather import gather
from posembed._windows import (
    REDUCES,
    TAILS,
    Windows,
    _check_pad_value,
    _offsets,
    _step,
    _stitch_types,
    window_counts,
)
from posembed._windows import stitch as _stitch

__all__ = [
    "DaskWindows",
    "PartsView",
    "chunk_parts",
    "embed",
    "layout",
    "read_parts",
    "stitch",
    "windows",
]


def layout(
    doc_offsets: Any, size: int, step: int, tail: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The windows :func:`posembed.windows` makes over documents, without their tokens.

    Parameters
    ----------
    doc_offsets : array_like of int, shape (D + 1,)
        Document boundaries, from 0 to the token count, never decreasing.
    size, step : int
        Window size and step (``1 <= step <= size``).
    tail : {"pad", "drop", "shift"}
        As for :func:`posembed.windows`.

    Returns
    -------
    starts, lengths, documents : ndarray of int64, shape (n,)
        Each window's start within its document, its real tokens and its
        document, in :func:`posembed.windows`' order.
    """
    offsets = np.asarray(doc_offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    counts = window_counts(lengths, size, step, tail)
    documents = np.repeat(np.arange(lengths.size, dtype=np.int64), counts)
    first = np.concatenate([[0], np.cumsum(counts)])[:-1]
    k = np.arange(documents.size, dtype=np.int64) - first[documents]
    n = lengths[documents]
    starts = k * step
    if tail == "shift":  # the last window of a document at least size long ends at its end
        last = (k == counts[documents] - 1) & (n >= size)
        starts = np.where(last, n - size, starts)
    return starts, np.minimum(size, n - starts), documents


@dataclass(frozen=True)
class DaskWindows:
    """:class:`posembed.Windows` with its tokens as a Dask array.

    ``tokens`` is lazy, chunked along the windows (one chunk per token chunk:
    the windows that start in it); the layout arrays are NumPy, computed up
    front. :meth:`compute` gives the :class:`posembed.Windows` that
    :func:`posembed.windows` makes on the whole input.
    """

    tokens: Any  # dask.array.Array, shape (n, size)
    starts: np.ndarray
    lengths: np.ndarray
    documents: np.ndarray
    doc_offsets: np.ndarray
    size: int
    step: int
    tail: str
    token_chunks: tuple[int, ...]  # the token chunks the windows were cut from

    def __len__(self) -> int:
        return int(self.starts.shape[0])

    def compute(self, **kwargs: Any) -> Windows:
        """The windows, computed (``kwargs`` go to ``dask.compute``).

        Returns
        -------
        Windows
            Equal, field for field and byte for byte, to :func:`posembed.windows`
            on the whole input.
        """
        (tokens,) = dask.compute(self.tokens, **kwargs)
        return Windows(
            np.asarray(tokens),
            self.starts,
            self.lengths,
            self.documents,
            self.doc_offsets,
            self.size,
            self.step,
            self.tail,
        )


def _global_starts(
    doc_offsets: np.ndarray, starts: np.ndarray, documents: np.ndarray
) -> np.ndarray:
    """Each window's start in the flat token array (sorted: documents are in order)."""
    flat: np.ndarray = doc_offsets[:-1][documents] + starts
    return flat


def _window_block(
    block: np.ndarray, base: int, starts: np.ndarray, lengths: np.ndarray, size: int, pad: Any
) -> np.ndarray:
    """Rows of the windows starting in one chunk: ``block`` holds tokens from
    global position ``base`` on (the chunk and its right halo)."""
    block = block.astype(block.dtype.newbyteorder("="), copy=False)
    out = np.empty((starts.size, size), block.dtype)
    if starts.size == 0:
        return out
    local = starts - base
    full = lengths == size
    # every full window is a row of the block's sliding view: one gather
    if full.all():
        gather(np.lib.stride_tricks.sliding_window_view(block, size), local, out=out)
    elif full.any():
        out[full] = gather(np.lib.stride_tricks.sliding_window_view(block, size), local[full])
    for j in np.flatnonzero(~full):  # the short last window of a document (tail="pad")
        m = int(lengths[j])
        out[j, :m] = block[local[j] : local[j] + m]
        out[j, m:] = pad
    return out


def windows(
    tokens: Any,
    size: int,
    *,
    step: int | None = None,
    overlap: int | None = None,
    tail: str = "pad",
    pad_value: int = 0,
    offsets: Any = None,
) -> DaskWindows:
    """:func:`posembed.windows` over a Dask array of tokens.

    Parameters
    ----------
    tokens : dask.array.Array or array_like of int, shape (N,)
        1-D integer tokens, any chunking (a NumPy array is wrapped with Dask's
        default chunks). The windows keep its dtype (native byte order).
    size, step, overlap, tail, pad_value
        As for :func:`posembed.windows`.
    offsets : array_like of int, shape (D + 1,), optional
        Document boundaries (NumPy, or a Dask array, computed here: one entry
        per document); default one document.

    Returns
    -------
    DaskWindows
        ``tokens`` lazy (one chunk of windows per token chunk), the layout in
        NumPy; ``.compute()`` equals ``posembed.windows`` on the whole input.

    Raises
    ------
    TypeError
        Tokens that are not a 1-D integer array, a ``pad_value`` that is not an
        integer, offsets that are not integers.
    ValueError
        As for :func:`posembed.windows`: a bad ``size``, ``step``, ``overlap``
        or ``tail``, a ``pad_value`` that does not fit, offsets that do not run
        from 0 to N without decreasing.
    """
    t = tokens if isinstance(tokens, da.Array) else da.from_array(v.as_array(tokens, "tokens"))
    if t.ndim != 1:
        raise ValueError(f"tokens must be 1-D; got shape {t.shape}")
    if t.dtype.kind not in "iu":
        raise TypeError(f"tokens must be integers; got dtype {t.dtype}")
    if any(np.isnan(c) for c in t.chunks[0]):
        raise ValueError("tokens must have known chunk sizes (call .compute_chunk_sizes())")
    n = v.positive_int(size, "size")
    s = _step(n, step, overlap)
    v.choice(tail, "tail", TAILS)
    _check_pad_value(pad_value, t.dtype)
    if isinstance(offsets, da.Array):
        offsets = offsets.compute()
    o = _offsets(offsets, int(t.shape[0]))
    starts, lengths, documents = layout(o, n, s, tail)
    gstarts = _global_starts(o, starts, documents)
    native = t.dtype.newbyteorder("=")

    # chunks of at least the halo, then each with the size - 1 tokens after it
    core: tuple[int, ...]
    if t.shape[0] <= n - 1:  # shorter than one halo: a single block
        core = (int(t.shape[0]),)
    else:
        core = tuple(int(c) for c in ensure_minimum_chunksize(max(n - 1, 1), t.chunks[0]))
    t = t.rechunk((core,))
    if n > 1 and len(core) > 1:
        halo = da.overlap.overlap(t, depth={0: (0, n - 1)}, boundary="none")
    else:  # nothing to borrow: windows of size 1, or a single block
        halo = t
    bounds = np.concatenate([[0], np.cumsum(core)])
    cut = np.searchsorted(gstarts, bounds, side="left")
    blocks = []
    pad = np.array(pad_value, dtype=native)
    for c, part in enumerate(halo.to_delayed().ravel()):
        w0, w1 = int(cut[c]), int(cut[c + 1])
        rows = dask.delayed(_window_block, pure=True)(
            part, int(bounds[c]), gstarts[w0:w1], lengths[w0:w1], n, pad
        )
        blocks.append(da.from_delayed(rows, shape=(w1 - w0, n), dtype=native))
    rows_all = (
        da.concatenate(blocks, axis=0) if blocks else da.zeros((0, n), dtype=native, chunks=(0, n))
    )
    return DaskWindows(
        rows_all, starts, lengths, documents, o, n, s, tail, tuple(int(c) for c in core)
    )


def _stitch_block(
    values: np.ndarray,
    a: int,
    b: int,
    gstarts: np.ndarray,
    lengths: np.ndarray,
    documents: np.ndarray,
    doc_offsets: np.ndarray,
    size: int,
    step: int,
    tail: str,
    reduce: str,
    fill: Any,
) -> np.ndarray:
    """posembed.stitch for tokens [a, b), given every window holding any of
    them: the windows' tokens and documents clipped to the span they cover."""
    lo = min(a, int(gstarts[0])) if gstarts.size else a
    hi = max(b, int((gstarts + lengths).max())) if gstarts.size else b
    d0 = int(np.searchsorted(doc_offsets, lo, side="right")) - 1
    d1 = int(np.searchsorted(doc_offsets, hi, side="left"))
    offs = np.clip(doc_offsets[d0 : d1 + 1], lo, hi) - lo
    offs[0], offs[-1] = 0, hi - lo
    docs = documents - d0
    local = gstarts - lo - offs[docs]
    part = Windows(
        np.broadcast_to(np.zeros((), np.int8), (gstarts.size, size)),
        local,
        lengths,
        docs,
        offs,
        size,
        step,
        tail,
    )
    out: np.ndarray = _stitch(values, part, reduce=reduce, fill=fill)[a - lo : b - lo]
    return out


def stitch(values: Any, windows: DaskWindows, *, reduce: str = "mean", fill: Any = 0) -> Any:
    """:func:`posembed.stitch` over Dask: per-window values back to per-token values.

    Parameters
    ----------
    values : dask.array.Array or array_like, shape (n, size, ...)
        Aligned with ``windows.tokens`` (any chunking along the windows; the
        other axes are made one chunk).
    windows : DaskWindows
        From :func:`windows`.
    reduce, fill
        As for :func:`posembed.stitch`.

    Returns
    -------
    dask.array.Array, shape (N, ...)
        Chunked as the tokens were (after :func:`windows` merged chunks
        smaller than a window); computed, equal byte for byte to
        ``posembed.stitch`` of the computed values and windows.

    Raises
    ------
    TypeError
        ``windows`` that is not a :class:`DaskWindows`; and as for
        :func:`posembed.stitch`, raised when the blocks compute.
    ValueError
        An unknown ``reduce``; ``values`` whose leading shape is not
        (n, size).
    """
    if not isinstance(windows, DaskWindows):
        raise TypeError(
            f"windows must be a posembed.dask.DaskWindows; got {type(windows).__name__}"
        )
    v.choice(reduce, "reduce", REDUCES)
    vals = values if isinstance(values, da.Array) else da.from_array(v.as_array(values, "values"))
    lead = (len(windows), windows.size)
    if vals.shape[:2] != lead:
        raise ValueError(
            f"values must have leading shape (windows, size) = {lead}; got shape {vals.shape}"
        )
    vals = vals.rechunk({i: -1 for i in range(1, vals.ndim)})
    gstarts = _global_starts(windows.doc_offsets, windows.starts, windows.documents)
    gends = gstarts + windows.lengths
    bounds = np.concatenate([[0], np.cumsum(windows.token_chunks, dtype=np.int64)])
    _, result = _stitch_types(vals.dtype, reduce)
    blocks = []
    rest = vals.shape[2:]
    for c in range(bounds.size - 1):
        a, b = int(bounds[c]), int(bounds[c + 1])
        if b <= a:
            continue
        # the windows holding any token of [a, b): ends past a, starts before b
        w_lo = int(np.searchsorted(gends, a, side="right"))
        w_hi = int(np.searchsorted(gstarts, b, side="left"))
        w_lo = min(w_lo, w_hi)
        part = vals[w_lo:w_hi]
        block = dask.delayed(_stitch_block, pure=True)(
            part,
            a,
            b,
            gstarts[w_lo:w_hi],
            windows.lengths[w_lo:w_hi],
            windows.documents[w_lo:w_hi],
            windows.doc_offsets,
            windows.size,
            windows.step,
            windows.tail,
            reduce,
            fill,
        )
        blocks.append(da.from_delayed(block, shape=(b - a, *rest), dtype=result))
    if not blocks:
        return da.zeros((0, *rest), dtype=result)
    return da.concatenate(blocks, axis=0)


# ---------------------------------------------------------------- embed


def _embed_block(
    ids: np.ndarray,
    tokens: np.ndarray,
    pos: np.ndarray,
    positions: np.ndarray | None,
    offset: int,
    dropout: float,
    seed: int,
    first_row: int,
) -> np.ndarray:
    from posembed._embed import _embed

    return _embed(tokens, ids, pos, positions, offset, dropout, seed, None, first_row)


def embed(
    token_table: Any,
    token_ids: Any,
    pos_table: Any,
    *,
    positions: Any = None,
    offset: int = 0,
    dropout: float = 0.0,
    seed: int | None = None,
) -> Any:
    """:func:`posembed.embed` over a Dask array of token ids, block by block.

    Each block gets the dropout mask the whole batch would give its rows (the
    mask is counter-based), so the result equals :func:`posembed.embed` on the
    whole input, byte for byte, for any chunking.

    Parameters
    ----------
    token_table, pos_table : array_like, shape (V, d) and (L, d)
        As for :func:`posembed.embed`; sent once to the workers, shared by the
        blocks.
    token_ids : dask.array.Array or array_like of int, shape (T,) or (B, T)
        Chunked along the batch (a (B, T) array's rows are whole sequences:
        its T axis is made one chunk) or, for (T,), along the tokens.
    positions : array_like of int, optional
        As for :func:`posembed.embed` (NumPy, broadcast to the ids' shape).
    offset : int
        As for :func:`posembed.embed`.
    dropout, seed
        As for :func:`posembed.embed`; a seed of None is drawn here, once
        (:func:`posembed.last_seed` tells which).

    Returns
    -------
    dask.array.Array, shape ``token_ids.shape + (d,)``
        The tables' dtype, chunked as the ids.

    Raises
    ------
    TypeError, ValueError
        As for :func:`posembed.embed`, for the tables, ``dropout``, ``offset``,
        ``seed`` and the ids' dtype and rank, raised here.
    IndexError
        An id or position out of range: raised when the block holding it computes.
    """
    from posembed._embed import _seed

    tt, _ = v.float_table(token_table, "token_table")
    pt, _ = v.float_table(pos_table, "pos_table")
    ids = (
        token_ids
        if isinstance(token_ids, da.Array)
        else da.from_array(v.as_array(token_ids, "token_ids"))
    )
    if ids.dtype.kind not in "iu":
        raise TypeError(f"token_ids must be integers; got dtype {ids.dtype}")
    if ids.ndim not in (1, 2):
        raise ValueError(f"token_ids must be (T,) or (B, T); got shape {ids.shape}")
    rate = v.probability(dropout, "dropout")
    s = _seed(seed) if rate > 0 else 0
    t = int(ids.shape[-1])
    # the tables' and arguments' own checks, on an empty batch of the same kind
    from posembed._embed import embed as _check

    spread: np.ndarray | None = None
    if positions is not None:
        given = np.asarray(positions)
        try:
            spread = np.broadcast_to(given, ids.shape)
        except ValueError:
            raise ValueError(
                f"positions of shape {given.shape} do not broadcast to token_ids' shape {ids.shape}"
            ) from None
        _check(tt, np.zeros((0,), np.int64), pt, positions=np.zeros(0, np.int64), offset=offset)
    else:
        _check(tt, np.zeros((0,), np.int64), pt, offset=offset)
        if t and v.non_negative_int(offset, "offset") + t > pt.shape[0]:
            raise IndexError(
                f"positions {offset}..{offset + t - 1} (offset {offset} + arange({t})) go past "
                f"pos_table's {pt.shape[0]} rows"
            )
    if ids.ndim == 2:
        ids = ids.rechunk({1: -1})
    tok_d, pos_d = dask.delayed(tt), dask.delayed(pt)
    d = int(tt.shape[1])
    blocks = []
    first = 0
    sequences = ids.ndim == 2  # blocks of whole sequences; else pieces of one sequence
    for k, size in enumerate(ids.chunks[0]):
        part = ids.blocks[k]
        where = None if spread is None else np.ascontiguousarray(spread[first : first + size])
        # a piece of one sequence starts its default positions further on
        shift = offset + first if not sequences and spread is None else offset
        row0 = first * t if sequences else first  # the mask's counter: rows before the block
        block = dask.delayed(_embed_block, pure=True)(
            part, tok_d, pos_d, where, shift, rate, s, row0
        )
        blocks.append(da.from_delayed(block, shape=(*part.shape, d), dtype=tt.dtype))
        first += size
    if not blocks:
        return da.zeros((*ids.shape, d), dtype=tt.dtype)
    return da.concatenate(blocks, axis=0)


# ---------------------------------------------------------------- posembed chunk --dask

INDEX_VERSION = 1


def _write_part(
    src: str,
    dtype: str,
    header: int,
    count: int,
    a: int,
    b: int,
    gstarts: np.ndarray,
    lengths: np.ndarray,
    size: int,
    pad_value: int,
    path: str,
) -> int:
    """On a worker: the windows that start in tokens [a, b) of the token file,
    written to ``path`` (a .npy file, appearing whole: a retried task, after a
    worker died, writes it again from scratch). Returns the windows written."""
    from posembed._chunk import _TokenFile

    tokens = _TokenFile(Path(src), np.dtype(dtype), header, count)
    tokens.open()
    try:
        block = tokens.read(a, min(count, b + size - 1))
        rows = _window_block(block, a, gstarts, lengths, size, np.array(pad_value, block.dtype))
    finally:
        tokens.close()
    partial = f"{path}.partial-{os.getpid()}-{uuid.uuid4().hex}"
    with open(partial, "wb") as f:
        np.save(f, rows, allow_pickle=False)
    os.replace(partial, path)
    return int(rows.shape[0])


def chunk_parts(
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
    part_tokens: int = 1 << 26,
    scheduler: Any = None,
    force: bool = False,
) -> dict[str, Any]:
    """``posembed chunk`` on Dask: one output part per partition of the tokens.

    The token file is cut into partitions of ``part_tokens`` tokens; one task
    per partition memory-maps the file, cuts the windows that start in its
    partition (reading up to ``size - 1`` tokens past it) and writes them to
    ``output_dir/parts/part-NNNNN.npy``. The small arrays (starts, lengths,
    documents) and ``index.json`` (each part's file, windows and tokens) are
    written here. Workers must see ``input_path`` and ``output_dir`` at the
    same paths (a shared file system). Read the result with
    :func:`read_parts`.

    Parameters
    ----------
    input_path, output_dir, size, step, overlap, tail, dtype, offsets_path, pad_value, force
        As for :func:`posembed.chunk_file`.
    part_tokens : int
        Tokens per partition (>= 1); the parts hold the windows starting in
        each. Default 2^26.
    scheduler : str or distributed.Client or None
        A scheduler address (``"tcp://host:8786"``), a ``Client``, or None
        for Dask's current default (a running client, else local threads).

    Returns
    -------
    dict of str to Any
        What meta.json holds (as :func:`posembed.chunk_file`), plus ``parts``.

    Raises
    ------
    ChunkError
        As for :func:`posembed.chunk_file` (a ValueError); a bad
        ``part_tokens``.
    OSError
        Writing the outputs fails (the temporary folder is removed).
    """
    from posembed._chunk import ChunkError, _prepare

    src, out, n, s, tokens, offsets = _prepare(
        input_path, output_dir, size, step, overlap, tail, dtype, offsets_path, pad_value, force
    )
    try:
        per_part = v.positive_int(part_tokens, "part_tokens")
    except (TypeError, ValueError) as exc:
        raise ChunkError(str(exc)) from None
    starts, lengths, documents = layout(offsets, n, s, tail)
    gstarts = _global_starts(offsets, starts, documents)
    total = tokens.count
    bounds = np.append(np.arange(0, total, per_part, dtype=np.int64), total)
    cut = np.searchsorted(gstarts, bounds, side="left")
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "parts").mkdir(parents=True)
    try:
        tasks: list[Any] = []
        parts: list[dict[str, Any]] = []
        for c in range(bounds.size - 1):
            w0, w1 = int(cut[c]), int(cut[c + 1])
            name = f"part-{c:05d}.npy"
            parts.append(
                {
                    "file": f"parts/{name}",
                    "windows": [w0, w1],
                    "tokens": [int(bounds[c]), int(bounds[c + 1])],
                }
            )
            tasks.append(
                dask.delayed(_write_part, pure=False)(
                    str(src.resolve()),
                    tokens.dtype.str,
                    tokens.offset,
                    total,
                    int(bounds[c]),
                    int(bounds[c + 1]),
                    gstarts[w0:w1],
                    lengths[w0:w1],
                    n,
                    int(pad_value),
                    str((tmp / "parts" / name).resolve()),
                )
            )
        written = _compute(tasks, scheduler)
        for part, count in zip(parts, written, strict=True):
            want = part["windows"][1] - part["windows"][0]
            if count != want:  # a part lost on the way: never leave a short output
                raise OSError(f"{part['file']}: {count} windows written, {want} expected")
        for name, arr in (("starts", starts), ("lengths", lengths), ("documents", documents)):
            np.save(tmp / f"{name}.npy", arr)
        np.save(tmp / "doc_offsets.npy", offsets)
        meta = {
            "input": str(src),
            "tokens": int(total),
            "documents": int(offsets.size - 1),
            "windows": int(starts.size),
            "size": n,
            "step": s,
            "tail": tail,
            "dtype": tokens.dtype.name,
            "pad_value": int(pad_value),
            "parts": len(parts),
        }
        index = {
            "version": INDEX_VERSION,
            "dtype": np.dtype(tokens.dtype).str,
            "size": n,
            "parts": parts,
        }
        (tmp / "index.json").write_text(json.dumps(index, indent=1) + "\n")
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return meta


def _compute(tasks: list[Any], scheduler: Any) -> list[int]:
    if isinstance(scheduler, str):
        import distributed

        with distributed.Client(scheduler) as client:
            return list(dask.compute(*tasks, scheduler=client))
    if scheduler is None:
        return list(dask.compute(*tasks))
    return list(dask.compute(*tasks, scheduler=scheduler))


class PartsView:
    """The windows of a parted output as one read-only array, rows mapped to
    the parts' memory maps (no part is read until its rows are).

    Indexing with an int or a slice inside one part gives that part's
    memory-mapped view; other slices and integer arrays gather the rows
    (a copy). ``numpy.asarray(view)`` reads everything.
    """

    def __init__(self, parts: list[np.ndarray], size: int, dtype: np.dtype[Any]) -> None:
        self.parts = parts
        self._first = np.concatenate([[0], np.cumsum([p.shape[0] for p in parts])]).astype(np.int64)
        self.dtype = np.dtype(dtype)
        self.shape = (int(self._first[-1]), size)
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"PartsView(shape={self.shape}, dtype={self.dtype}, parts={len(self.parts)})"

    def _row(self, i: int) -> tuple[int, int]:
        if not -self.shape[0] <= i < self.shape[0]:
            raise IndexError(f"row {i} is out of range for {self.shape[0]} windows")
        i %= max(self.shape[0], 1)
        k = int(np.searchsorted(self._first, i, side="right")) - 1
        return k, i - int(self._first[k])

    def __getitem__(self, key: Any) -> Any:
        rest: tuple[Any, ...] = ()
        if isinstance(key, tuple):
            key, rest = key[0], key[1:]
        if isinstance(key, (int, np.integer)):
            k, j = self._row(int(key))
            return self.parts[k][(j, *rest)]
        if isinstance(key, slice):
            lo, hi, st = key.indices(self.shape[0])
            if st == 1 and hi > lo:
                k, j = self._row(lo)
                if hi - lo <= self.parts[k].shape[0] - j:  # inside one part: its view
                    return self.parts[k][(slice(j, j + hi - lo), *rest)]
            rows = np.arange(lo, hi, st, dtype=np.int64)
        else:
            rows = np.asarray(key)
            if rows.dtype.kind not in "iu":
                raise TypeError(f"windows are indexed by ints, slices or int arrays; got {key!r}")
            rows = rows.astype(np.int64)
        flat_rows = rows.ravel()
        n = self.shape[0]
        bad = (flat_rows < -n) | (flat_rows >= n)
        if bad.any():
            raise IndexError(f"row {flat_rows[bad][0]} is out of range for {n} windows")
        flat_rows = flat_rows % max(n, 1)
        out = np.empty((*rows.shape, self.shape[1]), self.dtype)
        flat = out.reshape(-1, self.shape[1])
        part_of = np.searchsorted(self._first, flat_rows, side="right") - 1
        for k in np.unique(part_of):  # one gather per part the rows fall in
            mine = part_of == k
            flat[mine] = gather(self.parts[k], flat_rows[mine] - self._first[k])
        return out[(Ellipsis, *rest)] if rest else out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = np.concatenate(self.parts) if self.parts else np.empty(self.shape, self.dtype)
        return whole.astype(dtype, copy=False) if dtype is not None else whole

    def to_dask(self) -> Any:
        """The same rows as a Dask array, one chunk per part."""
        if not self.parts:
            return da.zeros(self.shape, dtype=self.dtype)
        return da.concatenate([da.from_array(p, chunks=p.shape) for p in self.parts])


def read_parts(output_dir: str | os.PathLike[str]) -> Windows:
    """The windows ``chunk_parts`` (``posembed chunk --dask``) wrote, memory-mapped.

    Parameters
    ----------
    output_dir : path
        The folder ``chunk_parts`` wrote.

    Returns
    -------
    Windows
        Its ``tokens`` a :class:`PartsView` over the parts (read only when
        indexed), the other arrays memory-mapped: equal to
        :func:`posembed.windows` on the whole input once read.

    Raises
    ------
    ValueError
        A folder without a readable ``index.json`` of this version, or parts
        that do not match it.
    """
    folder = Path(output_dir)
    try:
        index = json.loads((folder / "index.json").read_text())
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{folder}: not a parted chunk output ({exc})") from None
    if index.get("version") != INDEX_VERSION:
        raise ValueError(f"{folder}: index.json version {index.get('version')!r} is not 1")
    parts = []
    expected = 0
    for part in index["parts"]:
        arr = np.load(folder / part["file"], mmap_mode="r", allow_pickle=False)
        w0, w1 = part["windows"]
        if w0 != expected or arr.shape != (w1 - w0, index["size"]):
            raise ValueError(f"{folder}: {part['file']} does not match index.json")
        expected = w1
        parts.append(arr)
    view = PartsView(parts, int(index["size"]), np.dtype(index["dtype"]))

    def load(name: str) -> np.ndarray:
        arr: np.ndarray = np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False)
        return arr

    return Windows(
        view,  # type: ignore[arg-type]
        load("starts"),
        load("lengths"),
        load("documents"),
        load("doc_offsets"),
        int(meta["size"]),
        int(meta["step"]),
        str(meta["tail"]),
    )

"""Windows, stitch and embed over Dask arrays, block by block.

:func:`windows` cuts a Dask array of tokens (1-D, any chunking), or a corpus
given as tokens plus document offsets, into the same windows as
:func:`posembed.windows` on the whole input, byte for byte, windows that
straddle chunk boundaries included; :func:`stitch` takes per-window values
back to per-token values as :func:`posembed.stitch` does; :func:`embed` is
:func:`posembed.embed` with each block given the dropout mask the whole batch
gives its rows. The work inside each block is posembed's own kernels; Dask
schedules the blocks (threads, processes, or a ``distributed`` cluster) and
retries them when a worker dies.

How the blocks are cut: the window layout (:func:`posembed.window_layout`:
starts, lengths, documents, one int64 triple per window) is computed up front
from the document lengths alone, and goes into the graph once. Each token
chunk then yields the windows that *start* in it, cut by
:meth:`posembed.WindowLayout.cut`; a window may run up to ``size - 1`` tokens
past its chunk's end, so every chunk reads a right halo of ``size - 1`` tokens
from the chunks after it, through Dask's overlap machinery
(``dask.array.overlap.overlap``, chunks smaller than the halo first merged by
``ensure_minimum_chunksize``). For :func:`stitch`, each token chunk takes the
windows that hold any of its tokens, at most ``ceil((size - 1) / step)``
windows before its first own window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.array.overlap import ensure_minimum_chunksize

import posembed
from posembed.kernels import _arrow


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

    def compute(self, **kwargs: Any) -> posembed.Windows:
        """The windows, computed (``kwargs`` go to ``dask.compute``).

        Returns
        -------
        Windows
            Equal, field for field and byte for byte, to :func:`posembed.windows`
            on the whole input.
        """
        (tokens,) = dask.compute(self.tokens, **kwargs)
        return posembed.Windows(
            np.asarray(tokens),
            self.starts,
            self.lengths,
            self.documents,
            self.doc_offsets,
            self.size,
            self.step,
            self.tail,
        )


def _as_dask(obj: Any) -> Any:
    """A Dask array as it is; anything else read by NumPy, in Dask's default chunks."""
    return obj if isinstance(obj, da.Array) else da.from_array(np.asarray(obj))


def _corpus_starts(
    doc_offsets: np.ndarray, starts: np.ndarray, documents: np.ndarray
) -> np.ndarray:
    """Each window's start in the flat token array (sorted: documents are in order)."""
    flat: np.ndarray = doc_offsets[:-1][documents] + starts
    return flat


def _window_block(
    block: np.ndarray,
    layout: posembed.WindowLayout,
    first: int,
    end: int,
    token_start: int,
    pad_value: int,
) -> np.ndarray:
    """Rows of windows [first, end), those that start in one chunk: ``block``
    holds the corpus's tokens from ``token_start`` on (the chunk and its right halo)."""
    return layout.cut(
        block, windows=slice(first, end), token_start=token_start, pad_value=pad_value
    )


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
    tokens : dask.array.Array or array_like of int, shape (N,), or an Arrow list column
        1-D integer tokens, any chunking (a NumPy array is wrapped with Dask's
        default chunks). The windows keep its dtype (native byte order). An
        Arrow list column, as :func:`posembed.windows` takes it, is read here
        (its offsets are the documents) and its values are wrapped with
        Dask's default chunks.
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
    ImportError
        As for :func:`posembed.windows`: an Arrow column without pyarrow.
    TypeError
        Tokens that are not a 1-D integer array (or an Arrow list column of
        integers), a ``pad_value`` that is not an integer, offsets that are
        not integers.
    ValueError
        As for :func:`posembed.windows`: a bad ``size``, ``step``, ``overlap``
        or ``tail``, a ``pad_value`` that does not fit, offsets that do not run
        from 0 to N without decreasing; an Arrow list column with a null list
        or token, or given with ``offsets``.
    """
    column = _arrow.corpus_column(tokens, offsets)
    if column is not None:
        # the conversion runs here, in the driver: the offsets become the
        # layout, and the values (a view of a single chunk's buffer, else one
        # joined copy) are cut in Dask's default chunks like any NumPy array
        tokens, offsets = column
    token_array = _as_dask(tokens)
    if token_array.ndim != 1:
        raise ValueError(f"tokens must be 1-D; got shape {token_array.shape}")
    if token_array.dtype.kind not in "iu":
        raise TypeError(f"tokens must be integers; got dtype {token_array.dtype}")
    if any(np.isnan(c) for c in token_array.chunks[0]):
        raise ValueError("tokens must have known chunk sizes (call .compute_chunk_sizes())")
    # posembed.windows' own checks of size, step, overlap, tail and pad_value, on no tokens
    checked = posembed.windows(
        np.empty(0, token_array.dtype),
        size,
        step=step,
        overlap=overlap,
        tail=tail,
        pad_value=pad_value,
    )
    size = checked.size
    count = int(token_array.shape[0])
    if isinstance(offsets, da.Array):
        offsets = offsets.compute()
    # (an int given as offsets is a 0-d array here, refused as offsets, not taken as a count)
    layout = posembed.window_layout(
        count if offsets is None else np.asarray(offsets), size, step=checked.step, tail=tail
    )
    ends = layout.doc_offsets
    if ends[-1] != count:
        raise ValueError(
            f"offsets must start at 0 and end at len(tokens) = {count}; "
            f"got {ends[:1].tolist()}..{ends[-1:].tolist()}"
        )
    corpus_starts = _corpus_starts(layout.doc_offsets, layout.starts, layout.documents)
    native = token_array.dtype.newbyteorder("=")

    # chunks of at least the halo, then each with the size - 1 tokens after it
    core: tuple[int, ...]
    if count <= size - 1:  # shorter than one halo: a single block
        core = (count,)
    else:
        core = tuple(
            int(c) for c in ensure_minimum_chunksize(max(size - 1, 1), token_array.chunks[0])
        )
    token_array = token_array.rechunk((core,))
    if size > 1 and len(core) > 1:
        halo = da.overlap.overlap(token_array, depth={0: (0, size - 1)}, boundary="none")
    else:  # nothing to borrow: windows of size 1, or a single block
        halo = token_array
    bounds = np.concatenate([[0], np.cumsum(core)])
    cut = np.searchsorted(corpus_starts, bounds, side="left")
    shared = dask.delayed(layout, traverse=False)  # in the graph once, not once per block
    blocks = []
    for c, part in enumerate(halo.to_delayed().ravel()):
        first, end = int(cut[c]), int(cut[c + 1])
        rows = dask.delayed(_window_block, pure=True)(
            part, shared, first, end, int(bounds[c]), pad_value
        )
        blocks.append(da.from_delayed(rows, shape=(end - first, size), dtype=native))
    rows_all = (
        da.concatenate(blocks, axis=0)
        if blocks
        else da.zeros((0, size), dtype=native, chunks=(0, size))
    )
    return DaskWindows(
        rows_all,
        layout.starts,
        layout.lengths,
        layout.documents,
        layout.doc_offsets,
        size,
        layout.step,
        tail,
        core,
    )


def _stitch_block(
    values: np.ndarray,
    a: int,
    b: int,
    corpus_starts: np.ndarray,
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
    them: the windows' tokens and documents clipped to the span they cover.

    ``lengths``, ``documents`` and ``doc_offsets`` are views of the caller's
    arrays, which another thread may rewrite while this runs: everything
    below works on private copies, checked before they are used."""
    lengths = np.array(lengths, dtype=np.int64)
    documents = np.array(documents, dtype=np.int64)
    if lengths.size and not (lengths.min() >= 0 and lengths.max() <= size):
        raise _changed(f"a window length outside 0..{size}")
    lo = min(a, int(corpus_starts[0])) if corpus_starts.size else a
    hi = max(b, int((corpus_starts + lengths).max())) if corpus_starts.size else b
    if lo <= a - size or hi >= b + size:  # a window holding one of [a, b) lies within
        raise _changed(f"a window reaching outside tokens {a - size + 1}..{b + size - 2}")
    d0 = int(np.searchsorted(doc_offsets, lo, side="right")) - 1
    d1 = int(np.searchsorted(doc_offsets, hi, side="left"))
    if not 0 <= d0 < d1 < doc_offsets.size:
        raise _changed(f"no documents around tokens {lo}..{hi - 1}")
    offsets = np.clip(doc_offsets[d0 : d1 + 1], lo, hi) - lo  # a copy
    offsets[0], offsets[-1] = 0, hi - lo
    docs = documents - d0
    if docs.size and not (docs.min() >= 0 and docs.max() < offsets.size - 1):
        raise _changed(f"a window's document outside {d0}..{d1 - 1}")
    local = corpus_starts - lo - offsets[docs]
    part = posembed.Windows(
        np.broadcast_to(np.zeros((), np.int8), (corpus_starts.size, size)),
        local,
        lengths,
        docs,
        offsets,
        size,
        step,
        tail,
    )
    out: np.ndarray = posembed.stitch(values, part, reduce=reduce, fill=fill)[a - lo : b - lo]
    return out


def _changed(problem: str) -> ValueError:
    return ValueError(
        f"windows: window arrays do not describe these documents ({problem}; did they "
        "change after windows() returned?)"
    )


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
        :func:`posembed.stitch`: ``values`` not of a numeric dtype, a ``fill``
        that does not fit the result.
    ValueError
        An unknown ``reduce``; ``values`` whose leading shape is not
        (n, size).
    """
    if not isinstance(windows, DaskWindows):
        raise TypeError(
            f"windows must be a posembed.dask.DaskWindows; got {type(windows).__name__}"
        )
    vals = _as_dask(values)
    rest = vals.shape[2:]
    # posembed.stitch's own checks of reduce, the values' dtype and fill, on no
    # windows; and the dtype of its result
    no_windows = posembed.windows(np.empty(0, np.int8), windows.size)
    result = posembed.stitch(
        np.empty((0, windows.size, *rest), vals.dtype), no_windows, reduce=reduce, fill=fill
    ).dtype
    lead = (len(windows), windows.size)
    if vals.shape[:2] != lead:
        raise ValueError(
            f"values must have leading shape (windows, size) = {lead}; got shape {vals.shape}"
        )
    vals = vals.rechunk({i: -1 for i in range(1, vals.ndim)})
    corpus_starts = _corpus_starts(windows.doc_offsets, windows.starts, windows.documents)
    corpus_ends = corpus_starts + windows.lengths
    bounds = np.concatenate([[0], np.cumsum(windows.token_chunks, dtype=np.int64)])
    blocks = []
    for c in range(bounds.size - 1):
        a, b = int(bounds[c]), int(bounds[c + 1])
        if b <= a:
            continue
        # the windows holding any token of [a, b): ends past a, starts before b
        first = int(np.searchsorted(corpus_ends, a, side="right"))
        end = int(np.searchsorted(corpus_starts, b, side="left"))
        first = min(first, end)
        block = dask.delayed(_stitch_block, pure=True)(
            vals[first:end],
            a,
            b,
            corpus_starts[first:end],
            windows.lengths[first:end],
            windows.documents[first:end],
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


def _embed_block(
    ids: np.ndarray,
    token_table: Any,
    pos_table: Any,
    positions: np.ndarray | None,
    offset: int,
    dropout: float,
    seed: int | None,
    first_row: int,
) -> np.ndarray:
    return posembed.embed(
        token_table,
        ids,
        pos_table,
        positions=positions,
        offset=offset,
        dropout=dropout,
        seed=seed,
        first_row=first_row,
    )


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
    ids = _as_dask(token_ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"token_ids must be integers; got dtype {ids.dtype}")
    if ids.ndim not in (1, 2):
        raise ValueError(f"token_ids must be (T,) or (B, T); got shape {ids.shape}")
    # posembed.embed's own checks of the tables, offset, dropout and seed, on
    # no ids; with dropout it records the seed (drawn there, once, for None),
    # and every block uses that one
    checked = posembed.embed(
        token_table,
        np.zeros((0,), np.int64),
        pos_table,
        positions=None if positions is None else np.zeros(0, np.int64),
        offset=offset,
        dropout=dropout,
        seed=seed,
    )
    rate = float(dropout)
    drawn = posembed.last_seed() if rate > 0 else None
    length = int(ids.shape[-1])
    rows = int(np.shape(pos_table)[0])
    spread: np.ndarray | None = None
    if positions is not None:
        given = np.asarray(positions)
        try:
            spread = np.broadcast_to(given, ids.shape)
        except ValueError:
            raise ValueError(
                f"positions of shape {given.shape} do not broadcast to token_ids' shape {ids.shape}"
            ) from None
    elif length and int(offset) + length > rows:
        raise IndexError(
            f"positions {offset}..{offset + length - 1} (offset {offset} + arange({length})) go "
            f"past pos_table's {rows} rows"
        )
    if ids.ndim == 2:
        ids = ids.rechunk({1: -1})
    tables = dask.delayed(token_table, traverse=False), dask.delayed(pos_table, traverse=False)
    d = int(checked.shape[-1])
    blocks = []
    first = 0
    sequences = ids.ndim == 2  # blocks of whole sequences; else pieces of one sequence
    for k, rows_in_block in enumerate(ids.chunks[0]):
        part = ids.blocks[k]
        where = (
            None if spread is None else np.ascontiguousarray(spread[first : first + rows_in_block])
        )
        # a piece of one sequence starts its default positions further on
        shift = offset + first if not sequences and spread is None else offset
        first_row = first * length if sequences else first  # the mask's rows before the block
        block = dask.delayed(_embed_block, pure=True)(
            part, *tables, where, shift, rate, drawn, first_row
        )
        blocks.append(da.from_delayed(block, shape=(*part.shape, d), dtype=checked.dtype))
        first += rows_in_block
    if not blocks:
        return da.zeros((*ids.shape, d), dtype=checked.dtype)
    return da.concatenate(blocks, axis=0)

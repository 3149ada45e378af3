"""windows: overlapping chunks of length `size` over token streams and corpora."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from posembed import _core
from posembed import _validate as v

TAILS = _core.Tail.__members__
OWNER_RULES = _core.OwnerRule.__members__
# "first" and "center" take the slot that Windows.owner(rule) marks.
REDUCES = {
    **{name: _core.Reduce.__members__[name] for name in ("mean", "sum", "max")},
    **{rule: _core.Reduce.__members__["owned"] for rule in OWNER_RULES},
}


@dataclass(frozen=True)
class Windows:
    """The windows of a token stream or corpus, as :func:`windows` returns them.

    ``len(w)`` is the number of windows n.

    Attributes
    ----------
    tokens : ndarray, shape (n, size)
        The input's dtype; slots past ``lengths`` hold the pad value.
    starts : ndarray of int64, shape (n,)
        Start of each window within its document.
    lengths : ndarray of int64, shape (n,)
        Number of valid tokens in each window.
    documents : ndarray of int64, shape (n,)
        Index of each window's document (0 without offsets).
    doc_offsets : ndarray of int64, shape (documents + 1,)
        CSR offsets of the input (``[0, N]`` without offsets).
    size : int
        Window length.
    step : int
        Distance between window starts in a document.
    tail : {"pad", "shift", "drop"}
        How the last window of each document was placed.
    """

    tokens: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    documents: np.ndarray
    doc_offsets: np.ndarray
    size: int
    step: int
    tail: str

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def mask(self) -> np.ndarray:
        """ndarray of bool, shape (n, size): True for the slots that hold a token of the input."""
        mask: np.ndarray = np.arange(self.size)[None, :] < self.lengths[:, None]
        return mask

    def owner(self, rule: str = "first") -> np.ndarray:
        """For every input token in some window, exactly one slot that owns it.

        With ``tail="drop"`` uncovered tokens have no owner.

        Parameters
        ----------
        rule : {"first", "center"}
            ``"first"``: the earliest window containing the token; with
            overlapping windows every token but a document's first ``overlap``
            then has at least ``overlap`` tokens of left context (the HF
            perplexity guide's rule: score each token once). ``"center"``:
            BERT's max-context rule, the window maximising ``min(left, right
            context) + 0.01 * window length``, the earliest on ties.

        Returns
        -------
        ndarray of bool, shape (n, size)
            True at the owning slot of each token.

        Raises
        ------
        TypeError
            (For a ``Windows`` built by hand) ``doc_offsets``, ``starts``,
            ``lengths`` or ``documents`` that is not a 1-D integer array, or a
            ``size`` that is not an integer.
        ValueError
            An unknown ``rule``, or (for a ``Windows`` built by hand) arrays
            that do not describe the documents of ``doc_offsets``.
        """
        chosen = OWNER_RULES[v.choice(rule, "rule", OWNER_RULES)]
        return _core.window_owner(*_fields(self), chosen)


_FIELDS = ("doc_offsets", "starts", "lengths", "documents")


def _fields(w: Windows) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """doc_offsets, starts, lengths, documents and size as the kernels take them.
    A Windows built by hand with a field of the wrong kind is refused by name;
    whether the fields describe the documents the kernels check."""
    arrays = []
    for name in _FIELDS:
        a = getattr(w, name)
        if not (type(a) is np.ndarray and a.dtype == np.int64 and a.ndim == 1):
            a = v.as_array(a, f"windows.{name}")
            if a.ndim != 1 or a.dtype.kind not in "iu":
                raise TypeError(
                    f"windows.{name} must be a 1-D integer array; got {a.dtype} of shape {a.shape}"
                )
        arrays.append(v.kernel_array(a, np.int64))
    offsets, starts, lengths, documents = arrays
    if offsets.size == 0 or offsets[0] != 0 or (offsets[1:] < offsets[:-1]).any():
        raise ValueError(
            f"windows.doc_offsets must start at 0 and never decrease; got {offsets.tolist()[:8]}"
        )
    rows = np.shape(w.tokens)[:1]
    if rows != starts.shape:
        raise ValueError(
            f"windows.tokens has {rows[0] if rows else 'no'} rows but windows.starts has "
            f"{starts.shape[0]} entries: one window per row"
        )
    return offsets, starts, lengths, documents, v.positive_int(w.size, "windows.size")


def _check_pad_value(pad_value: Any, dtype: np.dtype[Any]) -> None:
    """TypeError unless an integer, ValueError unless it fits the tokens' dtype."""
    if isinstance(pad_value, (bool, np.bool_)) or not isinstance(pad_value, (int, np.integer)):
        raise TypeError(f"pad_value must be an integer; got {pad_value!r}")
    info = np.iinfo(dtype)
    if not info.min <= int(pad_value) <= info.max:
        raise ValueError(f"pad_value {pad_value} does not fit {dtype} ({info.min}..{info.max})")


def _step(size: int, step: Any, overlap: Any) -> int:
    if step is not None and overlap is not None:
        raise ValueError("give step or overlap, not both (overlap = size - step)")
    if overlap is not None:
        o = v.non_negative_int(overlap, "overlap")
        if o >= size:
            raise ValueError(f"overlap must be in 0..{size - 1} (less than size {size}); got {o}")
        return size - o
    if step is None:
        return size
    s = v.positive_int(step, "step")
    if s > size:
        raise ValueError(
            f"step must be in 1..{size} (at most size, or tokens are skipped); got {s}"
        )
    return s


def _offsets(offsets: Any, n_tokens: int) -> np.ndarray:
    if offsets is None:
        return np.array([0, n_tokens], dtype=np.int64)
    o = v.as_array(offsets, "offsets")
    if o.ndim != 1 or o.dtype.kind not in "iu":
        raise TypeError(f"offsets must be a 1-D integer array; got {o.dtype} of shape {o.shape}")
    if o.size == 0 or o[0] != 0 or o[-1] != n_tokens:
        raise ValueError(
            f"offsets must start at 0 and end at len(tokens) = {n_tokens}; "
            f"got {o[:1].tolist()}..{o[-1:].tolist()}"
        )
    down = o[1:] < o[:-1]  # in the offsets' own dtype: uint64 past 2^63 compares right
    if down.any():
        k = int(np.flatnonzero(down)[0])
        raise ValueError(f"offsets must not decrease; offsets[{k + 1}] = {o[k + 1]} < {o[k]}")
    return v.kernel_array(o, np.int64)


def window_counts(lengths: np.ndarray, size: int, step: int, tail: str) -> np.ndarray:
    """Windows per document of these lengths (int64)."""
    lengths = lengths.astype(np.int64, copy=False)
    if tail == "drop":
        return np.where(lengths < size, 0, (lengths - size) // step + 1)
    counts: np.ndarray = np.where(
        lengths == 0, 0, np.where(lengths <= size, 1, -(-(lengths - size) // step) + 1)
    )
    return counts


def windows(
    tokens: Any,
    size: int,
    *,
    step: int | None = None,
    overlap: int | None = None,
    tail: str = "pad",
    pad_value: int = 0,
    offsets: Any = None,
    out: np.ndarray | None = None,
) -> Windows:
    """Cut tokens into windows of ``size``.

    The seeds' sliding windows: each window gets positions 0..size-1. No
    window crosses a document boundary.

    Parameters
    ----------
    tokens : array_like of int, shape (N,)
        uint16, uint32, int32, int64, ... ; the windows keep its dtype.
    size : int
        Window length, >= 1.
    step : int, optional
        Distance between window starts, 1..size; default ``size`` (no overlap).
        At most one of ``step`` and ``overlap``.
    overlap : int, optional
        ``size - step``, 0..size-1.
    tail : {"pad", "shift", "drop"}
        ``"pad"``: starts ``k * step`` until a window reaches the document's end
        (``1 if N <= size else ceil((N - size) / step) + 1`` windows, as HF
        tokenizers' overflowing windows); the last is padded with ``pad_value``.
        ``"shift"``: the same count, but the last window ends exactly at the end
        (full whenever N >= size). ``"drop"``: full windows only, like
        ``sliding_window_view(tokens, size)[::step]``; the only mode that may
        leave tokens uncovered. An empty document has no window.
    pad_value : int
        Fills unused slots; must fit the tokens' dtype.
    offsets : array_like of int, shape (documents + 1,), optional
        CSR offsets: document k is ``tokens[offsets[k]:offsets[k+1]]``; they
        start at 0, never decrease and end at N. Default: one document.
    out : ndarray, optional
        C-contiguous array of shape (number of windows, size) and the tokens'
        dtype to write the windows into (a buffer reused batch after batch
        skips the page faults of a new array); the result's ``tokens`` is
        ``out``. Checked before anything is written.

    Returns
    -------
    Windows
        The windows with their starts, lengths, documents and offsets.

    Raises
    ------
    TypeError
        ``tokens`` that NumPy cannot read or not of an integer dtype; a
        ``size``, ``step``, ``overlap`` or ``pad_value`` that is not an
        integer; ``offsets`` that is not a 1-D integer array; ``out`` that is
        not an ndarray or of another dtype.
    ValueError
        ``tokens`` that is not 1-D; ``size`` < 1, or a window of 2^62 bytes
        or more; both ``step`` and ``overlap``; ``step`` outside 1..size or
        ``overlap`` outside 0..size-1; an unknown ``tail``; a ``pad_value``
        that does not fit the tokens' dtype; ``offsets`` that do not start at
        0 and end at N, or that decrease; ``out`` of the wrong shape,
        read-only, misaligned, non-contiguous or overlapping ``tokens``.
    """
    t = v.as_array(tokens, "tokens")
    if t.ndim != 1:
        raise ValueError(f"tokens must be 1-D; got shape {t.shape}")
    if t.dtype.kind not in "iu":
        raise TypeError(f"tokens must be integers; got dtype {t.dtype}")
    n = v.positive_int(size, "size")
    v.check_sizes("size", n, t.itemsize)  # a window's bytes must fit int64
    s = _step(n, step, overlap)
    placement = TAILS[v.choice(tail, "tail", TAILS)]
    _check_pad_value(pad_value, t.dtype)
    o = _offsets(offsets, t.shape[0])
    if out is not None:
        total = int(window_counts(np.diff(o), n, s, tail).sum())
        out = v.check_out(
            out, (total, n), t.dtype.newbyteorder("="), tokens=(t, tokens), offsets=(o, offsets)
        )
    t = v.kernel_array(t, t.dtype.newbyteorder("="))
    pad = np.array([pad_value], dtype=t.dtype)
    rows, starts, lengths, documents = _core.windows(t, o, n, s, placement, pad, out)
    return Windows(rows, starts, lengths, documents, o, n, s, tail)


def _stitch_types(dtype: np.dtype[Any], reduce: str) -> tuple[np.dtype[Any], np.dtype[Any]]:
    """(compute dtype, result dtype) of stitch for values of `dtype`."""
    if dtype.kind == "f" or dtype.name == "bfloat16":
        compute = np.dtype(np.float64 if dtype.name == "float64" else np.float32)
        return compute, dtype
    if dtype.kind not in "biu":
        raise TypeError(f"values must be numbers (bool, integer or float); got dtype {dtype}")
    wide = np.dtype(np.uint64 if dtype.kind == "u" else np.int64)
    if reduce == "mean":
        return np.dtype(np.float64), np.dtype(np.float64)
    if reduce == "sum":
        return wide, wide
    return wide, dtype


def stitch(values: Any, windows: Windows, *, reduce: str = "mean", fill: Any = 0) -> np.ndarray:
    """Per-window values back to per-token values.

    ``stitch(w.tokens, w, reduce="first")`` gives back the input tokens exactly.

    Parameters
    ----------
    values : array_like, shape (n, size, ...)
        Aligned with ``windows.tokens`` (a model's output per window slot,
        say); bool, integer or float (bfloat16 too).
    windows : Windows
        The :class:`Windows` the values belong to.
    reduce : {"mean", "sum", "max", "first", "center"}
        How the slots that hold the same token combine: "first" and "center"
        take the slot :meth:`Windows.owner` marks; the others reduce every slot
        in window order (max: NaN wins, as ``numpy.maximum``, and -0.0
        counts as below 0.0).
    fill : scalar
        Value for tokens no window holds (only ``tail="drop"`` leaves any).

    Returns
    -------
    ndarray, shape (N, ...)
        Aligned with the input tokens (all documents, flat). Floats keep their
        dtype (float16 and bfloat16 reduce in float32); integer sums are int64
        or uint64, integer means float64, other integer reductions keep the
        dtype.

    Raises
    ------
    TypeError
        ``windows`` that is not a :class:`Windows` (or one built by hand with
        fields of the wrong kind, as for :meth:`Windows.owner`); ``values``
        that NumPy cannot read or not of a numeric dtype (complex, object,
        strings); a ``fill`` that is not a number fitting the result.
    ValueError
        An unknown ``reduce``; ``values`` whose leading shape is not
        (n, size); a ``Windows`` built by hand whose arrays do not describe its
        documents.
        Also an integer sum (``reduce="sum"``) outside the range of int64
        (uint64 for unsigned values): sums are exact, never wrapped around;
        the message names the first such token.
    """
    if not isinstance(windows, Windows):
        raise TypeError(f"windows must be a posembed.Windows; got {type(windows).__name__}")
    offsets, starts, lengths, documents, size = _fields(windows)
    r = v.choice(reduce, "reduce", REDUCES)
    vals = v.as_array(values, "values")
    lead = (starts.shape[0], size)
    if vals.shape[:2] != lead:
        raise ValueError(
            f"values must have leading shape (windows, size) = {lead}; got shape {vals.shape}"
        )
    compute, result = _stitch_types(vals.dtype, r)
    rest = vals.shape[2:]
    flat = v.kernel_array(vals, compute).reshape(*lead, math.prod(rest))
    if isinstance(fill, np.ndarray) and fill.ndim == 0:
        fill = fill[()]
    if not isinstance(fill, (numbers.Real, np.bool_)):  # not None, a string, an array
        raise TypeError(f"fill must be a number that fits {result}; got {fill!r}")
    try:
        with np.errstate(over="raise", invalid="raise"):  # 1e300 in float32: inf, refused
            fill_value = compute.type(fill)
    except (TypeError, ValueError, OverflowError, FloatingPointError):
        raise TypeError(f"fill must be a number that fits {result}; got {fill!r}") from None
    own = windows.owner(r) if r in ("first", "center") else None
    out = _core.stitch(
        flat, offsets, starts, lengths, documents, size, REDUCES[r], own, fill_value.item()
    )
    total = int(offsets[-1])
    shaped: np.ndarray = out.reshape(total, *rest).astype(result, copy=False)
    return shaped

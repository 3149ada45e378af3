"""Twins of windows (a token stream cut into fixed-size windows), window_layout
(where those windows lie, before any token is cut), the Windows and
WindowLayout records they return, and stitch (per-window values back to
per-token values)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from posembed.reference._common import _array, _check_out, _check_size, _count, _into

TAILS = ("pad", "shift", "drop")
_INT64_MAX = 2**63 - 1


def _step(size: int, step: Any, overlap: Any, tail: Any) -> int:
    """The distance between window starts that ``step`` or ``overlap`` gives
    (size when neither does), after checking both and ``tail``."""
    if step is not None and overlap is not None:
        raise ValueError("give step or overlap, not both")
    if overlap is not None:
        overlap = _count(overlap, "overlap", 0)
        if overlap >= size:
            raise ValueError("overlap must be less than size")
        step = size - overlap
    step = size if step is None else _count(step, "step", 1)
    if step > size:
        raise ValueError("step must be at most size")
    if not (isinstance(tail, str) and tail in TAILS):
        raise ValueError(f"unknown tail {tail!r}")
    return int(step)


def _document_windows(n: int, size: int, step: int, tail: str) -> list[tuple[int, int]]:
    """(start, length) of each window of a document of n tokens, by the
    formulas in posembed.windows' docstring: starts k * step, the last one
    moved back to end at the document's end for "shift"; no window for an
    empty document."""
    if n == 0:
        return []
    if tail == "drop":
        count = 0 if n < size else (n - size) // step + 1
    else:
        count = 1 if n <= size else -(-(n - size) // step) + 1
    found = []
    for k in range(count):
        start = k * step
        if tail == "shift" and k == count - 1 and n >= size:
            start = n - size
        found.append((start, min(size, n - start)))
    return found


def _check_pad_value(pad_value: Any, dtype: np.dtype[Any]) -> None:
    if isinstance(pad_value, (bool, np.bool_)) or not isinstance(pad_value, (int, np.integer)):
        raise TypeError("pad_value must be an integer")
    info = np.iinfo(dtype)
    if not info.min <= int(pad_value) <= info.max:
        raise ValueError("pad_value does not fit the tokens' dtype")


class Windows:
    """Twin of posembed.Windows: the same attributes, built by plain loops."""

    def __init__(
        self,
        tokens: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
        documents: np.ndarray,
        doc_offsets: np.ndarray,
        size: int,
        step: int,
        tail: str,
    ) -> None:
        self.tokens, self.starts, self.lengths, self.documents = tokens, starts, lengths, documents
        self.doc_offsets, self.size, self.step, self.tail = doc_offsets, size, step, tail

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def mask(self) -> np.ndarray:
        rows = [[j < n for j in range(self.size)] for n in self.lengths]
        return np.array(rows, dtype=bool).reshape(len(rows), self.size)

    def owner(self, rule: str = "first") -> np.ndarray:
        """For each token, the first window containing it, or BERT's max-context window."""
        if rule not in ("first", "center"):
            raise ValueError(f"unknown rule {rule!r}")
        own = np.zeros((len(self), self.size), dtype=bool)
        for doc in range(len(self.doc_offsets) - 1):
            mine = [w for w in range(len(self)) if self.documents[w] == doc]
            n = int(self.doc_offsets[doc + 1] - self.doc_offsets[doc])
            for p in range(n):
                containing = [
                    w for w in mine if self.starts[w] <= p < self.starts[w] + self.lengths[w]
                ]
                if not containing:
                    continue
                if rule == "first":
                    best = containing[0]
                else:
                    best, best_score = -1, -1
                    for w in containing:
                        left = p - int(self.starts[w])
                        right = int(self.starts[w] + self.lengths[w]) - 1 - p
                        # min(left, right) + 0.01 * length, times 100: exact integers
                        score = 100 * min(left, right) + int(self.lengths[w])
                        if score > best_score:  # strictly better: the first max wins
                            best, best_score = w, score
                own[best, p - self.starts[best]] = True
        return own


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
    """Windows of ``size`` tokens, document by document, by the formulas in the docs.

    The twin of :func:`posembed.windows`.

    Parameters
    ----------
    tokens : array_like of int, shape (N,)
        Integer tokens; the windows keep their dtype (in native byte order).
    size : int
        Window length, >= 1.
    step : int, optional
        Distance between window starts, 1..size; default ``size``.
    overlap : int, optional
        ``size - step``, 0..size-1; at most one of ``step`` and ``overlap``.
    tail : {"pad", "shift", "drop"}
        As for :func:`posembed.windows`.
    pad_value : int
        Fills unused slots; must fit the tokens' dtype.
    offsets : array_like of int, shape (documents + 1,), optional
        CSR document offsets from 0 to N, never decreasing.
    out : ndarray, optional
        Destination of shape (number of windows, size) and the tokens' dtype.

    Returns
    -------
    Windows
        This module's :class:`Windows`, with the same attributes as
        :class:`posembed.Windows`.

    Raises
    ------
    TypeError
        ``tokens`` NumPy cannot read or not of an integer dtype; a ``size``,
        ``step``, ``overlap`` or ``pad_value`` that is not an integer;
        ``offsets`` that is not a 1-D integer array; ``out`` that is not an
        ndarray or of another dtype.
    ValueError
        ``tokens`` that is not 1-D; ``size`` < 1; both ``step`` and
        ``overlap``; ``step`` outside 1..size or ``overlap`` outside
        0..size-1; an unknown ``tail``; a ``pad_value`` that does not fit;
        ``offsets`` that do not run from 0 to N or decrease; ``out`` of the
        wrong shape, read-only, non-contiguous, misaligned or overlapping an input.
    """
    t = _array(tokens, "tokens")
    if t.ndim != 1:
        raise ValueError("tokens must be 1-D")
    if t.dtype.kind not in "iu":
        raise TypeError("tokens must be integers")
    size = _count(size, "size", 1)
    step = _step(size, step, overlap, tail)
    _check_pad_value(pad_value, t.dtype)
    if offsets is None:
        bounds = [0, len(t)]
    else:
        o = _array(offsets, "offsets")
        if o.ndim != 1 or o.dtype.kind not in "iu":
            raise TypeError("offsets must be a 1-D integer array")
        bounds = [int(x) for x in o]
        if not bounds or bounds[0] != 0 or bounds[-1] != len(t):
            raise ValueError("offsets must run from 0 to len(tokens)")
        if any(b < a for a, b in itertools.pairwise(bounds)):
            raise ValueError("offsets must not decrease")
    rows, starts, lengths, documents = [], [], [], []
    for doc in range(len(bounds) - 1):
        text = t[bounds[doc] : bounds[doc + 1]]
        for start, length in _document_windows(len(text), size, step, tail):
            piece = text[start : start + length]
            rows.append(np.concatenate([piece, np.full(size - length, pad_value, t.dtype)]))
            starts.append(start)
            lengths.append(length)
            documents.append(doc)
    native = t.dtype.newbyteorder("=")
    table = _into(out, np.array(rows, dtype=native).reshape(len(rows), size), t)
    return Windows(
        table,
        np.array(starts, dtype=np.int64),
        np.array(lengths, dtype=np.int64),
        np.array(documents, dtype=np.int64),
        np.array(bounds, dtype=np.int64),
        size,
        step,
        tail,
    )


def _window_range(windows: Any, count: int) -> range:
    """The window indices a slice names, as ``range(count)[windows]`` does;
    only a slice, and only of step 1."""
    if windows is None:
        return range(count)
    if not isinstance(windows, slice):
        raise TypeError("windows must be a slice")
    try:
        picked = range(count)[windows]
    except TypeError:
        raise TypeError("windows must be a slice of integers") from None
    if picked.step != 1:
        raise ValueError("windows must be a slice with step 1")
    return picked


def _int_field(value: Any, name: str) -> list[int]:
    """A WindowLayout field that must be a 1-D integer array, as Python ints."""
    a = _array(value, name)
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise TypeError(f"{name} must be a 1-D integer array")
    return [int(x) for x in a]


class WindowLayout:
    """Twin of posembed.WindowLayout: the same attributes, and ``cut`` by plain loops."""

    def __init__(
        self,
        starts: np.ndarray,
        lengths: np.ndarray,
        documents: np.ndarray,
        window_offsets: np.ndarray,
        doc_offsets: np.ndarray,
        size: int,
        step: int,
        tail: str,
    ) -> None:
        self.starts, self.lengths, self.documents = starts, lengths, documents
        self.window_offsets, self.doc_offsets = window_offsets, doc_offsets
        self.size, self.step, self.tail = size, step, tail

    def __len__(self) -> int:
        return len(self.starts)  # a TypeError for a field that is no array

    def cut(
        self,
        tokens: Any,
        *,
        windows: slice | None = None,
        token_start: int = 0,
        pad_value: int = 0,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """The token rows of windows ``windows`` (all by default), window by window.

        The twin of :meth:`posembed.WindowLayout.cut`: ``tokens`` are the
        corpus's tokens from ``token_start`` on; row i is window ``a + i``'s
        tokens, then ``pad_value`` up to ``size``. Its checks come in
        posembed's order: the arguments, the fields, the tokens held against
        the first and the last window cut, ``out``, then every window against
        its document and the tokens held.
        """
        t = _array(tokens, "tokens")
        if t.ndim != 1:
            raise ValueError("tokens must be 1-D")
        if t.dtype.kind not in "iu":
            raise TypeError("tokens must be integers")
        picked = _window_range(windows, len(self))
        first_token = _count(token_start, "token_start", 0)
        _check_size("token_start", first_token)
        size = _count(self.size, "layout.size", 1)
        _check_size("layout.size", size, t.dtype.itemsize)
        _check_pad_value(pad_value, t.dtype)
        bounds = _int_field(self.doc_offsets, "layout.doc_offsets")
        starts = _int_field(self.starts, "layout.starts")
        lengths = _int_field(self.lengths, "layout.lengths")
        documents = _int_field(self.documents, "layout.documents")
        if not len(starts) == len(lengths) == len(documents):
            raise ValueError("layout.starts, .lengths and .documents must match in length")
        held = range(first_token, first_token + len(t))  # corpus indices of the tokens given

        def corpus_span(w: int) -> range:
            """Corpus indices of window w's tokens."""
            at = bounds[documents[w]] + starts[w]
            return range(at, at + lengths[w])

        ndocs = len(bounds) - 1
        if picked and all(0 <= documents[w] < ndocs for w in (picked[0], picked[-1])):
            need_from, need_to = corpus_span(picked[0]).start, corpus_span(picked[-1]).stop
            if need_from < held.start or need_to > held.stop:
                raise ValueError("tokens must hold the corpus's tokens that these windows cover")
        native = t.dtype.newbyteorder("=")
        fields = [np.asarray(getattr(self, name)) for name in ("starts", "lengths", "documents")]
        ranged = [f[picked.start : picked.stop] for f in fields]
        _check_out(out, native, (len(picked), size), t, tokens, self.doc_offsets, *ranged)
        if ndocs < 0:
            raise ValueError("layout.doc_offsets must have an entry")
        for w in picked:
            doc, start, length = documents[w], starts[w], lengths[w]
            inside = 0 <= doc < ndocs and start >= 0 and 0 <= length <= size
            if inside:
                lo, hi = bounds[doc], bounds[doc + 1]
                span = corpus_span(w)
                inside = 0 <= lo <= hi and start + length <= hi - lo
                inside = inside and held.start <= span.start and span.stop <= held.stop
            if not inside:
                raise ValueError(f"layout: window {w} does not lie inside its document")
        rows = np.full((len(picked), size), pad_value, dtype=native)
        for i, w in enumerate(picked):
            span = corpus_span(w)
            rows[i, : lengths[w]] = t[span.start - first_token : span.stop - first_token]
        return _into(out, rows, t, tokens)


def window_layout(
    offsets_or_token_count: Any,
    size: int,
    *,
    step: int | None = None,
    overlap: int | None = None,
    tail: str = "pad",
) -> WindowLayout:
    """Where the windows of a corpus lie, document by document, by the formulas in the docs.

    The twin of :func:`posembed.window_layout`: the starts, lengths and
    documents that :func:`windows` gives for the same arguments, from the
    document lengths alone.

    Parameters
    ----------
    offsets_or_token_count : int or array_like of int
        The token count N of one stream, or CSR document offsets from 0,
        never decreasing, below 2^62.
    size : int
        Window length, >= 1.
    step : int, optional
        Distance between window starts, 1..size; default ``size``.
    overlap : int, optional
        ``size - step``, 0..size-1; at most one of ``step`` and ``overlap``.
    tail : {"pad", "shift", "drop"}
        As for :func:`posembed.windows`.

    Returns
    -------
    WindowLayout
        This module's :class:`WindowLayout`, with the same attributes as
        :class:`posembed.WindowLayout`.

    Raises
    ------
    TypeError
        A ``size``, ``step`` or ``overlap`` that is not an integer; a bool
        token count; offsets that are not a 1-D integer array.
    ValueError
        ``size`` < 1 or of 2^62 or more; both ``step`` and ``overlap``;
        ``step`` outside 1..size or ``overlap`` outside 0..size-1; an unknown
        ``tail``; a negative token count or one of 2^62 or more; offsets that
        do not start at 0, that decrease or that reach 2^62.
    """
    size = _count(size, "size", 1)
    _check_size("size", size)
    step = _step(size, step, overlap, tail)
    if isinstance(offsets_or_token_count, (int, np.integer)):
        bounds = [0, _count(offsets_or_token_count, "offsets_or_token_count", 0)]
    else:
        o = _array(offsets_or_token_count, "offsets")
        if o.ndim != 1 or o.dtype.kind not in "iu":
            raise TypeError("offsets must be a 1-D integer array")
        bounds = [int(x) for x in o]
        if not bounds or bounds[0] != 0:
            raise ValueError("offsets must start at 0")
        if any(b < a for a, b in itertools.pairwise(bounds)):
            raise ValueError("offsets must not decrease")
    if bounds[-1] >= 2**62:  # as posembed: index products must stay below 2^62
        raise ValueError("the corpus must hold fewer than 2^62 tokens")
    starts, lengths, documents, window_offsets = [], [], [], [0]
    for doc in range(len(bounds) - 1):
        found = _document_windows(bounds[doc + 1] - bounds[doc], size, step, tail)
        for start, length in found:
            starts.append(start)
            lengths.append(length)
            documents.append(doc)
        window_offsets.append(window_offsets[-1] + len(found))
    return WindowLayout(
        np.array(starts, dtype=np.int64),
        np.array(lengths, dtype=np.int64),
        np.array(documents, dtype=np.int64),
        np.array(window_offsets, dtype=np.int64),
        np.array(bounds, dtype=np.int64),
        size,
        step,
        tail,
    )


def stitch(values: Any, windows: Windows, *, reduce: str = "mean", fill: Any = 0) -> np.ndarray:
    """Per-token values from per-window values, token by token in window order.

    The twin of :func:`posembed.stitch`.

    Parameters
    ----------
    values : array_like, shape (n, size, ...)
        Bool, integer or float values aligned with ``windows.tokens``.
    windows : Windows
        This module's or :class:`posembed.Windows`.
    reduce : {"mean", "sum", "max", "first", "center"}
        As for :func:`posembed.stitch`.
    fill : scalar
        Value for tokens no window holds.

    Returns
    -------
    ndarray, shape (N, ...)
        Floats keep their dtype; integer sums are int64 or uint64, integer
        means float64.

    Raises
    ------
    TypeError
        ``windows`` without an ``owner`` method; ``values`` NumPy cannot read
        or not numbers; a ``fill`` the result's type cannot hold.
    ValueError
        An unknown ``reduce``; ``values`` whose leading shape is not
        (n, size).
        Also an integer sum (``reduce="sum"``) outside int64's or uint64's
        range.
    """
    if not hasattr(windows, "owner"):
        raise TypeError("windows must be a Windows object")
    if reduce not in ("mean", "sum", "max", "first", "center"):
        raise ValueError(f"unknown reduce {reduce!r}")
    vals = _array(values, "values")
    if vals.shape[:2] != (len(windows), windows.size):
        raise ValueError("values must have leading shape (windows, size)")
    dt = vals.dtype
    compute: Any
    if dt.kind == "f" or dt.name == "bfloat16":
        compute = np.float64 if dt.name == "float64" else np.float32  # any byte order
        result = dt
    elif dt.kind in "biu":
        wide = np.uint64 if dt.kind == "u" else np.int64
        compute = np.float64 if reduce == "mean" else wide
        result = np.dtype(compute) if reduce in ("mean", "sum") else dt
    else:
        raise TypeError("values must be numbers")
    if isinstance(fill, np.ndarray) and fill.ndim == 0:
        fill = fill[()]
    if not isinstance(fill, (int, float, np.integer, np.floating, np.bool_)):
        raise TypeError("fill must be a number that fits the result")
    try:
        with np.errstate(over="raise", invalid="raise"):
            fill_value = compute(fill)
    except (TypeError, ValueError, OverflowError, FloatingPointError):
        raise TypeError("fill must be a number that fits the result") from None
    exact = reduce == "sum" and dt.kind in "biu"  # Python ints: no wrap-around
    work = object if exact else compute
    x = vals.astype(compute).astype(work)
    total = int(windows.doc_offsets[-1])
    acc = np.zeros((total, *vals.shape[2:]), dtype=work)
    count = np.zeros(total, dtype=np.int64)
    own = windows.owner(reduce) if reduce in ("first", "center") else None
    for w in range(len(windows)):
        base = int(windows.doc_offsets[windows.documents[w]] + windows.starts[w])
        for j in range(int(windows.lengths[w])):
            if own is not None and not own[w, j]:
                continue
            t = base + j
            if count[t] == 0 or own is not None:
                acc[t] = x[w, j]
            elif reduce == "max":
                # NaN wins; of two zeros, -0.0 only if both are (their IEEE sum)
                zeros = (acc[t] == 0) & (x[w, j] == 0)
                acc[t] = np.where(zeros, acc[t] + x[w, j], np.maximum(acc[t], x[w, j]))
            else:
                acc[t] = acc[t] + x[w, j]
            count[t] += 1
    for t in range(total):
        if count[t] == 0:
            acc[t] = fill_value
        elif reduce == "mean":
            acc[t] = acc[t] / compute(count[t])
        elif exact:
            info = np.iinfo(compute)
            if any(not info.min <= int(s) <= info.max for s in np.ravel(acc[t])):
                raise ValueError(
                    f"values: the sum over windows of token {t} lies outside {info.dtype}'s range"
                )
    return acc.astype(result)

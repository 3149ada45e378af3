"""Twins of windows (a token stream cut into fixed-size windows), the Windows
record it returns, and stitch (per-window values back to per-token values)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from posembed.reference._common import _array, _count, _into


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
    if tail not in ("pad", "shift", "drop"):
        raise ValueError(f"unknown tail {tail!r}")
    if isinstance(pad_value, (bool, np.bool_)) or not isinstance(pad_value, (int, np.integer)):
        raise TypeError("pad_value must be an integer")
    info = np.iinfo(t.dtype)
    if not info.min <= int(pad_value) <= info.max:
        raise ValueError("pad_value does not fit the tokens' dtype")
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
        n = len(text)
        if n == 0:
            continue
        if tail == "drop":
            count = 0 if n < size else (n - size) // step + 1
        else:
            count = 1 if n <= size else -(-(n - size) // step) + 1
        for k in range(count):
            start = k * step
            if tail == "shift" and k == count - 1 and n >= size:
                start = n - size
            piece = text[start : start + size]
            rows.append(np.concatenate([piece, np.full(size - len(piece), pad_value, t.dtype)]))
            starts.append(start)
            lengths.append(len(piece))
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

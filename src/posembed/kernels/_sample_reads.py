"""How samples read a corpus: a (tokens, offsets) pair or a reader, checked against
the lengths the samples were built from, and the checks of sample numbers and
the padding token that every way of reading samples shares."""

from __future__ import annotations

import numbers
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from posembed.kernels import _validate as v

INT64_MAX = 2**63 - 1


class _Corpus:
    """A corpus as samples read it: per-sequence lengths and token reads,
    checked against ``built``, the lengths the samples were built from
    (None: unknown)."""

    def __init__(self, corpus: Any, built: np.ndarray | None = None) -> None:
        read: Callable[[int, int], Any]
        if isinstance(corpus, (tuple, list)):
            if len(corpus) != 2:
                raise TypeError(
                    "corpus must be a pair (tokens, offsets) or a reader with .offsets and "
                    f".read(start, stop); got a {type(corpus).__name__} of {len(corpus)} items"
                )
            tokens = v.as_array(corpus[0], "corpus tokens")
            if tokens.ndim != 1 or tokens.dtype.kind not in "iu":
                raise TypeError(
                    "corpus tokens must be a 1-D integer array; got "
                    f"{tokens.dtype} of shape {tokens.shape}"
                )
            offsets_given: Any = corpus[1]

            def read(start: int, stop: int) -> Any:
                return tokens[start:stop]

            self._available = int(tokens.shape[0])
        elif hasattr(corpus, "offsets") and callable(getattr(corpus, "read", None)):
            offsets_given = corpus.offsets
            read = corpus.read
            self._available = -1
        else:
            raise TypeError(
                "corpus must be a pair (tokens, offsets) or a reader with .offsets and "
                f".read(start, stop); got {type(corpus).__name__}"
            )
        offsets = v.as_array(offsets_given, "corpus offsets")
        if offsets.ndim != 1 or offsets.dtype.kind not in "iu" or offsets.shape[0] < 2:
            raise TypeError(
                "corpus offsets must be a 1-D integer array of at least 2 entries (one per "
                f"sequence and one more); got {offsets.dtype} of shape {offsets.shape}"
            )
        count = offsets.shape[0] - 1
        if built is not None:
            built = np.asarray(built)
            if built.ndim != 1 or built.dtype.kind not in "iu":
                raise TypeError(
                    "GPTSamples.lengths must be None or a 1-D integer array; got "
                    f"{built.dtype} of shape {built.shape}"
                )
        if built is not None and count != built.shape[0]:
            raise ValueError(
                f"corpus: it holds {count} sequences ({offsets.shape[0]} offsets), but these "
                f"samples were built from the lengths of {built.shape[0]}: read them only from "
                "the corpus whose lengths built them (an IndexedCorpus opened with the unit the "
                "lengths counted: documents='sequences' for its sequence_lengths)"
            )
        self._offsets = offsets
        self._read = read
        self._built = built

    def length(self, sequence: int) -> int:
        count = self._offsets.shape[0] - 1
        if sequence >= count:
            raise ValueError(
                f"corpus: these samples read sequence {sequence}, but the corpus holds {count} "
                "sequences: it is not the one whose lengths built them"
            )
        start: int = self._offsets.item(sequence)  # .item(): a Python int, cheaply
        stop: int = self._offsets.item(sequence + 1)
        if start < 0 or stop < start or (self._available >= 0 and stop > self._available):
            raise ValueError(
                f"corpus offsets: sequence {sequence} spans {start}..{stop}, which is not "
                "inside the tokens"
            )
        if self._built is not None:
            built = self._built.item(sequence)
            if stop - start != built:
                raise ValueError(
                    f"corpus: sequence {sequence} holds {stop - start} tokens, but these samples "
                    f"were built from lengths where it holds {built}: read them only from the "
                    "corpus whose lengths built them"
                )
        return stop - start

    def read(self, sequence: int, start: int, stop: int) -> np.ndarray:
        """Tokens [start, stop) of ``sequence`` (after :meth:`length` of it)."""
        begin = self._offsets.item(sequence) + start
        got = np.asarray(self._read(begin, begin + stop - start))
        if got.ndim != 1 or got.shape[0] != stop - start or got.dtype.kind not in "iu":
            raise ValueError(
                f"corpus: read({begin}, {begin + stop - start}) returned {got.dtype} of shape "
                f"{got.shape}; expected {stop - start} integer tokens"
            )
        if got.dtype.kind == "u" and got.dtype.itemsize == 8 and got.size:
            past = np.flatnonzero(got > INT64_MAX)
            if past.size:
                at = int(past[0])
                raise ValueError(
                    f"corpus: sequence {sequence} holds token id {int(got[at])} (its token "
                    f"{start + at}), which int64 cannot hold: samples are int64, as Megatron's, "
                    "so token ids must be in 0..2^63-1"
                )
        return got


def _sample_numbers(indices: Any, count: int) -> np.ndarray:
    a = v.as_array(indices, "indices")
    if a.dtype.kind not in "iu":
        if a.size == 0 and isinstance(indices, (list, tuple, range)):
            a = a.astype(np.int64)
        else:
            raise TypeError(f"indices must be integers; got dtype {a.dtype}")
    if a.ndim != 1:
        raise ValueError(f"indices must be 1-D; got shape {a.shape}")
    bad = np.flatnonzero((a < 0) | (a >= count))
    if bad.size:
        at = int(bad[0])
        raise IndexError(
            f"indices[{at}] = {int(a[at])} is out of range for {count} samples (0..{count - 1}); "
            f"{bad.size} of {a.size} indices are out of range"
        )
    return a


def _pad_value(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"pad_value must be an integer; got {type(value).__name__} {value!r}")
    pad = operator.index(value)
    if not -(2**63) <= pad <= 2**63 - 1:
        raise ValueError(f"pad_value must fit int64; got {pad}")
    return pad

"""Twin of posembed's GPT samples: Megatron-LM GPTDataset's three indices, in plain NumPy.

It follows ``megatron/core/datasets/gpt_dataset.py`` step by step: the
epochs, the separate-final-epoch rule, the document index (the split's ids
repeated, shuffled by one ``numpy.random.RandomState``), the sample index
(``helpers.cpp``'s ``build_sample_idx``, restated over a cumulative sum) and
the shuffle index (a shuffled ``arange``, drawn from the same RandomState).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from posembed.reference._common import _array, _check_size, _count, _flag

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class GPTSamples:
    """Twin of :class:`posembed.GPTSamples`: the three indices and how to read a sample.

    ``lengths``: the sequence lengths the indices were built from (None: built
    by hand); a corpus is read only if it holds as many sequences, each one a
    sample reads as long as it was.
    """

    document_index: np.ndarray
    sample_index: np.ndarray
    shuffle_index: np.ndarray
    num_epochs: int
    sequence_length: int
    add_extra_token_to_sequence: bool
    lengths: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.sample_index.shape[0]) - 1

    def sample(self, i: int, corpus: Any, *, pad_value: int = -1) -> np.ndarray:
        """Twin of :meth:`posembed.GPTSamples.sample`: GPTDataset's tokens of sample ``i``."""
        index = _sample_number(i, len(self))
        pad = _pad(pad_value)
        offsets, read, available = _corpus(corpus, self.lengths)
        return self._tokens(int(self.shuffle_index[index]), offsets, read, available, pad)

    def samples(self, indices: Any, corpus: Any, *, pad_value: int = -1) -> np.ndarray:
        """Twin of :meth:`posembed.GPTSamples.samples`: one row per sample."""
        a = _array(indices, "indices")
        if a.dtype.kind not in "iu":
            if a.size == 0 and isinstance(indices, (list, tuple, range)):
                a = a.astype(np.int64)
            else:
                raise TypeError("indices must be integers")
        if a.ndim != 1:
            raise ValueError("indices must be 1-D")
        numbers = [_sample_number(int(i), len(self)) for i in a]
        pad = _pad(pad_value)
        offsets, read, available = _corpus(corpus, self.lengths)
        width = self.sequence_length + int(self.add_extra_token_to_sequence)
        rows = [
            self._tokens(int(self.shuffle_index[i]), offsets, read, available, pad) for i in numbers
        ]
        return np.array(rows, dtype=np.int64).reshape(len(rows), width)

    def _tokens(
        self, idx: int, offsets: np.ndarray, read: Any, available: int | None, pad: int
    ) -> np.ndarray:
        """GPTDataset._query_document_sample_shuffle_indices after its shuffle mapping."""
        extra = int(self.add_extra_token_to_sequence)
        doc_beg, beg_offset = (int(x) for x in self.sample_index[idx])
        doc_end, end_offset = (int(x) for x in self.sample_index[idx + 1])
        if not 0 <= doc_beg <= doc_end < self.document_index.shape[0]:
            raise ValueError("sample_index must hold positions of the document index")
        parts = []
        stop = length = 0
        for i in range(doc_beg, doc_end + 1):
            doc = int(self.document_index[i])
            if doc + 1 >= offsets.shape[0]:
                raise ValueError("corpus has too few sequences for these samples")
            if int(offsets[doc]) < 0 or (available is not None and offsets[doc + 1] > available):
                raise ValueError("corpus offsets must lie inside the tokens")
            length = int(offsets[doc + 1]) - int(offsets[doc])
            if self.lengths is not None and length != int(self.lengths[doc]):
                raise ValueError("corpus sequence lengths are not the ones these samples built")
            start = beg_offset if i == doc_beg else 0
            stop = end_offset + extra if i == doc_end else length
            if not 0 <= start <= stop <= length:
                raise ValueError("corpus sequences are shorter than these samples read")
            first = int(offsets[doc]) + start
            got = np.asarray(read(first, first + stop - start))
            if got.ndim != 1 or got.shape[0] != stop - start or got.dtype.kind not in "iu":
                raise ValueError("corpus read returned the wrong tokens")
            if got.dtype == np.uint64 and got.size and int(got.max()) > INT64_MAX:
                raise ValueError("corpus token ids must fit int64")
            parts.append(got.astype(np.int64))
        tokens = np.concatenate(parts) if parts else np.empty(0, np.int64)
        width = self.sequence_length + extra
        # GPTDataset pads only the kept last sample, which ends with the document index
        at_end = doc_end == self.document_index.shape[0] - 1 and stop == length
        if tokens.shape[0] > width or (tokens.shape[0] < width and not at_end):
            raise ValueError("corpus sequences do not fill the sample as they did its indices")
        if tokens.shape[0] < width:
            tokens = np.concatenate([tokens, np.full(width - tokens.shape[0], pad, np.int64)])
        return tokens


def gpt_samples(
    lengths: Any,
    sequence_length: int,
    *,
    num_samples: int | None = None,
    num_epochs: int | None = None,
    seed: int = 1234,
    documents: Any = None,
    add_extra_token_to_sequence: bool = True,
    drop_last_partial_sequence: bool = True,
    separate_final_epoch: bool | None = None,
) -> GPTSamples:
    """GPTDataset's document, sample and shuffle index, as gpt_dataset.py builds them.

    The twin of :func:`posembed.gpt_samples`.

    Parameters
    ----------
    lengths : array_like of int, shape (N,)
        Every sequence's length, >= 0.
    sequence_length : int
        Tokens per sample, the extra one aside; >= 1.
    num_samples : int or None
        The samples wanted (the epochs follow); None: one epoch or ``num_epochs``.
    num_epochs : int or None
        The epochs, instead of ``num_samples``.
    seed : int
        The ``numpy.random.RandomState`` seed, 0..2^32-1.
    documents : array_like of int or None
        The split's sequence ids; None: all.
    add_extra_token_to_sequence : bool
        Samples of ``sequence_length + 1`` tokens.
    drop_last_partial_sequence : bool
        Drop the last partial sample.
    separate_final_epoch : bool or None
        Force or forbid the separate final epoch; None: Megatron's 80% rule.

    Returns
    -------
    GPTSamples
        This module's :class:`GPTSamples`.

    Raises
    ------
    TypeError
        Arguments of the wrong type.
    ValueError
        Values outside what is allowed.
    """
    seq = _count(sequence_length, "sequence_length", 1)
    extra = int(_flag(add_extra_token_to_sequence, "add_extra_token_to_sequence"))
    drop_last = _flag(drop_last_partial_sequence, "drop_last_partial_sequence")
    separate_given = None
    if separate_final_epoch is not None:
        separate_given = _flag(separate_final_epoch, "separate_final_epoch")
    wanted = None if num_samples is None else _count(num_samples, "num_samples", 0)
    epochs_given = None if num_epochs is None else _count(num_epochs, "num_epochs", 1)
    if wanted is not None and epochs_given is not None:
        raise ValueError("give num_samples or num_epochs, not both")
    random_state = _random_state(seed)
    sizes = _ints(lengths, "lengths")
    if documents is None:
        docs = np.arange(sizes.shape[0], dtype=np.int64)
    else:
        docs = _ints(documents, "documents")
        if ((docs < 0) | (docs >= sizes.shape[0])).any():
            raise ValueError("documents must be ids of lengths")
    if (sizes[docs] < 0).any():
        raise ValueError("lengths must not be negative")

    # _get_num_tokens_per_epoch
    tokens_per_epoch = int(np.sum(sizes[docs], dtype=object))
    if tokens_per_epoch >= 2**62:
        raise ValueError("lengths hold too many tokens")
    if tokens_per_epoch == 0:
        raise ValueError("documents hold no tokens")
    # _get_num_epochs: the fewest epochs whose tokens the samples (and the extra token) fit in
    if wanted is not None:
        num_epochs_built = 1
        requested = wanted * seq + extra
        num_epochs_built = max(1, -(-requested // tokens_per_epoch))
    else:
        num_epochs_built = 1 if epochs_given is None else epochs_given
    _check_size("document index", num_epochs_built, docs.shape[0])
    n = _sample_count(num_epochs_built * tokens_per_epoch, seq, extra, drop_last)
    _check_size("sample index", n + 2, seq)

    # The 80% rule of the final epoch
    if num_epochs_built == 1:
        separate = False
    elif separate_given is not None:
        separate = separate_given
    elif wanted is None:
        separate = False
    else:
        sans_final = ((num_epochs_built - 1) * tokens_per_epoch - extra) // seq
        from_final = wanted - sans_final
        per_epoch = (tokens_per_epoch - extra) // seq
        separate = from_final < int(0.80 * per_epoch)

    doc_dtype = np.int32 if int(docs.max()) <= INT32_MAX else np.int64
    document_index = _document_index(docs, num_epochs_built, random_state, separate, doc_dtype)
    sample_index = _sample_index(sizes, document_index, seq, extra, n)

    # _build_shuffle_index
    shuffle_dtype = np.uint32 if n < 2**32 - 2 else np.int64
    if separate:
        sans_final = ((num_epochs_built - 1) * tokens_per_epoch - extra) // seq
        first = np.arange(0, sans_final, dtype=shuffle_dtype)
        random_state.shuffle(first)
        if sans_final == n:
            shuffle_index = first
        else:
            last = np.arange(sans_final, n, dtype=shuffle_dtype)
            random_state.shuffle(last)
            shuffle_index = np.concatenate((first, last))
    else:
        shuffle_index = np.arange(0, n, dtype=shuffle_dtype)
        random_state.shuffle(shuffle_index)
    extra_token = bool(extra)
    built = sizes  # _ints' own copy: the lengths its reads are checked against
    built.setflags(write=False)
    return GPTSamples(
        document_index, sample_index, shuffle_index, num_epochs_built, seq, extra_token, built
    )


def gpt_sample_index(
    lengths: Any,
    document_index: Any,
    sequence_length: int,
    num_epochs: int,
    tokens_per_epoch: int,
    *,
    drop_last_partial_sequence: bool = True,
    add_extra_token_to_sequence: bool = True,
) -> np.ndarray:
    """Megatron's sample index over a document index, as helpers.cpp's build_sample_idx.

    The twin of :func:`posembed.gpt_sample_index`.

    Parameters
    ----------
    lengths : array_like of int, shape (N,)
        Every sequence's length.
    document_index : array_like of int, shape (M,)
        The sequences in reading order, ids of ``lengths``.
    sequence_length : int
        Tokens per sample, the extra one aside; >= 1.
    num_epochs : int
        The epochs, >= 1.
    tokens_per_epoch : int
        The tokens of one epoch, >= 1.
    drop_last_partial_sequence : bool
        Drop the last partial sample.
    add_extra_token_to_sequence : bool
        Samples of ``sequence_length + 1`` tokens.

    Returns
    -------
    ndarray, shape (samples + 1, 2)
        Where each sample starts: (position in ``document_index``, offset).

    Raises
    ------
    TypeError
        Arguments of the wrong type.
    ValueError
        Values outside what is allowed.
    """
    seq = _count(sequence_length, "sequence_length", 1)
    epochs = _count(num_epochs, "num_epochs", 1)
    per_epoch = _count(tokens_per_epoch, "tokens_per_epoch", 1)
    drop_last = _flag(drop_last_partial_sequence, "drop_last_partial_sequence")
    extra = int(_flag(add_extra_token_to_sequence, "add_extra_token_to_sequence"))
    sizes = _ints(lengths, "lengths")
    docs = _ints(document_index, "document_index")
    if ((docs < 0) | (docs >= sizes.shape[0])).any():
        raise ValueError("document_index must hold ids of lengths")
    if (sizes[docs] < 0).any():
        raise ValueError("lengths must not be negative")
    if int(np.sum(sizes[docs], dtype=object)) >= 2**62:
        raise ValueError("lengths hold too many tokens")
    n = _sample_count(epochs * per_epoch, seq, extra, drop_last)
    _check_size("sample index", n + 2, seq)
    return _sample_index(sizes, docs, seq, extra, n)


def _sample_index(
    sizes: np.ndarray, document_index: np.ndarray, seq: int, extra: int, n: int
) -> np.ndarray:
    """build_sample_idx: where samples 0..n start, as (position, offset).

    Sample s >= 1 starts at token s * seq of the documents laid end to end;
    its row is the position whose document holds token s * seq + extra - 1
    (the last one the previous sample reads) and the start's offset in it.
    When the documents end before that token (the last partial sample kept),
    Megatron's loop leaves the row at the last document, extra tokens before
    its end.
    """
    lengths = sizes[document_index].astype(np.int64)
    ends = np.cumsum(lengths)  # tokens up to and including each position
    total = int(ends[-1])
    starts = np.arange(1, n + 1, dtype=np.int64) * seq
    last_needed = starts + extra - 1
    inside = last_needed < total
    position = np.searchsorted(ends, last_needed[inside], side="right")
    before = ends[position] - lengths[position]
    rows = np.empty((n + 1, 2), dtype=np.int64)
    rows[0] = 0, 0
    rows[1:][inside, 0] = position
    rows[1:][inside, 1] = starts[inside] - before
    rows[1:][~inside, 0] = document_index.shape[0] - 1
    rows[1:][~inside, 1] = lengths[-1] - extra
    wide = max(document_index.shape[0], int(sizes.max())) > INT32_MAX
    return rows if wide else rows.astype(np.int32)


def _document_index(
    docs: np.ndarray, epochs: int, random_state: np.random.RandomState, separate: bool, dtype: Any
) -> np.ndarray:
    """_build_document_index: the ids repeated `epochs` times, shuffled (the
    final epoch on its own when separate)."""
    if not separate or epochs == 1:
        document_index = np.tile(docs, epochs).astype(dtype)
        random_state.shuffle(document_index)
        return document_index
    first = _document_index(docs, epochs - 1, random_state, False, dtype)
    last = _document_index(docs, 1, random_state, False, dtype)
    return np.concatenate((first, last))


def _sample_count(tokens: int, seq: int, extra: int, drop_last: bool) -> int:
    """build_sample_idx's count; the kept partial sample as its C++ computes it,
    ceil(float(tokens - extra) / seq) in single precision."""
    if drop_last:
        return (tokens - extra) // seq
    return math.ceil(float(np.float32(np.int64(tokens - extra)) / np.float32(seq)))


def _random_state(seed: Any) -> np.random.RandomState:
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError("seed must be an integer")
    if not 0 <= int(seed) <= 2**32 - 1:
        raise ValueError("seed must be in 0..2**32-1")
    return np.random.RandomState(int(seed))


def _ints(values: Any, name: str) -> np.ndarray:
    """A non-empty 1-D integer array as int64."""
    a = _array(values, name)
    if a.dtype.kind == "f" and a.size == 0 and isinstance(values, (list, tuple)):
        a = a.astype(np.int64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integers")
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D")
    if a.shape[0] == 0:
        raise ValueError(f"{name} must not be empty")
    if a.dtype.kind == "u" and a.dtype.itemsize == 8 and int(a.max()) > 2**63 - 1:
        raise ValueError(f"{name} must fit int64")
    return a.astype(np.int64)


def _sample_number(i: Any, count: int) -> int:
    if isinstance(i, (bool, np.bool_)):
        raise TypeError("sample numbers must be integers")
    try:
        index = operator.index(i)
    except TypeError:
        raise TypeError("sample numbers must be integers") from None
    if not 0 <= index < count:
        raise IndexError("sample number out of range")
    return index


def _pad(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError("pad_value must be an integer")
    if not -(2**63) <= int(value) <= 2**63 - 1:
        raise ValueError("pad_value must fit int64")
    return int(value)


def _corpus(corpus: Any, lengths: Any = None) -> tuple[np.ndarray, Any, int | None]:
    """(offsets, read(start, stop), its tokens or None) of a (tokens, offsets) pair or a
    reader, of as many sequences as ``lengths`` (None: any number)."""
    if isinstance(corpus, (tuple, list)):
        if len(corpus) != 2:
            raise TypeError("corpus must be a pair (tokens, offsets) or a reader")
        tokens = _array(corpus[0], "corpus tokens")
        if tokens.ndim != 1 or tokens.dtype.kind not in "iu":
            raise TypeError("corpus tokens must be a 1-D integer array")
        offsets_given = corpus[1]
        available: int | None = int(tokens.shape[0])

        def read(start: int, stop: int) -> np.ndarray:
            return tokens[start:stop]

    elif hasattr(corpus, "offsets") and callable(getattr(corpus, "read", None)):
        offsets_given = corpus.offsets
        read = corpus.read
        available = None
    else:
        raise TypeError("corpus must be a pair (tokens, offsets) or a reader")
    offsets = _array(offsets_given, "corpus offsets")
    if offsets.ndim != 1 or offsets.dtype.kind not in "iu" or offsets.shape[0] < 2:
        raise TypeError("corpus offsets must be a 1-D integer array of 2 or more entries")
    if lengths is not None:
        built = np.asarray(lengths)
        if built.ndim != 1 or built.dtype.kind not in "iu":
            raise TypeError("GPTSamples.lengths must be None or a 1-D integer array")
        if offsets.shape[0] - 1 != built.shape[0]:
            raise ValueError("corpus must hold the sequences whose lengths built these samples")
    return offsets, read, available

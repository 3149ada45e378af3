"""samples: Megatron-LM's GPT samples, the indices GPTDataset builds and the tokens they name."""

from __future__ import annotations

import math
import numbers
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from posembed import _core
from posembed.kernels import _validate as v
from posembed.kernels._gpt_batch import GPTBatch, gpt_batch
from posembed.kernels._sample_reads import _Corpus, _pad_value, _sample_numbers

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# numpy.random.RandomState(seed) takes integer seeds 0..2^32-1.
SEED_MAX = 2**32 - 1
# Megatron's shuffle index is uint32 below this many samples, int64 from it.
SHUFFLE_WIDE_FROM = 2**32 - 2
# GPTDataset separates the final epoch when it holds under this share of an epoch's samples.
FINAL_EPOCH_THRESHOLD = 0.80


@dataclass(frozen=True)
class GPTSamples:
    """The samples of a corpus as Megatron-LM's ``GPTDataset`` draws them.

    What :func:`gpt_samples` returns. ``len(samples)`` is the number of
    samples, ``len(sample_index) - 1`` as ``GPTDataset`` counts them.

    Attributes
    ----------
    document_index : ndarray of int32 (int64 for sequence ids past 2^31 - 1), shape (E * D,)
        The split's sequence ids, ``num_epochs`` times, shuffled.
    sample_index : ndarray of int32 (int64 past 2^31 - 1), shape (n + 1, 2)
        For each sample, where it starts: a position in ``document_index``
        and an offset in that sequence; sample ``s`` ends where ``s + 1``
        starts, plus the extra token.
    shuffle_index : ndarray of uint32 (int64 from 2^32 - 2 samples), shape (n,)
        The order of the samples: the ``i``-th sample read is number
        ``shuffle_index[i]`` of ``sample_index``.
    num_epochs : int
        How many times the split's sequences were laid out.
    sequence_length : int
        Tokens per sample, the extra one aside.
    add_extra_token_to_sequence : bool
        Whether each sample holds ``sequence_length + 1`` tokens (its inputs
        and, shifted by one, its labels) instead of ``sequence_length``.
    lengths : read-only ndarray of int32 or int64, shape (N,), or None
        The sequence lengths the indices were built from (the samples' own
        copy of :func:`gpt_samples`'s ``lengths``): :meth:`sample` and
        :meth:`samples` read only from a corpus of these N sequences, and
        check the length of each sequence a sample reads against them. None
        in samples built by hand from the three arrays: reads are then
        checked only for tokens that fill each sample exactly.
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
        """The tokens of sample ``i``, in shuffled order, as ``GPTDataset[i]`` reads them.

        The tokens ``GPTDataset._query_document_sample_shuffle_indices(i)``
        returns: ``sequence_length + 1`` of them (``sequence_length``
        without the extra token), read across sequence boundaries;
        ``GPTDataset.__getitem__`` takes its tokens and labels from these.

        Parameters
        ----------
        i : int
            Which sample, 0 to ``len(self) - 1``; sample ``shuffle_index[i]``
            of the sample index is read.
        corpus : tuple (tokens, offsets) or reader
            The corpus the lengths came from: a pair of a 1-D integer array
            of every sequence's tokens back to back and the int64 CSR offsets
            of the sequences in it (one entry per sequence and one more), or
            any object with ``.offsets`` (the same offsets) and ``.read(start,
            stop)`` (tokens ``[start, stop)`` of the whole corpus as an
            ndarray), such as an indexed-dataset reader (an
            :class:`IndexedCorpus` opened with the unit the lengths counted:
            ``documents="sequences"`` for its ``sequence_lengths``). Its
            sequences must be those of :attr:`lengths`: as many, and each one
            a sample reads as long as it was (checked for the sequences each
            sample reads, not the whole corpus). Token ids must fit int64.
        pad_value : int
            The token that fills a sample past the corpus's end (only the last
            sample with ``drop_last_partial_sequence=False``); Megatron's is
            -1 unless its tokenizer has a pad token.

        Returns
        -------
        ndarray of int64, shape (sequence_length + 1,) or (sequence_length,)
            The sample's tokens (int64 whatever the corpus's dtype, as
            Megatron's).

        Raises
        ------
        TypeError
            ``i`` or ``pad_value`` that is not an integer, or a ``corpus``
            that is neither a (tokens, offsets) pair nor a reader.
        IndexError
            ``i`` outside 0..len(self)-1.
        ValueError
            A ``corpus`` whose sequences are not the ones these samples were
            built from: another number of sequences than :attr:`lengths`, or
            a sequence the sample reads whose length is not the one the
            indices were built from (the message names it); a token id that
            int64 cannot hold (a uint64 id past 2^63 - 1: never wrapped); or
            a reader that returns another number of tokens than asked for.
        """
        count = len(self)
        index = _sample_number(i, count, "i")
        pad = _pad_value(pad_value)
        reader = _Corpus(corpus, self.lengths)
        out = np.full(self.sequence_length + self._extra(), pad, dtype=np.int64)
        self._read_into(int(self.shuffle_index[index]), reader, out)
        return out

    def samples(self, indices: Any, corpus: Any, *, pad_value: int = -1) -> np.ndarray:
        """The tokens of many samples at once, one row each, as :meth:`sample` reads them.

        Parameters
        ----------
        indices : array_like of int, shape (k,)
            Which samples, each 0 to ``len(self) - 1``, in shuffled order
            (``range(a, b)`` is a batch as a training loop reads it).
        corpus : tuple (tokens, offsets) or reader
            The corpus the lengths came from, as :meth:`sample` takes it.
        pad_value : int
            The token that fills a sample past the corpus's end.

        Returns
        -------
        ndarray of int64, shape (k, sequence_length + 1) or (k, sequence_length)
            Row ``r`` holds sample ``indices[r]``.

        Raises
        ------
        TypeError
            ``indices`` that are not integers, a ``pad_value`` that is not an
            integer, or a ``corpus`` that is neither a pair nor a reader.
        IndexError
            An index outside 0..len(self)-1.
        ValueError
            ``indices`` that are not 1-D, a ``corpus`` whose sequences are
            not the ones these samples were built from, or a token id that
            int64 cannot hold, as :meth:`sample` refuses them.
        """
        count = len(self)
        wanted = _sample_numbers(indices, count)
        pad = _pad_value(pad_value)
        reader = _Corpus(corpus, self.lengths)
        out = np.full((wanted.shape[0], self.sequence_length + self._extra()), pad, np.int64)
        order = self.shuffle_index
        for row, index in enumerate(wanted.tolist()):
            self._read_into(int(order[index]), reader, out[row])
        return out

    def batch(
        self,
        indices: Any,
        corpus: Any,
        *,
        eod: int,
        reset_position_ids: bool = False,
        reset_attention_mask: bool = False,
        eod_mask_loss: bool = False,
        pad_value: int = -1,
        attention_mask: bool = False,
    ) -> GPTBatch:
        """A batch of samples as ``GPTDataset.__getitem__`` returns them: :func:`gpt_batch`.

        Parameters
        ----------
        indices : array_like of int, shape (B,)
            Which samples, each 0 to ``len(self) - 1``, in shuffled order.
        corpus : tuple (tokens, offsets) or reader
            The corpus the lengths came from, as :meth:`sample` takes it.
        eod : int
            The end-of-document token id (``tokenizer.eod``).
        reset_position_ids, reset_attention_mask, eod_mask_loss : bool
            Megatron's switches of the same names.
        pad_value : int
            The padding token id (Megatron's is -1 unless its tokenizer has a pad).
        attention_mask : bool
            Also build the dense (B, 1, S, S) mask.

        Returns
        -------
        GPTBatch
            See :func:`gpt_batch`.

        Raises
        ------
        TypeError
            Indices that are not integers, an ``eod`` or ``pad_value`` that is
            not an integer, a switch that is not a bool, or a corpus that is
            neither a pair nor a reader.
        IndexError
            An index outside 0..len(self)-1 (the message names it).
        ValueError
            As :func:`gpt_batch` refuses them: indices that are not 1-D, an
            ``eod`` outside the corpus's token dtype, a corpus whose sequences
            are not those the samples were built from, a ``.bin`` that changed
            while it was read.
        """
        return gpt_batch(
            self,
            indices,
            corpus,
            eod=eod,
            reset_position_ids=reset_position_ids,
            reset_attention_mask=reset_attention_mask,
            eod_mask_loss=eod_mask_loss,
            pad_value=pad_value,
            attention_mask=attention_mask,
        )

    def _extra(self) -> int:
        return 1 if self.add_extra_token_to_sequence else 0

    def _read_into(self, number: int, corpus: _Corpus, out: np.ndarray) -> None:
        """Sample ``number`` of the sample index (not shuffled) into ``out``.

        Each sequence it reads is checked against the lengths the indices
        were built from (O(sequences in the sample)); whatever the lengths,
        the tokens read must fill ``out`` exactly, or stop at the end of the
        document index's last sequence (the kept last sample, padded)."""
        extra = self._extra()
        width = out.shape[0]
        (first, first_offset), (last, last_offset) = self.sample_index[number : number + 2].tolist()
        if not 0 <= first <= last < self.document_index.shape[0]:
            raise ValueError(
                f"sample_index: sample {number} spans positions {first}..{last}, which are not "
                f"positions of the document index (0..{self.document_index.shape[0] - 1})"
            )
        filled = 0
        stop = length = 0
        sequences = self.document_index[first : last + 1].tolist()
        for position, sequence in enumerate(sequences, first):
            length = corpus.length(sequence)
            start = first_offset if position == first else 0
            stop = last_offset + extra if position == last else length
            if not 0 <= start <= stop <= length:
                raise ValueError(
                    f"corpus: sequence {sequence} holds {length} tokens, but these samples read "
                    f"its tokens {start}..{stop - 1}: the corpus is not the one whose lengths "
                    "built them"
                )
            if filled + stop - start > width:
                raise ValueError(
                    f"corpus: sequence {sequence} holds {length} tokens, and sample {number} "
                    f"would read {filled + stop - start} tokens or more of it and the sequences "
                    f"before, past its {width}: the corpus is not the one whose lengths built "
                    "these samples"
                )
            tokens = corpus.read(sequence, start, stop)
            out[filled : filled + tokens.shape[0]] = tokens
            filled += tokens.shape[0]
        ends_the_corpus = last == self.document_index.shape[0] - 1 and stop == length
        if filled < width and not ends_the_corpus:
            sequence = sequences[-1]
            raise ValueError(
                f"corpus: sample {number} reads {filled} tokens, not {width}, ending in sequence "
                f"{sequence} of {length} tokens: the corpus is not the one whose lengths built "
                "these samples"
            )


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
    """The document, sample and shuffle index of Megatron-LM's ``GPTDataset``, element for element.

    What ``GPTDataset(indexed_dataset, path, documents, num_samples, split,
    config)`` builds (``document_index``, ``sample_index``,
    ``shuffle_index``), from the corpus's sequence lengths alone, with
    ``config.sequence_length``, ``config.random_seed`` and
    ``config.add_extra_token_to_sequence``. One
    ``numpy.random.RandomState(seed)`` drives the shuffles in Megatron's
    order, so the arrays are equal to Megatron's.

    Parameters
    ----------
    lengths : array_like of int, shape (N,)
        Every sequence's length in tokens (an indexed dataset's
        ``sequence_lengths``); any integer dtype, values >= 0. The corpus may
        hold any number of tokens below 2^62.
    sequence_length : int
        Tokens per sample (the extra token aside), >= 1.
    num_samples : int or None
        The samples wanted, >= 0: the epochs are the fewest whose tokens hold
        ``num_samples * sequence_length`` plus the extra token, as
        ``GPTDataset`` counts them. None: one epoch (or ``num_epochs``). The
        samples built are all the epochs hold (at least ``num_samples``).
    num_epochs : int or None
        The epochs, >= 1, instead of ``num_samples``.
    seed : int
        ``config.random_seed``: the ``RandomState`` seed, 0..2^32-1.
    documents : array_like of int or None
        The split's sequence ids (``GPTDataset``'s ``indexed_indices``), each
        in 0..N-1; None: every sequence, in order.
    add_extra_token_to_sequence : bool
        Samples of ``sequence_length + 1`` tokens, neighbours sharing one.
    drop_last_partial_sequence : bool
        Drop the last sample when the epochs' tokens cannot fill it (what
        ``GPTDataset`` does except for a validation split with
        ``drop_last_partial_validation_sequence=False``). False keeps it,
        counted as Megatron counts it (in single-precision floats), and
        :meth:`GPTSamples.sample` pads it.
    separate_final_epoch : bool or None
        Shuffle the last epoch's sequences and samples apart from the rest.
        None: as ``GPTDataset`` decides, when ``num_samples`` leaves the last
        epoch under 80% of an epoch's samples (never with ``num_epochs`` or
        one epoch). True with one epoch is the same as False.

    Returns
    -------
    GPTSamples
        The three indices. Dtypes are Megatron's: ``document_index`` int32,
        ``sample_index`` int32, ``shuffle_index`` uint32; each is int64
        instead where Megatron's would overflow (sequence ids past 2^31 - 1
        in ``document_index``, where Megatron's cast wraps them; positions or
        lengths past 2^31 - 1 in ``sample_index``, as Megatron does; 2^32 - 2
        samples or more in ``shuffle_index``, as Megatron does).

    Raises
    ------
    TypeError
        ``lengths`` or ``documents`` that are not integers, a count, seed or
        flag of the wrong type.
    ValueError
        Empty, negative or non-1-D ``lengths`` or ``documents``, a document
        id outside 0..N-1, documents that hold no tokens, a count below its
        minimum, a seed outside 0..2^32-1, both ``num_samples`` and
        ``num_epochs``, or indices too large to build.
    """
    seq = v.positive_int(sequence_length, "sequence_length")
    extra = 1 if v.flag(add_extra_token_to_sequence, "add_extra_token_to_sequence") else 0
    drop_last = v.flag(drop_last_partial_sequence, "drop_last_partial_sequence")
    separate_given = None
    if separate_final_epoch is not None:
        separate_given = v.flag(separate_final_epoch, "separate_final_epoch")
    wanted = None if num_samples is None else v.non_negative_int(num_samples, "num_samples")
    epochs_given = None if num_epochs is None else v.positive_int(num_epochs, "num_epochs")
    if wanted is not None and epochs_given is not None:
        raise ValueError(
            f"give num_samples or num_epochs, not both; got num_samples={wanted} and "
            f"num_epochs={epochs_given}"
        )
    state = _seed_state(seed)
    # the samples' own copy (read-only once built): the lengths they read corpora against
    lens = _lengths(lengths, private=True)
    # int64 once: both kernel calls below take them so without another copy
    docs = None if documents is None else v.kernel_array(_ids(documents, "documents"), np.int64)
    count = lens.shape[0] if docs is None else docs.shape[0]
    tokens_per_epoch = _core.document_tokens(lens, docs)
    if tokens_per_epoch == 0:
        raise ValueError(
            f"documents: the {count} sequences of the split hold no tokens; samples need at least 1"
        )
    if wanted is not None:
        epochs = epochs_for(wanted, seq, extra, tokens_per_epoch)
    else:
        epochs = 1 if epochs_given is None else epochs_given
    if wanted is not None:
        asked = f"num_samples={wanted} needs {epochs} epochs of {tokens_per_epoch} tokens: "
    else:
        asked = f"num_epochs={epochs}: "
    v.check_sizes(asked + "the document index (epochs x documents)", epochs, count)
    total = epochs * tokens_per_epoch
    n = sample_count(total, seq, extra, drop_last)
    v.check_sizes(asked + "the sample index (samples x sequence_length)", n + 2, seq)
    separate = separate_given
    if separate is None:
        separate = wanted is not None and final_epoch_is_separate(
            wanted, epochs, seq, extra, tokens_per_epoch
        )
    separate = separate and epochs > 1
    before_final = ((epochs - 1) * tokens_per_epoch - extra) // seq if separate else 0
    wide_documents = _max_id(lens, docs) > INT32_MAX
    wide_samples = max(epochs * count, _max_length(lens)) > INT32_MAX
    key, pos = state
    document_index, sample_index, shuffle_index = _core.gpt_indices(
        lens,
        docs,
        epochs,
        separate,
        before_final,
        seq,
        extra,
        n,
        key,
        pos,
        wide_documents,
        wide_samples,
        n >= SHUFFLE_WIDE_FROM,
    )
    lens.setflags(write=False)
    return GPTSamples(
        document_index, sample_index, shuffle_index, epochs, seq, bool(extra), lengths=lens
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
    """Megatron-LM's sample index over a document index, as ``helpers.build_sample_idx`` builds it.

    Equal element for element to ``megatron.core.datasets.helpers.
    build_sample_idx(lengths, document_index, sequence_length, num_epochs,
    tokens_per_epoch, drop_last_partial_sequence,
    add_extra_token_to_sequence)``, and takes the same arguments.

    Parameters
    ----------
    lengths : array_like of int, shape (N,)
        Every sequence's length in tokens (values >= 0 where
        ``document_index`` reads them).
    document_index : array_like of int, shape (M,)
        The sequences in the order the samples read them, each in 0..N-1
        (:attr:`GPTSamples.document_index`).
    sequence_length : int
        Tokens per sample (the extra token aside), >= 1.
    num_epochs : int
        The epochs ``document_index`` lays out, >= 1.
    tokens_per_epoch : int
        The tokens of one epoch, >= 1; with ``num_epochs``, it sets how many
        samples there are (``(num_epochs * tokens_per_epoch - extra) //
        sequence_length``, or its ceiling in single-precision floats when the
        last partial sample is kept). Samples past the tokens
        ``document_index`` holds end at its last sequence, as Megatron's do.
    drop_last_partial_sequence : bool
        Drop the last sample when the tokens cannot fill it.
    add_extra_token_to_sequence : bool
        Samples of ``sequence_length + 1`` tokens, neighbours sharing one.

    Returns
    -------
    ndarray, shape (samples + 1, 2)
        (position in ``document_index``, offset in its sequence) where each
        sample starts; int32 unless ``M`` or a length passes 2^31 - 1, then
        int64 (Megatron's rule).

    Raises
    ------
    TypeError
        ``lengths`` or ``document_index`` that are not integers, or a count
        or flag of the wrong type.
    ValueError
        Empty or non-1-D ``lengths`` or ``document_index``, a document id
        outside 0..N-1, a negative length, a count below its minimum, or a
        sample index too large to build.
    """
    seq = v.positive_int(sequence_length, "sequence_length")
    epochs = v.positive_int(num_epochs, "num_epochs")
    per_epoch = v.positive_int(tokens_per_epoch, "tokens_per_epoch")
    drop_last = v.flag(drop_last_partial_sequence, "drop_last_partial_sequence")
    extra = 1 if v.flag(add_extra_token_to_sequence, "add_extra_token_to_sequence") else 0
    lens = _lengths(lengths)
    docs = _ids(document_index, "document_index")
    if docs.dtype != np.int32:
        docs = v.kernel_array(docs, np.int64)
    n = sample_count(epochs * per_epoch, seq, extra, drop_last)
    asked = f"num_epochs x tokens_per_epoch = {epochs * per_epoch} tokens: "
    v.check_sizes(asked + "the sample index (samples x sequence_length)", n + 2, seq)
    wide = max(docs.shape[0], _max_length(lens)) > INT32_MAX
    result: np.ndarray = _core.sample_index(lens, docs, seq, extra, n, wide)
    return result


# -- Megatron's arithmetic (gpt_dataset.py and helpers.cpp) ------------------------------


def epochs_for(num_samples: int, sequence_length: int, extra: int, tokens_per_epoch: int) -> int:
    """The fewest epochs (>= 1) whose tokens hold num_samples samples and the extra token."""
    needed = num_samples * sequence_length + extra
    return max(1, -(-needed // tokens_per_epoch))


def sample_count(tokens: int, sequence_length: int, extra: int, drop_last: bool) -> int:
    """The samples in ``tokens`` tokens, as build_sample_idx counts them: the last
    partial one kept is counted as its C++ does, ceil(float(tokens - extra) / L)
    in single precision (so large counts round as Megatron's do)."""
    if drop_last:
        return (tokens - extra) // sequence_length
    single = np.array([tokens - extra], dtype=np.int64).astype(np.float32)
    quotient = single / np.float32(sequence_length)
    return math.ceil(float(quotient[0]))


def final_epoch_is_separate(
    num_samples: int, epochs: int, sequence_length: int, extra: int, tokens_per_epoch: int
) -> bool:
    """GPTDataset's rule: the final epoch is shuffled apart when its samples are
    under int(0.8 x an epoch's samples)."""
    if epochs == 1:
        return False
    before_final = ((epochs - 1) * tokens_per_epoch - extra) // sequence_length
    per_epoch = (tokens_per_epoch - extra) // sequence_length
    return num_samples - before_final < int(FINAL_EPOCH_THRESHOLD * per_epoch)


# -- argument checks -------------------------------------------------------------------


def _seed_state(seed: Any) -> tuple[np.ndarray, int]:
    """The MT19937 words and position of numpy.random.RandomState(seed)."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        what = f"{type(seed).__name__} {seed!r}"
        raise TypeError(f"seed must be an integer in 0..2**32-1; got {what}")
    value = operator.index(seed)
    if not 0 <= value <= SEED_MAX:
        raise ValueError(f"seed must be an integer in 0..2**32-1; got {value}")
    state: tuple[Any, ...] = tuple(np.random.RandomState(value).get_state(legacy=True))
    return np.ascontiguousarray(state[1], dtype=np.uint32), int(state[2])


def _integers(values: Any, name: str) -> np.ndarray:
    """A non-empty 1-D integer array (any integer dtype, bools refused)."""
    a = v.as_array(values, name)
    if a.dtype.kind == "b":
        raise TypeError(f"{name} must be integers; got a bool array")
    if a.dtype.kind not in "iu":
        if a.dtype.kind == "f" and a.size == 0 and isinstance(values, (list, tuple)):
            a = a.astype(np.int64)  # [] is an empty float array to NumPy
        else:
            raise TypeError(f"{name} must be integers; got dtype {a.dtype}")
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {a.shape}")
    if a.shape[0] == 0:
        raise ValueError(f"{name} must not be empty")
    if a.dtype.kind == "u" and a.dtype.itemsize == 8 and int(a.max()) > 2**63 - 1:
        raise ValueError(f"{name}: {int(a.max())} passes 2^63 - 1")
    return a


def _lengths(lengths: Any, private: bool = False) -> np.ndarray:
    """Sequence lengths as the kernels read them: int32 or int64, C-contiguous;
    ``private``: an array that shares no memory with ``lengths`` (a copy only
    where the conversion made none)."""
    a = _integers(lengths, "lengths")
    if (a.dtype.itemsize == 4 and a.dtype.kind == "i") or a.dtype == np.int64:
        result = v.kernel_array(a, a.dtype.newbyteorder("="))
    else:
        result = v.kernel_array(a, np.int64)
    if private and np.may_share_memory(result, a):
        result = result.copy()
    return result


def _ids(ids: Any, name: str) -> np.ndarray:
    """Sequence ids as int32 (kept) or int64."""
    a = _integers(ids, name)
    if a.dtype.kind == "i" and a.dtype.itemsize == 4:
        return v.kernel_array(a, np.dtype(np.int32))
    return v.kernel_array(a, np.int64)


def _max_length(lengths: np.ndarray) -> int:
    """The longest sequence, where it may pass 2^31 - 1 (int32 lengths cannot)."""
    return int(lengths.max()) if lengths.dtype.itemsize > 4 else 0


def _max_id(lengths: np.ndarray, documents: np.ndarray | None) -> int:
    """The largest sequence id of the document index, where it may pass 2^31 - 1."""
    last = int(lengths.shape[0]) - 1
    if last <= INT32_MAX or documents is None:
        return last
    return int(documents.max())


def _sample_number(i: Any, count: int, name: str) -> int:
    if isinstance(i, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer; got bool {i!r}")
    try:
        index = operator.index(i)
    except TypeError:
        raise TypeError(f"{name} must be an integer; got {type(i).__name__} {i!r}") from None
    if not 0 <= index < count:
        raise IndexError(f"{name} = {index} is out of range for {count} samples (0..{count - 1})")
    return index

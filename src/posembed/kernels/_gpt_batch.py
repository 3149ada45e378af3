"""gpt_batch: a batch of Megatron-LM GPT samples as a trainer consumes it.

What ``GPTDataset.__getitem__`` returns for each sample (tokens, labels,
loss mask, position ids, the dense attention mask when asked for), stacked,
and the document boundaries that variable-length attention kernels take
(``cu_seqlens``, flat over the batch and padded per sample).
"""

from __future__ import annotations

import numbers
import operator
import os
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from posembed import _core
from posembed.kernels import _validate as v
from posembed.kernels._sample_reads import _Corpus, _pad_value, _sample_numbers

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class GPTBatch:
    """A batch of GPT samples, what :func:`gpt_batch` returns.

    ``B`` is the number of samples, ``S`` the sequence length. Rows are
    ``GPTDataset.__getitem__``'s outputs for each sample, stacked as a
    PyTorch ``default_collate`` stacks them. ``tokens``, ``labels``,
    ``loss_mask``, ``position_ids`` and ``cu_seqlens_padded`` are views of
    one block of memory (each C-contiguous and 64-byte aligned); once all
    five are freed, the block is kept for the next batch of the same shape,
    so that a training loop reuses memory already written.

    Attributes
    ----------
    tokens : ndarray of int64, shape (B, S)
        The inputs (padding replaced by 0).
    labels : ndarray of int64, shape (B, S)
        The tokens shifted by one (padding replaced by 0).
    loss_mask : ndarray of float32, shape (B, S)
        1 where the loss counts; 0 at padded labels, and at end-of-document
        tokens with ``eod_mask_loss``.
    position_ids : ndarray of int64, shape (B, S)
        0..S-1, or restarting at 0 after each end-of-document token with
        ``reset_position_ids``.
    cu_seqlens : ndarray of int32, shape (D + 1,)
        Where each of the batch's D documents starts in the flattened
        ``B * S`` tokens, and ``B * S``: what variable-length attention
        (``flash_attn_varlen_func``, Transformer Engine's THD format) takes.
        With ``reset_attention_mask`` a document ends after each
        end-of-document token; without it, each sample is one document
        (``0, S, 2S, ..., B*S``), as its causal mask is.
    cu_seqlens_padded : ndarray of int32, shape (B, S + 1)
        Per sample: its boundaries (0 first, S last), then S repeated up to
        S + 1 entries, so that every batch has the same shape; as Megatron's
        ``inter_document_masking`` pads each sample's ``cu_seqlens``.
    max_seqlen : int
        The longest document of the batch.
    attention_mask : ndarray of bool, shape (B, 1, S, S), or None
        Megatron's dense mask, True where attention is masked; built only
        when asked for (``attention_mask=True``).
    """

    tokens: np.ndarray
    labels: np.ndarray
    loss_mask: np.ndarray
    position_ids: np.ndarray
    cu_seqlens: np.ndarray
    cu_seqlens_padded: np.ndarray
    max_seqlen: int
    attention_mask: np.ndarray | None = None


# What gpt_batch reads of the samples (a GPTSamples, which imports this module).
SAMPLES_FIELDS = (
    "document_index",
    "sample_index",
    "shuffle_index",
    "sequence_length",
    "add_extra_token_to_sequence",
    "lengths",
)


def gpt_batch(
    samples: Any,
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
    """A batch of samples as ``GPTDataset.__getitem__`` returns them, with document boundaries.

    Row ``r`` equals ``GPTDataset.__getitem__(indices[r])`` element for
    element (``tokens``, ``labels``, ``loss_mask``, ``position_ids`` and,
    when asked for, ``attention_mask``) for a dataset whose config has
    ``reset_position_ids``, ``reset_attention_mask``, ``eod_mask_loss`` and
    ``tokenizer.eod`` given here. Without the extra token
    (``samples.add_extra_token_to_sequence`` False), labels are the tokens
    rolled by one with the last one padding. Padding (``pad_value`` in the
    tokens or labels: the kept last sample's fill, or the last label without
    the extra token) is replaced by 0 and its loss masked, as Megatron does.

    Parameters
    ----------
    samples : GPTSamples
        What :func:`gpt_samples` built.
    indices : array_like of int, shape (B,)
        Which samples, each 0 to ``len(samples) - 1``, in shuffled order.
    corpus : tuple (tokens, offsets) or reader
        The corpus the samples were built from, as :meth:`GPTSamples.sample`
        takes it. Tokens in memory and an :class:`IndexedCorpus` on local
        disk are read by the kernel on worker threads (the ``.bin`` copied
        out of a read-only mapping kept across calls, every copy guarded: a
        page lost because the file shrank is read again with a positional
        read, which reports it); other readers through their ``.read``.
    eod : int
        The end-of-document token id (``tokenizer.eod``); it must fit the
        corpus's token dtype.
    reset_position_ids : bool
        Positions restart at 0 after each end-of-document token.
    reset_attention_mask : bool
        Documents end after each end-of-document token: attention stays
        inside them (``attention_mask``) and ``cu_seqlens`` marks them.
    eod_mask_loss : bool
        No loss at end-of-document tokens.
    pad_value : int
        The padding token id: Megatron's is -1 unless its tokenizer has a
        ``pad``.
    attention_mask : bool
        Also build the dense (B, 1, S, S) mask (S * S bytes a sample; the
        other outputs take O(S)).

    Returns
    -------
    GPTBatch

    Raises
    ------
    TypeError
        ``samples`` that is not a :class:`GPTSamples`, indices that are not
        integers, an ``eod`` or ``pad_value`` that is not an integer, a
        switch that is not a bool, or a corpus that is neither a pair nor a
        reader.
    IndexError
        An index outside 0..len(samples)-1 (the message names it).
    ValueError
        Indices that are not 1-D; an ``eod`` outside int64 or the corpus's
        token dtype; a corpus whose sequences are not those the samples were
        built from (as :meth:`GPTSamples.samples` refuses it); a ``.bin``
        that changed while it was read; a batch of 2^31 tokens or more.
    """
    options = {
        "eod": eod,
        "reset_position_ids": reset_position_ids,
        "reset_attention_mask": reset_attention_mask,
        "eod_mask_loss": eod_mask_loss,
        "pad_value": pad_value,
        "attention_mask": attention_mask,
    }
    key = _key(samples, corpus, options)
    kept = _kept(key, samples, corpus)
    if kept is not None:  # checked when it was made: only the indices are new
        return kept(indices)
    _check_samples(samples)
    wanted = _wanted(indices, len(samples))
    return _maker(key, samples, corpus, options).parts(wanted, 0)[0]


def _key(samples: Any, corpus: Any, options: dict[str, Any]) -> tuple[Any, ...]:
    """What a kept maker is kept under: the objects' ids, the options and their types."""
    mask = options["attention_mask"]
    names = ("eod", "reset_position_ids", "reset_attention_mask", "eod_mask_loss", "pad_value")
    values = tuple(options[name] for name in names)
    return (id(samples), id(corpus), mask, *values, *map(type, (mask, *values)))


def _batch_maker(samples: Any, corpus: Any, options: dict[str, Any]) -> _BatchMaker:
    """The maker that :func:`gpt_batch` reads these samples and corpus with
    (``options``: its six, by name): the kept one where it reads what a new
    one would, else a new one, kept where it may be; raises what gpt_batch
    raises for them."""
    key = _key(samples, corpus, options)
    kept = _kept(key, samples, corpus)
    if kept is not None:
        return kept
    _check_samples(samples)
    return _maker(key, samples, corpus, options)


def _wanted(indices: Any, count: int) -> np.ndarray:
    """The indices as int64 sample numbers, checked, in a copy of their own."""
    if (
        type(indices) is np.ndarray
        and indices.ndim == 1
        and indices.dtype.kind in "iu"
        and indices.dtype.itemsize <= 8
    ):
        wanted = indices.astype(np.int64)  # a copy; uint64 past 2^63 wraps below 0
        if wanted.size == 0 or (wanted.min() >= 0 and wanted.max() < count):
            return wanted
    return np.array(_sample_numbers(indices, count), dtype=np.int64, copy=True)


# Makers of the batches of (samples, an IndexedCorpus-like reader on local
# disk) that gpt_batch built, kept while both live, so that a loop asking
# for batch after batch checks the samples and the corpus once. Kept only
# where the maker reads the caller's own arrays (none converted), and used
# only while the samples' arrays and the corpus's offsets and tokens are the
# very objects it was built from: a hit reads what a fresh maker would read.
_MAKERS: dict[tuple[Any, ...], tuple[Any, Any, _BatchMaker, tuple[Any, ...]]] = {}
_MAKERS_KEPT = 8


def _kept(key: tuple[Any, ...], samples: Any, corpus: Any) -> _BatchMaker | None:
    """The kept maker of these arguments (``key``: the objects' ids, the
    options and their types), where it reads exactly what a new one would."""
    try:
        kept = _MAKERS.get(key)
    except TypeError:  # an unhashable option: gpt_batch's checks say what is wrong
        return None
    if kept is None:
        return None
    samples_ref, corpus_ref, maker, parts = kept
    if (
        samples_ref() is samples
        and corpus_ref() is corpus
        and all(a is b for a, b in zip(parts, _parts(samples, corpus), strict=True))
    ):
        return maker
    return None


def _parts(samples: Any, corpus: Any) -> tuple[Any, ...]:
    """What a kept maker read, which must be the very same objects for a hit."""
    return (
        samples.document_index,
        samples.sample_index,
        samples.shuffle_index,
        samples.lengths,
        getattr(corpus, "offsets", None),
        getattr(corpus, "tokens", None),
    )


def _maker(key: tuple[Any, ...], samples: Any, corpus: Any, options: dict[str, Any]) -> _BatchMaker:
    """A new _BatchMaker of these arguments, kept under ``key`` when it may be."""
    maker = _BatchMaker(samples, corpus, **options)
    if maker._cacheable(samples, corpus):
        try:
            refs = [weakref.ref(o, lambda _: _MAKERS.pop(key, None)) for o in (samples, corpus)]
        except TypeError:  # no weak references to one of them (a tuple)
            return maker
        for oldest in list(_MAKERS)[: len(_MAKERS) - _MAKERS_KEPT + 1]:  # one step: threads
            _MAKERS.pop(oldest, None)
        _MAKERS[key] = (refs[0], refs[1], maker, _parts(samples, corpus))
    return maker


def _check_samples(samples: Any) -> None:
    if not all(hasattr(samples, name) for name in SAMPLES_FIELDS) or not callable(
        getattr(samples, "samples", None)
    ):
        raise TypeError(
            f"samples must be the GPTSamples that gpt_samples built; got {type(samples).__name__}"
        )


class _BatchMaker:
    """Batches of one GPTSamples read from one corpus, all but the indices checked once.

    ``_BatchMaker(samples, corpus, *, eod, reset_position_ids=False,
    reset_attention_mask=False, eod_mask_loss=False, pad_value=-1,
    attention_mask=False)`` checks the arguments as :func:`gpt_batch` checks
    them (the same errors) and keeps what the kernel reads; then
    ``maker(indices)`` returns what ``gpt_batch(samples, indices, corpus,
    ...)`` returns, element for element, checking only the indices. For a
    loader that reads many batches of the same samples and corpus.

    The contract:

    * The samples' arrays, the corpus's offsets and tokens (a pair) and the
      samples' lengths are kept by reference where the kernel reads them as
      they are (int32 or int64, uint32 for the shuffle index, C-contiguous,
      aligned, native byte order: what :func:`gpt_samples` and
      :class:`IndexedCorpus` give); others are converted once, here, and
      later changes to the originals are then not seen. Change none of
      them between calls: results are only promised for the arrays as they
      were when the maker was built.
    * Nothing the kernel reads is trusted: each index and offset is read
      once and checked (against the corpus's tokens and the lengths the
      samples were built from) on every call, so arrays rewritten meanwhile,
      even by another thread during a call, give an error or a batch, never
      a crash or a read outside the corpus.
    * A ``.bin`` is checked unchanged before each call's reads (its path
      looked up again) and after them (through the descriptor read): a file
      that shrank, was rewritten, replaced or removed is a ValueError, as
      :func:`gpt_batch` raises it. The descriptor and the file's mapping are
      kept across calls while the file at the path stays the same one.
    * Nothing changes after construction: calls may run on several threads
      at once. A reader without a local file is read through its ``.read``
      on the calling thread, as :meth:`GPTSamples.samples` reads it.
    * The outputs' memory comes back to a small cache when a batch is
      freed (see :class:`GPTBatch`): a loop that drops each batch before
      asking for the next reuses memory already written.
    """

    def __init__(
        self,
        samples: Any,
        corpus: Any,
        *,
        eod: int,
        reset_position_ids: bool = False,
        reset_attention_mask: bool = False,
        eod_mask_loss: bool = False,
        pad_value: int = -1,
        attention_mask: bool = False,
    ) -> None:
        _check_samples(samples)
        flags = {
            name: v.flag(value, name)
            for name, value in (
                ("reset_position_ids", reset_position_ids),
                ("reset_attention_mask", reset_attention_mask),
                ("eod_mask_loss", eod_mask_loss),
                ("attention_mask", attention_mask),
            )
        }
        pad = _pad_value(pad_value)
        token = _eod(eod)
        self._count = len(samples)
        self._sequence_length = samples.sequence_length
        self._pad = pad
        reader = _Corpus(corpus, samples.lengths)  # the checks of .samples(), their messages
        lengths = samples.lengths
        if lengths is not None:
            lengths = _index(lengths, "lengths")
        self._lengths = lengths
        document_index = _index(samples.document_index, "document_index")
        sample_index = _index(samples.sample_index, "sample_index", rows=True)
        shuffle_index = _index(samples.shuffle_index, "shuffle_index", unsigned=True)
        # what _cacheable compares with the samples' own arrays
        self._kept = (document_index, sample_index, shuffle_index)
        self._offsets: np.ndarray | None = None
        pair = isinstance(corpus, (tuple, list))
        file = None if pair else _token_file(corpus)
        # a reader without a local file is read through .samples(); otherwise
        # neither object is held (a kept maker must not keep them alive)
        self._read_through = (samples, corpus) if file is None and not pair else None
        dtype = getattr(corpus, "dtype", None)  # a reader's token dtype, where it tells it
        if file is None and isinstance(dtype, np.dtype) and dtype.kind in "iu":
            _check_eod_fits(token, dtype)
        tokens: np.ndarray | None = None
        if pair:
            tokens = v.as_array(corpus[0], "corpus tokens")
            _check_eod_fits(token, tokens.dtype)
            if tokens.dtype.byteorder not in "=|":
                tokens = tokens.astype(tokens.dtype.newbyteorder("="))
            tokens = v.kernel_array(tokens)
            self._offsets = v.kernel_array(reader._offsets, np.int64)
        elif file is not None:
            _check_eod_fits(token, np.dtype(file.dtype))
            self._offsets = v.kernel_array(reader._offsets, np.int64)
        self._file = file is not None
        self._reader = _core.GPTBatchReader(
            document_index,
            sample_index,
            shuffle_index,
            samples.sequence_length,
            1 if samples.add_extra_token_to_sequence else 0,
            token,
            pad,
            flags["reset_position_ids"],
            flags["reset_attention_mask"],
            flags["eod_mask_loss"],
            flags["attention_mask"],
            self._offsets if self._read_through is None else None,
            lengths if self._read_through is None else None,
            tokens,
            "" if file is None else str(file.path),
            None if file is None else np.dtype(file.dtype),
            0 if file is None else int(file.offset),
            False if file is None else bool(getattr(file, "swap", False)),
            0 if file is None else int(file.count),
            None if file is None else _stamp(file),
        )

    def __call__(self, indices: Any) -> GPTBatch:
        """The batch of ``indices`` (see :func:`gpt_batch`)."""
        return self.parts(indices, 0)[0]

    def parts(self, indices: Any, part_rows: int) -> list[GPTBatch]:
        """The batches of each ``part_rows`` indices in turn (0: one batch of
        all), read in one call, each equal to
        ``self(indices[j * part_rows:(j + 1) * part_rows])``."""
        out = None
        if self._read_through is None and type(indices) is np.ndarray:
            out = self._reader(indices, part_rows)  # None: not all sample numbers
        if out is None:
            wanted = _wanted(indices, self._count)  # their error, if any
            text = None
            seq = self._sequence_length
            if wanted.shape[0] * seq > INT32_MAX:  # before any token is read
                raise ValueError(
                    f"indices: {wanted.shape[0]} samples of {seq} tokens are "
                    f"{wanted.shape[0] * seq} tokens, but cu_seqlens are int32: a batch must "
                    "hold fewer than 2^31 tokens"
                )
            if self._read_through is not None:
                samples, corpus = self._read_through
                text = samples.samples(wanted, corpus, pad_value=self._pad)
            out = self._reader(wanted, part_rows, text)
            assert out is not None  # checked sample numbers, an int64 array
        return _cut_parts(out, part_rows)

    def reads_own_tokens(self) -> bool:
        """Whether its tokens are in memory or in a local file (not read
        through a reader's ``.read`` on the calling thread)."""
        return self._read_through is None

    def reads_alone(self) -> bool:
        """Whether a batch needs nothing of the caller's to be read: tokens in
        memory or in a local file, no dense attention mask."""
        return self._read_through is None and bool(self._reader.reads_alone())

    def read_ahead(self, order: Any, **plan: Any) -> Any:
        """Runs of micro-batches of ``order`` (a :class:`BatchOrder` over these
        samples) read ahead on native threads that never take the GIL, or
        None where this maker cannot read alone (a reader without a local
        file, a dense attention mask). ``plan``: what
        ``_core.GPTBatchAhead`` takes after the order (the iteration's first
        micro-step, its micro-batches, the runs, the readers and threads);
        its ``next()`` gives each run's (micro-batch numbers, samples, the
        kernel's tuple, cut with :func:`_cut_parts`)."""
        if not self.reads_alone():
            return None
        n, seed, shuffle = int(order.num_samples), int(order.seed), bool(order.shuffle)
        return _core.GPTBatchAhead(self._reader, n, seed, shuffle, **plan)

    def _cacheable(self, samples: Any, corpus: Any) -> bool:
        """Whether this maker reads a local file and the caller's own arrays,
        none converted (so that it reads what a new maker would)."""
        document_index, sample_index, shuffle_index = self._kept
        return (
            self._file
            and document_index is samples.document_index
            and sample_index is samples.sample_index
            and shuffle_index is samples.shuffle_index
            and self._lengths is samples.lengths
            and self._offsets is getattr(corpus, "offsets", None)
        )


_new_object = object.__new__


def _made(
    tokens: Any,
    labels: Any,
    loss: Any,
    positions: Any,
    flat: Any,
    padded: Any,
    longest: int,
    mask: Any,
) -> GPTBatch:
    """GPTBatch(...) of the kernel's own outputs, its fields set straight into
    the instance's dict: a frozen dataclass's ``__init__`` sets each through
    ``object.__setattr__``, which costs a read-ahead loop's caller more than
    the rest of taking a micro-batch. The same object, field for field."""
    batch = _new_object(GPTBatch)
    fields = batch.__dict__
    fields["tokens"] = tokens
    fields["labels"] = labels
    fields["loss_mask"] = loss
    fields["position_ids"] = positions
    fields["cu_seqlens"] = flat
    fields["cu_seqlens_padded"] = padded
    fields["max_seqlen"] = longest
    fields["attention_mask"] = mask
    return batch


def _cut_parts(out: tuple[Any, ...], part_rows: int) -> list[GPTBatch]:
    """The kernel's tuple cut into its parts of ``part_rows`` rows (0: one part)."""
    tokens, labels, loss, positions, flat, padded, longest, mask, starts, most = out
    rows = tokens.shape[0]
    if part_rows == 0 or part_rows == rows:
        return [_made(tokens, labels, loss, positions, flat, padded, longest, mask)]
    bounds = starts.tolist()
    parts = []
    lo = 0
    for j, longest_j in enumerate(most.tolist()):
        part = slice(lo, lo + part_rows)
        lo += part_rows
        parts.append(
            _made(
                tokens[part],
                labels[part],
                loss[part],
                positions[part],
                flat[bounds[j] : bounds[j + 1]],
                padded[part],
                longest_j,
                None if mask is None else mask[part],
            )
        )
    return parts


def _stamp(file: Any) -> tuple[int, int, int] | None:
    """The (size, modification time in ns, inode) a token file must keep, or None."""
    stamp = getattr(file, "stamp", None)
    if stamp is None:
        return None
    size, mtime, inode = (operator.index(x) for x in stamp)
    return (size, mtime, inode)


def _token_file(corpus: Any) -> Any:
    """The local token file behind a reader such as :class:`IndexedCorpus`
    (its ``tokens``: a file of ``count`` tokens of ``dtype`` at byte
    ``offset`` of ``path``, opened by ``open()`` as ``fd``), or None for a
    reader without one (a file in a store, any other reader): those are read
    through ``.read``."""
    file = getattr(corpus, "tokens", None)
    needed = ("copy", "open", "close", "check")
    if file is None or not all(callable(getattr(file, name, None)) for name in needed):
        return None
    if getattr(file, "url", None) is not None:  # in a store: no descriptor to read from
        return None
    path = getattr(file, "path", None)
    if not isinstance(path, (str, os.PathLike)) or not hasattr(file, "fd"):
        return None
    try:
        dtype = np.dtype(file.dtype)
        offset, total = operator.index(file.offset), operator.index(file.count)
    except (AttributeError, TypeError):
        return None
    if dtype.kind not in "iu" or offset < 0 or total < 0:
        return None
    return file


def _eod(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"eod must be an integer token id; got {type(value).__name__} {value!r}")
    token = operator.index(value)
    if not INT64_MIN <= token <= INT64_MAX:
        raise ValueError(f"eod must fit int64 (the samples' dtype); got {token}")
    return token


def _check_eod_fits(eod: int, dtype: np.dtype[Any]) -> None:
    info = np.iinfo(dtype)
    if not info.min <= eod <= info.max:
        raise ValueError(
            f"eod = {eod} is not a token id of the corpus's {dtype} tokens ({info.min}..{info.max})"
        )


def _index(a: Any, name: str, *, unsigned: bool = False, rows: bool = False) -> np.ndarray:
    """One of the samples' arrays as the kernel reads it: int32 (uint32 for
    the shuffle index) kept, anything else int64; C-contiguous."""
    array = np.asarray(a)
    if array.dtype.kind not in "iu" or array.ndim != (2 if rows else 1):
        shape = "(n + 1, 2)" if rows else "1-D"
        raise TypeError(
            f"samples.{name} must be a {shape} integer array; got {array.dtype} of shape "
            f"{array.shape}"
        )
    if rows and array.shape[1] != 2:
        raise TypeError(f"samples.{name} must have shape (n + 1, 2); got {array.shape}")
    kept = [np.dtype(np.int32), np.dtype(np.int64)] + ([np.dtype(np.uint32)] if unsigned else [])
    if array.dtype in kept:
        if array.dtype.isnative and array.flags.c_contiguous and array.flags.aligned:
            return array  # the caller's own array, as the kernel reads it
        return v.kernel_array(array, array.dtype.newbyteorder("="))
    if array.dtype == np.uint64 and array.size and int(array.max()) > INT64_MAX:
        raise ValueError(f"samples.{name}: {int(array.max())} passes 2^63 - 1")
    return v.kernel_array(array, np.int64)

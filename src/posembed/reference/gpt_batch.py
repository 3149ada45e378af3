"""Twin of posembed's gpt_batch: GPTDataset.__getitem__ of each sample, stacked, in plain NumPy.

Each sample's tokens are read as the samples twin reads them, then
``GPTDataset.__getitem__`` and ``_get_ltor_masks_and_position_ids`` are
restated step by step; the document boundaries (``cu_seqlens``) are the
ends of Megatron's ``reset_attention_mask`` documents: after each
end-of-document token.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from posembed.reference.samples import GPTSamples


@dataclass(frozen=True)
class GPTBatch:
    """Twin of :class:`posembed.GPTBatch`."""

    tokens: np.ndarray
    labels: np.ndarray
    loss_mask: np.ndarray
    position_ids: np.ndarray
    cu_seqlens: np.ndarray
    cu_seqlens_padded: np.ndarray
    max_seqlen: int
    attention_mask: np.ndarray | None = None


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
    """GPTDataset.__getitem__ of each sample, stacked, with the documents' boundaries.

    The twin of :func:`posembed.gpt_batch`.

    Parameters
    ----------
    samples : GPTSamples
        What ``gpt_samples`` built (posembed's or the twin's).
    indices : array_like of int, shape (B,)
        Which samples, in shuffled order.
    corpus : tuple (tokens, offsets) or reader
        The corpus the samples were built from.
    eod : int
        The end-of-document token id.
    reset_position_ids : bool
        Positions restart at 0 after each end-of-document token.
    reset_attention_mask : bool
        Documents end after each end-of-document token.
    eod_mask_loss : bool
        No loss at end-of-document tokens.
    pad_value : int
        The padding token id.
    attention_mask : bool
        Also build the dense (B, 1, S, S) mask.

    Returns
    -------
    GPTBatch

    Raises
    ------
    TypeError
        ``samples`` that are not samples, a switch that is not a bool, an
        ``eod`` that is not an integer, or what the samples twin refuses so.
    IndexError
        An index outside the samples.
    ValueError
        An ``eod`` outside int64 or the corpus's dtype, a batch of 2^31 tokens
        or more, or what the samples twin refuses so.
    """
    fields = ("document_index", "sample_index", "shuffle_index", "sequence_length", "lengths")
    if not all(hasattr(samples, name) for name in fields):
        raise TypeError("samples must be the GPTSamples that gpt_samples built")
    switches = (reset_position_ids, reset_attention_mask, eod_mask_loss, attention_mask)
    if not all(isinstance(switch, (bool, np.bool_)) for switch in switches):
        raise TypeError(
            "reset_position_ids, reset_attention_mask, eod_mask_loss and "
            "attention_mask must be True or False"
        )
    if isinstance(eod, (bool, np.bool_)) or not isinstance(eod, (int, np.integer)):
        raise TypeError("eod must be an integer token id")
    if not -(2**63) <= operator.index(eod) < 2**63:
        raise ValueError("eod must fit int64")
    dtype = getattr(corpus, "dtype", None)
    if isinstance(corpus, (tuple, list)) and len(corpus) == 2:
        dtype = getattr(corpus[0], "dtype", None)
    integers = isinstance(dtype, np.dtype) and dtype.kind in "iu"
    if integers and not np.iinfo(dtype).min <= eod <= np.iinfo(dtype).max:
        raise ValueError("eod must be a token id of the corpus's dtype")
    try:
        count = len(indices)
    except TypeError:
        count = 0
    if count * samples.sequence_length >= 2**31:
        raise ValueError("a batch must hold fewer than 2^31 tokens (cu_seqlens are int32)")
    twin = GPTSamples(
        samples.document_index,
        samples.sample_index,
        samples.shuffle_index,
        samples.num_epochs,
        samples.sequence_length,
        samples.add_extra_token_to_sequence,
        samples.lengths,
    )
    texts = twin.samples(indices, corpus, pad_value=pad_value)
    seq = samples.sequence_length
    rows = []
    for text in texts:
        rows.append(
            _one_sample(
                text,
                seq,
                samples.add_extra_token_to_sequence,
                eod,
                pad_value,
                reset_position_ids,
                reset_attention_mask,
                eod_mask_loss,
            )
        )
    count = len(rows)
    flat = [0]
    for r, row in enumerate(rows):
        flat.extend(r * seq + boundary for boundary in row["cu"][1:])
    padded = np.full((count, seq + 1), seq, dtype=np.int32)
    for r, row in enumerate(rows):
        padded[r, : len(row["cu"])] = row["cu"]
    lengths = np.diff(np.array(flat, dtype=np.int64))
    mask = None
    if attention_mask:
        mask = np.array([row["mask"] for row in rows], dtype=bool).reshape(count, 1, seq, seq)

    def stack(name: str, dtype: Any) -> np.ndarray:
        return np.array([row[name] for row in rows], dtype=dtype).reshape(count, seq)

    return GPTBatch(
        tokens=stack("tokens", np.int64),
        labels=stack("labels", np.int64),
        loss_mask=stack("loss_mask", np.float32),
        position_ids=stack("position_ids", np.int64),
        cu_seqlens=np.array(flat, dtype=np.int32),
        cu_seqlens_padded=padded,
        max_seqlen=int(lengths.max()) if lengths.size else 0,
        attention_mask=mask,
    )


def gpt_blend_batch(
    split: Any, indices: Any, corpora: Any, *, eod: int, **options: Any
) -> GPTBatch:
    """BlendedDataset.__getitem__ of each sample, stacked, with the documents' boundaries.

    The twin of :meth:`posembed.GPTBlendSplit.batch`: sample ``i`` of the
    split is sample ``dataset_sample_index[i]`` of corpus
    ``dataset_index[i]``, each row read alone by :func:`gpt_batch` from its
    own corpus, the rows stacked and their boundaries joined.

    Parameters
    ----------
    split : GPTBlendSplit
        A split of what ``gpt_blend`` built.
    indices : array_like of int, shape (B,)
        Which samples of the split.
    corpora : sequence of corpora
        One corpus per corpus of the blend, in its order (``corpora[d]`` as
        :func:`gpt_batch` takes it).
    eod : int
        The end-of-document token id.
    **options
        :func:`gpt_batch`'s switches and ``pad_value``.

    Returns
    -------
    GPTBatch

    Raises
    ------
    TypeError
        What :func:`gpt_batch` raises so for a row's sample and corpus.
    IndexError
        An index outside the split, or as :func:`gpt_batch` raises it.
    ValueError
        What :func:`gpt_batch` raises so for a row's sample and corpus.
    """
    wanted = [int(i) for i in np.asarray(indices, dtype=np.int64).reshape(-1)]
    if any(not 0 <= i < len(split) for i in wanted):
        raise IndexError(f"indices must be samples of the split, 0..{len(split) - 1}")
    if split.dataset_index is None or not wanted:
        return gpt_batch(split.datasets[0], wanted, corpora[0], eod=eod, **options)
    rows = []
    for i in wanted:
        d, local = int(split.dataset_index[i]), int(split.dataset_sample_index[i])
        rows.append(gpt_batch(split.datasets[d], [local], corpora[d], eod=eod, **options))
    seq = int(rows[0].tokens.shape[1])
    flat = [0]
    for r, row in enumerate(rows):
        flat.extend(r * seq + int(boundary) for boundary in row.cu_seqlens[1:])
    lengths = np.diff(np.array(flat, dtype=np.int64))
    masks = [row.attention_mask for row in rows if row.attention_mask is not None]

    def stack(name: str) -> np.ndarray:
        return np.concatenate([getattr(row, name) for row in rows])

    return GPTBatch(
        tokens=stack("tokens"),
        labels=stack("labels"),
        loss_mask=stack("loss_mask"),
        position_ids=stack("position_ids"),
        cu_seqlens=np.array(flat, dtype=np.int32),
        cu_seqlens_padded=stack("cu_seqlens_padded"),
        max_seqlen=int(lengths.max()),
        attention_mask=np.concatenate(masks) if masks else None,
    )


def _one_sample(
    text: np.ndarray,
    seq: int,
    extra: bool,
    eod: int,
    pad: int,
    reset_position_ids: bool,
    reset_attention_mask: bool,
    eod_mask_loss: bool,
) -> dict[str, Any]:
    """GPTDataset.__getitem__ of one sample's tokens ``text``."""
    if extra:
        tokens = text[:-1].copy()
        labels = text[1:].copy()
    else:
        tokens = text.copy()
        labels = np.roll(text, -1)
        labels[-1] = pad
    # _get_ltor_masks_and_position_ids, on the tokens as read
    is_eod = tokens == eod
    loss_mask = np.ones(seq, dtype=np.float32)
    if eod_mask_loss:
        loss_mask[is_eod] = 0.0
    position_ids = np.arange(seq, dtype=np.int64)
    causal = np.tril(np.ones((seq, seq), dtype=bool))
    previous = 0
    for i in np.flatnonzero(is_eod).tolist():
        if reset_attention_mask:
            causal[i + 1 :, : i + 1] = False
        if reset_position_ids:
            position_ids[i + 1 :] -= i + 1 - previous
            previous = i + 1
    # padding: no loss, and id 0 for the embedding
    loss_mask[labels == pad] = 0.0
    tokens[tokens == pad] = 0
    labels[labels == pad] = 0
    # documents: end after each end-of-document token (one per sample without the reset)
    cu = [0]
    if reset_attention_mask:
        cu.extend(int(i) + 1 for i in np.flatnonzero(is_eod) if i + 1 < seq)
    cu.append(seq)
    return {
        "tokens": tokens,
        "labels": labels,
        "loss_mask": loss_mask,
        "position_ids": position_ids,
        "cu": cu,
        "mask": ~causal,
    }

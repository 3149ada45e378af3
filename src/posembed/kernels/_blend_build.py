"""blend_build: Megatron-LM's split strings and blends of corpora, as its builder reads them.

The arithmetic of ``BlendedMegatronDatasetBuilder`` restated on arrays: a
split string ("969,30,1") turned into sequence ranges per split, the
samples asked of each corpus of a weighted blend, and the blend itself,
each corpus's ``GPTSamples`` built by :func:`gpt_samples` and the blend's
dataset index and dataset sample index by the blending kernels. Corpora
arrive as sequence lengths; reading them from indexed datasets is the
corpus layer's job.
"""

from __future__ import annotations

import itertools
import math
import numbers
import operator
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from posembed import _core
from posembed.kernels import _blend
from posembed.kernels import _validate as v
from posembed.kernels._gpt_batch import GPTBatch, _batch_maker, _cut_parts, gpt_batch
from posembed.kernels._runtime import get_num_threads
from posembed.kernels._sample_reads import _Corpus, _sample_numbers
from posembed.kernels._samples import GPTSamples, _lengths, _seed_state, gpt_samples

SPLITS = ("train", "valid", "test")
# Megatron's BlendedDataset holds at most 32,766 datasets: its dataset index is int16.
MAX_BLENDED = 32766
DEFAULT_SURPLUS = 0.005
_NUMBER = re.compile(r"[0-9]+(\.[0-9]*)?|\.[0-9]+")

# One corpus of a blend: its name (what Megatron's descriptions call its
# dataset_path; None where unknown) and its sequence lengths.
Corpus = tuple[Any, ...]


def parse_split(split: Any) -> list[float]:
    """Megatron's ``parse_and_normalize_split``: "969,30,1" -> [0.969, 0.03, 0.001].

    Up to three comma-separated numbers >= 0 (missing ones are 0), divided
    by their sum as Megatron divides them. Anything Megatron would misread
    (a minus sign it drops, letters, NaN, a fourth part, all zeros) is a
    ValueError naming the string.
    """
    if not isinstance(split, str):
        raise TypeError(
            f"split must be a string such as '969,30,1'; got {type(split).__name__} {split!r}"
        )
    allowed = "up to three comma-separated numbers >= 0 (train, valid, test), such as '969,30,1'"
    if not split.strip():
        raise ValueError(f"split {split!r} is empty; give {allowed}")
    parts = split.split(",")
    if len(parts) > len(SPLITS):
        raise ValueError(f"split {split!r} has {len(parts)} parts; give {allowed}")
    values = []
    for part in parts:
        text = part.strip()
        if not _NUMBER.fullmatch(text):
            raise ValueError(
                f"split {split!r}: {part.strip()!r} is not a number >= 0; give {allowed}"
            )
        values.append(float(text))
    values += [0.0] * (len(SPLITS) - len(values))
    total = sum(values)
    if not all(math.isfinite(value) for value in values) or not math.isfinite(total):
        raise ValueError(f"split {split!r}: its numbers must be finite; give {allowed}")
    if total == 0:
        raise ValueError(f"split {split!r} is all zeros; give {allowed}, one of them above 0")
    return normalize(values)


def normalize(weights: Sequence[float]) -> list[float]:
    """Megatron's ``normalize``: float64 weights over their NumPy sum, as Python floats."""
    w = np.array(weights, dtype=np.float64)
    result: list[float] = (w / np.sum(w)).tolist()
    return result


def split_matrix(
    vector: Sequence[float], second: Sequence[float] | None = None
) -> list[tuple[float, float] | None]:
    """Megatron's ``convert_split_vector_to_split_matrix``: each split's [begin, end)
    share of the corpus (None where empty), the second vector constraining the first.

    The same Python arithmetic (running sums from the integer 0, so the
    first begin is ``0``, as Megatron's descriptions print it)."""
    ends_a = _running(vector)
    ends_b = ends_a if second is None else _running(second)
    matrix: list[tuple[float, float] | None] = []
    for (a0, a1), (b0, b1) in zip(ends_a, ends_b, strict=True):
        if min(a1, b1) <= max(a0, b0):
            matrix.append(None)
        else:
            matrix.append((max(a0, b0), min(a1, b1)))
    return matrix


def _running(vector: Sequence[float]) -> list[tuple[float, float]]:
    ends: list[float] = [0]
    for share in vector:
        ends.append(ends[-1] + share)
    return list(itertools.pairwise(ends))


def split_ranges(
    split: str, num_sequences: int, *, second_split: str | None = None
) -> list[tuple[int, int] | None]:
    """The sequences each split of a corpus takes, as Megatron-LM's dataset builder splits it.

    Megatron's ``BlendedMegatronDatasetBuilder`` turns the split string
    into shares of the corpus (``parse_and_normalize_split``, then
    ``convert_split_vector_to_split_matrix``) and gives each split the
    sequences ``[round(begin * N), round(end * N))``; these are the same
    ranges, number for number.

    Parameters
    ----------
    split : str
        Up to three comma-separated weights >= 0 for train, valid and test
        (``"969,30,1"``, ``"99,1"``, ``"1"``); missing ones are 0.
    num_sequences : int
        The corpus's sequence count (an indexed dataset's
        ``len(sequence_lengths)``), >= 0.
    second_split : str, optional
        A second split string that constrains the first: each split keeps
        only the share both strings give it (Megatron's optional second
        split vector).

    Returns
    -------
    list of (int, int) or None, length 3
        ``[begin, end)`` sequence ids of train, valid and test; None for a
        split of weight 0 (no dataset is built for it).

    Raises
    ------
    TypeError
        A split that is not a string, or a count that is not an integer.
    ValueError
        A split string that is empty, has more than three parts, a part
        that is not a number >= 0 (a negative number, NaN, letters) or only
        zeros; a negative count.
    """
    count = _count(num_sequences, "num_sequences")
    vector = parse_split(split)
    second = None if second_split is None else parse_split(second_split)
    return [_range(entry, count) for entry in split_matrix(vector, second)]


def _range(entry: tuple[float, float] | None, count: int) -> tuple[int, int] | None:
    if entry is None:
        return None
    return round(entry[0] * float(count)), round(entry[1] * float(count))


def sizes_per_dataset(
    weights: Sequence[float], sizes: Sequence[int | None], surplus: float = 0.0
) -> list[list[int]]:
    """Megatron's ``_get_size_per_split_per_dataset``: the samples asked of each corpus
    for each split, ``ceil(ceil(size * weight) * (1 + surplus))``."""
    return [
        [math.ceil(math.ceil(int(size or 0) * weight) * (1 + surplus)) for size in sizes]
        for weight in weights
    ]


# -- the result ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, repr=False)
class GPTBlendSplit:
    """One split of a blend: what Megatron-LM's dataset builder returns for it.

    Either a ``BlendedDataset`` over one ``GPTDataset`` per corpus (then
    :attr:`dataset_index` and :attr:`dataset_sample_index` say which
    corpus and which of its samples each sample of the blend is), or a lone
    ``GPTDataset`` (a blend of one corpus without weights; the two arrays
    are None).

    Attributes
    ----------
    split : str
        ``"train"``, ``"valid"`` or ``"test"``.
    datasets : tuple of GPTSamples
        Each corpus's samples in this split, in the blend's order.
    names : tuple of str or None
        Each corpus's name (its prefix, Megatron's ``dataset_path``), None
        for lengths given without one.
    documents : tuple of (int, int)
        The ``[begin, end)`` sequences of each corpus this split takes.
    num_samples : tuple of int or None
        The samples asked of each corpus (``GPTDataset.num_samples``; None:
        one epoch).
    dataset_index : ndarray of int16 or None, shape (n,)
        For each sample of the blend, which corpus it comes from.
    dataset_sample_index : ndarray of int64 or None, shape (n,)
        For each sample of the blend, which sample of that corpus's
        :class:`GPTSamples` it is.
    weights : tuple of float or int, or None
        The blend's weights as ``BlendedDataset.weights`` holds them:
        normalised floats where the blend has a size, each corpus's sample
        count where it takes every sample (``size`` None).
    size : int or None
        ``BlendedDataset.size``: the samples of the blend, or None where it
        takes every sample of every corpus.
    """

    split: str
    datasets: tuple[GPTSamples, ...]
    names: tuple[str | None, ...]
    documents: tuple[tuple[int, int], ...]
    num_samples: tuple[int | None, ...]
    dataset_index: np.ndarray | None = None
    dataset_sample_index: np.ndarray | None = None
    weights: tuple[Any, ...] | None = None
    size: int | None = None

    @property
    def blended(self) -> bool:
        """Whether the split is a ``BlendedDataset`` (else a lone ``GPTDataset``)."""
        return self.dataset_index is not None

    def __len__(self) -> int:
        if self.dataset_index is not None:
            return int(self.dataset_index.shape[0])
        return len(self.datasets[0])

    def __repr__(self) -> str:
        if not self.blended:
            return (
                f"GPTBlendSplit({self.split}: {len(self)} samples of one corpus "
                f"{self.names[0]!r}, sequences {self.documents[0][0]}..{self.documents[0][1]})"
            )
        return (
            f"GPTBlendSplit({self.split}: {len(self)} samples blended from "
            f"{len(self.datasets)} corpora, size={self.size})"
        )

    def batch(
        self,
        indices: Any,
        corpora: Any,
        *,
        eod: int,
        reset_position_ids: bool = False,
        reset_attention_mask: bool = False,
        eod_mask_loss: bool = False,
        pad_value: int = -1,
        attention_mask: bool = False,
    ) -> GPTBatch:
        """A batch of the split's samples as ``BlendedDataset.__getitem__`` returns them.

        Row ``r`` is sample ``indices[r]`` of the split: sample
        ``dataset_sample_index[i]`` of corpus ``dataset_index[i]`` (of the
        lone corpus where the split is not blended), read by :func:`gpt_batch`
        from that corpus, so that it equals the ``tokens``, ``labels``,
        ``loss_mask``, ``position_ids`` (and ``attention_mask``) of
        Megatron's ``BlendedDataset[i]``; ``dataset_index[indices]`` is its
        ``dataset_id``. ``cu_seqlens`` and ``max_seqlen`` are those of the
        whole batch.

        Parameters
        ----------
        indices : array_like of int, shape (B,)
            Which samples of the split, each 0 to ``len(self) - 1``.
        corpora : sequence of corpora
            One corpus per corpus of the blend, in its order (as
            :meth:`GPTSamples.batch` takes each: an :class:`IndexedCorpus`
            opened with ``documents="sequences"``, a (tokens, offsets) pair or
            a reader).
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
            ``corpora`` that is not a sequence, and what :func:`gpt_batch`
            refuses.
        ValueError
            Another number of corpora than the blend has, and what
            :func:`gpt_batch` refuses.
        IndexError
            An index outside 0..len(self)-1.
        """
        options: dict[str, Any] = dict(
            eod=eod,
            reset_position_ids=reset_position_ids,
            reset_attention_mask=reset_attention_mask,
            eod_mask_loss=eod_mask_loss,
            pad_value=pad_value,
            attention_mask=attention_mask,
        )
        return self._parts(indices, corpora, options, 0)[0]

    def _parts(
        self, indices: Any, corpora: Any, options: dict[str, Any], part_rows: int
    ) -> list[GPTBatch]:
        """The batches of each ``part_rows`` indices in turn (0: one batch of
        all), each equal to ``self.batch(indices[j * part_rows:(j + 1) *
        part_rows], corpora, **options)``: read in one call of the kernel
        where every corpus read holds its own tokens (in memory or a local
        file), else each part stacked from its corpora's batches."""
        count = len(self.datasets)
        if isinstance(corpora, (str, bytes)) or not isinstance(corpora, (list, tuple)):
            raise TypeError(
                f"corpora must be a list or tuple of {count} corpora, one per corpus of the "
                f"blend; got {type(corpora).__name__}"
            )
        if len(corpora) != count:
            raise ValueError(
                f"corpora must hold one corpus per corpus of the blend ({count}); "
                f"got {len(corpora)}"
            )
        for d, corpus in enumerate(corpora):  # which corpus is wrong, before any is read
            try:
                _Corpus(corpus, self.datasets[d].lengths)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"corpora[{d}]: {exc}") from None
        wanted = _sample_numbers(indices, len(self))
        if self.dataset_index is None or self.dataset_sample_index is None:
            return _batch_maker(self.datasets[0], corpora[0], options).parts(wanted, part_rows)
        used = np.unique(self.dataset_index[wanted]).tolist()
        if used and not 0 <= used[0] <= used[-1] < count:
            d = used[0] if used[0] < 0 else used[-1]
            raise ValueError(
                f"dataset_index: the blend's samples name corpus {d}, but the blend has {count} "
                f"corpora (0..{count - 1}): its indices were changed"
            )
        # each corpus read, its options checked, in order (as gpt_batch checks them)
        makers = {d: _batch_maker(self.datasets[d], corpora[d], options) for d in used}
        if (
            makers
            and all(maker.reads_own_tokens() for maker in makers.values())
            and self.dataset_index.dtype == np.int16
            and self.dataset_sample_index.dtype == np.int64
        ):
            readers = [makers[d]._reader if d in makers else None for d in range(count)]
            dataset_index = v.kernel_array(self.dataset_index)
            dataset_sample_index = v.kernel_array(self.dataset_sample_index)
            out = _core.gpt_blend_batch(
                readers, dataset_index, dataset_sample_index, wanted, part_rows
            )
            return _cut_parts(out, part_rows)
        rows = wanted.shape[0]
        step = part_rows or max(rows, 1)
        return [
            self._stacked_batch(wanted[j : j + step], corpora, options)
            for j in range(0, max(rows, 1), step)
        ]

    def _read_ahead(self, corpora: Any, options: dict[str, Any], order: Any, **plan: Any) -> Any:
        """Runs of micro-batches of ``order`` (a :class:`BatchOrder` over this
        split) read ahead on native threads, as :meth:`_BatchMaker.read_ahead`
        reads them, each row by its corpus's reader; None where they cannot
        be read so: a corpus that is not a local file or arrays in memory, a
        dense attention mask, or corpora and options that a read would refuse
        (the reads then say what is wrong, where they meet it)."""
        if self.dataset_index is None or self.dataset_sample_index is None:
            if len(corpora) != 1:
                return None
            try:
                maker = _batch_maker(self.datasets[0], corpora[0], options)
            except (TypeError, ValueError):
                return None
            return maker.read_ahead(order, **plan)
        if (
            len(corpora) != len(self.datasets)
            or self.dataset_index.dtype != np.int16
            or self.dataset_sample_index.dtype != np.int64
        ):
            return None
        try:  # each maker checks its corpus against its lengths, as a read does
            makers = [
                _batch_maker(samples, corpus, options)
                for samples, corpus in zip(self.datasets, corpora, strict=True)
            ]
        except (TypeError, ValueError):
            return None
        if not makers or not all(maker.reads_alone() for maker in makers):
            return None
        blend = (
            [maker._reader for maker in makers],
            v.kernel_array(self.dataset_index),
            v.kernel_array(self.dataset_sample_index),
        )
        n, seed, shuffle = int(order.num_samples), int(order.seed), bool(order.shuffle)
        return _core.GPTBatchAhead(makers[0]._reader, n, seed, shuffle, **plan, blend=blend)

    def _stacked_batch(self, wanted: np.ndarray, corpora: Any, options: dict[str, Any]) -> GPTBatch:
        """The batch of these samples of the blend, read corpus by corpus and
        put back in their rows."""
        assert self.dataset_index is not None
        assert self.dataset_sample_index is not None
        which = self.dataset_index[wanted].astype(np.int64)
        local = self.dataset_sample_index[wanted]
        parts = [
            (rows, gpt_batch(self.datasets[d], local[rows], corpora[d], **options))
            for d in np.unique(which).tolist()
            for rows in [np.flatnonzero(which == d)]
        ]
        if not parts:  # no sample: an empty batch, its options checked
            return gpt_batch(self.datasets[0], wanted, corpora[0], **options)
        if len(parts) == 1:
            return parts[0][1]
        return _stacked(parts, wanted.shape[0])


@dataclass(frozen=True, eq=False, repr=False)
class GPTBlend:
    """The train, valid and test datasets of Megatron-LM's dataset builder.

    What :func:`posembed.gpt_blend` returns: the same arrays as
    ``BlendedMegatronDatasetBuilder(GPTDataset, sizes, ..., config).build()``,
    one :class:`GPTBlendSplit` per split (None for a split it builds none
    for).

    Attributes
    ----------
    train, valid, test : GPTBlendSplit or None
        Each split.
    sequence_length : int
        Tokens per sample (the extra one aside).
    seed : int
        ``config.random_seed``.
    split : str or None
        The split string (None for a blend per split).
    split_matrix : tuple or None
        Each split's ``(begin, end)`` share as Megatron computes it, or None.
    add_extra_token_to_sequence : bool
        Whether samples hold one token more than ``sequence_length``.
    """

    train: GPTBlendSplit | None
    valid: GPTBlendSplit | None
    test: GPTBlendSplit | None
    sequence_length: int
    seed: int
    split: str | None
    split_matrix: tuple[tuple[float, float] | None, ...] | None
    add_extra_token_to_sequence: bool = True

    @property
    def splits(self) -> tuple[GPTBlendSplit | None, GPTBlendSplit | None, GPTBlendSplit | None]:
        """(train, valid, test), as the builder's list."""
        return (self.train, self.valid, self.test)

    def __repr__(self) -> str:
        parts = ", ".join(
            f"{name}={'None' if s is None else len(s)}"
            for name, s in zip(SPLITS, self.splits, strict=True)
        )
        return (
            f"GPTBlend(samples per split: {parts}; sequence_length={self.sequence_length}, "
            f"seed={self.seed}, split={self.split!r})"
        )


# -- the build ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Options:
    sequence_length: int
    seed: int
    extra: bool
    drop_last_valid: bool
    surplus: float


def blend_of_lengths(
    corpora: Sequence[Corpus] | None = None,
    weights: Sequence[Any] | None = None,
    *,
    split: str | None = None,
    per_split: Any = None,
    sizes: Sequence[int | None],
    sequence_length: int,
    seed: int = 1234,
    mid_level_dataset_surplus: float = DEFAULT_SURPLUS,
    add_extra_token_to_sequence: bool = True,
    drop_last_partial_validation_sequence: bool = True,
) -> GPTBlend:
    """The datasets of Megatron's builder, from (name, lengths) corpora: see posembed.gpt_blend."""
    sizes_ = _sizes(sizes)
    surplus = _surplus(mid_level_dataset_surplus)
    seq = v.positive_int(sequence_length, "sequence_length")
    _seed_state(seed)  # checked once here, not per corpus
    if not isinstance(add_extra_token_to_sequence, (bool, np.bool_)):
        raise TypeError(
            "add_extra_token_to_sequence must be a bool; got "
            f"{type(add_extra_token_to_sequence).__name__}"
        )
    if not isinstance(drop_last_partial_validation_sequence, (bool, np.bool_)):
        raise TypeError(
            "drop_last_partial_validation_sequence must be a bool; got "
            f"{type(drop_last_partial_validation_sequence).__name__}"
        )
    opts = _Options(
        seq,
        operator.index(seed),
        bool(add_extra_token_to_sequence),
        bool(drop_last_partial_validation_sequence),
        surplus,
    )
    if (corpora is None) == (per_split is None):
        raise ValueError(
            "give corpora (a blend whose sequences the split divides) or per_split (one blend "
            "per split), exactly one of them"
        )
    if corpora is not None:
        if split is None:
            raise ValueError("split is required with corpora, such as split='969,30,1'")
        matrix = split_matrix(parse_split(split))
        checked = _checked(corpora, "corpora")
        w = _weights(weights, len(checked), "weights")
        _sizes_for_weights(w, sizes_, "weights")
        results = _shared(checked, w, matrix, sizes_, opts)
        frozen: tuple[tuple[float, float] | None, ...] | None = tuple(matrix)
    else:
        if split is not None or weights is not None:
            raise ValueError(
                "per_split gives each split its own blend: give no split and no weights with it"
            )
        assert per_split is not None
        if isinstance(per_split, (str, bytes)) or len(per_split) != len(SPLITS):
            raise ValueError(
                "per_split must hold 3 entries (train, valid, test), each a (corpora, weights) "
                f"pair or None; got {per_split!r:.80}"
            )
        if all(entry is None for entry in per_split):
            raise ValueError(
                "per_split holds no blend (Megatron's builder would make up mock data): give "
                "a (corpora, weights) pair for at least one split"
            )
        blends: list[tuple[list[Corpus], list[float] | None] | None] = []
        for i, entry in enumerate(per_split):  # every split checked before any is built
            if entry is None:
                blends.append(None)
                continue
            if not isinstance(entry, (tuple, list)) or len(entry) != 2:
                raise ValueError(
                    f"per_split[{i}] ({SPLITS[i]}) must be a (corpora, weights) pair or None"
                )
            checked = _checked(entry[0], f"per_split[{i}] corpora")
            w = _weights(entry[1], len(checked), f"per_split[{i}] weights")
            if w is not None and sizes_[i] is None:
                _sizes_for_weights(w, [sizes_[i]], f"per_split[{i}] weights")
            blends.append((checked, w))
        results = [
            None if blend is None else _one_split(blend[0], blend[1], i, sizes_[i], opts)
            for i, blend in enumerate(blends)
        ]
        frozen = None
        split = None
    return GPTBlend(
        results[0],
        results[1],
        results[2],
        opts.sequence_length,
        opts.seed,
        split,
        frozen,
        opts.extra,
    )


def _shared(
    corpora: list[Corpus],
    weights: list[float] | None,
    matrix: list[tuple[float, float] | None],
    sizes: list[int | None],
    opts: _Options,
) -> list[GPTBlendSplit | None]:
    """The builder's branch for one blend divided by the split string."""
    if len(corpora) == 1 and weights is None:  # a lone GPTDataset per split
        return [
            None
            if matrix[i] is None
            else _lone(corpora[0], _range(matrix[i], _n(corpora[0])), i, sizes[i], opts)
            for i in range(len(SPLITS))
        ]
    if weights is None:
        asked: list[list[int | None]] = [[None] * len(SPLITS) for _ in corpora]
        target = None
    else:
        asked = [list(row) for row in sizes_per_dataset(weights, sizes, opts.surplus)]
        target = sizes_per_dataset(weights, sizes)
    results: list[GPTBlendSplit | None] = [None, None, None]
    used = [i for i in range(len(SPLITS)) if matrix[i] is not None]
    ranges_of = {i: [_range(matrix[i], _n(corpus)) for corpus in corpora] for i in used}
    jobs = [
        (corpus, r, i, row[i])
        for i in used
        for corpus, r, row in zip(corpora, ranges_of[i], asked, strict=True)
    ]
    built = iter(_all_samples(jobs, opts))
    for i in used:
        ranges = ranges_of[i]
        datasets = [next(built) for _ in corpora]
        if weights is not None:
            assert target is not None
            size: int | None = sum(row[i] for row in target)
            blend_weights: list[Any] = list(weights)
        else:
            blend_weights = [len(d) for d in datasets]
            size = None if sizes[i] is None else min(int(sizes[i] or 0), sum(blend_weights))
        results[i] = _blended(
            corpora, datasets, ranges, [row[i] for row in asked], blend_weights, size, i, opts
        )
    return results


def _one_split(
    corpora: list[Corpus],
    weights: list[float] | None,
    i: int,
    size: int | None,
    opts: _Options,
) -> GPTBlendSplit:
    """The builder's branch for split ``i``'s own blend (every sequence of each corpus)."""
    if len(corpora) == 1:  # weights or not, a lone GPTDataset
        return _lone(corpora[0], (0, _n(corpora[0])), i, size, opts)
    whole = [(0, _n(corpus)) for corpus in corpora]
    if weights is None:
        asked: list[int | None] = [None] * len(corpora)
    else:
        spoof = [0] * len(SPLITS)
        spoof[i] = int(size or 0)
        asked = [row[i] for row in sizes_per_dataset(weights, spoof, opts.surplus)]
        target = [row[i] for row in sizes_per_dataset(weights, spoof)]
    jobs = [(c, r, i, a) for c, r, a in zip(corpora, whole, asked, strict=True)]
    datasets = _all_samples(jobs, opts)
    blend_size: int | None
    if weights is not None:
        blend_weights: list[Any] = list(weights)
        blend_size = sum(target)
    else:
        blend_weights = [len(d) for d in datasets]
        blend_size = None if size is None else min(size, sum(blend_weights))
    return _blended(corpora, datasets, whole, asked, blend_weights, blend_size, i, opts)


def _lone(
    corpus: Corpus, documents: tuple[int, int] | None, i: int, size: int | None, opts: _Options
) -> GPTBlendSplit:
    assert documents is not None
    samples = _samples(corpus, documents, i, size, opts)
    return GPTBlendSplit(SPLITS[i], (samples,), (corpus[0],), (documents,), (size,))


def _blended(
    corpora: list[Corpus],
    datasets: list[GPTSamples],
    ranges: Sequence[tuple[int, int] | None],
    asked: list[int | None],
    weights: list[Any],
    size: int | None,
    i: int,
    opts: _Options,
) -> GPTBlendSplit:
    """BlendedDataset's indices over ``datasets`` (weights > 0, as it requires)."""
    for k, weight in enumerate(weights):
        if weight <= 0:  # only sample counts can be 0 here: given weights are checked > 0
            r = ranges[k] or (0, 0)
            raise ValueError(
                f"{SPLITS[i]} split: {_label(corpora[k])} gives no samples of "
                f"{opts.sequence_length} tokens (its sequences {r[0]}..{r[1]}), and a blend "
                "without weights draws from each corpus in proportion to its samples, each at "
                "least 1 (Megatron's BlendedDataset refuses it too): give it more sequences, a "
                "shorter sequence_length or leave it out"
            )
    if size is not None:
        blend_weights: list[Any] = normalize(weights)
        dataset_index, dataset_sample_index = _blend.blending_indices(
            np.array(blend_weights, dtype=np.float64), size
        )
    else:
        blend_weights = [int(w) for w in weights]
        dataset_index, dataset_sample_index = _blend.exhaustive_blending_indices(
            np.array(blend_weights, dtype=np.int64)
        )
    drawn = np.bincount(dataset_index, minlength=len(datasets)) if dataset_index.size else None
    if drawn is not None:
        for k, dataset in enumerate(datasets):
            if int(drawn[k]) > len(dataset):
                raise IndexError(
                    f"the {SPLITS[i]} blend draws {int(drawn[k])} samples from "
                    f"{_label(corpora[k])}, which holds {len(dataset)}: the blend "
                    "oversamples it; raise mid_level_dataset_surplus (now "
                    f"{opts.surplus}), two- or ten-fold, so each corpus builds more samples "
                    "than the blend draws"
                )
    return GPTBlendSplit(
        SPLITS[i],
        tuple(datasets),
        tuple(corpus[0] for corpus in corpora),
        tuple(r for r in ranges if r is not None),
        tuple(asked),
        dataset_index,
        dataset_sample_index,
        tuple(blend_weights),
        size,
    )


def _all_samples(
    jobs: Sequence[tuple[Corpus, tuple[int, int] | None, int, int | None]], opts: _Options
) -> list[GPTSamples]:
    """Each job's GPTSamples, several built at once where posembed has threads to
    spare (each build releases the GIL; its result is the same on any thread).
    A failure is the first failing job's, in the jobs' order, as one at a time."""
    workers = min(len(jobs), get_num_threads())
    if workers <= 1:
        return [_samples(*job, opts) for job in jobs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(_samples, *job, opts) for job in jobs]
        return [future.result() for future in futures]


def _samples(
    corpus: Corpus,
    documents: tuple[int, int] | None,
    i: int,
    num_samples: int | None,
    opts: _Options,
) -> GPTSamples:
    """GPTDataset's indices for sequences ``documents`` of ``corpus`` in split ``i``."""
    assert documents is not None
    begin, end = documents
    lengths = corpus[1]
    if end <= begin:
        if num_samples is None or (num_samples == 0 and not opts.extra):
            return _empty(lengths, opts)  # Megatron's GPTDataset of no sequences: no samples
        # Megatron's GPTDataset never stops adding epochs of no tokens
        raise ValueError(
            f"{SPLITS[i]} split: {_label(corpus)} holds {_n(corpus)} sequences, and the "
            f"split gives this split none of them (sequences {begin}..{end}), so it cannot give "
            f"the {num_samples} samples asked of it; give a corpus of more sequences, a split "
            "that leaves this one at 0, or no size for it"
        )
    try:
        return gpt_samples(
            lengths,
            opts.sequence_length,
            num_samples=num_samples,
            seed=opts.seed,
            documents=np.arange(begin, end, dtype=np.int32 if end <= 2**31 - 1 else np.int64),
            add_extra_token_to_sequence=opts.extra,
            drop_last_partial_sequence=opts.drop_last_valid if i == 1 else True,
        )
    except (TypeError, ValueError) as exc:
        raise type(exc)(
            f"{SPLITS[i]} split of {_label(corpus)} (sequences {begin}..{end}): {exc}"
        ) from None


def _empty(lengths: np.ndarray, opts: _Options) -> GPTSamples:
    """The indices of a split that holds no sequences, as GPTDataset builds them."""
    own = np.array(lengths)
    own.setflags(write=False)
    return GPTSamples(
        np.zeros(0, dtype=np.int32),
        np.zeros((1, 2), dtype=np.int32),
        np.zeros(0, dtype=np.uint32),
        1,
        opts.sequence_length,
        opts.extra,
        lengths=own,
    )


# -- argument checks ------------------------------------------------------------------------


def _n(corpus: Corpus) -> int:
    return int(corpus[1].shape[0])


def _label(corpus: Corpus) -> str:
    label: str = corpus[2]
    return label if corpus[0] is None else f"{label} ({corpus[0]!r})"


def _checked(corpora: Any, name: str) -> list[Corpus]:
    """(name, lengths, label) per corpus, the lengths checked once as gpt_samples reads them."""
    if isinstance(corpora, (str, bytes)) or not isinstance(corpora, Sequence):
        raise TypeError(
            f"{name} must be a list of (name, lengths) corpora; got {type(corpora).__name__}"
        )
    if len(corpora) == 0:
        raise ValueError(f"{name}: the blend holds no corpora; give at least one")
    _blend_count(len(corpora), name)
    result: list[Corpus] = []
    for k, (corpus_name, lengths) in enumerate(corpora):
        label = f"{name}[{k}]"
        try:
            # a copy of its own: every split reads the same lengths, whatever
            # another thread does to the caller's array meanwhile
            result.append((corpus_name, _lengths(lengths, private=True), label))
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{label}: {exc}") from None
    return result


def _count(value: Any, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer; got {type(value).__name__} {value!r}")
    count = operator.index(value)
    if count < 0:
        raise ValueError(f"{name} must be >= 0; got {count}")
    return count


def _sizes(sizes: Any) -> list[int | None]:
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence):
        raise TypeError(
            "sizes must be a list of 3 entries, the samples wanted for train, valid and test; "
            f"got {type(sizes).__name__}"
        )
    if len(sizes) != 3:
        raise ValueError(
            "sizes must hold 3 entries, the samples wanted for train, valid and test (each an "
            f"integer >= 0, or None for one epoch of each corpus); got {sizes!r:.80}"
        )
    return [None if size is None else _count(size, f"sizes[{i}]") for i, size in enumerate(sizes)]


def _surplus(value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"mid_level_dataset_surplus must be a number >= 0; got {type(value).__name__}"
        )
    surplus = float(value)
    if not math.isfinite(surplus) or surplus < 0:
        raise ValueError(f"mid_level_dataset_surplus must be a finite number >= 0; got {value!r}")
    return surplus


def _weights(weights: Any, count: int, name: str) -> list[float] | None:
    """Weights normalised as the builder normalises them, or None."""
    if weights is None:
        return None
    if isinstance(weights, (str, bytes)):
        raise TypeError(f"{name} must be numbers, one per corpus; got a string")
    values = list(weights)
    if len(values) != count:
        raise ValueError(f"{name}: {len(values)} weights for {count} corpora; give one per corpus")
    for k, weight in enumerate(values):
        if isinstance(weight, (bool, np.bool_)) or not isinstance(weight, numbers.Real):
            raise TypeError(f"{name}[{k}] must be a number; got {type(weight).__name__} {weight!r}")
        if not math.isfinite(float(weight)) or float(weight) <= 0:
            raise ValueError(
                f"{name}[{k}] is {weight!r}; each weight must be a finite number above 0 "
                "(leave a corpus out rather than give it weight 0)"
            )
    if not math.isfinite(sum(float(w) for w in values)):
        raise ValueError(f"{name}: the weights' sum is not finite; give smaller weights")
    return normalize([float(w) for w in values])


def _sizes_for_weights(weights: list[float] | None, sizes: list[int | None], name: str) -> None:
    if weights is not None and any(size is None for size in sizes):
        raise ValueError(
            f"sizes {sizes}: a weighted blend ({name}) needs the samples wanted for every "
            "split (0 for a split not used): weights share a number of samples. Give no "
            "weights to take one epoch of each corpus"
        )


def _blend_count(count: int, name: str) -> None:
    if count > MAX_BLENDED:
        raise ValueError(
            f"{name}: a blend of {count} corpora; Megatron's BlendedDataset numbers its corpora "
            f"in int16, so a blend holds at most {MAX_BLENDED}"
        )


def _stacked(parts: list[tuple[np.ndarray, GPTBatch]], rows: int) -> GPTBatch:
    """The batches of several corpora put back in the rows they were drawn for."""
    first = parts[0][1]
    width = first.tokens.shape[1]
    arrays: dict[str, np.ndarray] = {}
    for name in ("tokens", "labels", "loss_mask", "position_ids", "cu_seqlens_padded"):
        like = getattr(first, name)
        arrays[name] = np.empty((rows, *like.shape[1:]), like.dtype)
    mask = None
    if first.attention_mask is not None:
        mask = np.empty((rows, *first.attention_mask.shape[1:]), np.bool_)
    for at, part in parts:
        for name, out in arrays.items():
            out[at] = getattr(part, name)
        if mask is not None and part.attention_mask is not None:
            mask[at] = part.attention_mask
    # each row's boundaries are its padded cu_seqlens up to the first S
    padded = arrays["cu_seqlens_padded"]
    ends = np.argmax(padded == width, axis=1)
    flat = [padded[r, : ends[r]].astype(np.int64) + r * width for r in range(rows)]
    cu = np.concatenate([*flat, [rows * width]]).astype(np.int32)
    return GPTBatch(
        tokens=arrays["tokens"],
        labels=arrays["labels"],
        loss_mask=arrays["loss_mask"],
        position_ids=arrays["position_ids"],
        cu_seqlens=cu,
        cu_seqlens_padded=padded,
        max_seqlen=max(part.max_seqlen for _, part in parts),
        attention_mask=mask,
    )

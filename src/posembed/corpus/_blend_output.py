"""blend_output: blends of indexed datasets as Megatron-LM's dataset builder builds
them (:func:`gpt_blend`), and the cache its ``GPTDataset`` and ``BlendedDataset``
load instead of building (:func:`write_megatron_cache`).

Prefixes are read here (their sequence lengths, once each); the arithmetic
and the indices are :mod:`posembed.kernels._blend_build`'s. The cache is
named and described exactly as Megatron names and describes it, so its
builder, given the same configuration and ``path_to_cache``, loads these
files and builds nothing."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from posembed.io._indexed import IndexedCorpus
from posembed.kernels._blend_build import (
    DEFAULT_SURPLUS,
    SPLITS,
    Corpus,
    GPTBlend,
    GPTBlendSplit,
    blend_of_lengths,
)


def gpt_blend(
    corpora: Sequence[Any] | None = None,
    weights: Sequence[float] | None = None,
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
    """Megatron-LM's train, valid and test datasets of a blend of corpora, element for element.

    What ``BlendedMegatronDatasetBuilder(GPTDataset, sizes, lambda: True,
    config).build()`` builds, from the corpora's sequence lengths alone:
    for each split, each corpus's :class:`GPTSamples` over the sequences
    the split string gives that split, and, where the builder blends them,
    the ``BlendedDataset``'s dataset index (int16) and dataset sample index
    (int64). ``config`` is a ``GPTDatasetConfig`` with ``blend=(corpora,
    weights)`` and ``split``, or ``blend_per_split=per_split``, and the
    other arguments of the same names.

    Parameters
    ----------
    corpora : sequence, optional
        The blend (Megatron's ``blend[0]``, its ``--data-path``
        prefixes): each an indexed dataset's prefix (``str`` or path; its
        sequence lengths are read), a ``(name, lengths)`` pair (``name``:
        the prefix Megatron would be given, for the cache's descriptions),
        or an array of sequence lengths.
    weights : sequence of float, optional
        One weight > 0 per corpus (``blend[1]``); None: each corpus
        contributes one epoch, in proportion to its samples.
    split : str, optional
        With ``corpora``: up to three comma-separated weights of train,
        valid and test (``"969,30,1"``); each corpus's sequences are divided
        as :func:`split_ranges` divides them.
    per_split : sequence of 3 (corpora, weights) pairs or None, optional
        Instead of ``corpora``, ``weights`` and ``split``: one blend per
        split (Megatron's ``blend_per_split``; None: no dataset for that
        split), each over every sequence of its corpora.
    sizes : sequence of 3 int or None
        The samples wanted for train, valid and test (the builder's
        ``sizes``): None for one epoch of each corpus (only without
        weights); 0 for a split not trained on.
    sequence_length : int
        Tokens per sample (the extra token aside).
    seed : int
        ``config.random_seed``, 0..2^32-1.
    mid_level_dataset_surplus : float
        The share of samples each corpus builds beyond what a weighted blend
        asks of it (Megatron's default 0.005).
    add_extra_token_to_sequence : bool
        Samples of ``sequence_length + 1`` tokens.
    drop_last_partial_validation_sequence : bool
        Drop the valid split's last partial sample (Megatron's default).

    Returns
    -------
    GPTBlend
        ``.train``, ``.valid``, ``.test``: a :class:`GPTBlendSplit` each,
        or None where the builder returns None.

    Raises
    ------
    TypeError
        Arguments of the wrong type.
    ValueError
        A malformed split string, weights that are not finite numbers > 0,
        or not one per corpus; weights without a size for every split; both
        or neither of ``corpora`` and ``per_split``; a blend of more than
        32,766 corpora (Megatron numbers them in int16); a split that gets
        no sequences of a corpus, or whose sequences hold too few tokens; a
        prefix that is not a valid indexed dataset.
    IndexError
        A weighted blend that draws more samples from a corpus than it
        built (raise ``mid_level_dataset_surplus``), as Megatron's builder
        refuses it.
    OSError
        A prefix that cannot be read.
    """
    read: dict[str, np.ndarray] = {}
    blend = None if corpora is None else _corpora(corpora, read, "corpora")
    blends = None
    if per_split is not None:
        if isinstance(per_split, (str, bytes)) or not isinstance(per_split, Sequence):
            raise TypeError("per_split must be a sequence of 3 (corpora, weights) pairs or None")
        blends = [
            None
            if entry is None
            else (_corpora(entry[0], read, f"per_split[{i}] corpora"), entry[1])
            if isinstance(entry, (tuple, list)) and len(entry) == 2
            else entry
            for i, entry in enumerate(per_split)
        ]
    return blend_of_lengths(
        blend,
        weights,
        split=split,
        per_split=blends,
        sizes=sizes,
        sequence_length=sequence_length,
        seed=seed,
        mid_level_dataset_surplus=mid_level_dataset_surplus,
        add_extra_token_to_sequence=add_extra_token_to_sequence,
        drop_last_partial_validation_sequence=drop_last_partial_validation_sequence,
    )


def _corpora(corpora: Any, read: dict[str, np.ndarray], name: str) -> list[Corpus]:
    if isinstance(corpora, (str, bytes, os.PathLike)) or not isinstance(corpora, Sequence):
        raise TypeError(
            f"{name} must be a list of corpora (prefixes, (name, lengths) pairs or lengths); "
            f"got {type(corpora).__name__}"
        )
    result: list[Corpus] = []
    for corpus in corpora:
        if isinstance(corpus, (str, os.PathLike)):
            prefix = os.fspath(corpus)
            if prefix not in read:
                read[prefix] = IndexedCorpus(prefix, documents="sequences").sequence_lengths
            result.append((prefix, read[prefix]))
        elif isinstance(corpus, tuple) and len(corpus) == 2 and isinstance(corpus[0], str):
            result.append((corpus[0], corpus[1]))
        else:
            result.append((None, corpus))  # lengths: the kernels check them
    return result


def blend_from_list(
    words: Sequence[str], option: str = "--blend"
) -> tuple[list[str], list[float] | None]:
    """A blend as Megatron's ``--data-path`` lists it: ``P1 P2 ...`` or ``W1 P1 W2 P2 ...``.

    Returns (prefixes, weights or None). ValueError for an empty list, or
    pairs whose weights are not all numbers."""
    words = [word.strip() for word in words]
    if not words:
        raise ValueError(f"{option} needs at least one prefix")
    if len(words) % 2 == 1:
        return words, None
    weights: list[float | None] = []
    for word in words[0::2]:
        try:
            weights.append(float(word))
        except ValueError:
            weights.append(None)
    if all(weight is None for weight in weights):
        return words, None
    if any(weight is None for weight in weights):
        bad = next(w for w, weight in zip(words[0::2], weights, strict=True) if weight is None)
        raise ValueError(
            f"{option}: give prefixes alone (P1 P2 ...) or weight-prefix pairs (W1 P1 W2 P2 "
            f"...); {bad!r} stands where a weight should"
        )
    return words[1::2], [float(weight or 0.0) for weight in weights]


# -- Megatron's cache ---------------------------------------------------------------------


def write_megatron_cache(
    blend: GPTBlend, path_to_cache: str | os.PathLike[str], *, tokenizer: Any
) -> list[Path]:
    """Write a blend's indices where Megatron-LM's builder looks for them, so it loads them.

    For each ``GPTDataset`` and ``BlendedDataset`` of ``blend``, the files
    Megatron caches under ``config.path_to_cache``:
    ``{md5}-GPTDataset-{split}-{document,sample,shuffle}_index.npy``,
    ``{md5}-BlendedDataset-{split}-{dataset,dataset_sample}_index.npy``
    and each one's ``-description.txt``, where ``md5`` is the hash of the
    description Megatron computes (the class, the corpus's prefix, the
    samples asked, the split, the seed, the sequence length, the split
    string and matrix, and the tokenizer's identifiers). Megatron's builder
    run with the same configuration and ``path_to_cache`` then loads these
    arrays instead of building its own. Each file is written under a
    temporary name and renamed into place, the description last, so a
    reader never finds a partial cache entry.

    Megatron's description does not record ``add_extra_token_to_sequence``
    nor ``drop_last_partial_validation_sequence``: give Megatron the values
    the blend was built with.

    Parameters
    ----------
    blend : GPTBlend
        What :func:`gpt_blend` built; every corpus must have a name (given
        as a prefix or a ``(name, lengths)`` pair): Megatron's description
        records it.
    path_to_cache : path
        The folder (``config.path_to_cache``, ``--data-cache-path``);
        created if missing.
    tokenizer : dict or tokenizer
        The tokenizer's ``unique_identifiers`` (a dict, as
        ``tokenizer.unique_identifiers`` returns it), or the tokenizer.

    Returns
    -------
    list of Path
        The files written.

    Raises
    ------
    TypeError
        A blend that is not a GPTBlend, or a tokenizer whose identifiers are
        not a dict that JSON can hold.
    ValueError
        A corpus of the blend given as lengths without a name.
    OSError
        Writing fails (no file of the entry that failed is left in place).
    """
    if not isinstance(blend, GPTBlend):
        raise TypeError(f"blend must be a GPTBlend (from gpt_blend); got {type(blend).__name__}")
    if not isinstance(path_to_cache, (str, os.PathLike)):
        raise TypeError(f"path_to_cache must be a folder path; got {type(path_to_cache).__name__}")
    identifiers = getattr(tokenizer, "unique_identifiers", tokenizer)
    if not isinstance(identifiers, dict):
        raise TypeError(
            "tokenizer must be the tokenizer's unique_identifiers (a dict) or a tokenizer that "
            f"has them; got {type(tokenizer).__name__}"
        )
    try:
        json.dumps(identifiers)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"tokenizer: its identifiers cannot be written as JSON ({exc})") from None
    entries: list[tuple[str, str, str, list[tuple[str, np.ndarray]]]] = []
    for part in blend.splits:
        if part is None:
            continue
        described = []
        for k, samples in enumerate(part.datasets):
            name = part.names[k]
            if name is None:
                raise ValueError(
                    f"blend: the {part.split} split's corpus {k} was given as lengths without a "
                    "name: "
                    "Megatron's cache records each corpus's prefix; give it as a prefix or a "
                    "(prefix, lengths) pair"
                )
            ids = _gpt_identifiers(blend, part, k, identifiers)
            described.append(ids)
            arrays = [
                (suffix, getattr(samples, suffix))
                for suffix in ("document_index", "sample_index", "shuffle_index")
            ]
            entries.append((_text(ids), "GPTDataset", part.split, arrays))
        if part.blended:
            assert part.dataset_index is not None
            assert part.dataset_sample_index is not None
            ids = OrderedDict(
                [
                    ("class", "BlendedDataset"),
                    ("datasets", described),
                    ("split", part.split),
                    ("weights", list(part.weights or ())),
                    ("size", part.size),
                ]
            )
            arrays = [
                ("dataset_index", part.dataset_index),
                ("dataset_sample_index", part.dataset_sample_index),
            ]
            entries.append((_text(ids), "BlendedDataset", part.split, arrays))
    folder = Path(path_to_cache)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise type(exc)(f"path_to_cache {folder}: no folder can be made there ({exc})") from None
    written: list[Path] = []
    for description, cls, split, arrays in entries:
        digest = hashlib.md5(description.encode("utf-8"), usedforsecurity=False).hexdigest()
        base = folder / f"{digest}-{cls}-{split}"
        for suffix, array in arrays:
            written.append(_atomic(Path(f"{base}-{suffix}.npy"), lambda f, a=array: np.save(f, a)))
        written.append(
            _atomic(Path(f"{base}-description.txt"), lambda f, d=description: f.write(d.encode()))
        )
    return written


def _gpt_identifiers(
    blend: GPTBlend, part: GPTBlendSplit, k: int, tokenizer: dict[str, Any]
) -> OrderedDict[str, Any]:
    """``MegatronDataset.unique_identifiers`` of the split's k-th GPTDataset."""
    return OrderedDict(
        [
            ("class", "GPTDataset"),
            ("dataset_path", part.names[k]),
            ("num_samples", part.num_samples[k]),
            ("index_split", part.split),
            ("random_seed", blend.seed),
            ("sequence_length", blend.sequence_length),
            ("split", blend.split),
            ("split_matrix", None if blend.split_matrix is None else list(blend.split_matrix)),
            ("tokenizer", tokenizer),
        ]
    )


def _text(identifiers: OrderedDict[str, Any]) -> str:
    """The description as Megatron writes it (``json.dumps(..., indent=4)``)."""
    return json.dumps(identifiers, indent=4)


def _atomic(path: Path, write: Any) -> Path:
    """Write ``path`` through a temporary file in its folder, renamed into place."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


__all__ = ["SPLITS", "blend_from_list", "gpt_blend", "write_megatron_cache"]

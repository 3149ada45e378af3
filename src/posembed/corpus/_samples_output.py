"""``posembed samples``: Megatron-LM GPTDataset's three index arrays for an
indexed dataset, built by :func:`posembed.gpt_samples` and written to a
folder (``document_index.npy``, ``sample_index.npy``, ``shuffle_index.npy``
and ``meta.json``), atomically, as ``posembed chunk`` writes its outputs.

Every problem with the input or the options is a :class:`ChunkError` (one
line from the command): the counts are checked here against the sizes
:func:`posembed.gpt_samples` can build, with the options' names, before it
runs; whatever it refuses besides is reported the same way."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from posembed.corpus._chunk import write_meta
from posembed.corpus._source_indexed import DOCUMENTS, prefix_of
from posembed.io import _outdir
from posembed.io._indexed import IndexedCorpus
from posembed.io._store import is_url
from posembed.io._tokens import ChunkError, option_int
from posembed.kernels._samples import epochs_for, gpt_samples, sample_count

ARRAYS = ("document_index", "sample_index", "shuffle_index")
# The sizes gpt_samples builds stay below this (posembed.kernels._validate.check_sizes).
MAX_PRODUCT = 2**62


def _required(value: Any, option: str, low: int, high: int | None = None) -> int:
    checked = option_int(value, option, low, high)
    if checked is None:
        raise ChunkError(f"{option} is required")
    return checked


def _check_counts(
    length: int,
    wanted: int | None,
    epochs_given: int | None,
    extra: int,
    tokens: int,
    count: int,
    unit: str,
) -> None:
    """ChunkError, naming the option, when the indices the options ask for
    are too large for gpt_samples to build (its own checks, restated)."""
    if wanted is not None:
        epochs = epochs_for(wanted, length, extra, tokens)
        asked = (
            f"--num-samples {wanted} (with --sequence-length {length}: {epochs} epochs of "
            f"{tokens} tokens)"
        )
    else:
        epochs = 1 if epochs_given is None else epochs_given
        asked = f"--epochs {epochs}" if epochs_given is not None else "one epoch"
    if epochs * max(count, 1) >= MAX_PRODUCT:
        raise ChunkError(
            f"{asked} is too large: the document index would hold {epochs} x {count} "
            f"{unit}; it must stay below 2^62 entries"
        )
    n = sample_count(epochs * tokens, length, extra, True)
    if (n + 2) * length >= MAX_PRODUCT:
        if wanted is None:
            asked = f"--sequence-length {length} with {asked}"
        raise ChunkError(
            f"{asked} is too large: the sample index would span ({n} samples + 2) x "
            f"{length} tokens; it must stay below 2^62"
        )


def write_samples(
    input_path: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    *,
    sequence_length: int,
    num_samples: int | None = None,
    num_epochs: int | None = None,
    seed: int = 1234,
    add_extra_token_to_sequence: bool = True,
    separate_final_epoch: bool | None = None,
    documents: str | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Write GPTDataset's index arrays of an indexed dataset to ``output_dir``.

    Parameters
    ----------
    input_path : path or URL
        ``PREFIX``, ``PREFIX.idx`` or ``PREFIX.bin``, on disk or in a store
        that fsspec reads (``s3://bucket/PREFIX``).
    output_dir : path
        The local folder to write; ``force`` replaces one posembed wrote.
    sequence_length, num_samples, num_epochs, seed
        As for :func:`posembed.gpt_samples`.
    add_extra_token_to_sequence, separate_final_epoch
        As for :func:`posembed.gpt_samples`.
    documents : {"sequences", "documents"}, optional
        What the indices count: Megatron's sequences (default, as
        ``GPTDataset``), or its documents, each one's sequences joined.

    Returns
    -------
    dict of str to Any
        What meta.json holds: ``input``, ``unit`` (sequences or documents),
        ``elements`` (their count), ``tokens``, ``samples``, ``num_epochs``,
        ``sequence_length``, ``seed``, ``add_extra_token_to_sequence`` and
        each array's dtype.

    Raises
    ------
    ChunkError
        An input that is missing, not a valid indexed dataset, holds no
        tokens or cannot be read from its store; an option out of range
        (counts too large for the indices included); or an output that may
        not be written, such as a URL (a ValueError).
    OSError
        Writing fails (the temporary folder is removed).
    """
    if is_url(os.fspath(output_dir)):
        raise ChunkError(
            f"output {os.fspath(output_dir)}: posembed samples writes a local folder, not a URL; "
            "write it locally and copy it to the store"
        )
    out = Path(output_dir)
    length = _required(sequence_length, "--sequence-length", 1)
    samples_wanted = option_int(num_samples, "--num-samples", 0)
    epochs = option_int(num_epochs, "--epochs", 1)
    seed_value = _required(seed, "--seed", 0, 2**32 - 1)
    if samples_wanted is not None and epochs is not None:
        raise ChunkError("give --num-samples or --epochs, not both")
    unit = "sequences" if documents is None else documents
    if unit not in DOCUMENTS:
        raise ChunkError(f"--documents must be one of {', '.join(DOCUMENTS)}; got {unit!r}")
    corpus = _open(input_path, unit)
    src: Any = os.fspath(input_path) if is_url(os.fspath(input_path)) else Path(input_path)
    # an input in a store is no local file an output folder could replace
    inputs = () if is_url(os.fspath(input_path)) else (corpus.idx_path, corpus.bin_path)
    problem = _outdir.problem(out, inputs, bool(force))
    if problem:
        raise ChunkError(problem)
    if corpus.token_count == 0:
        raise ChunkError(
            f"{src}: the indexed dataset holds no tokens ({len(corpus)} {unit}); samples "
            "need at least 1"
        )
    extra = 1 if add_extra_token_to_sequence else 0
    _check_counts(length, samples_wanted, epochs, extra, corpus.token_count, len(corpus), unit)
    try:
        result = gpt_samples(
            np.diff(corpus.offsets),
            length,
            num_samples=samples_wanted,
            num_epochs=epochs,
            seed=seed_value,
            add_extra_token_to_sequence=add_extra_token_to_sequence,
            separate_final_epoch=separate_final_epoch,
        )
    except ValueError as exc:  # what _check_counts does not foresee: still one line
        raise ChunkError(f"{src}: {exc}") from None
    meta: dict[str, Any] = {
        "input": str(src),
        "unit": unit,
        "elements": len(corpus),
        "tokens": corpus.token_count,
        "samples": len(result),
        "num_epochs": result.num_epochs,
        "sequence_length": length,
        "seed": seed_value,
        "add_extra_token_to_sequence": bool(add_extra_token_to_sequence),
        **{f"{name}_dtype": getattr(result, name).dtype.name for name in ARRAYS},
    }
    with _outdir.temporary(out) as tmp:
        for name in ARRAYS:
            np.save(tmp / f"{name}.npy", getattr(result, name), allow_pickle=False)
        write_meta(tmp, meta)
        _outdir.commit(tmp, out, bool(force))
    return meta


def _open(input_path: str | os.PathLike[str], unit: str) -> IndexedCorpus:
    """The indexed dataset ``input_path`` names (a local prefix or a URL), or
    ChunkError: missing, not valid, or a store that fails."""
    text = os.fspath(input_path)
    if is_url(text):
        prefix: Any = text  # kept as text: a Path would fold the URL's //
    else:
        src = Path(input_path)
        prefix = prefix_of(src)
        if prefix is None:
            raise ChunkError(
                f"{src}: not an indexed dataset (no {src}.idx); give PREFIX or PREFIX.idx"
            )
    try:
        # plain or multimodal: the modes change neither the tokens nor the lengths
        return IndexedCorpus(prefix, documents=unit, multimodal=None)  # type: ignore[arg-type]
    except ValueError as exc:  # a store's failures included (ChunkError)
        raise ChunkError(str(exc)) from None
    except OSError as exc:
        raise ChunkError(f"{prefix}: cannot be read ({exc.strerror or exc})") from None

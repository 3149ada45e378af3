"""``posembed samples``: Megatron-LM GPTDataset's three index arrays for an
indexed dataset, built by :func:`posembed.gpt_samples` and written to a
folder (``document_index.npy``, ``sample_index.npy``, ``shuffle_index.npy``
and ``meta.json``), atomically, as ``posembed chunk`` writes its outputs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from posembed import _outdir
from posembed._chunk import write_meta
from posembed._indexed import IndexedCorpus
from posembed._samples import gpt_samples
from posembed._source import ChunkError, option_int
from posembed._source_indexed import DOCUMENTS, prefix_of

ARRAYS = ("document_index", "sample_index", "shuffle_index")


def _required(value: Any, option: str, low: int, high: int | None = None) -> int:
    checked = option_int(value, option, low, high)
    if checked is None:
        raise ChunkError(f"{option} is required")
    return checked


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
    input_path : path
        ``PREFIX``, ``PREFIX.idx`` or ``PREFIX.bin``.
    output_dir : path
        The folder to write; ``force`` replaces one posembed wrote.
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
        An input that is not a valid indexed dataset, an option out of
        range, or an output that may not be written (a ValueError).
    OSError
        Writing fails (the temporary folder is removed).
    """
    src, out = Path(input_path), Path(output_dir)
    length = _required(sequence_length, "--sequence-length", 1)
    samples_wanted = option_int(num_samples, "--num-samples", 0)
    epochs = option_int(num_epochs, "--epochs", 1)
    seed_value = _required(seed, "--seed", 0, 2**32 - 1)
    if samples_wanted is not None and epochs is not None:
        raise ChunkError("give --num-samples or --epochs, not both")
    unit = "sequences" if documents is None else documents
    if unit not in DOCUMENTS:
        raise ChunkError(f"--documents must be one of {', '.join(DOCUMENTS)}; got {unit!r}")
    prefix = prefix_of(src)
    if prefix is None:
        raise ChunkError(f"{src}: not an indexed dataset (no {src}.idx); give PREFIX or PREFIX.idx")
    try:
        corpus = IndexedCorpus(prefix, documents=unit)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ChunkError(str(exc)) from None
    problem = _outdir.problem(out, (corpus.idx_path, corpus.bin_path), bool(force))
    if problem:
        raise ChunkError(problem)
    result = gpt_samples(
        np.diff(corpus.offsets),
        length,
        num_samples=samples_wanted,
        num_epochs=epochs,
        seed=seed_value,
        add_extra_token_to_sequence=add_extra_token_to_sequence,
        separate_final_epoch=separate_final_epoch,
    )
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

"""Megatron-LM indexed datasets as ``posembed chunk`` input: ``PREFIX.bin``
(the tokens, back to back) and ``PREFIX.idx`` (their sequences and documents),
as Megatron's ``preprocess_data.py`` and ``IndexedDatasetBuilder`` write them.

The input names the prefix (``PREFIX``, ``PREFIX.idx``, or ``PREFIX.bin``
beside a ``PREFIX.idx``). The ``.idx`` is read and checked whole
(:class:`posembed.IndexedCorpus`); the ``.bin`` is a raw token file read by
range, so documents larger than memory are cut as a token file's are.
``--documents`` says what a document is: Megatron's documents (one or more
sequences each, the default) or its sequences.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from posembed.corpus._source import RangeInput, SourceOptions
from posembed.io._indexed import IndexedCorpus
from posembed.io._tokens import ChunkError

DOCUMENTS = ("documents", "sequences")


def prefix_of(path: Path) -> Path | None:
    """The prefix of the indexed dataset ``path`` names, or None: a ``.idx``
    file, a ``.bin`` file beside its ``.idx``, or a prefix whose ``.idx``
    exists (while nothing is at the prefix itself)."""
    name = str(path)
    if name.endswith(".idx"):
        return Path(name[:-4])
    if name.endswith(".bin") and os.path.lexists(name[:-4] + ".idx"):
        return Path(name[:-4])
    if not os.path.lexists(path) and os.path.lexists(name + ".idx"):
        return path
    return None


def matches(path: Path) -> bool:
    return prefix_of(path) is not None


def check(path: Path, options: SourceOptions) -> None:
    if options.dtype is not None:
        raise ChunkError(
            "--dtype applies to raw token files; an indexed dataset's .idx names its type"
        )
    if options.offsets is not None:
        raise ChunkError(
            "--offsets applies to token files; an indexed dataset's .idx holds its documents "
            "(--documents chooses documents or sequences)"
        )
    if options.column is not None:
        raise ChunkError(
            f"--column applies to Arrow and Parquet input; {path} is an indexed dataset"
        )
    if options.documents is not None and options.documents not in DOCUMENTS:
        raise ChunkError(
            f"--documents must be one of {', '.join(DOCUMENTS)}; got {options.documents!r}"
        )


def inputs(path: Path, options: SourceOptions) -> tuple[Any, ...]:
    prefix = prefix_of(path)
    assert prefix is not None
    return (f"{prefix}.idx", f"{prefix}.bin")


def open_input(path: Path, options: SourceOptions) -> RangeInput:
    prefix = prefix_of(path)
    assert prefix is not None
    unit: Any = DOCUMENTS[0] if options.documents is None else options.documents
    try:
        # plain or multimodal: the modes change neither the tokens nor the lengths
        corpus = IndexedCorpus(prefix, documents=unit, multimodal=None)
    except ValueError as exc:  # ChunkError included
        raise ChunkError(str(exc)) from None
    except OSError as exc:
        raise ChunkError(f"{prefix}: cannot be read ({exc.strerror})") from None
    return RangeInput(corpus.tokens, corpus.offsets, {"documents_are": unit})

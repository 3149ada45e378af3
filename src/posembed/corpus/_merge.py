"""``posembed merge``: Megatron-LM indexed datasets joined into one, as
Megatron's ``tools/merge_datasets.py`` joins them.

The output equals, byte for byte, what megatron-core's
``IndexedDatasetBuilder`` writes when each input is given to ``add_index`` in
turn and ``finalize`` ends it: the ``.bin`` is the inputs' ``.bin`` files back
to back, and the ``.idx`` holds their sequence lengths one after the other,
the sequence pointers of the joined ``.bin``, the document indices of each
input shifted by the sequences before it, and, for multimodal datasets, their
sequence modes. A folder given as an input stands for the datasets in it, in
the order ``merge_datasets.py`` takes them: by name (Python's ``sorted``).

Memory stays bounded by one input's index: every input is opened and checked
first (its index then dropped), then each is opened again in turn, its index
written into the output's ``.idx`` at its place (the output's counts are known
by then) and its ``.bin`` copied by the kernel (``copy_file_range`` where it
can, else reads and writes), checked afterwards to be the file first seen.
The files are written into a temporary folder next to ``PREFIX`` and renamed
into place when complete, as ``posembed convert`` writes them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from posembed.io import _indexed, _outdir
from posembed.io._safetensors import copy_file
from posembed.io._store import is_url
from posembed.io._tokens import ChunkError
from posembed.kernels import _validate as v


@dataclass(frozen=True)
class _Part:
    """One input, as first opened: what the output's layout needs from it."""

    prefix: Path
    idx_path: Path
    bin_path: Path
    sequences: int
    documents: int  # its document indices, less the leading 0
    tokens: int
    dtype: np.dtype[Any]
    multimodal: bool | None  # None: no sequences, so either kind


def merge_indexed(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    force: bool = False,
) -> dict[str, Any]:
    """Join Megatron indexed datasets into one, as Megatron's ``merge_datasets.py`` does.

    The output is byte for byte what megatron-core's ``IndexedDatasetBuilder``
    writes when each input, in the order given, goes to ``add_index`` and
    ``finalize`` ends it: the documents and sequences of the first input,
    then those of the second, and so on, the tokens unchanged. Multimodal
    datasets merge into a multimodal one, their sequence modes kept.

    Parameters
    ----------
    inputs : path, or list or tuple of paths
        Indexed datasets (``PREFIX``, ``PREFIX.idx`` or ``PREFIX.bin``) and
        folders; a folder stands for every dataset in it, by name in
        Python's ``sorted`` order, as ``merge_datasets.py`` takes a folder
        (each of its files must be one of a ``.idx`` and ``.bin`` pair).
        All of one token dtype, and all plain or all multimodal.
    output : path
        Writes ``PREFIX.bin`` and ``PREFIX.idx``; never one of the inputs.
    force : bool
        Replace an indexed dataset at ``PREFIX`` (never anything else).

    Returns
    -------
    dict of str to Any
        ``inputs`` (the datasets' prefixes, in order), ``output``,
        ``datasets``, ``documents``, ``sequences``, ``tokens``, ``dtype``
        and ``multimodal``.

    Raises
    ------
    TypeError
        An input or the output is not a path, ``inputs`` is neither a path
        nor a list or tuple, or ``force`` is not a bool.
    ValueError
        No dataset to merge; an input missing, damaged or changed while it
        is merged (the message names the file and what is wrong); inputs of
        two token dtypes or of both kinds (plain and multimodal); more
        tokens than the format's byte offsets hold; or an output that may
        not be written (one of the inputs, a file that is no indexed
        dataset, or an existing dataset without ``force``).
    OSError
        Writing fails (the temporary folder is removed, an old output left
        as it was).
    """
    try:
        return merge(inputs, output, force=force)
    except ChunkError as exc:  # the command's words, for Python
        raise ValueError(str(exc).replace("--force", "force=True")) from None


def merge(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    force: bool = False,
) -> dict[str, Any]:
    """:func:`merge_indexed`, raising ChunkError: the engine of ``posembed merge``."""
    force = v.flag(force, "force")
    given = [inputs] if isinstance(inputs, (str, os.PathLike)) else inputs
    if not isinstance(given, (list, tuple)):
        raise TypeError(
            f"inputs must be a path or a list or tuple of paths; got {type(inputs).__name__}"
        )
    prefixes = [p for item in given for p in _expand(item)]
    if not prefixes:
        raise ChunkError("no indexed dataset to merge: give at least one PREFIX or folder")
    if isinstance(output, bytes) or not isinstance(output, (str, os.PathLike)):
        raise TypeError(f"output must be a path (str or os.PathLike); got {type(output).__name__}")
    if is_url(output):
        raise ChunkError(f"output {output}: merge writes local files; give a local path")
    text = os.fspath(output)
    if isinstance(text, str) and text.endswith((os.sep, os.altsep or os.sep)):
        raise ChunkError(
            f"output {text} names no file prefix; give PREFIX for PREFIX.bin and PREFIX.idx"
        )
    prefix = _prefix(output, "output")

    parts = [_first_look(p) for p in prefixes]
    dtype, multimodal = _common_kind(parts)
    sequences = sum(p.sequences for p in parts)
    documents = sum(p.documents for p in parts)
    tokens = sum(p.tokens for p in parts)
    if tokens * dtype.itemsize >= _indexed.MAX_BYTES:
        raise ChunkError(
            f"the {len(parts)} datasets hold {tokens} tokens of {dtype} in all, more than "
            f"an indexed dataset's byte offsets hold ({_indexed.MAX_BYTES} bytes)"
        )
    problem = _outdir.pair_problem(
        prefix, [path for p in parts for path in (p.idx_path, p.bin_path)], force
    )
    if problem:
        raise ChunkError(problem)

    with _outdir.temporary(prefix) as tmp:
        _write(tmp, parts, dtype, multimodal, sequences, documents)
        _outdir.commit_pair(tmp, prefix, force)
    return {
        "inputs": [str(p.prefix) for p in parts],
        "output": str(prefix),
        "datasets": len(parts),
        "documents": documents,
        "sequences": sequences,
        "tokens": tokens,
        "dtype": dtype.name,
        "multimodal": multimodal,
    }


def _expand(item: Any) -> list[Path]:
    """The datasets' prefixes an input stands for: a folder's, sorted by
    name as ``merge_datasets.py`` sorts them, or the one it names."""
    if isinstance(item, bytes) or not isinstance(item, (str, os.PathLike)):
        raise TypeError(
            f"each input must be a path (str or os.PathLike); got {type(item).__name__}"
        )
    if is_url(item):
        raise ChunkError(f"input {item}: merge reads local files; give a local path")
    if not os.path.isdir(item):
        return [_prefix(item, "input")]
    folder = Path(item)
    names = set()
    for name in os.listdir(folder):
        if not os.path.isfile(folder / name):  # folders (and what is no file) are passed over
            continue
        stem = os.path.splitext(name)[0]
        for suffix in (".idx", ".bin"):
            if not os.path.isfile(folder / (stem + suffix)):
                raise ChunkError(
                    f"folder {folder} holds {name} without {stem}{suffix}: each file of a "
                    "folder to merge must be one of an indexed dataset's PREFIX.idx and "
                    "PREFIX.bin"
                )
        names.add(stem)
    if not names:
        raise ChunkError(f"folder {folder} holds no indexed dataset (no PREFIX.idx and .bin)")
    return [folder / stem for stem in sorted(names)]


def _prefix(path: str | os.PathLike[str], what: str) -> Path:
    """PREFIX of ``PREFIX``, ``PREFIX.idx`` or ``PREFIX.bin``."""
    try:
        return _indexed.paths(path)[0]
    except ValueError:
        raise ChunkError(
            f"{what} {str(path)!r} names no indexed dataset; give PREFIX for PREFIX.bin and "
            "PREFIX.idx"
        ) from None


def _open(prefix: Path, multimodal: bool | None) -> _indexed.IndexedCorpus:
    try:
        return _indexed.IndexedCorpus(prefix, documents="sequences", multimodal=multimodal)
    except ValueError as exc:  # ChunkError included
        raise ChunkError(str(exc)) from None


def _first_look(prefix: Path) -> _Part:
    corpus = _open(prefix, None)
    n = len(corpus.sequence_lengths)
    return _Part(
        corpus.prefix,
        corpus.idx_path,
        corpus.bin_path,
        n,
        len(corpus.document_indices) - 1,
        corpus.token_count,
        corpus.dtype,
        (corpus.modes is not None) if n else None,
    )


def _common_kind(parts: list[_Part]) -> tuple[np.dtype[Any], bool]:
    """The token dtype all inputs share and whether they are multimodal."""
    first = parts[0]
    for part in parts[1:]:
        if part.dtype != first.dtype:
            raise ChunkError(
                f"{part.idx_path} holds tokens of {part.dtype}, but {first.idx_path} holds "
                f"{first.dtype}: only datasets of one token dtype merge (posembed convert "
                "--output-dtype rewrites one in another)"
            )
    kinds = {part.multimodal: part for part in parts if part.multimodal is not None}
    if len(kinds) == 2:
        raise ChunkError(
            f"{kinds[True].idx_path} is multimodal (a mode for each sequence) but "
            f"{kinds[False].idx_path} is not: merge datasets of one kind"
        )
    return first.dtype, bool(kinds.get(True))


def _write(
    tmp: Path,
    parts: list[_Part],
    dtype: np.dtype[Any],
    multimodal: bool,
    sequences: int,
    documents: int,
) -> None:
    """The merged ``.idx`` and ``.bin`` in ``tmp``: each input's index put
    at its place in the output's sections, its tokens copied after the last."""
    n, d = sequences, documents + 1
    at_lengths = _indexed.HEADER.size
    at_pointers = at_lengths + 4 * n
    at_documents = at_pointers + 8 * n
    at_modes = at_documents + 8 * d
    idx_name, bin_name = _outdir.PAIR_NAMES
    with open(tmp / bin_name, "xb", buffering=0) as out_bin, open(tmp / idx_name, "xb") as idx:
        fd = idx.fileno()
        code = _indexed.CODE_OF[dtype]
        _pwrite(fd, _indexed.HEADER.pack(_indexed.MAGIC, _indexed.VERSION, code, n, d), 0)
        _pwrite(fd, np.zeros(1, "<i8"), at_documents)
        seqs = docs = nbytes = 0
        for part in parts:
            corpus = _open(part.prefix, part.multimodal)
            was = (part.sequences, part.documents, part.tokens, part.dtype)
            now = (
                len(corpus.sequence_lengths),
                len(corpus.document_indices) - 1,
                corpus.token_count,
                corpus.dtype,
            )
            if now != was:
                raise ChunkError(
                    f"{part.idx_path}: input changed while merging (it held {was[0]} "
                    f"sequences, {was[1]} documents and {was[2]} tokens of {was[3]}; now "
                    f"{now[0]}, {now[1]} and {now[2]} of {now[3]})"
                )
            _pwrite(fd, corpus.sequence_lengths.astype("<i4"), at_lengths + 4 * seqs)
            pointers = corpus.sequence_pointers + np.int64(nbytes)
            _pwrite(fd, pointers.astype("<i8"), at_pointers + 8 * seqs)
            shifted = corpus.document_indices[1:] + np.int64(seqs)
            _pwrite(fd, shifted.astype("<i8"), at_documents + 8 * (1 + docs))
            if multimodal and corpus.modes is not None:
                _pwrite(fd, corpus.modes, at_modes + seqs)
            size = corpus.token_count * dtype.itemsize
            _copy_tokens(corpus, out_bin, size)
            seqs, docs, nbytes = seqs + part.sequences, docs + part.documents, nbytes + size


def _copy_tokens(corpus: _indexed.IndexedCorpus, out: Any, size: int) -> None:
    """Append the input's ``.bin`` to ``out``, then check it is still the file
    its index was read with (not rewritten, grown or shrunk meanwhile)."""
    tokens = corpus.tokens.copy()
    try:
        tokens.open()
        try:
            copy_file(tokens.fd, out, tokens.path, size)
            tokens.check()
        finally:
            tokens.close()
    except ValueError as exc:  # ChunkError included: the file ended early, or changed
        raise ChunkError(str(exc)) from None
    except FileNotFoundError:
        raise ChunkError(
            f"{corpus.bin_path}: input changed while merging (it was removed)"
        ) from None


def _pwrite(fd: int, data: Any, at: int) -> None:
    view = np.ascontiguousarray(data).data.cast("B")
    while view:
        done = os.pwrite(fd, view, at)
        view, at = view[done:], at + done

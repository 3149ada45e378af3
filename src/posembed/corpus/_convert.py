"""``posembed convert``: any corpus ``posembed chunk`` reads, written as a
Megatron-LM indexed dataset (``PREFIX.bin`` and ``PREFIX.idx``), streaming.

Each input document becomes one sequence and one document, as Megatron's
``preprocess_data.py`` writes them (without sentence splitting); an empty
document becomes a document with no sequence. ``append_eod`` appends an
end-of-document id to each non-empty document, as its ``--append-eod`` does.
The tokens' dtype is Megatron's choice (uint16 for a vocabulary of fewer
than 65,500 ids, else int32) from ``vocab_size``; without it, from the
largest id met (uint16 until an id of 65,499 or more comes, which widens
what was written to int32); or as given.

The input is read a bounded batch at a time (a token file by range, so that
a document larger than memory streams too; Arrow and Parquet a batch of rows
at a time), one batch read ahead while the last is written. The files are
written into a temporary folder next to ``PREFIX`` and renamed into place
when complete (see :func:`posembed.io._outdir.commit_pair`); the folders above
``PREFIX`` that the run makes are removed again if it fails.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from posembed.corpus import _chunk, _progress
from posembed.corpus._sink_indexed import BIN_NAME, IDX_NAME
from posembed.corpus._source import RangeInput, SourceOptions, StreamInput
from posembed.io import _indexed, _outdir
from posembed.io._indexed_write import IndexedWriter
from posembed.io._store import StoreTokenFile, is_url, staged
from posembed.io._tokens import ChunkError, option_int
from posembed.kernels import _validate as v

# Largest id uint16 keeps under Megatron's rule (a vocabulary of 65,500 ids or
# more is written as int32).
UINT16_TOP = _indexed.UINT16_VOCAB - 2
INT32_TOP = 2**31 - 1
# Input bytes a token file's tokens are copied in between progress updates.
COPY_CALL_BYTES = 64 << 20


def convert_file(
    input_path: str | os.PathLike[str],
    output_prefix: str | os.PathLike[str],
    *,
    dtype: str | None = None,
    offsets_path: str | os.PathLike[str] | None = None,
    column: str | None = None,
    documents: str | None = None,
    append_eod: int | None = None,
    vocab_size: int | None = None,
    output_dtype: Any = None,
    force: bool = False,
    quiet: bool = False,
) -> dict[str, Any]:
    """Write a corpus as a Megatron indexed dataset: the engine of ``posembed convert``.

    Parameters
    ----------
    input_path : path
        Any input of :func:`posembed.chunk.chunk_file`: a ``.npy`` or raw
        token file (with ``offsets_path``), Parquet, Arrow IPC, a saved
        dataset, or an indexed dataset.
    output_prefix : path
        Writes ``PREFIX.bin`` and ``PREFIX.idx``.
    dtype, offsets_path, column, documents
        The input's options, as for :func:`posembed.chunk.chunk_file`.
    append_eod : int, optional
        An end-of-document id appended to each non-empty document.
    vocab_size : int, optional
        The tokenizer's vocabulary size: every id (and ``append_eod``) must
        be below it, and it chooses the dtype by Megatron's rule.
    output_dtype : numpy dtype, optional
        The tokens' dtype on disk (uint8, int8, int16, int32, int64 or
        uint16), instead of Megatron's rule; every id must fit it.
    force : bool
        Replace an indexed dataset at ``PREFIX`` (never anything else).
    quiet : bool
        No progress bar.

    Returns
    -------
    dict of str to Any
        ``input``, ``output``, ``documents``, ``sequences``, ``tokens``
        (written, end-of-document ids included), ``dtype``, ``append_eod``
        and ``vocab_size``.

    Raises
    ------
    ChunkError
        Any problem with the input, the options or the output path, in one
        line (as for :func:`posembed.chunk.chunk_file`); a negative id, one
        at or past ``vocab_size`` or that ``output_dtype`` cannot hold (the
        message names it and its document); a document longer than the
        format's int32 lengths. A ChunkError is a ValueError.
    ImportError
        Arrow or Parquet input without pyarrow.
    TypeError
        A ``force`` or ``quiet`` that is not a bool.
    OSError
        Writing fails (the temporary folder is removed, an old output left
        as it was).
    """
    quiet = v.flag(quiet, "quiet")
    force = v.flag(force, "force")
    if is_url(output_prefix):
        # written locally, then uploaded: PREFIX.bin, then PREFIX.idx last
        return staged(
            str(output_prefix),
            force,
            True,
            lambda local: convert_file(
                input_path,
                local,
                dtype=dtype,
                offsets_path=offsets_path,
                column=column,
                documents=documents,
                append_eod=append_eod,
                vocab_size=vocab_size,
                output_dtype=output_dtype,
                quiet=quiet,
            ),
            inputs=(input_path, offsets_path),
        )
    src = _chunk.input_location(input_path)
    prefix = _chunk.local_output(output_prefix, "output_prefix")
    _chunk.check_prefix_text(output_prefix)
    eod = option_int(append_eod, "--append-eod", 0)
    vocab = option_int(vocab_size, "--vocab-size", 1)
    fixed = None
    if output_dtype is not None:
        try:
            fixed = _indexed.token_dtype(output_dtype, "--output-dtype")
        except TypeError as exc:
            raise ChunkError(str(exc)) from None
    if vocab is not None and eod is not None and eod >= vocab:
        raise ChunkError(f"--append-eod {eod} is not an id of a --vocab-size of {vocab}")
    options = SourceOptions(dtype, offsets_path, column, documents)
    source = _chunk._source_for(src)
    source.check(src, options)
    problem = _outdir.pair_problem(prefix, source.inputs(src, options), force)
    if problem:
        raise ChunkError(problem)
    given = source.open_input(src, options)
    start = fixed if fixed is not None else _indexed.optimal_dtype(vocab or UINT16_TOP + 1)
    ids = _Ids(eod, vocab, fixed)

    try:
        with _outdir.temporary(prefix) as tmp:
            with IndexedWriter(tmp / BIN_NAME, tmp / IDX_NAME, start) as writer:
                if eod is not None:
                    ids.check(writer, np.array([eod]), lambda i: "--append-eod")
                if isinstance(given, RangeInput):
                    counts = _convert_ranges(given, writer, ids, quiet)
                else:
                    counts = _convert_stream(given, writer, ids, quiet)
                writer.finish()
            _outdir.commit_pair(tmp, prefix, force)
    finally:
        if isinstance(given, RangeInput):
            given.tokens.close()
    return {
        "input": str(src),
        "output": str(prefix),
        **given.meta,
        **counts,
        "dtype": writer.dtype.name,
        "append_eod": eod,
        "vocab_size": vocab,
    }


class _Ids:
    """The checks every batch's ids pass, and the dtype choice they drive."""

    def __init__(self, eod: int | None, vocab: int | None, fixed: np.dtype[Any] | None) -> None:
        self.eod, self.vocab, self.fixed = eod, vocab, fixed

    def limits(self, writer: IndexedWriter) -> tuple[int, int]:
        """The ids [low, high] that go to ``writer`` as they are: any other
        id is refused by :meth:`check`, or widens the writer first."""
        high = int(np.iinfo(writer.dtype).max)
        if self.vocab is not None:
            high = min(high, self.vocab - 1)
        if self.fixed is not None:
            high = min(high, int(np.iinfo(self.fixed).max))
        else:
            high = min(high, INT32_TOP)
            if self.vocab is None and writer.dtype != np.int32:
                high = min(high, UINT16_TOP)  # past it, Megatron's rule widens
        return 0, high

    def check(
        self,
        writer: IndexedWriter,
        tokens: np.ndarray,
        where: Any,
        drain: Any = None,
    ) -> tuple[int, int]:
        """ChunkError for an id out of range (``where(i)`` names token i's
        document); widen the writer when the dtype is Megatron's choice from
        the ids and one no longer fits uint16 (``drain()`` first: the writes
        in flight done). Returns the tokens' (min, max)."""
        if not tokens.shape[0]:
            return (0, 0)
        # unsigned ids are never negative: one pass over them, not two
        low = 0 if tokens.dtype.kind == "u" else int(tokens.min())
        high = int(tokens.max())
        bad = None
        if low < 0:
            bad, allowed = low, "token ids are >= 0"
        elif self.vocab is not None and high >= self.vocab:
            bad, allowed = high, f"a --vocab-size of {self.vocab} has ids 0..{self.vocab - 1}"
        elif self.fixed is not None and high > np.iinfo(self.fixed).max:
            top = np.iinfo(self.fixed).max
            bad, allowed = high, f"--output-dtype {self.fixed} holds at most {top}"
        elif high > INT32_TOP and self.fixed is None:
            bad, allowed = high, f"int32 holds at most {INT32_TOP}; give --output-dtype int64"
        if bad is not None:
            at = int(np.argmax(tokens == bad))
            raise ChunkError(f"token id {bad} in {where(at)}: {allowed}")
        if self.fixed is None and self.vocab is None and high > UINT16_TOP:
            if drain is not None and writer.dtype != np.int32:
                drain()  # the writes in flight land before the tokens are widened
            writer.widen(np.int32)
        return (low, high)


def _document_lengths(lengths: np.ndarray, eod: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(each non-empty document's sequence length, EOD included; the
    document ends in sequences, as :meth:`IndexedWriter.write` takes them)."""
    filled = lengths > 0
    return lengths[filled] + (eod is not None), np.cumsum(filled)


def _check_lengths(seq_lengths: np.ndarray, first_document: int, filled: np.ndarray) -> None:
    if seq_lengths.shape[0] and int(seq_lengths.max()) > _indexed.MAX_SEQUENCE:
        k = int(np.flatnonzero(filled)[int(np.argmax(seq_lengths))]) + first_document
        raise ChunkError(
            f"document {k} has {int(seq_lengths.max())} tokens; an indexed dataset's sequence "
            f"lengths are int32 (at most {_indexed.MAX_SEQUENCE})"
        )


def _convert_ranges(
    given: RangeInput, writer: IndexedWriter, ids: _Ids, quiet: bool
) -> dict[str, int]:
    """A corpus read by range: the index from the offsets, the tokens a
    bounded range at a time (a document may span many)."""
    tokens, offsets = given.tokens, given.doc_offsets
    lengths = np.diff(offsets)
    seq_lengths, ends = _document_lengths(lengths, ids.eod)
    filled = lengths > 0
    _check_lengths(seq_lengths, 0, filled)
    eod_at = offsets[1:][filled]  # where an EOD follows (non-empty documents' ends)
    block = max(1, _indexed.COPY_BLOCK_BYTES // tokens.dtype.itemsize)
    step = max(block, COPY_CALL_BYTES // tokens.dtype.itemsize)  # a progress step
    bar = _progress.progress(tokens.count, quiet, "convert")
    tokens.open()

    def where(first: int) -> Any:
        return lambda i: f"document {int(np.searchsorted(offsets, first + i, 'right')) - 1}"

    def marks(a: int, b: int) -> np.ndarray:  # the EODs that follow tokens (a, b]
        lo, hi = np.searchsorted(eod_at, [a + 1, b + 1])
        return eod_at[lo:hi]

    try:
        pos = 0
        while pos < tokens.count:
            # The kernels' threads read, check and write blocks; a block with
            # an id the output does not take as it stands comes back here.
            stop = min(tokens.count, pos + step)
            low, high = ids.limits(writer)
            if isinstance(tokens, StoreTokenFile):  # read here, not by the kernels' threads
                at: int | None = pos
                stop = min(stop, pos + block)
            else:
                at = writer.copy_from(
                    tokens, pos, stop, eod=ids.eod, eod_at=marks(pos, stop), low=low, high=high
                )
            if at is not None:  # the ChunkError naming the id, or the widen it needs
                end = min(stop, at + block)
                piece = tokens.read(at, end)
                bounds = ids.check(writer, piece, where(at))
                writer.write_tokens(piece, eod=ids.eod, eod_at=marks(at, end) - at, bounds=bounds)
                stop = end
            bar.update(stop - pos)
            pos = stop
        tokens.check()  # every token read: the file must still be the one first seen
        try:
            writer.write(np.empty(0, writer.dtype), seq_lengths, ends)
        except ValueError as exc:
            raise ChunkError(str(exc)) from None
    finally:
        bar.close()
    return {
        "documents": int(lengths.shape[0]),
        "sequences": int(seq_lengths.shape[0]),
        "tokens": int(seq_lengths.sum()),
    }


def _convert_stream(
    given: StreamInput, writer: IndexedWriter, ids: _Ids, quiet: bool
) -> dict[str, int]:
    """A corpus read in one pass: each batch of whole documents written as it comes."""
    n_docs = n_seqs = n_tokens = 0
    bar = _progress.stream_progress(quiet, "convert")
    docs = given.documents()
    try:
        with ThreadPoolExecutor(1) as reader:
            ahead = reader.submit(next, docs, None)
            while (batch := ahead.result()) is not None:
                ahead = reader.submit(next, docs, None)
                lengths = np.diff(batch.offsets)
                filled = lengths > 0
                seq_lengths, ends = _document_lengths(lengths, ids.eod)
                _check_lengths(seq_lengths, n_docs, filled)
                first = n_docs

                def where(i: int, b: Any = batch, first: int = first) -> str:
                    row = int(np.searchsorted(b.offsets, i, "right")) - 1
                    return f"document {first + row} (row {b.first_row + row} of {b.path})"

                bounds = ids.check(writer, batch.tokens, where)
                writer.write_tokens(
                    batch.tokens, eod=ids.eod, eod_at=batch.offsets[1:][filled], bounds=bounds
                )
                try:
                    writer.write(np.empty(0, writer.dtype), seq_lengths, ends)
                except ValueError as exc:
                    raise ChunkError(str(exc)) from None
                n_docs += lengths.shape[0]
                n_seqs += seq_lengths.shape[0]
                n_tokens += int(seq_lengths.sum())
                bar.batch(batch)
    finally:
        bar.close()
        docs.close()
    return {"documents": n_docs, "sequences": n_seqs, "tokens": n_tokens}

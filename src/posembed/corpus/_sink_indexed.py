"""The indexed-dataset output of ``posembed chunk --format megatron``:
``PREFIX.bin`` and ``PREFIX.idx``, as Megatron-LM's ``IndexedDataset`` reads them.

Each window is one sequence of its tokens (its ``length``: the padding of a
last window is not written, as Megatron's sequences have lengths of their
own), and the windows of one input document form one Megatron document, so
that ``document_indices`` keeps the input's document boundaries (a document
that gives no window gives no Megatron document). The tokens keep their
dtype where the format has a code for it (uint8, int8, int16, int32, int64,
uint16); uint32 tokens are written as int32 and uint64 as int64, each token
checked to fit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from posembed.io import _outdir
from posembed.io._indexed import CODE_OF
from posembed.io._indexed_write import IndexedWriter
from posembed.io._tokens import ChunkError

# The output's files inside the run's temporary folder, renamed into place.
IDX_NAME, BIN_NAME = _outdir.PAIR_NAMES


def format_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The format's dtype for tokens of ``dtype``: the same where it has a
    code, the signed type of the same width for uint32 and uint64."""
    native = np.dtype(dtype).newbyteorder("=")
    if native in CODE_OF:
        return native
    signed = np.dtype(f"i{native.itemsize}")
    if native.kind in "iu" and signed in CODE_OF:
        return signed
    raise ChunkError(f"--format megatron: tokens of {native} have no type in an indexed dataset")


class IndexedSink:
    """Writes windows as the sequences of an indexed dataset (see the module)."""

    @staticmethod
    def available() -> None:
        """Nothing beyond NumPy is needed."""

    @staticmethod
    def problem(out: Path, inputs: Any, force: bool) -> str | None:
        return _outdir.pair_problem(out, inputs, force)

    @staticmethod
    def commit(tmp: Path, out: Path, force: bool) -> None:
        _outdir.commit_pair(tmp, out, force)

    def __init__(self, folder: Path, dtype: np.dtype[Any], size: int, total: int | None) -> None:
        self.size = size
        self.writer = IndexedWriter(folder / BIN_NAME, folder / IDX_NAME, format_dtype(dtype))
        self.document: int | None = None  # the input document of the last window written

    def write(
        self,
        begin: int,
        rows: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
        documents: np.ndarray,
    ) -> None:
        if not rows.shape[0]:
            return
        if bool((lengths == self.size).all()):
            tokens = rows.reshape(-1)
        else:  # each window's own tokens, not its padding
            tokens = rows[np.arange(self.size) < lengths[:, None]]
        before = documents[0] if self.document is None else self.document
        previous = np.concatenate(([before], documents[:-1]))
        # a document ends before each window of another document than the one before
        ends = np.flatnonzero(documents != previous)
        try:
            self.writer.write(tokens, lengths, ends)
        except ValueError as exc:
            raise ChunkError(f"--format megatron: {exc}") from None
        self.document = int(documents[-1])

    def finish(self, total: int) -> None:
        empty = np.empty(0, np.int64)
        if self.document is not None:  # the last document ends with the last window
            self.writer.write(empty, empty, np.zeros(1, np.int64))
        self.writer.finish()

    def close(self) -> None:
        self.writer.close()

"""The Parquet output of ``posembed chunk``: one file of the columns of
:meth:`posembed.Windows.to_arrow`, which ``datasets.load_dataset("parquet")``
loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from posembed.corpus._source import MEMORY_BYTES
from posembed.io._outdir import FolderOutput
from posembed.kernels._arrow import require, windows_table

# The Parquet output's file: one file, in row groups of at most
# ROW_GROUP_BYTES of tokens (or one window), each held encoded by the writer
# until it is complete.
PARQUET_NAME = "windows.parquet"
ROW_GROUP_BYTES = MEMORY_BYTES // 32


class ParquetSink(FolderOutput):
    """The Parquet output: one file of the columns of ``Windows.to_arrow()``,
    in row groups of ROW_GROUP_BYTES, written in order (one writer thread)."""

    @staticmethod
    def available() -> None:
        """ImportError (naming the ``arrow`` extra) without pyarrow."""
        require("posembed chunk --format parquet")

    def __init__(self, folder: Path, dtype: np.dtype[Any], size: int, total: int | None) -> None:
        self.available()
        import pyarrow.parquet as pq

        self.size = size
        empty = np.empty((0, size), dtype)
        zero = np.empty(0, np.int64)
        schema = windows_table(empty, zero, zero, zero).schema
        # no dictionary: token ids are many and varied
        self.writer: Any = pq.ParquetWriter(folder / PARQUET_NAME, schema, use_dictionary=False)

    def write(
        self,
        begin: int,
        rows: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
        documents: np.ndarray,
    ) -> None:
        # row groups of a bounded size: the writer holds one encoded whole
        step = max(1, ROW_GROUP_BYTES // max(1, rows[:1].nbytes))
        for at in range(0, rows.shape[0], step):
            part = slice(at, at + step)
            table = windows_table(rows[part], lengths[part], documents[part], starts[part])
            self.writer.write_table(table)

    def finish(self, total: int) -> None:
        self.close()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

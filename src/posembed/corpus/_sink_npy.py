"""The ``.npy`` output of ``posembed chunk``: windows.npy, starts.npy, lengths.npy
and documents.npy (the arrays of :class:`posembed.Windows`), filled batch by
batch with positional writes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from posembed import _core
from posembed.io._outdir import FolderOutput
from posembed.io._tokens import TokenFile

# Bytes of rows a kernel thread of cut_from reads, cuts and writes at a time:
# within its core's cache, so that each token leaves memory once and its row
# returns once.
CUT_BLOCK_BYTES = 1 << 20


class NpyWriter:
    """A .npy file filled row range by row range with positional writes (safe
    from several threads; the GIL is released while the kernel copies). Of
    known shape, or of rows counted as they come: then :meth:`finish` writes
    the count into the header (NumPy leaves room for any count)."""

    def __init__(self, path: Path, dtype: np.dtype[Any], shape: tuple[int, ...]) -> None:
        self.path, self.dtype, self.shape = path, dtype, shape
        with open(path, "wb") as f:
            self.header = self._write_header(f, shape)
        self.row_bytes = dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64))
        self.fd = os.open(path, os.O_WRONLY)
        os.truncate(self.fd, self.header + self.row_bytes * shape[0])

    def _write_header(self, f: Any, shape: tuple[int, ...]) -> int:
        header = {
            "descr": np.lib.format.dtype_to_descr(self.dtype),
            "fortran_order": False,
            "shape": shape,
        }
        np.lib.format.write_array_header_1_0(f, header)
        return int(f.tell())

    def write(self, row: int, data: np.ndarray) -> None:
        view = np.ascontiguousarray(data).data.cast("B")
        pos, at = self.header + row * self.row_bytes, 0
        while at < len(view):
            at += os.pwrite(self.fd, view[at:], pos + at)

    def finish(self, rows: int) -> None:
        """Set the header's row count to ``rows`` (written since)."""
        if rows != self.shape[0]:
            with open(self.path, "r+b") as f:
                if self._write_header(f, (rows, *self.shape[1:])) != self.header:
                    raise OSError(f"{self.path}: the header of {rows} rows does not fit")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class NpySink(FolderOutput):
    """The .npy output: windows.npy, starts.npy, lengths.npy and documents.npy,
    of ``total`` windows, or of windows counted as they come (None)."""

    @staticmethod
    def available() -> None:
        """Nothing beyond NumPy is needed."""

    def __init__(self, folder: Path, dtype: np.dtype[Any], size: int, total: int | None) -> None:
        rows = 0 if total is None else total
        self.files: dict[str, NpyWriter] = {}
        try:
            self.files["windows"] = NpyWriter(folder / "windows.npy", dtype, (rows, size))
            for name in ("starts", "lengths", "documents"):
                self.files[name] = NpyWriter(folder / f"{name}.npy", np.dtype(np.int64), (rows,))
        except BaseException:
            self.close()
            raise

    def write(
        self,
        begin: int,
        rows: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
        documents: np.ndarray,
    ) -> None:
        self.files["windows"].write(begin, rows)
        self.files["starts"].write(begin, starts)
        self.files["lengths"].write(begin, lengths)
        self.files["documents"].write(begin, documents)

    def cut_from(
        self,
        begin: int,
        tokens: TokenFile,
        doc_offsets: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
        documents: np.ndarray,
        pad_value: int,
    ) -> None:
        """Windows [begin, begin + len(starts)) of the layout, cut by the
        kernels' threads from the open token file straight into windows.npy
        (each thread reads, cuts and writes a cache-sized block of rows), and
        their starts, lengths and documents.

        Raises
        ------
        ChunkError
            The file ended before a window's last token (it shrank).
        ValueError
            A window lies outside its document or the file.
        """
        windows = self.files["windows"]
        size = windows.shape[1]
        ended = _core.fill_windows_to_file(
            tokens.fd,
            tokens.offset,
            tokens.dtype.itemsize,
            tokens.swap,
            tokens.count,
            doc_offsets,
            starts,
            lengths,
            documents,
            size,
            np.array([pad_value], tokens.dtype),
            windows.fd,
            windows.header + begin * windows.row_bytes,
            CUT_BLOCK_BYTES,
        )
        if ended >= 0:
            raise tokens.ended(ended)
        self.files["starts"].write(begin, starts)
        self.files["lengths"].write(begin, lengths)
        self.files["documents"].write(begin, documents)

    def finish(self, total: int) -> None:
        for writer in self.files.values():
            writer.finish(total)
        self.close()

    def close(self) -> None:
        for writer in self.files.values():
            writer.close()

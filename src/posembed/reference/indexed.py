"""Twin of the Megatron indexed-dataset reader, writer and merge: whole files, plain NumPy.

``PREFIX.idx``: the magic ``MMIDIDX\\0\\0``, version 1 (``<Q``), the dtype
code (``<B``), the sequence count N and the document-index count D (``<Q``
each), sequence lengths (int32 x N), sequence pointers (int64 x N),
document indices (int64 x D), and for multimodal data one int8 mode per
sequence. ``PREFIX.bin``: the tokens back to back.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
DTYPES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 8: "uint16"}
CODE = {np.dtype(name): code for code, name in DTYPES.items()}


def _paths(prefix: Any) -> tuple[Path, Path, Path]:
    if not isinstance(prefix, (str, os.PathLike)):
        raise TypeError("prefix must be a path")
    text = os.fspath(prefix)
    if not isinstance(text, str):
        raise TypeError("prefix must be a path")
    for suffix in (".idx", ".bin"):
        if text.endswith(suffix):
            text = text[: -len(suffix)]
    if text == "" or text.endswith((os.sep, os.altsep or os.sep)):
        raise ValueError("prefix names no files")
    return Path(text), Path(text + ".idx"), Path(text + ".bin")


def _is_integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


class IndexedCorpus:
    """Reads a whole ``.idx`` with ``np.fromfile``, checks it, and reads the
    whole ``.bin`` each time tokens are asked for."""

    def __init__(
        self, prefix: Any, *, documents: str = "documents", multimodal: Any = False
    ) -> None:
        if multimodal is not None and not isinstance(multimodal, (bool, np.bool_)):
            raise TypeError("multimodal must be True, False or None")
        if not isinstance(documents, str):
            raise TypeError("documents must be a str")
        if documents not in ("documents", "sequences"):
            raise ValueError("documents must be 'documents' or 'sequences'")
        self.prefix, self.idx_path, self.bin_path = _paths(prefix)
        self.documents = documents
        if not self.idx_path.is_file():  # missing, a folder, a FIFO, a device
            raise ValueError(f"{self.idx_path} is not a file")
        data = np.fromfile(self.idx_path, np.uint8)
        if len(data) < 34:
            raise ValueError("shorter than the header")
        if data[:9].tobytes() != MAGIC:
            raise ValueError("wrong magic")
        version = int(data[9:17].view("<u8")[0])
        code = int(data[17])
        n = int(data[18:26].view("<u8")[0])
        d = int(data[26:34].view("<u8")[0])
        if version != 1:
            raise ValueError("version is not 1")
        if code not in DTYPES:
            raise ValueError("dtype code is not that of an integer type")
        if d == 0:
            raise ValueError("no document indices")
        if len(data) != 34 + 12 * n + 8 * d and len(data) != 34 + 13 * n + 8 * d:
            raise ValueError("the counts do not fit the file size")
        self.dtype = np.dtype(DTYPES[code])
        lengths = data[34 : 34 + 4 * n].view("<i4").astype(np.int32)
        pointers = data[34 + 4 * n : 34 + 12 * n].view("<i8").astype(np.int64)
        indices = data[34 + 12 * n : 34 + 12 * n + 8 * d].view("<i8").astype(np.int64)
        if np.any(lengths < 0):
            raise ValueError("a negative sequence length")
        ends = np.concatenate([[0], np.cumsum(lengths.astype(object))]).astype(object)
        if n and ends[-1] * self.dtype.itemsize >= 2**62:
            raise ValueError("too many tokens")
        ends = ends.astype(np.int64)
        expected = ends[:-1] * self.dtype.itemsize
        if not np.array_equal(pointers, expected):
            raise ValueError("the sequence pointers are not the sequences back to back")
        if indices[0] != 0 or np.any(np.diff(indices) < 0) or indices[-1] != n:
            raise ValueError("the document indices do not go from 0 up to the sequence count")
        has_modes = n > 0 and len(data) == 34 + 13 * n + 8 * d
        if has_modes and multimodal is False:
            raise ValueError("the file holds sequence modes: open it with multimodal=True")
        if multimodal and n > 0 and not has_modes:
            raise ValueError("multimodal=True, but the file holds no sequence modes")
        self.modes = None
        if multimodal or has_modes:
            self.modes = data[34 + 12 * n + 8 * d :].view(np.int8).copy()
        self.sequence_lengths = lengths
        self.sequence_pointers = pointers
        self.document_indices = indices
        self.offsets = ends[indices] if documents == "documents" else ends
        self.token_count = int(ends[-1])
        if not self.bin_path.is_file():
            raise ValueError(f"{self.bin_path} is not a file")
        if os.path.getsize(self.bin_path) != self.token_count * self.dtype.itemsize:
            raise ValueError("the .bin's size is not that of the tokens")

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def _all(self) -> np.ndarray:
        if not self.bin_path.is_file():
            raise ValueError(f"{self.bin_path} is not a file any more")
        tokens = np.fromfile(self.bin_path, self.dtype)
        if len(tokens) != self.token_count:
            raise ValueError(f"{self.bin_path} changed")
        return tokens

    def __getitem__(self, i: Any) -> np.ndarray:
        if not _is_integer(i):
            raise TypeError("an index must be an integer")
        if not -len(self) <= i < len(self):
            raise IndexError("index out of range")
        i = int(i) % len(self)
        return self._all()[self.offsets[i] : self.offsets[i + 1]].copy()

    def read(self, start: Any, stop: Any) -> np.ndarray:
        """Tokens [start, stop) of the corpus.

        Parameters
        ----------
        start, stop : int
            The range.

        Returns
        -------
        ndarray
            The tokens.

        Raises
        ------
        TypeError
            Not integers.
        ValueError
            A range outside the corpus.
        """
        if not _is_integer(start) or not _is_integer(stop):
            raise TypeError("start and stop must be integers")
        if not 0 <= start <= stop <= self.token_count:
            raise ValueError("the range is outside the corpus")
        return self._all()[int(start) : int(stop)].copy()

    def to_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """All the tokens and the offsets.

        Returns
        -------
        tokens, offsets : ndarray
            The tokens and a copy of the offsets.

        Raises
        ------
        ValueError
            The ``.bin`` changed.
        """
        return self._all(), self.offsets.copy()


def write_indexed(
    prefix: Any,
    tokens: Any,
    offsets: Any,
    *,
    dtype: Any = None,
    append_eod: Any = None,
    vocab_size: Any = None,
    force: Any = False,
) -> None:
    """Write a CSR corpus as ``PREFIX.bin`` and ``PREFIX.idx``.

    One sequence per non-empty document; an empty one is a document without
    a sequence.

    Parameters
    ----------
    prefix : str or os.PathLike
        The files' prefix.
    tokens : array_like of integers
        The tokens.
    offsets : array_like of integers
        The documents' CSR offsets.
    dtype : numpy dtype, optional
        The dtype on disk (default: uint16 under 65500 ids, else int32).
    append_eod : int, optional
        An id appended to each non-empty document.
    vocab_size : int, optional
        The number of ids.
    force : bool
        Replace existing files.

    Raises
    ------
    TypeError
        An argument of the wrong type.
    ValueError
        Values that do not fit.
    FileExistsError
        A file exists and ``force`` is False.
    IsADirectoryError
        A folder is at a path, or the prefix names one.
    FileNotFoundError
        The folder does not exist.
    """
    base, idx_path, bin_path = _paths(prefix)
    arrays = {}
    for name, value in (("tokens", tokens), ("offsets", offsets)):
        try:
            arrays[name] = np.asarray(value)
        except ValueError:  # ragged
            raise TypeError(f"{name} must be an array of integers") from None
    tokens, offsets = arrays["tokens"], arrays["offsets"]
    for name, a in arrays.items():
        if a.dtype.kind not in "iu" and not (a.size == 0 and a.dtype.kind == "f"):
            raise TypeError(f"{name} must hold integers")
        if a.ndim != 1:
            raise ValueError(f"{name} must be 1-D")
    for name, value, low in (("append_eod", append_eod, 0), ("vocab_size", vocab_size, 1)):
        if value is not None and not _is_integer(value):
            raise TypeError(f"{name} must be an integer")
        if value is not None and value < low:
            raise ValueError(f"{name} is too small")
    if not isinstance(force, (bool, np.bool_)):
        raise TypeError("force must be a bool")
    if dtype is not None:
        try:
            dt = np.dtype(dtype)
        except TypeError:
            raise TypeError("not a dtype") from None
        if dt.newbyteorder("=") not in CODE:
            raise TypeError("no code for this dtype")
        dtype = dt.newbyteorder("=")
    if len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != len(tokens):
        raise ValueError("offsets must go from 0 to len(tokens)")
    if np.any(offsets > len(tokens)):  # before any subtraction (uint64 would wrap)
        raise ValueError("an offset past len(tokens)")
    if np.any(np.diff(offsets) < 0):
        raise ValueError("offsets must not decrease")
    if tokens.size and tokens.min() < 0:
        raise ValueError("a negative token id")
    if tokens.size and tokens.max() > np.iinfo(np.int64).max:
        raise ValueError("a token past int64")
    tokens = tokens.astype(np.int64)  # token ids are at most int64 on disk
    sizes = np.diff(offsets).astype(np.int64)
    filled = sizes > 0
    ids = tokens if append_eod is None else np.append(tokens, np.int64(append_eod))
    if vocab_size is not None and ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError("an id outside the vocabulary")
    if append_eod is not None:  # after the last token of each non-empty document
        tokens = np.insert(tokens, offsets[1:][filled], append_eod)
        sizes = sizes + filled
    if dtype is None:
        cardinality = vocab_size if vocab_size is not None else int(ids.max(initial=-1)) + 1
        dtype = np.dtype(np.uint16 if cardinality < 65500 else np.int32)
    info = np.iinfo(dtype)
    if ids.size and (ids.min() < info.min or ids.max() > info.max):
        raise ValueError("a token does not fit the dtype")
    if sizes.size and sizes.max() > 2**31 - 1:
        raise ValueError("a document longer than int32 lengths allow")
    if base.is_dir():
        raise IsADirectoryError(f"{base} is a folder")
    for path in (bin_path, idx_path):
        if path.is_dir():
            raise IsADirectoryError(f"{path} is a folder")
        if not path.parent.is_dir():
            raise FileNotFoundError(f"{path.parent} does not exist")
        replaceable = force and path.is_file() and not path.is_symlink()
        if os.path.lexists(path) and not replaceable:
            raise FileExistsError(f"{path} exists")
    lengths = sizes[filled].astype(np.int32)  # one sequence per non-empty document
    pointers = (np.cumsum(lengths, dtype=np.int64) - lengths) * dtype.itemsize
    indices = np.concatenate([[0], np.cumsum(filled)]).astype(np.int64)
    flat = tokens.astype(dtype.newbyteorder("<"))
    header = (
        MAGIC
        + np.array([1], "<u8").tobytes()
        + bytes([CODE[dtype]])
        + np.array([len(lengths), len(indices)], "<u8").tobytes()
    )
    bin_path.write_bytes(flat.tobytes())
    idx_path.write_bytes(
        header
        + lengths.astype("<i4").tobytes()
        + pointers.astype("<i8").tobytes()
        + indices.astype("<i8").tobytes()
    )


def merge_indexed(inputs: Any, output: Any, *, force: Any = False) -> dict[str, Any]:
    """Join indexed datasets: each read whole, their arrays joined, written whole.

    Parameters
    ----------
    inputs : path or list of paths
        Datasets' prefixes, and folders (their datasets, sorted by name).
    output : path
        The output's prefix.
    force : bool
        Replace an indexed dataset at ``output``.

    Returns
    -------
    dict of str to Any
        The counts, as :func:`posembed.merge_indexed` returns them.

    Raises
    ------
    TypeError
        An argument of the wrong type.
    ValueError
        No dataset, a bad one, two dtypes or two kinds, or an output that
        may not be written.
    """
    if not isinstance(force, (bool, np.bool_)):
        raise TypeError("force must be a bool")
    items = [inputs] if isinstance(inputs, (str, os.PathLike)) else inputs
    if not isinstance(items, (list, tuple)):
        raise TypeError("inputs must be a path or a list of paths")
    prefixes = []
    for item in items:
        if not isinstance(item, (str, os.PathLike)) or isinstance(os.fspath(item), bytes):
            raise TypeError("an input must be a path")
        if not os.path.isdir(item):
            prefixes.append(_paths(item)[0])
            continue
        files = [name for name in os.listdir(item) if os.path.isfile(os.path.join(item, name))]
        stems = sorted({os.path.splitext(name)[0] for name in files})
        for stem in stems:
            for suffix in (".idx", ".bin"):
                if not os.path.isfile(os.path.join(item, stem + suffix)):
                    raise ValueError(f"{stem}{suffix} is missing")
        if not stems:
            raise ValueError(f"{item} holds no dataset")
        prefixes += [Path(item) / stem for stem in stems]
    if not prefixes:
        raise ValueError("no dataset to merge")
    if not isinstance(output, (str, os.PathLike)):
        raise TypeError("output must be a path")
    parts = [IndexedCorpus(prefix, documents="sequences", multimodal=None) for prefix in prefixes]
    dtype = parts[0].dtype
    if any(part.dtype != dtype for part in parts):
        raise ValueError("the datasets hold tokens of different dtypes")
    kinds = {part.modes is not None for part in parts if len(part.sequence_lengths)}
    if len(kinds) > 1:
        raise ValueError("plain and multimodal datasets")
    multimodal = kinds == {True}
    lengths = np.concatenate([np.zeros(0, np.int32)] + [p.sequence_lengths for p in parts])
    indices = [np.zeros(1, np.int64)]
    before = 0
    for part in parts:
        indices.append(part.document_indices[1:] + before)
        before += len(part.sequence_lengths)
    documents = np.concatenate(indices)
    if int(lengths.sum(dtype=np.int64)) * dtype.itemsize >= 2**62:
        raise ValueError("too many tokens")
    base, idx_path, bin_path = _paths(output)
    inputs_seen = [os.path.realpath(path) for p in parts for path in (p.idx_path, p.bin_path)]
    for path in (idx_path, bin_path):
        if os.path.realpath(path) in inputs_seen:
            raise ValueError(f"{path} is an input")
        if os.path.lexists(path) and not force:
            raise ValueError(f"{path} exists")
        if os.path.lexists(path) and (path.is_symlink() or not path.is_file()):
            raise ValueError(f"{path} is not a file")
    replaced = os.path.lexists(idx_path) or os.path.lexists(bin_path)
    if replaced and (not idx_path.is_file() or idx_path.read_bytes()[:9] != MAGIC):
        raise ValueError(f"{base} is not an indexed dataset")
    pointers = (np.cumsum(lengths, dtype=np.int64) - lengths) * dtype.itemsize
    header = (
        MAGIC
        + np.array([1], "<u8").tobytes()
        + bytes([CODE[dtype]])
        + np.array([len(lengths), len(documents)], "<u8").tobytes()
    )
    modes = b""
    if multimodal:
        modes = b"".join(p.modes.tobytes() for p in parts if p.modes is not None)
    tokens = b"".join(p._all().astype(dtype.newbyteorder("<")).tobytes() for p in parts)
    base.parent.mkdir(parents=True, exist_ok=True)
    bin_path.write_bytes(tokens)
    idx_path.write_bytes(
        header
        + lengths.astype("<i4").tobytes()
        + pointers.astype("<i8").tobytes()
        + documents.astype("<i8").tobytes()
        + modes
    )
    return {
        "inputs": [str(p.prefix) for p in parts],
        "output": str(base),
        "datasets": len(parts),
        "documents": len(documents) - 1,
        "sequences": len(lengths),
        "tokens": int(lengths.sum(dtype=np.int64)),
        "dtype": dtype.name,
        "multimodal": multimodal,
    }

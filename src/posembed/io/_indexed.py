"""Megatron indexed datasets (``PREFIX.bin`` and ``PREFIX.idx``): the format and its reader.

The format, as megatron-core writes it (``megatron/core/datasets/indexed_dataset.py``),
little-endian with no padding: the ``.idx`` holds the 9-byte magic, a version
(``<Q``, 1), the token dtype's code (``<B``), the sequence count N and the
document-index count D (``<Q`` each), then the sequence lengths (int32 x N),
the sequence pointers (int64 x N: byte offsets into the ``.bin``, the
exclusive cumulative sum of length x itemsize), the document indices (int64 x
D: 0, then the running sequence count at the end of each document, so D is the
number of documents + 1 and the last value is N) and, for multimodal data
only, one int8 mode per sequence. The ``.bin`` holds the tokens back to back.

:class:`IndexedCorpus` reads such a pair without trusting it: every field is
checked against the others and against the files' sizes before anything else
is read, and the tokens are read with positional reads (the batch kernels
copy them out of a mapping whose every copy is guarded), so a ``.bin`` that
shrinks or is rewritten gives a ValueError, not a crash.
A pair replaced while it is opened (``write_indexed(..., force=True)``, a
``--force`` run) is never read as the old ``.idx`` with the new ``.bin``: the
reader checks that the ``.idx`` it read is still the one at its path once the
``.bin`` is open, and opens the pair again if not.
``_indexed_write`` writes them: :class:`IndexedWriter` streams one out in
batches; :func:`write_indexed` writes in-memory arrays in one call.
"""

from __future__ import annotations

import operator
import os
import stat
import struct
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from posembed.io._store import ObjectReader, StoreTokenFile, StoreUrl, filesystem, info, is_url
from posembed.io._tokens import ChunkError, TokenFile, _open_regular, _stamp

# An .idx in a store is read whole: 12 bytes a sequence and 8 a document.
MAX_INDEX_BYTES = 1 << 36

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
HEADER = struct.Struct("<9sQBQQ")  # magic, version, dtype code, N, D: 34 bytes
# Megatron's DType codes of the integer types, which can hold token ids.
CODES: dict[int, np.dtype[Any]] = {
    1: np.dtype(np.uint8),
    2: np.dtype(np.int8),
    3: np.dtype(np.int16),
    4: np.dtype(np.int32),
    5: np.dtype(np.int64),
    8: np.dtype(np.uint16),
}
FLOAT_CODES = {6: "float64", 7: "float32"}
CODE_OF = {dt: code for code, dt in CODES.items()}
# Megatron's DType.optimal_dtype: uint16 when the vocabulary has fewer ids than this.
UINT16_VOCAB = 65500
MAX_SEQUENCE = 2**31 - 1  # sequence lengths are int32
MAX_BYTES = 2**62  # sizes the int64 arithmetic on pointers keeps clear of overflow
UNITS = ("documents", "sequences")
# Tokens moved at a time when the written tokens are widened.
WIDEN_CHUNK = 1 << 20
# Bytes of input a thread of copy_from reads, checks and writes at a time:
# within its core's cache, so each token leaves memory once and returns once.
COPY_BLOCK_BYTES = 1 << 20
INT64_MAX = 2**63 - 1
# Opens of a pair that a writer replaces meanwhile (the .idx read is no longer
# the one at its path once the .bin is open): tries, and the first wait
# between two, doubled each time (1 + 2 + 4 + 8 ms in all).
PAIR_TRIES = 5
PAIR_WAIT_S = 0.001
# An .idx missing beside the same .bin at every try is a writer between its
# renames, or a .bin left alone (a writer killed there). A writer's renames
# follow each other within microseconds, but a loaded machine can hold its
# thread off for longer than the tries take: such a pair is looked at again,
# each wait at most PAIR_MAX_WAIT_S, for this long before it is called missing.
PAIR_MISSING_S = 0.25
PAIR_MAX_WAIT_S = 0.016


def optimal_dtype(vocab_size: int | None) -> np.dtype[Any]:
    """Megatron's rule for the token dtype: uint16 for a vocabulary of fewer
    than 65500 ids, int32 otherwise (and when the size is unknown)."""
    if vocab_size is not None and vocab_size < UINT16_VOCAB:
        return np.dtype(np.uint16)
    return np.dtype(np.int32)


def token_dtype(dtype: Any, name: str = "dtype") -> np.dtype[Any]:
    """``dtype`` as one of the integer dtypes the format has a code for."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{name} must be a numpy integer dtype; got {dtype!r}") from None
    native: np.dtype[Any] = dt.newbyteorder("=")
    if native not in CODE_OF:
        allowed = ", ".join(str(d) for d in sorted(CODE_OF, key=str))
        raise TypeError(
            f"{name} must be one of the indexed dataset's token dtypes ({allowed}); got {dt}"
        )
    return native


def paths(prefix: Any) -> tuple[Path, Path, Path]:
    """(prefix, idx path, bin path) of ``PREFIX``, ``PREFIX.idx`` or ``PREFIX.bin``."""
    if isinstance(prefix, bytes) or not isinstance(prefix, (str, os.PathLike)):
        raise TypeError(f"prefix must be a path (str or os.PathLike); got {type(prefix).__name__}")
    text = os.fspath(prefix)
    if not isinstance(text, str):
        raise TypeError(f"prefix must be a path (str or os.PathLike); got {type(text).__name__}")
    if text.endswith((".idx", ".bin")):
        text = text[:-4]
    if not text or text.endswith((os.sep, os.altsep or os.sep)):
        raise ValueError(f"prefix must name the files PREFIX.idx and PREFIX.bin; got {prefix!r}")
    return Path(text), Path(text + ".idx"), Path(text + ".bin")


def _bad(path: Path, problem: str) -> ValueError:
    return ValueError(f"{path}: not a valid indexed dataset: {problem}")


def _open(path: Path, what: str) -> tuple[int, os.stat_result]:
    """A descriptor of the regular file ``path`` and its status (a FIFO is
    refused without waiting on it): the chunk inputs' opening, with a
    ValueError that says which of the pair is wrong."""
    try:
        return _open_regular(path, f"{path} (the {what} of an indexed dataset)")
    except ChunkError as exc:
        raise ValueError(str(exc)) from None


def _open_if_there(path: Path, what: str) -> tuple[int, os.stat_result] | None:
    """:func:`_open`, or None where ``path`` is missing (no other error is
    taken for that: each of its own is :func:`_open`'s)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError:
        return _open(path, what)  # its error, in its words
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return _open(path, what)
    return fd, info


def _read_exactly(fd: int, size: int, path: Path, at: int = 0) -> bytes:
    parts, got = [], 0
    while got < size:
        part = os.pread(fd, min(size - got, 1 << 30), at + got)
        if not part:
            raise ValueError(f"{path}: input changed while reading (it ended at byte {at + got})")
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _first(mask: np.ndarray) -> int:
    return int(np.argmax(mask))


class _FileBytes:
    """Bytes [start, stop) of the open file ``fd`` (``read(start, stop)``),
    and its ``size``: a local index, read as one in a store is."""

    def __init__(self, fd: int, path: Path, size: int) -> None:
        self.fd, self.path, self.size = fd, path, size

    def __call__(self, start: int, stop: int) -> bytes:
        return _read_exactly(self.fd, stop - start, self.path, start)


class _Replaced(Exception):
    """The ``.idx`` read is no longer the one at its path: a writer replaced
    the pair while it was opened (the ``.bin`` opened may be the new one).
    ``missing``: the error of an ``.idx`` not found beside its ``.bin`` (a
    writer between its renames, or a ``.bin`` left without its ``.idx``),
    and ``beside``, what tells that ``.bin`` from one that replaces it; ``fd``
    holds a local ``.bin`` open till the tries end, so that no new file
    takes its inode (and its identity) meanwhile."""

    def __init__(self, missing: ValueError | None = None, beside: Any = None, fd: int = -1) -> None:
        super().__init__()
        self.missing, self.beside, self.fd = missing, beside, fd


def _identity(info: os.stat_result) -> tuple[int, int, int, int]:
    """What tells a file from the one that replaced it or a rewrite of it."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


class _Index:
    """The checked contents of a ``.idx`` file."""

    def __init__(self, path: Path, read: Any, multimodal: bool | None = False) -> None:
        """The index whose bytes ``read(start, stop)`` returns (``read.size``:
        its size): a local file's (:class:`_FileBytes`) or a store's.
        ``multimodal``: whether it must hold sequence modes (None: either)."""
        size = int(read.size)
        if size < HEADER.size:
            raise _bad(path, f"it is {size} bytes, shorter than the {HEADER.size}-byte header")
        # The header first: a file that is no index is refused before its
        # size is read into memory.
        n, d, code = self._check_header(path, read(0, HEADER.size), size)
        plain = HEADER.size + 12 * n + 8 * d
        has_modes = bool(n) and size == plain + n
        if has_modes and multimodal is False:
            raise ValueError(
                f"{path}: a multimodal indexed dataset (its {size} bytes hold a mode for each "
                f"of its {n} sequences after the document indices; {plain} without them): "
                "open it with multimodal=True"
            )
        if multimodal and n and not has_modes:
            raise ValueError(
                f"{path}: multimodal=True, but the file holds no sequence modes (its {size} "
                f"bytes are those of a plain dataset of {n} sequences; {plain + n} with "
                "modes): open it without multimodal=True"
            )
        data = read(HEADER.size, size)
        self.dtype = CODES[code]
        self.lengths = np.frombuffer(data, "<i4", n, 0).astype(np.int32)
        self.pointers = np.frombuffer(data, "<i8", n, 4 * n).astype(np.int64)
        self.documents = np.frombuffer(data, "<i8", d, 12 * n).astype(np.int64)
        self.modes: npt.NDArray[np.int8] | None = None
        if multimodal or has_modes:
            self.modes = np.frombuffer(data, np.int8, n, 12 * n + 8 * d).copy()
        self.ends = self._check(path)

    @staticmethod
    def _check_header(path: Path, header: bytes, size: int) -> tuple[int, int, int]:
        """(N, D, dtype code) of a header that fits a file of ``size`` bytes."""
        magic, version, code, n, d = HEADER.unpack(header)
        if magic != MAGIC:
            raise _bad(path, f"magic is {magic!r}, not {MAGIC!r}")
        if version != VERSION:
            raise _bad(path, f"version is {version}; only version {VERSION} exists")
        if code in FLOAT_CODES:
            raise _bad(
                path,
                f"dtype code {code} is {FLOAT_CODES[code]}, which holds no token ids "
                "(integer dtypes only)",
            )
        if code not in CODES:
            raise _bad(path, f"dtype code {code} is unknown (known: 1-5 and 8 for integers)")
        if d == 0:
            raise _bad(path, "document count is 0; document_indices holds at least its first 0")
        plain = HEADER.size + 12 * n + 8 * d
        if size not in (plain, plain + n):
            modes = f" ({plain + n} with sequence modes)" if n else ""
            raise _bad(
                path,
                f"sequence count {n} and document count {d} need {plain} bytes{modes}; "
                f"the file has {size}",
            )
        return n, d, code

    def _check(self, path: Path) -> np.ndarray:
        """The sequences' token ends (cumulative lengths, int64), after checking
        every field."""
        lengths, pointers, docs = self.lengths, self.pointers, self.documents
        n, item = len(lengths), self.dtype.itemsize
        if n and lengths.min() < 0:
            i = _first(lengths < 0)
            raise _bad(path, f"sequence_lengths[{i}] is {lengths[i]}; lengths are >= 0")
        if n and float(lengths.sum(dtype=np.float64)) * item >= MAX_BYTES:
            raise _bad(path, "sequence_lengths add up to more tokens than a file can hold")
        ends = np.cumsum(lengths, dtype=np.int64)
        starts = (ends - lengths) * item
        if n and not np.array_equal(pointers, starts):
            i = _first(pointers != starts)
            p = int(pointers[i])
            if i == 0:
                problem = f"sequence_pointers[0] is {p}; they must start at 0"
            elif p < pointers[i - 1]:
                problem = (
                    f"sequence_pointers go back (out of order): sequence_pointers[{i}] is {p}, "
                    f"before sequence_pointers[{i - 1}] = {pointers[i - 1]}"
                )
            elif p < starts[i]:
                problem = (
                    f"sequence_pointers[{i}] is {p}: it overlaps the previous sequence, "
                    f"which ends at byte {starts[i]}"
                )
            else:
                problem = (
                    f"sequence_pointers[{i}] is {p}: it leaves a gap after the previous "
                    f"sequence, which ends at byte {starts[i]} (posembed needs the tokens "
                    "back to back, as Megatron writes them)"
                )
            raise _bad(path, problem)
        if docs[0] != 0:
            raise _bad(path, f"document_indices[0] is {docs[0]}; they must start at 0")
        if docs.max() > n:
            i = _first(docs > n)
            raise _bad(path, f"document_indices[{i}] is {docs[i]}, past the sequence count {n}")
        steps = np.diff(docs)
        if len(steps) and steps.min() < 0:
            i = _first(steps < 0) + 1
            raise _bad(
                path,
                f"document_indices decrease: document_indices[{i}] is {docs[i]}, "
                f"after {docs[i - 1]}",
            )
        if docs[-1] != n:
            raise _bad(
                path,
                f"document_indices end at {docs[-1]}, not at the sequence count {n} "
                "(sequences after the last document)",
            )
        return ends


class IndexedCorpus:
    """A Megatron indexed dataset (``PREFIX.bin`` and ``PREFIX.idx``), read with checks.

    The index is read into memory and checked field by field, against the
    other fields and against both files' sizes; the tokens are read when
    asked for, with positional reads (the batch kernels copy them out of
    a mapping of the ``.bin``, every copy guarded), so that a
    ``.bin`` that shrinks or is rewritten while it is read gives a
    ValueError, not a crash or a mix of old and new tokens. posembed needs
    the sequences back to back in the ``.bin``, in order, as Megatron's
    writer puts them. A multimodal dataset (one int8 mode per sequence after
    the document indices) is read with ``multimodal=True``, as Megatron's
    ``IndexedDataset`` reads it; the ``.idx``'s size tells it from a plain
    one, and either opened the other way is refused, never read wrong.

    Parameters
    ----------
    prefix : str or os.PathLike
        ``PREFIX``, ``PREFIX.idx`` or ``PREFIX.bin``.
    documents : {"documents", "sequences"}
        The unit that :attr:`offsets`, ``len()`` and indexing count:
        each Megatron document (one or more sequences), or each sequence.
    multimodal : bool or None
        True: the ``.idx`` holds a mode for each sequence (Megatron's
        ``multimodal=True``); False (the default): it holds none; None:
        either, as the file is (an empty dataset is then taken as plain).

    Attributes
    ----------
    prefix, idx_path, bin_path : Path
        The prefix and the two files.
    documents : str
        The unit, as given.
    dtype : numpy.dtype
        The tokens' integer dtype (native byte order).
    sequence_lengths : ndarray of int32, shape (N,)
    sequence_pointers : ndarray of int64, shape (N,)
        Byte offsets of the sequences in the ``.bin``.
    document_indices : ndarray of int64, shape (D,)
        0, then the number of sequences before each document's end.
    modes : ndarray of int8, shape (N,), or None
        Each sequence's mode (a multimodal dataset); None for a plain one.
    offsets : ndarray of int64
        CSR token offsets of the units, from 0 to :attr:`token_count`.
    tokens : posembed.io._tokens.TokenFile
        The ``.bin`` as a token file (closed), stamped with the size,
        modification time and inode seen when it was opened.
    token_count : int
        Number of tokens.

    Raises
    ------
    TypeError
        ``prefix`` is not a path, ``documents`` is not a str, or
        ``multimodal`` is not a bool or None.
    ValueError
        ``documents`` is neither choice; the ``.idx`` holds sequence modes
        and ``multimodal`` is False, or holds none and it is True; a file
        is missing or not a regular
        file; the files are not a valid indexed dataset (the message names
        the file, the field and the bad value); or a writer replaced the pair
        each time it was opened (a few tries: the ``.idx`` read must still be
        the one at its path once the ``.bin`` is open, so that an old ``.idx``
        is never read with a new ``.bin``).
    """

    def __init__(
        self,
        prefix: str | os.PathLike[str],
        *,
        documents: Literal["documents", "sequences"] = "documents",
        multimodal: bool | None = False,
    ) -> None:
        if multimodal is not None and not isinstance(multimodal, (bool, np.bool_)):
            raise TypeError(
                f"multimodal must be True, False or None; got {type(multimodal).__name__} "
                f"{multimodal!r}"
            )
        self.multimodal = None if multimodal is None else bool(multimodal)
        if not isinstance(documents, str):
            raise TypeError(
                f"documents must be 'documents' or 'sequences'; got {type(documents).__name__}"
            )
        if documents not in UNITS:
            raise ValueError(f"documents must be 'documents' or 'sequences'; got {documents!r}")
        if is_url(prefix):
            self._open_in_store(str(prefix), documents)
            return
        self.prefix, self.idx_path, self.bin_path = paths(prefix)
        self.documents = documents
        size, stamp = self._opened(self._open_pair)
        self._check_bin_size(size, self.idx_path.name)
        self.tokens = TokenFile(self.bin_path, self.dtype, 0, self.token_count, stamp=stamp)

    def _opened(self, open_pair: Any) -> Any:
        """What ``open_pair()`` returns, tried again while a writer replaces
        the pair under it (:class:`_Replaced`). An ``.idx`` missing at every
        try, with no replacement seen, is tried again for ``PAIR_MISSING_S``
        and then reported as missing."""
        moved, missing, held = False, None, []
        beside: set[Any] = set()  # the .bin seen beside each missing .idx
        tries, missing_until = 0, time.monotonic() + PAIR_MISSING_S
        try:
            while True:
                try:
                    return open_pair()
                except _Replaced as exc:
                    missing, beside = exc.missing, beside | {exc.beside}
                    if exc.fd >= 0:
                        held.append(exc.fd)
                    # a new .bin between two tries: a writer, not a .bin left alone
                    moved = moved or missing is None or len(beside) > 1
                tries += 1
                lone = missing is not None and not moved  # no writer seen yet
                if tries >= PAIR_TRIES and not (lone and time.monotonic() < missing_until):
                    break
                time.sleep(min(PAIR_WAIT_S * 2 ** min(tries - 1, 16), PAIR_MAX_WAIT_S))
        finally:
            for fd in held:
                os.close(fd)
        if missing is not None and not moved:
            raise missing
        raise ValueError(
            f"{self.idx_path}: the indexed dataset was replaced while it was opened, "
            f"{tries} times in a row (a writer is replacing {self.prefix}.idx and "
            ".bin); its .idx and .bin could not be read as one pair: open it again once "
            "the writer is done"
        )

    def _open_pair(self) -> tuple[int, tuple[int, int, int]]:
        """Read the local ``.idx``, open the ``.bin``, and prove they are one
        pair: the writer (``_outdir.commit_pair``) moves the old ``.idx`` aside
        before it renames the new ``.bin`` in, so an ``.idx`` still at its path
        once the ``.bin`` is open was there before that ``.bin`` came. Returns
        the ``.bin``'s size and stamp; raises :class:`_Replaced` otherwise."""
        opened = _open_if_there(self.idx_path, "index (.idx)")
        if opened is None:  # between a writer's renames, or a .bin left without it
            try:
                opened = _open(self.idx_path, "index (.idx)")  # its error, if still missing
            except ValueError as exc:
                try:
                    bin_fd, bin_info = _open(self.bin_path, "data (.bin)")
                except ValueError:
                    raise exc from None
                raise _Replaced(exc, _identity(bin_info), bin_fd) from None
        fd, seen = opened
        try:  # the .idx kept open: no other file takes its inode meanwhile
            index = _Index(
                self.idx_path, _FileBytes(fd, self.idx_path, seen.st_size), self.multimodal
            )
            bin_fd, bin_info = _open(self.bin_path, "data (.bin)")
            os.close(bin_fd)
            now: tuple[int, int, int, int] | None
            try:
                now = _identity(os.stat(self.idx_path))
            except OSError:
                now = None
        finally:
            os.close(fd)
        if now != _identity(seen):
            raise _Replaced
        self._set_index(index, self.documents)
        return bin_info.st_size, _stamp(bin_info)

    def _check_bin_size(self, size: int, idx_name: str) -> None:
        nbytes = self.token_count * self.dtype.itemsize
        if size != nbytes:
            raise _bad(
                self.bin_path,
                f"it holds {size} bytes, but {idx_name} describes "
                f"{self.token_count} tokens of {self.dtype} ({nbytes} bytes)",
            )

    def _set_index(self, index: _Index, documents: Literal["documents", "sequences"]) -> None:
        self.documents = documents
        self.dtype: np.dtype[Any] = index.dtype
        self.sequence_lengths: npt.NDArray[np.int32] = index.lengths
        self.sequence_pointers: npt.NDArray[np.int64] = index.pointers
        self.document_indices: npt.NDArray[np.int64] = index.documents
        self.modes: npt.NDArray[np.int8] | None = index.modes
        ends = np.concatenate([np.zeros(1, np.int64), index.ends])
        self.offsets: npt.NDArray[np.int64] = (
            ends[index.documents] if documents == "documents" else ends
        )
        self.token_count = int(ends[-1])

    def _open_in_store(self, url: str, documents: Literal["documents", "sequences"]) -> None:
        """The dataset at the URL ``PREFIX`` (through fsspec): the .idx read
        whole and checked as a local one is, the .bin read by range."""
        text = url[:-4] if url.endswith((".idx", ".bin")) else url
        # URLs kept as their text (a Path would fold their //)
        self.prefix = StoreUrl(text)  # type: ignore[assignment]
        self.idx_path = StoreUrl(text + ".idx")  # type: ignore[assignment]
        self.bin_path = StoreUrl(text + ".bin")  # type: ignore[assignment]
        self.documents = documents
        fs, key = filesystem(str(self.bin_path))
        size, version = self._opened(lambda: self._open_store_pair(fs, key))
        self._check_bin_size(size, f"{text.rsplit('/', 1)[-1]}.idx")
        self.tokens = StoreTokenFile(
            str(self.bin_path),
            self.dtype,
            0,
            self.token_count,
            version=(size, version),
            store=(fs, key),
        )

    def _open_store_pair(self, fs: Any, bin_key: str) -> tuple[int, str]:
        """As :meth:`_open_pair`, for a pair in a store: the ``.idx`` read,
        the ``.bin``'s size and version (ETag) taken, then the ``.idx``'s
        version checked again (a writer removes the old ``.idx`` before it
        uploads the new ``.bin``). Returns the ``.bin``'s (size, version)."""
        idx_url, bin_url = str(self.idx_path), str(self.bin_path)
        idx_fs, idx_key = filesystem(idx_url)

        def version() -> tuple[int, str] | None:  # the .idx's now, None if it went
            try:
                return info(idx_fs, idx_key, idx_url)
            except ChunkError:
                return None

        try:
            read = ObjectReader(idx_url)
        except ChunkError as exc:
            if version() is not None:  # missing when read, there now: a writer's new one
                raise _Replaced from None
            try:
                beside = info(fs, bin_key, bin_url)
            except ChunkError:
                raise exc from None
            raise _Replaced(exc, beside) from None
        seen = (read.size, read.version)
        if read.size > MAX_INDEX_BYTES:
            raise _bad(self.idx_path, f"it is {read.size} bytes; far more than an index holds")
        try:
            index = _Index(self.idx_path, read, self.multimodal)
        except ValueError:  # read across a replacement: the bytes of two objects, or cut short
            if version() != seen:
                raise _Replaced from None
            raise
        found = info(fs, bin_key, bin_url)
        if version() != seen:
            raise _Replaced
        self._set_index(index, self.documents)
        return found

    def __len__(self) -> int:
        """The number of units (documents or sequences)."""
        return len(self.offsets) - 1

    def __repr__(self) -> str:
        return (
            f"IndexedCorpus({str(self.prefix)!r}, documents={self.documents!r}): "
            f"{len(self)} {self.documents}, {self.token_count} tokens of {self.dtype}"
        )

    def __getitem__(self, i: int) -> np.ndarray:
        """Unit ``i``'s tokens (negative counts from the end), read into a new array."""
        try:
            k = operator.index(i)
        except TypeError:
            raise TypeError(
                f"an IndexedCorpus is indexed by an integer; got {type(i).__name__}"
            ) from None
        if isinstance(i, (bool, np.bool_)):
            raise TypeError("an IndexedCorpus is indexed by an integer; got bool")
        n = len(self)
        if not -n <= k < n:
            raise IndexError(f"index {k} is out of range for {n} {self.documents}")
        k %= n
        return self._read(int(self.offsets[k]), int(self.offsets[k + 1]))

    def read(self, start: int, stop: int) -> np.ndarray:
        """Tokens [start, stop) of the whole corpus (its sequences back to back).

        Parameters
        ----------
        start, stop : int
            The range, 0 <= start <= stop <= :attr:`token_count`.

        Returns
        -------
        ndarray, shape (stop - start,)
            A new array of :attr:`dtype`.

        Raises
        ------
        TypeError
            ``start`` or ``stop`` is not an integer.
        ValueError
            The range is outside the corpus, or the ``.bin`` changed since
            it was opened.
        """
        lo, hi = _int(start, "start"), _int(stop, "stop")
        if not 0 <= lo <= hi <= self.token_count:
            raise ValueError(
                f"start and stop must satisfy 0 <= start <= stop <= {self.token_count} "
                f"(the token count); got start={lo}, stop={hi}"
            )
        return self._read(lo, hi)

    def to_arrays(self) -> tuple[np.ndarray, npt.NDArray[np.int64]]:
        """All the tokens and the units' offsets, in memory.

        Returns
        -------
        tokens : ndarray, shape (token_count,)
            Of :attr:`dtype`.
        offsets : ndarray of int64
            A copy of :attr:`offsets`.

        Raises
        ------
        ValueError
            The ``.bin`` changed since it was opened.
        """
        return self._read(0, self.token_count), self.offsets.copy()

    def _read(self, start: int, stop: int) -> np.ndarray:
        f = self.tokens.copy()
        try:
            f.open()
            try:
                out = f.read(start, stop)
                f.check()  # rewritten during the read: old and new tokens would mix
            finally:
                f.close()
        except ChunkError as exc:
            raise ValueError(str(exc)) from None
        except FileNotFoundError:
            raise ValueError(
                f"{self.bin_path}: input changed while reading (it was removed)"
            ) from None
        except OSError as exc:
            raise ValueError(f"{self.bin_path}: cannot be read ({exc.strerror})") from None
        return out


def _int(value: Any, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer; got {type(value).__name__} {value!r}")
    return int(value)


# -- writing -------------------------------------------------------------------------


def sequence_pointers(lengths: np.ndarray, dtype: np.dtype[Any]) -> npt.NDArray[np.int64]:
    """Each sequence's byte offset in the ``.bin``: the exclusive cumulative
    sum of length x itemsize, in int64."""
    ends = np.cumsum(lengths, dtype=np.int64)
    starts: npt.NDArray[np.int64] = (ends - lengths) * np.int64(dtype.itemsize)
    return starts

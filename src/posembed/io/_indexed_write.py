"""Megatron-LM indexed datasets written: :class:`IndexedWriter` (a ``.bin``
and ``.idx`` pair built batch by batch, as ``posembed convert``, ``chunk`` and
``pack`` write them) and :func:`write_indexed` (a whole corpus in memory). The
format itself and its reader are in ``_indexed``."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from posembed import _core
from posembed.io import _outdir
from posembed.io._indexed import (
    CODE_OF,
    COPY_BLOCK_BYTES,
    HEADER,
    INT64_MAX,
    MAGIC,
    MAX_BYTES,
    MAX_SEQUENCE,
    VERSION,
    WIDEN_CHUNK,
    _first,
    _read_exactly,
    optimal_dtype,
    paths,
    sequence_pointers,
    token_dtype,
)
from posembed.io._tokens import TokenFile


def _check_fits(values: np.ndarray, dtype: np.dtype[Any], what: str) -> None:
    """Refuse a value of ``values`` (integers) that ``dtype`` cannot hold."""
    if not len(values):
        return
    info = np.iinfo(dtype)
    lo, hi = values.min(), values.max()
    if lo < info.min or hi > info.max:
        i = _first((values < info.min) | (values > info.max))
        raise ValueError(
            f"{what}[{i}] is {values[i]}, which does not fit {dtype} ({info.min}..{info.max})"
        )


def _int64s(value: Any, name: str, allowed: str) -> npt.NDArray[np.int64]:
    """``value`` (integers, 1-D) as int64; a uint64 value past int64 is
    refused as given (``allowed``: what the values may be), never wrapped."""
    a = _integers(value, name)
    if a.dtype.kind == "u" and a.shape[0] and int(a.max()) > INT64_MAX:
        i = _first(a > INT64_MAX)
        raise ValueError(f"{name}[{i}] is {a[i]}; {allowed}")
    out: npt.NDArray[np.int64] = a.astype(np.int64, copy=False)
    return out


def _integers(value: Any, name: str) -> np.ndarray:
    try:
        a = np.asarray(value)
    except ValueError:  # a ragged sequence
        raise TypeError(
            f"{name} must be an array of integers; got a {type(value).__name__} "
            "that is no array (ragged?)"
        ) from None
    if a.dtype == object or not (a.dtype.kind in "iu" or (a.size == 0 and a.dtype.kind == "f")):
        raise TypeError(f"{name} must be an array of integers; got dtype {a.dtype}")
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {a.shape}")
    return a if a.dtype.kind in "iu" else a.astype(np.int64)


class IndexedWriter:
    """Writes an indexed dataset a batch of sequences at a time.

    Tokens go to ``bin_path`` as they come; the index (O(number of
    sequences) memory) is written to ``idx_path`` by :meth:`finish`. Both
    paths must not exist (a run writes into a fresh temporary folder, or
    :func:`write_indexed` renames the files into place).

    Parameters
    ----------
    bin_path, idx_path : os.PathLike
        The files to create.
    dtype : numpy dtype
        The tokens' dtype: one with a code in the format (uint8, int8,
        int16, int32, int64, uint16); :meth:`widen` changes it later.
    multimodal : bool
        Write an int8 mode for each sequence (Megatron's multimodal
        datasets): :meth:`write` then takes them.

    Raises
    ------
    TypeError
        ``dtype`` has no code in the format.
    FileExistsError
        ``bin_path`` exists.
    """

    def __init__(
        self,
        bin_path: str | os.PathLike[str],
        idx_path: str | os.PathLike[str],
        dtype: Any,
        multimodal: bool = False,
    ) -> None:
        self.dtype = token_dtype(dtype)
        self._modes: list[np.ndarray] | None = [] if multimodal else None
        self._loose = 0  # tokens written by write_tokens that no length counts yet
        self.bin_path, self.idx_path = Path(bin_path), Path(idx_path)
        self._file = open(self.bin_path, "x+b")  # noqa: SIM115 (closed by close())
        self._lengths: list[np.ndarray] = []
        self._documents: list[np.ndarray] = [np.zeros(1, np.int64)]
        self.sequence_count = 0
        self.token_count = 0
        self.finished = False

    def __enter__(self) -> IndexedWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write(self, tokens: Any, lengths: Any, document_ends: Any, modes: Any = None) -> None:
        """Append a batch of sequences, and the ends of the documents they close.

        A batch that is refused writes nothing: a caller that meets a token
        its dtype cannot hold can :meth:`widen` and write the batch again.

        Parameters
        ----------
        tokens : array_like of integers, 1-D
            The batch's tokens, its sequences back to back.
        lengths : array_like of integers, 1-D
            Each sequence's length (they add up to ``len(tokens)``).
        document_ends : array_like of integers, 1-D
            Where documents end, counted in this batch's sequences: a value v
            ends a document after the batch's first v sequences (0 <= v <=
            ``len(lengths)``, non-decreasing). A document may span batches
            (its sequences are written, its end comes in a later batch); a
            repeated value is an empty document; 0 ends a document before
            the batch's first sequence.
        modes : array_like of integers, 1-D, optional
            Each sequence's mode (int8 values): required by a multimodal
            writer, refused by a plain one.

        Raises
        ------
        TypeError
            An argument is not an array of integers.
        ValueError
            The arrays do not fit together, a length is negative or past
            int32, a document end is out of order or range, a token or a
            mode does not fit its dtype, or modes are given to a plain
            writer or missing for a multimodal one.
        """
        if self.finished or self._file.closed:
            raise ValueError(f"{self.bin_path}: the writer is finished or closed")
        toks = _integers(tokens, "tokens")
        lens = _int64s(lengths, "lengths", f"lengths are in 0..{MAX_SEQUENCE} (int32)")
        ends = _int64s(
            document_ends, "document_ends", "document_ends are counts of the batch's sequences"
        )
        if len(lens) and lens.min() < 0:
            i = _first(lens < 0)
            raise ValueError(
                f"lengths[{i}] is {lens[i]} (sequence {self.sequence_count + i}); lengths are >= 0"
            )
        if len(lens) and lens.max() > MAX_SEQUENCE:
            i = _first(lens > MAX_SEQUENCE)
            raise ValueError(
                f"sequence {self.sequence_count + i} has {lens[i]} tokens; the format's "
                f"lengths are int32 (at most {MAX_SEQUENCE})"
            )
        total = int(lens.sum())
        if total != len(toks) + self._loose:
            raise ValueError(
                f"lengths add up to {total}, but tokens holds {len(toks)}"
                + (f" (and {self._loose} written by write_tokens)" if self._loose else "")
            )
        if len(ends) and (ends.min() < 0 or ends.max() > len(lens)):
            raise ValueError(
                f"document_ends must be in 0..{len(lens)} (the batch's sequences); "
                f"got values {ends.min()}..{ends.max()}"
            )
        if len(ends) > 1 and np.diff(ends).min() < 0:
            i = _first(np.diff(ends) < 0) + 1
            raise ValueError(
                f"document_ends must not decrease; document_ends[{i}] is {ends[i]} "
                f"after {ends[i - 1]}"
            )
        if (modes is None) != (self._modes is None):
            raise ValueError(
                "modes are required by a multimodal writer"
                if modes is None
                else "modes given to a writer that is not multimodal (multimodal=False)"
            )
        kinds = None
        if modes is not None:
            kinds = _integers(modes, "modes")
            if len(kinds) != len(lens):
                raise ValueError(
                    f"modes holds {len(kinds)} values; one for each of the {len(lens)} sequences"
                )
            _check_fits(kinds, np.dtype(np.int8), "modes")
        _check_fits(toks, self.dtype, "tokens")
        self._append(toks)
        self._loose = 0
        self._lengths.append(lens.astype(np.int32))
        self._documents.append(ends + self.sequence_count)
        if self._modes is not None and kinds is not None:
            self._modes.append(kinds.astype(np.int8))
        self.sequence_count += len(lens)

    def write_tokens(
        self,
        tokens: Any,
        *,
        eod: int | None = None,
        eod_at: Any = None,
        bounds: tuple[int, int] | None = None,
    ) -> None:
        """Append tokens whose sequences a later :meth:`write` describes (its
        lengths then count them first): a sequence larger than memory is
        written a bounded piece at a time.

        Parameters
        ----------
        tokens : array_like of integers, 1-D
            The tokens.
        eod : int, optional
            A token written before each index of ``eod_at`` (sorted, in
            0..len(tokens)), without a copy of ``tokens``: the end-of-document
            ids of the documents that end in this piece.
        eod_at : array_like of integers, optional
            Where ``eod`` goes.
        bounds : (int, int), optional
            The tokens' smallest and largest value, when the caller has them
            (they are then not computed again).

        Raises
        ------
        TypeError
            ``tokens`` is not an array of integers.
        ValueError
            A token does not fit the writer's dtype, or the writer is finished.
        """
        if self.finished or self._file.closed:
            raise ValueError(f"{self.bin_path}: the writer is finished or closed")
        toks = _integers(tokens, "tokens")
        at = np.zeros(0, np.int64)
        if eod_at is not None and eod is not None:  # no id: no marks, whatever eod_at says
            at = _int64s(eod_at, "eod_at", "eod_at holds token indices")
        if bounds is None:
            _check_fits(toks, self.dtype, "tokens")
        elif len(toks):
            info = np.iinfo(self.dtype)
            if bounds[0] < info.min or bounds[1] > info.max:
                _check_fits(toks, self.dtype, "tokens")  # names the token
        if len(at):
            _check_fits(np.array([eod]), self.dtype, "eod")
        self._append(toks, eod, at)
        self._loose += len(toks) + len(at)

    def _append(
        self, toks: np.ndarray, eod: int | None = None, at: np.ndarray | None = None
    ) -> None:
        count = len(toks) + (0 if at is None else len(at))
        if (self.token_count + count) * self.dtype.itemsize >= MAX_BYTES:
            raise ValueError(f"{self.bin_path}: the tokens would pass {MAX_BYTES} bytes")
        little = self.dtype.newbyteorder("<")
        data = np.ascontiguousarray(toks.astype(little, copy=False)).reshape(-1)
        cuts = np.zeros(0, np.int64) if at is None or eod is None else at
        mark = np.array([0 if eod is None else eod], little)
        # the EOD ids between runs of the tokens, written with them in one
        # vectored write each IOV_MAX pieces, without a copy
        _core.write_marked(
            self._file.fileno(), data, cuts, mark, self.token_count * self.dtype.itemsize
        )
        self.token_count += count

    def copy_from(
        self,
        tokens: TokenFile,
        first: int,
        last: int,
        *,
        eod: int | None = None,
        eod_at: Any = None,
        low: int = 0,
        high: int | None = None,
    ) -> int | None:
        """Append tokens [first, last) of an open token file, read, checked
        and written on the kernels' threads (no Python step per block; see
        :meth:`write_tokens` for ``eod``).

        Parameters
        ----------
        tokens : TokenFile
            The input, open.
        first, last : int
            The token range, 0 <= first <= last <= ``tokens.count``.
        eod : int, optional
            A token written before each index of ``eod_at``.
        eod_at : array_like of integers, optional
            Where ``eod`` goes: rising token indices of the file in
            (first, last] (``last``: after the range's last token).
        low, high : int
            The ids copied as they come; ``high`` is at most (and by default)
            the writer dtype's largest value.

        Returns
        -------
        int or None
            None when the whole range is written; else the first token of a
            block with an id outside [low, high]: the tokens before it (and
            their marks) are written, nothing from it on, so that the caller
            can check that block, :meth:`widen` or raise, and go on from there.

        Raises
        ------
        ChunkError
            The file ended before ``last`` (it changed while being read).
        ValueError
            ``eod`` does not fit the dtype, ``eod_at`` is out of order or
            range, or the writer is finished.
        OSError
            A read or a write fails.
        """
        if self.finished or self._file.closed:
            raise ValueError(f"{self.bin_path}: the writer is finished or closed")
        at = np.zeros(0, np.int64)
        if eod_at is not None and eod is not None:
            at = np.ascontiguousarray(_int64s(eod_at, "eod_at", "eod_at holds token indices"))
        info = np.iinfo(self.dtype)
        high = info.max if high is None else min(int(high), int(info.max))
        low = max(int(low), int(info.min))
        if len(at):
            _check_fits(np.array([eod]), self.dtype, "eod")
        mark = np.array([0 if eod is None else eod], self.dtype)  # native: the kernel orders it
        count = max(0, last - first) + len(at)
        if (self.token_count + count) * self.dtype.itemsize >= MAX_BYTES:
            raise ValueError(f"{self.bin_path}: the tokens would pass {MAX_BYTES} bytes")
        block = max(1, COPY_BLOCK_BYTES // tokens.dtype.itemsize)
        fd = self._file.fileno()
        # the file at its new size first: the threads' blocks fill it in any
        # order, none of them extending it
        os.ftruncate(fd, (self.token_count + count) * self.dtype.itemsize)
        stopped, ended = _core.copy_marked(
            tokens.fd,
            tokens.offset,
            tokens.dtype,
            tokens.swap,
            first,
            last,
            block,
            at,
            fd,
            self.dtype,
            mark,
            self.token_count * self.dtype.itemsize,
            low,
            high,
        )
        if ended >= 0:
            raise tokens.ended(ended)
        if stopped < 0:
            self.token_count += count
            self._loose += count
            return None
        where = first + stopped * block
        written = where - first + int(np.searchsorted(at, where, "right"))
        self.token_count += written
        self._loose += written
        # the blocks after the stopped one that other threads wrote are cut off
        os.ftruncate(fd, self.token_count * self.dtype.itemsize)
        return where

    def widen(self, dtype: Any) -> None:
        """Rewrite the tokens written so far in the wider ``dtype``, which the
        writer uses from now on (say uint16 to int32, once an id of 65499 or
        more comes: Megatron's rule). In place, from the end, a bounded chunk
        at a time (no second copy on disk).

        Parameters
        ----------
        dtype : numpy dtype
            A token dtype that holds every value of the current one.

        Raises
        ------
        TypeError
            ``dtype`` has no code in the format.
        ValueError
            ``dtype`` cannot hold every value of the current dtype, or the
            writer is finished.
        """
        new = token_dtype(dtype)
        if self.finished or self._file.closed:
            raise ValueError(f"{self.bin_path}: the writer is finished or closed")
        if not np.can_cast(self.dtype, new, "safe"):
            raise ValueError(
                f"dtype {new} cannot hold every value of {self.dtype}; give a wider one"
            )
        if new == self.dtype:
            return
        old, fd = self.dtype, self._file.fileno()
        self._file.flush()
        # Backwards: chunk k's new bytes land only on old bytes of tokens >= its
        # first, which are already moved.
        stop = self.token_count
        while stop > 0:
            start = max(0, stop - WIDEN_CHUNK)
            raw = _read_exactly(
                fd, (stop - start) * old.itemsize, self.bin_path, start * old.itemsize
            )
            wide = np.frombuffer(raw, old.newbyteorder("<")).astype(new.newbyteorder("<"))
            _write_all(fd, wide.tobytes(), start * new.itemsize)
            stop = start
        self._file.seek(self.token_count * new.itemsize)
        self.dtype = new

    def finish(self) -> None:
        """Close the ``.bin`` and write the ``.idx``.

        Raises
        ------
        ValueError
            Sequences were written after the last document end (every
            sequence must belong to a document), or the writer is finished.
        FileExistsError
            ``idx_path`` exists.
        """
        if self.finished or self._file.closed:
            raise ValueError(f"{self.bin_path}: the writer is finished or closed")
        if self._loose:
            raise ValueError(
                f"{self._loose} tokens written by write_tokens belong to no sequence; "
                "give their lengths to write() before finish()"
            )
        documents = np.concatenate(self._documents)
        if documents[-1] != self.sequence_count:
            left = self.sequence_count - int(documents[-1])
            raise ValueError(
                f"{left} sequence(s) after the last document end; end their document "
                "(document_ends) before finish()"
            )
        self._file.close()
        lengths = np.concatenate([np.zeros(0, np.int32), *self._lengths])
        header = HEADER.pack(MAGIC, VERSION, CODE_OF[self.dtype], len(lengths), len(documents))
        with open(self.idx_path, "xb") as f:
            f.write(header)
            f.write(lengths.astype("<i4").data)
            f.write(sequence_pointers(lengths, self.dtype).astype("<i8").data)
            f.write(documents.astype("<i8").data)
            if self._modes is not None:
                f.write(np.concatenate([np.zeros(0, np.int8), *self._modes]).data)
        self.finished = True

    def close(self) -> None:
        """Close the ``.bin`` (a writer not finished leaves it without index)."""
        self._file.close()


def _write_all(fd: int, data: bytes, at: int) -> None:
    view = memoryview(data)
    while view:
        done = os.pwrite(fd, view, at)
        view, at = view[done:], at + done


def _optional_int(value: Any, name: str, low: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(
            f"{name} must be an integer >= {low} or None; got {type(value).__name__} {value!r}"
        )
    if value < low:
        raise ValueError(f"{name} must be an integer >= {low} or None; got {value}")
    return int(value)


def _check_offsets(offsets: np.ndarray, count: int) -> None:
    if not len(offsets):
        raise ValueError("offsets must hold at least one value (0: no documents); got none")
    if offsets[0] != 0:
        raise ValueError(f"offsets must start at 0; got offsets[0] = {offsets[0]}")
    if len(offsets) > 1 and np.diff(offsets).min() < 0:
        i = _first(np.diff(offsets) < 0) + 1
        raise ValueError(
            f"offsets must not decrease; offsets[{i}] is {offsets[i]} after {offsets[i - 1]}"
        )
    if offsets[-1] != count:
        raise ValueError(
            f"offsets must end at the token count {count}; got offsets[-1] = {offsets[-1]}"
        )


def _target_problem(path: Path, force: bool) -> OSError | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not path.parent.is_dir():
            return FileNotFoundError(f"output folder {path.parent} does not exist")
        return None
    if stat.S_ISDIR(st.st_mode):
        return IsADirectoryError(f"output {path} is a folder; give a prefix for two files")
    if not force:
        return FileExistsError(f"{path} exists; pass force=True to replace it")
    if not stat.S_ISREG(st.st_mode):
        return FileExistsError(f"output {path} is not a regular file; posembed replaces only files")
    return None


def write_indexed(
    prefix: str | os.PathLike[str],
    tokens: npt.ArrayLike,
    offsets: npt.ArrayLike,
    *,
    dtype: npt.DTypeLike | None = None,
    append_eod: int | None = None,
    vocab_size: int | None = None,
    modes: npt.ArrayLike | None = None,
    force: bool = False,
) -> None:
    """Write documents held in memory as a Megatron indexed dataset (``PREFIX.bin``, ``.idx``).

    Each document of the CSR pair (``tokens``, ``offsets``) becomes one
    sequence and one document, as Megatron's ``preprocess_data.py`` writes
    them; an empty document becomes a document with no sequence. The files
    are written under temporary names next to them and renamed into place.

    Parameters
    ----------
    prefix : str or os.PathLike
        Where to write: ``PREFIX`` (or ``PREFIX.idx``, ``PREFIX.bin``).
    tokens : array_like of integers, 1-D
        The documents' tokens, back to back.
    offsets : array_like of integers, 1-D
        Document i is ``tokens[offsets[i]:offsets[i + 1]]``; from 0 to
        ``len(tokens)``, non-decreasing.
    dtype : numpy dtype, optional
        The tokens' dtype on disk (uint8, int8, int16, int32, int64 or
        uint16). By default Megatron's rule: uint16 when the vocabulary
        (``vocab_size``, else the largest id + 1) is under 65500, else int32.
    append_eod : int, optional
        An end-of-document id appended to each non-empty document, as
        ``preprocess_data.py --append-eod`` does (empty documents stay empty).
    vocab_size : int, optional
        The tokenizer's vocabulary size: every id must be below it, and it
        chooses the default dtype.
    modes : array_like of integers, 1-D, optional
        One int8 mode for each document: a multimodal dataset (Megatron's
        ``multimodal=True``), each non-empty document's sequence with its
        document's mode (an empty document has no sequence, so its mode
        is not written).
    force : bool
        Replace an indexed dataset at the two paths (a .idx with its header
        and its .bin), never other files.

    Raises
    ------
    TypeError
        An argument has the wrong type, or ``dtype`` has no code in the format.
    ValueError
        ``tokens`` or ``offsets`` is not 1-D, the offsets do not fit the
        tokens, an id is negative (whatever ``dtype`` and ``vocab_size``),
        past ``vocab_size`` or does not fit the dtype, a document is longer
        than the format's int32 lengths, ``modes`` is not one int8 value
        for each document, or ``prefix`` ends in a separator.
    FileExistsError
        A file is at one of the paths and ``force`` is False.
    IsADirectoryError
        A folder is at one of the paths, or ``prefix`` names a folder.
    FileNotFoundError
        The folder to write in does not exist.
    """
    base, idx_path, bin_path = paths(prefix)
    toks = _integers(tokens, "tokens")
    offs = _int64s(
        offsets, "offsets", f"offsets run from 0 to the token count {len(toks)}, non-decreasing"
    )
    eod = _optional_int(append_eod, "append_eod", 0)
    vocab = _optional_int(vocab_size, "vocab_size", 1)
    if not isinstance(force, (bool, np.bool_)):
        raise TypeError(f"force must be True or False; got {type(force).__name__} {force!r}")
    dt = None if dtype is None else token_dtype(dtype)
    _check_offsets(offs, len(toks))
    kinds = None
    if modes is not None:
        kinds = _integers(modes, "modes")
        if len(kinds) != len(offs) - 1:
            raise ValueError(
                f"modes holds {len(kinds)} values; one for each of the {len(offs) - 1} documents"
            )
        _check_fits(kinds, np.dtype(np.int8), "modes")
    if vocab is not None:
        if eod is not None and eod >= vocab:
            raise ValueError(f"append_eod {eod} is not an id of a vocab_size of {vocab}")
        if len(toks) and (toks.min() < 0 or toks.max() >= vocab):
            i = _first((toks < 0) | (toks >= vocab))
            raise ValueError(
                f"tokens[{i}] is {toks[i]}, not an id of a vocab_size of {vocab} (0..{vocab - 1})"
            )
    if toks.dtype.kind == "i" and len(toks) and toks.min() < 0:  # whatever the dtype holds
        i = _first(toks < 0)
        raise ValueError(f"tokens[{i}] is {toks[i]}; token ids are >= 0")
    if dt is None:
        top = max(int(toks.max()) if len(toks) else -1, -1 if eod is None else eod)
        dt = optimal_dtype(vocab if vocab is not None else top + 1)
    _check_fits(toks, dt, "tokens")
    if eod is not None and not np.iinfo(dt).min <= eod <= np.iinfo(dt).max:
        raise ValueError(f"append_eod {eod} does not fit {dt}")
    lengths = np.diff(offs)
    filled = lengths > 0
    if eod is not None:  # after each non-empty document
        wide = np.result_type(toks.dtype, np.min_scalar_type(eod))
        toks = np.insert(toks.astype(wide, copy=False), offs[1:][filled], eod)
        lengths = lengths + filled
    if os.path.isdir(base):
        raise IsADirectoryError(
            f"output {base} is a folder; give PREFIX for PREFIX.bin and PREFIX.idx "
            f"(such as {base / 'data'})"
        )
    for path in (bin_path, idx_path):
        problem = _target_problem(path, bool(force))
        if problem is not None:
            raise problem
    kept = None if kinds is None else kinds[filled]
    _write_files(base, toks, lengths[filled], np.cumsum(filled), dt, force, kept)


def _write_files(
    base: Path,
    tokens: np.ndarray,
    lengths: np.ndarray,
    ends: np.ndarray,
    dtype: np.dtype[Any],
    force: bool,
    modes: np.ndarray | None = None,
) -> None:
    if force:  # only an indexed dataset is replaced
        problem = _outdir.pair_problem(base, (), force)
        if problem is not None:
            raise FileExistsError(problem.replace("--force", "force=True"))
    tmp = _outdir.new_temp(base)
    try:
        idx, bin_ = (tmp / name for name in _outdir.PAIR_NAMES)
        with IndexedWriter(bin_, idx, dtype, multimodal=modes is not None) as writer:
            writer.write(tokens, lengths, ends, modes)
            writer.finish()
        _outdir.commit_pair(tmp, base, force)
    except BaseException as exc:
        _outdir.discard(tmp, exc)
        raise

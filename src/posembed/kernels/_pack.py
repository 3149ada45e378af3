"""Sequence packing: documents placed into rows of a fixed capacity, and the
rows cut into ``input_ids``, ``position_ids`` that restart at every document,
``cu_seqlens`` and labels."""

from __future__ import annotations

import contextlib
import operator
import os
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from posembed import _core
from posembed.kernels import _arrow
from posembed.kernels import _validate as v
from posembed.kernels._gpt_batch import _stamp, _token_file

STRATEGIES = {"bfd": 0, "ffd": 1, "wrapped": 2}
SPLITS = {"pieces": 0, "truncate": 1, "refuse": 0}
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
MAX_TOKENS = 2**62
MAX_ENTRIES = 2**34


def _integer_vector(given: Any, name: str) -> np.ndarray:
    """``given`` as an array of integers of one dimension (not copied)."""
    a = v.as_array(given, name)
    empty_list = a.size == 0 and isinstance(given, (list, tuple))  # [] reads as floats
    if (a.dtype.kind == "b" or a.dtype.kind not in "iu") and not empty_list:
        raise TypeError(f"{name} must be integers; got dtype {a.dtype}")
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {a.shape}")
    return a


def _document_lengths(lengths: Any, name: str = "lengths") -> np.ndarray:
    a = _integer_vector(lengths, name)
    if a.dtype.kind == "u" and a.size and int(a.max()) > MAX_TOKENS:
        d = int(np.argmax(a > MAX_TOKENS))
        raise ValueError(f"{name}[{d}] = {int(a[d])} passes 2^62 tokens")
    own = _owned(a)  # the plan keeps what it was made from
    if own.size and int(own.min()) < 0:
        d = int(np.argmax(own < 0))
        raise ValueError(f"{name}[{d}] = {int(own[d])} is negative; {name} must be >= 0")
    if own.size and int(own.max()) > MAX_TOKENS:
        d = int(np.argmax(own > MAX_TOKENS))
        raise ValueError(f"{name}[{d}] = {int(own[d])} passes 2^62 tokens")
    if float(own.sum(dtype=np.float64)) > MAX_TOKENS:  # each <= 2^62: a float sum bounds them
        raise ValueError(f"{name}: the documents hold 2^62 tokens or more")
    return own


def _owned(a: np.ndarray) -> np.ndarray:
    """An int64 copy of ``a`` that nothing can write: its memory is a ``bytes``
    object, so no one can set it writeable again (as one could a read-only
    array owning its memory, or a read-only view of a writeable one)."""
    return np.frombuffer(np.ascontiguousarray(a, dtype=np.int64).tobytes(), dtype=np.int64)


def _check_entries(lengths: np.ndarray, capacity: int, split: str) -> None:
    """ValueError for a plan of more entries than memory could ever hold
    (say one document of 2^50 tokens in rows of 1024)."""
    kept = np.minimum(lengths, capacity) if split == "truncate" else lengths
    entries = int(np.sum(-(-kept // capacity))) + int(kept.sum()) // capacity
    if entries > MAX_ENTRIES:
        raise ValueError(
            f"lengths: a plan in rows of {capacity} would hold {entries} entries, more than "
            f"{MAX_ENTRIES} (40 bytes each); use a larger capacity or split='truncate'"
        )


def pack(lengths: Any, capacity: int, *, strategy: str = "bfd", split: str = "pieces") -> PackPlan:
    """Plan rows of ``capacity`` tokens holding every document, from the lengths alone.

    Parameters
    ----------
    lengths : array_like of int, shape (N,)
        Every document's length in tokens (>= 0; an empty document takes no
        place and is counted in :attr:`PackPlan.empty_documents`).
    capacity : int
        Tokens per row, 1..2^31 - 1.
    strategy : {"bfd", "ffd", "wrapped"}
        ``"bfd"``, best-fit decreasing: the pieces longest first (ties in
        document order, then piece order), each into the row with the least
        room that holds it (ties: the row that came to that room first, as
        TRL's ``pack_dataset(strategy="bfd")`` breaks them), a new row when
        none does; O(N log capacity) after a counting sort of the lengths
        (a stable sort beyond a capacity of 2^20). ``"ffd"``, first-fit decreasing: the
        same order, each into the first row that holds it. ``"wrapped"``: the
        documents end to end in their order, cut every ``capacity`` tokens
        (what ``group_texts`` does, but the last, shorter row is kept).
    split : {"pieces", "refuse", "truncate"}
        A document longer than ``capacity``: cut into pieces of ``capacity``
        tokens and a shorter last one, each its own sequence (``"pieces"``,
        nothing lost); a ValueError (``"refuse"``); or cut to its first
        ``capacity`` tokens (``"truncate"``, the rest counted in
        :attr:`PackPlan.truncated_tokens`). ``"wrapped"`` cuts documents at
        row ends whatever ``split`` says, after refusing or truncating as
        asked.

    Returns
    -------
    PackPlan
        The same lengths give the same plan on any machine and thread count.

    Raises
    ------
    TypeError
        ``lengths`` not integers, ``capacity`` not an integer.
    ValueError
        A negative length, ``capacity`` out of range, an unknown ``strategy``
        or ``split``, or a document longer than ``capacity`` with
        ``split="refuse"``.
    """
    cap = v.positive_int(capacity, "capacity")
    if cap > INT32_MAX:
        raise ValueError(f"capacity must be at most 2^31 - 1; got {cap}")
    how = v.choice(strategy, "strategy", tuple(STRATEGIES))
    cut = v.choice(split, "split", tuple(SPLITS))
    own = _document_lengths(lengths)
    if cut == "refuse" and own.size and int(own.max()) > cap:
        d = int(np.argmax(own > cap))
        raise ValueError(
            f"document {d} has {int(own[d])} tokens, more than the capacity of {cap} "
            "(split='refuse'; 'pieces' cuts it, 'truncate' keeps its first tokens)"
        )
    _check_entries(own, cap, cut)
    rows, documents, starts, pieces, offsets = _core.pack_plan(
        own, cap, STRATEGIES[how], SPLITS[cut]
    )
    return PackPlan._from_pack(own, cap, how, cut, rows, documents, starts, pieces, offsets)


@dataclass(frozen=True)
class PackedRows:
    """Rows of a plan cut from the tokens (see :meth:`PackPlan.cut`).

    Attributes
    ----------
    input_ids : ndarray (rows, capacity)
        The tokens, in their dtype; a row's end padded with ``pad_value``.
    position_ids : ndarray (rows, capacity), int64 or int32
        ``position_start``, + 1, + 2, ... (0, 1, 2, ... by default) from
        each sequence's first token; the padding of a row counts the same
        from its first pad, as one more sequence, so every position is
        below ``position_start + capacity``.
    labels : ndarray (rows, capacity) or None
        The tokens, with ``separator_id`` (-100 by default) at every
        sequence's first token and -100 on padding (as transformers'
        ``DataCollatorWithFlattening`` sets them).
    seq_lengths : ndarray, int32
        Every sequence's length, row after row; a row's padding is a sequence
        of its own, last in its row.
    row_segments : ndarray (rows + 1,), int64
        Row r's sequences are ``seq_lengths[row_segments[r]:row_segments[r + 1]]``.
    cu_seqlens : ndarray (len(seq_lengths) + 1,), int32
        Prefix sums of ``seq_lengths`` over the rows flattened into one
        sequence of ``rows * capacity`` tokens: flash-attention's varlen
        ``cu_seqlens`` for the batch as one packed sequence. Row r's own:
        ``cu_seqlens[row_segments[r]:row_segments[r + 1] + 1] - r * capacity``.
    documents, starts : ndarray, int64
        Each sequence's document and its first token there (-1 and 0 for
        padding).
    columns : dict of str to ndarray (rows, capacity)
        The per-token columns given to :meth:`PackPlan.cut`, each in its
        dtype, placed as the tokens are; a row's end filled with
        ``column_pad``. Empty when none were given.
    """

    input_ids: np.ndarray
    position_ids: np.ndarray
    labels: np.ndarray | None
    seq_lengths: np.ndarray
    row_segments: np.ndarray
    cu_seqlens: np.ndarray
    documents: np.ndarray
    starts: np.ndarray
    columns: dict[str, np.ndarray] = field(default_factory=dict)


class PackPlan:
    """Which documents, or pieces of them, go into which row: made by :func:`pack`.

    Or built by hand from a plan's arrays, which are checked (see Raises). The
    plan keeps read-only int64 copies of the arrays; those given are neither
    kept nor changed.

    Parameters
    ----------
    document_lengths : array_like of int, shape (N,)
        Every document's length (>= 0).
    capacity : int
        Tokens per row, 1..2^31 - 1.
    strategy, split : str
        As :func:`pack` takes them.
    row_offsets : array_like of int, shape (rows + 1,)
        Rising from 0 to the number of entries E: every row holds an entry or more.
    documents, starts, lengths, offsets : array_like of int, shape (E,)
        Each entry's document, its first token in the document, its length
        (1..capacity) and where it starts in its row.

    Attributes
    ----------
    document_lengths : ndarray (N,), int64
        The lengths the plan was made from.
    capacity : int
        Tokens per row.
    strategy, split : str
        As given to :func:`pack`.
    row_offsets : ndarray (rows + 1,), int64
        Row r's entries are ``row_offsets[r]:row_offsets[r + 1]``, in the
        order they were placed.
    documents, starts, lengths, offsets : ndarray, int64
        Each entry's document, its first token in the document, its length
        and where it starts in its row.

    Raises
    ------
    TypeError
        An array that is not integers, a ``capacity`` that is not an integer.
    ValueError
        Arrays that are not 1-D or do not fit together, a ``capacity``,
        ``strategy`` or ``split`` :func:`pack` refuses, or entries that do not
        tile their rows and documents: each row's entries back to back from
        offset 0 and within ``capacity``, and each document's placed tokens
        (all of them; its first ``capacity`` with ``split="truncate"``) in
        exactly one entry each. :meth:`cut` and :meth:`unpack` raise their own.
    """

    def __init__(
        self,
        document_lengths: Any,
        capacity: Any,
        strategy: Any,
        split: Any,
        row_offsets: Any,
        documents: Any,
        starts: Any,
        lengths: Any,
        offsets: Any,
    ) -> None:
        cap = v.positive_int(capacity, "capacity")
        if cap > INT32_MAX:
            raise ValueError(f"capacity must be at most 2^31 - 1; got {cap}")
        how = v.choice(strategy, "strategy", tuple(STRATEGIES))
        cut = v.choice(split, "split", tuple(SPLITS))
        given = {"row_offsets": row_offsets, "documents": documents, "starts": starts}
        given.update(lengths=lengths, offsets=offsets)
        arrays = {name: _plan_array(a, name) for name, a in given.items()}
        self._arrays = _own_plan(document_lengths, cap, cut, **arrays)
        self._settings: tuple[int, str, str] = (cap, how, cut)

    @classmethod
    def _from_pack(
        cls,
        document_lengths: np.ndarray,
        capacity: int,
        strategy: str,
        split: str,
        *entries: np.ndarray,
    ) -> PackPlan:
        """The plan :func:`pack` made: its arguments checked, its arrays fresh
        from the kernel (whose buffers no one else holds), so not checked again."""
        for a in entries:
            a.setflags(write=False)  # owned by a capsule: cannot be set writeable again
        plan = cls.__new__(cls)
        plan._arrays = (document_lengths, *entries)
        plan._settings = (capacity, strategy, split)
        return plan

    # read-only: the kernels read these arrays (checked when the plan was made)
    @property
    def document_lengths(self) -> np.ndarray:
        """The lengths the plan was made from."""
        return self._arrays[0]

    @property
    def row_offsets(self) -> np.ndarray:
        """Row r's entries are row_offsets[r]..row_offsets[r + 1]."""
        return self._arrays[1]

    @property
    def documents(self) -> np.ndarray:
        """Each entry's document."""
        return self._arrays[2]

    @property
    def starts(self) -> np.ndarray:
        """Each entry's first token in its document."""
        return self._arrays[3]

    @property
    def lengths(self) -> np.ndarray:
        """Each entry's length in tokens."""
        return self._arrays[4]

    @property
    def offsets(self) -> np.ndarray:
        """Where each entry starts in its row."""
        return self._arrays[5]

    @property
    def capacity(self) -> int:
        """Tokens per row."""
        return self._settings[0]

    @property
    def strategy(self) -> str:
        """As given to :func:`pack`."""
        return self._settings[1]

    @property
    def split(self) -> str:
        """As given to :func:`pack`."""
        return self._settings[2]

    @property
    def rows(self) -> int:
        """Rows of ``capacity`` tokens."""
        return int(self.row_offsets.shape[0]) - 1

    @property
    def tokens(self) -> int:
        """Tokens placed in rows."""
        return int(self.lengths.sum())

    @property
    def fill(self) -> float:
        """Tokens placed / (rows x capacity): 1.0 is no padding at all."""
        return self.tokens / (self.rows * self.capacity) if self.rows else 1.0

    @property
    def padding(self) -> int:
        """Pad tokens the rows need (rows x capacity - tokens)."""
        return self.rows * self.capacity - self.tokens

    @property
    def truncated_tokens(self) -> int:
        """Tokens left out by ``split="truncate"`` (0 otherwise)."""
        return int(self.document_lengths.sum()) - self.tokens

    @property
    def split_documents(self) -> int:
        """Documents placed as more than one piece (their later pieces start at position 0)."""
        if not self.documents.shape[0]:
            return 0
        return int(np.count_nonzero(np.bincount(self.documents) > 1))

    @property
    def empty_documents(self) -> int:
        """Documents of no tokens (they take no place in any row)."""
        return int(np.count_nonzero(self.document_lengths == 0))

    @property
    def summary(self) -> dict[str, Any]:
        """The plan's figures as one dict.

        strategy, split, capacity, documents, rows, tokens, fill, padding,
        split_documents, truncated_tokens, empty_documents.
        """
        return {
            "strategy": self.strategy,
            "split": self.split,
            "capacity": self.capacity,
            "documents": int(self.document_lengths.shape[0]),
            "rows": self.rows,
            "tokens": self.tokens,
            "fill": self.fill,
            "padding": self.padding,
            "split_documents": self.split_documents,
            "truncated_tokens": self.truncated_tokens,
            "empty_documents": self.empty_documents,
        }

    def __repr__(self) -> str:
        return (
            f"PackPlan({self.strategy}, capacity={self.capacity}, rows={self.rows}, "
            f"documents={self.document_lengths.shape[0]}, fill={self.fill:.4f})"
        )

    def row(self, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row ``r``'s entries.

        Parameters
        ----------
        r : int
            The row (negative counts from the end).

        Returns
        -------
        (documents, starts, lengths) : tuple of ndarray
            Read-only views of the plan's entries in that row.

        Raises
        ------
        IndexError
            ``r`` outside the plan's rows.
        """
        if isinstance(r, (bool, np.bool_)):
            raise TypeError(f"r must be an integer; got bool {r!r}")
        try:
            k = operator.index(r)
        except TypeError:
            raise TypeError(f"r must be an integer; got {type(r).__name__} {r!r}") from None
        if not -self.rows <= k < self.rows:
            raise IndexError(f"row {k} is out of range for a plan of {self.rows} rows")
        k %= self.rows
        a, b = int(self.row_offsets[k]), int(self.row_offsets[k + 1])
        return self.documents[a:b], self.starts[a:b], self.lengths[a:b]

    def _row_range(self, rows: Any) -> tuple[int, int]:
        if rows is None:
            return 0, self.rows
        if isinstance(rows, range):
            rows = slice(rows.start, rows.stop, rows.step)
        if not isinstance(rows, slice):
            raise TypeError(f"rows must be a slice or a range; got {type(rows).__name__}")
        start, stop, step = rows.indices(self.rows)
        if step != 1:
            raise ValueError(f"rows must be consecutive (step 1); got step {step}")
        return start, max(start, stop)

    def _own_offsets(self, offsets: Any, ntokens: int) -> np.ndarray:
        a = v.as_array(offsets, "offsets")
        if a.dtype.kind not in "iu" or a.dtype.kind == "b":
            raise TypeError(f"offsets must be integers; got dtype {a.dtype}")
        n = self.document_lengths.shape[0]
        if a.shape != (n + 1,):
            raise ValueError(f"offsets must have shape ({n + 1},) for {n} documents; got {a.shape}")
        own = np.array(a, dtype=np.int64, copy=True)  # trusted while the kernel runs
        if int(own[0]) < 0 or int(own[-1]) > ntokens:
            raise ValueError(
                f"offsets must lie in 0..{ntokens} (the tokens given); "
                f"got {int(own[0])}..{int(own[-1])}"
            )
        diff = np.diff(own)
        if not np.array_equal(diff, self.document_lengths):
            d = int(np.argmax(diff != self.document_lengths))
            raise ValueError(
                f"offsets give document {d} {int(diff[d])} tokens; the plan was made with "
                f"{int(self.document_lengths[d])}"
            )
        return own

    def cut(
        self,
        tokens: Any,
        offsets: Any = None,
        *,
        rows: Any = None,
        pad_value: int = 0,
        labels: bool = False,
        position_dtype: Any = np.int64,
        columns: Mapping[str, Any] | None = None,
        column_pad: Any = 0,
        position_start: int = 0,
        separator_id: int = -100,
    ) -> PackedRows:
        """The plan's rows (or those of ``rows``) filled with the tokens.

        Packing on the fly: given an :class:`posembed.IndexedCorpus` and the
        rows of a batch (``rows=`` an array of row numbers, say a shuffled
        order's), only the documents of those rows are read, on the kernel's
        threads: copied out of a read-only mapping of the ``.bin`` kept
        across calls (no system call per document; a page lost because the
        file shrank is read again with a positional read, which reports it,
        never a crash). A range of rows is read with positional reads and
        read-ahead. Pages of the ``.bin`` copied from count in the process's
        resident memory as page cache shared with the system, as with
        Megatron's memory-mapped reader.

        Batch after batch: when ``rows`` is a NumPy array and the tokens and
        every column are indexed datasets on local disk, the first call
        leaves a reader of them behind, used by the calls after it with the
        same plan, corpora and options while these objects live (and their
        offsets and files are the ones it read): each such call checks only
        the rows, and each file's size, time and inode before and after its
        reads, in compiled code. The file's descriptor and mapping are kept
        while the file at its path stays the same one (a file rewritten,
        replaced, shrunk or removed is a ValueError, as on the first call).

        Parameters
        ----------
        tokens : array_like of int, 1-D, Arrow list column, or IndexedCorpus
            Every document's tokens back to back (with ``offsets``); an Arrow
            list column (a ``pyarrow`` list array or ChunkedArray, or a
            ``datasets`` column such as ``ds["input_ids"]``), one document
            per row; or a :class:`posembed.IndexedCorpus`, whose offsets are
            used (only the documents of the rows asked for are read).
        offsets : array_like of int, shape (N + 1,)
            Where each document starts in ``tokens``; its lengths must be the
            plan's. Not given with an Arrow column or an IndexedCorpus.
        rows : slice, range or array_like of int, optional
            The rows to cut, all by default: consecutive ones (a slice or a
            range of step 1), or row numbers in any order, repeats allowed
            (a batch of a shuffled order); row k of the result is plan row
            ``rows[k]``.
        pad_value : int
            The id that fills a row's end; it must fit the tokens' dtype.
        labels : bool
            Also return labels (``separator_id`` at each sequence's first
            token, -100 on padding).
        position_dtype : int64 or int32
            The dtype of ``position_ids`` and ``labels``.
        columns : dict of str to column, optional
            Per-token values carried into the rows beside the tokens (a
            completion mask, loss weights): each a 1-D array of one value per
            token (at the tokens' ``offsets``), an Arrow list column, or an
            IndexedCorpus, of numbers (bool, int, float) with the plan's
            document lengths. Returned in :attr:`PackedRows.columns`, in
            their dtypes.
        column_pad : number or dict of str to number
            The value that fills a row's end in the columns (one for all, or
            one per column name; 0 by default); it must fit the column's dtype.
        position_start : int
            The first position of every sequence (>= 0): 2 for the tables of
            the RoBERTa family, which start at ``padding_idx + 1``;
            ``position_start + capacity - 1`` must fit ``position_dtype``.
        separator_id : int
            The label at each sequence's first token (transformers'
            ``DataCollatorWithFlattening`` ``separator_id``); it must fit
            ``position_dtype``.

        Returns
        -------
        PackedRows

        Raises
        ------
        TypeError
            Tokens, offsets or rows not integers, a column not numbers, a bad
            ``position_dtype``, ``columns``, ``column_pad``,
            ``position_start`` or ``separator_id``.
        IndexError
            A row number outside the plan's rows.
        ValueError
            Offsets that do not match the plan's lengths or the tokens, a
            column whose document lengths differ from the plan's (naming the
            column and the first such document), a ``pad_value`` or
            ``column_pad`` the dtype cannot hold, positions or a
            ``separator_id`` ``position_dtype`` cannot hold, a batch whose
            ``cu_seqlens`` would pass 2^31 - 1, or a corpus file that
            changed while it was read.
        """
        key = None
        if type(rows) is np.ndarray and offsets is None:  # a batch: a kept reader may serve it
            options = (pad_value, labels, position_dtype, column_pad, position_start, separator_id)
            key = _cut_key(self, tokens, columns, options)
            reader = _kept_reader(key, self, tokens, columns)
            if reader is not None:
                got = reader(rows)
                if got is not None:  # else rows that are not all row numbers: said below
                    return got
        wanted = self._wanted(rows)
        # rows picked one by one (a shuffled batch): a file's documents are
        # copied out of its mapping, kept across calls, and the outputs reuse
        # the memory of a freed batch of the same shape; a range of rows (a
        # pass over the plan) reads with positional reads and read-ahead into
        # arrays of its own
        mapped = not (rows is None or isinstance(rows, (slice, range)))
        try:
            pdt = np.dtype(position_dtype)
        except TypeError:
            pdt = None
        if pdt not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise TypeError(f"position_dtype must be int64 or int32; got {position_dtype!r}")
        with_labels = v.flag(labels, "labels")
        info = np.iinfo(pdt)
        start = _integer(position_start, "position_start")
        if start < 0:
            raise ValueError(f"position_start must be >= 0; got {start}")
        if start + self.capacity - 1 > info.max:
            raise ValueError(
                f"position_start {start} + capacity {self.capacity} - 1 does not fit "
                f"position_dtype {pdt} (at most {info.max})"
            )
        separator = _integer(separator_id, "separator_id")
        if not info.min <= separator <= info.max:
            raise ValueError(
                f"separator_id {separator} does not fit position_dtype {pdt} "
                f"({info.min}..{info.max})"
            )
        nrows = int(wanted.shape[0])
        if nrows * self.capacity > INT32_MAX:
            raise ValueError(
                f"{nrows} rows of {self.capacity} tokens pass the 2^31 - 1 of int32 "
                "cu_seqlens; cut fewer rows at a time (rows=slice(a, b))"
            )
        given_columns = _columns(columns)
        pads = _column_pads(column_pad, given_columns)
        with contextlib.ExitStack() as opened:
            files: list[Any] = []
            if v.is_corpus(tokens):
                if offsets is not None:
                    raise ValueError(
                        "offsets must not be given with an IndexedCorpus: "
                        "its .idx holds its documents"
                    )
                token_source, doc_offsets, count = self._source(
                    tokens, "", None, 0, wanted, opened, files, pad_value, False, mapped
                )
            elif (column := _arrow.corpus_column(tokens, offsets)) is not None:
                flat, given = column  # an Arrow list column: one document per row
                flat = v.kernel_array(flat, flat.dtype.newbyteorder("="))
                doc_offsets = self._own_offsets(given, int(flat.shape[0]))
                count = int(flat.shape[0])
                token_source = (flat, None, doc_offsets, _pad_bytes(pad_value, flat.dtype, None))
                token_source += (flat.dtype, count)
                files.append(None)
            else:
                if offsets is None:
                    raise TypeError("offsets is required with a tokens array")
                flat = v.as_array(tokens, "tokens")
                if flat.dtype.kind not in "iu" or flat.dtype.kind == "b":
                    raise TypeError(f"tokens must be integers; got dtype {flat.dtype}")
                if flat.ndim != 1:
                    raise ValueError(f"tokens must be 1-D; got shape {flat.shape}")
                flat = v.kernel_array(flat, flat.dtype.newbyteorder("="))
                doc_offsets = self._own_offsets(offsets, int(flat.shape[0]))
                count = int(flat.shape[0])
                token_source = (flat, None, doc_offsets, _pad_bytes(pad_value, flat.dtype, None))
                token_source += (flat.dtype, count)
                files.append(None)
            if token_source[0] is not None and with_labels:
                _check_labels_fit(token_source[0], pdt)
            sources = []
            for name, col in given_columns.items():
                src, _, _ = self._source(
                    col, name, doc_offsets, count, wanted, opened, files, pads[name], True, mapped
                )
                sources.append(src)
            try:
                ids, positions, label_rows, out, sequences = _core.pack_cut(
                    token_source,
                    sources,
                    wanted,
                    self.row_offsets,
                    self.documents,
                    self.starts,
                    self.lengths,
                    self.document_lengths,
                    self.capacity,
                    pdt == np.int64,
                    with_labels,
                    start,
                    separator,
                    mapped,  # a batch: its outputs on memory freed by an earlier one
                )
                if isinstance(ids, tuple):
                    names = ["tokens", *given_columns]
                    _fault(ids, pdt, np.dtype(token_source[4]), names, files)
                for f in files:
                    if f is not None:
                        f.check()  # rewritten during the reads: old and new would mix
            except FileNotFoundError:
                paths = ", ".join(str(f.path) for f in files if f is not None)
                raise ValueError(f"{paths}: input changed while reading (it was removed)") from None
            except OSError as exc:
                raise ValueError(f"{exc.filename}: cannot be read ({exc.strerror})") from None
        if key is not None:
            made = _CutReader.of(
                key,
                self,
                tokens,
                given_columns,
                pads,
                pad_value,
                (pdt, with_labels, start, separator),
            )
            if made is not None:
                _keep_reader(key, made)
        named = dict(zip(given_columns, out, strict=True))
        seq, row_segments, cu, documents, starts = sequences
        return PackedRows(
            ids, positions, label_rows, seq, row_segments, cu, documents, starts, named
        )

    @property
    def placed_offsets(self) -> np.ndarray:
        """CSR offsets (N + 1,) of each document's placed tokens.

        A document's length, or its first ``capacity`` tokens with
        ``split="truncate"``.
        """
        lengths = self.document_lengths
        kept = np.minimum(lengths, self.capacity) if self.split == "truncate" else lengths
        out = np.zeros(lengths.shape[0] + 1, np.int64)
        np.cumsum(kept, out=out[1:])
        return out

    def unpack(self, values: Any) -> tuple[np.ndarray, np.ndarray]:
        """Per-token values of every row (say the model's outputs) back in document order.

        What :func:`posembed.stitch` does for windows, for packed rows: each
        placed token's value goes back to its document, padding dropped.

        Parameters
        ----------
        values : ndarray, shape (rows, capacity, ...)
            One value (or vector) per slot of every row of the plan.

        Returns
        -------
        (values, offsets) : (ndarray (tokens, ...), ndarray (N + 1,) of int64)
            The values of document d's placed tokens at ``offsets[d]:offsets[d + 1]``,
            in their order in the document (:attr:`placed_offsets`).

        Raises
        ------
        TypeError
            ``values`` not an array.
        ValueError
            ``values`` not of shape (rows, capacity, ...).
        """
        a = v.as_array(values, "values")
        if a.ndim < 2 or a.shape[:2] != (self.rows, self.capacity):
            raise ValueError(
                f"values must have shape ({self.rows}, {self.capacity}, ...) for this plan; "
                f"got {a.shape}"
            )
        if a.dtype.hasobject:
            raise TypeError("values must be an array of numbers, not of Python objects")
        placed = self.placed_offsets  # the entries tile them (checked when the plan was made)
        out = _core.pack_unpack(
            np.ascontiguousarray(a),
            self.row_offsets,
            self.documents,
            self.starts,
            self.lengths,
            self.offsets,
            placed,
        )
        return out, placed

    def _wanted(self, rows: Any) -> np.ndarray:
        """The rows asked for as the plan's own int64 array (a copy)."""
        if rows is None or isinstance(rows, (slice, range)):
            r0, r1 = self._row_range(rows)
            return np.arange(r0, r1, dtype=np.int64)
        if isinstance(rows, (bool, np.bool_)) or not (
            isinstance(rows, (list, tuple, np.ndarray)) or hasattr(rows, "__array__")
        ):
            raise TypeError(
                "rows must be a slice, a range or a 1-D array of row numbers; "
                f"got {type(rows).__name__}"
            )
        a = np.array(rows, copy=True)  # trusted while the kernel runs
        if a.size == 0 and a.dtype.kind == "f":
            a = a.astype(np.int64)
        if a.dtype.kind not in "iu":
            raise TypeError(f"rows must be integers (row numbers); got dtype {a.dtype}")
        if a.ndim != 1:
            raise ValueError(f"rows must be 1-D; got shape {a.shape}")
        bad = (a < 0) | (a >= self.rows) if a.dtype.kind == "i" else a >= self.rows
        if bad.any():
            k = int(np.argmax(bad))
            allowed = f"0..{self.rows - 1}" if self.rows else "none: the plan has no rows"
            raise IndexError(
                f"rows[{k}] = {int(a[k])} is out of range; the plan's rows are {allowed}"
            )
        return a.astype(np.int64)

    def _source(
        self,
        given: Any,
        name: str,
        flat_offsets: np.ndarray | None,
        flat_count: int,
        wanted: np.ndarray,
        opened: contextlib.ExitStack,
        files: list[Any],
        pad: Any,
        numbers: bool,
        mapped: bool,
    ) -> tuple[tuple[Any, ...], np.ndarray, int]:
        """One per-token source as the kernel takes it, its documents'
        offsets and its item count. ``flat_offsets`` and ``flat_count`` are
        the tokens' (for a 1-D column), None and 0 for the tokens themselves;
        with ``mapped``, a file's documents are copied out of its mapping."""
        what = "tokens" if not numbers else f"columns[{name!r}]"
        if v.is_corpus(given):
            own = self._corpus_offsets(given.offsets, what)
            dtype = np.dtype(given.dtype).newbyteorder("=")
            pad_b = _pad_bytes(pad, dtype, name if numbers else None)
            file = _token_file(given)
            if file is not None:
                f = file.copy()
                f.open()
                opened.callback(f.close)
                files.append(f)
                where = (int(f.fd), int(f.offset), bool(f.swap), _mapping(f) if mapped else None)
                return (None, where, own, pad_b, dtype, int(f.count)), own, int(own[-1])
            files.append(None)
            # a corpus in a store: the documents of these rows read here
            first = self.row_offsets[wanted]
            entries = _ranges(first, self.row_offsets[wanted + 1] - first)
            used = np.unique(self.documents[entries])
            kept = np.zeros(self.document_lengths.shape[0], np.int64)
            kept[used] = self.document_lengths[used]
            local = np.zeros(kept.shape[0] + 1, np.int64)
            np.cumsum(kept, out=local[1:])
            parts = [given.read(int(own[d]), int(own[d + 1])) for d in used.tolist()]
            flat = np.concatenate(parts) if parts else np.zeros(0, dtype)
            flat = v.kernel_array(flat, dtype)
            return (flat, None, local, pad_b, dtype, int(flat.shape[0])), own, int(own[-1])
        files.append(None)
        column = _arrow.list_column(given, what, numbers=numbers)
        if column is not None:
            flat, got = column
            own = np.array(got, dtype=np.int64, copy=True)
            if numbers:
                self._same_lengths(own, what)
        elif numbers:
            a = v.as_array(given, what)
            if a.dtype.kind not in "biuf":
                raise TypeError(f"{what} must hold numbers (bool, int, float); got dtype {a.dtype}")
            if a.ndim != 1:
                raise ValueError(f"{what} must be 1-D (one value per token); got shape {a.shape}")
            if a.shape[0] != flat_count:
                raise ValueError(
                    f"{what} has {a.shape[0]} values; the tokens have {flat_count} (a 1-D column "
                    "takes the tokens' offsets: one value per token)"
                )
            assert flat_offsets is not None
            flat, own = a, flat_offsets
        else:
            raise AssertionError("tokens are read by the caller")
        flat = v.kernel_array(flat, flat.dtype.newbyteorder("="))
        if numbers and flat.dtype.kind not in "biuf":
            raise TypeError(f"{what} must hold numbers (bool, int, float); got dtype {flat.dtype}")
        pad_b = _pad_bytes(pad, flat.dtype, name if numbers else None)
        return (flat, None, own, pad_b, flat.dtype, int(flat.shape[0])), own, int(flat.shape[0])

    def _corpus_offsets(self, offsets: Any, what: str) -> np.ndarray:
        """A corpus's offsets as the kernel reads them: each value once,
        checked against the file it reads and the plan's length of the
        document (no copy is needed); all of them checked here the first
        time this plan sees these offsets, for an error naming the first
        document that differs before anything is read."""
        a = v.kernel_array(offsets, np.int64)
        seen: dict[int, np.ndarray] = self.__dict__.setdefault("_seen_offsets", {})
        if seen.get(id(a)) is not a:
            self._same_lengths(a, what)
            if len(seen) >= 8:
                seen.clear()
            seen[id(a)] = a  # kept: its id is not reused while it is here
        return a

    def _same_lengths(self, own: np.ndarray, what: str) -> None:
        n = self.document_lengths.shape[0]
        if own.shape != (n + 1,):
            raise ValueError(
                f"{what} holds {own.shape[0] - 1} documents; the plan was made with {n}"
            )
        diff = np.diff(own)
        if not np.array_equal(diff, self.document_lengths):
            d = int(np.argmax(diff != self.document_lengths))
            raise ValueError(
                f"{what}: document {d} has {int(diff[d])} tokens; the plan was made with "
                f"{int(self.document_lengths[d])} (the document lengths must be the plan's)"
            )


# Readers of batches of rows (PackPlan.cut with rows= an array) of a plan
# from indexed datasets on local disk, kept while the plan and the corpora
# live, so that a loop asking for batch after batch checks the options and
# the corpora once. A reader is used only while the corpora's offsets and
# token files are the very objects it was made from: a hit reads what a
# fresh cut would read.
_READERS: dict[tuple[Any, ...], _CutReader] = {}
_READERS_KEPT = 8


def _cut_key(
    plan: PackPlan, tokens: Any, columns: Any, options: tuple[Any, ...]
) -> tuple[Any, ...] | None:
    """What a kept reader is looked up by: the objects' ids, the options and
    their types (1 and 1.0 are one key but not one argument), or None."""
    if columns is None:
        named: tuple[Any, ...] = ()
    elif type(columns) is dict:
        named = tuple([(name, id(c)) for name, c in columns.items()])
    else:
        return None
    pads = options[3]
    if isinstance(pads, Mapping):  # a column_pad per column
        pads = tuple([(k, x, type(x)) for k, x in pads.items()])
    given = (*options[:3], pads, *options[4:])
    key = (id(plan), id(tokens), named, given, tuple(map(type, options)))
    try:
        hash(key)
    except TypeError:  # an unhashable option: cut's checks say what is wrong
        return None
    return key


def _corpora(tokens: Any, columns: Any) -> list[Any]:
    return [tokens, *columns.values()] if columns else [tokens]


def _kept_reader(
    key: tuple[Any, ...] | None, plan: PackPlan, tokens: Any, columns: Any
) -> _CutReader | None:
    """The kept reader of these arguments, where it reads exactly what a new cut would."""
    reader = _READERS.get(key) if key is not None else None
    if reader is None or reader.plan() is not plan:
        return None
    corpora = _corpora(tokens, columns)
    if len(corpora) != len(reader.corpora):
        return None
    for (ref, offsets, file), corpus in zip(reader.corpora, corpora, strict=True):
        if ref() is not corpus or getattr(corpus, "offsets", None) is not offsets:
            return None
        if getattr(corpus, "tokens", None) is not file:
            return None
    return reader


def _keep_reader(key: tuple[Any, ...], reader: _CutReader) -> None:
    for oldest in list(_READERS)[: len(_READERS) - _READERS_KEPT + 1]:  # one step: threads
        _READERS.pop(oldest, None)
    _READERS[key] = reader


class _CutReader:
    """Batches of one plan's rows cut from indexed datasets on local disk,
    all but the rows checked once (see :meth:`PackPlan.cut`): each call
    checks its row numbers, checks the files, copies the documents out of
    mappings kept across calls, and checks the files again, in compiled
    code. Made only for corpora that :meth:`PackPlan.cut` has just read
    with the same options."""

    def __init__(
        self,
        key: tuple[Any, ...],
        plan: PackPlan,
        corpora: list[Any],
        names: list[str],
        pads: list[bytes],
        options: tuple[np.dtype[Any], bool, int, int],
    ) -> None:
        def forget(_: Any) -> None:
            if _READERS.get(key) is self:
                del _READERS[key]

        pdt, with_labels, start, separator = options
        self.plan = weakref.ref(plan, forget)
        # each corpus (by a weak reference) with the offsets and the token
        # file read: the very objects a hit must find
        self.corpora = [(weakref.ref(c, forget), c.offsets, c.tokens) for c in corpora]
        self._names = names
        self._pdt = pdt
        sources = []
        for corpus, pad in zip(corpora, pads, strict=True):
            f = corpus.tokens
            dtype = np.dtype(corpus.dtype).newbyteorder("=")
            where = (str(f.path), dtype, int(f.offset), bool(f.swap), int(f.count), _stamp(f))
            sources.append((*where, corpus.offsets, pad))
        self._token_dtype = sources[0][1]  # as a first cut names it in its errors
        self._reader = _core.PackCutReader(
            plan.row_offsets,
            plan.documents,
            plan.starts,
            plan.lengths,
            plan.document_lengths,
            plan.capacity,
            pdt == np.int64,
            with_labels,
            start,
            separator,
            sources,
        )

    @classmethod
    def of(
        cls,
        key: tuple[Any, ...],
        plan: PackPlan,
        tokens: Any,
        columns: dict[str, Any],
        pads: dict[str, Any],
        pad_value: Any,
        options: tuple[np.dtype[Any], bool, int, int],
    ) -> _CutReader | None:
        """A reader of these corpora, or None where one is not on local disk,
        cannot be referred to weakly, or a cut reads converted offsets."""
        corpora = _corpora(tokens, columns)
        pad_bytes = []
        for name, corpus in zip(["", *columns], corpora, strict=True):
            own = getattr(corpus, "offsets", None)
            if (
                not v.is_corpus(corpus)
                or _token_file(corpus) is None
                or type(own) is not np.ndarray
                or v.kernel_array(own, np.int64) is not own
            ):
                return None
            dtype = np.dtype(corpus.dtype).newbyteorder("=")
            pad_bytes.append(_pad_bytes(pads[name] if name else pad_value, dtype, name or None))
        try:
            return cls(key, plan, corpora, ["tokens", *columns], pad_bytes, options)
        except TypeError:  # no weak references to one of them
            return None

    def __call__(self, rows: np.ndarray) -> PackedRows | None:
        """The rows cut, or None where ``rows`` are not all row numbers (or
        would pass int32 cu_seqlens): a cut's own checks then say why."""
        got = self._reader(rows)
        if got is None:
            return None
        ids, positions, label_rows, out, sequences = got
        if isinstance(ids, tuple):
            files = [tokens for _, _, tokens in self.corpora]
            _fault(ids, self._pdt, self._token_dtype, self._names, files)
        seq, row_segments, cu, documents, starts = sequences
        named = dict(zip(self._names[1:], out, strict=True))
        return PackedRows(
            ids, positions, label_rows, seq, row_segments, cu, documents, starts, named
        )


def _ranges(first: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """first[k], first[k] + 1, ... (counts[k] of them), for every k."""
    total = int(counts.sum())
    if not total:
        return np.zeros(0, np.int64)
    shift = np.repeat(first - (np.cumsum(counts) - counts), counts)
    out: np.ndarray = np.arange(total, dtype=np.int64) + shift
    return out


def _pad_bytes(pad: Any, dtype: np.dtype[Any], column: str | None) -> bytes:
    """``pad`` as one item of ``dtype`` (checked to fit), its bytes."""
    if column is None:
        return np.array(_pad(pad, dtype), dtype).tobytes()
    name = f"column_pad for column {column!r}"
    if isinstance(pad, (bool, np.bool_)) and dtype.kind != "b":
        pad = int(pad)
    if dtype.kind == "b":
        if not isinstance(pad, (bool, np.bool_, int, np.integer)) or int(pad) not in (0, 1):
            raise ValueError(f"{name} must be 0, 1, False or True for a bool column; got {pad!r}")
        return np.array(bool(pad)).tobytes()
    if dtype.kind in "iu":
        try:
            value = operator.index(pad)
        except TypeError:
            raise TypeError(
                f"{name} must be an integer for a {dtype} column; got {type(pad).__name__} {pad!r}"
            ) from None
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise ValueError(f"{name} = {value} does not fit {dtype} ({info.min}..{info.max})")
        return np.array(value, dtype).tobytes()
    if not isinstance(pad, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number; got {type(pad).__name__} {pad!r}")
    return np.array(pad, dtype).tobytes()


def _plan_array(given: Any, name: str) -> np.ndarray:
    """One of a hand-built plan's arrays, an integer array of one dimension
    (not yet copied: see :func:`_own_plan`)."""
    a = _integer_vector(given, name)
    if a.dtype.kind == "u" and a.size and int(a.max()) > INT64_MAX:
        e = int(np.argmax(a > INT64_MAX))
        raise ValueError(f"{name}[{e}] = {int(a[e])} does not fit int64")
    return a


def _first(bad: np.ndarray) -> int:
    return int(np.argmax(bad))


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _own_plan(
    document_lengths: Any,
    capacity: int,
    split: str,
    **arrays: np.ndarray,
) -> tuple[np.ndarray, ...]:
    """A hand-built plan's arrays as its own read-only int64 copies
    (document_lengths, row_offsets, documents, starts, lengths, offsets),
    after :func:`_check_plan`: their sizes checked first (before the copies),
    their values in the copies (which no one else can change)."""
    per_entry = {k: arrays[k] for k in ("documents", "starts", "lengths", "offsets")}
    sizes = [int(a.shape[0]) for a in per_entry.values()]
    count = max(sizes, key=sizes.count)  # what most of them say (documents, on a tie)
    for name, a in per_entry.items():
        if a.shape[0] != count:
            agree = [k for k, b in per_entry.items() if b.shape[0] == count]
            raise ValueError(
                f"{name} must have shape ({count},), one value per entry as {_and(agree)} "
                f"have; got ({a.shape[0]},)"
            )
    lengths = _document_lengths(document_lengths, "document_lengths")
    own = {name: _owned(a) for name, a in arrays.items()}
    _check_plan(lengths, capacity, split, **own)
    return (lengths, *own.values())


def _check_plan(
    document_lengths: np.ndarray,
    capacity: int,
    split: str,
    *,
    row_offsets: np.ndarray,
    documents: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    offsets: np.ndarray,
) -> None:
    """ValueError unless a plan's entries tile its rows and its documents, as
    the kernels of :meth:`PackPlan.cut` and :meth:`PackPlan.unpack` assume:

    - one value per entry in each of ``documents``, ``starts``, ``lengths`` and
      ``offsets`` (checked by :func:`_own_plan` already, before its copies, and
      here again); ``row_offsets`` rising from 0 to the number of entries;
    - each row's entries back to back from offset 0, each 1..capacity tokens,
      the row's total within ``capacity`` (the rest is padding);
    - each document's placed tokens (all of them, its first ``capacity`` with
      ``split="truncate"``) held by exactly one entry each: no entry past
      them, none overlapping another, none missing.

    A few vectorised passes over the entries and the documents (no sort for
    the plans :func:`pack` makes).
    """
    cap, ndocs = capacity, int(document_lengths.shape[0])
    count = int(documents.shape[0])
    if not starts.shape == lengths.shape == offsets.shape == (count,):
        raise ValueError("documents, starts, lengths and offsets must have one value per entry")
    rows = int(row_offsets.shape[0]) - 1
    if rows < 0:
        raise ValueError(
            f"row_offsets must have shape (rows + 1,), from 0 to the {count} entries; got (0,)"
        )
    if int(row_offsets[0]) != 0:
        raise ValueError(f"row_offsets[0] = {int(row_offsets[0])}; row_offsets must start at 0")
    if int(row_offsets[-1]) != count:
        raise ValueError(
            f"row_offsets[{rows}] = {int(row_offsets[-1])}; row_offsets must end at {count}, "
            "the number of entries (the length of documents, starts, lengths and offsets)"
        )
    held = np.diff(row_offsets)  # entries per row
    if rows and int(held.min()) < 1:
        r = _first(held < 1)
        raise ValueError(
            f"row_offsets[{r + 1}] = {int(row_offsets[r + 1])} after row_offsets[{r}] = "
            f"{int(row_offsets[r])}; row_offsets must rise (every row holds an entry or more)"
        )
    kept = np.minimum(document_lengths, cap) if split == "truncate" else document_lengths
    of = f" (its first {cap}, split='truncate')" if split == "truncate" else ""
    if split == "refuse" and ndocs and int(kept.max()) > cap:
        d = _first(kept > cap)
        raise ValueError(
            f"document_lengths[{d}] = {int(kept[d])} is more than the capacity of {cap}, "
            "which split='refuse' does not place"
        )
    placed = np.zeros(ndocs + 1, np.int64)  # the documents' placed tokens back to back
    np.cumsum(kept, out=placed[1:])
    if not count:
        if int(placed[-1]):
            _not_held(kept, document_lengths, documents, lengths, of)
        return
    if int(lengths.min()) < 1 or int(lengths.max()) > cap:
        e = _first((lengths < 1) | (lengths > cap))
        raise ValueError(
            f"lengths[{e}] = {int(lengths[e])}; an entry's length must be in 1..{cap} "
            "(the capacity)"
        )
    if int(documents.min()) < 0 or int(documents.max()) >= ndocs:
        e = _first((documents < 0) | (documents >= ndocs))
        allowed = f"0..{ndocs - 1}" if ndocs else "nothing: document_lengths is empty"
        raise ValueError(
            f"documents[{e}] = {int(documents[e])}; documents must be in {allowed}, "
            "the documents' numbers"
        )
    if int(starts.min()) < 0:
        e = _first(starts < 0)
        raise ValueError(f"starts[{e}] = {int(starts[e])} is negative; starts must be >= 0")
    if count * cap > MAX_TOKENS and float(lengths.sum(dtype=np.float64)) > MAX_TOKENS:
        raise ValueError("lengths: the entries hold 2^62 tokens or more (no int64 sum)")
    # the rows: entries back to back from 0, within the capacity
    ends = np.cumsum(lengths)  # of the entries, row after row
    before = ends - lengths
    row_start = before[row_offsets[:-1]]
    want = before - np.repeat(row_start, held)
    if not np.array_equal(offsets, want):
        e = _first(offsets != want)
        r = int(np.searchsorted(row_offsets, e, "right")) - 1
        first = e == int(row_offsets[r])
        where = "0, its row's start" if first else f"{int(want[e])}, where entry {e - 1} ends"
        raise ValueError(
            f"offsets[{e}] = {int(offsets[e])}; entry {e} must start at {where} "
            f"(row {r}'s entries sit back to back from 0)"
        )
    used = ends[row_offsets[1:] - 1] - row_start
    if int(used.max()) > cap:
        r = _first(used > cap)
        raise ValueError(
            f"lengths: row {r} holds {int(used[r])} tokens (entries {int(row_offsets[r])}.."
            f"{int(row_offsets[r + 1]) - 1}), more than the capacity of {cap}"
        )
    # the documents: every placed token in exactly one entry. One gather of
    # each entry's document: where its placed tokens start (back to back),
    # how many there are and, for pieces cut at multiples of the capacity
    # (bfd, ffd), where its pieces start (the pieces back to back)
    pieces = not np.any(starts - _div(starts, cap) * cap)
    table = np.empty((ndocs, 3 if pieces else 2), np.int64)
    table[:, 0], table[:, 1] = placed[:-1], kept
    if pieces:
        first_piece = np.zeros(ndocs + 1, np.int64)
        np.cumsum(_div(kept + (cap - 1), cap), out=first_piece[1:])  # 0 <= kept <= 2^62
        table[:, 2] = first_piece[:-1]
    mine = np.take(table, documents, axis=0)
    past = starts > mine[:, 1] - lengths
    if past.any():
        e = _first(past)
        d = int(documents[e])
        raise ValueError(
            f"starts[{e}] = {int(starts[e])}, lengths[{e}] = {int(lengths[e])}: entry {e} "
            f"runs past the end of document {d}, of which the plan places {int(kept[d])} "
            f"tokens{of}; an entry must lie within them"
        )
    if int(ends[-1]) != int(placed[-1]):
        _not_held(kept, document_lengths, documents, lengths, of)
    # inside their documents and as many tokens as they hold: overlapping none,
    # they leave none out
    if pieces:  # piece k of a document holds its tokens k * capacity.. at most
        key = mine[:, 2] + _div(starts, cap)
        seen = np.zeros(int(first_piece[-1]), bool)
        seen[key] = True
        if int(np.count_nonzero(seen)) < count:
            k = int(np.argmax(np.bincount(key) > 1))
            i, j = np.flatnonzero(key == k)[:2].tolist()
            _overlap(i, j, documents, starts, lengths)
        return
    begin = mine[:, 0] + starts  # of the documents' placed tokens back to back
    if bool(np.all(begin[1:] >= begin[:-1])):  # in document order ("wrapped")
        overlap = begin[1:] < (begin + lengths)[:-1]
        if overlap.any():
            k = _first(overlap)
            _overlap(k, k + 1, documents, starts, lengths)
    else:  # in any other order: sorted by their first tokens
        order = np.argsort(begin, kind="stable")
        overlap = begin[order[1:]] < (begin + lengths)[order[:-1]]
        if overlap.any():
            k = _first(overlap)
            _overlap(int(order[k]), int(order[k + 1]), documents, starts, lengths)


def _div(a: np.ndarray, capacity: int) -> np.ndarray:
    """``a // capacity`` for values >= 0 (a shift for a power of two: int64
    division is NumPy's slowest integer operation)."""
    if capacity & (capacity - 1) == 0:
        return a >> (capacity.bit_length() - 1)
    return a // capacity


def _not_held(
    kept: np.ndarray,
    document_lengths: np.ndarray,
    documents: np.ndarray,
    lengths: np.ndarray,
    of: str,
) -> NoReturn:
    """ValueError naming a document whose entries hold more or fewer tokens
    than the plan places of it (the totals differ)."""
    got = np.zeros(kept.shape[0], np.int64)
    np.add.at(got, documents, lengths)
    d = _first(got != kept)
    raise ValueError(
        f"documents: document {d} gets {int(got[d])} tokens from its entries; the plan "
        f"places {int(kept[d])} of it{of} (document_lengths[{d}] = {int(document_lengths[d])})"
    )


def _overlap(
    i: int, j: int, documents: np.ndarray, starts: np.ndarray, lengths: np.ndarray
) -> NoReturn:
    i, j = min(i, j), max(i, j)
    token = max(int(starts[i]), int(starts[j]))
    raise ValueError(
        f"starts[{j}] = {int(starts[j])}, lengths[{j}] = {int(lengths[j])}: entries {i} and "
        f"{j} both hold token {token} of document {int(documents[j])}; a document's entries "
        "must not overlap"
    )


def _check_labels_fit(tokens: np.ndarray, dtype: np.dtype[Any]) -> None:
    """ValueError unless every token fits the labels' dtype (no silent wrap)."""
    have, want = np.iinfo(tokens.dtype), np.iinfo(dtype)
    if (want.min <= have.min and have.max <= want.max) or not tokens.size:
        return
    low, high = int(tokens.min()), int(tokens.max())
    if low < want.min or high > want.max:
        bad = low if low < want.min else high
        raise ValueError(
            f"labels: token id {bad} does not fit position_dtype {dtype} "
            f"({want.min}..{want.max}); give position_dtype=np.int64"
        )


def _pad(pad_value: Any, dtype: np.dtype[Any]) -> int:
    if isinstance(pad_value, (bool, np.bool_)):
        raise TypeError(f"pad_value must be an integer; got bool {pad_value!r}")
    try:
        pad = operator.index(pad_value)
    except TypeError:
        raise TypeError(
            f"pad_value must be an integer; got {type(pad_value).__name__} {pad_value!r}"
        ) from None
    info = np.iinfo(dtype)
    if not info.min <= pad <= info.max:
        raise ValueError(
            f"pad_value {pad} does not fit the tokens' dtype {dtype} ({info.min}..{info.max})"
        )
    return pad


def _integer(value: Any, name: str) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer; got bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(
            f"{name} must be an integer; got {type(value).__name__} {value!r}"
        ) from None


def _columns(columns: Any) -> dict[str, Any]:
    if columns is None:
        return {}
    if not isinstance(columns, Mapping):
        raise TypeError(
            "columns must be a dict of column name to per-token values; "
            f"got {type(columns).__name__}"
        )
    for name in columns:
        if not isinstance(name, str):
            raise TypeError(f"columns: a column name must be a str; got {type(name).__name__}")
    return dict(columns)


def _column_pads(column_pad: Any, columns: dict[str, Any]) -> dict[str, Any]:
    if isinstance(column_pad, Mapping):
        unknown = [k for k in column_pad if k not in columns]
        if unknown:
            raise ValueError(
                f"column_pad names {unknown[0]!r}, which is not one of the columns "
                f"({', '.join(map(repr, columns)) or 'none given'})"
            )
        return {name: column_pad.get(name, 0) for name in columns}
    return dict.fromkeys(columns, column_pad)


def _fault(
    fault: tuple[int, int, int, int, int],
    pdt: np.dtype[Any],
    token_dtype: np.dtype[Any],
    names: list[str],
    files: list[Any],
) -> NoReturn:
    """The error of a fault the cut kernel returned (kind, batch row, a, b, c)."""
    kind, at, a, b, c = fault
    if kind == 1:
        raise IndexError(f"rows[{at}] = {a} is out of range of the plan's rows")
    if kind == 2:
        raise ValueError(
            f"the plan's row {a} does not fit its documents or its capacity (was the plan changed?)"
        )
    if kind in (3, 4):
        f = files[a]
        what = names[a] if a == 0 else f"columns[{names[a]!r}]"
        path = f.path if f is not None else what
        if kind == 3:
            raise ValueError(
                f"{path}: input changed while reading (it ended at byte {b}, before the "
                f"{what} read)"
            )
        raise ValueError(f"{path}: cannot be read ({os.strerror(b)})")
    if kind == 6:
        what = names[a] if a == 0 else f"columns[{names[a]!r}]"
        raise ValueError(
            f"{what}: document {b} has {c} tokens; the plan was made with another length "
            "(the document lengths must be the plan's; did the corpus change?)"
        )
    info = np.iinfo(pdt)
    bits = np.array([b], np.int64).view(np.uint64)  # the token's bits, as the kernel gave them
    token = int(bits.view(np.int64)[0] if token_dtype.kind == "i" else bits[0])
    raise ValueError(
        f"labels: token id {token} does not fit position_dtype {pdt} "
        f"({info.min}..{info.max}); give position_dtype=np.int64"
    )


def _mapping(file: Any) -> Any:
    """The open token file's mapping for a kernel to copy from
    (``mapping()``, see posembed.io's TokenFile), or None: read with pread."""
    get = getattr(file, "mapping", None)
    return get() if callable(get) else None

"""Twin of posembed.pack: the packing plans and the cut, in plain Python and NumPy.

Each strategy is written as its definition reads, searching every row for
each piece (quadratic, for test sizes).
"""

from __future__ import annotations

import bisect
import operator
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from posembed.reference._common import _array, _count, _flag

STRATEGIES = ("bfd", "ffd", "wrapped")
SPLITS = ("pieces", "refuse", "truncate")


PLAN_ARRAYS = ("document_lengths", "row_offsets", "documents", "starts", "lengths", "offsets")


@dataclass
class PackPlan:
    """A plan, checked as posembed.PackPlan checks one built by hand: the
    arrays int64 copies, each row's entries back to back from 0 within the
    capacity, each document's placed tokens in exactly one entry each."""

    document_lengths: np.ndarray
    capacity: int
    strategy: str
    split: str
    row_offsets: np.ndarray
    documents: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    offsets: np.ndarray

    def __post_init__(self) -> None:
        self.capacity = _count(self.capacity, "capacity", 1)
        if self.capacity > 2**31 - 1:
            raise ValueError("capacity must be at most 2^31 - 1")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}")
        if self.split not in SPLITS:
            raise ValueError(f"unknown split {self.split!r}")
        for name in PLAN_ARRAYS:
            given = getattr(self, name)
            a = _array(given, name)
            empty_list = a.size == 0 and isinstance(given, (list, tuple))
            if a.dtype.kind == "b" or (a.dtype.kind not in "iu" and not empty_list):
                raise TypeError(f"{name} must be integers")
            if a.ndim != 1:
                raise ValueError(f"{name} must be 1-D")
            if a.dtype.kind == "u" and a.size and int(a.max()) > 2**63 - 1:
                raise ValueError(f"{name} holds a value past int64")
            setattr(self, name, np.array(a, dtype=np.int64))  # a copy: the input is kept
        self._check()

    def _check(self) -> None:
        """ValueError unless the entries tile the rows and the documents."""
        cap, ro = self.capacity, self.row_offsets
        docs, starts, lens, offs = self.documents, self.starts, self.lengths, self.offsets
        n = len(docs)
        if not len(starts) == len(lens) == len(offs) == n:
            raise ValueError("documents, starts, lengths and offsets must be as long")
        lengths = self.document_lengths
        if np.any(lengths < 0) or np.any(lengths > 2**62) or lengths.sum(dtype=float) > 2**62:
            raise ValueError("a document length is negative or they pass 2^62 tokens")
        if len(ro) == 0 or ro[0] != 0 or ro[-1] != n or np.any(np.diff(ro) < 1):
            raise ValueError("row_offsets must rise from 0 to the number of entries")
        if self.split == "refuse" and np.any(self.document_lengths > cap):
            raise ValueError("a document is longer than the capacity (split='refuse')")
        if n and (lens.min() < 1 or lens.max() > cap or starts.min() < 0):
            raise ValueError("an entry's length is not in 1..capacity, or its start is negative")
        if n and (docs.min() < 0 or docs.max() >= len(self.document_lengths)):
            raise ValueError("an entry's document is not one of the documents")
        # rows: the first entry at 0, each next where the one before it ends,
        # the last ending within the capacity
        first = np.zeros(n, bool)
        first[ro[:-1]] = True
        ends = offs + lens
        if np.any(offs[first] != 0) or np.any(offs[1:][~first[1:]] != ends[:-1][~first[1:]]):
            raise ValueError("a row's entries are not back to back from 0")
        if np.any(ends[ro[1:] - 1] > cap):
            raise ValueError("a row holds more than the capacity")
        # documents: by document and start, each one's pieces from 0, each
        # next where the one before it ends, the last at its placed length
        kept = self.document_lengths
        if self.split == "truncate":
            kept = np.minimum(kept, cap)
        order = np.lexsort((starts, docs))
        d, s, stop = docs[order], starts[order], (starts + lens)[order]
        new = np.ones(n, bool)
        new[1:] = d[1:] != d[:-1]
        last = np.ones(n, bool)
        last[:-1] = new[1:]
        if np.any(s[new] != 0) or np.any(s[1:][~new[1:]] != stop[:-1][~new[1:]]):
            raise ValueError("a document's entries overlap or leave a gap")
        if np.any(stop[last] != kept[d[last]]):
            raise ValueError("a document's entries do not end at its placed length")
        if not np.array_equal(np.unique(d), np.flatnonzero(kept > 0)):
            raise ValueError("a document with tokens to place is in no entry")

    @property
    def rows(self) -> int:
        return len(self.row_offsets) - 1

    def row(self, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row r's (documents, starts, lengths)."""
        if isinstance(r, (bool, np.bool_)):
            raise TypeError("r must be an integer")
        try:
            k = operator.index(r)
        except TypeError:
            raise TypeError("r must be an integer") from None
        if not -self.rows <= k < self.rows:
            raise IndexError(f"row {k} is out of range")
        k %= self.rows
        a, b = int(self.row_offsets[k]), int(self.row_offsets[k + 1])
        return self.documents[a:b], self.starts[a:b], self.lengths[a:b]

    def unpack(self, values: Any) -> tuple[np.ndarray, np.ndarray]:
        """Each placed token's value back in its document, by entries."""
        a = np.asarray(values)
        if a.ndim < 2 or a.shape[:2] != (self.rows, self.capacity):
            raise ValueError("values do not have the plan's shape")
        placed = np.zeros(len(self.document_lengths), np.int64)
        for d, n in zip(self.documents.tolist(), self.lengths.tolist(), strict=True):
            placed[d] += n
        offsets = np.concatenate([[0], np.cumsum(placed)]).astype(np.int64)
        out = np.zeros((int(offsets[-1]), *a.shape[2:]), a.dtype)
        for r in range(self.rows):
            for e in range(self.row_offsets[r], self.row_offsets[r + 1]):
                d, s, n, at = (
                    int(x[e]) for x in (self.documents, self.starts, self.lengths, self.offsets)
                )
                out[offsets[d] + s : offsets[d] + s + n] = a[r, at : at + n]
        return out, offsets

    def cut(
        self,
        tokens: Any,
        offsets: Any = None,
        *,
        rows: Any = None,
        pad_value: int = 0,
        labels: bool = False,
        position_dtype: Any = np.int64,
        columns: Any = None,
        column_pad: Any = 0,
        position_start: int = 0,
        separator_id: int = -100,
    ) -> dict[str, Any]:
        """The rows filled: a dict of PackedRows' fields ("columns" only
        when columns are given).

        ``tokens`` is a flat array with ``offsets``, an Arrow list column, or
        a corpus (``offsets`` and ``read(start, stop)``, read whole here);
        ``rows`` a slice or row numbers in any order; each column a 1-D array
        at the tokens' offsets, an Arrow list column or a corpus.
        """
        toks, offs = _documents(tokens, offsets, "tokens")
        if not np.array_equal(np.diff(offs), self.document_lengths):
            raise ValueError("offsets do not match the plan's lengths")
        if rows is None or isinstance(rows, (slice, range)):
            if isinstance(rows, range):
                rows = slice(rows.start, rows.stop, rows.step)
            r0, r1, _ = (rows or slice(None)).indices(self.rows)
            wanted = list(range(r0, r1))
        else:
            a = np.asarray(rows)
            if a.dtype.kind not in "iu" or a.ndim != 1:
                raise TypeError("rows must be a slice or a 1-D array of integers")
            wanted = [int(r) for r in a.tolist()]
            for k, r in enumerate(wanted):
                if not 0 <= r < self.rows:
                    raise IndexError(f"rows[{k}] = {r} is out of range")
        with_labels = _flag(labels, "labels")
        pdt = np.dtype(position_dtype)
        if position_start < 0 or position_start + self.capacity - 1 > np.iinfo(pdt).max:
            raise ValueError("position_start must be >= 0 and the positions must fit")
        cols = {}
        for name, col in (columns or {}).items():
            if isinstance(col, (np.ndarray, list, tuple)):
                values, col_offs = np.asarray(col), offs
                if values.shape != (len(toks),):
                    raise ValueError(f"column {name!r} must hold one value per token")
            else:
                values, col_offs = _documents(col, None, name)
            if not np.array_equal(np.diff(col_offs), self.document_lengths):
                raise ValueError(f"column {name!r}: document lengths differ from the plan's")
            pad = column_pad[name] if isinstance(column_pad, dict) else column_pad
            cols[name] = (values, col_offs, pad)
        shape = (len(wanted), self.capacity)
        ids = np.full(shape, pad_value, toks.dtype)
        pos = np.zeros(shape, position_dtype)
        lab = np.full(shape, -100, position_dtype)
        out = {name: np.full(shape, pad, values.dtype) for name, (values, _, pad) in cols.items()}
        counting = position_start + np.arange(self.capacity)
        seq: list[int] = []
        docs: list[int] = []
        starts: list[int] = []
        row_segments = [0]
        for i, r in enumerate(wanted):
            used = 0
            for e in range(self.row_offsets[r], self.row_offsets[r + 1]):
                d, s, n = int(self.documents[e]), int(self.starts[e]), int(self.lengths[e])
                piece = toks[offs[d] + s : offs[d] + s + n]
                ids[i, used : used + n] = piece
                pos[i, used : used + n] = counting[:n]
                lab[i, used] = separator_id
                lab[i, used + 1 : used + n] = piece[1:]
                for name, (values, col_offs, _) in cols.items():
                    out[name][i, used : used + n] = values[col_offs[d] + s : col_offs[d] + s + n]
                seq.append(n)
                docs.append(d)
                starts.append(s)
                used += n
            if used < self.capacity:  # the padding: positions from the start, one more sequence
                pos[i, used:] = counting[: self.capacity - used]
                seq.append(self.capacity - used)
                docs.append(-1)
                starts.append(0)
            row_segments.append(len(seq))
        lengths = np.array(seq, np.int32)
        fields: dict[str, Any] = {
            "input_ids": ids,
            "position_ids": pos,
            "labels": lab if with_labels else None,
            "seq_lengths": lengths,
            "row_segments": np.array(row_segments, np.int64),
            "cu_seqlens": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32),
            "documents": np.array(docs, np.int64),
            "starts": np.array(starts, np.int64),
        }
        if columns is not None:
            fields["columns"] = out
        return fields


def _documents(given: Any, offsets: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(values back to back, offsets) of a flat array with offsets, a corpus
    (offsets and read) or an Arrow list column (to_pylist)."""
    if hasattr(given, "offsets") and hasattr(given, "read"):
        offs = np.asarray(given.offsets, np.int64)
        return np.asarray(given.read(0, int(offs[-1]))), offs
    if hasattr(given, "to_pylist"):
        lists = given.to_pylist()
        offs = np.concatenate([[0], np.cumsum([len(x) for x in lists])]).astype(np.int64)
        dtype = np.dtype(given.type.value_type.to_pandas_dtype())
        flat = [x for doc in lists for x in doc]
        return np.array(flat, dtype), offs
    if offsets is None:
        raise TypeError(f"{name}: offsets are required with a flat array")
    return _array(given, name), np.asarray(offsets, np.int64)


def _pieces(lengths: list[int], capacity: int, split: str) -> list[tuple[int, int, int]]:
    pieces = []
    for d, n in enumerate(lengths):
        if split == "truncate":
            n = min(n, capacity)
        for s in range(0, n, capacity):
            pieces.append((d, s, min(capacity, n - s)))
    return pieces


def pack(lengths: Any, capacity: int, *, strategy: str = "bfd", split: str = "pieces") -> PackPlan:
    """posembed.pack's plan, by the definitions.

    Parameters
    ----------
    lengths : array_like of int
        Every document's length.
    capacity : int
        Tokens per row.
    strategy : {"bfd", "ffd", "wrapped"}
    split : {"pieces", "refuse", "truncate"}

    Returns
    -------
    PackPlan

    Raises
    ------
    TypeError
        Lengths or capacity not integers.
    ValueError
        A negative length, a bad capacity, strategy or split, a document too
        long with split="refuse".
    """
    cap = _count(capacity, "capacity", 1)
    if cap > 2**31 - 1:
        raise ValueError("capacity must be at most 2^31 - 1")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}")
    a = _array(lengths, "lengths")
    if a.dtype.kind == "b" or (a.dtype.kind not in "iu" and a.size):
        raise TypeError("lengths must be integers")
    if a.ndim != 1:
        raise ValueError("lengths must be 1-D")
    own = [int(x) for x in a.tolist()]
    if any(n < 0 for n in own):
        raise ValueError("a length is negative")
    if split == "refuse" and any(n > cap for n in own):
        raise ValueError("a document is longer than the capacity")
    rows: list[list[tuple[int, int, int]]] = []
    if strategy == "wrapped":
        row: list[tuple[int, int, int]] = []
        used = 0
        for d, n in enumerate(own):
            n = min(n, cap) if split == "truncate" else n
            s = 0
            while s < n:
                take = min(n - s, cap - used)
                row.append((d, s, take))
                s += take
                used += take
                if used == cap:
                    rows.append(row)
                    row, used = [], 0
        if row:
            rows.append(row)
    elif strategy == "bfd":
        # rows waiting with room r, first come first served: rooms[r]; the
        # rooms that some row has, in order: open_rooms
        rooms: dict[int, deque[int]] = {}
        open_rooms: list[int] = []
        for piece in sorted(_pieces(own, cap, split), key=lambda p: (-p[2], p[0], p[1])):
            k = bisect.bisect_left(open_rooms, piece[2])  # the least room that holds it
            if k < len(open_rooms):
                room = open_rooms[k]
                r = rooms[room].popleft()
                if not rooms[room]:
                    del rooms[room]
                    open_rooms.pop(k)
            else:
                room, r = cap, len(rows)
                rows.append([])
            rows[r].append(piece)
            left = room - piece[2]
            if left > 0:
                if left not in rooms:
                    rooms[left] = deque()
                    bisect.insort(open_rooms, left)
                rooms[left].append(r)
    else:  # ffd: the first row with room for it
        room_of: list[int] = []
        for piece in sorted(_pieces(own, cap, split), key=lambda p: (-p[2], p[0], p[1])):
            fits = [r for r in range(len(rows)) if room_of[r] >= piece[2]]
            if fits:
                r = fits[0]
            else:
                r = len(rows)
                rows.append([])
                room_of.append(cap)
            rows[r].append(piece)
            room_of[r] -= piece[2]
    entries = [
        (d, s, n, sum(p[2] for p in row[:i])) for row in rows for i, (d, s, n) in enumerate(row)
    ]

    def column(k: int) -> np.ndarray:
        return np.array([e[k] for e in entries], np.int64)

    return PackPlan(
        np.array(own, np.int64),
        cap,
        strategy,
        split,
        np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64),
        column(0),
        column(1),
        column(2),
        column(3),
    )

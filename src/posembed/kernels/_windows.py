"""windows: overlapping chunks of length `size` over token streams and corpora."""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from posembed import _core
from posembed.kernels import _arrow
from posembed.kernels import _validate as v

TAILS = _core.Tail.__members__
OWNER_RULES = _core.OwnerRule.__members__
# "first" and "center" take the slot of the window that owns the token, the
# one Windows.owner(rule) marks: the kernel finds it for each token itself.
REDUCES = _core.Reduce.__members__


@dataclass(frozen=True)
class Windows:
    """The windows of a token stream or corpus, as :func:`windows` returns them.

    ``len(w)`` is the number of windows n.

    Attributes
    ----------
    tokens : ndarray, shape (n, size)
        The input's dtype; slots past ``lengths`` hold the pad value.
    starts : ndarray of int64, shape (n,)
        Start of each window within its document.
    lengths : ndarray of int64, shape (n,)
        Number of valid tokens in each window.
    documents : ndarray of int64, shape (n,)
        Index of each window's document (0 without offsets).
    doc_offsets : ndarray of int64, shape (documents + 1,)
        CSR offsets of the input (``[0, N]`` without offsets).
    size : int
        Window length.
    step : int
        Distance between window starts in a document.
    tail : {"pad", "shift", "drop"}
        How the last window of each document was placed.
    """

    tokens: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    documents: np.ndarray
    doc_offsets: np.ndarray
    size: int
    step: int
    tail: str

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def mask(self) -> np.ndarray:
        """ndarray of bool, shape (n, size): True for the slots that hold a token of the input."""
        mask: np.ndarray = np.arange(self.size)[None, :] < self.lengths[:, None]
        return mask

    def to_arrow(self) -> Any:
        """The windows as a ``pyarrow.Table``, one row per window.

        ``datasets.Dataset(w.to_arrow())`` is a Hugging Face dataset of them.

        Returns
        -------
        pyarrow.Table
            Columns ``input_ids`` (a fixed-size list of ``size`` tokens in the
            tokens' dtype, over ``tokens``' own buffer without a copy when it
            is C-contiguous in native byte order), ``attention_mask`` (a
            fixed-size list of int8: 1 where the slot holds a token, 0 for
            padding), and ``document``, ``start`` and ``length`` (int64).
            A view: rewriting ``tokens`` (an ``out=`` buffer used again for
            the next batch) rewrites the table, and any dataset made of it.

        Raises
        ------
        ImportError
            pyarrow is not installed (``pip install 'posembed[arrow]'``).
        TypeError
            (For a ``Windows`` built by hand) ``tokens`` that is not a 2-D
            integer ndarray, or a field that is not a 1-D integer array.
        ValueError
            (For a ``Windows`` built by hand) ``tokens`` whose shape is not
            (windows, size), or fields of another length.
        """
        _arrow.require("Windows.to_arrow")
        fields = _fields(self)
        tokens = self.tokens
        if not isinstance(tokens, np.ndarray) or tokens.ndim != 2 or tokens.dtype.kind not in "iu":
            raise TypeError(
                "windows.tokens must be a 2-D integer ndarray; got "
                f"{getattr(tokens, 'dtype', type(tokens).__name__)} of shape {np.shape(tokens)}"
            )
        n = fields.starts.shape[0]
        if tokens.shape != (n, fields.size) or not (
            fields.lengths.shape == fields.documents.shape == (n,)
        ):
            raise ValueError(
                f"windows.tokens must have shape (windows, size) = ({n}, {fields.size}) with one "
                f"start, length and document per window; got tokens of shape {tokens.shape}, "
                f"{fields.lengths.shape[0]} lengths and {fields.documents.shape[0]} documents"
            )
        return _arrow.windows_table(tokens, fields.lengths, fields.documents, fields.starts)

    def owner(self, rule: str = "first") -> np.ndarray:
        """For every input token in some window, exactly one slot that owns it.

        With ``tail="drop"`` uncovered tokens have no owner.

        Parameters
        ----------
        rule : {"first", "center"}
            ``"first"``: the earliest window containing the token; with
            overlapping windows every token but a document's first ``overlap``
            then has at least ``overlap`` tokens of left context (the HF
            perplexity guide's rule: score each token once). ``"center"``:
            BERT's max-context rule, the window maximising ``min(left, right
            context) + 0.01 * window length``, the earliest on ties.

        Returns
        -------
        ndarray of bool, shape (n, size)
            True at the owning slot of each token.

        Raises
        ------
        TypeError
            (For a ``Windows`` built by hand) ``doc_offsets``, ``starts``,
            ``lengths`` or ``documents`` that is not a 1-D integer array, or a
            ``size`` that is not an integer.
        ValueError
            An unknown ``rule``, or (for a ``Windows`` built by hand) arrays
            that do not describe the documents of ``doc_offsets``, among them
            starts, lengths and offsets whose sums would pass 2^63.
        """
        chosen = OWNER_RULES[v.choice(rule, "rule", OWNER_RULES)]
        fields = _fields(self)
        with _sums_named(fields):
            return _core.window_owner(*fields, chosen)


@dataclass(frozen=True)
class WindowLayout:
    """Where the windows of a corpus lie, before any token is cut.

    What :func:`window_layout` returns: the starts, lengths and documents
    that :func:`windows` gives, from the document lengths alone, and where
    each document's windows begin. ``len(layout)`` is the number of windows n.

    Attributes
    ----------
    starts : ndarray of int64, shape (n,)
        Start of each window within its document.
    lengths : ndarray of int64, shape (n,)
        Number of the document's tokens in each window (the slots after them
        are padding).
    documents : ndarray of int64, shape (n,)
        Index of each window's document.
    window_offsets : ndarray of int64, shape (documents + 1,)
        CSR offsets of the windows: document k's windows are
        ``window_offsets[k]`` to ``window_offsets[k + 1] - 1``; the last entry
        is n.
    doc_offsets : ndarray of int64, shape (documents + 1,)
        CSR offsets of the documents' tokens (``[0, N]`` for one stream of N).
    size : int
        Window length.
    step : int
        Distance between window starts in a document.
    tail : {"pad", "shift", "drop"}
        How the last window of each document is placed.
    """

    starts: np.ndarray
    lengths: np.ndarray
    documents: np.ndarray
    window_offsets: np.ndarray
    doc_offsets: np.ndarray
    size: int
    step: int
    tail: str

    def __len__(self) -> int:
        return len(self.starts)  # a TypeError for a field that is no array

    def cut(
        self,
        tokens: Any,
        *,
        windows: slice | None = None,
        token_start: int = 0,
        pad_value: int = 0,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """The token rows of these windows, cut from ``tokens``.

        ``window_layout(offsets, size, ...).cut(tokens)`` equals
        ``windows(tokens, size, ..., offsets=offsets).tokens``. With
        ``windows`` and ``token_start`` a range of windows is cut from a
        slice of the corpus (a batch of a stream, a block of a Dask array), so
        no call needs all the tokens at once.

        Parameters
        ----------
        tokens : array_like of int, shape (M,)
            The corpus's tokens from ``token_start`` on (all N of them by
            default); they must hold every token of the windows cut. The rows
            keep their dtype (in native byte order).
        windows : slice, optional
            The windows to cut, ``slice(a, b)`` (step 1, as for a list);
            default all of them.
        token_start : int
            Index in the corpus of ``tokens[0]``, >= 0.
        pad_value : int
            Fills the slots past each window's length; must fit the tokens'
            dtype.
        out : ndarray, optional
            C-contiguous array of shape (windows cut, size) and the tokens'
            dtype to write the rows into (a buffer reused batch after batch);
            it is returned. Checked before anything is written.

        Returns
        -------
        ndarray, shape (windows cut, size)
            The tokens' dtype; row i is window ``a + i``.

        Raises
        ------
        TypeError
            ``tokens`` that NumPy cannot read or not of an integer dtype;
            ``windows`` that is not a slice of integers; a ``token_start`` or
            ``pad_value`` that is not an integer; ``out`` that is not an
            ndarray or of another dtype; (for a ``WindowLayout`` built by
            hand) ``starts``, ``lengths``, ``documents`` or ``doc_offsets``
            that is not a 1-D integer array, a ``size`` that is not an integer.
        ValueError
            ``tokens`` that is not 1-D or does not hold the windows' tokens;
            a ``windows`` slice whose step is not 1; a ``token_start`` below 0
            or of 2^62 or more; a ``pad_value`` that does not fit the tokens'
            dtype; ``out`` of the wrong shape, read-only, misaligned,
            non-contiguous or overlapping an input; (for a ``WindowLayout``
            built by hand) arrays that do not describe its documents.
        """
        token_array = v.as_array(tokens, "tokens")
        if token_array.ndim != 1:
            raise ValueError(f"tokens must be 1-D; got shape {token_array.shape}")
        if token_array.dtype.kind not in "iu":
            raise TypeError(f"tokens must be integers; got dtype {token_array.dtype}")
        begin, end = _window_range(windows, len(self))
        first_token = v.non_negative_int(token_start, "token_start")
        v.check_sizes("token_start", first_token)  # a corpus position: int64, with room to spare
        size = v.positive_int(self.size, "layout.size")
        v.check_sizes("layout.size", size, token_array.itemsize)
        _check_pad_value(pad_value, token_array.dtype)
        doc_offsets, starts, lengths, documents = (
            _int_field(self, name, "layout") for name in _FIELDS
        )
        if doc_offsets.shape[0] == 0:
            raise ValueError("layout.doc_offsets must hold documents + 1 offsets, from 0; got none")
        if not starts.shape == lengths.shape == documents.shape:
            raise ValueError(
                f"layout.starts, .lengths and .documents must have one entry per window; got "
                f"{starts.shape[0]}, {lengths.shape[0]} and {documents.shape[0]}"
            )
        starts, lengths, documents = starts[begin:end], lengths[begin:end], documents[begin:end]
        _check_sums("layout", doc_offsets, starts, lengths, documents)
        if begin < end:
            _check_covered(doc_offsets, starts, lengths, documents, first_token, token_array)
        native = token_array.dtype.newbyteorder("=")
        if out is not None:
            out = v.check_out(
                out,
                (end - begin, size),
                native,
                tokens=(token_array, tokens),
                layout=(doc_offsets, starts, lengths, documents),
            )
        token_array = v.kernel_array(token_array, native)
        return _cut(
            token_array, first_token, doc_offsets, starts, lengths, documents, size, pad_value, out
        )


def _window_range(windows: Any, count: int) -> tuple[int, int]:
    """[begin, end) of the windows a slice names, as ``list[windows]`` would."""
    if windows is None:
        return 0, count
    if not isinstance(windows, slice):
        raise TypeError(
            f"windows must be a slice of window indices, such as slice(a, b); "
            f"got {type(windows).__name__} {windows!r}"
        )
    try:
        begin, end, step = windows.indices(count)
    except TypeError:
        raise TypeError(f"windows must be a slice of integers; got {windows!r}") from None
    except ValueError:  # a step of 0
        raise ValueError(
            f"windows must be a slice with step 1 (a range of windows); got {windows!r}"
        ) from None
    if step != 1:
        raise ValueError(
            f"windows must be a slice with step 1 (a range of windows); got {windows!r}"
        )
    return begin, max(begin, end)


def _check_covered(
    doc_offsets: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    documents: np.ndarray,
    first_token: int,
    tokens: np.ndarray,
) -> None:
    """ValueError unless ``tokens`` (the corpus's from ``first_token`` on)
    hold the windows' tokens. Windows lie in corpus order, so the first and
    the last tell; for a layout built by hand the kernel checks every one."""
    ndocs = doc_offsets.shape[0] - 1
    first_doc, last_doc = int(documents[0]), int(documents[-1])
    if not (0 <= first_doc < ndocs and 0 <= last_doc < ndocs):
        return
    need_from = int(doc_offsets[first_doc]) + int(starts[0])
    need_to = int(doc_offsets[last_doc]) + int(starts[-1]) + int(lengths[-1])
    held_to = first_token + tokens.shape[0]
    if need_from < first_token or need_to > held_to:
        held = f"{first_token}..{held_to - 1}" if held_to > first_token else "none"
        raise ValueError(
            f"tokens must hold the corpus's tokens {need_from}..{need_to - 1} that these windows "
            f"cover; they hold {held} (token_start={first_token}, {tokens.shape[0]} tokens)"
        )


def _cut(
    tokens: np.ndarray,
    token_start: int,
    doc_offsets: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    documents: np.ndarray,
    size: int,
    pad_value: int,
    out: np.ndarray | None,
) -> np.ndarray:
    """The rows of windows (a layout or a range of one), cut by the kernel from
    native ``tokens`` that start at corpus token ``token_start``."""
    pad = np.array([pad_value], dtype=tokens.dtype)
    rows: np.ndarray = _core.fill_windows(
        tokens, token_start, doc_offsets, starts, lengths, documents, size, pad, out
    )
    return rows


class _LayoutPart(NamedTuple):
    """What the layout kernel returns: the window offsets of every document,
    and the starts, lengths and documents of the windows asked for."""

    window_offsets: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    documents: np.ndarray


def _layout_part(
    doc_offsets: np.ndarray,
    size: int,
    step: int,
    tail: str,
    window_offsets: np.ndarray | None = None,
    begin: int = 0,
    end: int = -1,
) -> _LayoutPart:
    """The one call into the layout kernel (arguments already checked):
    windows [begin, end), end -1 meaning to the last. The documents' windows
    are counted unless ``window_offsets`` from an earlier call are given (a
    stream takes its windows range by range, never holding them all)."""
    return _LayoutPart(
        *_core.window_layout(doc_offsets, size, step, TAILS[tail], window_offsets, begin, end)
    )


def _layout(doc_offsets: np.ndarray, size: int, step: int, tail: str) -> WindowLayout:
    part = _layout_part(doc_offsets, size, step, tail)
    return WindowLayout(
        part.starts,
        part.lengths,
        part.documents,
        part.window_offsets,
        doc_offsets,
        size,
        step,
        tail,
    )


def window_layout(
    offsets_or_token_count: Any,
    size: int,
    *,
    step: int | None = None,
    overlap: int | None = None,
    tail: str = "pad",
) -> WindowLayout:
    """Where the windows of a corpus lie, from its document lengths alone.

    The starts, lengths and documents of the windows that :func:`windows`
    cuts with the same arguments, before any token is read: size the buffers
    first (``len(layout)`` windows of ``size`` tokens), then cut the tokens
    all at once or range by range with :meth:`WindowLayout.cut`.

    Parameters
    ----------
    offsets_or_token_count : int or array_like of int
        The number of tokens N of one stream, or the CSR offsets of a corpus,
        shape (documents + 1,): document k is tokens ``offsets[k]`` to
        ``offsets[k+1] - 1``; they start at 0 and never decrease.
    size : int
        Window length, >= 1.
    step : int, optional
        Distance between window starts, 1..size; default ``size`` (no
        overlap). At most one of ``step`` and ``overlap``.
    overlap : int, optional
        ``size - step``, 0..size-1.
    tail : {"pad", "shift", "drop"}
        How the last window of each document is placed, as for
        :func:`windows`.

    Returns
    -------
    WindowLayout
        The windows' starts, lengths and documents, each document's first
        window, and the arguments.

    Raises
    ------
    TypeError
        A ``size``, ``step`` or ``overlap`` that is not an integer; a token
        count that is a bool or None; offsets that are not a 1-D integer array.
    ValueError
        ``size`` < 1 or >= 2^62; both ``step`` and ``overlap``; ``step``
        outside 1..size or ``overlap`` outside 0..size-1; an unknown
        ``tail``; a negative token count, or one of 2^62 or more; offsets
        that do not start at 0, that decrease or that reach 2^62.
    """
    size = v.positive_int(size, "size")
    v.check_sizes("size", size)  # positions in a window must fit int64, with room to spare
    step = _step(size, step, overlap)
    v.choice(tail, "tail", TAILS)
    if offsets_or_token_count is None:
        raise TypeError("offsets_or_token_count must be a token count or CSR offsets; got None")
    if isinstance(offsets_or_token_count, (int, np.integer)):  # bool too: refused by name
        count = v.non_negative_int(offsets_or_token_count, "offsets_or_token_count")
        if count > _INT64_MAX:
            raise ValueError(f"offsets_or_token_count must stay below 2^63; got {count}")
        doc_offsets = np.array([0, count], dtype=np.int64)
    else:
        doc_offsets = _offsets(offsets_or_token_count, None)
    # Refused before the layout's arrays are allocated: window counts and
    # starts of such a corpus leave the range the kernels compute in.
    v.check_sizes("offsets_or_token_count (the corpus's tokens)", int(doc_offsets[-1]))
    return _layout(doc_offsets, size, step, tail)


_FIELDS = ("doc_offsets", "starts", "lengths", "documents")
_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)


class _WindowArrays(NamedTuple):
    """A Windows' arrays and size as the kernels take them."""

    doc_offsets: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    documents: np.ndarray
    size: int


def _int_field(record: Any, name: str, prefix: str) -> np.ndarray:
    """Field ``name`` of a Windows or WindowLayout as int64, refused by name
    unless it is a 1-D integer array (one built by hand may hold anything)."""
    a = getattr(record, name)
    if not (type(a) is np.ndarray and a.dtype == np.int64 and a.ndim == 1):
        a = v.as_array(a, f"{prefix}.{name}")
        if a.ndim != 1 or a.dtype.kind not in "iu":
            raise TypeError(
                f"{prefix}.{name} must be a 1-D integer array; got {a.dtype} of shape {a.shape}"
            )
        if a.dtype.kind == "u" and a.size and int(a.max()) > _INT64_MAX:
            # the int64 copy would wrap it around to a negative number
            k = int(np.argmax(a))
            raise ValueError(f"{prefix}.{name} must stay below 2^63; got {a[k]} at index {k}")
    return v.kernel_array(a, np.int64)


def _check_sums(
    prefix: str,
    doc_offsets: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    documents: np.ndarray,
) -> None:
    """ValueError naming the fields unless, for every window, ``start +
    length`` and ``doc_offsets[document] + start + length`` stay inside int64:
    a Windows or WindowLayout built by hand may hold any values, and each sum
    is compared here without being computed where it could wrap around."""
    if starts.size == 0:
        return
    # private copies: another thread may rewrite the caller's arrays meanwhile,
    # and an index checked in one read must be the one used in the next
    doc_offsets, starts, lengths, documents = (
        a.copy() for a in (doc_offsets, starts, lengths, documents)
    )
    # start + length leaves int64 exactly when start lies beyond the bound the length leaves
    up = np.maximum(lengths, 0)
    down = np.minimum(lengths, 0)
    wraps = ((lengths > 0) & (starts > _INT64_MAX - up)) | (
        (lengths < 0) & (starts < _INT64_MIN - down)
    )
    if wraps.any():
        k = int(np.flatnonzero(wraps)[0])
        raise ValueError(
            f"{prefix}.starts + {prefix}.lengths must fit int64 (below 2^63); window {k} has start "
            f"{starts[k]} and length {lengths[k]}"
        )
    ndocs = doc_offsets.shape[0] - 1
    if ndocs < 1:
        return
    named = (documents >= 0) & (documents < ndocs)  # others: the kernels refuse them
    offsets = doc_offsets[np.where(named, documents, 0)]
    ends = starts + lengths  # inside int64: checked above
    wraps = named & (
        ((ends > 0) & (offsets > _INT64_MAX - np.maximum(ends, 0)))
        | ((ends < 0) & (offsets < _INT64_MIN - np.minimum(ends, 0)))
    )
    if wraps.any():
        k = int(np.flatnonzero(wraps)[0])
        raise ValueError(
            f"{prefix}.doc_offsets[document] + {prefix}.starts + {prefix}.lengths must fit "
            f"int64 (below 2^63); window {k} of document {documents[k]} (offset "
            f"{offsets[k]}) has start {starts[k]} and length {lengths[k]}"
        )


def _fields(w: Windows) -> _WindowArrays:
    """doc_offsets, starts, lengths, documents and size as the kernels take them.
    A Windows built by hand with a field of the wrong kind is refused by name;
    whether the fields describe the documents the kernels check."""
    offsets, starts, lengths, documents = (_int_field(w, name, "windows") for name in _FIELDS)
    if offsets.size == 0 or offsets[0] != 0 or (offsets[1:] < offsets[:-1]).any():
        raise ValueError(
            f"windows.doc_offsets must start at 0 and never decrease; got {offsets.tolist()[:8]}"
        )
    rows = np.shape(w.tokens)[:1]
    if rows != starts.shape:
        raise ValueError(
            f"windows.tokens has {rows[0] if rows else 'no'} rows but windows.starts has "
            f"{starts.shape[0]} entries: one window per row"
        )
    size = v.positive_int(w.size, "windows.size")
    return _WindowArrays(offsets, starts, lengths, documents, size)


@contextlib.contextmanager
def _sums_named(fields: _WindowArrays) -> Iterator[None]:
    """The kernels refuse every window outside its document, sums past 2^63
    among them, in one line; only then (never on the way to a result) are
    such sums looked for, to name the window and its fields instead."""
    try:
        yield
    except ValueError:
        if fields.starts.shape == fields.lengths.shape == fields.documents.shape:
            _check_sums(
                "windows", fields.doc_offsets, fields.starts, fields.lengths, fields.documents
            )
        raise


def _check_pad_value(pad_value: Any, dtype: np.dtype[Any]) -> None:
    """TypeError unless an integer, ValueError unless it fits the tokens' dtype."""
    if isinstance(pad_value, (bool, np.bool_)) or not isinstance(pad_value, (int, np.integer)):
        raise TypeError(f"pad_value must be an integer; got {pad_value!r}")
    info = np.iinfo(dtype)
    if not info.min <= int(pad_value) <= info.max:
        raise ValueError(f"pad_value {pad_value} does not fit {dtype} ({info.min}..{info.max})")


def _step(size: int, step: Any, overlap: Any) -> int:
    if step is not None and overlap is not None:
        raise ValueError("give step or overlap, not both (overlap = size - step)")
    if overlap is not None:
        shared = v.non_negative_int(overlap, "overlap")
        if shared >= size:
            raise ValueError(
                f"overlap must be in 0..{size - 1} (less than size {size}); got {shared}"
            )
        return size - shared
    if step is None:
        return size
    chosen = v.positive_int(step, "step")
    if chosen > size:
        raise ValueError(
            f"step must be in 1..{size} (at most size, or tokens are skipped); got {chosen}"
        )
    return chosen


def _offsets(offsets: Any, n_tokens: int | None) -> np.ndarray:
    """CSR document offsets as int64: from 0 to ``n_tokens`` (to anywhere
    below 2^63 when None), never decreasing; ``[0, n_tokens]`` for None."""
    if offsets is None:
        return np.array([0, n_tokens], dtype=np.int64)
    given = v.as_array(offsets, "offsets")
    if given.ndim != 1 or given.dtype.kind not in "iu":
        raise TypeError(
            f"offsets must be a 1-D integer array; got {given.dtype} of shape {given.shape}"
        )
    # a private copy, checked and then used: another thread may rewrite the
    # caller's offsets between this check and the kernel's read (8 bytes a document)
    given = given.copy()
    ends = f"{given[:1].tolist()}..{given[-1:].tolist()}"
    if n_tokens is None:
        if given.size == 0 or given[0] != 0:
            raise ValueError(f"offsets must start at 0; got {ends}")
    elif given.size == 0 or given[0] != 0 or given[-1] != n_tokens:
        raise ValueError(f"offsets must start at 0 and end at len(tokens) = {n_tokens}; got {ends}")
    down = given[1:] < given[:-1]  # in the offsets' own dtype: uint64 past 2^63 compares right
    if down.any():
        k = int(np.flatnonzero(down)[0])
        raise ValueError(
            f"offsets must not decrease; offsets[{k + 1}] = {given[k + 1]} < {given[k]}"
        )
    if int(given[-1]) > _INT64_MAX:
        raise ValueError(f"offsets must stay below 2^63; got {given[-1]}")
    return v.kernel_array(given, np.int64)


def _corpus(tokens: Any, offsets: Any) -> tuple[np.ndarray, Any, Any]:
    """The tokens as a 1-D integer ndarray, the offsets, and what to guard
    against out= overlapping: an Arrow list column gives its values and its
    own offsets (then ``offsets`` must be None); anything else is read by
    NumPy, with the offsets as given."""
    if v.is_corpus(tokens):  # its tokens read whole, its own offsets
        if offsets is not None:
            raise ValueError(
                "offsets must not be given with an IndexedCorpus: its .idx holds its "
                "documents (choose documents or sequences when opening it)"
            )
        # checked as given offsets are (never cast), on a copy the corpus cannot change
        own = _offsets(np.array(tokens.offsets), None)
        values = v.as_array(tokens.read(0, int(own[-1])), "tokens")
        return values, own, values
    column = _arrow.corpus_column(tokens, offsets)
    if column is not None:
        values, own = column
        return values, own, values
    token_array = v.as_array(tokens, "tokens")
    if token_array.ndim != 1:
        raise ValueError(f"tokens must be 1-D; got shape {token_array.shape}")
    if token_array.dtype.kind not in "iu":
        raise TypeError(f"tokens must be integers; got dtype {token_array.dtype}")
    return token_array, offsets, tokens


def windows(
    tokens: Any,
    size: int,
    *,
    step: int | None = None,
    overlap: int | None = None,
    tail: str = "pad",
    pad_value: int = 0,
    offsets: Any = None,
    out: np.ndarray | None = None,
) -> Windows:
    """Cut tokens into windows of ``size``.

    Sliding windows: each window gets positions 0..size-1. No
    window crosses a document boundary.

    Parameters
    ----------
    tokens : array_like of int, shape (N,), an Arrow list column, or an IndexedCorpus
        uint16, uint32, int32, int64, ... ; the windows keep its dtype. An
        Arrow list column (a ``pyarrow`` ListArray, LargeListArray,
        FixedSizeListArray or ChunkedArray of them, a ``datasets`` column, or
        any object with the Arrow PyCapsule interface, such as a polars
        Series of lists) is a corpus, one document per row, empty lists
        being empty documents: its values are read in place (one copy joins
        the chunks of a column of several), and the windows equal those of
        its flat values with its offsets. Needs the ``arrow`` extra. A
        :class:`posembed.IndexedCorpus` (a Megatron indexed dataset), or any
        corpus with ``offsets`` and ``read(start, stop)`` as it has, is read
        whole, its documents (or sequences) as the documents.
    size : int
        Window length, >= 1.
    step : int, optional
        Distance between window starts, 1..size; default ``size`` (no overlap).
        At most one of ``step`` and ``overlap``.
    overlap : int, optional
        ``size - step``, 0..size-1.
    tail : {"pad", "shift", "drop"}
        ``"pad"``: starts ``k * step`` until a window reaches the document's end
        (``1 if N <= size else ceil((N - size) / step) + 1`` windows for N >= 1,
        as HF tokenizers' overflowing windows); the last is padded with
        ``pad_value``. ``"shift"``: the same count, but the last window ends
        exactly at the end (full whenever N >= size). ``"drop"``: full windows
        only, like ``sliding_window_view(tokens, size)[::step]``; the only mode
        that may leave tokens uncovered. An empty document has no window in
        every mode (HF tokenizers give an empty text one window of padding
        alone, which no training step can use): ``documents`` skips it.
    pad_value : int
        Fills unused slots; must fit the tokens' dtype.
    offsets : array_like of int, shape (documents + 1,), optional
        CSR offsets: document k is ``tokens[offsets[k]:offsets[k+1]]``; they
        start at 0, never decrease and end at N. Default: one document (for
        an Arrow list column: its rows; ``offsets`` is then not given).
    out : ndarray, optional
        C-contiguous array of shape (number of windows, size) and the tokens'
        dtype to write the windows into (a buffer reused batch after batch
        skips the page faults of a new array); the result's ``tokens`` is
        ``out``. Checked before anything is written.

    Returns
    -------
    Windows
        The windows with their starts, lengths, documents and offsets.

    Raises
    ------
    ImportError
        An Arrow column that NumPy cannot read while pyarrow is not installed
        (``pip install 'posembed[arrow]'``).
    TypeError
        ``tokens`` that NumPy cannot read or not of an integer dtype (an
        Arrow producer pyarrow cannot read, or a list column whose values
        are not integers); a ``size``,
        ``step``, ``overlap`` or ``pad_value`` that is not an integer;
        ``offsets`` that is not a 1-D integer array; ``out`` that is not an
        ndarray or of another dtype.
    ValueError
        ``tokens`` that is not 1-D; an Arrow list column with a null list or
        a null token (the message names the row), or given with ``offsets``;
        ``size`` < 1, or a window of 2^62 bytes or more; both ``step`` and
        ``overlap``; ``step`` outside 1..size or ``overlap`` outside
        0..size-1; an unknown ``tail``; a ``pad_value`` that does not fit the
        tokens' dtype; ``offsets`` that do not start at 0 and end at N, or
        that decrease; ``out`` of the wrong shape, read-only, misaligned,
        non-contiguous or overlapping ``tokens``.
    """
    token_array, offsets, tokens = _corpus(tokens, offsets)
    size = v.positive_int(size, "size")
    v.check_sizes("size", size, token_array.itemsize)  # a window's bytes must fit int64
    step = _step(size, step, overlap)
    v.choice(tail, "tail", TAILS)
    _check_pad_value(pad_value, token_array.dtype)
    doc_offsets = _offsets(offsets, token_array.shape[0])
    layout = _layout(doc_offsets, size, step, tail)  # the windows are counted here, once
    native = token_array.dtype.newbyteorder("=")
    if out is not None:
        out = v.check_out(
            out,
            (len(layout), size),
            native,
            tokens=(token_array, tokens),
            offsets=(doc_offsets, offsets),
        )
    token_array = v.kernel_array(token_array, native)
    rows = _cut(
        token_array,
        0,
        doc_offsets,
        layout.starts,
        layout.lengths,
        layout.documents,
        size,
        pad_value,
        out,
    )
    return Windows(
        rows, layout.starts, layout.lengths, layout.documents, doc_offsets, size, step, tail
    )


def _stitch_types(dtype: np.dtype[Any], reduce: str) -> tuple[np.dtype[Any], np.dtype[Any]]:
    """(compute dtype, result dtype) of stitch for values of `dtype`."""
    if dtype.kind == "f" or dtype.name == "bfloat16":
        compute = np.dtype(np.float64 if dtype.name == "float64" else np.float32)
        return compute, dtype
    if dtype.kind not in "biu":
        raise TypeError(f"values must be numbers (bool, integer or float); got dtype {dtype}")
    wide = np.dtype(np.uint64 if dtype.kind == "u" else np.int64)
    if reduce == "mean":
        return np.dtype(np.float64), np.dtype(np.float64)
    if reduce == "sum":
        return wide, wide
    return wide, dtype


def stitch(values: Any, windows: Windows, *, reduce: str = "mean", fill: Any = 0) -> np.ndarray:
    """Per-window values back to per-token values.

    ``stitch(w.tokens, w, reduce="first")`` gives back the input tokens exactly.

    Parameters
    ----------
    values : array_like, shape (n, size, ...)
        Aligned with ``windows.tokens`` (a model's output per window slot,
        say); bool, integer or float (bfloat16 too).
    windows : Windows
        The :class:`Windows` the values belong to.
    reduce : {"mean", "sum", "max", "first", "center"}
        How the slots that hold the same token combine: "first" and "center"
        take the slot :meth:`Windows.owner` marks; the others reduce every slot
        in window order (max: NaN wins, as ``numpy.maximum``, and -0.0
        counts as below 0.0).
    fill : scalar
        Value for tokens no window holds (only ``tail="drop"`` leaves any).

    Returns
    -------
    ndarray, shape (N, ...)
        Aligned with the input tokens (all documents, flat). Floats keep their
        dtype (float16 and bfloat16 reduce in float32); integer sums are int64
        or uint64, integer means float64, other integer reductions keep the
        dtype.

    Raises
    ------
    TypeError
        ``windows`` that is not a :class:`Windows` (or one built by hand with
        fields of the wrong kind, as for :meth:`Windows.owner`); ``values``
        that NumPy cannot read or not of a numeric dtype (complex, object,
        strings); a ``fill`` that is not a number fitting the result.
    ValueError
        An unknown ``reduce``; ``values`` whose leading shape is not
        (n, size); a ``Windows`` built by hand whose arrays do not describe its
        documents.
        Also an integer sum (``reduce="sum"``) outside the range of int64
        (uint64 for unsigned values): sums are exact, never wrapped around;
        the message names the first such token.
    """
    if not isinstance(windows, Windows):
        raise TypeError(f"windows must be a posembed.Windows; got {type(windows).__name__}")
    fields = _fields(windows)
    r = v.choice(reduce, "reduce", REDUCES)
    vals = v.as_array(values, "values")
    lead = (fields.starts.shape[0], fields.size)
    if vals.shape[:2] != lead:
        raise ValueError(
            f"values must have leading shape (windows, size) = {lead}; got shape {vals.shape}"
        )
    compute, result = _stitch_types(vals.dtype, r)
    rest = vals.shape[2:]
    flat = v.kernel_array(vals, compute).reshape(*lead, math.prod(rest))
    if isinstance(fill, np.ndarray) and fill.ndim == 0:
        fill = fill[()]
    if not isinstance(fill, (numbers.Real, np.bool_)):  # not None, a string, an array
        raise TypeError(f"fill must be a number that fits {result}; got {fill!r}")
    try:
        with np.errstate(over="raise", invalid="raise"):  # 1e300 in float32: inf, refused
            fill_value = compute.type(fill)
    except (TypeError, ValueError, OverflowError, FloatingPointError):
        raise TypeError(f"fill must be a number that fits {result}; got {fill!r}") from None
    with _sums_named(fields):
        out = _core.stitch(
            flat,
            fields.doc_offsets,
            fields.starts,
            fields.lengths,
            fields.documents,
            fields.size,
            REDUCES[r],
            fill_value.item(),
        )
    # the kernel's rows, not the caller's doc_offsets, which may have changed since
    shaped: np.ndarray = out.reshape(out.shape[0], *rest).astype(result, copy=False)
    return shaped

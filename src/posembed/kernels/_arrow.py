"""Arrow, an optional dependency (the ``arrow`` extra): pyarrow on demand, and
the table of windows that :meth:`Windows.to_arrow` and ``posembed chunk
--format parquet`` share."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

EXTRA = "pip install 'posembed[arrow]'"


def require(feature: str) -> ModuleType:
    """The pyarrow module; ImportError naming the extra when it is missing."""
    try:
        import pyarrow
    except ImportError:
        raise ImportError(f"{feature} needs pyarrow, which is not installed: {EXTRA}") from None
    module: ModuleType = pyarrow
    return module


def _wrap(pa: Any, values: np.ndarray) -> Any:
    """A flat Arrow array over ``values`` (1-D, C-contiguous, native byte
    order) without a copy: the buffer keeps the NumPy array alive."""
    return pa.Array.from_buffers(
        pa.from_numpy_dtype(values.dtype), values.shape[0], [None, pa.py_buffer(values)]
    )


def windows_table(
    tokens: np.ndarray,
    lengths: np.ndarray,
    documents: np.ndarray,
    starts: np.ndarray,
    mask: np.ndarray | None = None,
) -> Any:
    """A ``pyarrow.Table`` of windows, one row each: ``input_ids`` (a
    fixed-size list of ``size`` tokens over ``tokens``' own buffer, no copy),
    ``attention_mask`` (a fixed-size list of int8: 1 where the window holds a
    token), and ``document``, ``start`` and ``length`` (int64).

    ``tokens`` is (windows, size), C-contiguous; ``mask`` the (windows, size)
    int8 mask when the caller has it, computed from ``lengths`` otherwise.
    """
    pa = require("Windows.to_arrow")
    size = tokens.shape[1]
    flat = np.ascontiguousarray(tokens).reshape(-1)
    if not flat.dtype.isnative:
        flat = flat.astype(flat.dtype.newbyteorder("="))
    if mask is None:
        mask = (np.arange(size)[None, :] < lengths[:, None]).astype(np.int8)
    columns = {
        "input_ids": pa.FixedSizeListArray.from_arrays(_wrap(pa, flat), size),
        "attention_mask": pa.FixedSizeListArray.from_arrays(
            _wrap(pa, np.ascontiguousarray(mask, np.int8).reshape(-1)), size
        ),
        "document": _wrap(pa, np.ascontiguousarray(documents, np.int64)),
        "start": _wrap(pa, np.ascontiguousarray(starts, np.int64)),
        "length": _wrap(pa, np.ascontiguousarray(lengths, np.int64)),
    }
    return pa.table(columns)


def is_arrow(obj: Any) -> bool:
    """Whether ``obj`` may be an Arrow column: a pyarrow object, or one with
    the Arrow PyCapsule interface (polars, pandas, nanoarrow, ...). Decided
    without importing pyarrow, so NumPy input never pays for it."""
    if isinstance(obj, np.ndarray):
        return False
    kind = type(obj)
    return (
        hasattr(kind, "__arrow_c_array__")
        or hasattr(kind, "__arrow_c_stream__")
        or kind.__module__.startswith("pyarrow")
    )


def _column(pa: Any, obj: Any) -> Any:
    """``obj`` as a pyarrow Array or ChunkedArray: a stream (every chunk of
    a polars Series, say) before a single array."""
    if isinstance(obj, (pa.Array, pa.ChunkedArray)):
        return obj
    if hasattr(obj, "__arrow_c_stream__"):
        return pa.chunked_array(obj)
    if hasattr(obj, "__arrow_c_array__"):
        return pa.array(obj)
    return None


def corpus_column(tokens: Any, offsets: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`list_column` of ``tokens`` for a function that also takes CSR
    ``offsets``: those must then be None, since the column's rows are the
    documents."""
    column = list_column(tokens)
    if column is not None and offsets is not None:
        raise ValueError(
            "offsets must not be given with an Arrow list column: its rows are the "
            "documents (pass the flat tokens to give offsets)"
        )
    return column


def _datasets_column(obj: Any) -> Any:
    """A Hugging Face ``datasets`` column (``ds["input_ids"]``, which has no
    Arrow interface of its own) as its Arrow data, in the dataset's row order
    (``select`` and ``shuffle`` followed); anything else unchanged."""
    kind = type(obj)
    if kind.__name__ == "Column" and kind.__module__.startswith("datasets."):
        source: Any = getattr(obj, "source", None)
        name = getattr(obj, "column_name", None)
        if hasattr(source, "with_format") and isinstance(name, str):
            return source.with_format("arrow")[name]
    return obj


def list_column(
    obj: Any, name: str = "tokens", *, numbers: bool = False
) -> tuple[np.ndarray, np.ndarray] | None:
    """An Arrow list column as a corpus: its values (the tokens, one flat
    array) and its offsets (int64, CSR from 0: one document per row).

    None when ``obj`` is no Arrow list column (a flat Arrow array of tokens,
    say: NumPy reads that as it is). A list, large list or fixed-size list
    array, a ChunkedArray of them, or an object with the Arrow PyCapsule
    interface is read; slices are honoured and chunks are concatenated in
    order. The values of a single chunk are a view of its buffer, without a
    copy; several chunks take one copy into a contiguous array.

    ImportError naming the extra when pyarrow is missing (and NumPy cannot
    read ``obj`` itself); TypeError for values that are not integers (nor
    floats or booleans, with ``numbers``);
    ValueError naming the row of a null list or of a null token.
    """
    obj = _datasets_column(obj)
    if not is_arrow(obj):
        return None
    try:
        import pyarrow as pa
    except ImportError:
        if hasattr(type(obj), "__array__") and not type(obj).__module__.startswith("pyarrow"):
            return None  # NumPy reads it (a pandas or polars Series of numbers), as before
        pa = require(f"{name} given as an Arrow column")
    try:
        column = _column(pa, obj)
    except (TypeError, ValueError, pa.ArrowException) as exc:
        raise TypeError(
            f"{name} must be an Arrow column pyarrow can read; got {type(obj).__name__}: {exc}"
        ) from None
    if column is None:
        return None
    kind = column.type
    if pa.types.is_struct(kind):  # a table or record batch: a column must be chosen
        names = ", ".join(kind.field(i).name for i in range(kind.num_fields))
        raise TypeError(
            f"{name} must be one list column of token ids; got a table of columns ({names}): "
            "pass one of them, such as table['input_ids']"
        )
    if not (
        pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
    ):
        return None
    value = kind.value_type
    if numbers and (pa.types.is_floating(value) or pa.types.is_boolean(value)):
        pass  # a per-token column of numbers (a mask, a weight)
    elif not pa.types.is_integer(value):
        raise TypeError(
            f"{name} must be a list column of integers (token ids); got Arrow type {kind}"
        )
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts: list[np.ndarray] = []
    offsets: list[np.ndarray] = [np.zeros(1, np.int64)]
    row = token = 0
    for chunk in chunks:
        if not len(chunk):
            continue
        values, ends = _chunk(pa, chunk, row, name, pa.types.is_boolean(value))
        parts.append(values)
        offsets.append(ends[1:] + token)
        token += values.shape[0]
        row += len(chunk)
    dtype = np.dtype(kind.value_type.to_pandas_dtype())
    if not parts:
        flat = np.empty(0, dtype)
    elif len(parts) == 1:
        flat = parts[0]  # a view of the Arrow buffer
    else:
        flat = np.concatenate(parts)  # one copy: the kernel reads one contiguous array
    return flat, np.concatenate(offsets)


def _chunk(
    pa: Any, chunk: Any, first_row: int, name: str, bits: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """One list array's values (a view, the slice it covers) and its offsets
    rebased to 0 (a new int64 array); ``first_row`` is its first row's
    index in the column, for the errors."""
    if chunk.null_count:
        k = int(np.flatnonzero(chunk.is_null().to_numpy(zero_copy_only=False))[0])
        raise ValueError(
            f"{name} must hold a list at every row (an empty list is an empty document); "
            f"row {first_row + k} is null"
        )
    if pa.types.is_fixed_size_list(chunk.type):
        width = chunk.type.list_size
        ends = np.arange(len(chunk) + 1, dtype=np.int64) * width
        values = chunk.values.slice(chunk.offset * width, len(chunk) * width)
    else:
        given = chunk.offsets.to_numpy(zero_copy_only=False)  # honours the slice
        ends = given.astype(np.int64) - int(given[0])  # a private, rebased copy
        down = ends[1:] < ends[:-1]
        if down.any():  # pyarrow.ListArray.from_arrays does not check its offsets
            k = int(np.flatnonzero(down)[0])
            raise ValueError(
                f"{name} must be a valid list column; the offsets of row {first_row + k} "
                f"decrease ({int(given[k])} to {int(given[k + 1])})"
            )
        values = chunk.values.slice(int(given[0]), int(ends[-1]))
    if values.null_count:
        at = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        k = int(np.searchsorted(ends, at, side="right")) - 1
        raise ValueError(
            f"{name} must hold no null token; row {first_row + k} has one at "
            f"position {at - int(ends[k])}"
        )
    return values.to_numpy(zero_copy_only=not bits), ends  # booleans are bits: one copy

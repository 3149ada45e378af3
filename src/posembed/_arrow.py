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
    return pyarrow


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

"""Argument checks shared by every public function.

Each check either returns an array the kernels can use directly or raises
TypeError / ValueError / IndexError with a message that names the argument,
the value it got and what is allowed. Checks are cheap on the common path
(an ``ndarray`` of the right kind) because small calls must stay fast.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

# Integer codes understood by _core for the gather modes.
INDEX_MODES = {"raise": 0, "clip": 1, "wrap": 2}

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def as_array(obj: Any, name: str) -> np.ndarray:
    """``obj`` as an ndarray, without a copy when NumPy can view it."""
    if isinstance(obj, np.ma.MaskedArray):
        raise TypeError(
            f"{name} must not be a masked array: its mask would be ignored; "
            "pass obj.filled(...) or obj.compressed() instead"
        )
    if isinstance(obj, np.ndarray):
        return obj
    try:
        return np.asarray(obj)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be array-like; got {type(obj).__name__}: {exc}") from None


def as_table(table: Any, name: str = "table") -> np.ndarray:
    """A 2-D (L, d) array of a fixed-size dtype; any strides."""
    t = table if type(table) is np.ndarray else as_array(table, name)
    if t.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape (L, d); got shape {t.shape}")
    if t.dtype.hasobject or t.dtype.itemsize == 0:
        raise TypeError(f"{name} must have a fixed-size dtype; got dtype {t.dtype}")
    return t


def index_mode(mode: Any) -> int:
    try:
        return INDEX_MODES[mode]
    except (KeyError, TypeError):
        raise ValueError(f"mode must be 'raise', 'clip' or 'wrap'; got {mode!r}") from None


def as_positions(positions: Any, rows: int, mode: str, name: str = "positions") -> np.ndarray:
    """Integer positions as a C-contiguous, native-order array of their own dtype.

    Python ints beyond 64 bits cannot reach the kernel; they are resolved here
    (clip / wrap) or reported (raise), so that nothing wraps around silently.
    """
    p = positions if type(positions) is np.ndarray else as_array(positions, name)
    kind = p.dtype.kind
    if kind != "i" and kind != "u":
        if kind == "O":
            p = _positions_from_ints(p, rows, mode, name)
        elif kind == "f" and p.size == 0 and not isinstance(positions, np.ndarray):
            p = p.astype(np.intp)  # an empty list
        elif kind == "b":
            raise TypeError(
                f"{name} must be integers; got a bool array (a mask? use numpy.flatnonzero(mask))"
            )
        else:
            raise TypeError(
                f"{name} must be integers (int8..int64, uint8..uint64); got dtype {p.dtype}"
            )
    if not (p.flags.c_contiguous and p.dtype.isnative):
        p = np.ascontiguousarray(p, dtype=p.dtype.newbyteorder("="))
    return p


def _positions_from_ints(p: np.ndarray, rows: int, mode: str, name: str) -> np.ndarray:
    flat = p.ravel()
    values = []
    for i, v in enumerate(flat):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name} must be integers; got {type(v).__name__} {v!r}")
        v = int(v)
        if v < _INT64_MIN or v > _INT64_MAX:
            if mode == "wrap" and rows > 0:
                v %= rows
            elif mode == "clip":
                v = _INT64_MIN if v < 0 else _INT64_MAX
            else:
                where = np.unravel_index(i, p.shape)
                at = f" at {name}[{', '.join(map(str, where))}]" if p.ndim else ""
                raise IndexError(
                    f"position {v}{at} is out of range for a table of {rows} rows"
                    + (f" (valid positions are 0..{rows - 1})" if rows else "")
                )
        values.append(v)
    return np.array(values, dtype=np.int64).reshape(p.shape)


def check_out(out: Any, shape: tuple[int, ...], dtype: np.dtype[Any], **inputs: np.ndarray) -> None:
    """``out`` must be exactly what the kernel would allocate, and disjoint from its inputs."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray; got {type(out).__name__}")
    if out.dtype != dtype:
        raise TypeError(f"out must have dtype {dtype}; got dtype {out.dtype}")
    if out.shape != shape:
        raise ValueError(f"out must have shape {shape}; got shape {out.shape}")
    if not out.flags.writeable:
        raise ValueError("out must be writeable; got a read-only array")
    if not out.flags.c_contiguous:
        raise ValueError(
            f"out must be C-contiguous; got a non-contiguous array (strides {out.strides})"
        )
    for name, arr in inputs.items():
        if np.may_share_memory(out, arr) and _shares(out, arr):
            raise ValueError(f"out must not overlap {name}: they share memory")


def _shares(a: np.ndarray, b: np.ndarray) -> bool:
    work: Any = 1 << 20  # bounded effort; NumPy's stubs only admit -1 and 0
    try:
        return bool(np.shares_memory(a, b, max_work=work))
    except np.exceptions.TooHardError:
        return True  # cannot prove them disjoint


def positive_int(value: Any, name: str) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer; got bool {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(
            f"{name} must be an integer; got {type(value).__name__} {value!r}"
        ) from None
    if n <= 0:
        raise ValueError(f"{name} must be a positive integer; got {n}")
    return n

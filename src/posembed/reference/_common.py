"""The twins' own argument checks, and how they read inputs and write ``out=``.

posembed's checks live in ``posembed.kernels._validate``; these are written apart from
them on purpose (see the package's docstring). Messages are short: the tests
hold the twins to posembed's exception types, not to its wording.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

FLOAT_NAMES = ("float16", "bfloat16", "float32", "float64")


def _array(obj: Any, name: str) -> np.ndarray:
    """``obj`` as NumPy reads it; masked arrays and what NumPy cannot read are TypeErrors."""
    if isinstance(obj, np.ma.MaskedArray):
        raise TypeError(f"{name}: masked arrays are not accepted")
    try:
        return np.asarray(obj)
    except (BufferError, RuntimeError, TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be array-like: {exc}") from None


def _int_positions(positions: Any) -> np.ndarray:
    """Positions as int64, or uint64 (kept, so huge values compare correctly),
    or an object array of Python ints when they do not fit 64 bits."""
    p = _array(positions, "positions")
    if p.dtype.kind == "f" and isinstance(positions, (list, tuple)):
        # a list: empty, or of ints too large for one NumPy integer type
        p = np.asarray(positions, dtype=object) if p.size else p.astype(np.int64)
    if p.dtype.kind == "O":
        ok = (isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in p.flat)
        if not all(ok):
            raise TypeError("positions must be integers")
        return np.array([int(x) for x in p.flat], dtype=object).reshape(p.shape)
    if p.dtype.kind not in "iu":
        raise TypeError(f"positions must be integers; got dtype {p.dtype}")
    if p.dtype.kind == "u" and p.dtype.itemsize == 8:
        return p.astype(np.uint64)  # any byte order; huge values stay positive
    return p.astype(np.int64)


def _checked_ids(ids: Any, rows: int, name: str) -> np.ndarray:
    """Integer ids as int64, each in 0..rows-1 (else IndexError)."""
    p = _int_positions(ids)
    if p.size and ((p < 0) | (p >= rows)).any():
        raise IndexError(f"{name} out of range for a table of {rows} rows")
    return p.astype(np.int64)


def _float_table(table: Any) -> np.ndarray:
    """A 2-D float table in native byte order (results come out native too)."""
    t = _array(table, "table")
    if t.ndim != 2:
        raise ValueError(f"table must be 2-D; got shape {t.shape}")
    if t.dtype.name not in FLOAT_NAMES:
        raise TypeError(f"table must have a float dtype; got {t.dtype}")
    return t.astype(t.dtype.newbyteorder("="), copy=False)


def _compute_dtype(t: np.ndarray) -> type[np.floating[Any]]:
    """float64 tables compute in float64, every other float in float32."""
    return np.float64 if t.dtype.name == "float64" else np.float32  # any byte order


def _count(value: Any, name: str, minimum: int) -> int:
    """An integer >= minimum (bools refused)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer") from None
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}")
    return int(value)


def _check_size(what: str, *factors: int) -> None:
    """ValueError when a result or index range would reach 2^62 (as the kernels refuse)."""
    if math.prod(max(int(f), 1) for f in factors) >= 2**62:
        raise ValueError(f"{what} is too large")


def _check_seed(seed: Any) -> None:
    """A seed for numpy.random.default_rng, which takes bools silently."""
    if isinstance(seed, (bool, np.bool_)):
        raise TypeError("seed must not be a bool")


def _seed_value(seed: Any) -> int:
    """A dropout seed: an integer in 0..2**64-1."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError("seed must be an integer")
    if not 0 <= int(seed) <= 2**64 - 1:
        raise ValueError("seed must be in 0..2**64-1")
    return int(seed)


def _rate(p: Any, name: str) -> float:
    """A dropout rate: a number in [0, 1)."""
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.number)):
        raise TypeError(f"{name} must be a number")
    if not 0.0 <= float(p) < 1.0:
        raise ValueError(f"{name} must be in [0, 1)")
    return float(p)


def _flag(value: Any, name: str) -> bool:
    """A switch: True or False (numpy.bool_ too), never a truthy stand-in."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False")
    return bool(value)


def _writable_out(out: Any) -> np.ndarray:
    """out= as an ndarray: itself, or a view of a DLPack producer's memory."""
    if isinstance(out, np.ndarray):
        return out
    if not hasattr(type(out), "__dlpack__"):
        raise TypeError("out must be a numpy.ndarray or a DLPack producer")
    try:
        view: np.ndarray = np.from_dlpack(out)
    except (BufferError, RuntimeError, TypeError, ValueError) as exc:
        raise TypeError(f"out must be memory NumPy can write: {exc}") from None
    return view


def _memory(x: Any) -> np.ndarray:
    """An input's memory: a DLPack producer's viewed in place, else NumPy's view
    (a list or a number: a fresh array, sharing nothing)."""
    if x is None or isinstance(x, np.ndarray):
        return np.asarray(x)
    if hasattr(type(x), "__dlpack__"):
        try:
            return np.from_dlpack(x)
        except (BufferError, RuntimeError, TypeError, ValueError):
            pass
    try:
        return np.asarray(x)
    except (BufferError, RuntimeError, TypeError, ValueError):
        return np.asarray(None)


def _check_out(out: Any, dtype: np.dtype[Any], shape: tuple[int, ...], *inputs: Any) -> None:
    """The checks of out= alone, before any value is checked (posembed's order:
    every argument's kind, shape and dtype, out= among them, then ranges)."""
    if out is None:
        return
    dest = _writable_out(out)
    if dest.dtype != dtype:
        raise TypeError(f"out must have dtype {dtype}")
    if dest.shape != shape:
        raise ValueError(f"out must have shape {shape}")
    if not (dest.flags.writeable and dest.flags.c_contiguous and dest.flags.aligned):
        raise ValueError("out must be writeable, C-contiguous and aligned")
    if any(np.shares_memory(dest, _memory(x)) for x in inputs):
        raise ValueError("out must not overlap an input")


def _into(out: Any, result: np.ndarray, *inputs: Any) -> np.ndarray:
    """result, or result written into out after the same checks as the kernels."""
    if out is None:
        return result
    _check_out(out, result.dtype, result.shape, *inputs)
    dest = _writable_out(out)
    dest[...] = result
    return dest

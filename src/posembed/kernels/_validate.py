"""Argument checks shared by every public function.

Each check either returns an array the kernels can use directly or raises
TypeError / ValueError / IndexError with a message that names the argument,
the value it got and what is allowed. Checks are cheap on the common path
(an ``ndarray`` of the right kind) because small calls must stay fast.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

import numpy as np

from posembed import _core

# The modes the kernels take, by the names the API takes (bound C++ enums).
INDEX_MODES = _core.IndexMode.__members__

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def as_array(obj: Any, name: str) -> np.ndarray:
    """``obj`` as an ndarray, without a copy when NumPy can view it.

    NumPy arrays (memory-maps included) pass through. Other objects are viewed
    through DLPack first (PyTorch CPU tensors, JAX, CuPy host arrays, ...), which
    never copies; a PyTorch bfloat16 tensor, which DLPack cannot hand to NumPy,
    is viewed through its int16 bits as an ml_dtypes bfloat16 array. Anything
    else goes through ``numpy.asarray`` (the buffer protocol,
    ``__array_interface__``, ``__array__``, nested lists).
    """
    if isinstance(obj, np.ma.MaskedArray):
        raise TypeError(
            f"{name} must not be a masked array: its mask would be ignored; "
            "pass obj.filled(...) or obj.compressed() instead"
        )
    if isinstance(obj, np.ndarray):
        return obj
    dlpack_error: Exception | None = None
    if hasattr(type(obj), "__dlpack__"):
        try:
            return _from_dlpack(obj)
        except (BufferError, RuntimeError, TypeError, ValueError) as exc:
            dlpack_error = exc
    try:
        a = np.asarray(obj)
        if dlpack_error is None or not a.dtype.hasobject:
            return a
        raise dlpack_error  # NumPy found no other way in: an object array holding it
    except (BufferError, RuntimeError, TypeError, ValueError) as exc:
        reason = f"{exc}" if dlpack_error in (None, exc) else f"{dlpack_error} (DLPack); {exc}"
        raise TypeError(
            f"{name} must be an array NumPy can read (a NumPy array, a DLPack producer "
            f"such as a CPU torch.Tensor, a buffer, or nested lists); "
            f"got {type(obj).__name__}: {reason}"
        ) from None


def _from_dlpack(obj: Any) -> np.ndarray:
    """A NumPy view of a DLPack producer's memory (never a copy)."""
    if type(obj).__module__.startswith("torch") and str(getattr(obj, "dtype", "")) == (
        "torch.bfloat16"
    ):
        import sys

        if obj.requires_grad:  # as DLPack and Tensor.numpy() refuse
            raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
        torch = sys.modules["torch"]
        bits = np.from_dlpack(obj.view(torch.int16))  # the same memory, reinterpreted
        return bits.view(bfloat16_dtype())
    return np.from_dlpack(obj)


def bfloat16_dtype() -> np.dtype[Any]:
    """ml_dtypes' bfloat16, or a TypeError saying how to get it."""
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError(
            "bfloat16 arrays need the ml_dtypes package: pip install ml_dtypes"
        ) from None
    dtype: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
    return dtype


def as_table(table: Any, name: str = "table") -> np.ndarray:
    """A 2-D (L, d) array of a fixed-size dtype; any strides."""
    t = table if type(table) is np.ndarray else as_array(table, name)
    if t.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape (L, d); got shape {t.shape}")
    if t.dtype.hasobject or t.dtype.itemsize == 0:
        raise TypeError(f"{name} must have a fixed-size dtype; got dtype {t.dtype}")
    return t


def check_has_rows(table: np.ndarray) -> None:
    """ValueError for a table without rows (nothing to interpolate or extend)."""
    if table.shape[0] == 0:
        raise ValueError("table must have at least one row; got shape (0, d)")


def index_mode(mode: Any) -> _core.IndexMode:
    try:
        return INDEX_MODES[mode]
    except (KeyError, TypeError):
        raise ValueError(f"mode must be 'raise', 'clip' or 'wrap'; got {mode!r}") from None


def as_positions(
    positions: Any,
    rows: int,
    mode: str,
    name: str = "positions",
    noun: str = "position",
    table: str = "",
) -> np.ndarray:
    """Integer positions as a C-contiguous, native-order array of their own dtype.

    Python ints beyond 64 bits cannot reach the kernel; they are resolved here
    (clip / wrap) or reported (raise: by ``_core.check_in_range``, the kernels'
    own wording, naming ``table``, the argument that sets ``rows``), so that
    nothing wraps around silently.
    """
    p = positions if type(positions) is np.ndarray else as_array(positions, name)
    kind = p.dtype.kind
    if kind != "i" and kind != "u":
        if kind == "f" and isinstance(positions, (list, tuple)):
            # a list: empty, or ints that NumPy could not fit in one integer type
            p = np.asarray(positions, dtype=object) if p.size else p.astype(np.intp)
            kind = p.dtype.kind
        if kind == "O":
            p = _positions_from_ints(p, rows, mode, name, noun, table)
        elif kind == "i" or kind == "u":
            pass
        elif kind == "b":
            raise TypeError(
                f"{name} must be integers; got a bool array (a mask? use numpy.flatnonzero(mask))"
            )
        else:
            raise TypeError(
                f"{name} must be integers (int8..int64, uint8..uint64); got dtype {p.dtype}"
            )
    if not (p.flags.c_contiguous and p.flags.aligned and p.dtype.isnative):
        p = kernel_array(p, p.dtype.newbyteorder("="))  # keeps 0-d
    return p


def kernel_array(array: Any, dtype: Any = None) -> np.ndarray:
    """``array`` as the kernels read arrays: C-contiguous, aligned for its
    dtype (a view into a byte buffer at an odd offset is not), in ``dtype``;
    ``array`` itself when it already is, else one copy."""
    result = np.asarray(array, dtype=dtype, order="C")
    if not result.flags.aligned:
        result = result.copy()
    return result


def _positions_from_ints(
    positions: np.ndarray, rows: int, mode: str, name: str, noun: str, table: str
) -> np.ndarray:
    """Python ints of any size (an object array) as int64 positions."""
    values = []
    for value in positions.ravel():
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be integers; got {type(value).__name__} {value!r}")
        values.append(int(value))
    if mode == "raise":  # the kernels' own check and message, for values they could not hold
        ints = np.array(values, dtype=object).reshape(positions.shape)
        _core.check_in_range(ints, rows, name, noun, table)
    if mode == "wrap" and rows > 0:
        values = [value % rows for value in values]
    # clip (and an empty table, which the kernel reports) only need the sign
    # and size kept: the kernel clips int64 extremes the same way.
    values = [min(max(value, _INT64_MIN), _INT64_MAX) for value in values]
    return np.array(values, dtype=np.int64).reshape(positions.shape)


def probability(value: Any, name: str) -> float:
    """A float in [0, 1) (a dropout rate)."""
    if type(value) is float and 0.0 <= value < 1.0:
        return value  # the common case, checked cheaply
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"{name} must be a number in [0, 1); got {type(value).__name__} {value!r}")
    p = float(value)
    if not 0.0 <= p < 1.0:  # NaN fails too
        raise ValueError(f"{name} must be in [0, 1) (a probability of dropping); got {value!r}")
    return p


def flag(value: Any, name: str) -> bool:
    """A True/False switch: a Python bool or numpy.bool_, as a Python bool.

    Anything else is a TypeError, truthy or not: 1, "no", [] and None would
    otherwise switch it silently (``copy="no"`` would copy).
    """
    if value is True or value is False:
        return value  # the common case, checked cheaply
    if isinstance(value, np.bool_):
        return bool(value)
    raise TypeError(f"{name} must be True or False; got {value!r}")


def antialias_flag(antialias: Any, align: str) -> bool:
    """``antialias`` as a bool (see :func:`flag`); True only with half_pixel,
    the alignment PyTorch's antialiased filters are centred on."""
    aa = flag(antialias, "antialias")
    if aa and align != "half_pixel":
        raise ValueError(
            f"antialias=True needs align='half_pixel' (PyTorch's antialiased filters are "
            f"centred on half pixels, as align_corners=False); got align={align!r}"
        )
    return aa


def check_out(
    out: Any,
    shape: tuple[int, ...],
    dtype: np.dtype[Any],
    **inputs: Any,
) -> np.ndarray:
    """``out`` as the ndarray the kernel writes: exactly what the kernel would
    allocate, and disjoint from its inputs. A DLPack producer (a CPU
    torch.Tensor, ...) is viewed in place, so the kernel writes its memory.

    ``inputs`` maps each argument's name to what the kernel reads (a converted
    copy, perhaps) and what the caller passed, alone or in a tuple: the
    caller's objects are viewed as :func:`as_array` views them (a DLPack
    producer, a memoryview, ...), so out= cannot alias their memory either."""
    if not isinstance(out, np.ndarray):
        if not hasattr(type(out), "__dlpack__"):
            raise TypeError(
                "out must be a numpy.ndarray or a DLPack producer such as a CPU torch.Tensor; "
                f"got {type(out).__name__}"
            )
        try:
            out = _from_dlpack(out)
        except (BufferError, RuntimeError, TypeError, ValueError) as exc:
            raise TypeError(
                f"out must be memory NumPy can write in place; got {type(out).__name__}: {exc}"
            ) from None
    if out.dtype != dtype:
        raise TypeError(f"out must have dtype {dtype}; got dtype {out.dtype}")
    if out.shape != shape:
        raise ValueError(f"out must have shape {shape}; got shape {out.shape}")
    if not out.flags.writeable:
        raise ValueError("out must be writeable; got a read-only array")
    if not out.flags.aligned:
        raise ValueError("out must be aligned for its dtype; got a misaligned view")
    if not out.flags.c_contiguous:
        raise ValueError(
            f"out must be C-contiguous; got a non-contiguous array (strides {out.strides})"
        )
    for name, given in inputs.items():
        for obj in given if isinstance(given, tuple) else (given,):
            memory = _memory_of(obj, name)
            if memory is not None and np.may_share_memory(out, memory) and _shares(out, memory):
                raise ValueError(f"out must not overlap {name}: they share memory")
    viewed: np.ndarray = out
    return viewed


def _memory_of(obj: Any, name: str) -> np.ndarray | None:
    """The memory an argument holds, as as_array views it; None for objects
    that hold none of their own (lists, numbers, None) or cannot be read."""
    if isinstance(obj, np.ndarray):
        return obj
    if obj is None or isinstance(obj, (list, tuple, int, float, complex, str, bytes)):
        return None
    try:
        return as_array(obj, name)
    except TypeError:
        return None


def _shares(out: np.ndarray, given: np.ndarray) -> bool:
    work: Any = 1 << 20  # bounded effort; NumPy's stubs only admit -1 and 0
    try:
        return bool(np.shares_memory(out, given, max_work=work))
    except np.exceptions.TooHardError:
        return True  # cannot prove them disjoint


def positive_int(value: Any, name: str) -> int:
    return _int_at_least(value, name, 1, "a positive integer")


def non_negative_int(value: Any, name: str) -> int:
    return _int_at_least(value, name, 0, "an integer >= 0")


def _int_at_least(value: Any, name: str, minimum: int, what: str) -> int:
    if type(value) is int and value >= minimum:
        return value  # the common case, checked cheaply
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be {what}; got bool {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be {what}; got {type(value).__name__} {value!r}") from None
    if n < minimum:
        raise ValueError(f"{name} must be {what}; got {n}")
    return n


FLOAT_KINDS = _core.FloatKind.__members__
ALIGNS = _core.Align.__members__


def choice(value: Any, name: str, allowed: Mapping[str, object] | tuple[str, ...]) -> str:
    """``value`` if it is one of the allowed names, else ValueError listing them."""
    if isinstance(value, str) and value in allowed:
        return value
    names = ", ".join(repr(a) for a in allowed)
    raise ValueError(f"{name} must be one of {names}; got {value!r}")


# dtype -> (float kind or None, native byte order), for the dtypes seen
# so far: a dtype's name is computed in Python each time it is asked for, a
# dict lookup by dtype is not.
_KIND_OF_DTYPE: dict[np.dtype[Any], tuple[_core.FloatKind | None, bool]] = {}


def _kind_entry(dtype: np.dtype[Any]) -> tuple[_core.FloatKind | None, bool]:
    try:
        return _KIND_OF_DTYPE[dtype]
    except KeyError:
        entry = (FLOAT_KINDS.get(dtype.name), dtype.isnative)
        if len(_KIND_OF_DTYPE) < 64:
            _KIND_OF_DTYPE[dtype] = entry
        return entry


# The integer dtypes the kernels read as they are (native byte order).
_PLAIN_INTS = frozenset(
    np.dtype(t)
    for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
)


def plain_ints(a: Any) -> bool:
    """Whether ``a`` is an ndarray of integers the kernels read as it is
    (native, C-contiguous, aligned): the cheap check of the common call."""
    if type(a) is not np.ndarray or a.dtype not in _PLAIN_INTS:
        return False
    flags = a.flags
    return bool(flags.c_contiguous and flags.aligned)


def plain_float_rows(a: Any) -> _core.FloatKind | None:
    """The kernels' float kind of an ndarray (at least 1-D) of native floats,
    C-contiguous and aligned, which they read as it is; None for anything
    else (the full checks then take it)."""
    if type(a) is not np.ndarray or a.ndim == 0:
        return None
    kind, native = _kind_entry(a.dtype)
    if kind is None or not native:
        return None
    flags = a.flags
    return kind if flags.c_contiguous and flags.aligned else None


def plain_float_table(table: Any) -> _core.FloatKind | None:
    """:func:`plain_float_rows` of a 2-D table; None for any other shape."""
    return plain_float_rows(table) if type(table) is np.ndarray and table.ndim == 2 else None


def float_kind(dtype: np.dtype[Any]) -> _core.FloatKind | None:
    """The kernels' float kind of ``dtype`` (any byte order), or None."""
    return _kind_entry(dtype)[0]


def float_table(table: Any, name: str = "table") -> tuple[np.ndarray, _core.FloatKind]:
    """A 2-D float table (float16, bfloat16, float32, float64) with adjacent,
    aligned columns in native byte order, and its kernels' float kind. Rows
    may be strided or reversed; anything else is copied once."""
    plain = plain_float_table(table)
    if plain is not None:
        return table, plain  # the common case, checked cheaply
    t = as_table(table, name)
    kind = float_kind(t.dtype)
    if kind is None:
        raise TypeError(
            f"{name} must have a float dtype (float16, bfloat16, float32, float64); "
            f"got dtype {t.dtype}"
        )
    if not t.dtype.isnative:
        t = t.astype(t.dtype.newbyteorder("="))
    rows, cols = t.shape
    strided_cols = cols > 1 and t.strides[1] != t.itemsize
    repeated_rows = rows > 1 and t.strides[0] == 0  # broadcast: copy the rows it claims
    if rows and (strided_cols or repeated_rows or not t.flags.aligned):
        t = kernel_array(t)
    return t, kind


# Every count the kernels multiply stays below this: index products such as
# (2 i + 1) * L and byte sizes must not overflow int64.
MAX_PRODUCT = 2**62


def check_sizes(what: str, *factors: int) -> None:
    """ValueError if the product of factors (a size or an index range) is too large."""
    total = 1
    for f in factors:
        total *= max(int(f), 1)
    if total >= MAX_PRODUCT:
        sizes = " x ".join(str(f) for f in factors)
        raise ValueError(f"{what} is too large: {sizes} reaches 2^62")


def rng(seed: Any, name: str = "seed") -> np.random.Generator:
    """``numpy.random.default_rng(seed)``, refusing bools (as every other
    integer argument does), with errors that name the argument."""
    what = "None, an integer >= 0, a sequence of them, or a numpy.random.Generator"
    if isinstance(seed, (bool, np.bool_)):
        raise TypeError(f"{name} must be {what}; got bool {seed!r}")
    try:
        return np.random.default_rng(seed)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{name} must be {what}; got {seed!r} ({exc})") from None


def grid_shape(value: Any, name: str) -> tuple[int, int]:
    """An (H, W) pair of positive integers."""
    try:
        h, w = value
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be a pair (H, W) of positive integers; got {value!r}"
        ) from None
    return positive_int(h, f"{name}[0]"), positive_int(w, f"{name}[1]")


def is_corpus(obj: Any) -> bool:
    """Whether ``obj`` is a corpus that holds its own documents: anything with
    ``offsets`` (int64, one more than its documents) and ``read(start, stop)``
    (those tokens, as a new array), as :class:`posembed.IndexedCorpus` has.
    The kernels take such a corpus by these two names alone, never by its class."""
    return not isinstance(obj, np.ndarray) and hasattr(obj, "offsets") and hasattr(obj, "read")

"""The calls mode's comparisons of posembed's result with its twin's: the
same type, shape, dtype and bytes (as ``tests/conftest.py``'s
``assert_same``), except that NaNs may differ in their payload bits,
``similarity`` agrees to a tolerance (BLAS sums in its own order) and fresh
random draws compare only in what does not depend on them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

import posembed
from posembed import reference

from .common import LAYOUT_FIELDS, FuzzFailure


def _is_float(dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def same_array(fast: Any, slow: Any, what: str = "result") -> None:
    """Same type, shape, dtype and bytes; NaNs may differ in their payload."""
    if not isinstance(fast, np.ndarray):
        raise FuzzFailure(f"{what}: posembed returned {type(fast).__name__}, not an ndarray")
    slow = np.asarray(slow)
    if fast.shape != slow.shape or fast.dtype != slow.dtype:
        raise FuzzFailure(
            f"{what}: posembed gave shape {fast.shape} dtype {fast.dtype}, "
            f"the twin shape {slow.shape} dtype {slow.dtype}"
        )
    a, b = np.ascontiguousarray(fast), np.ascontiguousarray(slow)
    if a.tobytes() == b.tobytes():
        return
    if _is_float(a.dtype):
        wide_a = a.astype(np.float64)
        wide_b = b.astype(np.float64)
        nan_a, nan_b = np.isnan(wide_a), np.isnan(wide_b)
        bits = np.dtype(f"u{a.dtype.itemsize}")
        same = (a.view(bits) == b.view(bits)) | (nan_a & nan_b)
        if same.all():
            return
        where = tuple(int(i) for i in np.argwhere(~same)[0])
        raise FuzzFailure(
            f"{what}: values differ at {where}: posembed {a[where]!r}, the twin {b[where]!r}"
        )
    diff = np.argwhere(a.reshape(a.shape or (1,)) != b.reshape(b.shape or (1,)))
    where_text = tuple(int(i) for i in diff[0]) if diff.size else "(bytes)"
    raise FuzzFailure(f"{what}: values differ at {where_text}")


def same_windows(fast: Any, slow: Any) -> None:
    if not isinstance(fast, posembed.Windows):
        raise FuzzFailure(f"windows returned {type(fast).__name__}, not a posembed.Windows")
    for name in ("tokens", "starts", "lengths", "documents", "doc_offsets"):
        same_array(getattr(fast, name), getattr(slow, name), f"Windows.{name}")
    got, want = (fast.size, fast.step, fast.tail), (slow.size, slow.step, slow.tail)
    if got != want:
        raise FuzzFailure(f"Windows (size, step, tail): posembed {got}, the twin {want}")
    if len(fast) != len(slow):
        raise FuzzFailure(f"len(Windows): posembed {len(fast)}, the twin {len(slow)}")
    same_array(fast.mask, slow.mask, "Windows.mask")
    for rule in ("first", "center"):
        same_array(fast.owner(rule), slow.owner(rule), f"Windows.owner({rule!r})")


def same_layout(fast: Any, slow: Any) -> None:
    if not isinstance(fast, posembed.WindowLayout):
        raise FuzzFailure(f"window_layout returned {type(fast).__name__}, not a WindowLayout")
    for name in LAYOUT_FIELDS:
        same_array(getattr(fast, name), getattr(slow, name), f"WindowLayout.{name}")
    got, want = (fast.size, fast.step, fast.tail), (slow.size, slow.step, slow.tail)
    if got != want:
        raise FuzzFailure(f"WindowLayout (size, step, tail): posembed {got}, the twin {want}")
    if len(fast) != len(slow):
        raise FuzzFailure(f"len(WindowLayout): posembed {len(fast)}, the twin {len(slow)}")


def same_embedding(fast: Any, slow: Any) -> None:
    if not isinstance(fast, posembed.LearnedPositionEmbedding):
        raise FuzzFailure(f"returned {type(fast).__name__}, not a LearnedPositionEmbedding")
    same_array(fast.embeddings, slow.embeddings, "embeddings")
    for name in ("max_seq_len", "embed_dim", "dtype", "dropout", "init_std"):
        got, want = getattr(fast, name), getattr(slow, name)
        if got != want and not (name == "init_std" and math.isnan(got) and math.isnan(want)):
            raise FuzzFailure(f"{name}: posembed {got!r}, the twin {want!r}")


def same_result(fast: Any, slow: Any) -> None:
    if isinstance(slow, reference.Windows):
        same_windows(fast, slow)
    elif isinstance(slow, reference.WindowLayout):
        same_layout(fast, slow)
    elif isinstance(slow, reference.LearnedPositionEmbedding):
        same_embedding(fast, slow)
    else:
        same_array(fast, slow)


def _compare_embedding(fast: Any, slow: Any) -> None:
    same_embedding(fast, slow)


def _compare_embedding_shape(fast: Any, slow: Any) -> None:
    """Tables drawn from fresh seeds: only what does not depend on the draws."""
    if not isinstance(fast, posembed.LearnedPositionEmbedding):
        raise FuzzFailure(f"returned {type(fast).__name__}, not a LearnedPositionEmbedding")
    got = (fast.embeddings.shape, fast.embeddings.dtype, fast.dropout)
    want = (slow.embeddings.shape, slow.embeddings.dtype, slow.dropout)
    if got != want:
        raise FuzzFailure(f"(shape, dtype, dropout): posembed {got}, the twin {want}")


def _compare_fresh_draws(rows: int) -> Callable[[Any, Any], None]:
    def compare(fast: Any, slow: Any) -> None:
        if not isinstance(fast, np.ndarray) or fast.shape != slow.shape or fast.dtype != slow.dtype:
            raise FuzzFailure(f"extend(init='random', seed=None): {fast!r} against {slow!r}")
        same_array(fast[:rows], slow[:rows], "the table's own rows")

    return compare


def _compare_similarity(d: int) -> Callable[[Any, Any], None]:
    def compare(fast: Any, slow: Any) -> None:
        if not isinstance(fast, np.ndarray) or fast.shape != slow.shape or fast.dtype != slow.dtype:
            raise FuzzFailure(f"similarity: {type(fast).__name__} against the twin's {slow.dtype}")
        # both sum d products in the compute type, in different orders (BLAS)
        tol = 8 * max(d, 1) * float(np.finfo(fast.dtype).eps)
        close = np.isclose(fast, slow, rtol=0, atol=tol, equal_nan=True)
        if not close.all():
            where = tuple(int(i) for i in np.argwhere(~close)[0])
            raise FuzzFailure(
                f"similarity differs at {where}: {fast[where]!r} against {slow[where]!r} "
                f"(tolerance {tol:.3g})"
            )

    return compare

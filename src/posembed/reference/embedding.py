"""Twin of the LearnedPositionEmbedding class, built on the kernels' twins."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from posembed.reference._common import (
    FLOAT_NAMES,
    _array,
    _check_seed,
    _check_size,
    _count,
    _flag,
    _rate,
)
from posembed.reference.embed import embed
from posembed.reference.extend import extend
from posembed.reference.gather import gather
from posembed.reference.interpolate import interpolate
from posembed.reference.windows import Windows, windows


class LearnedPositionEmbedding:
    """Twin of :class:`posembed.LearnedPositionEmbedding`: the same table for the
    same seed, the same methods and the same exception types.

    Each method is the twin of the kernel it calls: ``__call__`` of
    :func:`gather`, :meth:`interpolate` and :meth:`extend` of those functions
    (wrapped by :meth:`from_table`), :meth:`embed` of :func:`embed` and
    :meth:`windows` of :func:`windows`.
    """

    embeddings: np.ndarray
    dropout: float
    init_std: float

    def __init__(
        self,
        max_seq_len: int,
        embed_dim: int,
        *,
        init_std: float | str = 0.02,
        seed: int | np.random.Generator | None = None,
        dtype: Any = np.float32,
        dropout: float = 0.1,
    ) -> None:
        self.dropout = _rate(dropout, "dropout")
        length = _count(max_seq_len, "max_seq_len", 1)
        dim = _count(embed_dim, "embed_dim", 1)
        _check_size("max_seq_len x embed_dim (float64 draws)", length, dim, 8)
        if init_std == "scaled":
            std = 1.0 / math.sqrt(dim)
        elif isinstance(init_std, str):
            raise ValueError("init_std must be a number or 'scaled'")
        elif isinstance(init_std, bool) or not isinstance(init_std, (int, float, np.number)):
            raise TypeError("init_std must be a number or 'scaled'")
        elif not math.isfinite(init_std) or init_std < 0:
            raise ValueError("init_std must be finite and >= 0")
        else:
            std = float(init_std)
        if isinstance(dtype, str) and dtype == "bfloat16":
            try:
                import ml_dtypes
            except ImportError:
                raise TypeError("dtype bfloat16 needs the ml_dtypes package") from None
            dtype = ml_dtypes.bfloat16
        if dtype is None:
            raise TypeError("dtype must be a float dtype")
        dt = np.dtype(dtype)
        if dt.name not in FLOAT_NAMES:
            raise TypeError("dtype must be a float dtype")
        _check_seed(seed)
        draws = np.random.default_rng(seed).standard_normal((length, dim))
        with np.errstate(over="ignore"):
            self.embeddings = (draws * std).astype(dt)
        if not np.isfinite(self.embeddings.astype(np.float64)).all():
            raise ValueError("init_std is too large for the dtype")
        self.init_std = std

    @classmethod
    def from_table(
        cls, table: Any, *, copy: bool = True, dropout: float = 0.1
    ) -> LearnedPositionEmbedding:
        """Wrap a trained table (a copy of it, unless ``copy=False``); ``init_std`` is NaN."""
        copy = _flag(copy, "copy")
        rate = _rate(dropout, "dropout")
        t = _array(table, "table")
        if t.ndim != 2:
            raise ValueError(f"table must be 2-D; got shape {t.shape}")
        if t.dtype.name not in FLOAT_NAMES:
            raise TypeError(f"table must have a float dtype; got {t.dtype}")
        if 0 in t.shape:
            raise ValueError("table must have at least one row and one column")
        self = cls.__new__(cls)
        self.dropout = rate
        self.embeddings = np.array(t, copy=True) if copy else t
        self.init_std = float("nan")
        return self

    @property
    def max_seq_len(self) -> int:
        """int: rows of the table."""
        return int(self.embeddings.shape[0])

    @property
    def embed_dim(self) -> int:
        """int: columns of the table."""
        return int(self.embeddings.shape[1])

    @property
    def dtype(self) -> np.dtype[Any]:
        """numpy.dtype: the table's dtype."""
        return self.embeddings.dtype

    def __call__(
        self, positions: Any, *, mode: str = "raise", out: np.ndarray | None = None
    ) -> np.ndarray:
        """Rows of the table at ``positions`` (:func:`gather`)."""
        return gather(self.embeddings, positions, mode=mode, out=out)

    def interpolate(self, length: int, *, align: str = "scale") -> LearnedPositionEmbedding:
        """A new embedding whose table is this one interpolated to ``length`` rows."""
        table = interpolate(self.embeddings, length, align=align)
        return type(self).from_table(table, copy=False, dropout=self.dropout)

    def extend(
        self,
        length: int,
        *,
        init: str = "interpolate",
        std: float | None = None,
        seed: int | np.random.Generator | None = None,
        align: str | None = None,
    ) -> LearnedPositionEmbedding:
        """A new embedding whose table is this one extended to ``length`` rows."""
        table = extend(self.embeddings, length, init=init, std=std, seed=seed, align=align)
        return type(self).from_table(table, copy=False, dropout=self.dropout)

    def embed(
        self,
        token_table: Any,
        token_ids: Any,
        *,
        training: bool = False,
        seed: int | None = None,
        offset: int = 0,
    ) -> np.ndarray:
        """Token rows plus this table's rows at ``offset + arange(T)``, with the
        instance's dropout when ``training`` (which then needs a ``seed``)."""
        rate = self.dropout if _flag(training, "training") else 0.0
        return embed(
            token_table, token_ids, self.embeddings, offset=offset, dropout=rate, seed=seed
        )

    def windows(self, tokens: Any, **kwargs: Any) -> Windows:
        """Windows of ``max_seq_len`` tokens (:func:`windows`)."""
        return windows(tokens, self.max_seq_len, **kwargs)

    def __repr__(self) -> str:
        return (
            f"LearnedPositionEmbedding(max_seq_len={self.max_seq_len}, "
            f"embed_dim={self.embed_dim}, dtype={self.dtype.name}, dropout={self.dropout})"
        )

"""The learned position embedding table the seeds describe."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from posembed import _validate as v
from posembed._embed import embed
from posembed._gather import gather
from posembed._interpolate import extend, interpolate
from posembed._windows import Windows, windows

_FLOAT_NAMES = ("float16", "bfloat16", "float32", "float64")


def table_dtype(dtype: Any) -> np.dtype[Any]:
    """A float dtype for an embedding table: float16, bfloat16, float32 or float64."""
    if dtype is None:
        raise TypeError(f"dtype must be one of {', '.join(_FLOAT_NAMES)}; got None")
    if isinstance(dtype, str) and dtype == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise TypeError(
                "dtype bfloat16 needs the ml_dtypes package: pip install ml_dtypes"
            ) from None
        dtype = ml_dtypes.bfloat16
    try:
        dt: np.dtype[Any] = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be one of {', '.join(_FLOAT_NAMES)}; got {dtype!r}") from None
    if dt.name not in _FLOAT_NAMES:
        raise TypeError(f"dtype must be one of {', '.join(_FLOAT_NAMES)}; got {dt.name}")
    return dt


def init_std_value(init_std: Any, embed_dim: int) -> float:
    """The standard deviation for ``init_std``: a number >= 0, or "scaled" for 1/sqrt(d)."""
    if isinstance(init_std, str):
        if init_std == "scaled":
            return 1.0 / math.sqrt(embed_dim)
        raise ValueError(f"init_std must be a number >= 0 or 'scaled'; got {init_std!r}")
    if isinstance(init_std, (bool, np.bool_)) or not isinstance(init_std, (int, float, np.number)):
        raise TypeError(
            "init_std must be a number >= 0 or 'scaled'; "
            f"got {type(init_std).__name__} {init_std!r}"
        )
    std = float(init_std)
    if not math.isfinite(std) or std < 0:
        raise ValueError(f"init_std must be a finite number >= 0 or 'scaled'; got {init_std!r}")
    return std


class LearnedPositionEmbedding:
    """A table of ``max_seq_len`` learned position vectors of ``embed_dim`` values.

    Row p is added to the token embedding at position p; position
    ``max_seq_len`` does not exist. The table starts as N(0, init_std^2)
    samples: ``init_std=0.02`` (GPT-2) by default, or ``"scaled"`` for
    1/sqrt(embed_dim). The samples are drawn in float64 from
    ``numpy.random.default_rng(seed)`` and rounded to ``dtype``, so one seed
    gives the same table (to rounding) in every dtype.

    Calling the object with positions returns their rows (see :func:`gather`);
    a position outside 0..max_seq_len-1 raises IndexError. ``dropout`` (0.1,
    the seeds' common value) is the rate :meth:`embed` applies after adding
    token and position embeddings, when training.
    """

    embeddings: np.ndarray

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
        self.dropout = v.probability(dropout, "dropout")
        length = v.positive_int(max_seq_len, "max_seq_len")
        dim = v.positive_int(embed_dim, "embed_dim")
        std = init_std_value(init_std, dim)
        dt = table_dtype(dtype)
        rng = np.random.default_rng(seed)
        with np.errstate(over="ignore"):  # reported below, with the cause
            table = (rng.standard_normal((length, dim)) * std).astype(dt)
        if not np.isfinite(table.astype(np.float32 if dt.itemsize < 4 else dt)).all():
            raise ValueError(f"init_std {std!r} is too large for {dt.name}: the table overflows")
        self.embeddings = table
        self.init_std = std

    @classmethod
    def from_table(
        cls, table: Any, *, copy: bool = True, dropout: float = 0.1
    ) -> LearnedPositionEmbedding:
        """Wrap a trained (L, d) float table, copied unless ``copy=False``."""
        rate = v.probability(dropout, "dropout")
        t = v.as_table(table)
        table_dtype(t.dtype)
        if 0 in t.shape:
            raise ValueError(
                f"table must have at least one row and one column; got shape {t.shape}"
            )
        self = cls.__new__(cls)
        self.dropout = rate
        self.embeddings = np.array(t, copy=True) if copy else t
        self.init_std = float("nan")
        return self

    @property
    def max_seq_len(self) -> int:
        return int(self.embeddings.shape[0])

    @property
    def embed_dim(self) -> int:
        return int(self.embeddings.shape[1])

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.embeddings.dtype

    def __call__(
        self, positions: Any, *, mode: str = "raise", out: np.ndarray | None = None
    ) -> np.ndarray:
        """Rows at ``positions``: shape ``positions.shape + (embed_dim,)``."""
        return gather(self.embeddings, positions, mode=mode, out=out)

    def interpolate(self, length: int, *, align: str = "scale") -> LearnedPositionEmbedding:
        """A new embedding whose table is this one stretched (or shrunk) to ``length``
        rows: the seed's position interpolation. See :func:`posembed.interpolate`."""
        return type(self).from_table(
            interpolate(self.embeddings, length, align=align), copy=False, dropout=self.dropout
        )

    def extend(
        self,
        length: int,
        *,
        init: str = "interpolate",
        std: float | None = None,
        seed: int | np.random.Generator | None = None,
        align: str | None = None,
    ) -> LearnedPositionEmbedding:
        """A new embedding with ``length`` rows: these rows first, then new ones to
        fine-tune. See :func:`posembed.extend`."""
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
        """``token_table[token_ids]`` plus this table's rows at ``offset + arange(T)``,
        with the instance's ``dropout`` applied only when ``training`` (see
        :func:`posembed.embed`; ``seed=None`` draws a fresh mask)."""
        if not isinstance(training, (bool, np.bool_)):
            raise TypeError(f"training must be True or False; got {training!r}")
        rate = self.dropout if training else 0.0
        return embed(
            token_table, token_ids, self.embeddings, offset=offset, dropout=rate, seed=seed
        )

    def windows(self, tokens: Any, **kwargs: Any) -> Windows:
        """Windows of ``max_seq_len`` tokens, each to be embedded at positions
        0..max_seq_len-1 (the seeds' sliding windows); keywords as for
        :func:`posembed.windows`."""
        return windows(tokens, self.max_seq_len, **kwargs)

    def __repr__(self) -> str:
        return (
            f"LearnedPositionEmbedding(max_seq_len={self.max_seq_len}, "
            f"embed_dim={self.embed_dim}, dtype={self.dtype.name}, dropout={self.dropout})"
        )

"""LearnedPositionEmbedding: a table of learned position vectors, its operations as methods."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from posembed.kernels import _validate as v
from posembed.kernels._embed import embed
from posembed.kernels._extend import extend
from posembed.kernels._gather import gather
from posembed.kernels._interpolate import interpolate
from posembed.kernels._windows import Windows, windows

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
    ``max_seq_len`` does not exist. Calling the object with positions returns
    their rows (see :func:`gather`); a position outside 0..max_seq_len-1
    raises IndexError.

    Parameters
    ----------
    max_seq_len : int
        Rows of the table (positions 0..max_seq_len-1), >= 1.
    embed_dim : int
        Columns of the table, >= 1.
    init_std : float or "scaled"
        The table starts as N(0, init_std^2) samples: 0.02 (GPT-2) by default,
        or ``"scaled"`` for 1/sqrt(embed_dim); a finite number >= 0.
    seed : int or numpy.random.Generator, optional
        The samples are drawn in float64 from ``numpy.random.default_rng(seed)``
        and rounded to ``dtype``, so one seed gives the same table (to
        rounding) in every dtype. Default: a fresh seed.
    dtype : dtype-like
        float16, "bfloat16" (needs ml_dtypes), float32 or float64.
    dropout : float
        Rate in [0, 1) that :meth:`embed` applies after adding token and
        position embeddings, when training; 0.1 (GPT-2's and BERT's rate) by
        default.

    Attributes
    ----------
    embeddings : ndarray, shape (max_seq_len, embed_dim)
        The table itself, of ``dtype``; train it in place or replace it.
    dropout : float
        The dropout rate.
    init_std : float
        The standard deviation the table was drawn with (NaN after
        :meth:`from_table`).

    Raises
    ------
    TypeError
        A ``max_seq_len`` or ``embed_dim`` that is not an integer; an
        ``init_std`` that is neither a number nor a string; a ``dtype`` other
        than the four floats (bfloat16 without ml_dtypes included); a
        ``dropout`` that is not a number; a ``seed`` that is a bool or that
        ``numpy.random.default_rng`` refuses as a TypeError.
    ValueError
        ``max_seq_len`` or ``embed_dim`` < 1, or a table of 2^62 bytes or more
        (as float64 draws); an ``init_std`` that is negative,
        not finite, a string other than "scaled", or so large that the table
        overflows ``dtype``; ``dropout`` outside [0, 1); a negative ``seed``.
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
        if length * dim >= v.MAX_PRODUCT // 8:
            raise ValueError(
                f"max_seq_len x embed_dim = {length} x {dim} is too large: "
                "the table's float64 draws would reach 2^62 bytes"
            )
        std = init_std_value(init_std, dim)
        dt = table_dtype(dtype)
        rng = v.rng(seed)
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
        """Wrap a trained position table.

        Parameters
        ----------
        table : array_like, shape (L, d)
            float16, bfloat16, float32 or float64, with L >= 1 and d >= 1.
        copy : bool
            Copy the table (default); ``copy=False`` keeps the array itself
            (or NumPy's view of the input), so changes show through both.
        dropout : float
            Rate in [0, 1) for :meth:`embed`.

        Returns
        -------
        LearnedPositionEmbedding
            ``max_seq_len`` L and ``embed_dim`` d; ``init_std`` is NaN.

        Raises
        ------
        TypeError
            A table NumPy cannot read or not of a float dtype above; a
            ``copy`` that is not a bool; a ``dropout`` that is not a number.
        ValueError
            A table that is not 2-D or has no rows or no columns; ``dropout``
            outside [0, 1).
        """
        copy = v.flag(copy, "copy")
        rate = v.probability(dropout, "dropout")
        t = v.as_table(table)
        if t.dtype.name not in _FLOAT_NAMES:
            raise TypeError(
                f"table must have a float dtype ({', '.join(_FLOAT_NAMES)}); got dtype {t.dtype}"
            )
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
        """int: rows of the table; positions run 0..max_seq_len-1."""
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
        """Rows of the table at ``positions``, as :func:`posembed.gather`.

        Parameters
        ----------
        positions : int or array_like of int, any shape
            Positions in 0..max_seq_len-1 (in mode "raise").
        mode : {"raise", "clip", "wrap"}
            As for :func:`posembed.gather`.
        out : ndarray, optional
            Destination of shape ``positions.shape + (embed_dim,)`` and the
            table's dtype, writeable, C-contiguous and not overlapping an input.

        Returns
        -------
        ndarray, shape ``positions.shape + (embed_dim,)``
            The table's dtype (``out`` if given).

        Raises
        ------
        IndexError
            In mode "raise", a position outside 0..max_seq_len-1, named with
            its index.
        TypeError
            Non-integer positions, or ``out`` that is not an ndarray or of
            another dtype.
        ValueError
            An unknown mode, or ``out`` of the wrong shape, read-only,
            misaligned, non-contiguous or overlapping an input.
        """
        return gather(self.embeddings, positions, mode=mode, out=out)

    def interpolate(self, length: int, *, align: str = "scale") -> LearnedPositionEmbedding:
        """A new embedding whose table is this one stretched (or shrunk) to ``length`` rows.

        Position interpolation; see :func:`posembed.interpolate`.

        Parameters
        ----------
        length : int
            Rows of the new table, >= 1.
        align : {"scale", "half_pixel", "corners"}
            As for :func:`posembed.interpolate`.

        Returns
        -------
        LearnedPositionEmbedding
            ``length`` rows, the same ``embed_dim``, dtype and ``dropout``.

        Raises
        ------
        TypeError
            A ``length`` that is not an integer.
        ValueError
            ``length`` < 1, an unknown ``align``, or a table too large to index
            (2^62).
        """
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
        """A new embedding with ``length`` rows: these rows first, then new ones to fine-tune.

        See :func:`posembed.extend`, whose arguments these are.

        Parameters
        ----------
        length : int
            Rows of the new table, at least ``max_seq_len``.
        init : {"interpolate", "tile", "edge", "random", "zeros"}
            How the new rows start.
        std : float, optional
            Standard deviation of ``init="random"`` only.
        seed : int or numpy.random.Generator, optional
            Seed of ``init="random"`` only.
        align : {"scale", "half_pixel", "corners"}, optional
            Convention of ``init="interpolate"`` only.

        Returns
        -------
        LearnedPositionEmbedding
            ``length`` rows, the same ``embed_dim``, dtype and ``dropout``;
            rows 0..max_seq_len-1 are bit-identical to this table's.

        Raises
        ------
        TypeError
            As :func:`posembed.extend`: a ``length`` that is not an integer, a
            ``std`` that is not a number, a bad ``seed``.
        ValueError
            As :func:`posembed.extend`: ``length`` < ``max_seq_len``, an
            unknown ``init`` or ``align``, ``std``/``seed``/``align`` with an
            ``init`` they do not apply to, a negative or non-finite ``std``.
        """
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
        """``token_table[token_ids]`` plus this table's rows at ``offset + arange(T)``.

        The instance's ``dropout`` is applied only when ``training``; see
        :func:`posembed.embed`.

        Parameters
        ----------
        token_table : array_like, shape (V, d)
            A float table of this table's dtype and ``embed_dim`` d.
        token_ids : array_like of int, shape (T,) or (B, T)
            Token ids in 0..V-1.
        training : bool
            Apply dropout (at rate ``self.dropout``).
        seed : int, optional
            The dropout mask's seed (0..2**64-1); None draws a fresh one
            (see :func:`posembed.last_seed`). Unused unless training.
        offset : int
            First position, >= 0, with ``offset + T <= max_seq_len``.

        Returns
        -------
        ndarray, shape ``token_ids.shape + (embed_dim,)``
            The table's dtype.

        Raises
        ------
        IndexError
            A token id outside 0..V-1, or ``offset + T`` past ``max_seq_len``.
        TypeError
            A ``training`` that is not a bool; as :func:`posembed.embed` for
            the rest (a token table of another dtype, non-integer ids, a bad
            ``offset`` or ``seed``).
        ValueError
            As :func:`posembed.embed`: a token table that is not 2-D or of
            another ``embed_dim``, ids that are not 1-D or 2-D, a negative
            ``offset``, a ``seed`` outside 0..2**64-1.
        """
        rate = self.dropout if v.flag(training, "training") else 0.0
        return embed(
            token_table, token_ids, self.embeddings, offset=offset, dropout=rate, seed=seed
        )

    def windows(self, tokens: Any, **kwargs: Any) -> Windows:
        """Windows of ``max_seq_len`` tokens, each to be embedded at positions 0..max_seq_len-1.

        Sliding windows; see :func:`posembed.windows`.

        Parameters
        ----------
        tokens : array_like of int, shape (N,)
            The token stream (or corpus, with ``offsets=``).
        **kwargs
            ``step``, ``overlap``, ``tail``, ``pad_value``, ``offsets`` and
            ``out``, as for :func:`posembed.windows`.

        Returns
        -------
        Windows
            Windows of size ``max_seq_len``.

        Raises
        ------
        TypeError
            A keyword :func:`posembed.windows` does not take; otherwise as
            :func:`posembed.windows`.
        ValueError
            As :func:`posembed.windows`.
        """
        return windows(tokens, self.max_seq_len, **kwargs)

    def __repr__(self) -> str:
        return (
            f"LearnedPositionEmbedding(max_seq_len={self.max_seq_len}, "
            f"embed_dim={self.embed_dim}, dtype={self.dtype.name}, dropout={self.dropout})"
        )

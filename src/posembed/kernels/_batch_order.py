"""batch order: one endless, seeded stream of samples, sliced for every rank and worker."""

from __future__ import annotations

import hashlib
import itertools
import operator
from collections.abc import Iterator
from typing import Any

import numpy as np

from posembed import _core
from posembed.kernels import _validate as v
from posembed.kernels._blend_build import GPTBlendSplit
from posembed.kernels._pack import PackPlan
from posembed.kernels._samples import GPTSamples
from posembed.kernels._windows import Windows

FORMAT = "posembed.BatchOrder/1"
SEED_MAX = 2**64 - 1
# Positions stay below 2^62: position arithmetic (c0 + i*m*W + r*m + m) never wraps in int64.
MAX_POSITION = 2**62

# What each part of the fingerprint is called in an error message.
_PART_NAMES = {
    "source": "the kind of source",
    "num_samples": "the number of samples per epoch",
    "seed": "the seed",
    "shuffle": "shuffle",
    "global_batch_size": "global_batch_size",
    "sequence_length": "the sequence length",
    "add_extra_token": "add_extra_token_to_sequence",
    "num_epochs": "the number of epochs of the samples",
    "lengths": "the document lengths",
    "indices": (
        "the samples' indices (document, sample and shuffle index: built with another "
        "seed, split or number of samples)"
    ),
    "split": "the split",
    "weights": "the blend weights",
    "size": "the blend's size",
    "datasets": "the samples of each blended dataset",
    "dataset_samples": "the blended datasets' samples (lengths or indices)",
    "blend": "the blend's indices (dataset_index, dataset_sample_index)",
    "capacity": "the plan's capacity",
    "strategy": "the plan's strategy",
    "window": "the window size",
    "stride": "the window stride",
    "tail": "the windows' tail",
}


def _sha(*arrays: Any) -> str:
    """sha256 of int arrays as little-endian int64 (so int32 and int64 copies agree)."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.asarray(a)
        h.update(str(a.shape).encode())
        flat = a.reshape(-1)
        for start in range(0, flat.size, 1 << 20):  # bounded memory for large indices
            h.update(np.ascontiguousarray(flat[start : start + (1 << 20)], dtype="<i8").tobytes())
    return h.hexdigest()


def _plain(value: Any) -> Any:
    """A JSON-able Python value (NumPy scalars become Python numbers)."""
    return value.item() if isinstance(value, np.generic) else value


def _samples_parts(s: GPTSamples) -> dict[str, Any]:
    return {
        "sequence_length": int(s.sequence_length),
        "add_extra_token": bool(s.add_extra_token_to_sequence),
        "num_epochs": int(s.num_epochs),
        "lengths": None if s.lengths is None else _sha(s.lengths),
        "indices": _sha(s.document_index, s.sample_index, s.shuffle_index),
    }


def _describe(source: Any) -> tuple[str, int]:
    """The source's kind and its samples per epoch."""
    if isinstance(source, (int, np.integer)) and not isinstance(source, (bool, np.bool_)):
        return "count", operator.index(source)
    if isinstance(source, GPTSamples):
        return "GPTSamples", len(source)
    if isinstance(source, GPTBlendSplit):
        return "GPTBlendSplit", len(source)
    if isinstance(source, PackPlan):
        return "PackPlan", source.rows
    if isinstance(source, Windows):
        return "Windows", len(source)
    raise TypeError(
        "source must be a number of samples (an integer >= 1), GPTSamples, GPTBlendSplit, "
        f"PackPlan or Windows; got {type(source).__name__}"
    )


def _source_parts(kind: str, source: Any) -> dict[str, Any]:
    """What defines the source's order, beyond its kind and size."""
    if kind == "GPTSamples":
        return _samples_parts(source)
    if kind == "GPTBlendSplit":
        blend = None
        if source.dataset_index is not None:
            blend = _sha(source.dataset_index, source.dataset_sample_index)
        return {
            "split": source.split,
            "weights": None if source.weights is None else [_plain(w) for w in source.weights],
            "size": _plain(source.size),
            "datasets": [len(d) for d in source.datasets],
            "dataset_samples": [_samples_parts(d) for d in source.datasets],
            "blend": blend,
        }
    if kind == "PackPlan":
        return {
            "capacity": source.capacity,
            "strategy": source.strategy,
            "split": source.split,
            "lengths": _sha(source.document_lengths),
        }
    if kind == "Windows":
        return {
            "window": int(source.size),
            "stride": int(source.step),
            "tail": source.tail,
            "lengths": _sha(np.diff(source.doc_offsets)),
        }
    return {}


def _index(value: Any, name: str) -> int:
    """A micro-batch or batch number: an integer >= 0 (IndexError below 0)."""
    if type(value) is int and value >= 0:
        return value
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer >= 0; got bool {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(
            f"{name} must be an integer >= 0; got {type(value).__name__} {value!r}"
        ) from None
    if n < 0:
        raise IndexError(
            f"{name} {n} is out of range: the stream of batches is counted from 0 and has no end"
        )
    return n


class BatchOrder:
    """The order in which every rank and data-loader worker reads a source's samples.

    The samples form one endless stream, epoch after epoch: global position
    ``p`` holds sample ``j = p % N`` of epoch ``p // N`` (N samples per epoch)
    or, when shuffling, that epoch's seeded shuffle of ``j``. Each epoch has
    its own shuffle, computed sample by sample without storing it, so any
    position is reached at once. Global batch ``k`` is positions
    ``[k * G, (k + 1) * G)``: batches are never partial nor dropped, and one
    that straddles the end of an epoch takes the last samples of that epoch
    and the first of the next.

    Each global batch is read in ``A = G // (m * W)`` micro-steps of ``m * W``
    positions; rank ``r`` takes the ``m`` positions at offset ``r * m`` of each
    (as Megatron-LM's pretraining sampler slices them). So for any world size
    W that divides ``G / m``, a global batch is the same set of samples.
    A rank numbers its micro-batches 0, 1, 2, ... from ``consumed_samples``:
    micro-batch ``i`` is positions ``c0 + i*m*W + r*m .. + m``. Data-loader
    worker ``w`` of ``n`` takes micro-batches ``w, w + n, ...``
    (:meth:`worker_micro_batches`); taking one from each worker in turn, as
    PyTorch's ``DataLoader`` does, gives the rank's order back.

    Parameters
    ----------
    source : int, GPTSamples, GPTBlendSplit, PackPlan or Windows
        What is read: a number of samples N, or the samples of
        :func:`gpt_samples`, a split of :func:`gpt_blend` (N = ``len``), the
        rows of a :class:`PackPlan` (N = ``plan.rows``) or :func:`windows`.
    global_batch_size : int
        Samples per optimizer step, over all ranks (G).
    micro_batch_size : int
        Samples per rank per forward pass (m).
    world_size, rank : int
        How many data-parallel ranks read, and which one this is (0..W-1).
    seed : int
        The shuffle's seed, 0..2^64 - 1.
    shuffle : bool or None
        Whether each epoch is shuffled. None: False for GPTSamples and
        GPTBlendSplit (already in Megatron-LM's shuffled order: position
        ``p`` reads sample ``p % N``, as Megatron-LM does), True otherwise.
    consumed_samples : int
        Samples already read by all ranks together, a multiple of ``m * W``:
        where this rank's micro-batch 0 starts.

    Attributes
    ----------
    num_samples : int
        Samples per epoch (N).
    accumulation_steps : int
        Micro-steps per global batch, ``G // (m * W)``.
    consumed_samples : int
        Samples read by all ranks together: where micro-batch 0 starts.

    Raises
    ------
    TypeError
        A source of another kind, or an argument that is not an integer
        (``shuffle``: not None, True or False).
    ValueError
        A source without samples, sizes below 1, a ``rank`` not below
        ``world_size``, a ``global_batch_size`` that is not a multiple of
        ``micro_batch_size * world_size``, a ``consumed_samples`` that is not.
    """

    def __init__(
        self,
        source: Any,
        *,
        global_batch_size: int,
        micro_batch_size: int,
        world_size: int = 1,
        rank: int = 0,
        seed: int = 0,
        shuffle: bool | None = None,
        consumed_samples: int = 0,
    ) -> None:
        kind, n = _describe(source)
        if n < 1:
            what = "source" if kind == "count" else f"source ({kind})"
            raise ValueError(f"{what} must hold at least one sample; got {n}")
        if n >= MAX_POSITION:
            raise ValueError(f"source: {n} samples an epoch reach 2^62; at most 2^62 - 1")
        g = v.positive_int(global_batch_size, "global_batch_size")
        m = v.positive_int(micro_batch_size, "micro_batch_size")
        w = v.positive_int(world_size, "world_size")
        r = v.non_negative_int(rank, "rank")
        if r >= w:
            raise ValueError(f"rank must be in 0..world_size - 1 = {w - 1}; got {r}")
        s = v.non_negative_int(seed, "seed")
        if s > SEED_MAX:
            raise ValueError(f"seed must be in 0..2^64 - 1; got {s}")
        if shuffle is None:
            shuffle = kind not in ("GPTSamples", "GPTBlendSplit")
        else:
            shuffle = v.flag(shuffle, "shuffle")
        if g >= MAX_POSITION or m * w >= MAX_POSITION:
            raise ValueError(
                f"global_batch_size {g} or micro_batch_size * world_size {m} * {w} reaches 2^62"
            )
        if g % (m * w):
            raise ValueError(
                f"global_batch_size must be a multiple of micro_batch_size * world_size = "
                f"{m} * {w} = {m * w}; got {g}"
            )
        self._source = source
        self._kind = kind
        self._n = n
        self._g, self._m, self._w, self._r = g, m, w, r
        self._seed = s
        self._shuffle = bool(shuffle)
        self._parts: dict[str, Any] | None = None
        self._c0 = self._consumed(consumed_samples)

    # -- what the order is ------------------------------------------------

    @property
    def source(self) -> Any:
        """The source, as given."""
        return self._source

    @property
    def num_samples(self) -> int:
        """Samples per epoch (N)."""
        return self._n

    @property
    def global_batch_size(self) -> int:
        """Samples per optimizer step over all ranks (G)."""
        return self._g

    @property
    def micro_batch_size(self) -> int:
        """Samples per rank per micro-step (m)."""
        return self._m

    @property
    def world_size(self) -> int:
        """Data-parallel ranks (W)."""
        return self._w

    @property
    def rank(self) -> int:
        """This rank (0..W-1)."""
        return self._r

    @property
    def seed(self) -> int:
        """The shuffle's seed."""
        return self._seed

    @property
    def shuffle(self) -> bool:
        """Whether each epoch is shuffled."""
        return self._shuffle

    @property
    def accumulation_steps(self) -> int:
        """Micro-steps per global batch, ``G // (m * W)``."""
        return self._g // (self._m * self._w)

    @property
    def consumed_samples(self) -> int:
        """Samples read by all ranks together: where micro-batch 0 starts."""
        return self._c0

    def __repr__(self) -> str:
        return (
            f"BatchOrder({self._kind} of {self._n} samples, global_batch_size={self._g}, "
            f"micro_batch_size={self._m}, world_size={self._w}, rank={self._r}, "
            f"seed={self._seed}, shuffle={self._shuffle}, consumed_samples={self._c0})"
        )

    # -- positions and samples --------------------------------------------

    def _consumed(self, value: Any) -> int:
        c = v.non_negative_int(value, "consumed_samples")
        step = self._m * self._w
        if c % step:
            raise ValueError(
                f"consumed_samples must be a multiple of micro_batch_size * world_size = "
                f"{self._m} * {self._w} = {step} (a micro-step boundary); got {c}"
            )
        if c >= MAX_POSITION:
            raise ValueError(f"consumed_samples must be below 2^62; got {c}")
        return c

    def _first(self, i: int, name: str) -> int:
        """First position of micro-batch i; ValueError where the batch would pass 2^62."""
        first = self._c0 + i * self._m * self._w + self._r * self._m
        if first + self._m > MAX_POSITION:
            raise ValueError(
                f"{name} {i} reaches past position 2^62 (consumed_samples {self._c0}); "
                "positions stay below 2^62"
            )
        return first

    def positions(self, i: int) -> np.ndarray:
        """The global positions of this rank's micro-batch ``i``.

        Parameters
        ----------
        i : int
            The micro-batch, counted from :attr:`consumed_samples` (>= 0).

        Returns
        -------
        ndarray of int64, shape (m,)
            ``consumed_samples + i*m*W + rank*m`` and the ``m - 1`` after it.

        Raises
        ------
        TypeError
            ``i`` is not an integer.
        IndexError
            ``i`` is negative.
        ValueError
            The positions would reach 2^62.
        """
        first = self._first(_index(i, "i"), "i")
        return np.arange(first, first + self._m, dtype=np.int64)

    def sample_at(self, positions: Any) -> np.ndarray:
        """The sample (an index into the source) at each global position.

        Parameters
        ----------
        positions : array_like of int
            Global positions, 0..2^62 - 1, any shape.

        Returns
        -------
        ndarray of int64, the shape of ``positions``
            Sample ``perm(p // N)[p % N]`` (``p % N`` without shuffling).

        Raises
        ------
        TypeError
            ``positions`` are not integers.
        IndexError
            A position that is negative or reaches 2^62.
        """
        p = v.as_array(positions, "positions")
        if p.dtype.kind not in "iu":
            if p.size == 0 and p.dtype.kind == "f":
                p = p.astype(np.int64)
            else:
                raise TypeError(f"positions must be integers; got dtype {p.dtype}")
        if p.size:
            # the extremes in the positions' own dtype: uint64 values past 2^63 stay positive
            lo, hi = int(p.min()), int(p.max())
            if lo < 0 or hi >= MAX_POSITION:
                bad = lo if lo < 0 else hi
                raise IndexError(
                    f"positions: position {bad} is out of range: positions are 0..2^62 - 1"
                )
        # a private copy: the kernel reads it without the GIL
        p = np.array(p, dtype=np.int64, copy=True)
        out = np.empty(p.shape, dtype=np.int64)
        _core.batch_order_samples(
            p.reshape(-1), out.reshape(-1), self._n, self._seed, self._shuffle
        )
        return out

    def micro_batch(self, i: int) -> np.ndarray:
        """The samples of this rank's micro-batch ``i`` (counted from :attr:`consumed_samples`).

        Parameters
        ----------
        i : int
            The micro-batch, >= 0.

        Returns
        -------
        ndarray of int64, shape (m,)
            Indices into the source (``samples.sample(...)``, ``split.batch``,
            ``plan.cut(rows=...)``, ``windows.tokens[...]``).

        Raises
        ------
        TypeError
            ``i`` is not an integer.
        IndexError
            ``i`` is negative.
        ValueError
            The positions would reach 2^62.
        """
        first = self._first(_index(i, "i"), "i")
        row: np.ndarray = self._rows(first, 1, 0, self._m)[0]
        return row

    def micro_batches(self, start: int, stop: int) -> np.ndarray:
        """The samples of this rank's micro-batches ``start..stop - 1``, one row each.

        Parameters
        ----------
        start, stop : int
            The micro-batches, counted from :attr:`consumed_samples`;
            ``0 <= start <= stop``.

        Returns
        -------
        ndarray of int64, shape (stop - start, m)
            Row ``k`` is ``micro_batch(start + k)``.

        Raises
        ------
        TypeError
            ``start`` or ``stop`` is not an integer.
        IndexError
            ``start`` or ``stop`` is negative.
        ValueError
            ``stop < start``, or positions that would reach 2^62.
        """
        a = _index(start, "start")
        b = _index(stop, "stop")
        if b < a:
            raise ValueError(f"stop must be >= start = {a}; got {b}")
        if b == a:
            return np.empty((0, self._m), dtype=np.int64)
        self._first(b - 1, "stop - 1")
        return self._rows(self._first(a, "start"), b - a, self._m * self._w, self._m)

    def global_batch(self, k: int) -> np.ndarray:
        """The samples of global batch ``k`` (counted from position 0, not from consumed_samples).

        Parameters
        ----------
        k : int
            The global batch (optimizer step), >= 0.

        Returns
        -------
        ndarray of int64, shape (G,)
            The samples at positions ``k*G .. (k+1)*G - 1``, in order.

        Raises
        ------
        TypeError
            ``k`` is not an integer.
        IndexError
            ``k`` is negative.
        ValueError
            The positions would reach 2^62.
        """
        k = _index(k, "k")
        if (k + 1) * self._g > MAX_POSITION:
            raise ValueError(f"k {k} reaches past position 2^62; positions stay below 2^62")
        row: np.ndarray = self._rows(k * self._g, 1, 0, self._g)[0]
        return row

    def _rows(self, first: int, rows: int, stride: int, width: int) -> np.ndarray:
        out = np.empty((rows, width), dtype=np.int64)
        _core.batch_order_rows(out, first, stride, self._n, self._seed, self._shuffle)
        return out

    # -- steps, workers, epochs -------------------------------------------

    def worker_micro_batches(
        self, worker: int, num_workers: int, stop: int | None = None
    ) -> Iterator[int]:
        """The micro-batch numbers a data-loader worker reads: ``worker, worker + n, ...``.

        Parameters
        ----------
        worker : int
            The worker, 0..num_workers - 1.
        num_workers : int
            Workers of this rank; 0 (reading in the main process) reads as 1.
        stop : int or None
            Micro-batches below ``stop`` only; None: endless.

        Returns
        -------
        iterator of int

        Raises
        ------
        TypeError
            An argument that is not an integer.
        ValueError
            A negative one, or ``worker`` not below ``num_workers``.
        """
        n = max(v.non_negative_int(num_workers, "num_workers"), 1)
        w = v.non_negative_int(worker, "worker")
        if w >= n:
            raise ValueError(f"worker must be in 0..{n - 1} for num_workers={num_workers}; got {w}")
        if stop is None:
            return itertools.count(w, n)
        return iter(range(w, v.non_negative_int(stop, "stop"), n))

    def advance(self, micro_batches: int) -> None:
        """Record that every rank read ``micro_batches`` more micro-steps.

        :attr:`consumed_samples` grows by ``micro_batches * m * W``, so the next
        micro-batch is numbered 0 again.

        Parameters
        ----------
        micro_batches : int
            Micro-steps read, >= 0.

        Raises
        ------
        TypeError
            ``micro_batches`` is not an integer.
        ValueError
            A negative count, or consumed samples that would reach 2^62.
        """
        k = v.non_negative_int(micro_batches, "micro_batches")
        c = self._c0 + k * self._m * self._w
        if c >= MAX_POSITION:
            raise ValueError(
                f"micro_batches {k} would take consumed_samples past 2^62 (now {self._c0})"
            )
        self._c0 = c

    def epoch_of(self, position: int) -> int:
        """The epoch that global position ``position`` falls in, ``position // N``.

        Parameters
        ----------
        position : int
            A global position, >= 0.

        Returns
        -------
        int
            The epoch, counted from 0.

        Raises
        ------
        TypeError
            ``position`` is not an integer.
        ValueError
            ``position`` is negative.
        """
        return v.non_negative_int(position, "position") // self._n

    # -- checkpoints --------------------------------------------------------

    def fingerprint(self) -> dict[str, Any]:
        """What fixes the global order, part by part (computed once; JSON-able).

        ``"source"`` (its kind), ``"num_samples"``, ``"seed"``, ``"shuffle"``,
        ``"global_batch_size"`` and the source's own: for GPTSamples its
        sequence length, extra token, epochs and sha256 hashes of its lengths
        and indices; for a blend its weights, size, each dataset's samples and
        hashes; for a plan its capacity, strategy, split and a hash of its
        document lengths; for windows their size, stride, tail and a hash of
        the document lengths. World size, rank and micro-batch size are not
        part of it: a run may resume on any of them.

        Returns
        -------
        dict
            Each part's name and value (ints, strings, lists, hex digests).
        """
        if self._parts is None:
            self._parts = _source_parts(self._kind, self._source)
        return {
            "source": self._kind,
            "num_samples": self._n,
            "seed": self._seed,
            "shuffle": self._shuffle,
            "global_batch_size": self._g,
            **self._parts,
        }

    def state_dict(self) -> dict[str, Any]:
        """Where the run is, and what fixes its order: a plain JSON-able dict.

        Returns
        -------
        dict
            ``{"format": "posembed.BatchOrder/1", "consumed_samples": int,
            "fingerprint": {...}, "written_by": {"world_size", "rank",
            "micro_batch_size"}}`` (the last for information only).
        """
        return {
            "format": FORMAT,
            "consumed_samples": self._c0,
            "fingerprint": self.fingerprint(),
            "written_by": {
                "world_size": self._w,
                "rank": self._r,
                "micro_batch_size": self._m,
            },
        }

    def load_state_dict(self, state: Any) -> None:
        """Resume where ``state`` (a :meth:`state_dict`) was taken, at once, on any world size.

        The saved fingerprint must match this order's part by part; the state's
        ``consumed_samples`` must be a micro-step boundary of this order
        (a multiple of ``micro_batch_size * world_size``).

        Parameters
        ----------
        state : dict
            What :meth:`state_dict` returned (or its JSON round trip).

        Raises
        ------
        TypeError
            ``state`` is not a dict, or its ``consumed_samples`` not an integer.
        ValueError
            A state of another format, or one whose fingerprint differs: the
            message names every part that changed, with the saved and the
            given value; a ``consumed_samples`` that is not a micro-step
            boundary of this order.
        """
        if not isinstance(state, dict):
            raise TypeError(
                f"state must be a dict from BatchOrder.state_dict(); got {type(state).__name__}"
            )
        if state.get("format") != FORMAT:
            raise ValueError(f"state must have format {FORMAT!r}; got {state.get('format')!r}")
        saved = state.get("fingerprint")
        if not isinstance(saved, dict):
            raise ValueError(f"state['fingerprint'] must be a dict; got {type(saved).__name__}")
        mine = self.fingerprint()
        changes = []
        for key in [*mine, *(k for k in saved if k not in mine)]:
            old, new = saved.get(key), mine.get(key)
            if old != new:
                name = _PART_NAMES.get(key, key)
                changes.append(f"{name} changed: saved {_shown(old)}, given {_shown(new)}")
        if changes:
            raise ValueError("the saved state is of another sample order; " + "; ".join(changes))
        if "consumed_samples" not in state:
            raise ValueError("state has no 'consumed_samples'")
        self._c0 = self._consumed(state["consumed_samples"])


def _shown(value: Any) -> str:
    """A fingerprint value as an error shows it (hashes shortened)."""
    if isinstance(value, str) and len(value) == 64:
        return f"sha256 {value[:12]}..."
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."

"""Twin of :class:`posembed.BatchOrder`: one endless stream of samples, sliced into batches.

Global position ``p`` is sample ``perm(seed, e, j)`` with ``e = p // N`` (the
epoch) and ``j = p % N``, or ``j`` itself without shuffling. ``perm`` is a
bijection of ``0..N-1`` per epoch, computed element by element: a Feistel
network over the smallest power of two >= N (at least 4), walked again while
it lands past N. Its keys come from ``(seed, epoch)`` through splitmix64, so
no permutation is ever stored and any position is reached in O(1).

Global batch ``k`` is positions ``[k*G, (k+1)*G)``. Micro-batch ``i`` of rank
``r`` (counted from ``consumed_samples``, c0) is positions
``c0 + i*m*W + r*m .. + m``: for every world size W that divides ``G / m``,
each global batch is the same set of samples.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
from collections.abc import Iterator
from typing import Any

import numpy as np

FORMAT = "posembed.BatchOrder/1"
ROUNDS = 6
# Positions stay below 2^62 so that position arithmetic never wraps in int64.
MAX_POSITION = 2**62

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def mix(x: int) -> int:
    """splitmix64 of a 64-bit integer (its step and its finaliser)."""
    z = (x + _GOLDEN) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _mix_array(x: np.ndarray) -> np.ndarray:
    """:func:`mix` of each element of a uint64 array (uint64 arithmetic wraps mod 2^64)."""
    z = x + np.uint64(_GOLDEN)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    result: np.ndarray = z ^ (z >> np.uint64(31))
    return result


def round_keys(seed: int, epoch: int) -> list[int]:
    """The Feistel network's key for each round of one epoch."""
    base = mix(mix(seed) ^ epoch)
    return [mix((base + r) & _MASK) for r in range(ROUNDS)]


def permute(j: Any, n: int, seed: int, epoch: int) -> np.ndarray:
    """Where each of ``j`` (in 0..n-1) goes in epoch ``epoch``'s shuffle of n samples."""
    at: np.ndarray = np.array(j, dtype=np.int64)
    if n <= 1:
        return at
    bits = max((n - 1).bit_length(), 2)
    low = bits - bits // 2  # the right half's bits
    low_mask = np.uint64((1 << low) - 1)
    high_mask = np.uint64((1 << (bits // 2)) - 1)
    keys = round_keys(seed, epoch)

    def feistel(x: np.ndarray) -> np.ndarray:
        for key in keys:
            left = x >> np.uint64(low)
            right = x & low_mask
            f = _mix_array(right ^ np.uint64(key)) & high_mask
            x = (right << np.uint64(bits // 2)) | (left ^ f)
        return x

    x = feistel(at.astype(np.uint64))
    # Cycle-walking: the network permutes 0..2^bits-1, and the cycle through j
    # comes back below n; 2^bits < 2n (or 4 for n = 2), so few steps are taken.
    outside = x >= np.uint64(n)
    while outside.any():
        x[outside] = feistel(x[outside])
        outside = x >= np.uint64(n)
    return x.astype(np.int64)


def sample_at(positions: Any, n: int, seed: int, shuffle: bool) -> np.ndarray:
    """The sample at each global position (int64, any shape)."""
    p = np.asarray(positions, dtype=np.int64)
    if not shuffle:
        result: np.ndarray = p % n
        return result
    out = np.empty(p.shape, dtype=np.int64)
    epochs = p // n
    for e in np.unique(epochs):
        here = epochs == e
        out[here] = permute(p[here] % n, n, seed, int(e))
    return out


def _int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer") from None
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}")
    return int(value)


def _index(value: Any, name: str) -> int:
    """A micro-batch or batch number: an integer >= 0 (IndexError below)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer") from None
    if value < 0:
        raise IndexError(f"{name} must be >= 0")
    return int(value)


def _sha(*arrays: Any) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.asarray(a)
        h.update(str(a.shape).encode())
        flat = a.reshape(-1)
        for start in range(0, flat.size, 1 << 20):  # bounded memory for large indices
            h.update(np.ascontiguousarray(flat[start : start + (1 << 20)], dtype="<i8").tobytes())
    return h.hexdigest()


def _samples_parts(s: Any) -> dict[str, Any]:
    return {
        "sequence_length": int(s.sequence_length),
        "add_extra_token": bool(s.add_extra_token_to_sequence),
        "num_epochs": int(s.num_epochs),
        "lengths": None if s.lengths is None else _sha(s.lengths),
        "indices": _sha(s.document_index, s.sample_index, s.shuffle_index),
    }


def describe(source: Any) -> tuple[str, int, dict[str, Any]]:
    """The source's kind, its samples per epoch and what defines its order."""
    if isinstance(source, (int, np.integer)) and not isinstance(source, (bool, np.bool_)):
        return "count", _int(source, "source", 1), {}
    if hasattr(source, "shuffle_index") and hasattr(source, "sample_index"):
        return "GPTSamples", len(source), _samples_parts(source)
    if hasattr(source, "datasets") and hasattr(source, "dataset_index"):
        blend = None
        if source.dataset_index is not None:
            blend = _sha(source.dataset_index, source.dataset_sample_index)
        weights = None
        if source.weights is not None:
            weights = [w.item() if isinstance(w, np.generic) else w for w in source.weights]
        parts = {
            "split": source.split,
            "weights": weights,
            "size": source.size.item() if isinstance(source.size, np.generic) else source.size,
            "datasets": [len(d) for d in source.datasets],
            "dataset_samples": [_samples_parts(d) for d in source.datasets],
            "blend": blend,
        }
        return "GPTBlendSplit", len(source), parts
    if hasattr(source, "row_offsets") and hasattr(source, "capacity"):
        parts = {
            "capacity": int(source.capacity),
            "strategy": source.strategy,
            "split": source.split,
            "lengths": _sha(source.document_lengths),
        }
        return "PackPlan", int(source.rows), parts
    if hasattr(source, "doc_offsets") and hasattr(source, "step"):
        parts = {
            "window": int(source.size),
            "stride": int(source.step),
            "tail": source.tail,
            "lengths": _sha(np.diff(source.doc_offsets)),
        }
        return "Windows", len(source), parts
    raise TypeError("source must be an integer, GPTSamples, GPTBlendSplit, PackPlan or Windows")


class BatchOrder:
    """Twin of :class:`posembed.BatchOrder` (same arguments, same results)."""

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
        kind, n, parts = describe(source)
        if n < 1:
            raise ValueError("source has no samples")
        if n >= 2**62:
            raise ValueError("source has 2**62 samples or more")
        g = _int(global_batch_size, "global_batch_size", 1)
        m = _int(micro_batch_size, "micro_batch_size", 1)
        w = _int(world_size, "world_size", 1)
        r = _int(rank, "rank", 0)
        if r >= w:
            raise ValueError("rank must be below world_size")
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
            raise TypeError("seed must be an integer")
        if not 0 <= int(seed) < 2**64:
            raise ValueError("seed must be in 0..2**64-1")
        if shuffle is None:
            shuffle = kind not in ("GPTSamples", "GPTBlendSplit")
        elif not isinstance(shuffle, (bool, np.bool_)):
            raise TypeError("shuffle must be None, True or False")
        if g >= MAX_POSITION or m * w >= MAX_POSITION:
            raise ValueError("batch sizes too large")
        if g % (m * w):
            raise ValueError(
                "global_batch_size must be a multiple of micro_batch_size * world_size"
            )
        self.source = source
        self.num_samples = n
        self.global_batch_size = g
        self.micro_batch_size = m
        self.world_size = w
        self.rank = r
        self.seed = int(seed)
        self.shuffle = bool(shuffle)
        self.accumulation_steps = g // (m * w)
        self._kind = kind
        self._parts = parts
        self.consumed_samples = self._consumed(consumed_samples)

    def _consumed(self, value: Any) -> int:
        c = _int(value, "consumed_samples", 0)
        step = self.micro_batch_size * self.world_size
        if c % step:
            raise ValueError("consumed_samples must be a multiple of micro_batch_size * world_size")
        if c >= MAX_POSITION:
            raise ValueError("consumed_samples too large")
        return c

    def _first(self, i: int) -> int:
        m, w = self.micro_batch_size, self.world_size
        first = self.consumed_samples + i * m * w + self.rank * m
        if first + m > MAX_POSITION:
            raise ValueError("position past 2**62")
        return first

    def positions(self, i: int) -> np.ndarray:
        first = self._first(_index(i, "i"))
        return np.arange(first, first + self.micro_batch_size, dtype=np.int64)

    def sample_at(self, positions: Any) -> np.ndarray:
        try:
            p = np.asarray(positions)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"positions must be array-like: {exc}") from None
        if p.dtype.kind not in "iu" and not (p.dtype.kind == "f" and p.size == 0):
            raise TypeError("positions must be integers")
        if p.size and (p.min() < 0 or p.max() >= MAX_POSITION):
            raise IndexError("positions must be in 0..2**62-1")
        return sample_at(p.astype(np.int64), self.num_samples, self.seed, self.shuffle)

    def micro_batch(self, i: int) -> np.ndarray:
        return self.sample_at(self.positions(i))

    def micro_batches(self, start: int, stop: int) -> np.ndarray:
        a = _index(start, "start")
        b = _index(stop, "stop")
        if b < a:
            raise ValueError("stop must be >= start")
        if b > a:
            self._first(b - 1)
        m, w = self.micro_batch_size, self.world_size
        first = self.consumed_samples + a * m * w + self.rank * m
        rows = np.arange(b - a, dtype=np.int64)[:, None] * (m * w)
        return self.sample_at(first + rows + np.arange(m, dtype=np.int64)[None, :])

    def global_batch(self, k: int) -> np.ndarray:
        k = _index(k, "k")
        g = self.global_batch_size
        if (k + 1) * g > MAX_POSITION:
            raise ValueError("position past 2**62")
        return self.sample_at(np.arange(k * g, (k + 1) * g, dtype=np.int64))

    def worker_micro_batches(
        self, worker: int, num_workers: int, stop: int | None = None
    ) -> Iterator[int]:
        n = max(_int(num_workers, "num_workers", 0), 1)
        w = _int(worker, "worker", 0)
        if w >= n:
            raise ValueError("worker must be below num_workers")
        if stop is None:
            return itertools.count(w, n)
        return iter(range(w, _int(stop, "stop", 0), n))

    def advance(self, micro_batches: int) -> None:
        k = _int(micro_batches, "micro_batches", 0)
        self.consumed_samples = self._consumed(
            self.consumed_samples + k * self.micro_batch_size * self.world_size
        )

    def epoch_of(self, position: int) -> int:
        p = _int(position, "position", 0)
        return p // self.num_samples

    def fingerprint(self) -> dict[str, Any]:
        return {
            "source": self._kind,
            "num_samples": self.num_samples,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "global_batch_size": self.global_batch_size,
            **self._parts,
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "consumed_samples": self.consumed_samples,
            "fingerprint": self.fingerprint(),
            "written_by": {
                "world_size": self.world_size,
                "rank": self.rank,
                "micro_batch_size": self.micro_batch_size,
            },
        }

    def load_state_dict(self, state: Any) -> None:
        if not isinstance(state, dict):
            raise TypeError("state must be a dict")
        if state.get("format") != FORMAT:
            raise ValueError("state is not a BatchOrder state")
        saved = state.get("fingerprint")
        if not isinstance(saved, dict):
            raise ValueError("state has no fingerprint")
        mine = self.fingerprint()
        changed = sorted(k for k in set(saved) | set(mine) if saved.get(k) != mine.get(k))
        if changed:
            raise ValueError("the order changed: " + ", ".join(changed))
        if "consumed_samples" not in state:
            raise ValueError("state has no consumed_samples")
        self.consumed_samples = self._consumed(state["consumed_samples"])

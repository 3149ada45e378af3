"""blend: Megatron-LM BlendedDataset's blending indices, against megatron-core's own helpers.

The "numpy" column holds megatron-core where it is installed (never a
dependency: the column is left empty without it): ``helpers.build_blending_indices``
and ``helpers.build_exhaustive_blending_indices``, each with its two output
arrays allocated as ``BlendedDataset`` allocates them. The large blend has no
twin column (see ``WITHOUT_REFERENCE``): the twin draws one sample at a time
in Python; the exhaustive case times it.
"""

from __future__ import annotations

import importlib.util
import types
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import posembed
from posembed import reference
from posembed.bench.case import Case


def _megatron() -> types.SimpleNamespace | None:
    """megatron-core's blending helpers, or None where it is not installed."""
    if importlib.util.find_spec("megatron") is None:
        return None
    try:
        with warnings.catch_warnings():
            # it warns that Transformer Engine and Apex are absent
            warnings.simplefilter("ignore")
            from megatron.core.datasets import helpers
    except ImportError:
        return None
    return types.SimpleNamespace(helpers=helpers)


def _megatron_blend(helpers: Any, weights: np.ndarray, size: int) -> tuple[np.ndarray, ...]:
    dataset_index = np.zeros(size, dtype=np.int16)
    sample_index = np.zeros(size, dtype=np.int64)
    helpers.build_blending_indices(dataset_index, sample_index, weights, len(weights), size, False)
    return dataset_index, sample_index


def _megatron_exhaustive(helpers: Any, sizes: np.ndarray) -> tuple[np.ndarray, ...]:
    total = int(sizes.sum())
    dataset_index = np.zeros(total, dtype=np.int16)
    sample_index = np.zeros(total, dtype=np.int64)
    helpers.build_exhaustive_blending_indices(dataset_index, sample_index, sizes, len(sizes))
    return dataset_index, sample_index


def _equal(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> bool:
    return all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def build(quick: bool = False) -> list[Case]:
    # A pretraining blend of 1,000 corpora weighted by their token counts
    # (log-uniform over three decades), normalised as BlendedDataset does;
    # 10M samples (--quick: 300k). Not 100M: megatron's helper took 457 s for
    # 100M on a 2-core machine (posembed 18.6 s), and the timer calls each
    # implementation at least five times; both cost the same per sample at
    # 10M (there: 23-35 s and 1.76 s).
    rng = np.random.default_rng(17)
    datasets = 1000
    raw = np.exp(rng.uniform(0.0, np.log(1000.0), datasets))
    weights = raw / raw.sum()
    size = 300_000 if quick else 10_000_000
    megatron = _megatron()

    impls: dict[str, Callable[[], object]] = {
        "posembed": partial(posembed.blending_indices, weights, size),
    }
    if megatron is not None:
        impls["numpy"] = partial(_megatron_blend, megatron.helpers, weights, size)

    def check() -> bool:
        # the draw is sequential: the first samples of any size are the same,
        # so a prefix (every block and threshold of it) stands for the whole
        prefix = min(size, 1_000_000)
        ours: tuple[np.ndarray, ...] = posembed.blending_indices(weights, prefix)
        if megatron is not None:
            theirs = _megatron_blend(megatron.helpers, weights, prefix)
        else:
            theirs = reference.blending_indices(weights, min(prefix, 20_000))
            ours = tuple(a[: len(theirs[0])] for a in ours)
        return _equal(ours, theirs)

    cases = [
        Case(
            "blend",
            "blending indices",
            f"{datasets} datasets, {size / 1e6:g}M samples; vs megatron build_blending_indices",
            size * (2 + 8),
            impls,
            "write fresh",
            check,
        )
    ]

    # -- every sample of each dataset once, by size
    sizes = np.maximum(1, (raw / raw.sum() * (20_000 if quick else 200_000))).astype(np.int64)
    total = int(sizes.sum())
    exhaustive: dict[str, Callable[[], object]] = {
        "reference": partial(reference.exhaustive_blending_indices, sizes),
        "posembed": partial(posembed.exhaustive_blending_indices, sizes),
    }
    if megatron is not None:
        exhaustive["numpy"] = partial(_megatron_exhaustive, megatron.helpers, sizes)

    def check_exhaustive() -> bool:
        ours = posembed.exhaustive_blending_indices(sizes)
        other: Any = exhaustive.get("numpy", exhaustive["reference"])()
        return _equal(ours, other)

    cases.append(
        Case(
            "blend",
            "exhaustive",
            f"{datasets} datasets, {total / 1e3:.0f}k samples; "
            "vs megatron build_exhaustive_blending_indices",
            total * (2 + 8),
            exhaustive,
            "write fresh",
            check_exhaustive,
        )
    )
    return cases

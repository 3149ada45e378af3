"""blending_indices and exhaustive_blending_indices against their twin and megatron-core.

Megatron's ``helpers.build_blending_indices`` and
``helpers.build_exhaustive_blending_indices`` are run on the same inputs;
posembed must equal them element for element, at every SIMD level this CPU
offers and for any thread count.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed
from posembed import reference

from .conftest import megatron_or_skip

ROOT = Path(__file__).resolve().parent.parent
LEVELS = posembed.config()["simd_levels"]


@pytest.fixture(scope="module")
def helpers() -> Any:
    megatron_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets import helpers as found
    return found


def megatron_blend(helpers: Any, weights: np.ndarray, size: int) -> tuple[np.ndarray, ...]:
    dataset_index = np.zeros(size, dtype=np.int16)
    sample_index = np.zeros(size, dtype=np.int64)
    helpers.build_blending_indices(dataset_index, sample_index, weights, len(weights), size, False)
    return dataset_index, sample_index


def megatron_exhaustive(helpers: Any, sizes: np.ndarray) -> tuple[np.ndarray, ...]:
    """Megatron's draw over the datasets of size > 0 (it cannot take a 0), ids mapped back."""
    kept = np.flatnonzero(sizes > 0)
    total = int(sizes.sum())
    dataset_index = np.zeros(total, dtype=np.int16)
    sample_index = np.zeros(total, dtype=np.int64)
    if kept.size:
        positive = np.ascontiguousarray(sizes[kept], dtype=np.int64)
        helpers.build_exhaustive_blending_indices(
            dataset_index, sample_index, positive, len(positive)
        )
    return kept[dataset_index].astype(np.int16) if total else dataset_index, sample_index


def same(got: tuple[np.ndarray, ...], want: tuple[np.ndarray, ...]) -> None:
    assert len(got) == 2
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_array_equal(g, w)


def weight_vectors() -> dict[str, np.ndarray]:
    """Normalised weights (w / w.sum(), as BlendedDataset does) of many kinds."""
    rng = np.random.default_rng(5)
    raw: dict[str, np.ndarray] = {}
    for n in (1, 2, 3, 7, 33, 40, 1000):
        raw[f"random-{n}"] = rng.random(n) + 1e-3
        raw[f"equal-{n}"] = np.ones(n)  # every sample a tie at first
        raw[f"small-ints-{n}"] = rng.integers(1, 4, n).astype(np.float64)  # many exact ties
        raw[f"huge-ratios-{n}"] = np.exp(rng.uniform(-40, 0, n))
    raw["tiny-ratio"] = np.array([1.0, 1e-12])
    raw["one-dominant-1000"] = np.concatenate([[1e6], rng.random(999)])
    raw["two-groups-300"] = np.repeat([1.0, 3.0], 150)
    return {name: w / w.sum() for name, w in raw.items()}


WEIGHTS = weight_vectors()


@pytest.mark.parametrize("name", sorted(WEIGHTS))
def test_blending_equals_megatron_and_the_twin(name: str, helpers: Any) -> None:
    w = WEIGHTS[name]
    before = w.copy()
    for size in (0, 1, 2, 3, 500 + len(w)):
        want = megatron_blend(helpers, w, size)
        same(posembed.blending_indices(w, size), want)
        same(reference.blending_indices(w, size), want)
    # longer draws, where blocks of samples run many times (the twin is slow)
    size = 40_000 if len(w) < 1000 else 100_000
    same(posembed.blending_indices(w, size), megatron_blend(helpers, w, size))
    np.testing.assert_array_equal(w, before)  # the input is not modified


def test_blending_many_datasets(helpers: Any) -> None:
    rng = np.random.default_rng(8)
    for n, size in ((4000, 12_000), (32766, 1000)):
        w = rng.random(n) + 0.1
        w /= w.sum()
        same(posembed.blending_indices(w, size), megatron_blend(helpers, w, size))
    # weights from a list of floats, as BlendedDataset passes them
    w = [0.5, 0.25, 0.25]
    same(posembed.blending_indices(w, 9), megatron_blend(helpers, np.array(w), 9))


def exhaustive_cases() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    cases = {
        "one": np.array([5]),
        "two": np.array([1, 1]),
        "equal-7": np.full(7, 6),
        "zeros-inside": np.array([0, 3, 0, 5, 2, 0]),
        "all-zero": np.array([0, 0, 0]),
        "one-sample": np.array([0, 1]),
        "uneven": np.array([1, 1000, 3]),
    }
    for n in (3, 40, 200):
        sizes = rng.integers(0, 30, n)
        sizes[rng.random(n) < 0.2] = 0
        cases[f"random-{n}"] = sizes
    return cases


EXHAUSTIVE = exhaustive_cases()


@pytest.mark.parametrize("name", sorted(EXHAUSTIVE))
def test_exhaustive_equals_megatron_and_the_twin(name: str, helpers: Any) -> None:
    sizes = EXHAUSTIVE[name]
    before = sizes.copy()
    want = megatron_exhaustive(helpers, sizes)
    same(posembed.exhaustive_blending_indices(sizes), want)
    same(reference.exhaustive_blending_indices(sizes), want)
    np.testing.assert_array_equal(sizes, before)
    got = posembed.exhaustive_blending_indices(sizes)
    # every sample of every dataset, once
    for d, size in enumerate(sizes):
        np.testing.assert_array_equal(np.sort(got[1][got[0] == d]), np.arange(size))


def test_exhaustive_at_scale(helpers: Any) -> None:
    rng = np.random.default_rng(12)
    sizes = rng.integers(1, 200, 500)
    same(posembed.exhaustive_blending_indices(sizes), megatron_exhaustive(helpers, sizes))


@pytest.mark.parametrize("threads", [1, 2])
def test_the_thread_count_changes_nothing(threads: int, restore_threads: None) -> None:
    w = WEIGHTS["random-1000"]
    posembed.set_num_threads(1)
    want = posembed.blending_indices(w, 20_000)
    posembed.set_num_threads(threads)
    same(posembed.blending_indices(w, 20_000), want)


PROBE = """
import sys
import numpy as np
import posembed
rng = np.random.default_rng(3)
found = {"simd": np.array(posembed.config()["simd"])}
for n in (2, 7, 33, 1000):
    w = rng.random(n) + 0.01
    w /= w.sum()
    found[f"w{n}"] = w
    found[f"b{n}-d"], found[f"b{n}-s"] = posembed.blending_indices(w, 20_000)
    sizes = rng.integers(0, 40, n)
    found[f"e{n}"] = sizes
    found[f"e{n}-d"], found[f"e{n}-s"] = posembed.exhaustive_blending_indices(sizes)
np.savez(sys.argv[1], **found)
"""


def test_every_simd_level_gives_megatrons_result(helpers: Any, tmp_path: Path) -> None:
    for level in LEVELS:
        env = dict(os.environ, POSEMBED_SIMD=level)
        path = tmp_path / f"{level}.npz"
        done = subprocess.run(
            [sys.executable, "-c", PROBE, str(path)],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        with np.load(path) as data:
            assert str(data["simd"]) == level
            for n in (2, 7, 33, 1000):
                want = megatron_blend(helpers, data[f"w{n}"], 20_000)
                same((data[f"b{n}-d"], data[f"b{n}-s"]), want)
                want = megatron_exhaustive(helpers, data[f"e{n}"])
                same((data[f"e{n}-d"], data[f"e{n}-s"]), want)


# -- bad inputs: the same exception type from posembed and the twin ------------------

GOOD = np.array([0.25, 0.75])

BAD_BLENDS = [
    ((np.array([0.5, np.nan]), 3), ValueError, r"weights\[1\] = nan"),
    ((np.array([0.5, np.inf]), 3), ValueError, r"weights\[1\] = inf"),
    ((np.array([1.5, -0.5]), 3), ValueError, r"weights\[1\] = -0.5"),
    ((np.array([1.0, 0.0]), 3), ValueError, r"weights\[1\] = 0.0"),
    ((np.zeros(3), 3), ValueError, r"weights\[0\] = 0.0"),
    ((np.array([0.5, 0.6]), 3), ValueError, "sum to 1"),
    ((np.array([1, 1]), 3), TypeError, "floats; got dtype int64"),
    ((np.array([True]), 3), TypeError, "floats; got dtype bool"),
    ((np.array(["a"]), 3), TypeError, "floats"),
    ((np.full((2, 2), 0.25), 3), ValueError, r"1-D .*shape \(2, 2\)"),
    ((np.array(1.0), 3), ValueError, "1-D"),
    ((np.array([], dtype=np.float64), 3), ValueError, "at least one dataset"),
    ((np.full(32767, 1 / 32767), 3), ValueError, "32767 datasets; a blend holds at most 32766"),
    ((GOOD, -1), ValueError, "size must be an integer >= 0; got -1"),
    ((GOOD, 2.0), TypeError, "size must be an integer >= 0; got float"),
    ((GOOD, True), TypeError, "size must be an integer >= 0; got bool"),
    ((GOOD, 2**53), ValueError, "below 2\\^53"),
]


@pytest.mark.parametrize(("args", "error", "match"), BAD_BLENDS)
def test_bad_blends_are_refused(args: tuple[Any, ...], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        posembed.blending_indices(*args)
    with pytest.raises(error):
        reference.blending_indices(*args)


BAD_SIZES = [
    (np.array([3, -1]), ValueError, r"sizes\[1\] = -1"),
    (np.array([1.0, 2.0]), TypeError, "integers; got dtype float64"),
    (np.array([True, False]), TypeError, "integers; got dtype bool"),
    (np.array([[1, 2]]), ValueError, "1-D"),
    (np.array([], dtype=np.int64), ValueError, "at least one dataset"),
    (np.ones(32767, dtype=np.int64), ValueError, "at most 32766"),
    (np.array([2**52, 2**52]), ValueError, "less than 2\\^53"),
    (np.array([2**64 - 1], dtype=np.uint64), ValueError, "less than 2\\^53"),
    (np.array([2**62] * 5, dtype=np.int64), ValueError, "less than 2\\^53"),
]


@pytest.mark.parametrize(("sizes", "error", "match"), BAD_SIZES)
def test_bad_sizes_are_refused(sizes: np.ndarray, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        posembed.exhaustive_blending_indices(sizes)
    with pytest.raises(error):
        reference.exhaustive_blending_indices(sizes)

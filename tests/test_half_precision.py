"""float16 and bfloat16 (ml_dtypes) in every public function that takes float
tables, against the NumPy twins, in one place; and a census of the public API,
so that a new function must say whether it takes float tables (and get a case
here) before the suite passes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import posembed
from posembed import reference

from .conftest import assert_same

ml_dtypes = pytest.importorskip("ml_dtypes")  # in the test extra; bfloat16 needs it

HALVES = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]


def _cases(dtype: np.dtype[Any]) -> dict[str, Callable[[Any], Any]]:
    """name -> call(module): the same call on posembed and on posembed.reference."""
    rng = np.random.default_rng(7)

    def table(rows: int, d: int) -> np.ndarray:
        return (rng.standard_normal((rows, d)) * 3).astype(dtype)

    pos_table, tok_table, grid = table(40, 24), table(90, 24), table(1 + 5 * 7, 16)
    grad = table(6 * 11, 24).reshape(6, 11, 24)
    positions = rng.integers(0, 40, (6, 11))
    ids = rng.integers(0, 90, (6, 11))
    frac = rng.uniform(0, 39, (5, 3))
    w = posembed.windows(np.arange(70), 16, step=12)
    rw = reference.windows(np.arange(70), 16, step=12)
    values = table(len(w) * 16, 3).reshape(len(w), 16, 3)

    return {
        "gather": lambda m: m.gather(pos_table, positions),
        "gather_backward": lambda m: m.gather_backward(grad, positions, 40),
        "interpolate": lambda m: m.interpolate(pos_table, 97, align="half_pixel"),
        "lerp": lambda m: m.lerp(pos_table, frac),
        "extend": lambda m: m.extend(pos_table, 70, init="interpolate"),
        "resample_grid": lambda m: m.resample_grid(grid, (5, 7), (8, 11), prefix=1),
        "embed": lambda m: m.embed(tok_table, ids, pos_table, offset=3),
        "embed(dropout)": lambda m: m.embed(tok_table, ids, pos_table, dropout=0.3, seed=9),
        "similarity": lambda m: m.similarity(pos_table),
        "stitch": lambda m: m.stitch(values, w if m is posembed else rw, reduce="mean"),
    }


# The public names that take float tables, and which case above covers each.
TAKES_FLOAT_TABLES = {
    "embed": ["embed", "embed(dropout)"],
    "extend": ["extend"],
    "gather": ["gather"],
    "gather_backward": ["gather_backward"],
    "interpolate": ["interpolate"],
    "lerp": ["lerp"],
    "resample_grid": ["resample_grid"],
    "similarity": ["similarity"],
    "stitch": ["stitch"],
    # covered in their own files, with every float dtype:
    "LearnedPositionEmbedding": [],  # tests/test_embedding.py (FLOAT_DTYPES)
    "resize_checkpoint": [],  # tests/test_checkpoint.py (F16 and BF16 tables)
}
NO_FLOAT_TABLES = {
    "BatchOrder",
    "Batches",
    "MicroBatch",
    "GPTBatch",
    "GPTBlend",
    "GPTBlendSplit",
    "GPTSamples",
    "blending_indices",
    "exhaustive_blending_indices",
    "IndexedCorpus",
    "WindowLayout",
    "Windows",
    "__version__",
    "config",
    "dropout_mask",
    "get_num_threads",
    "gpt_batch",
    "gpt_blend",
    "gpt_sample_index",
    "gpt_samples",
    "last_seed",
    "merge_indexed",
    "pack",
    "PackPlan",
    "PackedRows",
    "reference",
    "set_num_threads",
    "show_config",
    "split_ranges",
    "window_layout",
    "windows",
    "write_indexed",
    "write_megatron_cache",
}


def test_every_public_name_is_classified():
    public = set(posembed.__all__)
    classified = set(TAKES_FLOAT_TABLES) | NO_FLOAT_TABLES
    assert not set(TAKES_FLOAT_TABLES) & NO_FLOAT_TABLES
    assert public - classified == set(), "classify the new public names here"
    assert classified - public == set()


def test_every_case_is_claimed():
    claimed = {case for cases in TAKES_FLOAT_TABLES.values() for case in cases}
    assert claimed == set(_cases(HALVES[0]))


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("name", sorted(_cases(HALVES[0])))
def test_half_precision_matches_reference(name, dtype):
    call = _cases(dtype)[name]
    got, want = call(posembed), call(reference)
    if name == "similarity":
        # computed and returned in float32, the Gram product by BLAS: its 24
        # products per entry are summed in another order than the twin's
        # (d * eps per dot product, as in tests/test_similarity.py)
        assert got.dtype == want.dtype == np.float32
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=4 * 24 * np.finfo(np.float32).eps)
    else:
        assert_same(got, want)
        assert got.dtype == dtype  # half in, half out

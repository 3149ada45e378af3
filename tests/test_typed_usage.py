"""examples/typed_usage.py runs and every step of its tour gives the right result."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import posembed

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "typed_usage.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("typed_usage", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example() -> ModuleType:
    return load_example()


@pytest.fixture(scope="module")
def tour(example: ModuleType):
    return example.main()


def test_main_is_quiet_and_restores_the_thread_setting(example, capsys):
    before = posembed.config()
    example.main()
    after = posembed.config()
    assert capsys.readouterr().out == ""
    assert after["num_threads_set"] == before["num_threads_set"]
    assert after["num_threads"] == before["num_threads"]


def test_threads_and_build_facts(tour):
    assert tour.threads == min(2, posembed.config()["max_num_threads"])
    assert tour.simd in posembed.config()["simd_levels"]


def test_lookups(example, tour):
    table = tour.table
    assert table.shape == (example.MAX_SEQ_LEN, example.EMBED_DIM)
    assert table.dtype == np.float32
    assert np.array_equal(tour.rows, table[[0, 5, example.MAX_SEQ_LEN - 1]])
    assert np.array_equal(tour.clipped, table[[0, example.MAX_SEQ_LEN - 1]])


def test_longer_context(example, tour):
    table, n = tour.table, example.MAX_SEQ_LEN
    assert tour.extended.shape == (example.LONGER, example.EMBED_DIM)
    assert np.array_equal(tour.extended[:n], table)
    stretched = posembed.reference.interpolate(table, example.LONGER)
    assert np.array_equal(tour.extended[n:], stretched[n:])
    assert np.array_equal(tour.tiled, np.concatenate([table, table]))
    # halfway between rows 2 and 3, blended in float32
    expected = (np.float32(0.5) * table[2] + np.float32(0.5) * table[3])[None, :]
    assert tour.halfway.dtype == np.float32
    np.testing.assert_allclose(tour.halfway, expected, rtol=1e-6)


def test_vit_grid(example, tour):
    assert tour.vit_table.shape == (1 + 4 * 4, example.EMBED_DIM)
    assert tour.vit_resized.shape == (1 + 6 * 6, example.EMBED_DIM)
    assert np.array_equal(tour.vit_resized[0], tour.vit_table[0])  # the CLS row is kept
    expected = posembed.reference.resample_grid(tour.vit_table, (4, 4), (6, 6), prefix=1)
    np.testing.assert_allclose(tour.vit_resized, expected, rtol=1e-5, atol=1e-6)


def test_train_step(example, tour):
    b, n, d = example.BATCH, example.MAX_SEQ_LEN, example.EMBED_DIM
    p = 0.1
    assert tour.dropout_seed == 7
    assert tour.forward.shape == (b, n, d)
    assert tour.mask.shape == (b, n, d)
    assert 0 < tour.mask.sum() < tour.mask.size
    assert np.all(tour.forward[~tour.mask] == 0)
    # every position appears once per sequence: its gradient is the sum over
    # the batch of the kept entries, each 1 / (1 - p)
    expected = (tour.mask / np.float32(1 - p)).astype(np.float32).sum(axis=0)
    assert tour.pos_grad.shape == (n, d)
    np.testing.assert_allclose(tour.pos_grad, expected, rtol=1e-6)


def test_long_document(example, tour):
    w = tour.windows
    size, tokens = example.MAX_SEQ_LEN, example.DOC_TOKENS
    assert isinstance(w, posembed.Windows)
    assert w.size == size
    assert w.step == size - example.OVERLAP
    assert len(w) == -(-(tokens - size) // w.step) + 1
    assert np.array_equal(tour.restored, tour.document)
    assert tour.restored.dtype == np.int32
    assert tour.per_token.shape == (tokens, example.EMBED_DIM)
    # without dropout a token's vector is its token row plus the row of its
    # position in the window that owns it (BERT's max-context rule)
    rng = np.random.default_rng(0)
    token_table = rng.standard_normal((example.VOCAB, example.EMBED_DIM)).astype(np.float32)
    own = w.owner("center")
    k, j = np.nonzero(own)
    place = w.doc_offsets[w.documents[k]] + w.starts[k] + j
    expected = np.empty_like(tour.per_token)
    expected[place] = token_table[w.tokens[k, j]] + tour.table[j]
    assert np.array_equal(np.sort(place), np.arange(tokens))
    np.testing.assert_array_equal(tour.per_token, expected)


def test_runs_as_a_script():
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, check=True, timeout=300
    )
    # an editable install may print its rebuild first; the example's own lines end it
    lines = done.stdout.splitlines()[-3:]
    assert lines[0].startswith("posembed ")
    assert "per-token (150, 16)" in lines[2]

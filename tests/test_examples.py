"""examples/finetune_extended.py runs, its loss falls, and its gradients are right."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import posembed

from .conftest import torch_or_skip, transformers_or_skip

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "finetune_extended.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("finetune_extended", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example() -> ModuleType:
    return load_example()


def test_finetune_loss_falls(example, capsys):
    first, last = example.main(steps=120, verbose=False)
    assert capsys.readouterr().out == ""
    assert np.isfinite(first)
    assert np.isfinite(last)
    assert first > 0
    assert last < 0.5 * first


def test_extended_table_keeps_trained_rows(example):
    # the same construction as the example's main, checked here as well
    emb = posembed.LearnedPositionEmbedding(
        max_seq_len=example.TRAINED_LEN, embed_dim=example.EMBED_DIM, seed=0, dropout=0.1
    )
    extended = emb.extend(example.EXTENDED_LEN, init="interpolate")
    assert extended.embeddings.shape == (example.EXTENDED_LEN, example.EMBED_DIM)
    assert extended.dtype == emb.dtype
    assert np.array_equal(extended.embeddings[: example.TRAINED_LEN], emb.embeddings)
    stretched = posembed.interpolate(emb.embeddings, example.EXTENDED_LEN)
    assert np.array_equal(
        extended.embeddings[example.TRAINED_LEN :], stretched[example.TRAINED_LEN :]
    )
    assert not np.shares_memory(extended.embeddings, emb.embeddings)


def _tiny_case(seed: int = 3):
    rng = np.random.default_rng(seed)
    vocab, length, dim, k, b, t = 6, 7, 3, 2, 2, 5  # rows 5 and 6 of the table are unused
    tok = rng.standard_normal((vocab, dim))
    pos = rng.standard_normal((length, dim))
    ids = rng.integers(0, vocab, (b, t))
    w = rng.standard_normal((dim, k))
    y = rng.standard_normal((b, t, k))
    return tok, pos, ids, w, y


@pytest.mark.parametrize("dropout", [0.0, 0.25])
def test_gradient_matches_finite_difference(example, dropout):
    tok, pos, ids, w, y = _tiny_case()
    seed = 11 if dropout > 0 else None
    _, grad_pos, grad_tok = example.loss_and_grads(tok, pos, ids, w, y, dropout=dropout, seed=seed)
    assert grad_pos.dtype == np.float64
    assert grad_tok.dtype == np.float64

    def loss(tok_: np.ndarray, pos_: np.ndarray) -> float:
        return example.loss_and_grads(tok_, pos_, ids, w, y, dropout=dropout, seed=seed)[0]

    # The loss is quadratic in each table (the dropout mask is fixed by the
    # seed), so a central difference is exact up to rounding: a large eps is fine.
    eps = 1e-3

    def central_differences(table: np.ndarray, f) -> np.ndarray:
        fd = np.zeros_like(table)
        for idx in np.ndindex(table.shape):
            hi, lo = table.copy(), table.copy()
            hi[idx] += eps
            lo[idx] -= eps
            fd[idx] = (f(hi) - f(lo)) / (2 * eps)
        return fd

    fd_pos = central_differences(pos, lambda p: loss(tok, p))
    fd_tok = central_differences(tok, lambda t: loss(t, pos))

    np.testing.assert_allclose(grad_pos, fd_pos, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(grad_tok, fd_tok, rtol=1e-6, atol=1e-12)
    assert np.all(grad_pos[5:] == 0)  # positions 5 and 6 are never used
    assert np.any(grad_pos[:5] != 0)


def test_backward_mask_is_the_forward_mask():
    tok, pos, ids, _, _ = _tiny_case()
    p, seed = 0.25, 11
    out = posembed.embed(tok, ids, pos, dropout=p, seed=seed)
    mask = posembed.dropout_mask(out.shape, p, seed)
    assert mask.dtype == np.bool_
    assert 0 < mask.sum() < mask.size
    plain = tok[ids] + pos[np.arange(ids.shape[1])]
    np.testing.assert_allclose(out, plain * mask / (1 - p), rtol=1e-15, atol=0)
    assert np.all(out[~mask] == 0)


def test_pytorch_train_resume_example_gives_the_same_batches(capsys):
    # examples/train_resume.py asserts it itself: the global batches after
    # resuming on another world size and worker count are the uninterrupted
    # run's, and the losses follow the same course
    torch_or_skip()
    transformers_or_skip()
    path = EXAMPLE.parent / "train_resume.py"
    spec = importlib.util.spec_from_file_location("train_resume", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    whole, resumed = module.main(verbose=False)
    assert capsys.readouterr().out == ""
    assert len(whole) == len(resumed) == module.STEPS
    np.testing.assert_allclose(resumed, whole, rtol=1e-4)

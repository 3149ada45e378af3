"""Going past max_seq_len by extending the position table and fine-tuning it.

This is extend-and-fine-tune, end to end in plain NumPy: a position table
trained for 64 positions is grown to 128 rows with
``LearnedPositionEmbedding.extend(128, init="interpolate")`` (rows 0..63 stay
bit-identical to the trained ones; rows 64..127 start as the trained table
stretched to 128 rows) and then fine-tuned on sequences of 128 tokens.

The task is a toy regression whose targets depend on position: a fixed "true"
position table (equal to the trained one on positions 0..63, different on
64..127) and a fixed linear read-out ``W`` give ``y = (tok[ids] +
true_pos[positions]) @ W``. Each step runs

- forward: ``posembed.embed`` (token + position embeddings and inverted dropout
  in one pass) and the read-out, with a mean-squared-error loss;
- backward: the gradient with respect to the embed output, times the dropout
  mask ``embed`` applied (``posembed.dropout_mask(shape, p, seed) / (1 - p)``),
  scattered into table rows by ``posembed.gather_backward`` (with positions and
  the table length for the position table; with token ids and the vocabulary
  size it gives the token table's gradient);
- an Adam update of the position table.

The loss reported is on a fixed held-out batch without dropout. Run it with
``python examples/finetune_extended.py``.
"""

from __future__ import annotations

import numpy as np

import posembed

TRAINED_LEN = 64
EXTENDED_LEN = 128
EMBED_DIM = 32
VOCAB = 100
OUT_DIM = 32
BATCH = 16
DROPOUT = 0.1


def loss_and_grads(
    tok: np.ndarray,
    pos_table: np.ndarray,
    ids: np.ndarray,
    w: np.ndarray,
    y: np.ndarray,
    *,
    dropout: float = 0.0,
    seed: int | None = None,
) -> tuple[float, np.ndarray, np.ndarray]:
    """MSE loss of ``embed(tok, ids, pos_table) @ w`` against ``y``, and its gradients
    with respect to ``pos_table`` and ``tok``.

    ``ids`` is (B, T); positions are ``arange(T)`` for every row, as ``embed``
    uses by default. With ``dropout > 0`` the same ``seed`` must give the same
    mask in the forward (``embed``) and backward (``dropout_mask``) passes.
    """
    out = posembed.embed(tok, ids, pos_table, dropout=dropout, seed=seed)  # (B, T, d)
    err = out @ w - y  # (B, T, k)
    loss = float(np.mean(err * err))
    grad = (err @ w.T) * (2.0 / err.size)  # d loss / d out, (B, T, d)
    if dropout > 0:
        assert seed is not None, "the backward pass needs the forward pass's dropout seed"
        mask = posembed.dropout_mask(out.shape, dropout, seed)
        grad = grad * mask / (1.0 - dropout)
    grad = grad.astype(pos_table.dtype, copy=False)
    positions = np.broadcast_to(np.arange(ids.shape[-1]), ids.shape)
    grad_pos = posembed.gather_backward(grad, positions, pos_table.shape[0])
    grad_tok = posembed.gather_backward(grad, ids, tok.shape[0])
    return loss, grad_pos, grad_tok


def main(steps: int = 300, verbose: bool = True) -> tuple[float, float]:
    """Extend a 64-row table to 128 rows, fine-tune it for ``steps`` Adam steps,
    and return the held-out loss (no dropout) before and after."""
    rng = np.random.default_rng(0)

    # The "trained" model: a 64-position table and a token table.
    emb = posembed.LearnedPositionEmbedding(
        max_seq_len=TRAINED_LEN, embed_dim=EMBED_DIM, seed=0, dropout=DROPOUT
    )
    tok = rng.standard_normal((VOCAB, EMBED_DIM)).astype(np.float32) * 0.02

    # Option 1: keep the trained rows, add new ones to fine-tune.
    extended = emb.extend(EXTENDED_LEN, init="interpolate")
    assert extended.max_seq_len == EXTENDED_LEN
    assert extended.dropout == emb.dropout
    assert np.array_equal(extended.embeddings[:TRAINED_LEN], emb.embeddings), (
        "extend must keep the trained rows"
    )
    initial_table = extended.embeddings.copy()

    # The task: targets depend on the position, including positions 64..127.
    true_pos = np.concatenate(
        [
            emb.embeddings,
            rng.standard_normal((EXTENDED_LEN - TRAINED_LEN, EMBED_DIM)).astype(np.float32) * 0.02,
        ]
    )
    w = (rng.standard_normal((EMBED_DIM, OUT_DIM)) / np.sqrt(EMBED_DIM)).astype(np.float32)

    def batch(gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        ids = gen.integers(0, VOCAB, (BATCH, EXTENDED_LEN))
        return ids, posembed.embed(tok, ids, true_pos) @ w

    eval_ids, eval_y = batch(np.random.default_rng(1))
    data = np.random.default_rng(2)

    def eval_loss() -> float:
        return loss_and_grads(tok, extended.embeddings, eval_ids, w, eval_y)[0]

    # Adam on the position table only (the token table stays as trained).
    lr, beta1, beta2, eps = 1e-3, 0.9, 0.999, 1e-8
    m = np.zeros_like(extended.embeddings)
    v = np.zeros_like(extended.embeddings)
    first = eval_loss()
    every = max(steps // 10, 1)
    if verbose:
        print(f"step {0:4d}  held-out loss {first:.4e}")
    for step in range(1, steps + 1):
        ids, y = batch(data)
        train, g, _ = loss_and_grads(
            tok, extended.embeddings, ids, w, y, dropout=extended.dropout, seed=step
        )
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        m_hat = m / (1 - beta1**step)
        v_hat = v / (1 - beta2**step)
        extended.embeddings -= (lr * m_hat / (np.sqrt(v_hat) + eps)).astype(np.float32)
        if verbose and (step % every == 0 or step == steps):
            print(f"step {step:4d}  train loss {train:.4e}  held-out loss {eval_loss():.4e}")
    last = eval_loss()

    if verbose:
        old = float(np.abs(extended.embeddings[:TRAINED_LEN] - emb.embeddings).mean())
        new = float(np.abs(extended.embeddings[TRAINED_LEN:] - initial_table[TRAINED_LEN:]).mean())
        print(f"held-out loss {first:.4e} -> {last:.4e} ({last / first:.1%} of the start)")
        print(f"mean |change|: trained rows 0..63 {old:.2e}, new rows 64..127 {new:.2e}")
    return first, last


if __name__ == "__main__":
    main()

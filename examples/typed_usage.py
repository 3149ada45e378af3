"""A typed tour of posembed's public API, checked by ``mypy --strict``.

A GPT-style position table of 64 positions is looked up, grown to 128
positions, read at fractional positions, resampled as a ViT grid, used in a
forward pass with dropout and its backward pass, and finally applied to a
document longer than 64 tokens by cutting it into overlapping windows and
stitching the per-window outputs back into one per-token array.

Every name is annotated as precisely as the API allows, so mypy checks the
calls (pyproject.toml's ``[tool.mypy]`` lists this file). Run it with
``python examples/typed_usage.py``; tests/test_typed_usage.py runs ``main``
and checks what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import posembed
from posembed import LearnedPositionEmbedding, Windows

MAX_SEQ_LEN = 64
LONGER = 128
EMBED_DIM = 16
VOCAB = 50
BATCH = 2
DOC_TOKENS = 150
OVERLAP = 16

Floats = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Tour:
    """What :func:`main` computed, for a reader (or a test) to check."""

    simd: str
    threads: int
    table: Floats  # (MAX_SEQ_LEN, EMBED_DIM): the trained table
    rows: Floats  # (3, EMBED_DIM): rows 0, 5 and 63
    clipped: Floats  # (2, EMBED_DIM): positions -1 and 99 clipped to 0 and 63
    extended: Floats  # (LONGER, EMBED_DIM): grown by interpolation
    tiled: Floats  # (LONGER, EMBED_DIM): grown by repeating the table
    halfway: Floats  # (1, EMBED_DIM): between rows 2 and 3
    vit_table: Floats  # (1 + 4 * 4, EMBED_DIM): CLS row and a 4 x 4 grid
    vit_resized: Floats  # (1 + 6 * 6, EMBED_DIM)
    forward: Floats  # (BATCH, MAX_SEQ_LEN, EMBED_DIM) with dropout
    dropout_seed: int
    mask: npt.NDArray[np.bool_]  # forward's dropout mask
    pos_grad: Floats  # (MAX_SEQ_LEN, EMBED_DIM): d sum(forward) / d table
    document: npt.NDArray[np.int32]  # (DOC_TOKENS,)
    windows: Windows
    per_token: Floats  # (DOC_TOKENS, EMBED_DIM): embeddings stitched back
    restored: npt.NDArray[np.int32]  # the document, stitched back from the windows


def lookups(emb: LearnedPositionEmbedding) -> tuple[Floats, Floats]:
    """Rows at integer positions: strict by default, clipped on request."""
    rows: Floats = emb(np.array([0, 5, MAX_SEQ_LEN - 1]))
    clipped: Floats = posembed.gather(emb.embeddings, [-1, 99], mode="clip")
    return rows, clipped


def longer_context(emb: LearnedPositionEmbedding) -> tuple[Floats, Floats, Floats]:
    """Going past max_seq_len: extend (trained rows kept) and lerp."""
    extended: LearnedPositionEmbedding = emb.extend(LONGER, init="interpolate")
    tiled: Floats = posembed.extend(emb.embeddings, LONGER, init="tile")
    halfway: Floats = posembed.lerp(emb.embeddings, np.array([2.5]))
    return extended.embeddings, tiled, halfway


def vit_grid() -> tuple[Floats, Floats]:
    """A ViT table (one CLS row, a 4 x 4 grid) resized for a 6 x 6 patch grid."""
    vit = LearnedPositionEmbedding(1 + 4 * 4, EMBED_DIM, seed=1)
    resized: Floats = posembed.resample_grid(vit.embeddings, (4, 4), (6, 6), prefix=1)
    return vit.embeddings, resized


def train_step(
    emb: LearnedPositionEmbedding, token_table: Floats, ids: npt.NDArray[np.int64]
) -> tuple[Floats, int, npt.NDArray[np.bool_], Floats]:
    """Forward with dropout, then the position table's gradient of ``sum(forward)``."""
    forward: Floats = emb.embed(token_table, ids, training=True, seed=7)
    seed: int | None = posembed.last_seed()
    assert seed is not None  # a call with dropout records its seed
    mask: npt.NDArray[np.bool_] = posembed.dropout_mask(forward.shape, emb.dropout, seed)
    # d sum(forward) / d forward is 1 / (1 - p) where kept and 0 where dropped
    grad: Floats = (mask / np.float32(1 - emb.dropout)).astype(np.float32)
    positions: npt.NDArray[np.intp] = np.broadcast_to(np.arange(ids.shape[1]), ids.shape)
    pos_grad: Floats = posembed.gather_backward(grad, positions, emb.max_seq_len)
    return forward, seed, mask, pos_grad


def long_document(
    emb: LearnedPositionEmbedding, token_table: Floats, document: npt.NDArray[np.int32]
) -> tuple[Windows, Floats, npt.NDArray[np.int32]]:
    """A document longer than max_seq_len: windows in, per-token values out."""
    windows: Windows = emb.windows(document, overlap=OVERLAP)
    per_window: Floats = emb.embed(token_table, windows.tokens)  # (n, size, d)
    # each token from the window that gives it the most context on both sides
    per_token: Floats = posembed.stitch(per_window, windows, reduce="center")
    restored: npt.NDArray[np.int32] = posembed.stitch(windows.tokens, windows, reduce="first")
    return windows, per_token, restored


def main() -> Tour:
    """Run the tour on two threads (restoring the caller's setting) and return it."""
    facts: dict[str, Any] = posembed.config()
    previous: int | None = facts["num_threads"] if facts["num_threads_set"] else None
    posembed.set_num_threads(2)
    try:
        threads = posembed.get_num_threads()
        rng = np.random.default_rng(0)
        emb = LearnedPositionEmbedding(MAX_SEQ_LEN, EMBED_DIM, seed=0, dropout=0.1)
        token_table: Floats = rng.standard_normal((VOCAB, EMBED_DIM)).astype(np.float32)
        ids: npt.NDArray[np.int64] = rng.integers(0, VOCAB, (BATCH, MAX_SEQ_LEN))
        document: npt.NDArray[np.int32] = rng.integers(0, VOCAB, DOC_TOKENS, dtype=np.int32)

        rows, clipped = lookups(emb)
        extended, tiled, halfway = longer_context(emb)
        vit_table, vit_resized = vit_grid()
        forward, seed, mask, pos_grad = train_step(emb, token_table, ids)
        windows, per_token, restored = long_document(emb, token_table, document)
    finally:
        posembed.set_num_threads(previous)
    return Tour(
        simd=str(facts["simd"]),
        threads=threads,
        table=emb.embeddings,
        rows=rows,
        clipped=clipped,
        extended=extended,
        tiled=tiled,
        halfway=halfway,
        vit_table=vit_table,
        vit_resized=vit_resized,
        forward=forward,
        dropout_seed=seed,
        mask=mask,
        pos_grad=pos_grad,
        document=document,
        windows=windows,
        per_token=per_token,
        restored=restored,
    )


if __name__ == "__main__":
    tour = main()
    print(f"posembed {posembed.__version__}: SIMD {tour.simd}, {tour.threads} threads")
    print(
        f"table {tour.table.shape} -> extended {tour.extended.shape}; "
        f"ViT grid {tour.vit_table.shape} -> {tour.vit_resized.shape}"
    )
    print(
        f"{len(tour.windows)} windows of {tour.windows.size} over {tour.document.size} tokens "
        f"-> per-token {tour.per_token.shape}"
    )

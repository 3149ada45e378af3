"""embed: token rows plus position rows, with dropout."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

import posembed
from posembed import reference
from posembed.bench.case import Case
from posembed.bench.cases._shared import optional_torch


def build(quick: bool = False) -> list[Case]:
    # GPT-2 small: vocabulary 50257, d 768, batches of 8 x 1024 tokens.
    rng = np.random.default_rng(11)
    vocab, length, d, b, t, p = 50_257, 1024, 768, 1 if quick else 8, 1024, 0.1
    tok = (rng.standard_normal((vocab, d), dtype=np.float32) * 0.02).astype(np.float32)
    pos = (rng.standard_normal((length, d), dtype=np.float32) * 0.02).astype(np.float32)
    ids = rng.integers(0, vocab, (b, t))
    torch = optional_torch()
    if torch is not None:
        tt, pt, it = torch.from_numpy(tok), torch.from_numpy(pos), torch.from_numpy(ids)
        functional = torch.nn.functional
    cases = []
    for rate, name in ((p, "dropout 0.1"), (0.0, "no dropout")):

        def numpy_way(rate: float = rate) -> np.ndarray:  # gather, add, mask, scale
            x = tok[ids]
            x += pos[:t]
            if rate:
                x *= rng.random(x.shape, dtype=np.float32) >= rate
                x *= np.float32(1 / (1 - rate))
            return x

        impls: dict[str, Callable[[], object]] = {
            "reference": partial(reference.embed, tok, ids, pos, dropout=rate, seed=1),
            "numpy": numpy_way,
            "posembed": partial(posembed.embed, tok, ids, pos, dropout=rate, seed=1),
        }
        if torch is not None:

            def torch_way(rate: float = rate) -> object:  # F.embedding + add + F.dropout
                with torch.no_grad():
                    x = functional.embedding(it, tt) + pt[:t]
                    return functional.dropout(x, rate, training=True) if rate else x

            impls["torch"] = torch_way

        def check(rate: float = rate) -> bool:
            got = posembed.embed(tok, ids, pos, dropout=rate, seed=1)
            return bool(np.array_equal(got, reference.embed(tok, ids, pos, dropout=rate, seed=1)))

        cases.append(
            Case(
                "embed",
                name,
                f"B{b} T{t} d{d}, vocab {vocab}, f32",
                b * t * d * 4,
                impls,
                "copy fresh",
                check,
                random_words=b * t * d if rate else 0,
            )
        )
    # Call overhead: four tokens at positions 0..3.
    few = np.array([3, 99, 500, 7])
    impls = {
        "reference": partial(reference.embed, tok, few, pos),
        "numpy": lambda: tok[few] + pos[:4],
        "posembed": partial(posembed.embed, tok, few, pos),
    }
    if torch is not None:
        t_few = torch.from_numpy(few)

        def torch_few() -> object:
            with torch.no_grad():
                return functional.embedding(t_few, tt) + pt[:4]

        impls["torch"] = torch_few
    cases.append(
        Case(
            "embed",
            "4 tokens",
            f"4 ids, d{d}, f32",
            4 * d * 4,
            impls,
            None,
            lambda: bool(np.array_equal(posembed.embed(tok, few, pos), tok[few] + pos[:4])),
        )
    )
    return cases

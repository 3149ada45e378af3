"""batch_order: resuming a run's sample order far into training, and cutting its micro-batches.

"resume" is what a restarted training job does before its first step: load
the saved state (consumed samples 10^9 of a source of 10M samples per epoch,
100 epochs in) and compute the next micro-batch's sample indices. There is
no order to rebuild and no batch to replay; its roofline ("write fresh") is
a new array of the micro-batch's indices, written: the least any
implementation that returns them must do. "micro-batch indices" cuts many
micro-batches' indices at once (a loader's read-ahead), against the same
fresh write of their bytes; the shuffle's arithmetic, not memory, bounds it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import posembed
from posembed import reference
from posembed.bench.case import Case

SAMPLES = 10_000_000  # per epoch
CONSUMED = 10**9  # where the run resumes: 100 epochs in
MICRO, WORLD, GLOBAL = 8, 64, 1024  # m * W = 512 divides 10^9


def _order(module: Any) -> Any:
    return module.BatchOrder(
        SAMPLES,
        global_batch_size=GLOBAL,
        micro_batch_size=MICRO,
        world_size=WORLD,
        rank=WORLD - 1,
        seed=1234,
    )


def build(quick: bool = False) -> list[Case]:
    fast, twin = _order(posembed), _order(reference)
    state = posembed.BatchOrder(
        SAMPLES, global_batch_size=GLOBAL, micro_batch_size=MICRO, world_size=WORLD, seed=1234
    ).state_dict()
    state["consumed_samples"] = CONSUMED

    def resume(order: Any) -> Callable[[], Any]:
        def run() -> Any:
            order.load_state_dict(state)
            return order.micro_batch(0)

        return run

    def same_resume() -> bool:
        got, want = resume(fast)(), resume(twin)()
        return bool(np.array_equal(got, want)) and fast.consumed_samples == CONSUMED

    cases = [
        Case(
            "batch_order",
            "resume",
            f"{SAMPLES // 1_000_000}M samples an epoch, at sample 10^9, {MICRO} a micro-batch",
            MICRO * 8,
            {"reference": resume(twin), "posembed": resume(fast)},
            "write fresh",
            same_resume,
        )
    ]
    rows = 8_192 if quick else 131_072
    for order in (fast, twin):
        order.load_state_dict(state)

    def same_rows() -> bool:
        got = fast.micro_batches(0, rows)
        return bool(np.array_equal(got, twin.micro_batches(0, rows)))

    cases.append(
        Case(
            "batch_order",
            "micro-batch indices",
            f"{rows:,} micro-batches of {MICRO} (W {WORLD}), from sample 10^9",
            rows * MICRO * 8,
            {
                "reference": lambda: twin.micro_batches(0, rows),
                "posembed": lambda: fast.micro_batches(0, rows),
            },
            "write fresh",
            same_rows,
        )
    )
    return cases

"""The benchmark's cases, one module per kernel (named as in ``cpp/``).

Each module's ``build(quick)`` makes its kernel's cases, arrays and all;
``--quick`` runs smaller problems under the same names.
"""

from __future__ import annotations

from collections.abc import Callable

from posembed.bench.case import Case
from posembed.bench.cases import (
    batch_order,
    batches,
    blend,
    chunk,
    convert,
    embed,
    extend,
    gather,
    gather_backward,
    gpt_batch,
    interpolate,
    merge,
    pack,
    resample_grid,
    resize,
    samples,
    similarity,
    windows,
)

BUILDERS: dict[str, Callable[[bool], list[Case]]] = {
    "gather": gather.build,
    "interpolate": interpolate.build,
    "extend": extend.build,
    "resample_grid": resample_grid.build,
    "similarity": similarity.build,
    "windows": windows.build,
    "chunk": chunk.build,
    "convert": convert.build,
    "merge": merge.build,
    "embed": embed.build,
    "gather_backward": gather_backward.build,
    "resize": resize.build,
    "samples": samples.build,
    "pack": pack.build,
    "gpt_batch": gpt_batch.build,
    "blend": blend.build,
    "batch_order": batch_order.build,
    "batches": batches.build,
}

# The cases of each kernel, in the order its builder makes them; the bench/
# suite parametrizes over these names without building the arrays.
# Names say what is compared and never carry a size (sizes are in each
# case's shape and may depend on the machine's caches).
CASE_NAMES = {
    "gather": ("out= given", "fresh output", "in cache, out=", "one row"),
    "interpolate": ("fresh output", "out= given", "lerp", "lerp 4 positions"),
    "extend": ("tile",),
    "resample_grid": ("bicubic", "bilinear", "antialias shrinking", "antialias growing"),
    "similarity": ("all pairs",),
    "windows": (
        "fresh output",
        "out= given",
        "CSR documents",
        "Arrow column",
        "group_texts",
        "stitch mean",
    ),
    "chunk": ("token file", "Parquet file", "Parquet, one row group", "indexed dataset"),
    "convert": ("token file", "Parquet file"),
    "merge": ("shards",),
    "embed": ("dropout 0.1", "no dropout", "4 tokens"),
    "gather_backward": ("positions", "token ids", "4 rows"),
    "resize": ("checkpoint",),
    "samples": ("sample index", "whole build", "blended build"),
    "pack": ("plan vs TRL", "plan at scale", "cut", "rows on the fly"),
    "gpt_batch": ("all switches",),
    "blend": ("blending indices", "exhaustive"),
    "batch_order": ("resume", "micro-batch indices"),
    "batches": ("GPT samples", "through a DataLoader"),
}


# Cases without a "reference" column, and why: every other case times its
# NumPy twin.
WITHOUT_REFERENCE = {
    ("samples", "blended build"): "a blend is gpt_samples per corpus and split (the 'whole "
    "build' row times their twin) and the blending indices",
    ("pack", "plan at scale"): "the twin places one piece at a time in Python (about 70 s "
    "for 10M documents here); the 'plan vs TRL' row times it on 200k",
    ("blend", "blending indices"): "the twin draws one sample at a time in Python (about "
    "20 us a sample over 1,000 datasets: minutes for 10M); the 'exhaustive' row times it on "
    "200k samples",
    ("batches", "GPT samples"): "the reading is gpt_batch's (its row times the twin); this "
    "row times the read-ahead and the order",
    ("batches", "through a DataLoader"): "the same reads in PyTorch's worker processes",
}


def cases_of(kernel: str, quick: bool = False) -> list[Case]:
    """The cases of one kernel, built (their arrays allocated)."""
    cases = BUILDERS[kernel](quick)
    assert tuple(c.name for c in cases) == CASE_NAMES[kernel]
    return cases


def all_cases(quick: bool = False) -> list[Case]:
    """Every kernel's cases, all built at once (mind the memory)."""
    return [case for kernel in BUILDERS for case in cases_of(kernel, quick)]

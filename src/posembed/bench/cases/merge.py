"""merge: ``posembed merge``, Megatron indexed datasets joined into one.

The "numpy" column holds megatron-core where it is installed (never a
dependency: the column is left empty without it): ``IndexedDatasetBuilder``
given each shard to ``add_index``, then ``finalize``, as Megatron's
``tools/merge_datasets.py`` merges. The roofline is a file of the merged
``.bin``'s size copied by the OS (``shutil.copyfile``): the tokens must be
copied once whatever merges them.
"""

from __future__ import annotations

import importlib.util
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

import posembed
from posembed import reference
from posembed.bench.case import Case
from posembed.bench.scratch import scratch_dir
from posembed.bench.sizes import sizes

SHARDS = 8
MEAN_TOKENS = 1000  # documents of 20..1999 tokens


def _remove(prefix: Path) -> None:
    for suffix in (".bin", ".idx"):
        Path(f"{prefix}{suffix}").unlink(missing_ok=True)


def _megatron_merge(shards: list[Path], out: Path) -> Callable[[], object] | None:
    """megatron-core's add_index + finalize over the shards, or None where it
    is not installed."""
    if importlib.util.find_spec("megatron") is None:
        return None
    try:
        with warnings.catch_warnings():  # it warns that Transformer Engine is absent
            warnings.simplefilter("ignore")
            from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
    except ImportError:  # installed without what it needs (PyTorch)
        return None

    def merge() -> None:
        _remove(out)
        builder = IndexedDatasetBuilder(f"{out}.bin", dtype=np.uint16)
        for shard in shards:
            builder.add_index(str(shard))
        builder.finalize(f"{out}.idx")

    return merge


def build(quick: bool = False) -> list[Case]:
    # The shards' tokens stream through memory: in all, the in-memory size.
    work = scratch_dir()
    total = sizes(quick).in_memory // 2  # uint16 tokens
    rng = np.random.default_rng(21)
    shards, documents = [], 0
    for k in range(SHARDS):
        lengths = rng.integers(20, 2 * MEAN_TOKENS, max(1, total // SHARDS // MEAN_TOKENS))
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        tokens = (np.arange(int(offsets[-1]), dtype=np.int64) * 7 + k) % 50_257
        posembed.write_indexed(work / f"shard{k}", tokens, offsets, dtype=np.uint16)
        shards.append(work / f"shard{k}")
        documents += len(lengths)
    # the roofline's source: one file as large as the merged tokens
    whole = work / "whole.bin"
    with open(whole, "wb") as out:
        for shard in shards:
            with open(f"{shard}.bin", "rb") as f:
                shutil.copyfileobj(f, out, 16 << 20)
    bin_bytes = whole.stat().st_size
    idx_bytes = 34 + 12 * documents + 8 * (documents + 1)

    def ours() -> object:
        # the last run's output removed first, as the roofline removes its copy
        _remove(work / "merged")
        return posembed.merge_indexed(shards, work / "merged")

    def reference_way() -> object:  # every shard read whole, written whole by the NumPy twin
        _remove(work / "reference")
        return reference.merge_indexed(shards, work / "reference")

    impls: dict[str, Callable[[], object]] = {"reference": reference_way, "posembed": ours}
    peer = _megatron_merge(shards, work / "megatron")
    if peer is not None:
        impls["numpy"] = peer

    def check() -> bool:
        ours()
        reference_way()
        return all(
            Path(f"{work / 'merged'}{s}").read_bytes()
            == Path(f"{work / 'reference'}{s}").read_bytes()
            for s in (".idx", ".bin")
        )

    return [
        Case(
            "merge",
            "shards",
            f"{SHARDS} shards, {bin_bytes >> 20} MB of uint16 tokens in {documents} documents"
            + ("; vs megatron add_index" if peer is not None else ""),
            bin_bytes + idx_bytes,
            impls,
            "file copy",
            check,
            in_bytes=bin_bytes,
            source=whole,
        )
    ]

"""samples: Megatron-LM GPTDataset's indices, against megatron-core's own code.

The "numpy" column holds megatron-core where it is installed (never a
dependency: the column is left empty without it): ``helpers.build_sample_idx``
for the sample index alone, and the construction of a ``GPTDataset`` (its
document, sample and shuffle index, built in memory) for the whole build.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import types
import warnings
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import numpy as np

import posembed
from posembed import reference
from posembed.bench.case import Case


def _megatron() -> types.SimpleNamespace | None:
    """megatron-core's dataset code, or None where it is not installed."""
    if importlib.util.find_spec("megatron") is None:
        return None
    try:
        with warnings.catch_warnings():
            # it warns that Transformer Engine and Apex are absent
            warnings.simplefilter("ignore")
            from megatron.core.datasets import helpers
            from megatron.core.datasets.blended_megatron_dataset_builder import (
                BlendedMegatronDatasetBuilder,
            )
            from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
            from megatron.core.datasets.utils import Split
    except ImportError:
        return None
    return types.SimpleNamespace(
        helpers=helpers,
        GPTDataset=GPTDataset,
        GPTDatasetConfig=GPTDatasetConfig,
        Split=Split,
        Builder=BlendedMegatronDatasetBuilder,
    )


@contextlib.contextmanager
def _quiet_megatron() -> Iterator[None]:
    """GPTDataset logs that it keeps its indices in memory; keep the table clean."""
    log = logging.getLogger("megatron")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        log.setLevel(level)


def build(quick: bool = False) -> list[Case]:
    # A pretraining corpus: 4M documents of about 500 tokens (2B tokens),
    # sequences of 4096; --quick: 200k documents (100M tokens).
    rng = np.random.default_rng(13)
    docs, seq = (200_000 if quick else 4_000_000), 4096
    lengths = rng.integers(1, 1000, docs).astype(np.int32)  # the .idx's int32 lengths
    tokens = int(lengths.sum())
    split = np.arange(docs, dtype=np.int32)  # GPTDataset's indexed_indices
    document_index = split.copy()
    np.random.RandomState(1234).shuffle(document_index)
    megatron = _megatron()
    samples_per_epoch = (tokens - 1) // seq
    wanted = samples_per_epoch + samples_per_epoch // 2  # two epochs, the final one apart
    shape_tokens = f"{docs // 1000}k documents, {tokens / 1e9:.2f}B tokens, L {seq}"

    # -- the sample index alone, over one epoch's shuffled document index
    index_args = (lengths, document_index, seq, 1, tokens)
    index_impls: dict[str, Callable[[], object]] = {
        "reference": partial(reference.gpt_sample_index, *index_args),
        "posembed": partial(posembed.gpt_sample_index, *index_args),
    }
    if megatron is not None:
        index_impls["numpy"] = partial(megatron.helpers.build_sample_idx, *index_args, True, True)

    def check_index() -> bool:
        ours = posembed.gpt_sample_index(*index_args)
        other: Any = index_impls.get("numpy", index_impls["reference"])()
        return bool(np.array_equal(ours, other)) and ours.dtype == other.dtype

    samples = (tokens - 1) // seq + 1
    cases = [
        Case(
            "samples",
            "sample index",
            f"{shape_tokens}; vs megatron build_sample_idx",
            samples * 2 * 4,
            index_impls,
            None,
            check_index,
        )
    ]

    # -- the document, sample and shuffle index together, as GPTDataset builds them
    run = partial(
        posembed.gpt_samples, lengths, seq, num_samples=wanted, seed=1234, documents=split
    )
    whole_impls: dict[str, Callable[[], object]] = {
        "reference": partial(
            reference.gpt_samples, lengths, seq, num_samples=wanted, seed=1234, documents=split
        ),
        "posembed": run,
    }
    gpt_dataset: Callable[[], Any] | None = None
    if megatron is not None:
        # what GPTDataset reads of its IndexedDataset here: the lengths
        low_level = types.SimpleNamespace(sequence_lengths=lengths, path_prefix="")
        tokenizer = types.SimpleNamespace(vocab_size=None, eod=0, unique_identifiers={})
        with _quiet_megatron():
            config = megatron.GPTDatasetConfig(
                random_seed=1234,
                sequence_length=seq,
                tokenizer=tokenizer,
                reset_position_ids=False,
                reset_attention_mask=False,
                eod_mask_loss=False,
            )  # no blend: "mock", so the indices stay in memory, no cache files

        def gpt_dataset() -> Any:
            with _quiet_megatron():
                return megatron.GPTDataset(
                    low_level, None, split, wanted, megatron.Split.train, config
                )

        whole_impls["numpy"] = gpt_dataset

    def check_whole() -> bool:
        ours = run()
        other = gpt_dataset() if gpt_dataset is not None else whole_impls["reference"]()
        return all(
            np.array_equal(getattr(ours, name), getattr(other, name))
            and getattr(ours, name).dtype == getattr(other, name).dtype
            for name in ("document_index", "sample_index", "shuffle_index")
        )

    cases.append(
        Case(
            "samples",
            "whole build",
            f"{shape_tokens}, 2 epochs; vs megatron GPTDataset",
            (2 * docs + 2 * 2 * wanted + wanted) * 4,
            whole_impls,
            None,
            check_whole,
        )
    )
    cases.append(_blended_build(megatron, quick))
    return cases


def _blended_build(megatron: types.SimpleNamespace | None, quick: bool) -> Case:
    """Every split of a weighted blend of 8 corpora of 4M documents each (200k with
    --quick), as Megatron's BlendedMegatronDatasetBuilder builds it: each
    corpus's three indices per split and each split's blend."""
    rng = np.random.default_rng(17)
    docs, seq, count = (200_000 if quick else 4_000_000), 4096, 8
    lengths = [rng.integers(1, 1000, docs).astype(np.int32) for _ in range(count)]
    names = [f"corpus_{k}" for k in range(count)]
    weights = rng.uniform(1.0, 3.0, count).tolist()
    per_epoch = sum(int(x.sum()) for x in lengths) // seq
    # train about 1.5 epochs of the blend, valid and test a few thousand samples
    sizes = [per_epoch + per_epoch // 2, per_epoch // 50, per_epoch // 500]
    split = "969,30,1"
    corpora = list(zip(names, lengths, strict=True))

    def ours() -> Any:
        return posembed.gpt_blend(
            corpora, weights, split=split, sizes=sizes, sequence_length=seq, seed=1234
        )

    impls: dict[str, Callable[[], object]] = {"posembed": ours}
    theirs: Callable[[], Any] | None = None
    if megatron is not None:
        by_name = dict(zip(names, lengths, strict=True))

        class InMemory(megatron.GPTDataset):  # type: ignore[name-defined,misc]
            """GPTDataset over lengths held in memory: what it reads of an IndexedDataset."""

            @staticmethod
            def build_low_level_dataset(dataset_path: str, config: Any) -> Any:
                return types.SimpleNamespace(
                    sequence_lengths=by_name[dataset_path], path_prefix=dataset_path
                )

        with _quiet_megatron():
            config = megatron.GPTDatasetConfig(
                random_seed=1234,
                sequence_length=seq,
                blend=(names, weights),
                split=split,
                tokenizer=types.SimpleNamespace(vocab_size=None, eod=0, unique_identifiers={}),
                reset_position_ids=False,
                reset_attention_mask=False,
                eod_mask_loss=False,
                path_to_cache="",  # empty: every index built in memory, none written
            )

        def theirs() -> Any:
            with _quiet_megatron():
                return megatron.Builder(InMemory, sizes, lambda: True, config).build()

        impls["numpy"] = theirs

    def check() -> bool:
        if theirs is None:
            return True
        mine, other = ours(), theirs()
        for part, blend in zip(mine.splits, other, strict=True):
            if part is None or blend is None:
                if part is not blend:
                    return False
                continue
            pairs = [
                (part.dataset_index, blend.dataset_index),
                (part.dataset_sample_index, blend.dataset_sample_index),
            ]
            for samples, dataset in zip(part.datasets, blend.datasets, strict=True):
                pairs += [
                    (getattr(samples, name), getattr(dataset, name))
                    for name in ("document_index", "sample_index", "shuffle_index")
                ]
            if not all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in pairs):
                return False
        return True

    # the indices built, about: each corpus's document index (1 to 2 epochs of its
    # documents, int32), its sample and shuffle index and the blends' two
    out_bytes = count * 2 * docs * 4 + sum(sizes) * (1 + 1 / 200) * (8 + 4) + sum(sizes) * 10
    return Case(
        "samples",
        "blended build",
        f"8 corpora of {docs // 1000}k documents, L {seq}, split {split}; "
        "vs megatron's BlendedMegatronDatasetBuilder",
        int(out_bytes),
        impls,
        None,
        check,
    )

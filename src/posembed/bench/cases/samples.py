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
            from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
            from megatron.core.datasets.utils import Split
    except ImportError:
        return None
    return types.SimpleNamespace(
        helpers=helpers, GPTDataset=GPTDataset, GPTDatasetConfig=GPTDatasetConfig, Split=Split
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
    return cases

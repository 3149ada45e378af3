"""gpt_batch: a batch of GPT samples as a trainer consumes it, against megatron-core.

The "numpy" column holds megatron-core where it is installed (never a
dependency: the column is left empty without it): a loop of
``GPTDataset.__getitem__`` over the same samples, with the same switches
(the dense attention mask off on both sides), over the same indexed dataset.
The roofline ("page cache read") takes the same byte ranges of the warm
``.bin`` from the page cache on all threads (positional reads, or copies out
of a mapping of the file, whichever is faster), then writes the batch's
output bytes into the memory the batch's outputs are made on (a freed
batch's block of posembed's output cache, taken from that cache): the least
any implementation that reads those tokens and writes those outputs must do.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import posembed
from posembed import _core, reference
from posembed.bench.case import Case
from posembed.bench.cases.samples import _megatron, _quiet_megatron
from posembed.bench.scratch import scratch_dir

EOD = 0
SWITCHES = {"reset_position_ids": True, "reset_attention_mask": True, "eod_mask_loss": True}


def _reads(samples: posembed.GPTSamples, wanted: np.ndarray, corpus: Any) -> np.ndarray:
    """(byte offset, length) of each piece of the .bin the samples read, in order."""
    extra = int(samples.add_extra_token_to_sequence)
    item = corpus.dtype.itemsize
    offsets = corpus.offsets
    ranges = []
    for index in wanted.tolist():
        number = int(samples.shuffle_index[index])
        (first, first_offset), (last, last_offset) = samples.sample_index[number : number + 2]
        for position in range(int(first), int(last) + 1):
            sequence = int(samples.document_index[position])
            start = int(first_offset) if position == first else 0
            stop = (
                int(last_offset) + extra
                if position == last
                else int(offsets[sequence + 1] - offsets[sequence])
            )
            if stop > start:
                ranges.append(((int(offsets[sequence]) + start) * item, (stop - start) * item))
    return np.array(ranges, dtype=np.int64)


def batch_bytes(*batches: Any) -> int:
    """The bytes of the outputs of these GPT batches (their arrays as written)."""
    fields = ("tokens", "labels", "loss_mask", "position_ids", "cu_seqlens", "cu_seqlens_padded")
    return sum(getattr(b, name).nbytes for b in batches for name in fields)


def output_block(array: np.ndarray) -> int:
    """The size of the block of posembed's output cache an output array is
    made on (through the views over it), or 0 where it is on none."""
    base: Any = array
    while isinstance(base, np.ndarray):
        base = base.base
    return max(0, int(_core._probes.output_block_size(base)))


def megatron_dataset(prefix: Any, split: np.ndarray, seq: int, wanted: int) -> Any:
    """megatron-core's GPTDataset over the indexed dataset at ``prefix`` with
    this case's switches (the dense attention mask off), or None where
    megatron-core is not installed."""
    megatron = _megatron()
    if megatron is None:
        return None
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    tokenizer = types.SimpleNamespace(vocab_size=None, eod=EOD, unique_identifiers={})
    with _quiet_megatron():
        config = megatron.GPTDatasetConfig(
            random_seed=1234,
            sequence_length=seq,
            tokenizer=tokenizer,
            create_attention_mask=False,
            **SWITCHES,
        )  # no blend: "mock", so the indices stay in memory, no cache files
        return megatron.GPTDataset(
            IndexedDataset(str(prefix)), None, split, wanted, megatron.Split.train, config
        )


def build(quick: bool = False) -> list[Case]:
    # A batch of 64 samples of 4,096 tokens from a corpus of documents of
    # about 500 tokens, each ending with EOD, in a uint16 .bin (Megatron's
    # dtype for vocabularies under 65,500).
    rng = np.random.default_rng(17)
    docs, seq, batch = (20_000 if quick else 200_000), 4096, (16 if quick else 64)
    lengths = rng.integers(2, 1000, docs)
    tokens = rng.integers(1, 50_000, int(lengths.sum())).astype(np.uint16)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens[offsets[1:] - 1] = EOD
    prefix = scratch_dir() / "corpus"
    posembed.write_indexed(prefix, tokens, offsets, dtype=np.uint16)
    corpus = posembed.IndexedCorpus(prefix, documents="sequences")
    split = np.arange(docs, dtype=np.int32)
    wanted_samples = 4 * batch
    samples = posembed.gpt_samples(
        corpus.sequence_lengths, seq, num_samples=wanted_samples, seed=1234, documents=split
    )
    wanted = np.arange(batch, 2 * batch)  # the second step of a training run
    run = partial(posembed.gpt_batch, samples, wanted, corpus, eod=EOD, **SWITCHES)
    impls: dict[str, Callable[[], object]] = {
        "reference": partial(reference.gpt_batch, samples, wanted, corpus, eod=EOD, **SWITCHES),
        "posembed": run,
    }
    dataset = megatron_dataset(prefix, split, seq, wanted_samples)
    if dataset is not None:

        def loop() -> list[Any]:
            return [dataset[i] for i in wanted.tolist()]

        impls["numpy"] = loop

    def check() -> bool:
        ours = run()
        if dataset is None:
            other = impls["reference"]()
            return all(
                np.array_equal(getattr(ours, name), getattr(other, name))
                for name in ("tokens", "labels", "loss_mask", "position_ids", "cu_seqlens")
            )
        rows = [dataset[i] for i in wanted.tolist()]
        return all(
            np.array_equal(getattr(ours, name), np.stack([r[name].numpy() for r in rows]))
            for name in ("tokens", "labels", "loss_mask", "position_ids")
        )

    made = run()
    out_bytes = batch_bytes(made)
    block = output_block(made.tokens)
    del made  # its block back to the cache, for the calls timed
    return [
        Case(
            "gpt_batch",
            "all switches",
            f"{batch} samples of {seq} tokens, reset positions and attention, EOD loss masked, "
            f"from a {docs // 1000}k-document .bin; vs a loop of megatron GPTDataset[i]",
            out_bytes,
            impls,
            "page cache read",
            check,
            source=corpus.bin_path,
            reads=_reads(samples, wanted, corpus),
            out_block=block,
        )
    ]

"""Batches: a rank's micro-batches of GPT samples as a training loop reads them.

Each call takes one epoch of a small set of GPT samples (the same samples
every call: the order's stream runs epoch after epoch) from an iterator that
stays open, as a training loop's does: the steady rate, read-ahead included,
worker start-up not. "posembed" is :class:`posembed.Batches` (its read-ahead
thread) on one process; in the "through a DataLoader" case it is
``posembed.torch.BatchLoader`` with 2 worker processes. The "numpy" column is
megatron-core where it is installed (never a dependency): its ``GPTDataset``
over the same indexed dataset, with the same switches, through a PyTorch
``DataLoader`` with 2 workers and the same micro-batch size. The roofline
("page cache read") takes the same byte ranges of the warm ``.bin`` from the
page cache on all threads and writes the batches' output bytes, as
gpt_batch's does: into blocks of posembed's output cache of the size a run of
micro-batches read ahead is made on, one after another.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import posembed
from posembed.bench.case import Case, unmeasured
from posembed.bench.cases._shared import absent, optional_torch
from posembed.bench.cases.gpt_batch import (
    EOD,
    SWITCHES,
    _reads,
    batch_bytes,
    megatron_dataset,
    output_block,
)
from posembed.bench.scratch import scratch_dir

MICRO = 8
FIELDS = ("tokens", "labels", "loss_mask", "position_ids")


def _endless(make: Callable[[], Iterator[Any]]) -> Callable[[int], object]:
    """take(n): the next n items of one iterator, made at the first call and
    kept; each item dropped once the next comes, as a training loop drops a
    batch once it has trained on it (its memory is then reused)."""
    held: list[Iterator[Any]] = []

    def take(n: int) -> object:
        if not held:
            held.append(make())
        last = None
        for item in itertools.islice(held[0], n):
            last = item
        return last

    return take


def _megatron_loader(prefix: Any, split: np.ndarray, seq: int, wanted: int) -> Any:
    dataset = megatron_dataset(prefix, split, seq, wanted)
    if dataset is None:
        return None
    import torch

    class Cycle(torch.utils.data.Sampler):  # type: ignore[type-arg,misc,unused-ignore]
        def __iter__(self) -> Iterator[int]:
            return itertools.cycle(range(len(dataset)))

    return torch.utils.data.DataLoader(
        dataset, batch_size=MICRO, sampler=Cycle(), num_workers=2, prefetch_factor=2
    )


def build(quick: bool = False) -> list[Case]:
    # GPT samples of 4,096 tokens from a corpus of documents of about 500
    # tokens, each ending with EOD, in a uint16 .bin; an epoch of them a call
    rng = np.random.default_rng(23)
    docs, seq = (1_000 if quick else 8_000), 4096
    lengths = rng.integers(2, 1000, docs)
    tokens = rng.integers(1, 50_000, int(lengths.sum())).astype(np.uint16)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens[offsets[1:] - 1] = EOD
    prefix = scratch_dir() / "batches_corpus"
    posembed.write_indexed(prefix, tokens, offsets, dtype=np.uint16)
    corpus = posembed.IndexedCorpus(prefix, documents="sequences")
    split = np.arange(docs, dtype=np.int32)
    wanted = int(lengths.sum()) // (seq + 1) // MICRO * MICRO  # one epoch, whole micro-batches
    samples = posembed.gpt_samples(
        corpus.sequence_lengths, seq, num_samples=wanted, seed=1234, documents=split
    )
    count = len(samples) // MICRO * MICRO
    steps = count // MICRO

    def order() -> Any:
        return posembed.BatchOrder(samples, global_batch_size=MICRO, micro_batch_size=MICRO)

    ours = _endless(lambda: iter(posembed.Batches(order(), corpus, eod=EOD, **SWITCHES)))

    def through_loader() -> Iterator[Any]:
        from posembed.torch import BatchLoader

        return iter(
            BatchLoader(posembed.Batches(order(), corpus, eod=EOD, **SWITCHES), num_workers=2)
        )

    loader = _endless(through_loader)
    theirs_loader = _megatron_loader(prefix, split, seq, wanted)
    theirs = None if theirs_loader is None else _endless(lambda: iter(theirs_loader))

    def check() -> bool:
        got = posembed.Batches(order(), corpus, prefetch=0, eod=EOD, **SWITCHES)
        first = next(iter(got))
        want = posembed.gpt_batch(samples, np.arange(MICRO), corpus, eod=EOD, **SWITCHES)
        same = all(np.array_equal(getattr(first.batch, n), getattr(want, n)) for n in FIELDS)
        if theirs_loader is not None:
            rows = next(iter(theirs_loader))
            same = same and all(np.array_equal(rows[n].numpy(), getattr(want, n)) for n in FIELDS)
        return same

    def impls(own: Callable[[int], object]) -> dict[str, Callable[[], object]]:
        out: dict[str, Callable[[], object]] = {"posembed": lambda: own(steps)}
        if theirs is not None:
            out["numpy"] = lambda: theirs(steps)
        return out

    reads = _reads(samples, np.arange(count), corpus)
    # each micro-batch's outputs, as Batches writes them
    read_all = posembed.Batches(order(), corpus, prefetch=0, eod=EOD, **SWITCHES)
    out_bytes = batch_bytes(*(m.batch for m in itertools.islice(read_all, steps)))
    # the block of the output cache a run of micro-batches read ahead is made on
    ahead = posembed.Batches(order(), corpus, eod=EOD, **SWITCHES)
    first = next(iter(ahead)).batch
    assert isinstance(first, posembed.GPTBatch)  # GPT samples' micro-batches
    block = output_block(first.tokens)
    ahead.close()
    shape = (
        f"{steps} micro-batches of {MICRO} samples of {seq} tokens (an epoch), all switches, "
        f"from a {docs // 1000}k-document .bin; vs megatron GPTDataset in a DataLoader "
        "with 2 workers"
    )
    cases = [
        Case(
            "batches",
            "GPT samples",
            shape,
            out_bytes,
            impls(ours),
            "page cache read",
            check,
            source=corpus.bin_path,
            reads=reads,
            out_block=block,
        )
    ]
    if optional_torch() is None:
        cases.append(unmeasured("batches", "through a DataLoader", absent("torch")))
        return cases
    cases.append(
        Case(
            "batches",
            "through a DataLoader",
            shape.replace("all switches", "all switches, 2 workers"),
            out_bytes,
            impls(loader),
            "page cache read",
            check,
            source=corpus.bin_path,
            reads=reads,
            out_block=block,
        )
    )
    return cases

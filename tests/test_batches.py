"""Batches: a rank's micro-batches of a BatchOrder, read ahead, resumed exactly.

A run interrupted at random global batches and resumed with another world size
(4 -> 2 -> 8 ranks, simulated in one process) gives, global batch after global
batch, the same data as one uninterrupted run, for GPT samples from an indexed
dataset, a blend of two corpora and a packing plan's rows, across epoch
boundaries; every epoch reads each sample once. A state whose order changed is
refused with the change named; the read-ahead thread's errors reach the caller
and the thread stops; an indexed dataset in an object store (moto's S3 server
on the loopback address) gives the local batches.
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import posembed
from posembed.corpus._batches import _NativeAhead

EOD = 0
G, M = 16, 2  # global and micro-batch size: 1, 2, 4 and 8 ranks divide it
STEPS = 7  # global batches a run reads: 112 samples, past two epoch ends
GPT_FIELDS = ("tokens", "labels", "loss_mask", "position_ids", "cu_seqlens_padded")
PACK_FIELDS = ("input_ids", "position_ids", "labels", "seq_lengths", "documents", "starts")


def corpus(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 30, n)
    tokens = rng.integers(1, 500, int(lengths.sum())).astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens[offsets[1:] - 1] = EOD
    return tokens, offsets


def take(items: Any, n: int) -> list[Any]:
    return list(itertools.islice(items, n))


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    return make_sources(tmp_path_factory)


def make_sources(tmp_path_factory: Any) -> dict[str, tuple]:
    """(source, corpus, read options, fields) for GPT samples, a blend and a plan."""
    folder = tmp_path_factory.mktemp("batches")
    tokens, offsets = corpus(1, 60)
    posembed.write_indexed(folder / "a", tokens, offsets, dtype=np.uint16)
    indexed = posembed.IndexedCorpus(folder / "a", documents="sequences")
    samples = posembed.gpt_samples(indexed.sequence_lengths, 16, num_samples=40, seed=3)
    b_tokens, b_offsets = corpus(2, 50)
    blend = posembed.gpt_blend(
        [np.diff(offsets), np.diff(b_offsets)],
        [0.3, 0.7],
        split="100",
        sizes=[45, 0, 0],
        sequence_length=8,
        seed=5,
    ).train
    plan = posembed.pack(np.diff(offsets), 48)
    options = {"eod": EOD, "reset_position_ids": True, "eod_mask_loss": True}
    return {
        "samples": (samples, indexed, options, GPT_FIELDS),
        "blend": (blend, [(tokens, offsets), (b_tokens, b_offsets)], {"eod": EOD}, GPT_FIELDS),
        "packed": (plan, indexed, {}, PACK_FIELDS),
    }


def order(source: Any, world_size: int = 1, rank: int = 0, **kw: Any) -> Any:
    return posembed.BatchOrder(
        source, global_batch_size=G, micro_batch_size=M, world_size=world_size, rank=rank, **kw
    )


def stacked(parts: list[Any], fields: tuple[str, ...]) -> dict[str, np.ndarray]:
    return {name: np.concatenate([getattr(p, name) for p in parts]) for name in fields}


def global_batches(
    source: Any, data: Any, options: dict[str, Any], fields: tuple[str, ...], plan: list[tuple]
) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """Run ``plan``: (world size, prefetch, global batches) segments, each resumed
    from the state rank 0 saved at the end of the one before. Returns each global
    batch's samples and data, the ranks' micro-batches put back in order."""
    out, state = [], None
    for world_size, prefetch, steps in plan:
        steps_per_rank = steps * G // (M * world_size)
        per_rank = []
        for rank in range(world_size):
            batches = posembed.Batches(
                order(source, world_size, rank), data, prefetch=prefetch, **options
            )
            if state is not None:
                batches.load_state_dict(state)
            with batches:
                got = take(batches, steps_per_rank)
            assert [mb.step for mb in got] == list(range(got[0].step, got[0].step + steps_per_rank))
            per_rank.append(got)
            if rank == 0:
                saved = batches.state_dict()
        state = saved
        a = G // (M * world_size)
        for k in range(steps):
            parts = [per_rank[r][k * a + s] for s in range(a) for r in range(world_size)]
            indices = np.concatenate([p.indices for p in parts])
            out.append((indices, stacked([p.batch for p in parts], fields)))
    return out


@pytest.mark.parametrize("kind", ["samples", "blend", "packed"])
def test_resumed_on_other_world_sizes_gives_the_uninterrupted_batches(sources, kind):
    source, data, options, fields = sources[kind]
    whole = global_batches(source, data, options, fields, [(1, 2, STEPS)])
    rng = np.random.default_rng(len(kind))
    cut = sorted(rng.choice(np.arange(1, STEPS), 2, replace=False).tolist())
    plan = [(4, 2, cut[0]), (2, 0, cut[1] - cut[0]), (8, 3, STEPS - cut[1])]
    resumed = global_batches(source, data, options, fields, plan)
    assert len(resumed) == len(whole) == STEPS
    for k, ((i1, d1), (i2, d2)) in enumerate(zip(whole, resumed, strict=True)):
        np.testing.assert_array_equal(i1, i2, err_msg=f"global batch {k}")
        for name in fields:
            np.testing.assert_array_equal(d1[name], d2[name], err_msg=f"{name}, global batch {k}")
    # each global batch is the order's, read as one batch
    reference_order = order(source)
    for k, (indices, _) in enumerate(whole):
        np.testing.assert_array_equal(indices, reference_order.global_batch(k))
    # every epoch reads each sample once: none lost, none repeated
    stream = np.concatenate([i for i, _ in whole])
    n = reference_order.num_samples
    assert stream.shape[0] > 2 * n
    for e in range(stream.shape[0] // n):
        assert sorted(stream[e * n : (e + 1) * n].tolist()) == list(range(n))


def test_the_rows_are_what_the_reader_gives(sources):
    samples, indexed, options, fields = sources["samples"]
    batches = posembed.Batches(order(samples, 2, 1), indexed, **options)
    with batches:
        first, second = take(batches, 2)
    assert (first.step, first.consumed_samples, second.step) == (0, 4, 1)
    np.testing.assert_array_equal(first.indices, [2, 3])
    want = posembed.gpt_batch(samples, [6, 7], indexed, **options)
    for name in (*fields, "cu_seqlens"):
        np.testing.assert_array_equal(getattr(second.batch, name), getattr(want, name))
    assert batches.state_dict()["consumed_samples"] == 8
    plan, _, _, _ = sources["packed"]
    tokens, offsets = corpus(1, 60)
    windows = posembed.windows(tokens, 12, offsets=offsets)
    for source in (plan, windows):
        o = order(source, 4, 3)
        got = next(iter(posembed.Batches(o, None if source is windows else indexed)))
        np.testing.assert_array_equal(got.indices, o.sample_at(np.array([6, 7])))
    np.testing.assert_array_equal(got.batch.tokens, windows.tokens[got.indices])


def test_the_state_counts_what_was_given_not_what_was_read_ahead(sources):
    samples, indexed, options, _ = sources["samples"]
    o = order(samples, 2, 0)
    batches = posembed.Batches(o, indexed, prefetch=8, **options)
    it = iter(batches)
    for i in range(3):
        next(it)
        assert batches.state_dict()["consumed_samples"] == (i + 1) * 4
    it.close()
    assert batches.state_dict()["consumed_samples"] == 12
    # the next iteration goes on from there
    assert next(iter(batches)).step == 3
    batches.close()


def test_workers_take_turns(sources):
    samples, indexed, options, _ = sources["samples"]
    batches = posembed.Batches(order(samples, 2, 1), indexed, **options)
    whole = posembed.Batches(order(samples, 2, 1), indexed, **options)
    plain = [mb.step for mb in take(whole, 9)]
    shares = [[mb.step for mb in take(batches.worker(w, 3), 3)] for w in range(3)]
    assert [shares[i % 3][i // 3] for i in range(9)] == plain
    assert batches.consumed_samples == 0  # a worker's share leaves the position alone
    with pytest.raises(ValueError, match=r"worker must be 0\.\.2"):
        batches.worker(3, 3)


def test_batches_pickle_for_spawned_workers_without_their_thread(sources):
    samples, indexed, options, _ = sources["samples"]
    batches = posembed.Batches(order(samples, 2, 1), indexed, prefetch=1, **options)
    running = iter(batches)
    first = next(running)
    copy = pickle.loads(pickle.dumps(batches))
    assert copy.consumed_samples == batches.consumed_samples == 4
    got = next(iter(copy))
    assert got.step == first.step + 1
    np.testing.assert_array_equal(got.indices, next(running).indices)
    batches.close()
    copy.close()


def test_total_samples_ends_the_run(sources):
    samples, indexed, options, _ = sources["samples"]
    batches = posembed.Batches(order(samples, 2, 0), indexed, total_samples=3 * G, **options)
    assert len(list(batches)) == 3 * G // 4
    assert list(batches) == []
    with pytest.raises(ValueError, match="total_samples must be a multiple of"):
        posembed.Batches(order(samples, 2, 0), indexed, total_samples=6, **options)


class Failing:
    """A reader whose reads of token ``bad`` fail (a bad sector), every time."""

    def __init__(self, data: tuple[np.ndarray, np.ndarray], bad: int) -> None:
        self.tokens, self.offsets = data
        self.bad = bad
        self.reads: list[tuple[int, int]] = []

    def read(self, start: int, stop: int) -> np.ndarray:
        self.reads.append((start, stop))
        if start <= self.bad < stop:
            raise OSError(f"the disk went away at token {self.bad}")
        return self.tokens[start:stop]


def _threads() -> list[Any]:
    """The read-ahead's threads alive: Python ones, and the native readers of GPT samples."""
    native = [None] * posembed._core.gpt_batch_ahead_readers()
    return [t for t in threading.enumerate() if t.name == "posembed-batches"] + native


class Slow:
    """A reader that dawdles over the tokens of ``slow`` (a range), so that a
    later run read on another thread is ready first."""

    def __init__(self, data: tuple[np.ndarray, np.ndarray], slow: range) -> None:
        self.tokens, self.offsets = data
        self.slow = slow

    def read(self, start: int, stop: int) -> np.ndarray:
        if start < self.slow.stop and self.slow.start < stop:
            time.sleep(0.05)
        return self.tokens[start:stop]


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_runs_read_on_several_threads_come_in_order(threads, restore_threads):
    tokens, offsets = corpus(1, 60)
    samples = posembed.gpt_samples(np.diff(offsets), 16, num_samples=40, seed=3)
    want = [
        (mb.step, mb.indices, mb.batch)
        for mb in take(posembed.Batches(order(samples), (tokens, offsets), prefetch=0, eod=EOD), 30)
    ]
    # the first micro-batch's reads are slow: the second run, on another reader, is ready first
    probe = Failing((tokens, offsets), -1)
    next(iter(posembed.Batches(order(samples), probe, prefetch=0, eod=EOD)))
    start, stop = probe.reads[0]
    posembed.set_num_threads(threads)
    batches = posembed.Batches(
        order(samples), Slow((tokens, offsets), range(start, stop)), prefetch=2, eod=EOD
    )
    with batches:
        items = iter(batches)
        got = [next(items) for _ in range(30)]
        assert len(_threads()) == min(threads, 2)  # at most one more run than prefetch asks
    assert [mb.step for mb in got] == [w[0] for w in want]
    for mb, (_, indices, batch) in zip(got, want, strict=True):
        np.testing.assert_array_equal(mb.indices, indices)
        for name in GPT_FIELDS:
            np.testing.assert_array_equal(getattr(mb.batch, name), getattr(batch, name))


@pytest.mark.parametrize("threads", [2, 3])
def test_an_error_in_an_earlier_run_wins_over_a_later_run_read_first(threads, restore_threads):
    tokens, offsets = corpus(1, 60)
    samples = posembed.gpt_samples(np.diff(offsets), 16, num_samples=40, seed=3)
    probe = Failing((tokens, offsets), -1)
    items = iter(posembed.Batches(order(samples), probe, prefetch=0, eod=EOD))
    next(items)
    first = set(range(*probe.reads[0]))
    probe.reads.clear()
    next(items)
    # a token the first micro-batch reads, and the second does not
    bad = min(first - {t for a, b in probe.reads for t in range(a, b)})

    class SlowFailing(Failing):
        def read(self, start: int, stop: int) -> np.ndarray:
            if start <= self.bad < stop:
                time.sleep(0.05)  # the second run is read meanwhile
            return super().read(start, stop)

    posembed.set_num_threads(threads)
    batches = posembed.Batches(
        order(samples), SlowFailing((tokens, offsets), bad), prefetch=1, eod=EOD
    )
    with pytest.raises(OSError, match=f"the disk went away at token {bad}"):
        next(iter(batches))
    assert batches.consumed_samples == 0
    assert _threads() == []


@pytest.mark.parametrize("prefetch", [0, 3])
def test_a_reading_error_reaches_the_caller_and_the_thread_stops(prefetch):
    tokens, offsets = corpus(1, 60)
    samples = posembed.gpt_samples(np.diff(offsets), 16, num_samples=40, seed=3)
    # a token that micro-batch 3 reads and none before it does
    probe = Failing((tokens, offsets), -1)
    seen: list[list[tuple[int, int]]] = []
    for _ in itertools.islice(posembed.Batches(order(samples), probe, prefetch=0, eod=EOD), 4):
        seen.append(probe.reads[:])
        probe.reads.clear()
    before = {t for start, stop in itertools.chain(*seen[:3]) for t in range(start, stop)}
    bad = next(t for start, stop in seen[3] for t in range(start, stop) if t not in before)
    batches = posembed.Batches(
        order(samples), Failing((tokens, offsets), bad), prefetch=prefetch, eod=EOD
    )
    got: list[int] = []

    def read_all() -> None:
        got.extend(mb.step for mb in batches)

    with pytest.raises(OSError, match=f"the disk went away at token {bad}"):
        read_all()
    assert got == [0, 1, 2]  # the micro-batches before the failing one were given
    assert batches.consumed_samples == len(got) * M
    assert _threads() == []


def test_the_thread_stops_on_close_on_exit_and_when_dropped(sources, restore_threads):
    samples, indexed, options, _ = sources["samples"]
    posembed.set_num_threads(1)  # one reader
    batches = posembed.Batches(order(samples), indexed, prefetch=4, **options)
    it = iter(batches)
    next(it)
    assert len(_threads()) == 1
    batches.close()
    assert _threads() == []
    assert list(it) == []  # the closed iteration gives nothing more
    posembed.set_num_threads(3)  # two readers, and the caller's thread while it waits
    with batches:
        held = iter(batches)
        next(held)
        assert len(_threads()) == 2
    assert _threads() == []
    next(iter(batches))  # an iterator dropped at once stops its thread at once
    assert _threads() == []
    it = iter(batches)
    next(it)
    del it
    gc.collect()
    assert _threads() == []
    # a new iteration ends the one before
    first = iter(batches)
    step = next(first).step
    second = iter(batches)
    assert next(second).step == step + 1
    assert list(first) == []
    batches.close()
    assert _threads() == []


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_caller_that_waits_reads_shares_itself_and_gets_the_same_batches(
    tmp_path, threads, restore_threads
):
    # one reader thread fewer than the kernels' threads (one where there is
    # one): a loop that does nothing but take micro-batches waits for them,
    # and reads shares of the runs with the readers meanwhile where that
    # keeps to the threads (never with one); what it gets is what reading
    # each micro-batch on the caller gives
    tokens, offsets = corpus(4, 400)
    posembed.write_indexed(tmp_path / "c", tokens, offsets, dtype=np.uint16)
    indexed = posembed.IndexedCorpus(tmp_path / "c", documents="sequences")
    samples = posembed.gpt_samples(indexed.sequence_lengths, 256, num_samples=300, seed=3)
    posembed.set_num_threads(threads)
    options = {"eod": EOD, "reset_position_ids": True, "reset_attention_mask": True}
    before = posembed._core.gpt_batch_ahead_caller_shares()
    with posembed.Batches(order(samples), indexed, prefetch=4, **options) as ahead:
        running = iter(ahead)
        got = list(itertools.islice(running, 150))
        assert len(_threads()) == max(1, threads - 1)
    read_by_caller = posembed._core.gpt_batch_ahead_caller_shares() - before
    assert read_by_caller > 0 if threads > 1 else read_by_caller == 0
    alone = posembed.Batches(order(samples), indexed, prefetch=0, **options)
    for mb, want in zip(got, itertools.islice(alone, 150), strict=True):
        assert mb.step == want.step
        for name in (*GPT_FIELDS, "cu_seqlens"):
            assert np.array_equal(getattr(mb.batch, name), getattr(want.batch, name)), name
        assert mb.batch.max_seqlen == want.batch.max_seqlen


def test_read_ahead_micro_batches_are_whole_frozen_dataclasses(sources):
    # the read-ahead makes its micro-batches and batches without their
    # __init__ (cheaper on the caller's thread): the same fields, still frozen
    samples, indexed, options, _ = sources["samples"]
    with posembed.Batches(order(samples), indexed, prefetch=4, **options) as ahead:
        got = next(iter(ahead))
    alone = next(iter(posembed.Batches(order(samples), indexed, prefetch=0, **options)))
    for made, want in ((got, alone), (got.batch, alone.batch)):
        assert type(made) is type(want)
        names = [f.name for f in dataclasses.fields(want)]
        assert list(vars(made)) == names
        for name in names:
            a, b = getattr(made, name), getattr(want, name)
            if name != "batch":  # compared as the second pair
                assert np.array_equal(a, b) if isinstance(b, np.ndarray) else a == b, name
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.step = 1  # type: ignore[misc]
    assert dataclasses.replace(got.batch, max_seqlen=3).max_seqlen == 3


@pytest.mark.parametrize("threads", [1, 2])
def test_a_close_from_another_thread_ends_an_iteration_whose_caller_reads(
    sources, threads, restore_threads
):
    # the caller of a data-bound loop reads shares of the runs it waits for
    # (no GIL held): a close from another thread waits for the share it
    # reads, then ends the iteration, in order up to there
    samples, indexed, options, _ = sources["samples"]
    posembed.set_num_threads(threads)
    for _ in range(10):
        batches = posembed.Batches(order(samples), indexed, prefetch=4, **options)
        closer = threading.Timer(0.005, batches.close)
        closer.start()
        steps = [mb.step for mb in batches]  # no total_samples: only the close ends it
        closer.join()
        assert steps == list(range(len(steps)))
        assert _threads() == []


def test_a_changed_order_is_refused_by_name(sources, tmp_path):
    samples, indexed, options, _ = sources["samples"]
    batches = posembed.Batches(order(samples), indexed, **options)
    with batches:
        next(iter(batches))
    state = batches.state_dict()
    other_seed = posembed.Batches(order(samples, seed=9), indexed, **options)
    with pytest.raises(ValueError, match="seed"):
        other_seed.load_state_dict(state)
    blend, corpora, blend_options, _ = sources["blend"]
    saved = posembed.Batches(order(blend), corpora, **blend_options).state_dict()
    reweighted = posembed.gpt_blend(
        [np.diff(c[1]) for c in corpora],
        [0.5, 0.5],
        split="100",
        sizes=[45, 0, 0],
        sequence_length=8,
        seed=5,
    ).train
    with pytest.raises(ValueError, match="weights"):
        posembed.Batches(order(reweighted), corpora, **blend_options).load_state_dict(saved)
    plan = sources["packed"][0]
    saved = posembed.Batches(order(plan), indexed).state_dict()
    lengths = plan.document_lengths.copy()
    lengths[0] += 1
    with pytest.raises(ValueError, match="lengths"):
        posembed.BatchOrder(
            posembed.pack(lengths, 48), global_batch_size=G, micro_batch_size=M
        ).load_state_dict(saved)


def test_bad_options_are_named_before_anything_is_read(sources):
    samples, indexed, _, _ = sources["samples"]
    with pytest.raises(TypeError, match=r"eod .* is required"):
        posembed.Batches(order(samples), indexed)
    with pytest.raises(TypeError, match="unknown read option 'eos'"):
        posembed.Batches(order(samples), indexed, eod=0, eos=1)
    with pytest.raises(ValueError, match=r"prefetch must be 0\.\.1024"):
        posembed.Batches(order(samples), indexed, prefetch=-1, eod=0)
    with pytest.raises(TypeError, match=r"order must be a posembed\.BatchOrder"):
        posembed.Batches(samples, indexed, eod=0)
    with pytest.raises(ValueError, match="corpus"):  # another corpus than the samples'
        posembed.Batches(order(samples), corpus(9, 5), eod=0)


def test_packed_rows_carry_their_columns_and_cut_options(sources):
    plan, indexed, _, _ = sources["packed"]
    tokens, _ = corpus(1, 60)
    mask = np.arange(tokens.shape[0]) % 3 == 0  # a completion mask, one value per token
    options = {"columns": {"mask": mask}, "position_start": 2, "separator_id": -1}
    with posembed.Batches(order(plan, 2, 1), indexed, **options) as batches:
        got = take(batches, 3)[-1]
    want = plan.cut(indexed, rows=got.indices, labels=True, **options)
    for name in ("input_ids", "position_ids", "labels", "cu_seqlens"):
        np.testing.assert_array_equal(getattr(got.batch, name), getattr(want, name))
    np.testing.assert_array_equal(got.batch.columns["mask"], want.columns["mask"])
    assert got.batch.position_ids.min() == 2


def test_gpt_samples_read_from_an_object_store_are_the_local_ones(sources, tmp_path):
    if os.environ.get("POSEMBED_REQUIRE_STORE") != "1":
        pytest.importorskip("moto.server")
        pytest.importorskip("s3fs")
    from bench.store_server import s3_server

    samples, indexed, options, fields = sources["samples"]
    with s3_server("batches") as fs:
        for suffix in (".bin", ".idx"):
            fs.put(str(indexed.prefix) + suffix, f"batches/a{suffix}")
        remote = posembed.IndexedCorpus("s3://batches/a", documents="sequences")
        with posembed.Batches(order(samples, 2, 1), remote, **options) as batches:
            got = take(batches, 4)
    with posembed.Batches(order(samples, 2, 1), indexed, **options) as batches:
        want = take(batches, 4)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a.indices, b.indices)
        for name in fields:
            np.testing.assert_array_equal(getattr(a.batch, name), getattr(b.batch, name))


def test_closing_needs_none_of_the_queue_modules_names(tmp_path, monkeypatch):
    """At interpreter exit, an iterator kept in a global is closed after the
    modules' names may be gone: closing raises nothing then."""
    import queue

    tokens, offsets = corpus(7, 300)
    posembed.write_indexed(tmp_path / "c", tokens, offsets, dtype=np.uint16)
    indexed = posembed.IndexedCorpus(tmp_path / "c", documents="sequences")
    samples = posembed.gpt_samples(indexed.sequence_lengths, 16, num_samples=64, seed=1)
    order = posembed.BatchOrder(samples, global_batch_size=4, micro_batch_size=2)
    it = iter(posembed.Batches(order, indexed, prefetch=4, eod=EOD))
    assert next(it).step == 0
    monkeypatch.setattr(queue, "Empty", None)  # as module teardown leaves it
    it.close()  # the read-ahead stopped and its queue emptied, with no exception


def test_the_interpreter_exits_cleanly_while_batches_are_read_ahead(tmp_path):
    # the read-ahead thread may be inside a kernel when the script ends: it is
    # stopped and waited for at exit, never left to die in the kernel
    script = tmp_path / "exit_while_reading.py"
    script.write_text(
        "import numpy as np, posembed\n"
        "rng = np.random.default_rng(0)\n"
        "lengths = rng.integers(2, 300, 3000)\n"
        "tokens = rng.integers(1, 1000, int(lengths.sum())).astype(np.int32)\n"
        "offsets = np.concatenate([[0], np.cumsum(lengths)])\n"
        "samples = posembed.gpt_samples(lengths, 512, num_samples=2000, seed=1)\n"
        "order = posembed.BatchOrder(samples, global_batch_size=8, micro_batch_size=8)\n"
        f"posembed.write_indexed({str(tmp_path / 'corpus')!r}, tokens, offsets, force=True)\n"
        f"corpus = posembed.IndexedCorpus({str(tmp_path / 'corpus')!r}, documents='sequences')\n"
        "batches = posembed.Batches(order, corpus, prefetch=64, eod=0)\n"
        "it = iter(batches)\n"
        "print(next(it).step)\n"
    )
    for _ in range(4):  # the kernel's threads were alive at exit in about 1 run of 3
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "0"
        assert done.stderr == ""


@pytest.mark.parametrize("kind", ["samples", "blend", "packed", "windows"])
@pytest.mark.parametrize("reset", [False, True])
def test_micro_batches_read_in_runs_equal_those_read_alone(sources, kind, reset):
    # the read-ahead reads several micro-batches in one call and cuts them
    # apart: each must equal its samples read alone, every field
    if kind == "windows":
        tokens, offsets = corpus(1, 60)
        source, data, options = posembed.windows(tokens, 12, offsets=offsets), None, {}
    else:
        source, data, options, _ = sources[kind]
        options = dict(options)
        if kind != "packed":
            options["reset_attention_mask"] = reset
        elif reset:
            options.update(columns={"mask": np.arange(int(source.document_lengths.sum())) % 2})
    with posembed.Batches(order(source, 2, 1), data, prefetch=5, **options) as batches:
        got = take(batches, 12)
    for micro in got:
        if kind in ("samples", "blend"):
            alone = posembed.Batches(order(source, 2, 1), data, prefetch=0, **options)
            want = alone._read(micro.indices)
            for name in (*GPT_FIELDS, "cu_seqlens"):
                np.testing.assert_array_equal(getattr(micro.batch, name), getattr(want, name))
            assert micro.batch.max_seqlen == want.max_seqlen
        elif kind == "packed":
            want = source.cut(data, rows=micro.indices, labels=True, **options)
            for name in (*PACK_FIELDS, "row_segments", "cu_seqlens"):
                np.testing.assert_array_equal(getattr(micro.batch, name), getattr(want, name))
            assert micro.batch.columns.keys() == want.columns.keys()
            for name in want.columns:
                np.testing.assert_array_equal(micro.batch.columns[name], want.columns[name])
        else:
            np.testing.assert_array_equal(micro.batch.tokens, source.tokens[micro.indices])
            np.testing.assert_array_equal(micro.batch.starts, source.starts[micro.indices])


def _documents_read(samples: Any, data: tuple[np.ndarray, np.ndarray], n: int) -> list[set[int]]:
    """The documents each of the first n micro-batches reads (recorded by a reader)."""
    tokens, offsets = data
    probe = Failing((tokens, offsets), -1)
    read: list[set[int]] = []
    for _ in itertools.islice(posembed.Batches(order(samples), probe, prefetch=0, eod=EOD), n):
        read.append(
            {int(np.searchsorted(offsets, a, side="right")) - 1 for a, b in probe.reads if b > a}
        )
        probe.reads.clear()
    return read


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("prefetch", [1, 3, 8])
@pytest.mark.parametrize("in_memory", [False, True])
def test_gpt_samples_read_ahead_by_native_readers_equal_those_read_alone(
    sources, threads, prefetch, in_memory, restore_threads
):
    # GPT samples from a local file or memory are read ahead by native
    # threads that fill each run's rows together (some with no rows where a
    # run has fewer rows than readers): a rank's share, a worker's share, a
    # resumed position and an end, each equal to reading on the caller
    samples, indexed, options, _ = sources["samples"]
    pair = (np.fromfile(indexed.bin_path, np.uint16), np.asarray(indexed.offsets))
    data = pair if in_memory else indexed
    options = {**options, "reset_attention_mask": True}
    posembed.set_num_threads(threads)
    start = order(samples, 2, 1)
    start.advance(3)  # resumed at micro-step 3
    state = start.state_dict()

    def batches(ahead: int) -> Any:
        b = posembed.Batches(
            order(samples, 2, 1), data, prefetch=ahead, total_samples=96, **options
        )
        b.load_state_dict(state)
        return b

    # the whole rank, a worker's share, and a loader worker's groups of 4
    # (the end, 21 micro-steps on, falls inside a group)
    makes = (iter, lambda b: b.worker(1, 3), lambda b: b._share(1, 2, 4))
    _ahead_equals_alone(batches, makes, prefetch)
    assert _threads() == []


def _ahead_equals_alone(
    batches: Callable[[int], Any], makes: tuple[Callable[[Any], Any], ...], prefetch: int
) -> list[Any]:
    """For each way of iterating (``makes``), the micro-batches of
    ``batches(prefetch)`` read ahead by the native readers equal those of
    ``batches(0)`` read on the caller; returns those read ahead."""
    seen = []
    for make in makes:
        with batches(0) as alone, batches(prefetch) as ahead:
            want, items = list(make(alone)), make(ahead)
            got = [next(items)]
            assert isinstance(ahead._running.reading, _NativeAhead)
            got.extend(items)
        assert [m.step for m in got] == [m.step for m in want]
        assert len(want) > 4
        for g, w in zip(got, want, strict=True):
            assert g.consumed_samples == w.consumed_samples
            np.testing.assert_array_equal(g.indices, w.indices)
            for name in (*GPT_FIELDS, "cu_seqlens"):
                np.testing.assert_array_equal(getattr(g.batch, name), getattr(w.batch, name))
            assert g.batch.max_seqlen == w.batch.max_seqlen
        seen.extend(got)
    return seen


def _blend_files(pairs: list[tuple[np.ndarray, np.ndarray]], folder: Any) -> list[Any]:
    """The blend's corpora written as local files, opened as the blend counts them."""
    opened = []
    for k, (tokens, offsets) in enumerate(pairs):
        posembed.write_indexed(folder / f"blend{k}", tokens, offsets, dtype=np.uint16)
        opened.append(posembed.IndexedCorpus(folder / f"blend{k}", documents="sequences"))
    return opened


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("prefetch", [1, 8])
@pytest.mark.parametrize("in_memory", [False, True])
def test_a_blend_read_ahead_by_native_readers_equals_reading_on_the_caller(
    sources, tmp_path, threads, prefetch, in_memory, restore_threads
):
    # each row read by its own corpus's reader on the native threads: a
    # rank's share, a worker's share and a resumed position, each equal to
    # reading on the caller
    blend, pairs, options, _ = sources["blend"]
    data = pairs if in_memory else _blend_files(pairs, tmp_path)
    options = {**options, "reset_position_ids": True, "reset_attention_mask": True}
    posembed.set_num_threads(threads)
    start = order(blend, 2, 0)
    start.advance(2)
    state = start.state_dict()

    def batches(ahead: int) -> Any:
        b = posembed.Batches(order(blend, 2, 0), data, prefetch=ahead, total_samples=88, **options)
        b.load_state_dict(state)
        return b

    got = _ahead_equals_alone(batches, (iter, lambda b: b.worker(0, 2)), prefetch)
    assert len(set(blend.dataset_index[np.concatenate([m.indices for m in got])])) == 2
    assert _threads() == []


@pytest.mark.parametrize("prefetch", [1, 4])
def test_a_blend_read_ahead_gives_the_micro_batches_before_a_failing_one(
    sources, prefetch, restore_threads
):
    # the blend's second corpus misses a token that a later micro-batch
    # reads: the native readers give the same micro-batches before it, then
    # the same error, as reading on the caller does
    blend, pairs, options, _ = sources["blend"]
    posembed.set_num_threads(2)

    def outcome(data: Any, ahead: int) -> tuple[list[int], str, bool]:
        batches = posembed.Batches(order(blend), data, prefetch=ahead, **options)
        items, steps = iter(batches), []
        native = False
        try:
            for mb in itertools.islice(items, 40):  # past an epoch of the blend
                steps.append(mb.step)
                native = native or isinstance(batches._running.reading, _NativeAhead)
        except ValueError as exc:
            return steps, str(exc), native
        finally:
            batches.close()
        return steps, "", native

    tokens, offsets = pairs[1]
    for bad in range(len(offsets) - 2, 0, -1):  # a document first read past micro-batch 2
        shorter = offsets.copy()
        shorter[bad + 1 :] -= 1
        data = [pairs[0], (np.delete(tokens, offsets[bad]), shorter)]
        steps, message, _ = outcome(data, 0)
        if len(steps) >= 3 and message:
            break
    assert message.startswith("corpus: ")
    assert outcome(data, prefetch) == (steps, message, True)
    assert _threads() == []


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("prefetch", [1, 4])
def test_native_readers_give_the_micro_batches_before_a_failing_one(
    threads, prefetch, restore_threads
):
    tokens, offsets = corpus(1, 60)
    samples = posembed.gpt_samples(np.diff(offsets), 16, num_samples=40, seed=3)
    read = _documents_read(samples, (tokens, offsets), 10)
    # a document a later micro-batch j reads and none before it does, one
    # token shorter in the corpus than in the lengths that built the samples
    j = next(j for j in range(2, 10) if read[j] - set().union(*read[:j]))
    bad = min(read[j] - set().union(*read[:j]))
    short = np.delete(tokens, offsets[bad])
    shorter = offsets.copy()
    shorter[bad + 1 :] -= 1
    posembed.set_num_threads(threads)
    batches = posembed.Batches(order(samples), (short, shorter), prefetch=prefetch, eod=EOD)
    assert posembed._core.gpt_batch_ahead_readers() == 0
    items = iter(batches)
    got = [next(items).step for _ in range(j)]
    assert isinstance(batches._running.reading, _NativeAhead)
    with pytest.raises(ValueError, match=f"corpus: sequence {bad} holds"):
        next(items)
    assert got == list(range(j))
    assert batches.consumed_samples == j * M
    assert _threads() == []


@pytest.mark.parametrize("prefetch", [0, 4])
def test_a_position_past_total_samples_gives_nothing(sources, prefetch):
    # resumed from a checkpoint past a (lowered) total_samples: the stream has ended
    samples, indexed, options, _ = sources["samples"]
    batches = posembed.Batches(
        order(samples), indexed, prefetch=prefetch, total_samples=8, **options
    )
    batches.order.advance(6)  # 12 samples consumed
    assert list(batches) == []
    assert batches.consumed_samples == 12
    assert _threads() == []


@pytest.mark.parametrize("workers", [(0, 1), (2, 3)])
def test_positions_past_2_62_are_refused_alike_read_ahead_or_not(workers):
    # a data-loader worker's share does not move the order, so it reads on
    # until its positions pass 2^62: the native readers (prefetch 4) and the
    # reads on the caller (prefetch 0) stop at the same micro-batch, naming
    # the same position, as BatchOrder.sample_at names it
    tokens, offsets = corpus(1, 60)
    samples = posembed.gpt_samples(np.diff(offsets), 16, num_samples=40, seed=3)
    outcomes = []
    for prefetch in (0, 4):
        batches = posembed.Batches(
            order(samples, consumed_samples=2**62 - 3 * G),
            (tokens, offsets),
            prefetch=prefetch,
            eod=EOD,
        )
        items = batches.worker(*workers)
        steps = [next(items).step]
        if prefetch:
            assert isinstance(batches._running.reading, _NativeAhead)
        with pytest.raises(IndexError) as caught:
            steps.extend(mb.step for mb in items)
        outcomes.append((steps, str(caught.value)))
        batches.close()
    assert outcomes[0] == outcomes[1]
    steps, message = outcomes[0]
    # the first micro-batch of the share past the 3 global batches left
    following = steps[-1] + workers[1]
    assert following * M + M - 1 >= 2**62 >= (steps[-1] + 1) * M
    assert message == (
        f"positions: position {following * M + M - 1} is out of range: positions are 0..2^62 - 1"
    )
    assert _threads() == []


def _run_on_a_corpus(tmp_path, name, docs, seq, body):
    """Runs a script that writes an indexed corpus of ``docs`` documents and
    its GPT samples of ``seq`` tokens (``corpus``, ``samples``), then ``body``;
    its completed process."""
    script = tmp_path / name
    corpus = str(tmp_path / "corpus")
    script.write_text(
        "import gc, os, signal, sys, time, numpy as np, posembed\n"
        "from posembed import _core\n"
        "rng = np.random.default_rng(0)\n"
        f"lengths = rng.integers(2, 300, {docs})\n"
        "tokens = rng.integers(1, 1000, int(lengths.sum())).astype(np.int32)\n"
        "offsets = np.concatenate([[0], np.cumsum(lengths)])\n"
        f"samples = posembed.gpt_samples(lengths, {seq}, num_samples={docs * 2 // 3}, seed=1)\n"
        f"posembed.write_indexed({corpus!r}, tokens, offsets, force=True)\n"
        f"corpus = posembed.IndexedCorpus({corpus!r}, documents='sequences')\n" + body
    )
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )


def test_a_child_forked_while_a_reader_holds_the_files_lock_reads(tmp_path):
    # the lock each read takes to look at the file it keeps open is held
    # across fork(): a child never inherits it locked (it would wait forever)
    done = _run_on_a_corpus(
        tmp_path,
        "fork_while_locked.py",
        300,
        64,
        "first = posembed.gpt_batch(samples, np.arange(4), corpus, eod=0)\n"
        "_core._probes.hold_file_lock(0.5)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    again = posembed.gpt_batch(samples, np.arange(4), corpus, eod=0)\n"
        "    os._exit(0 if np.array_equal(again.tokens, first.tokens) else 3)\n"
        "deadline = time.monotonic() + 30\n"
        "while time.monotonic() < deadline:\n"
        "    done, status = os.waitpid(pid, os.WNOHANG)\n"
        "    if done:\n"
        "        sys.exit(os.waitstatus_to_exitcode(status))\n"
        "    time.sleep(0.05)\n"
        "os.kill(pid, signal.SIGKILL)\n"
        "os.waitpid(pid, 0)\n"
        "sys.exit(4)  # the child hung\n",
    )
    assert done.returncode == 0, done.stderr


def test_a_child_forked_while_batches_are_read_ahead_reads_its_own(tmp_path):
    # the native readers exist only in the parent: the child drops the
    # inherited iteration without touching its state, then reads on its own
    done = _run_on_a_corpus(
        tmp_path,
        "fork_while_reading.py",
        3000,
        512,
        "def batches():\n"
        "    order = posembed.BatchOrder(samples, global_batch_size=8, micro_batch_size=8)\n"
        "    return posembed.Batches(order, corpus, prefetch=64, eod=0)\n"
        "parent = batches()\n"
        "it = iter(parent)\n"
        "first = next(it)\n"
        "time.sleep(0.3)  # the readers wait for room\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    parent.close()  # the inherited read-ahead dropped, its state left alone\n"
        "    gc.collect()\n"
        "    again = next(iter(batches()))\n"
        "    same = np.array_equal(again.batch.tokens, first.batch.tokens)\n"
        "    os._exit(0 if same else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.waitstatus_to_exitcode(status), next(it).step)\n",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "1"]

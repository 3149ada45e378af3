"""BatchOrder: the seeded sample order, its slices for ranks and workers, and exact resumption."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import posembed
from posembed.reference import batch_order as twin


def same(a: Any, b: Any) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype == np.int64
    np.testing.assert_array_equal(a, b)


def both(source: Any, **kw: Any) -> tuple[posembed.BatchOrder, twin.BatchOrder]:
    return posembed.BatchOrder(source, **kw), twin.BatchOrder(source, **kw)


# -- the sources -----------------------------------------------------------------------


def _samples() -> posembed.GPTSamples:
    lengths = np.random.default_rng(1).integers(1, 40, 60)
    return posembed.gpt_samples(lengths, 8, num_samples=150, seed=3)


def _blend() -> posembed.GPTBlendSplit:
    lengths = [np.full(20, 10), np.full(30, 7), np.arange(1, 41)]
    blend = posembed.gpt_blend(
        lengths, [0.3, 0.5, 0.2], split="1", sizes=[90, 0, 0], sequence_length=8, seed=5
    )
    assert blend.train is not None
    return blend.train


def _plan() -> posembed.PackPlan:
    return posembed.pack(np.random.default_rng(2).integers(1, 50, 300), 64)


def _windows() -> posembed.Windows:
    return posembed.windows(np.arange(500), 16, step=8, offsets=[0, 100, 130, 500])


SOURCES = {"count": lambda: 97, "samples": _samples, "blend": _blend, "plan": _plan}
SOURCES["windows"] = _windows


def test_sources_and_their_defaults():
    for name, make in SOURCES.items():
        source = make()
        order = posembed.BatchOrder(source, global_batch_size=8, micro_batch_size=2)
        n = source if isinstance(source, int) else getattr(source, "rows", None)
        assert order.num_samples == (n if n is not None else len(source)), name
        assert order.shuffle == (name not in ("samples", "blend")), name
        assert order.source is source
        saved = json.loads(json.dumps(order.state_dict()))
        assert (
            saved == twin.BatchOrder(source, global_batch_size=8, micro_batch_size=2).state_dict()
        )
    plain = posembed.BatchOrder(_samples(), global_batch_size=6, micro_batch_size=3)
    n = plain.num_samples
    # Megatron's own order: position p reads sample p % N, epoch after epoch
    same(plain.global_batch(n // 6 + 1), np.arange(n // 6 * 6 + 6, n // 6 * 6 + 12) % n)


# -- the shuffle -----------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 9, 255, 256, 257, 1000, 65_537])
def test_each_epoch_is_a_permutation(n: int):
    order = posembed.BatchOrder(n, global_batch_size=1, micro_batch_size=1, seed=n)
    for epoch in (0, 1, 5, 10**9 // n):
        got = order.sample_at(np.arange(epoch * n, (epoch + 1) * n))
        same(np.sort(got), np.arange(n))
    if n >= 8:  # different epochs, different orders
        assert not np.array_equal(
            order.sample_at(np.arange(n)), order.sample_at(np.arange(n, 2 * n))
        )


def test_a_million_samples_twin_and_kernel(restore_threads: None):
    n = 1_000_003
    k = posembed.BatchOrder(n, global_batch_size=n, micro_batch_size=n, seed=2**64 - 1)
    t = twin.BatchOrder(n, global_batch_size=n, micro_batch_size=n, seed=2**64 - 1)
    posembed.set_num_threads(1)
    want = k.global_batch(3)
    same(np.bincount(want, minlength=n), np.ones(n, dtype=np.int64))
    same(t.global_batch(3), want)
    for threads in (2, 3):
        posembed.set_num_threads(threads)
        same(k.global_batch(3), want)
        same(k.sample_at(np.arange(3 * n, 4 * n)), want)


@pytest.mark.parametrize("case", range(12))
def test_twin_and_kernel_agree(case: int, restore_threads: None):
    rng = np.random.default_rng(case)
    n = int(rng.choice([1, 2, 7, 100, 4099, 123_457]))
    m = int(rng.integers(1, 9))
    w = int(rng.choice([1, 2, 4]))
    g = m * w * int(rng.integers(1, 5))
    kw: dict[str, Any] = dict(global_batch_size=g, micro_batch_size=m, world_size=w)
    kw.update(rank=int(rng.integers(w)), seed=int(rng.integers(2**63)), shuffle=bool(case % 3))
    kw.update(consumed_samples=m * w * int(rng.integers(0, 10**6)))
    k, t = both(n, **kw)
    posembed.set_num_threads(int(rng.integers(1, 4)))
    rows = int(rng.integers(1, 6000))
    same(k.micro_batches(5, 5 + rows), t.micro_batches(5, 5 + rows))
    same(k.micro_batch(7), t.micro_batch(7))
    same(k.positions(7), t.positions(7))
    same(k.global_batch(11), t.global_batch(11))
    p = rng.integers(0, 2**62, 50).reshape(5, 10)
    same(k.sample_at(p), t.sample_at(p))
    assert k.state_dict() == t.state_dict()
    assert k.epoch_of(10**12) == t.epoch_of(10**12) == 10**12 // n


# -- slicing: ranks, micro-steps, workers ------------------------------------------------


def test_any_world_size_reads_the_same_global_batches():
    g, m, n = 48, 2, 97
    want = posembed.BatchOrder(n, global_batch_size=g, micro_batch_size=m, seed=4)
    for w in (1, 2, 4, 8):
        ranks = [
            posembed.BatchOrder(
                n, global_batch_size=g, micro_batch_size=m, world_size=w, rank=r, seed=4
            )
            for r in range(w)
        ]
        a = ranks[0].accumulation_steps
        assert a == g // (m * w)
        for k in range(5):  # 5 global batches: across two epoch ends
            got = [ranks[r].micro_batch(k * a + s) for s in range(a) for r in range(w)]
            same(np.concatenate(got), want.global_batch(k))


def megatron_pretraining_sampler(total: int, consumed: int, m: int, rank: int, world: int):
    """What Megatron-LM's MegatronPretrainingSampler yields to one rank (restated from
    its documented behaviour: runs of m * W indices from consumed_samples, the
    rank's m of each, the last partial run dropped)."""
    run: list[int] = []
    for idx in range(consumed, total):
        run.append(idx)
        if len(run) == m * world:
            yield run[rank * m : (rank + 1) * m]
            run = []


def test_without_shuffling_ranks_read_as_megatrons_sampler_slices():
    n, m, w, c0 = 1000, 3, 4, 120
    for r in range(w):
        order = posembed.BatchOrder(
            n,
            global_batch_size=24,
            micro_batch_size=m,
            world_size=w,
            rank=r,
            shuffle=False,
            consumed_samples=c0,
        )
        want = list(megatron_pretraining_sampler(n, c0, m, r, w))
        same(order.micro_batches(0, len(want)), np.array(want, dtype=np.int64))


@pytest.mark.parametrize("workers", [0, 1, 3])
def test_workers_in_turn_give_the_rank_its_order(workers: int):
    order = posembed.BatchOrder(
        _plan(), global_batch_size=24, micro_batch_size=3, world_size=2, rank=1, consumed_samples=6
    )
    stop = 20
    shares = [list(order.worker_micro_batches(w, workers, stop)) for w in range(max(workers, 1))]
    turns = [i for r in range(stop) for share in shares for i in share[r : r + 1]]
    assert turns == list(range(stop))
    endless = order.worker_micro_batches(max(workers, 1) - 1, workers)
    assert [next(endless) for _ in range(3)] == shares[-1][:3]
    same(np.stack([order.micro_batch(i) for i in turns]), order.micro_batches(0, stop))


# -- resuming ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["count", "samples", "blend", "plan", "windows"])
def test_resumed_runs_read_what_the_uninterrupted_run_reads(name: str):
    """Interrupted at random micro-steps, resumed on 4, 2, then 8 ranks with 0, 1, 3 workers."""
    source = SOURCES[name]()
    g, m, seed = 48, 2, 11
    full = posembed.BatchOrder(source, global_batch_size=g, micro_batch_size=m, seed=seed)
    n = full.num_samples
    total = 2 * n + 3 * g  # past two epoch ends
    total -= total % 16
    want = full.sample_at(np.arange(total))
    rng = np.random.default_rng(len(name))
    read: list[np.ndarray] = []
    state: dict[str, Any] | None = None
    phases = [(4, 0), (2, 1), (8, 3)]
    for phase, (w, workers) in enumerate(phases):
        ranks = []
        for r in range(w):
            order = posembed.BatchOrder(
                source, global_batch_size=g, micro_batch_size=m, world_size=w, rank=r, seed=seed
            )
            if state is not None:
                order.load_state_dict(json.loads(json.dumps(state)))
            ranks.append(order)
        c0 = ranks[0].consumed_samples
        left = (total - c0) // (m * w)
        if phase < len(phases) - 1:
            # stop where the next world size can start: a micro-step boundary of both
            nxt = m * phases[phase + 1][0]
            fits = [s for s in range(1, left // 2 + 1) if (c0 + s * m * w) % nxt == 0]
            steps = int(rng.choice(fits))
        else:
            steps = left
        # each rank's micro-batches as its workers produce them, taken in turn
        per_rank = []
        for order in ranks:
            shares = [
                iter(order.worker_micro_batches(x, workers, steps)) for x in range(max(workers, 1))
            ]
            rows = [order.micro_batch(next(shares[i % len(shares)])) for i in range(steps)]
            per_rank.append(rows)
        for s in range(steps):
            read.extend(per_rank[r][s] for r in range(w))
        for order in ranks:
            order.advance(steps)
        state = ranks[0].state_dict()
        assert state["consumed_samples"] == c0 + steps * m * w
        assert state["written_by"] == {"world_size": w, "rank": 0, "micro_batch_size": m}
    got = np.concatenate(read)
    same(got, want)
    for e in range(2):  # no sample lost or repeated within an epoch
        same(np.sort(got[e * n : (e + 1) * n]), np.arange(n))


def test_state_is_plain_json_and_resumes_at_once():
    order = posembed.BatchOrder(10**7, global_batch_size=1024, micro_batch_size=4, world_size=8)
    state = order.state_dict()
    assert json.loads(json.dumps(state)) == state
    assert state["format"] == "posembed.BatchOrder/1"
    state["consumed_samples"] = 10**9
    other = posembed.BatchOrder(10**7, global_batch_size=1024, micro_batch_size=8, world_size=2)
    other.load_state_dict(state)
    assert other.consumed_samples == 10**9
    same(other.positions(0), np.arange(10**9, 10**9 + 8))
    same(other.micro_batch(0), order.sample_at(np.arange(10**9, 10**9 + 8)))


def test_consumed_samples_must_be_a_micro_step_boundary():
    with pytest.raises(ValueError, match=r"consumed_samples.*2 \* 4 = 8.*got 12"):
        posembed.BatchOrder(
            100, global_batch_size=16, micro_batch_size=2, world_size=4, consumed_samples=12
        )
    order = posembed.BatchOrder(100, global_batch_size=16, micro_batch_size=2, world_size=4)
    state = posembed.BatchOrder(
        100, global_batch_size=16, micro_batch_size=2, consumed_samples=6
    ).state_dict()
    with pytest.raises(ValueError, match=r"consumed_samples.*got 6"):
        order.load_state_dict(state)
    assert order.consumed_samples == 0


def _refused(saved: posembed.BatchOrder, given: posembed.BatchOrder, *words: str) -> None:
    with pytest.raises(ValueError, match="the saved state is of another sample order") as err:
        given.load_state_dict(saved.state_dict())
    for word in words:
        assert word in str(err.value)
    assert given.consumed_samples == 0


def test_a_changed_order_is_refused_by_name():
    kw: dict[str, Any] = dict(global_batch_size=16, micro_batch_size=2, consumed_samples=8)
    new: dict[str, Any] = dict(global_batch_size=16, micro_batch_size=2)
    _refused(
        posembed.BatchOrder(100, seed=1, **kw),
        posembed.BatchOrder(100, seed=2, **new),
        "seed changed: saved 1, given 2",
    )
    _refused(
        posembed.BatchOrder(100, **kw),
        posembed.BatchOrder(100, global_batch_size=32, micro_batch_size=2),
        "global_batch_size changed: saved 16, given 32",
    )
    lengths = np.random.default_rng(2).integers(1, 50, 300)
    plan = posembed.pack(lengths, 64)
    longer = lengths.copy()
    longer[7] += 1
    _refused(
        posembed.BatchOrder(plan, **kw),
        posembed.BatchOrder(posembed.pack(longer, 64), **new),
        "document lengths changed",
    )
    _refused(
        posembed.BatchOrder(plan, **kw),
        posembed.BatchOrder(posembed.pack(lengths, 128), **new),
        "capacity changed: saved 64, given 128",
        "number of samples per epoch changed",
    )
    samples = _samples()
    lengths = np.random.default_rng(1).integers(1, 40, 60)
    lengths[0] += 1
    other = posembed.gpt_samples(lengths, 8, num_samples=150, seed=3)
    _refused(
        posembed.BatchOrder(samples, **kw),
        posembed.BatchOrder(other, **new),
        "document lengths changed",
    )
    reseeded = posembed.gpt_samples(
        np.random.default_rng(1).integers(1, 40, 60), 8, num_samples=150, seed=4
    )
    _refused(posembed.BatchOrder(samples, **kw), posembed.BatchOrder(reseeded, **new), "indices")
    blend = _blend()
    lengths3 = [np.full(20, 10), np.full(30, 7), np.arange(1, 41)]
    reweighed = posembed.gpt_blend(
        lengths3, [0.5, 0.3, 0.2], split="1", sizes=[90, 0, 0], sequence_length=8, seed=5
    )
    assert reweighed.train is not None
    _refused(
        posembed.BatchOrder(blend, **kw),
        posembed.BatchOrder(reweighed.train, **new),
        "blend weights changed: saved [0.3, 0.5, 0.2], given [0.5, 0.3, 0.2]",
    )


def test_the_twin_refuses_what_the_kernel_refuses():
    saved = posembed.BatchOrder(100, global_batch_size=16, micro_batch_size=2, seed=1).state_dict()
    with pytest.raises(ValueError, match="seed"):
        twin.BatchOrder(100, global_batch_size=16, micro_batch_size=2).load_state_dict(saved)
    t = twin.BatchOrder(100, global_batch_size=16, micro_batch_size=2, seed=1)
    t.load_state_dict(saved)


def test_advance_and_epochs():
    order = posembed.BatchOrder(10, global_batch_size=8, micro_batch_size=2, world_size=2, rank=1)
    first = order.micro_batch(3)
    order.advance(3)
    assert order.consumed_samples == 12
    same(order.micro_batch(0), first)
    same(order.positions(0), [14, 15])
    assert order.epoch_of(14) == 1
    assert order.accumulation_steps == 2
    assert "consumed_samples=12" in repr(order)

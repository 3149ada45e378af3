"""The benchmark's compute roofline: the probe's operation count, the kernels'
counts, and which ceiling a result is judged against."""

from __future__ import annotations

import math
import platform

import numpy as np
import pytest

import posembed
from posembed import _core, reference
from posembed.bench.case import Result
from posembed.bench.report import to_dict
from posembed.bench.rooflines import compute, random_words

LANES = {"baseline": 4, "avx2": 8, "avx512": 16}


def test_a_probe_step_is_twelve_vectors_of_the_level_in_use():
    level = posembed.config()["simd"]
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    lanes = LANES[level] if x86 else 1  # elsewhere: plain floats
    assert _core._probes.flops_per_step(False) == 12 * lanes
    fused = 2 if x86 and level in ("avx2", "avx512") else 1  # the baseline has no FMA
    assert _core._probes.flops_per_step(True) == 12 * lanes * fused


@pytest.mark.parametrize("fused", [False, True])
def test_the_probe_keeps_its_values_on_any_thread_count(fused):
    # twelve chains starting at 1..12 that * 1 and + 0 leave as they are: the
    # lanes of each chunk's twelve vectors sum to 78 a lane, whatever ran them
    lanes = _core._probes.flops_per_step(False) // 12
    for threads in (1, 2, 3):
        got = _core._probes.roofline_flops(10_000, fused, threads)
        assert got > 0
        assert got % (78 * lanes) == 0
    compute(10_000, fused)()  # the benchmark's callable runs


@pytest.mark.parametrize("n", [0, 1, 1023, 1024, 5000, 70_001])
def test_the_random_bits_probe_draws_the_dropout_bits_on_any_thread_count(n):
    # seed 1's bits, the first of every 1024 folded by XOR: the twin's, whatever
    # the thread count (chunks start at multiples of 1024)
    want = int(np.bitwise_xor.reduce(reference.random.uniform_bits(1, n)[::1024], initial=0))
    for threads in (1, 2, 3):
        assert _core._probes.roofline_random_bits(n, threads) == want
    random_words(n)()  # the benchmark's callable runs


@pytest.mark.parametrize(
    ("grid", "new", "method", "antialias", "want"),
    [
        # every output of bicubic reads 4 taps (7 operations), of bilinear 2 (3)
        ((24, 24), (48, 48), "bicubic", False, (24 * 48 + 48 * 48) * 7),
        ((5, 6), (7, 3), "bilinear", False, (5 * 3 + 7 * 3) * 3),
        # an antialiased axis that keeps its size is not resampled
        ((9, 7), (9, 7), "bicubic", True, 0),
        # only y changes: the y pass alone, 6 taps an output row at most
        ((14, 20), (7, 20), "bilinear", True, None),
    ],
    ids=str,
)
def test_resample_grid_counts_what_it_computes(grid, new, method, antialias, want):
    m, half = _core.GridMethod.__members__[method], _core.Align.half_pixel
    got = _core.resample_grid_flops(*grid, *new, 5, m, half, antialias)
    if want is None:
        taps = _core.resample_grid_flops(*grid, *new, 1, m, half, antialias)
        assert taps > 0
        assert got == 5 * taps
        assert taps % new[1] == 0  # every column of the new grid alike
        assert (taps // new[1] + new[0]) % 2 == 0  # 2 * taps - outputs
    else:
        assert got == 5 * want


def result(memory: float | None, compute_s: float | None) -> Result:
    seconds = {"posembed": 2.0}
    if memory is not None:
        seconds["roofline"] = memory
    if compute_s is not None:
        seconds["compute"] = compute_s
    return Result("k", "c", "s", 8, "write fresh" if memory is not None else None, seconds, 0, 10)


@pytest.mark.parametrize(
    ("memory", "compute_s", "binding", "fraction"),
    [
        (1.0, 0.5, "write fresh", 0.5),
        (0.5, 1.5, "compute", 0.75),
        (None, 1.0, "compute", 0.5),
        (1.0, None, "write fresh", 0.5),
        (None, None, None, None),
    ],
)
def test_a_result_is_judged_against_the_ceiling_that_binds(memory, compute_s, binding, fraction):
    r = result(memory, compute_s)
    assert r.binding() == binding
    assert r.roofline_fraction() == fraction
    row = to_dict([r], {})["results"][0]
    assert (row["binding"], row["roofline_fraction"], row["flops"]) == (binding, fraction, 10)


@pytest.mark.parametrize(("roofline", "syncs"), [("file write", 3), ("write warm", 0)])
def test_a_case_that_writes_files_starts_each_block_written_back(monkeypatch, roofline, syncs):
    # one sync before each timed block (two implementations and the roofline),
    # so that no implementation pays for the previous one's dirty pages
    from posembed.bench import timing
    from posembed.bench.case import Case

    calls: list[None] = []
    monkeypatch.setattr(timing.os, "sync", lambda: calls.append(None))
    monkeypatch.setattr(timing, "SETTLE_SECONDS", 0.0)
    impls = {"numpy": lambda: None, "posembed": lambda: None}
    timing.measure(Case("k", "c", "s", 64, impls, roofline), 1)
    assert len(calls) == syncs


@pytest.mark.parametrize("faster", [0, 1])
def test_a_memory_roofline_takes_the_faster_of_its_two_ways(monkeypatch, faster):
    # a clock that each way moves on by its own cost: the cheaper one is taken
    from posembed.bench import rooflines

    now = [0.0]
    costs = [2.0, 2.0]
    costs[faster] = 1.0
    monkeypatch.setattr(rooflines.time, "perf_counter", lambda: now[0])

    def way(k: int):
        def move() -> int:
            now[0] += costs[k]
            return k

        return move

    assert rooflines._faster(way(0), way(1))() == faster


@pytest.mark.parametrize(
    ("kind", "stream"),
    [
        ("write warm", False),
        ("write warm", True),
        ("copy warm", False),
        ("copy warm", True),
        ("write fresh", False),
        ("copy fresh", False),
    ],
)
def test_each_way_of_a_memory_roofline_moves_the_bytes(monkeypatch, kind, stream):
    # whichever way is taken moves every byte: the fill byte, or the source's;
    # a fresh roofline always takes ordinary stores, as the kernels do there
    from posembed.bench import rooflines

    seen: list[tuple[np.ndarray, bool]] = []  # each destination, and whether streamed
    fill, copy = _core._probes.roofline_fill, _core._probes.roofline_copy

    def filled(dst, value, stream=False):
        fill(dst, value, stream=stream)
        seen.append((dst, stream))

    def copied(dst, src, stream=False):
        copy(dst, src, stream=stream)
        seen.append((dst, stream))

    monkeypatch.setattr(rooflines._core._probes, "roofline_fill", filled)
    monkeypatch.setattr(rooflines._core._probes, "roofline_copy", copied)
    monkeypatch.setattr(rooflines, "_faster", lambda plain, streamed: streamed if stream else plain)
    nbytes = 3 * 4096 + 5
    rooflines.roofline(kind, nbytes)()
    dst, streamed = seen[-1]
    assert streamed is stream
    want = rooflines.FILL_BYTE if kind.startswith("write") else 0x3C
    assert dst.shape == (nbytes,)
    assert (dst == want).all()


# 250 ms, 7.8 ms and 61 us a call: sums of them stay exact
SLOW, MID, FAST = 2.0**-2, 2.0**-7, 2.0**-14


@pytest.mark.parametrize(
    "costs", [(SLOW, SLOW), (FAST, FAST), (SLOW, FAST), (FAST, SLOW), (MID, SLOW)]
)
def test_implementations_are_timed_in_interleaved_rounds(monkeypatch, costs):
    # on a clock that each call moves on by its implementation's cost: after
    # the warm-ups, one timed batch of each implementation a round, a call
    # under 0.1 s with an untimed batch before it (caches and thread pools
    # warmed again); every implementation gets its medians
    from itertools import groupby

    from posembed.bench import timing
    from posembed.bench.case import Case

    now, log = [0.0], []
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(timing, "SETTLE_SECONDS", 0.0)

    def impl(name: str, cost: float):
        def call() -> None:
            log.append(name)
            now[0] += cost

        return call

    cost = dict(zip("ab", costs, strict=True))
    impls = {name: impl(name, c) for name, c in cost.items()}
    result = timing.measure(Case("k", "c", "s", 64, impls, None), 3)

    def warm(name: str) -> int:  # each warm-up: 5 ms of calls, at least 2
        return max(2, math.ceil(5e-3 / cost[name]))

    def batch(name: str) -> int:  # a timed batch: 2 ms of calls, at least 1
        return max(1, int(2e-3 / cost[name]))

    def a_round(name: str) -> int:
        return (1 if cost[name] >= timing.REWARM_SECONDS else 2) * batch(name)

    want = [(k, warm(k)) for k in "ab"] + [(k, a_round(k)) for k in "ab"] * 3
    merged = [(k, sum(n for _, n in runs)) for k, runs in groupby(want, key=lambda r: r[0])]
    assert [(name, len(list(group))) for name, group in groupby(log)] == merged
    assert result.seconds == pytest.approx(cost)


@pytest.mark.parametrize(
    ("slow_calls", "timed_cost"), [(0, MID), (1, MID), (2, MID), (5, MID + 2.0**-8)]
)
def test_untimed_batches_go_on_until_the_calls_are_warm_again(monkeypatch, slow_calls, timed_cost):
    # after each pause the first `slow_calls` calls cost 3.9 ms more (a thread
    # pool waking up): untimed batches run until one is within 1.25x of the
    # best so far, three at most, so the timed batch is warm unless the
    # wake-up outlasts them
    from posembed.bench import timing
    from posembed.bench.case import Case

    now, pending, calls = [0.0], [0], [0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(timing, "SETTLE_SECONDS", 0.0)

    def quiet(case: Case, settle: float) -> None:
        pending[0] = slow_calls

    monkeypatch.setattr(timing, "_quiet", quiet)

    def call() -> None:
        calls[0] += 1
        now[0] += MID + (2.0**-8 if pending[0] > 0 else 0.0)
        pending[0] = max(0, pending[0] - 1)

    result = timing.measure(Case("k", "c", "s", 64, {"a": call}, None), 4)
    assert result.seconds["a"] == timed_cost
    untimed = min(timing.REWARM_BATCHES, slow_calls + 1)
    assert calls[0] == 2 + 4 * (untimed + 1)  # the warm-up's two, then each round's


@pytest.mark.parametrize("quick", [True, False])
def test_quick_runs_settle_and_rewarm_for_less(monkeypatch, quick):
    # --quick, a smoke test, waits less for other thread pools between turns
    # and rewarms only the calls under 1 ms
    from posembed.bench import timing

    seen = []
    monkeypatch.setattr(timing, "cases_of", lambda kernel, q: ["case"])
    monkeypatch.setattr(timing, "measure", lambda case, reps, s=None, w=None: seen.append((s, w)))
    timing.run(quick=quick, kernels=["k"])
    want = (timing.QUICK_SETTLE_SECONDS, timing.QUICK_REWARM_SECONDS) if quick else (None, None)
    assert seen == [want]


def test_a_page_cache_read_writes_into_the_blocks_the_kernels_outputs_are_made_on():
    lengths = np.full(40, 50)
    tokens = np.arange(2000, dtype=np.uint16) % 7 + 1
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    # an odd shape, so that no block of another test's batches has its size
    samples = posembed.gpt_samples(lengths, 61, num_samples=8, seed=3)
    batch = posembed.gpt_batch(samples, np.arange(3), (tokens, offsets), eod=0)
    size = _core._probes.output_block_size(batch.tokens.base)
    assert size >= batch.tokens.nbytes + batch.labels.nbytes + batch.position_ids.nbytes
    assert batch.labels.base is batch.tokens.base  # the outputs share the one block
    assert _core._probes.output_block_size(np.zeros(3).base) == -1
    assert _core._probes.output_block_size(None) == -1
    address = batch.tokens.ctypes.data
    del batch  # its block goes back to the cache
    assert size in _core._probes.kept_output_blocks()
    _core._probes.roofline_fill_block(size, 0x5A)  # takes that block, gives it back
    again = posembed.gpt_batch(samples, np.arange(3), (tokens, offsets), eod=0)
    assert again.tokens.ctypes.data == address  # the memory the roofline wrote
    np.testing.assert_array_equal(
        again.tokens, posembed.gpt_batch(samples, np.arange(3), (tokens, offsets), eod=0).tokens
    )
    with pytest.raises(ValueError, match="size must be > 0"):
        _core._probes.roofline_fill_block(0)


def test_a_cold_first_call_does_not_make_a_slow_call_pass_for_warm(monkeypatch):
    # the warm-up's first call costs 8x the others (a thread started, files
    # opened); after each pause the next two calls cost 1.5x (a pipeline
    # filling again). The best so far starts at the warm-up's fastest call, so
    # both slow calls are untimed and the timed one is warm; the warm-up's
    # mean would have passed the first slow call for warm.
    from posembed.bench import timing
    from posembed.bench.case import Case

    now, pending, calls = [0.0], [0], [0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(timing, "SETTLE_SECONDS", 0.0)
    monkeypatch.setattr(timing, "_quiet", lambda case, settle: pending.__setitem__(0, 2))
    unit = 2.0**-7  # 7.8 ms: two warm-up calls, each timed alone

    def call() -> None:
        calls[0] += 1
        now[0] += unit * (8 if calls[0] == 1 else 1.5 if pending[0] > 0 else 1)
        pending[0] = max(0, pending[0] - 1)

    result = timing.measure(Case("k", "c", "s", 64, {"a": call}, None), 4)
    assert result.seconds["a"] == unit
    # the warm-up's two, then a round's two slow untimed calls, a warm untimed one and
    # the timed one
    assert calls[0] == 2 + 4 * (2 + 1 + 1)

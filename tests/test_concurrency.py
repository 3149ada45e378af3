"""Many Python threads calling the kernels at once: the same bytes as serial
calls, real overlap (the GIL is released), and one shared budget of helper
threads instead of a team per caller; calls from inside an OpenMP team start
no nested team."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

import posembed
from posembed import _core

from .conftest import assert_same

THREADS = 8
ROUNDS = 4


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False  # shared inputs: any write would raise
    return a


def _work() -> list[tuple[str, Callable[[np.ndarray | None], Any], Callable[[], np.ndarray]]]:
    """(name, call(out), make_out) for every kernel; each call is large enough
    (>= 256 KiB of output) to run on a team when it runs alone."""
    rng = np.random.default_rng(5)
    table = _frozen(rng.standard_normal((512, 256)).astype(np.float32))
    tokens = _frozen(rng.standard_normal((4000, 256)).astype(np.float32))
    pos = _frozen(rng.integers(0, 512, (8, 128)))
    ids = _frozen(rng.integers(0, 4000, (8, 128)))
    grad = _frozen(rng.standard_normal((8, 128, 256)).astype(np.float32))
    grid = _frozen(rng.standard_normal((1 + 16 * 16, 256)).astype(np.float32))
    frac = _frozen(rng.uniform(0, 511, 2048))
    stream = _frozen(rng.integers(0, 50_000, 400_000, dtype=np.int32))
    offsets = _frozen(np.array([0, 150_000, 150_001, 400_000]))
    w = posembed.windows(stream, 1024, step=768, offsets=offsets)
    values = _frozen(rng.standard_normal(w.tokens.shape).astype(np.float32))

    def empty(shape: tuple[int, ...], dtype: Any = np.float32) -> Callable[[], np.ndarray]:
        return lambda: np.empty(shape, dtype)

    return [
        ("gather", lambda o: posembed.gather(table, pos, out=o), empty((8, 128, 256))),
        (
            "gather_backward",
            lambda o: posembed.gather_backward(grad, pos, 512, out=o),
            empty((512, 256)),
        ),
        ("interpolate", lambda o: posembed.interpolate(table, 2048, out=o), empty((2048, 256))),
        ("lerp", lambda o: posembed.lerp(table, frac, out=o), empty((2048, 256))),
        ("extend", lambda o: posembed.extend(table, 2048, init="tile"), empty((0,))),
        (
            "resample_grid",
            lambda o: posembed.resample_grid(grid, (16, 16), (32, 32), prefix=1),
            empty((0,)),
        ),
        ("embed", lambda o: posembed.embed(tokens, ids, table, out=o), empty((8, 128, 256))),
        (
            "embed_dropout",
            lambda o: posembed.embed(tokens, ids, table, dropout=0.1, seed=3, out=o),
            empty((8, 128, 256)),
        ),
        ("dropout_mask", lambda o: posembed.dropout_mask((512, 1024), 0.25, 9), empty((0,))),
        (
            "windows",
            lambda o: posembed.windows(stream, 1024, step=768, offsets=offsets, out=o).tokens,
            empty(w.tokens.shape, np.int32),
        ),
        ("stitch", lambda o: posembed.stitch(values, w, reduce="mean"), empty((0,))),
        ("similarity", lambda o: posembed.similarity(table), empty((0,))),
    ]


def _call(call: Callable[[np.ndarray | None], Any], make_out: Callable[[], np.ndarray]) -> Any:
    out = make_out()
    return call(out if out.size else None)


def test_threads_give_the_serial_bytes_and_leave_inputs_alone():
    work = _work()
    serial = {name: _call(call, make) for name, call, make in work}
    barrier = threading.Barrier(THREADS)

    def worker(k: int) -> list[tuple[str, np.ndarray]]:
        barrier.wait()  # all start together
        got = []
        for r in range(ROUNDS):
            for i in range(len(work)):
                name, call, make = work[(i + k + r) % len(work)]  # different orders
                got.append((name, _call(call, make)))
        return got

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(worker, range(THREADS)))
    for got in results:
        assert len(got) == ROUNDS * len(work)
        for name, value in got:
            assert_same(value, serial[name])


def test_calls_overlap_so_the_gil_is_released():
    # If a kernel held the GIL, no two calls could be in flight at once.
    table = _frozen(np.ones((512, 1024), np.float32))
    pos = _frozen(np.arange(512 * 16) % 512)
    barrier = threading.Barrier(THREADS)
    _core._probes.calls_in_flight_peak(reset=True)

    def worker(_: int) -> None:
        barrier.wait()
        for _ in range(20):
            posembed.gather(table, pos)

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(worker, range(THREADS)))
    assert _core._probes.calls_in_flight_peak() >= 2


@pytest.mark.parametrize("budget", [2, 4])
def test_concurrent_calls_share_one_budget_of_helper_threads(budget):
    # Each call may use `budget` threads: its caller and budget - 1 helpers.
    # However many Python threads call at once, at most budget - 1 helpers are
    # busy in all (oversubscription is bounded by the callers themselves).
    table = _frozen(np.ones((512, 1024), np.float32))
    pos = _frozen(np.arange(512 * 16) % 512)
    posembed.set_num_threads(budget)
    try:
        posembed.gather(table, pos)
        assert _core._probes.last_team_size() == budget  # alone: the whole team
        _core._probes.helpers_busy_peak(reset=True)
        barrier = threading.Barrier(THREADS)

        def worker(_: int) -> None:
            barrier.wait()
            for _ in range(20):
                posembed.gather(table, pos)

        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(worker, range(THREADS)))
        assert 1 <= _core._probes.helpers_busy_peak() <= budget - 1
    finally:
        posembed.set_num_threads(None)


def test_a_call_from_inside_an_openmp_team_starts_no_nested_team():
    # a C extension's own parallel region calling posembed: each of its
    # threads runs the call alone (no helpers), and nothing deadlocks
    posembed.set_num_threads(4)
    try:
        assert _core._probes.team_sizes_in_openmp_team(4, 1 << 16) == 1
        assert _core._probes.team_sizes_in_openmp_team(2, 1 << 16) == 1
        # (a team of one is not an active region: a call there is a call alone)
    finally:
        posembed.set_num_threads(None)


def test_threads_with_their_own_thread_counts():
    # threadpoolctl-style per-thread limits and explicit counts mixed with
    # concurrent calls: same bytes everywhere
    threadpoolctl = pytest.importorskip("threadpoolctl")  # in the test extra
    table = _frozen(np.random.default_rng(1).standard_normal((300, 512)).astype(np.float32))
    want = posembed.interpolate(table, 4096)

    def worker(k: int) -> np.ndarray:
        with threadpoolctl.threadpool_limits(1 + k % 3, user_api="openmp"):
            return posembed.interpolate(table, 4096)

    with ThreadPoolExecutor(THREADS) as pool:
        for got in pool.map(worker, range(3 * THREADS)):
            assert_same(got, want)

"""Threads: the GIL is released, thresholds decide the team, fork and races are safe."""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading

import numpy as np
import pytest

import posembed
from posembed import _core

from .conftest import assert_same

# Each call takes tens of milliseconds, so that another Python thread wakes
# up well within it when (and only when) the GIL is released.
_TABLE = np.ones((64, 1024), np.float32)
KERNELS = {
    "gather": (posembed.gather, (_TABLE, np.zeros(20_000, np.int64))),
    "interpolate": (posembed.interpolate, (_TABLE, 20_000)),
    "lerp": (posembed.lerp, (_TABLE, np.full(20_000, 1.5))),
    "resample_grid": (
        posembed.resample_grid,
        (np.ones((32 * 32, 256), np.float32), (32, 32), (128, 128)),
    ),
}


def _seen_running(fn, args) -> bool:
    started = threading.Event()
    done = []

    def work():
        started.set()
        fn(*args)
        done.append(True)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        worker = threading.Thread(target=work)
        worker.start()
        started.wait()
        seen = not done
    finally:
        sys.setswitchinterval(old)
    worker.join()
    return seen


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernels_release_the_gil(kernel):
    # With a huge switch interval a thread keeps the GIL until it blocks or
    # C code releases it. The main thread can look at `done` while the worker
    # is inside the call only if the call released the GIL. The arguments are
    # made beforehand: NumPy releases the GIL while it fills large arrays.
    # A held GIL can never show the worker running, so a few tries (against a
    # busy machine delaying the main thread's wake-up) cannot hide a failure.
    fn, args = KERNELS[kernel]
    fn(*args)  # warm up: the thread pool, first-touch of pages
    assert any(_seen_running(fn, args) for _ in range(3)), f"{kernel} held the GIL"


def test_small_calls_stay_on_one_thread_and_large_ones_use_all(restore_threads):
    posembed.set_num_threads(2)
    table = np.ones((128, 64), np.float32)
    posembed.gather(table, np.arange(10) % 128)
    assert _core._probes.last_team_size() == 1
    posembed.gather(table, np.arange(100_000) % 128)  # 25 MB of output
    assert _core._probes.last_team_size() == 2
    posembed.interpolate(table, 10)
    assert _core._probes.last_team_size() == 1
    posembed.interpolate(table, 100_000)
    assert _core._probes.last_team_size() == 2
    posembed.set_num_threads(1)
    posembed.gather(table, np.arange(100_000) % 128)
    assert _core._probes.last_team_size() == 1


def test_a_count_for_the_calling_thread_alone(restore_threads):
    # what chunk_file gives its own threads: above the global count on the
    # thread that set it, never seen by another, capped, and undone on exit
    from posembed.kernels._runtime import calling_thread_threads

    posembed.set_num_threads(2)
    table = np.ones((128, 64), np.float32)
    ids = np.arange(100_000) % 128
    other: list[int] = []
    with calling_thread_threads(1):
        assert posembed.get_num_threads() == 1
        posembed.gather(table, ids)
        assert _core._probes.last_team_size() == 1
        worker = threading.Thread(target=lambda: other.append(posembed.get_num_threads()))
        worker.start()
        worker.join()
        with calling_thread_threads(None):
            assert posembed.get_num_threads() == 1
    assert other == [2]
    assert posembed.get_num_threads() == 2
    posembed.gather(table, ids)
    assert _core._probes.last_team_size() == 2
    top = posembed.config()["max_num_threads"]
    with calling_thread_threads(top + 5):
        assert posembed.get_num_threads() == top
    assert _core.calling_thread_threads() == 0


def test_thread_count_is_capped(restore_threads):
    top = posembed.config()["max_num_threads"]
    posembed.set_num_threads(top)
    assert posembed.get_num_threads() == top
    with pytest.raises(ValueError, match=rf"1\.\.{top}"):
        posembed.set_num_threads(top + 1)


def _child(queue):
    table = np.arange(2048 * 64, dtype=np.float32).reshape(2048, 64)
    out = posembed.gather(table, np.arange(100_000) % 2048)
    queue.put(
        (
            bool(np.array_equal(out, table[np.arange(100_000) % 2048])),
            posembed.config()["forked_child"],
            posembed.get_num_threads(),
        )
    )


def test_forked_child_after_parallel_work_does_not_hang(restore_threads):
    posembed.set_num_threads(2)
    table = np.ones((2048, 64), np.float32)
    posembed.gather(table, np.arange(100_000) % 2048)  # the parent's pool is running
    assert _core._probes.last_team_size() == 2
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(queue,))
    child.start()
    child.join(120)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail("the forked child hung in an OpenMP region")
    assert child.exitcode == 0
    correct, forked, threads = queue.get(timeout=10)
    assert correct
    assert forked is True
    assert threads == 1
    assert posembed.get_num_threads() == 2  # the parent is unaffected


def test_positions_rewritten_by_another_thread_never_crash():
    # Positions are checked, then read again with the GIL released; a racing
    # writer may make the result meaningless but must not make it unsafe.
    table = np.arange(100 * 16, dtype=np.float32).reshape(100, 16)
    pos = np.zeros(200_000, np.int64)
    out = np.empty((pos.size, 16), np.float32)
    fracs = np.zeros(200_000)
    stop = threading.Event()

    def scribble():
        while not stop.is_set():
            pos[100_000:100_010] = 1 << 40
            fracs[100_000:100_010] = np.nan
            pos[100_000:100_010] = 0
            fracs[100_000:100_010] = 0.0

    writer = threading.Thread(target=scribble)
    writer.start()
    try:
        for _ in range(100):
            try:
                posembed.gather(table, pos, out=out)
                posembed.lerp(table, fracs)
            except (IndexError, ValueError):
                pass  # the writer won the race before the check
    finally:
        stop.set()
        writer.join()
    rows = {r.tobytes() for r in table}
    assert all(r.tobytes() in rows for r in out[99_990:100_020])


def test_a_layout_rewritten_by_another_thread_never_crashes():
    # WindowLayout.cut reads the caller's layout arrays, which another thread
    # may rewrite while the GIL is released: the kernel cuts from the copies
    # it checked, so a racing writer changes nothing it reads.
    tokens = np.arange(400_000, dtype=np.int32)
    offsets = np.array([0, 200_000, 400_000])
    layout = posembed.window_layout(offsets, 64, step=32)
    want = layout.cut(tokens).copy()
    lengths, documents, starts = layout.lengths, layout.documents, layout.starts
    doc_offsets = layout.doc_offsets
    spot = slice(1, 11)  # small writes: the writer holds the GIL through each
    saved = [a[spot].copy() for a in (lengths, documents, starts, doc_offsets)]
    stop = threading.Event()

    def scribble():
        while not stop.is_set():
            for array, good, bad in zip(
                (lengths, documents, starts, doc_offsets),
                saved,
                (1 << 40, 1 << 40, -1, 1 << 60),
                strict=True,
            ):
                array[spot] = bad
                array[spot] = good

    writer = threading.Thread(target=scribble)
    writer.start()
    cut = 0
    try:
        for _ in range(200):
            try:
                got = layout.cut(tokens)
            except ValueError:
                continue  # the writer won the race before the copy
            cut += 1
            assert np.array_equal(got, want)
    finally:
        stop.set()
        writer.join()
    assert cut > 0


def test_enum_values_that_are_no_member_are_refused():
    # pybind11's enums take any integer; a binding refuses what is no member.
    table = np.zeros((4, 2), np.float32)
    with pytest.raises(ValueError, match="not a member"):
        _core.gather(table, np.zeros(1, np.int64), _core.IndexMode(7))
    with pytest.raises(ValueError, match="not a member"):
        _core.interpolate(table, _core.FloatKind(9), 8, _core.Align.scale)
    with pytest.raises(ValueError, match="not a member"):
        _core.interpolate(table, _core.FloatKind.float32, 8, _core.Align(5))


def test_results_identical_across_python_threads():
    table = np.random.default_rng(0).standard_normal((512, 128)).astype(np.float32)
    pos = np.random.default_rng(1).integers(0, 512, 30_000)
    want = posembed.gather(table, pos)
    results = [None] * 4

    def run(i):
        results[i] = posembed.gather(table, pos)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        assert_same(r, want)


def _openmp_library_of_core() -> str:
    """The OpenMP runtime this process loaded (the one posembed's _core uses)."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libgomp" in line or "libomp" in line}
    assert len(paths) == 1, paths
    return os.path.realpath(paths.pop())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_threadpoolctl_sees_posembeds_openmp_pool():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    found = [
        info
        for info in threadpoolctl.threadpool_info()
        if info["user_api"] == "openmp"
        and os.path.realpath(info["filepath"]) == _openmp_library_of_core()
    ]
    assert len(found) == 1, threadpoolctl.threadpool_info()
    assert found[0]["num_threads"] == posembed.get_num_threads()


def test_threadpoolctl_limits_posembed(restore_threads):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    posembed.set_num_threads(None)  # follow OpenMP, the default
    table = np.ones((128, 64), np.float32)
    big = np.arange(100_000) % 128  # 25 MB of output: every thread if allowed
    default = posembed.get_num_threads()
    with threadpoolctl.threadpool_limits(1, user_api="openmp"):
        assert posembed.get_num_threads() == 1
        posembed.gather(table, big)
        assert _core._probes.last_team_size() == 1
        # posembed's own setting is the most specific, and wins.
        posembed.set_num_threads(2)
        posembed.gather(table, big)
        assert _core._probes.last_team_size() == 2
        posembed.set_num_threads(None)
        assert posembed.get_num_threads() == 1
    assert posembed.get_num_threads() == default
    posembed.gather(table, big)
    assert _core._probes.last_team_size() == default


def test_explicit_threads_hold_in_every_python_thread(restore_threads):
    posembed.set_num_threads(1)
    table = np.ones((128, 64), np.float32)
    teams = []

    def work():
        posembed.gather(table, np.arange(100_000) % 128)
        teams.append(_core._probes.last_team_size())

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert teams == [1]

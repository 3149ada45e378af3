"""Timing: each implementation of a case in its own block, the median of its rounds."""

from __future__ import annotations

import errno
import gc
import os
import time
from collections.abc import Callable

import numpy as np

from posembed.bench.case import Case, Result, unmeasured
from posembed.bench.cases import BUILDERS, CASE_NAMES, cases_of
from posembed.bench.rooflines import compute, random_words, roofline


def timer(fn: Callable[[], object]) -> tuple[Callable[[], float], float, float]:
    """A timer of seconds per call of fn, batching calls that are too short to
    time alone; the warm-up's seconds per call, and its fastest call's.
    The batch size comes from a warm-up of at least 5 ms (or 1000 calls), so
    that one cold first call cannot make microsecond calls look slow."""
    calls, t0, fastest = 0, time.perf_counter(), float("inf")
    while calls < 1000 and (calls < 2 or time.perf_counter() - t0 < 5e-3):
        start = time.perf_counter()
        fn()
        fastest = min(fastest, time.perf_counter() - start)
        calls += 1
    once = (time.perf_counter() - t0) / calls
    number = max(1, min(10_000, int(2e-3 / max(once, 1e-9))))

    def timed() -> float:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - start) / number

    return timed, once, fastest


# A call that takes seconds (a Python loop over 100k documents, an in-memory
# problem on a machine with a large cache) gets this many timed rounds at
# most, so the whole run stays in minutes.
SLOW_SECONDS, SLOW_REPEAT = 0.5, 3


def rounds(once: float, repeat: int) -> int:
    """Timed rounds for a call that took ``once`` seconds in the warm-up."""
    return min(repeat, SLOW_REPEAT) if once > SLOW_SECONDS else repeat


# Thread pools (PyTorch's OpenMP, OpenBLAS, posembed's own) keep spinning for
# a while after a call; timing the next implementation on top of them would
# charge it for their spinning. Each implementation gets the cores to itself.
SETTLE_SECONDS = 0.05
# --quick, a smoke test of every case, settles for less: its figures are rough.
QUICK_SETTLE_SECONDS = 0.01

# Cases that write files (their roofline writes one too): the page cache's
# dirty pages of one implementation are written back before the next is
# timed, which would otherwise pay for the previous one's writes.
WRITES_FILES = frozenset({"file write", "file copy", "parquet decode"})


# The implementations are timed in interleaved rounds (one timed batch of
# each a round, the median over rounds), not in a block each: the machine's
# state (pages to zero, neighbours' traffic, a noisy spell) drifts over
# seconds, and a drift then falls on each implementation alike instead of on
# whichever block it met. A call shorter than this gets untimed batches
# before its timed one (see rewarm), which warm again the caches and thread
# pool that the other implementations and the pause took from it. Waking a
# thread pool can cost milliseconds, not microseconds: on a 2-core VM, the
# first OpenMP region after 50 ms of quiet took 5.8-7.8 ms (an empty one; 30
# us with OMP_WAIT_POLICY=passive), since libgomp's calling thread spins while
# it waits for its helper, and the helper's core came back only once the
# spinning stopped (after GOMP_SPINCOUNT turns: 0.56 ms with 10,000, 1.6 ms
# with 30,000). Calls up to this long are timed warm; on longer ones the wake-up is
# a few percent at most. --quick pauses only 10 ms, after which the pools
# were mostly still awake (44 us for the empty region), and rewarms only the
# calls under 1 ms: every call rewarmed took it from 42-51 s to 52-53 s.
REWARM_SECONDS = 0.1
QUICK_REWARM_SECONDS = 1e-3
# One untimed batch is not always enough: on that VM, in 3 of 8 rounds after
# 50 ms of quiet, a 2-thread call of 0.32 ms took 6.9-7.8 ms, the next one
# still 4.0 ms (the scheduler's tick is 4 ms there) and the third 0.33 ms. So
# untimed batches go on until one runs within REWARM_SLACK of the
# implementation's best batch so far, REWARM_BATCHES at most.
REWARM_SLACK = 1.25
REWARM_BATCHES = 3


def rewarm(timed: Callable[[], float], best: float) -> float:
    """Untimed batches of ``timed`` until one takes at most REWARM_SLACK times
    ``best`` seconds a call (REWARM_BATCHES at most); the fastest of them."""
    fastest = float("inf")
    for _ in range(REWARM_BATCHES):
        fastest = min(fastest, timed())
        if fastest <= best * REWARM_SLACK:
            break
    return fastest


def _quiet(case: Case, settle: float) -> None:
    """Wait ``settle`` seconds for other thread pools to go quiet (and, for a
    case that writes files, for the page cache's dirty pages to be written
    back)."""
    if case.roofline in WRITES_FILES:
        os.sync()
    time.sleep(settle)


# What stops a case on this machine without being a fault of posembed's: the
# disk its files go to fills up (or a quota), or memory runs out. Such a case
# is reported as not measured, with the reason, and the run goes on.
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def cannot_run(exc: BaseException) -> str | None:
    """Why ``exc`` stopped a case, where the machine's room is to blame; None
    for anything else (a failure that must not be hidden)."""
    if isinstance(exc, MemoryError):
        return f"not enough memory ({exc or 'MemoryError'})"
    if isinstance(exc, OSError) and exc.errno in _NO_ROOM:
        return f"no room on disk ({exc})"
    return None


def _unmeasured(case: Case, reason: str) -> Result:
    return Result(case.kernel, case.name, case.shape, 0, None, not_measured=reason)


def measure(
    case: Case, repeat: int, settle: float | None = None, rewarm_below: float | None = None
) -> Result:
    """Median seconds per implementation over interleaved rounds, each timed
    batch after the other implementations' threads have gone quiet. A case
    that cannot run here (see ``Case.not_measured`` and ``cannot_run``) gives a
    Result with no times and the reason."""
    if case.not_measured is not None or not case.impls:
        return _unmeasured(case, case.not_measured or "nothing to time here")
    try:
        return _measure(case, repeat, settle, rewarm_below)
    except (OSError, MemoryError) as exc:
        reason = cannot_run(exc)
        if reason is None:
            raise
        return _unmeasured(case, reason)


def _measure(case: Case, repeat: int, settle: float | None, rewarm_below: float | None) -> Result:
    if case.check is not None and not case.check():
        raise AssertionError(f"{case.kernel} {case.name}: posembed disagrees with its twin")
    fns = dict(case.impls)
    if case.roofline:
        fns["roofline"] = roofline(
            case.roofline, case.out_bytes, case.source, case.reads, case.out_block
        )
    if case.flops:
        fns["compute"] = compute(case.flops, case.fused)
    elif case.random_words:
        fns["compute"] = random_words(case.random_words)
    times: dict[str, list[float]] = {k: [] for k in fns}
    gc_was_on = gc.isenabled()
    gc.disable()  # as timeit does: a collection would land on whichever call is running
    try:
        timers = {k: timer(fn) for k, fn in fns.items()}
        reps = {k: rounds(once, repeat) for k, (_, once, _) in timers.items()}
        pause = SETTLE_SECONDS if settle is None else settle
        warm_below = REWARM_SECONDS if rewarm_below is None else rewarm_below
        # the best so far starts at the warm-up's fastest call, not its mean:
        # a mean that holds the cold first call would pass a call still slow
        best = {k: fastest for k, (_, _, fastest) in timers.items()}
        for r in range(max(reps.values())):
            for k in fns:
                if r < reps[k]:
                    _quiet(case, pause)
                    timed, once, _ = timers[k]
                    if once < warm_below:
                        # the others ran since: caches and threads warmed again
                        best[k] = min(best[k], rewarm(timed, best[k]))
                    times[k].append(timed())
                    best[k] = min(best[k], times[k][-1])
    finally:
        if gc_was_on:
            gc.enable()
    seconds = {k: float(np.median(v)) for k, v in times.items()}
    return Result(
        case.kernel,
        case.name,
        case.shape,
        case.out_bytes,
        case.roofline,
        seconds,
        case.in_bytes,
        case.flops,
        case.random_words,
    )


def run(
    quick: bool = False,
    repeat: int | None = None,
    progress: Callable[[str], None] | None = None,
    kernels: list[str] | None = None,
) -> list[Result]:
    """Every case of ``kernels`` (default: all), one kernel's arrays at a time.
    A case that cannot run here is in the list too, with the reason."""
    reps = repeat if repeat is not None else (3 if quick else 15)
    results = []
    for kernel in list(BUILDERS) if kernels is None else kernels:
        for case in _built(kernel, quick):
            if progress is not None:
                what = case.shape if case.not_measured is None else "not measured"
                progress(f"{case.kernel}: {case.name} ({what})")
            if quick:
                results.append(measure(case, reps, QUICK_SETTLE_SECONDS, QUICK_REWARM_SECONDS))
            else:
                results.append(measure(case, reps))
    return results


def _built(kernel: str, quick: bool) -> list[Case]:
    """The cases of ``kernel``; where building them runs out of room, each of
    them as not measured, with the reason."""
    try:
        return cases_of(kernel, quick)
    except (OSError, MemoryError) as exc:
        reason = cannot_run(exc)
        if reason is None:
            raise
        return [unmeasured(kernel, name, reason) for name in CASE_NAMES[kernel]]

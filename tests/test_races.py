"""Arrays rewritten by another thread while a window kernel runs.

The window kernels read their layout (offsets, starts, lengths, documents)
after releasing the GIL. Another Python thread may rewrite those arrays at any
moment; the result is then meaningless, but the process must survive: it
returns or raises ValueError, never a signal or a hang. Each target runs many
rounds against a writer thread in its own subprocess, so that a crash fails
the test instead of ending the test run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

ROUNDS = 300

SETUP = """
import threading
import time
import numpy as np
import posembed

stop = threading.Event()

def scribble(targets, hold):
    # targets: (array, slice, bad values): each written and put back in turn,
    # small writes so that the writer holds the GIL through each; with hold,
    # also left in place while the writer sleeps, so that Python code on other
    # threads sees them too
    saved = [array[spot].copy() for array, spot, _ in targets]
    while not stop.is_set():
        for (array, spot, bads), good in zip(targets, saved):
            for bad in bads:
                array[spot] = bad
                array[spot] = good
                if hold:
                    array[spot] = bad
                    time.sleep(0)
                    array[spot] = good

def race(call, targets, rounds, refusals=(ValueError,), hold=False):
    writer = threading.Thread(target=scribble, args=(targets, hold))
    writer.start()
    done = refused = 0
    try:
        for _ in range(rounds):
            try:
                call()
                done += 1
            except refusals:
                refused += 1  # the writer won the race before the check
    finally:
        stop.set()
        writer.join()
    print(done, refused)

HUGE, NEGATIVE = 1 << 40, -(1 << 40)
"""

CASES = {
    "windows(offsets=)": """
tokens = np.arange(2_000_000, dtype=np.int32)
offsets = np.array([0, 500_000, 1_000_000, 2_000_000])
race(
    lambda: posembed.windows(tokens, 64, step=32, offsets=offsets),
    [(offsets, slice(1, 3), (HUGE, 0, NEGATIVE))],
    ROUNDS,
)
""",
    "Windows.owner": """
w = posembed.windows(np.arange(400_000, dtype=np.int32), 64, step=16,
                     offsets=np.array([0, 150_000, 400_000]))
targets = [
    (w.doc_offsets, slice(1, 2), (HUGE, 0, NEGATIVE)),
    (w.starts, slice(100, 110), (HUGE, NEGATIVE)),
    (w.lengths, slice(100, 110), (HUGE, NEGATIVE)),
    (w.documents, slice(100, 110), (HUGE, NEGATIVE)),
]
race(lambda: (w.owner("first"), w.owner("center")), targets, ROUNDS)
""",
    "stitch": """
w = posembed.windows(np.arange(100_000, dtype=np.int32), 32, step=8,
                     offsets=np.array([0, 40_000, 100_000]))
values = np.ones((len(w), 32, 2), np.float32)
targets = [
    (w.doc_offsets, slice(1, 2), (HUGE, 0, NEGATIVE)),
    (w.starts, slice(100, 110), (HUGE, NEGATIVE)),
    (w.lengths, slice(100, 110), (HUGE, NEGATIVE)),
    (w.documents, slice(100, 110), (HUGE, NEGATIVE)),
]
reduces = ("mean", "sum", "max", "first", "center")
race(lambda: [posembed.stitch(values, w, reduce=r) for r in reduces], targets, ROUNDS // 5)
""",
    # kernels that clamp every read of the caller's ids and positions instead
    # of copying them: each must be read once (a clamp that re-reads the
    # array returns an unchecked value) and used once
    "embed": """
rng = np.random.default_rng(0)
token_table = rng.standard_normal((1000, 64)).astype(np.float32)
pos_table = rng.standard_normal((512, 64)).astype(np.float32)
ids = rng.integers(0, 1000, (64, 512))
positions = np.tile(np.arange(512), (64, 1))
targets = [
    (ids, slice(10, 12), (HUGE, NEGATIVE, 1000)),
    (positions, slice(20, 22), (HUGE, NEGATIVE, 512)),
]
race(lambda: posembed.embed(token_table, ids, pos_table, positions=positions), targets,
     ROUNDS // 5, refusals=(ValueError, IndexError), hold=True)
""",
    "gather_backward": """
rng = np.random.default_rng(0)
grad = rng.standard_normal((200_000, 16)).astype(np.float32)
positions = rng.integers(0, 1000, 200_000)
targets = [(positions, slice(5000, 5100), (HUGE, NEGATIVE, 1000))]
race(lambda: posembed.gather_backward(grad, positions, 1000), targets, ROUNDS // 5,
     refusals=(ValueError, IndexError), hold=True)
""",
    "WindowLayout.cut": """
layout = posembed.window_layout(np.array([0, 300_000, 600_000]), 64, step=32)
tokens = np.arange(600_000, dtype=np.int32)
targets = [
    (layout.doc_offsets, slice(1, 2), (HUGE, 0, NEGATIVE)),
    (layout.starts, slice(100, 110), (HUGE, NEGATIVE)),
    (layout.lengths, slice(100, 110), (HUGE, NEGATIVE)),
    (layout.documents, slice(100, 110), (HUGE, NEGATIVE)),
]
race(lambda: layout.cut(tokens), targets, ROUNDS)
""",
    # posembed.dask's block functions: the caller's arrays reach them as views
    # (Dask slices NumPy inputs without copying), on Dask's worker threads
    "posembed.dask.windows blocks": """
import dask.array as da
import posembed.dask as pdask
tokens = np.arange(400_000, dtype=np.int32)
w = pdask.windows(da.from_array(tokens, chunks=50_000), 64, step=32,
                  offsets=np.array([0, 150_000, 400_000]))
targets = [
    (w.doc_offsets, slice(1, 2), (HUGE, 0, NEGATIVE)),
    (w.starts, slice(100, 110), (HUGE, NEGATIVE)),
    (w.lengths, slice(100, 110), (HUGE, NEGATIVE)),
    (w.documents, slice(100, 110), (HUGE, NEGATIVE)),
    (tokens, slice(49_990, 50_010), (-1, 1 << 30)),
]
race(lambda: w.tokens.compute(scheduler="threads"), targets, ROUNDS // 5, hold=True)
""",
    "posembed.dask.stitch blocks": """
import dask
import dask.array as da
import posembed.dask as pdask
w = pdask.windows(da.from_array(np.arange(100_000, dtype=np.int32), chunks=20_000), 32, step=8,
                  offsets=np.array([0, 40_000, 100_000]))
values = np.ones((len(w), 32, 2), np.float32)
reduces = ("mean", "sum", "max", "first", "center")
stitched = [pdask.stitch(values, w, reduce=r) for r in reduces]
targets = [
    (w.doc_offsets, slice(1, 2), (HUGE, 0, NEGATIVE)),
    (w.starts, slice(100, 110), (HUGE, NEGATIVE)),
    (w.lengths, slice(100, 110), (HUGE, NEGATIVE)),
    (w.lengths, slice(2_490, 2_510), (HUGE, NEGATIVE)),
    (w.documents, slice(100, 110), (HUGE, NEGATIVE)),
    (w.documents, slice(2_490, 2_510), (HUGE, NEGATIVE)),
    (values, slice(100, 110), (np.nan, np.inf)),
]
race(lambda: dask.compute(*stitched, scheduler="threads"), targets, ROUNDS // 5, hold=True)
""",
    "posembed.dask.embed blocks": """
import dask.array as da
import posembed.dask as pdask
rng = np.random.default_rng(0)
token_table = rng.standard_normal((1000, 32)).astype(np.float32)
pos_table = rng.standard_normal((256, 32)).astype(np.float32)
ids = rng.integers(0, 1000, (64, 256))
positions = np.tile(np.arange(256), (64, 1))
embedded = pdask.embed(token_table, da.from_array(ids, chunks=(8, 256)), pos_table,
                       positions=positions, dropout=0.1, seed=3)
targets = [
    (ids, slice(10, 12), (HUGE, NEGATIVE, 1000)),
    (positions, slice(20, 22), (HUGE, NEGATIVE, 256)),
    (token_table, slice(5, 6), (np.nan,)),
]
race(lambda: embedded.compute(scheduler="threads"), targets, ROUNDS // 5,
     refusals=(ValueError, IndexError), hold=True)
""",
}


@pytest.mark.parametrize("target", list(CASES))
def test_a_writer_thread_never_crashes_the_kernel(target: str) -> None:
    code = SETUP + f"ROUNDS = {ROUNDS}\n" + textwrap.dedent(CASES[target])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{target}: exit {done.returncode}\n{done.stderr[-2000:]}"
    finished, refused = map(int, done.stdout.split()[-2:])
    assert finished + refused > 0


# A rewrite that lands between a check and the kernel's read, made
# deterministic: the caller's offsets change right after posembed has checked
# their size. The layout must be the one of the offsets as they were checked
# (a private copy), not of the rewritten ones: a total of 2^62 tokens reached
# the kernel before, and asked for an array of 2^62 windows.
@pytest.mark.parametrize("bad", [1 << 62, (1 << 63) - 1, 1 << 40])
def test_window_layout_uses_the_offsets_it_checked(
    monkeypatch: pytest.MonkeyPatch, bad: int
) -> None:
    import numpy as np

    import posembed
    from posembed import reference
    from posembed.kernels import _windows

    offsets = np.array([0, 300, 1000], dtype=np.int64)
    checked = _windows.v.check_sizes

    def check_then_rewrite(what: str, *factors: int) -> None:
        checked(what, *factors)
        if what.startswith("offsets_or_token_count"):
            offsets[-1] = bad  # another thread's write, after the check of the corpus

    monkeypatch.setattr(_windows.v, "check_sizes", check_then_rewrite)
    got = posembed.window_layout(offsets, 16, step=1)
    want = reference.window_layout(np.array([0, 300, 1000]), 16, step=1)
    for field in ("doc_offsets", "starts", "lengths", "documents"):
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field))

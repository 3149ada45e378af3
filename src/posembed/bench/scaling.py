"""Thread scaling: posembed alone, each problem timed at several thread counts.

Every threaded kernel runs a problem that fits the last-level cache and one
that streams through memory, both sized from this machine's caches
(:mod:`posembed.bench.sizes`), beside the same run's ceilings: an ALU loop
with no memory traffic and a warm copy in cache and in memory. ``chunk`` is
left out (its kernel runs on one thread beside its reader and writer),
``similarity`` (NumPy's BLAS does its work), ``extend`` (it runs the
interpolate and gather kernels measured here) and ``blend`` (its draw is
sequential, one sample after another, on one thread).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np

import posembed
from posembed.bench import rooflines
from posembed.bench.sizes import Sizes, at_least, at_most, sizes
from posembed.bench.timing import rounds, timer

F32 = np.float32
ROW = 1024 * 4  # bytes of a d=1024 float32 row
ROW768 = 768 * 4  # bytes of a d=768 float32 row
VOCAB = 50_257  # GPT-2's
SIZE, STEP = 2048, 1536  # the windows of the main table


@dataclass
class ScalingCase:
    """posembed alone on one problem, timed at several thread counts."""

    kernel: str
    problem: str
    size: str  # "in cache" or "in memory" (see posembed.bench.sizes)
    nbytes: int  # bytes the call writes
    # allocates the problem and returns the call to time; cases are listed
    # without their arrays, and only the one being timed holds memory
    make: Callable[[], Callable[[], object]]


@dataclass
class ScalingResult:
    kernel: str
    problem: str
    size: str
    nbytes: int
    seconds: dict[int, float] = field(default_factory=dict)  # median per count
    # median over rounds of (time on the first count / time on this count),
    # each round timing every count back to back
    speedups: dict[int, float] = field(default_factory=dict)

    def speedup(self, threads: int) -> float | None:
        return self.speedups.get(threads)


# The scaling problems of each kernel, as "problem (size)", in the order its
# builder makes them; bench/bench_threads.py parametrizes over these.
SCALING_NAMES = {
    "roofline": (
        "ALU loop, no memory (in cache)",
        "copy warm (in cache)",
        "copy warm (in memory)",
    ),
    "gather": ("out= given (in cache)", "out= given (in memory)"),
    "interpolate": (
        "out= given (in cache)",
        "lerp, out= (in cache)",
        "out= given (in memory)",
        "lerp, out= (in memory)",
    ),
    "resample_grid": (
        "bicubic (in cache)",
        "bilinear (in cache)",
        "bicubic (in memory)",
        "bilinear (in memory)",
    ),
    "windows": (
        "out= given (in cache)",
        "out= given (in memory)",
        "stitch mean (in cache)",
        "stitch mean (in memory)",
    ),
    "embed": (
        "dropout 0.1 (in cache)",
        "dropout 0.1 (in memory)",
        "dropout_mask (in cache)",
        "dropout_mask (in memory)",
    ),
    "gather_backward": ("positions, out= (in cache)", "token ids (in memory)"),
    "samples": ("sample index (in cache)", "sample index (in memory)"),
    "pack": ("cut (in cache)", "cut (in memory)"),
    "gpt_batch": ("all switches (in cache)", "all switches (in memory)"),
    "batch_order": ("micro-batch indices (in cache)",),
}


def _roofline(s: Sizes) -> list[ScalingCase]:
    spin = 1_000_000 if s.quick else 4_000_000
    cases = [
        ScalingCase(
            "roofline", "ALU loop, no memory", "in cache", 0, partial(rooflines.alu_loop, spin)
        )
    ]
    # in cache: source and destination together; in memory: each
    for size, nbytes in (("in cache", s.in_cache // 2), ("in memory", s.in_memory)):
        make = partial(rooflines.roofline, "copy warm", nbytes)
        cases.append(ScalingCase("roofline", "copy warm", size, nbytes, make))
    return cases


def _gather(s: Sizes) -> list[ScalingCase]:
    def make(rows: int, n: int) -> Callable[[], object]:
        rng = np.random.default_rng(21)
        table = rng.standard_normal((rows, 1024), dtype=F32)
        pos = rng.integers(0, rows, n)
        return partial(posembed.gather, table, pos, out=np.empty((n, 1024), F32))

    # in cache: a third for the table, two for the output; in memory: the
    # output streams, from a 2048-row table
    cache_rows, cache_n = at_most(s.in_cache // 3, ROW), at_most(s.in_cache * 2 // 3, ROW)
    memory_n = at_least(s.in_memory, ROW)
    return [
        ScalingCase(
            "gather", "out= given", "in cache", cache_n * ROW, partial(make, cache_rows, cache_n)
        ),
        ScalingCase(
            "gather", "out= given", "in memory", memory_n * ROW, partial(make, 2048, memory_n)
        ),
    ]


def _interpolate(s: Sizes) -> list[ScalingCase]:
    def make(rows: int, lerp: bool) -> Callable[[], object]:
        rng = np.random.default_rng(22)
        table = rng.standard_normal((rows, 1024), dtype=F32)
        out = np.empty((4 * rows, 1024), F32)
        if lerp:
            return partial(posembed.lerp, table, rng.uniform(0, rows - 1, 4 * rows), out=out)
        return partial(posembed.interpolate, table, 4 * rows, out=out)

    cases = []
    # rows to 4x the rows: the table and its stretch fit, or the stretch streams
    for size, rows in (
        ("in cache", at_most(s.in_cache, 5 * ROW)),
        ("in memory", at_least(s.in_memory, 4 * ROW)),
    ):
        for problem, lerp in (("out= given", False), ("lerp, out=", True)):
            make_it = partial(make, rows, lerp)
            cases.append(ScalingCase("interpolate", problem, size, 4 * rows * ROW, make_it))
    return cases


def _resample_grid(s: Sizes) -> list[ScalingCase]:
    def make(g: int, method: str) -> Callable[[], object]:
        grid = np.random.default_rng(23).standard_normal((1 + g * g, 768), dtype=F32)
        return partial(
            posembed.resample_grid, grid, (g, g), (2 * g, 2 * g), prefix=1, method=method
        )

    # a g x g grid (plus a CLS row) to 2g x 2g, d 768: 5 g^2 rows touched
    # in cache; the output's 4 g^2 rows stream in memory
    cache_g = max(2, math.isqrt(s.in_cache // (5 * ROW768)))
    memory_g = max(2, math.ceil(math.sqrt(s.in_memory / (4 * ROW768))))
    cases = []
    for size, g in (("in cache", cache_g), ("in memory", memory_g)):
        for method in ("bicubic", "bilinear"):
            nbytes = (1 + 4 * g * g) * ROW768
            cases.append(
                ScalingCase("resample_grid", method, size, nbytes, partial(make, g, method))
            )
    return cases


def _windows_count(ntok: int) -> int:
    """Windows of SIZE every STEP over ntok tokens, the last one full."""
    return (ntok - SIZE) // STEP + 1


def _windows(s: Sizes) -> list[ScalingCase]:
    def cut(ntok: int) -> Callable[[], object]:
        tokens = np.random.default_rng(24).integers(0, 50_000, ntok, dtype=np.uint32)
        out = np.empty((_windows_count(ntok), SIZE), np.uint32)
        return partial(posembed.windows, tokens, SIZE, step=STEP, tail="drop", out=out)

    def stitch(ntok: int) -> Callable[[], object]:
        # stitch reads only the layout: one-byte tokens keep the windows' own
        # copy of them small
        win = posembed.windows(np.zeros(ntok, np.uint8), SIZE, step=STEP)
        values = np.random.default_rng(24).standard_normal((len(win), SIZE), dtype=F32)
        return partial(posembed.stitch, values, win)

    # a stream of n tokens makes about 4n/3 slots of windows (4 bytes each):
    # in cache, tokens and windows together fit; in memory, the windows (cut's
    # output, stitch's input) stream
    cache_ntok = max(SIZE, s.in_cache * 3 // 28)
    memory_ntok = (at_least(s.in_memory, SIZE * 4) - 1) * STEP + SIZE
    cases = []
    for problem, make in (("out= given", cut), ("stitch mean", stitch)):
        for size, ntok in (("in cache", cache_ntok), ("in memory", memory_ntok)):
            nbytes = _windows_count(ntok) * SIZE * 4 if make is cut else ntok * 4
            cases.append(ScalingCase("windows", problem, size, nbytes, partial(make, ntok)))
    return cases


def _embed(s: Sizes) -> list[ScalingCase]:
    def tables(length: int) -> tuple[np.ndarray, np.ndarray, np.random.Generator]:
        rng = np.random.default_rng(25)
        tok = rng.standard_normal((VOCAB, 768), dtype=F32)
        return tok, rng.standard_normal((length, 768), dtype=F32), rng

    def into_out(t: int) -> Callable[[], object]:
        # the same ids each call, so their token rows stay cached
        tok, ptab, rng = tables(t)
        ids = rng.integers(0, VOCAB, (1, t))
        out = np.empty((1, t, 768), F32)
        return partial(posembed.embed, tok, ids, ptab, dropout=0.1, seed=1, out=out)

    def fresh(b: int) -> Callable[[], object]:
        tok, ptab, rng = tables(1024)
        ids = rng.integers(0, VOCAB, (b, 1024))
        return partial(posembed.embed, tok, ids, ptab, dropout=0.1, seed=1)

    def mask(n: int) -> Callable[[], object]:
        return partial(posembed.dropout_mask, n, 0.1, 1)

    # in cache: T tokens' rows, T position rows and the output (3 T rows)
    # into out=; in memory: a fresh output of B batches of 1024 tokens
    t = at_most(s.in_cache, 3 * ROW768)
    b = at_least(s.in_memory, 1024 * ROW768)
    cases = [
        ScalingCase("embed", "dropout 0.1", "in cache", t * ROW768, partial(into_out, t)),
        ScalingCase("embed", "dropout 0.1", "in memory", b * 1024 * ROW768, partial(fresh, b)),
    ]
    for size, n in (("in cache", s.in_cache), ("in memory", s.in_memory)):
        cases.append(ScalingCase("embed", "dropout_mask", size, n, partial(mask, n)))
    return cases


def _gather_backward(s: Sizes) -> list[ScalingCase]:
    def positions(t: int) -> Callable[[], object]:
        grad = np.random.default_rng(26).standard_normal((1, t, 768), dtype=F32)
        out = np.empty((t, 768), F32)
        return partial(posembed.gather_backward, grad, np.arange(t)[None], t, out=out)

    def token_ids(b: int) -> Callable[[], object]:
        rng = np.random.default_rng(26)
        grad = rng.standard_normal((b, 1024, 768), dtype=F32)
        ids = rng.integers(0, VOCAB, (b, 1024))
        return partial(posembed.gather_backward, grad, ids, VOCAB)

    # in cache: T gradient rows into T position rows (out=); in memory: B
    # batches of 1024 gradient rows stream into a fresh vocabulary table
    t = at_most(s.in_cache, 2 * ROW768)
    b = at_least(s.in_memory, 1024 * ROW768)
    return [
        ScalingCase(
            "gather_backward", "positions, out=", "in cache", t * ROW768, partial(positions, t)
        ),
        ScalingCase(
            "gather_backward", "token ids", "in memory", VOCAB * ROW768, partial(token_ids, b)
        ),
    ]


def _samples(s: Sizes) -> list[ScalingCase]:
    def index(n: int) -> Callable[[], object]:
        # documents of about 500 tokens in a shuffled order, samples of 4096
        rng = np.random.default_rng(27)
        lengths = rng.integers(1, 1000, n).astype(np.int32)
        order = rng.permutation(n).astype(np.int32)
        return partial(posembed.gpt_sample_index, lengths, order, 4096, 1, int(lengths.sum()))

    # the lengths and the document index (4 bytes each a document) are read;
    # the sample index written is 1/1000 of that
    cases = []
    for size, n in (("in cache", s.in_cache // 8), ("in memory", s.in_memory // 8)):
        cases.append(ScalingCase("samples", "sample index", size, n * 8, partial(index, n)))
    return cases


def _pack(s: Sizes) -> list[ScalingCase]:
    def cut(tokens: int) -> Callable[[], object]:
        # documents of about 500 tokens packed into rows of 2048, cut into
        # uint16 ids and int32 positions (6 bytes a slot written)
        rng = np.random.default_rng(28)
        lengths = rng.integers(1, 1000, max(1, tokens // 500))
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        ids = (np.arange(int(offsets[-1])) % 50_000).astype(np.uint16)
        plan = posembed.pack(lengths, 2048)
        return partial(plan.cut, ids, offsets, position_dtype=np.int32)

    cases = []
    # within the cache below it, at least the in-memory size above it
    for size, tokens in (("in cache", s.in_cache // 6), ("in memory", -(-s.in_memory // 6))):
        cases.append(ScalingCase("pack", "cut", size, tokens * 6, partial(cut, tokens)))
    return cases


def _gpt_batch(s: Sizes) -> list[ScalingCase]:
    def batch(rows: int) -> Callable[[], object]:
        # documents of about 500 tokens ending with EOD, in memory, samples
        # of 4096 with all three switches
        rng = np.random.default_rng(29)
        lengths = rng.integers(2, 1000, max(2, rows * 4096 // 500 + 2))
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        ids = (np.arange(int(offsets[-1])) % 50_000).astype(np.uint16)
        ids[offsets[1:] - 1] = 0
        samples = posembed.gpt_samples(lengths, 4096, num_samples=rows, seed=1)
        switches = {"reset_position_ids": True, "reset_attention_mask": True}
        return partial(
            samples.batch, np.arange(rows), (ids, offsets), eod=0, eod_mask_loss=True, **switches
        )

    # 32 bytes written a token: tokens, labels, positions (int64), loss, cu_seqlens (4 bytes)
    cases = []
    for size, nbytes in (("in cache", s.in_cache), ("in memory", s.in_memory)):
        rows = max(1, nbytes // (32 * 4096))
        cases.append(
            ScalingCase("gpt_batch", "all switches", size, rows * 4096 * 32, partial(batch, rows))
        )
    return cases


def _batch_order(s: Sizes) -> list[ScalingCase]:
    def indices(count: int) -> Callable[[], object]:
        # rank 3 of 64's micro-batches of 8 from sample 10^9 of a stream of
        # 10M samples an epoch, each epoch shuffled
        order = posembed.BatchOrder(
            10_000_000,
            global_batch_size=512,
            micro_batch_size=8,
            world_size=64,
            rank=3,
            seed=1,
            consumed_samples=10**9,
        )
        return partial(order.micro_batches, 0, count // 8)

    # 8 bytes written an index; the shuffle's arithmetic bounds it, not memory
    count = s.in_cache // 16
    return [
        ScalingCase(
            "batch_order", "micro-batch indices", "in cache", count * 8, partial(indices, count)
        )
    ]


SCALING_BUILDERS: dict[str, Callable[[Sizes], list[ScalingCase]]] = {
    "roofline": _roofline,
    "gather": _gather,
    "interpolate": _interpolate,
    "resample_grid": _resample_grid,
    "windows": _windows,
    "embed": _embed,
    "gather_backward": _gather_backward,
    "samples": _samples,
    "pack": _pack,
    "gpt_batch": _gpt_batch,
    "batch_order": _batch_order,
}


def scaling_cases(quick: bool = False, kernels: list[str] | None = None) -> list[ScalingCase]:
    """Every threaded kernel's scaling cases (or those of ``kernels``, plus the
    ceilings), listed without their arrays."""
    s = sizes(quick)
    cases = []
    for kernel, build in SCALING_BUILDERS.items():
        if kernels is None or kernel == "roofline" or kernel in kernels:
            made = build(s)
            assert tuple(f"{c.problem} ({c.size})" for c in made) == SCALING_NAMES[kernel]
            cases += made
    return cases


def _scale(case: ScalingCase, counts: list[int], repeat: int) -> ScalingResult:
    """One case at each count; its arrays live only as long as this call."""
    fn = case.make()
    timers, slowest = {}, 0.0
    for n in counts:
        posembed.set_num_threads(n)
        timers[n], once, _ = timer(fn)
        slowest = max(slowest, once)
    reps = rounds(slowest, repeat)
    times: dict[int, list[float]] = {n: [] for n in counts}
    for _ in range(reps):
        for n in counts:
            posembed.set_num_threads(n)
            times[n].append(timers[n]())
    r = ScalingResult(case.kernel, case.problem, case.size, case.nbytes)
    first = np.array(times[counts[0]])
    for n in counts:
        r.seconds[n] = float(np.median(times[n]))
        r.speedups[n] = float(np.median(first / np.array(times[n])))
    return r


def run_scaling(
    counts: list[int],
    repeat: int,
    quick: bool = False,
    progress: Callable[[str], None] | None = None,
    kernels: list[str] | None = None,
) -> list[ScalingResult]:
    """Each scaling case at each thread count. Every round times all counts
    back to back, so a speed-up compares times taken moments apart: on a
    shared machine the load moves between rounds, and a ratio of medians
    taken a while apart would measure that as much as the threads."""
    before = posembed.get_num_threads() if posembed.config()["num_threads_set"] else None
    results = []
    try:
        for case in scaling_cases(quick, kernels):
            if progress is not None:
                progress(f"threads {counts}: {case.kernel}: {case.problem} ({case.size})")
            results.append(_scale(case, counts, repeat))
    finally:
        posembed.set_num_threads(before)
    return results

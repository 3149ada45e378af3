"""--mode race: each input picks a kernel (windows with offsets,
Windows.owner, stitch with every reduce, window_layout, WindowLayout.cut with
and without a range, a hand-built PackPlan in use, an indexed pair opened
while it is replaced, and posembed.dask's block functions), builds valid
arguments large enough that the call runs for milliseconds, and starts a
writer thread that rewrites the caller's arrays (offsets, starts, lengths,
documents, doc_offsets, tokens, values) with hostile values while the call
runs with the GIL released. The call must return or raise TypeError,
ValueError or IndexError; its result is not looked at (it means nothing once
the arrays changed). A crash or a hang ends the process, as in the calls mode.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import posembed
from posembed import reference
from posembed.kernels._windows import OWNER_RULES, REDUCES

from .common import (
    ALLOWED,
    HUGE,
    INF,
    LAYOUT_FIELDS,
    NAN,
    Call,
    Outcome,
    Reader,
    Value,
    _failure,
    _kind,
    _run,
    quiet,
)

try:
    from posembed.dask import compute as dask_compute
except ImportError:  # race mode then leaves posembed.dask's block functions out
    dask_compute = None

# the twin's PackPlan (posembed.reference.pack is also the name of its pack function)
reference_pack = sys.modules[reference.pack.__module__]

# What the writer puts into an integer array: zero, negative, past every
# bound, near int64's ends (cast to the array's dtype, wrapping).
RACE_INTS = [0, -1, 1, 2**31 - 1, 1 << 40, -(1 << 40), HUGE, 2**63 - 1, -(2**63)]
RACE_FLOATS = [0.0, -0.0, NAN, INF, -INF, 3.4e38, -1e300, 1e-40]
# Offsets that size a result (window_layout's windows, stitch's tokens): a
# last offset rewritten to 2^31 - 1 or 2^40 leaves them valid, the layout of a
# real corpus that large (gigabytes to terabytes of output), which no race can
# tell from a request. Their writer uses values that are refused wherever they
# land, or that fit.
RACE_SIZING_INTS = [0, -1, 1, -(1 << 40), HUGE, 2**63 - 1, -(2**63)]
# The most one race call writes: enough for milliseconds of work, little memory.
RACE_BYTES = 16 << 20


@dataclass
class Scribble:
    """The writer's plan for one caller-owned array: (spot, value) writes made
    in turn, each put back afterwards when ``restore``; a value of None
    shuffles the spot's elements instead."""

    label: str
    array: np.ndarray
    writes: list[tuple[Any, Any]]
    restore: bool


class Writer(threading.Thread):
    """Rewrites arrays until stopped (each write a few bytecodes, so that the
    thread runs whenever the call it races has released the GIL)."""

    def __init__(self, plans: list[Scribble], delay: float, seed: int) -> None:
        super().__init__(daemon=True)
        self.plans, self.delay, self.seed = plans, delay, seed
        self.halt = threading.Event()
        self.writes = 0

    def run(self) -> None:
        rng = np.random.default_rng(self.seed)
        saved = [[plan.array[spot].copy() for spot, _ in plan.writes] for plan in self.plans]
        if self.delay:
            time.sleep(self.delay)
        with np.errstate(all="ignore"):  # (warnings' filters are not for threads to change)
            while not self.halt.is_set():
                for plan, goods in zip(self.plans, saved, strict=True):
                    for (spot, value), good in zip(plan.writes, goods, strict=True):
                        if value is None:
                            rng.shuffle(plan.array[spot])
                        else:
                            plan.array[spot] = value
                        if plan.restore:
                            plan.array[spot] = good
                        self.writes += 1
                if not self.plans:
                    return


def _scribble(
    r: Reader, label: str, array: np.ndarray, ints: list[int] = RACE_INTS
) -> Scribble | None:
    """A plan for ``array`` drawn from the input, writing ``ints`` into an
    integer array; None for an array no caller could write."""
    if not array.flags.writeable or array.size == 0 or array.ndim == 0:
        return None
    flat = array.reshape(-1) if array.flags.c_contiguous else None
    target = flat if flat is not None else array
    n = target.shape[0]
    pool = RACE_FLOATS if array.dtype.kind == "f" else ints
    writes: list[tuple[Any, Any]] = []
    for _ in range(r.int(1, 4)):
        where = r.pick(["one", "one", "first", "last", "run", "all"])
        if where == "one":
            spot: Any = r.int(0, n - 1)
        elif where == "first":
            spot = 0
        elif where == "last":
            spot = n - 1
        else:
            lo = 0 if where == "all" else r.int(0, n - 1)
            spot = slice(lo, n if where == "all" else min(n, lo + r.pick([2, 16, 256])))
        if r.chance(6) and isinstance(spot, slice):
            writes.append((spot, None))  # shuffled
        else:
            with quiet():
                value = np.array(r.pick(pool)).astype(array.dtype)
            writes.append((spot, value))
    return Scribble(label, target, writes, r.chance(2))


@dataclass
class RaceCase:
    """One race: the call, and the caller-owned arrays it reads (label, array)."""

    kernel: str
    run: Callable[[], Any]
    arrays: list[tuple[str, np.ndarray]]
    text: str
    sizing: tuple[str, ...] = ()  # labels of arrays written with RACE_SIZING_INTS, not RACE_INTS


def _race_corpus(r: Reader, bytes_per_window: int) -> tuple[int, int, str, np.ndarray]:
    """size, step, tail and document offsets of a corpus whose windows take
    about RACE_BYTES at ``bytes_per_window`` each."""
    size = r.pick([1, 2, 7, 16, 64, 256])
    step = r.pick([size, size, max(1, size // 2), 1, r.int(1, size)])
    tail = r.pick(["pad", "shift", "drop"])
    docs = r.pick([1, 2, 3, 17, 400, 20_000])
    windows = max(RACE_BYTES // max(bytes_per_window * size, 1) - docs, 1)
    n = min(windows * step, 1 << 23)
    n = r.int(n // 4, n)
    cuts = np.sort(r.rng().integers(0, n + 1, docs - 1))
    offsets = np.concatenate([[0], cuts, [n]]).astype(np.int64)
    return size, step, tail, offsets


def _race_tokens(r: Reader, n: int) -> np.ndarray:
    dtype = r.pick([np.int32, np.int64, np.uint16, np.int8])
    return (np.arange(n, dtype=np.int64) % 127).astype(dtype)


def _own_windows(r: Reader, w: posembed.Windows) -> posembed.Windows:
    """``w``, or a Windows built by hand from copies of its arrays (the caller's own)."""
    if r.chance(2):
        return w
    return posembed.Windows(
        w.tokens,
        w.starts.copy(),
        w.lengths.copy(),
        w.documents.copy(),
        w.doc_offsets.copy(),
        w.size,
        w.step,
        w.tail,
    )


def _own_layout(r: Reader, layout: posembed.WindowLayout) -> posembed.WindowLayout:
    if r.chance(2) and all(getattr(layout, f).flags.writeable for f in LAYOUT_FIELDS):
        return layout
    return posembed.WindowLayout(
        **{f: getattr(layout, f).copy() for f in LAYOUT_FIELDS},
        size=layout.size,
        step=layout.step,
        tail=layout.tail,
    )


WINDOW_FIELDS = ("starts", "lengths", "documents", "doc_offsets")


def _race_case(r: Reader, kernel: str) -> RaceCase:
    """The call ``kernel`` with arguments drawn from ``r``."""
    if kernel == "embed block":
        return _race_embed(r)
    if kernel == "PackPlan":
        return _race_plan(r)
    if kernel == "indexed pair":
        return _race_pair(r)
    values_d = r.pick([1, 1, 3])
    values_dtype = np.dtype(r.pick([np.float32, np.float64, np.int32, np.float16]))
    per_window = values_d * values_dtype.itemsize if "stitch" in kernel else 4
    size, step, tail, offsets = _race_corpus(r, per_window)
    n = int(offsets[-1])
    tokens = _race_tokens(r, n)
    text = f"{n} tokens ({tokens.dtype}), {offsets.size - 1} documents, size {size}, step {step}"
    text += f", tail {tail}"
    if kernel == "windows":
        pad = r.pick([0, -1, 7])

        def run() -> Any:
            return posembed.windows(
                tokens, size, step=step, tail=tail, offsets=offsets, pad_value=pad
            )

        return RaceCase(kernel, run, [("offsets", offsets), ("tokens", tokens)], text)
    if kernel == "window_layout":
        return RaceCase(
            kernel,
            lambda: posembed.window_layout(offsets, size, step=step, tail=tail),
            [("offsets", offsets)],
            text,
            sizing=("offsets",),
        )
    if kernel in ("Windows.owner", "stitch", "stitch block"):
        w = _own_windows(r, posembed.windows(tokens, size, step=step, tail=tail, offsets=offsets))
        arrays = [(f, getattr(w, f)) for f in WINDOW_FIELDS]
        if kernel == "Windows.owner":
            rule = r.pick(sorted(OWNER_RULES))
            return RaceCase(kernel, lambda: w.owner(rule), arrays, text + f", rule {rule}")
        shape = (len(w), size) if values_d == 1 and r.chance(2) else (len(w), size, values_d)
        values = r.rng().integers(-9, 9, shape).astype(values_dtype)
        reduce = r.pick(sorted(REDUCES))
        fill = r.pick([0, 1, -1, 2.5])
        text += f", values {values_dtype}{shape}, reduce {reduce}, fill {fill}"
        if kernel == "stitch":

            def run() -> Any:
                return posembed.stitch(values, w, reduce=reduce, fill=fill)

            return RaceCase(
                kernel, run, [("values", values), *arrays], text, sizing=("doc_offsets",)
            )
        return _race_stitch_block(r, w, values, reduce, fill, text)
    # WindowLayout.cut and the Dask block that calls it
    layout = _own_layout(r, posembed.window_layout(offsets, size, step=step, tail=tail))
    count = len(layout)
    first, end = sorted((r.int(0, count), r.int(0, count)))
    ranged = kernel == "window block" or r.chance(2)
    token_start = 0
    if ranged and first < end and r.chance(2):
        # the block holds the corpus from the first window's start on
        token_start = int(layout.doc_offsets[layout.documents[first]] + layout.starts[first])
    block = tokens[token_start:]
    pad = r.pick([0, 1, 99])
    arrays = [(f, getattr(layout, f)) for f in LAYOUT_FIELDS] + [("tokens", block)]
    text += f", windows [{first}, {end}) of {count}, token_start {token_start}"
    if kernel == "window block":
        return RaceCase(
            kernel,
            lambda: dask_compute._window_block(block, layout, first, end, token_start, pad),
            arrays,
            text,
        )
    span = slice(first, end) if ranged else None
    return RaceCase(
        kernel,
        lambda: layout.cut(block, windows=span, token_start=token_start, pad_value=pad),
        arrays,
        text + ("" if ranged else " (all)"),
    )


def _race_stitch_block(
    r: Reader, w: posembed.Windows, values: np.ndarray, reduce: str, fill: Any, text: str
) -> RaceCase:
    """posembed.dask's stitch of one block of tokens [a, b), with the windows
    holding any of them (as posembed.dask.stitch picks them)."""
    n = int(w.doc_offsets[-1])
    a, b = sorted((r.int(0, n), r.int(0, n)))
    b = max(b, min(a + 1, n))
    corpus_starts = w.doc_offsets[:-1][w.documents] + w.starts
    corpus_ends = corpus_starts + w.lengths
    first = int(np.searchsorted(corpus_ends, a, side="right"))
    end = int(np.searchsorted(corpus_starts, b, side="left"))
    first = min(first, end)
    starts, lengths = corpus_starts[first:end], w.lengths[first:end].copy()
    documents, part = w.documents[first:end].copy(), values[first:end]

    def run() -> Any:
        return dask_compute._stitch_block(
            part,
            a,
            b,
            starts,
            lengths,
            documents,
            w.doc_offsets,
            w.size,
            w.step,
            w.tail,
            reduce,
            fill,
        )

    arrays = [("values", part), ("corpus_starts", starts), ("lengths", lengths)]
    arrays += [("documents", documents), ("doc_offsets", w.doc_offsets)]
    return RaceCase("stitch block", run, arrays, text + f", tokens [{a}, {b})")


PLAN_FIELDS = ("document_lengths", "row_offsets", "documents", "starts", "lengths", "offsets")
PLAN_DEFECTS = ["short", "overlap", "gap", "past capacity", "duplicate", "row_offsets"]


def _race_plan(r: Reader) -> RaceCase:
    """A PackPlan built by hand from a real plan's arrays (the caller's own,
    with a defect or not) and used (unpack, cut, row) while a writer rewrites
    those arrays: a documented exception, or the results of the arrays the
    plan holds (its own copies), as the twin computes them."""
    rng = r.rng()
    n, capacity = r.int(0, 400), r.pick([1, 3, 16, 64, 1000])
    lengths = rng.integers(0, r.pick([2, 20, 200, 3000]), n)
    strategy, split = r.pick(["bfd", "ffd", "wrapped"]), r.pick(["pieces", "truncate"])
    real = posembed.pack(lengths, capacity, strategy=strategy, split=split)
    arrays = {f: np.array(getattr(real, f)) for f in PLAN_FIELDS}
    text = f"{n} documents, capacity {capacity}, {strategy}, {split}"
    if r.chance(2) and arrays["documents"].size:
        defect = r.pick(PLAN_DEFECTS)
        e = r.int(0, arrays["documents"].size - 1)
        if defect == "short":
            name = r.pick(PLAN_FIELDS[1:])
            arrays[name] = arrays[name][: r.int(0, max(0, arrays[name].size - 1))]
        elif defect == "overlap":
            arrays["offsets"][e] = max(0, arrays["offsets"][e] - r.int(1, 3))
        elif defect == "gap":
            arrays["offsets"][e] += r.int(1, 3)
        elif defect == "past capacity":
            arrays["lengths"][e] += capacity
        elif defect == "duplicate":
            arrays["documents"][e] = arrays["documents"][r.int(0, arrays["documents"].size - 1)]
        else:
            arrays["row_offsets"][r.int(0, arrays["row_offsets"].size - 1)] += r.pick([-1, 1, 2])
        text += f", defect {defect} at {e}"
    use = r.pick(["unpack", "cut", "row"])
    text += f", {use}"
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = (np.arange(int(offsets[-1])) % 50_000).astype(np.uint16)

    def run() -> Any:
        plan = posembed.PackPlan(
            arrays["document_lengths"], capacity, strategy, split,
            *(arrays[f] for f in PLAN_FIELDS[1:]),
        )  # fmt: skip
        own = {f: getattr(plan, f) for f in PLAN_FIELDS}
        twin = reference_pack.PackPlan(own["document_lengths"], capacity, strategy, split,
                                  *(own[f] for f in PLAN_FIELDS[1:]))  # fmt: skip
        if use == "unpack":
            values = np.arange(plan.rows * capacity, dtype=np.float32).reshape(plan.rows, -1)
            got, want = plan.unpack(values), twin.unpack(values)
            same = all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
        elif use == "cut":
            got, want = plan.cut(tokens, offsets), twin.cut(tokens, offsets)
            same = all(np.array_equal(getattr(got, k), v) for k, v in want.items() if v is not None)
        else:
            row = r.int(0, max(0, plan.rows - 1)) if plan.rows else 0
            got, want = plan.row(row), twin.row(row)
            same = all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
        if not same:
            raise AssertionError(f"PackPlan.{use} differs from its twin on the plan's own arrays")
        return got

    return RaceCase("PackPlan", run, [(f, a) for f, a in arrays.items()], text)


def _race_pair(r: Reader) -> RaceCase:
    """An indexed dataset opened and read while another thread replaces it,
    again and again, with a pair of the same sizes and other tokens: every
    read is the old corpus or the new one whole, or a documented error."""
    root = Path(tempfile.mkdtemp(prefix="posembed-fuzz-pair-"))
    rng = r.rng()
    lengths = rng.integers(0, r.pick([3, 50, 5000]), r.int(1, 40))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    versions = [
        (rng.integers(0, 1000, int(offsets[-1])) + 1000 * k).astype(np.int32) for k in range(2)
    ]
    prefix = root / "pair"
    posembed.write_indexed(prefix, versions[0], offsets, dtype=np.int32)
    opens = r.int(1, 8)

    def run() -> Any:
        stop = threading.Event()

        def replace() -> None:
            k = 1
            while not stop.is_set():
                posembed.write_indexed(prefix, versions[k], offsets, dtype=np.int32, force=True)
                k ^= 1

        writer = threading.Thread(target=replace, daemon=True)
        writer.start()
        try:
            for _ in range(opens):
                try:
                    corpus = posembed.IndexedCorpus(prefix)
                    tokens, _ = corpus.to_arrays()
                except (ValueError, OSError):  # a pair being replaced: refused, not mixed
                    continue
                if not any(np.array_equal(tokens, v) for v in versions):
                    raise AssertionError("an .idx read with another pair's .bin: tokens mixed")
        finally:
            stop.set()
            writer.join()
            shutil.rmtree(root, ignore_errors=True)

    return RaceCase("indexed pair", run, [], f"{lengths.size} documents, {opens} opens")


def _race_embed(r: Reader) -> RaceCase:
    """posembed.dask's embed of one block: ids, positions and tables rewritten."""
    d = r.pick([1, 8, 64])
    vocab, rows = r.pick([1, 50, 5000]), r.pick([1, 64, 4096])
    batch = max(RACE_BYTES // (4 * d * 256), 1)
    length = r.int(1, 256)
    rng = r.rng()
    ids = rng.integers(0, vocab, (batch, length))
    token_table = rng.standard_normal((vocab, d), dtype=np.float32)
    pos_table = rng.standard_normal((max(rows, length), d), dtype=np.float32)
    positions = None if r.chance(2) else rng.integers(0, pos_table.shape[0], (batch, length))
    dropout = r.pick([0.0, 0.0, 0.1])
    seed = r.pick([None, 3])
    first_row = r.pick([0, 5])
    arrays = [("ids", ids), ("token_table", token_table), ("pos_table", pos_table)]
    if positions is not None:
        arrays.append(("positions", positions))

    def run() -> Any:
        return dask_compute._embed_block(
            ids, token_table, pos_table, positions, 0, dropout, seed, first_row
        )

    text = f"ids {ids.shape}, d {d}, tables {vocab}/{pos_table.shape[0]} rows, dropout {dropout}"
    return RaceCase("embed block", run, arrays, text)


RACE_KERNELS = ["windows", "Windows.owner", "stitch", "window_layout", "WindowLayout.cut"]
RACE_KERNELS += ["PackPlan", "indexed pair"]
if dask_compute is not None:  # the Dask block functions, where the dask extra is installed
    RACE_KERNELS += ["window block", "stitch block", "embed block"]


LAST_WRITER: Writer | None = None  # the latest race's writer (for the tests)


def race_input(data: bytes) -> str:
    """Run one race input; returns the kernel and outcome for the statistics."""
    r = Reader(data)
    kernel = r.pick(RACE_KERNELS)
    with quiet():
        case = _race_case(r, kernel)
    plans = [
        p
        for label, a in case.arrays
        if (p := _scribble(r, label, a, RACE_SIZING_INTS if label in case.sizing else RACE_INTS))
        is not None
    ]
    delay = r.pick([0.0, 0.0, 0.0005, 0.002, 0.005])
    global LAST_WRITER
    writer = LAST_WRITER = Writer(plans, delay, r.int(0, 2**32 - 1))
    writer.start()
    try:
        with quiet():
            _, exc = _run(lambda pos, kw: case.run(), [], {})
    finally:
        writer.halt.set()
        writer.join()
    if exc is not None and not isinstance(exc, ALLOWED):
        call = Call(f"race {kernel}", lambda pos, kw: None, None)
        call.add("case", Value(case.text))
        call.add("writer", Value([(p.label, [(s, v) for s, v in p.writes]) for p in plans]))
        _failure(Outcome(call, "exception", fast_exc=exc), f"{kernel} raised {type(exc).__name__}")
        return f"race {kernel}: known"
    return f"race {kernel}: {_kind(exc)}"

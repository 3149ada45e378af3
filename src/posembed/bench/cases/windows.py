"""windows: overlapping windows of a token stream and of a CSR corpus; stitch."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import posembed
from posembed import reference
from posembed.bench.case import Case, unmeasured
from posembed.bench.cases._shared import absent, optional_torch


def build(quick: bool = False) -> list[Case]:
    rng = np.random.default_rng(5)
    size, step = 2048, 1536
    ntok = 5_000_000 if quick else 50_000_000
    tokens = rng.integers(0, 50_000, ntok).astype(np.uint32)
    stream_shape = f"{ntok // 1_000_000}M uint32 tokens, size 2048, step 1536, drop"
    count = (tokens.size - size) // step + 1

    def numpy_windows() -> np.ndarray:
        view = np.lib.stride_tricks.sliding_window_view(tokens, size)[::step]
        return np.ascontiguousarray(view)

    impls: dict[str, Callable[[], object]] = {
        "reference": lambda: reference.windows(tokens, size, step=step, tail="drop"),
        "numpy": numpy_windows,
        "posembed": lambda: posembed.windows(tokens, size, step=step, tail="drop"),
    }
    torch = optional_torch()
    if torch is not None:
        t_tokens = torch.from_numpy(tokens.view(np.int32))  # same bytes; no uint32 unfold
        impls["torch"] = lambda: t_tokens.unfold(0, size, step).contiguous()
    cases = [
        Case(
            "windows",
            "fresh output",
            stream_shape,
            count * size * 4,
            impls,
            "copy fresh",
            lambda: bool(
                np.array_equal(
                    posembed.windows(tokens, size, step=step, tail="drop").tokens, numpy_windows()
                )
            ),
        )
    ]
    # The same into a reused buffer (a preprocessing loop's batches): NumPy's
    # best is copyto into a written buffer, the roofline a warm copy.
    buffers = {k: np.empty((count, size), np.uint32) for k in ("reference", "numpy", "posembed")}
    for b in buffers.values():
        b.fill(1)
    impls = {
        "reference": lambda: reference.windows(
            tokens, size, step=step, tail="drop", out=buffers["reference"]
        ),
        "numpy": lambda: np.copyto(
            buffers["numpy"], np.lib.stride_tricks.sliding_window_view(tokens, size)[::step]
        ),
        "posembed": lambda: posembed.windows(
            tokens, size, step=step, tail="drop", out=buffers["posembed"]
        ),
    }
    if torch is not None:
        buffers["torch"] = np.ones((count, size), np.uint32)
        t_out = torch.from_numpy(buffers["torch"].view(np.int32))
        impls["torch"] = lambda: t_out.copy_(t_tokens.unfold(0, size, step))
    cases.append(
        Case(
            "windows",
            "out= given",
            stream_shape,
            count * size * 4,
            impls,
            "copy warm",
            lambda: bool(
                np.array_equal(
                    posembed.windows(
                        tokens, size, step=step, tail="drop", out=buffers["posembed"]
                    ).tokens,
                    numpy_windows(),
                )
            ),
        )
    )
    ndocs = 5_000 if quick else 100_000
    lengths = rng.integers(1, 4001, ndocs)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    corpus = rng.integers(0, 50_000, offsets[-1]).astype(np.uint32)

    def per_document() -> np.ndarray:  # a Python loop calling NumPy per document
        parts = [
            np.lib.stride_tricks.sliding_window_view(corpus[a:b], size)[::step]
            for a, b in itertools.pairwise(offsets)
            if b - a >= size
        ]
        return np.concatenate(parts) if parts else np.empty((0, size), corpus.dtype)

    out_rows = int(sum((n - size) // step + 1 for n in lengths if n >= size))
    impls = {
        "reference": lambda: reference.windows(
            corpus, size, step=step, tail="drop", offsets=offsets
        ),
        "numpy": per_document,
        "posembed": lambda: posembed.windows(corpus, size, step=step, tail="drop", offsets=offsets),
    }
    if torch is not None:
        t_corpus = torch.from_numpy(corpus.view(np.int32))

        def torch_per_document() -> object:  # the same loop with Tensor.unfold
            parts = [
                t_corpus[a:b].unfold(0, size, step)
                for a, b in itertools.pairwise(offsets.tolist())
                if b - a >= size
            ]
            return torch.cat(parts)

        impls["torch"] = torch_per_document
    cases.append(
        Case(
            "windows",
            "CSR documents",
            f"{ndocs // 1000}k documents of 1..4000 tokens, size 2048, step 1536, drop",
            out_rows * size * 4,
            impls,
            "copy fresh",
            lambda: bool(
                np.array_equal(
                    posembed.windows(corpus, size, step=step, tail="drop", offsets=offsets).tokens,
                    per_document(),
                )
            ),
        )
    )

    cases += _arrow_cases(corpus, offsets, size, step, out_rows, per_document, quick)

    # Per-window model outputs back to tokens: the mean over overlapping windows.
    stream = rng.integers(0, 50_000, 50_000 if quick else 200_000).astype(np.uint32)
    win = posembed.windows(stream, size, step=step)
    twin = reference.windows(stream, size, step=step)
    values = rng.standard_normal((len(win), size), dtype=np.float32)
    slots = (win.starts[:, None] + np.arange(size))[win.mask]

    def bincount_mean() -> np.ndarray:
        sums = np.bincount(slots, weights=values[win.mask], minlength=stream.size)
        return (sums / np.bincount(slots, minlength=stream.size)).astype(np.float32)

    impls = {
        "reference": lambda: reference.stitch(values, twin, reduce="mean"),
        "numpy": bincount_mean,
        "posembed": lambda: posembed.stitch(values, win, reduce="mean"),
    }
    if torch is not None:
        t_slots = torch.from_numpy(slots)
        t_vals = torch.from_numpy(values[win.mask])

        def torch_mean() -> object:  # index_add_ sums, bincount counts
            sums = torch.zeros(stream.size).index_add_(0, t_slots, t_vals)
            return sums / torch.bincount(t_slots, minlength=stream.size)

        impls["torch"] = torch_mean
    cases.append(
        Case(
            "windows",
            "stitch mean",
            f"{stream.size // 1000}k tokens, size 2048, step 1536, f32",
            stream.size * 4,
            impls,
            None,
            lambda: bool(
                np.allclose(
                    posembed.stitch(values, win, reduce="mean"),
                    bincount_mean(),
                    rtol=1e-5,
                    atol=1e-6,
                )
            ),
        )
    )
    return cases


def _optional(name: str) -> Any:
    """An optional package, or None where it is not installed (its columns stay empty)."""
    try:
        return __import__(name)
    except ImportError:
        return None


@contextlib.contextmanager
def _quiet(datasets: Any) -> Iterator[None]:
    """datasets' progress bars off for one call, as they were after it."""
    was_off = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if not was_off:
            datasets.enable_progress_bars()


# the cases that window an Arrow column (pyarrow), the second through datasets
_ARROW_CASES = ("Arrow column", "group_texts")


def _arrow_cases(
    corpus: np.ndarray,
    offsets: np.ndarray,
    size: int,
    step: int,
    out_rows: int,
    per_document: Callable[[], np.ndarray],
    quick: bool,
) -> list[Case]:
    """The CSR corpus as a ``datasets`` column holds it (an Arrow list array,
    int32 offsets, over the same values): windowed directly, and against the
    Hugging Face examples' ``group_texts`` (``Dataset.map(batched=True)``
    joining each batch of 1000 rows, cutting blocks, dropping the rest)."""
    pa = _optional("pyarrow")
    if pa is None:  # both cases window an Arrow column
        return [unmeasured("windows", name, absent("pyarrow")) for name in _ARROW_CASES]
    datasets = _optional("datasets")
    column = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(corpus))

    def arrow_loop() -> np.ndarray:  # the same per-document loop over the column's arrays
        values, ends = column.values.to_numpy(), column.offsets.to_numpy()
        parts = [
            np.lib.stride_tricks.sliding_window_view(values[a:b], size)[::step]
            for a, b in itertools.pairwise(ends.tolist())
            if b - a >= size
        ]
        return np.concatenate(parts) if parts else np.empty((0, size), values.dtype)

    def check_column() -> bool:
        ours = posembed.windows(column, size, step=step, tail="drop").tokens
        return bool(np.array_equal(ours, per_document()))

    ndocs = offsets.shape[0] - 1
    cases = [
        Case(
            "windows",
            "Arrow column",
            f"{ndocs // 1000}k documents as a pyarrow list column, size 2048, step 1536, drop",
            out_rows * size * 4,
            {
                "reference": lambda: reference.windows(
                    corpus, size, step=step, tail="drop", offsets=offsets
                ),
                "numpy": arrow_loop,
                "posembed": lambda: posembed.windows(column, size, step=step, tail="drop"),
            },
            "copy fresh",
            check_column,
        )
    ]
    if datasets is None:  # group_texts is a Dataset.map
        return [*cases, unmeasured("windows", "group_texts", absent("datasets"))]

    # group_texts on the corpus' first documents (it turns every token into a
    # Python int and back: the whole corpus would take minutes a call)
    docs, block, batch = (500 if quick else 10_000), 1024, 1000
    head = offsets[: docs + 1]
    batches = np.append(head[::batch], head[-1])  # each batch of rows: one stream
    table = pa.table({"input_ids": column.slice(0, docs)})
    ds = datasets.Dataset(table)

    def group_texts(examples: dict[str, list[list[int]]]) -> dict[str, list[list[int]]]:
        joined = list(itertools.chain.from_iterable(examples["input_ids"]))
        total = len(joined) // block * block
        return {"input_ids": [joined[i : i + block] for i in range(0, total, block)]}

    def hf_way() -> Any:
        with _quiet(datasets):
            return ds.map(group_texts, batched=True, batch_size=batch)

    def ours() -> posembed.Windows:
        # the same batches as documents: one row per batch over the same values
        col = ds.data.column("input_ids").combine_chunks()
        ends = col.offsets.to_numpy()
        rows = pa.ListArray.from_arrays(pa.array(np.append(ends[::batch], ends[-1])), col.values)
        return posembed.windows(rows, block, step=block, tail="drop")

    def check_grouped() -> bool:
        grouped = hf_way().with_format("arrow")["input_ids"].combine_chunks()
        want = grouped.values.to_numpy().reshape(-1, block)
        return bool(np.array_equal(ours().tokens, want))

    sums = [int(head[min(k + batch, docs)] - head[k]) // block for k in range(0, docs, batch)]
    cases.append(
        Case(
            "windows",
            "group_texts",
            f"{docs} documents, batches of {batch}, block {block}, no overlap, drop",
            sum(sums) * block * 4,
            {
                "reference": lambda: reference.windows(
                    corpus[: head[-1]], block, step=block, tail="drop", offsets=batches
                ),
                "numpy": hf_way,
                "posembed": ours,
            },
            None,
            check_grouped,
        )
    )
    return cases

"""The cut of ``posembed chunk``: a range input's windows cut batch by batch,
with the reads ahead and the writes behind on threads of their own (or, for a
sink that cuts straight from the token file, the kernels' threads doing all
three), and a streamed input's windows cut as its documents come. The
batches are planned to fit the memory budget the caller gives."""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from posembed import _core
from posembed.corpus._source import Documents, StreamInput
from posembed.io._tokens import TokenFile
from posembed.kernels._windows import (
    _cut,
    _layout_part,
    _LayoutPart,
)

# Batches read ahead of and written behind the one being cut: the reads (a
# thread of positional reads) and the writes (one of positional writes, both
# with the GIL released) overlap the kernel.
READ_AHEAD, WRITE_BEHIND = 2, 2

_READ_BUFFERS = READ_AHEAD + 1  # those read ahead, and the one being cut

_ROW_BUFFERS = WRITE_BEHIND + 1  # those being written, and the one being cut into

# Layouts (starts, lengths, documents: 24 bytes a window) alive at once: one per
# token buffer, the one being planned, and one per row buffer; plus the copies
# the kernels take of one, and of the offsets of the documents it spans.
_LAYOUTS = _READ_BUFFERS + 1 + _ROW_BUFFERS + 2


def _pipeline_thread() -> ThreadPoolExecutor:
    """A reading or a writing thread of the pipeline: its kernels (if any)
    take the thread count of the thread that starts it."""
    count = _core.calling_thread_threads()
    return ThreadPoolExecutor(1, initializer=_core.set_calling_thread_threads, initargs=(count,))


class ChunkJob(NamedTuple):
    """A checked ``posembed chunk`` run, as :func:`prepare_chunk` returns it.

    Attributes
    ----------
    source : Path
        The token file.
    output : Path
        The folder to write.
    size : int
        Window length.
    step : int
        Distance between window starts.
    tail : {"pad", "shift", "drop"}
        How the last window of each document is placed.
    tokens : TokenFile
        The input, not yet opened.
    doc_offsets : ndarray of int64, shape (documents + 1,)
        The documents' offsets, from 0 to the token count.
    """

    source: Path
    output: Path  # or, for posembed.dask, a StoreUrl (posembed.io._store)
    size: int
    step: int
    tail: str
    tokens: TokenFile
    doc_offsets: np.ndarray


class _Plan(NamedTuple):
    """How large a batch may be: windows, tokens read, documents spanned."""

    windows: int
    tokens: int
    documents: int


def _plan(size: int, itemsize: int, budget: int) -> _Plan:
    """Batches whose buffers and layouts, all in flight together, fit ``budget`` bytes."""
    # A window costs a row in each row buffer, up to `size` tokens in each
    # token buffer (windows that do not overlap read as many tokens as they
    # hold), its layout entries, and the offsets of a document it may span.
    per_window = (_ROW_BUFFERS + _READ_BUFFERS) * size * itemsize + 24 * _LAYOUTS + 24
    windows = max(1, budget // per_window)
    return _Plan(windows, windows * size, windows)


# Row bytes a sink that cuts from the file itself (cut_from) takes a call:
# the kernels' threads share each call's blocks, and the bar moves between.
DIRECT_CALL_BYTES = 64 << 20


def _direct_plan(size: int, itemsize: int, budget: int) -> _Plan:
    """Batches for a sink that cuts from the file (no token or row buffers
    here; the kernel's are a block per thread): one batch in flight, a
    window costing its layout entries (start, length, document: 24 bytes),
    the kernel's copy of them and the offsets of a document it may span."""
    per_window = 24 + 24 + 24
    windows = max(1, min(budget // per_window, DIRECT_CALL_BYTES // (size * itemsize)))
    return _Plan(windows, windows * size, windows)


class _Batch(NamedTuple):
    """Windows [begin, begin + len(layout)) of a run: their layout and the
    corpus tokens [first_token, end_token) they cover."""

    begin: int
    layout: _LayoutPart
    first_token: int
    end_token: int


def _batches(job: ChunkJob, window_offsets: np.ndarray, plan: _Plan) -> Iterator[_Batch]:
    offsets = job.doc_offsets
    ndocs = offsets.shape[0] - 1
    total = int(window_offsets[-1])
    begin = 0
    while begin < total:
        # the windows of at most plan.documents documents, so that the offsets
        # the kernels copy for a batch stay within the plan
        doc = int(np.searchsorted(window_offsets, begin, side="right")) - 1
        last_doc = min(ndocs, doc + plan.documents)
        end = min(total, begin + plan.windows, int(window_offsets[last_doc]))
        layout = _layout_part(offsets, job.size, job.step, job.tail, window_offsets, begin, end)

        def stop(k: int, layout: _LayoutPart = layout) -> int:
            return int(offsets[layout.documents[k]] + layout.starts[k] + layout.lengths[k])

        # windows lie in corpus order: the first starts first, the last ends last
        first = int(offsets[layout.documents[0]] + layout.starts[0])
        count = layout.starts.shape[0]
        if stop(count - 1) - first > plan.tokens:
            # tokens no window takes (tails and documents that tail="drop"
            # drops) lie between them: only the windows whose tokens fit
            count = bisect.bisect_right(range(count), first + plan.tokens, key=stop)
            layout = _LayoutPart(
                layout.window_offsets,
                layout.starts[:count],
                layout.lengths[:count],
                layout.documents[:count],
            )
        yield _Batch(begin, layout, first, stop(count - 1))
        begin += count


def _run_direct(
    batches: Iterator[_Batch], job: ChunkJob, sink: Any, pad_value: int, bar: Any
) -> None:
    """Each batch cut by the sink straight from the token file (on the
    kernels' threads, each reading, cutting and writing blocks of its own)."""
    tokens = job.tokens
    try:
        for batch in batches:
            layout = batch.layout
            sink.cut_from(
                batch.begin,
                tokens,
                job.doc_offsets,
                layout.starts,
                layout.lengths,
                layout.documents,
                pad_value,
            )
            bar.update(max(0, batch.end_token - bar.n))
        tokens.check()  # every token is read: the file must still be the one first seen
        bar.update(max(0, tokens.count - bar.n))
    finally:
        bar.close()


def _run_pipeline(
    batches: Iterator[_Batch],
    job: ChunkJob,
    sink: Any,
    pad_value: int,
    plan: _Plan,
    bar: Any,
) -> None:
    tokens, size = job.tokens, job.size
    # Tokens are read into, and windows cut into, rings of buffers, each free
    # again by the time it comes round (at most READ_AHEAD reads ahead of the
    # cut, at most WRITE_BEHIND writes in flight): the memory is allocated
    # once, and no batch pays for the page faults of new arrays.
    reads = [np.empty(plan.tokens, tokens.dtype) for _ in range(_READ_BUFFERS)]
    ring = [np.empty((plan.windows, size), tokens.dtype) for _ in range(_ROW_BUFFERS)]

    def write(batch: _Batch, rows: np.ndarray) -> None:
        layout = batch.layout
        sink.write(batch.begin, rows, layout.starts, layout.lengths, layout.documents)

    def tiles(batch: _Batch) -> bool:
        """Whether the batch's windows are its tokens back to back, unpadded
        (blocks of a flat token file): then the tokens read are the rows,
        written as they are, with no cut."""
        layout, count = batch.layout, batch.layout.starts.shape[0]
        if batch.end_token - batch.first_token != count * size:
            return False
        if not (layout.lengths == size).all():
            return False
        corpus = job.doc_offsets[layout.documents] + layout.starts
        return bool((corpus == batch.first_token + size * np.arange(count)).all())

    ahead: deque[tuple[_Batch, Future[np.ndarray], bool]] = deque()
    writes: deque[Future[None]] = deque()
    # the write, if any, still taking its rows from each read buffer
    writing: list[Future[None] | None] = [None] * len(reads)
    issued = 0

    with _pipeline_thread() as reader, _pipeline_thread() as writer:

        def read_ahead() -> None:
            nonlocal issued
            while len(ahead) < READ_AHEAD:
                batch = next(batches, None)
                if batch is None:
                    return
                k = issued % len(reads)  # its last batch is cut by now
                issued += 1
                pending = writing[k]
                if pending is not None:  # ... and written, when it was its own rows
                    pending.result()
                    writing[k] = None
                read = reader.submit(tokens.read_into, batch.first_token, batch.end_token, reads[k])
                ahead.append((batch, read, tiles(batch)))

        try:
            read_ahead()
            turn = turn_read = 0
            while ahead:
                batch, pending, tiled = ahead.popleft()
                block = pending.result()
                layout = batch.layout
                if tiled:
                    rows = block.reshape(layout.starts.shape[0], size)
                    writes.append(writer.submit(write, batch, rows))
                    writing[turn_read % len(reads)] = writes[-1]
                    turn_read += 1
                    del block, rows
                    read_ahead()
                    while len(writes) > WRITE_BEHIND:
                        writes.popleft().result()
                    bar.update(max(0, batch.end_token - bar.n))
                    continue
                turn_read += 1
                read_ahead()
                rows = _cut(
                    block,
                    batch.first_token,
                    job.doc_offsets,
                    layout.starts,
                    layout.lengths,
                    layout.documents,
                    size,
                    pad_value,
                    ring[turn % len(ring)][: layout.starts.shape[0]],
                )
                del block
                writes.append(writer.submit(write, batch, rows))
                while len(writes) > WRITE_BEHIND:
                    writes.popleft().result()
                bar.update(max(0, batch.end_token - bar.n))  # each token cut at least once
                turn += 1
            while writes:
                writes.popleft().result()
            # every token is read: the file must still be the one first seen
            tokens.check()
            bar.update(max(0, tokens.count - bar.n))
        except BaseException:
            for f in writes:
                f.cancel()
            for _, read, _ in ahead:
                read.cancel()
            raise
        finally:
            bar.close()


class _Window(NamedTuple):
    size: int
    step: int
    tail: str


def _run_stream(
    given: StreamInput,
    size: int,
    step: int,
    tail: str,
    pad_value: int,
    plan: Any,
    sink: Any,
    bar: Any,
) -> dict[str, int]:
    """Read, cut and write every batch of whole documents: a thread reads
    (and decodes) ahead, one writes behind, the GIL released in both while
    the kernel cuts."""
    ring = [np.empty((plan.windows, size), given.dtype) for _ in range(_ROW_BUFFERS)]
    tokens = documents = windows = turn = 0
    docs = given.documents()
    ahead: deque[Future[Documents | None]] = deque()
    writes: deque[Future[None]] = deque()
    try:
        with _pipeline_thread() as reader, _pipeline_thread() as writer:
            try:
                for _ in range(READ_AHEAD):
                    ahead.append(reader.submit(next, docs, None))
                while True:
                    batch = ahead.popleft().result()
                    if batch is None:
                        break
                    ahead.append(reader.submit(next, docs, None))
                    # the batch's windows counted, then cut a bounded range at a time
                    window_offsets = _layout_part(
                        batch.offsets, size, step, tail, end=0
                    ).window_offsets
                    n_windows = int(window_offsets[-1])
                    for begin in range(0, n_windows, plan.windows):
                        end = min(n_windows, begin + plan.windows)
                        part = _layout_part(
                            batch.offsets, size, step, tail, window_offsets, begin, end
                        )
                        rows = _cut(
                            batch.tokens,
                            0,
                            batch.offsets,
                            part.starts,
                            part.lengths,
                            part.documents,
                            size,
                            pad_value,
                            ring[turn % len(ring)][: end - begin],
                        )
                        turn += 1
                        corpus_documents = part.documents + documents
                        writes.append(
                            writer.submit(
                                sink.write,
                                windows + begin,
                                rows,
                                part.starts,
                                part.lengths,
                                corpus_documents,
                            )
                        )
                        while len(writes) > WRITE_BEHIND:
                            writes.popleft().result()
                    windows += n_windows
                    documents += batch.offsets.shape[0] - 1
                    tokens += batch.tokens.shape[0]
                    bar.batch(batch)
                while writes:
                    writes.popleft().result()
            except BaseException:
                for w in writes:
                    w.cancel()
                for r in ahead:
                    r.cancel()
                raise
            finally:
                bar.close()
    finally:
        # the reader is shut down (its last read done): the files of a run
        # that stopped early can be closed now
        docs.close()
    return {"tokens": tokens, "documents": documents, "windows": windows}

"""The ``posembed chunk`` pipeline: source -> cut -> sink, in bounded memory.

A *source* module reads one kind of input (``_source_tokens``: ``.npy`` and
raw token files with their offsets; ``_source_arrow``: Arrow, Parquet and
saved datasets; ``_source_indexed``: Megatron indexed datasets;
``_source_windows``: the folders this command writes) and gives either a
:class:`~posembed.corpus._source.RangeInput` (tokens read by range, every
document's offsets known, so that a document larger than memory is cut a
batch of windows at a time) or a :class:`~posembed.corpus._source.StreamInput`
(whole documents, a bounded batch at a time). The *cut* turns a batch into
windows (:func:`posembed.windows`'s kernel). A *sink* module writes them
(``_sink_npy``, ``_sink_parquet``). This module picks the source
(:data:`SOURCES`) and the sink (:data:`SINKS`) and hands them to the cut
(``_pipeline``), which runs the reads, the cut and the writes on three threads; a
sink that can cut straight from a token file (``cut_from``: the ``.npy``
sink) instead has the kernels' threads read, cut and write blocks of their
own for a range input. A format is one new
module, registered in one of the two tables. No source or sink imports
another's names.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from posembed import _core
from posembed.corpus import (
    _source_arrow,
    _source_indexed,
    _source_store,
    _source_tokens,
    _source_windows,
)
from posembed.corpus._pipeline import (
    ChunkJob,
    _batches,
    _direct_plan,
    _plan,
    _run_direct,
    _run_pipeline,
    _run_stream,
    _Window,
)
from posembed.corpus._progress import progress, stream_progress
from posembed.corpus._sink_indexed import IndexedSink
from posembed.corpus._sink_npy import NpySink
from posembed.corpus._sink_parquet import ParquetSink
from posembed.corpus._source import MEMORY_BYTES, RangeInput, SourceOptions, StreamInput
from posembed.io import _outdir, _store
from posembed.io._tokens import ChunkError
from posembed.kernels import _validate as v
from posembed.kernels._runtime import calling_thread_threads
from posembed.kernels._windows import (
    TAILS,
    _check_pad_value,
    _layout_part,
    _step,
)


def chunk_file(
    input_path: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    *,
    size: int,
    step: int | None = None,
    overlap: int | None = None,
    tail: str = "pad",
    dtype: str | None = None,
    offsets_path: str | os.PathLike[str] | None = None,
    pad_value: int = 0,
    force: bool = False,
    quiet: bool = False,
    column: str | None = None,
    format: str = "npy",
    documents: str | None = None,
    threads: int | None = None,
) -> dict[str, Any]:
    """Window a corpus on disk into ``output_dir``, streaming: the engine of ``posembed chunk``.

    The input is read and the outputs are written batch by batch, so
    files larger than memory work. The outputs appear only when complete
    (written to a temporary folder next to ``output_dir``, then renamed; an
    old output is swapped with the new one in one step where the system can,
    so that a run killed at any moment leaves one or the other).

    The run holds about ``MEMORY_BYTES`` (64 MiB) at a time, whatever the
    window size, step and tail, beyond the document offsets (16 bytes per
    document); only windows so long that six of them exceed it take more (a
    batch of one window). The input is read with positional reads, never
    mapped: a file that shrinks, grows or is rewritten while it is read
    gives a ChunkError, and the outputs are not written. A raw file or
    ``.npy`` file in the other byte order is converted while it is read.

    Arrow and Parquet input (``pyarrow``, the ``arrow`` extra) is a list
    column, one document per row: each batch of rows (a Parquet row group
    read about ``MEMORY_BYTES / 64`` bytes of tokens at a time, an IPC record
    batch as stored) is cut as it arrives, so the document offsets are never all held;
    the outputs equal those of the token file with its offsets, byte for
    byte. A single row larger than the budget is read whole.

    A Megatron-LM indexed dataset (``PREFIX.bin`` and ``PREFIX.idx``) is
    read as a token file is, its ``.idx`` checked whole first
    (:class:`posembed.IndexedCorpus`); its windows equal those of the same
    tokens and offsets as a ``.npy`` file, byte for byte.

    Parameters
    ----------
    input_path : path
        A 1-D integer ``.npy`` file, a raw file of ``dtype`` tokens, a
        ``.parquet`` file or a folder of them (read in name order), an Arrow
        IPC file or stream (``.arrow``), or a folder that
        ``datasets.Dataset.save_to_disk`` wrote (its ``state.json`` lists its
        files, which must lie in the folder), or an indexed dataset
        (``PREFIX``, ``PREFIX.idx``, or ``PREFIX.bin`` beside its ``.idx``).
    output_dir : path
        Folder to create, holding windows.npy, starts.npy, lengths.npy,
        documents.npy (the arrays of :class:`posembed.Windows`), or
        windows.parquet with ``format="parquet"``, and meta.json; with
        ``format="megatron"``, the prefix of ``PREFIX.bin`` and ``PREFIX.idx``.
    size : int
        Window length, >= 1.
    step : int, optional
        Distance between window starts, 1..size; default ``size``.
    overlap : int, optional
        ``size - step``, 0..size-1; at most one of ``step`` and ``overlap``.
    tail : {"pad", "shift", "drop"}
        As for :func:`posembed.windows`.
    dtype : str, optional
        The integer dtype of a raw token file (required for one, refused for
        a ``.npy`` file).
    offsets_path : path, optional
        A ``.npy`` file of CSR document offsets, from 0 to the token count.
    pad_value : int
        Fills unused slots; must fit the tokens' dtype.
    force : bool
        Replace ``output_dir`` if it is a folder that posembed wrote (one
        holding its ``meta.json`` or ``index.json``). Anything else there is
        refused, with or without ``force``: a file, a device, a FIFO, a
        symbolic link, another folder, or a folder holding the input or the
        offsets.
    quiet : bool
        No progress bar.
    column : str, optional
        Arrow and Parquet input: the column of token id lists (default
        ``input_ids``); refused for a token file.
    format : {"npy", "parquet", "megatron"}
        ``"parquet"``: the windows as one Parquet file, windows.parquet, a
        row group per batch, with the columns of
        :meth:`posembed.Windows.to_arrow` (``input_ids``,
        ``attention_mask``, ``document``, ``start``, ``length``), which
        ``datasets.load_dataset("parquet", data_files=...)`` loads.
        ``"megatron"``: an indexed dataset at the prefix ``output_dir``, each
        window one sequence of its tokens (no padding), the windows of each
        input document one Megatron document; uint32 and uint64 tokens are
        written as int32 and int64, each checked to fit. ``force`` then
        replaces only an indexed dataset.
    documents : {"documents", "sequences"}, optional
        Indexed-dataset input: what a document is, Megatron's documents (one
        or more sequences each; the default) or its sequences; refused for
        other input.
    threads : int, optional
        Threads that cut, 1..``config()["max_num_threads"]``, for this call
        only. By default, :func:`posembed.get_num_threads` for a token file
        or an indexed dataset written to ``.npy`` (each thread reads, cuts
        and writes blocks of its own), and one for every other input and
        format, which are read (and decoded) and written on threads of
        their own: one thread cuts as fast as they read and write, and idle
        OpenMP threads would spin on the cores the reading needs (Parquet
        with row groups of 1000 rows took about 1.8 times as long on two
        cores with two cutting threads).

    Returns
    -------
    dict of str to Any
        What meta.json holds: ``input``, ``tokens``, ``documents``,
        ``windows``, ``size``, ``step``, ``tail``, ``dtype``, ``pad_value``
        and ``format`` (and ``column`` for Arrow input, ``documents_are``
        for an indexed dataset).

    Raises
    ------
    ChunkError
        Any problem with the input or the parameters, in one line: a bad
        ``size``, ``step``, ``overlap`` or ``tail``; ``output_dir`` exists
        without ``force``, or is anything but a folder posembed wrote (see
        ``force``); a missing, empty or unreadable ``.npy`` input, one
        that is not 1-D integers, a raw file without
        ``dtype`` (or not a whole number of its tokens), a ``dtype`` that is
        not an integer type, ``dtype`` with a ``.npy``
        file; a ``pad_value`` that does not fit; empty, unreadable or invalid
        offsets; an input that changes while it is read. For Arrow input: a
        missing column (the error lists those present), one that is not a
        list of integers, a null row or token (the error names the row), a
        file that is not Parquet or Arrow IPC, a state.json that is not a
        saved dataset's or names a file outside its folder, ``dtype`` or
        ``offsets_path`` given; ``threads`` outside 1..max_num_threads.
        For an indexed dataset: any field of its
        ``.idx`` that does not fit the others or the files (the error names
        it), ``dtype``, ``offsets_path`` or ``column`` given; with
        ``format="megatron"``, a token the output cannot hold. A ChunkError
        is a ValueError.
    ImportError
        Arrow input or ``format="parquet"`` without pyarrow (the error names
        the ``arrow`` extra).
    TypeError
        A ``pad_value`` or ``threads`` that is not an integer; a ``force`` or
        ``quiet`` that is not a bool.
    OSError
        Writing the outputs fails (the temporary folder is removed, an old
        output left as it was); FileExistsError (an OSError) when something
        other than posembed's output took ``output_dir`` while the run wrote.
    """
    quiet = v.flag(quiet, "quiet")
    sink_type = _sink_type(format)
    force = v.flag(force, "force")
    if _store.is_url(output_dir):
        # a store has no rename: made locally, then uploaded (--format
        # megatron as PREFIX.bin and PREFIX.idx); see _store.staged
        return _store.staged(
            str(output_dir),
            force,
            sink_type is IndexedSink,
            lambda local: chunk_file(
                input_path,
                local,
                size=size,
                step=step,
                overlap=overlap,
                tail=tail,
                dtype=dtype,
                offsets_path=offsets_path,
                pad_value=pad_value,
                column=column,
                documents=documents,
                format=format,
                threads=threads,
                quiet=quiet,
            ),
            inputs=(input_path, offsets_path),
        )
    src, out = input_location(input_path), local_output(output_dir, "output_dir")
    if sink_type is IndexedSink:
        check_prefix_text(output_dir)
    count = None if threads is None else _checked_threads(threads)
    options = SourceOptions(dtype, offsets_path, column, documents)
    source = _source_for(src)
    source.check(src, options)
    size, step = checked_windows(size, step, overlap, tail)
    check_output(out, source.inputs(src, options), force, sink_type)
    given = source.open_input(src, options)
    if count is None and not runs_direct(src, format):
        count = 1  # beside the reading and writing threads (see ``threads``)
    with calling_thread_threads(count):
        if isinstance(given, StreamInput):
            check_pad_value(pad_value, given.dtype)
            return _chunk_stream(src, out, given, size, step, tail, pad_value, force, quiet, format)
        check_pad_value(pad_value, given.tokens.dtype)
        job = ChunkJob(src, out, size, step, tail, given.tokens, given.doc_offsets)
        return _chunk_ranges(job, given.meta, sink_type, pad_value, force, quiet, format)


def _checked_threads(threads: Any) -> int:
    """``threads`` of chunk_file: an integer in 1..max_num_threads."""
    if isinstance(threads, (bool, np.bool_)) or not isinstance(threads, (int, np.integer)):
        raise TypeError(
            f"threads must be an integer or None; got {type(threads).__name__} {threads!r}"
        )
    top = int(_core.config()["max_num_threads"])
    if not 1 <= threads <= top:
        raise ChunkError(f"threads must be in 1..{top} (4 per CPU), or None; got {threads}")
    return int(threads)


def _chunk_ranges(
    job: ChunkJob,
    input_meta: dict[str, Any],
    sink_type: Any,
    pad_value: int,
    force: bool,
    quiet: bool,
    format: str,
) -> dict[str, Any]:
    """Windows of a corpus read by token range (every document's offsets known)."""
    tokens, out = job.tokens, job.output
    # Every document's windows are counted once, here; each batch then takes
    # its range of the layout (memory holds a batch's windows, never all).
    window_offsets = _layout_part(
        job.doc_offsets, job.size, job.step, job.tail, end=0
    ).window_offsets
    total = int(window_offsets[-1])
    # the kernels' threads read a local file themselves; a store's is read here
    direct = hasattr(sink_type, "cut_from") and not isinstance(tokens, _store.StoreTokenFile)
    plan = (_direct_plan if direct else _plan)(job.size, tokens.dtype.itemsize, MEMORY_BYTES)

    try:
        with _outdir.temporary(out) as tmp:
            with contextlib.closing(sink_type(tmp, tokens.dtype, job.size, total)) as sink:
                tokens.open()
                batches = _batches(job, window_offsets, plan)
                bar = progress(tokens.count, quiet)
                if direct:
                    _run_direct(batches, job, sink, pad_value, bar)
                else:
                    _run_pipeline(batches, job, sink, pad_value, plan, bar)
                sink.finish(total)
            counts = {
                "tokens": int(tokens.shape[0]),
                "documents": int(job.doc_offsets.shape[0] - 1),
                "windows": total,
            }
            meta = _meta(job.source, input_meta, counts, job, tokens.dtype, pad_value, format)
            write_meta(tmp, meta)
            sink_type.commit(tmp, out, force)
    finally:
        tokens.close()
    return meta


def _meta(
    src: Path,
    input_meta: dict[str, Any],
    counts: dict[str, int],
    job: Any,
    dtype: np.dtype[Any],
    pad_value: int,
    format: str,
) -> dict[str, Any]:
    """What meta.json records of a run (``job``: its size, step and tail)."""
    return {
        "input": str(src),
        **input_meta,
        **counts,
        "size": job.size,
        "step": job.step,
        "tail": job.tail,
        "dtype": dtype.name,
        "pad_value": pad_value,
        "format": format,
    }


def write_meta(folder: Path, meta: dict[str, Any]) -> None:
    """meta.json: what the run wrote, and the mark of a folder posembed wrote."""
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def checked_windows(size: Any, step: Any, overlap: Any, tail: Any) -> tuple[int, int]:
    """``--size`` and the step (from ``--step`` or ``--overlap``), with
    ``--tail`` checked: ChunkError naming the option otherwise."""
    try:
        size = v.positive_int(size, "--size")
        step = _step(size, step, overlap)
        v.choice(tail, "--tail", TAILS)
    except (TypeError, ValueError) as exc:
        raise ChunkError(str(exc)) from None
    return size, step


def check_output(out: Path, inputs: tuple[Any, ...], force: bool, sink_type: Any = NpySink) -> None:
    """ChunkError unless ``out`` may be written by a sink of ``sink_type``
    (a folder: see ``_outdir.problem``; an indexed dataset: ``_outdir.pair_problem``)."""
    problem = sink_type.problem(out, inputs, force)
    if problem:
        raise ChunkError(problem)


def check_pad_value(pad_value: Any, dtype: np.dtype[Any]) -> None:
    """ChunkError unless ``--pad-value`` fits the tokens' dtype (TypeError
    unless it is an integer)."""
    try:
        _check_pad_value(pad_value, dtype)
    except ValueError:
        raise ChunkError(f"--pad-value {pad_value} does not fit {dtype}") from None


def prepare_chunk(
    input_path: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    *,
    size: int,
    step: int | None = None,
    overlap: int | None = None,
    tail: str = "pad",
    dtype: str | None = None,
    offsets_path: str | os.PathLike[str] | None = None,
    pad_value: int = 0,
    force: bool = False,
    documents: str | None = None,
) -> ChunkJob:
    """Check a ``posembed chunk`` run's arguments and open its input.

    What :func:`chunk_file` and ``posembed.dask.chunk_parts`` do first; a
    pipeline of one's own can start from it too.

    Parameters
    ----------
    input_path, output_dir, size, step, overlap, tail, dtype, offsets_path, pad_value, force
        As for :func:`chunk_file`.

    Returns
    -------
    ChunkJob
        The paths, the window parameters, the token file (not yet opened)
        and the document offsets.

    Raises
    ------
    ChunkError
        As for :func:`chunk_file` (a ValueError).
    TypeError
        A ``force`` that is not a bool.
    """
    src = input_location(input_path)
    # an output in a store is checked by the caller (posembed.dask's StoreOutput)
    out = _store.StoreUrl(output_dir) if _store.is_url(output_dir) else Path(output_dir)
    force = v.flag(force, "force")
    options = SourceOptions(dtype, offsets_path, None, documents)
    source = _source_for(src)
    streamed = ChunkError(
        f"{src}: Arrow, Parquet and folders of windows are read in one process (posembed "
        "chunk without --dask, or chunk_file); --dask reads .npy and raw token files (on "
        "disk or in a store) and indexed datasets"
    )
    if source in STREAMED and source is not _source_store:
        raise streamed
    source.check(src, options)
    size, step = checked_windows(size, step, overlap, tail)
    if not isinstance(out, _store.StoreUrl):
        check_output(out, source.inputs(src, options), force)
    else:
        problem = _store.replaces(str(out), False, (input_path, offsets_path))
        if problem is not None:
            raise ChunkError(problem)
    given = source.open_input(src, options)
    if not isinstance(given, RangeInput):
        raise streamed
    check_pad_value(pad_value, given.tokens.dtype)
    return ChunkJob(src, out, size, step, tail, given.tokens, given.doc_offsets)  # type: ignore[arg-type]


def _chunk_stream(
    src: Path,
    out: Path,
    given: StreamInput,
    size: int,
    step: int,
    tail: str,
    pad_value: int,
    force: bool,
    quiet: bool,
    format: str,
) -> dict[str, Any]:
    """Windows of a corpus read in one pass, whole documents a batch at a time."""
    # half the budget; reading the other half (see _source_arrow.BATCH_BYTES)
    plan = _plan(size, given.dtype.itemsize, MEMORY_BYTES // 2)
    sink_type = _sink_type(format)
    with _outdir.temporary(out) as tmp:
        with contextlib.closing(sink_type(tmp, given.dtype, size, None)) as sink:
            bar = stream_progress(quiet)  # the token count is known only at the end
            counts = _run_stream(given, size, step, tail, pad_value, plan, sink, bar)
            sink.finish(counts["windows"])
        window = _Window(size, step, tail)
        meta = _meta(src, given.meta, counts, window, given.dtype, pad_value, format)
        write_meta(tmp, meta)
        sink_type.commit(tmp, out, force)
    return meta


# The outputs, by --format: each a sink class taking (folder, dtype, size,
# total windows or None), then write(begin, rows, starts, lengths, documents)
# batch by batch from one thread (or, where it has one, cut_from(begin,
# tokens, doc_offsets, starts, lengths, documents, pad_value) for a range
# input), finish(total) and close().
SINKS: dict[str, Any] = {"npy": NpySink, "parquet": ParquetSink, "megatron": IndexedSink}
FORMATS = tuple(SINKS)


def _sink_type(output_format: Any) -> Any:
    """The sink class of ``--format``: ChunkError for an unknown one,
    ImportError (naming the extra) when it needs what is not installed."""
    if not isinstance(output_format, str) or output_format not in SINKS:
        raise ChunkError(f"--format must be one of {', '.join(FORMATS)}; got {output_format!r}")
    sink = SINKS[output_format]
    sink.available()
    return sink


# The inputs: the first source whose matches() holds reads the input (the
# token-file source, last, takes any input).
SOURCES: tuple[Any, ...] = (
    _source_store,
    _source_indexed,
    _source_windows,
    _source_arrow,
    _source_tokens,
)
# The sources read in one process: in one pass (StreamInput), or from a store.
STREAMED = (_source_windows, _source_arrow, _source_store)


def input_location(path: str | os.PathLike[str]) -> Any:
    """The input as the sources take it: a URL kept as its text, a local path as a Path."""
    return _store.StoreUrl(path) if _store.is_url(path) else Path(path)


def check_prefix_text(path: str | os.PathLike[str]) -> None:
    """ChunkError where an indexed dataset's ``PREFIX`` ends with a separator
    (a Path would drop it, and DIR/ would write DIR.bin beside the folder)."""
    if isinstance(path, str) and path.endswith((os.sep, os.altsep or os.sep)):
        raise ChunkError(
            f"output {path} names no file prefix; give PREFIX for PREFIX.bin and PREFIX.idx"
        )


def local_output(path: str | os.PathLike[str], option: str) -> Path:
    """An output path, which must be local (a URL is refused, naming ``option``)."""
    if _store.is_url(path):
        raise ChunkError(f"{option} {path}: outputs are written to local paths; give one")
    return Path(path)


def _source_for(path: Any) -> Any:
    return next(source for source in SOURCES if source.matches(path))


def runs_direct(path: str | os.PathLike[str], output_format: Any) -> bool:
    """Whether :func:`chunk_file` cuts this input into this format on the
    kernels' threads alone (a token file or an indexed dataset, read by
    range, to ``.npy``: each thread reads, cuts and writes blocks of its
    own), rather than beside a reading and a writing thread."""
    sink = SINKS.get(output_format) if isinstance(output_format, str) else None
    if sink is None or not hasattr(sink, "cut_from"):
        return False
    return _source_for(input_location(path)) not in STREAMED

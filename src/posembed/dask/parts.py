"""The parted output of ``posembed chunk --dask``: one file of windows per partition.

:func:`chunk_parts` cuts a token file on a Dask cluster, one task per
partition of its tokens, each writing the windows that start there;
:func:`read_parts` (a reader of the format, re-exported here) checks the
folder (every file inside it, every field of its index and headers) and gives
the result back as one :class:`posembed.Windows` whose tokens are a
:class:`PartsView` reading the parts on demand.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import dask
import numpy as np

import posembed
from posembed.corpus._chunk import prepare_chunk
from posembed.io import _outdir
from posembed.io._parts import INDEX_VERSION
from posembed.io._store import StoreOutput, StoreTokenFile, is_url
from posembed.io._tokens import ChunkError, TokenFile


def _write_part(
    source: TokenFile,
    layout: posembed.WindowLayout,
    first: int,
    end: int,
    a: int,
    b: int,
    pad_value: int,
    path: str,
    store: Any = None,
) -> int:
    """On a worker: windows [first, end), those that start in tokens [a, b)
    of the token file, written to ``path`` (a .npy file, appearing whole: a
    retried task, after a worker died, writes it again from scratch; with
    ``store``, a file system of fsspec, one object put in it at once).
    Returns the windows written."""
    # a file of its own: tasks on threads of one worker must not share one
    tokens = source.copy()
    tokens.open()
    try:
        block = tokens.read(a, min(tokens.count, b + layout.size - 1))
        tokens.check()  # the file first seen, not one rewritten since
        rows = layout.cut(block, windows=slice(first, end), token_start=a, pad_value=pad_value)
    finally:
        tokens.close()
    if store is not None:  # an object appears whole when its upload completes
        buffer = io.BytesIO()
        np.save(buffer, rows, allow_pickle=False)
        store.pipe(path, buffer.getvalue())
        return int(rows.shape[0])
    partial = f"{path}.partial-{os.getpid()}-{uuid.uuid4().hex}"
    with open(partial, "wb") as f:
        np.save(f, rows, allow_pickle=False)
    os.replace(partial, path)
    return int(rows.shape[0])


def _positive_part_tokens(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ChunkError(
            f"part_tokens must be a positive integer; got {type(value).__name__} {value!r}"
        )
    if value < 1:
        raise ChunkError(f"part_tokens must be a positive integer; got {int(value)}")
    return int(value)


def chunk_parts(
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
    part_tokens: int = 1 << 26,
    scheduler: Any = None,
    force: bool = False,
    documents: str | None = None,
) -> dict[str, Any]:
    """``posembed chunk`` on Dask: one output part per partition of the tokens.

    The token file is cut into partitions of ``part_tokens`` tokens; one task
    per partition reads its tokens, cuts the windows that start in its
    partition (reading up to ``size - 1`` tokens past it) and writes them to
    ``output_dir/parts/part-NNNNN.npy``. The small arrays (starts, lengths,
    documents) and ``index.json`` (each part's file, windows and tokens) are
    written here. Workers must see ``input_path`` and ``output_dir`` at the
    same paths (a shared file system). Read the result with
    :func:`read_parts`.

    Parameters
    ----------
    input_path, output_dir, size, step, overlap, tail, dtype, offsets_path, pad_value, force
        As for :func:`posembed.chunk.chunk_file` (the input a token file or
        an indexed dataset).
    documents
        As for :func:`posembed.chunk.chunk_file`.
    part_tokens : int
        Tokens per partition (>= 1); the parts hold the windows starting in
        each. Default 2^26.
    scheduler : str or distributed.Client or None
        A scheduler address (``"tcp://host:8786"``), a ``Client``, or None
        for Dask's current default (a running client, else local threads).

    Returns
    -------
    dict of str to Any
        What meta.json holds (as :func:`posembed.chunk.chunk_file`), plus ``parts``.

    Raises
    ------
    ChunkError
        As for :func:`posembed.chunk.chunk_file` (a ValueError); a bad
        ``part_tokens``.
    OSError
        Writing the outputs fails (the temporary folder is removed).
    """
    job = prepare_chunk(
        input_path,
        output_dir,
        size=size,
        step=step,
        overlap=overlap,
        tail=tail,
        dtype=dtype,
        offsets_path=offsets_path,
        pad_value=pad_value,
        force=force,
        documents=documents,
    )
    per_part = _positive_part_tokens(part_tokens)
    layout = posembed.window_layout(job.doc_offsets, job.size, step=job.step, tail=job.tail)
    # each window's start in the flat token file (sorted: documents are in order)
    corpus_starts = layout.doc_offsets[:-1][layout.documents] + layout.starts
    tokens, out = job.tokens, job.output
    total = tokens.count
    bounds = np.append(np.arange(0, total, per_part, dtype=np.int64), total)
    cut = np.searchsorted(corpus_starts, bounds, side="left")
    # the workers' own closed copy: a local file by its absolute path
    source = (
        tokens.copy() if isinstance(tokens, StoreTokenFile) else tokens.copy(tokens.path.resolve())
    )
    shared = dask.delayed(layout, traverse=False)  # in the graph once, not once per part
    target = StoreOutput(str(out), force) if is_url(str(out)) else None
    if target is not None:
        # the workers put their parts in the store; the small files and the
        # manifest follow from here once every part is there
        old = target.begin()
        tmp = Path(tempfile.mkdtemp(prefix="posembed-store-"))
    else:
        tmp = _outdir.new_temp(out)
    (tmp / "parts").mkdir()
    try:
        tasks: list[Any] = []
        parts: list[dict[str, Any]] = []
        for c in range(bounds.size - 1):
            first, end = int(cut[c]), int(cut[c + 1])
            name = f"part-{c:05d}.npy"
            parts.append(
                {
                    "file": f"parts/{name}",
                    "windows": [first, end],
                    "tokens": [int(bounds[c]), int(bounds[c + 1])],
                }
            )
            if target is None:
                where, store = str((tmp / "parts" / name).resolve()), None
            else:
                where, store = f"{target.key}/parts/{name}", target.fs
            tasks.append(
                dask.delayed(_write_part, pure=False)(
                    source,
                    shared,
                    first,
                    end,
                    int(bounds[c]),
                    int(bounds[c + 1]),
                    int(pad_value),
                    where,
                    store,
                )
            )
        written = _compute(tasks, scheduler)
        for part, count in zip(parts, written, strict=True):
            want = part["windows"][1] - part["windows"][0]
            if count != want:  # a part lost on the way: never leave a short output
                raise OSError(f"{part['file']}: {count} windows written, {want} expected")
        for name in ("starts", "lengths", "documents", "doc_offsets"):
            np.save(tmp / f"{name}.npy", getattr(layout, name))
        meta = {
            "input": str(job.source),
            "tokens": int(total),
            "documents": int(layout.doc_offsets.size - 1),
            "windows": len(layout),
            "size": layout.size,
            "step": layout.step,
            "tail": layout.tail,
            "dtype": tokens.dtype.name,
            "pad_value": int(pad_value),
            "parts": len(parts),
        }
        index = {
            "version": INDEX_VERSION,
            "dtype": np.dtype(tokens.dtype).str,
            "size": layout.size,
            "parts": parts,
        }
        (tmp / "index.json").write_text(json.dumps(index, indent=1) + "\n")
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
        if target is None:
            _outdir.commit(tmp, out, force)
        else:
            target.finish(tmp, tuple(part["file"] for part in parts), old)
    except BaseException as exc:
        if target is None:
            _outdir.discard(tmp, exc)
        else:  # the store keeps its marker (ended) and no manifest: an unfinished output
            target.abandon()
            shutil.rmtree(tmp, ignore_errors=True)
            if not isinstance(exc, ChunkError) and isinstance(exc, Exception):
                raise target._failed(exc) from None
        raise
    if target is not None:
        shutil.rmtree(tmp, ignore_errors=True)
    return meta


def _compute(tasks: list[Any], scheduler: Any) -> list[int]:
    if isinstance(scheduler, str):
        import distributed

        with distributed.Client(scheduler) as client:
            return list(dask.compute(*tasks, scheduler=client))
    if scheduler is None:
        return list(dask.compute(*tasks))
    return list(dask.compute(*tasks, scheduler=scheduler))

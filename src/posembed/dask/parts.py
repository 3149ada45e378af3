"""The parted output of ``posembed chunk --dask``: one file of windows per partition.

:func:`chunk_parts` cuts a token file on a Dask cluster, one task per
partition of its tokens, each writing the windows that start there;
:func:`read_parts` gives the result back as one :class:`posembed.Windows`
whose tokens are a :class:`PartsView` over the parts' memory maps.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np

import posembed
from posembed.chunk import ChunkError, TokenFile, prepare_chunk

INDEX_VERSION = 1


def _write_part(
    source: TokenFile,
    layout: posembed.WindowLayout,
    first: int,
    end: int,
    a: int,
    b: int,
    pad_value: int,
    path: str,
) -> int:
    """On a worker: windows [first, end), those that start in tokens [a, b)
    of the token file, written to ``path`` (a .npy file, appearing whole: a
    retried task, after a worker died, writes it again from scratch). Returns
    the windows written."""
    # a file of its own: tasks on threads of one worker must not share one
    tokens = source.copy()
    tokens.open()
    try:
        block = tokens.read(a, min(tokens.count, b + layout.size - 1))
        tokens.check()  # the file first seen, not one rewritten since
        rows = layout.cut(block, windows=slice(first, end), token_start=a, pad_value=pad_value)
    finally:
        tokens.close()
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
    )
    per_part = _positive_part_tokens(part_tokens)
    layout = posembed.window_layout(job.doc_offsets, job.size, step=job.step, tail=job.tail)
    # each window's start in the flat token file (sorted: documents are in order)
    corpus_starts = layout.doc_offsets[:-1][layout.documents] + layout.starts
    tokens, out = job.tokens, job.output
    total = tokens.count
    bounds = np.append(np.arange(0, total, per_part, dtype=np.int64), total)
    cut = np.searchsorted(corpus_starts, bounds, side="left")
    source = tokens.copy(tokens.path.resolve())
    shared = dask.delayed(layout, traverse=False)  # in the graph once, not once per part
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "parts").mkdir(parents=True)
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
            tasks.append(
                dask.delayed(_write_part, pure=False)(
                    source,
                    shared,
                    first,
                    end,
                    int(bounds[c]),
                    int(bounds[c + 1]),
                    int(pad_value),
                    str((tmp / "parts" / name).resolve()),
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
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return meta


def _compute(tasks: list[Any], scheduler: Any) -> list[int]:
    if isinstance(scheduler, str):
        import distributed

        with distributed.Client(scheduler) as client:
            return list(dask.compute(*tasks, scheduler=client))
    if scheduler is None:
        return list(dask.compute(*tasks))
    return list(dask.compute(*tasks, scheduler=scheduler))


class PartsView:
    """The windows of a parted output as one read-only array, rows mapped to
    the parts' memory maps (no part is read until its rows are).

    Indexing with an int or a slice inside one part gives that part's
    memory-mapped view; other slices and integer arrays gather the rows
    (a copy). ``numpy.asarray(view)`` reads everything.
    """

    def __init__(self, parts: list[np.ndarray], size: int, dtype: np.dtype[Any]) -> None:
        self.parts = parts
        self._first = np.concatenate([[0], np.cumsum([p.shape[0] for p in parts])]).astype(np.int64)
        self.dtype = np.dtype(dtype)
        self.shape = (int(self._first[-1]), size)
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"PartsView(shape={self.shape}, dtype={self.dtype}, parts={len(self.parts)})"

    def _row(self, i: int) -> tuple[int, int]:
        if not -self.shape[0] <= i < self.shape[0]:
            raise IndexError(f"row {i} is out of range for {self.shape[0]} windows")
        i %= max(self.shape[0], 1)
        k = int(np.searchsorted(self._first, i, side="right")) - 1
        return k, i - int(self._first[k])

    def __getitem__(self, key: Any) -> Any:
        rest: tuple[Any, ...] = ()
        if isinstance(key, tuple):
            key, rest = key[0], key[1:]
        if isinstance(key, (int, np.integer)):
            k, j = self._row(int(key))
            return self.parts[k][(j, *rest)]
        if isinstance(key, slice):
            lo, hi, st = key.indices(self.shape[0])
            if st == 1 and hi > lo:
                k, j = self._row(lo)
                if hi - lo <= self.parts[k].shape[0] - j:  # inside one part: its view
                    return self.parts[k][(slice(j, j + hi - lo), *rest)]
            rows = np.arange(lo, hi, st, dtype=np.int64)
        else:
            rows = np.asarray(key)
            if rows.dtype.kind not in "iu":
                raise TypeError(f"windows are indexed by ints, slices or int arrays; got {key!r}")
            rows = rows.astype(np.int64)
        flat_rows = rows.ravel()
        n = self.shape[0]
        bad = (flat_rows < -n) | (flat_rows >= n)
        if bad.any():
            raise IndexError(f"row {flat_rows[bad][0]} is out of range for {n} windows")
        flat_rows = flat_rows % max(n, 1)
        out = np.empty((*rows.shape, self.shape[1]), self.dtype)
        flat = out.reshape(-1, self.shape[1])
        part_of = np.searchsorted(self._first, flat_rows, side="right") - 1
        for k in np.unique(part_of):  # one gather per part the rows fall in
            mine = part_of == k
            flat[mine] = posembed.gather(self.parts[k], flat_rows[mine] - self._first[k])
        return out[(Ellipsis, *rest)] if rest else out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = np.concatenate(self.parts) if self.parts else np.empty(self.shape, self.dtype)
        return whole.astype(dtype, copy=False) if dtype is not None else whole

    def to_dask(self) -> Any:
        """The same rows as a Dask array, one chunk per part."""
        if not self.parts:
            return da.zeros(self.shape, dtype=self.dtype)
        return da.concatenate([da.from_array(p, chunks=p.shape) for p in self.parts])


def read_parts(output_dir: str | os.PathLike[str]) -> posembed.Windows:
    """The windows ``chunk_parts`` (``posembed chunk --dask``) wrote, memory-mapped.

    Parameters
    ----------
    output_dir : path
        The folder ``chunk_parts`` wrote.

    Returns
    -------
    Windows
        Its ``tokens`` a :class:`PartsView` over the parts (read only when
        indexed), the other arrays memory-mapped: equal to
        :func:`posembed.windows` on the whole input once read.

    Raises
    ------
    ValueError
        A folder without a readable ``index.json`` of this version, or parts
        that do not match it.
    """
    folder = Path(output_dir)
    try:
        index = json.loads((folder / "index.json").read_text())
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{folder}: not a parted chunk output ({exc})") from None
    if index.get("version") != INDEX_VERSION:
        raise ValueError(f"{folder}: index.json version {index.get('version')!r} is not 1")
    parts = []
    expected = 0
    for part in index["parts"]:
        arr = np.load(folder / part["file"], mmap_mode="r", allow_pickle=False)
        w0, w1 = part["windows"]
        if w0 != expected or arr.shape != (w1 - w0, index["size"]):
            raise ValueError(f"{folder}: {part['file']} does not match index.json")
        expected = w1
        parts.append(arr)
    view = PartsView(parts, int(index["size"]), np.dtype(index["dtype"]))

    def load(name: str) -> np.ndarray:
        arr: np.ndarray = np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False)
        return arr

    return posembed.Windows(
        view,  # type: ignore[arg-type]
        load("starts"),
        load("lengths"),
        load("documents"),
        load("doc_offsets"),
        int(meta["size"]),
        int(meta["step"]),
        str(meta["tail"]),
    )

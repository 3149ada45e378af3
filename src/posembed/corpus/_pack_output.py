"""``posembed pack``: a corpus on disk packed into rows of a fixed capacity,
with position ids that restart at every document and the rows' boundaries,
written to a ``.npy`` folder, a Parquet file or a Megatron indexed dataset,
in bounded memory and atomically, as ``posembed chunk`` writes its outputs.

The corpus is packed shard by shard: consecutive documents whose tokens fit
the shard (``shard_tokens``) are planned together with :func:`posembed.pack`,
read in one positional read, cut and written, so memory holds one shard
whatever the corpus size. A document longer than the shard is a shard of its
own, read a row at a time: its full pieces are rows by themselves (as
best-fit would place them), its last piece joins the next shard. Arrow and
Parquet input arrives a batch of whole documents at a time; batches are held
until the next would pass the shard. The cost of sharding is the partial rows
each shard leaves; :func:`shard_fill` measures it for any lengths (of a token
file's shards).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from posembed.corpus import _chunk, _progress
from posembed.corpus._chunk import write_meta
from posembed.corpus._sink_indexed import BIN_NAME, IDX_NAME, format_dtype
from posembed.corpus._sink_npy import NpyWriter
from posembed.corpus._source import MEMORY_BYTES, Documents, RangeInput, SourceOptions, StreamInput
from posembed.io import _outdir
from posembed.io._indexed_write import IndexedWriter
from posembed.io._store import is_url, staged
from posembed.io._tokens import ChunkError, option_int
from posembed.kernels._pack import SPLITS, STRATEGIES, PackedRows, pack

FORMATS = ("npy", "parquet", "megatron")
NPY_ARRAYS = ("input_ids", "position_ids", "seq_lengths", "row_segments", "documents", "starts")


def _refused(document: int, tokens: int, capacity: int) -> ChunkError:
    return ChunkError(
        f"document {document} has {tokens} tokens, more than --size {capacity} "
        "(--split refuse; 'pieces' cuts it, 'truncate' keeps its first tokens)"
    )


def default_shard_tokens(itemsize: int) -> int:
    """The shard that fits the budget: its tokens, and its rows' ids and
    int32 positions (a little more than the tokens, for the padding), twice
    over for the plan and the copies made while writing."""
    return MEMORY_BYTES // (4 * (2 * itemsize + 4))


class _Shard(NamedTuple):
    """Documents [first, first + len(lengths)) read as one token range:
    ``skip`` tokens of the first are left out (its earlier pieces are written)."""

    first: int
    skip: int
    lengths: np.ndarray  # the tokens read of each document


def _shards(
    lengths: np.ndarray, shard: int, capacity: int, split: str
) -> Iterator[tuple[str, int, int, int]]:
    """("rows", document, start, count): ``count`` full rows of one document
    from its token ``start``; ("shard", first, stop, skip): documents
    [first, stop) planned together, ``skip`` tokens of the first left out."""
    n = lengths.shape[0]
    first, skip, held = 0, 0, 0
    for d in range(n):
        length = int(lengths[d])
        if length <= shard:
            if held + length > shard and d > first:
                yield ("shard", first, d, skip)
                first, skip, held = d, 0, 0
            held += length
            continue
        if d > first:  # the documents held so far, then this one alone
            yield ("shard", first, d, skip)
        if split == "truncate":
            yield ("shard", d, d + 1, 0)  # read whole only up to the capacity, below
            first, skip, held = d + 1, 0, 0
            continue
        full = length // capacity
        yield ("rows", d, 0, full)
        first, skip, held = d, full * capacity, length - full * capacity
    if first < n:
        yield ("shard", first, n, skip)


def shard_fill(
    lengths: Any, capacity: int, shard_tokens: int, *, strategy: str = "bfd", split: str = "pieces"
) -> float:
    """The fill (tokens / (rows x capacity)) that ``posembed pack`` reaches
    with shards of ``shard_tokens``, against which :func:`posembed.pack`'s
    plan of the whole corpus can be compared.

    Parameters
    ----------
    lengths : array_like of int
        The documents' lengths.
    capacity, shard_tokens : int
        As for :func:`pack_file`.
    strategy, split : str
        As for :func:`posembed.pack`.

    Returns
    -------
    float
    """
    own = np.asarray(lengths, np.int64)
    rows = tokens = 0
    for kind, a, b, c in _shards(own, shard_tokens, capacity, split):
        if kind == "rows":
            rows, tokens = rows + c, tokens + c * capacity
            continue
        part = own[a:b].copy()
        part[0] -= c
        plan = pack(part, capacity, strategy=strategy, split=split)
        rows, tokens = rows + plan.rows, tokens + plan.tokens
    return tokens / (rows * capacity) if rows else 1.0


class _Output:
    """One of the three outputs, written shard after shard."""

    def __init__(self, folder: Path, fmt: str, dtype: np.dtype[Any], capacity: int) -> None:
        self.fmt, self.capacity, self.folder = fmt, capacity, folder
        self.rows = self.segments = 0
        self.files: dict[str, NpyWriter] = {}
        self.parquet: Any = None
        self.indexed: IndexedWriter | None = None
        if fmt == "npy":
            shapes = {"input_ids": (0, capacity), "position_ids": (0, capacity)}
            dtypes = {"input_ids": dtype, "position_ids": np.dtype(np.int32)}
            dtypes["seq_lengths"] = np.dtype(np.int32)
            for name in NPY_ARRAYS:
                self.files[name] = NpyWriter(
                    folder / f"{name}.npy",
                    dtypes.get(name, np.dtype(np.int64)),
                    shapes.get(name, (0,)),
                )
            self.files["row_segments"].write(0, np.zeros(1, np.int64))
        elif fmt == "megatron":
            self.indexed = IndexedWriter(folder / BIN_NAME, folder / IDX_NAME, format_dtype(dtype))

    def write(self, cut: PackedRows, documents: np.ndarray, starts: np.ndarray) -> None:
        rows = int(cut.input_ids.shape[0])
        if not rows:
            return
        if self.fmt == "npy":
            f = self.files
            f["input_ids"].write(self.rows, cut.input_ids)
            f["position_ids"].write(self.rows, cut.position_ids)
            f["seq_lengths"].write(self.segments, cut.seq_lengths)
            f["row_segments"].write(self.rows + 1, cut.row_segments[1:] + self.segments)
            f["documents"].write(self.segments, documents)
            f["starts"].write(self.segments, starts)
        elif self.fmt == "parquet":
            self._write_parquet(cut)
        else:
            self._write_indexed(cut, documents)
        self.rows += rows
        self.segments += int(cut.seq_lengths.shape[0])

    def _write_parquet(self, cut: PackedRows) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows, cap = cut.input_ids.shape
        row_offsets = (np.arange(rows + 1, dtype=np.int64) * cap).astype(np.int32)
        table = pa.table(
            {
                "input_ids": pa.ListArray.from_arrays(row_offsets, cut.input_ids.reshape(-1)),
                "position_ids": pa.ListArray.from_arrays(row_offsets, cut.position_ids.reshape(-1)),
                "seq_lengths": pa.ListArray.from_arrays(
                    cut.row_segments.astype(np.int32), cut.seq_lengths
                ),
            }
        )
        if self.parquet is None:
            self.parquet = pq.ParquetWriter(self.folder / "packed.parquet", table.schema)
        self.parquet.write_table(table)

    def _write_indexed(self, cut: PackedRows, documents: np.ndarray) -> None:
        # one Megatron document per row, one sequence per document or piece in
        # it; the padding is not written (the sequences carry their lengths)
        assert self.indexed is not None
        real = documents >= 0
        tokens = cut.input_ids.reshape(-1)[np.repeat(real, cut.seq_lengths)]
        kept = np.cumsum(np.concatenate([[0], real]))  # real sequences before each segment
        ends = kept[cut.row_segments[1:]]
        try:
            self.indexed.write(tokens, cut.seq_lengths[real], ends)
        except ValueError as exc:
            raise ChunkError(f"--format megatron: {exc}") from None

    def finish(self) -> None:
        if self.fmt == "npy":
            counts = {"input_ids": self.rows, "position_ids": self.rows}
            counts["row_segments"] = self.rows + 1
            for name, writer in self.files.items():
                writer.finish(counts.get(name, self.segments))
        elif self.fmt == "parquet":
            if self.parquet is None:  # no rows: an empty file of the same columns
                import pyarrow as pa
                import pyarrow.parquet as pq

                empty = pa.table(
                    {
                        "input_ids": pa.array([], pa.list_(pa.int64())),
                        "position_ids": pa.array([], pa.list_(pa.int32())),
                        "seq_lengths": pa.array([], pa.list_(pa.int32())),
                    }
                )
                pq.write_table(empty, self.folder / "packed.parquet")
            else:
                self.parquet.close()
                self.parquet = None
        elif self.indexed is not None:
            self.indexed.finish()
        self.close()

    def close(self) -> None:
        for writer in self.files.values():
            writer.close()
        if self.parquet is not None:
            self.parquet.close()
            self.parquet = None
        if self.indexed is not None:
            self.indexed.close()


def pack_file(
    input_path: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    size: int,
    strategy: str = "bfd",
    split: str = "pieces",
    shard_tokens: int | None = None,
    dtype: str | None = None,
    offsets_path: str | os.PathLike[str] | None = None,
    pad_value: int = 0,
    format: str = "npy",
    documents: str | None = None,
    column: str | None = None,
    force: bool = False,
    quiet: bool = False,
) -> dict[str, Any]:
    """Pack a corpus on disk into rows of ``size`` tokens: the engine of ``posembed pack``.

    Parameters
    ----------
    input_path : path
        Any corpus ``posembed chunk`` reads: a token file (raw with
        ``dtype``, or ``.npy``) with ``offsets_path``, a Megatron indexed
        dataset (``PREFIX``, ``PREFIX.idx``), or Parquet, Arrow IPC or a
        ``save_to_disk`` folder (``column``, one document per row, read a
        batch of rows at a time; the ``arrow`` extra).
    output : path
        ``format="npy"``: a folder of input_ids.npy (rows x size, the
        tokens' dtype), position_ids.npy (rows x size, int32), seq_lengths.npy
        (int32, every sequence of every row, a row's padding last as one
        more), row_segments.npy (int64, rows + 1: row r's sequences),
        documents.npy and starts.npy (int64, each sequence's document and
        first token there, -1 and 0 for padding) and meta.json.
        ``"parquet"``: a folder of packed.parquet (columns ``input_ids``,
        ``position_ids``, ``seq_lengths``, one row per packed row; what
        ``datasets.load_dataset("parquet")`` loads) and meta.json.
        ``"megatron"``: an indexed dataset at the prefix ``output``, one
        Megatron document per packed row and one sequence per document or
        piece in it, without the padding.
    size : int
        The rows' capacity in tokens, 1..2^31 - 1.
    strategy, split : str
        As for :func:`posembed.pack`.
    shard_tokens : int, optional
        Tokens planned together, at least ``size``; by default what fits the
        64 MiB budget (and at least 8 rows' worth). Larger shards fill rows a
        little better and hold more memory.
    dtype, offsets_path, documents, column, pad_value, force, quiet
        As for ``posembed chunk``.
    format : {"npy", "parquet", "megatron"}

    Returns
    -------
    dict of str to Any
        What meta.json holds: input, tokens, documents, rows, size,
        strategy, split, shard_tokens, fill, padding, truncated_tokens,
        split_documents, dtype, pad_value, format.

    Raises
    ------
    ChunkError
        Any problem with the input, the options or the output, in one line
        (a ValueError); Arrow and Parquet input (convert it first with
        ``posembed convert``, or plan its lengths with :func:`posembed.pack`).
    OSError
        Writing fails (the temporary folder is removed, an old output kept).
    """
    if is_url(output):
        # a store has no rename: packed locally, then uploaded (--format
        # megatron as PREFIX.bin and PREFIX.idx); see posembed.io._store.staged
        return staged(
            str(output),
            bool(force),
            format == "megatron",
            lambda local: pack_file(
                input_path,
                local,
                size=size,
                strategy=strategy,
                split=split,
                shard_tokens=shard_tokens,
                dtype=dtype,
                offsets_path=offsets_path,
                pad_value=pad_value,
                format=format,
                documents=documents,
                column=column,
                quiet=quiet,
            ),
            inputs=(input_path, offsets_path),
        )
    src, out = _chunk.input_location(input_path), _chunk.local_output(output, "output")
    if not isinstance(format, str) or format not in FORMATS:
        raise ChunkError(f"--format must be one of {', '.join(FORMATS)}; got {format!r}")
    if format == "megatron":
        _chunk.check_prefix_text(output)
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        raise ChunkError(f"--strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
    if not isinstance(split, str) or split not in SPLITS:
        raise ChunkError(f"--split must be one of {', '.join(SPLITS)}; got {split!r}")
    capacity = option_int(size, "--size", 1, 2**31 - 1)
    if capacity is None:
        raise ChunkError("--size is required")
    if format == "parquet":
        _chunk._sink_type("parquet")  # ImportError naming the extra without pyarrow
    sink: Any = _chunk.SINKS["megatron" if format == "megatron" else "npy"]
    source = _chunk._source_for(src)
    options = SourceOptions(dtype, offsets_path, column, documents)
    source.check(src, options)
    _chunk.check_output(out, source.inputs(src, options), bool(force), sink)
    given = source.open_input(src, options)
    dtype_in = given.dtype if isinstance(given, StreamInput) else given.tokens.dtype
    _chunk.check_pad_value(pad_value, dtype_in)
    shard = option_int(shard_tokens, "--shard-tokens", capacity)
    if shard is None:  # what fits the budget, but rows' worth of documents to choose from
        shard = max(default_shard_tokens(dtype_in.itemsize), 8 * capacity)
    if split == "refuse" and isinstance(given, RangeInput):
        lengths = np.diff(given.doc_offsets)
        if lengths.size and int(lengths.max()) > capacity:
            d = int(np.argmax(lengths > capacity))
            raise _refused(d, int(lengths[d]), capacity)
    with _outdir.temporary(out) as tmp:
        run = _Run(
            capacity,
            strategy,
            split,
            int(pad_value),
            shard,
            _Output(tmp, format, dtype_in, capacity),
        )
        with contextlib.closing(run.written):
            if isinstance(given, StreamInput):
                run.stream(given, quiet)
            else:
                run.ranges(given, quiet)
            run.written.finish()
        meta = run.meta(src, given.meta, dtype_in, format)
        if format != "megatron":
            write_meta(tmp, meta)
        sink.commit(tmp, out, bool(force))
    return meta


class _Run:
    """One ``posembed pack`` run: its options, its output, what it counted."""

    def __init__(
        self, capacity: int, strategy: str, split: str, pad_value: int, shard: int, written: _Output
    ) -> None:
        self.capacity, self.strategy, self.split = capacity, strategy, split
        self.pad_value, self.shard, self.written = pad_value, shard, written
        # rows written, tokens placed, documents split; the input's tokens and documents
        self.rows = self.placed = self.split_documents = self.tokens = self.documents = 0

    def meta(
        self, src: Path, input_meta: dict[str, Any], dtype: np.dtype[Any], format: str
    ) -> dict[str, Any]:
        """What meta.json holds."""
        rows, cap = self.rows, self.capacity
        return {
            "input": str(src),
            **input_meta,
            "tokens": self.tokens,
            "documents": self.documents,
            "rows": rows,
            "size": cap,
            "strategy": self.strategy,
            "split": self.split,
            "shard_tokens": self.shard,
            "fill": self.placed / (rows * cap) if rows else 1.0,
            "padding": rows * cap - self.placed,
            "truncated_tokens": self.tokens - self.placed,
            "split_documents": self.split_documents,
            "dtype": dtype.name,
            "pad_value": self.pad_value,
            "format": format,
        }

    def ranges(self, given: RangeInput, quiet: bool) -> None:
        """A corpus read by token range: the shards of :func:`_shards`."""
        tokens, doc_offsets = given.tokens, given.doc_offsets
        lengths = np.diff(doc_offsets)
        self.tokens, self.documents = int(lengths.sum()), int(lengths.shape[0])
        try:
            tokens.open()
            bar = _progress.progress(tokens.count, quiet, "pack")
            try:
                for kind, a, b, c in _shards(lengths, self.shard, self.capacity, self.split):
                    if kind == "rows":
                        self.full_rows(tokens, int(doc_offsets[a]), a, c)
                        # split when it makes more than one piece (its last, if any, follows)
                        pieces = c + (1 if int(lengths[a]) > c * self.capacity else 0)
                        self.split_documents += 1 if pieces > 1 else 0
                        bar.update(c * self.capacity)
                        continue
                    part = lengths[a:b].copy()
                    part[0] -= c  # a long document's pieces written as rows above
                    if self.split == "truncate" and b - a == 1:
                        part = np.minimum(part, self.capacity)  # alone: only what is kept is read
                    start = int(doc_offsets[a]) + c
                    self.write_shard(tokens.read(start, start + int(part.sum())), part, a, c)
                    bar.update(int(lengths[a:b].sum()) - c)
            finally:
                bar.close()
            tokens.check()
        finally:
            tokens.close()

    def stream(self, given: StreamInput, quiet: bool) -> None:
        """Whole documents a batch at a time (Arrow, Parquet): batches are
        held until the next would pass the shard, then planned together."""
        held: list[Documents] = []
        held_tokens = 0
        bar = _progress.stream_progress(quiet, "pack")  # the token count is known only at the end
        try:
            with contextlib.closing(given.documents()) as batches:
                for batch in batches:
                    n = int(batch.offsets[-1])
                    if held and held_tokens + n > self.shard:
                        self.flush(held)
                        held, held_tokens = [], 0
                    held.append(batch)
                    held_tokens += n
                    bar.batch(batch)
                if held:
                    self.flush(held)
        finally:
            bar.close()

    def flush(self, held: list[Documents]) -> None:
        part = np.concatenate([np.diff(b.offsets) for b in held])
        first = self.documents
        self.documents += int(part.shape[0])
        self.tokens += int(part.sum())
        if self.split == "refuse" and part.size and int(part.max()) > self.capacity:
            d = int(np.argmax(part > self.capacity))
            raise _refused(first + d, int(part[d]), self.capacity)
        flat = np.concatenate([b.tokens[: int(b.offsets[-1])] for b in held])
        self.write_shard(flat, part, first, 0)

    def full_rows(self, tokens: Any, base: int, document: int, count: int) -> None:
        """``count`` rows of one long document's full pieces, a row at a time."""
        cap = self.capacity
        ids = np.empty((1, cap), tokens.dtype)
        for k in range(count):
            ids[0] = tokens.read(base + k * cap, base + (k + 1) * cap)
            cut = PackedRows(
                ids,
                np.arange(cap, dtype=np.int32)[None],
                None,
                np.array([cap], np.int32),
                np.array([0, 1], np.int64),
                np.array([0, cap], np.int32),
                np.array([document], np.int64),
                np.array([k * cap], np.int64),
            )
            self.written.write(cut, cut.documents, cut.starts)
        self.rows += count
        self.placed += count * cap

    def write_shard(self, flat: np.ndarray, part: np.ndarray, first: int, skip: int) -> None:
        """Plan, cut and write documents first.. of lengths ``part`` whose
        tokens are ``flat`` (the first one's from its token ``skip``)."""
        local = np.zeros(part.shape[0] + 1, np.int64)
        np.cumsum(part, out=local[1:])
        plan = pack(part, self.capacity, strategy=self.strategy, split=self.split)
        batch = max(1, (1 << 30) // self.capacity)  # rows cut at once: int32 cu_seqlens
        for r in range(0, plan.rows, batch):
            rows = slice(r, min(plan.rows, r + batch))
            cut = plan.cut(
                flat, local, rows=rows, pad_value=self.pad_value, position_dtype=np.int32
            )
            real = cut.documents >= 0
            documents = np.where(real, cut.documents + first, -1)
            starts = cut.starts + np.where(real & (cut.documents == 0), skip, 0)
            self.written.write(cut, documents, starts)
        self.rows += plan.rows
        self.placed += plan.tokens
        self.split_documents += plan.split_documents

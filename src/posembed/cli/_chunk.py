"""``posembed chunk``: a corpus cut into overlapping windows on disk, in bounded memory."""

from __future__ import annotations

import argparse
from typing import Any

from posembed.cli._common import _fail, _positive

# A window of --size tokens, 8 bytes each at most, must stay below 2^62 bytes
# (the sizes the kernels index with int64).
MAX_WINDOW = 2**59


def run(args: argparse.Namespace) -> int:
    from posembed import set_num_threads
    from posembed.corpus._chunk import chunk_file
    from posembed.io._tokens import ChunkError

    # chunk_file picks the kernel threads itself (one beside its reading and
    # writing threads); a Dask task cuts on one, beside its worker's others
    threads = args.threads
    try:
        if args.dask is not None:
            set_num_threads(1 if threads is None else threads)
        elif threads is not None:
            set_num_threads(threads)  # checked (and set) here, for the message below
    except ValueError as exc:
        return _fail("chunk", f"--threads: {exc}")
    if args.size >= MAX_WINDOW:
        return _fail(
            "chunk", f"--size {args.size} is too large: a window must stay below 2^59 tokens"
        )
    common = {
        "size": args.size,
        "step": args.step,
        "overlap": args.overlap,
        "tail": args.tail,
        "dtype": args.dtype,
        "offsets_path": args.offsets,
        "pad_value": args.pad_value,
        "force": args.force,
        "documents": args.documents,
    }
    if args.dask is not None and (args.format != "npy" or args.column is not None):
        return _fail(
            "chunk",
            "--dask writes .npy parts from a token file; --format and --column apply without it",
        )
    try:
        if args.dask is None:
            meta = chunk_file(
                args.input,
                args.output,
                quiet=args.quiet,
                column=args.column,
                format=args.format,
                threads=threads,
                **common,
            )
        else:
            try:
                from posembed.dask import chunk_parts
            except ImportError as exc:
                return _fail("chunk", f"--dask: {exc}")
            meta = chunk_parts(
                args.input,
                args.output,
                part_tokens=args.part_tokens,
                scheduler=args.dask,
                **common,
            )
    except (ChunkError, OSError) as exc:  # an empty input or --offsets file included
        return _fail("chunk", str(exc))
    except ImportError as exc:  # pyarrow, for Arrow input or --format parquet
        return _fail("chunk", str(exc))
    except MemoryError as exc:
        return _fail("chunk", f"not enough memory for windows of --size {args.size}: {exc}")
    if not args.quiet:
        parted = "" if args.dask is None else f" ({meta['parts']} parts, on {args.dask})"
        print(
            f"{meta['windows']} windows of {meta['size']} from {meta['tokens']} tokens in "
            f"{meta['documents']} documents -> {args.output}{parted}"
        )
    return 0


def add(sub: Any) -> None:
    """The ``chunk`` command's parser, under ``sub``."""
    p = sub.add_parser(
        "chunk",
        help="cut a token file, Parquet or Arrow corpus or Megatron indexed dataset into "
        "overlapping windows on disk (bounded memory)",
        description="Cut a token file, a list column of Parquet, Arrow IPC or a saved "
        "Hugging Face dataset, or a Megatron-LM indexed dataset, into overlapping windows on "
        "disk. The run holds about "
        "64 MiB at a time, whatever --size, beyond a token file's document offsets (16 bytes "
        "per document; Arrow input is cut a batch of rows at a time, its offsets never all "
        "held). The input is read, never mapped: one that changes while it is read "
        "stops the run (exit 2) and no output is written.",
    )
    p.add_argument(
        "input",
        help="tokens: a 1-D .npy file, a raw binary stream with --dtype, a .parquet file or "
        "folder of them, an Arrow IPC .arrow file or stream, a datasets save_to_disk folder, "
        "a Megatron-LM indexed dataset (PREFIX, PREFIX.idx or PREFIX.bin), or a folder "
        "posembed chunk wrote (one document per window); a token file, indexed dataset "
        "(PREFIX.idx), Parquet or Arrow file may be a URL (s3://..., hf://..., through fsspec)",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        help="folder to write (windows.npy, ...), or PREFIX with --format megatron",
    )
    p.add_argument(
        "--column",
        help="Arrow and Parquet input: the list column of token ids, one document per row "
        "(default input_ids)",
    )
    p.add_argument(
        "--format",
        default="npy",
        choices=["npy", "parquet", "megatron"],
        help="npy: windows.npy, starts.npy, lengths.npy, documents.npy; parquet: "
        "windows.parquet (input_ids, attention_mask, document, start, length; "
        "datasets.load_dataset('parquet') loads it), both with meta.json; megatron: "
        "PREFIX.bin and PREFIX.idx, an indexed dataset of one sequence per window (its "
        "tokens, no padding), the windows of each input document one Megatron document",
    )
    p.add_argument(
        "--documents",
        choices=["documents", "sequences"],
        help="indexed dataset input: what a document is, Megatron's documents (one or more "
        "sequences each; the default) or its sequences",
    )
    p.add_argument("--size", type=int, required=True, help="window length")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--step", type=int, help="distance between window starts (1..size)")
    group.add_argument("--overlap", type=int, help="tokens shared by neighbours (size - step)")
    p.add_argument("--tail", default="pad", choices=["pad", "shift", "drop"])
    p.add_argument(
        "--dtype",
        help="integer token type of a raw input file (uint16 for nanoGPT .bin; >u2 for "
        "big-endian tokens, converted while reading)",
    )
    p.add_argument("--offsets", help="a .npy of int64 CSR document offsets")
    p.add_argument("--pad-value", type=int, default=0, help="fills the last window (tail=pad)")
    p.add_argument("--force", action="store_true", help="replace an existing output")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.add_argument(
        "--threads",
        type=_positive,
        default=None,
        help="threads that cut (default: all CPUs for a token file or an indexed dataset "
        "to .npy, where they read and write too; 1 otherwise, beside a reading and a writing "
        "thread)",
    )
    p.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="run on the Dask cluster at ADDRESS (tcp://host:8786): one output part per "
        "partition plus index.json; read back with posembed.dask.read_parts (needs the dask "
        "extra and a file system the workers share)",
    )
    p.add_argument(
        "--part-tokens",
        type=_positive,
        default=1 << 26,
        help="tokens per partition with --dask (default 2^26)",
    )
    p.set_defaults(func=run)

"""``posembed pack``: documents packed into rows, position ids restarting at each."""

from __future__ import annotations

import argparse
from typing import Any

from posembed.cli._common import _fail


def run(args: argparse.Namespace) -> int:
    from posembed.corpus._pack_output import pack_file
    from posembed.io._tokens import ChunkError

    try:
        meta = pack_file(
            args.input,
            args.output,
            size=args.size,
            strategy=args.strategy,
            split=args.split,
            shard_tokens=args.shard_tokens,
            dtype=args.dtype,
            offsets_path=args.offsets,
            pad_value=args.pad_value,
            format=args.format,
            documents=args.documents,
            column=args.column,
            force=args.force,
            quiet=args.quiet,
        )
    except (ChunkError, OSError, ImportError) as exc:
        return _fail("pack", str(exc))
    except MemoryError as exc:
        return _fail("pack", f"not enough memory: {exc}")
    if not args.quiet:
        cost = (
            f", {meta['truncated_tokens']} tokens truncated"
            if meta["truncated_tokens"]
            else f", {meta['split_documents']} documents split"
        )
        print(
            f"{meta['documents']} documents, {meta['tokens']} tokens -> {meta['rows']} rows of "
            f"{meta['size']} ({meta['fill']:.2%} full{cost}) -> {args.output}"
        )
    return 0


def add(sub: Any) -> None:
    """The ``pack`` command's parser, under ``sub``."""
    p = sub.add_parser(
        "pack",
        help="pack documents into rows of --size tokens, with position ids that restart at "
        "every document",
        description="Pack a corpus into rows of --size tokens so that no compute goes to "
        "padding: best-fit decreasing by default (the documents longest first, each into "
        "the fullest row it fits), first-fit decreasing, or wrapped (concatenate and cut). "
        "Each row comes with position ids that restart at 0 at every document and its "
        "sequences' lengths, for variable-length attention. Documents longer than --size "
        "are cut into pieces (or truncated, or refused: --split). Packed shard by shard "
        "of consecutive documents (--shard-tokens) in bounded memory; the output appears "
        "only when complete.",
    )
    p.add_argument(
        "input",
        help="a 1-D .npy file or a raw token file (--dtype) with --offsets, an indexed "
        "dataset (PREFIX, PREFIX.idx), Parquet, Arrow IPC, a datasets save_to_disk folder "
        "or a folder posembed chunk wrote",
    )
    p.add_argument("-o", "--output", required=True, help="folder (npy, parquet) or PREFIX")
    p.add_argument("--size", type=int, required=True, help="tokens per row")
    p.add_argument(
        "--strategy", choices=["bfd", "ffd", "wrapped"], default="bfd", help="(default bfd)"
    )
    p.add_argument(
        "--split",
        choices=["pieces", "truncate", "refuse"],
        default="pieces",
        help="a document longer than --size: cut into pieces (default), truncated, or refused",
    )
    p.add_argument(
        "--shard-tokens",
        type=int,
        help="tokens planned together, at least --size (default: what fits the 64 MiB "
        "budget, and at least 8 rows)",
    )
    p.add_argument(
        "--format",
        choices=["npy", "parquet", "megatron"],
        default="npy",
        help="npy folder (default), packed.parquet, or a Megatron indexed dataset "
        "(one document per row, one sequence per document in it)",
    )
    p.add_argument("--dtype", help="integer token type of a raw input file")
    p.add_argument("--offsets", help="a .npy of int64 CSR document offsets for a token file")
    p.add_argument(
        "--documents",
        choices=["documents", "sequences"],
        help="indexed dataset input: Megatron's documents (default) or its sequences",
    )
    p.add_argument("--column", help="Arrow and Parquet input: the list column (default input_ids)")
    p.add_argument("--pad-value", type=int, default=0, help="fills the end of a row (default 0)")
    p.add_argument("--force", action="store_true", help="replace an output posembed wrote")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(func=run)

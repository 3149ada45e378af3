"""``posembed convert``: a corpus written as a Megatron-LM indexed dataset."""

from __future__ import annotations

import argparse
from typing import Any

from posembed.cli._common import _fail


def run(args: argparse.Namespace) -> int:
    from posembed.corpus._convert import convert_file
    from posembed.io._tokens import ChunkError

    try:
        meta = convert_file(
            args.input,
            args.output,
            dtype=args.dtype,
            offsets_path=args.offsets,
            column=args.column,
            documents=args.documents,
            append_eod=args.append_eod,
            vocab_size=args.vocab_size,
            output_dtype=args.output_dtype,
            force=args.force,
            quiet=args.quiet,
        )
    except (ChunkError, OSError, ImportError) as exc:
        return _fail("convert", str(exc))
    except MemoryError as exc:
        return _fail("convert", f"not enough memory: {exc}")
    if not args.quiet:
        print(
            f"{meta['documents']} documents, {meta['sequences']} sequences, {meta['tokens']} "
            f"tokens of {meta['dtype']} -> {args.output}.bin, {args.output}.idx"
        )
    return 0


def add(sub: Any) -> None:
    """The ``convert`` command's parser, under ``sub``."""
    p = sub.add_parser(
        "convert",
        help="write a token file, Parquet or Arrow corpus as a Megatron-LM indexed dataset "
        "(PREFIX.bin, PREFIX.idx)",
        description="Write a corpus as a Megatron-LM indexed dataset, PREFIX.bin and "
        "PREFIX.idx, which megatron.core's IndexedDataset and GPTDataset read: each input "
        "document one sequence and one document, as Megatron's preprocess_data.py writes "
        "them. The tokens are uint16 for a vocabulary of fewer than 65,500 ids, else int32 "
        "(Megatron's rule; without --vocab-size, from the largest id met), unless "
        "--output-dtype says. Streaming in bounded memory; the files appear only when "
        "complete, and --force replaces only an indexed dataset.",
    )
    p.add_argument(
        "input",
        help="a 1-D .npy file, a raw token file with --dtype, Parquet, Arrow IPC, a datasets "
        "save_to_disk folder, an indexed dataset, or a folder posembed chunk wrote",
    )
    p.add_argument(
        "-o", "--output", required=True, metavar="PREFIX", help="writes PREFIX.bin and PREFIX.idx"
    )
    p.add_argument("--dtype", help="integer token type of a raw input file")
    p.add_argument("--offsets", help="a .npy of int64 CSR document offsets for a token file")
    p.add_argument("--column", help="Arrow and Parquet input: the list column (default input_ids)")
    p.add_argument(
        "--documents",
        choices=["documents", "sequences"],
        help="indexed dataset input: Megatron's documents (default) or its sequences",
    )
    p.add_argument(
        "--append-eod",
        type=int,
        metavar="ID",
        help="append this end-of-document id to each non-empty document",
    )
    p.add_argument(
        "--vocab-size",
        type=int,
        help="the tokenizer's vocabulary size: every id must be below it; it chooses the dtype",
    )
    p.add_argument(
        "--output-dtype",
        choices=["uint8", "int8", "int16", "uint16", "int32", "int64"],
        help="the tokens' type on disk, instead of Megatron's choice",
    )
    p.add_argument("--force", action="store_true", help="replace an existing indexed dataset")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(func=run)

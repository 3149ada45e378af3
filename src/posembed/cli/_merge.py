"""``posembed merge``: Megatron-LM indexed datasets joined into one."""

from __future__ import annotations

import argparse
from typing import Any

from posembed.cli._common import _fail


def run(args: argparse.Namespace) -> int:
    from posembed.corpus._merge import merge
    from posembed.io._tokens import ChunkError

    try:
        meta = merge(args.inputs, args.output, force=args.force)
    except (ChunkError, OSError) as exc:
        return _fail("merge", str(exc))
    except MemoryError as exc:
        return _fail("merge", f"not enough memory: {exc}")
    if not args.quiet:
        kind = "multimodal " if meta["multimodal"] else ""
        plural = "s" if meta["datasets"] != 1 else ""
        print(
            f"{meta['datasets']} {kind}dataset{plural}, {meta['documents']} documents, "
            f"{meta['sequences']} sequences, {meta['tokens']} tokens of {meta['dtype']} "
            f"-> {meta['output']}.bin, {meta['output']}.idx"
        )
    return 0


def add(sub: Any) -> None:
    """The ``merge`` command's parser, under ``sub``."""
    p = sub.add_parser(
        "merge",
        help="join Megatron-LM indexed datasets into one (as Megatron's merge_datasets.py)",
        description="Join Megatron-LM indexed datasets into one, PREFIX.bin and PREFIX.idx, "
        "byte for byte as Megatron's tools/merge_datasets.py writes them: the documents of "
        "each input in the order given, a folder's datasets sorted by name. The inputs share "
        "one token dtype and are all plain or all multimodal (their modes are kept). "
        "Streaming in bounded memory; the files appear only when complete, and --force "
        "replaces only an indexed dataset.",
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="an indexed dataset (PREFIX, PREFIX.idx or PREFIX.bin) or a folder of them",
    )
    p.add_argument(
        "-o", "--output", required=True, metavar="PREFIX", help="writes PREFIX.bin and PREFIX.idx"
    )
    p.add_argument("--force", action="store_true", help="replace an existing indexed dataset")
    p.add_argument("--quiet", action="store_true", help="no summary")
    p.set_defaults(func=run)

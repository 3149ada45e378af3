"""``posembed samples``: Megatron-LM GPTDataset's document, sample and shuffle indices."""

from __future__ import annotations

import argparse
from typing import Any

from posembed.cli._common import _fail


def run(args: argparse.Namespace) -> int:
    from posembed.corpus._samples_output import write_samples

    try:
        meta = write_samples(
            args.input,
            args.output,  # a str: write_samples refuses a URL, which a Path would fold
            sequence_length=args.sequence_length,
            num_samples=args.num_samples,
            num_epochs=args.epochs,
            seed=args.seed,
            add_extra_token_to_sequence=not args.no_extra_token,
            separate_final_epoch={"auto": None, "yes": True, "no": False}[
                args.separate_final_epoch
            ],
            documents=args.documents,
            force=args.force,
        )
    except (ValueError, OSError) as exc:  # ChunkError (a ValueError) above all
        return _fail("samples", str(exc))
    except MemoryError as exc:
        return _fail("samples", f"not enough memory: {exc}")
    print(
        f"{meta['samples']} samples of {meta['sequence_length']} tokens over "
        f"{meta['num_epochs']} epochs of {meta['elements']} {meta['unit']} -> {args.output}"
    )
    return 0


def add(sub: Any) -> None:
    """The ``samples`` command's parser, under ``sub``."""
    p = sub.add_parser(
        "samples",
        help="build Megatron-LM GPTDataset's document, sample and shuffle index of an "
        "indexed dataset",
        description="Build the three index arrays that Megatron-LM's GPTDataset builds "
        "for an indexed dataset (document_index.npy, sample_index.npy, shuffle_index.npy, "
        "equal element for element to its own for the same sequence length, sample or "
        "epoch count and seed), from its sequence lengths alone, and write them to a "
        "folder with meta.json. Samples cross document boundaries; read one with "
        "posembed.GPTSamples.sample.",
    )
    p.add_argument(
        "input",
        help="an indexed dataset: PREFIX, PREFIX.idx or PREFIX.bin, or a URL of one "
        "(s3://bucket/PREFIX, through fsspec)",
    )
    p.add_argument("-o", "--output", required=True, help="local folder to write")
    p.add_argument(
        "--sequence-length", type=int, required=True, help="tokens per sample (the extra aside)"
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument("--num-samples", type=int, help="samples wanted (default: one epoch's)")
    group.add_argument("--epochs", type=int, help="epochs instead of --num-samples")
    p.add_argument("--seed", type=int, default=1234, help="Megatron's random_seed (default 1234)")
    p.add_argument(
        "--no-extra-token",
        action="store_true",
        help="samples of --sequence-length tokens, not one more (add_extra_token_to_sequence)",
    )
    p.add_argument(
        "--separate-final-epoch",
        choices=["auto", "yes", "no"],
        default="auto",
        help="shuffle the last epoch apart (auto: as GPTDataset decides, under 80%% of an epoch)",
    )
    p.add_argument(
        "--documents",
        choices=["documents", "sequences"],
        help="what a sample index counts: Megatron's sequences (the default, as GPTDataset) "
        "or its documents (each one's sequences joined)",
    )
    p.add_argument("--force", action="store_true", help="replace an output posembed wrote")
    p.set_defaults(func=run)

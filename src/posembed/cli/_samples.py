"""``posembed samples``: Megatron-LM GPTDataset's document, sample and shuffle indices."""

from __future__ import annotations

import argparse
from typing import Any

from posembed.cli._common import _fail


def run(args: argparse.Namespace) -> int:
    from posembed.corpus._samples_output import write_samples

    blends = [args.blend, args.train_blend, args.valid_blend, args.test_blend]
    if any(blend is not None for blend in blends):
        return _run_blend(args)
    if args.input is None:
        args.samples_parser.error(
            "the following arguments are required: input (or a blend: --blend)"
        )
    for option, value in [
        ("--megatron-cache", args.megatron_cache),
        ("--sizes", args.sizes),
        ("--split", args.split),
    ]:
        if value is not None:
            return _fail("samples", f"{option} goes with --blend, not with one input")
    if args.output is None:
        args.samples_parser.error("the following arguments are required: -o/--output")
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
        "posembed.GPTSamples.sample. With --blend (or a blend per split), build the "
        "datasets of Megatron-LM's dataset builder instead and write its cache.",
    )
    p.add_argument(
        "input",
        nargs="?",
        help="an indexed dataset: PREFIX, PREFIX.idx or PREFIX.bin, or a URL of one "
        "(s3://bucket/PREFIX, through fsspec)",
    )
    p.add_argument("-o", "--output", help="local folder to write (one input)")
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
    blend = p.add_argument_group(
        "a blend of indexed datasets, as Megatron-LM's dataset builder builds it",
        "The train, valid and test datasets of BlendedMegatronDatasetBuilder "
        "(each corpus's three indices and the blend's dataset_index and "
        "dataset_sample_index), written to Megatron's cache, where its builder "
        "given the same settings and --data-cache-path loads them.",
    )
    blend.add_argument(
        "--blend",
        nargs="+",
        metavar="[W] PREFIX",
        help="prefixes, or weight-prefix pairs, as Megatron's --data-path",
    )
    for name in ("train", "valid", "test"):
        blend.add_argument(
            f"--{name}-blend",
            nargs="+",
            metavar="[W] PREFIX",
            help=f"instead of --blend: the {name} split's own blend (--{name}-data-path)",
        )
    blend.add_argument(
        "--split",
        help="train,valid,test weights dividing each corpus of --blend (default "
        "'969, 30, 1', Megatron's)",
    )
    blend.add_argument(
        "--sizes",
        nargs=3,
        metavar=("TRAIN", "VALID", "TEST"),
        help="samples wanted per split; 'none' for one epoch of each corpus",
    )
    blend.add_argument(
        "--megatron-cache", metavar="DIR", help="Megatron's --data-cache-path to write"
    )
    blend.add_argument(
        "--tokenizer-identifiers",
        metavar="JSON",
        help="the tokenizer's unique_identifiers as JSON, as Megatron's cache records them",
    )
    blend.add_argument(
        "--mid-level-dataset-surplus",
        type=float,
        metavar="SHARE",
        default=0.005,
        help="extra samples each corpus of a weighted blend builds (default 0.005)",
    )
    blend.add_argument(
        "--keep-last-partial-validation-sequence",
        action="store_true",
        help="keep the valid split's last partial sample "
        "(drop_last_partial_validation_sequence off)",
    )
    p.set_defaults(func=run, samples_parser=p)


def _run_blend(args: argparse.Namespace) -> int:
    import json

    from posembed.corpus._blend_output import blend_from_list, gpt_blend, write_megatron_cache

    if args.input is not None or args.output is not None:
        return _fail(
            "samples",
            "with a blend, the indices go to --megatron-cache: give no input and no -o",
        )
    for option, value in [
        ("--num-samples", args.num_samples),
        ("--epochs", args.epochs),
        ("--documents", args.documents),
    ]:
        if value is not None:
            return _fail("samples", f"{option} is for one input; a blend takes --sizes")
    if args.separate_final_epoch != "auto":
        return _fail("samples", "--separate-final-epoch is for one input; a blend decides it")
    if args.megatron_cache is None or args.tokenizer_identifiers is None:
        return _fail(
            "samples",
            "a blend is written to Megatron's cache: give --megatron-cache DIR and "
            "--tokenizer-identifiers JSON",
        )
    if args.sizes is None:
        return _fail("samples", "a blend needs --sizes TRAIN VALID TEST")
    try:
        tokenizer = json.loads(args.tokenizer_identifiers)
    except ValueError as exc:
        return _fail("samples", f"--tokenizer-identifiers is not JSON ({exc})")
    try:
        sizes = [_size(word) for word in args.sizes]
        common = dict(
            sizes=sizes,
            sequence_length=args.sequence_length,
            seed=args.seed,
            mid_level_dataset_surplus=args.mid_level_dataset_surplus,
            add_extra_token_to_sequence=not args.no_extra_token,
            drop_last_partial_validation_sequence=not args.keep_last_partial_validation_sequence,
        )
        if args.blend is not None:
            if any(b is not None for b in (args.train_blend, args.valid_blend, args.test_blend)):
                return _fail("samples", "give --blend or per-split blends, not both")
            prefixes, weights = blend_from_list(args.blend)
            split = "969, 30, 1" if args.split is None else args.split
            result = gpt_blend(prefixes, weights, split=split, **common)
        else:
            if args.split is not None:
                return _fail("samples", "--split divides --blend; per-split blends take none")
            per_split = [
                None if words is None else blend_from_list(words, f"--{name}-blend")
                for name, words in zip(
                    ("train", "valid", "test"),
                    (args.train_blend, args.valid_blend, args.test_blend),
                    strict=True,
                )
            ]
            result = gpt_blend(per_split=per_split, **common)
        written = write_megatron_cache(result, args.megatron_cache, tokenizer=tokenizer)
    except (ValueError, TypeError, IndexError, OSError) as exc:
        return _fail("samples", str(exc))
    except MemoryError as exc:
        return _fail("samples", f"not enough memory: {exc}")
    for part in result.splits:
        if part is not None:
            source = f"blended from {len(part.datasets)} corpora" if part.blended else "of 1 corpus"
            print(f"{part.split}: {len(part)} samples of {result.sequence_length} tokens {source}")
    print(f"{len(written)} files -> {args.megatron_cache}")
    return 0


def _size(word: str) -> int | None:
    if word.lower() == "none":
        return None
    try:
        return int(word)
    except ValueError:
        raise ValueError(f"--sizes: {word!r} is not a sample count (an integer or none)") from None

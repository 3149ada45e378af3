"""``posembed resize``: a position table inside a checkpoint or model folder, resized."""

from __future__ import annotations

import argparse
from typing import Any

from posembed.cli._common import _config_field, _fail, _grid, _non_negative, _positive


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from posembed.checkpoint._model_folder import written_by_posembed
    from posembed.checkpoint._resize import resize_checkpoint

    def fail(message: str) -> int:
        return _fail("resize", message)

    if (args.length is None) == (args.new_grid is None):
        args.parser.error("give --length T (position rows) or --new-grid HxW (a ViT's patch grid)")
    folder = Path(args.src).is_dir()
    if not folder and args.key is None:
        args.parser.error("--key is required for a safetensors file (a model folder may omit it)")
    if not folder and args.set_config:
        args.parser.error("--set-config applies to a model folder (config.json) only")
    out = Path(args.output)
    # only a regular file, or a model folder posembed wrote, is ever replaced:
    # anything else is refused by name below
    ours = written_by_posembed(out) if folder else out.is_file()
    if not args.force and not out.is_symlink() and ours:
        return fail(f"{out} exists; pass --force to replace it")
    try:
        result = resize_checkpoint(
            args.src,
            out,
            args.key,
            args.length,
            init=args.init,
            align=args.align,
            prefix=args.prefix,
            seed=args.seed,
            grid=args.grid,
            new_grid=args.new_grid,
            method=args.method,
            antialias=args.antialias,
            set_config=dict(args.set_config) if folder and args.set_config else None,
            overwrite=args.force,
        )
    except (ImportError, MemoryError, OSError, TypeError, ValueError) as exc:
        return fail(str(exc))
    print(f"resized {result}")
    return 0


def add(sub: Any) -> None:
    """The ``resize`` command's parser, under ``sub``."""
    p = sub.add_parser(
        "resize",
        help="resize a position table inside a safetensors checkpoint (fixes 'size mismatch')",
        description=(
            "Resize the position table KEY of a safetensors checkpoint to --length "
            "position rows and write the whole checkpoint to -o: every other tensor "
            "and the metadata are copied unchanged, streaming (bounded memory). "
            "SRC may be a Hugging Face model folder (config.json and model.safetensors, "
            "or shards with model.safetensors.index.json): -o is then a folder that "
            "from_pretrained loads at the new size, config.json updated (gpt2, gpt_neo, "
            "bert, distilbert, electra, roberta, xlm-roberta, camembert, opt, bart, mbart, "
            "whisper, vit, "
            "deit, clip and siglip by their model_type, which also "
            "finds KEY and --prefix; --set-config for any other), the index's sizes "
            "updated, the other files copied. "
            "Without --init the position rows are interpolated (grow or shrink); with "
            "--init the trained rows are kept and new ones added (grow only). An "
            "unchanged length copies the table. --new-grid instead resamples a ViT's patch "
            "grid in 2-D (posembed.resample_grid; --prefix 1 keeps the CLS row). The output "
            "appears only when complete."
        ),
    )
    p.add_argument(
        "src", help="the checkpoint to read (.safetensors), or a Hugging Face model folder"
    )
    p.add_argument(
        "--key",
        help="name of the table: (rows, d) or (1, rows, d); a model folder of a known "
        "model_type may omit it",
    )
    p.add_argument(
        "--length",
        type=_positive,
        metavar="T",
        help="position rows in the output, prefix rows not counted (output: prefix + length rows)",
    )
    p.add_argument(
        "--new-grid",
        type=_grid,
        metavar="HxW",
        help="instead of --length: resample the position rows as a ViT patch grid to HxW",
    )
    p.add_argument(
        "--grid",
        type=_grid,
        metavar="HxW",
        help="the grid the position rows form now (default: square; for a ViT folder, "
        "from config.json)",
    )
    p.add_argument(
        "--method",
        choices=["bicubic", "bilinear"],
        help="grid resampling (default: bicubic, PyTorch's)",
    )
    p.add_argument(
        "--antialias",
        action="store_true",
        help="resample with PyTorch's antialiased filter, as timm's resample_abs_pos_embed "
        "(a grid, or a 1-D interpolation with --align half_pixel, the default then)",
    )
    p.add_argument(
        "--init",
        choices=["interpolate", "tile", "edge", "random", "zeros"],
        help="keep the trained rows and fill the new ones this way (posembed.extend; grow only); "
        "default: interpolate all position rows (posembed.interpolate)",
    )
    p.add_argument(
        "--align",
        choices=["scale", "half_pixel", "corners"],
        help="interpolation convention (default: scale; half_pixel for --new-grid)",
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--prefix",
        type=_non_negative,
        metavar="N",
        help="leading rows kept as they are and not resized: RoBERTa's offset of 2, "
        "a ViT's CLS row (default 0; a known model folder's own)",
    )
    group.add_argument(
        "--offset", dest="prefix", type=_non_negative, metavar="N", help="the same as --prefix"
    )
    p.add_argument("--seed", type=int, metavar="S", help="seed of --init random")
    p.add_argument(
        "--set-config",
        type=_config_field,
        action="append",
        metavar="FIELD=VALUE",
        help="a model folder's config.json field to set (repeatable; VALUE read as JSON: "
        'true, 2048, 2.5, "text", [384, 384]; True, False and None as in Python; any other '
        "word as text; a.b sets field b of object a), after those a known model_type sets",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing output (a file, or a model folder posembed wrote)",
    )
    p.add_argument(
        "-o", "--output", required=True, help="the checkpoint (the folder, for a folder) to write"
    )
    p.set_defaults(func=run, parser=p)

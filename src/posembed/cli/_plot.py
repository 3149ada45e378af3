"""``posembed plot``: pictures of a position table."""

from __future__ import annotations

import argparse
from typing import Any

from posembed.cli._common import _positive


def run(args: argparse.Namespace) -> int:
    from posembed.io import _npy
    from posembed.plot import save_similarity_figure

    try:
        # every header field checked (a crafted one raises ValueError naming the
        # file); a FIFO or a folder is refused, never waited on
        table = _npy.load(args.table, args.table)
    except ValueError as exc:
        args.parser.error(str(exc))
    except OSError as exc:
        args.parser.error(f"cannot read {args.table}: {exc}")
    try:
        save_similarity_figure(table, args.output, args.length, align=args.align)
    except (TypeError, ValueError) as exc:
        args.parser.error(f"{args.table}: {exc}")
    except MemoryError as exc:
        args.parser.error(f"{args.table}: not enough memory for --length {args.length}: {exc}")
    except OSError as exc:
        args.parser.error(f"cannot write {args.output}: {exc}")
    print(f"wrote {args.output}")
    return 0


def add(sub: Any) -> None:
    """The ``plot`` command's parser, under ``sub``."""
    p = sub.add_parser("plot", help="draw pictures of a position table (needs matplotlib)")
    plots = p.add_subparsers(dest="plot", required=True)
    s = plots.add_parser(
        "similarity", help="similarity heatmaps before and after interpolation, side by side"
    )
    s.add_argument("table", help="an (L, d) float table saved with numpy.save (.npy)")
    s.add_argument("--length", type=_positive, help="interpolated length (default 2 L)")
    s.add_argument(
        "--align",
        default="scale",
        choices=["scale", "half_pixel", "corners"],
        help="interpolation convention (default: scale)",
    )
    s.add_argument("-o", "--output", required=True, help="image file to write (.png, .svg, .pdf)")
    s.set_defaults(func=run, parser=s)

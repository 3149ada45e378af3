"""``posembed bench``: every kernel timed against NumPy, PyTorch and the memory roofline."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from posembed.cli._common import MAX_REPEAT, _fail, _repeat, _thread_counts, _unwritable


def run(args: argparse.Namespace) -> int:
    from posembed import bench, set_num_threads

    counts: list[int] = args.threads or []
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            args.parser.error("--plot needs matplotlib: pip install 'posembed[plot]'")
    kernels = None
    if args.only is not None:
        kernels = [k.strip() for k in args.only.split(",") if k.strip()]
        unknown = [k for k in kernels if k not in bench.BUILDERS]
        if unknown or not kernels:
            what = f"unknown kernel {unknown[0]!r}" if unknown else f"no kernel in {args.only!r}"
            args.parser.error(f"--only: {what}; choose from {', '.join(bench.BUILDERS)}")
    for path, option in ((args.json, "--json"), (args.plot, "--plot")):
        problem = None if path is None else _unwritable(path, option)
        if problem:
            return _fail("bench", problem)
    if counts:
        # the main table runs at the largest count; --threads 1,2 adds the scaling table
        try:
            set_num_threads(max(counts))
        except ValueError as exc:
            return _fail("bench", f"--threads: {exc}")
    info = bench.machine(quick=args.quick)
    if args.quick:
        info["run"] = "quick (smaller problems, 3 rounds)"

    def progress(s: str) -> None:
        print(f"  measuring {s}", file=sys.stderr)

    results = bench.run(quick=args.quick, repeat=args.repeat, progress=progress, kernels=kernels)
    scaling: list[bench.ScalingResult] = []
    if len(counts) > 1:
        reps = args.repeat or (5 if args.quick else 15)
        scaling = bench.run_scaling(
            counts, reps, quick=args.quick, progress=progress, kernels=kernels
        )
    print(bench.format_results(results, info, markdown=args.markdown))
    if scaling:
        print()
        print("thread scaling (posembed alone; speed-up = time on the first count / time):")
        print(bench.format_scaling(scaling, markdown=args.markdown))
    data = bench.to_dict(results, info, scaling)
    if args.json:
        try:
            with open(args.json, "w") as f:
                json.dump(data, f, indent=2)
        except OSError as exc:
            return _fail("bench", f"--json: cannot write {args.json}: {exc}")
        print(f"\nraw figures written to {args.json}")
    if args.plot:
        from posembed.plot import save_bench_figure

        try:
            save_bench_figure(data, args.plot)
        except (OSError, ValueError) as exc:  # ValueError: an image format matplotlib lacks
            return _fail("bench", f"--plot: cannot write {args.plot}: {exc}")
        print(f"chart written to {args.plot}")
    return 0


def add(sub: Any) -> None:
    """The ``bench`` command's parser, under ``sub``."""
    p = sub.add_parser("bench", help="time every kernel against NumPy, PyTorch and the roofline")
    p.add_argument(
        "--quick", action="store_true", help="smaller problems, 3 rounds (under a minute)"
    )
    p.add_argument(
        "--repeat", type=_repeat, help=f"timed rounds per implementation (1..{MAX_REPEAT})"
    )
    p.add_argument(
        "--threads",
        type=_thread_counts,
        metavar="N[,M...]",
        help="threads for posembed and PyTorch (the largest); several add a thread-scaling table",
    )
    p.add_argument("--json", metavar="FILE", help="also write the raw figures as JSON")
    p.add_argument(
        "--plot", metavar="FILE.png", help="draw speed-ups and roofline fractions (matplotlib)"
    )
    p.add_argument("--markdown", action="store_true", help="print a Markdown table (README)")
    p.add_argument("--only", metavar="K1,K2", help="only these kernels (e.g. gather,interpolate)")
    p.set_defaults(func=run, parser=p)

"""``posembed config``: the build and runtime facts."""

from __future__ import annotations

import argparse
from typing import Any


def run(args: argparse.Namespace) -> int:
    from posembed import show_config

    show_config()
    return 0


def add(sub: Any) -> None:
    """The ``config`` command's parser, under ``sub``."""
    p = sub.add_parser("config", help="print version, compiler, OpenMP, SIMD level, threads")
    p.set_defaults(func=run)

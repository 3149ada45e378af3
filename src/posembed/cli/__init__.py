"""The ``posembed`` command: bench, chunk, convert, merge, pack, samples, resize, plot, config."""

from __future__ import annotations

from posembed.cli import (
    _bench,
    _chunk,
    _config,
    _convert,
    _merge,
    _pack,
    _plot,
    _resize,
    _samples,
)
from posembed.cli._common import _Parser

# The order of the commands in ``posembed --help``.
COMMANDS = (_bench, _chunk, _convert, _merge, _pack, _samples, _resize, _plot, _config)


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="posembed", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add(sub)
    args = parser.parse_args(argv)
    # bench and chunk set the thread count for their run; a caller that runs
    # the command in-process (a notebook, a test) gets its own setting back.
    from posembed.kernels._runtime import config, set_num_threads

    before = config()
    try:
        return int(args.func(args))
    finally:
        set_num_threads(before["num_threads"] if before["num_threads_set"] else None)

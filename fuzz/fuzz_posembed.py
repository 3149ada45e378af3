#!/usr/bin/env python3
"""Fuzz every public posembed function against its NumPy twin.

Each input, a byte string, stands for one test case of the mode chosen with
``--mode``:

* ``calls`` (the default): a public function (the file-writing ones aside)
  with arguments of every dtype, rank, layout and odd value, called on
  posembed and on ``posembed.reference``; posembed must return what the twin
  returns, or raise TypeError, ValueError or IndexError where the twin raises
  the same kind, and leave its inputs unchanged;
* ``race``: the window kernels (windows with offsets, Windows.owner, stitch
  with every reduce, window_layout, WindowLayout.cut with and without a
  range, and posembed.dask's block functions), hand-built PackPlans and
  indexed pairs, while a writer thread rewrites their arrays with hostile
  values; each call must return or raise TypeError, ValueError or
  IndexError, and the process survive;
* ``files``: crafted safetensors headers, ``.npy`` headers, parted outputs,
  Hugging Face model folders (config.json, shards and their index), Arrow /
  Parquet corpora (Parquet files and folders, IPC files and streams,
  save_to_disk folders) and object-store outputs for the public readers and
  commands; each must accept a valid file (a resized folder loads, with the
  table's new shape and config.json's field; Arrow windows equal those of
  the ``.npy`` path) and refuse a crafted one with a documented exception
  (exit 2 and one line from the command), never read outside its folder or
  block on a FIFO.

Anything else raises ``FuzzFailure``; a crash or a hang ends the process
(libFuzzer's ``-timeout=``, or ``faulthandler`` without atheris). The race
and files modes end with the counts per kernel or reader after the summary.

Usage::

    python fuzz/fuzz_posembed.py --seconds 60            # atheris if installed, else plain
    python fuzz/fuzz_posembed.py --seconds 60 --engine plain --seed 3
    python fuzz/fuzz_posembed.py crash-1a2b...           # rerun saved inputs
    python fuzz/fuzz_posembed.py -v --runs 20000         # and count the outcomes per call
    python fuzz/fuzz_posembed.py --mode race --seconds 30
    python fuzz/fuzz_posembed.py --mode files --seconds 30 --engine plain
    python fuzz/fuzz_posembed.py --engine atheris -- -max_len=1024 corpus/   # libFuzzer flags

Both engines end with one line, ``fuzz: N inputs in S s, no failures``.

The harness itself is the package ``posembed_fuzz`` beside this script, a
module a mode or family of inputs (its ``__init__`` lists them); this script
puts its own folder on ``sys.path`` (where it is not, as when a test loads
the script by its path), runs :func:`posembed_fuzz.runner.main`, and has the
package's modules as attributes, for the tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from posembed_fuzz import (  # noqa: E402
    calls,
    calls_builders,
    calls_compare,
    calls_values,
    calls_windows,
    common,
    files,
    files_arrow,
    files_common,
    files_headers,
    files_models,
    files_parts,
    files_store,
    races,
    runner,
)

__all__ = [
    "calls",
    "calls_builders",
    "calls_compare",
    "calls_values",
    "calls_windows",
    "common",
    "files",
    "files_arrow",
    "files_common",
    "files_headers",
    "files_models",
    "files_parts",
    "files_store",
    "races",
    "runner",
]

if __name__ == "__main__":
    sys.exit(runner.main(description=__doc__.split("\n\n")[0]))

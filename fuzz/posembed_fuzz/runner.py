"""The run loop, the engines and the command line: :func:`TestOneInput`
(atheris' name) runs one input in the mode --mode chose and counts its
outcome; the plain driver feeds it random bytes from a seed (or saved
inputs), :func:`run_atheris` hands it to libFuzzer; both end with the
summary. Hostile inputs' memory is given back as they go.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import faulthandler
import gc
import hashlib
import itertools
import os
import shutil
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from typing import Any

import numpy as np

try:
    import atheris
except ImportError:  # the plain driver needs only NumPy
    atheris = None

from .calls import call_input
from .common import STATS
from .files import files_input
from .races import race_input

# What each input stands for: "calls" (a public function against its twin),
# "race" (a window kernel raced by a writer thread) or "files" (a crafted file
# for a reader). Set by --mode.
MODE = "calls"
MODES = ("calls", "race", "files")


# A race or files input leaves reference cycles (its writer thread, tracebacks
# that hold the call's frames) keeping up to hundreds of MB of arrays until the
# collector gets to them, and glibc keeps freed heap memory. Whenever resident
# memory has grown this much since the last time, the cycles are collected and
# the heap handed back (gc.collect() alone took 780 MB to 328 MB once).
RSS_COLLECT = 512 << 20
HOSTILE_RSS_LIMIT_MB = 8192  # libFuzzer's limit in race and files modes (see run_atheris)
try:
    _malloc_trim: Any = ctypes.CDLL(None).malloc_trim
except (OSError, AttributeError):  # not glibc
    _malloc_trim = None
_rss_after_collect = 0


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _bound_memory() -> None:
    global _rss_after_collect
    if _resident_bytes() - _rss_after_collect > RSS_COLLECT:
        gc.collect()
        if _malloc_trim is not None:
            _malloc_trim(0)
        _rss_after_collect = _resident_bytes()


def TestOneInput(data: bytes) -> None:  # atheris' name for the function it calls
    STATS.inputs += 1
    if MODE != "calls":
        STATS.outcomes[race_input(data) if MODE == "race" else files_input(data)] += 1
        _bound_memory()
        return
    STATS.outcomes[call_input(data)] += 1


# ---------------------------------------------------------------- drivers


def summary(elapsed: float) -> str:
    line = f"fuzz: {STATS.inputs} inputs in {elapsed:.1f} s, no failures"
    if MODE == "calls":
        return line
    # the inputs per kernel (race) or per reader (files)
    per: collections.Counter[str] = collections.Counter()
    for key, n in STATS.outcomes.items():
        per[key.rsplit(": ", 1)[0].split(" ", 1)[1]] += n
    counts = ", ".join(f"{name} {n}" for name, n in sorted(per.items()))
    line += f" ({MODE}: {counts})"
    if STATS.known:
        line += f"; {sum(STATS.known.values())} tolerated as known bugs"
    return line


def _print_details() -> None:
    for key, n in sorted(STATS.outcomes.items()):
        print(f"  {n:7d}  {key}")
    for key, n in sorted(STATS.known.items()):
        print(f"  {n:7d}  tolerated known bug: {key}")


def plain_inputs(seed: int, start: int = 0) -> Iterator[tuple[int, bytes]]:
    """Random inputs (index, bytes); input i is the same for a seed on any machine."""
    i = start
    while True:
        rng = np.random.default_rng([seed, i])
        yield i, rng.bytes(int(rng.integers(0, 400)))
        i += 1


def run_plain(args: argparse.Namespace) -> int:
    """The driver without atheris: random bytes for --seconds (or --runs), or the
    given files; hangs end the process through faulthandler."""
    faulthandler.enable()
    start = time.monotonic()
    if args.files:
        for path in args.files:
            with open(path, "rb") as f:
                data = f.read()
            print(f"running {path} ({len(data)} bytes)")
            TestOneInput(data)
        print(summary(time.monotonic() - start))
        return 0
    # the input being run is kept on disk, so a crash leaves it behind
    fd, current = tempfile.mkstemp(prefix="posembed-fuzz-input-")
    print(f"fuzz: seed {args.seed}; a crash leaves its input in {current}", flush=True)
    deadline = start + args.seconds
    try:
        for i, data in plain_inputs(args.seed, args.start):
            if (args.runs and i - args.start >= args.runs) or (
                not args.runs and time.monotonic() >= deadline
            ):
                break
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            faulthandler.dump_traceback_later(args.timeout, exit=True)
            try:
                TestOneInput(data)
            except BaseException:
                name = os.path.join(args.artifact_prefix, "crash-" + hashlib.sha1(data).hexdigest())
                with open(name, "wb") as f:
                    f.write(data)
                print(f"fuzz: input {i} of seed {args.seed} failed; saved as {name}", flush=True)
                raise
    finally:
        faulthandler.cancel_dump_traceback_later()
        os.close(fd)
        os.unlink(current)
    if args.verbose:
        _print_details()
    print(summary(time.monotonic() - start))
    return 0


_ON_EXIT: Any = None  # keeps the C callback alive


def instrument() -> int:
    """Coverage feedback for libFuzzer from posembed's Python layer, its twins and
    this harness's own choices; returns the number of functions instrumented.

    ``atheris.instrument_imports()`` around ``import posembed`` instruments
    nothing in an editable install (scikit-build-core's loader hides the
    source: libFuzzer saw 1 edge), so the functions are instrumented after
    import, which works for editable and wheel installs alike."""
    count = 0
    ours = ("posembed", __package__)  # posembed and this package's modules
    for obj in gc.get_objects():
        module = getattr(obj, "__module__", None) or ""
        if isinstance(obj, types.FunctionType) and module.split(".")[0] in ours:
            try:
                atheris.instrument_func(obj)
                count += 1
            except Exception:  # a function atheris cannot patch keeps running uninstrumented
                pass
    return count


def libfuzzer_flags(args: argparse.Namespace, libfuzzer_args: list[str]) -> list[str]:
    """The flags run_atheris gives libFuzzer before the caller's own."""
    flags = [f"-timeout={args.timeout}", f"-artifact_prefix={args.artifact_prefix}"]
    if args.seconds and not any(a.startswith("-max_total_time=") for a in libfuzzer_args):
        flags.append(f"-max_total_time={args.seconds}")
    if args.runs:
        flags.append(f"-runs={args.runs}")
    if args.seed:
        flags.append(f"-seed={args.seed}")
    if MODE != "calls" and not any(a.startswith("-rss_limit_mb=") for a in libfuzzer_args):
        # atheris 3.0 keeps a reference to every array that a comparison in
        # an instrumented function returns: each mask that `starts > ...` or
        # `lengths < 0` makes in posembed's checks stays alive. A race
        # input's checks compare arrays of up to a few MB, so resident memory
        # grows by about 1.5 MB an input (2.1 GB, libFuzzer's default limit,
        # after 60-90 s here), while a plain run stays under 400 MB.
        flags.append(f"-rss_limit_mb={HOSTILE_RSS_LIMIT_MB}")
    return flags


def run_atheris(args: argparse.Namespace, libfuzzer_args: list[str]) -> int:
    """libFuzzer through atheris; the summary comes from a C on_exit hook, since
    libFuzzer ends the process with exit() and Python's atexit never runs."""
    global _ON_EXIT
    start = time.monotonic()
    corpus: list[str] = []
    if not args.files:
        # a start from the plain driver's inputs (up to 400 bytes), not from
        # libFuzzer's one byte, so a short run already tries rich calls
        corpus = [tempfile.mkdtemp(prefix="posembed-fuzz-corpus-")]
        for i, data in itertools.islice(plain_inputs(args.seed), 256):
            with open(os.path.join(corpus[0], f"seed-{i}"), "wb") as f:
                f.write(data)

    @ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p)
    def at_exit(status: int, _arg: Any) -> None:
        for folder in corpus:
            shutil.rmtree(folder, ignore_errors=True)
        if args.verbose:
            _print_details()
        if status == 0:
            print(summary(time.monotonic() - start), flush=True)
        else:
            print(f"fuzz: {STATS.inputs} inputs, stopped with status {status}", flush=True)

    _ON_EXIT = at_exit
    ctypes.CDLL(None).on_exit(at_exit, None)
    print(f"fuzz: {instrument()} functions instrumented", file=sys.stderr)
    flags = libfuzzer_flags(args, libfuzzer_args)
    atheris.Setup([sys.argv[0], *flags, *libfuzzer_args, *args.files, *corpus], TestOneInput)
    atheris.Fuzz()
    return 0  # not reached: libFuzzer exits


def main(argv: list[str] | None = None, description: str | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seconds", type=float, default=0, help="fuzz for this long")
    parser.add_argument("--runs", type=int, default=0, help="or for this many inputs")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--start", type=int, default=0, help="first input index (plain)")
    parser.add_argument(
        "--timeout", type=int, default=60, help="seconds one input may take (a hang)"
    )
    parser.add_argument("--engine", choices=["atheris", "plain"], default=None)
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="calls",
        help="calls: functions against their twins; race: window kernels against a writer "
        "thread; files: crafted files for the readers",
    )
    parser.add_argument("--artifact-prefix", default="./", help="where failing inputs go")
    parser.add_argument("-v", "--verbose", action="store_true", help="outcome counts per call")
    parser.add_argument("files", nargs="*", help="inputs to rerun (or, for atheris, corpus dirs)")
    ours, libfuzzer_args = [], []
    rest = argv
    if "--" in argv:
        k = argv.index("--")
        rest, libfuzzer_args = argv[:k], argv[k + 1 :]
    for arg in rest:  # libFuzzer's own flags have one dash: -max_len=, -jobs=
        (
            libfuzzer_args
            if arg.startswith("-") and not arg.startswith("--") and len(arg) > 2
            else ours
        ).append(arg)
    args = parser.parse_args(ours)
    global MODE
    MODE = args.mode
    engine = args.engine or ("atheris" if atheris is not None else "plain")
    if engine == "atheris" and atheris is None:
        parser.error("atheris is not installed (pip install atheris), use --engine plain")
    if engine == "plain":
        if libfuzzer_args:
            parser.error(f"libFuzzer flags need --engine atheris: {libfuzzer_args}")
        if not args.seconds and not args.runs and not args.files:
            args.seconds = 60
        return run_plain(args)
    return run_atheris(args, libfuzzer_args)

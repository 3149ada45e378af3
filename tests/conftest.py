"""Shared generators and checks for the equivalence tests."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed

# The bad-input matrix's checks live in a helper module: rewrite its asserts too.
pytest.register_assert_rewrite("tests.badinput_harness")

try:
    import ml_dtypes
except ImportError:  # the test extra installs it; plain runs still work
    ml_dtypes = None

POSITION_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]

TABLE_DTYPES: list[Any] = [
    np.float16,
    np.float32,
    np.float64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.bool_,
    np.complex64,
    np.complex128,
    np.dtype(">f4"),  # non-native byte order
    np.dtype("S7"),  # odd item size
    np.dtype([("a", "<i4"), ("b", "<f2")]),  # structured, 6 bytes
]
if ml_dtypes is not None:
    TABLE_DTYPES.append(np.dtype(ml_dtypes.bfloat16))


# Memory measurements (peak RSS, growth over repeated calls) are meaningful
# on the normal build only: AddressSanitizer's shadow memory and its
# quarantine of freed blocks change what the process holds. The sanitizer run
# (.ci/run) checks memory safety; the normal runs check memory use.
SANITIZED = bool(posembed.config()["sanitized"])
skip_if_sanitized = pytest.mark.skipif(
    SANITIZED, reason="measures memory use, which AddressSanitizer changes (see conftest)"
)


# The probe: a fresh parent whose only child is the command, so that its
# RUSAGE_CHILDREN peak is the command's alone (the test process's earlier
# children, forks included, would count in the test process's own).
_PEAK_PROBE = """
import json, resource, subprocess, sys
done = subprocess.run(json.loads(sys.argv[1]), capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
if sys.platform == "darwin":
    peak //= 1024  # bytes there, KiB on Linux
print(json.dumps([done.returncode, done.stdout, done.stderr, peak]))
"""


def run_peak_rss(argv: list[str]) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run ``argv`` as the only child of a fresh Python parent and measure it.

    Returns the child's completed process (returncode, and stdout and stderr
    as text) and its peak resident set size in KiB (``ru_maxrss`` of the
    parent's RUSAGE_CHILDREN, which counts this one child alone). The caller
    checks the return code.
    """
    probe = subprocess.run(
        [sys.executable, "-c", _PEAK_PROBE, json.dumps(argv)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    rc, out, err, peak_kib = json.loads(probe.stdout.strip().splitlines()[-1])
    return subprocess.CompletedProcess(argv, rc, out, err), int(peak_kib)


def random_table(rng: np.random.Generator, rows: int, cols: int, dtype: Any) -> np.ndarray:
    """A table of random bytes: every bit pattern, NaN and inf included for floats."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, (rows, cols)).astype(bool)
    raw = rng.integers(0, 256, rows * cols * dt.itemsize, dtype=np.uint8)
    return raw.view(dt).reshape(rows, cols)


def assert_same(fast: np.ndarray, ref: np.ndarray) -> None:
    """Same shape, dtype and bytes (so NaNs and -0.0 compare exactly)."""
    assert isinstance(fast, np.ndarray)
    assert fast.shape == ref.shape
    assert fast.dtype == ref.dtype
    assert np.ascontiguousarray(fast).tobytes() == np.ascontiguousarray(ref).tobytes()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261129)


@pytest.fixture
def tiny_thresholds():
    """Drive the parallel and streaming paths with small arrays."""
    from posembed import _core

    _core._probes.set_thresholds(1024, 4096)
    yield
    _core._probes.set_thresholds(-1, -1)


@pytest.fixture
def restore_threads() -> Iterator[None]:
    before = posembed.get_num_threads() if posembed.config()["num_threads_set"] else None
    yield
    posembed.set_num_threads(before)


FLOAT_TABLE_DTYPES: list[Any] = [np.float16, np.float32, np.float64]
if ml_dtypes is not None:
    FLOAT_TABLE_DTYPES.append(np.dtype(ml_dtypes.bfloat16))


class ThreadCounts:
    """What ``posembed.get_num_threads()`` said, on whichever thread, as each
    watched call began: ``seen`` holds (label, count) pairs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[tuple[str, int]] = []
        self._monkeypatch = monkeypatch

    def watch(self, owner: Any, name: str, label: str) -> None:
        f = getattr(owner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.seen.append((label, posembed.get_num_threads()))
            return f(*args, **kwargs)

        self._monkeypatch.setattr(owner, name, call)


@pytest.fixture
def thread_counts(monkeypatch: pytest.MonkeyPatch) -> ThreadCounts:
    return ThreadCounts(monkeypatch)


def normal_table(rng: np.random.Generator, rows: int, cols: int, dtype: Any) -> np.ndarray:
    """A float table of N(0, 1) values rounded to dtype (finite: interpolation
    tests compare bytes, and NaN payloads are not part of the contract)."""
    return rng.standard_normal((rows, cols)).astype(dtype)


def torch_or_skip() -> Any:
    """PyTorch, or a skip; CI sets POSEMBED_REQUIRE_TORCH=1 so that a missing
    PyTorch fails there instead of skipping the comparisons."""
    import os

    if os.environ.get("POSEMBED_REQUIRE_TORCH") == "1":
        import torch
    else:
        torch = pytest.importorskip("torch")
    return torch


def megatron_or_skip() -> Any:
    """megatron-core (``megatron.core``), or a skip; with POSEMBED_REQUIRE_MEGATRON=1
    set, a missing megatron-core fails instead of skipping the comparisons.
    Its import warns (deprecated PyTorch APIs, no Transformer Engine), which this
    suite would turn into errors: the warnings are ignored while it imports."""
    import os
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if os.environ.get("POSEMBED_REQUIRE_MEGATRON") == "1":
            import megatron.core as core
        else:
            core = pytest.importorskip("megatron.core")
    return core


@dataclass(frozen=True)
class BenchRun:
    """What one ``posembed bench`` command printed and wrote."""

    text: str  # stdout
    data: dict[str, Any]  # the --json file, read back
    json_path: Path
    png: Path


@pytest.fixture(scope="session")
def quick_bench(tmp_path_factory: pytest.TempPathFactory) -> BenchRun:
    """One ``posembed bench --quick`` run with every output (the thread-scaling
    table, --json, --plot), shared by the tests that read it: a run takes a while."""
    from posembed import cli

    folder = tmp_path_factory.mktemp("bench")
    path, png = folder / "bench.json", folder / "bench.png"
    argv = ["bench", "--quick", "--repeat", "1", "--threads", "2,1", "--json", str(path)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main([*argv, "--plot", str(png)]) == 0
    return BenchRun(out.getvalue(), json.loads(path.read_text()), path, png)


def transformers_or_skip() -> Any:
    """transformers, or a skip; with POSEMBED_REQUIRE_TRANSFORMERS=1 set (CI's
    step that installs it), a missing transformers fails instead of skipping
    the comparisons. Its import warns, which this suite would turn into
    errors: the warnings are ignored while it imports."""
    import os
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if os.environ.get("POSEMBED_REQUIRE_TRANSFORMERS") == "1":
            import transformers
        else:
            transformers = pytest.importorskip("transformers")
    return transformers


def trl_or_skip() -> Any:
    """TRL's ``pack_dataset``, or a skip; with POSEMBED_REQUIRE_TRL=1 set, a
    missing TRL fails instead of skipping (it needs PyTorch, so .ci/run installs
    it after the CPU build rather than the test extra). Its import warns, which
    this suite would turn into errors: the warnings are ignored while it imports."""
    import os
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if os.environ.get("POSEMBED_REQUIRE_TRL") == "1":
            from trl import pack_dataset
        else:
            pack_dataset = pytest.importorskip("trl").pack_dataset
    return pack_dataset


def assert_convert_and_pack_agree(
    src: Any, tokens: Any, offsets: Any, folder: Path, size: int, **options: Any
) -> None:
    """``posembed convert`` and ``posembed pack`` of the corpus ``src`` (with
    ``options``) give the files they give for the token file ``tokens`` with
    the document ``offsets`` (both paths), byte for byte; in ``folder``."""
    from posembed.corpus._convert import convert_file
    from posembed.corpus._pack_output import pack_file

    local = {"offsets_path": offsets, "quiet": True}
    convert_file(src, folder / "mg", quiet=True, **options)
    convert_file(tokens, folder / "want", **local)
    for suffix in (".bin", ".idx"):
        assert (folder / f"mg{suffix}").read_bytes() == (folder / f"want{suffix}").read_bytes()
    pack_file(src, folder / "packed", size=size, quiet=True, **options)
    pack_file(tokens, folder / "packed-want", size=size, **local)
    for path in sorted((folder / "packed-want").glob("*.npy")):
        np.testing.assert_array_equal(np.load(folder / "packed" / path.name), np.load(path))

"""The benchmark behind ``posembed bench`` and the ``bench/`` pytest-benchmark suite.

Every figure is a ratio measured in one run: posembed against its NumPy
reference twin, plain NumPy, PyTorch (when installed) and the memory
roofline of the same output bytes on the same threads.

Rooflines
---------
*write*: a parallel memset of the kernel's output bytes with all threads;
*copy*: a parallel memcpy of that many bytes. Each is *warm* (the
destination was written before, as for an ``out=`` call) or *fresh* (the
destination is newly allocated each time, as for a kernel that returns a new
array, so page faults count). The fill byte is non-zero on purpose: some
machines write all-zero cache lines far faster than data, which would make a
zero-fill roofline no kernel could honestly reach.

*file write* (the ``chunk`` command's roofline): the output's bytes written
from memory into a new file beside the command's output, 16 MiB a call,
the previous one deleted first as the command deletes its previous output.
*file copy* (``resize_checkpoint``'s roofline): the input file copied to a
new file with ``shutil.copyfile`` (in-kernel, with no resizing to do).
"""

from __future__ import annotations

import atexit
import datetime
import gc
import itertools
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import posembed
from posembed import _core, reference

FILL_BYTE = 0x5A
COLUMNS = ("reference", "numpy", "torch", "posembed")
# The cases of each kernel, in the order its builder makes them; the bench/
# suite parametrizes over these names without building the arrays.
# Names say what is compared; the sizes are in each case's shape (``--quick``
# runs smaller problems under the same names).
CASE_NAMES = {
    "gather": ("out= given", "fresh output", "in cache, out=", "one row"),
    "interpolate": ("fresh output", "out= given", "lerp", "lerp 4 positions"),
    "extend": ("tile",),
    "resample_grid": ("bicubic", "bilinear"),
    "similarity": ("all pairs",),
    "windows": ("fresh output", "out= given", "CSR documents", "stitch mean"),
    "chunk": ("token file",),
    "embed": ("dropout 0.1", "no dropout", "4 tokens"),
    "gather_backward": ("positions", "token ids", "4 rows"),
    "resize": ("checkpoint",),
}


@dataclass
class Case:
    """One benchmarked problem: the same work done by each implementation."""

    kernel: str
    name: str
    shape: str
    out_bytes: int
    impls: dict[str, Callable[[], object]]
    roofline: str | None = None  # "write warm", "write fresh", "copy warm", ...
    check: Callable[[], bool] | None = None  # posembed agrees with numpy
    in_bytes: int = 0  # input bytes, where throughput is counted on the input (chunk)
    source: Path | None = None  # the input file of a "file copy" roofline


@dataclass
class Result:
    kernel: str
    name: str
    shape: str
    out_bytes: int
    roofline: str | None
    seconds: dict[str, float] = field(default_factory=dict)
    in_bytes: int = 0

    def speedup(self, other: str) -> float | None:
        if other not in self.seconds or "posembed" not in self.seconds:
            return None
        return self.seconds[other] / self.seconds["posembed"]

    def roofline_fraction(self) -> float | None:
        return self.speedup("roofline")

    def gbps(self) -> float | None:
        t = self.seconds.get("posembed")
        return self.out_bytes / t / 1e9 if t and self.out_bytes else None

    def input_gbps(self) -> float | None:
        t = self.seconds.get("posembed")
        return self.in_bytes / t / 1e9 if t and self.in_bytes else None


def _scratch_dir() -> Path:
    """A temporary folder, removed when the process exits."""
    path = Path(tempfile.mkdtemp(prefix="posembed-bench-"))
    atexit.register(shutil.rmtree, path, True)
    return path


FILE_BLOCK = 16 << 20


def _file_writer(nbytes: int) -> Callable[[], object]:
    folder = _scratch_dir()
    block = np.full(min(nbytes, FILE_BLOCK), FILL_BYTE, np.uint8).data.cast("B")

    def write() -> None:
        path = folder / "roofline.bin"
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            done = 0
            while done < nbytes:
                done += os.pwrite(fd, block[: min(len(block), nbytes - done)], done)
        finally:
            os.close(fd)

    return write


def _file_copier(src: Path) -> Callable[[], object]:
    dst = _scratch_dir() / "roofline.bin"

    def copy() -> None:
        dst.unlink(missing_ok=True)
        shutil.copyfile(src, dst)

    return copy


def roofline(kind: str, nbytes: int, source: Path | None = None) -> Callable[[], object]:
    """The roofline callable for ``kind`` ("write warm", "copy fresh", "file write",
    "file copy" of ``source``, ...) over nbytes."""
    if kind == "file write":
        return _file_writer(nbytes)
    if kind == "file copy":
        if source is None:
            raise ValueError("the file copy roofline needs the source file")
        return _file_copier(source)
    op, state = kind.split()
    if state not in ("warm", "fresh") or op not in ("write", "copy"):
        raise ValueError(f"unknown roofline {kind!r}")
    src = np.full(nbytes, 0x3C, np.uint8) if op == "copy" else None
    if state == "warm":
        dst = np.empty(nbytes, np.uint8)
        _core._probes.roofline_fill(dst, FILL_BYTE)
        if src is None:
            return lambda: _core._probes.roofline_fill(dst, FILL_BYTE)
        return lambda: _core._probes.roofline_copy(dst, src)
    if src is None:
        return lambda: _core._probes.roofline_fill(np.empty(nbytes, np.uint8), FILL_BYTE)
    return lambda: _core._probes.roofline_copy(np.empty(nbytes, np.uint8), src)


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(posembed.get_num_threads())
    return torch


def gather_cases(quick: bool = False) -> list[Case]:
    """The gather problems of the speed targets (issue 2), float32 tables."""
    rng = np.random.default_rng(0)
    torch = _torch()
    cases = []

    # The headline: 32x1024 int64 positions into a 2048x1024 table, out= given.
    b = 8 if quick else 32
    table = rng.standard_normal((2048, 1024), dtype=np.float32)
    pos = rng.integers(0, 2048, (b, 1024), dtype=np.int64)
    out = np.empty((b, 1024, 1024), np.float32)
    ref_out = np.empty_like(out)
    np_out = np.empty_like(out)
    impls: dict[str, Callable[[], object]] = {
        "reference": lambda: reference.gather(table, pos, out=ref_out),
        "numpy": lambda: np.take(table, pos, axis=0, out=np_out),
        "posembed": lambda: posembed.gather(table, pos, out=out),
    }
    if torch is not None:
        t_table, t_pos = torch.from_numpy(table), torch.from_numpy(pos.ravel())
        t_out = torch.empty((pos.size, 1024))
        impls["torch"] = lambda: torch.index_select(t_table, 0, t_pos, out=t_out)
    shape = f"{b}x1024 pos, 2048x1024 f32"
    cases.append(
        Case(
            "gather",
            "out= given",
            shape,
            out.nbytes,
            impls,
            "write warm",
            lambda: bool(
                np.array_equal(posembed.gather(table, pos, out=out), np.take(table, pos, axis=0))
            ),
        )
    )

    # Same work, a new output each call (page faults included).
    impls = {
        "reference": lambda: reference.gather(table, pos),
        "numpy": lambda: table[pos],
        "posembed": lambda: posembed.gather(table, pos),
    }
    if torch is not None:
        t_pos2 = torch.from_numpy(pos)
        impls["torch"] = lambda: torch.nn.functional.embedding(t_pos2, t_table)
    cases.append(
        Case(
            "gather",
            "fresh output",
            shape,
            out.nbytes,
            impls,
            "write fresh",
            lambda: bool(np.array_equal(posembed.gather(table, pos), table[pos])),
        )
    )

    # An output that stays in cache: 512 positions, out= given.
    pos_s = rng.integers(0, 2048, 512, dtype=np.int64)
    out_s = np.empty((512, 1024), np.float32)
    ref_s, np_s = np.empty_like(out_s), np.empty_like(out_s)
    impls = {
        "reference": lambda: reference.gather(table, pos_s, out=ref_s),
        "numpy": lambda: np.take(table, pos_s, axis=0, out=np_s),
        "posembed": lambda: posembed.gather(table, pos_s, out=out_s),
    }
    if torch is not None:
        t_pos_s, t_out_s = torch.from_numpy(pos_s), torch.empty((512, 1024))
        impls["torch"] = lambda: torch.index_select(t_table, 0, t_pos_s, out=t_out_s)
    # Output and table both live in cache, so the binding limit is a cached
    # copy of the output bytes (read + write), not a write alone.
    cases.append(
        Case(
            "gather",
            "in cache, out=",
            "512 pos, 2048x1024 f32",
            out_s.nbytes,
            impls,
            "copy warm",
            lambda: bool(np.array_equal(posembed.gather(table, pos_s, out=out_s), table[pos_s])),
        )
    )

    # Call overhead: one row of a small table.
    small = rng.standard_normal((128, 64), dtype=np.float32)
    impls = {
        "reference": lambda: reference.gather(small, 3),
        "numpy": lambda: np.take(small, 3, axis=0),
        "posembed": lambda: posembed.gather(small, 3),
    }
    if torch is not None:
        t_small = torch.from_numpy(small)
        impls["torch"] = lambda: t_small[3]
    cases.append(
        Case(
            "gather",
            "one row",
            "1 pos, 128x64 f32",
            small.shape[1] * 4,
            impls,
            None,
            lambda: bool(np.array_equal(posembed.gather(small, 3), small[3])),
        )
    )
    return cases


def _numpy_interpolate(table: np.ndarray, length: int) -> np.ndarray:
    """What a NumPy user writes: half-pixel linear interpolation, vectorised."""
    rows = table.shape[0]
    s = np.maximum((np.arange(length) + 0.5) * rows / length - 0.5, 0)
    lo = np.minimum(np.floor(s).astype(np.int64), rows - 1)
    hi = np.minimum(lo + 1, rows - 1)
    w = (s - lo).astype(table.dtype)[:, None]
    out: np.ndarray = (1 - w) * table[lo] + w * table[hi]
    return out


def _lerp_impls(table: np.ndarray, pos: np.ndarray, torch: Any) -> dict[str, Callable[[], object]]:
    """lerp four ways: the twin, NumPy's gather-and-blend, posembed, torch.lerp."""
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, table.shape[0] - 1)
    w = (pos - lo).astype(table.dtype)[:, None]
    impls: dict[str, Callable[[], object]] = {
        "reference": lambda: reference.lerp(table, pos),
        "numpy": lambda: (1 - w) * table[lo] + w * table[hi],
        "posembed": lambda: posembed.lerp(table, pos),
    }
    if torch is not None:
        tt, tlo, thi, tw = (torch.from_numpy(x) for x in (table, lo, hi, w))
        impls["torch"] = lambda: torch.lerp(tt[tlo], tt[thi], tw)
    return impls


def interpolate_cases(quick: bool = False) -> list[Case]:
    rng = np.random.default_rng(1)
    torch = _torch()
    rows = 512 if quick else 2048
    table = rng.standard_normal((rows, 1024), dtype=np.float32)
    n = 4 * rows
    stretch = f"{rows} -> {n} rows, d=1024 f32, half_pixel"
    impls: dict[str, Callable[[], object]] = {
        "reference": lambda: reference.interpolate(table, n, align="half_pixel"),
        "numpy": lambda: _numpy_interpolate(table, n),
        "posembed": lambda: posembed.interpolate(table, n, align="half_pixel"),
    }
    if torch is not None:
        tt = torch.from_numpy(table)
        fi = torch.nn.functional.interpolate
        impls["torch"] = lambda: fi(tt.T[None], size=n, mode="linear")[0].T.contiguous()
    out_bytes = n * 1024 * 4
    cases = [
        Case(
            "interpolate",
            "fresh output",
            stretch,
            out_bytes,
            impls,
            "write fresh",
            lambda: bool(
                np.array_equal(
                    posembed.interpolate(table, n, align="half_pixel"),
                    reference.interpolate(table, n, align="half_pixel"),
                )
            ),
        )
    ]
    # Into an existing buffer: PyTorch's own out= kernel, in its (1, d, T) layout.
    out = np.empty((n, 1024), np.float32)
    ref_out = np.empty_like(out)
    impls = {
        "reference": lambda: reference.interpolate(table, n, align="half_pixel", out=ref_out),
        "posembed": lambda: posembed.interpolate(table, n, align="half_pixel", out=out),
    }
    if torch is not None:
        src = torch.from_numpy(np.ascontiguousarray(table.T))[None]
        t_out = torch.empty((1, 1024, n))
        up = torch.ops.aten.upsample_linear1d.out
        impls["torch"] = lambda: up(src, [n], False, None, out=t_out)
    cases.append(
        Case(
            "interpolate",
            "out= given",
            stretch,
            out_bytes,
            impls,
            "write warm",
            lambda: bool(
                np.array_equal(
                    posembed.interpolate(table, n, align="half_pixel", out=out),
                    reference.interpolate(table, n, align="half_pixel"),
                )
            ),
        )
    )
    npos = 8192 if quick else 32768
    pos = rng.uniform(0, rows - 1, npos)
    cases.append(
        Case(
            "interpolate",
            "lerp",
            f"{npos} positions, {rows}x1024 f32",
            npos * 1024 * 4,
            _lerp_impls(table, pos, torch),
            "write fresh",
            lambda: bool(np.array_equal(posembed.lerp(table, pos), reference.lerp(table, pos))),
        )
    )
    # Call overhead: a handful of positions in a small table.
    small = rng.standard_normal((128, 64), dtype=np.float32)
    few = np.array([1.5, 2.25, 7.0, 100.5])
    cases.append(
        Case(
            "interpolate",
            "lerp 4 positions",
            "4 positions, 128x64 f32",
            4 * 64 * 4,
            _lerp_impls(small, few, torch),
            None,
            lambda: bool(np.array_equal(posembed.lerp(small, few), reference.lerp(small, few))),
        )
    )
    return cases


def extend_cases(quick: bool = False) -> list[Case]:
    rows = 512 if quick else 2048
    table = np.random.default_rng(2).standard_normal((rows, 1024), dtype=np.float32)
    n = 4 * rows
    idx = np.arange(rows, n) % rows
    impls: dict[str, Callable[[], object]] = {
        "reference": lambda: reference.extend(table, n, init="tile"),
        "numpy": lambda: np.concatenate([table, table[idx]]),
        "posembed": lambda: posembed.extend(table, n, init="tile"),
    }
    torch = _torch()
    if torch is not None:
        tt, tidx = torch.from_numpy(table), torch.from_numpy(idx)
        impls["torch"] = lambda: torch.cat([tt, tt[tidx]])
    return [
        Case(
            "extend",
            "tile",
            f"{rows} -> {n} rows, d=1024 f32",
            n * 1024 * 4,
            impls,
            "write fresh",
            lambda: bool(
                np.array_equal(
                    posembed.extend(table, n, init="tile"), np.concatenate([table, table[idx]])
                )
            ),
        )
    ]


def resample_grid_cases(quick: bool = False) -> list[Case]:
    rng = np.random.default_rng(3)
    torch = _torch()
    d = 768
    table = rng.standard_normal((1 + 24 * 24, d), dtype=np.float32)

    def case(method: str) -> Case:
        def ours() -> np.ndarray:
            return posembed.resample_grid(table, (24, 24), (48, 48), prefix=1, method=method)

        def twin() -> np.ndarray:
            return reference.resample_grid(table, (24, 24), (48, 48), prefix=1, method=method)

        impls: dict[str, Callable[[], object]] = {"reference": twin, "posembed": ours}
        if torch is not None:
            tt = torch.from_numpy(table)

            def timm_style() -> object:  # what timm's resample_abs_pos_embed does
                grid = tt[1:].reshape(1, 24, 24, d).permute(0, 3, 1, 2)
                new = torch.nn.functional.interpolate(grid, size=(48, 48), mode=method)
                return torch.cat([tt[:1], new.permute(0, 2, 3, 1).reshape(-1, d)])

            impls["torch"] = timm_style
        return Case(
            "resample_grid",
            method,
            "24x24 -> 48x48, prefix 1, d=768 f32",
            (1 + 48 * 48) * d * 4,
            impls,
            "write fresh",
            lambda: bool(np.array_equal(ours(), twin())),
        )

    return [case("bicubic"), case("bilinear")]


def similarity_cases(quick: bool = False) -> list[Case]:
    rows = 1024 if quick else 2048
    table = np.random.default_rng(4).standard_normal((rows, 1024), dtype=np.float32)

    def numpy_cosine() -> object:
        x = table / np.linalg.norm(table, axis=1, keepdims=True)
        return x @ x.T

    impls: dict[str, Callable[[], object]] = {
        "reference": lambda: reference.similarity(table),
        "numpy": numpy_cosine,
        "posembed": lambda: posembed.similarity(table),
    }
    torch = _torch()
    if torch is not None:
        tt = torch.from_numpy(table)

        def torch_cosine() -> object:
            x = torch.nn.functional.normalize(tt, dim=1)
            return x @ x.T

        impls["torch"] = torch_cosine
    return [
        Case(
            "similarity",
            "all pairs",
            f"{rows} rows, d=1024 f32",
            rows * rows * 4,
            impls,
            None,
            lambda: bool(
                np.allclose(
                    posembed.similarity(table), reference.similarity(table), rtol=0, atol=1e-4
                )
            ),
        )
    ]


def windows_cases(quick: bool = False) -> list[Case]:
    rng = np.random.default_rng(5)
    size, step = 2048, 1536
    ntok = 5_000_000 if quick else 50_000_000
    tokens = rng.integers(0, 50_000, ntok).astype(np.uint32)
    stream_shape = f"{ntok // 1_000_000}M uint32 tokens, size 2048, step 1536, drop"
    count = (tokens.size - size) // step + 1

    def numpy_windows() -> np.ndarray:
        view = np.lib.stride_tricks.sliding_window_view(tokens, size)[::step]
        return np.ascontiguousarray(view)

    impls: dict[str, Callable[[], object]] = {
        "reference": lambda: reference.windows(tokens, size, step=step, tail="drop"),
        "numpy": numpy_windows,
        "posembed": lambda: posembed.windows(tokens, size, step=step, tail="drop"),
    }
    torch = _torch()
    if torch is not None:
        t_tokens = torch.from_numpy(tokens.view(np.int32))  # same bytes; no uint32 unfold
        impls["torch"] = lambda: t_tokens.unfold(0, size, step).contiguous()
    cases = [
        Case(
            "windows",
            "fresh output",
            stream_shape,
            count * size * 4,
            impls,
            "copy fresh",
            lambda: bool(
                np.array_equal(
                    posembed.windows(tokens, size, step=step, tail="drop").tokens, numpy_windows()
                )
            ),
        )
    ]
    # The same into a reused buffer (a preprocessing loop's batches): NumPy's
    # best is copyto into a written buffer, the roofline a warm copy.
    buffers = {k: np.empty((count, size), np.uint32) for k in ("reference", "numpy", "posembed")}
    for b in buffers.values():
        b.fill(1)
    impls = {
        "reference": lambda: reference.windows(
            tokens, size, step=step, tail="drop", out=buffers["reference"]
        ),
        "numpy": lambda: np.copyto(
            buffers["numpy"], np.lib.stride_tricks.sliding_window_view(tokens, size)[::step]
        ),
        "posembed": lambda: posembed.windows(
            tokens, size, step=step, tail="drop", out=buffers["posembed"]
        ),
    }
    if torch is not None:
        buffers["torch"] = np.ones((count, size), np.uint32)
        t_out = torch.from_numpy(buffers["torch"].view(np.int32))
        impls["torch"] = lambda: t_out.copy_(t_tokens.unfold(0, size, step))
    cases.append(
        Case(
            "windows",
            "out= given",
            stream_shape,
            count * size * 4,
            impls,
            "copy warm",
            lambda: bool(
                np.array_equal(
                    posembed.windows(
                        tokens, size, step=step, tail="drop", out=buffers["posembed"]
                    ).tokens,
                    numpy_windows(),
                )
            ),
        )
    )
    ndocs = 5_000 if quick else 100_000
    lengths = rng.integers(1, 4001, ndocs)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    corpus = rng.integers(0, 50_000, offsets[-1]).astype(np.uint32)

    def per_document() -> np.ndarray:  # a Python loop calling NumPy per document
        parts = [
            np.lib.stride_tricks.sliding_window_view(corpus[a:b], size)[::step]
            for a, b in itertools.pairwise(offsets)
            if b - a >= size
        ]
        return np.concatenate(parts) if parts else np.empty((0, size), corpus.dtype)

    out_rows = int(sum((n - size) // step + 1 for n in lengths if n >= size))
    impls = {
        "reference": lambda: reference.windows(
            corpus, size, step=step, tail="drop", offsets=offsets
        ),
        "numpy": per_document,
        "posembed": lambda: posembed.windows(corpus, size, step=step, tail="drop", offsets=offsets),
    }
    if torch is not None:
        t_corpus = torch.from_numpy(corpus.view(np.int32))

        def torch_per_document() -> object:  # the same loop with Tensor.unfold
            parts = [
                t_corpus[a:b].unfold(0, size, step)
                for a, b in itertools.pairwise(offsets.tolist())
                if b - a >= size
            ]
            return torch.cat(parts)

        impls["torch"] = torch_per_document
    cases.append(
        Case(
            "windows",
            "CSR documents",
            f"{ndocs // 1000}k documents of 1..4000 tokens, size 2048, step 1536, drop",
            out_rows * size * 4,
            impls,
            "copy fresh",
            lambda: bool(
                np.array_equal(
                    posembed.windows(corpus, size, step=step, tail="drop", offsets=offsets).tokens,
                    per_document(),
                )
            ),
        )
    )

    # Per-window model outputs back to tokens: the mean over overlapping windows.
    stream = rng.integers(0, 50_000, 50_000 if quick else 200_000).astype(np.uint32)
    win = posembed.windows(stream, size, step=step)
    twin = reference.windows(stream, size, step=step)
    values = rng.standard_normal((len(win), size), dtype=np.float32)
    slots = (win.starts[:, None] + np.arange(size))[win.mask]

    def bincount_mean() -> np.ndarray:
        sums = np.bincount(slots, weights=values[win.mask], minlength=stream.size)
        return (sums / np.bincount(slots, minlength=stream.size)).astype(np.float32)

    impls = {
        "reference": lambda: reference.stitch(values, twin, reduce="mean"),
        "numpy": bincount_mean,
        "posembed": lambda: posembed.stitch(values, win, reduce="mean"),
    }
    if torch is not None:
        t_slots = torch.from_numpy(slots)
        t_vals = torch.from_numpy(values[win.mask])

        def torch_mean() -> object:  # index_add_ sums, bincount counts
            sums = torch.zeros(stream.size).index_add_(0, t_slots, t_vals)
            return sums / torch.bincount(t_slots, minlength=stream.size)

        impls["torch"] = torch_mean
    cases.append(
        Case(
            "windows",
            "stitch mean",
            f"{stream.size // 1000}k tokens, size 2048, step 1536, f32",
            stream.size * 4,
            impls,
            None,
            lambda: bool(
                np.allclose(
                    posembed.stitch(values, win, reduce="mean"),
                    bincount_mean(),
                    rtol=1e-5,
                    atol=1e-6,
                )
            ),
        )
    )
    return cases


def chunk_cases(quick: bool = False) -> list[Case]:
    from posembed._chunk import chunk_file

    # A nanoGPT-style raw uint16 token file cut into blocks of 1024 (a whole
    # number of them, so every tail mode gives the same windows as NumPy's).
    size, count = 1024, 1 << (13 if quick else 17)
    work = _scratch_dir()
    src = work / "train.bin"
    rng = np.random.default_rng(9)
    rng.integers(0, 50_257, count * size, dtype=np.uint16).tofile(src)
    out_bytes = count * size * 2 + 3 * count * 8

    def target(impl: str) -> Path:
        out = work / impl
        shutil.rmtree(out, ignore_errors=True)
        return out

    def ours() -> object:
        threads = posembed.get_num_threads()
        posembed.set_num_threads(1)  # as the command runs it
        try:
            return chunk_file(src, target("posembed"), size=size, dtype="uint16", quiet=True)
        finally:
            posembed.set_num_threads(threads)

    def save_all(impl: str, **arrays: np.ndarray) -> None:
        out = target(impl)
        out.mkdir()
        for name, array in arrays.items():
            np.save(out / f"{name}.npy", array)

    def numpy_way() -> None:  # load it all, cut with sliding_window_view, save
        tokens = np.fromfile(src, np.uint16)
        rows = np.ascontiguousarray(np.lib.stride_tricks.sliding_window_view(tokens, size)[::size])
        n = len(rows)
        save_all(
            "numpy",
            windows=rows,
            starts=np.arange(n, dtype=np.int64) * size,
            lengths=np.full(n, size, np.int64),
            documents=np.zeros(n, np.int64),
        )

    def reference_way() -> None:
        w = reference.windows(np.fromfile(src, np.uint16), size)
        save_all(
            "reference",
            windows=w.tokens,
            starts=w.starts,
            lengths=w.lengths,
            documents=w.documents,
        )

    def check() -> bool:
        ours()
        want = posembed.windows(np.fromfile(src, np.uint16), size)
        got = np.load(work / "posembed" / "windows.npy", mmap_mode="r")
        starts = np.load(work / "posembed" / "starts.npy")
        return bool(np.array_equal(got, want.tokens) and np.array_equal(starts, want.starts))

    impls: dict[str, Callable[[], object]] = {
        "reference": reference_way,
        "numpy": numpy_way,
        "posembed": ours,
    }
    return [
        Case(
            "chunk",
            "token file",
            f"{count * size * 2 >> 20} MB raw uint16 file, size 1024, on disk",
            out_bytes,
            impls,
            "file write",
            check,
            in_bytes=count * size * 2,
        )
    ]


def embed_cases(quick: bool = False) -> list[Case]:
    # GPT-2 small: vocabulary 50257, d 768, batches of 8 x 1024 tokens.
    rng = np.random.default_rng(11)
    vocab, length, d, b, t, p = 50_257, 1024, 768, 1 if quick else 8, 1024, 0.1
    tok = (rng.standard_normal((vocab, d), dtype=np.float32) * 0.02).astype(np.float32)
    pos = (rng.standard_normal((length, d), dtype=np.float32) * 0.02).astype(np.float32)
    ids = rng.integers(0, vocab, (b, t))
    torch = _torch()
    if torch is not None:
        tt, pt, it = torch.from_numpy(tok), torch.from_numpy(pos), torch.from_numpy(ids)
        functional = torch.nn.functional
    cases = []
    for rate, name in ((p, "dropout 0.1"), (0.0, "no dropout")):

        def numpy_way(rate: float = rate) -> np.ndarray:  # gather, add, mask, scale
            x = tok[ids]
            x += pos[:t]
            if rate:
                x *= rng.random(x.shape, dtype=np.float32) >= rate
                x *= np.float32(1 / (1 - rate))
            return x

        impls: dict[str, Callable[[], object]] = {
            "reference": partial(reference.embed, tok, ids, pos, dropout=rate, seed=1),
            "numpy": numpy_way,
            "posembed": partial(posembed.embed, tok, ids, pos, dropout=rate, seed=1),
        }
        if torch is not None:

            def torch_way(rate: float = rate) -> object:  # F.embedding + add + F.dropout
                with torch.no_grad():
                    x = functional.embedding(it, tt) + pt[:t]
                    return functional.dropout(x, rate, training=True) if rate else x

            impls["torch"] = torch_way

        def check(rate: float = rate) -> bool:
            got = posembed.embed(tok, ids, pos, dropout=rate, seed=1)
            return bool(np.array_equal(got, reference.embed(tok, ids, pos, dropout=rate, seed=1)))

        cases.append(
            Case(
                "embed",
                name,
                f"B{b} T{t} d{d}, vocab {vocab}, f32",
                b * t * d * 4,
                impls,
                "copy fresh",
                check,
            )
        )
    # Call overhead: four tokens at positions 0..3.
    few = np.array([3, 99, 500, 7])
    impls = {
        "reference": partial(reference.embed, tok, few, pos),
        "numpy": lambda: tok[few] + pos[:4],
        "posembed": partial(posembed.embed, tok, few, pos),
    }
    if torch is not None:
        t_few = torch.from_numpy(few)

        def torch_few() -> object:
            with torch.no_grad():
                return functional.embedding(t_few, tt) + pt[:4]

        impls["torch"] = torch_few
    cases.append(
        Case(
            "embed",
            "4 tokens",
            f"4 ids, d{d}, f32",
            4 * d * 4,
            impls,
            None,
            lambda: bool(np.array_equal(posembed.embed(tok, few, pos), tok[few] + pos[:4])),
        )
    )
    return cases


def gather_backward_cases(quick: bool = False) -> list[Case]:
    rng = np.random.default_rng(12)
    vocab, length, d, b, t = 50_257, 1024, 768, 1 if quick else 8, 1024
    grad = rng.standard_normal((b, t, d), dtype=np.float32)
    torch = _torch()
    cases = []
    for name, rows, where in (
        ("positions", length, np.broadcast_to(np.arange(t), (b, t)).copy()),
        ("token ids", vocab, rng.integers(0, vocab, (b, t))),
    ):

        def add_at(rows: int = rows, where: np.ndarray = where) -> np.ndarray:
            acc = np.zeros((rows, d), np.float32)
            np.add.at(acc, where, grad)
            return acc

        impls: dict[str, Callable[[], object]] = {
            "reference": partial(reference.gather_backward, grad, where, rows),
            "numpy": add_at,
            "posembed": partial(posembed.gather_backward, grad, where, rows),
        }
        if torch is not None:
            g2 = torch.from_numpy(grad.reshape(-1, d))
            w1 = torch.from_numpy(where.reshape(-1))

            def torch_way(rows: int = rows, g2: Any = g2, w1: Any = w1) -> object:
                return torch.zeros((rows, d)).index_add_(0, w1, g2)  # embedding's backward

            impls["torch"] = torch_way

        def check(rows: int = rows, where: np.ndarray = where) -> bool:
            return bool(
                np.array_equal(posembed.gather_backward(grad, where, rows), add_at(rows, where))
            )

        cases.append(
            Case(
                "gather_backward",
                name,
                f"grad {b}x{t}x{d} f32 -> {rows} rows",
                rows * d * 4,
                impls,
                None,
                check,
            )
        )
    # Call overhead: four gradient rows into a 128-row table.
    small = rng.standard_normal((4, 64), dtype=np.float32)
    at = np.array([1, 5, 5, 100])

    def add_at_small() -> np.ndarray:
        acc = np.zeros((128, 64), np.float32)
        np.add.at(acc, at, small)
        return acc

    impls = {
        "reference": partial(reference.gather_backward, small, at, 128),
        "numpy": add_at_small,
        "posembed": partial(posembed.gather_backward, small, at, 128),
    }
    if torch is not None:
        t_small, t_at = torch.from_numpy(small), torch.from_numpy(at)
        impls["torch"] = lambda: torch.zeros((128, 64)).index_add_(0, t_at, t_small)
    cases.append(
        Case(
            "gather_backward",
            "4 rows",
            "grad 4x64 f32 -> 128 rows",
            128 * 64 * 4,
            impls,
            None,
            lambda: bool(np.array_equal(posembed.gather_backward(small, at, 128), add_at_small())),
        )
    )
    return cases


def resize_cases(quick: bool = False) -> list[Case]:
    from posembed._checkpoint import resize_checkpoint

    # A RoBERTa-base-like checkpoint: a (514, 768) float32 position table among
    # other tensors (256 MB in all, 16 MB quick). The work is the copy of
    # everything else; the roofline is the same file copied by the OS.
    work = _scratch_dir()
    src = work / "model.safetensors"
    key = "embeddings.position_embeddings.weight"
    rng = np.random.default_rng(11)
    table = (0.02 * rng.standard_normal((514, 768))).astype(np.float32)
    layers = 2 if quick else 40
    tensors: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": rng.standard_normal((1000, 768))
    }
    tensors[key] = table
    for i in range(layers):
        tensors[f"encoder.layer.{i}.weight"] = np.full((768, 2048), i, np.float32)
    _write_safetensors(src, tensors)
    nbytes = src.stat().st_size

    def ours() -> object:  # a new output, as the roofline's copy (replacing one costs more)
        (work / "posembed.safetensors").unlink(missing_ok=True)
        return resize_checkpoint(
            src, work / "posembed.safetensors", key, 1024, prefix=2, overwrite=True
        )

    def reference_way() -> object:  # the twin: the whole file in memory
        (work / "reference.safetensors").unlink(missing_ok=True)
        return reference.resize_checkpoint(src, work / "reference.safetensors", key, 1024, prefix=2)

    impls: dict[str, Callable[[], object]] = {"reference": reference_way, "posembed": ours}
    try:
        from safetensors.numpy import load_file, save_file
    except ImportError:  # not a dependency: the column is left empty without it
        pass
    else:

        def safetensors_way() -> None:  # what users write: load it all, replace, save
            state = load_file(src)
            pos = state[key]
            state[key] = np.concatenate([pos[:2], _numpy_interpolate(pos[2:], 1024)])
            (work / "numpy.safetensors").unlink(missing_ok=True)
            save_file(state, work / "numpy.safetensors")

        impls["numpy"] = safetensors_way

    def check() -> bool:
        import json

        ours()
        out = work / "posembed.safetensors"
        with open(out, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            entry = json.loads(f.read(n))[key]
            begin, end = entry["data_offsets"]
            f.seek(8 + n + begin)
            got = np.frombuffer(f.read(end - begin), "<f4").reshape(entry["shape"])
        want = np.concatenate([table[:2], posembed.interpolate(table[2:], 1024)])
        grown = out.stat().st_size - 8 - n == nbytes - 8 - _header_len(src) + 512 * 768 * 4
        return bool(np.array_equal(got, want)) and grown

    return [
        Case(
            "resize",
            "checkpoint",
            f"{nbytes >> 20} MB safetensors, (514, 768) float32 table to 2 + 1024 rows",
            nbytes,
            impls,
            "file copy",
            check,
            in_bytes=nbytes,
            source=src,
        )
    ]


def _header_len(path: Path) -> int:
    with open(path, "rb") as f:
        return int.from_bytes(f.read(8), "little")


def _write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """A minimal safetensors writer for the benchmark's input (float32 and float64)."""
    import json

    names = {"float32": "F32", "float64": "F64"}
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    at = 0
    for name, a in tensors.items():
        header[name] = {
            "dtype": names[a.dtype.name],
            "shape": list(a.shape),
            "data_offsets": [at, at + a.nbytes],
        }
        at += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for a in tensors.values():
            f.write(np.ascontiguousarray(a, a.dtype.newbyteorder("<")).tobytes())


BUILDERS: dict[str, Callable[[bool], list[Case]]] = {
    "gather": gather_cases,
    "interpolate": interpolate_cases,
    "extend": extend_cases,
    "resample_grid": resample_grid_cases,
    "similarity": similarity_cases,
    "windows": windows_cases,
    "chunk": chunk_cases,
    "embed": embed_cases,
    "gather_backward": gather_backward_cases,
    "resize": resize_cases,
}


# ---------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """A speed target of the issues, read off one run's results."""

    issue: int
    kernel: str
    case: str
    measure: str  # "reference", "numpy", "torch" (speed-up), "roofline" (fraction), "input GB/s"
    minimum: float
    what: str


TARGETS = (
    Target(2, "gather", "out= given", "roofline", 0.9, "out= at >= 0.9x the warm write roofline"),
    Target(2, "gather", "out= given", "numpy", 5.0, "out= >= 5x numpy.take"),
    Target(2, "gather", "out= given", "torch", 1.25, "out= >= 1.25x torch.index_select(out=)"),
    Target(2, "gather", "fresh output", "numpy", 1.5, "fresh >= 1.5x table[positions]"),
    Target(2, "gather", "one row", "numpy", 0.5, "one row costs <= 2x numpy.take"),
    Target(3, "interpolate", "fresh output", "torch", 15.0, ">= 15x F.interpolate"),
    Target(3, "interpolate", "fresh output", "roofline", 0.8, ">= 0.8x the fresh write roofline"),
    Target(3, "resample_grid", "bicubic", "torch", 5.0, ">= 5x PyTorch bicubic"),
    Target(4, "windows", "fresh output", "numpy", 2.0, ">= 2x sliding_window_view + copy"),
    Target(4, "windows", "fresh output", "roofline", 0.8, ">= 0.8x the fresh copy roofline"),
    Target(4, "windows", "CSR documents", "numpy", 20.0, ">= 20x a Python loop over documents"),
    Target(4, "chunk", "token file", "input GB/s", 1.0, ">= 1 GB/s of input tokens"),
    Target(5, "embed", "dropout 0.1", "reference", 3.0, ">= 3x the NumPy reference"),
    Target(5, "embed", "dropout 0.1", "torch", 2.0, ">= 2x PyTorch eager"),
    Target(5, "embed", "dropout 0.1", "roofline", 0.6, ">= 0.6x the fresh copy roofline"),
    Target(5, "gather_backward", "positions", "numpy", 5.0, ">= 5x numpy.add.at"),
    Target(5, "gather_backward", "token ids", "numpy", 5.0, ">= 5x numpy.add.at"),
    Target(6, "interpolate", "lerp 4 positions", "numpy", 0.5, "a handful costs <= 2x NumPy"),
    Target(6, "embed", "4 tokens", "numpy", 0.5, "a handful costs <= 2x NumPy"),
    Target(6, "gather_backward", "4 rows", "numpy", 0.5, "a handful costs <= 2x numpy.add.at"),
)


def target_value(target: Target, results: list[Result]) -> float | None:
    """The measured value a target is judged on, or None if the run lacks it."""
    for r in results:
        if r.kernel == target.kernel and r.name == target.case:
            if target.measure == "roofline":
                return r.roofline_fraction()
            if target.measure == "input GB/s":
                return r.input_gbps()
            return r.speedup(target.measure)
    return None


def judge_targets(
    results: list[Result], scaling: list[ScalingResult] | None = None
) -> list[dict[str, Any]]:
    """Every speed target this run measured: its value and whether it was met."""
    judged = []
    for t in TARGETS:
        value = target_value(t, results)
        if value is not None:
            unit = " GB/s" if t.measure == "input GB/s" else "x"
            judged.append(
                {
                    "issue": t.issue,
                    "kernel": t.kernel,
                    "case": t.case,
                    "measure": t.measure,
                    "minimum": t.minimum,
                    "value": value,
                    "met": value >= t.minimum,
                    "text": f"{value:.2f}{unit} ({t.what})",
                }
            )
    for sr, counts, value, minimum in scaling_targets(scaling or []):
        judged.append(
            {
                "issue": 6,
                "kernel": sr.kernel,
                "case": f"{sr.problem} ({sr.size})",
                "measure": f"speed-up {counts[1]}/{counts[0]} threads",
                "minimum": minimum,
                "value": value,
                "met": value >= minimum,
                "text": f"{value:.2f}x from {counts[0]} to {counts[1]} threads (>= {minimum}x)",
            }
        )
    return judged


def format_targets(results: list[Result], scaling: list[ScalingResult] | None = None) -> str:
    """One line per speed target found in this run: met or missed, with the value."""
    judged = judge_targets(results, scaling)
    if not judged:
        return ""
    met = sum(j["met"] for j in judged)
    lines = [f"speed targets: {met} of {len(judged)} met in this run"]
    for j in judged:
        state = "met   " if j["met"] else "MISSED"
        lines.append(f"  {state}  issue {j['issue']}  {j['kernel']}: {j['case']}: {j['text']}")
    return "\n".join(lines)


# ---------------------------------------------------------------- thread scaling


@dataclass
class ScalingCase:
    """posembed alone on one problem, timed at several thread counts."""

    kernel: str
    problem: str
    size: str  # "in cache" (fits the last-level cache) or "in memory"
    nbytes: int  # bytes the call writes
    fn: Callable[[], object]


@dataclass
class ScalingResult:
    kernel: str
    problem: str
    size: str
    nbytes: int
    seconds: dict[int, float] = field(default_factory=dict)  # median per count
    # median over rounds of (time on the first count / time on this count),
    # each round timing every count back to back
    speedups: dict[int, float] = field(default_factory=dict)

    def speedup(self, threads: int) -> float | None:
        return self.speedups.get(threads)


# (kernel, problem): these must scale by SCALING_MINIMUM from the first to the
# second thread count at their in-memory size (issue 6); every kernel must at
# its in-cache size.
SCALING_MINIMUM = 1.7
SCALING_REQUIRED = {("resample_grid", "bicubic"), ("embed", "dropout 0.1")}


def scaling_targets(
    results: list[ScalingResult],
) -> list[tuple[ScalingResult, tuple[int, int], float, float]]:
    found = []
    for r in results:
        counts = sorted(r.seconds)
        if len(counts) < 2:
            continue
        in_cache = r.size == "in cache" and r.kernel != "roofline"
        wanted = in_cache or (r.kernel, r.problem) in SCALING_REQUIRED
        value = r.speedup(counts[1])
        if wanted and value is not None:
            found.append((r, (counts[0], counts[1]), value, SCALING_MINIMUM))
    return found


# The scaling problems of each kernel, as "problem (size)", in the order its
# builder makes them; bench/bench_threads.py parametrizes over these.
SCALING_NAMES = {
    "roofline": (
        "ALU loop, no memory (in cache)",
        "copy warm (in cache)",
        "copy warm (in memory)",
    ),
    "gather": ("out= given (in cache)", "out= given (in memory)"),
    "interpolate": (
        "out= given (in cache)",
        "lerp, out= (in cache)",
        "out= given (in memory)",
        "lerp, out= (in memory)",
    ),
    "resample_grid": (
        "bicubic (in cache)",
        "bilinear (in cache)",
        "bicubic (in memory)",
        "bilinear (in memory)",
    ),
    "windows": (
        "out= given (in cache)",
        "out= given (in memory)",
        "stitch mean (in cache)",
        "stitch mean (in memory)",
    ),
    "embed": (
        "dropout 0.1 (in cache)",
        "dropout 0.1 (in memory)",
        "dropout_mask (in cache)",
        "dropout_mask (in memory)",
    ),
    "gather_backward": ("positions, out= (in cache)", "token ids (in memory)"),
}

F32 = np.float32


def _scaling_roofline(big: int) -> list[ScalingCase]:
    # The same-run ceilings: an integer loop with no memory traffic (no kernel
    # can scale better than it), and a warm copy in cache and in memory.
    spin = partial(_core._probes.roofline_spin, 4_000_000 // big)
    cases = [ScalingCase("roofline", "ALU loop, no memory", "in cache", 0, spin)]
    for size, mb in (("in cache", 4), ("in memory", 64 // big)):
        src = np.full(mb << 20, 0x3C, np.uint8)
        dst = np.full(mb << 20, FILL_BYTE, np.uint8)
        copy = partial(_core._probes.roofline_copy, dst, src)
        cases.append(ScalingCase("roofline", "copy warm", size, dst.nbytes, copy))
    return cases


def _scaling_gather(big: int) -> list[ScalingCase]:
    rng = np.random.default_rng(21)
    cases = []
    for size, (b, rows) in (("in cache", (1, 512)), ("in memory", (32 // big, 2048))):
        table = rng.standard_normal((rows, 1024), dtype=F32)
        pos = rng.integers(0, rows, (b, 1024))
        out = np.empty((b, 1024, 1024), F32)
        fn = partial(posembed.gather, table, pos, out=out)
        cases.append(ScalingCase("gather", "out= given", size, out.nbytes, fn))
    return cases


def _scaling_interpolate(big: int) -> list[ScalingCase]:
    rng = np.random.default_rng(22)
    cases = []
    for size, rows in (("in cache", 256), ("in memory", 2048 // big)):
        table = rng.standard_normal((rows, 1024), dtype=F32)
        out = np.empty((4 * rows, 1024), F32)
        stretch = partial(posembed.interpolate, table, 4 * rows, out=out)
        x = rng.uniform(0, rows - 1, 4 * rows)
        cases.append(ScalingCase("interpolate", "out= given", size, out.nbytes, stretch))
        lerp = partial(posembed.lerp, table, x, out=out)
        cases.append(ScalingCase("interpolate", "lerp, out=", size, out.nbytes, lerp))
    return cases


def _scaling_resample_grid(big: int) -> list[ScalingCase]:
    # 16x16 -> 32x32, and the main benchmark's 24x24 -> 48x48 (d 768)
    rng = np.random.default_rng(23)
    cases = []
    for size, g in (("in cache", 16), ("in memory", 24)):
        grid = rng.standard_normal((1 + g * g, 768), dtype=F32)
        for method in ("bicubic", "bilinear"):
            fn = partial(
                posembed.resample_grid, grid, (g, g), (2 * g, 2 * g), prefix=1, method=method
            )
            nbytes = (1 + 4 * g * g) * 768 * 4
            cases.append(ScalingCase("resample_grid", method, size, nbytes, fn))
    return cases


def _scaling_windows(big: int) -> list[ScalingCase]:
    rng = np.random.default_rng(24)
    cases = []
    for size, ntok in (("in cache", 1_000_000), ("in memory", 50_000_000 // (4 * big))):
        tokens = rng.integers(0, 50_000, ntok).astype(np.uint32)
        out = np.empty_like(posembed.windows(tokens, 2048, step=1536, tail="drop").tokens)
        cut = partial(posembed.windows, tokens, 2048, step=1536, tail="drop", out=out)
        cases.append(ScalingCase("windows", "out= given", size, out.nbytes, cut))
    for size, ntok in (("in cache", 500_000), ("in memory", 5_000_000 // big)):
        stream = rng.integers(0, 50_000, ntok).astype(np.uint32)
        win = posembed.windows(stream, 2048, step=1536)
        values = rng.standard_normal((len(win), 2048), dtype=F32)
        fn = partial(posembed.stitch, values, win)
        cases.append(ScalingCase("windows", "stitch mean", size, ntok * 4, fn))
    return cases


def _scaling_embed(big: int) -> list[ScalingCase]:
    # B1 T1024 into out= (the same token rows each call, so they stay
    # cached), and the main benchmark's B8 T1024 (fresh output)
    rng = np.random.default_rng(25)
    vocab, d = 50_257, 768
    tok = rng.standard_normal((vocab, d), dtype=F32)
    ptab = rng.standard_normal((1024, d), dtype=F32)
    ids = rng.integers(0, vocab, (1, 1024))
    out = np.empty((1, 1024, d), F32)
    fn = partial(posembed.embed, tok, ids, ptab, dropout=0.1, seed=1, out=out)
    cases = [ScalingCase("embed", "dropout 0.1", "in cache", out.nbytes, fn)]
    ids = rng.integers(0, vocab, (8 // big, 1024))
    fn = partial(posembed.embed, tok, ids, ptab, dropout=0.1, seed=1)
    cases.append(ScalingCase("embed", "dropout 0.1", "in memory", ids.size * d * 4, fn))
    for size, n in (("in cache", 1 << 22), ("in memory", (1 << 26) // big)):
        fn = partial(posembed.dropout_mask, n, 0.1, 1)
        cases.append(ScalingCase("embed", "dropout_mask", size, n, fn))
    return cases


def _scaling_gather_backward(big: int) -> list[ScalingCase]:
    # positions (B1) into out=, and token ids (B8)
    rng = np.random.default_rng(26)
    vocab, d = 50_257, 768
    grad = rng.standard_normal((1, 1024, d), dtype=F32)
    out = np.empty((1024, d), F32)
    fn = partial(posembed.gather_backward, grad, np.arange(1024)[None], 1024, out=out)
    cases = [ScalingCase("gather_backward", "positions, out=", "in cache", out.nbytes, fn)]
    grad = rng.standard_normal((8 // big, 1024, d), dtype=F32)
    ids = rng.integers(0, vocab, (8 // big, 1024))
    fn = partial(posembed.gather_backward, grad, ids, vocab)
    cases.append(ScalingCase("gather_backward", "token ids", "in memory", vocab * d * 4, fn))
    return cases


SCALING_BUILDERS: dict[str, Callable[[int], list[ScalingCase]]] = {
    "roofline": _scaling_roofline,
    "gather": _scaling_gather,
    "interpolate": _scaling_interpolate,
    "resample_grid": _scaling_resample_grid,
    "windows": _scaling_windows,
    "embed": _scaling_embed,
    "gather_backward": _scaling_gather_backward,
}


def scaling_cases(quick: bool = False, kernels: list[str] | None = None) -> list[ScalingCase]:
    """Every threaded kernel (or those in ``kernels``, plus the ceilings) on a
    problem that fits the last-level cache and on one that does not (the main
    benchmark's size), posembed only.

    The "in cache" problems write about 2-5 MB and read a few more: far
    inside a last-level cache of 16-32 MB, and long enough (0.1-1 ms) that
    waking the team is not what is measured. ``chunk`` is left out (its
    kernel runs on one thread beside its reader and writer), ``similarity``
    (NumPy's BLAS does its work) and ``extend`` (it runs the interpolate and
    gather kernels measured here).
    """
    big = 4 if quick else 1  # quick runs shrink the in-memory problems
    cases = []
    for kernel, build in SCALING_BUILDERS.items():
        if kernels is None or kernel == "roofline" or kernel in kernels:
            made = build(big)
            assert tuple(f"{c.problem} ({c.size})" for c in made) == SCALING_NAMES[kernel]
            cases += made
    return cases


def run_scaling(
    counts: list[int],
    repeat: int,
    quick: bool = False,
    progress: Callable[[str], None] | None = None,
    kernels: list[str] | None = None,
) -> list[ScalingResult]:
    """Each scaling case at each thread count. Every round times all counts
    back to back, so a speed-up compares times taken moments apart: on a
    shared machine the load moves between rounds, and a ratio of medians
    taken a while apart would measure that as much as the threads."""
    before = posembed.get_num_threads() if posembed.config()["num_threads_set"] else None
    results = []
    try:
        for case in scaling_cases(quick, kernels):
            if progress is not None:
                progress(f"threads {counts}: {case.kernel}: {case.problem} ({case.size})")
            timers = {}
            for n in counts:
                posembed.set_num_threads(n)
                timers[n], _ = _timer(case.fn)
            rounds: dict[int, list[float]] = {n: [] for n in counts}
            for _ in range(repeat):
                for n in counts:
                    posembed.set_num_threads(n)
                    rounds[n].append(timers[n]())
            r = ScalingResult(case.kernel, case.problem, case.size, case.nbytes)
            first = np.array(rounds[counts[0]])
            for n in counts:
                r.seconds[n] = float(np.median(rounds[n]))
                r.speedups[n] = float(np.median(first / np.array(rounds[n])))
            results.append(r)
    finally:
        posembed.set_num_threads(before)
    return results


def format_scaling(results: list[ScalingResult], markdown: bool = False) -> str:
    """Seconds at each thread count and the speed-up over the first count."""
    if not results:
        return ""
    counts = sorted(results[0].seconds)
    head = ["kernel", "problem", "size", "MB written"]
    head += [f"{n} thread{'s' if n > 1 else ''}" for n in counts]
    head += [f"speed-up {n}/{counts[0]}" for n in counts[1:]]
    rows = [head]
    for r in results:
        rows.append(
            [
                r.kernel,
                r.problem,
                r.size,
                f"{r.nbytes / 1e6:.1f}",
                *(_fmt_time(r.seconds.get(n)) for n in counts),
                *(_fmt_ratio(r.speedup(n)) for n in counts[1:]),
            ]
        )
    return _table(rows, markdown)


def cases_of(kernel: str, quick: bool = False) -> list[Case]:
    cases = BUILDERS[kernel](quick)
    assert tuple(c.name for c in cases) == CASE_NAMES[kernel]
    return cases


def all_cases(quick: bool = False) -> list[Case]:
    return [case for kernel in BUILDERS for case in cases_of(kernel, quick)]


def _timer(fn: Callable[[], object]) -> tuple[Callable[[], float], float]:
    """A timer of seconds per call of fn, batching calls that are too short to
    time alone, and the warm-up's seconds per call.
    The batch size comes from a warm-up of at least 5 ms (or 1000 calls), so
    that one cold first call cannot make microsecond calls look slow."""
    calls, t0 = 0, time.perf_counter()
    while calls < 1000 and (calls < 2 or time.perf_counter() - t0 < 5e-3):
        fn()
        calls += 1
    once = (time.perf_counter() - t0) / calls
    number = max(1, min(10_000, int(2e-3 / max(once, 1e-9))))

    def timed() -> float:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - start) / number

    return timed, once


# A baseline that takes seconds a call (a Python loop over 100k documents)
# gets this many timed calls at most, so the whole run stays in minutes.
SLOW_SECONDS, SLOW_REPEAT = 0.5, 3


# Thread pools (PyTorch's OpenMP, OpenBLAS, posembed's own) keep spinning for
# a while after a call; timing the next implementation on top of them would
# charge it for their spinning. Each implementation gets the cores to itself.
SETTLE_SECONDS = 0.05


def measure(case: Case, repeat: int) -> Result:
    """Median seconds per implementation, each timed in its own block after
    the other implementations' threads have gone quiet."""
    if case.check is not None and not case.check():
        raise AssertionError(f"{case.kernel} {case.name}: posembed disagrees with its twin")
    fns = dict(case.impls)
    if case.roofline:
        fns["roofline"] = roofline(case.roofline, case.out_bytes, case.source)
    seconds = {}
    gc_was_on = gc.isenabled()
    gc.disable()  # as timeit does: a collection would land on whichever call is running
    try:
        for k, fn in fns.items():
            timer, once = _timer(fn)
            reps = min(repeat, SLOW_REPEAT) if once > SLOW_SECONDS else repeat
            time.sleep(SETTLE_SECONDS)
            seconds[k] = float(np.median([timer() for _ in range(reps)]))
    finally:
        if gc_was_on:
            gc.enable()
    return Result(
        case.kernel, case.name, case.shape, case.out_bytes, case.roofline, seconds, case.in_bytes
    )


def run(
    quick: bool = False,
    repeat: int | None = None,
    progress: Callable[[str], None] | None = None,
    kernels: list[str] | None = None,
) -> list[Result]:
    reps = repeat if repeat is not None else (3 if quick else 15)
    results = []
    chosen = list(BUILDERS) if kernels is None else kernels
    for case in (c for k in chosen for c in cases_of(k, quick)):
        if progress is not None:
            progress(f"{case.kernel}: {case.name} ({case.shape})")
        results.append(measure(case, reps))
    return results


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    torch = _torch()
    return {
        "date": datetime.date.today().isoformat(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "threads": posembed.get_num_threads(),
        "simd": posembed.config()["simd"],
        "posembed": posembed.__version__,
        "numpy": np.__version__,
        "torch": None if torch is None else torch.__version__,
    }


def _fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    return f"{s * 1e3:.2f} ms"


def _fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}x"


def _table(rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(row) + " |" for row in rows]
        lines.insert(1, "|" + "---|" * len(rows[0]))
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_results(
    results: list[Result], info: dict[str, Any] | None = None, markdown: bool = False
) -> str:
    """A plain-text (or Markdown) table; speed-ups are other / posembed time (above 1 is
    faster)."""
    head = [
        "kernel",
        "case",
        "shape",
        *COLUMNS,
        "vs ref",
        "vs numpy",
        "vs torch",
        "GB/s",
        "roofline",
        "of roofline",
    ]
    rows = [head]
    for r in results:
        gbps = r.gbps()
        rows.append(
            [
                r.kernel,
                r.name,
                r.shape,
                *(_fmt_time(r.seconds.get(c)) for c in COLUMNS),
                _fmt_ratio(r.speedup("reference")),
                _fmt_ratio(r.speedup("numpy")),
                _fmt_ratio(r.speedup("torch")),
                "-" if gbps is None else f"{gbps:.1f}",
                r.roofline or "-",
                _fmt_ratio(r.roofline_fraction()),
            ]
        )
    if markdown:
        return _table(rows, markdown)
    lines = _table(rows, False).splitlines()
    if info:
        lines.insert(0, ", ".join(f"{k}: {v}" for k, v in info.items()))
        lines.insert(1, "")
    lines.append("")
    lines.append(
        "times are medians; 'vs X' = X time / posembed time; 'of roofline' = roofline "
        "time / posembed time"
    )
    return "\n".join(lines)


def to_dict(
    results: list[Result], info: dict[str, Any], scaling: list[ScalingResult] | None = None
) -> dict[str, Any]:
    """The raw figures (``--json``, and what ``--plot`` draws)."""
    return {
        "machine": info,
        "results": [
            {
                "kernel": r.kernel,
                "case": r.name,
                "shape": r.shape,
                "out_bytes": r.out_bytes,
                "in_bytes": r.in_bytes,
                "roofline": r.roofline,
                "seconds": r.seconds,
                "speedup": {c: r.speedup(c) for c in ("reference", "numpy", "torch")},
                "roofline_fraction": r.roofline_fraction(),
            }
            for r in results
        ],
        "scaling": [
            {
                "kernel": r.kernel,
                "problem": r.problem,
                "size": r.size,
                "bytes": r.nbytes,
                "seconds": {str(n): t for n, t in r.seconds.items()},
                "speedup": {str(n): v for n, v in r.speedups.items()},
            }
            for r in scaling or []
        ],
        "targets": judge_targets(results, scaling),
    }

"""The rooflines: how fast this machine moves the bytes a case moves.

*write*: a parallel memset of the kernel's output bytes with all threads;
*copy*: a parallel memcpy of that many bytes. Each is *warm* (the
destination was written before, as for an ``out=`` call) or *fresh* (the
destination is newly allocated each time, as for a kernel that returns a new
array, so page faults count). A warm one is done with whichever of ordinary
and streaming (non-temporal) stores is faster on this machine, timed against
each other when the case starts: streaming stores skip reading each
destination line first and can be twice as fast into memory written before.
A fresh one uses ordinary stores, as the kernels do into an array they
allocate: the system has just zeroed each new page. The fill byte
is non-zero on purpose: some machines write all-zero cache lines far faster
than data, which would make a zero-fill roofline no kernel could honestly
reach.

*file write* (the ``chunk`` command's roofline): the output's bytes written
from memory into a new file beside the command's output, 16 MiB a call,
the previous one deleted first as the command deletes its previous output.
*file copy* (``resize_checkpoint``'s roofline): the input file copied to a
new file with ``shutil.copyfile`` (in-kernel, with no resizing to do).

*parquet decode* (the roofline of ``posembed convert`` and ``posembed chunk``
on Parquet input): pyarrow reading and decoding the source file's list column
into one flat array on its own threads, the rate no pipeline that starts from
that file can pass.

*page cache read* (``gpt_batch``'s and ``batches``' roofline): the byte
ranges of the source file that the kernel reads (each sample's pieces of the
``.bin``), taken from the warm page cache on all threads into a buffer written
before, whichever way is faster here (positional reads, one per range, or
copies out of a mapping of the file kept across calls), then the kernel's
output bytes written as the *write warm* roofline writes them: the least any
implementation that reads those tokens and writes those outputs must do. The
kernel's outputs reuse the memory of a freed batch of the same shape (a block
of its output cache), so the roofline writes into a block of that size taken
from the same cache, once per batch the kernel makes: the very memory the
kernel writes. On a virtual machine two buffers of the same size can differ
twofold in write speed (how the host backs their pages), which a buffer of
the roofline's own would turn into noise in the ratio.

*compute* (for the kernels that compute): the case's float multiplies and
adds done by a loop of independent vector chains on every thread, at the SIMD
level the kernels use and, as they do, without fusing a multiply into an add
(a BLAS product's fused multiply-adds for ``similarity``); for dropout, the
random bits of its mask drawn as the kernels draw them (AES rounds at the
level in use) into a buffer that stays in cache. A case is judged against
whichever of its memory and compute rooflines takes longer.

*ALU loop*: an integer loop on every thread with no memory traffic, the
ceiling of thread scaling (no kernel can scale better than it).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from posembed import _core
from posembed.bench.scratch import scratch_dir

FILL_BYTE = 0x5A
FILE_BLOCK = 16 << 20


def _file_writer(nbytes: int) -> Callable[[], object]:
    folder = scratch_dir()
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
    dst = scratch_dir() / "roofline.bin"

    def copy() -> None:
        dst.unlink(missing_ok=True)
        shutil.copyfile(src, dst)

    return copy


def _parquet_decoder(src: Path) -> Callable[[], object]:
    import pyarrow.parquet as pq

    def decode() -> object:
        column = pq.read_table(src).column(0).combine_chunks()
        return column.flatten()

    return decode


def _page_cache_reader(
    src: Path, reads: np.ndarray, nbytes: int, block: int = 0
) -> Callable[[], object]:
    ranges = np.ascontiguousarray(reads, dtype=np.int64).reshape(-1, 2)
    buffer = np.empty(int(ranges[:, 1].sum()), np.uint8)
    _core._probes.roofline_fill(buffer, FILL_BYTE)
    fd = os.open(src, os.O_RDONLY)
    mapping = _core.FileMap(fd, os.fstat(fd).st_size)
    write = roofline("write warm", nbytes) if block <= 0 else _block_writer(nbytes, block)

    def pread() -> None:
        _core._probes.roofline_pread(fd, ranges, buffer)
        write()

    def copy() -> None:
        _core._probes.roofline_pread(fd, ranges, buffer, mapping=mapping)
        write()

    copy()  # the page cache warm, and the mapping's pages in place
    return _faster(pread, copy)


def _block_writer(nbytes: int, block: int) -> Callable[[], object]:
    """nbytes written into blocks of ``block`` bytes of the kernels' output
    cache, one block after another (as many as nbytes fill, at least one),
    with whichever of ordinary and streaming stores is faster here."""
    count = max(1, round(nbytes / block))

    def move(stream: bool) -> None:
        for _ in range(count):
            _core._probes.roofline_fill_block(block, FILL_BYTE, stream=stream)

    return _faster(partial(move, False), partial(move, True))


def roofline(
    kind: str,
    nbytes: int,
    source: Path | None = None,
    reads: np.ndarray | None = None,
    block: int = 0,
) -> Callable[[], object]:
    """The roofline callable for ``kind`` ("write warm", "copy fresh", "file write",
    "file copy" or "parquet decode" of ``source``, "page cache read" of ``reads`` of
    ``source``, ...) over nbytes; a page cache read writes into blocks of
    ``block`` bytes of the kernels' output cache where it is given."""
    if kind == "page cache read":
        if source is None or reads is None:
            raise ValueError("the page cache read roofline needs the source file and its reads")
        return _page_cache_reader(source, reads, nbytes, block)
    if kind == "file write":
        return _file_writer(nbytes)
    if kind == "parquet decode":
        if source is None:
            raise ValueError("the parquet decode roofline needs the source file")
        return _parquet_decoder(source)
    if kind == "file copy":
        if source is None:
            raise ValueError("the file copy roofline needs the source file")
        return _file_copier(source)
    op, state = kind.split()
    if state not in ("warm", "fresh") or op not in ("write", "copy"):
        raise ValueError(f"unknown roofline {kind!r}")
    src = np.full(nbytes, 0x3C, np.uint8) if op == "copy" else None
    warm = np.empty(nbytes, np.uint8) if state == "warm" else None
    if warm is not None:
        _core._probes.roofline_fill(warm, FILL_BYTE)

    def move(stream: bool) -> None:
        dst = warm if warm is not None else np.empty(nbytes, np.uint8)
        if src is None:
            _core._probes.roofline_fill(dst, FILL_BYTE, stream=stream)
        else:
            _core._probes.roofline_copy(dst, src, stream=stream)

    if warm is None:
        return partial(move, False)
    return _faster(partial(move, False), partial(move, True))


# Calls of each way of a memory roofline timed against each other, alternately.
CHOOSING_CALLS = 5


def _faster(first: Callable[[], object], second: Callable[[], object]) -> Callable[[], object]:
    """Whichever of two ways of moving the same bytes took less time (the
    median of CHOOSING_CALLS alternate calls each, after one call of each)."""
    first()
    second()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(CHOOSING_CALLS):
        for fn, spent in zip((first, second), times, strict=True):
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return first if np.median(times[0]) <= np.median(times[1]) else second


def compute(flops: int, fused: bool = False) -> Callable[[], object]:
    """The compute roofline callable: ``flops`` float operations (FMAs counted
    as two where ``fused``) on all threads, at the kernels' SIMD level."""
    steps = -(-flops // _core._probes.flops_per_step(fused))
    return partial(_core._probes.roofline_flops, steps, fused)


def random_words(n: int) -> Callable[[], object]:
    """Dropout's compute roofline callable: the random bits of ``n`` elements
    on all threads, drawn as the kernels draw them, with no memory traffic."""
    return partial(_core._probes.roofline_random_bits, n)


def alu_loop(iterations: int) -> Callable[[], object]:
    """The ALU loop: ``iterations`` integer steps on each thread, no memory."""
    return partial(_core._probes.roofline_spin, iterations)

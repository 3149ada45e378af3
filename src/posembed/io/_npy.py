"""Checked reading of ``.npy`` headers from files that may be crafted.

``numpy.load`` trusts the header: a shape of ``(2**62,)`` ends in
OverflowError, a negative dimension or an odd descr in whatever NumPy raises
there. :func:`read_header` parses the header itself (the format's fixed
layout, then a Python literal, as NumPy does, under NumPy's own size limit),
checks every field and the data's size against the file, and raises only
ValueError. :func:`load` then reads the checked data.
"""

from __future__ import annotations

import ast
import math
import os
import stat
from typing import Any, BinaryIO, Literal, NamedTuple

import numpy as np

MAGIC = b"\x93NUMPY"
# numpy.load's default limit on the header's Python literal.
MAX_HEADER_BYTES = 10_000
# Sizes the kernels index with int64, with room for the arithmetic on them.
MAX_DATA_BYTES = 2**62


class NpyHeader(NamedTuple):
    """A checked ``.npy`` header: the array's ``dtype``, ``shape`` and
    ``fortran_order``, where its data starts (``offset``) and its size."""

    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    fortran_order: bool
    offset: int
    nbytes: int


def _bad(what: str, problem: str) -> ValueError:
    return ValueError(f"{what}: not a valid .npy file: {problem}")


def read_header(f: BinaryIO, what: str, file_size: int) -> NpyHeader:
    """Read and check the header at the start of ``f``, a file of ``file_size`` bytes.

    Raises
    ------
    ValueError
        ``"<what>: not a valid .npy file: <problem>"``: no magic, an unknown
        version, a header past the file's end or over NumPy's limit, a
        header that is not the literal dict NumPy writes, a dtype that holds
        Python objects, a negative or non-integer dimension, data of 2^62
        bytes or more, or data the file is too short to hold.
    """
    f.seek(0)
    prefix = f.read(len(MAGIC) + 2)
    if len(prefix) < len(MAGIC) + 2 or not prefix.startswith(MAGIC):
        raise _bad(what, "it does not start with the .npy magic string")
    version = (prefix[-2], prefix[-1])
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise _bad(what, f"format version {version[0]}.{version[1]} is not 1.0, 2.0 or 3.0")
    width = 2 if version == (1, 0) else 4
    raw_length = f.read(width)
    if len(raw_length) < width:
        raise _bad(what, "the file ends inside the header length")
    length = int.from_bytes(raw_length, "little")
    offset = len(MAGIC) + 2 + width + length
    if offset > file_size:
        raise _bad(what, f"the header ({length} bytes) runs past the file's {file_size} bytes")
    if length > MAX_HEADER_BYTES:
        raise _bad(what, f"the header is {length} bytes; at most {MAX_HEADER_BYTES} are allowed")
    try:
        text = f.read(length).decode("utf-8" if version == (3, 0) else "latin1")
        fields = ast.literal_eval(text)
    except (UnicodeDecodeError, SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        raise _bad(what, "the header is not a Python literal") from None
    if not isinstance(fields, dict) or set(fields) != {"descr", "fortran_order", "shape"}:
        raise _bad(what, "the header must be a dict of 'descr', 'fortran_order' and 'shape'")
    shape, fortran_order = fields["shape"], fields["fortran_order"]
    if not isinstance(shape, tuple) or not all(
        type(n) is int and n >= 0 for n in shape
    ):  # bool is no dimension
        raise _bad(what, f"shape {shape!r} is not a tuple of non-negative integers")
    if type(fortran_order) is not bool:
        raise _bad(what, f"fortran_order {fortran_order!r} is not True or False")
    try:
        dtype = np.lib.format.descr_to_dtype(fields["descr"])
    except Exception:  # NumPy raises TypeError, ValueError, KeyError, ... for odd descrs
        raise _bad(what, f"descr {fields['descr']!r} is not a NumPy dtype") from None
    if dtype.hasobject:
        raise _bad(what, f"dtype {dtype} holds Python objects, which are never loaded")
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    if nbytes >= MAX_DATA_BYTES or count >= MAX_DATA_BYTES:
        raise _bad(what, f"shape {shape} of {dtype} is 2^62 bytes or more")
    if offset + nbytes > file_size:
        raise _bad(
            what,
            f"shape {shape} of {dtype} needs {nbytes} data bytes; the file has "
            f"{file_size - offset}",
        )
    return NpyHeader(dtype, shape, fortran_order, offset, nbytes)


def load(path: str | os.PathLike[str], what: str) -> np.ndarray:
    """The array in the ``.npy`` file ``path``, its header checked first.

    The file must be a regular file (a FIFO or device is refused, never
    waited on). It is read, never memory-mapped: a file that shrinks later
    cannot end the process with SIGBUS.

    Raises
    ------
    ValueError
        Not a regular file, a header :func:`read_header` refuses, or a file
        that shrank while it was read.
    OSError
        The file cannot be opened or read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        # checked before fdopen, which refuses a folder with an OSError naming the descriptor
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{what}: not a regular file")
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        return load_open(f, what)


def load_open(f: BinaryIO, what: str) -> np.ndarray:
    """As :func:`load`, for a file already open for reading in binary mode."""
    info = os.fstat(f.fileno())
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{what}: not a regular file")
    header = read_header(f, what, info.st_size)
    order: Literal["C", "F"] = "F" if header.fortran_order else "C"
    out: np.ndarray = np.empty(header.shape, header.dtype, order=order)
    view = out.reshape(-1, order="A").view(np.uint8).data if out.size else memoryview(b"")
    got = 0
    while got < header.nbytes:
        n = os.preadv(f.fileno(), [view[got:]], header.offset + got)
        if not n:
            raise ValueError(f"{what}: the file ended early (it changed while being read)")
        got += n
    return out

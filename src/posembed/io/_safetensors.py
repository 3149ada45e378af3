"""The safetensors file format, read and written without the safetensors package.

A file is an 8-byte little-endian header length N, N bytes of UTF-8 JSON, then
the data buffer, which each tensor's ``data_offsets`` index from its start. The
JSON maps tensor names to ``{"dtype", "shape", "data_offsets"}`` and may hold
``"__metadata__"``, a map of strings.

:func:`read_header` reads and checks a header once and returns a
:class:`Header`; :func:`read_tensor` reads one tensor of it as a NumPy array.
:func:`create` writes a file front to back through a :class:`Writer` (the
header first, then each tensor's bytes, written or copied in the kernel from
another file), at a temporary name renamed into place once complete.
:func:`write_file` and :func:`read_file` are the whole-file shortcuts for small
files.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO

import numpy as np

from posembed.io import _json
from posembed.io._outdir import kind_of, temp_name

# The safetensors reference loader refuses larger headers; so does this one,
# which also keeps a wrong length from reading gigabytes of a non-safetensors file.
MAX_HEADER_BYTES = 100_000_000

# Bytes moved per read and write when a range cannot be copied in the kernel:
# a copy's memory stays at about this much whatever the file's size.
COPY_BYTES = 8 << 20

PAGE = 4096

METADATA = "__metadata__"

# A tensor's size in bits (the product of its shape times its element's
# bits) must stay below 2^64, as the reference reader computes it in 64-bit
# integers; zero dimensions do not excuse the others here, so that the shape
# also fits NumPy's (int64) sizes.
MAX_TENSOR_BITS = 2**64

# Bits per element of the dtypes the format names: a tensor of any other
# dtype is refused, as the reference reader refuses it.
DTYPE_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "C64": 64,
}

# The dtypes a NumPy array holds, by safetensors name (BF16 through ml_dtypes).
_NUMPY_NAMES = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "U16": "uint16",
    "I16": "int16",
    "F16": "float16",
    "BF16": "bfloat16",
    "U32": "uint32",
    "I32": "int32",
    "F32": "float32",
    "U64": "uint64",
    "I64": "int64",
    "F64": "float64",
}


@dataclass(frozen=True)
class TensorSpec:
    """One tensor for :class:`Writer`: its bytes follow the previous tensor's."""

    name: str
    dtype: str  # the safetensors name, such as F32 or BF16
    shape: tuple[int, ...]
    nbytes: int
    # The header entry's JSON object to start from (TensorEntry.fields): a
    # rewritten entry keeps its key order and any keys besides the three.
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of a checked header: its bytes are [begin, end) of the data buffer."""

    name: str
    dtype: str  # the safetensors name; may be one this module does not know
    shape: tuple[int, ...]
    begin: int
    end: int
    fields: Mapping[str, Any]  # the entry's JSON object as read

    @property
    def nbytes(self) -> int:
        return self.end - self.begin

    def as_spec(
        self, *, shape: tuple[int, ...] | None = None, nbytes: int | None = None
    ) -> TensorSpec:
        """This tensor for :class:`Writer`, with a new shape and size where given."""
        return TensorSpec(
            self.name,
            self.dtype,
            self.shape if shape is None else shape,
            self.nbytes if nbytes is None else nbytes,
            self.fields,
        )


@dataclass(frozen=True)
class Header:
    """A safetensors header, checked: the tensors' bytes lie back to back and
    fill the data buffer, and each known dtype's size matches its shape."""

    path: Path  # the file read, for messages
    entries: dict[str, TensorEntry]  # in the header's order
    metadata: dict[str, str] | None  # None when the file has no __metadata__
    key_order: tuple[str, ...]  # the JSON object's keys in file order, __metadata__ included
    data_order: tuple[str, ...]  # tensor names by their place in the data buffer
    data_start: int  # file offset of the data buffer
    file_size: int

    @property
    def data_bytes(self) -> int:
        return self.file_size - self.data_start


# -- reading ---------------------------------------------------------------------------------


def open_file(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading in binary mode, refused unless it is a
    regular file: a FIFO or a device is never waited on, a folder never read.

    Raises ValueError ``"<path>: not a valid safetensors file: ..."`` for
    anything but a regular file, OSError when it cannot be opened.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        kind = os.fstat(fd).st_mode
        if not stat.S_ISREG(kind):
            raise _corrupt(Path(path), f"it is {_file_kind(kind)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


def read_header(f: BinaryIO, path: str | os.PathLike[str]) -> Header:
    """Read and check the header of the open file ``f``; ``path`` names it in errors.

    The checks are the reference reader's, or stricter: a header of strict
    JSON (no NaN or Infinity, no name twice, nested at most
    ``posembed.io._json.MAX_DEPTH`` deep, UTF-8 without lone surrogates), an
    object of tensor entries and an optional ``__metadata__`` map of strings;
    each entry a known dtype, a shape of at most 2^64 bits, and
    ``data_offsets`` that tile the data buffer exactly, in order.

    Raises ValueError ``"<path>: not a valid safetensors file: <problem>"``
    when the file is not one (or is no regular file).
    """
    path = Path(path)
    info = os.fstat(f.fileno())
    if not stat.S_ISREG(info.st_mode):  # a FIFO's read would wait for a writer
        raise _corrupt(path, f"it is {_file_kind(info.st_mode)}, not a regular file")
    size = info.st_size
    f.seek(0)
    head = f.read(8)
    if len(head) < 8:
        raise _corrupt(path, f"{size} bytes is too short for the 8-byte header length")
    n = int.from_bytes(head, "little")
    if n > size - 8:
        raise _corrupt(path, f"header length {n} exceeds the {size - 8} bytes after it")
    if n > MAX_HEADER_BYTES:
        raise _corrupt(path, f"header length {n} exceeds the format's {MAX_HEADER_BYTES}")
    text = f.read(n)
    if len(text) != n:
        raise _corrupt(path, f"the file ended inside the {n}-byte header (changed while reading?)")
    try:
        obj = _json.loads(text, "header")
    except ValueError as exc:
        raise _corrupt(path, str(exc)) from None
    if not isinstance(obj, dict):
        raise _corrupt(path, f"header must be a JSON object; got {type(obj).__name__}")
    unencodable = _lone_surrogate(obj)
    if unencodable is not None:
        # JSON's \ud800 escapes decode to no Unicode text; the reference reader refuses them
        raise _corrupt(path, f"header holds a lone UTF-16 surrogate in {unencodable!r}")
    metadata = obj.get(METADATA)
    if METADATA in obj and not _is_string_map(metadata):
        raise _corrupt(path, f"{METADATA} must map names to strings; got {metadata!r}")
    entries = {
        name: _check_entry(path, name, value) for name, value in obj.items() if name != METADATA
    }
    # by (begin, end): a zero-size tensor sorts before its neighbour
    in_data_order = sorted(entries.values(), key=lambda e: (e.begin, e.end, e.name))
    at = 0
    for entry in in_data_order:
        if entry.begin != at:
            gap = "overlaps the tensor before it" if entry.begin < at else f"leaves a gap at {at}"
            raise _corrupt(path, f"{entry.name!r} data_offsets [{entry.begin}, {entry.end}] {gap}")
        at = entry.end
    if at != size - 8 - n:
        raise _corrupt(
            path, f"the tensors end at data byte {at} but the data buffer has {size - 8 - n} bytes"
        )
    return Header(
        path,
        entries,
        metadata,
        tuple(obj),
        tuple(e.name for e in in_data_order),
        8 + n,
        size,
    )


def read_bytes(f: BinaryIO, header: Header, name: str) -> bytes:
    """The bytes of tensor ``name`` as stored (little-endian)."""
    entry = header.entries[name]
    f.seek(header.data_start + entry.begin)
    raw = f.read(entry.nbytes)
    if len(raw) != entry.nbytes:
        raise ValueError(f"{header.path}: the file ended inside {name!r} (changed while reading?)")
    return raw


def read_tensor(f: BinaryIO, header: Header, name: str) -> np.ndarray:
    """Tensor ``name`` as a NumPy array of its shape, in native byte order
    (read-only on a little-endian machine: a view of the bytes read).

    Raises TypeError for a dtype NumPy does not hold (such as F8_E4M3) and
    ImportError for BF16 without ``ml_dtypes``.
    """
    entry = header.entries[name]
    dtype = numpy_dtype(entry.dtype, name)
    return from_le(read_bytes(f, header, name), dtype).reshape(entry.shape)


def read_file(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Every tensor of a small file, by name in the header's order."""
    with open_file(path) as f:
        header = read_header(f, path)
        return {name: read_tensor(f, header, name) for name in header.entries}


def _corrupt(path: Path, problem: str) -> ValueError:
    return ValueError(f"{path}: not a valid safetensors file: {problem}")


def _is_count(x: Any) -> bool:
    return type(x) is int and x >= 0


def _is_string_map(x: Any) -> bool:
    return isinstance(x, dict) and all(isinstance(v, str) for v in x.values())


def _lone_surrogate(x: Any) -> str | None:
    """A string of ``x`` (a parsed header, keys included) that UTF-8 cannot
    encode, or None."""
    pending = [x]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return item
    return None


_ENTRY_KEYS = ("dtype", "shape", "data_offsets")


def _check_entry(path: Path, name: str, entry: Any) -> TensorEntry:
    if not isinstance(entry, dict):
        raise _corrupt(path, f"{name!r} must be an object; got {entry!r}")
    missing = [key for key in _ENTRY_KEYS if key not in entry]
    if missing:
        raise _corrupt(path, f"{name!r} has no {' or '.join(missing)}; got keys {list(entry)}")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str):
        raise _corrupt(path, f"{name!r} has no dtype string; got {dtype!r}")
    if not isinstance(shape, list) or not all(_is_count(s) for s in shape):
        raise _corrupt(path, f"{name!r} shape must be a list of integers >= 0; got {shape!r}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_count, offsets))):
        raise _corrupt(path, f"{name!r} data_offsets must be [begin, end]; got {offsets!r}")
    begin, end = offsets
    if begin > end:
        raise _corrupt(path, f"{name!r} data_offsets [{begin}, {end}] end before they begin")
    problem = _size_problem(name, dtype, tuple(shape), end - begin)
    if problem:
        raise _corrupt(path, problem)
    return TensorEntry(name, dtype, tuple(shape), begin, end, MappingProxyType(entry))


def _size_problem(name: str, dtype: str, shape: tuple[int, ...], nbytes: int) -> str | None:
    """What is wrong with a tensor of ``dtype`` and ``shape`` in ``nbytes``; None if right.

    Python integers: no product of crafted dimensions wraps around."""
    bits = DTYPE_BITS.get(dtype)
    if bits is None:
        return f"{name!r} has dtype {dtype!r}; the format's dtypes are {', '.join(DTYPE_BITS)}"
    total = bits
    for dim in shape:
        total *= dim or 1  # a zero dimension checked as 1: the others must fit on their own
        if total >= MAX_TENSOR_BITS:
            return f"{name!r} shape {list(shape)} of {dtype} holds 2^64 bits or more"
    if 0 in shape:
        total = 0
    if total % 8 == 0 and total // 8 == nbytes:
        return None
    needs = f"{total // 8} bytes" if total % 8 == 0 else f"{total} bits"
    return f"{name!r} holds {nbytes} bytes but {dtype} {shape} needs {needs}"


# -- NumPy values and file bytes -------------------------------------------------------------


def numpy_dtype(dtype: str, name: str) -> np.dtype[Any]:
    """The NumPy dtype of safetensors dtype ``dtype``; ``name`` (the tensor's)
    is for the error. BF16 is ml_dtypes' bfloat16."""
    if dtype == "BF16":
        try:
            import ml_dtypes
        except ImportError:
            raise ImportError(
                f"{name!r} is BF16, which NumPy reads through ml_dtypes: pip install ml_dtypes"
            ) from None
        bf16: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
        return bf16
    if dtype not in _NUMPY_NAMES:
        raise TypeError(
            f"{name!r} has dtype {dtype}, which NumPy does not hold; "
            f"readable: {', '.join(_NUMPY_NAMES)}"
        )
    return np.dtype(_NUMPY_NAMES[dtype])


def safetensors_dtype(dtype: np.dtype[Any], name: str) -> str:
    """The safetensors name of NumPy dtype ``dtype`` (either byte order)."""
    for st_name, np_name in _NUMPY_NAMES.items():
        if dtype.name == np_name:
            return st_name
    raise TypeError(
        f"{name!r} has dtype {dtype}; safetensors files hold {', '.join(_NUMPY_NAMES.values())}"
    )


def from_le(raw: bytes | memoryview, dtype: np.dtype[Any]) -> np.ndarray:
    """Little-endian file bytes as a 1-D array of native ``dtype`` values
    (bfloat16 has no byte-order flag in NumPy, so every dtype travels as
    unsigned integers of its size: bit-exact, NaN payloads included)."""
    bits = np.dtype(f"<u{dtype.itemsize}")
    return np.frombuffer(raw, bits).astype(bits.newbyteorder("="), copy=False).view(dtype)


def le_bytes(a: np.ndarray, dtype: np.dtype[Any] | None = None) -> memoryview:
    """The little-endian bytes of ``a``'s values as ``dtype`` (default its own,
    native order); on a little-endian machine the array's own memory when it
    is contiguous."""
    native = (a.dtype if dtype is None else dtype).newbyteorder("=")
    bits = np.dtype(f"=u{native.itemsize}")
    values = np.ascontiguousarray(a, dtype=native).view(bits)
    return values.astype(bits.newbyteorder("<"), copy=False).reshape(-1).view(np.uint8).data


# -- writing ---------------------------------------------------------------------------------


class Writer:
    """Streams one safetensors file onto ``out``: the header at once, then the
    tensors' bytes, in the order of ``tensors``, by :meth:`write` and :meth:`copy`.

    ``header_order`` lists the JSON object's keys (the tensor names, and
    ``__metadata__`` when ``metadata`` is given) in the order to write them;
    default: the metadata, then the tensors in data order.

    The header is padded with spaces (the format allows them) so that the data
    starts 8-byte aligned. ``page_match=(data_offset, source_offset)`` asks for
    more: the byte at ``data_offset`` of this data buffer at the same offset
    within a 4096-byte page as byte ``source_offset`` of a source file: reads
    and writes of whole pages, which copy faster than a shifted range (247
    MB on ext4: a median of 57 ms against 68 ms); kept only where the data
    stays 8-byte aligned.
    """

    def __init__(
        self,
        out: io.FileIO,
        tensors: Sequence[TensorSpec],
        metadata: Mapping[str, str] | None = None,
        *,
        header_order: Sequence[str] | None = None,
        page_match: tuple[int, int] | None = None,
    ) -> None:
        text = _header_json(tensors, metadata, header_order)
        pad = -(8 + len(text)) % 8
        if page_match is not None:
            data_offset, source_offset = page_match
            same_page = (source_offset - 8 - len(text) - data_offset) % PAGE
            if (8 + len(text) + same_page) % 8 == 0:
                pad = same_page
        text += b" " * pad
        if len(text) > MAX_HEADER_BYTES:  # the reference reader would refuse the file
            raise ValueError(
                f"the header is {len(text)} bytes; the format allows {MAX_HEADER_BYTES}"
            )
        self._out = out
        self._left = sum(t.nbytes for t in tensors)
        self.data_start = 8 + len(text)
        _write_all(out, len(text).to_bytes(8, "little") + text)

    def write(self, data: bytes | memoryview) -> None:
        """Append bytes of the tensors, continuing where the last call stopped."""
        self._take(len(memoryview(data).cast("B")))
        _write_all(self._out, data)

    def copy(self, src_fd: int, start: int, count: int, src_path: str | os.PathLike[str]) -> None:
        """Append bytes [start, start + count) of the open file ``src_fd``, by
        reads and writes through one buffer (see :func:`copy_file` for why not
        in the kernel)."""
        self._take(count)
        _copy_range(src_fd, self._out, src_path, start, count)

    def finish(self) -> None:
        """Check that every byte the header announced was written."""
        if self._left:
            raise ValueError(f"{self._left} bytes of the tensors' data were not written")

    def _take(self, count: int) -> None:
        if count > self._left:
            raise ValueError(
                f"{count} more bytes exceed the {self._left} left of the tensors' data"
            )
        self._left -= count


@contextlib.contextmanager
def create(
    path: str | os.PathLike[str],
    tensors: Sequence[TensorSpec],
    metadata: Mapping[str, str] | None = None,
    *,
    header_order: Sequence[str] | None = None,
    page_match: tuple[int, int] | None = None,
) -> Iterator[Writer]:
    """A :class:`Writer` (arguments as there) onto a temporary file in the folder
    of ``path``, renamed onto ``path`` when the block ends with every byte
    written; after any error the temporary file is gone and ``path`` is as it was.
    Only a regular file at ``path`` is replaced (see :func:`not_replaceable`)."""
    path = Path(path)
    tmp = temp_name(path.parent)
    try:
        with open(tmp, "xb", buffering=0) as out:
            writer = Writer(
                out, tensors, metadata, header_order=header_order, page_match=page_match
            )
            yield writer
            writer.finish()
        problem = not_replaceable(path)  # again: the path may have changed while writing
        if problem:
            raise FileExistsError(problem)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def not_replaceable(path: Path) -> str | None:
    """Why the file ``path`` must not be replaced by a new one, or None (also
    when nothing is there): a device, a FIFO, a socket, a folder or a symbolic
    link is never replaced (a rename would put a file in its place)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        return (
            f"output {path} is a symbolic link; only a regular file is replaced, never a "
            "link or what it points to; write to a new path"
        )
    if not stat.S_ISREG(mode):
        return f"output {path} is {kind_of(mode)}, not a regular file; write to a new path"
    return None


def write_file(
    path: str | os.PathLike[str],
    tensors: Mapping[str, np.ndarray],
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write NumPy arrays (bfloat16 included) as a safetensors file, in the
    mapping's order; replaces ``path`` if it exists."""
    arrays = {name: np.asarray(a) for name, a in tensors.items()}
    specs = [
        TensorSpec(name, safetensors_dtype(a.dtype, name), a.shape, a.nbytes)
        for name, a in arrays.items()
    ]
    with create(path, specs, metadata) as writer:
        for a in arrays.values():
            writer.write(le_bytes(a))


def _header_json(
    tensors: Sequence[TensorSpec],
    metadata: Mapping[str, str] | None,
    header_order: Sequence[str] | None,
) -> bytes:
    """The header's JSON, refused (never written) where the reference reader
    would refuse the file: no NaN or Infinity, no unknown dtype, metadata of
    strings only, text that is UTF-8 (the size is checked once padded)."""
    entries: dict[str, Any] = {}
    at = 0
    for t in tensors:
        if t.name == METADATA or t.name in entries:
            raise ValueError(f"tensor name {t.name!r} is {METADATA} or given twice")
        if not all(_is_count(s) for s in t.shape) or not _is_count(t.nbytes):
            raise ValueError(f"{t.name!r}: shape {t.shape} and size {t.nbytes} must be >= 0")
        problem = _size_problem(t.name, t.dtype, tuple(t.shape), t.nbytes)
        if problem:
            raise ValueError(problem)
        entry = dict(t.fields)
        entry["dtype"], entry["shape"], entry["data_offsets"] = (
            t.dtype,
            list(t.shape),
            [at, at + t.nbytes],
        )
        entries[t.name] = entry
        at += t.nbytes
    keys = list(entries)
    if metadata is not None:
        if not _is_string_map(dict(metadata)) or not all(isinstance(k, str) for k in metadata):
            raise TypeError(f"metadata must map strings to strings; got {metadata!r}")
        entries[METADATA] = dict(metadata)
        keys.insert(0, METADATA)
    if header_order is not None:
        if sorted(header_order) != sorted(keys):
            raise ValueError(
                f"header_order must list each of {sorted(keys)} once; got {list(header_order)}"
            )
        keys = list(header_order)
    obj = {k: entries[k] for k in keys}
    try:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        raw = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"the header cannot be written: a string holds a lone UTF-16 surrogate ({exc})"
        ) from None
    except ValueError:  # json's message names no value
        raise ValueError(
            "the header cannot be written: a field holds NaN or Infinity, which JSON has not"
        ) from None
    except TypeError as exc:  # a field that JSON has no value for
        raise TypeError(f"the header cannot be written as JSON: {exc}") from None
    return raw


# copy_file_range's ways of saying "not between these files": fall back to reads and writes.
_NO_COPY_RANGE = {errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL, errno.EPERM}


def copy_file(src_fd: int, out: io.FileIO, src_path: str | os.PathLike[str], count: int) -> None:
    """Append the first ``count`` bytes of the open file ``src_fd`` to ``out``,
    a new file: in the kernel where it can (copy_file_range, a shared extent
    where the file system can), else by reads and writes as :meth:`Writer.copy`.
    The kernel's copy measured as fast as reads and writes into a new file
    (ext4, 247 MB: 61-65 ms), and slower into one past its offset 0 (89-97
    ms, against 57-71 ms), so a range after a header is read and written."""
    start = 0
    if hasattr(os, "copy_file_range"):
        while start < count:
            try:
                # no buffer here: larger pieces, fewer calls
                got = os.copy_file_range(
                    src_fd, out.fileno(), min(count - start, 64 * COPY_BYTES), start
                )
            except OSError as exc:
                if exc.errno not in _NO_COPY_RANGE:
                    raise
                break  # refused once: the rest by reads and writes
            if got == 0:
                raise ValueError(f"{src_path}: the file ended early (changed while reading?)")
            start += got
    _copy_range(src_fd, out, src_path, start, count - start)


def _copy_range(
    src_fd: int, out: io.FileIO, path: str | os.PathLike[str], start: int, count: int
) -> None:
    """Bytes [start, start + count) of the source appended to out by reads and
    writes, COPY_BYTES at a time through one buffer."""
    if count <= 0:
        return
    buffer = memoryview(bytearray(min(count, COPY_BYTES)))
    while count > 0:
        got = os.preadv(src_fd, [buffer[: min(count, len(buffer))]], start)
        if got == 0:
            raise ValueError(f"{path}: the file ended early (changed while reading?)")
        _write_all(out, buffer[:got])
        start += got
        count -= got


def _write_all(out: io.FileIO, data: bytes | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        view = view[out.write(view) or 0 :]

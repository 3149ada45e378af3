"""Token files as posembed reads them, and the error every reader of a
corpus file raises: :class:`TokenFile` (a 1-D token file read a slice at a
time with positional reads, or by the kernels through a mapping whose every
copy is guarded, so that a file that shrinks gives an error, not a crash),
regular files opened without waiting, and :class:`ChunkError`, the one-line
problem with an input."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

from posembed import _core


class ChunkError(ValueError):
    """A problem with the command's input or parameters: reported in one line.

    A ValueError, so that callers of :func:`chunk_file` can catch it as one.
    """


def option_int(value: Any, option: str, low: int, high: int | None = None) -> int | None:
    """``value`` (None: not given) as an int in ``low..high``, or ChunkError
    naming ``option``, the value and what is allowed."""
    if value is None:
        return None
    allowed = f">= {low}" if high is None else f"in {low}..{high}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ChunkError(f"{option} must be an integer {allowed}; got {value!r}")
    if value < low or (high is not None and value > high):
        raise ChunkError(f"{option} must be an integer {allowed}; got {value}")
    return int(value)


def _changed(path: Path, how: str) -> ChunkError:
    return ChunkError(f"{path}: input changed while reading ({how}); run again on a stable file")


class TokenFile:
    """A 1-D token file on disk, read a slice at a time.

    Slices are read with positional reads into arrays; the kernels that
    read many small ranges copy them out of :meth:`mapping`, a mapping of
    the file whose copies are guarded (a page lost because the file shrank
    is read again with a positional read, which reports it): a file that
    shrinks while it is read gives a :class:`ChunkError`, not a crash. The
    file's size, modification time and inode, as
    :func:`prepare_chunk` saw them, are checked when it is opened and by
    :meth:`check`, so that a file rewritten in place (old and new tokens
    mixed) is refused too. A closed ``TokenFile`` pickles small (a path and a
    few numbers), so workers of a cluster can each open and read their own
    slices.

    Attributes
    ----------
    path : Path
        The file.
    dtype : numpy.dtype
        The tokens' integer dtype as :meth:`read` returns them (native byte
        order; a file in the other order is converted while it is read).
    offset : int
        Bytes before the first token (a ``.npy`` header; 0 for a raw file).
    count : int
        Number of tokens.
    swap : bool
        The file holds the tokens in the other byte order.
    stamp : tuple of int, optional
        (size, modification time in ns, inode) the file must keep; None: not checked.
    """

    def __init__(
        self,
        path: Path,
        dtype: np.dtype[Any],
        offset: int,
        count: int,
        *,
        swap: bool = False,
        stamp: tuple[int, int, int] | None = None,
    ) -> None:
        self.path, self.dtype, self.offset, self.count = path, np.dtype(dtype), offset, count
        self.swap, self.stamp = swap, stamp
        self.fd = -1
        # the open file's status as check() last saw it (None: closed)
        self._seen: os.stat_result | None = None
        # [(identity, mapping)]: shared with the copies, kept across calls
        self._maps: list[Any] = []

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__, fd=-1, _seen=None, _maps=[])  # closed, unmapped

    @property
    def shape(self) -> tuple[int]:
        """(count,), as for an array of the tokens."""
        return (self.count,)

    def copy(self, path: Path | None = None) -> TokenFile:
        """A closed twin (the same file unless ``path`` names it anew), for a
        thread or worker that must read with a descriptor of its own; a twin
        of the same file shares its :meth:`mapping`."""
        twin = TokenFile(
            self.path if path is None else path,
            self.dtype,
            self.offset,
            self.count,
            swap=self.swap,
            stamp=self.stamp,
        )
        if path is None:
            twin._maps = self._maps
        return twin

    def mapping(self) -> Any:
        """A read-only mapping of the open file for the kernels
        (``posembed._core.FileMap``), or None (an empty file, or one the
        system cannot map). It is made once and shared with this file's
        copies while the file opened is the same one (device, inode, size
        and modification time); the kernels copy out of it with every copy
        guarded, and read a range whose pages are gone with a positional
        read instead, which reports the file's end or the error."""
        info = self._seen
        if info is None or info.st_size <= 0:
            return None
        identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
        held = self._maps
        kept = held[0] if held else None  # one read: another thread may replace it
        if kept is not None and kept[0] == identity:
            return kept[1]
        try:
            mapped = _core.FileMap(self.fd, info.st_size)
        except (OSError, RuntimeError, ValueError):
            return None
        held[:] = [(identity, mapped)]
        return mapped

    def open(self) -> None:
        """Open the file for :meth:`read` (:meth:`close` closes it).

        Raises
        ------
        ChunkError
            The file is no longer the one described (see :meth:`check`).
        OSError
            It cannot be opened.
        """
        # O_NONBLOCK: a FIFO put in the file's place is refused, never waited on
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        self.fd = os.open(self.path, flags)
        try:
            self.check()
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(self.fd, self.offset, 0, os.POSIX_FADV_SEQUENTIAL)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the file (arrays already read stay valid)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self._seen = None

    def check(self) -> None:
        """Raise :class:`ChunkError` unless the open file is still a regular
        file of the size, modification time and inode first seen (a file
        rewritten in place would mix old and new tokens)."""
        info = os.fstat(self.fd)
        if not stat.S_ISREG(info.st_mode):
            raise _changed(self.path, "it is no longer a regular file")
        self._seen = info
        if self.stamp is not None:
            size, mtime, inode = self.stamp
            if info.st_size != size:
                raise _changed(self.path, f"{size} bytes became {info.st_size}")
            if info.st_mtime_ns != mtime or info.st_ino != inode:
                raise _changed(self.path, "it was modified or replaced")

    def ended(self, at: int) -> ChunkError:
        """The error for a read that met the file's end at byte ``at``,
        before the token range's last token (the file shrank)."""
        return _changed(self.path, f"it ended at byte {at}, before its last token")

    def read(self, start: int, stop: int) -> np.ndarray:
        """Tokens [start, stop), read into a new array.

        Parameters
        ----------
        start, stop : int
            The token range, 0 <= start and stop <= count (stop <= start: no
            tokens).

        Returns
        -------
        ndarray, shape (stop - start,)
            Of :attr:`dtype`.

        Raises
        ------
        ChunkError
            The file is shorter than the range (it changed while being read).
        OSError
            The file is not open, or cannot be read.
        """
        return self.read_into(start, stop, np.empty(max(0, stop - start), self.dtype))

    def read_into(self, start: int, stop: int, buffer: np.ndarray) -> np.ndarray:
        """Tokens [start, stop) read into the front of ``buffer`` (1-D,
        contiguous, of :attr:`dtype`, long enough), which is returned, cut to
        length. As :meth:`read` otherwise."""
        n = max(0, stop - start)
        out = buffer[:n]
        view = out.view(np.uint8).data if n else memoryview(b"")
        pos = self.offset + start * self.dtype.itemsize
        got = 0
        while got < len(view):
            read = os.preadv(self.fd, [view[got:]], pos + got)  # the GIL is released
            if read == 0:
                raise self.ended(pos + got)
            got += read
        if n and hasattr(os, "posix_fadvise"):  # the next batch, while this one is cut
            os.posix_fadvise(self.fd, pos + got, got, os.POSIX_FADV_WILLNEED)
        if self.swap:
            out.byteswap(inplace=True)
        return out


def _open_regular(path: Path, what: str) -> tuple[int, os.stat_result]:
    """An open descriptor of ``path`` and its status: a regular file, opened
    without waiting (a FIFO is refused, never blocked on)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ChunkError(f"{what}: no such file") from None
    except OSError as exc:
        raise ChunkError(f"{what}: cannot be opened ({exc.strerror})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise ChunkError(f"{what}: {kind}; give a regular file")
    return fd, info


def _stamp(info: os.stat_result) -> tuple[int, int, int]:
    return (info.st_size, info.st_mtime_ns, info.st_ino)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _check_stamp(path: Path, fd: int, stamp: tuple[int, int, int]) -> None:
    info = os.fstat(fd)
    if _stamp(info) != stamp:
        if info.st_size != stamp[0]:
            raise _changed(path, f"{stamp[0]} bytes became {info.st_size}")
        raise _changed(path, "it was modified or replaced")


def _native_file(pa: Any, fd: int) -> Any:
    """An Arrow readable file over the open descriptor ``fd`` (a regular file,
    checked): reopened through /proc where there is one, so that Arrow reads
    it natively; through Python's file object elsewhere."""
    proc = f"/proc/self/fd/{fd}"
    if os.path.exists(proc):
        return pa.OSFile(proc, "rb")
    return pa.PythonFile(os.fdopen(os.dup(fd), "rb"), mode="r")


def _readable(path: Path, kind: str, exc: BaseException) -> ChunkError:
    what = "Parquet" if kind == "parquet" else f"Arrow IPC {kind[4:]}"
    return ChunkError(f"{path}: not a readable {what} file ({_one_line(exc)})")

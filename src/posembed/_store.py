"""Corpora in object stores and other fsspec file systems (``s3://``,
``gs://``, ``az://``, ``hf://``, ...): a URL names the input, and its bytes
are read by range through fsspec (``pip install 'posembed[store]'`` and the
store's own package, such as ``s3fs``). The store's settings (endpoint,
credentials) are fsspec's: its configuration, environment variables
(``FSSPEC_S3_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...) or the store
package's own."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from posembed._source import ChunkError, TokenFile

# "<protocol>://...": a URL (a Windows drive letter has one letter and ":\\")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")


class StoreUrl(str):
    """An input named by a URL, kept as the text it is (a Path would fold its //)."""

    @property
    def suffix(self) -> str:
        name = self.rstrip("/").rsplit("/", 1)[-1]
        return "." + name.rsplit(".", 1)[-1] if "." in name[1:] else ""


def is_url(path: Any) -> bool:
    """Whether ``path`` is a URL of a file system other than the local one."""
    return isinstance(path, str) and bool(_URL.match(path)) and not path.startswith("file://")


def filesystem(url: str) -> tuple[Any, str]:
    """(fsspec file system, path in it) of ``url``; ChunkError naming what
    to install when fsspec or the store's package is missing."""
    try:
        import fsspec
    except ImportError:
        raise ChunkError(
            f"{url}: reading a URL needs fsspec: pip install 'posembed[store]' (and the "
            "store's package, such as s3fs for s3://)"
        ) from None
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except ImportError as exc:  # fsspec names the package the protocol needs
        raise ChunkError(f"{url}: {' '.join(str(exc).split())}") from None
    except ValueError as exc:  # an unknown protocol
        raise ChunkError(f"{url}: not a URL fsspec reads ({' '.join(str(exc).split())})") from None
    return fs, str(path)


def _failed(url: str, exc: BaseException) -> ChunkError:
    why = " ".join(str(exc).split())
    if isinstance(exc, FileNotFoundError):
        return ChunkError(f"{url}: no such file in the store")
    if isinstance(exc, PermissionError):
        return ChunkError(f"{url}: the store refused access ({why})")
    return ChunkError(f"{url}: the store failed ({type(exc).__name__}: {why})")


def info(fs: Any, path: str, url: str) -> tuple[int, str]:
    """(size, version) of a file in the store: its version is its ETag, else
    its modification time (what changes when the object is replaced)."""
    try:
        fs.invalidate_cache(path)
        found = fs.info(path)
    except Exception as exc:  # each store's client raises its own kinds
        raise _failed(url, exc) from None
    if found.get("type") != "file":
        raise ChunkError(f"{url}: not a file in the store ({found.get('type')})")
    keys = ("ETag", "etag", "mtime", "LastModified")
    version = next((found[k] for k in keys if found.get(k)), "")
    return int(found.get("size") or 0), str(version)


def read_range(fs: Any, path: str, url: str, start: int, stop: int) -> bytes:
    """Bytes [start, stop) of a file in the store."""
    if stop <= start:
        return b""
    try:
        data: bytes = fs.cat_file(path, start=start, end=stop)
    except Exception as exc:
        raise _failed(url, exc) from None
    return data


class StoreTokenFile(TokenFile):
    """A token file in a store, read by range through fsspec: as
    :class:`TokenFile`, its size and version (ETag) checked when opened and
    by :meth:`check`, so that an object replaced while it is read is refused."""

    def __init__(
        self,
        url: str,
        dtype: np.dtype[Any],
        offset: int,
        count: int,
        *,
        swap: bool = False,
        version: tuple[int, str],
    ) -> None:
        super().__init__(StoreUrl(url), dtype, offset, count, swap=swap)  # type: ignore[arg-type]
        self.url, self.version = StoreUrl(url), version
        self.fs: Any = None
        self.key = ""

    def copy(self, path: Any = None) -> StoreTokenFile:
        return StoreTokenFile(
            self.url if path is None else str(path),
            self.dtype,
            self.offset,
            self.count,
            swap=self.swap,
            version=self.version,
        )

    def open(self) -> None:
        self.fs, self.key = filesystem(self.url)
        self.check()

    def close(self) -> None:
        self.fs = None

    def check(self) -> None:
        fs, key = (self.fs, self.key) if self.fs is not None else filesystem(self.url)
        now = info(fs, key, self.url)
        if now != self.version:
            how = (
                f"{self.version[0]} bytes became {now[0]}"
                if now[0] != self.version[0]
                else "it was replaced"
            )
            raise ChunkError(
                f"{self.url}: input changed while reading ({how}); run again on a stable file"
            )

    def read_into(self, start: int, stop: int, buffer: np.ndarray) -> np.ndarray:
        n = max(0, stop - start)
        out = buffer[:n]
        if not n:
            return out
        if self.fs is None:
            raise OSError(f"{self.url} is not open")
        size = self.dtype.itemsize
        pos = self.offset + start * size
        data = read_range(self.fs, self.key, self.url, pos, pos + n * size)
        if len(data) < n * size:
            raise self.ended(pos + len(data))
        out[:] = np.frombuffer(data, self.dtype, n)
        if self.swap:
            out.byteswap(inplace=True)
        return out

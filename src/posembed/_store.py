"""Corpora in object stores and other fsspec file systems (``s3://``,
``gs://``, ``az://``, ``hf://``, ...): a URL names the input, and its bytes
are read by range through fsspec (``pip install 'posembed[store]'`` and the
store's own package, such as ``s3fs``). The store's settings (endpoint,
credentials) are fsspec's: its configuration, environment variables
(``FSSPEC_S3_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...) or the store
package's own."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from posembed._source import ChunkError, TokenFile

_T = TypeVar("_T")

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
        store: tuple[Any, str] | None = None,
    ) -> None:
        super().__init__(StoreUrl(url), dtype, offset, count, swap=swap)  # type: ignore[arg-type]
        self.url, self.version = StoreUrl(url), version
        # the file system as the caller configured it (it pickles with its
        # options, so a Dask worker reads with the caller's endpoint)
        self.store = store if store is not None else filesystem(url)
        self.fs: Any = None
        self.key = self.store[1]

    def copy(self, path: Any = None) -> StoreTokenFile:
        return StoreTokenFile(
            self.url if path is None else str(path),
            self.dtype,
            self.offset,
            self.count,
            swap=self.swap,
            version=self.version,
            store=self.store if path is None else None,
        )

    def open(self) -> None:
        self.fs, self.key = self.store
        self.check()

    def close(self) -> None:
        self.fs = None

    def check(self) -> None:
        fs, key = self.store
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


# An output in a store, which has no rename: the files are uploaded under the
# prefix, meta.json (the manifest, which every reader of the output needs)
# last, and a marker says meanwhile that a run is writing there. A run that
# stops leaves the marker and no manifest: never taken for a complete output,
# and replaced by a rerun with --force.
MANIFEST = "meta.json"
WRITING = ".posembed-writing.json"
MANIFEST_BYTES = 1 << 20


def _put(fs: Any, local: str, key: str) -> None:
    fs.put_file(local, key)


class StoreOutput:
    """The folder of outputs at ``url``, written by :meth:`upload` of a
    finished local folder; :meth:`check` says before any work whether it
    may be written (empty, or posembed's and ``force``)."""

    def __init__(self, url: str, force: bool) -> None:
        self.url, self.force = url.rstrip("/"), force
        self.fs, self.key = filesystem(self.url)
        self.key = self.key.rstrip("/")

    def _existing(self) -> list[str]:
        try:
            self.fs.invalidate_cache(self.key)
            if self.fs.isfile(self.key):
                raise ChunkError(f"{self.url} is a file in the store, not a folder of outputs")
            found = self.fs.find(self.key, detail=False)
        except ChunkError:
            raise
        except FileNotFoundError:
            return []
        except Exception as exc:
            raise _failed(self.url, exc) from None
        prefix = self.key + "/"
        return sorted(str(p)[len(prefix) :] for p in found if str(p).startswith(prefix))

    def _ours(self, names: list[str]) -> bool:
        """A manifest posembed wrote (a JSON object naming its format), or the
        marker of one of its runs."""
        if WRITING in names:
            return True
        if MANIFEST not in names:
            return False
        from posembed import _json

        key = f"{self.key}/{MANIFEST}"
        size, _ = info(self.fs, key, f"{self.url}/{MANIFEST}")
        if size > MANIFEST_BYTES:
            return False
        try:
            meta = _json.loads(read_range(self.fs, key, self.url, 0, size), key)
        except ValueError:
            return False
        # chunk_file's meta.json names its format; chunk_parts's its parts
        return isinstance(meta, dict) and ("format" in meta or "parts" in meta)

    def check(self) -> list[str]:
        """The objects already under the prefix, once it is known that this
        run may replace them (ChunkError otherwise)."""
        names = self._existing()
        if not names:
            return names
        if not self._ours(names):
            raise ChunkError(
                f"output {self.url} holds objects posembed did not write (no {MANIFEST} of its "
                "own); posembed replaces only its own outputs; write to a new prefix"
            )
        if not self.force:
            if MANIFEST in names:
                raise ChunkError(f"{self.url} holds an output; pass --force to replace it")
            raise ChunkError(
                f"{self.url} holds an unfinished run's objects (no {MANIFEST}); pass --force "
                "to replace them"
            )
        return names

    def upload(self, folder: Path) -> None:
        """The files of the finished local ``folder`` uploaded, the manifest
        last; what the prefix held before and the new run does not write is removed."""
        self.finish(folder, (), self.begin())

    def _failed(self, exc: BaseException) -> ChunkError:
        return ChunkError(
            f"{self.url}: writing to the store failed ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())}); the output is unfinished (no {MANIFEST}): "
            "run again with --force to replace it"
        )

    def begin(self) -> list[str]:
        """Mark the prefix as being written (and no longer complete), before
        any object of the new run is; returns what it held."""
        import json

        old = self.check()
        try:
            self.fs.pipe(f"{self.key}/{WRITING}", json.dumps({"writing": "posembed"}).encode())
            if MANIFEST in old:  # the old manifest first: the prefix is now unfinished
                self.fs.rm(f"{self.key}/{MANIFEST}")
        except Exception as exc:
            raise self._failed(exc) from None
        return old

    def finish(self, folder: Path, written: tuple[str, ...], old: list[str]) -> None:
        """The files of the local ``folder`` uploaded beside those the run
        already wrote to the prefix (``written``), the old objects the run
        did not write removed, the manifest last, then the marker removed."""
        files = sorted(p.name for p in folder.iterdir() if p.is_file())
        try:
            for name in files:
                if name != MANIFEST:
                    _put(self.fs, str(folder / name), f"{self.key}/{name}")
            keep = {*files, *written, WRITING}
            for name in old:
                if name not in keep:
                    self.fs.rm(f"{self.key}/{name}")
            _put(self.fs, str(folder / MANIFEST), f"{self.key}/{MANIFEST}")
            self.fs.rm(f"{self.key}/{WRITING}")
        except Exception as exc:
            raise self._failed(exc) from None


# Megatron-LM's .idx starts with these bytes.
IDX_MAGIC = b"MMIDIDX\x00\x00"


class StorePair:
    """An indexed dataset at the URL ``PREFIX`` (``PREFIX.bin`` and
    ``PREFIX.idx``) in a store: uploaded once written locally, the ``.idx``
    (what a reader opens first) last, a marker object meanwhile, the old
    ``.idx`` removed first; :meth:`check` says before any work whether it
    may be written (nothing there, or an indexed dataset and ``force``)."""

    def __init__(self, url: str, force: bool) -> None:
        self.url, self.force = url, force
        self.fs, self.key = filesystem(url)
        self.marker = f"{self.key}.posembed-writing.json"

    def _exists(self, key: str) -> bool:
        try:
            self.fs.invalidate_cache(key)
            return bool(self.fs.isfile(key))
        except FileNotFoundError:
            return False
        except Exception as exc:
            raise _failed(self.url, exc) from None

    def check(self) -> None:
        there = [s for s in (".bin", ".idx") if self._exists(self.key + s)]
        unfinished = self._exists(self.marker)
        if not there and not unfinished:
            return
        ours = unfinished or (
            ".idx" in there
            and read_range(self.fs, self.key + ".idx", self.url + ".idx", 0, len(IDX_MAGIC))
            == IDX_MAGIC
        )
        if not ours:
            raise ChunkError(
                f"{self.url}{there[0]} is no indexed dataset (no .idx posembed or Megatron "
                "wrote); posembed replaces only those; write to a new prefix"
            )
        if not self.force:
            raise ChunkError(f"{self.url}.idx or .bin exists; pass --force to replace them")

    def upload(self, bin_path: Path, idx_path: Path) -> None:
        import json

        self.check()
        try:
            self.fs.pipe(self.marker, json.dumps({"writing": "posembed"}).encode())
            if self._exists(self.key + ".idx"):  # first: the pair is now unfinished
                self.fs.rm(self.key + ".idx")
            _put(self.fs, str(bin_path), self.key + ".bin")
            _put(self.fs, str(idx_path), self.key + ".idx")
            self.fs.rm(self.marker)
        except Exception as exc:
            raise ChunkError(
                f"{self.url}: writing to the store failed ({type(exc).__name__}: "
                f"{' '.join(str(exc).split())}); the dataset is unfinished (no .idx): run "
                "again with --force to replace it"
            ) from None


class ObjectReader:
    """Bytes [start, stop) of an object in a store (``read(start, stop)``)
    and its ``size``: an object read as a file is (an index, say)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.fs, self.key = filesystem(url)
        self.size, self.version = info(self.fs, self.key, url)

    def __call__(self, start: int, stop: int) -> bytes:
        data = read_range(self.fs, self.key, self.url, start, stop)
        if len(data) != stop - start:
            raise ChunkError(f"{self.url}: input changed while reading (it is shorter)")
        return data


def staged(url: str, force: bool, pair: bool, write: Callable[[Path], _T]) -> _T:
    """An output at ``url`` in a store, which has no rename: ``write(path)``
    makes it at a local path first (a folder, or ``path.bin`` and
    ``path.idx`` where ``pair``), then it is uploaded with its manifest last
    (:class:`StoreOutput`, :class:`StorePair`). The prefix is checked before
    any work; returns what ``write`` returns."""
    target = StorePair(url, force) if pair else StoreOutput(url, force)
    target.check()
    with tempfile.TemporaryDirectory(prefix="posembed-store-") as staging:
        local = Path(staging) / "out"
        result = write(local)
        if isinstance(target, StorePair):
            target.upload(local.with_suffix(".bin"), local.with_suffix(".idx"))
        else:
            target.upload(local)
    return result

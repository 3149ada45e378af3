"""Corpora in object stores and other fsspec file systems (``s3://``,
``gs://``, ``az://``, ``hf://``, ...): a URL names the input, and its bytes
are read by range through fsspec (``pip install 'posembed[store]'`` and the
store's own package, such as ``s3fs``). The store's settings (endpoint,
credentials) are fsspec's: its configuration, environment variables
(``FSSPEC_S3_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...) or the store
package's own."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from posembed.io._tokens import ChunkError, TokenFile

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
    if getattr(fs, "async_impl", False):  # only async clients run tasks on fsspec's loop
        _quiet_orphaned_tasks()
    return fs, str(path)


def _quiet_orphaned_tasks() -> None:
    """An async store client (s3fs, gcsfs) whose server stops mid-upload
    leaves tasks whose failure nobody awaits: asyncio would print a traceback
    of each ("Task exception was never retrieved") beside the one error line
    the command gives. Those reports are dropped from fsspec's own event loop
    (where its caller has set no handler of its own); every other is kept."""
    try:
        from fsspec.asyn import get_loop
    except ImportError:
        return
    loop = get_loop()
    if loop.get_exception_handler() is not None:  # set already, by posembed or its caller
        return

    def handler(loop: Any, context: dict[str, Any]) -> None:
        if context.get("message") == "Task exception was never retrieved":
            logging.getLogger(__name__).debug("store: %s", context.get("exception"))
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


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

# Concurrent runs to one output. A store has no rename and no lock that every
# fsspec store offers, so the marker is a lease: it names its run (a random
# id), its host and process, and when the run last renewed it. A run renews
# it every RENEW_SECONDS while it writes, and checks before each upload and
# before the manifest that the marker is still its own. A marker renewed
# within STALE_SECONDS (by the writers' clocks) whose process is alive is a
# live run: another run refuses to start, --force or not, instead of
# interleaving its objects with it. Two runs that start at the same moment
# both write a marker; each reads it again SETTLE_SECONDS later (longer than
# the few requests between a run's look at the marker and its write), and
# only the run whose marker stayed goes on. A run that fails marks its marker
# ended, so a rerun with --force replaces its objects at once; one killed
# leaves a marker that goes stale (at once on the same host, its process
# gone).
RENEW_SECONDS = 10.0
STALE_SECONDS = 60.0
SETTLE_SECONDS = 0.5
LEASE_BYTES = 1 << 16


def _put(fs: Any, local: str, key: str) -> None:
    fs.put_file(local, key)


# The runs of this process that hold a lease now (their marker's "run").
_LIVE_RUNS: set[str] = set()


def _process_gone(marker: dict[str, Any]) -> bool:
    """Whether the marker's run was a process of this host that has ended
    (or a run of this process that is over)."""
    if marker.get("host") != socket.gethostname() or not isinstance(marker.get("pid"), int):
        return False
    if marker["pid"] == os.getpid():
        return marker.get("run") not in _LIVE_RUNS
    try:
        os.kill(marker["pid"], 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


class _Lease:
    """This run's claim on an output in a store: the marker object ``key``."""

    def __init__(self, fs: Any, key: str, url: str) -> None:
        self.fs, self.key, self.url = fs, key, url
        self.run = uuid.uuid4().hex
        self.lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def read(self) -> dict[str, Any] | None:
        """The marker (an empty dict where it is not one of posembed's JSON
        objects), or None where there is none."""
        try:
            self.fs.invalidate_cache(self.key)
            data = self.fs.cat_file(self.key, start=0, end=LEASE_BYTES)
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise _failed(self.url, exc) from None
        try:
            found = json.loads(data)
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}

    def _write(self, ended: bool = False) -> None:
        marker = {
            "writing": "posembed",
            "run": self.run,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "renewed": time.time(),
            "ended": ended,
        }
        self.fs.pipe(self.key, json.dumps(marker).encode())

    def live_other(self) -> str | None:
        """Why another run is writing the output now, or None."""
        found = self.read()
        if not found or found.get("run") == self.run or found.get("ended"):
            return None
        renewed = found.get("renewed")
        if not isinstance(renewed, (int, float)) or _process_gone(found):
            return None
        age = time.time() - float(renewed)
        if age > STALE_SECONDS:
            return None
        return (
            f"{self.url}: another posembed run is writing this output now (its marker "
            f"renewed {max(age, 0):.0f} s ago); wait for it to finish, or write to another "
            f"prefix (a run that was stopped is taken as gone {STALE_SECONDS:.0f} s after it "
            "last renewed)"
        )

    def claim(self) -> None:
        """Write this run's marker, once no other live run holds one, and
        renew it from a thread until :meth:`release`; ChunkError where
        another run is writing or claims it at the same moment."""
        busy = self.live_other()
        if busy is not None:
            raise ChunkError(busy)
        _LIVE_RUNS.add(self.run)
        try:
            self._write()
            time.sleep(SETTLE_SECONDS)
            if (self.read() or {}).get("run") != self.run:
                raise ChunkError(
                    f"{self.url}: another posembed run began writing this output at the same "
                    "moment; run again once it has finished, or write to another prefix"
                )
        except BaseException:
            _LIVE_RUNS.discard(self.run)
            raise
        self._thread = threading.Thread(target=self._renew, name="posembed-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_SECONDS):
            try:
                if (self.read() or {}).get("run") != self.run:
                    self.lost = (
                        f"{self.url}: another posembed run took over this output while this "
                        "one wrote it; this run stopped without finishing it"
                    )
                    return
                self._write()
            except Exception:  # the store failing: the upload that follows says so
                continue

    def check(self) -> None:
        """ChunkError where the marker is no longer this run's."""
        if self.lost is None and (self.read() or {}).get("run") != self.run:
            self.lost = (
                f"{self.url}: another posembed run took over this output while this one "
                "wrote it; this run stopped without finishing it"
            )
        if self.lost is not None:
            raise ChunkError(self.lost)

    def release(self, *, remove: bool) -> None:
        """Stop renewing; remove the marker (``remove``, once the output is
        complete) or mark it ended (a failed run: a rerun may replace it at
        once), where it is still this run's."""
        self._stop.set()
        _LIVE_RUNS.discard(self.run)
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        try:
            if (self.read() or {}).get("run") != self.run:
                return
            if remove:
                self.fs.rm(self.key)
            else:
                self._write(ended=True)
        except Exception:  # a store that fails now: the marker goes stale by itself
            pass


def _canonical(url: str) -> tuple[tuple[str, ...], str]:
    """(the file system's protocols, the path in it without a trailing /) of a URL."""
    fs, path = filesystem(url)
    protocol = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return tuple(sorted(protocol)), path.rstrip("/")


def replaces(url: str, pair: bool, inputs: Iterable[Any]) -> str | None:
    """Why an output at ``url`` (a folder, or ``PREFIX.bin`` and
    ``PREFIX.idx`` where ``pair``) would replace or delete one of the
    ``inputs`` (paths or URLs; None: not given), or None."""
    protocols, key = _canonical(url)
    targets = [key + ".bin", key + ".idx"] if pair else [key]
    for given in inputs:
        if given is None or not is_url(str(given)):
            continue  # a local input: never under a store's prefix
        theirs, path = _canonical(str(given))
        if not set(theirs) & set(protocols):
            continue
        # an indexed dataset named by PREFIX, PREFIX.idx or PREFIX.bin is both files
        stem = path[:-4] if path.endswith((".idx", ".bin")) else path
        read = {path, stem + ".idx", stem + ".bin"}
        for target in targets:
            if any(r == target or r.startswith(target + "/") for r in read):
                return f"output {url} would replace the input {given}; write to a new prefix"
    return None


def _no_name(url: str, fs: Any, key: str) -> str | None:
    """Why ``url`` names no prefix inside a bucket, or None (a store whose
    paths begin with a bucket has no root marker: s3fs, gcsfs, adlfs)."""
    bucketed = getattr(fs, "root_marker", "/") == ""
    name = key.strip("/")
    if not name or (bucketed and "/" not in name) or name.rsplit("/", 1)[-1] in (".", ".."):
        url = url.rstrip("/")
        return f"output {url} names a whole bucket, not a prefix in it; give one such as {url}/name"
    return None


class StoreOutput:
    """The folder of outputs at ``url``, written by :meth:`upload` of a
    finished local folder; :meth:`check` says before any work whether it
    may be written (empty, or posembed's and ``force``, replacing none of
    ``inputs``, and no other run writing there now)."""

    def __init__(self, url: str, force: bool, inputs: Iterable[Any] = ()) -> None:
        self.url, self.force = url.rstrip("/"), force
        self.inputs = tuple(inputs)
        self.fs, self.key = filesystem(self.url)
        self.key = self.key.rstrip("/")
        self.lease = _Lease(self.fs, f"{self.key}/{WRITING}", f"{self.url}/{WRITING}")

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
        from posembed.io import _json

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
        problem = _no_name(self.url, self.fs, self.key) or replaces(self.url, False, self.inputs)
        if problem is not None:
            raise ChunkError(problem)
        names = self._existing()
        if not names:
            return names
        if not self._ours(names):
            raise ChunkError(
                f"output {self.url} holds objects posembed did not write (no {MANIFEST} of its "
                "own); posembed replaces only its own outputs; write to a new prefix"
            )
        busy = self.lease.live_other() if WRITING in names else None
        if busy is not None:
            raise ChunkError(busy)
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
        old = self.begin()
        try:
            self.finish(folder, (), old)
        except BaseException:
            self.abandon()
            raise

    def _failed(self, exc: BaseException) -> ChunkError:
        return ChunkError(
            f"{self.url}: writing to the store failed ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())}); the output is unfinished (no {MANIFEST}): "
            "run again with --force to replace it"
        )

    def begin(self) -> list[str]:
        """Claim the prefix for this run (its marker, renewed until
        :meth:`finish` or :meth:`abandon`) and mark it as no longer complete,
        before any object of the new run is written; returns what it held."""
        old = self.check()
        try:
            self.lease.claim()
        except ChunkError:
            raise
        except Exception as exc:
            raise self._failed(exc) from None
        try:
            if MANIFEST in old:  # the old manifest first: the prefix is now unfinished
                self.fs.rm(f"{self.key}/{MANIFEST}")
        except Exception as exc:
            self.abandon()
            raise self._failed(exc) from None
        return old

    def abandon(self) -> None:
        """A run that failed: its marker stays, marked ended (no manifest)."""
        self.lease.release(remove=False)

    def finish(self, folder: Path, written: tuple[str, ...], old: list[str]) -> None:
        """The files of the local ``folder`` uploaded beside those the run
        already wrote to the prefix (``written``), the old objects the run
        did not write removed, the manifest last, then the marker removed;
        each upload only while the prefix is still this run's."""
        files = sorted(p.name for p in folder.iterdir() if p.is_file())
        try:
            for name in files:
                if name != MANIFEST:
                    self.lease.check()
                    _put(self.fs, str(folder / name), f"{self.key}/{name}")
            keep = {*files, *written, WRITING}
            for name in old:
                if name not in keep:
                    self.fs.rm(f"{self.key}/{name}")
            self.lease.check()
            _put(self.fs, str(folder / MANIFEST), f"{self.key}/{MANIFEST}")
        except ChunkError:
            raise
        except Exception as exc:
            raise self._failed(exc) from None
        self.lease.release(remove=True)


# Megatron-LM's .idx starts with these bytes.
IDX_MAGIC = b"MMIDIDX\x00\x00"


class StorePair:
    """An indexed dataset at the URL ``PREFIX`` (``PREFIX.bin`` and
    ``PREFIX.idx``) in a store: uploaded once written locally, the ``.idx``
    (what a reader opens first) last, a marker object meanwhile, the old
    ``.idx`` removed first; :meth:`check` says before any work whether it
    may be written (nothing there, or an indexed dataset and ``force``;
    none of ``inputs``; no other run writing it now)."""

    def __init__(self, url: str, force: bool, inputs: Iterable[Any] = ()) -> None:
        self.url, self.force = url, force
        self.inputs = tuple(inputs)
        self.fs, self.key = filesystem(url)
        self.marker = f"{self.key}.posembed-writing.json"
        self.lease = _Lease(self.fs, self.marker, f"{self.url}.posembed-writing.json")

    def _exists(self, key: str) -> bool:
        try:
            self.fs.invalidate_cache(key)
            return bool(self.fs.isfile(key))
        except FileNotFoundError:
            return False
        except Exception as exc:
            raise _failed(self.url, exc) from None

    def check(self) -> None:
        problem = _no_name(self.url, self.fs, self.key) or replaces(self.url, True, self.inputs)
        if problem is not None:
            raise ChunkError(problem)
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
        busy = self.lease.live_other() if unfinished else None
        if busy is not None:
            raise ChunkError(busy)
        if not self.force:
            raise ChunkError(f"{self.url}.idx or .bin exists; pass --force to replace them")

    def upload(self, bin_path: Path, idx_path: Path) -> None:
        self.check()
        try:
            self.lease.claim()
            if self._exists(self.key + ".idx"):  # first: the pair is now unfinished
                self.fs.rm(self.key + ".idx")
            self.lease.check()
            _put(self.fs, str(bin_path), self.key + ".bin")
            self.lease.check()
            _put(self.fs, str(idx_path), self.key + ".idx")
        except ChunkError:
            self.lease.release(remove=False)
            raise
        except Exception as exc:
            self.lease.release(remove=False)
            raise ChunkError(
                f"{self.url}: writing to the store failed ({type(exc).__name__}: "
                f"{' '.join(str(exc).split())}); the dataset is unfinished (no .idx): run "
                "again with --force to replace it"
            ) from None
        self.lease.release(remove=True)


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


def staged(
    url: str,
    force: bool,
    pair: bool,
    write: Callable[[Path], _T],
    inputs: Iterable[Any] = (),
) -> _T:
    """An output at ``url`` in a store, which has no rename: ``write(path)``
    makes it at a local path first (a folder, or ``path.bin`` and
    ``path.idx`` where ``pair``), then it is uploaded with its manifest last
    (:class:`StoreOutput`, :class:`StorePair`). The prefix is checked before
    any work (it may replace none of ``inputs``, with or without ``force``);
    returns what ``write`` returns."""
    target = StorePair(url, force, inputs) if pair else StoreOutput(url, force, inputs)
    target.check()
    with tempfile.TemporaryDirectory(prefix="posembed-store-") as staging:
        local = Path(staging) / "out"
        result = write(local)
        if isinstance(target, StorePair):
            target.upload(local.with_suffix(".bin"), local.with_suffix(".idx"))
        else:
            target.upload(local)
    return result

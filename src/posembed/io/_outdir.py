"""Output folders of ``posembed chunk``: refused or replaced, and never lost.

:func:`problem` says, before any work, why a run may not write its output
folder: ``force`` replaces only a folder that posembed wrote (a real folder
holding a ``meta.json`` or ``index.json`` that is a JSON object), never a
device, a FIFO, a file, a symbolic link, another folder, or one that holds
an input. :func:`new_temp` gives the run a temporary folder next to the
output, and :func:`commit` moves it into place when the run succeeds: a
fresh output by a rename that replaces nothing, an existing one by swapping
the two folders in one step (Linux's ``renameat2(RENAME_EXCHANGE)``), so
that a process killed at any moment leaves the old output or the new one at
the path. The safetensors writer takes its short temporary names
(:func:`temp_name`) and its words for a file's kind (:func:`kind_of`) from here."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from posembed.io import _json

# The files a chunk output (meta.json) or a parted one (index.json and
# meta.json) holds; one of them, a JSON object, marks a folder as posembed's.
MARKERS = ("meta.json", "index.json")
# A marker larger than this is no file posembed wrote (meta.json is a few
# hundred bytes; index.json about 80 per part).
MARKER_BYTES = 64 << 20

# The errors of renameat2 where the system (ENOSYS) or the file system
# (EINVAL) lacks the call or the flag: the renames then go the portable way.
UNSUPPORTED = (errno.ENOSYS, errno.EINVAL)


def problem(
    out: Path,
    inputs: Iterable[str | os.PathLike[str] | None],
    force: bool,
    markers: tuple[str, ...] = MARKERS,
) -> str | None:
    """Why a run may not write the folder ``out``, or None: checked before any work.

    ``inputs`` are the files the run reads (None: not given); ``out`` must be
    neither one of them nor a folder above one, whether or not ``force``.
    ``markers``: the files of which one, a JSON object, marks a folder this
    kind of run wrote (a model folder has its own, as a meta.json is common there).
    """
    try:
        st = os.lstat(out)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a name too long, a file where a folder should be, ...
        return f"output {out}: {exc.strerror}"
    for given in inputs:
        if given is not None and _holds(out, given):
            return f"output {out} would replace the input {given}; write to a new path"
    if out.name in ("", ".."):
        return f"output {out} names no folder that can be replaced; write to a new path"
    if stat.S_ISLNK(st.st_mode):
        return (
            f"output {out} is a symbolic link; posembed replaces only a folder it wrote, "
            "never a link or what it points to; write to a new path"
        )
    if not stat.S_ISDIR(st.st_mode):
        return (
            f"output {out} is {kind_of(st.st_mode)}, not a folder posembed wrote; "
            "write to a new path"
        )
    if not ours(out, markers):
        return (
            f"output {out} is a folder posembed did not write (no {' or '.join(markers)} "
            "holding a JSON object); posembed replaces only its own outputs; "
            "write to a new path"
        )
    if not force:
        return f"{out} exists; pass --force to replace it"
    return None


def ours(folder: Path, markers: tuple[str, ...] = MARKERS) -> bool:
    """Whether ``folder`` is a real folder (no link) that posembed wrote
    (holding one of ``markers``, a JSON object; a marker may lie in a
    subfolder, "a/b/name", reached without following a link)."""
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return False
    except OSError:
        return False
    return any(_json_object(folder, name) for name in markers)


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def _json_object(folder: Path, name: str) -> bool:
    # No link followed at any step, and a FIFO neither blocks the open nor counts.
    try:
        fd = _open_inside(folder, name)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MARKER_BYTES:
            return False
        with open(fd, "rb", closefd=False) as f:
            value = _json.loads(f.read(MARKER_BYTES + 1), str(folder / name))
    except (OSError, ValueError):
        return False
    finally:
        os.close(fd)
    return isinstance(value, dict)


def _open_inside(folder: Path, name: str) -> int:
    """``folder / name`` opened for reading ("a/b/name" too) without following
    a link at any step; OSError where a step is a link or missing."""
    *parents, last = name.split("/")
    flags = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0)
    if os.open not in os.supports_dir_fd:  # Windows: each step checked, then opened
        place = folder
        for part in parents:
            place = place / part
            if not stat.S_ISDIR(os.lstat(place).st_mode):
                raise NotADirectoryError(str(place))
        return os.open(place / last, flags)
    fds = [os.open(folder, os.O_RDONLY | _DIRECTORY | _NOFOLLOW)]
    try:
        for part in parents:
            fds.append(os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=fds[-1]))
        return os.open(last, flags, dir_fd=fds[-1])
    finally:
        for parent in fds:
            os.close(parent)


def _holds(out: Path, given: str | os.PathLike[str]) -> bool:
    """Whether ``out`` is the file ``given`` or a folder above it (followed
    through links, compared by device and inode: bind mounts included)."""
    try:
        target = os.stat(out)
        path = Path(os.path.realpath(given))
        for place in (path, *path.parents):
            st = os.stat(place)
            if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                return True
    except (OSError, ValueError):  # an input that does not exist is reported as one
        return False
    return False


def kind_of(mode: int) -> str:
    """What a file of ``mode`` (os.lstat's st_mode) is, in words: "a FIFO"."""
    kinds = (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISREG, "a file"),
        (stat.S_ISDIR, "a folder"),
    )
    return next((name for test, name in kinds if test(mode)), "of an unknown kind")


def temp_name(folder: Path) -> Path:
    """A fresh name in ``folder``, short whatever the output's name (a name of
    255 bytes, the usual limit, leaves no room to add to it)."""
    return folder / f".posembed-{os.getpid()}-{os.urandom(4).hex()}"


def new_temp(out: Path) -> Path:
    """A new empty folder next to ``out`` (its folder made if missing) to
    write the output into, then :func:`commit` it, or :func:`discard` it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = temp_name(out.parent)
        try:
            tmp.mkdir()
        except FileExistsError:
            continue
        return tmp


@contextlib.contextmanager
def temporary(out: Path) -> Iterator[Path]:
    """A new temporary folder next to ``out`` (see :func:`new_temp`) for the
    block to write into and commit; removed if the block raises (see
    :func:`discard`), and with it the folders above ``out`` that the run
    made (those left empty), so that a failed run leaves nothing behind."""
    missing = []
    for folder in out.parents:
        if os.path.lexists(folder):
            break
        missing.append(folder)
    tmp = new_temp(out)
    try:
        yield tmp
    except BaseException as exc:
        discard(tmp, exc)
        for folder in missing:  # the deepest first; one that holds something stays
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        raise


def discard(tmp: Path, error: BaseException) -> None:
    """Remove the temporary folder of a run that raised ``error``."""
    if not isinstance(error, Stranded):  # there it holds what was at the output
        shutil.rmtree(tmp, ignore_errors=True)


def commit(new: Path, out: Path, force: bool, markers: tuple[str, ...] = MARKERS) -> None:
    """Move the folder ``new`` to ``out``, replacing only a folder posembed
    wrote there (marked by one of ``markers``), and only with ``force``.

    Raises FileExistsError when something else took the path meanwhile;
    OSError when a rename fails. Either way ``out`` is as it was and
    ``new`` still holds the new output (but for :class:`Stranded`).
    """
    while True:
        error = _move_in(new, out)
        if error == 0:
            return
        if error not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
            raise OSError(error, os.strerror(error), str(new), None, str(out))
        if not force:
            raise FileExistsError(f"{out} appeared while writing; pass --force to replace it")
        error = _rename_exchange(new, out)
        if error == errno.ENOENT:  # the old output went meanwhile: move in again
            continue
        if error in UNSUPPORTED:
            if _replace_aside(new, out, markers):
                return
            continue
        if error:
            raise OSError(error, os.strerror(error), str(new), None, str(out))
        # The new output is at `out`; the old one now has the temporary name.
        if not ours(new, markers):
            _put_back(new, out)
        shutil.rmtree(new, ignore_errors=True)  # the output is in place whatever is left
        return


class Stranded(OSError):
    """What was at the output could not be put back: it lies at the temporary
    name, which must therefore not be removed."""


def _changed(out: Path) -> FileExistsError:
    return FileExistsError(
        f"output {out} changed while writing and is not a folder posembed wrote; "
        "it was left as it was",
    )


def _put_back(old: Path, out: Path) -> None:
    """Swap back what was at ``out`` (now at ``old``) and refuse it."""
    error = _rename_exchange(old, out)
    if error:
        raise Stranded(
            f"output {out} changed while writing and is not a folder posembed wrote; "
            f"it could not be put back ({os.strerror(error)}) and is now at {old}",
        )
    raise _changed(out)


def _replace_aside(new: Path, out: Path, markers: tuple[str, ...]) -> bool:
    """Replace without a swap: the old output renamed aside, the new one in,
    the old one removed; False if ``out`` went meanwhile. Between the two
    renames the old output lies at a temporary name next to ``out``."""
    aside = temp_name(out.parent)
    try:
        os.rename(out, aside)
    except FileNotFoundError:
        return False
    try:
        if not ours(aside, markers):
            raise _changed(out)
        error = _move_in(new, out)
        if error:
            raise OSError(error, os.strerror(error), str(new), None, str(out))
    except BaseException:
        os.rename(aside, out)
        raise
    shutil.rmtree(aside, ignore_errors=True)
    return True


def _move_in(src: Path, dst: Path) -> int:
    """Rename ``src`` to a ``dst`` that must not exist; 0 or the errno."""
    error = _rename_noreplace(src, dst)
    if error not in UNSUPPORTED:
        return error
    # Without the flag: renaming a folder can replace only an empty folder,
    # and checking first narrows even that to a folder made just now.
    if os.path.lexists(dst):
        return errno.EEXIST
    try:
        os.rename(src, dst)
    except OSError as exc:
        return exc.errno or errno.EIO
    return 0


# The two renames of renameat2 (posembed._core, imported here: the safetensors
# module, which the NumPy twins share, imports this one): module functions, so
# that a test can take either away and run the portable way.
def _rename_exchange(a: Path, b: Path) -> int:
    from posembed import _core

    return _core.rename_exchange(os.fsencode(a), os.fsencode(b))


def _rename_noreplace(src: Path, dst: Path) -> int:
    from posembed import _core

    return _core.rename_noreplace(os.fsencode(src), os.fsencode(dst))


class FolderOutput:
    """The output rules of a sink that writes a folder: :func:`problem` before
    any work, :func:`commit` at the end."""

    # looked up when called, so that a test can replace the module's functions
    @staticmethod
    def problem(
        out: Path, inputs: Iterable[str | os.PathLike[str] | None], force: bool
    ) -> str | None:
        return problem(out, inputs, force)

    @staticmethod
    def commit(new: Path, out: Path, force: bool) -> None:
        commit(new, out, force)


# The first bytes of a Megatron indexed dataset's .idx: what marks a pair of
# files that --force may replace.
INDEX_MAGIC = b"MMIDIDX\x00\x00"


def pair_paths(prefix: Path) -> tuple[Path, Path]:
    """(PREFIX.idx, PREFIX.bin)."""
    return Path(f"{prefix}.idx"), Path(f"{prefix}.bin")


def _indexed(idx: Path) -> bool:
    """Whether ``idx`` is a regular file (no link followed) that begins with
    the indexed dataset's magic."""
    try:
        fd = os.open(idx, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.pread(fd, 9, 0) == INDEX_MAGIC
    except OSError:
        return False
    finally:
        os.close(fd)


def pair_problem(
    prefix: Path, inputs: Iterable[str | os.PathLike[str] | None], force: bool
) -> str | None:
    """Why a run may not write the indexed dataset ``PREFIX.idx`` and
    ``PREFIX.bin``, or None: checked before any work. ``force`` replaces only
    an indexed dataset (two regular files, the ``.idx`` beginning with its
    magic), never a link, a device, a FIFO, a folder, an input, or a ``.bin``
    without its ``.idx``. A ``prefix`` that names a folder is refused: its
    files would be written beside the folder, not in it."""
    if not prefix.name or prefix.name in (".", "..") or str(prefix).endswith(os.sep):
        return f"output {prefix} names no file prefix; give PREFIX for PREFIX.bin and PREFIX.idx"
    if os.path.isdir(prefix):
        return (
            f"output {prefix} is a folder; give PREFIX for PREFIX.bin and PREFIX.idx "
            f"(such as {prefix / 'data'})"
        )
    found = []
    for path in pair_paths(prefix):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return f"output {path}: {exc.strerror}"
        for given in inputs:
            if given is not None and _holds(path, given):
                return f"output {path} would replace the input {given}; write to a new prefix"
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
            what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else kind_of(st.st_mode)
            return (
                f"output {path} is {what}; posembed replaces only an indexed dataset's "
                "files; write to a new prefix"
            )
        found.append(path)
    if not found:
        return None
    idx = pair_paths(prefix)[0]
    if not _indexed(idx):
        return (
            f"output {prefix}: {found[0]} is not part of an indexed dataset ("
            f"{'no ' + idx.name if idx not in found else idx.name + ' lacks its header'}); "
            "posembed replaces only an indexed dataset; write to a new prefix"
        )
    if not force:
        return f"{idx} exists; pass --force to replace it"
    return None


# The names of a new indexed dataset's files in the run's temporary folder.
PAIR_NAMES = ("data.idx", "data.bin")


def commit_pair(tmp: Path, prefix: Path, force: bool) -> None:
    """Move the new files ``tmp/data.idx`` and ``tmp/data.bin`` to
    ``PREFIX.idx`` and ``PREFIX.bin``, replacing an indexed dataset there
    only with ``force``, then remove the folder ``tmp``.

    Never a mismatched pair: an old ``.idx`` is moved aside (next to the new
    files) first, then the ``.bin`` is renamed in, then the ``.idx``; a
    process killed between leaves a ``.bin`` without an ``.idx``, which no
    reader takes for a dataset. Raises FileExistsError when something took
    a path meanwhile (without ``force``, or not an indexed dataset's).
    """
    idx, bin_ = (tmp / name for name in PAIR_NAMES)
    new_idx, new_bin = pair_paths(prefix)
    if os.path.lexists(new_idx) or os.path.lexists(new_bin):
        if not force:
            raise FileExistsError(
                f"{prefix}.idx appeared while writing; pass --force to replace it"
            )
        problem = pair_problem(prefix, (), force)
        if problem is not None:
            raise FileExistsError(f"output {prefix} changed while writing: {problem}")
        if os.path.lexists(new_idx):
            os.rename(new_idx, temp_name(idx.parent))
        os.replace(bin_, new_bin)
    else:
        error = _move_in(bin_, new_bin)
        if error == errno.EEXIST:
            raise FileExistsError(f"{new_bin} appeared while writing; pass --force to replace it")
        if error:
            raise OSError(error, os.strerror(error), str(bin_), None, str(new_bin))
    error = _move_in(idx, new_idx)
    if error == errno.EEXIST:
        raise FileExistsError(f"{new_idx} appeared while writing; pass --force to replace it")
    if error:
        raise OSError(error, os.strerror(error), str(idx), None, str(new_idx))
    shutil.rmtree(tmp, ignore_errors=True)

"""Output paths of `posembed chunk` (and `resize`): --force replaces only what
posembed wrote, atomically, and names of any legal length work."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed.io._outdir as outdir
from posembed import cli
from posembed.corpus._chunk import ChunkError, chunk_file, prepare_chunk

ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False


def parts(*args: Any, **kw: Any) -> dict[str, Any]:
    pdask = pytest.importorskip("posembed.dask")
    import dask

    return pdask.chunk_parts(*args, scheduler=dask.get, part_tokens=40, **kw)


def chunk(*args: Any, **kw: Any) -> dict[str, Any]:
    return chunk_file(*args, quiet=True, **kw)


WRITERS = {"chunk_file": chunk, "chunk_parts": parts}


@pytest.fixture(params=list(WRITERS))
def write(request: pytest.FixtureRequest) -> Callable[..., dict[str, Any]]:
    return WRITERS[request.param]


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    np.save(tmp_path / "tokens.npy", np.arange(100, dtype=np.int32))
    np.save(tmp_path / "offsets.npy", np.array([0, 30, 100]))
    return tmp_path / "tokens.npy"


def state(folder: Path) -> dict[str, Any]:
    """Every entry under ``folder`` (links not followed): its kind and, for a
    file, its bytes, for a link, where it points."""
    found: dict[str, Any] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                found[str(path)] = ("link", os.readlink(path))
            elif stat.S_ISREG(mode):
                found[str(path)] = ("file", path.read_bytes())
            else:
                found[str(path)] = (stat.S_IFMT(mode), None)
    return found


def posembed_folder(path: Path, marker: str = "meta.json", text: str = '{"size": 8}') -> Path:
    path.mkdir()
    (path / marker).write_text(text)
    (path / "windows.npy").write_bytes(b"old")
    return path


# Each: (what to put at the output path, words the refusal must hold). All are
# refused with force=True and without.
def _device(p: Path) -> None:
    os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null of our own


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _file(p: Path) -> None:
    p.write_bytes(b"precious")


def _link_to_ours(p: Path) -> None:
    p.symlink_to(posembed_folder(p.parent / "elsewhere"))


def _link_to_file(p: Path) -> None:
    (p.parent / "precious").write_bytes(b"precious")
    p.symlink_to(p.parent / "precious")


def _dangling_link(p: Path) -> None:
    p.symlink_to(p.parent / "nowhere")


def _folder(p: Path) -> None:
    p.mkdir()
    (p / "notes.txt").write_text("mine")


def _marker_not_an_object(p: Path) -> None:
    posembed_folder(p, text="[1, 2]")


def _marker_not_json(p: Path) -> None:
    posembed_folder(p, text="{not json")


def _marker_a_fifo(p: Path) -> None:
    p.mkdir()
    os.mkfifo(p / "meta.json")


def _marker_a_folder(p: Path) -> None:
    p.mkdir()
    (p / "meta.json").mkdir()


def _marker_a_link(p: Path) -> None:
    p.mkdir()
    (p.parent / "real.json").write_text("{}")
    (p / "meta.json").symlink_to(p.parent / "real.json")


NOT_OURS = {
    "fifo": (_fifo, "is a FIFO, not a folder posembed wrote"),
    "file": (_file, "is a file, not a folder posembed wrote"),
    "link to a posembed folder": (_link_to_ours, "is a symbolic link"),
    "link to a file": (_link_to_file, "is a symbolic link"),
    "dangling link": (_dangling_link, "is a symbolic link"),
    "folder": (_folder, "is a folder posembed did not write"),
    "meta.json not an object": (_marker_not_an_object, "is a folder posembed did not write"),
    "meta.json not JSON": (_marker_not_json, "is a folder posembed did not write"),
    "meta.json a FIFO": (_marker_a_fifo, "is a folder posembed did not write"),
    "meta.json a folder": (_marker_a_folder, "is a folder posembed did not write"),
    "meta.json a link": (_marker_a_link, "is a folder posembed did not write"),
    "device": (_device, "is a character device, not a folder posembed wrote"),
}


@pytest.mark.parametrize("force", [True, False])
@pytest.mark.parametrize("kind", list(NOT_OURS))
def test_only_a_folder_posembed_wrote_is_replaced(write, tokens, kind, force):
    make, words = NOT_OURS[kind]
    if kind == "device" and not ROOT:
        pytest.skip("making a device node (mknod) needs root")
    out = tokens.parent / "out"
    make(out)
    before = state(tokens.parent)
    with pytest.raises(ChunkError, match=f"output {out} {words}") as err:
        write(tokens, out, size=8, force=force)
    assert "write to a new path" in str(err.value)
    assert state(tokens.parent) == before  # nothing written, nothing removed, no temporary


def dev_null_id() -> tuple[int, int, int, int]:
    st = os.lstat(os.devnull)
    return st.st_dev, st.st_ino, st.st_mode, st.st_rdev


# The real /dev/null goes through the checks only (chunk_file and chunk_parts
# both start with prepare_chunk, resize with its path check): a regression must
# not be able to remove it. The writers themselves meet devices made by mknod.
@pytest.mark.parametrize("force", [True, False])
def test_the_real_dev_null_is_refused_untouched(tokens, force):
    before = dev_null_id()
    with pytest.raises(ChunkError, match="output /dev/null is a character device"):
        prepare_chunk(tokens, os.devnull, size=8, force=force)
    assert dev_null_id() == before


@pytest.mark.parametrize("force", [True, False])
@pytest.mark.parametrize("where", ["the input's folder", "a folder above it", "the input"])
def test_an_output_that_holds_an_input_is_refused(write, tokens, where, force):
    inner = tokens.parent / "data" / "shards"
    inner.mkdir(parents=True)
    src = inner / "tokens.npy"
    os.replace(tokens, src)
    (tokens.parent / "data" / "meta.json").write_text("{}")  # as if posembed wrote it
    (inner / "meta.json").write_text("{}")
    out = {"the input's folder": inner, "a folder above it": inner.parent, "the input": src}[where]
    before = state(tokens.parent)
    with pytest.raises(ChunkError, match=f"output {out} would replace the input {src}"):
        write(src, out, size=8, force=force)
    assert state(tokens.parent) == before


def test_an_output_that_holds_the_offsets_is_refused(write, tokens):
    folder = posembed_folder(tokens.parent / "docs")
    offsets = folder / "offsets.npy"
    os.replace(tokens.parent / "offsets.npy", offsets)
    before = state(tokens.parent)
    with pytest.raises(ChunkError, match=f"would replace the input {offsets}"):
        write(tokens, folder, size=8, offsets_path=offsets, force=True)
    # through a link to the folder too
    (tokens.parent / "via").symlink_to(folder)
    with pytest.raises(ChunkError, match="would replace the input"):
        write(
            tokens, folder, size=8, offsets_path=tokens.parent / "via" / "offsets.npy", force=True
        )
    before[str(tokens.parent / "via")] = ("link", str(folder))
    assert state(tokens.parent) == before


def test_the_command_refuses_with_one_line(tokens, capsys):
    out = tokens.parent / "out"
    _folder(out)
    assert (
        cli.main(["chunk", str(tokens), "-o", str(out), "--size", "8", "--force", "--quiet"]) == 2
    )
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"posembed chunk: error: output {out} is a folder posembed did not write (no "
        "meta.json or index.json holding a JSON object); posembed replaces only its own "
        "outputs; write to a new path"
    ]
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("marker", ["meta.json", "index.json"])
def test_force_replaces_a_folder_posembed_wrote(write, tokens, marker):
    out = posembed_folder(tokens.parent / "out", marker)
    meta = write(tokens, out, size=16, force=True)
    assert meta["size"] == 16
    assert json.loads((out / "meta.json").read_text()) == meta
    assert not (out / "windows.npy").exists() or (out / "windows.npy").read_bytes() != b"old"
    assert sorted(p.name for p in tokens.parent.iterdir()) == ["offsets.npy", "out", "tokens.npy"]


def test_each_writer_replaces_the_others_output(tokens):
    out = tokens.parent / "out"
    parts(tokens, out, size=8)
    assert chunk(tokens, out, size=8, force=True)["windows"] == 13
    assert (out / "windows.npy").exists()
    assert not (out / "parts").exists()
    assert parts(tokens, out, size=8, force=True)["parts"] == 3
    assert not (out / "windows.npy").exists()


@pytest.mark.parametrize("length", [255, 240, 225])
def test_long_output_names_work(write, tokens, length):
    name_max = os.pathconf(tokens.parent, "PC_NAME_MAX")
    assert name_max >= length  # the file system takes the name: posembed must too
    out = tokens.parent / ("o" * length)
    assert write(tokens, out, size=8)["windows"] == 13
    assert write(tokens, out, size=16, force=True)["size"] == 16
    assert json.loads((out / "meta.json").read_text())["size"] == 16
    assert sorted(p.name for p in tokens.parent.iterdir()) == sorted(
        ["offsets.npy", "tokens.npy", out.name]
    )


# ---- when the swap is not there: rename the old output aside first ----------------


def unsupported(*_: Any) -> int:
    return errno.EINVAL


@pytest.mark.parametrize("which", ["_rename_exchange", "_rename_noreplace"])
def test_without_renameat2_outputs_are_still_written_and_replaced(
    write, tokens, monkeypatch, which
):
    monkeypatch.setattr(outdir, which, unsupported)
    out = tokens.parent / "out"
    assert write(tokens, out, size=8)["size"] == 8
    assert write(tokens, out, size=16, force=True)["size"] == 16
    assert json.loads((out / "meta.json").read_text())["size"] == 16
    with pytest.raises(ChunkError, match="exists; pass --force"):
        write(tokens, out, size=8)
    assert sorted(p.name for p in tokens.parent.iterdir()) == ["offsets.npy", "out", "tokens.npy"]


def test_without_the_swap_a_failed_rename_puts_the_old_output_back(tokens, monkeypatch):
    monkeypatch.setattr(outdir, "_rename_exchange", unsupported)
    out = tokens.parent / "out"
    chunk(tokens, out, size=8)
    before = state(tokens.parent)

    real, calls = outdir._move_in, []

    def move_in(new: Path, dst: Path) -> int:
        calls.append(dst)  # the first finds the old output; the second, after it moved aside, fails
        return real(new, dst) if len(calls) == 1 else errno.EIO

    monkeypatch.setattr(outdir, "_move_in", move_in)
    with pytest.raises(OSError, match="Input/output error"):
        chunk(tokens, out, size=16, force=True)
    assert calls == [out, out]
    assert state(tokens.parent) == before


# ---- errors and races at the moment of replacing -------------------------------------


def commit_after(monkeypatch: pytest.MonkeyPatch, action: Callable[[Path], None]) -> None:
    """Run ``action(output)`` just before the run moves its output into place."""
    real = outdir.commit

    def commit(new: Path, out: Path, force: bool) -> None:
        action(out)
        real(new, out, force)

    monkeypatch.setattr(outdir, "commit", commit)


@pytest.mark.parametrize("fallback", [False, True])
@pytest.mark.parametrize("kind", ["folder", "fifo", "file", "link to a posembed folder"])
def test_something_else_taking_the_path_meanwhile_is_put_back(
    write, tokens, monkeypatch, kind, fallback
):
    if fallback:
        monkeypatch.setattr(outdir, "_rename_exchange", unsupported)
    out = tokens.parent / "out"
    write(tokens, out, size=8)
    make = NOT_OURS[kind][0]

    def swap_in_foreign(path: Path) -> None:
        os.rename(path, tokens.parent / "was-ours")
        make(path)

    commit_after(monkeypatch, swap_in_foreign)
    with pytest.raises(FileExistsError, match="changed while writing and is not a folder"):
        write(tokens, out, size=16, force=True)
    monkeypatch.undo()
    kinds = {"folder": stat.S_IFDIR, "fifo": stat.S_IFIFO, "file": stat.S_IFREG}
    assert stat.S_IFMT(os.lstat(out).st_mode) == kinds.get(kind, stat.S_IFLNK)
    if kind == "folder":
        assert (out / "notes.txt").read_text() == "mine"
    names = {p.name for p in tokens.parent.iterdir()}
    assert not [n for n in names if n.startswith(".posembed-")]


def test_a_path_made_meanwhile_is_not_replaced_without_force(write, tokens, monkeypatch):
    out = tokens.parent / "out"
    commit_after(monkeypatch, lambda path: posembed_folder(path))
    with pytest.raises(FileExistsError, match="appeared while writing; pass --force"):
        write(tokens, out, size=8)
    assert (out / "windows.npy").read_bytes() == b"old"
    assert sorted(p.name for p in tokens.parent.iterdir()) == ["offsets.npy", "out", "tokens.npy"]


def test_what_cannot_be_put_back_is_kept_and_named(tokens, monkeypatch):
    out = tokens.parent / "out"
    chunk(tokens, out, size=8)
    real, calls = outdir._rename_exchange, []

    def exchange_once(a: Path, b: Path) -> int:
        calls.append(a)
        return real(a, b) if len(calls) == 1 else errno.EIO

    monkeypatch.setattr(outdir, "_rename_exchange", exchange_once)
    commit_after(monkeypatch, lambda path: (os.rename(path, tokens.parent / "was"), _folder(path)))
    with pytest.raises(OSError, match=r"could not be put back .* and is now at .*posembed-"):
        chunk(tokens, out, size=16, force=True)
    assert len(calls) == 2
    assert (calls[0] / "notes.txt").read_text() == "mine"  # the other folder, not removed
    assert json.loads((out / "meta.json").read_text())["size"] == 16


def test_a_failed_swap_leaves_the_old_output(write, tokens, monkeypatch):
    out = tokens.parent / "out"
    write(tokens, out, size=8)
    before = state(tokens.parent)
    monkeypatch.setattr(outdir, "_rename_exchange", lambda a, b: errno.EIO)
    with pytest.raises(OSError, match="Input/output error"):
        write(tokens, out, size=16, force=True)
    assert state(tokens.parent) == before


# ---- a run killed at any moment leaves the old output or the new one -----------------

# Imported once, then forked per run: each run replaces OUT (size 8) with a
# new output (size 16) and is SIGKILLed after its K-th change to the file
# system (a rename, a folder made or removed, a file unlinked: every step of
# moving an output into place and removing the old one), or at a random delay
# while replacing OUT over and over. The parent reports what OUT held after
# each kill.
KILLER = r"""
import json, os, random, shutil, signal, sys, time
import numpy as np
import posembed._core as core
from posembed.corpus._chunk import chunk_file

src, out, old, new = sys.argv[1:5]
mode = sys.argv[5]

def files(folder):
    return {n: open(os.path.join(folder, n), "rb").read() for n in sorted(os.listdir(folder))}

OLD, NEW = files(old), files(new)

def what_is_there():
    try:
        got = files(out)
    except OSError as exc:
        return f"unreadable: {exc}"
    return "old" if got == OLD else "new" if got == NEW else f"broken: {sorted(got)}"

def reset():
    shutil.rmtree(out, ignore_errors=True)
    for n in os.listdir(os.path.dirname(out)):
        if n.startswith(".posembed-") or ".partial" in n:
            shutil.rmtree(os.path.join(os.path.dirname(out), n), ignore_errors=True)
    shutil.copytree(old, out)

def patch(k):
    count = [0]
    targets = [(os, n) for n in ("rename", "replace", "mkdir", "rmdir", "unlink")]
    targets += [(core, n) for n in ("rename_exchange", "rename_noreplace") if hasattr(core, n)]
    for mod, name in targets:
        real = getattr(mod, name)
        def counted(*a, _real=real, **kw):
            result = _real(*a, **kw)
            count[0] += 1
            if count[0] == k:
                os.kill(os.getpid(), signal.SIGKILL)
            return result
        setattr(mod, name, counted)

def run(k):
    if k:
        patch(k)
        chunk_file(src, out, size=16, force=True, quiet=True)
    else:
        i = 0
        while True:
            i += 1
            chunk_file(src, out, size=8 if i % 2 else 16, force=True, quiet=True)

report = []
rng = random.Random(5)
for k in range(1, 60) if mode == "steps" else [0] * int(mode):
    reset()
    pid = os.fork()
    if pid == 0:
        try:
            run(k)
        finally:
            os._exit(0)
    if not k:
        time.sleep(rng.uniform(0.0, 0.1))
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    killed = os.WIFSIGNALED(status)
    report.append([k, killed, what_is_there()])
    if k and not killed:
        break
print(json.dumps(report))
"""


def kill_runs(tokens: Path, mode: str) -> list[tuple[int, bool, str]]:
    old, new = tokens.parent / "old", tokens.parent / "new"
    chunk(tokens, old, size=8)
    chunk(tokens, new, size=16)
    out = tokens.parent / "out"
    done = subprocess.run(
        [sys.executable, "-c", KILLER, str(tokens), str(out), str(old), str(new), mode],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [tuple(row) for row in json.loads(done.stdout)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks a process per kill")
def test_a_kill_at_every_step_leaves_the_old_or_the_new_output(tokens):
    report = kill_runs(tokens, "steps")
    assert report[-1][1] is False  # the last run got through every step
    assert len(report) >= 4  # a temporary folder made, two renames, the old one removed
    assert [what for _, _, what in report if what not in ("old", "new")] == []
    assert {what for _, _, what in report} == {"old", "new"}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks a process per kill")
def test_a_kill_at_random_moments_leaves_the_old_or_the_new_output(tokens):
    report = kill_runs(tokens, "30")
    assert all(killed for _, killed, _ in report)
    assert [what for _, _, what in report if what not in ("old", "new")] == []


# ---- posembed resize replaces only a regular file ------------------------------------


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    from posembed.io import _safetensors as sft

    src = tmp_path / "model.safetensors"
    sft.write_file(src, {"pos": np.arange(32, dtype=np.float32).reshape(8, 4)})
    return src


def resize(src: Path, out: Path, *more: str) -> int:
    return cli.main(["resize", str(src), "--key", "pos", "--length", "12", "-o", str(out), *more])


RESIZE_NOT_OURS = {
    "fifo": (_fifo, "is a FIFO, not a regular file"),
    "link to a file": (_link_to_file, "is a symbolic link; only a regular file is replaced"),
    "dangling link": (_dangling_link, "is a symbolic link"),
    "device": (_device, "is a character device, not a regular file"),
}


@pytest.mark.parametrize("force", [True, False])
@pytest.mark.parametrize("kind", list(RESIZE_NOT_OURS))
def test_resize_never_replaces_anything_but_a_regular_file(checkpoint, kind, force, capsys):
    make, words = RESIZE_NOT_OURS[kind]
    if kind == "device" and not ROOT:
        pytest.skip("making a device node (mknod) needs root")
    out = checkpoint.parent / "out.safetensors"
    make(out)
    before = state(checkpoint.parent)
    assert resize(checkpoint, out, *(["--force"] if force else [])) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"posembed resize: error: output {out} {words}")
    assert state(checkpoint.parent) == before


@pytest.mark.parametrize("force", [True, False])
def test_resize_refuses_dev_null_untouched(checkpoint, force):
    from posembed.checkpoint import _resize as _checkpoint

    before = dev_null_id()
    with pytest.raises(FileExistsError, match="output /dev/null is a character device"):
        _checkpoint._check_paths(checkpoint, Path(os.devnull), force)
    assert dev_null_id() == before


@pytest.mark.parametrize("kind", ["fifo", "link to a file"])
def test_resize_does_not_replace_what_took_the_path_while_writing(checkpoint, monkeypatch, kind):
    from posembed.checkpoint import _resize as _checkpoint
    from posembed.io import _safetensors

    out = checkpoint.parent / "out.safetensors"
    out.write_bytes(b"old")
    real = _safetensors.Writer.finish

    def finish(self: Any) -> None:
        real(self)
        out.unlink()
        RESIZE_NOT_OURS[kind][0](out)

    monkeypatch.setattr(_safetensors.Writer, "finish", finish)
    with pytest.raises(FileExistsError, match=f"output {out} {RESIZE_NOT_OURS[kind][1]}"):
        _checkpoint.resize_checkpoint(checkpoint, out, "pos", 12, overwrite=True)
    assert stat.S_ISFIFO(os.lstat(out).st_mode) if kind == "fifo" else out.is_symlink()
    assert not [p for p in checkpoint.parent.iterdir() if p.name.startswith(".posembed-")]


@pytest.mark.parametrize("length", [255, 240, 225])
def test_resize_to_a_long_name_works(checkpoint, length, capsys):
    out = checkpoint.parent / ("o" * (length - len(".safetensors")) + ".safetensors")
    assert len(out.name) == length
    assert resize(checkpoint, out) == 0
    assert resize(checkpoint, out, "--force") == 0
    assert sorted(p.name for p in checkpoint.parent.iterdir()) == sorted(
        [checkpoint.name, out.name]
    )

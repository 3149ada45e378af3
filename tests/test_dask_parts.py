"""posembed.dask.read_parts on crafted folders: confined to the folder, every
malformed index a ValueError that names the entry, no wait on a FIFO, no
signal when a part shrinks after the folder was read."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posembed

pytest.importorskip("dask.array")  # the test extra installs dask; posembed does not need it
import dask

import posembed.dask as pdask

from .conftest import assert_same

SIZE, STEP, PART_TOKENS = 16, 8, 500


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, posembed.Windows]:
    """A folder chunk_parts wrote (four parts), and the windows it holds."""
    root = tmp_path_factory.mktemp("parts")
    rng = np.random.default_rng(5)
    offsets = np.array([0, 700, 1300, 1900], np.int64)
    tokens = rng.integers(0, 65_535, int(offsets[-1])).astype(np.uint16)
    tokens.tofile(root / "train.bin")
    np.save(root / "offsets.npy", offsets)
    with dask.config.set(scheduler="sync"):
        pdask.chunk_parts(
            root / "train.bin",
            root / "out",
            size=SIZE,
            step=STEP,
            dtype="uint16",
            offsets_path=root / "offsets.npy",
            part_tokens=PART_TOKENS,
        )
    return root / "out", posembed.windows(tokens, SIZE, step=STEP, offsets=offsets)


@pytest.fixture
def out(written: tuple[Path, posembed.Windows], tmp_path: Path) -> Path:
    """A fresh copy of the good folder, to be broken by the test."""
    copy = tmp_path / "out"
    shutil.copytree(written[0], copy, symlinks=True)
    return copy


def edit_json(path: Path, change: Callable[[Any], Any]) -> None:
    data = json.loads(path.read_text())
    new = change(data)
    path.write_text(json.dumps(data if new is None else new))


def outside_copy(out: Path, name: str = "part-00001.npy") -> Path:
    """A valid part file outside the folder (another part's rows, correct header)."""
    stray = out.parent / "x.npy"
    shutil.copyfile(out / "parts" / name, stray)
    return stray


def test_the_good_folder_reads_back(out, written):
    got = pdask.read_parts(out)
    want = written[1]
    assert len(got.tokens.parts) == 4
    assert_same(np.asarray(got.tokens), want.tokens)
    for name in ("starts", "lengths", "documents", "doc_offsets"):
        assert_same(getattr(got, name), getattr(want, name))
    assert (got.size, got.step, got.tail) == (want.size, want.step, want.tail)
    # every way of indexing reads the same rows
    for row in range(len(want)):
        assert_same(got.tokens[row], want.tokens[row])
        assert_same(got.tokens[[row]][0], want.tokens[row])
    rows = np.random.default_rng(0).integers(-len(want), len(want), (7, 9))
    assert_same(got.tokens[rows], want.tokens[rows])
    assert_same(got.tokens[rows, 3], want.tokens[rows, 3])
    assert_same(got.tokens[5:200], want.tokens[5:200])  # across parts
    assert_same(got.tokens[::-3, 2:5], want.tokens[::-3, 2:5])
    assert got.tokens[7, 4] == want.tokens[7, 4]
    assert got.tokens[7, 4].dtype == want.tokens.dtype
    assert_same(got.tokens.to_dask().compute(scheduler="sync"), want.tokens)
    assert_same(got.tokens.parts[1][2:9], np.asarray(got.tokens.parts[1])[2:9])
    # sent to another process (a Dask worker), the parts travel as their rows
    again = pickle.loads(pickle.dumps(got.tokens))
    assert_same(again[rows], want.tokens[rows])
    assert_same(np.asarray(again), want.tokens)


def _drop(key: str) -> Callable[[Any], Any]:
    def change(d: Any) -> None:
        del d[key]

    return change


def _set(key: str, value: Any) -> Callable[[Any], Any]:
    return lambda d: d.__setitem__(key, value)


def _part(i: int, key: str, value: Any) -> Callable[[Any], Any]:
    return lambda d: d["parts"][i].__setitem__(key, value)


def _part_drop(i: int, key: str) -> Callable[[Any], Any]:
    def change(d: Any) -> None:
        del d["parts"][i][key]

    return change


# (change to index.json, what the message must name)
BAD_INDEX: dict[str, tuple[Callable[[Any], Any], str]] = {
    "a list": (lambda d: [d], "must be a JSON object"),
    "version true": (_set("version", True), "version True"),
    "no parts": (_drop("parts"), "parts must be a list"),
    "parts an object": (_set("parts", {"a": 1}), "parts must be a list"),
    "parts a string": (_set("parts", "parts/part-00000.npy"), "parts must be a list"),
    "a part a number": (lambda d: d["parts"].__setitem__(1, 7), r"parts\[1\] must be an object"),
    "a part a list": (lambda d: d["parts"].__setitem__(2, []), r"parts\[2\] must be an object"),
    "no file": (_part_drop(1, "file"), r"parts\[1\]\.file"),
    "file an int": (_part(1, "file", 3), r"parts\[1\]\.file"),
    "file null": (_part(0, "file", None), r"parts\[0\]\.file"),
    "file up and out": (_part(1, "file", "../x.npy"), r"parts\[1\]\.file"),
    "file up via parts": (_part(1, "file", "parts/../../x.npy"), r"parts\[1\]\.file"),
    "file dotdot name": (_part(1, "file", "parts/..npy"), r"parts\[1\]\.file"),
    "file in a subfolder": (_part(1, "file", "parts/sub/part-00001.npy"), r"parts\[1\]\.file"),
    "file beside parts": (_part(1, "file", "starts.npy"), r"parts\[1\]\.file"),
    "file not .npy": (_part(1, "file", "parts/part-00001"), r"parts\[1\]\.file"),
    "file with NUL": (_part(1, "file", "parts/part-00001.npy\x00"), r"parts\[1\]\.file"),
    "file twice": (_part(2, "file", "parts/part-00001.npy"), r"parts\[2\]\.file.*earlier"),
    "no windows": (_part_drop(1, "windows"), r"parts\[1\]\.windows"),
    "windows of one": (_part(1, "windows", [3]), r"parts\[1\]\.windows"),
    "windows of three": (_part(1, "windows", [3, 4, 5]), r"parts\[1\]\.windows"),
    "windows a string": (_part(1, "windows", "0-9"), r"parts\[1\]\.windows"),
    "windows reversed": (_part(0, "windows", [9, 0]), r"parts\[0\]\.windows"),
    "windows negative": (_part(0, "windows", [-1, 9]), r"parts\[0\]\.windows"),
    "windows of floats": (_part(0, "windows", [0.0, 9.0]), r"parts\[0\]\.windows"),
    "windows of bools": (_part(0, "windows", [False, True]), r"parts\[0\]\.windows"),
    "windows with a gap": (
        lambda d: d["parts"][1].__setitem__("windows", [d["parts"][1]["windows"][0] + 1, 999]),
        r"parts\[1\] starts at window",
    ),
    "windows not from 0": (
        lambda d: d["parts"][0].__setitem__("windows", [1, d["parts"][0]["windows"][1]]),
        r"parts\[0\] starts at window 1",
    ),
    "no tokens": (_part_drop(2, "tokens"), r"parts\[2\]\.tokens"),
    "tokens of strings": (_part(2, "tokens", ["0", "5"]), r"parts\[2\]\.tokens"),
    "tokens with a gap": (_part(2, "tokens", [1001, 1500]), r"parts\[2\] starts at .* token 1001"),
    "no dtype": (_drop("dtype"), "dtype must name an integer"),
    "dtype float": (_set("dtype", "<f2"), "dtype must name an integer"),
    "dtype object": (_set("dtype", "O"), "dtype must name an integer"),
    "dtype nonsense": (_set("dtype", "not a dtype"), "dtype must name an integer"),
    "dtype a number": (_set("dtype", 2), "dtype must name an integer"),
    "dtype structured": (_set("dtype", "<u2,<u2"), "dtype must name an integer"),
    "no size": (_drop("size"), "size must be an integer >= 1"),
    "size 0": (_set("size", 0), "size must be an integer >= 1"),
    "size a string": (_set("size", "16"), "size must be an integer >= 1"),
    "size true": (_set("size", True), "size must be an integer >= 1"),
    "size other": (_set("size", 8), "size is 16; index.json says 8"),
}


@pytest.mark.parametrize("case", list(BAD_INDEX))
def test_a_malformed_index_is_a_value_error_naming_the_entry(out, case):
    change, names = BAD_INDEX[case]
    outside_copy(out)  # a file the index might reach for
    (out / "parts" / "sub").mkdir()
    shutil.copyfile(out / "parts" / "part-00001.npy", out / "parts" / "sub" / "part-00001.npy")
    edit_json(out / "index.json", change)
    with pytest.raises(ValueError, match=names):
        pdask.read_parts(out)


BAD_TEXT = {
    "not JSON": (b"{", "not valid JSON"),
    "NaN": (b'{"version": NaN}', r"not valid JSON \(NaN is not JSON"),
    "a repeated key": (b'{"version": 1, "version": 1}', r"not valid JSON \(duplicate key"),
    "deep nesting": (b"[" * 20_000 + b"]" * 20_000, "nests 20000 levels deep"),
    "not UTF-8": (b'{"version": "\xff"}', "not UTF-8"),
    "empty": (b"", "not valid JSON"),
}


@pytest.mark.parametrize("case", list(BAD_TEXT))
@pytest.mark.parametrize("name", ["index.json", "meta.json"])
def test_json_that_is_not_strict_json_is_refused(out, case, name):
    text, problem = BAD_TEXT[case]
    (out / name).write_bytes(text)
    with pytest.raises(ValueError, match=f"{name}: {problem}"):
        pdask.read_parts(out)


BAD_META: dict[str, tuple[Callable[[Any], Any], str]] = {
    "a list": (lambda d: [d], "must be a JSON object"),
    "other windows": (lambda d: d.__setitem__("windows", d["windows"] + 1), "windows is"),
    "no windows": (_drop("windows"), "windows is None"),
    "other size": (_set("size", 17), "size is 17"),
    "size a string": (_set("size", "16"), "size is '16'"),
    "other tokens": (lambda d: d.__setitem__("tokens", d["tokens"] - 1), "tokens is"),
    "other parts": (_set("parts", 3), "parts is 3"),
    "step a list": (_set("step", [8]), "step must be an integer"),
    "step 0": (_set("step", 0), "step must be an integer"),
    "tail unknown": (_set("tail", "wrap"), "tail must be one of"),
    "documents negative": (_set("documents", -1), "documents must be an integer"),
    "documents other": (_set("documents", 4), "doc_offsets.npy: holds"),
}


@pytest.mark.parametrize("case", list(BAD_META))
def test_meta_disagreeing_with_the_index_is_refused(out, case):
    change, names = BAD_META[case]
    edit_json(out / "meta.json", change)
    with pytest.raises(ValueError, match=f"meta.json.*{names}|{names}"):
        pdask.read_parts(out)


def test_a_part_elsewhere_is_never_read(out, written):
    stray = outside_copy(out)
    cases = {
        "absolute": str(stray),
        "up": "../x.npy",
        "up from parts": "parts/../../x.npy",
        "absolute in parts": f"parts/{stray}",
    }
    for file in cases.values():
        copy = out.parent / "case"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(out, copy, symlinks=True)
        (copy / "parts" / "part-00000.npy").unlink()
        edit_json(copy / "index.json", _part(0, "file", file))
        with pytest.raises(ValueError, match=r"index.json: parts\[0\]\.file"):
            pdask.read_parts(copy)


def test_symlinks_are_never_followed(out):
    stray = outside_copy(out)
    part = out / "parts" / "part-00001.npy"
    part.unlink()
    part.symlink_to(stray)  # a valid part of the right shape, outside
    with pytest.raises(ValueError, match=r"part-00001.npy: a symbolic link"):
        pdask.read_parts(out)
    part.unlink()
    part.symlink_to("part-00001-real.npy")  # even to a file inside
    shutil.copyfile(stray, out / "parts" / "part-00001-real.npy")
    with pytest.raises(ValueError, match=r"part-00001.npy: a symbolic link"):
        pdask.read_parts(out)


@pytest.mark.parametrize("name", ["index.json", "meta.json", "starts.npy", "doc_offsets.npy"])
def test_the_folders_own_files_are_never_symlinks(out, name):
    elsewhere = out.parent / name
    shutil.move(out / name, elsewhere)
    (out / name).symlink_to(elsewhere)
    with pytest.raises(ValueError, match=f"{name}: a symbolic link"):
        pdask.read_parts(out)


def test_a_symlinked_parts_folder_is_refused(out):
    shutil.move(out / "parts", out.parent / "elsewhere")
    (out / "parts").symlink_to(out.parent / "elsewhere")
    with pytest.raises(ValueError, match="parts: not a folder of parts"):
        pdask.read_parts(out)


def test_the_folder_itself_may_be_a_symlink(out, written):
    link = out.parent / "link"
    link.symlink_to(out)
    assert_same(np.asarray(pdask.read_parts(link).tokens), written[1].tokens)


def read_within_bounds(out: Path, fifo: Path) -> BaseException | None:
    """read_parts(out) in a thread: it must end (return or raise) without
    anyone writing to the FIFO; if it does not, the FIFO is opened for
    writing and closed to release it, and the test fails."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            pdask.read_parts(out)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    reader.join(timeout=20)
    if reader.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # EOF for the blocked reader
        reader.join()
        pytest.fail(f"read_parts waited on the FIFO {fifo.name}")
    return outcome[0]


@pytest.mark.parametrize("name", ["parts/part-00002.npy", "starts.npy", "index.json"])
def test_a_fifo_is_refused_without_waiting(out, name):
    (out / name).unlink()
    os.mkfifo(out / name)
    error = read_within_bounds(out, out / name)
    assert isinstance(error, ValueError), error
    assert f"{Path(name).name}: not a regular file" in str(error)


def test_a_directory_as_part_is_refused(out):
    (out / "parts" / "part-00002.npy").unlink()
    (out / "parts" / "part-00002.npy").mkdir()
    with pytest.raises(ValueError, match=r"part-00002.npy: not a regular file"):
        pdask.read_parts(out)


def test_a_missing_part_or_layout_array_is_refused(out):
    (out / "parts" / "part-00003.npy").unlink()
    with pytest.raises(ValueError, match=r"part-00003.npy: cannot be opened"):
        pdask.read_parts(out)
    shutil.rmtree(out / "parts")
    with pytest.raises(ValueError, match="parts: not a folder of parts"):
        pdask.read_parts(out)


def test_the_index_dtype_must_be_the_parts_dtype(out, written):
    # the parts rewritten as int16 with the same bytes; the index still says <u2
    for part in sorted((out / "parts").iterdir()):
        np.save(part, np.load(part).view(np.int16))
    with pytest.raises(
        ValueError, match=r"part-00000.npy: holds .* of <i2; index.json says .* <u2"
    ):
        pdask.read_parts(out)
    # and the other way round: the index changed, the parts not
    edit_json(out / "index.json", _set("dtype", "<i2"))
    got = pdask.read_parts(out)  # now they agree: one value whatever the indexing
    assert_same(got.tokens[19], got.tokens[[19]][0])
    assert_same(np.asarray(got.tokens), written[1].tokens.view(np.int16))


@pytest.mark.parametrize(
    "rows",
    [
        lambda a: a[:-1],  # a window short
        lambda a: a[:, :-1],  # a token short
        lambda a: np.concatenate([a, a[:1]]),  # a window more
        lambda a: a.reshape(-1),  # 1-D
        lambda a: np.asfortranarray(a),  # Fortran order
    ],
    ids=["short", "narrow", "long", "flat", "fortran"],
)
def test_a_part_of_another_shape_is_refused(out, rows):
    part = out / "parts" / "part-00001.npy"
    np.save(part, rows(np.load(part)))
    with pytest.raises(ValueError, match=r"part-00001.npy: holds .*; index.json says"):
        pdask.read_parts(out)


@pytest.mark.parametrize(
    "header",
    [b"", b"not a numpy file", b"\x93NUMPY\x01\x00\x10\x00{'descr': '<u2'}    \n"],
    ids=["empty", "not npy", "bad header"],
)
def test_a_part_that_is_no_npy_file_is_refused(out, header):
    (out / "parts" / "part-00001.npy").write_bytes(header)
    with pytest.raises(ValueError, match=r"part-00001.npy: not a valid .npy file"):
        pdask.read_parts(out)


def test_a_truncated_part_is_refused(out):
    part = out / "parts" / "part-00002.npy"
    os.truncate(part, part.stat().st_size - 1)
    with pytest.raises(ValueError, match=r"part-00002.npy: not a valid .npy file.*needs"):
        pdask.read_parts(out)


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("starts", lambda a: a.astype(np.int32)),
        ("lengths", lambda a: a[:-1]),
        ("documents", lambda a: a.astype(">i8")),
        ("doc_offsets", lambda a: a[None]),
        ("starts", lambda a: a.astype(np.uint64)),
    ],
)
def test_layout_arrays_must_be_1d_int64_of_the_index_length(out, name, change):
    np.save(out / f"{name}.npy", change(np.load(out / f"{name}.npy")))
    with pytest.raises(ValueError, match=f"{name}.npy: holds"):
        pdask.read_parts(out)


SHRINK = """
import os, sys
import numpy as np
import posembed.dask as pdask

out, how = sys.argv[1], sys.argv[2]
got = pdask.read_parts(out)
part = os.path.join(out, "parts", "part-00001.npy")
first = len(got.tokens.parts[0])
if how == "vanish":
    os.truncate(part, 0)
    os.unlink(part)
else:
    os.truncate(part, os.path.getsize(part) // 2)
for read in (
    lambda: got.tokens[first + len(got.tokens.parts[1]) - 1],
    lambda: got.tokens[[first + len(got.tokens.parts[1]) - 1]],
    lambda: got.tokens[first:],
    lambda: np.asarray(got.tokens),
    lambda: got.tokens.to_dask().compute(scheduler="threads"),
):
    try:
        read()
        print("read")
    except ValueError as exc:
        print("ValueError", exc)
print(np.asarray(got.tokens[: first]).shape)  # the other parts still read
"""


@pytest.mark.parametrize("how", ["shrink", "vanish"])
def test_a_part_that_shrinks_after_reading_is_a_value_error_not_a_signal(out, how):
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SHRINK), str(out), how],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stderr[-2000:]}"
    lines = done.stdout.splitlines()
    assert len(lines) == 6, done.stdout
    for line in lines[:5]:
        assert line.startswith("ValueError")
        assert "part-00001.npy: changed while reading" in line
    first = json.loads((out / "index.json").read_text())["parts"][0]["windows"][1]
    assert lines[5] == f"({first}, {SIZE})"

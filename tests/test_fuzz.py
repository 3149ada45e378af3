"""The fuzz harness (fuzz/fuzz_posembed.py and its package fuzz/posembed_fuzz): a
fixed corpus through the ordinary suite, and proof that the harness catches the
bugs it is there to catch."""

from __future__ import annotations

import argparse
import base64
import dataclasses
import gc
import importlib.util
import itertools
import os
import re
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import posembed
from posembed.checkpoint import _model_folder
from posembed.corpus import _chunk, _source_arrow

HARNESS = Path(__file__).resolve().parents[1] / "fuzz" / "fuzz_posembed.py"
CORPUS_SEED = 20261129
SUMMARY = re.compile(r"^fuzz: (\d+) inputs in [0-9.]+ s, no failures$")


@pytest.fixture(scope="module")
def fuzz() -> Iterator[ModuleType]:
    """The script, loaded by its path as CI runs it; its attributes are the
    harness's modules (fuzz.runner, fuzz.calls, fuzz.races, fuzz.files, ...),
    each patched where it is read."""
    spec = importlib.util.spec_from_file_location("fuzz_posembed", HARNESS)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_fixed_corpus_passes_and_reaches_every_function(fuzz):
    before = fuzz.common.STATS.outcomes.copy()
    for _, data in itertools.islice(fuzz.runner.plain_inputs(CORPUS_SEED), 1000):
        fuzz.runner.TestOneInput(data)
    seen = fuzz.common.STATS.outcomes - before
    assert sum(seen.values()) == 1000
    kinds = {key.rsplit(": ", 1)[1] for key in seen}
    # results compared with the twins, and every kind of refusal
    assert {"ok", "TypeError", "ValueError", "IndexError"} <= kinds
    called = {key.rsplit(": ", 1)[0] for key in seen}
    public = {"gather", "gather_backward", "interpolate", "lerp", "extend", "resample_grid"}
    public |= {"embed", "dropout_mask", "windows", "stitch", "similarity", "Windows.owner"}
    public |= {"window_layout", "WindowLayout.cut", "LearnedPositionEmbedding", "set_num_threads"}
    assert public <= called
    assert any(name.startswith("LearnedPositionEmbedding.from_table(...).") for name in called)


def test_each_target_is_reached_by_its_first_byte(fuzz):
    for name in fuzz.calls.TARGET_NAMES:
        call, _ = fuzz.calls.decode(fuzz.calls.input_for(name, b"\x01\x02\x03"))
        if name in ("Windows(by hand)", "LearnedPositionEmbedding methods"):
            continue  # these name the method they call
        assert call.name == name


def test_the_same_input_is_the_same_call(fuzz):
    _, data = next(fuzz.runner.plain_inputs(CORPUS_SEED, 7))
    first, second = fuzz.calls.decode(data)[0], fuzz.calls.decode(data)[0]
    assert first.describe() == second.describe()


def test_a_huge_size_stand_in_has_the_form_of_the_size_passed(fuzz):
    # dropout_mask's shape: an int, a list, an array or a tuple; the twin gets
    # the same form with each size >= 2^62 made 1, and nothing else changed
    # (a stand-in built from sizes the call never got once failed a good call)
    seen = set()
    for _, data in itertools.islice(fuzz.runner.plain_inputs(CORPUS_SEED), 6000):
        call, _ = fuzz.calls.decode(fuzz.calls.input_for("dropout_mask", data))
        if "shape" not in call.huge:
            continue
        shape = next(arg.value for label, arg, _ in call.args if label == "shape")
        stand_in = call.huge["shape"].value
        assert type(stand_in) is type(shape)
        many = (tuple, list, np.ndarray)
        sizes = list(shape) if isinstance(shape, many) else [shape]
        small = list(stand_in) if isinstance(stand_in, many) else [stand_in]
        assert any(fuzz.common._is_huge(x) for x in sizes)
        assert small == [1 if fuzz.common._is_huge(x) else x for x in sizes]
        seen.add(type(shape))
    assert {int, tuple, list} <= seen
    # the input that found it
    fuzz.runner.TestOneInput(base64.b64decode("FdLb+wf7ANsAAAD//xgYGBgYGBj/Dw=="))


# ------------------------------------------------------------ planted bugs


def _flip_last_byte(real: Callable[..., Any]) -> Callable[..., Any]:
    def wrong(*args: Any, **kw: Any) -> Any:
        result = real(*args, **kw)
        if result.size:
            result.reshape(-1).view(np.uint8)[-1] ^= 0x55
        return result

    return wrong


def _raise_runtime_error(real: Callable[..., Any]) -> Callable[..., Any]:
    def crash(*args: Any, **kw: Any) -> Any:
        real(*args, **kw)
        raise RuntimeError("planted")

    return crash


def _overwrite_table(real: Callable[..., Any]) -> Callable[..., Any]:
    def scribble(table: Any, *args: Any, **kw: Any) -> Any:
        result = real(table, *args, **kw)
        t = table
        if isinstance(t, np.ndarray) and t.flags.writeable and t.flags.c_contiguous and t.size:
            t.view(np.uint8).reshape(-1)[0] ^= 0xFF  # normalised in place, say
        return result

    return scribble


def _write_out_then_fail(real: Callable[..., Any]) -> Callable[..., Any]:
    def half_done(*args: Any, out: Any = None, **kw: Any) -> Any:
        if isinstance(out, np.ndarray) and out.flags.writeable and out.size:
            out.reshape(-1).view(np.uint8)[:1] = 0
            raise ValueError("planted, after writing out=")
        return real(*args, out=out, **kw)

    return half_done


def _other_error_kind(real: Callable[..., Any]) -> Callable[..., Any]:
    def retyped(*args: Any, **kw: Any) -> Any:
        try:
            return real(*args, **kw)
        except IndexError as exc:
            raise ValueError(str(exc)) from None

    return retyped


PLANTED = {
    "wrong result": ("interpolate", _flip_last_byte, "values differ"),
    "foreign exception": ("lerp", _raise_runtime_error, "posembed raised RuntimeError"),
    "input changed": ("similarity", _overwrite_table, "changed its input 'table'"),
    # (an out= that aliases an input shows as a changed input)
    "out= written before an error": (
        "gather",
        _write_out_then_fail,
        "wrote to out=|changed its input",
    ),
    "another exception kind": ("gather_backward", _other_error_kind, "the twin IndexError"),
}


def _fuzz(fuzz: ModuleType, name: str, count: int) -> None:
    """count inputs that all call the public function ``name``."""
    for _, data in itertools.islice(fuzz.runner.plain_inputs(CORPUS_SEED), count):
        fuzz.runner.TestOneInput(fuzz.calls.input_for(name, data))


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_planted_bug_is_caught(fuzz, monkeypatch, case):
    name, plant, message = PLANTED[case]
    monkeypatch.setattr(posembed, name, plant(getattr(posembed, name)))
    with pytest.raises(fuzz.common.FuzzFailure, match=message):
        _fuzz(fuzz, name, 400)


def _mask_of_row_zero(real: Callable[..., Any]) -> Callable[..., Any]:
    """embed that checks first_row, then gives the mask of a batch on its own."""

    def wrong(*args: Any, **kw: Any) -> Any:
        real(*args, **kw)
        return real(*args, **{**kw, "first_row": 0})

    return wrong


def _shorter_windows(real: Callable[..., Any]) -> Callable[..., Any]:
    def wrong(*args: Any, **kw: Any) -> Any:
        layout = real(*args, **kw)
        return dataclasses.replace(layout, lengths=layout.lengths // 2)

    return wrong


# Planted in what the new public names call: (where, name, plant, the target
# whose inputs reach it, how the harness reports it)
PLANTED_NEW = {
    "embed's first_row ignored by its mask": (
        posembed,
        "embed",
        _mask_of_row_zero,
        "embed",
        "values differ",
    ),
    "a layout's lengths wrong": (
        posembed,
        "window_layout",
        _shorter_windows,
        "window_layout",
        "WindowLayout.lengths: values differ",
    ),
    "a cut row wrong": (
        posembed.WindowLayout,
        "cut",
        _flip_last_byte,
        "WindowLayout.cut",
        "values differ",
    ),
}


@pytest.mark.parametrize("case", sorted(PLANTED_NEW))
def test_planted_bug_in_the_layout_and_first_row_is_caught(fuzz, monkeypatch, case):
    where, name, plant, target, message = PLANTED_NEW[case]
    monkeypatch.setattr(where, name, plant(getattr(where, name)))
    with pytest.raises(fuzz.common.FuzzFailure, match=message):
        _fuzz(fuzz, target, 400)


def test_a_known_bug_is_tolerated_only_where_it_matches(fuzz, monkeypatch):
    # a planted "bug" that a KNOWN_BUGS entry claims is counted, not raised
    seen = []
    bug = fuzz.common.KnownBug("planted", "test", lambda o: seen.append(o.problem) or True)
    monkeypatch.setattr(fuzz.common, "KNOWN_BUGS", [bug])
    monkeypatch.setattr(posembed, "interpolate", _flip_last_byte(posembed.interpolate))
    before = fuzz.common.STATS.known["planted"]
    _fuzz(fuzz, "interpolate", 100)
    assert fuzz.common.STATS.known["planted"] > before
    assert "mismatch" in seen


# ------------------------------------------------------------ the command line


def _run(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(HARNESS), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return done.stdout.splitlines()


def test_plain_driver_prints_the_count(tmp_path):
    lines = _run("--engine", "plain", "--runs", "40", "--artifact-prefix", f"{tmp_path}/")
    match = SUMMARY.match(lines[-1])
    assert match is not None, lines[-1]
    assert match.group(1) == "40"
    assert list(tmp_path.iterdir()) == []  # no failing input saved


def test_atheris_driver_prints_the_count(tmp_path):
    # a CI job that installs atheris sets POSEMBED_REQUIRE_ATHERIS=1: a missing
    # atheris then fails here instead of skipping
    if os.environ.get("POSEMBED_REQUIRE_ATHERIS") == "1":
        import atheris  # noqa: F401
    else:
        pytest.importorskip("atheris")
    lines = _run("--engine", "atheris", "--runs", "300", "--artifact-prefix", f"{tmp_path}/")
    match = SUMMARY.match(lines[-1])
    assert match is not None, lines[-1]
    assert match.group(1) == "300"


def test_hostile_modes_give_libfuzzer_room_for_atheris_own_references(fuzz, monkeypatch):
    args = argparse.Namespace(timeout=60, artifact_prefix="./", seconds=30, runs=0, seed=7)
    limit = f"-rss_limit_mb={fuzz.runner.HOSTILE_RSS_LIMIT_MB}"
    for name in fuzz.runner.MODES:
        monkeypatch.setattr(fuzz.runner, "MODE", name)
        flags = fuzz.runner.libfuzzer_flags(args, [])
        assert flags[:2] == ["-timeout=60", "-artifact_prefix=./"]
        assert "-max_total_time=30" in flags
        assert "-seed=7" in flags
        assert (limit in flags) == (name != "calls")
        assert not any(
            f.startswith("-rss_limit_mb=")
            for f in fuzz.runner.libfuzzer_flags(args, ["-rss_limit_mb=100"])
        )


def test_bound_memory_collects_the_inputs_cycles(fuzz, monkeypatch):
    class Node:
        pass

    gc_was_on = gc.isenabled()
    gc.disable()  # only _bound_memory may collect the cycle
    try:
        node = Node()
        node.self, node.rows = node, np.ones(1 << 20)  # a cycle holding 8 MB
        alive = weakref.ref(node)
        del node
        monkeypatch.setattr(fuzz.runner, "RSS_COLLECT", 1 << 60)  # not grown enough: kept
        fuzz.runner._bound_memory()
        assert alive() is not None
        monkeypatch.setattr(fuzz.runner, "RSS_COLLECT", -(1 << 60))  # grown: collected
        fuzz.runner._bound_memory()
        assert alive() is None
    finally:
        if gc_was_on:
            gc.enable()


def test_saved_inputs_are_rerun(tmp_path):
    paths = []
    for i, data in zip(range(3), [b"", b"\x05\x01\x02", bytes(range(200))], strict=True):
        path = tmp_path / f"crash-{i}"
        path.write_bytes(data)
        paths.append(str(path))
    lines = _run("--engine", "plain", *paths)
    assert SUMMARY.match(lines[-1]).group(1) == "3"


# ------------------------------------------------------------ the hostile modes


@pytest.fixture
def mode(fuzz, monkeypatch):
    """Sets the harness's --mode for one test."""

    def set_mode(name: str) -> None:
        monkeypatch.setattr(fuzz.runner, "MODE", name)

    return set_mode


def _mode_inputs(fuzz: ModuleType, first: list[str], pick: str, count: int) -> Iterator[bytes]:
    """count inputs whose first byte picks ``pick`` from ``first``."""
    for _, data in itertools.islice(fuzz.runner.plain_inputs(CORPUS_SEED), count):
        yield bytes([first.index(pick)]) + data


def _feed(fuzz: ModuleType, inputs: Iterator[bytes]) -> None:
    for data in inputs:
        fuzz.runner.TestOneInput(data)


def test_race_corpus_passes_and_reaches_every_kernel(fuzz, mode):
    mode("race")
    before = fuzz.common.STATS.outcomes.copy()
    for kernel in fuzz.races.RACE_KERNELS:
        for data in _mode_inputs(fuzz, fuzz.races.RACE_KERNELS, kernel, 3):
            fuzz.runner.TestOneInput(data)
    seen = fuzz.common.STATS.outcomes - before
    kernels = {key.rsplit(": ", 1)[0].removeprefix("race ") for key in seen}
    assert kernels == set(fuzz.races.RACE_KERNELS)
    expected = {"windows", "Windows.owner", "stitch", "window_layout", "WindowLayout.cut"}
    expected |= {"PackPlan", "indexed pair"}  # hand-built plans, a pair replaced while opened
    if posembed_dask_installed():
        expected |= {"window block", "stitch block", "embed block"}
    assert expected == kernels


def posembed_dask_installed() -> bool:
    return importlib.util.find_spec("dask") is not None


def test_the_race_writer_rewrites_the_arrays_while_the_call_runs(fuzz, monkeypatch):
    # a stand-in kernel that releases the GIL for a while, as the real ones do
    counts = []

    def slow_windows(tokens: Any, size: int, **kw: Any) -> Any:
        before = fuzz.races.LAST_WRITER.writes
        threading.Event().wait(0.05)
        counts.append(fuzz.races.LAST_WRITER.writes - before)

    monkeypatch.setattr(posembed, "windows", slow_windows)
    monkeypatch.setattr(fuzz.runner, "MODE", "race")
    _feed(fuzz, _mode_inputs(fuzz, fuzz.races.RACE_KERNELS, "windows", 3))
    assert len(counts) == 3
    assert all(n > 0 for n in counts), counts


def test_the_race_writer_leaves_stitch_a_corpus_of_its_size(fuzz, monkeypatch):
    # stitch's result has a row per token of its doc_offsets: a last offset
    # rewritten to 2^31 - 1 is a valid corpus of 2^31 - 1 tokens (tens of GiB
    # of result), not a race to refuse, so those offsets get values that are
    # refused wherever they land, or that fit; the other arrays get them all.
    pools: dict[str, set[tuple[int, ...]]] = {}
    scribble = fuzz.races._scribble

    def recorded(
        r: Any, label: str, array: np.ndarray, ints: list[int] = fuzz.races.RACE_INTS
    ) -> Any:
        pools.setdefault(label, set()).add(tuple(ints))
        return scribble(r, label, array, ints)

    monkeypatch.setattr(fuzz.races, "_scribble", recorded)
    monkeypatch.setattr(fuzz.runner, "MODE", "race")
    _feed(fuzz, _mode_inputs(fuzz, fuzz.races.RACE_KERNELS, "stitch", 3))
    assert pools["doc_offsets"] == {tuple(fuzz.races.RACE_SIZING_INTS)}
    assert 2**31 - 1 not in fuzz.races.RACE_SIZING_INTS
    assert 1 << 40 not in fuzz.races.RACE_SIZING_INTS
    for label in ("starts", "lengths", "documents"):
        assert pools[label] == {tuple(fuzz.races.RACE_INTS)}


def test_race_mode_catches_an_exception_of_another_kind(fuzz, monkeypatch):
    def crash(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("planted")

    monkeypatch.setattr(posembed, "window_layout", crash)
    monkeypatch.setattr(fuzz.runner, "MODE", "race")
    inputs = _mode_inputs(fuzz, fuzz.races.RACE_KERNELS, "window_layout", 2)
    with pytest.raises(fuzz.common.FuzzFailure, match="window_layout raised RuntimeError"):
        _feed(fuzz, inputs)


def test_files_corpus_passes_and_reaches_every_reader(fuzz, mode):
    mode("files")
    before = fuzz.common.STATS.outcomes.copy()
    for kind in fuzz.files.FILE_KINDS:
        for data in _mode_inputs(fuzz, fuzz.files.FILE_KINDS, kind, 60):
            fuzz.runner.TestOneInput(data)
    seen = fuzz.common.STATS.outcomes - before
    readers = {key.rsplit(": ", 1)[0] for key in seen}
    expected = {"files safetensors resize_checkpoint", "files safetensors posembed resize"}
    expected |= {"files npy chunk_file", "files npy chunk_file offsets", "files npy posembed chunk"}
    expected |= {"files npy posembed chunk --offsets"}
    if posembed_dask_installed():
        expected.add("files parts")
    # the model folders and Arrow corpora (safetensors and pyarrow: the test extra)
    expected |= {"files folder resize_checkpoint", "files folder posembed resize"}
    expected |= {"files arrow chunk_file", "files arrow posembed chunk"}
    assert expected <= readers
    for reader in ("folder", "arrow"):  # each reader accepts valid input and refuses crafted
        outcomes = {key.rsplit(": ", 1)[1] for key in seen if key.startswith(f"files {reader} ")}
        assert {"ok", "ValueError", "exit 2"} <= outcomes, (reader, outcomes)
    # valid files read, crafted ones refused, by Python and by the command
    kinds = {key.rsplit(": ", 1)[1] for key in seen}
    assert {"ok", "ValueError", "exit 2"} <= kinds


def test_the_same_files_input_is_the_same_file(fuzz, tmp_path):
    _, data = next(fuzz.runner.plain_inputs(CORPUS_SEED, 11))
    made = []
    for k in range(2):
        r = fuzz.common.Reader(bytes([1]) + data)
        folder = tmp_path / str(k)
        folder.mkdir()
        made.append(
            fuzz.files_headers._npy_file(r, folder / "t.npy", np.arange(9)).path.read_bytes()
        )
    assert made[0] == made[1]


def _raise_key_error(*args: Any, **kw: Any) -> Any:
    raise KeyError("planted")


# (where, name, the files kind whose inputs reach it, how the harness reports it)
PLANTED_FILES = {
    "resize raises KeyError": (posembed, "resize_checkpoint", "safetensors", "raised KeyError"),
    "chunk raises KeyError": ("chunk_file", None, "npy", "raised KeyError"),
    "the command ends with a traceback": (
        "cli._resize",
        None,
        "safetensors",
        "ended with a traceback: KeyError",
    ),
}


@pytest.mark.parametrize("case", sorted(PLANTED_FILES))
def test_files_mode_catches_a_planted_bug(fuzz, monkeypatch, case):
    where, name, kind, message = PLANTED_FILES[case]
    if where == "chunk_file":
        monkeypatch.setattr(fuzz.files_headers, "chunk_file", _raise_key_error)
    elif where == "cli._resize":  # the resize command's own run, as the parser finds it
        monkeypatch.setattr(fuzz.files_common.cli._resize, "run", _raise_key_error)
    else:
        monkeypatch.setattr(where, name, _raise_key_error)
    monkeypatch.setattr(fuzz.runner, "MODE", "files")
    inputs = _mode_inputs(fuzz, fuzz.files.FILE_KINDS, kind, 60)
    with pytest.raises(fuzz.common.FuzzFailure, match=message):
        _feed(fuzz, inputs)


def _follow_any_link(self: Any, name: str) -> Path:
    return Path(os.path.realpath(self.path / name))


def _list_without_checks(self: Any) -> None:
    """The folder's listing, a FIFO taken as a file."""
    for entry in sorted(os.scandir(self.path), key=lambda e: e.name):
        if entry.is_symlink():
            self.files[entry.name] = _model_folder._File(entry.name, self._link(entry.name))
        elif entry.is_dir():
            self.folders.append(entry.name)
        else:
            self.files[entry.name] = _model_folder._File(entry.name, None)


def _open_blocking(path: Path, what: str) -> tuple[int, os.stat_result]:
    fd = os.open(path, os.O_RDONLY)  # waits for a writer on a FIFO
    return fd, os.fstat(fd)


def _drop_last_document(real: Callable[..., Any]) -> Callable[..., Any]:
    def wrong(array: Any, *args: Any) -> Any:
        docs = real(array, *args)
        if docs.offsets.shape[0] > 1 and docs.offsets[-1] > docs.offsets[-2]:
            return docs._replace(offsets=docs.offsets[:-1].copy())
        return docs

    return wrong


def _shrink_config_field(real: Callable[..., Any]) -> Callable[..., Any]:
    def wrong(config: Any, family: Any, table: Any, plan: Any) -> Any:
        changes = real(config, family, table, plan)
        for name, (_, new) in changes.items():
            if type(new) is int:
                config[name] = new + 1
        return changes

    return wrong


# Bugs planted in the model-folder and Arrow readers: (what, name, plant,
# the files kind whose inputs reach it, how the harness reports it)
PLANTED_READERS: dict[str, tuple[str, str, Callable[[Any], Any], str, str]] = {
    "a link out of the model folder followed": (
        "_model_folder._Folder",
        "_link",
        lambda real: _follow_any_link,
        "folder",
        "read a shard outside",
    ),
    "a FIFO in the model folder opened and waited on": (
        "_model_folder",
        "_OPEN",
        lambda real: os.O_RDONLY,
        "folder",
        "blocked on a FIFO",
    ),
    "config.json's size field wrong": (
        "_model_folder",
        "_config_changes",
        _shrink_config_field,
        "folder",
        "config.json .* expected",
    ),
    "an Arrow document dropped": (
        "_source_arrow",
        "_csr",
        _drop_last_document,
        "arrow",
        "differ from the .npy path's",
    ),
    "an Arrow input's FIFO waited on": (
        "_source_arrow",
        "_open_regular",
        lambda real: _open_blocking,
        "arrow",
        "blocked on a FIFO",
    ),
    "the Arrow pipeline raises KeyError": (
        "_chunk",
        "_chunk_stream",
        lambda real: _raise_key_error,
        "arrow",
        "raised KeyError|ended with a traceback: KeyError",
    ),
}


@pytest.mark.parametrize("case", sorted(PLANTED_READERS))
def test_files_mode_catches_a_planted_bug_in_the_new_readers(
    fuzz: ModuleType, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    where, name, plant, kind, message = PLANTED_READERS[case]
    owner: Any = {
        "_model_folder": _model_folder,
        "_model_folder._Folder": _model_folder._Folder,
        "_source_arrow": _source_arrow,
        "_chunk": _chunk,
    }[where]
    if case == "a FIFO in the model folder opened and waited on":
        monkeypatch.setattr(_model_folder._Folder, "_list", _list_without_checks)
    monkeypatch.setattr(owner, name, plant(getattr(owner, name)))
    monkeypatch.setattr(fuzz.runner, "MODE", "files")
    inputs = _mode_inputs(fuzz, fuzz.files.FILE_KINDS, kind, 400)
    with pytest.raises(fuzz.common.FuzzFailure, match=message):
        _feed(fuzz, inputs)


def test_files_mode_requires_a_valid_file_to_be_read(fuzz, monkeypatch):
    # a reader that refuses everything is caught on the inputs with no defect
    def refuse(*args: Any, **kw: Any) -> Any:
        raise ValueError("planted")

    monkeypatch.setattr(fuzz.files_headers, "chunk_file", refuse)
    monkeypatch.setattr(fuzz.runner, "MODE", "files")
    inputs = _mode_inputs(fuzz, fuzz.files.FILE_KINDS, "npy", 100)
    with pytest.raises(fuzz.common.FuzzFailure, match="refused a valid input"):
        _feed(fuzz, inputs)


@pytest.mark.parametrize("mode_name", ["race", "files"])
def test_hostile_modes_print_the_count(tmp_path, mode_name):
    lines = _run(
        "--engine",
        "plain",
        "--mode",
        mode_name,
        "--runs",
        "12",
        "--artifact-prefix",
        f"{tmp_path}/",
    )
    match = HOSTILE_SUMMARY.match(lines[-1])
    assert match is not None, lines[-1]
    assert match.group(1) == "12"
    assert match.group(2) == mode_name
    counts = [int(n) for n in re.findall(r" (\d+)(?:,|\))", match.group(3) + ")")]
    assert sum(counts) == 12
    assert list(tmp_path.iterdir()) == []


HOSTILE_SUMMARY = re.compile(
    r"^fuzz: (\d+) inputs in [0-9.]+ s, no failures \((race|files): ([^)]*)\)"
    r"(; \d+ tolerated as known bugs)?$"
)

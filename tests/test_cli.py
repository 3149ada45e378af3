"""The posembed command."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from posembed import bench, cli
from posembed.bench.cases._shared import OPTIONAL, absent
from posembed.bench.sizes import describe_reporting, free_page_reporting


def test_config_command(capsys):
    assert cli.main(["config"]) == 0
    assert "openmp" in capsys.readouterr().out


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "posembed"
    out = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=True)
    assert "bench" in out.stdout


def _keys(value):
    """Every key of a JSON document, at any depth."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v)


def test_bench_quick_prints_every_case_scaling_caches_json_and_plot(quick_bench):
    text, data = quick_bench.text, quick_bench.data
    names = [name for kernel in bench.BUILDERS for name in bench.CASE_NAMES[kernel]]
    for name in names:
        assert name in text
    assert "thread scaling" in text
    assert len(data["results"]) == len(names)
    for row in data["results"]:
        if row["not_measured"] is not None:
            # only a case that needs a package this environment lacks (the
            # DataLoader case without PyTorch, as in CI's main suite)
            missing = [name for name in OPTIONAL if importlib.util.find_spec(name) is None]
            assert row["not_measured"] in {absent(name) for name in missing}, row
            continue
        assert row["seconds"]["posembed"] > 0
        if (row["kernel"], row["case"]) not in bench.WITHOUT_REFERENCE:
            assert row["speedup"]["reference"] > 0  # every other case has a twin
        else:
            assert row["speedup"]["reference"] is None
        for other in ("numpy", "torch"):
            assert (other in row["seconds"]) == (row["speedup"][other] is not None)
        if row["roofline"]:
            assert row["roofline_fraction"] > 0
    assert data["machine"]["threads"] == 2  # the largest count runs the main table
    kernels = {row["kernel"] for row in data["scaling"]}
    # file I/O or BLAS: none; blend: a sequential draw on one thread
    unscaled = {"chunk", "convert", "merge", "similarity", "extend", "resize", "blend", "batches"}
    assert kernels == set(bench.BUILDERS) - unscaled | {"roofline"}
    for row in data["scaling"]:
        assert set(row["seconds"]) == {"1", "2"}
        assert row["speedup"]["1"] == 1.0
        assert row["speedup"]["2"] > 0
    sizes = {(row["kernel"], row["size"]) for row in data["scaling"]}
    for kernel in kernels:
        assert (kernel, "in cache") in sizes
        # the order's indices: the shuffle's arithmetic binds at any size
        assert (kernel, "in memory") in sizes or kernel == "batch_order"
    assert quick_bench.png.read_bytes().startswith(b"\x89PNG")


def test_bench_states_the_caches_and_the_sizes_it_used(quick_bench):
    caches, quick = bench.caches(), bench.sizes(quick=True)
    assert quick_bench.data["machine"]["caches"] == dataclasses.asdict(caches)
    assert quick_bench.data["machine"]["problem_sizes"] == dataclasses.asdict(quick)
    assert f"caches: {caches.describe()}" in quick_bench.text
    assert f"cache-sized problems: {quick.describe(caches.last_level_name)}" in quick_bench.text
    reporting = free_page_reporting()
    assert quick_bench.data["machine"]["memory"] == {"free_page_reporting_bytes": reporting}
    line = describe_reporting(reporting)
    if line is not None:
        assert line in quick_bench.text
    else:
        assert "memory: freed blocks" not in quick_bench.text
    # the main table's in-cache case fits the in-cache size
    rows = {(r["kernel"], r["case"]): r for r in quick_bench.data["results"]}
    assert rows["gather", "in cache, out="]["out_bytes"] <= quick.in_cache // 4


def test_bench_speaks_of_measurements_only(quick_bench):
    # goals and their bookkeeping are the developers' (bench/targets.py)
    for word in ("issue", "target"):
        assert word not in quick_bench.text.lower()
        assert not [k for k in _keys(quick_bench.data) if word in k.lower()]
        assert word not in quick_bench.json_path.read_text().lower()


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--repeat", "0"],
        ["bench", "--threads", "x"],
        ["bench", "--threads", "0,2"],
        ["bench", "--threads", ""],
        ["x"],
        ["bench", "--only", "nope"],
    ],
)
def test_bench_rejects_bad_arguments(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_bench_only_some_kernels(capsys):
    argv = ["bench", "--quick", "--repeat", "1", "--threads", "1,2", "--only", "resample_grid"]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "resample_grid" in text
    assert "gather" not in text


def test_bench_markdown_table(capsys):
    assert cli.main(["bench", "--quick", "--repeat", "1", "--markdown", "--only", "gather"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("|")]
    assert lines[0].startswith("| kernel | case |")
    assert len(lines) == 2 + len(bench.CASE_NAMES["gather"])


def test_thread_bench_suite_names_every_scaling_case():
    from bench import bench_threads

    names = [f"{c.kernel}: {c.problem} ({c.size})" for c in bench.scaling_cases(quick=True)]
    assert bench_threads._names() == names


@pytest.mark.parametrize("setting", [None, 1, 2])
def test_commands_leave_the_callers_thread_setting(tmp_path, capsys, setting):
    # chunk runs its kernels on --threads (default 1); in-process callers get
    # their own setting back, explicit or OpenMP's default
    import numpy as np

    import posembed

    np.save(tmp_path / "t.npy", np.arange(100, dtype=np.int32))
    posembed.set_num_threads(setting)
    try:
        before = posembed.config()
        assert (
            cli.main(["chunk", str(tmp_path / "t.npy"), "-o", str(tmp_path / "w"), "--size", "8"])
            == 0
        )
        after = posembed.config()
        assert after["num_threads_set"] == before["num_threads_set"] == (setting is not None)
        assert after["num_threads"] == before["num_threads"]
    finally:
        posembed.set_num_threads(None)


# -- crafted .npy files ----------------------------------------------------------------------
# `posembed plot similarity` reads its table through the checked .npy reader: a crafted
# header stops the command as its other errors do (argparse's status 2), never with a
# traceback, and never after allocating or waiting for what the header claims.


def _npy(header: str | bytes, data: bytes = b"", *, version: bytes = b"\x01\x00") -> bytes:
    text = header.encode("latin1") if isinstance(header, str) else header
    width = 2 if version == b"\x01\x00" else 4
    return b"\x93NUMPY" + version + len(text).to_bytes(width, "little") + text + data


def _dict(descr: str = "'<f4'", shape: str = "(4, 2)", order: str = "False") -> str:
    return f"{{'descr': {descr}, 'fortran_order': {order}, 'shape': {shape}, }}\n"


NOT_NPY = r"table\.npy: not a valid \.npy file: "
CRAFTED_NPY = {
    "shape (2**62,)": (_npy(_dict(shape=f"({2**62},)")), r"shape \(4611686018427387904,\) of"),
    "shape (2**62,) of bytes": (
        _npy(_dict("'|u1'", f"({2**62},)")),
        r"shape \(4611686018427387904,\) of uint8 is 2\^62 bytes or more",
    ),
    "2**40 rows, no data": (
        _npy(_dict(shape=f"({2**40}, 2)")),
        r"shape \(1099511627776, 2\) of float32 needs 8796093022208 data bytes; the file has 0",
    ),
    "a negative dimension": (_npy(_dict(shape="(-1, 2)")), r"shape \(-1, 2\) is not a tuple"),
    "a bool dimension": (_npy(_dict(shape="(True, 2)")), r"shape \(True, 2\) is not a tuple"),
    "a float dimension": (_npy(_dict(shape="(4.0, 2)")), r"shape \(4\.0, 2\) is not a tuple"),
    "objects": (_npy(_dict("'|O'")), r"dtype object holds Python objects"),
    "objects in a record": (
        _npy(_dict("[('a', '|O')]")),
        r"dtype \[\('a', 'O'\)\] holds Python objects",
    ),
    "an unknown descr": (_npy(_dict("'<q9'")), r"descr '<q9' is not a NumPy dtype"),
    "a huge header": (
        _npy(_dict() + " " * 70_000, version=b"\x02\x00"),
        r"the header is 70\d\d\d bytes; at most 10000",
    ),
    "a header past the end": (
        _npy(b"", version=b"\x02\x00")[:-4] + (2**32 - 1).to_bytes(4, "little"),
        r"the header \(4294967295 bytes\) runs past the file's 12 bytes",
    ),
    "truncated data": (
        _npy(_dict(), bytes(10)),
        r"shape \(4, 2\) of float32 needs 32 data bytes; the file has 10",
    ),
    "no magic": (b"PK\x03\x04" + bytes(60), r"it does not start with the \.npy magic string"),
    "version 9.0": (_npy(_dict(), version=b"\x09\x00"), r"format version 9\.0 is not"),
    "a header that is code": (_npy("__import__('os')"), r"the header is not a Python literal"),
    "a header that is a list": (_npy("[1, 2]"), r"the header must be a dict of 'descr'"),
    "an extra key": (
        _npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}"),
        r"the header must be a dict of 'descr', 'fortran_order' and 'shape'",
    ),
    "fortran_order 'yes'": (_npy(_dict(order="'yes'")), r"fortran_order 'yes' is not True"),
    "a deep header": (_npy("[" * 5000 + "]" * 5000), r"the header is not a Python literal"),
}


def _plot_similarity(table: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The last stderr line of a `plot similarity` stopped with status 2."""
    with pytest.raises(SystemExit) as stopped:
        cli.main(["plot", "similarity", str(table), "-o", str(table.parent / "f.png")])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith("usage: posembed plot similarity")
    lines = err.splitlines()
    assert sum(line.startswith("posembed plot similarity: error: ") for line in lines) == 1
    assert lines[-1].startswith("posembed plot similarity: error: ")
    assert not (table.parent / "f.png").exists()
    return lines[-1]


@pytest.mark.parametrize("name", list(CRAFTED_NPY))
def test_plot_similarity_refuses_a_crafted_npy_file(tmp_path, capsys, name):
    blob, text = CRAFTED_NPY[name]
    table = tmp_path / "table.npy"
    table.write_bytes(blob)
    line = _plot_similarity(table, capsys)
    assert re.search(NOT_NPY + text, line), line
    assert table.read_bytes() == blob


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_plot_similarity_refuses_a_fifo_or_a_folder_without_waiting(tmp_path, kind):
    table = tmp_path / "table.npy"
    if kind == "fifo":
        if not hasattr(os, "mkfifo"):
            # Windows has no os.mkfifo; every POSIX host (CI's included) runs this case.
            pytest.skip("no FIFOs on this platform")
        os.mkfifo(table)
    else:
        table.mkdir()
    # in a child: a read that waits for the FIFO's writer would hang this process
    done = subprocess.run(
        [sys.executable, "-m", "posembed.cli", "plot", "similarity", str(table), "-o", "f.png"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"posembed plot similarity: error: {table}: not a regular file"
    )

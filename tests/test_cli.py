"""The posembed command."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from posembed import bench, cli


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
        assert row["seconds"]["posembed"] > 0
        assert row["speedup"]["reference"] > 0  # every case has a twin
        for other in ("numpy", "torch"):
            assert (other in row["seconds"]) == (row["speedup"][other] is not None)
        if row["roofline"]:
            assert row["roofline_fraction"] > 0
    assert data["machine"]["threads"] == 2  # the largest count runs the main table
    kernels = {row["kernel"] for row in data["scaling"]}
    unscaled = {"chunk", "similarity", "extend", "resize"}  # file I/O or BLAS: no scaling rows
    assert kernels == set(bench.BUILDERS) - unscaled | {"roofline"}
    for row in data["scaling"]:
        assert set(row["seconds"]) == {"1", "2"}
        assert row["speedup"]["1"] == 1.0
        assert row["speedup"]["2"] > 0
    sizes = {(row["kernel"], row["size"]) for row in data["scaling"]}
    for kernel in kernels:
        assert (kernel, "in cache") in sizes
        assert (kernel, "in memory") in sizes
    assert quick_bench.png.read_bytes().startswith(b"\x89PNG")


def test_bench_states_the_caches_and_the_sizes_it_used(quick_bench):
    caches, quick = bench.caches(), bench.sizes(quick=True)
    assert quick_bench.data["machine"]["caches"] == dataclasses.asdict(caches)
    assert quick_bench.data["machine"]["problem_sizes"] == dataclasses.asdict(quick)
    assert f"caches: {caches.describe()}" in quick_bench.text
    assert f"cache-sized problems: {quick.describe(caches.last_level_name)}" in quick_bench.text
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

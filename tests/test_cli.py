"""The posembed command."""

from __future__ import annotations

import importlib.util
import json
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


def test_bench_quick_prints_every_case_scaling_targets_json_and_plot(tmp_path, capsys):
    path = tmp_path / "bench.json"
    png = tmp_path / "bench.png"
    argv = ["bench", "--quick", "--repeat", "1", "--threads", "2,1", "--json", str(path)]
    assert cli.main([*argv, "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    cases = bench.all_cases(quick=True)
    for case in cases:
        assert case.name in text
    assert "thread scaling" in text
    assert "speed targets:" in text
    data = json.loads(path.read_text())
    assert len(data["results"]) == len(cases)
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
    # every target of the issues whose case ran is judged, and the scaling ones too
    judged = {(t["kernel"], t["case"], t["measure"]) for t in data["targets"]}
    has_torch = importlib.util.find_spec("torch") is not None
    for t in bench.TARGETS:
        if t.measure != "torch" or has_torch:  # a PyTorch ratio needs PyTorch
            assert (t.kernel, t.case, t.measure) in judged
    assert any(t["measure"].startswith("speed-up") for t in data["targets"])
    assert png.read_bytes().startswith(b"\x89PNG")


def test_targets_are_judged_on_the_named_measure():
    r = bench.Result("gather", "out= given", "", 100, "write warm", {"posembed": 1.0})
    r.seconds.update(numpy=6.0, torch=1.0, roofline=0.95)
    mine = [t for t in bench.TARGETS if (t.kernel, t.case) == ("gather", "out= given")]
    found = {t.measure: bench.target_value(t, [r]) for t in mine}
    assert found == {"roofline": 0.95, "numpy": 6.0, "torch": 1.0}
    text = bench.format_targets([r])
    assert "speed targets: 2 of 3 met" in text
    assert "MISSED  issue 2  gather: out= given: 1.00x" in text


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

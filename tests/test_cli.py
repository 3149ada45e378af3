"""The posembed command."""

from __future__ import annotations

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


def test_bench_prints_every_case_and_writes_json(tmp_path, capsys):
    path = tmp_path / "bench.json"
    assert cli.main(["bench", "--repeat", "1", "--json", str(path)]) == 0
    text = capsys.readouterr().out
    cases = bench.all_cases()
    for case in cases:
        assert case.name in text
    data = json.loads(path.read_text())
    assert len(data["results"]) == len(cases)
    for row in data["results"]:
        assert row["seconds"]["posembed"] > 0
        assert row["speedup"]["reference"] > 0  # every case has a twin
        for other in ("numpy", "torch"):
            assert (other in row["seconds"]) == (row["speedup"][other] is not None)
        if row["roofline"]:
            assert row["roofline_fraction"] > 0
    assert data["machine"]["threads"] >= 1


@pytest.mark.parametrize(
    "argv",
    [["bench", "--repeat", "0"], ["bench", "--threads", "x"], ["x"], ["bench", "--only", "nope"]],
)
def test_bench_rejects_bad_arguments(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_bench_only_some_kernels(capsys):
    assert cli.main(["bench", "--repeat", "1", "--only", "resample_grid"]) == 0
    text = capsys.readouterr().out
    assert "resample_grid" in text
    assert "gather" not in text


def test_bench_markdown_table(capsys):
    assert cli.main(["bench", "--repeat", "1", "--markdown", "--only", "gather"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("|")]
    assert lines[0].startswith("| kernel | case |")
    assert len(lines) == 2 + len(bench.CASE_NAMES["gather"])

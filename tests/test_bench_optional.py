"""``posembed bench`` without the optional packages: every case measures or
says why not, and the run goes on to the end (a plain ``pip install .`` has
none of them)."""

from __future__ import annotations

import errno
import importlib.util
import json
import re
import subprocess
import sys
import textwrap
from importlib import resources

import pytest

from posembed import bench
from posembed.bench import timing
from posembed.bench.case import Case
from posembed.bench.cases._shared import OPTIONAL, absent

# Run in a fresh interpreter where the finders see nothing of the packages
# named in argv[1]: ``import name`` raises ModuleNotFoundError and
# ``importlib.util.find_spec(name)`` is None, as on a machine without them,
# whatever this environment has installed.
_PRELUDE = """
import json, sys
BLOCKED = frozenset(json.loads(sys.argv[1]))

class Hidden:
    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            return None
        return self.finder.find_spec(name, path, target)

    def __getattr__(self, attr):
        return getattr(self.finder, attr)

sys.meta_path[:] = [Hidden(f) if hasattr(f, "find_spec") else f for f in sys.meta_path]
"""


def _run(blocked: list[str], body: str, *args: str) -> subprocess.CompletedProcess[str]:
    script = _PRELUDE + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script, json.dumps(blocked), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def _kernels_naming(module: str) -> list[str]:
    """The kernels whose case module names ``module`` (PyTorch through
    ``optional_torch``): the ones its absence can change."""
    cases = resources.files("posembed.bench.cases")
    return [k for k in bench.BUILDERS if re.search(module, (cases / f"{k}.py").read_text())]


def _check_rows(rows: list[dict], kernels: list[str], blocked: list[str]) -> None:
    """Every case of ``kernels`` is there once, and either measured posembed or
    says why not; a reason names one of the blocked packages, or one this
    environment lacks (CI's main suite runs without PyTorch)."""
    want = [(k, name) for k in kernels for name in bench.CASE_NAMES[k]]
    assert [(r["kernel"], r["case"]) for r in rows] == want
    reasons = {absent(name) for name in blocked}
    reasons |= {absent(name) for name in OPTIONAL if importlib.util.find_spec(name) is None}
    for r in rows:
        if r["not_measured"] is None:
            assert r["seconds"]["posembed"] > 0, r
        else:
            assert r["seconds"] == {}, r
            assert r["not_measured"] in reasons, r
        # a blocked peer's column is empty
        if "torch" in blocked:
            assert "torch" not in r["seconds"], r


def test_the_whole_run_without_any_optional_package(tmp_path):
    """The README's main command as a plain install runs it, with every
    option: the run ends with exit 0, no traceback, the unmeasurable cases in
    the table and the JSON with their reason, the missing packages named."""
    blocked = sorted(OPTIONAL)
    out_json, png = tmp_path / "bench.json", tmp_path / "bench.png"
    body = """
    from posembed import cli
    argv = ["bench", "--quick", "--repeat", "1", "--threads", "1,2", "--markdown"]
    sys.exit(cli.main([*argv, "--json", sys.argv[2], "--plot", sys.argv[3]]))
    """
    done = _run(blocked, body, str(out_json), str(png))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    data = json.loads(out_json.read_text())
    _check_rows(data["results"], list(bench.BUILDERS), blocked)
    unmeasured = [r for r in data["results"] if r["not_measured"]]
    # the cases that cannot run without pyarrow (Parquet, Arrow columns) or
    # PyTorch (its DataLoader)
    assert {(r["kernel"], r["case"]) for r in unmeasured} == {
        ("batches", "through a DataLoader"),
        ("windows", "Arrow column"),
        ("windows", "group_texts"),
        ("chunk", "Parquet file"),
        ("chunk", "Parquet, one row group"),
        ("convert", "Parquet file"),
    }
    for r in unmeasured:
        assert f"| {r['kernel']} | {r['case']} | not measured: {r['not_measured']} |" in (
            done.stdout
        )
    labels = [label for _, label, _ in OPTIONAL.values()]
    assert data["machine"]["optional_packages"] == dict.fromkeys(labels)
    footer = next(line for line in done.stdout.splitlines() if line.startswith("not installed"))
    for _, label, how in OPTIONAL.values():
        assert f"{label} ({how})" in footer
    assert data["scaling"]  # --threads 1,2 ran too
    assert png.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("module", sorted(OPTIONAL))
def test_each_optional_package_missing_alone(module, tmp_path):
    """One package missing, the others there (as with one extra installed):
    each case of the kernels that name it measures or names that package."""
    kernels = _kernels_naming(module)
    assert kernels, f"no case names {module}"
    body = """
    from pathlib import Path
    from posembed.bench import run, to_dict
    results = run(quick=True, repeat=1, kernels=sys.argv[2].split(","))
    Path(sys.argv[3]).write_text(json.dumps(to_dict(results, {})["results"]))
    """
    out = tmp_path / "results.json"
    done = _run([module], body, ",".join(kernels), str(out))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    _check_rows(json.loads(out.read_text()), kernels, [module])


def _case(impl) -> Case:
    return Case("chunk", "token file", "a file", 8, {"posembed": impl, "numpy": lambda: None})


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), "no room on disk"),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), "no room on disk"),
        (MemoryError(), "not enough memory"),
    ],
)
def test_a_case_that_runs_out_of_room_is_not_measured(exc, reason):
    def full() -> None:
        raise exc

    result = timing.measure(_case(full), 1, 0, 0)
    assert result.seconds == {}
    assert result.not_measured is not None
    assert result.not_measured.startswith(reason)


def test_building_out_of_room_reports_each_case_of_the_kernel(monkeypatch):
    def full(quick: bool) -> list[Case]:
        raise OSError(errno.ENOSPC, "No space left on device", "/tmp/posembed-bench-x")

    monkeypatch.setitem(bench.BUILDERS, "chunk", full)
    results = timing.run(quick=True, repeat=1, kernels=["chunk"])
    assert [r.name for r in results] == list(bench.CASE_NAMES["chunk"])
    for r in results:
        assert r.seconds == {}
        assert r.not_measured is not None
        assert r.not_measured.startswith("no room on disk")
        assert "/tmp/posembed-bench-x" in r.not_measured
    text = bench.format_results(results)
    assert text.count("not measured: no room on disk") == len(results)


@pytest.mark.parametrize(
    "exc",
    [OSError(errno.EACCES, "Permission denied"), ValueError("a bug"), FileNotFoundError("gone")],
)
def test_other_failures_are_not_hidden(exc):
    """Only the machine's room makes a case unmeasured: any other error is a
    failure to see, not a row to skip."""

    def broken() -> None:
        raise exc

    with pytest.raises(type(exc)):
        timing.measure(_case(broken), 1, 0, 0)

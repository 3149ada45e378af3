"""The developers' speed targets (bench/targets.py), judged on `posembed bench --json`."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from bench import targets

ROOT = Path(__file__).resolve().parents[1]


def result(kernel, case, **seconds):
    """A --json results row from the implementations' seconds."""
    ours = seconds["posembed"]
    return {
        "kernel": kernel,
        "case": case,
        "in_bytes": 0,
        "seconds": seconds,
        "speedup": {
            c: seconds[c] / ours if c in seconds else None for c in ("reference", "numpy", "torch")
        },
        "roofline_fraction": seconds["roofline"] / ours if "roofline" in seconds else None,
    }


def scaling(kernel, problem, size, speedup):
    return {
        "kernel": kernel,
        "problem": problem,
        "size": size,
        "bytes": 1,
        "seconds": {"1": 1.0, "2": 1.0 / speedup},
        "speedup": {"1": 1.0, "2": speedup},
    }


def run_tool(tmp_path, run):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    return subprocess.run(
        [sys.executable, "-m", "bench.targets", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_targets_are_judged_on_the_named_measure(tmp_path):
    row = result("gather", "out= given", posembed=1.0, numpy=6.0, torch=1.0, roofline=0.95)
    mine = [t for t in targets.TARGETS if (t.kernel, t.case) == ("gather", "out= given")]
    assert {t.measure: targets._value(t, row) for t in mine} == {
        "roofline": 0.95,
        "numpy": 6.0,
        "torch": 1.0,
    }
    done = run_tool(tmp_path, {"results": [row], "scaling": []})
    assert done.returncode == 0, done.stderr  # a missed target never fails the run
    lines = done.stdout.splitlines()
    assert lines[0] == "speed targets: 2 of 3 measured met"
    assert (
        "  met     gather: out= given: roofline: 0.95x (out= at >= 0.9x the warm write roofline)"
        in lines
    )
    assert "  met     gather: out= given: numpy: 6.00x (out= >= 5x numpy.take)" in lines
    assert (
        "  MISSED  gather: out= given: torch: 1.00x (out= >= 1.25x torch.index_select(out=))"
        in lines
    )
    # the others are listed as not measured, never as met or missed
    assert sum(ln.startswith("  n/a") for ln in lines) == len(targets.TARGETS) - 3 + 1
    assert "  n/a     thread scaling: (not in this run: posembed bench --threads 1,2)" in lines
    assert "issue" not in done.stdout


def test_input_throughput_and_thread_scaling(tmp_path):
    chunk = result("chunk", "token file", posembed=0.5)
    chunk["in_bytes"] = 10**9
    rows = [
        scaling("roofline", "copy warm", "in cache", 1.0),  # a ceiling: never judged
        scaling("gather", "out= given", "in cache", 1.8),
        scaling("gather", "out= given", "in memory", 1.0),  # copy-bound in memory: not judged
        scaling("embed", "dropout 0.1", "in memory", 1.2),
    ]
    done = run_tool(tmp_path, {"results": [chunk], "scaling": rows})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "speed targets: 2 of 3 measured met"
    assert "  met     chunk: token file: input GB/s: 2.00 GB/s (>= 1 GB/s of input tokens)" in lines
    threads = [ln for ln in lines if ln.endswith("threads (>= 1.7x)")]
    assert threads == [
        "  met     gather: out= given (in cache): threads: 1.80x from 1 to 2 threads (>= 1.7x)",
        "  MISSED  embed: dropout 0.1 (in memory): threads: 1.20x from 1 to 2 threads (>= 1.7x)",
    ]


def test_a_latency_is_judged_in_calls_per_second(tmp_path):
    rows = [
        result("batch_order", "resume", posembed=0.0005, reference=0.001),
        result("batch_order", "micro-batch indices", posembed=1.0, reference=2.0),
    ]
    done = run_tool(tmp_path, {"results": rows, "scaling": []})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert (
        "  met     batch_order: resume: calls/s: 2000.00 calls/s "
        "(resume at sample 10^9 in under 1 ms)" in lines
    )
    assert (
        "  MISSED  batch_order: micro-batch indices: reference: 2.00x (>= 3x its NumPy twin)"
        in lines
    )


def test_retired_peer_targets_are_gone():
    judged = {(t.kernel, t.case, t.measure) for t in targets.TARGETS}
    assert ("interpolate", "fresh output", "torch") not in judged
    assert ("windows", "fresh output", "numpy") not in judged
    # the fresh outputs' roofline targets stand
    assert ("interpolate", "fresh output", "roofline") in judged
    assert ("windows", "fresh output", "roofline") in judged


def test_a_file_that_is_not_a_run_is_an_error(tmp_path):
    done = run_tool(tmp_path, {"figures": []})
    assert done.returncode == 2
    assert "cannot judge" in done.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "bench.targets", str(tmp_path / "none.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 2


def test_every_target_is_judged_on_a_real_run(quick_bench):
    done = subprocess.run(
        [sys.executable, "-m", "bench.targets", str(quick_bench.json_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    judged = {(j.name, j.met is not None) for j in targets.judge(quick_bench.data)}
    has_torch = importlib.util.find_spec("torch") is not None
    has_megatron = importlib.util.find_spec("megatron") is not None
    has_trl = importlib.util.find_spec("trl") is not None
    threads = quick_bench.data["machine"]["threads"]
    for t in targets.TARGETS:
        name = f"{t.kernel}: {t.case}: {t.measure}"
        if t.threads is not None:
            name += f" ({t.threads} thread{'s' if t.threads > 1 else ''})"
            if t.threads != threads:  # judged on runs with that many threads only
                assert (name, False) in judged
                continue
        if t.measure == "torch" and not has_torch:
            continue  # a PyTorch ratio needs PyTorch
        megatrons = {"samples", "gpt_batch", "blend", "batches"}  # numpy: megatron-core
        if t.kernel in megatrons and t.measure == "numpy" and not has_megatron:
            continue
        if (t.kernel, t.case) == ("pack", "plan vs TRL") and not has_trl:
            continue  # that case's comparison column is TRL
        assert (name, True) in judged
        assert f"{name}: " in done.stdout
    assert any(name.endswith(": threads") for name, _ in judged)

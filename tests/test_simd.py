"""Run-time SIMD dispatch: every level the CPU offers gives the same bytes.

Each level runs in its own process (POSEMBED_SIMD is read once, at import).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import posembed
from posembed import reference

from . import simd_probe
from .conftest import SANITIZED

ROOT = Path(__file__).resolve().parent.parent
LEVELS = posembed.config()["simd_levels"]
ALL_LEVELS = ("baseline", "avx2", "avx512")


def run_python(code: list[str], level: str | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("POSEMBED_SIMD", None)
    if level is not None:
        env["POSEMBED_SIMD"] = level
    return subprocess.run(
        [sys.executable, *code], env=env, cwd=ROOT, capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, np.ndarray]]:
    found = {}
    for level in LEVELS:
        path = tmp_path_factory.mktemp("simd") / f"{level}.npz"
        done = run_python(["-m", "tests.simd_probe", str(path)], level)
        assert done.returncode == 0, done.stderr
        with np.load(path) as data:
            found[level] = {k: data[k] for k in data.files}
    return found


def test_levels_are_those_the_cpu_offers():
    facts = posembed.config()
    assert list(ALL_LEVELS[: ALL_LEVELS.index(facts["cpu_simd"]) + 1]) == LEVELS
    assert facts["simd"] in LEVELS
    if "POSEMBED_SIMD" not in os.environ:
        assert facts["simd"] == facts["cpu_simd"]  # the best level by default


def test_every_level_gives_the_same_bytes(probes):
    names = set(probes[LEVELS[0]])
    for level in LEVELS:
        assert str(probes[level]["simd"]) == level
        assert set(probes[level]) == names
    assert len(names) > 400
    for name in sorted(names - {"simd"}):
        first = probes[LEVELS[0]][name]
        for level in LEVELS[1:]:
            assert first.tobytes() == probes[level][name].tobytes(), f"{name}: {level}"


def test_every_level_matches_the_twins(probes):
    twins = {
        name: np.ascontiguousarray(call()) for name, call in simd_probe.cases(reference).items()
    }
    for level in LEVELS:
        for name, want in twins.items():
            for suffix in ("t1-s0", "t1-s1", "t2-s0", "t2-s1"):
                got = probes[level][f"{name}-{suffix}"]
                assert got.tobytes() == want.tobytes(), f"{name}-{suffix} at {level}"


def test_an_unknown_level_stops_the_import():
    done = run_python(["-c", "import posembed"], "native")
    assert done.returncode != 0
    assert "ImportError: POSEMBED_SIMD=native is not a SIMD level" in done.stderr
    assert "baseline, avx2 or avx512" in done.stderr


def test_a_level_the_cpu_lacks_stops_the_import():
    missing = [level for level in ALL_LEVELS if level not in LEVELS]
    if not missing:
        # An AVX-512 CPU has no level left to refuse here; the emulated old
        # CPU below (test_a_cpu_without_avx_refuses_avx2) checks the same
        # refusal on every x86-64 machine with QEMU, which CI requires.
        pytest.skip("this CPU runs every level")
    done = run_python(["-c", "import posembed"], missing[0])
    assert done.returncode != 0
    assert f"ImportError: POSEMBED_SIMD={missing[0]} but this CPU" in done.stderr
    assert f"at most {LEVELS[-1]}" in done.stderr


@pytest.mark.parametrize("level", LEVELS)
def test_forced_level_is_reported(level):
    code = "import posembed; c = posembed.config(); print(c['simd'], c['dropout_rng'])"
    done = run_python(["-c", code], level)
    assert done.returncode == 0, done.stderr
    simd, rng_impl = done.stdout.splitlines()[-1].split()
    assert simd == level
    # The AES instructions are not in the x86-64 baseline.
    assert (rng_impl == "software") == (level == "baseline")


def test_show_config_names_the_level():
    import io

    text = io.StringIO()
    posembed.show_config(text)
    assert re.search(r"^simd\s+: " + posembed.config()["simd"] + "$", text.getvalue(), re.M)


QEMU = shutil.which("qemu-x86_64")
OLD_CPU = "Nehalem"  # x86-64 with SSE4.2 and no AVX: QEMU raises SIGILL on any AVX instruction


def on_old_cpu(code: list[str], level: str | None) -> subprocess.CompletedProcess[str]:
    if QEMU is None or posembed.config()["machine"] != "x86_64":
        if os.environ.get("POSEMBED_REQUIRE_QEMU") == "1":
            pytest.fail("POSEMBED_REQUIRE_QEMU=1 but qemu-x86_64 is not installed")
        # A developer machine may lack the emulator (or not be x86-64, where
        # there is no AVX to leak); .ci/run installs it and sets
        # POSEMBED_REQUIRE_QEMU=1, so in CI this fails instead of skipping.
        pytest.skip("needs qemu-x86_64 (Debian's qemu-user) on an x86-64 machine")
    if SANITIZED:
        # ASan's runtime reserves terabytes of shadow address space, which QEMU's
        # user mode cannot give the emulated process (it is killed); the normal
        # CI run executes this test with the emulator required.
        pytest.skip("the emulated CPU cannot run an AddressSanitizer build")
    return subprocess.run(
        [QEMU, "-cpu", OLD_CPU, sys.executable, *code],
        env={k: v for k, v in os.environ.items() if k != "POSEMBED_SIMD"}
        | ({} if level is None else {"POSEMBED_SIMD": level}),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_cpu_without_avx_runs_every_kernel(probes, tmp_path):
    # The same module, on an emulated CPU without AVX: the baseline level is
    # chosen, no wider instruction runs anywhere (QEMU would stop the process
    # with SIGILL), and the bytes equal those of every level on this CPU.
    path = tmp_path / "old.npz"
    done = on_old_cpu(["-m", "tests.simd_probe", str(path)], None)
    assert done.returncode == 0, done.stderr[-2000:]
    with np.load(path) as data:
        assert str(data["simd"]) == "baseline"
        for name, want in probes[LEVELS[-1]].items():
            if name != "simd":
                assert data[name].tobytes() == want.tobytes(), name


def test_a_cpu_without_avx_refuses_avx2():
    done = on_old_cpu(["-c", "import posembed"], "avx2")
    assert done.returncode != 0
    assert "POSEMBED_SIMD=avx2 but this CPU (or build) supports at most baseline" in done.stderr

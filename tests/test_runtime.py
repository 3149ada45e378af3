"""Thread control and build facts."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

import posembed


def test_set_and_get_num_threads(restore_threads):
    posembed.set_num_threads(1)
    assert posembed.get_num_threads() == 1
    posembed.set_num_threads(3)
    assert posembed.get_num_threads() == 3
    assert posembed.config()["num_threads"] == 3
    posembed.set_num_threads(None)
    assert posembed.get_num_threads() == posembed.config()["default_num_threads"]


@pytest.mark.parametrize(
    ("n", "exc"),
    [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError), ("2", TypeError)],
)
def test_invalid_thread_counts(restore_threads, n, exc):
    with pytest.raises(exc, match="n must be"):
        posembed.set_num_threads(n)


def test_omp_num_threads_sets_the_default():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    code = "import posembed; print(posembed.get_num_threads())"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split()[-1] == "1"  # an editable install may print a rebuild line first


def test_config_reports_the_build():
    facts = posembed.config()
    assert facts["version"] == posembed.__version__
    assert facts["openmp"] is True  # the shipped build always has OpenMP
    # Whatever this host offers: every level it lists is one the build knows,
    # lowest first, ending at the CPU's best; the one running is among them and,
    # unless POSEMBED_SIMD chose another, the best.
    levels = facts["simd_levels"]
    assert levels[0] == "baseline"
    assert levels == [lv for lv in ("baseline", "avx2", "avx512") if lv in levels]
    assert facts["cpu_simd"] == levels[-1]
    assert facts["simd"] in levels
    assert facts["simd"] == os.environ.get("POSEMBED_SIMD", facts["cpu_simd"])
    assert facts["dropout_rng"] in ("vaes", "aesni", "software")
    assert facts["compiler"]
    assert facts["num_threads"] >= 1
    buf = io.StringIO()
    posembed.show_config(file=buf)
    text = buf.getvalue()
    for key in ("version", "compiler", "openmp", "simd", "num_threads"):
        assert key in text

"""The benchmark behind ``posembed bench`` and the ``bench/`` pytest-benchmark suite.

Every figure is a ratio measured in one run: posembed against its NumPy
reference twin, plain NumPy, PyTorch (when installed) and the memory
roofline of the same output bytes on the same threads
(:mod:`posembed.bench.rooflines`). "In cache" and "in memory" problems are
sized from this machine's caches (:mod:`posembed.bench.sizes`).

Layout: ``cases/`` holds each kernel's cases, ``timing`` times them,
``scaling`` times posembed alone at several thread counts, ``report`` prints
and serialises the results.
"""

from __future__ import annotations

from posembed.bench.case import COLUMNS, Case, Result
from posembed.bench.cases import BUILDERS, CASE_NAMES, WITHOUT_REFERENCE, all_cases, cases_of
from posembed.bench.report import describe, format_results, format_scaling, machine, to_dict
from posembed.bench.rooflines import roofline
from posembed.bench.scaling import (
    SCALING_NAMES,
    ScalingCase,
    ScalingResult,
    run_scaling,
    scaling_cases,
)
from posembed.bench.sizes import Caches, Sizes, caches, sizes
from posembed.bench.timing import measure, run

__all__ = [
    "BUILDERS",
    "CASE_NAMES",
    "COLUMNS",
    "SCALING_NAMES",
    "WITHOUT_REFERENCE",
    "Caches",
    "Case",
    "Result",
    "ScalingCase",
    "ScalingResult",
    "Sizes",
    "all_cases",
    "caches",
    "cases_of",
    "describe",
    "format_results",
    "format_scaling",
    "machine",
    "measure",
    "roofline",
    "run",
    "run_scaling",
    "scaling_cases",
    "sizes",
    "to_dict",
]

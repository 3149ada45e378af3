"""The bad-input matrix for blending_indices and exhaustive_blending_indices.

The cases, the checks they go through and the census that holds the families
together: see ``tests/badinput_harness.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from .badinput_harness import ALL_OUT, RAGGED, Case, Family, function

WEIGHTS = np.array([0.25, 0.5, 0.25])
SIZES = np.array([3, 0, 5])

FAMILY = Family(
    targets={
        "blending_indices": function(
            "blending_indices", lambda tmp: {"weights": WEIGHTS.copy(), "size": 10}
        ),
        "exhaustive_blending_indices": function(
            "exhaustive_blending_indices", lambda tmp: {"sizes": SIZES.copy()}
        ),
    },
    not_applicable={
        "blending_indices": {
            **ALL_OUT,
            "shape": "one array and a count: nothing to fit together",
        },
        "exhaustive_blending_indices": {
            **ALL_OUT,
            "nan": "sizes are integers: a NaN is a float, refused as a dtype (dtype)",
            "shape": "one array: nothing to fit together",
        },
    },
)

# ---- blending_indices -------------------------------------------------------------------
add = FAMILY.cases_for("blending_indices")
add("weights", "type", RAGGED, TypeError, r"weights must be an array NumPy can read")
add("weights", "type", ["0.5"], TypeError, r"weights must be floats; got dtype <U3")
add("size", "type", "10", TypeError, r"size must be an integer >= 0; got str '10'")
add("size", "type", True, TypeError, r"size must be an integer >= 0; got bool True")
add("weights", "dtype", np.array([1, 1]), TypeError, r"weights must be floats; got dtype int64")
add("weights", "dtype", WEIGHTS > 0, TypeError, r"weights must be floats; got dtype bool")
add("size", "dtype", 10.0, TypeError, r"size must be an integer >= 0; got float 10\.0")
add("weights", "rank", WEIGHTS[None], ValueError, r"weights must be 1-D .*got shape \(1, 3\)")
add("weights", "rank", np.array(1.0), ValueError, r"weights must be 1-D .*got shape \(\)")
add("weights", "empty", np.zeros(0), ValueError, r"weights must hold at least one dataset")
nan_weights = np.array([0.5, np.nan, 0.5])
add("weights", "nan", nan_weights, ValueError, r"weights must be finite and > 0; got weights\[1\]")
inf_weights = np.array([0.5, np.inf])
add("weights", "nan", inf_weights, ValueError, r"weights must be finite .*weights\[1\] = inf")
add("size", "nan", float("nan"), TypeError, r"size must be an integer >= 0; got float nan")
add("size", "size", -1, ValueError, r"size must be an integer >= 0; got -1")
add("size", "size", 2**53, ValueError, r"size must be below 2\^53")
many = np.full(32767, 1 / 32767)
add("weights", "size", many, ValueError, r"weights holds 32767 datasets; a blend holds at most")
zero = np.array([1.0, 0.0])
add("weights", "range", zero, ValueError, r"weights must be finite and > 0; got weights\[1\] = 0")
negative = np.array([1.5, -0.5])
add("weights", "range", negative, ValueError, r"weights\[1\] = -0\.5")
add("weights", "range", WEIGHTS * 2, ValueError, r"weights must sum to 1 .*got a sum of 2\.0")

# ---- exhaustive_blending_indices --------------------------------------------------------
add = FAMILY.cases_for("exhaustive_blending_indices")
add("sizes", "type", RAGGED, TypeError, r"sizes must be an array NumPy can read")
add("sizes", "type", ["3"], TypeError, r"sizes must be integers; got dtype <U1")
add("sizes", "dtype", SIZES * 1.0, TypeError, r"sizes must be integers; got dtype float64")
add("sizes", "dtype", SIZES > 0, TypeError, r"sizes must be integers; got dtype bool")
add("sizes", "rank", SIZES[None], ValueError, r"sizes must be 1-D .*got shape \(1, 3\)")
add("sizes", "empty", np.zeros(0, np.int64), ValueError, r"sizes must hold at least one dataset")
add("sizes", "size", np.ones(32767, np.int64), ValueError, r"sizes holds 32767 datasets")
big = np.array([2**62, 2**62], dtype=np.int64)
add("sizes", "size", big, ValueError, r"sizes must sum to less than 2\^53; got a sum of")
huge = np.array([2**64 - 1], dtype=np.uint64)
add("sizes", "size", huge, ValueError, r"sizes must sum to less than 2\^53; got sizes\[0\]")
add("sizes", "range", np.array([3, -1]), ValueError, r"sizes must be >= 0; got sizes\[1\] = -1")
del add

# == the tests ==========================================================================


@pytest.mark.parametrize("case", FAMILY.cases, ids=FAMILY.case_id)
def test_bad_input_is_refused_and_nothing_is_modified(case: Case, tmp_path: Path):
    FAMILY.check_refused(case, tmp_path)


@pytest.mark.parametrize("case", FAMILY.twin_cases(), ids=FAMILY.case_id)
def test_the_twin_raises_the_same_exception_type(case: Case, tmp_path: Path):
    FAMILY.check_twin(case, tmp_path)


@pytest.mark.parametrize("name", list(FAMILY.targets))
def test_valid_arguments_succeed_and_modify_no_input(name: str, tmp_path: Path):
    FAMILY.check_valid(name, tmp_path)
